#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (frame equality with FFmpeg's CLI over four codecs; src/data/video.c runs under ASan on the video trees of test_dataset.sh and test_dataset_eval.sh and in fuzz_video)
# tier: full — LeRobot video cameras (src/data/video.c through FFmpeg's libraries, src/data/lerobot.c's
# mact_ld_episode_video), on trees written by `mact synth-dataset --video C` (src/data/video_write.c: every
# frame carries camera, episode and frame number in black/white cells with a CRC-8). For each codec (AV1 by
# libsvtav1 g=2 as LeRobot writes it; H.264 with 2 B-frames; HEVC with B-frames; MPEG-4 Part 2 with B-frames)
# and each layout (v2.1: one mp4 per episode and camera; v3.0: camera c concatenates 2 + c episodes per file):
#   vid_synth_deterministic_C_v30   the same seed writes the same bytes (mp4s included; H.264's mp4s: the same
#                                   frames by dataset info, libx264 is not byte-deterministic)
#   vid_info_C_V      `mact dataset info`: the container's codec, size, frame count, no problems
#   vid_seq_C_V       every frame of every episode of both cameras read in order: the right number
#   vid_random_C_V    400 (episode, frame) picks in random order per camera (seeks back and forward)
#   vid_ffmpeg_C_V    `mact dataset frame` PNGs against the ffmpeg CLI's decode of the same frame
#                     (select=eq(n,K), -sws_flags bilinear, rgb24): max |diff| printed beside the threshold, 0
#                     (same libavcodec, same swscale flags and colour details, so the bytes are equal)
#   vid_h264_bframes  the H.264 files really have B-frames (pts order != dts order)
#   vid_start_time    times count from the stream's start_time (an mp4 remuxed with a 1.5 s offset)
#   vid_mkv_counted   a container without nb_frames (Matroska): the frames counted, its 1 ms time base
#   vid_bad_*         a missing video, a truncated mp4, garbage bytes, a zero-length file, a time past the end,
#                     a video shorter than its episode (v2.1, v3.0), a codec / template disagreeing with
#                     info.json: each a clear error or listed problem naming the file / episode / camera, no crash
# SEED=... replays (printed); VIDEO_CODECS="h264 av1" narrows the codecs (the container and bad-input checks
# use the H.264 files when they are there, else another v2.1 tree).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}; VT=${BUILD:-build}/tests/video_tool
T=$(mktemp -d "${MACT_TMP:-/tmp}/video.XXXXXX")
trap 'rm -rf "$T"' EXIT
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; [ -n "${3:-}" ] && sed 's/^/    /' "$3" | tail -20; }
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || { fail vid_setup "the ffmpeg CLI is missing (scripts/setup.sh --test)"; exit 1; }
[ -x "$VT" ] || { fail vid_setup "$VT missing (run make)"; exit 1; }
CAMS="observation.images.top observation.images.wrist"
# under ASan: libx265's own leak is not ours (tests/lsan_ffmpeg.supp says which)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/tests/lsan_ffmpeg.supp"
# a crash (signal) or a sanitizer report is never a clear error
no_crash() { [ "$1" -lt 128 ] && ! grep -q "Sanitizer\|runtime error" "$2"; }

