#!/usr/bin/env bash
# kernels: via-engine (its checks are of the front end; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): Debian's python3 with numpy and PIL; no PyTorch, no npm
# The Python package (python/mact, ctypes over libmact.so, and its toolkit modules over libmact_data.so and
# libmact_compress.so, checked against the CLI in test_toolkits.py): tests/python/test_*.py on a `mact synth tiny`
# checkpoint, once imported from the build tree and once (a subset) from a `pip install --target` copy that finds
# the library on the system loader path. Each test prints its own PASS/FAIL line (tests/python/runner.py).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
MACT=${MACT_BIN:-$BUILD/mact}
MACT=$(cd "$(dirname "$MACT")" && pwd)/$(basename "$MACT")  # absolute: one run is from another directory
T=${MACT_TMP:-$(mktemp -d)}/python; rm -rf "$T"; mkdir -p "$T"
fails=0
REPO=$(pwd)
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }

if ! "$PY" -c 'import numpy, PIL' 2>"$T/import.log"; then
    fail python_deps "$PY lacks numpy or PIL (scripts/setup.sh --test installs python3-numpy python3-pil): $(tail -1 "$T/import.log")"
    exit 1
fi
LIB=$(cd "$BUILD" && pwd)/libmact.so
DATA_LIB=$(dirname "$LIB")/libmact_data.so COMPRESS_LIB=$(dirname "$LIB")/libmact_compress.so
for f in "$LIB" "$DATA_LIB" "$COMPRESS_LIB"; do [ -f "$f" ] || { fail python_lib "$f missing: run make"; exit 1; }; done
# a sanitized library needs its runtime loaded first into python (and python's own leaks are not ours)
pre=""
if nm -D "$LIB" 2>/dev/null | grep -q __asan_; then
    pre="$(${CC:-cc} -print-file-name=libasan.so):$(${CC:-cc} -print-file-name=libubsan.so)"
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
elif nm -D "$LIB" 2>/dev/null | grep -q __tsan_; then
    pre="$(${CC:-cc} -print-file-name=libtsan.so)"
fi
[ -n "$pre" ] && echo "INFO sanitized libmact: LD_PRELOAD=$pre"

"$MACT" synth tiny "$T/model" --seed 5 >"$T/synth.log" 2>&1 || { fail python_model "mact synth tiny failed"; exit 1; }
mkdir -p "$T/work"
export MACT_PY_MODEL="$T/model" MACT_PY_DIR="$T/work" MACT_BIN="$MACT" CC="${CC:-cc}"

# 1. from the build tree: python/ on sys.path, the libraries named by MACT_LIBRARY, MACT_DATA_LIBRARY, ...
MACT_LIBRARY="$LIB" MACT_DATA_LIBRARY="$DATA_LIB" MACT_COMPRESS_LIBRARY="$COMPRESS_LIB" LD_PRELOAD="$pre" "$PY" tests/python/runner.py || fails=$((fails + 1))

# 2. pip install into a target directory (from a copy: pip builds in the source tree), then import from there
# with no MACT_LIBRARY (nor the toolkits'): the libraries come from the loader path (LD_LIBRARY_PATH)
cp -r python "$T/src"
if "$PY" -m pip install --no-deps --no-build-isolation --no-index --target "$T/site" "$T/src" >"$T/pip.log" 2>&1 \
        && [ -f "$T/site/mact/__init__.py" ]; then
    pass "python_pip_install (pip install --target: $(ls "$T/site" | paste -sd ' '))"
    (cd "$T" && env -u MACT_LIBRARY -u MACT_DATA_LIBRARY -u MACT_COMPRESS_LIBRARY LD_LIBRARY_PATH="$(dirname "$LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        LD_PRELOAD="$pre" MACT_PY_PACKAGE="$T/site" MACT_PY_INSTALLED=1 \
        "$PY" "$REPO/tests/python/runner.py" test_installed) || fails=$((fails + 1))
else
    fail python_pip_install "$(tail -3 "$T/pip.log")"
fi
[ "$fails" -eq 0 ]
