/* Kernels: dispatch, the row-major matmul paths, norms, activations, attention (plain C) and RoPE.
 * The packed GEMMs, the AVX-512 attention and the vector math live in src/gemm_avx512.c; packing and
 * the packed-weight table in src/gemm_pack.c.
 *
 * Row-major matmul: weights stay in their stored dtype and are widened in registers. Each output element
 * is one dot product whose summation order depends only on K and the ISA, never on the thread count:
 * results are reproducible run to run. */
#include <math.h>
#include <float.h>
#include <string.h>
#include <sys/mman.h>
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/kernels.h"
#include "io/npy.h"
#include "kernels/threadpool.h"

#include <stdatomic.h>
/* process-wide settings, read by every kernel call (relaxed atomics: racing first reads all detect the
 * same value) */
static _Atomic int g_isa = -1;
static _Atomic int g_prec = MACT_PREC_FP32;

int mact_isa_detect(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        /* GCC 12's __builtin_cpu_supports has no "avx512bf16": CPUID leaf 7 subleaf 1, EAX bit 5 */
        unsigned a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        return (a >> 5) & 1 ? MACT_ISA_AVX512BF16 : MACT_ISA_AVX512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return MACT_ISA_AVX2;
    return MACT_ISA_SCALAR;
}

int mact_isa_get(void)
{
    if (g_isa < 0) g_isa = mact_isa_detect();
    return g_isa;
}

void mact_isa_set(int isa)
{
    int d = mact_isa_detect();
    g_isa = isa > d ? d : isa < 0 ? 0 : isa;
}

const char *mact_isa_name(int isa)
{
    return isa == MACT_ISA_AVX512BF16 ? "avx512bf16" : isa == MACT_ISA_AVX512 ? "avx512" : isa == MACT_ISA_AVX2 ? "avx2"
                                                                                                             : "scalar";
}

static __thread int t_prec = -1;  /* per calling thread; -1: the process-wide setting */

static int prec_valid(int prec) { return prec == MACT_PREC_BF16 || prec == MACT_PREC_INT8 ? prec : MACT_PREC_FP32; }
void mact_set_precision(int prec) { g_prec = prec_valid(prec); }
void mact_set_thread_precision(int prec) { t_prec = prec < 0 ? -1 : prec_valid(prec); }
int mact_get_precision(void) { return t_prec >= 0 ? t_prec : g_prec; }
const char *mact_precision_name(int prec)
{
    return prec == MACT_PREC_BF16 ? "bf16" : prec == MACT_PREC_INT8 ? "int8" : "fp32";
}

int mact_has_vnni(void)
{
    static _Atomic int v = -1;
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
    }
    return v;
}

int mact_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The session arena and the per-thread GEMM scratch are read by every GEMM. Marked for huge pages, the
 * LIBERO bench ran faster in 5 of 6 alternating pairs (medians: vision 925 vs 982 ms, llm 1457 vs 1505 ms,
 * action 102 vs 111 ms; docs/benchmarks.md); peak RSS grew by 70-160 MiB. */
void mact_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

int mact_gemm_parallel(int64_t M, int64_t N, int64_t K) { return M * N * K > 200000; }

static inline float bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float f16f(uint16_t h)
{
    float f;
    mact_dtype_to_f32(MACT_F16, &h, 1, &f);
    return f;
}

static inline float wload(const void *w, int dtype, int64_t i)
{
    if (dtype == MACT_F32) return ((const float *)w)[i];
    if (dtype == MACT_BF16) return bf16f(((const uint16_t *)w)[i]);
    return f16f(((const uint16_t *)w)[i]);
}

void mact_row_f32(float *dst, const mact_tensor *W, int64_t row)
{
    int64_t K = W->shape[W->ndim - 1];
    for (int64_t k = 0; k < K; k++) dst[k] = wload(W->data, W->dtype, row * K + k);
}

static inline float gelu1(float v)
{
    const float c = 0.7978845608028654f;  /* sqrt(2/pi) */
    return 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
}

