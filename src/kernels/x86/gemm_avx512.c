/* AVX-512 kernels: the packed GEMMs (fp32 and bf16), vector exp/GELU/SiLU, norm rows and attention.
 * Everything here is reached through the AVX-512 ops tables (kernels/x86/ops.c; the bf16 kernels only at
 * MACT_ISA_AVX512BF16); the functions carry target attributes, the rest of the build stays x86-64-v2.
 *
 * GEMM y[M, N] = x[M, K] W[N, K]^T on the packed weight (gemm_pack.c): outer-product micro-kernels on a
 * tile of 6 rows x 64 columns (24 zmm accumulators) per step of one k pair:
 *   bf16: A = x rounded to bf16 pairs (row-major, converted once per call, and once more by each worker
 *         that takes a run of panels when M is small); per pair, 4 loads of the
 *         panel, 6 broadcasts of A pairs, 24 vdpbf16ps.
 *   fp32: A = x as is; per pair, the 4 panel loads are widened exactly (shift / mask) to W[., 2kp] and
 *         W[., 2kp + 1], 12 broadcasts, 48 FMAs; each output is a single fp32 chain in k order.
 * Loops: one pool task per 64-column panel, or per contiguous run of panels when M is small
 * (mact_for_panels); a panel is computed entirely by one thread, in a fixed order, so results never depend
 * on the thread count. Inside a panel, K is cut into blocks of KC pairs (32 KiB of panel, L1-resident while
 * every 6-row tile of x passes; what each tile prefetches is planned by mact_tile_prefetch in kernels.h);
 * partial sums between K blocks live in a per-thread [M, 64] buffer, so the epilogue (bias, GELU,
 * residual add) runs once on the finished sum.
 * Attention: one pool task per head; K of the head transposed once (fp32, or bf16 d-pairs with V as key
 * pairs in BF16 mode), then blocks of 8 query rows: scores [8, nk] only, softmax numerators in fp32, the
 * 1/sum applied to the output rows. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#include "kernels/x86/x86.h"
#include "kernels/x86/vecmath_avx512.h"

#define TF __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define TB __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16")))
#define INL inline __attribute__((always_inline))

#define MR 6
#define KC_PAIRS 128 /* K block in pairs: 32 KiB of panel */

/* Up to SMALL_M rows a packed GEMM is bound by reading its weights (M multiply-adds per weight pair against
 * the ~2 vector instructions per cycle a core retires). A thread that owns a contiguous run of panels reads
 * one sequential stream, which the hardware prefetchers follow; claimed one at a time, the two threads'
 * panels interleave and every panel (48-96 KiB at K = 768) starts a new stream, which read measurably slower
 * in a streaming microbenchmark and in the action expert's GEMMs (A/B numbers: docs/benchmarks-log.md,
 * "2026-11-30: small-M GEMMs as contiguous panel runs"). Each run is still one
 * claimable chunk, so the run of a worker that was not scheduled is taken by the caller (a worker
 * preempted inside its run is waited for, as one preempted inside a panel was), and every output is
 * computed the same way whichever thread runs it. */
#define SMALL_M 32
typedef struct {
    mact_task_fn fn;
    mact_prep_fn prep;
    void *arg;
    int64_t np, runs;
} run_job;


static void run_task(void *arg, int64_t r, int tid)
{
    const run_job *j = arg;
    if (j->prep) j->prep(j->arg, tid);
    for (int64_t p = r * j->np / j->runs; p < (r + 1) * j->np / j->runs; p++) j->fn(j->arg, p, tid);
}

int mact_panels_in_runs(int64_t M, int par) { return par && M <= SMALL_M; }

void mact_for_panels(const mact_kctx *kc, int64_t np, int64_t M, int par, mact_task_fn fn, mact_prep_fn prep,
                     void *arg)
{
    if (!par) {
        for (int64_t p = 0; p < np; p++) fn(arg, p, 0);
        return;
    }
    if (M > SMALL_M) {
        mact_kctx_run(kc, np, 1, fn, arg);
        return;
    }
    run_job j = {fn, prep, arg, np, kc->n_threads};
    if (j.runs > np) j.runs = np;
    mact_kctx_run(kc, j.runs, 1, run_task, &j);
}

/* ---- vector math ---- */

TF void mact_gelu_tanh_avx512(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, gelu512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, gelu512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

TF static INL __m512 silu_mul512(__m512 g, __m512 v)
{
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_div_ps(_mm512_mul_ps(g, v), _mm512_add_ps(_mm512_set1_ps(1.f), e));
}

TF void mact_silu_mul_avx512(float *y, const float *gate, const float *val, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, silu_mul512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(val + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, silu_mul512(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, val + i)));
    }
}

/* ---- norm rows: statistics in double, as the plain-C rows ---- */

TF static INL __m512d sum_pd(__m512 v, __m512d acc)
{
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

TF static INL __m512d sumsq_pd(__m512 v, __m512d acc)
{
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    acc = _mm512_fmadd_pd(lo, lo, acc);
    return _mm512_fmadd_pd(hi, hi, acc);
}

TF static INL __m512d sumdev_pd(__m512 v, __m512d mean, __m512d acc)
{
    __m512d lo = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), mean);
    __m512d hi = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), mean);
    acc = _mm512_fmadd_pd(lo, lo, acc);
    return _mm512_fmadd_pd(hi, hi, acc);
}

