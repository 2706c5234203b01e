#!/usr/bin/env bash
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# A non-finite weight is never a printed action: a checkpoint with one NaN (or inf) in a weight of the
# vision tower, the LLM or the action expert makes `mact run` fail (exit 1), name the stage whose output went
# non-finite, print no action and write no dump; in every precision and on the reference kernels. A NaN in a
# vector (norm, bias) is refused at load naming the tensor. The
# checkpoint is `mact synth tiny`, one tensor's bytes edited in place by a few lines of Python (stdlib only).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/nonfinite; rm -rf "$T"; mkdir -p "$T"
$MACT synth tiny "$T/good" --seed 11 >/dev/null || { echo "FAIL nonfinite_synth: mact synth tiny failed"; exit 1; }
"$PY" -c "
import numpy as np
np.save('$T/cam.npy', np.random.default_rng(3).integers(0, 256, (64, 80, 3), dtype=np.uint8))
" || { echo "FAIL nonfinite_inputs: numpy failed"; exit 1; }
# poison NAME VALUE OUT: a copy of the good checkpoint with element 5 of tensor NAME set to VALUE
poison() {
    rm -rf "$3"; cp -r "$T/good" "$3"
    "$PY" - "$3/model.safetensors" "$1" "$2" <<'PYEOF'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    t = h[name]
    a, _ = t["data_offsets"]
    if t["dtype"] == "F32":
        f.seek(8 + n + a + 5 * 4); f.write(struct.pack("<f", value))
    else:  # BF16: the upper half of the float's bits
        f.seek(8 + n + a + 5 * 2); f.write(struct.pack("<f", value)[2:])
PYEOF
}
check() {  # case name, tensor, value, stage words, extra args
    local name=$1 tensor=$2 val=$3 want=$4; shift 4
    poison "$tensor" "$val" "$T/$name"
    out=$($MACT run --model "$T/$name" --image "$T/cam.npy" --image "$T/cam.npy" --task "pick up the cube" \
          --state "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8" --seed 3 --dump "$T/$name.dump" "$@" 2>&1); rc=$?
    why=""
    [ $rc -eq 1 ] || why="exit $rc (want 1)"
    echo "$out" | grep -qi "non-finite" || why="$why; no 'non-finite' in the message"
    echo "$out" | grep -q "$want" || why="$why; the message does not name '$want'"
    echo "$out" | grep -qiE "^ *-?[0-9]+\.[0-9]+ +-?[0-9]" && why="$why; printed action rows"
    [ -e "$T/$name.dump" ] && why="$why; wrote $T/$name.dump"
    [ -z "$why" ] && echo "PASS nonfinite_$name: $(echo "$out" | tail -1)" || echo "FAIL nonfinite_$name: ${why#; } [$out]"
}
V=model.vision_backbone.image_vit.transformer.resblocks.0.attention.wq.weight
L=model.transformer.blocks.1.mlp.ff_out.weight
A=model.action_expert.blocks.0.mlp.down_proj.weight
for p in bf16 fp32 int8; do
    check "vision_nan_$p" $V nan "vision" --precision $p
    check "llm_inf_$p" $L inf "llm" --precision $p
    check "action_nan_$p" $A nan "action expert" --precision $p
done
MACT_KERNELS=ref check vision_nan_ref $V nan "vision"
MACT_KERNELS=ref check action_inf_ref $A -inf "action expert"
# a vector the stages read directly (here one never used for continuous actions) is refused at load, by name
for t in model.transformer.ln_f.weight model.vision_backbone.image_vit.transformer.resblocks.1.ffn_norm.bias; do
    check "load_$t" $t nan "tensor '$t' has a non-finite value"
done
# the unpoisoned checkpoint still runs (the test's inputs are good)
out=$($MACT run --model "$T/good" --image "$T/cam.npy" --image "$T/cam.npy" --task "pick up the cube" \
      --state "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8" --seed 3 2>&1); rc=$?
