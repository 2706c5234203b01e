#!/usr/bin/env bash
# kernels: via-engine
# Loader refusals through the CLI: every broken checkpoint is a distinct, clear error (never a crash),
# and the LeRobot and LeRobot+LoRA layouts load and match the reference (which merges LoRA itself).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/loader; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED"
$PY tests/reference/gen_checkpoint.py tiny "$T/base" --seed "$SEED" >/dev/null || { echo "FAIL gen: generator failed"; exit 1; }
expect_err() {  # case, expected message fragment
    local case=$1 frag=$2
    $PY tests/reference/mutate_checkpoint.py "$T/base" "$T/$case" "$case" >/dev/null || { echo "FAIL loader_$case: mutate failed"; return; }
    local out rc
    out=$($MACT inspect "$T/$case" 2>&1); rc=$?
    if [ $rc -eq 1 ] && grep -qF -- "$frag" <<<"$out"; then echo "PASS loader_$case ($out)"
    else echo "FAIL loader_$case: rc=$rc, expected '$frag' in: $out"; fi
}
expect_err drop "missing tensor 'model.transformer.blocks.1.mlp.ff_out.weight'"
expect_err rename "attention_norm.weight_renamed"
expect_err reshape "has shape"
expect_err extra "unexpected tensor 'model.transformer.extra_tensor.weight'"
expect_err sampler_off "does not set use_grid_token_sampler"
expect_err sampler_missing "has no grid token sampler tensors"
expect_err truncate "model.safetensors"
expect_err header_past_eof "header"
expect_err overlap "overlap"
expect_err dtype_size "wte.embedding"
expect_err bad_json "JSON"
expect_err bad_config "config.json"
expect_err drop_vit_block "is not stored"
expect_err taps_out_of_range "vit_layers[1] = -99"
out=$($MACT inspect "$T/base" 2>&1) && grep -q "grid token sampler: K=16" <<<"$out" \
    && echo "PASS loader_inspect_ok" || echo "FAIL loader_inspect_ok: $out"
# LeRobot key layout and LoRA adapters, checked numerically against the reference's own merge.
for v in lerobot lora; do
    extra="--lerobot"; [ $v = lora ] && extra="--lerobot --lora 4 --lora-alpha 16"
    $PY tests/reference/gen_checkpoint.py tiny "$T/$v" --seed "$SEED" $extra >/dev/null \
        && $PY tests/reference/make_golden.py "$T/$v" "$T/g_$v" --seed $((SEED + 1)) >/dev/null \
        || { echo "FAIL loader_$v: reference failed"; continue; }
    out=$($MACT parity "$T/g_$v" --model "$T/$v" 2>&1); rc=$?
    # one line: the closest row to its gate on a pass, every failing row on a failure (the gates: parity's last line)
    rows=$(awk '($NF == "PASS" || $NF == "FAIL") && NF >= 7 {
                    r = $5 > 0 ? $4 / $5 : 0; if (r >= worst) { worst = r; w = $1 "/" $2 " max_abs " $4 " max|ref| " $5 }
                    if ($3 < cmin || cmin == "") cmin = $3
                    if ($NF == "FAIL") { f = f s $1 "/" $2 " cos " $3 " max_abs " $4 " max|ref| " $5 " in_tol " $6; s = "; " } }
                /could not run/ { f = f s $0; s = "; " }
                END { printf "%s", f != "" ? "failing: " f : "min cosine " cmin ", largest max_abs / max|ref|: " w }' <<<"$out")
    gates=$(sed -n 's/^parity: [0-9]* passed, [0-9]* failed (\(.*\))$/\1/p' <<<"$out")
    if [ $rc -eq 0 ]; then echo "PASS loader_${v}_parity ($rows; gates: $gates)"
    else echo "FAIL loader_${v}_parity (exit $rc; $rows; gates: $gates)"; fi
done
