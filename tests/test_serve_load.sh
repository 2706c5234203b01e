#!/usr/bin/env bash
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm (python3-websockets, -msgpack, -requests, -pil)
# mact serve under load: 16 concurrent clients x 25 requests across the three protocols on the tiny model, every
# reply bitwise equal to its protocol's reference; prints p50/p99. SERVE_LOAD="CLIENTS REQUESTS" overrides.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MACT=${MACT_BIN:-$BUILD/mact}
PY=${PYTHON:-/usr/bin/python3}
T=${MACT_TMP:-/tmp}/serve_load.$$
mkdir -p "$T"
"$PY" -c "import websockets, msgpack, requests, numpy, PIL" 2>/dev/null || { echo "FAIL serve_load_deps: python3 packages missing"; exit 1; }
"$MACT" synth tiny "$T/tiny" >/dev/null || { echo "FAIL serve_load_synth"; exit 1; }
read -r A B C < <("$PY" -c "
import socket
ss=[socket.socket() for _ in range(3)]
[s.bind(('127.0.0.1',0)) for s in ss]
print(' '.join(str(s.getsockname()[1]) for s in ss))")
# shellcheck disable=SC2086
"$MACT" serve --model "$T/tiny" --openpi "$A" --act "$B" --vla-eval "$C" --quiet ${SERVE_ARGS:-} >"$T/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; curl -sf "http://127.0.0.1:$A/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null || { echo "FAIL serve_load_start: $(tail -2 "$T/serve.log")"; exit 1; }
fail=0
# shellcheck disable=SC2086
"$PY" tests/serve/test_load.py "$A" "$B" "$C" ${SERVE_LOAD:-16 25} || fail=1
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" -eq 0 ] && echo "PASS serve_load_sigterm_exit_0" || { echo "FAIL serve_load_sigterm_exit_0: $rc"; fail=1; }
grep -hE "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" "$T/serve.log" && { echo "FAIL serve_load_sanitizer: $T/serve.log"; fail=1; }
[ "$fail" -eq 0 ] && rm -rf "$T"
exit $fail