for c in ${VIDEO_CODECS:-av1 h264 hevc mpeg4}; do
    for v in v2.1 v3.0; do
        n="${c}_${v/./}"; d="$T/$n"
        if ! $MACT synth-dataset "$d" --version $v --video $c --episodes 5 --len 12:45 --seed $SEED >"$T/$n.gen" 2>&1; then
            fail "vid_synth_$n" "mact synth-dataset --video $c failed" "$T/$n.gen"; continue
        fi
        if [ $v = v3.0 ]; then  # the encoders run single-threaded: same seed, same bytes
            # libx264 does not always write the same bytes for the same frames (one short file of a v3.0 tree
            # differed in ~3% of its bytes in some runs, never in a plain loop; docs/bugs.md): for H.264 the mp4s
            # must hold the same frames by count, codec and size (dataset info), every other file the same bytes
            ex=; [ $c = h264 ] && ex=--exclude=*.mp4
            if ! $MACT synth-dataset "$d.again" --version $v --video $c --episodes 5 --len 12:45 --seed $SEED >"$T/$n.again.gen" 2>&1; then
                fail "vid_synth_deterministic_$n" "the second mact synth-dataset failed" "$T/$n.again.gen"
            elif diff -rq $ex "$d" "$d.again" >"$T/$n.diff" 2>&1 &&
                 cmp -s <($MACT dataset info "$d" 2>&1 | sed "s|$d|D|g") <($MACT dataset info "$d.again" 2>&1 | sed "s|$d.again|D|g"); then
                pass "vid_synth_deterministic_$n${ex:+ (mp4 bytes not compared: libx264)}"
            else
                for f in $(diff -rq "$d" "$d.again" 2>/dev/null | awk '/^Files/ {print $2}'); do
                    g="$d.again${f#$d}"
                    echo "    $(cmp -l "$f" "$g" | wc -l) bytes differ of $(stat -c %s "$f")/$(stat -c %s "$g"); decoded frames $(cmp -s <(ffmpeg -v error -i "$f" -f framemd5 -) <(ffmpeg -v error -i "$g" -f framemd5 -) && echo equal || echo DIFFER)" >>"$T/$n.diff"
                done
                fail "vid_synth_deterministic_$n" "same seed, different files (or dataset info differs)" "$T/$n.diff"
            fi
            rm -rf "$d.again"
        fi
        frames=$($PY -c "import json;print(json.load(open('$d/meta/info.json'))['total_frames'])")
        files_front=$([ $v = v2.1 ] && echo 5 || echo 3); files_wrist=$([ $v = v2.1 ] && echo 5 || echo 2)
        $MACT dataset info "$d" >"$T/$n.info" 2>&1; rc=$?
        [ $rc = 0 ] && grep -q "problems: 0" "$T/$n.info" &&
            grep -qF "observation.images.top: video $c, 64x64, $frames frames in $files_front files" "$T/$n.info" &&
            grep -qF "observation.images.wrist: video $c, 64x64, $frames frames in $files_wrist files" "$T/$n.info" &&
            pass "vid_info_$n" || fail "vid_info_$n" "rc $rc" "$T/$n.info"
        ok=1; msg=
        for cam in $CAMS; do
            $VT seq "$d" $cam >"$T/$n.seq" 2>&1 || { ok=0; fail "vid_seq_$n" "$cam" "$T/$n.seq"; break; }
            msg="$msg $cam: $(cat "$T/$n.seq")"
        done
        [ $ok = 1 ] && pass "vid_seq_$n ($msg)"
        ok=1; msg=
        for cam in $CAMS; do
            $VT random "$d" $cam $SEED 400 >"$T/$n.rnd" 2>&1 || { ok=0; fail "vid_random_$n" "$cam" "$T/$n.rnd"; break; }
            msg="$msg $cam: $(sed 's/ back \([0-9]*\)/ picks, \1 backwards/' "$T/$n.rnd")"
        done
        [ $ok = 1 ] && pass "vid_random_$n ($msg)"
        # the ffmpeg CLI decodes frame K of the file, K from the episodes metadata (not from mact's output)
        $PY - "$d" "$MACT" "$T/$n" <<'EOF' >"$T/$n.ff" 2>&1 && pass "vid_ffmpeg_$n ($(tail -1 "$T/$n.ff"))" || fail "vid_ffmpeg_$n" "frames differ" "$T/$n.ff"
import json, os, subprocess, sys
d, mact, tmp = sys.argv[1:4]
info = json.load(open(f"{d}/meta/info.json"))
fps = info["fps"]
if info["codebase_version"] == "v3.0":
    eps = json.loads(subprocess.check_output([mact, "dataset", "dump", f"{d}/meta/episodes/chunk-000/file-000.parquet"]))
else:
    eps = [json.loads(l) for l in open(f"{d}/meta/episodes.jsonl")]
