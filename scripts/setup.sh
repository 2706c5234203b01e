#!/usr/bin/env bash
# Installs what mact needs on Debian 12 (run as root, or with sudo available). Idempotent.
#   scripts/setup.sh          what `make` and `build/mact demo` need: a C compiler and the -dev libraries mact links
#   scripts/setup.sh --test   that, plus what the test suites run beside mact: PyTorch (the reference), Python's
#                             clients of the server, clang's fuzzer and sanitizer runtimes, FFmpeg's CLI, a one-node
#                             Slurm, node and npm (`make test`, .ci/run)
set -euo pipefail
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
test=0
case "${1:-}" in
    "") ;;
    --test) test=1 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/setup.sh: unknown option $1 (--test adds what the tests need)" >&2; exit 2 ;;
esac
pkgs=(build-essential pkg-config libcjson-dev libpcre2-dev libutf8proc-dev libpng-dev libjpeg62-turbo-dev zlib1g-dev libzip-dev
      libcairo2-dev  # mact prune-analyze's bar chart, mact eval's plot
      libsnappy-dev libzstd-dev  # the parquet reader (src/data/parquet.c)
      libavformat-dev libavcodec-dev libswscale-dev libavutil-dev  # dataset videos (src/data/video.c)
      libwebsockets-dev libmsgpack-dev  # mact serve (src/server/)
      libgrpc-dev  # mact serve --lerobot: LeRobot's gRPC service on the gRPC C core (src/server/grpc_lerobot.c)
      libprotobuf-c-dev protobuf-c-compiler)  # mact export onnx: the ONNX subset schema (src/export/onnx_subset.proto)
if [ "$test" -eq 1 ]; then
    pkgs+=(ffmpeg  # the CLI the video tests cross-check against
           slurmctld slurmd slurm-client munge  # tests/test_slurm.sh: a one-node Slurm cluster in a scratch folder
           python3 python3-numpy python3-torch libopenblas0-pthread  # the PyTorch reference (tests/reference/)
           clang-14 libclang-rt-14-dev  # clang + libFuzzer/sanitizer runtimes: make fuzz, tests/test_fuzz_smoke.sh
           python3-pil python3-pip python3-setuptools python3-wheel  # the Python package (python/) and its tests
           python3-websockets python3-msgpack python3-requests  # mact serve's test clients (tests/serve/)
           python3-grpcio python3-grpc-tools)  # the LeRobot gRPC test client and its stubs (tests/test_lerobot_grpc.sh)
    # node/npm only for the tokenizer equivalence test against HF's Rust tokenizers (npm packages)
    command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
    command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
