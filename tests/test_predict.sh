#!/usr/bin/env bash
# The integrator's path end to end: `mact run` (PNG frames + task + raw state + noise) against the
# reference (tests/reference/predict_ref.py: torch resize, HF's Rust tokenizers, MolmoAct2Ref), on a
# checkpoint synthesized by `mact synth` (so the C writer's layout is checked by the reference too).
# Gates: token ids identical; pixel_values max abs <= 1e-6 (observed 0: same uint8 after resize);
# normalised actions max abs <= 1e-4 (observed ~1e-6); robot-unit actions max abs <= 1e-4 x range.
# Then every bad input is a clear error and --dump writes nothing.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/predict; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED"
if ! scripts/setup_tokenizer.sh >"$T/tok_setup.log" 2>&1; then
    echo "FAIL predict_setup: scripts/setup_tokenizer.sh failed (the Rust tokenizers reference is needed):"
    tail -5 "$T/tok_setup.log"; exit 1
fi
$MACT synth tiny "$T/model" --seed "$SEED" >/dev/null || { echo "FAIL predict_synth: mact synth tiny failed"; exit 1; }
. "$(dirname "$0")/predict_case.sh"
run_case two_cams 2
# one and three cameras: the same weights under a tag that names that many (the tag's count is the one input rule)
cams_model() {  # N -> $T/model_cams_N
    rm -rf "$T/model_cams_$1"; cp -r "$T/model" "$T/model_cams_$1"
    $PY -c 'import json, sys
p, n = sys.argv[1], int(sys.argv[2]); ns = json.load(open(p))
for t in ns["metadata_by_tag"].values(): t["camera_keys"] = ["observation.images.cam%d" % i for i in range(n)]
json.dump(ns, open(p, "w"))' "$T/model_cams_$1/norm_stats.json" "$1"
}
cams_model 1 && MODEL="$T/model_cams_1" run_case one_cam 1 "put the bowl on the plate"
cams_model 3 && MODEL="$T/model_cams_3" run_case three_cams_unicode 3 "  Instruction: Öffne die Schublade — und lege den Würfel hinein.  "
# the real widths (ViT 1152, LLM 2560, expert 768): `mact synth wide`
if [ "${MACT_PARITY_WIDE:-1}" != 0 ]; then
    if $MACT synth wide "$T/model_wide" --seed $((SEED + 99)) >/dev/null; then
        MODEL="$T/model_wide" run_case wide_two_cams 2 "put both moka pots on the stove"
        rm -rf "$T/model_wide"
    else echo "FAIL predict_wide: mact synth wide failed"; fi
fi
# SO-101: 6-dim joints in degrees, the LeRobot preprocessor's joint frame transform on state and actions
cp -r "$T/model" "$T/model_so101"
$PY - "$T/model_so101" <<'PYEOF'
import json, sys
d = sys.argv[1]
ns = json.load(open(f"{d}/norm_stats.json"))
tag = dict(next(iter(ns["metadata_by_tag"].values())))
q01 = [-100.0, -20.0, -10.0, -95.0, -150.0, 0.0]
q99 = [100.0, 190.0, 185.0, 95.0, 150.0, 100.0]
st = {"q01": q01, "q99": q99, "min": [v - 5 for v in q01], "max": [v + 5 for v in q99],
      "mean": [0.0] * 6, "std": [50.0] * 6, "mask": [True] * 6}
tag.update(state_stats=st, action_stats=dict(st, mask=[True, True, True, True, True, False]),
           setup_type="so101 arm", control_mode="absolute joint pose", action_horizon=30, n_action_steps=30)
ns["metadata_by_tag"] = {"so100_so101_molmoact2": tag}
json.dump(ns, open(f"{d}/norm_stats.json", "w"))
# the checkpoint's joint frame, LeRobot's documented SO-101 values, in both processor steps as LeRobot writes them
so101 = {"joint_signs": [1.0, -1.0, 1.0, 1.0, 1.0, 1.0], "joint_offsets": [0.0, 90.0, 90.0, 0.0, 0.0, 0.0]}
for name, reg in (("policy_preprocessor", "molmoact2_state_frame_transform"),
                  ("policy_postprocessor", "molmoact2_action_frame_transform")):
    json.dump({"name": name, "steps": [{"registry_name": reg, "config": so101}]}, open(f"{d}/{name}.json", "w"))
