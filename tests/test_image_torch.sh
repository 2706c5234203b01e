#!/usr/bin/env bash
# kernels: none (no result depends on the compute kernels: .ci/run leaves it out of the MACT_KERNELS=ref run)
# asan: skip (equality with PyTorch/PIL; image.c runs under ASan in test_image and fuzz_image)
# Compares mact's image preprocessing (src/io/image.c) with PyTorch: uint8 bilinear resize, pixel_values,
# PNG decoding of hand-written files, float->uint8, JPEG against PIL. Fresh random images each run; the
# seed is printed (pass IMAGE_SEED=N to replay). Prints PASS/FAIL lines (tests/run.sh counts them).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d "${MACT_TMP:-/tmp}/image_torch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    echo "FAIL image_torch_setup: $PY cannot import torch and numpy (apt-get install python3-torch python3-numpy)"
    exit 1
fi
# Under `make test` / tests/run.sh BUILD is set and the test program is built (with the sanitizers in
# `make asan`); run standalone, let make bring the program up to date so it is never stale.
TOOL="${BUILD:-build}/tests/test_image"
if [ -z "${BUILD:-}" ] || [ ! -x "$TOOL" ]; then
    if ! make -s "$TOOL" >"$TMP/cc.log" 2>&1; then
        echo "FAIL image_build: cannot build $TOOL"; sed 's/^/    /' "$TMP/cc.log"; exit 1
    fi
fi
SEED_ARG=()
[ -n "${IMAGE_SEED:-}" ] && SEED_ARG=(--seed "$IMAGE_SEED")
"$PY" tests/reference/image_ref.py --tool "$TOOL" --tmp "$TMP" "${SEED_ARG[@]}"