worst, n = 0, 0
for cam in ("observation.images.top", "observation.images.wrist"):
    for e, where in ((0, 0), (2, 0.5), (4, 1)):  # an episode's first, middle and last frame
        L = eps[e]["length"]
        for t in (round(where * (L - 1)),):
            if "videos/" + cam + "/from_timestamp" in eps[e]:
                path = f"{d}/videos/{cam}/chunk-000/file-{eps[e]['videos/' + cam + '/file_index']:03d}.mp4"
                k = round(eps[e]["videos/" + cam + "/from_timestamp"] * fps) + t
            else:
                path, k = f"{d}/videos/chunk-000/{cam}/episode_{e:06d}.mp4", t
            png, raw, mraw = f"{tmp}.png", f"{tmp}.ff.rgb", f"{tmp}.m.rgb"
            subprocess.check_call([mact, "dataset", "frame", d, "--episode", str(e), "--index", str(t), "--camera", cam, "--out", png],
                                  stdout=subprocess.DEVNULL)
            subprocess.check_call(["ffmpeg", "-v", "error", "-i", path, "-vf", f"select=eq(n\\,{k})", "-vsync", "0", "-sws_flags", "bilinear",
                                   "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", raw])
            # PNG -> rgb24 is lossless (no colour conversion)
            subprocess.check_call(["ffmpeg", "-v", "error", "-i", png, "-f", "rawvideo", "-pix_fmt", "rgb24", "-y", mraw])
            a, b = open(raw, "rb").read(), open(mraw, "rb").read()
            assert len(a) == len(b) == 64 * 64 * 3, (path, k, len(a), len(b))
            diff = max(abs(x - y) for x, y in zip(a, b))
            worst, n = max(worst, diff), n + 1
            if diff > 0: print(f"{cam} episode {e} frame {t} ({path} frame {k}): max |diff| {diff}")
print(f"{n} frames, max |diff| {worst}, threshold 0")
sys.exit(worst > 0)
EOF
    done
done

# --- B-frames really there ----------------------------------------------------------------------------------
if [ -d "$T/h264_v21" ]; then
    f="$T/h264_v21/videos/chunk-000/observation.images.top/episode_000000.mp4"
    nb=$(ffprobe -v error -select_streams v -show_frames -show_entries frame=pict_type -of csv "$f" | grep -c ",B")
    hb=$(ffprobe -v error -select_streams v -show_entries stream=has_b_frames -of csv=p=0 "$f")
    [ "$nb" -gt 0 ] && [ "$hb" -gt 0 ] && pass "vid_h264_bframes ($nb B-frames, has_b_frames $hb)" || fail vid_h264_bframes "B-frames $nb, has_b_frames $hb"
fi

# --- containers: a start_time offset, no frame count ---------------------------------------------------------
# t counts from the stream's start_time (an mp4 remuxed with a 1.5 s offset); a Matroska file states no
# nb_frames, so the packets are counted, and its 1 ms time base puts frame 1 at 0.033 s (tolerance 1e-3)
if [ -d "$T/h264_v21" ]; then
    f="$T/h264_v21/videos/chunk-000/observation.images.top/episode_000000.mp4"
    ffmpeg -v error -i "$f" -c copy -output_ts_offset 1.5 -y "$T/off.mp4" && ffmpeg -v error -i "$f" -c copy -f matroska -y "$T/x.mkv"
    st=$(ffprobe -v error -select_streams v -show_entries stream=start_time -of csv=p=0 "$T/off.mp4")
    nf=$(ffprobe -v error -select_streams v -show_entries stream=nb_frames -of csv=p=0 "$f")
    k=$((nf - 1)); tk=$(awk -v k=$k 'BEGIN { printf "%.6f", k / 30 }')  # the last frame
    a=$($VT at "$T/off.mp4" 0 2>&1); b=$($VT at "$T/off.mp4" $tk 2>&1)
    [ "$st" = "1.500000" ] && [ "$a" = "number 0" ] && [ "$b" = "number $k" ] &&
        pass "vid_start_time (start_time $st: t=0 -> frame 0, t=$tk -> frame $k)" || fail vid_start_time "start_time $st, t=0: $a, t=$tk: $b"
    i=$($VT info "$T/x.mkv" 2>&1); c=$($VT at "$T/x.mkv" 0.0333333 0.001 2>&1); e=$($VT at "$T/x.mkv" $tk 0.001 2>&1)
    grep -q "frames $nf " <<<"$i" && [ "$c" = "number 1" ] && [ "$e" = "number $k" ] &&
        pass "vid_mkv_counted ($i)" || fail vid_mkv_counted "want $nf frames: $i; t=1/30: $c; t=$tk: $e"
