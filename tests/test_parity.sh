#!/usr/bin/env bash
# Stage parity against the PyTorch fp32 reference (tests/reference/) on fresh random checkpoints and
# inputs. Each case: generate a checkpoint, write golden boundary files, run `mact parity`; every row of
# its table becomes one PASS/FAIL line carrying the cosine and max abs error.
# Thresholds (issue #3-#5; observed values are printed on every line and summarised in docs/parity.md):
#   cosine >= 0.99999 for every boundary tensor (observed >= 0.9999999 on tiny and wide),
#   max abs err <= 1e-4 x max|ref| per tensor (observed ~1e-6 relative),
#   normalised actions max abs err <= 1e-4 (observed ~1e-6); the same for the RTC boundaries action_rtc
#   (identity guidance) and action_rtc_vjp (vjp guidance) every golden set carries (make_golden.py: delay 2,
#   execution horizon H, linear schedule, max guidance weight 10; rows H - 2).
# rtc_vjp_direct_*: mact's vjp alone against torch.autograd on fresh random inputs (tests/reference/
#   rtc_vjp_check.py: one flow step identity vs vjp): cosine >= 0.99999, max abs <= 1e-4 x max|ref| (observed
#   ~1e-6 relative); rtc_vjp_direct_*_threads: the vjp with 1 thread equals the default pool's bit for bit.
# SEED=... replays a run; MACT_PARITY_WIDE=0 skips the full-width presets (they dominate the time).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}; MACT=${MACT_BIN:-build/mact}
T=${MACT_TMP:-$(mktemp -d)}/parity; mkdir -p "$T"
SEED=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "INFO seed $SEED (replay with SEED=$SEED)"
n=0
# MACT_GOLDEN_CACHE=DIR (.ci/run): a case's checkpoint and golden files are made once per seed, arguments and
# reference sources and hard-linked into the later passes (ASan, the reference kernels), which test mact against
# the same reference output, not the reference again
golden_key() { { printf '%s\n' "$@"; cat tests/reference/*.py; } | sha256sum | cut -c1-32; }
run_case() {  # name, gen args (quoted), golden args (quoted), [parity args]
    local name=$1 gen=$2 gold=$3 par=${4:-}
    n=$((n + 1))
    local ck="$T/ck_$name" gd="$T/g_$name" s=$((SEED + n * 7919)) cache=""
    [ -n "${MACT_GOLDEN_CACHE:-}" ] && cache="$MACT_GOLDEN_CACHE/parity_$(golden_key "$gen" "$gold" "$s" "${CRAFT:-}")"
    rm -rf "$ck" "$gd"
    if [ -n "$cache" ] && [ -d "$cache/gd" ] && cp -al "$cache/ck" "$ck" && cp -al "$cache/gd" "$gd"; then
        echo "INFO $name: checkpoint and golden files from $cache (made earlier in this run, seed $s)"
        : >"$T/$name.gold.log"
    else
        if ! $PY tests/reference/gen_checkpoint.py $gen "$ck" --seed $s >"$T/$name.gen.log" 2>&1; then
            echo "FAIL parity_$name: checkpoint generator failed"; tail -5 "$T/$name.gen.log"; return; fi
        if [ -n "${CRAFT:-}" ]; then
            $PY tests/reference/mutate_checkpoint.py "$ck" "$ck.c" "$CRAFT" $s >/dev/null && rm -rf "$ck" && mv "$ck.c" "$ck"
        fi
        if ! $PY tests/reference/make_golden.py "$ck" "$gd" --seed $((s + 1)) $gold >"$T/$name.gold.log" 2>&1; then
            echo "FAIL parity_$name: reference failed"; tail -5 "$T/$name.gold.log"; return; fi
        if [ -n "$cache" ]; then   # into a name of this process, then renamed (mv -T: never into a cache another
            local tmp="$cache.tmp.$$"  # pass running beside this one published first): no half cache, no mixed one
            rm -rf "$tmp" && mkdir -p "$tmp" && cp -al "$ck" "$tmp/ck" && cp -al "$gd" "$tmp/gd" &&
                mv -T "$tmp" "$cache" 2>/dev/null || rm -rf "$tmp"
        fi
    fi
    $MACT parity "$gd" --model "$ck" $par >"$T/$name.parity.log" 2>&1
    local rc=$?
    awk -v n="$name" 'NR > 1 && ($NF == "PASS" || $NF == "FAIL") && NF >= 7 {
        printf "%s parity_%s/%s/%s cosine=%s max_abs=%s max_ref=%s in_tol=%s\n", $NF, n, $1, $2, $3, $4, $5, $6 }
        /could not run/ { print "FAIL parity_" n "/" $1 ": " $0 }' "$T/$name.parity.log"
    if [ $rc -ne 0 ] && ! grep -q '^FAIL\|could not run' <(awk '{print $NF}' "$T/$name.parity.log" | grep -x FAIL); then
        echo "FAIL parity_$name: mact parity exited $rc"; tail -5 "$T/$name.parity.log"; fi
    grep -q "^timing\|^wrote" "$T/$name.gold.log" && echo "INFO $name: $(grep '^wrote' "$T/$name.gold.log" | head -1)"
}
# tiny: every configuration the runtime supports
run_case tiny              "tiny"                                 "--n-images 2"
run_case tiny_odd_n_3img   "tiny"                                 "--n-images 3 --seq-len 77"
run_case tiny_1img         "tiny"                                 "--n-images 1 --seq-len 41"
run_case tiny_no_sampler   "tiny --no-sampler"                    "--n-images 2 --seq-len 420"
run_case tiny_sampler_before "tiny --sampler-place before"        "--n-images 2"
run_case tiny_eager_pool   "tiny --pooling eager"                 "--n-images 1 --seq-len 31"
run_case tiny_no_pool_mask "tiny --pooling none --no-sampler"     "--n-images 1 --seq-len 230"
run_case tiny_olmo_qkvbias "tiny --qkv-bias --qk-norm olmo"       "--n-images 2"
run_case tiny_no_qknorm    "tiny --qk-norm none --dtype f32"      "--n-images 1 --seq-len 40"
run_case tiny_drop_eos     "tiny --action-mode both"              "--n-images 2"
run_case tiny_so101_steps  "tiny --norm-tag so101"                "--n-images 2 --steps 10 --horizon 30 --compressed"
CRAFT=craft_sampler run_case tiny_sampler_edges "tiny"            "--n-images 3 --seq-len 70"
# the action expert without its qk norm and RoPE (the vjp's other paths)
run_case tiny_ae_plain     "tiny --ae-no-qk-norm --ae-no-rope"    "--n-images 1 --seq-len 40 --steps 3 --rtc-schedule exp --rtc-delay 1"
# the C vjp alone against autograd: name, checkpoint case, extra args. A sanitized libmact (make asan / tsan)
# needs its runtime loaded into python first, as tests/test_python.sh does (python's own leaks are not ours).
vjp_lib="$(cd "$(dirname "$MACT")" && pwd)/libmact.so"; vjp_pre=""
if nm -D "$vjp_lib" 2>/dev/null | grep -q __asan_; then
    vjp_pre="$(${CC:-cc} -print-file-name=libasan.so):$(${CC:-cc} -print-file-name=libubsan.so)"
elif nm -D "$vjp_lib" 2>/dev/null | grep -q __tsan_; then
    vjp_pre="$(${CC:-cc} -print-file-name=libtsan.so)"
fi
run_vjp() {
    local name=$1 ck="$T/ck_$2" log="$T/vjp_$1.log"; shift 2
    if [ ! -d "$ck" ]; then echo "FAIL rtc_vjp_direct_$name: no checkpoint $ck"; return; fi
    LD_PRELOAD="$vjp_pre" ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        $PY tests/reference/rtc_vjp_check.py "$ck" --lib "$vjp_lib" --seed $((SEED + 17)) --name "rtc_vjp_direct_$name" \
        "$@" >"$log" 2>&1
    grep -E '^(PASS|FAIL|INFO) ' "$log"
    grep -qE '^(PASS|FAIL) ' "$log" || { echo "FAIL rtc_vjp_direct_$name: the check printed no result"; tail -5 "$log"; }
}
run_vjp tiny tiny
run_vjp tiny_so101_h30 tiny_so101_steps --tokens 150 --horizon 30 --beta 5
run_vjp tiny_ae_plain tiny_ae_plain --tokens 20
# massive activations (hidden magnitudes ~4e3): same gates; the relative max-abs bound holds too (docs/parity.md)
run_case tiny_massive      "tiny --massive"                       "--n-images 2"
# the reduced precisions against an existing case's fp32 golden files: name, precision, actions max abs, [RTC
# vjp actions max abs]: the vjp row's outputs are ~3x the plain loop's
# (max|ref| 8-9 against ~3: g = 10 on the correction at t = 0), so its gate is 3x the actions gate unless given
run_mode() {
    local name=$1 prec=$2 act=$3 vt=${4:-} log="$T/$1_$2.parity.log"
    [ -n "$vt" ] || vt=$(awk -v a="$act" 'BEGIN { print 3 * a }')
    "$MACT" parity "$T/g_$name" --model "$T/ck_$name" --precision "$prec" --cos-min 0.999 --tol-informational \
        --abs-tol "$act" --vjp-abs-tol "$vt" >"$log" 2>&1
    awk -v n="${name}_$prec" -v vt="$vt" '($NF == "PASS" || $NF == "FAIL") && NF >= 7 {
        printf "%s parity_%s/%s/%s cosine=%s max_abs=%s max_ref=%s in_tol=%s%s\n", $NF, n, $1, $2, $3, $4, $5, $6,
            $1 == "action_rtc_vjp" ? " (gate max_abs <= " vt ")" : "" }
        /could not run/ { print "FAIL parity_" n "/" $1 ": " $0 }' "$log"
    grep -qE ' (PASS|FAIL)$' "$log" || { echo "FAIL parity_${name}_$prec: no rows"; tail -3 "$log"; }
}
# int8 with massive activations (residual stream ~5e3; the GEMM inputs after RMSNorm are quantized per row):
# cosine >= 0.999 (observed >= 0.99988 over 3 runs), actions max abs <= 0.25 (observed 0.034-0.068; the RTC vjp
# row 0.15-0.38 at max|ref| 7-9, against 0.75)
run_mode tiny_massive int8 0.25
if [ "${MACT_PARITY_WIDE:-1}" != 0 ]; then
    # the real widths (1152 / 2560 / 768, real head counts): LIBERO LP-VTP-SD and SO101 settings
    run_case wide_libero   "wide"                                 "--n-images 2 --seq-len 130 --steps 2 --horizon 10"
    # bf16 mode (the default outside the parity gate) against the same fp32 golden files: cosine >= 0.999
    # per boundary (issue #7; observed >= 0.99999); the relative max-error bound is informational in bf16;
    # actions max abs <= 0.05 (observed ~0.01; the RTC vjp row 0.073 at max|ref| 9.1, against 0.15)
    run_mode wide_libero bf16 0.05
    # int8 mode (the LLM's weights int8, GEMM inputs u8 with the outlier split; the expert bf16): cosine >= 0.999,
    # actions max abs <= 0.25 (observed before the expert went back to bf16: 0.047-0.082 at max|ref| 3.3-5; the
    # RTC vjp row 0.25-0.30 at max|ref| 9.1, against 0.75; docs/parity.md has the current mode at depth)
    run_mode wide_libero int8 0.25
    run_vjp wide_libero wide_libero --tokens 130
    run_case wide_so101    "wide --norm-tag so101"                "--n-images 2 --seq-len 136 --steps 10 --horizon 30"
fi
