#!/usr/bin/env bash
# kernels: via-engine (its checks are of the front end; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm (python3-websockets, -msgpack, -requests, -pil)
# mact serve: each protocol's actions bitwise equal to `mact run`; hostile and broken clients (each followed by a
# good request and /livez); the API key per protocol; busy and deadline answers; SIGTERM drains and exits 0;
# real-time chunking keys per protocol and vla-eval --replan-steps (tests/serve/test_rtc.py).
NAME=serve
. "$(dirname "$0")/serve/lib.sh"
"$PY" -c "import websockets, msgpack, requests, numpy, PIL" 2>/dev/null || { failt serve_python_deps "python3-websockets/-msgpack/-requests/-numpy/-pil missing (scripts/setup.sh --test)"; exit 1; }
[ -d "$T/tiny" ] || "$MACT" synth tiny "$T/tiny" >/dev/null || { failt serve_synth "mact synth tiny failed"; exit 1; }
start "$T/serve1.log" --openpi @A --act @B --vla-eval @C --max-message-mb 4 --idle-timeout 3
if ! wait_ready "$SPID" "$A"; then failt serve_ready "server did not become ready: $(tail -3 "$T/serve1.log")"; exit 1; fi
pass serve_ready
"$PY" tests/serve/test_protocols.py "$T/tiny" "$T" "$A" "$B" "$C" || fail=1
"$PY" tests/serve/test_faults.py "$T/tiny" "$T" "$A" "$B" "$C" || fail=1
grep -q 'outcome=bad_request' "$T/serve1.log" && grep -q 'openpi peer=127.0.0.1' "$T/serve1.log" \
    && pass serve_log_lines || failt serve_log_lines "no per-request log lines"
if stop; then pass serve_sigterm_exit_0; else failt serve_sigterm_exit_0 "exit status $?"; fi
grep -E "ERROR: AddressSanitizer|runtime error:" "$T/serve1.log" && failt serve_sanitizer "see $T/serve1.log"

printf 'sekret\n' >"$T/key"
start "$T/serve2.log" --openpi @A --act @B --vla-eval @C --api-key-file "$T/key" --api-key-protocols openpi,act \
    --queue 1 --deadline-ms 5
if wait_ready "$SPID" "$A"; then
    "$PY" tests/serve/test_auth_busy.py "$A" "$B" "$C" || fail=1
    stop || failt serve2_exit "exit status $?"
else failt serve2_ready "$(tail -3 "$T/serve2.log")"; fi

# /act's YAM keys on a checkpoint whose tag names three cameras (the same tiny weights, the tag's camera_keys three)
rm -rf "$T/tiny_yam"; cp -r "$T/tiny" "$T/tiny_yam"
"$PY" -c 'import json, sys
ns = json.load(open(sys.argv[1]))
for t in ns["metadata_by_tag"].values():
    t["camera_keys"] = ["observation.images.top", "observation.images.left", "observation.images.right"]
json.dump(ns, open(sys.argv[1], "w"))' "$T/tiny_yam/norm_stats.json"
SERVE_MODEL="$T/tiny_yam" start "$T/serve_yam.log" --act @B
if wait_ready "$SPID" "$B"; then
    "$PY" tests/serve/test_yam.py "$T/tiny_yam" "$T" "$B" || fail=1
    stop || failt serve_yam_exit "exit status $?"
else failt serve_yam_ready "$(tail -3 "$T/serve_yam.log")"; fi

# real-time chunking: RTC keys on every protocol (bitwise `mact run --prev-actions`), bad keys, vla-eval re-planning
start "$T/serve4.log" --openpi @A --act @B --vla-eval @C --replan-steps 3 --replan-schedule ones
if wait_ready "$SPID" "$A"; then
    "$PY" tests/serve/test_rtc.py "$T/tiny" "$T" "$A" "$B" "$C" 3 || fail=1
    stop || failt serve4_exit "exit status $?"
else failt serve4_ready "$(tail -3 "$T/serve4.log")"; fi

start "$T/serve3.log" --act @B
if wait_ready "$SPID" "$B"; then
    "$PY" tests/serve/test_drain.py "$SPID" "$B" || fail=1
    rc=0; wait "$SPID" || rc=$?
    [ "$rc" -eq 0 ] && pass serve_drain_exit_0 || failt serve_drain_exit_0 "exit status $rc"
else failt serve3_ready "$(tail -3 "$T/serve3.log")"; fi
grep -hE "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" "$T"/serve*.log && failt serve_sanitizer "see $T"
[ "$fail" -eq 0 ] && rm -rf "$T"
exit $fail
