#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# The data-only pickle reader and the TimedAction writer (src/server/pickle.c, docs/pickle.md) against Python's own
# pickles: tests/pickle/pk_cases.py makes them with pickle.dumps (protocols 1-5, numpy 1 and numpy 2 module names)
# from a fake `lerobot` package declared as LeRobot's, plus LeRobot PR #3048's format; build/tests/pickle_tool
# must print the same tree Python's pickle.loads gives (or refuse a case with the named error). Payloads that run a
# command when Python unpickles them must be refused by name while the marker they would create stays absent
# (Python's pickle.loads runs each first, so a payload that does nothing cannot pass). The writer's replies are
# read back by Python as LeRobot's robot client reads them, with torch.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
TOOL=$BUILD/tests/pickle_tool
T=${MACT_TMP:-$(mktemp -d)}/pickle
rm -rf "$T"
mkdir -p "$T"
fail=0
bad() { echo "FAIL $1: $2"; fail=1; }

if [ ! -x "$TOOL" ]; then echo "FAIL pickle_tool: $TOOL not built (make)"; exit 1; fi
if ! "$PY" -c 'import numpy' 2>/dev/null; then echo "FAIL pickle_numpy: $PY has no numpy (scripts/setup.sh --test installs python3-numpy)"; exit 1; fi
if ! "$PY" tests/pickle/pk_cases.py gen "$T" >"$T/gen.log" 2>&1; then
    echo "FAIL pickle_gen: tests/pickle/pk_cases.py gen failed:"; tail -5 "$T/gen.log" | sed 's/^/    /'; exit 1
fi
export PYTHONPATH="$T/pkg"

