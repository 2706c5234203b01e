/* The int8 GEMM of MACT_PRECISION_INT8: y[M, N] = x[M, K] W[N, K]^T on a weight packed as MACT_PACK_I8
 * (pack.c: per-output-channel symmetric int8, 64-column panels of k quads).
 *
 * Arithmetic (identical in the AVX512-VNNI and plain-C kernels, so the tests can compare them exactly up
 * to the epilogue's rounding):
 *   x row m   -> u8 q[m, k] with scale s[m] and zero point z[m]: x ~ s (q - z)   (mact_quant_row_u8)
 *   W row n   -> int8 W8[n, k] with scale w[n]:                  W ~ w W8
 *   acc[m, n] =  sum_k q[m, k] W8[n, k]                          (int32, exact: |acc| < 2^31 for K < 66000)
 *   y[m, n]   =  float(acc - z[m] colsum[n]) * (s[m] w[n]) + bias[n], then the epilogue.
 * The u8 x s8 products are what vpdpbusd multiplies (4 per 32-bit lane); asymmetric activations use all 256
 * levels of the row's range, which matters after SiLU and GELU (one-sided distributions).
 *
 * Loops as the bf16 kernel (gemm_avx512.c): panels handed out by mact_for_panels, K blocks of KC quads
 * (32 KiB of panel), 6-row x 64-column tiles of 24 int32 accumulators, partial sums between K blocks in a
 * per-thread [M, 64] int32 buffer. Integer sums do not depend on the order, so results never depend on the
 * thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include "kernels/x86/x86.h"
#include "kernels/x86/vecmath_avx512.h"

#define TV __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512vnni")))
#define MR 6
#define KC 128 /* quads per K block: 128 x 256 B = 32 KiB of panel */


/* ---- row quantization ---- */

static void quant_params(float mn, float mx, float *s, float *inv, int32_t *z)
{
    mn = mn < 0.f ? mn : 0.f;
    mx = mx > 0.f ? mx : 0.f;
    if (!(mx - mn > 0.f) || !isfinite(mx - mn)) {  /* an all-zero row (or a non-finite one: callers reject those) */
        *s = 0.f;
        *inv = 0.f;
        *z = 0;
        return;
    }
    *s = (mx - mn) / 255.f;
    *inv = 1.f / *s;
    float zf = nearbyintf(-mn * *inv);
    *z = zf < 0.f ? 0 : zf > 255.f ? 255 : (int32_t)zf;
}

static inline uint8_t q1(float x, float inv, int32_t z)
{
    float r = nearbyintf(x * inv) + (float)z;
    return r < 0.f ? 0 : r > 255.f ? 255 : (uint8_t)r;
}

/* A row with a NaN or an infinity quantizes to zeros with a NaN scale, so every output it feeds is NaN (a
 * quantized NaN would otherwise come out as a finite value and hide the fault downstream). */
static void non_finite_row(uint32_t *A, int64_t Kq, float *s, int32_t *z)
{
    memset(A, 0, (size_t)Kq * 4);
    *s = NAN;
    *z = 0;
}

void mact_quant_row_u8(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z)
{
    float mn = x[0], mx = x[0], inv;
    for (int64_t k = 1; k < K; k++) {
        mn = x[k] < mn ? x[k] : mn;
        mx = x[k] > mx ? x[k] : mx;
    }
    quant_params(mn, mx, s, &inv, z);
    uint8_t *q = (uint8_t *)A;
    int bad = 0;
    for (int64_t k = 0; k < K; k++) bad |= !isfinite(x[k]);
    if (bad) {  /* min/max skip a NaN and rounding clamps an inf: the row's scale carries the fault instead */
        non_finite_row(A, Kq, s, z);
        return;
    }
    for (int64_t k = 0; k < K; k++) q[k] = q1(x[k], inv, *z);
    memset(q + K, 0, (size_t)(4 * Kq - K));
}

