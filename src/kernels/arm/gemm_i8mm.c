/* The int8 GEMM with SMMLA (i8mm: Armv8.6, the neon+fp16+dotprod+i8mm+bf16 level), on the same MACT_PACK_I8
 * panels and the same quantized rows as the SDOT kernel (gemm_i8.c, which quantizes and rescales for both):
 * SMMLA multiplies a 2 x 8 block of x (two rows, 8 k) by an 8 x 2 block of W (two columns, 8 k) into 2 x 2
 * int32 sums, 32 multiply-adds per instruction against SDOT's 16. The panel's quad rows kq and kq + 1 hold
 * 4 columns x 4 k each; zipping their 32-bit lanes gives two columns x 8 k, SMMLA's operand. Block: 4 rows
 * (2 row pairs) x 8 columns (4 column pairs), 8 int32x4 accumulators; an odd last quad pairs with zeros (the
 * rows are padded to an even number of quads). The whole file is compiled for armv8.6-a+i8mm and reached only
 * through the table of CPUs that report i8mm. Integer sums are exact: results equal the SDOT kernel's. */
#pragma GCC target("arch=armv8.6-a+i8mm")
#include <string.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"

static void panel_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const mact_arm_i8_job *j = arg;
    const int64_t Kq = j->Kq, Kq2 = Kq & ~(int64_t)1;
    const int64_t ncols = j->N - p * MACT_PANEL < MACT_PANEL ? j->N - p * MACT_PANEL : MACT_PANEL;
    const int8_t *P = (const int8_t *)j->pk->data + p * Kq * 256;
    const int8x16_t zero = vdupq_n_s8(0);
    for (int cg = 0; cg < 8 && 8 * cg < ncols; cg++) {
        const int8_t *W = P + 32 * cg; /* columns 8 cg .. 8 cg + 7 of each quad row */
        for (int64_t m = 0; m < j->M; m += 4) {
            const int8_t *a[4];
            for (int i = 0; i < 4; i++) a[i] = j->A + (m + i < j->M ? m + i : j->M - 1) * j->lda;
            int32x4_t acc[2][4];
#pragma GCC unroll 2
            for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) acc[r][c] = vdupq_n_s32(0);
            for (int64_t kq = 0; kq < Kq; kq += 2) {
                const int8_t *ra = W + kq * 256;
                const int8x16_t A0 = vld1q_s8(ra), A1 = vld1q_s8(ra + 16);
                const int8x16_t B0 = kq < Kq2 ? vld1q_s8(ra + 256) : zero, B1 = kq < Kq2 ? vld1q_s8(ra + 272) : zero;
                const int32x4_t a0 = vreinterpretq_s32_s8(A0), a1 = vreinterpretq_s32_s8(A1);
                const int32x4_t b0 = vreinterpretq_s32_s8(B0), b1 = vreinterpretq_s32_s8(B1);
                const int8x16_t w[4] = {vreinterpretq_s8_s32(vzip1q_s32(a0, b0)), vreinterpretq_s8_s32(vzip2q_s32(a0, b0)),
                                        vreinterpretq_s8_s32(vzip1q_s32(a1, b1)), vreinterpretq_s8_s32(vzip2q_s32(a1, b1))};
                const int8x16_t x0 = vcombine_s8(vld1_s8(a[0] + 4 * kq), vld1_s8(a[1] + 4 * kq));
                const int8x16_t x1 = vcombine_s8(vld1_s8(a[2] + 4 * kq), vld1_s8(a[3] + 4 * kq));
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    acc[0][c] = vmmlaq_s32(acc[0][c], x0, w[c]);
                    acc[1][c] = vmmlaq_s32(acc[1][c], x1, w[c]);
                }
            }
            /* acc[r][c] = [row 2r, col 2c | row 2r, col 2c + 1 | row 2r + 1, col 2c | row 2r + 1, col 2c + 1] */
            int32_t sums[2][4][4];
#pragma GCC unroll 2
            for (int r = 0; r < 2; r++)
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) vst1q_s32(sums[r][c], acc[r][c]);
            const int64_t n0 = p * MACT_PANEL + 8 * cg;
            const int nv = (int)(j->N - n0 < 8 ? j->N - n0 : 8);
            for (int i = 0; i < 4 && m + i < j->M; i++)
                for (int c = 0; c < nv; c++) mact_arm_i8_store(j, m + i, n0 + c, sums[i / 2][c / 2][2 * (i % 2) + c % 2]);
        }
    }
}

void mact_arm_gemm_i8mm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const mact_packed *pk, const float *bias, int64_t M, int epi)
{
    mact_arm_gemm_i8_run(kc, y, ldy, x, ldx, pk, bias, M, epi, 2, panel_task);
}

/* the bench's int8 peak on this level: SMMLA, 16 independent chains, each instruction 2 x 2 x 8 byte products
 * (32 multiply-adds, 64 ops) */
static double smmla_body(long iters)
{
    int32x4_t a[16];
    const int8x16_t x = vdupq_n_s8(1), w = vdupq_n_s8(-1);
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_s32(c);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++) a[c] = vmmlaq_s32(a[c], x, w);
        __asm__ volatile("" : "+w"(a[0]), "+w"(a[1]), "+w"(a[2]), "+w"(a[3]), "+w"(a[4]), "+w"(a[5]), "+w"(a[6]),
                         "+w"(a[7]));
    }
    int32x4_t s = a[0];
    for (int c = 1; c < 16; c++) s = vaddq_s32(s, a[c]);
    return (double)vaddvq_s32(s);
}

double mact_arm_peak_gops_i8mm(int threads) { return mact_peak_best_of_3(smmla_body, 2500000, 16 * 64, threads); }
