/* x86 row-major matmul kernels: the weight read where the loader left it, in its stored dtype, widened in
 * registers (AVX-512: a register block of 4 x-rows by 4 w-rows, 16 K-lanes per step; AVX2: 4 x 2, 8 lanes).
 * Each output element is one dot product whose summation order depends only on K and the level, never on
 * the thread count. Compiled only on x86-64; the functions carry target attributes. */
#include <immintrin.h>
#include "kernels/ops.h"
#include "kernels/x86/x86.h"

#define wload mact_load_f32
#define epi_store mact_epi_store

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

void mact_x86_mm_rows_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
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
void mact_x86_mm_rows_avx2(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
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