TV void mact_quant_row_u8_avx512(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z)
{
    const int64_t k16 = K & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (K - k16)) - 1);
    __m512 vmn = _mm512_set1_ps(x[0]), vmx = vmn;
    __mmask16 bad = 0;  /* x - x is NaN exactly for a NaN or an infinity */
    for (int64_t k = 0; k < k16; k += 16) {
        __m512 v = _mm512_loadu_ps(x + k);
        vmn = _mm512_min_ps(vmn, v);
        vmx = _mm512_max_ps(vmx, v);
        bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_sub_ps(v, v), _CMP_UNORD_Q);
    }
    if (tm) {
        __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(x[0]), tm, x + k16);
        vmn = _mm512_min_ps(vmn, v);
        vmx = _mm512_max_ps(vmx, v);
        bad |= _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_sub_ps(v, v), _CMP_UNORD_Q);
    }
    if (bad || !isfinite(x[0])) {
        non_finite_row(A, Kq, s, z);
        return;
    }
    float inv;
    quant_params(_mm512_reduce_min_ps(vmn), _mm512_reduce_max_ps(vmx), s, &inv, z);
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps((float)*z);
    const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.f);
    uint8_t *q = (uint8_t *)A;
    for (int64_t k = 0; k < K; k += 16) {
        __mmask16 m = k < k16 ? (__mmask16)0xffff : tm;
        /* round(x * inv) + z, as the scalar q1: rounding to nearest even, then the exact integer add */
        __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + k), vi),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, vz), lo), hi);
        _mm_mask_storeu_epi8(q + k, m, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(r)));
    }
    memset(q + K, 0, (size_t)(4 * Kq - K));
}

/* ---- plain C ---- */

static inline float gelu1(float v)
{
    const float c = 0.7978845608028654f;
    return 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
}

void mact_gemm_i8_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                         const float *bias, int64_t M, int epi)
{
    const int64_t N = pk->N, K = pk->K, Kq = pk->Kp;
    uint32_t *A = malloc((size_t)Kq * 4);
    if (!A) return;
    const int8_t *W = pk->data;
    for (int64_t m = 0; m < M; m++) {
        float s;
        int32_t z;
        mact_quant_row_u8(A, Kq, x + m * ldx, K, &s, &z);
        const uint8_t *q = (const uint8_t *)A;
        for (int64_t n = 0; n < N; n++) {
            const int64_t p = n / MACT_PANEL, c = n % MACT_PANEL;
            const int8_t *col = W + p * Kq * 256 + 4 * c;
            int32_t acc = 0;
            for (int64_t kq = 0; kq < Kq; kq++)
                for (int l = 0; l < 4; l++) acc += (int32_t)q[4 * kq + l] * (int32_t)col[kq * 256 + l];
            float v = (float)(acc - z * pk->colsum[n]) * (s * pk->scale[n]) + (bias ? bias[n] : 0.f);
            float *d = &y[m * ldy + n];
            if (epi == MACT_EPI_GELU_TANH) v = gelu1(v);
            if (epi == MACT_EPI_RESIDUAL) v = *d + v;
            *d = v;
        }
    }
    free(A);
}

/* ---- AVX512-VNNI ---- */

typedef struct {
    float *y;             /* tile origin (row mt, column n0) */
    int64_t ldy;
    const float *bias;    /* at n0, or NULL */
    const float *wscale;  /* at n0 */
    const int32_t *csum;  /* at n0 */
    const float *rs;      /* row scales at mt */
    const int32_t *rz;    /* row zero points at mt */
    int nv, epi;
} epi8;

