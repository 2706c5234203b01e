#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast — LeRobot datasets (src/data/lerobot.c over src/data/parquet.c), `mact dataset info` and `mact stats`,
# on trees written by `mact synth-dataset` (src/data/lerobot_synth.c; seed printed, SEED=... replays):
#   ds_synth_deterministic   same seed -> identical files
#   ds_info_*                v2.1 / v3.0, SO-101 / LIBERO (PNG structs): version, episodes, frames, fps,
#                            features with shapes and names, cameras, no problems
#   ds_frame_png_in_parquet  `mact dataset frame` of a PNG-in-parquet camera: the frame the pixels number
#   ds_video_smoke           an H.264 v3.0 video camera: `dataset info` clean, `dataset frame` the right frame
#                            (every codec and layout: tests/test_dataset_video.sh, full tier)
#   ds_problem_*             a missing data file, total_frames disagreeing, a list longer than the feature's
#                            shape, an unknown codebase_version: listed / clear errors naming file and column
#   ds_stats_{lerobot,lerobot-f64,exact} mact stats over a v2.1 + a v3.0 dataset (dictionary fallback variant)
#                            against an independent numpy implementation (tests/dataset/stats_ref.py): <= 1e-9 of
#                            the range; ds_stats_lerobot_1d the same for a one-dimensional feature (timestamp)
#   ds_stats_inplace         one tag replaced in an existing norm_stats.json atomically, the other tags kept
#   ds_stats_roundtrip       stats written into a `mact synth tiny` checkpoint's norm_stats.json: it loads and
#                            `mact run` predicts with the new tag, actions inside the new [q01, q99]
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=$(mktemp -d "${MACT_TMP:-/tmp}/dataset.XXXXXX")
trap 'rm -rf "$T"' EXIT
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; [ -n "${3:-}" ] && sed 's/^/    /' "$3" | head -20; }

# --- generation -------------------------------------------------------------------------------------------
$MACT synth-dataset "$T/a21" --seed "$SEED" --episodes 3 >"$T/g.log" 2>&1 &&
$MACT synth-dataset "$T/a21b" --seed "$SEED" --episodes 3 >>"$T/g.log" 2>&1 &&
$MACT synth-dataset "$T/b30" --version v3.0 --seed $((SEED + 1)) --episodes 5 --variant fallback >>"$T/g.log" 2>&1 &&
$MACT synth-dataset "$T/l30" --version v3.0 --robot libero --seed $((SEED + 2)) --episodes 4 --variant zstd --ts-f64 >>"$T/g.log" 2>&1 &&
$MACT synth-dataset "$T/l21" --robot libero --seed $((SEED + 3)) --episodes 2 --variant rowgroups >>"$T/g.log" 2>&1 ||
    { fail ds_synth "mact synth-dataset failed" "$T/g.log"; exit 1; }
if diff -r "$T/a21" "$T/a21b" >/dev/null; then pass ds_synth_deterministic; else fail ds_synth_deterministic "same seed, different files"; fi

# --- info ---------------------------------------------------------------------------------------------------
info_check() {  # name dir version episodes fps cameras
    local name=$1 d=$2
    if ! $MACT dataset info "$d" >"$T/$name.txt" 2>&1; then fail "$name" "mact dataset info exited non-zero" "$T/$name.txt"; return; fi
    local frames; frames=$($PY -c "import json;print(json.load(open('$d/meta/info.json'))['total_frames'])")
    local want=("version $3," "episodes $4, frames $frames (info.json: $frames)" "fps $5" "cameras: $6" "problems: 0"
                "action                           float32  [" "observation.state                float32  [")
    local w
    for w in "${want[@]}"; do grep -qF -- "$w" "$T/$name.txt" || { fail "$name" "no '$w' in the output" "$T/$name.txt"; return; }; done
    pass "$name"
}
info_check ds_info_v21_so101 "$T/a21" v2.1 3 30 2
info_check ds_info_v30_so101 "$T/b30" v3.0 5 30 2
info_check ds_info_v30_libero "$T/l30" v3.0 4 10 2
info_check ds_info_v21_libero "$T/l21" v2.1 2 10 2
grep -q "names: shoulder_pan.pos shoulder_lift.pos elbow_flex.pos wrist_flex.pos wrist_roll.pos gripper.pos" "$T/ds_info_v21_so101.txt" &&
grep -q "observation.images.wrist_image: PNG in parquet, 16x16" "$T/ds_info_v30_libero.txt" &&
grep -q "names: x y z axis_angle1 axis_angle2 axis_angle3 gripper_qpos1 gripper_qpos2" "$T/ds_info_v30_libero.txt" &&
    pass ds_info_names || fail ds_info_names "joint names / camera line missing" "$T/ds_info_v30_libero.txt"

