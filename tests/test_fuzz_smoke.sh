#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (its libFuzzer targets are built with ASan + UBSan in every run)
# Smoke run of every libFuzzer target (fuzz/, `make fuzz`): builds them with clang (ASan + UBSan + libFuzzer)
# and runs each for FUZZ_SMOKE_SECONDS (default 6) from its seed corpus (fuzz/corpus/<target>). A crash, a
# sanitizer report or a build failure is a FAIL. Skips with an INFO line only when clang is absent
# (scripts/setup.sh --test installs clang-14 and libclang-rt-14-dev, so in CI it runs).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TMP=${MACT_TMP:-$(mktemp -d)}/fuzz_smoke
SECS=${FUZZ_SMOKE_SECONDS:-6}
CC_FUZZ=$(command -v clang-14 || command -v clang || true)
if [ -z "$CC_FUZZ" ]; then
    echo "INFO fuzz_smoke: clang not installed (scripts/setup.sh --test installs clang-14 + libclang-rt-14-dev); skipped"
    exit 0
fi
mkdir -p "$TMP"
# The fuzz objects get their own flags; the suite's BUILD may be an ASan tree, so keep them apart.
if ! make -s BUILD="$BUILD" FUZZ_CC="$CC_FUZZ" fuzz-build >"$TMP/build.log" 2>&1; then
    echo "FAIL fuzz_build: make fuzz-build failed:"; tail -20 "$TMP/build.log" | sed 's/^/    /'
    exit 1
fi
echo "PASS fuzz_build"
fail=0
for t in safetensors config normstats tokenizer npy image prompt video wire serve_openpi serve_act serve_vla serve_route lr_proto pickle parquet; do
    bin="$BUILD/fuzz/fuzz_$t"
    work="$TMP/corpus_$t"; mkdir -p "$work"
    dict=; [ -f "fuzz/dict/$t.dict" ] && dict="-dict=fuzz/dict/$t.dict"
    n_seeds=$(ls "fuzz/corpus/$t" 2>/dev/null | wc -l)
    if [ "$n_seeds" -lt 1 ]; then echo "FAIL fuzz_$t: no seed corpus in fuzz/corpus/$t"; fail=1; continue; fi
    "$bin" -max_total_time="$SECS" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 $dict \
        -artifact_prefix="$TMP/$t-" "$work" "fuzz/corpus/$t" >"$TMP/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/$t.log" | tail -1)
    if [ "$rc" -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:" "$TMP/$t.log"; then
        echo "FAIL fuzz_$t: exit $rc after ${runs:-?} runs; artifacts in $TMP:"
        grep -E "ERROR|runtime error|SUMMARY" "$TMP/$t.log" | head -5 | sed 's/^/    /'
        fail=1
    elif [ -z "$runs" ] || [ "$runs" -lt 100 ]; then
        echo "FAIL fuzz_$t: only ${runs:-0} executions in ${SECS} s"; fail=1
    else
        echo "PASS fuzz_$t ($runs executions in ${SECS} s, $n_seeds seeds)"
    fi
done
exit $fail
