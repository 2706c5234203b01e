#!/usr/bin/env bash
# kernels: via-engine (its checks are of the front end; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# mact export (docs/export.md): the golden I/O and the ONNX graphs, checked by ONNX Runtime (onnxruntime-node
# 1.30.0, tests/onnx/, installed by scripts/setup_onnx.sh), not by mact. Checkpoints: `mact synth tiny` (with the
# grid token sampler), the same without it (tests/onnx/drop_sampler.py), `mact synth wide` (full width, 2 layers).
# Per checkpoint, on fresh random images / state / noise seed:
#   golden: `mact export golden`, then `mact parity` on it: every row PASS and max_abs_err 0 (the same stage code).
#   onnx fp32 native: every output of every graph at cosine >= 0.99999 and max abs <= 1e-4 x max|ref| against the
#     golden (ONNX Runtime's CPU run; thresholds printed beside the observed values).
#   onnx fp32 decomposed: the same, and the vision output within max abs 1e-5 of the native GridSample graph's.
#   onnx fp16 weights: cosines published (INFO lines, no threshold).
#   tiny also with --seq-len N fixed (the converter's fixed-shape graphs).
# Bad input: a checkpoint feature mact refuses (text_config.rope_scaling) named with nothing written; --out not
# empty refused and left as it was; a failure injected half way (MACT_EXPORT_FAIL_AT) leaves no folder behind.
# SEED=... replays a run.
set -u
cd "$(dirname "$0")/.."
export PATH=/usr/bin:$PATH
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/export; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
if ! scripts/setup_onnx.sh >"$T/setup_onnx.log" 2>&1; then
    echo "FAIL export_setup: scripts/setup_onnx.sh failed:"; tail -5 "$T/setup_onnx.log"; exit 1; fi
ORT_THREADS=${ORT_THREADS:-2}
check() { node tests/onnx/check_onnx.js "$@" --threads "$ORT_THREADS"; }

# images, state, task from the seed
$PY - "$T" "$SEED" <<'PYEOF' || { echo "FAIL export_inputs: could not write the inputs"; exit 1; }
import sys, numpy as np
d, s = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(s)
for i in range(2):
    h, w = int(r.integers(200, 480)), int(r.integers(200, 640))
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    img = np.stack([127 + 100 * np.sin(r.uniform(1, 9) * xx + r.uniform(1, 9) * yy + c) for c in range(3)], -1)
    img += r.normal(0, 25, img.shape)
    np.save(f"{d}/img{i}.npy", np.clip(np.rint(img), 0, 255).astype(np.uint8))
open(f"{d}/state.txt", "w").write(",".join(f"{v:.6f}" for v in r.uniform(-1, 1, 8)))
PYEOF
STATE=$(cat "$T/state.txt")
TASK="put the bowl on the plate $SEED"

$MACT synth tiny "$T/ck_tiny" --seed $((SEED + 1)) >/dev/null 2>&1 || { echo "FAIL export_setup: mact synth tiny failed"; exit 1; }
$PY tests/onnx/drop_sampler.py "$T/ck_tiny" "$T/ck_tiny_nosampler" >/dev/null 2>&1 || { echo "FAIL export_setup: drop_sampler.py failed"; exit 1; }