/* the epilogue of one output element: s = dot product, b = bias or 0 */
static inline void epi_store(float *dst, float s, float b, int epi)
{
    float v = s + b;
    if (epi == MACT_EPI_GELU_TANH) v = gelu1(v);
    if (epi == MACT_EPI_RESIDUAL) v = *dst + v;
    *dst = v;
}

/* ---- scalar path: 4 accumulators per dot product to give the compiler independent chains ---- */
static void mm_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    for (int64_t n = n0; n < n1; n++)
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * ldx;
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            int64_t k = 0, base = n * K;
            for (; k + 4 <= K; k += 4) {
                a0 += xr[k] * wload(w, dt, base + k);
                a1 += xr[k + 1] * wload(w, dt, base + k + 1);
                a2 += xr[k + 2] * wload(w, dt, base + k + 2);
                a3 += xr[k + 3] * wload(w, dt, base + k + 3);
            }
            for (; k < K; k++) a0 += xr[k] * wload(w, dt, base + k);
            epi_store(&y[m * ldy + n], (a0 + a1) + (a2 + a3), bias ? bias[n] : 0.f, epi);
        }
}

/* ---- AVX-512 path: register block of 4 x-rows by 4 w-rows, 16 K-lanes per step ---- */
__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static inline __attribute__((always_inline)) __m512 w16(const void *w, int dt, int64_t off, __mmask16 mk)
{
    if (dt == MACT_F32) return _mm512_maskz_loadu_ps(mk, (const float *)w + off);
    __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)w + off);
    if (dt == MACT_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* one dtype per instance: the k loop then has no branch and keeps the 16 accumulators in registers */
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) static inline __attribute__((always_inline)) void
mm_avx512_t(const int dt, float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias,
            int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    const int64_t K16 = K & ~(int64_t)15;
    const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);
    for (int64_t n = n0; n < n1; n += 4) {
        int nn = (int)(n1 - n < 4 ? n1 - n : 4);
        /* rows past the edge repeat the last one (computed, never stored): fixed trip counts below */
        int64_t wo[4];
        for (int j = 0; j < 4; j++) wo[j] = (n + (j < nn ? j : nn - 1)) * K;
        for (int64_t m = 0; m < M; m += 4) {
            int mm = (int)(M - m < 4 ? M - m : 4);
            const float *xr[4];
            for (int i = 0; i < 4; i++) xr[i] = x + (m + (i < mm ? i : mm - 1)) * ldx;
            __m512 acc[4][4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
            for (int64_t k = 0; k < K; k += 16) {
                const __mmask16 mk = k < K16 ? (__mmask16)0xffff : tail;
                __m512 wv[4], xv[4];
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) wv[j] = w16(w, dt, wo[j] + k, mk);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) xv[i] = _mm512_maskz_loadu_ps(mk, xr[i] + k);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(xv[i], wv[j], acc[i][j]);
            }
            /* reduce with constant indices first: indexing acc by mm/nn would keep it in memory */
            float sums[4][4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) sums[i][j] = _mm512_reduce_add_ps(acc[i][j]);
            for (int i = 0; i < mm; i++)
                for (int j = 0; j < nn; j++)
                    epi_store(&y[(m + i) * ldy + n + j], sums[i][j], bias ? bias[n + j] : 0.f, epi);
        }
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static void mm_avx512_f32(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias,
                          int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_avx512_t(MACT_F32, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}
__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static void mm_avx512_bf16(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias,
                           int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_avx512_t(MACT_BF16, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}
__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static void mm_avx512_f16(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias,
                          int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_avx512_t(MACT_F16, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}

static void mm_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    if (dt == MACT_F32) mm_avx512_f32(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
    else if (dt == MACT_BF16) mm_avx512_bf16(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
    else mm_avx512_f16(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}

/* ---- AVX2 path: 4 x 2 block, 8 K-lanes per step ---- */
__attribute__((target("avx2,fma,f16c")))
static inline __m256 w8(const void *w, int dt, int64_t off)
{
    if (dt == MACT_F32) return _mm256_loadu_ps((const float *)w + off);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + off));
    if (dt == MACT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

__attribute__((target("avx2,fma,f16c")))
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c")))
static void mm_avx2(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                    int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    const int64_t K8 = K & ~(int64_t)7;
    for (int64_t n = n0; n < n1; n += 2) {
        int nn = (int)(n1 - n < 2 ? n1 - n : 2);
        for (int64_t m = 0; m < M; m += 4) {
            int mm = (int)(M - m < 4 ? M - m : 4);
            __m256 acc[4][2];
            for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
            for (int64_t k = 0; k < K8; k += 8) {
                __m256 w0 = w8(w, dt, n * K + k), w1 = nn > 1 ? w8(w, dt, (n + 1) * K + k) : _mm256_setzero_ps();
                for (int i = 0; i < mm; i++) {
                    __m256 xv = _mm256_loadu_ps(x + (m + i) * ldx + k);
                    acc[i][0] = _mm256_fmadd_ps(xv, w0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(xv, w1, acc[i][1]);
                }
            }
            for (int i = 0; i < mm; i++)
                for (int j = 0; j < nn; j++) {
                    float s = hsum8(acc[i][j]);
                    const float *xr = x + (m + i) * ldx;
                    for (int64_t k = K8; k < K; k++) s += xr[k] * wload(w, dt, (n + j) * K + k);
                    epi_store(&y[(m + i) * ldy + n + j], s, bias ? bias[n + j] : 0.f, epi);
                }
        }
    }
}

typedef struct {
    float *y;
    int64_t ldy, ldx, M, N, K;
    const float *x, *bias;
    const void *w;
    int dt, epi, isa;
} rowmajor_job;

/* one block of 16 weight rows: the block's weights stay hot in L1/L2 across all M rows */
static void rowmajor_task(void *arg, int64_t b, int tid)
{
    const rowmajor_job *j = arg;
    int64_t n0 = b * 16, n1 = n0 + 16 < j->N ? n0 + 16 : j->N;
    if (j->isa >= MACT_ISA_AVX512) mm_avx512(j->y, j->ldy, j->x, j->ldx, j->w, j->dt, j->bias, j->M, n0, n1, j->K, j->epi);
    else if (j->isa == MACT_ISA_AVX2) mm_avx2(j->y, j->ldy, j->x, j->ldx, j->w, j->dt, j->bias, j->M, n0, n1, j->K, j->epi);
    else mm_scalar(j->y, j->ldy, j->x, j->ldx, j->w, j->dt, j->bias, j->M, n0, n1, j->K, j->epi);
}

/* n tasks on the pool when `parallel`, else in the caller */
static void run_tasks(int64_t n, int parallel, mact_task_fn fn, void *arg)
{
    if (parallel) mact_parallel_for(n, fn, arg);
    else for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
}

static void matmul_rowmajor(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt,
                            const float *bias, int64_t M, int64_t N, int64_t K, int epi, int isa)
{
    rowmajor_job j = {y, ldy, ldx, M, N, K, x, bias, w, dt, epi, isa};
    run_tasks((N + 15) / 16, mact_gemm_parallel(M, N, K), rowmajor_task, &j);
}

void mact_matmul_raw_epi(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt,
                         const float *bias, int64_t M, int64_t N, int64_t K, int epi)
{
    if (M <= 0 || N <= 0) return;
    int isa = mact_isa_get();
    if (isa >= MACT_ISA_AVX512 && K > 0) {
        /* BF16 arithmetic only where the dot-product instruction exists; FP32 otherwise. INT8 mode finds the
         * int8 pack where there is one (mact_gemm_i8 falls back to its plain-C kernel without VNNI) and
         * runs every other weight as BF16 mode does. */
        const int want = mact_get_precision();
        const int bf = want != MACT_PREC_FP32 && isa >= MACT_ISA_AVX512BF16;
        const mact_packed *pk = mact_packed_find(w, dt, N, K, want == MACT_PREC_INT8 ? MACT_PREC_INT8
                                                          : bf ? MACT_PREC_BF16 : MACT_PREC_FP32);
        if (pk && pk->fmt == MACT_PACK_I8) {
            mact_gemm_i8(y, ldy, x, ldx, pk, bias, M, epi);
            return;
        }
        if (pk) {
            mact_gemm_packed(y, ldy, x, ldx, pk, bias, M, epi, bf);
            return;
        }
    }
    if (K <= 0) {  /* empty dot products */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) epi_store(&y[m * ldy + n], 0.f, bias ? bias[n] : 0.f, epi);
        return;
    }
    matmul_rowmajor(y, ldy, x, ldx, w, dt, bias, M, N, K, epi, isa);
}

void mact_matmul_raw(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                     int64_t M, int64_t N, int64_t K)
{
    mact_matmul_raw_epi(y, ldy, x, ldx, w, dt, bias, M, N, K, MACT_EPI_NONE);
}

void mact_matmul_ex(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W, const float *bias,
                    int64_t M, int64_t N, int64_t K)
{
    mact_matmul_raw_epi(y, ldy, x, ldx, W->data, W->dtype, bias, M, N, K, MACT_EPI_NONE);
}

void mact_matmul_epi(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W, const float *bias,
                     int64_t M, int64_t N, int64_t K, int epi)
{
    mact_matmul_raw_epi(y, ldy, x, ldx, W->data, W->dtype, bias, M, N, K, epi);
}

/* ---- norms and activations (double accumulation for the statistics: rows reach 1e4 in magnitude) ---- */

static void layernorm_row(float *yr, const float *xr, const float *w, const float *b, float eps, int64_t dim)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < dim; i++) s += xr[i];
    double mean = s / dim;
    for (int64_t i = 0; i < dim; i++) { double d = xr[i] - mean; s2 += d * d; }
    float inv = (float)(1.0 / sqrt(s2 / dim + eps));
    float mf = (float)mean;
    for (int64_t i = 0; i < dim; i++) yr[i] = (xr[i] - mf) * inv * w[i] + b[i];
}

typedef struct {
    float *y;
    const float *x, *w, *b;
    float eps;
    int64_t rows, dim, ld;
    int vec;
} norm_job;

#define NORM_ROWS 8  /* rows per task */

static void layernorm_task(void *arg, int64_t c, int tid)
{
    const norm_job *j = arg;
    for (int64_t r = c * NORM_ROWS; r < j->rows && r < (c + 1) * NORM_ROWS; r++) {
        if (j->vec) mact_layernorm_row_avx512(j->y + r * j->dim, j->x + r * j->dim, j->w, j->b, j->eps, j->dim);
        else layernorm_row(j->y + r * j->dim, j->x + r * j->dim, j->w, j->b, j->eps, j->dim);
    }
}

void mact_layernorm(float *y, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t dim)
{
    norm_job j = {y, x, w, b, eps, rows, dim, dim, mact_isa_get() >= MACT_ISA_AVX512};
    run_tasks((rows + NORM_ROWS - 1) / NORM_ROWS, rows * dim > 65536, layernorm_task, &j);
}

static void rmsnorm_row(float *yr, const float *xr, const float *w, float eps, int64_t dim)
{
    double s2 = 0;
    for (int64_t i = 0; i < dim; i++) s2 += (double)xr[i] * xr[i];
    float inv = (float)(1.0 / sqrt(s2 / dim + eps));
    if (w) for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv * w[i];
    else for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv;
}

static void rmsnorm_task(void *arg, int64_t c, int tid)
{
    const norm_job *j = arg;
    for (int64_t r = c * NORM_ROWS; r < j->rows && r < (c + 1) * NORM_ROWS; r++) {
        if (j->vec) mact_rmsnorm_row_avx512(j->y + r * j->ld, j->x + r * j->ld, j->w, j->eps, j->dim);
        else rmsnorm_row(j->y + r * j->ld, j->x + r * j->ld, j->w, j->eps, j->dim);
    }
}

void mact_rmsnorm(float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim, int64_t ldx)
{
    norm_job j = {y, x, w, NULL, eps, rows, dim, ldx, mact_isa_get() >= MACT_ISA_AVX512};
    run_tasks((rows + NORM_ROWS - 1) / NORM_ROWS, rows * dim > 65536, rmsnorm_task, &j);
}

typedef struct {
    float *y;
    const float *a, *b;
    int64_t n, ldy, ld;
    int vec;
} elt_job;

#define ELT_CHUNK 16384

static void gelu_task(void *arg, int64_t c, int tid)
{
    const elt_job *j = arg;
    int64_t a = c * ELT_CHUNK, len = j->n - a < ELT_CHUNK ? j->n - a : ELT_CHUNK;
    if (j->vec) mact_gelu_tanh_avx512(j->y + a, len);
    else for (int64_t i = a; i < a + len; i++) j->y[i] = gelu1(j->y[i]);
}

void mact_gelu_tanh(float *x, int64_t n)
{
    elt_job j = {x, NULL, NULL, n, 0, 0, mact_isa_get() >= MACT_ISA_AVX512};
    run_tasks((n + ELT_CHUNK - 1) / ELT_CHUNK, n > 65536, gelu_task, &j);
}

float mact_silu(float x) { return x / (1.f + expf(-x)); }

static void silu_mul_task(void *arg, int64_t c, int tid)
{
    const elt_job *j = arg;
    int64_t a = c * ELT_CHUNK, len = j->n - a < ELT_CHUNK ? j->n - a : ELT_CHUNK;
    if (j->vec) mact_silu_mul_avx512(j->y + a, j->a + a, j->b + a, len);
    else for (int64_t i = a; i < a + len; i++) j->y[i] = mact_silu(j->a[i]) * j->b[i];
}

void mact_silu_mul(float *y, const float *gate, const float *val, int64_t n)
{
    elt_job j = {y, gate, val, n, 0, 0, mact_isa_get() >= MACT_ISA_AVX512};
    run_tasks((n + ELT_CHUNK - 1) / ELT_CHUNK, n > 65536, silu_mul_task, &j);
}

static void silu_mul_rows_task(void *arg, int64_t r, int tid)
{
    const elt_job *j = arg;
    float *yr = j->y + r * j->ldy;
    const float *g = j->a + r * j->ld, *v = j->b + r * j->ld;
    if (j->vec) mact_silu_mul_avx512(yr, g, v, j->n);
    else for (int64_t i = 0; i < j->n; i++) yr[i] = mact_silu(g[i]) * v[i];
}

void mact_silu_mul_rows(float *y, int64_t ldy, const float *gate, const float *val, int64_t ldg, int64_t rows,
                        int64_t n)
{
    elt_job j = {y, gate, val, n, ldy, ldg, mact_isa_get() >= MACT_ISA_AVX512};
    run_tasks(rows, rows * n > 65536, silu_mul_rows_task, &j);
}

void mact_add_inplace(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void mact_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale)
{
    if (mact_isa_get() >= MACT_ISA_AVX512) {
        mact_modulate_rows_avx512(y, rows, dim, shift, scale);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < dim; d++) y[r * dim + d] = y[r * dim + d] * (1.f + scale[d]) + shift[d];
}

void mact_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    if (mact_isa_get() >= MACT_ISA_AVX512) {
        mact_gated_add_rows_avx512(z, y, gate, rows, dim);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < dim; d++) z[r * dim + d] += gate[d] * y[r * dim + d];
}

/* ---- attention ---- */

/* Per thread: the plain-C path needs nk + 16; the AVX-512 paths a transposed K head (hd <= 128 floats, or
 * hd / 2 bf16 pairs) plus, for bf16, the V head as key pairs, a block of 8 query rows of scores and their
 * bf16 copy, each over nk rounded up to 16. */
int64_t mact_attention_scratch(int64_t nk)
{
    int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (128 + 16) * nkp + 1024;
}

typedef mact_att_job att_job;

/* one (head, query row) */
static void attention_scalar_task(void *arg, int64_t t, int tid)
{
    const att_job *j = arg;
    const int h = (int)(t / j->nq), group = j->n_heads / j->n_kv, hd = j->hd;
    const int64_t i = t % j->nq, nk = j->nk;
    float *s = j->scratch + tid * mact_attention_scratch(nk);
    const float *qi = j->q + i * j->q_ld + (int64_t)h * hd;
    const int64_t koff = (int64_t)(h / group) * hd;
    float mx = -INFINITY;
    for (int64_t jj = 0; jj < nk; jj++) {
        if (j->key_ok && !j->key_ok[jj]) { s[jj] = -INFINITY; continue; }
        const float *kj = j->k + jj * j->kv_ld + koff;
        float d = 0;
        for (int t2 = 0; t2 < hd; t2++) d += qi[t2] * kj[t2];
        d = d * j->scale + (j->bias ? j->bias[i * nk + jj] : 0.f);
        s[jj] = d;
        if (d > mx) mx = d;
    }
    float *o = j->out + i * j->out_ld + (int64_t)h * hd;
    for (int t2 = 0; t2 < hd; t2++) o[t2] = 0;
    if (mx == -INFINITY) return;  /* no visible key: zero output, as a fully masked row must not NaN */
    double sum = 0;
    for (int64_t jj = 0; jj < nk; jj++) {
        float e = s[jj] == -INFINITY ? 0.f : expf(s[jj] - mx);
        s[jj] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t jj = 0; jj < nk; jj++) {
        if (s[jj] == 0.f) continue;
        const float *vj = j->v + jj * j->kv_ld + koff;
        float p = s[jj] * inv;
        for (int t2 = 0; t2 < hd; t2++) o[t2] += p * vj[t2];
    }
}

void mact_attention(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                    int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch)
{
    /* the blocked path pays off from a few query rows and keys on; tiny problems (pooling windows) stay
     * on the plain loop */
    const int isa = mact_isa_get();
    if (mact_attention_packable(nq, nk, hd)) {
        mact_attention_bf16(out, out_ld, q, q_ld, k, v, kv_ld, nq, nk, n_heads, n_kv, hd, scale, bias, key_ok, scratch,
                            NULL);
        return;
    }
    if (isa >= MACT_ISA_AVX512 && hd <= 128 && hd >= 1 && nk >= 8 && nq * nk >= 64) {
        mact_attention_avx512(out, out_ld, q, q_ld, k, v, kv_ld, nq, nk, n_heads, n_kv, hd, scale, bias, key_ok,
                              scratch);
        return;
    }
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    run_tasks((int64_t)n_heads * nq, nq * nk * n_heads > 4096, attention_scalar_task, &j);
}

int mact_attention_packable(int64_t nq, int64_t nk, int hd)
{
    return mact_isa_get() >= MACT_ISA_AVX512BF16 && mact_get_precision() != MACT_PREC_FP32 && hd <= 128 && hd >= 2 &&
           !(hd & 1) && nk >= 8 && nq * nk >= 64;
}

int64_t mact_attention_kv_packed_size(int64_t nk, int n_kv, int hd)
{
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (int64_t)n_kv * ((int64_t)(hd / 2) * nkp + nkp / 2 * hd);
}

void mact_attention_kv_pack(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv, int hd)
{
    mact_attention_kv_pack_bf16(dst, k, v, kv_ld, nk, n_kv, hd);
}

void mact_attention_packed(float *out, int64_t out_ld, const float *q, int64_t q_ld, const uint32_t *kv, int64_t nq,
                           int64_t nk, int n_heads, int n_kv, int hd, float scale, const float *bias,
                           const uint8_t *key_ok, float *scratch)
{
    mact_attention_bf16(out, out_ld, q, q_ld, NULL, NULL, 0, nq, nk, n_heads, n_kv, hd, scale, bias, key_ok, scratch, kv);
}

/* ---- RoPE ---- */

void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        /* HF computes inv_freq = 1 / theta^(2i/hd) and the angle pos * inv_freq in fp32; mirror it so
         * the rounding of large angles matches the reference. */
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
        for (int64_t p = 0; p < n; p++) {
            float a = (float)p * inv;
            cos_t[p * half + i] = cosf(a);
            sin_t[p * half + i] = sinf(a);
        }
    }
}

void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t)
{
    int half = hd / 2;
    for (int64_t p = 0; p < n; p++)
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + p * ld + (int64_t)h * hd;
            const float *c = cos_t + p * half, *s = sin_t + p * half;
            for (int i = 0; i < half; i++) {
                float a = xh[i], b = xh[i + half];
                xh[i] = a * c[i] - b * s[i];
                xh[i + half] = b * c[i] + a * s[i];
            }
        }
}