TF void mact_layernorm_row_avx512(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    __m512d s = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s = sum_pd(_mm512_loadu_ps(x + i), s);
    if (tm) s = sum_pd(_mm512_maskz_loadu_ps(tm, x + d16), s);
    double mean = _mm512_reduce_add_pd(s) / dim;
    __m512d mv = _mm512_set1_pd(mean), s2 = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s2 = sumdev_pd(_mm512_loadu_ps(x + i), mv, s2);
    if (tm) {
        /* masked-off lanes would add mean^2: use the mean itself there */
        __m512 t = _mm512_mask_loadu_ps(_mm512_set1_ps((float)mean), tm, x + d16);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(t));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
        __mmask8 ml = (__mmask8)(tm & 0xff), mh = (__mmask8)(tm >> 8);
        lo = _mm512_maskz_sub_pd(ml, lo, mv);
        hi = _mm512_maskz_sub_pd(mh, hi, mv);
        s2 = _mm512_fmadd_pd(lo, lo, s2);
        s2 = _mm512_fmadd_pd(hi, hi, s2);
    }
    float inv = (float)(1.0 / sqrt(_mm512_reduce_add_pd(s2) / dim + eps));
    __m512 mf = _mm512_set1_ps((float)mean), iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < dim; i += 16) {
        __mmask16 m = i < d16 ? (__mmask16)0xffff : tm;
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mf), iv),
                                 _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i)));
    }
}

TF void mact_rmsnorm_row_avx512(float *y, const float *x, const float *w, float eps, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    __m512d s2 = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s2 = sumsq_pd(_mm512_loadu_ps(x + i), s2);
    if (tm) s2 = sumsq_pd(_mm512_maskz_loadu_ps(tm, x + d16), s2);
    float inv = (float)(1.0 / sqrt(_mm512_reduce_add_pd(s2) / dim + eps));
    __m512 iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < dim; i += 16) {
        __mmask16 m = i < d16 ? (__mmask16)0xffff : tm;
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), iv);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

/* ---- adaLN modulation and gated residual rows (the action expert's elementwise work per block) ---- */

TF void mact_modulate_rows_avx512(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    for (int64_t d = 0; d < dim; d += 16) {
        const __mmask16 m = d < d16 ? (__mmask16)0xffff : tm;
        const __m512 s1 = _mm512_add_ps(_mm512_set1_ps(1.f), _mm512_maskz_loadu_ps(m, scale + d));
        const __m512 sh = _mm512_maskz_loadu_ps(m, shift + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = y + r * dim + d;
            _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), s1), sh));
        }
    }
}

TF void mact_gated_add_rows_avx512(float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    for (int64_t d = 0; d < dim; d += 16) {
        const __mmask16 m = d < d16 ? (__mmask16)0xffff : tm;
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = z + r * dim + d;
            __m512 v = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, y + r * dim + d));
            _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), v));
        }
    }
}

/* ---- GEMM micro-kernels ---- */

typedef struct {
    float *y;            /* output tile origin (row mt, column n0) */
    int64_t ldy;
    const float *bias;   /* at n0, or NULL */
    int nv;              /* valid columns of the panel */
    int epi;
} epi_args;

/* finish a 6x64 tile: bias, activation, residual, masked store */
TF static INL void tile_store(int mr, __m512 acc[MR][4], const epi_args *ea)
{
    __mmask16 cm[4];
    for (int j = 0; j < 4; j++) {
        int left = ea->nv - 16 * j;
        cm[j] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
    }
    __m512 bv[4];
    for (int j = 0; j < 4; j++) bv[j] = ea->bias ? _mm512_maskz_loadu_ps(cm[j], ea->bias + 16 * j) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *yr = ea->y + i * ea->ldy;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            if (!cm[j]) continue;
            __m512 v = _mm512_add_ps(acc[i][j], bv[j]);
            if (ea->epi == MACT_EPI_GELU_TANH) v = gelu512(v);
            else if (ea->epi == MACT_EPI_RESIDUAL) v = _mm512_add_ps(_mm512_maskz_loadu_ps(cm[j], yr + 16 * j), v);
            _mm512_mask_storeu_ps(yr + 16 * j, cm[j], v);
        }
    }
}

/* bf16: A rows lda uint32 (pairs) apart, at pair kb; B = panel at pair kb; kn pairs */
TB static INL void kern_bf16(const int mr, const uint32_t *a, int64_t lda, const uint16_t *b, int64_t kn, float *cb,
                             int first, int last, const epi_args *ea, const char *pf, int pfl)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[i][j] = (i < mr && !first) ? _mm512_load_ps(cb + i * 64 + 16 * j) : _mm512_setzero_ps();
    const uint32_t *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int64_t kp = 0; kp < kn; kp++) {
        const uint16_t *bp = b + kp * 2 * MACT_PANEL;
        if (pf) MACT_PREFETCH_LINES(pf + kp * pfl * 64, pfl);
        __m512bh b0 = (__m512bh)_mm512_load_si512(bp), b1 = (__m512bh)_mm512_load_si512(bp + 32);
        __m512bh b2 = (__m512bh)_mm512_load_si512(bp + 64), b3 = (__m512bh)_mm512_load_si512(bp + 96);
#define ROW(i, ai)                                                                    \
    if (mr > i) {                                                                     \
        __m512bh av = (__m512bh)_mm512_set1_epi32((int)ai[kp]);                       \
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);                              \
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);                              \
        acc[i][2] = _mm512_dpbf16_ps(acc[i][2], av, b2);                              \
        acc[i][3] = _mm512_dpbf16_ps(acc[i][3], av, b3);                              \
    }
        ROW(0, a0) ROW(1, a1) ROW(2, a2) ROW(3, a3) ROW(4, a4) ROW(5, a5)
#undef ROW
    }
    if (!last) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < mr)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) _mm512_store_ps(cb + i * 64 + 16 * j, acc[i][j]);
        return;
    }
    tile_store(mr, acc, ea);
}

