#!/usr/bin/env bash
# kernels: via-engine (its checks are of the front end; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm (python3-websockets, -msgpack, -requests, -pil)
# asan: skip (throughput under 16 concurrent clients; the server's paths run under ASan in test_serve.sh, test_serve_limits.sh and the soak)
# mact serve under load: 16 concurrent clients x 25 requests across the three protocols on the tiny model, every
# reply bitwise equal to its protocol's reference; prints p50/p99. SERVE_LOAD="CLIENTS REQUESTS" overrides.
NAME=serve_load
. "$(dirname "$0")/serve/lib.sh"
"$PY" -c "import websockets, msgpack, requests, numpy, PIL" 2>/dev/null || { echo "FAIL serve_load_deps: python3 packages missing"; exit 1; }
"$MACT" synth tiny "$T/tiny" >/dev/null || { echo "FAIL serve_load_synth"; exit 1; }
# shellcheck disable=SC2086
start "$T/serve.log" --openpi @A --act @B --vla-eval @C --quiet ${SERVE_ARGS:-}
wait_ready "$SPID" "$A" || { echo "FAIL serve_load_start: $(tail -2 "$T/serve.log")"; exit 1; }
# shellcheck disable=SC2086
"$PY" tests/serve/test_load.py "$A" "$B" "$C" ${SERVE_LOAD:-16 25} || fail=1
if stop; then pass serve_load_sigterm_exit_0; else failt serve_load_sigterm_exit_0 "exit status $?"; fi
grep -hE "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" "$T/serve.log" && { echo "FAIL serve_load_sanitizer: $T/serve.log"; fail=1; }
[ "$fail" -eq 0 ] && rm -rf "$T"
exit $fail
