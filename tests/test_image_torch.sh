#!/usr/bin/env bash
# Compares mact's image preprocessing (src/image.c) with PyTorch: uint8 bilinear resize, pixel_values,
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
# `make asan`); run standalone, compile the tool from the sources so it is never stale.
TOOL="${BUILD:-}/tests/test_image"
if [ -z "${BUILD:-}" ] || [ ! -x "$TOOL" ]; then
    TOOL="$TMP/test_image"
    if ! ${CC:-cc} -std=c11 -O2 -g -D_GNU_SOURCE -Iinclude -Isrc -Itests/c tests/c/test_image.c src/image.c \
            -lpng -ljpeg -lz -lm -o "$TOOL" 2>"$TMP/cc.log"; then
        echo "FAIL image_torch_build: cannot compile the image tool"; sed 's/^/    /' "$TMP/cc.log"; exit 1
    fi
fi
SEED_ARG=()
[ -n "${IMAGE_SEED:-}" ] && SEED_ARG=(--seed "$IMAGE_SEED")
"$PY" tests/reference/image_ref.py --tool "$TOOL" --tmp "$TMP" "${SEED_ARG[@]}"