/* fp32: x rows ldx floats apart, at k = 2 kb; B = panel at pair kb; kn pairs, of which the last has only
 * its even k when odd_tail */
TF static INL void kern_f32(const int mr, const float *x, int64_t ldx, const uint16_t *b, int64_t kn, int odd_tail,
                            float *cb, int first, int last, const epi_args *ea, const char *pf, int pfl)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[i][j] = (i < mr && !first) ? _mm512_load_ps(cb + i * 64 + 16 * j) : _mm512_setzero_ps();
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx, *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
    const int64_t kfull = kn - (odd_tail ? 1 : 0);
#define ROWF(i, xi, off)                                                  \
    if (mr > i) {                                                         \
        __m512 xv = _mm512_set1_ps(xi[off]);                              \
        acc[i][0] = _mm512_fmadd_ps(xv, w0, acc[i][0]);                   \
        acc[i][1] = _mm512_fmadd_ps(xv, w1, acc[i][1]);                   \
        acc[i][2] = _mm512_fmadd_ps(xv, w2, acc[i][2]);                   \
        acc[i][3] = _mm512_fmadd_ps(xv, w3, acc[i][3]);                   \
    }
    for (int64_t kp = 0; kp < kn; kp++) {
        const uint16_t *bp = b + kp * 2 * MACT_PANEL;
        if (pf) MACT_PREFETCH_LINES(pf + kp * pfl * 64, pfl);
        {
            __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(bp), 16));
            __m512 w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(bp + 32), 16));
            __m512 w2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(bp + 64), 16));
            __m512 w3 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(bp + 96), 16));
            ROWF(0, x0, 2 * kp) ROWF(1, x1, 2 * kp) ROWF(2, x2, 2 * kp) ROWF(3, x3, 2 * kp) ROWF(4, x4, 2 * kp)
            ROWF(5, x5, 2 * kp)
        }
        if (kp >= kfull) break;
        {
            __m512 w0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_load_si512(bp), hi));
            __m512 w1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_load_si512(bp + 32), hi));
            __m512 w2 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_load_si512(bp + 64), hi));
            __m512 w3 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_load_si512(bp + 96), hi));
            ROWF(0, x0, 2 * kp + 1) ROWF(1, x1, 2 * kp + 1) ROWF(2, x2, 2 * kp + 1) ROWF(3, x3, 2 * kp + 1)
            ROWF(4, x4, 2 * kp + 1) ROWF(5, x5, 2 * kp + 1)
        }
    }
#undef ROWF
    if (!last) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < mr)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) _mm512_store_ps(cb + i * 64 + 16 * j, acc[i][j]);
        return;
    }
    tile_store(mr, acc, ea);
}

/* fp32 panels: x rows ldx floats apart, at k = kb; B = panel at row kb; kn k rows */
TF static INL void kern_f32p(const int mr, const float *x, int64_t ldx, const float *b, int64_t kn, float *cb,
                             int first, int last, const epi_args *ea, const char *pf, int pfl)
{
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[i][j] = (i < mr && !first) ? _mm512_load_ps(cb + i * 64 + 16 * j) : _mm512_setzero_ps();
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx, *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
#define ROWF(i, xi, off)                                                  \
    if (mr > i) {                                                         \
        __m512 xv = _mm512_set1_ps(xi[off]);                              \
        acc[i][0] = _mm512_fmadd_ps(xv, w0, acc[i][0]);                   \
        acc[i][1] = _mm512_fmadd_ps(xv, w1, acc[i][1]);                   \
        acc[i][2] = _mm512_fmadd_ps(xv, w2, acc[i][2]);                   \
        acc[i][3] = _mm512_fmadd_ps(xv, w3, acc[i][3]);                   \
    }
    for (int64_t k = 0; k < kn; k++) {
        const float *bp = b + k * MACT_PANEL;
        if (pf) MACT_PREFETCH_LINES(pf + k * pfl * 64, pfl);
        __m512 w0 = _mm512_load_ps(bp), w1 = _mm512_load_ps(bp + 16), w2 = _mm512_load_ps(bp + 32),
               w3 = _mm512_load_ps(bp + 48);
        ROWF(0, x0, k) ROWF(1, x1, k) ROWF(2, x2, k) ROWF(3, x3, k) ROWF(4, x4, k) ROWF(5, x5, k)
    }
#undef ROWF
    if (!last) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < mr)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) _mm512_store_ps(cb + i * 64 + 16 * j, acc[i][j]);
        return;
    }
    tile_store(mr, acc, ea);
}

/* one instance per row count, so each keeps its accumulators in registers */
#define KB(n)                                                                                                \
    TB static void kern_bf16_##n(const uint32_t *a, int64_t lda, const uint16_t *b, int64_t kn, float *cb,  \
                                 int first, int last, const epi_args *ea, const char *pf, int pfl)                    \
    {                                                                                                        \
        kern_bf16(n, a, lda, b, kn, cb, first, last, ea, pf, pfl);                                                \
    }
#define KF(n)                                                                                                \
    TF static void kern_f32_##n(const float *x, int64_t ldx, const uint16_t *b, int64_t kn, int odd_tail,    \
                                float *cb, int first, int last, const epi_args *ea, const char *pf, int pfl)          \
    {                                                                                                        \
        kern_f32(n, x, ldx, b, kn, odd_tail, cb, first, last, ea, pf, pfl);                                       \
    }