PYEOF
MODEL="$T/model_so101" run_case so101_frame 2 "Pick up the large blue cube and put it in the box."
# LeRobot writes the frame step into every MolmoAct2 pipeline, with null values unless the user set them: no transform
cp -r "$T/model_so101" "$T/model_so101_null"
$PY - "$T/model_so101_null" <<'PYEOF'
import json, sys
for name in ("policy_preprocessor", "policy_postprocessor"):
    p = f"{sys.argv[1]}/{name}.json"
    j = json.load(open(p))
    j["steps"][0]["config"] = {"joint_signs": None, "joint_offsets": None}
    json.dump(j, open(p, "w"))
PYEOF
MODEL="$T/model_so101_null" run_case so101_null_frame 2 "Pick up the large blue cube and put it in the box."

# bad input: each a clear error, exit 1, and --dump writes nothing
d="$T/two_cams"; st=$($PY -c "import json;print(json.load(open('$d/case.json'))['state'])")
bad() {  # name, expected fragment, args...
    local name=$1 frag=$2; shift 2
    rm -rf "$T/baddump"
    local out rc; out=$($MACT run --model "$T/model" --dump "$T/baddump" "$@" 2>&1); rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$frag" <<<"$out" && [ ! -e "$T/baddump" ]; then echo "PASS predict_bad_$name ($out)"
    else echo "FAIL predict_bad_$name: rc=$rc dump_exists=$([ -e "$T/baddump" ] && echo yes || echo no) want '$frag': $out"; fi
}
: > "$T/empty.png"; head -c 300 "$d/cam0.png" > "$T/trunc.png"; echo "not an image" > "$T/text.png"
$PY -c "
import sys, zlib, struct
def chunk(t, b): return struct.pack('>I', len(b)) + t + b + struct.pack('>I', zlib.crc32(t + b))
open('$T/huge.png', 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 100000, 100000, 8, 2, 0, 0, 0)) + chunk(b'IEND', b''))"
ok_args=(--image "$d/cam0.png" --image "$d/cam1.npy" --task "pick it up")
bad missing_image "No such file" --image "$T/nope.png" --task t --state "$st"
bad empty_image "empty" --image "$T/empty.png" --task t --state "$st"
bad truncated_image "truncated" --image "$T/trunc.png" --task t --state "$st"
bad not_an_image "image" --image "$T/text.png" --task t --state "$st"
bad huge_image "limit" --image "$T/huge.png" --task t --state "$st"
bad state_len "expects 8" "${ok_args[@]}" --state "1,2,3"
bad state_nan "must be finite" "${ok_args[@]}" --state "$(sed 's/^[^,]*/nan/' <<<"$st")"
bad state_inf "must be finite" "${ok_args[@]}" --state "$(sed 's/^[^,]*/inf/' <<<"$st")"
bad norm_tag "valid tags: libero" "${ok_args[@]}" --state "$st" --norm-tag nosuchtag
bad utf8 "UTF-8" --image "$d/cam0.png" --image "$d/cam1.npy" --task "$(printf 'bad \xff\xfe bytes')" --state "$st"
bad long_prompt "longer than" "${ok_args[@]}" --state "$st" --task "$(head -c 3000 /dev/zero | tr '\0' 'a' | sed 's/aaaa/ab c/g')"
bad npy_shape "HxWx3" --image "$d/noise.npy" --task t --state "$st"
bad noise_shape "noise" "${ok_args[@]}" --state "$st" --noise "$d/dump/input_ids.npy"
bad special_in_task "special tokens" "${ok_args[@]}" --state "$st" --task "look <|image|> here"
