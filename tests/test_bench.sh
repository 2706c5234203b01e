#!/usr/bin/env bash
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm
# kernels: via-engine
# asan: skip (the timing front end: the engine paths it drives run under ASan in test_api, test_predict.sh and test_parity.sh, the pack cache in test_pack_cache.sh)
# `mact bench` works end to end in every precision on a tiny checkpoint (the numbers themselves are not
# checked: no timing assertions in tests): exit 0, every stage row, the flow-step and weight-stream lines, the
# staged run equal to the pipeline run (bitwise), the int8 peak lines in int8; a second run with --pack-cache
# maps the cache; bad arguments are refused with a message.
set -u
cd "$(dirname "$0")/.."
MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/bench; rm -rf "$T"; mkdir -p "$T"
$MACT synth tiny "$T/model" --seed 4 >/dev/null || { echo "FAIL bench_synth: mact synth tiny failed"; exit 1; }
# which kernels this build and CPU run (and $MACT_KERNELS asks for): packs and int8 exist only on some
KERN=$($MACT inspect "$T/model" | sed -n 's/^kernels: \([^ ]*\).*/\1/p')
[ -n "$KERN" ] && echo "INFO bench: kernels $KERN" || echo "FAIL bench_kernels: mact inspect names no kernels"
for p in fp32 bf16 int8; do
    $MACT bench --model "$T/model" --precision $p --iters 2 >"$T/$p.log" 2>&1; rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit $rc"
    for row in vision llm action total; do grep -qE "^  $row +[0-9]" "$T/$p.log" || why="$why; no $row row"; done
    grep -q 'staged vs pipeline max |diff| 0$' "$T/$p.log" || why="$why; staged and pipeline outputs differ"
    grep -q "precision $p;" "$T/$p.log" || why="$why; precision not $p"
    grep -qE 'then [0-9.]+ ms per flow step' "$T/$p.log" || why="$why; no flow-step line"
    grep -qE 'flow-step weight stream .*M = 1 [0-9.]+ GB/s .*M = H [0-9.]+ GB/s' "$T/$p.log" \
        || why="$why; no flow-step weight stream line"
    if [ $p = int8 ] && case $KERN in *vnni*) true;; *) false;; esac; then
        grep -q 'int8 GEMM peak' "$T/$p.log" || why="$why; no int8 peak line"
    fi
    [ -z "$why" ] && echo "PASS bench_$p" || { echo "FAIL bench_$p: ${why#; }"; tail -3 "$T/$p.log"; }
done
if [ "$KERN" != ref ] && [ "$KERN" != avx2 ]; then
    $MACT bench --model "$T/model" --iters 1 --pack-cache "$T" >/dev/null 2>&1
    $MACT bench --model "$T/model" --iters 1 --pack-cache "$T" >"$T/cached.log" 2>&1
    grep -q 'from the pack cache' "$T/cached.log" && echo "PASS bench_pack_cache" \
        || { echo "FAIL bench_pack_cache: second run did not map the cache"; grep cold "$T/cached.log"; }
fi
out=$($MACT bench --model "$T/model" --precision fp16 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'fp32, bf16 or int8' && echo "PASS bench_bad_precision" \
    || echo "FAIL bench_bad_precision: exit $rc: $out"
out=$($MACT bench --model "$T/no_such_model" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'no_such_model' && echo "PASS bench_missing_model" \
    || echo "FAIL bench_missing_model: exit $rc: $out"