#define KP(n)                                                                                                \
    TF static void kern_f32p_##n(const float *x, int64_t ldx, const float *b, int64_t kn, float *cb, int first,  \
                                 int last, const epi_args *ea, const char *pf, int pfl)                               \
    {                                                                                                        \
        kern_f32p(n, x, ldx, b, kn, cb, first, last, ea, pf, pfl);                                                \
    }
KB(1) KB(2) KB(3) KB(4) KB(5) KB(6)
KF(1) KF(2) KF(3) KF(4) KF(5) KF(6)
KP(1) KP(2) KP(3) KP(4) KP(5) KP(6)
typedef void (*kbf_fn)(const uint32_t *, int64_t, const uint16_t *, int64_t, float *, int, int, const epi_args *,
                       const char *, int);
typedef void (*kf_fn)(const float *, int64_t, const uint16_t *, int64_t, int, float *, int, int, const epi_args *,
                      const char *, int);
static const kbf_fn kbf[MR + 1] = {0, kern_bf16_1, kern_bf16_2, kern_bf16_3, kern_bf16_4, kern_bf16_5, kern_bf16_6};
static const kf_fn kf[MR + 1] = {0, kern_f32_1, kern_f32_2, kern_f32_3, kern_f32_4, kern_f32_5, kern_f32_6};
typedef void (*kp_fn)(const float *, int64_t, const float *, int64_t, float *, int, int, const epi_args *,
                      const char *, int);
static const kp_fn kp[MR + 1] = {0, kern_f32p_1, kern_f32p_2, kern_f32p_3, kern_f32p_4, kern_f32p_5, kern_f32p_6};

/* x fp32 rows [m0, m1) -> bf16 pairs (round to nearest even), K padded to 2 Kp with zeros */
TB static void to_bf16_rows(uint32_t *A, int64_t Kp, const float *x, int64_t ldx, int64_t K, int64_t m0, int64_t m1)
{
    for (int64_t m = m0; m < m1; m++) {
        const float *xr = x + m * ldx;
        uint32_t *ar = A + m * Kp;
        int64_t k = 0;
        for (; k + 32 <= K; k += 32) {
            __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + k + 16), _mm512_loadu_ps(xr + k));
            _mm512_storeu_si512(ar + k / 2, (__m512i)h);
        }
        if (k < K) {
            int64_t left = K - k;  /* 1..31 */
            __mmask16 m_lo = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __mmask16 m_hi = left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
            __m512bh h = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m_hi, xr + k + 16), _mm512_maskz_loadu_ps(m_lo, xr + k));
            int64_t pairs = (left + 1) / 2;
            _mm512_mask_storeu_epi32(ar + k / 2, (__mmask16)((1u << pairs) - 1), (__m512i)h);
        }
    }
}

typedef struct {
    float *y;
    int64_t ldy, ldx, M;
    const float *x, *bias;
    const mact_packed *pk;
    const uint32_t *A;  /* the caller's bf16 copy of x */
    int epi, use_bf16;
    int local;          /* panels in runs, each run's prep sets its thread's own[0] */
    const mact_kctx *kc;
} gemm_job;

/* The bf16 copy of x a thread's panels read: its own when its run's prep made one (the same bits), else
 * the caller's. The worker's kernels broadcast A while they stream the panel, and A just written by the
 * caller sits in the caller's cache: fetched line by line from there, it costs more per call than converting
 * x again (docs/bugs.md, "A worker reading what the caller just wrote"; numbers in docs/benchmarks-log.md,
 * 2026-11-30, third session).
 * Set by prep before every run (the context's per-thread own[0]), read only by that run's panels, on the same
 * thread. */

static void gemm_prep(void *arg, int tid)
{
    const gemm_job *j = arg;
    mact_kthread *th = &j->kc->th[tid];
    th->own[0] = j->A;
    if (tid == 0 || !j->use_bf16) return;  /* the caller's copy is already in its cache */
    uint32_t *A = mact_kctx_buf(j->kc, tid, 0, mact_gemm_scratch0(j->M, j->pk->K));
    if (!A) return;  /* out of memory: read the caller's copy */
    to_bf16_rows(A, j->pk->Kp, j->x, j->ldx, j->pk->K, 0, j->M);
    th->own[0] = A;
}

/* one 64-column panel over all of K and M: each output is computed by one thread, in a fixed order */
TF static void gemm_panel_task(void *arg, int64_t p, int tid)
{
    const gemm_job *j = arg;
    const uint32_t *Ax = j->local ? j->kc->th[tid].own[0] : j->A;
    const mact_packed *pk = j->pk;
    const int64_t N = pk->N, K = pk->K, Kp = pk->Kp, M = j->M, KC = KC_PAIRS;
    const int f32 = pk->fmt == MACT_PACK_F32;
    float *cb = Kp > KC ? mact_kctx_buf(j->kc, tid, 1, mact_gemm_scratch1(M)) : NULL;
    const uint16_t *B = (const uint16_t *)pk->data + p * Kp * 2 * MACT_PANEL;
    const float *BF = (const float *)pk->data + p * Kp * MACT_PANEL;
    const int64_t n0 = p * MACT_PANEL;
    epi_args ea = {.ldy = j->ldy, .bias = j->bias ? j->bias + n0 : NULL, .nv = (int)(N - n0 < 64 ? N - n0 : 64),
                   .epi = j->epi};
    for (int64_t kb = 0; kb < Kp; kb += KC) {
        const int64_t kn = Kp - kb < KC ? Kp - kb : KC;
        const int first = kb == 0, last = kb + kn == Kp;
        /* rows are 256 bytes in every format; prefetching past the end of the packs is harmless (no faults) */
        const char *blk = (const char *)pk->data + ((p * Kp) + kb) * 256;
        for (int64_t mt = 0; mt < M; mt += MR) {
            const int mr = (int)(M - mt < MR ? M - mt : MR);
            ea.y = j->y + mt * j->ldy + n0;
            float *cbt = cb ? cb + mt * 64 : NULL;
            int pfl;
            const char *pf = mact_tile_prefetch(blk, kn, KC, M, mt, &pfl);
            if (f32)
                kp[mr](j->x + mt * j->ldx + kb, j->ldx, BF + kb * MACT_PANEL, kn, cbt, first, last, &ea, pf, pfl);
            else if (j->use_bf16)
                kbf[mr](Ax + mt * Kp + kb, Kp, B + kb * 2 * MACT_PANEL, kn, cbt, first, last, &ea, pf, pfl);
            else
                kf[mr](j->x + mt * j->ldx + 2 * kb, j->ldx, B + kb * 2 * MACT_PANEL, kn, last && (K & 1), cbt, first,
                       last, &ea, pf, pfl);
        }
    }
}