run_case() {  # name, checkpoint, wide(0/1)
    local name=$1 ck=$2 wide=$3 g="$T/g_$1"
    if ! $MACT export golden --model "$ck" --image "$T/img0.npy" --image "$T/img1.npy" --task "$TASK" --state "$STATE" \
            --seed $((SEED + 7)) --out "$g" >"$T/$name.golden.log" 2>&1; then
        echo "FAIL export_${name}_golden: $(tail -1 "$T/$name.golden.log")"; return; fi
    echo "INFO $name: $(cat "$T/$name.golden.log")"
    local f
    for f in vision_io llm_split0_io action_context_io action_step_io action_loop_io e2e_io; do
        [ -f "$g/$f.npz" ] || echo "FAIL export_${name}_golden: $f.npz missing"; done
    $MACT parity "$g" --model "$ck" >"$T/$name.parity.log" 2>&1; local prc=$?
    awk -v n="$name" 'NR > 2 && NF == 7 && ($NF == "PASS" || $NF == "FAIL") {
        r = ($NF == "PASS" && $4 + 0 == 0) ? "PASS" : "FAIL"
        printf "%s export_%s_golden_parity/%s/%s cosine=%s (>= 0.99999) max_abs_err=%s (== 0: the same stage code)\n", r, n, $1, $2, $3, $4 }
        /could not run/ { print "FAIL export_" n "_golden_parity: " $0 }' "$T/$name.parity.log"
    [ $prc -eq 0 ] || echo "FAIL export_${name}_golden_parity: mact parity exited $prc"
    # fp32, native GridSample
    if $MACT export onnx --model "$ck" --out "$T/o_$name" >"$T/$name.onnx.log" 2>&1; then
        sed "s/^/INFO $name onnx: /" "$T/$name.onnx.log"
        check "$T/o_$name" "$g" --label "export_${name}_onnx_fp32" | grep -E '^(PASS|FAIL|INFO) '
    else echo "FAIL export_${name}_onnx_fp32: $(tail -1 "$T/$name.onnx.log")"; fi
    # fp32, decomposed sampler (the vision graph only on the wide checkpoint: the others do not change)
    local only=; [ "$wide" = 1 ] && only="--only vision"
    if $MACT export onnx --model "$ck" --out "$T/od_$name" --grid-sample decomposed $only >"$T/$name.onnxd.log" 2>&1; then
        check "$T/od_$name" "$g" --label "export_${name}_onnx_decomposed" --peer "$T/o_$name" --peer-tol 1e-5 | grep -E '^(PASS|FAIL) '
    else echo "FAIL export_${name}_onnx_decomposed: $(tail -1 "$T/$name.onnxd.log")"; fi
    rm -rf "$T/od_$name"
    # fixed N (tiny only)
    if [ "$wide" = 0 ]; then
        local N; N=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['seq_len'])" "$g/trace.json")
        if $MACT export onnx --model "$ck" --out "$T/on_$name" --seq-len "$N" >"$T/$name.onnxn.log" 2>&1; then
            check "$T/on_$name" "$g" --label "export_${name}_onnx_seqlen$N" | grep -E '^(PASS|FAIL) '
        else echo "FAIL export_${name}_onnx_seqlen: $(tail -1 "$T/$name.onnxn.log")"; fi
        rm -rf "$T/on_$name"
    fi
    rm -rf "$T/o_$name"
    # fp16 weights: published, not gated
    if $MACT export onnx --model "$ck" --out "$T/oh_$name" --weights fp16 >"$T/$name.onnxh.log" 2>&1; then
        check "$T/oh_$name" "$g" --label "export_${name}_onnx_fp16" --info | grep -E '^(FAIL|INFO) ' | grep -v ' ms ('
    else echo "FAIL export_${name}_onnx_fp16: $(tail -1 "$T/$name.onnxh.log")"; fi
    rm -rf "$T/oh_$name"
}
run_case tiny "$T/ck_tiny" 0
run_case tiny_nosampler "$T/ck_tiny_nosampler" 0
if [ "${MACT_EXPORT_WIDE:-1}" != 0 ]; then
    if $MACT synth wide "$T/ck_wide" --seed $((SEED + 2)) >/dev/null 2>&1; then run_case wide "$T/ck_wide" 1
    else echo "FAIL export_setup: mact synth wide failed"; fi
    rm -rf "$T/ck_wide"
fi

# ---- bad input ----
nothing_left() { ! ls -d "$1" "$1".tmp.* >/dev/null 2>&1; }
bad() {  # name, expected text in the message, command...
    local name=$1 want=$2; shift 2
    local out; out=$("$@" 2>&1); local rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out" && nothing_left "$T/bad_out"; then echo "PASS export_bad_$name: refused: $(grep -F -- "$want" <<<"$out" | head -1)"
    else echo "FAIL export_bad_$name: rc=$rc, want '$want' and no folder: $(tail -1 <<<"$out")"; ls -d "$T"/bad_out* 2>/dev/null; rm -rf "$T"/bad_out*; fi
}
cp -r "$T/ck_tiny" "$T/ck_rope"
$PY - "$T/ck_rope/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); c.setdefault("text_config", {})["rope_scaling"] = {"type": "linear", "factor": 2.0}
json.dump(c, open(sys.argv[1], "w"))
PYEOF
GOLD=(--image "$T/img0.npy" --image "$T/img1.npy" --task "$TASK" --state "$STATE")
bad rope_scaling_onnx "rope_scaling" $MACT export onnx --model "$T/ck_rope" --out "$T/bad_out"
bad rope_scaling_golden "rope_scaling" $MACT export golden --model "$T/ck_rope" "${GOLD[@]}" --out "$T/bad_out"
bad seq_len_too_long "max_position_embeddings" $MACT export onnx --model "$T/ck_tiny" --out "$T/bad_out" --seq-len 1000000
bad only_unknown "not a component" $MACT export onnx --model "$T/ck_tiny" --out "$T/bad_out" --only llm_split9
bad state_dim "expects 8" $MACT export golden --model "$T/ck_tiny" --image "$T/img0.npy" --image "$T/img1.npy" --task t --state "1 2" --out "$T/bad_out"
bad injected_onnx "failure injected" env MACT_EXPORT_FAIL_AT=action_context $MACT export onnx --model "$T/ck_tiny" --out "$T/bad_out"
bad injected_golden "failure injected" env MACT_EXPORT_FAIL_AT=action_step_io.npz $MACT export golden --model "$T/ck_tiny" "${GOLD[@]}" --out "$T/bad_out"
mkdir -p "$T/bad_full" && echo keep >"$T/bad_full/keep.txt"
out=$($MACT export onnx --model "$T/ck_tiny" --out "$T/bad_full" 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "not empty" <<<"$out" && [ "$(ls "$T/bad_full")" = keep.txt ] && ! ls -d "$T"/bad_full.tmp.* >/dev/null 2>&1; then
    echo "PASS export_bad_out_not_empty: refused, folder as it was: $out"
else echo "FAIL export_bad_out_not_empty: rc=$rc $out"; fi
# an empty --out folder is taken (replaced atomically)
mkdir -p "$T/empty_out"
if $MACT export onnx --model "$T/ck_tiny" --out "$T/empty_out" --only action_context >/dev/null 2>&1 && [ -f "$T/empty_out/action_context/action_context.onnx" ]; then
    echo "PASS export_empty_out_taken"; else echo "FAIL export_empty_out_taken"; fi
rm -rf "$T/ck_rope" "$T/empty_out"