/* a: quantized rows (Kq uint32 apart) at quad kb; b: panel at quad kb; kn quads */
TV static INL void kern_i8(const int mr, const uint32_t *a, int64_t lda, const int8_t *b, int64_t kn, int32_t *cb,
                           int first, int last, const epi8 *ea, const char *pf, int pfl)
{
    __m512i acc[MR][4];
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[i][j] = (i < mr && !first) ? _mm512_load_si512(cb + i * 64 + 16 * j) : _mm512_setzero_si512();
    const uint32_t *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int64_t kq = 0; kq < kn; kq++) {
        const int8_t *bp = b + kq * 256;
        if (pf) MACT_PREFETCH_LINES(pf + kq * pfl * 64, pfl);
        __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 64);
        __m512i b2 = _mm512_load_si512(bp + 128), b3 = _mm512_load_si512(bp + 192);
#define ROW(i, ai)                                                    \
    if (mr > i) {                                                     \
        __m512i av = _mm512_set1_epi32((int)ai[kq]);                  \
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], av, b0);           \
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], av, b1);           \
        acc[i][2] = _mm512_dpbusd_epi32(acc[i][2], av, b2);           \
        acc[i][3] = _mm512_dpbusd_epi32(acc[i][3], av, b3);           \
    }
        ROW(0, a0) ROW(1, a1) ROW(2, a2) ROW(3, a3) ROW(4, a4) ROW(5, a5)
#undef ROW
    }
    if (!last) {
#pragma GCC unroll 6
        for (int i = 0; i < MR; i++)
            if (i < mr)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) _mm512_store_si512(cb + i * 64 + 16 * j, acc[i][j]);
        return;
    }
    __mmask16 cm[4];
    __m512 bv[4], ws[4];
    __m512i cs[4];
    for (int j = 0; j < 4; j++) {
        int left = ea->nv - 16 * j;
        cm[j] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        bv[j] = ea->bias ? _mm512_maskz_loadu_ps(cm[j], ea->bias + 16 * j) : _mm512_setzero_ps();
        ws[j] = _mm512_loadu_ps(ea->wscale + 16 * j);  /* padded to the panel: always 64 readable */
        cs[j] = _mm512_loadu_si512(ea->csum + 16 * j);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *yr = ea->y + i * ea->ldy;
        const __m512i zi = _mm512_set1_epi32(ea->rz[i]);
        const __m512 si = _mm512_set1_ps(ea->rs[i]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            if (!cm[j]) continue;
            __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], _mm512_mullo_epi32(zi, cs[j])));
            v = _mm512_add_ps(_mm512_mul_ps(v, _mm512_mul_ps(si, ws[j])), bv[j]);
            if (ea->epi == MACT_EPI_GELU_TANH) v = gelu512(v);
            else if (ea->epi == MACT_EPI_RESIDUAL) v = _mm512_add_ps(_mm512_maskz_loadu_ps(cm[j], yr + 16 * j), v);
            _mm512_mask_storeu_ps(yr + 16 * j, cm[j], v);
        }
    }
}

#define KI(n)                                                                                                \
    TV static void kern_i8_##n(const uint32_t *a, int64_t lda, const int8_t *b, int64_t kn, int32_t *cb,     \
                               int first, int last, const epi8 *ea, const char *pf, int pfl)                          \
    {                                                                                                        \
        kern_i8(n, a, lda, b, kn, cb, first, last, ea, pf, pfl);                                                  \
    }
KI(1) KI(2) KI(3) KI(4) KI(5) KI(6)
typedef void (*ki_fn)(const uint32_t *, int64_t, const int8_t *, int64_t, int32_t *, int, int, const epi8 *,
                      const char *, int);
static const ki_fn ki[MR + 1] = {0, kern_i8_1, kern_i8_2, kern_i8_3, kern_i8_4, kern_i8_5, kern_i8_6};

typedef struct {
    float *y;
    int64_t ldy, M;
    const float *bias, *rs;  /* the caller's quantized copy of x: A [M, Kq] quads, row scales, zero points */
    const int32_t *rz;
    const mact_packed *pk;
    const uint32_t *A;
    int epi;
    int local;               /* panels in runs: each run's prep sets its thread's own[] (as the bf16 GEMM) */
    const float *x;
    int64_t ldx;
    const mact_kctx *kc;
} gemm8_job;