#define CONV_ROWS 32
typedef struct {
    uint32_t *A;
    int64_t Kp, ldx, K, M;
    const float *x;
} conv_job;

TB static void conv_task(void *arg, int64_t c, int tid)
{
    const conv_job *j = arg;
    int64_t m0 = c * CONV_ROWS, m1 = m0 + CONV_ROWS < j->M ? m0 + CONV_ROWS : j->M;
    to_bf16_rows(j->A, j->Kp, j->x, j->ldx, j->K, m0, m1);
}

void mact_x86_gemm_packed(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                          const mact_packed *pk, const float *bias, int64_t M, int epi, int use_bf16)
{
    const int64_t N = pk->N, K = pk->K, Kp = pk->Kp, np = pk->npanel;
    const int par = mact_gemm_parallel(M, N, K);
    if (pk->fmt == MACT_PACK_F32) use_bf16 = 0;
    uint32_t *A = use_bf16 ? mact_kctx_buf(kc, 0, 0, mact_gemm_scratch0(M, K)) : NULL;
    if (use_bf16 && !A) use_bf16 = 0;  /* out of memory for the bf16 copy of x: compute in fp32 */
    if (use_bf16) {
        conv_job cj = {A, Kp, ldx, K, M, x};
        const int64_t nc = (M + CONV_ROWS - 1) / CONV_ROWS;
        mact_kctx_run(kc, nc, par && M * K > 65536, conv_task, &cj);
    }
    gemm_job j = {y, ldy, ldx, M, x, bias, pk, A, epi, use_bf16, mact_panels_in_runs(M, par), kc};
    mact_for_panels(kc, np, M, par, gemm_panel_task, j.local ? gemm_prep : NULL, &j);
}

/* ---- attention ---- */

/* scores block: S[r][j] = sum_d q_r[d] kt[d][j] for rb <= 8 rows, j < nkp (multiple of 16) */
TF static void attn_scores(float *S, int64_t nkp, const float *q, int64_t q_ld, int rb, const float *kt, int hd)
{
    for (int64_t j0 = 0; j0 < nkp; j0 += 32) {
        const int two = j0 + 16 < nkp;
        __m512 acc[8][2];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m512 k0 = _mm512_loadu_ps(kt + d * nkp + j0);
            __m512 k1 = two ? _mm512_loadu_ps(kt + d * nkp + j0 + 16) : _mm512_setzero_ps();
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                if (r >= rb) break;
                __m512 qv = _mm512_set1_ps(q[r * q_ld + d]);
                acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            if (r >= rb) break;
            _mm512_storeu_ps(S + r * nkp + j0, acc[r][0]);
            if (two) _mm512_storeu_ps(S + r * nkp + j0 + 16, acc[r][1]);
        }
    }
}

/* out rows: O[r][c] = inv[r] * sum_j P[r][j] v[j][c], c < hd. NZ = ceil(hd / 16) vectors per row, R rows
 * per pass (R * NZ <= 24 accumulators); the last vector of a row is masked. */
TF static INL void attn_pv_t(const int NZ, const int R, float *out, int64_t out_ld, const float *S, int64_t nkp,
                             int64_t nk, int rb, const float *v, int64_t kv_ld, int hd, const float *inv)
{
    const __mmask16 last = (__mmask16)((1u << (hd - 16 * (NZ - 1))) - 1);
    for (int r0 = 0; r0 < rb; r0 += R) {
        __m512 acc[8][8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_setzero_ps();
        const int rn = rb - r0 < R ? rb - r0 : R;
        const float *Sr = S + r0 * nkp;
        for (int64_t j = 0; j < nk; j++) {
            const float *vj = v + j * kv_ld;
            __m512 vv[8];
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++)
                vv[z] = z < NZ - 1 ? _mm512_loadu_ps(vj + 16 * z) : _mm512_maskz_loadu_ps(last, vj + 16 * z);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (r >= rn) break;
                __m512 pv = _mm512_set1_ps(Sr[r * nkp + j]);
#pragma GCC unroll 8
                for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_fmadd_ps(pv, vv[z], acc[r][z]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (r >= rn) break;
            float *o = out + (r0 + r) * out_ld;
            __m512 sc = _mm512_set1_ps(inv[r0 + r]);
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) {
                __m512 val = _mm512_mul_ps(acc[r][z], sc);
                if (z < NZ - 1) _mm512_storeu_ps(o + 16 * z, val);
                else _mm512_mask_storeu_ps(o + 16 * z, last, val);
            }
        }
    }
}

