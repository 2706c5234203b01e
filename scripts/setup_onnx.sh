#!/usr/bin/env bash
# Prepares the ONNX Runtime check of `mact export onnx` (tests/test_export.sh): installs tests/onnx/package.json's
# one dependency, onnxruntime-node 1.30.0 (ONNX Runtime for Node; the package ships the CPU libonnxruntime for
# linux-x64 and linux-arm64), into tests/onnx/node_modules (git-ignored). --ignore-scripts: the package's install
# script fetches optional GPU extras from a host this network does not reach, and nothing here needs them.
# Needs node + npm and the npm registry (first run only). --force reinstalls.
set -euo pipefail
cd "$(dirname "$0")/../tests/onnx"
force=0
[ "${1:-}" = "--force" ] && force=1
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "setup_onnx: '$tool' not found (Node 18+ and npm are required)" >&2; exit 1; }
done
have() { node -e 'require("onnxruntime-node")' >/dev/null 2>&1; }
if [ "$force" = 1 ] || ! have; then
    echo "setup_onnx: installing onnxruntime-node into $(pwd)/node_modules"
    if [ -f package-lock.json ]; then cmd=(npm ci); else cmd=(npm install); fi
    if ! timeout 600 "${cmd[@]}" --ignore-scripts --no-audit --no-fund >npm.log 2>&1; then
        echo "setup_onnx: '${cmd[*]} --ignore-scripts' failed (is the npm registry reachable?); last lines of npm's log:" >&2
        tail -n 15 npm.log >&2
        exit 1
    fi
    rm -f npm.log
    have || { echo "setup_onnx: onnxruntime-node installed but does not load on this platform" >&2; exit 1; }
fi