# ---- Python's pickles, parsed or refused ----
n_ok=0; n_err=0
for f in "$T"/cases/*.pkl; do
    n=$(basename "$f" .pkl)
    out=$("$TOOL" dump "$f" 2>&1); rc=$?
    if [ -f "$T/cases/$n.view" ]; then
        if [ $rc -ne 0 ]; then bad "pickle_$n" "refused: ${out:0:300}"
        elif [ "$out" != "$(cat "$T/cases/$n.view")" ]; then
            echo "$out" >"$T/cases/$n.c_view"
            bad "pickle_$n" "differs from Python's view ($T/cases/$n.view vs $n.c_view)"
        else n_ok=$((n_ok + 1)); fi
    else
        want=$(cat "$T/cases/$n.err")
        if [ $rc -ne 1 ] || ! grep -qF -- "$want" <<<"$out"; then bad "pickle_$n" "expected an error with '$want', got rc $rc: ${out:0:300}"
        else n_err=$((n_err + 1)); fi
    fi
done
[ $fail -eq 0 ] && echo "PASS pickle_python_views ($n_ok pickles read as Python reads them, $n_err refused by name)"
[ "$n_ok" -ge 40 ] || bad pickle_case_count "only $n_ok readable cases"

# ---- payloads that execute code under pickle.loads ----
marker="$T/PWNED"
evil_fail=0
for f in "$T"/evil/*.pkl; do
    n=$(basename "$f" .pkl)
    rm -f "$marker"
    (cd "$T" && timeout 20 "$PY" "$OLDPWD/tests/pickle/pk_cases.py" run-evil "$f") >/dev/null 2>&1
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$marker" ] && break; sleep 0.1; done
    if [ ! -e "$marker" ]; then bad "evil_$n" "control: Python's pickle.loads did not create the marker"; evil_fail=1; continue; fi
    rm -f "$marker"
    out=$("$TOOL" dump "$f" 2>&1); rc=$?
    want=$(cat "$T/evil/$n.err")
    sleep 0.2
    if [ -e "$marker" ]; then bad "evil_$n" "the marker appeared: something ran"; evil_fail=1
    elif [ $rc -ne 1 ] || ! grep -qF -- "$want" <<<"$out" || ! grep -q "is refused" <<<"$out"; then
        bad "evil_$n" "expected 'global $want is refused', got rc $rc: ${out:0:300}"; evil_fail=1
    fi
done
[ $evil_fail -eq 0 ] && echo "PASS pickle_evil_refused ($(ls "$T"/evil/*.pkl | wc -l) payloads ran under pickle.loads, all refused by name, no marker)"

# ---- limits from the command line reach the reader ----
out=$("$TOOL" dump "$T/cases/obs_float_p4.pkl" --max-array 1000 2>&1)
grep -q "max_array_bytes (1000)" <<<"$out" && echo "PASS pickle_limit_array" || bad pickle_limit_array "$out"
out=$("$TOOL" dump "$T/cases/config_p4.pkl" --max-depth 2 2>&1)
grep -q "max_depth (2)" <<<"$out" && echo "PASS pickle_limit_depth" || bad pickle_limit_depth "$out"
out=$("$TOOL" dump "$T/cases/obs_float_p4.pkl" --max-input 4096 2>&1)
grep -q "max_input (4096)" <<<"$out" && echo "PASS pickle_limit_input" || bad pickle_limit_input "$out"

# ---- the writer: LeRobot's client unpickles the reply ----
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "FAIL pickle_writer: $PY has no torch (scripts/setup.sh --test installs python3-torch)"; exit 1
fi
"$PY" - "$T/actions.f32" <<'EOF'
import sys, numpy as np
rng = np.random.default_rng(7)
a = rng.standard_normal((50, 6)).astype(np.float32) * 100
special = np.array([0.0, -0.0, 1e-45, -1.17549435e-38, 3.4028235e38, -3.4028235e38, 1 / 3, 1e-8, 65504, -1, 2**24 + 1, np.pi],
                   np.float32)
a.ravel()[:special.size] = special
a.tofile(sys.argv[1])
EOF
for fmt in pickle safe; do
    out_f="$T/reply.$fmt"
    if ! "$TOOL" write $fmt 50 6 1724400000.123456 0.03333333333333333 1234 "$T/actions.f32" "$out_f" 2>"$T/write.log"; then
        bad "pickle_writer_$fmt" "$(cat "$T/write.log")"; continue
    fi
    r=$("$PY" tests/pickle/pk_cases.py actions "$out_f" "$T/actions.f32" 50 6 1724400000.123456 0.03333333333333333 1234 $fmt 2>&1)
    [ "$r" = OK ] && echo "PASS pickle_writer_$fmt (50 TimedAction, timestamps and timesteps exact, actions bit-exact)" \
        || bad "pickle_writer_$fmt" "$r"
done
r=$("$PY" tests/pickle/pk_cases.py actions "$T/reply.pickle" "$T/actions.f32" 50 6 1724400000.123456 0.03333333333333333 1234 pickle float64 2>&1)
[ "$r" = OK ] && echo "PASS pickle_writer_default_float64 (float32 tensors under torch.set_default_dtype(float64))" \
    || bad pickle_writer_default_float64 "$r"
# one row, large and negative timesteps (LONG1), a single joint
"$PY" -c 'import numpy as np, sys; np.array([0.5], np.float32).tofile(sys.argv[1])' "$T/one.f32"
for i0 in -5 70000 5000000000; do
    "$TOOL" write pickle 1 1 0 0.1 $i0 "$T/one.f32" "$T/one.pkl" 2>"$T/write.log" || { bad pickle_writer_i0_$i0 "$(cat "$T/write.log")"; continue; }
    r=$("$PY" tests/pickle/pk_cases.py actions "$T/one.pkl" "$T/one.f32" 1 1 0 0.1 $i0 pickle 2>&1)
    [ "$r" = OK ] && echo "PASS pickle_writer_i0_$i0" || bad pickle_writer_i0_$i0 "$r"
done
"$TOOL" write pickle 0 6 0 0.1 0 /dev/null "$T/empty.pkl" 2>"$T/write.log" \
    && r=$("$PY" -c 'import pickle, sys; print(pickle.loads(open(sys.argv[1], "rb").read()))' "$T/empty.pkl" 2>&1) && [ "$r" = "[]" ] \
    && echo "PASS pickle_writer_empty" || bad pickle_writer_empty "${r:-$(cat "$T/write.log")}"
exit $fail