#define PV(nz, r)                                                                                              \
    TF static void attn_pv_##nz(float *out, int64_t out_ld, const float *S, int64_t nkp, int64_t nk, int rb,   \
                                const float *v, int64_t kv_ld, int hd, const float *inv)                       \
    {                                                                                                          \
        attn_pv_t(nz, r, out, out_ld, S, nkp, nk, rb, v, kv_ld, hd, inv);                                      \
    }
PV(1, 8) PV(2, 8) PV(3, 8) PV(4, 6) PV(5, 4) PV(6, 4) PV(7, 3) PV(8, 3)
typedef void (*pv_fn)(float *, int64_t, const float *, int64_t, int64_t, int, const float *, int64_t, int,
                      const float *);
static const pv_fn pv_tab[9] = {0, attn_pv_1, attn_pv_2, attn_pv_3, attn_pv_4, attn_pv_5, attn_pv_6, attn_pv_7,
                                attn_pv_8};

/* softmax numerators of one score row in place: s = s * scale + bias, masked keys -inf, then exp(s - max),
 * zero past nk. Returns 1 / sum (the caller scales the output rows), or 0 when no key is visible (the
 * row's output must be zero; the row is zeroed). */
TF static float softmax_row(float *s, int64_t nk, int64_t nkp, float scale, const float *brow, const uint8_t *key_ok)
{
    const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    __mmask16 nan = 0;
    for (int64_t j = 0; j < nkp; j += 16) {
        __mmask16 m = nk - j >= 16 ? (__mmask16)0xffff : nk - j > 0 ? (__mmask16)((1u << (nk - j)) - 1) : 0;
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + j), sc);
        if (brow) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, brow + j));
        if (key_ok) {
            __m128i ok = _mm_maskz_loadu_epi8(m, key_ok + j);
            m &= _mm_test_epi8_mask(ok, ok);
        }
        v = _mm512_mask_blend_ps(m, ninf, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        _mm512_storeu_ps(s + j, v);
        mx = _mm512_max_ps(mx, v);
    }
    if (nan) {  /* a NaN score poisons its row: max and the live mask below would otherwise drop it */
        for (int64_t j = 0; j < nkp; j++) s[j] = NAN;
        return NAN;
    }
    float mxs = _mm512_reduce_max_ps(mx);
    if (mxs == -INFINITY) {
        memset(s, 0, (size_t)nkp * sizeof(float));
        return 0.f;
    }
    const __m512 mv = _mm512_set1_ps(mxs);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < nkp; j += 16) {
        __m512 v = _mm512_loadu_ps(s + j);
        __mmask16 live = _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_OQ);
        __m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(v, mv)));
        _mm512_storeu_ps(s + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    return (float)(1.0 / (double)_mm512_reduce_add_ps(sum));
}

typedef mact_att_job att_job;

/* one head: K transposed once, then blocks of 8 query rows */
TF static void attention_head_task(void *arg, int64_t hh, int t)
{
    const att_job *j = arg;
    const int h = (int)hh, hd = j->hd, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nq = j->nq, nkp = (nk + 15) & ~(int64_t)15, per = mact_attention_scratch(nk);
    float *kt = j->scratch + t * per, *S = kt + (int64_t)hd * nkp;
    const int64_t koff = (int64_t)(h / group) * hd;
    for (int64_t j0 = 0; j0 < nkp; j0 += 16) {
        int64_t jn = nk - j0 < 16 ? nk - j0 : 16;
        for (int d = 0; d < hd; d++) {
            float *dst = kt + d * nkp + j0;
            for (int64_t jj = 0; jj < jn; jj++) dst[jj] = j->k[(j0 + jj) * j->kv_ld + koff + d];
            for (int64_t jj = jn; jj < 16; jj++) dst[jj] = 0.f;
        }
    }
    for (int64_t i0 = 0; i0 < nq; i0 += 8) {
        const int rb = (int)(nq - i0 < 8 ? nq - i0 : 8);
        attn_scores(S, nkp, j->q + i0 * j->q_ld + (int64_t)h * hd, j->q_ld, rb, kt, hd);
        float inv[8];
        for (int r = 0; r < rb; r++)
            inv[r] = softmax_row(S + r * nkp, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
        /* a row with no visible key has all-zero numerators and inv 0: its output is exactly zero */
        pv_tab[(hd + 15) / 16](j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, S, nkp, nk, rb, j->v + koff,
                               j->kv_ld, hd, inv);
    }
}

int mact_x86_attention_avx512(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                              const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                              int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch)
{
    if (!(hd <= 128 && hd >= 1 && nk >= 8 && nq * nk >= 64)) return 0;
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    mact_kctx_run(kc, n_heads, (double)nq * (double)nk * (double)hd * n_heads > 2e5, attention_head_task, &j);
    return 1;
}

/* ---- attention, bf16 products (BF16 precision) ---- */

static inline uint32_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

/* S[r][j] = sum_d q_r[d] k_j[d] over d pairs: q2 [rb][hd/2] pairs, kt2 [hd/2][nkp] pairs */
TB static void attn_scores_bf16(float *S, int64_t nkp, const uint32_t *q2, int rb, const uint32_t *kt2, int hp)
{
    for (int64_t j0 = 0; j0 < nkp; j0 += 32) {
        const int two = j0 + 16 < nkp;
        __m512 acc[8][2];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int d = 0; d < hp; d++) {
            __m512bh k0 = (__m512bh)_mm512_loadu_si512(kt2 + d * nkp + j0);
            __m512bh k1 = two ? (__m512bh)_mm512_loadu_si512(kt2 + d * nkp + j0 + 16) : (__m512bh)_mm512_setzero_si512();
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                if (r >= rb) break;
                __m512bh qv = (__m512bh)_mm512_set1_epi32((int)q2[r * hp + d]);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], qv, k0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], qv, k1);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            if (r >= rb) break;
            _mm512_storeu_ps(S + r * nkp + j0, acc[r][0]);
            if (two) _mm512_storeu_ps(S + r * nkp + j0 + 16, acc[r][1]);
        }
    }
}

