/* The int8 GEMM of MACT_PRECISION_INT8 on ARM: y[M, N] = x[M, K] W[N, K]^T on a MACT_PACK_I8 weight (pack.c) with
 * SDOT (dotprod: Armv8.2, the neon+fp16+dotprod level and up). The whole file is compiled for
 * armv8.2-a+dotprod; it is reached only through the tables of CPUs that report asimddp.
 *
 * Arithmetic: the x86 int8 mode's (kernels/x86/gemm_int8.c), so both give the same integers:
 *   x row m -> u8 q[m, k] with scale s[m] and zero point z[m] (x ~ s (q - z)); W ~ w[n] W8[n, k];
 *   y[m, n] = float(sum_k q W8 - z colsum[n]) * (s[m] w[n]) + bias[n], then the epilogue.
 * SDOT multiplies signed bytes, so the rows are stored as q - 128 and the sum corrected exactly in int32:
 * sum_k q W8 = sum_k (q - 128) W8 + 128 colsum[n].
 * Loops: x quantized once (the caller's scratch), one pool task per 64-column panel; inside, blocks of 4 rows
 * x 16 columns (16 int32x4 accumulators), 4 k quads per step (one 16-byte load of each x row, its quads
 * picked by SDOT's lane index). Integer sums are exact, so results never depend on the thread count. */
#pragma GCC target("arch=armv8.2-a+dotprod")
#include <math.h>
#include <string.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"

#define INL inline __attribute__((always_inline))

/* the x86 int8 mode's row quantization (gemm_int8.c: quant_params, q1), stored as q - 128 */
static void quant_row_s8(int8_t *A, const float *x, int64_t K, float *s, int32_t *z)
{
    /* a row with a NaN or an infinity: zeros with a NaN scale, so every output it feeds is NaN, as on x86
     * (min/max skip a NaN, which would come out as a finite row; and a NaN reaching the int cast is UB) */
    int bad = 0;
    for (int64_t k = 0; k < K; k++) bad |= !isfinite(x[k]);
    if (bad) {
        for (int64_t k = 0; k < K; k++) A[k] = -128;
        *s = NAN, *z = 0;
        return;
    }
    float mn = x[0], mx = x[0];
    for (int64_t k = 1; k < K; k++) {
        mn = x[k] < mn ? x[k] : mn;
        mx = x[k] > mx ? x[k] : mx;
    }
    mn = mn < 0.f ? mn : 0.f;
    mx = mx > 0.f ? mx : 0.f;
    float inv;
    if (!(mx - mn > 0.f) || !isfinite(mx - mn)) {
        *s = 0.f, inv = 0.f, *z = 0;
    } else {
        *s = (mx - mn) / 255.f;
        inv = 1.f / *s;
        const float zf = nearbyintf(-mn * inv);
        *z = zf < 0.f ? 0 : zf > 255.f ? 255 : (int32_t)zf;
    }
    for (int64_t k = 0; k < K; k++) {
        const float r = nearbyintf(x[k] * inv) + (float)*z;
        const int q = r < 0.f ? 0 : r > 255.f ? 255 : (int)r;
        A[k] = (int8_t)(q - 128);
    }
}

typedef mact_arm_i8_job i8_job;

/* MR rows (4 or 1) x 16 columns (4 groups of 4) of panel p */
static INL void block(const int MR, const i8_job *j, int64_t m, int64_t p, int g0)
{
    const int64_t Kq = j->Kq, lda = j->lda;
    const int8_t *W = (const int8_t *)j->pk->data + p * Kq * 256 + 16 * g0;
    int32x4_t acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) acc[i][g] = vdupq_n_s32(0);
    const int8_t *a[4];
    for (int i = 0; i < MR; i++) a[i] = j->A + (m + i) * lda;
    int64_t kq = 0;
    for (; kq + 4 <= Kq; kq += 4) {
        int8x16_t xv[4];
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++) xv[i] = vld1q_s8(a[i] + 4 * kq);
#define QUAD(t)                                                                                  \
    {                                                                                            \
        const int8_t *wr = W + (kq + t) * 256;                                                   \
        const int8x16_t w0 = vld1q_s8(wr), w1 = vld1q_s8(wr + 16), w2 = vld1q_s8(wr + 32),        \
                        w3 = vld1q_s8(wr + 48);                                                  \
        for (int i = 0; i < MR; i++) {                                                           \
            acc[i][0] = vdotq_laneq_s32(acc[i][0], w0, xv[i], t);                                \
            acc[i][1] = vdotq_laneq_s32(acc[i][1], w1, xv[i], t);                                \
            acc[i][2] = vdotq_laneq_s32(acc[i][2], w2, xv[i], t);                                \
            acc[i][3] = vdotq_laneq_s32(acc[i][3], w3, xv[i], t);                                \
        }                                                                                        \
    }
        QUAD(0) QUAD(1) QUAD(2) QUAD(3)
