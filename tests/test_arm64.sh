#!/usr/bin/env bash
# asan: skip (its own CI step (cross build under qemu))
# ARM64 under emulation: cross-builds build-aarch64/ (make CROSS=aarch64-linux-gnu-) and runs, under
# qemu-aarch64-static at two CPU models,
#   -cpu neoverse-n1   Armv8.2: fp16 + dotprod, no i8mm / bf16 (levels neon, neon+fp16+dotprod)
#   -cpu max           every feature qemu has (adds the neon+fp16+dotprod+i8mm+bf16 level),
# the kernel tests (every NEON level against the plain-C twin on fresh random inputs, ragged shapes included:
# tests/c/test_kernels.c), the fp32 parity gate on a tiny checkpoint (golden files from the PyTorch reference
# on this x86 host, tests/reference/make_golden.py; `build-aarch64/mact parity` under qemu: cosine >= 0.99999
# per boundary and the relative max-error bound, as tests/test_parity.sh) on its mixed BF16/F32 weights and on
# the same checkpoint with its BF16 tensors stored F16 (the F16-widening kernels), the int8 mode (SDOT / SMMLA)
# at run_mode's gates (cosine >= 0.999, actions max abs <= 0.25), the bf16 mode (BFMMLA under -cpu max, fp32
# under neoverse-n1) at run_mode's bf16 gates (cosine >= 0.999, actions max abs <= 0.05), and `mact demo`.
# The emulated part's wall time is printed at the end (a few minutes on 2 cores).
#
# CI MUST have the cross toolchain, qemu-user-static and the :arm64 -dev packages (scripts/setup_arm64.sh,
# run by .ci/run); without them this script prints one INFO line and skips. There is no binfmt_misc: every
# binary runs through qemu-aarch64-static explicitly, with -L / (Debian multiarch: the arm64 libraries are in
# /usr/lib/aarch64-linux-gnu, the loader /lib/ld-linux-aarch64.so.1).
# Inside tests/run.sh (make test, make asan, ...) it skips: .ci/run runs it once as its own step;
# MACT_ARM64=1 runs it there too. SEED=... replays a run.
set -u
cd "$(dirname "$0")/.."
if [ -n "${MACT_BIN:-}" ] && [ "${MACT_ARM64:-0}" != 1 ]; then
    echo "INFO test_arm64: run by .ci/run as its own step (MACT_ARM64=1 runs it inside tests/run.sh)"; exit 0
fi
QEMU=${QEMU:-qemu-aarch64-static}; CROSS=${CROSS:-aarch64-linux-gnu-}; B=build-aarch64
PY=${PYTHON:-/usr/bin/python3}
missing=
command -v "${CROSS}gcc" >/dev/null 2>&1 || missing="$missing ${CROSS}gcc"
command -v "$QEMU" >/dev/null 2>&1 || missing="$missing $QEMU"
[ -e /usr/lib/aarch64-linux-gnu/libcjson.so ] || missing="$missing libcjson-dev:arm64"
[ -e /usr/lib/aarch64-linux-gnu/libcairo.so ] || missing="$missing libcairo2-dev:arm64"
if [ -n "$missing" ]; then
    echo "INFO test_arm64: skipped, missing:$missing (CI must have them: scripts/setup_arm64.sh)"; exit 0
fi
fail=0
T=$(mktemp -d "${MACT_TMP:-/tmp}/arm64.XXXXXX")
R="$T/results"; : >"$R"
emit() { tee -a "$R"; }  # result lines, counted at the end
ok() { echo "PASS $1" | emit; }
bad() { echo "FAIL $1: $2" | emit; fail=1; }

t0=$(date +%s)
if ! nice -n 10 make CROSS="$CROSS" BUILD=$B -j2 all >"${TMPDIR:-/tmp}/arm64_build.$$.log" 2>&1; then
    bad arm64_cross_build "make CROSS=$CROSS failed"; tail -20 "${TMPDIR:-/tmp}/arm64_build.$$.log"; exit 1
