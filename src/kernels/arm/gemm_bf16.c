/* The bf16 GEMM of BF16 precision on ARM (the neon+fp16+dotprod+i8mm+bf16 level: FEAT_BF16, Armv8.6):
 * y[M, N] = x[M, K] W[N, K]^T on a MACT_PACK_BF16Q weight (pack.c) with BFMMLA. The whole file is compiled for
 * armv8.6-a+bf16+fp16 (GCC materialises some constants with fp16 moves) and reached only through the table
 * of CPUs that report HWCAP2_BF16 and fp16 (ops.c).
 *
 * Contract (the x86 bf16 mode's, kernels.h): x rounded to bf16 (BFCVTN: round to nearest even under the
 * default FPCR), W rounded to bf16 once at pack time (nearest even), products summed in fp32, the bias and
 * the epilogue in fp32 on the finished sum. How the fp32 sums round differs from x86's vdpbf16ps: with
 * FPCR.EBF = 0 (Linux's default, and the only mode of CPUs without FEAT_EBF16) BFMMLA computes each output
 * as two chained BFDotAdd steps per 4 k, sum = RO(sum + RO(x0 w0 + x1 w1)) with round-to-odd and denormals
 * flushed, ignoring FPCR (docs/arm64.md cites the Arm ARM text and qemu's implementation). The products of
 * two bf16 are exact in fp32, so the only difference from a nearest-even fp32 chain is up to one ulp per add
 * instead of half of one: far below the bf16 rounding of x and W that both backends share.
 *
 * BFMMLA multiplies a 2 x 4 block of x (two rows, 4 k) by a 4 x 2 block of W (two columns, 4 k) into 2 x 2
 * fp32 sums. x is converted once per call into row pairs quad by quad (A[rp][kq] = 4 k of row 2 rp, then 4 k
 * of row 2 rp + 1: one 16-byte load per BFMMLA operand; the row after an odd M and the k past K are zero).
 * Loops: one pool task per 64-column panel; inside, strips of 16 columns (8 column pairs) and tiles of 2 row
 * pairs (4 rows): 16 fp32x4 accumulators, 2 x and 8 W operands per k quad. Each output is one chain in k
 * order computed by one thread, so results never depend on the thread count, and a plain-C emulation of
 * BFMMLA in that order (tests/c/test_kernels.c) reproduces them bit for bit. */
#pragma GCC target("arch=armv8.6-a+bf16+fp16")
#include <string.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"

#define INL inline __attribute__((always_inline))

typedef struct {
    float *y;
    int64_t ldy, M, N, Kq;
    const bfloat16_t *A; /* [ceil(M / 2)][Kq][8] */
    const mact_packed *pk;
    const float *bias;
    int epi;
} bf_job;

static INL bfloat16x8_t cvt8(float32x4_t a, float32x4_t b)
{
    return vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(a), b);
}

/* rows x0 and x1 (NULL: the zero row after an odd M) -> one row pair of A, zero past K */
static void convert_pair(bfloat16_t *dst, const float *x0, const float *x1, int64_t K, int64_t Kq)
{
    const int64_t Kf = K / 4;
    const float32x4_t z = vdupq_n_f32(0.f);
    for (int64_t kq = 0; kq < Kf; kq++)
        vst1q_bf16(dst + 8 * kq, cvt8(vld1q_f32(x0 + 4 * kq), x1 ? vld1q_f32(x1 + 4 * kq) : z));
    if (Kf < Kq) {
        float ta[4] = {0}, tb[4] = {0};
        for (int64_t k = 4 * Kf; k < K; k++) {
            ta[k - 4 * Kf] = x0[k];
            if (x1) tb[k - 4 * Kf] = x1[k];
        }
        vst1q_bf16(dst + 8 * Kf, cvt8(vld1q_f32(ta), vld1q_f32(tb)));
    }
}

