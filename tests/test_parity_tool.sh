#!/usr/bin/env bash
# `mact parity` itself: a golden set without llm_splits in trace.json still runs every split (ranges
# from the keys), a boundary file that cannot be run is a FAIL (never a pass), an empty directory is an
# error, and a wrong answer is caught (the gate can fail).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/parity_tool; rm -rf "$T"; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED"
$PY tests/reference/gen_checkpoint.py tiny "$T/m" --seed $SEED >/dev/null && \
$PY tests/reference/make_golden.py "$T/m" "$T/g" --seed $((SEED + 1)) >/dev/null || { echo "FAIL parity_tool_setup"; exit 1; }
rows() { grep -cE ' (PASS|FAIL)$' <<<"$1"; }
full=$($MACT parity "$T/g" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 0 ] && echo "PASS parity_tool_baseline ($(rows "$full") rows)" || { echo "FAIL parity_tool_baseline: $full"; }
cp -r "$T/g" "$T/g2"
$PY -c "import json;p='$T/g2/trace.json';t=json.load(open(p));t.pop('llm_splits');json.dump(t,open(p,'w'))"
out=$($MACT parity "$T/g2" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(rows "$out")" = "$(rows "$full")" ] && echo "PASS parity_tool_splits_from_keys ($(rows "$out") rows)" \
    || echo "FAIL parity_tool_splits_from_keys: rc=$rc rows $(rows "$out") vs $(rows "$full"): $out"
cp -r "$T/g" "$T/g3"
$PY -c "
import numpy as np
z = dict(np.load('$T/g3/vision_io.npz')); z.pop('image_embeds'); np.savez('$T/g3/vision_io.npz', **z)"
out=$($MACT parity "$T/g3" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "vision.*could not run.*image_embeds.*FAIL" <<<"$out" && echo "PASS parity_tool_missing_member_fails" \
    || echo "FAIL parity_tool_missing_member_fails: rc=$rc: $out"
cp -r "$T/g" "$T/g4"
$PY -c "
import numpy as np
z = dict(np.load('$T/g4/action_context_io.npz')); z['v_ctx'] = z['v_ctx'] * 1.01; np.savez('$T/g4/action_context_io.npz', **z)"
out=$($MACT parity "$T/g4" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "action_context.*v_ctx.* no .*FAIL" <<<"$out" && echo "PASS parity_tool_wrong_answer_fails" \
    || echo "FAIL parity_tool_wrong_answer_fails: rc=$rc: $out"
mkdir -p "$T/empty"; echo '{}' > "$T/empty/trace.json"
out=$($MACT parity "$T/empty" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "no golden boundary file" <<<"$out" && echo "PASS parity_tool_empty_dir" || echo "FAIL parity_tool_empty_dir: rc=$rc: $out"