fi

# --- bad inputs ---------------------------------------------------------------------------------------------
base=""
for n in h264_v21 av1_v21 hevc_v21 mpeg4_v21; do [ -d "$T/$n" ] && { base="$T/$n"; break; }; done
[ -n "$base" ] || { fail vid_bad "no v2.1 dataset was generated"; exit 1; }
FRONT=videos/chunk-000/observation.images.top
bad_case() {  # name, dataset dir, want (grep -E) in `dataset info` problems, want in `dataset frame` stderr, [episode index]
    local name=$1 d=$2 wi=$3 wf=$4 e=${5:-1} ix=${6:-0} rc1 rc2
    $MACT dataset info "$d" >"$T/$name.info" 2>&1; rc1=$?
    $MACT dataset frame "$d" --episode "$e" --index "$ix" --camera observation.images.top --out "$T/$name.png" >"$T/$name.frame" 2>&1; rc2=$?
    if [ $rc1 = 3 ] && grep -qE -- "$wi" "$T/$name.info" && [ $rc2 = 1 ] && grep -qE -- "$wf" "$T/$name.frame" &&
       no_crash $rc1 "$T/$name.info" && no_crash $rc2 "$T/$name.frame" && [ ! -e "$T/$name.png" ]; then
        pass "$name ($(tail -1 "$T/$name.frame" | sed "s|$T/||g" | cut -c1-150))"
    else
        fail "$name" "info rc $rc1, frame rc $rc2"; sed 's/^/    /' "$T/$name.info" | grep -A3 problems; sed 's/^/    /' "$T/$name.frame"
    fi
}
cp -r "$base" "$T/b1"; rm "$T/b1/$FRONT/episode_000001.mp4"
bad_case vid_bad_missing "$T/b1" "episode 1 camera observation.images.top: video .*episode_000001.mp4 missing" \
    "episode 1 camera observation.images.top frame 0: .*episode_000001.mp4: video missing"
cp -r "$base" "$T/b2"; f="$T/b2/$FRONT/episode_000001.mp4"; head -c $(( $(stat -c %s "$f") / 2 )) "$f" >"$f.t" && mv "$f.t" "$f"
bad_case vid_bad_truncated "$T/b2" "episode 1 camera observation.images.top: .*episode_000001.mp4: not a video FFmpeg can read" \
    "episode 1 camera observation.images.top frame 0: .*episode_000001.mp4: not a video FFmpeg can read"
# fixed garbage: random bytes of some seeds probe as an audio-only stream ("no video stream", also an error);
# this case checks the "not a video FFmpeg can read" one, and fuzz/fuzz_video.c covers random input
cp -r "$base" "$T/b3"; $PY -c "import random,sys; r=random.Random(1); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(5000)))" >"$T/b3/$FRONT/episode_000001.mp4"
bad_case vid_bad_garbage "$T/b3" "episode 1 camera observation.images.top: .*episode_000001.mp4: not a video FFmpeg can read" \
    "episode 1 camera observation.images.top frame 0: .*episode_000001.mp4: not a video FFmpeg can read"
cp -r "$base" "$T/b4"; : >"$T/b4/$FRONT/episode_000001.mp4"
bad_case vid_bad_empty "$T/b4" "episode 1 camera observation.images.top: .*episode_000001.mp4: empty file \(0 bytes\)" \
    "episode 1 .*episode_000001.mp4: empty file \(0 bytes\), not a video"
# a video shorter than its episode: the episode's last frame is past the end of the file
read -r short long <<<"$($PY -c "
import json; L=[json.loads(l)['length'] for l in open('$base/meta/episodes.jsonl')]
s=min(range(5), key=lambda i: L[i]); g=max(range(5), key=lambda i: L[i]); print(s, g)")"
len_long=$($PY -c "import json; print([json.loads(l)['length'] for l in open('$base/meta/episodes.jsonl')][$long])")
cp -r "$base" "$T/b5"; cp "$base/$FRONT/episode_00000$short.mp4" "$T/b5/$FRONT/episode_00000$long.mp4"
bad_case vid_bad_past_end "$T/b5" "episode $long camera observation.images.top: .*episode_00000$long.mp4 has [0-9]+ frames, length $len_long" \
    "episode $long camera observation.images.top frame $((len_long - 1)): .*no frame within 0.0001 s of t=[0-9.]+ s: past the end \(last frame at [0-9.]+ s, pts [0-9]+\)" $long $((len_long - 1))