/* O[r][c] = inv[r] sum_j P[r][j] v[j][c] over key pairs: p2 [rb][nkp/2], v2 [nkp/2][hd] pairs */
TB static INL void attn_pv_bf16_t(const int NZ, const int R, float *out, int64_t out_ld, const uint32_t *p2,
                                  int64_t np2, int rb, const uint32_t *v2, int hd, const float *inv)
{
    const __mmask16 last = (__mmask16)((1u << (hd - 16 * (NZ - 1))) - 1);
    for (int r0 = 0; r0 < rb; r0 += R) {
        __m512 acc[8][8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_setzero_ps();
        const int rn = rb - r0 < R ? rb - r0 : R;
        for (int64_t jp = 0; jp < np2; jp++) {
            const uint32_t *vj = v2 + jp * hd;
            __m512bh vv[8];
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++)
                vv[z] = (__m512bh)(z < NZ - 1 ? _mm512_loadu_si512(vj + 16 * z) : _mm512_maskz_loadu_epi32(last, vj + 16 * z));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (r >= rn) break;
                __m512bh pv = (__m512bh)_mm512_set1_epi32((int)p2[(r0 + r) * np2 + jp]);
#pragma GCC unroll 8
                for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], pv, vv[z]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (r >= rn) break;
            float *o = out + (r0 + r) * out_ld;
            __m512 sc = _mm512_set1_ps(inv[r0 + r]);
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) {
                __m512 val = _mm512_mul_ps(acc[r][z], sc);
                if (z < NZ - 1) _mm512_storeu_ps(o + 16 * z, val);
                else _mm512_mask_storeu_ps(o + 16 * z, last, val);
            }
        }
    }
}

#define PVB(nz, r)                                                                                               \
    TB static void attn_pv_bf16_##nz(float *out, int64_t out_ld, const uint32_t *p2, int64_t np2, int rb,         \
                                     const uint32_t *v2, int hd, const float *inv)                               \
    {                                                                                                            \
        attn_pv_bf16_t(nz, r, out, out_ld, p2, np2, rb, v2, hd, inv);                                            \
    }
PVB(1, 8) PVB(2, 8) PVB(3, 8) PVB(4, 6) PVB(5, 4) PVB(6, 4) PVB(7, 3) PVB(8, 3)
typedef void (*pvb_fn)(float *, int64_t, const uint32_t *, int64_t, int, const uint32_t *, int, const float *);
static const pvb_fn pvb_tab[9] = {0, attn_pv_bf16_1, attn_pv_bf16_2, attn_pv_bf16_3, attn_pv_bf16_4, attn_pv_bf16_5,
                                  attn_pv_bf16_6, attn_pv_bf16_7, attn_pv_bf16_8};

/* one head: K as d pairs [hd/2][nkp], V as key pairs [nkp/2][hd] (bf16, zero past nk), then blocks of 8 rows */
/* 16 fp32 (as bits) -> bf16 bits in each lane's low half, rounding to nearest even exactly as bf16_bits */
TF static INL __m512i bf16_round16(__m512i u)
{
    __m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
    r = _mm512_add_epi32(r, _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    return _mm512_srli_epi32(r, 16);
}

/* 8 (even, odd) fp32 pairs as 64-bit lanes -> 8 bf16 pairs (even in the low half) */
TF static INL __m256i bf16_pairs8(__m512i pairs)
{
    __m512i r = bf16_round16(pairs);  /* per 64-bit lane: lo = bf(even), bits 32..47 = bf(odd) */
    r = _mm512_or_si512(r, _mm512_srli_epi64(r, 16));
    return _mm512_cvtepi64_epi32(r);
}

/* one kv head (its columns at koff) -> kt2 [hp, nkp] d-pairs of K^T and v2 [np2, hd] key pairs of V, as bf16
 * (keys past nk are zero). K: 8 keys at a time, each (K[j, 2d], K[j, 2d + 1]) fetched as one 64-bit gather lane;
 * V: two key rows at a time, 16 columns per step. */
TF static void pack_kv_head_bf16(uint32_t *kt2, uint32_t *v2, const float *k, const float *v, int64_t kv_ld,
                                 int64_t koff, int64_t nk, int hd)
{
    const int hp = hd / 2;
    const int64_t nkp = (nk + 15) & ~(int64_t)15, np2 = nkp / 2;
    const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)kv_ld));
    for (int64_t j0 = 0; j0 < nkp; j0 += 8) {
        const int64_t live = nk - j0 <= 0 ? 0 : nk - j0 >= 8 ? 8 : nk - j0;
        const __mmask8 m = (__mmask8)((1u << live) - 1);
        const float *base = k + (live ? j0 * kv_ld : 0) + koff;
        for (int d = 0; d < hp; d++) {
            __m512i pr = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), m, step, base + 2 * d, 4);
            _mm256_storeu_si256((__m256i *)(kt2 + (int64_t)d * nkp + j0),
                                _mm256_maskz_mov_epi32(m, bf16_pairs8(pr)));
        }
    }
    const int h16 = hd & ~15;
    const __mmask16 tm = (__mmask16)((1u << (hd - h16)) - 1);
    for (int64_t jp = 0; jp < np2; jp++) {
        const int ha = 2 * jp < nk, hb = 2 * jp + 1 < nk;
        const float *a = v + (ha ? 2 * jp : 0) * kv_ld + koff, *b = v + (hb ? 2 * jp + 1 : 0) * kv_ld + koff;
        for (int c = 0; c < hd; c += 16) {
            const __mmask16 cm = c < h16 ? (__mmask16)0xffff : tm;
            __m512i ra = ha ? bf16_round16(_mm512_maskz_loadu_epi32(cm, a + c)) : _mm512_setzero_si512();
            __m512i rb = hb ? bf16_round16(_mm512_maskz_loadu_epi32(cm, b + c)) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(v2 + jp * hd + c, cm, _mm512_or_si512(ra, _mm512_slli_epi32(rb, 16)));
        }
    }
}

