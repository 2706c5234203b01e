#!/usr/bin/env bash
# Runs every test program and prints `N passed, N failed`. Each program prints `PASS name` /
# `FAIL name: why` lines; a program that exits non-zero without printing a FAIL line counts as a failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export PYTHON=${PYTHON:-/usr/bin/python3}
export MACT_BIN="$BUILD/mact"
# A scratch directory made here is removed when every test passed and kept (its path printed) when one
# failed, so the logs can be read; a run leaves ~1.7 GB of checkpoints in it.
own_tmp=0
if [ -z "${MACT_TMP:-}" ]; then MACT_TMP=$(mktemp -d /tmp/mact-test.XXXXXX); own_tmp=1; fi
export MACT_TMP
passed=0; failed=0
# One tiny random checkpoint shared by the C API tests (each suite that needs more makes its own).
export MACT_TEST_MODEL="$MACT_TMP/tiny_model"
"$PYTHON" tests/reference/gen_checkpoint.py tiny "$MACT_TEST_MODEL" >"$MACT_TMP/gen_tiny.log" 2>&1 \
    || { echo "FAIL setup: tests/reference/gen_checkpoint.py tiny failed:"; tail -5 "$MACT_TMP/gen_tiny.log"; failed=1; }
run_one() {  # name, command...
    local name=$1; shift
    local log="$MACT_TMP/$(echo "$name" | tr '/ ' '__').log"
    "$@" >"$log" 2>&1; local rc=$?
    local p f; p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    grep -E '^(PASS|FAIL|INFO) ' "$log" | sed "s|^|[$name] |"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$name] FAIL exited $rc without a FAIL line; last output:"; tail -n 20 "$log" | sed 's/^/    /'
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in tests/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t")" bash "$t"
done
if [ "$own_tmp" -eq 1 ]; then
    if [ "$failed" -eq 0 ]; then rm -rf "$MACT_TMP"; else echo "logs kept in $MACT_TMP"; fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