# --- cameras decoded (a smoke test; tests/test_dataset_video.sh is the full check of every codec) ------------
# PNG in the parquet: the synthetic images carry the global frame index in R + 256 G
l21_e0=$($PY -c "import json;print(json.loads(open('$T/l21/meta/episodes.jsonl').readline())['length'])")
$MACT dataset frame "$T/l21" --episode 1 --index 4 --camera observation.images.image --out "$T/img.png" --print-number >"$T/img.txt" 2>&1 &&
    grep -q "^index $((l21_e0 + 4))$" "$T/img.txt" && [ -s "$T/img.png" ] &&
    pass ds_frame_png_in_parquet || fail ds_frame_png_in_parquet "wrong or no frame" "$T/img.txt"
# an H.264 (B-frames) v3.0 video camera: listed with the container's codec, no problems, the right frame
if $MACT synth-dataset "$T/v30" --version v3.0 --video h264 --episodes 4 --len 10:20 --seed "$SEED" >"$T/v30.log" 2>&1 &&
   $MACT dataset info "$T/v30" >"$T/v30.txt" 2>&1 && grep -q "problems: 0" "$T/v30.txt" &&
   grep -q "observation.images.wrist: video h264, 64x64, [0-9]* frames in 2 files" "$T/v30.txt" &&
   $MACT dataset frame "$T/v30" --episode 3 --index 7 --camera observation.images.wrist --out "$T/v.png" --print-number >"$T/vf.txt" 2>&1 &&
   grep -q "(camera 1 episode 3 frame 7)" "$T/vf.txt"; then pass ds_video_smoke
else fail ds_video_smoke "synth / info / frame failed" "$T/vf.txt"; cat "$T/v30.log" "$T/v30.txt" | tail -5; fi

# --- problems -----------------------------------------------------------------------------------------------
cp -r "$T/a21" "$T/p1"; rm "$T/p1/data/chunk-000/episode_000001.parquet"
$MACT dataset info "$T/p1" >"$T/p1.txt" 2>&1; rc=$?
[ $rc = 3 ] && grep -q "problems: 1" "$T/p1.txt" && grep -q "episode 1: data file .*episode_000001.parquet missing" "$T/p1.txt" &&
    pass ds_problem_missing_file || fail ds_problem_missing_file "rc $rc" "$T/p1.txt"
cp -r "$T/b30" "$T/p2"; $PY - "$T/p2/meta/info.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["total_frames"] += 7; json.dump(j, open(p, "w"), indent=2)
EOF
$MACT dataset info "$T/p2" >"$T/p2.txt" 2>&1; rc=$?
[ $rc = 3 ] && grep -q "info.json total_frames [0-9]*, the episodes add up to" "$T/p2.txt" &&
    pass ds_problem_total_frames || fail ds_problem_total_frames "rc $rc" "$T/p2.txt"
cp -r "$T/a21" "$T/p3"; $PY - "$T/p3/meta/info.json" <<'EOF'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["features"]["action"]["shape"] = [5]; json.dump(j, open(p, "w"), indent=2)
EOF
$MACT stats --dataset "$T/p3" --tag t --out "$T/p3.json" >"$T/p3.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "episode_000000.parquet: column 'action', row 0: 6 values, the feature's shape is \[5\]" "$T/p3.txt" && [ ! -e "$T/p3.json" ] &&
    pass ds_problem_list_longer_than_shape || fail ds_problem_list_longer_than_shape "rc $rc" "$T/p3.txt"
