#!/usr/bin/env bash
# tier: fast (numpy only)
# Real-time chunking through `mact run` (robot units in and out, docs/design.md "Real-time chunking"):
#   - zero weights (ZEROS schedule, delay 0) give the unguided chunk bit for bit: the guided path adds nothing
#     when nothing is guided;
#   - the 2-step property: with 2 flow steps the rows of weight 1 (the delayed rows) come back equal to the
#     previous chunk's rows, in robot units (threshold 2e-5 x the tag's range; float rounding through
#     normalise / unnormalise), while the unguided chunk differs there (so the check cannot pass by accident);
#     on the tiny checkpoint and on a copy with LeRobot's SO-101 state frame transform (signs and offsets);
#   - rows past the guided prefix move toward the previous rows by less (the weights fade out);
#   - --dump's prev_actions_norm.npy is the tag's normalisation of the rows given (numpy, q01/q99);
#   - every bad input is a named error: wrong width, NaN, delay > rows, delay >= horizon, more rows than the
#     horizon, unknown schedule, negative weight, RTC flags without rows.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/rtc; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED"
$MACT synth tiny "$T/model" --seed "$SEED" >/dev/null || { echo "FAIL rtc_synth: mact synth tiny failed"; exit 1; }
# the SO-101 variant: 6 state and 6 action dims and the preprocessor step that turns on the frame transform
cp -r "$T/model" "$T/so101"
$PY - "$T" "$SEED" <<'PYEOF' || { echo "FAIL rtc_setup: could not write the inputs"; exit 1; }
import json, sys, numpy as np
from PIL import Image
T, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
for i in range(2):
    Image.fromarray(rng.integers(0, 256, (48 + 8 * i, 64, 3), dtype=np.uint8)).save(f"{T}/cam{i}.png")
p = f"{T}/so101/norm_stats.json"
ns = json.load(open(p))
for md in ns["metadata_by_tag"].values():
    for k in ("state_stats", "action_stats"):
        for f, v in list(md[k].items()):
            if isinstance(v, list): md[k][f] = v[:6]
json.dump(ns, open(p, "w"))
so101 = {"joint_signs": [1.0, -1.0, 1.0, 1.0, 1.0, 1.0], "joint_offsets": [0.0, 90.0, 90.0, 0.0, 0.0, 0.0]}
for name, reg in (("policy_preprocessor", "molmoact2_state_frame_transform"),
                  ("policy_postprocessor", "molmoact2_action_frame_transform")):
    json.dump({"name": name, "steps": [{"registry_name": reg, "config": so101}]}, open(f"{T}/so101/{name}.json", "w"))
