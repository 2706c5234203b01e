#!/usr/bin/env bash
# kernels: none
# asan: skip (the PyTorch reference checking itself: no mact code runs)
# Self-check of the PyTorch fp32 reference (tests/reference/): generates tiny random checkpoints and
# golden files and checks their internal consistency. Prints `PASS name` / `FAIL name: why` lines.
# Uses $PYTHON (default /usr/bin/python3, Debian's torch) and a temp dir under $MACT_TMP (or /tmp).
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d "${MACT_TMP:-/tmp}/refcheck.XXXXXX") || { echo "FAIL reference_env: mktemp failed"; exit 1; }
trap 'rm -rf "$TMP"' EXIT
# the command-line entry points once (everything else runs in-process in selftest.py)
if out=$("$PYTHON" tests/reference/gen_checkpoint.py tiny "$TMP/cli_ck" --seed 7 2>&1); then
    if out2=$("$PYTHON" tests/reference/make_golden.py "$TMP/cli_ck" "$TMP/cli_golden" --seed 8 --splits 2 \
              --n-images 1 2>&1) &&
       [ -f "$TMP/cli_golden/trace.json" ] && [ -f "$TMP/cli_golden/llm_split1_io.npz" ] &&
       grep -q '^seed 8$' <<<"$out2" && grep -q '^seed 7$' <<<"$out"; then
        echo "PASS reference_cli"
    else
        echo "FAIL reference_cli: $(echo "${out2:-}" | tail -n 3 | tr '\n' ' ')"
    fi
else
    if grep -q "No module named" <<<"$out"; then
        echo "FAIL reference_env: $PYTHON cannot import torch/numpy (Debian: apt-get install python3-torch python3-numpy)"
        exit 1
    fi
    echo "FAIL reference_cli: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
fi
"$PYTHON" tests/reference/selftest.py "$TMP/self"