cp -r "$T/a21" "$T/p4"; sed -i 's/"v2.1"/"v9.9"/' "$T/p4/meta/info.json"
$MACT dataset info "$T/p4" >"$T/p4.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -q 'info.json: codebase_version "v9.9"' "$T/p4.txt" &&
    pass ds_problem_version || fail ds_problem_version "rc $rc" "$T/p4.txt"
cp -r "$T/b30" "$T/p5"; head -c 2000 "$T/b30/data/chunk-000/file-001.parquet" > "$T/p5/data/chunk-000/file-001.parquet"
$MACT dataset info "$T/p5" >"$T/p5.txt" 2>&1; rc=$?
[ $rc = 3 ] && grep -q "file-001.parquet: not a parquet file" "$T/p5.txt" &&
    pass ds_problem_truncated_file || fail ds_problem_truncated_file "rc $rc" "$T/p5.txt"

# --- stats against numpy -----------------------------------------------------------------------------------
dumps=()
for f in "$T"/a21/data/chunk-000/*.parquet "$T"/b30/data/chunk-000/*.parquet; do
    o="$T/dump_$(basename "$(dirname "$(dirname "$(dirname "$f")")")")_$(basename "$f").json"
    $MACT dataset dump "$f" >"$o" || { fail ds_stats_dump "mact dataset dump $f failed"; exit 1; }
    dumps+=("$o")
done
for m in lerobot lerobot-f64 exact; do
    if $MACT stats --dataset "$T/a21" --dataset "$T/b30" --tag so101_test --method $m --out "$T/ns_$m.json" >"$T/st_$m.log" 2>&1 &&
       $PY tests/dataset/stats_ref.py $m "$T/ns_$m.json" so101_test "${dumps[@]}" >"$T/ref_$m.log" 2>&1; then
        pass "ds_stats_$m ($(cat "$T/ref_$m.log"))"
    else fail "ds_stats_$m" "mact stats or the numpy reference failed" "$T/ref_$m.log"; cat "$T/st_$m.log"; fi
done
# a one-dimensional float32 feature: np.mean reduces it with numpy's pairwise sum, not a running one
if $MACT stats --dataset "$T/a21" --dataset "$T/b30" --tag ts --action-key timestamp --out "$T/ns_ts.json" >"$T/st_ts.log" 2>&1 &&
   AKEY=timestamp $PY tests/dataset/stats_ref.py lerobot "$T/ns_ts.json" ts "${dumps[@]}" >"$T/ref_ts.log" 2>&1; then
    pass "ds_stats_lerobot_1d ($(cat "$T/ref_ts.log"))"
else fail ds_stats_lerobot_1d "mact stats or the numpy reference failed" "$T/ref_ts.log"; cat "$T/st_ts.log"; fi

# --- in-place update of one tag ----------------------------------------------------------------------------
cp "$T/ns_exact.json" "$T/multi.json"
$MACT stats --dataset "$T/l30" --tag libero_new --horizon 10 --control-mode "delta end-effector pose" --normalize-gripper 0 --out "$T/multi.json" >/dev/null 2>&1 &&
$MACT stats --dataset "$T/a21" --tag so101_test --method lerobot --out "$T/multi.json" >/dev/null 2>&1 &&
$PY - "$T/multi.json" "$T/ns_exact.json" <<'EOF' >"$T/inplace.log" 2>&1 && pass ds_stats_inplace || fail ds_stats_inplace "tags not kept/replaced" "$T/inplace.log"
import json, sys
m, old = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = m["metadata_by_tag"]
assert m["format"] == "molmoact2_norm_stats.v1" and set(t) == {"so101_test", "libero_new"}, list(t)
assert t["so101_test"]["stats_method"] == "lerobot" and t["so101_test"]["action_stats"] != old["metadata_by_tag"]["so101_test"]["action_stats"]
lb = t["libero_new"]
assert lb["action_horizon"] == 10 and lb["normalize_gripper"] is False and lb["action_dim"] == 7
assert lb["action_stats"]["mask"] == [True] * 6 + [False], lb["action_stats"]["mask"]
assert lb["camera_keys"] == ["observation.images.image", "observation.images.wrist_image"]
EOF
ls "$T"/.multi.json.tmp.* "$T"/multi.json.tmp.* >/dev/null 2>&1 && fail ds_stats_tmp_left "a temporary file was left next to the output"

# --- round trip into a checkpoint ---------------------------------------------------------------------------
if $MACT synth tiny "$T/ck" --seed "$SEED" >"$T/ck.log" 2>&1 &&
   $MACT stats --dataset "$T/l30" --dataset "$T/l21" --tag libero --out "$T/ck/norm_stats.json" >"$T/rt.log" 2>&1 &&
   $MACT stats --dataset "$T/a21" --tag so101_extra --out "$T/ck/norm_stats.json" >>"$T/rt.log" 2>&1 &&
   $PY - "$T/l30/data/chunk-000/file-000.parquet" "$T" "$MACT" <<'EOF' >>"$T/rt.log" 2>&1 &&
import json, subprocess, sys
rows = json.loads(subprocess.check_output([sys.argv[3], "dataset", "dump", sys.argv[1]]))
for k, cam in (("observation.images.image", 0), ("observation.images.wrist_image", 1)):
    open(f"{sys.argv[2]}/cam{cam}.png", "wb").write(bytes.fromhex(rows[5][k]["bytes"]))
open(f"{sys.argv[2]}/state.txt", "w").write(",".join(repr(v) for v in rows[5]["observation.state"]))
EOF
   $MACT run --model "$T/ck" --image "$T/cam0.png" --image "$T/cam1.png" --task "put the bowl on the plate" \
        --state "$(cat "$T/state.txt")" --norm-tag libero --seed 3 --json >"$T/run.json" 2>>"$T/rt.log"; then
    $PY - "$T/run.json" "$T/ck/norm_stats.json" <<'EOF' >"$T/rt_check.log" 2>&1 && pass "ds_stats_roundtrip ($(cat "$T/rt_check.log"))" || fail ds_stats_roundtrip "actions outside the new stats" "$T/rt_check.log"
import json, sys
import numpy as np
r = json.load(open(sys.argv[1]))
a = np.array(r["actions"], dtype=np.float64)
s = json.load(open(sys.argv[2]))["metadata_by_tag"]["libero"]["action_stats"]
q01, q99, mask = np.array(s["q01"]), np.array(s["q99"]), np.array(s["mask"])
assert a.shape == (10, 7), a.shape
inside = ((a >= q01 - 1e-4 * (q99 - q01)) & (a <= q99 + 1e-4 * (q99 - q01)))[:, mask]
assert inside.all(), (a, q01, q99)
print(f"{a.shape[0]}x{a.shape[1]} actions, normalised dims inside the regenerated [q01, q99]")
EOF
else
    fail ds_stats_roundtrip "synth / stats / run failed" "$T/rt.log"
fi

# --- LeRobot's meta/stats.json layout ------------------------------------------------------------------------
$MACT stats --dataset "$T/a21" --tag t --method exact --lerobot-stats "$T/lr_stats.json" --out "$T/lr_ns.json" >/dev/null 2>&1 &&
$PY - "$T/lr_stats.json" "$T/lr_ns.json" <<'EOF' >"$T/lr.log" 2>&1 && pass ds_stats_lerobot_layout || fail ds_stats_lerobot_layout "bad stats.json" "$T/lr.log"
import json, sys
l, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["metadata_by_tag"]["t"]
assert set(l) == {"action", "observation.state"}, list(l)
for k, sk in (("action", "action_stats"), ("observation.state", "state_stats")):
    assert set(l[k]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}, list(l[k])
    assert all(l[k][s] == n[sk][s] for s in l[k])
EOF