PYEOF
STATE8="0.1,-0.2,0.3,0.05,-0.1,0.2,0.4,-0.3"; STATE6="5,80,95,-3,2,10"
run() {  # out_dir, model, state, extra args...
    local d=$1 m=$2 st=$3; shift 3
    $MACT run --model "$m" --image "$T/cam0.png" --image "$T/cam1.png" --task "stack the red block" --state "$st" \
        --steps 2 --precision fp32 --dump "$d" "$@" >"$d.log" 2>&1
}
check() {  # name, model, state
    local name=$1 m=$2 st=$3
    run "$T/$name.base" "$m" "$st" --seed 11 || { echo "FAIL rtc_${name}: the unguided run failed: $(tail -1 "$T/$name.base.log")"; return; }
    $PY -c "
import numpy as np, sys
a = np.load('$T/$name.base/actions.npy')
np.save('$T/$name.prev.npy', np.ascontiguousarray(a[3:]).astype(np.float32))   # 3 rows were executed
np.save('$T/$name.one.npy', np.ascontiguousarray(a[3:4]).astype(np.float32))"
    run "$T/$name.zeros" "$m" "$st" --seed 22 --prev-actions "$T/$name.one.npy" --inference-delay 0 --rtc-schedule zeros \
        || { echo "FAIL rtc_${name}_zero_weights: $(tail -1 "$T/$name.zeros.log")"; return; }
    run "$T/$name.free" "$m" "$st" --seed 22 || { echo "FAIL rtc_${name}: $(tail -1 "$T/$name.free.log")"; return; }
    run "$T/$name.rtc" "$m" "$st" --seed 22 --prev-actions "$T/$name.prev.npy" --inference-delay 2 --execution-horizon 5 \
        || { echo "FAIL rtc_${name}_two_steps: $(tail -1 "$T/$name.rtc.log")"; return; }
    $PY - "$T" "$name" "$m" <<'PYEOF'
import json, sys, numpy as np
T, name, m = sys.argv[1:4]
def res(ok, what, detail): print(("PASS" if ok else "FAIL") + f" rtc_{name}_{what} {detail}")
free, zeros = np.load(f"{T}/{name}.free/actions.npy"), np.load(f"{T}/{name}.zeros/actions.npy")
res(free.tobytes() == zeros.tobytes(), "zero_weights_bitwise", f"max_abs={float(np.abs(free - zeros).max()):.3e} (== 0, bitwise)")
prev, rtc = np.load(f"{T}/{name}.prev.npy"), np.load(f"{T}/{name}.rtc/actions.npy")
ns = json.load(open(f"{m}/norm_stats.json"))
st = next(iter(ns["metadata_by_tag"].values()))["action_stats"]
q01, q99 = np.array(st["q01"], np.float64), np.array(st["q99"], np.float64)
rng = np.maximum(q99 - q01, 1e-6)
tol = 2e-5 * float(rng.max())
e_rtc = float(np.abs(rtc[:2] - prev[:2]).max())
e_free = float(np.abs(free[:2] - prev[:2]).max())
res(e_rtc <= tol and e_free > 100 * tol, "delayed_rows_follow",
    f"rows 0-1 vs previous: guided max_abs={e_rtc:.3e} (<= {tol:.3e}), unguided {e_free:.3e} (> {100 * tol:.3e})")
# past the prefix (rows >= 5 have weight 0) the guided and unguided chunks are not pulled to the old rows as hard
far = float(np.abs(rtc[6:] - prev[6:7]).max()) if rtc.shape[0] > 6 else 1.0
res(far > 100 * tol, "unguided_tail", f"rows 6.. vs previous row 6: max_abs={far:.3e} (> {100 * tol:.3e})")
pn = np.load(f"{T}/{name}.rtc/prev_actions_norm.npy").astype(np.float64)
raw = prev.astype(np.float64)
if name == "so101":
    raw = raw * np.array([1, -1, 1, 1, 1, 1]) + np.array([0, 90, 90, 0, 0, 0])
mask = np.array(st.get("mask", [True] * len(q01)), bool)
want = np.where(mask, np.clip(2 * (raw - q01) / rng - 1, -1, 1), raw)
e = float(np.abs(pn - want).max())
res(pn.shape == prev.shape and e <= 1e-6, "prev_actions_norm", f"shape={pn.shape} max_abs vs numpy={e:.3e} (<= 1e-6)")
PYEOF
}
check tiny "$T/model" "$STATE8"
check so101 "$T/so101" "$STATE6"

# bad inputs: each refused with a message naming it
$PY -c "
import numpy as np
p = np.load('$T/tiny.prev.npy')
np.save('$T/wide.npy', np.zeros((3, p.shape[1] + 1), np.float32))
q = p.copy(); q[1, 2] = np.nan; np.save('$T/nan.npy', q)
np.save('$T/long.npy', np.zeros((11, p.shape[1]), np.float32))
np.save('$T/full.npy', np.zeros((10, p.shape[1]), np.float32))
np.save('$T/flat.npy', p.reshape(-1))"
bad() {  # name, expected text, args...
    local name=$1 want=$2; shift 2
    if run "$T/bad_$name" "$T/model" "$STATE8" --seed 3 "$@"; then echo "FAIL rtc_bad_$name: accepted"; return; fi
    if grep -q -- "$want" "$T/bad_$name.log" && [ ! -e "$T/bad_$name" ]; then echo "PASS rtc_bad_$name ($(tail -1 "$T/bad_$name.log"))"
    else echo "FAIL rtc_bad_$name: want '$want' and no dump; got: $(tail -1 "$T/bad_$name.log")"; fi
}
P="$T/tiny.prev.npy"
bad width "rows have 8 values; the action dim is 7" --prev-actions "$T/wide.npy"
bad nan "prev_actions\[1\]\[2\] is nan" --prev-actions "$T/nan.npy"
bad delay_rows "inference_delay 8 is larger than the 7 previous chunk rows" --prev-actions "$P" --inference-delay 8
bad delay_horizon "inference_delay 10 leaves no row of the 10-row horizon" --prev-actions "$T/full.npy" --inference-delay 10
bad too_many_rows "11 previous chunk rows; the horizon is 10" --prev-actions "$T/long.npy"
bad not_2d "expected a float32 \[n, action_dim\]" --prev-actions "$T/flat.npy"
bad schedule "rtc-schedule is zeros, ones, linear or exp" --prev-actions "$P" --rtc-schedule cosine
bad guidance "rtc-guidance is identity or vjp" --prev-actions "$P" --rtc-guidance jacobian
bad weight "max-guidance-weight must be a number > 0" --prev-actions "$P" --max-guidance-weight -1
bad no_rows "need --prev-actions" --inference-delay 2
bad missing_file "cannot open" --prev-actions "$T/none.npy"
