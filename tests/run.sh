#!/usr/bin/env bash
# tests/run.sh [--fast] [NAME...]: runs the test suites and prints `N passed, N failed` as its last line; exits
# non-zero when anything failed. Each suite prints `PASS name` / `FAIL name: why` lines; one that exits
# non-zero without printing a FAIL line counts as a failure. After each suite its wall time is printed
# (`[test_parity.sh] 41.2 s`).
#
# NAME selects suites, run in the order given: a C test program (`test_kernels`: $BUILD/tests/test_kernels,
# built from tests/c/test_kernels.c) or a shell suite (`test_parity` or `test_parity.sh`: tests/test_parity.sh).
# An unknown NAME is an error that lists the valid names. Without NAME: every suite (C programs first).
#
# --fast: the fast tier for the edit-compile-test loop (`make check`): no PyTorch and no npm, about two
# minutes on 2 cores. Without NAME it runs only the suites marked fast: a line `/* tier: fast ... */` in the C test's
# source (tests/c/NAME.c) or `# tier: fast ...` in the shell suite. With NAME it runs the named suites, fast
# tier or not. Either way the shared tiny checkpoint is written by `$BUILD/mact synth tiny` (C) instead of
# tests/reference/gen_checkpoint.py (PyTorch).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export PYTHON=${PYTHON:-/usr/bin/python3}
export MACT_BIN="$BUILD/mact"
# a suite run inside a Slurm array task or a Kubernetes Indexed Job must not shard its own evaluations
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_MAX SLURM_ARRAY_TASK_STEP \
      SLURM_ARRAY_JOB_ID JOB_COMPLETION_INDEX JOB_COMPLETION_COUNT

usage() { echo "usage: tests/run.sh [--fast] [NAME...]   (NAME: a C test program or tests/test_*.sh suite)"; }
fast=0; names=()
for a in "$@"; do
    case "$a" in
        --fast) fast=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "tests/run.sh: unknown option $a" >&2; usage >&2; exit 2 ;;
        *) names+=("$a") ;;
    esac
done

# The suites there are: C programs built in $BUILD/tests (their sources in tests/c/), shell suites in tests/.
c_built=(); c_src=(); sh_all=()
for t in "$BUILD"/tests/test_*; do [ -f "$t" ] && [ -x "$t" ] && c_built+=("$(basename "$t")"); done
for t in tests/c/test_*.c; do [ -f "$t" ] && c_src+=("$(basename "$t" .c)"); done
for t in tests/test_*.sh; do [ -f "$t" ] && sh_all+=("$(basename "$t")"); done
has() { local x=$1; shift; local y; for y in "$@"; do [ "$y" = "$x" ] && return 0; done; return 1; }
is_fast() { grep -qE '^(/\* |# )tier: fast\b' "$1"; }  # file with the marker

# The selection: entries "c:NAME" and "sh:NAME.sh".
sel=()
if [ ${#names[@]} -eq 0 ]; then
    for n in "${c_built[@]}"; do
        [ "$fast" -eq 1 ] && ! { [ -f "tests/c/$n.c" ] && is_fast "tests/c/$n.c"; } && continue
        sel+=("c:$n")
    done
    for n in "${sh_all[@]}"; do
        [ "$fast" -eq 1 ] && ! is_fast "tests/$n" && continue
        sel+=("sh:$n")
    done
else
    bad=0
    for a in "${names[@]}"; do
        n=$(basename "$a")
        if [ "${n%.sh}" = "$n" ] && has "$n" "${c_built[@]}"; then e="c:$n"
        elif has "${n%.sh}.sh" "${sh_all[@]}"; then e="sh:${n%.sh}.sh"
        elif has "$n" "${c_src[@]}"; then
            echo "tests/run.sh: $n (tests/c/$n.c) is not built in $BUILD/tests: run make (BUILD=$BUILD) first" >&2
            bad=1; continue
        else
            echo "tests/run.sh: unknown suite '$a'" >&2; bad=1; continue
        fi
        has "$e" "${sel[@]}" || sel+=("$e")
    done
    if [ "$bad" -ne 0 ]; then
        valid=$(printf '%s\n' "${c_built[@]}" "${c_src[@]}" "${sh_all[@]}" | sort -u | paste -sd ' ')
        echo "valid names (C programs in $BUILD/tests, shell suites in tests/): $valid" >&2
        exit 2
    fi
fi

# A scratch directory made here is removed when every test passed and kept (its path printed) when one
# failed, so the logs can be read; a whole run leaves ~1.7 GB of checkpoints in it.
own_tmp=0
if [ -z "${MACT_TMP:-}" ]; then MACT_TMP=$(mktemp -d /tmp/mact-test.XXXXXX); own_tmp=1; fi
export MACT_TMP
passed=0; failed=0
# One tiny random checkpoint shared by the C API tests (each shell suite that needs more makes its own);
# written only when a C program runs.
export MACT_TEST_MODEL="$MACT_TMP/tiny_model"
if printf '%s\n' "${sel[@]}" | grep -q '^c:'; then
    if [ "$fast" -eq 1 ]; then gen=("$MACT_BIN" synth tiny "$MACT_TEST_MODEL"); what="$MACT_BIN synth tiny"
    else gen=("$PYTHON" tests/reference/gen_checkpoint.py tiny "$MACT_TEST_MODEL"); what="tests/reference/gen_checkpoint.py tiny"; fi
    "${gen[@]}" >"$MACT_TMP/gen_tiny.log" 2>&1 \
        || { echo "FAIL setup: $what failed:"; tail -5 "$MACT_TMP/gen_tiny.log"; failed=1; }
fi
now() { date +%s.%N; }
run_one() {  # name, command...
    local name=$1; shift
    local log="$MACT_TMP/$(echo "$name" | tr '/ ' '__').log"
    local t0; t0=$(now)
    "$@" >"$log" 2>&1; local rc=$?
    local t1; t1=$(now)
    local p f; p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
    grep -E '^(PASS|FAIL|INFO) ' "$log" | sed "s|^|[$name] |"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "[$name] FAIL exited $rc without a FAIL line; last output:"; tail -n 20 "$log" | sed 's/^/    /'
        f=1
    fi
    awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN { printf "[%s] %.1f s\n", n, b - a }'
    passed=$((passed + p)); failed=$((failed + f))
}
for e in "${sel[@]}"; do
    n=${e#*:}
    case "$e" in
        c:*) run_one "$n" "$BUILD/tests/$n" ;;
        sh:*) run_one "$n" bash "tests/$n" ;;
    esac
done
if [ "$own_tmp" -eq 1 ]; then
    if [ "$failed" -eq 0 ]; then rm -rf "$MACT_TMP"; else echo "logs kept in $MACT_TMP"; fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
