#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# mact serve under hostile and slow clients (tests/serve/test_limits.py): 1000 idle TCP connections, 100
# slowloris clients, 300 idle WebSocket connections from one address, a client that never reads its replies,
# 5000 one-byte fragments and 5000 pings, permessage-deflate off; each followed by a good request on every
# protocol from another address; descriptors and memory bounded; the refusals counted in /metrics.
NAME=serve_limits
. "$(dirname "$0")/serve/lib.sh"
"$PY" -c "import websockets, msgpack, requests" 2>/dev/null || { echo "FAIL limits_python_deps: python3-websockets/-msgpack/-requests missing"; exit 1; }
"$MACT" synth tiny "$T/tiny" >/dev/null || { echo "FAIL limits_synth: mact synth tiny failed"; exit 1; }
start "$T/serve.log" --openpi @A --act @B --vla-eval @C --max-connections 200 --max-connections-per-ip 50 \
    --header-timeout 3 --quiet
wait_ready "$SPID" "$B"
"$PY" tests/serve/test_limits.py "$SPID" "$A" "$B" "$C" || fail=1
if stop; then pass limits_sigterm_exit_0; else failt limits_sigterm_exit_0 "exit status $?"; fi
grep -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$T/serve.log" && { echo "FAIL limits_sanitizer: $T/serve.log"; fail=1; }
[ $fail -eq 0 ] && rm -rf "$T"
exit $fail