/* the quantized x a thread's panels read, its own copy (the same bits) or the caller's: the context's
 * per-thread own[0..2] = A, row scales, zero points, set by prep */

/* rows [m0, m1) of x -> u8 quads with their scales and zero points */
TV static void quant_rows(uint32_t *A, float *rs, int32_t *rz, int64_t Kq, const float *x, int64_t ldx, int64_t K,
                          int64_t m0, int64_t m1)
{
    for (int64_t m = m0; m < m1; m++) mact_quant_row_u8_avx512(A + m * Kq, Kq, x + m * ldx, K, &rs[m], &rz[m]);
}

static void prep8(void *arg, int tid)
{
    const gemm8_job *j = arg;
    const int64_t M = j->M, Kq = j->pk->Kp;
    mact_kthread *th = &j->kc->th[tid];
    th->own[0] = j->A, th->own[1] = j->rs, th->own[2] = j->rz;
    if (tid == 0) return;  /* the caller's copy is already in its cache */
    uint8_t *buf = mact_kctx_buf(j->kc, tid, 0, mact_gemm_scratch0(M, j->pk->K));
    if (!buf) return;  /* out of memory: read the caller's copy */
    uint32_t *A = (uint32_t *)buf;
    float *rs = (float *)(buf + (size_t)M * (size_t)Kq * 4);
    int32_t *rz = (int32_t *)(rs + M);
    quant_rows(A, rs, rz, Kq, j->x, j->ldx, j->pk->K, 0, M);
    th->own[0] = A, th->own[1] = rs, th->own[2] = rz;
}

TV static void panel_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const gemm8_job *j = arg;
    const mact_kthread *th = &j->kc->th[tid];
    const uint32_t *Ax = j->local ? th->own[0] : j->A;
    const float *rsx = j->local ? th->own[1] : j->rs;
    const int32_t *rzx = j->local ? th->own[2] : j->rz;
    const mact_packed *pk = j->pk;
    const int64_t N = pk->N, Kq = pk->Kp, M = j->M;
    int32_t *cb = Kq > KC ? mact_kctx_buf(j->kc, tid, 1, mact_gemm_scratch1(M)) : NULL;
    const int8_t *B = (const int8_t *)pk->data + p * Kq * 256;
    const int64_t n0 = p * MACT_PANEL;
    epi8 ea = {.ldy = j->ldy, .bias = j->bias ? j->bias + n0 : NULL, .wscale = pk->scale + n0,
               .csum = pk->colsum + n0, .nv = (int)(N - n0 < 64 ? N - n0 : 64), .epi = j->epi};
    for (int64_t kb = 0; kb < Kq; kb += KC) {
        const int64_t kn = Kq - kb < KC ? Kq - kb : KC;
        const int first = kb == 0, last = kb + kn == Kq;
        const char *blk = (const char *)B + kb * 256;  /* the row tiles' prefetch: mact_tile_prefetch */
        for (int64_t mt = 0; mt < M; mt += MR) {
            const int mr = (int)(M - mt < MR ? M - mt : MR);
            ea.y = j->y + mt * j->ldy + n0;
            ea.rs = rsx + mt;
            ea.rz = rzx + mt;
            int pfl;
            const char *pf = mact_tile_prefetch(blk, kn, KC, M, mt, &pfl);
            ki[mr](Ax + mt * Kq + kb, Kq, B + kb * 256, kn, cb ? cb + mt * 64 : NULL, first, last, &ea, pf, pfl);
        }
    }
}

#define QROWS 16
typedef struct {
    uint32_t *A;
    float *rs;
    int32_t *rz;
    int64_t Kq, ldx, K, M;
    const float *x;
} quant_job;

