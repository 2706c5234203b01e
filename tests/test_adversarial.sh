#!/usr/bin/env bash
# kernels: via-engine
# The adversarial catalogue (tests/adversarial/catalogue.py): several hundred hostile inputs generated from
# one `mact synth tiny` checkpoint, each checked for its exit code, a message naming the problem, nothing
# written, and no sanitizer report (under `make asan` the binary is the ASan+UBSan build).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WORK=${MACT_TMP:-$(mktemp -d)}/adversarial
rm -rf "$WORK"
"${PYTHON:-/usr/bin/python3}" tests/adversarial/catalogue.py "$BUILD/mact" "$WORK"
rc=$?
[ "$rc" -eq 0 ] && rm -rf "$WORK"
exit $rc
