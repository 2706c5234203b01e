# What the mact serve suites share (sourced by tests/test_serve*.sh): the paths, PASS/FAIL helpers, free ports,
# waiting for readiness. Each suite sets NAME (its temporary folder's name) before sourcing.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MACT=${MACT_BIN:-$BUILD/mact}
PY=${PYTHON:-/usr/bin/python3}
T=${MACT_TMP:-/tmp}/$NAME.$$
mkdir -p "$T"
fail=0
export MACT_BIN="$MACT"
pass() { echo "PASS $1"; }
failt() { echo "FAIL $1: $2"; fail=1; }
# N free loopback ports (the kernel's choice), space-separated
ports() { "$PY" -c "
import socket, sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(('127.0.0.1',0)) for s in ss]
print(' '.join(str(s.getsockname()[1]) for s in ss))" "${1:-3}"; }
wait_ready() {  # pid port: /readyz answered 200 within 60 s while the process lives
    for _ in $(seq 1 600); do
        kill -0 "$1" 2>/dev/null || return 1
        curl -sf "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
