/* NEON row-major matmul rows: the weight read where the loader left it, in its stored dtype (F32; BF16 widened
 * by a shift; F16 by FCVTL, base Armv8-A), fp32 FMLA accumulation (never fp16: activations reach ~1e4).
 * Register block of 4 x-rows by 4 w-rows, 4 K-lanes per step (16 accumulators); rows past M's last block
 * of 4 run one x-row at a time against the same 4 w-rows. Each output element is one chain of 4-lane
 * partial sums in k order, reduced pairwise, plus the K % 4 tail in k order: the order depends only on K,
 * never on the blocking or the thread count. */
#include <arm_neon.h>
#include "kernels/arm/arm.h"

#define INL inline __attribute__((always_inline))

static INL float32x4_t w4(const void *w, const int dt, int64_t off)
{
    if (dt == MACT_F32) return vld1q_f32((const float *)w + off);
    const uint16x4_t h = vld1_u16((const uint16_t *)w + off);
    if (dt == MACT_BF16) return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* MR x-rows (4 or 1) by 4 w-rows (w-rows past n1 repeat the last one: computed, never stored) */
static INL void block(const int dt, const int MR, float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                      const float *bias, int64_t m, int64_t n, int nn, int64_t K, int epi)
{
    const int64_t K4 = K & ~(int64_t)3;
    int64_t wo[4];
    for (int j = 0; j < 4; j++) wo[j] = (n + (j < nn ? j : nn - 1)) * K;
    const float *xr[4];
    for (int i = 0; i < MR; i++) xr[i] = x + (m + i) * ldx;
    float32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) acc[i][j] = vdupq_n_f32(0.f);
    for (int64_t k = 0; k < K4; k += 4) {
        float32x4_t wv[4], xv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) wv[j] = w4(w, dt, wo[j] + k);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) xv[i] = vld1q_f32(xr[i] + k);
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[i][j] = vfmaq_f32(acc[i][j], xv[i], wv[j]);
    }
    float sums[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) sums[i][j] = vaddvq_f32(acc[i][j]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < nn; j++) {
            float s = sums[i][j];
            for (int64_t k = K4; k < K; k++) s += xr[i][k] * mact_load_f32(w, dt, wo[j] + k);
            mact_epi_store(&y[(m + i) * ldy + n + j], s, bias ? bias[n + j] : 0.f, epi);
        }
}

/* one dtype per instance: the k loop has no branch and keeps the accumulators in registers */
static INL void mm_t(const int dt, float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                     const float *bias, int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    const int64_t M4 = M & ~(int64_t)3;
    for (int64_t n = n0; n < n1; n += 4) {
        const int nn = (int)(n1 - n < 4 ? n1 - n : 4);
        for (int64_t m = 0; m < M4; m += 4) block(dt, 4, y, ldy, x, ldx, w, bias, m, n, nn, K, epi);
        for (int64_t m = M4; m < M; m++) block(dt, 1, y, ldy, x, ldx, w, bias, m, n, nn, K, epi);
    }
}

static void mm_f32(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias, int64_t M,
                   int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_t(MACT_F32, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}
static void mm_bf16(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias, int64_t M,
                    int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_t(MACT_BF16, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}
static void mm_f16(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, const float *bias, int64_t M,
                   int64_t n0, int64_t n1, int64_t K, int epi)
{
    mm_t(MACT_F16, y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
}

void mact_arm_mm_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    if (dt == MACT_F32) mm_f32(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
    else if (dt == MACT_BF16) mm_bf16(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
    else if (dt == MACT_F16) mm_f16(y, ldy, x, ldx, w, bias, M, n0, n1, K, epi);
    else mact_ref_mm_rows(y, ldy, x, ldx, w, dt, bias, M, n0, n1, K, epi);
}
