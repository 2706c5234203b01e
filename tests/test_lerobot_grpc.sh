#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm (python3-grpcio, python3-grpc-tools)
# The LeRobot async-inference gRPC transport (src/server/grpc_lerobot.c) against grpcio, the client stack of
# LeRobot's robot_client.py: $BUILD/tests/lr_grpc_echo (the transport with recording handlers) driven by
# tests/serve/test_lerobot_grpc.py, with Python stubs generated here from src/server/lerobot_services.proto.
# Chunk reassembly (1 byte, exactly 2 MiB, 5 MiB in BEGIN/MIDDLE/END), refused chunk sequences, the payload
# and message caps, cancelled / killed / stalled clients, the API key, concurrent calls, clean stops.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
ECHO=$BUILD/tests/lr_grpc_echo
T=${MACT_TMP:-/tmp}/lerobot_grpc.$$
if [ ! -x "$ECHO" ]; then
    # only a build without the server (SERVER=, the cross builds) may lack the echo program
    if [ -f "$BUILD/libmact_server.a" ]; then echo "FAIL lr_grpc_build: $ECHO missing although the server is built"; exit 1; fi
    echo "INFO lr_grpc: $ECHO not built (a SERVER= build); skipped"; exit 0
fi
"$PY" -c "import grpc, grpc_tools" 2>/dev/null \
    || { echo "FAIL lr_grpc_python_deps: python3-grpcio / python3-grpc-tools missing (scripts/setup.sh --test)"; exit 1; }
mkdir -p "$T"
if ! "$PY" -m grpc_tools.protoc -I src/server --python_out="$T" --grpc_python_out="$T" \
        src/server/lerobot_services.proto >"$T/protoc.log" 2>&1; then
    echo "FAIL lr_grpc_stubs: grpc_tools.protoc failed:"; sed 's/^/    /' "$T/protoc.log"; exit 1
fi
echo "PASS lr_grpc_stubs"
timeout 600 "$PY" tests/serve/test_lerobot_grpc.py "$ECHO" "$T"
rc=$?
rm -rf "$T"
exit $rc