[ $rc -eq 0 ] && echo "PASS nonfinite_good_checkpoint_runs" || echo "FAIL nonfinite_good_checkpoint_runs: exit $rc: $out"
# NONFINITE_WEIGHTS_ONLY=1 (tests/test_arm64.sh under qemu): the cases above are the kernels'; the ones below are
# the command line's (strtod, the dump's files), the same on every CPU, and run once on the host
[ "${NONFINITE_WEIGHTS_ONLY:-0}" = 1 ] && exit 0
# --state takes every finite decimal strtod reads: an underflow (1e-310, a subnormal) and long digit strings are
# numbers; the actions equal those of the value they round to in float32 (0, 0.1); past float32's range and
# non-numbers are refused by name
state_run() { $MACT run --model "$T/good" --image "$T/cam.npy" --image "$T/cam.npy" --task "pick up the cube" --state "$1" --seed 3 --json 2>&1; }
ref0=$(state_run "0,0.2,0.3,0.4,0.5,0.6,0.7,0.8"); ref1=$(state_run "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8")
[ "${ref0%%\"n_tokens*}" != "${ref1%%\"n_tokens*}" ] && echo "PASS state_values_matter (0 and 0.1 give different actions)" \
    || echo "FAIL state_values_matter: the state's first value does not change the actions: the checks below prove nothing"
long="0.1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001"
for c in "underflow 1e-310 ref0" "tiny_decimal 0.$(printf '0%.0s' $(seq 1 80))1 ref0" "long_decimal $long ref1"; do
    set -- $c
    got=$(state_run "$2,0.2,0.3,0.4,0.5,0.6,0.7,0.8"); want=${!3}
    if [ "${got%%\"n_tokens*}" = "${want%%\"n_tokens*}" ] && [ "${got#\{\"actions}" != "$got" ]; then echo "PASS state_$1 (same actions as $3)"
    else echo "FAIL state_$1: ${got:0:200}"; fi
done
for c in "too_large:1e39:outside float32's range" "forty_digits:1234567890123456789012345678901234567890:outside float32's range" \
         "nan:nan:is not a number" "hex:0x10:is not a number"; do
    IFS=: read -r name v want <<<"$c"
    got=$(state_run "$v,0.2,0.3,0.4,0.5,0.6,0.7,0.8"); rc=$?
    if [ $rc -ne 0 ] && grep -q "$want" <<<"$got"; then echo "PASS state_refused_$name ($got)"; else echo "FAIL state_refused_$name: exit $rc: $got"; fi
done
# --dump writes into a sibling temporary folder and moves it into place at the end: a failed write (here the
# file-size limit hit at the first, largest file) leaves neither the folder nor a temporary one; an existing
# folder gets every file replaced, or none when one destination is not a regular file
dump_run() { $MACT run --model "$T/good" --image "$T/cam.npy" --image "$T/cam.npy" --task "pick up the cube" \
             --state "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8" --seed 3 --dump "$1" >"$1.log" 2>&1; }
D="$T/dumps"; mkdir -p "$D"
( trap '' XFSZ; ulimit -f 64; dump_run "$D/limited" ); rc=$?
left=$(ls "$D" | grep -v '\.log$' | paste -sd ' ')
[ $rc -ne 0 ] && [ -z "$left" ] && grep -q "dump" "$D/limited.log" && echo "PASS dump_failed_write_leaves_nothing ($(tail -1 "$D/limited.log" | cut -c1-120))" \
    || echo "FAIL dump_failed_write_leaves_nothing: exit $rc, left: '$left': $(tail -1 "$D/limited.log")"
mkdir -p "$D/existing"; echo old > "$D/existing/actions.npy"; echo mine > "$D/existing/notes.txt"
if dump_run "$D/existing" && [ "$(head -c 6 "$D/existing/actions.npy")" = $'\x93NUMPY' ] && [ -f "$D/existing/keys.npy" ] \
   && [ "$(cat "$D/existing/notes.txt")" = mine ]; then echo "PASS dump_into_existing_folder"
else echo "FAIL dump_into_existing_folder: $(tail -1 "$D/existing.log")"; fi
mkdir -p "$D/conflict/keys.npy"; echo old > "$D/conflict/actions.npy"
dump_run "$D/conflict"; rc=$?
left=$(ls "$D" | grep '\.tmp\.' | paste -sd ' ')
[ $rc -ne 0 ] && [ "$(cat "$D/conflict/actions.npy")" = old ] && [ -z "$left" ] && grep -q "not a regular file" "$D/conflict.log" \
    && echo "PASS dump_conflict_changes_nothing ($(tail -1 "$D/conflict.log" | cut -c1-140))" \
    || echo "FAIL dump_conflict_changes_nothing: exit $rc, tmp left '$left': $(tail -1 "$D/conflict.log")"
