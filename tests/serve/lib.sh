# What the mact serve suites share (sourced by tests/test_serve*.sh): the paths, PASS/FAIL helpers, free ports,
# starting and stopping the server, waiting for readiness. Each suite sets NAME (its temporary folder's name) before sourcing.
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
# start LOG ARGS...: `mact serve --model $T/tiny ARGS` in the background (its pid in SPID, its output in LOG), with
# @A @B @C in ARGS standing for three free ports picked here (A B C); a port taken meanwhile ("cannot listen"):
# again with new ones, up to 5 times. Returns once the server says "ready in" (or 5 s passed) while it lives.
start() {
    local log=$1; shift
    for _ in 1 2 3 4 5; do
        read -r A B C < <(ports 3)
        local args=() x
        for x in "$@"; do case "$x" in @A) args+=("$A") ;; @B) args+=("$B") ;; @C) args+=("$C") ;; *) args+=("$x") ;; esac; done
        "$MACT" serve --model "${SERVE_MODEL:-$T/tiny}" "${args[@]}" >"$log" 2>&1 &
        SPID=$!
        for _ in $(seq 1 50); do kill -0 "$SPID" 2>/dev/null || break; grep -q "ready in\|cannot listen" "$log" && break; sleep 0.1; done
        kill -0 "$SPID" 2>/dev/null && ! grep -q "cannot listen" "$log" && return 0
        wait "$SPID" 2>/dev/null
    done
    return 1
}
# stop: SIGTERM to the server started last; returns its exit status (0 after a clean drain)
stop() { kill -TERM "$SPID" 2>/dev/null; local rc=0; wait "$SPID" || rc=$?; return $rc; }
