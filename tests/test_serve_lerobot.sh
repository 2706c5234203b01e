#!/usr/bin/env bash
# kernels: via-engine (its checks are of the front end; it reaches the kernels only through the engine, whose results the parity suites check on every kernel set: .ci/run leaves it out of the MACT_KERNELS=ref run)
# mact serve --lerobot: LeRobot's asynchronous-inference gRPC protocol from a Python client that speaks it as
# LeRobot's robot_client does (tests/serve/test_lerobot.py: python3-grpcio, stubs generated from
# src/server/lerobot_services.proto by python3-grpc-tools; the client unpickles the replies with torch). The API
# key on gRPC metadata; SIGTERM drains and exits 0; no sanitizer report in the server's log.
NAME=serve_lerobot
. "$(dirname "$0")/serve/lib.sh"
"$PY" -c "import grpc, grpc_tools, numpy, torch, PIL" 2>/dev/null \
    || { failt lerobot_python_deps "python3-grpcio / python3-grpc-tools / numpy / torch / pil missing (scripts/setup.sh --test)"; exit 1; }
"$MACT" serve --help 2>&1 | grep -q -- "--lerobot PORT" || { failt lerobot_built "this mact serve has no --lerobot"; exit 1; }
[ -d "$T/tiny" ] || "$MACT" synth tiny "$T/tiny" >/dev/null || { failt lerobot_synth "mact synth tiny failed"; exit 1; }
mkdir -p "$T/pb"
"$PY" -m grpc_tools.protoc -I src/server --python_out="$T/pb" --grpc_python_out="$T/pb" src/server/lerobot_services.proto \
    || { failt lerobot_stubs "grpc_tools.protoc failed"; exit 1; }
# @A: the gRPC port, @B: an /act port for the probes
start "$T/serve.log" --lerobot @A --act @B --max-message-mb 4 --threads 2
if ! wait_ready "$SPID" "$B"; then failt lerobot_ready "server did not become ready: $(tail -3 "$T/serve.log")"; exit 1; fi
pass lerobot_ready
"$PY" tests/serve/test_lerobot.py "$T/tiny" "$T" "$A" "$B" "$T/serve.log" "$T/pb" || fail=1
m=$(curl -sf "http://127.0.0.1:$B/metrics")
grep -q 'mact_requests_total{protocol="lerobot",outcome="ok"} [1-9]' <<<"$m" && grep -q 'mact_request_seconds_count{protocol="lerobot"} [1-9]' <<<"$m" \
    && pass lerobot_metrics || failt lerobot_metrics "no lerobot counters in /metrics"
if stop; then pass lerobot_sigterm_exit_0; else failt lerobot_sigterm_exit_0 "exit status $?"; fi
grep -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$T/serve.log" && failt lerobot_sanitizer "see $T/serve.log"

# the API key on gRPC metadata (authorization: Bearer / Api-Key, x-api-key)
echo "s3cret-key" >"$T/key"
start "$T/serve_key.log" --lerobot @A --act @B --api-key-file "$T/key" --api-key-protocols lerobot
if wait_ready "$SPID" "$B"; then
    "$PY" - "$A" "$T/pb" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
import grpc
import lerobot_services_pb2 as pb
import lerobot_services_pb2_grpc as pbg
st = pbg.AsyncInferenceStub(grpc.insecure_channel("127.0.0.1:" + sys.argv[1]))
def code(md):
    try:
        st.Ready(pb.Empty(), metadata=md, timeout=30)
        return "OK"
    except grpc.RpcError as e:
        return e.code().name
for name, md, want in [("none", None, "UNAUTHENTICATED"), ("wrong", [("authorization", "Bearer nope")], "UNAUTHENTICATED"),
                       ("bearer", [("authorization", "Bearer s3cret-key")], "OK"),
                       ("x_api_key", [("x-api-key", "s3cret-key")], "OK")]:
    got = code(md)
    print(("PASS" if got == want else "FAIL") + f" lerobot_api_key_{name}" + ("" if got == want else f": {got}, want {want}"))
EOF
    [ $? -eq 0 ] || fail=1
    stop || failt lerobot_key_exit "exit status $?"
else failt lerobot_key_ready "$(tail -3 "$T/serve_key.log")"; fi
[ $fail -eq 0 ] && rm -rf "$T"
exit $fail
