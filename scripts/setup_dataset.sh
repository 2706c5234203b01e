#!/usr/bin/env bash
# Prepares the parquet cross-check (tests/test_dataset_hyparquet.sh): installs tests/dataset/package.json's
# dependencies exactly as package-lock.json pins them (npm ci) into tests/dataset/node_modules (git-ignored):
# hyparquet (a pure-JS parquet reader, MIT) and hyparquet-compressors (its ZSTD/GZIP/... codecs).
# Needs node + npm and the npm registry (first run only). --force reinstalls.
set -euo pipefail
cd "$(dirname "$0")/../tests/dataset"
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "setup_dataset: '$tool' not found (Node 18+ and npm are required)" >&2; exit 1; }
done
have() { node -e 'import("hyparquet").then(() => import("hyparquet-compressors"))' >/dev/null 2>&1; }
if [ "${1:-}" = "--force" ] || ! have; then
    echo "setup_dataset: installing npm packages into $(pwd)/node_modules"
    if ! timeout 600 npm ci --no-audit --no-fund >npm.log 2>&1; then
        echo "setup_dataset: 'npm ci' failed (is the npm registry reachable?); last lines of npm's log:" >&2
        tail -n 15 npm.log >&2
        exit 1
    fi
    rm -f npm.log
    have || { echo "setup_dataset: packages installed but not importable" >&2; exit 1; }
fi
echo "setup_dataset: ready ($(pwd))"
