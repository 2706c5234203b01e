/* The packed AVX-512 GEMMs (fp32 and bf16) of the AVX-512 levels (kernels/x86/ops.c; vdpbf16ps only at
 * MACT_ISA_AVX512BF16), and the panel scheduling that the int8 GEMM (gemm_int8.c) shares. The functions carry
 * target attributes (x86.h), the rest of the build stays x86-64-v2.
 *
 * GEMM y[M, N] = x[M, K] W[N, K]^T on the packed weight (pack.c): outer-product micro-kernels on a
 * tile of 6 rows x 64 columns (24 zmm accumulators) per step of one k pair:
 *   bf16: A = x rounded to bf16 pairs (row-major, converted once per call, and once more by each worker
 *         that takes a run of panels when M is small); per pair, 4 loads of the
 *         panel, 6 broadcasts of A pairs, 24 vdpbf16ps.
 *   fp32: A = x as is; per pair, the 4 panel loads are widened exactly (shift / mask) to W[., 2kp] and
 *         W[., 2kp + 1], 12 broadcasts, 48 FMAs; each output is a single fp32 chain in k order.
 * Loops: one pool task per 64-column panel, or per contiguous run of panels when M is small
 * (mact_for_panels); a panel is computed entirely by one thread, in a fixed order, so results never depend
 * on the thread count. Inside a panel, K is cut into blocks of KC pairs (32 KiB of panel, L1-resident while
 * every 6-row tile of x passes; what each tile prefetches is planned by mact_tile_prefetch in x86.h);
 * partial sums between K blocks live in a per-thread [M, 64] buffer, so the epilogue (bias, GELU,
 * residual add) runs once on the finished sum. */
#include <immintrin.h>
#include "kernels/x86/x86.h"
#include "kernels/x86/vecmath_avx512.h"

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