static int64_t kv_head_words(int64_t nk, int hd)
{
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (int64_t)(hd / 2) * nkp + nkp / 2 * hd;
}

void mact_x86_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv,
                                 int hd)
{
    const int64_t per = kv_head_words(nk, hd), nkp = (nk + 15) & ~(int64_t)15;
    for (int g = 0; g < n_kv; g++)
        pack_kv_head_bf16(dst + g * per, dst + g * per + (int64_t)(hd / 2) * nkp, k, v, kv_ld, (int64_t)g * hd, nk, hd);
}

TB static void attention_head_bf16_task(void *arg, int64_t hh, int t)
{
    const att_job *j = arg;
    const int h = (int)hh, hd = j->hd, hp = hd / 2, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nq = j->nq, nkp = (nk + 15) & ~(int64_t)15, np2 = nkp / 2;
    const int64_t per = mact_attention_scratch(nk);
    uint32_t *kt2 = (uint32_t *)(j->scratch + t * per);   /* hp * nkp */
    uint32_t *v2 = kt2 + (int64_t)hp * nkp;                /* np2 * hd */
    float *S = (float *)(v2 + np2 * hd);                   /* 8 * nkp */
    uint32_t *p2 = (uint32_t *)(S + 8 * nkp);              /* 8 * np2 */
    uint32_t *q2 = p2 + 8 * np2;                           /* 8 * hp */
    if (j->kvp) {  /* packed once by the caller for this kv head */
        kt2 = (uint32_t *)j->kvp + (int64_t)(h / group) * kv_head_words(nk, hd);
        v2 = kt2 + (int64_t)hp * nkp;
    } else
        pack_kv_head_bf16(kt2, v2, j->k, j->v, j->kv_ld, (int64_t)(h / group) * hd, nk, hd);
    for (int64_t i0 = 0; i0 < nq; i0 += 8) {
        const int rb = (int)(nq - i0 < 8 ? nq - i0 : 8);
        for (int r = 0; r < rb; r++) {
            const float *qr = j->q + (i0 + r) * j->q_ld + (int64_t)h * hd;
            for (int d = 0; d < hp; d++) q2[r * hp + d] = bf16_bits(qr[2 * d]) | bf16_bits(qr[2 * d + 1]) << 16;
        }
        attn_scores_bf16(S, nkp, q2, rb, kt2, hp);
        float inv[8];
        for (int r = 0; r < rb; r++) {
            float *sr = S + r * nkp;
            inv[r] = softmax_row(sr, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
            uint32_t *pr = p2 + r * np2;
            for (int64_t jp = 0; jp < np2; jp += 16) {  /* nkp is a multiple of 16: np2 of 8 */
                int64_t left = np2 - jp;
                if (left >= 16) {
                    __m512bh hh2 = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(sr + 2 * jp + 16), _mm512_loadu_ps(sr + 2 * jp));
                    _mm512_storeu_si512(pr + jp, (__m512i)hh2);
                } else {
                    __m512bh hh2 = _mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_loadu_ps(sr + 2 * jp));
                    _mm512_mask_storeu_epi32(pr + jp, (__mmask16)0xff, (__m512i)hh2);
                }
            }
        }
        pvb_tab[(hd + 15) / 16](j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, p2, np2, rb, v2, hd, inv);
    }
}

void mact_x86_attention_bf16(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                             const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                             int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                             const uint32_t *kvp)
{
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, kvp};
    mact_kctx_run(kc, n_heads, (double)nq * (double)nk * (double)hd * n_heads > 2e5, attention_head_bf16_task, &j);
}

/* ---- instruction-level peak (benchmarks): 24 independent accumulator chains per thread ---- */

TB static double peak_bf16(long iters)
{
    __m512 a[24];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
    for (long t = 0; t < iters; t++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_dpbf16_ps(a[i], x, y);
        __asm__ volatile("" ::"v"(a[0]), "v"(a[7]), "v"(a[15]), "v"(a[23]));
    }
    __m512 s = a[0];
#pragma GCC unroll 24
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);  /* constant indices: a[] stays in registers */
    return _mm512_reduce_add_ps(s);
}

TF static double peak_f32(long iters)
{
    __m512 a[24];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
    for (long t = 0; t < iters; t++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
        __asm__ volatile("" ::"v"(a[0]), "v"(a[7]), "v"(a[15]), "v"(a[23]));
    }
    __m512 s = a[0];
#pragma GCC unroll 24
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}


double mact_x86_peak_gflops(int use_bf16, int threads)
{
    if (!mact_x86_has_avx512() || (use_bf16 && !mact_x86_has_avx512bf16())) return 0;
    /* ~0.15 s per thread at peak; 24 chains of 16 lanes x (2 bf16 multiply-adds or 1 fp32 FMA) x 2 ops */
    return use_bf16 ? mact_peak_best_of_3(peak_bf16, 20000000, 24.0 * 64.0, threads)
                    : mact_peak_best_of_3(peak_f32, 40000000, 24.0 * 32.0, threads);
}