/* MP row pairs (1 or 2) from row pair rp x 16 columns of panel p (strip s), over all of K */
static INL void tile(const int MP, const bf_job *j, int64_t rp, int64_t p, int s)
{
    const int64_t Kq = j->Kq;
    const bfloat16_t *W = (const bfloat16_t *)j->pk->data + p * Kq * 256 + s * 64;
    const bfloat16_t *a0 = j->A + rp * Kq * 8, *a1 = a0 + Kq * 8;
    float32x4_t acc[2][8];
#pragma GCC unroll 2
    for (int r = 0; r < MP; r++)
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) acc[r][c] = vdupq_n_f32(0.f);
    for (int64_t kq = 0; kq < Kq; kq++) {
        const bfloat16_t *wr = W + kq * 256;
        const bfloat16x8_t x0 = vld1q_bf16(a0 + 8 * kq);
        const bfloat16x8_t x1 = MP > 1 ? vld1q_bf16(a1 + 8 * kq) : x0;
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const bfloat16x8_t w = vld1q_bf16(wr + 8 * c);
            acc[0][c] = vbfmmlaq_f32(acc[0][c], x0, w);
            if (MP > 1) acc[1][c] = vbfmmlaq_f32(acc[1][c], x1, w);
        }
    }
    /* acc[r][c] = [row 2r col 2c, row 2r col 2c + 1, row 2r + 1 col 2c, row 2r + 1 col 2c + 1] */
    float out[4][16];
#pragma GCC unroll 2
    for (int r = 0; r < MP; r++)
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            vst1_f32(&out[2 * r][2 * c], vget_low_f32(acc[r][c]));
            vst1_f32(&out[2 * r + 1][2 * c], vget_high_f32(acc[r][c]));
        }
    const int64_t m0 = 2 * rp, n0 = p * MACT_PANEL + 16 * s;
    const int nv = (int)(j->N - n0 < 16 ? j->N - n0 : 16);
    for (int i = 0; i < 2 * MP && m0 + i < j->M; i++) {
        float *yr = j->y + (m0 + i) * j->ldy + n0;
        for (int c = 0; c < nv; c++) mact_epi_store(&yr[c], out[i][c], j->bias ? j->bias[n0 + c] : 0.f, j->epi);
    }
}

static void panel_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const bf_job *j = arg;
    const int64_t ncols = j->N - p * MACT_PANEL < MACT_PANEL ? j->N - p * MACT_PANEL : MACT_PANEL;
    const int64_t pairs = (j->M + 1) / 2, pairs2 = pairs & ~(int64_t)1;
    for (int s = 0; s < 4 && 16 * s < ncols; s++) {
        for (int64_t rp = 0; rp < pairs2; rp += 2) tile(2, j, rp, p, s);
        if (pairs & 1) tile(1, j, pairs - 1, p, s);
    }
}

/* use_bf16: always set by the dispatch here (a BF16Q pack is read only outside FP32 precision, pk->exact = 0) */
void mact_arm_gemm_bf16(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const mact_packed *pk, const float *bias, int64_t M, int epi, int use_bf16)
{
    (void)use_bf16;
    const int64_t K = pk->K, Kq = pk->Kp, pairs = (M + 1) / 2;
    bfloat16_t *A = mact_kctx_buf(kc, 0, 0, (size_t)pairs * (size_t)Kq * 16);
    if (!A) return;
    for (int64_t rp = 0; rp < pairs; rp++)
        convert_pair(A + rp * Kq * 8, x + 2 * rp * ldx, 2 * rp + 1 < M ? x + (2 * rp + 1) * ldx : NULL, K, Kq);
    bf_job j = {y, ldy, M, pk->N, Kq, A, pk, bias, epi};
    mact_kctx_run(kc, pk->npanel, mact_gemm_parallel(M, pk->N, K), panel_task, &j);
}

/* the bench's BFMMLA peak: 16 independent chains, each instruction 2 x 2 x 4 multiply-adds (32 FLOP) */
static double bfmmla_body(long iters)
{
    float32x4_t a[16];
    const bfloat16x8_t x = vreinterpretq_bf16_u16(vdupq_n_u16(0x3f80)), w = vreinterpretq_bf16_u16(vdupq_n_u16(0x3a80));
    for (int c = 0; c < 16; c++) a[c] = vdupq_n_f32((float)c);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++) a[c] = vbfmmlaq_f32(a[c], x, w);
        __asm__ volatile("" : "+w"(a[0]), "+w"(a[1]), "+w"(a[2]), "+w"(a[3]), "+w"(a[4]), "+w"(a[5]), "+w"(a[6]),
                         "+w"(a[7]));
    }
    float32x4_t s = a[0];
    for (int c = 1; c < 16; c++) s = vaddq_f32(s, a[c]);
    return vaddvq_f32(s);
}

/* the bf16 level's instruction peak: BFMMLA for the bf16 mode, else fp32 FMLA (peak.c) */
double mact_arm_peak_gflops_bf16(int use_bf16, int threads)
{
    if (!use_bf16) return mact_arm_peak_gflops(0, threads);
    return mact_peak_best_of_3(bfmmla_body, 2500000, 16 * 32, threads);
}