fi
rm -f "${TMPDIR:-/tmp}/arm64_build.$$.log"
ok arm64_cross_build
t1=$(date +%s)
echo "INFO cross build: $((t1 - t0)) s"

SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
# the checkpoint, its F16 twin and their golden files, on the x86 host (PyTorch)
if ! $PY tests/reference/gen_checkpoint.py tiny "$T/ck" --seed "$SEED" >"$T/gen.log" 2>&1; then
    bad arm64_parity "checkpoint generator failed"; tail -5 "$T/gen.log"; exit 1
fi
cp -r "$T/ck" "$T/ck16"
# BF16 -> F16 in place: same sizes, so the offsets stay; the header keeps its length (padded with spaces)
$PY - "$T/ck16/model.safetensors" <<'EOF'
import json, struct, sys
import numpy as np
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k, v in h.items():
    if k == "__metadata__" or v["dtype"] != "BF16":
        continue
    a, e = v["data_offsets"]
    o = 8 + n + a
    u = np.frombuffer(bytes(b[o:8 + n + e]), dtype=np.uint16).astype(np.uint32) << 16
    f = u.view(np.float32).astype(np.float16)
    b[o:8 + n + e] = f.tobytes()
    v["dtype"] = "F16"
s = json.dumps(h, separators=(",", ":")).encode()
assert len(s) <= n
b[8:8 + n] = s + b" " * (n - len(s))
open(p, "wb").write(b)
EOF
for ck in ck ck16; do
    if ! $PY tests/reference/make_golden.py "$T/$ck" "$T/g_$ck" --seed $((SEED + 1)) --n-images 2 >"$T/$ck.gold.log" 2>&1; then
        bad "arm64_parity_$ck" "reference failed"; tail -5 "$T/$ck.gold.log"; exit 1
    fi
done
t2=$(date +%s)
echo "INFO checkpoints and golden files (x86 host, PyTorch): $((t2 - t1)) s"