$VT at "$base/$FRONT/episode_000000.mp4" 99 >"$T/b6.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -qE "episode_000000.mp4: no frame within 0.0001 s of t=99.000000 s: past the end" "$T/b6.txt" &&
    pass "vid_bad_time_past_end ($(sed "s|$T/||g" "$T/b6.txt"))" || fail vid_bad_time_past_end "rc $rc" "$T/b6.txt"
$VT at "$base/$FRONT/episode_000000.mp4" 0.0166667 >"$T/b7.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -qE "no frame within 0.0001 s of t=0.016667 s \(nearest frame at 0.0[0-9]+ s, pts [0-9]+\)" "$T/b7.txt" &&
    pass "vid_bad_between_frames ($(sed "s|$T/||g" "$T/b7.txt"))" || fail vid_bad_between_frames "rc $rc" "$T/b7.txt"
# v3.0: a file holding other episodes than its from/to timestamps say. Fixed lengths, so the swap always breaks
# the ranges: the front camera's file-000 holds episodes 0 and 1 (40 frames), file-001 episode 2 (20 frames)
v3=""; for n in h264_v30 av1_v30 hevc_v30 mpeg4_v30; do [ -d "$T/$n" ] && { v3="$T/$n"; break; }; done
if [ -n "$v3" ] && ! $MACT synth-dataset "$T/b8" --version v3.0 --video "${n%_v30}" --episodes 3 --len 20:20 --seed $SEED >"$T/b8.gen" 2>&1; then
    fail vid_bad_v30_range "mact synth-dataset failed" "$T/b8.gen"
elif [ -n "$v3" ]; then
    cp "$T/b8/videos/observation.images.top/chunk-000/file-001.mp4" "$T/b8/videos/observation.images.top/chunk-000/file-000.mp4"
    $MACT dataset info "$T/b8" >"$T/b8.txt" 2>&1; rc=$?
    [ $rc = 3 ] && grep -qE "episode [01] camera observation.images.top: [0-9]+ frames in \[[0-9.]+, [0-9.]+\) s of .*file-000.mp4, length [0-9]+" "$T/b8.txt" &&
        pass vid_bad_v30_range || fail vid_bad_v30_range "rc $rc" "$T/b8.txt"
fi
# info.json disagreeing: the codec (the container's wins, the disagreement is listed), the template
cp -r "$base" "$T/b9"; $PY - "$T/b9/meta/info.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); c = j["features"]["observation.images.top"]["info"]
c["video.codec"] = "vp9" if c["video.codec"] != "vp9" else "av1"; json.dump(j, open(p, "w"), indent=2)
EOF
$MACT dataset info "$T/b9" >"$T/b9.txt" 2>&1; rc=$?
$MACT dataset frame "$T/b9" --episode 0 --index 3 --camera observation.images.top --print-number >"$T/b9f.txt" 2>&1; rc2=$?
[ $rc = 3 ] && grep -qE "camera observation.images.top: .*episode_000000.mp4 is [a-z0-9]+, info.json says video.codec vp9 \(the container's codec is decoded\)" "$T/b9.txt" &&
    grep -q "(info.json says vp9; the container's is decoded)" "$T/b9.txt" && [ $rc2 = 0 ] && grep -q "camera 0 episode 0 frame 3)" "$T/b9f.txt" &&
    pass vid_bad_codec_mismatch || fail vid_bad_codec_mismatch "rc $rc / $rc2" "$T/b9.txt"
cp -r "$base" "$T/b10"; sed -i 's|"video_path": "[^"]*"|"video_path": "videos/{camera_name}/{episode_index}.mp4"|' "$T/b10/meta/info.json"
$MACT dataset info "$T/b10" >"$T/b10.txt" 2>&1; rc=$?
[ $rc = 3 ] && grep -qF 'camera observation.images.top: video_path template "videos/{camera_name}/{episode_index}.mp4" does not resolve' "$T/b10.txt" &&
    pass vid_bad_template || fail vid_bad_template "rc $rc" "$T/b10.txt"
exit 0