TV static void quant_task(void *arg, int64_t c, int tid)
{
    (void)tid;
    const quant_job *j = arg;
    const int64_t m1 = (c + 1) * QROWS < j->M ? (c + 1) * QROWS : j->M;
    quant_rows(j->A, j->rs, j->rz, j->Kq, j->x, j->ldx, j->K, c * QROWS, m1);
}

void mact_x86_gemm_i8(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                      const float *bias, int64_t M, int epi)
{
    const int64_t N = pk->N, K = pk->K, Kq = pk->Kp;
    /* [M, Kq] quads, then the M row scales and M zero points */
    uint8_t *buf = mact_kctx_buf(kc, 0, 0, mact_gemm_scratch0(M, K));
    if (!buf) {  /* out of memory for the quantized copy of x: the plain-C kernel (no M-sized buffer) */
        mact_gemm_i8_scalar(y, ldy, x, ldx, pk, bias, M, epi);
        return;
    }
    uint32_t *A = (uint32_t *)buf;
    float *rs = (float *)(buf + (size_t)M * (size_t)Kq * 4);
    int32_t *rz = (int32_t *)(rs + M);
    const int par = mact_gemm_parallel(M, N, K);
    quant_job qj = {A, rs, rz, Kq, ldx, K, M, x};
    const int64_t nq = (M + QROWS - 1) / QROWS;
    mact_kctx_run(kc, nq, par && M * K > 65536, quant_task, &qj);
    gemm8_job j = {y, ldy, M, bias, rs, rz, pk, A, epi, mact_panels_in_runs(M, par), x, ldx, kc};
    mact_for_panels(kc, pk->npanel, M, par, panel_task, j.local ? prep8 : NULL, &j);
}

/* ---- one panel times a vector (the centred GEMM's mu W^T from the planes) ---- */

/* A k quad row of the panel is 64 columns x 4 int8: each 16 bytes (4 columns x 4 k) widen to 16 floats and
 * multiply x's 4 values of that quad repeated 4 times; acc[i] holds columns 4i..4i+3, 4 k lanes each, summed
 * at the end. */
TV void mact_x86_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p)
{
    const int8_t *w = (const int8_t *)pk->data + p * pk->Kp * 256;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t kq = 0; kq < pk->Kp; kq++, w += 256) {
        const __m512 xv = _mm512_broadcast_f32x4(_mm_loadu_ps(x + 4 * kq));
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            const __m512i q = _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(w + 16 * i)));
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), xv, acc[i]);
        }
    }
    for (int i = 0; i < 16; i++) {
        float a[16];
        _mm512_storeu_ps(a, acc[i]);
        for (int j = 0; j < 4; j++) out[4 * i + j] = (a[4 * j] + a[4 * j + 1]) + (a[4 * j + 2] + a[4 * j + 3]);
    }
}

/* ---- instruction peak: 16 independent vpdpbusd chains (16 lanes x 4 multiply-adds = 128 ops each) ---- */

TV static double peak_vnni(long iters)
{
    __m512i a[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_epi32(i);
    const __m512i x = _mm512_set1_epi32(0x01010101), y = _mm512_set1_epi32(0x01ff01ff);
    for (long t = 0; t < iters; t++) {
        /* inline asm: from the intrinsic GCC 12 copied every accumulator around each (destructive) vpdpbusd */
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) __asm__("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(a[i]) : [a] "v"(x), [b] "v"(y));
    }
    __m512i s = a[0];
#pragma GCC unroll 16
    for (int i = 1; i < 16; i++) s = _mm512_add_epi32(s, a[i]);
    return (double)_mm512_reduce_add_epi32(s);
}

double mact_x86_peak_gops_i8(int threads)
{
    if (!mact_x86_has_vnni()) return 0;
    return mact_peak_best_of_3(peak_vnni, 15000000, 16.0 * 128.0, threads);  /* ~0.05 s per thread at peak */
}
