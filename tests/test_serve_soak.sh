#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# A soak of mact serve (tests/serve/soak.py): MACT_SOAK_SECONDS (default 60) of mixed traffic on openpi, /act and
# vla-eval (good requests, faults, clients that vanish, bursts answered busy at --queue 2) against one server:
# every good request answered and bitwise equal to the first answer of its input; RSS, open fds and threads flat
# after warm-up (from /proc); nothing in the log but request lines; SIGTERM exits 0. INFO lines: requests per
# protocol, peak RSS, RSS / fds / threads at warm-up against the end, latency p50 / p99 per protocol early and
# late, the log's lines by protocol and outcome (the hour's run: MACT_SOAK_SECONDS=3600 tests/run.sh
# test_serve_soak.sh). docs/serving.md "Soak" has the numbers of runs.
NAME=serve_soak
. "$(dirname "$0")/serve/lib.sh"
SECS=${MACT_SOAK_SECONDS:-60}
"$PY" -c "import websockets, msgpack, requests, numpy, PIL" 2>/dev/null || { echo "FAIL soak_python_deps: python3-websockets/-msgpack/-requests/-numpy/-pil missing"; exit 1; }
"$MACT" synth tiny "$T/tiny" >/dev/null || { echo "FAIL soak_synth: mact synth tiny failed"; exit 1; }
start "$T/serve.log" --openpi @A --act @B --vla-eval @C --queue 2 --threads 1
wait_ready "$SPID" "$B"
# under AddressSanitizer freed memory sits in its quarantine, so RSS grows by design: there the flat-RSS check gives
# way to LeakSanitizer's check at exit (MACT_SOAK_SANITIZED=1 makes soak.py print RSS as INFO)
ldd "$MACT" 2>/dev/null | grep -q libasan && export MACT_SOAK_SANITIZED=1
MACT_BIN="$MACT" "$PY" tests/serve/soak.py "$SPID" "$T/tiny" "$T" "$A" "$B" "$C" "$SECS" "$T/serve.log" || fail=1
if stop; then pass soak_sigterm_exit_0; else failt soak_sigterm_exit_0 "exit status $?"; fi
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$T/serve.log"; then
    echo "FAIL soak_sanitizer: $(grep -m1 -E "ERROR: |runtime error:" "$T/serve.log")"; fail=1
else echo "PASS soak_no_sanitizer_report"; fi
[ $fail -eq 0 ] && rm -rf "$T"
exit $fail