#undef QUAD
    }
    for (; kq < Kq; kq++) {
        const int8_t *wr = W + kq * 256;
        const int8x16_t w0 = vld1q_s8(wr), w1 = vld1q_s8(wr + 16), w2 = vld1q_s8(wr + 32), w3 = vld1q_s8(wr + 48);
        for (int i = 0; i < MR; i++) {
            int32_t qd;
            memcpy(&qd, a[i] + 4 * kq, 4);
            const int8x16_t xq = vreinterpretq_s8_s32(vdupq_n_s32(qd));
            acc[i][0] = vdotq_s32(acc[i][0], w0, xq);
            acc[i][1] = vdotq_s32(acc[i][1], w1, xq);
            acc[i][2] = vdotq_s32(acc[i][2], w2, xq);
            acc[i][3] = vdotq_s32(acc[i][3], w3, xq);
        }
    }
    int32_t sums[4][16];
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) vst1q_s32(sums[i] + 4 * g, acc[i][g]);
    const int64_t n0 = p * MACT_PANEL + 4 * g0;
    const int nv = (int)(j->N - n0 < 16 ? j->N - n0 : 16);
    for (int i = 0; i < MR; i++)
        for (int c = 0; c < nv; c++) mact_arm_i8_store(j, m + i, n0 + c, sums[i][c]);
}

static void panel_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const i8_job *j = arg;
    const int64_t M4 = j->M & ~(int64_t)3;
    const int64_t ncols = j->N - p * MACT_PANEL < MACT_PANEL ? j->N - p * MACT_PANEL : MACT_PANEL;
    for (int g0 = 0; g0 < 16 && 4 * g0 < ncols; g0 += 4) {
        for (int64_t m = 0; m < M4; m += 4) block(4, j, m, p, g0);
        for (int64_t m = M4; m < j->M; m++) block(1, j, m, p, g0);
    }
}

void mact_arm_gemm_i8_run(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                          const mact_packed *pk, const float *bias, int64_t M, int epi, int kq_multiple,
                          mact_task_fn panel)
{
    const int64_t K = pk->K, Kq = pk->Kp, Kqr = (Kq + kq_multiple - 1) / kq_multiple * kq_multiple;
    /* the quantized rows (4 Kqr bytes apart, zero past K), then the row scales and zero points */
    uint8_t *buf = mact_kctx_buf(kc, 0, 0, (size_t)M * (size_t)Kqr * 4 + (size_t)M * 8);
    if (!buf) return;
    int8_t *A = (int8_t *)buf;
    float *rs = (float *)(buf + (size_t)M * (size_t)Kqr * 4);
    int32_t *rz = (int32_t *)(rs + M);
    for (int64_t m = 0; m < M; m++) {
        quant_row_s8(A + m * 4 * Kqr, x + m * ldx, K, &rs[m], &rz[m]);
        memset(A + m * 4 * Kqr + K, 0, (size_t)(4 * Kqr - K));
    }
    i8_job j = {y, ldy, M, pk->N, Kq, 4 * Kqr, A, rs, rz, pk, bias, epi};
    mact_kctx_run(kc, pk->npanel, mact_gemm_parallel(M, pk->N, K), panel, &j);
}

void mact_arm_gemm_i8(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                      const float *bias, int64_t M, int epi)
{
    mact_arm_gemm_i8_run(kc, y, ldy, x, ldx, pk, bias, M, epi, 1, panel_task);
}

/* the bench's SDOT peak: 16 independent chains of 4 lanes x 4 byte products x 2 ops */
static double sdot_body(long iters)
{
    int32x4_t a[16];
    const int8x16_t x = vdupq_n_s8(1), w = vdupq_n_s8(-1);
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_s32(c);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++) a[c] = vdotq_s32(a[c], x, w);
        __asm__ volatile("" : "+w"(a[0]), "+w"(a[1]), "+w"(a[2]), "+w"(a[3]), "+w"(a[4]), "+w"(a[5]), "+w"(a[6]),
                         "+w"(a[7]));
    }
    int32x4_t s = a[0];
    for (int c = 1; c < 16; c++) s = vaddq_s32(s, a[c]);
    return (double)vaddvq_s32(s);
}

double mact_arm_peak_gops_i8(int threads) { return mact_peak_best_of_3(sdot_body, 5000000, 16 * 32, threads); }

/* one panel times a vector (the centred GEMM's mu W^T from the planes): 16 columns at a time (16 accumulators of
 * 4 k lanes each, summed at the end), each 16 bytes (4 columns x 4 k) widened to floats and multiplied by x's 4
 * values of that k quad */
void mact_arm_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p)
{
    const int8_t *w0 = (const int8_t *)pk->data + p * pk->Kp * 256;
    for (int g = 0; g < 4; g++) {
        float32x4_t acc[16];
        for (int i = 0; i < 16; i++) acc[i] = vdupq_n_f32(0.f);
        const int8_t *w = w0 + 64 * g;
        for (int64_t kq = 0; kq < pk->Kp; kq++, w += 256) {
            const float32x4_t xv = vld1q_f32(x + 4 * kq);
            for (int i = 0; i < 4; i++) {
                const int8x16_t q = vld1q_s8(w + 16 * i);
                const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
                acc[4 * i + 0] = vfmaq_f32(acc[4 * i + 0], vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), xv);
                acc[4 * i + 1] = vfmaq_f32(acc[4 * i + 1], vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), xv);
                acc[4 * i + 2] = vfmaq_f32(acc[4 * i + 2], vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), xv);
                acc[4 * i + 3] = vfmaq_f32(acc[4 * i + 3], vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), xv);
            }
        }
        for (int i = 0; i < 16; i++) out[16 * g + i] = vaddvq_f32(acc[i]);
    }
}
