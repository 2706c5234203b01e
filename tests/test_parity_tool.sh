#!/usr/bin/env bash
# kernels: via-engine
# `mact parity` itself: a golden set without llm_splits in trace.json still runs every split (ranges
# from the keys), a boundary file that cannot be run is a FAIL (never a pass), an empty directory is an
# error, and a wrong answer is caught (the gate can fail); the RTC boundaries and trace.json "rtc" likewise.
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
# RTC boundaries (action_rtc_io / action_rtc_vjp_io, trace.json "rtc"): both rows present in the baseline; a
# malformed "rtc" is an error naming it; RTC files without settings cannot run; absent files are skipped; the
# vjp file holding the identity answer fails (the vjp is computed, not the identity); a wrong row width cannot run
for r in action_rtc action_rtc_vjp; do
    grep -qE "^$r +actions_norm .* PASS$" <<<"$full" && echo "PASS parity_tool_${r}_row" \
        || echo "FAIL parity_tool_${r}_row: no passing $r row: $full"
done
i=0
for bad in '{"inference_delay": 2, "execution_horizon": 8, "schedule": "linear", "max_guidance_weight": 10, "x": 1}' \
           '{"inference_delay": 2, "execution_horizon": 8, "schedule": "cubic", "max_guidance_weight": 10}' \
           '{"inference_delay": -1, "execution_horizon": 8, "schedule": "linear", "max_guidance_weight": 10}' \
           '{"inference_delay": 1.5, "execution_horizon": 8, "schedule": "linear", "max_guidance_weight": 10}' \
           '{"inference_delay": 2, "execution_horizon": 8, "schedule": "linear", "max_guidance_weight": -1}' \
           '{"inference_delay": 2, "execution_horizon": 8, "schedule": "linear", "max_guidance_weight": "10"}' \
           '{"inference_delay": 2, "schedule": "linear", "max_guidance_weight": 10}' \
           '3'; do
    i=$((i + 1)); d="$T/gr$i"; cp -r "$T/g" "$d"
    $PY -c "import json,sys;p='$d/trace.json';t=json.load(open(p));t['rtc']=json.loads(sys.argv[1]);json.dump(t,open(p,'w'))" "$bad"
    out=$($MACT parity "$d" --model "$T/m" 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q "error: trace.json: rtc: " <<<"$out" && echo "PASS parity_tool_rtc_bad_trace_$i" \
        || echo "FAIL parity_tool_rtc_bad_trace_$i ($bad): rc=$rc: $(tail -2 <<<"$out")"
    rm -rf "$d"
done
cp -r "$T/g" "$T/gn"
$PY -c "import json;p='$T/gn/trace.json';t=json.load(open(p));t['rtc']=None;json.dump(t,open(p,'w'))"
out=$($MACT parity "$T/gn" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 1 ] && [ "$(grep -c 'action_rtc.*could not run.*no "rtc" settings.*FAIL' <<<"$out")" = 2 ] \
    && echo "PASS parity_tool_rtc_files_without_settings" || echo "FAIL parity_tool_rtc_files_without_settings: rc=$rc: $out"
rm -f "$T/gn/action_rtc_io.npz" "$T/gn/action_rtc_vjp_io.npz"
out=$($MACT parity "$T/gn" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q action_rtc <<<"$out" && [ "$(rows "$out")" = "$(( $(rows "$full") - 2 ))" ] \
    && echo "PASS parity_tool_rtc_absent_skipped" || echo "FAIL parity_tool_rtc_absent_skipped: rc=$rc: $out"
cp -r "$T/g" "$T/gv"
$PY -c "
import numpy as np
z = dict(np.load('$T/gv/action_rtc_vjp_io.npz')); z['actions_norm'] = np.load('$T/gv/action_rtc_io.npz')['actions_norm']
np.savez('$T/gv/action_rtc_vjp_io.npz', **z)
z = dict(np.load('$T/gv/action_rtc_io.npz')); z['prev_actions_norm'] = np.concatenate([z['prev_actions_norm']] * 2, -1)
np.savez('$T/gv/action_rtc_io.npz', **z)"
out=$($MACT parity "$T/gv" --model "$T/m" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qE '^action_rtc_vjp +actions_norm .* no +FAIL$' <<<"$out" \
    && echo "PASS parity_tool_rtc_vjp_identity_answer_fails" || echo "FAIL parity_tool_rtc_vjp_identity_answer_fails: rc=$rc: $out"
grep -q 'action_rtc .*could not run.*prev_actions_norm.*FAIL' <<<"$out" \
    && echo "PASS parity_tool_rtc_bad_row_width" || echo "FAIL parity_tool_rtc_bad_row_width: $out"