parity_rows() {  # name, log
    awk -v n="$1" 'NR > 1 && ($NF == "PASS" || $NF == "FAIL") && NF >= 7 {
        printf "%s %s/%s/%s cosine=%s max_abs=%s max_ref=%s in_tol=%s\n", $NF, n, $1, $2, $3, $4, $5, $6 }
        /could not run/ { print "FAIL " n "/" $1 ": " $0 }' "$2" | emit
    grep -qE ' (PASS|FAIL)$' "$2" || bad "$1" "no rows ($(tail -1 "$2"))"
    awk -v n="$1" 'NR > 1 && ($NF == "PASS" || $NF == "FAIL") && NF >= 7 {
        if (c == "" || $3 < c) c = $3; r = $5 > 0 ? $4 / $5 : 0; if (r > m) m = r
        if ($2 == "actions_norm" && $4 > a) a = $4 }
        END { printf "INFO %s: min cosine %s, max abs / max|ref| %.2g, actions max abs %.2g\n", n, c, m, a }' "$2"
}
for cpu in neoverse-n1 max; do
    Q="$QEMU -cpu $cpu -L /"
    ts=$(date +%s)
    $Q $B/tests/test_kernels >"$T/kernels_$cpu.log" 2>&1
    rc=$?
    sed -n -e "s|^PASS |PASS arm64_$cpu/|p" -e "s|^FAIL |FAIL arm64_$cpu/|p" "$T/kernels_$cpu.log" | emit
    grep '^INFO kernel levels\|^INFO matmul\|^INFO int8 observed\|^INFO attention observed\|^INFO norms\|^INFO adaln' "$T/kernels_$cpu.log" | sed "s|^INFO |INFO arm64_$cpu: |"
    [ $rc -eq 0 ] || grep -q '^FAIL' "$T/kernels_$cpu.log" || bad "arm64_$cpu/test_kernels" "exited $rc"
    grep -q "^FAIL" "$T/kernels_$cpu.log" && fail=1
    # the kernels this CPU model gets (auto)
    $Q $B/mact inspect "$T/ck" 2>&1 | grep '^kernels' | sed "s|^|INFO arm64_$cpu: |"
    for ck in ck ck16; do
        $Q $B/mact parity "$T/g_$ck" --model "$T/$ck" >"$T/parity_${cpu}_$ck.log" 2>&1
        parity_rows "arm64_${cpu}_parity_$ck" "$T/parity_${cpu}_$ck.log"
        grep -q ' FAIL$' "$T/parity_${cpu}_$ck.log" && fail=1
    done
    # INT8 (SDOT on the LLM's and the action expert's weights) against the same fp32 golden files, at the
    # gates of tests/test_parity.sh's run_mode: cosine >= 0.999 per boundary, actions max abs <= 0.25 (the RTC
    # vjp row's, ~3x larger actions, <= 0.75), the relative bound informational
    $Q $B/mact parity "$T/g_ck" --model "$T/ck" --precision int8 --cos-min 0.999 --tol-informational \
        --abs-tol 0.25 --vjp-abs-tol 0.75 >"$T/parity_${cpu}_int8.log" 2>&1
    parity_rows "arm64_${cpu}_parity_ck_int8" "$T/parity_${cpu}_int8.log"
    grep -q ' FAIL$' "$T/parity_${cpu}_int8.log" && fail=1
    # BF16 (BFMMLA on the bf16 level, -cpu max; computed as fp32 below it) at run_mode's bf16 gates: cosine
    # >= 0.999 per boundary, actions max abs <= 0.05 (the vjp row's <= 0.15), the relative bound informational
    $Q $B/mact parity "$T/g_ck" --model "$T/ck" --precision bf16 --cos-min 0.999 --tol-informational \
        --abs-tol 0.05 --vjp-abs-tol 0.15 >"$T/parity_${cpu}_bf16.log" 2>&1
    parity_rows "arm64_${cpu}_parity_ck_bf16" "$T/parity_${cpu}_bf16.log"
    grep -q ' FAIL$' "$T/parity_${cpu}_bf16.log" && fail=1
    MACT_CACHE="$T/demo_$cpu" $Q $B/mact demo >"$T/demo_$cpu.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'action' "$T/demo_$cpu.log"; then ok "arm64_$cpu/demo"
    else bad "arm64_$cpu/demo" "exited $rc: $(tail -2 "$T/demo_$cpu.log" | tr '\n' ' ')"; fi
    # the non-finite cases of tests/test_nonfinite.sh on the ARM build (a NaN or inf weight in every precision
    # and on the reference kernels, through the shared int8 quantiser's NaN scale: kernels/pack_i8.c)
    # (NONFINITE_WEIGHTS_ONLY: its state-parsing and dump cases are the host's, counted in make test)
    NONFINITE_WEIGHTS_ONLY=1 MACT_BIN="$Q $B/mact" MACT_TMP="$T/nf_$cpu" bash -c 'mkdir -p "$MACT_TMP"; bash tests/test_nonfinite.sh' \
        >"$T/nonfinite_$cpu.log" 2>&1
    sed -n -e "s|^PASS \(nonfinite_\)|PASS arm64_$cpu/\1|p" -e "s|^FAIL \(nonfinite_\)|FAIL arm64_$cpu/\1|p" \
        "$T/nonfinite_$cpu.log" | emit
    grep -q '^PASS nonfinite_action_nan_int8' "$T/nonfinite_$cpu.log" || bad "arm64_$cpu/nonfinite" "$(tail -2 "$T/nonfinite_$cpu.log")"
    grep -q "^FAIL nonfinite_" "$T/nonfinite_$cpu.log" && fail=1
    echo "INFO arm64_$cpu: emulated kernel tests, parity, demo and non-finite cases: $(( $(date +%s) - ts )) s"
done
echo "INFO test_arm64: emulated part $(( $(date +%s) - t2 )) s, whole script $(( $(date +%s) - t0 )) s"
np=$(grep -c '^PASS' "$R"); nf=$(grep -c '^FAIL' "$R")
[ "$nf" -eq 0 ] || fail=1
[ $fail -eq 0 ] && rm -rf "$T" || echo "INFO logs kept in $T"
echo "$np passed, $nf failed"
exit $fail
