/* The ARM backend's packed weights, two formats:
 *  - MACT_PACK_I8 (INT8 precision, from the dotprod level on; the quantiser shared with x86: kernels/pack_i8.c): int8
 *    per output channel (symmetric: scale = max|W[n, :]| / 127) in 64-column panels of k quads, then the
 *    per-column scales and sums of the int8 values (kernels.h). A panel row of 16 bytes holds 4 columns x 4 k,
 *    which is SDOT's operand: one `sdot v.4s, w.16b, x.4b[l]` adds 4 columns' quad dot products.
 *  - MACT_PACK_BF16Q (BF16 precision, and the weights INT8 leaves in bf16, on the bf16 level only): bf16 in
 *    64-column panels of k quads; a panel row holds 32 column pairs x (4 k of column 2c, 4 k of column
 *    2c + 1), 16 bytes per pair, which is BFMMLA's second operand (a 4 x 2 matrix, column by column). F32 and
 *    F16 weights round to nearest even (NaN kept a NaN), BF16 ones are copied; zero past N and K.
 * FP32 precision packs nothing: the row-major rows (fp32 FMLA on the weights where the loader left them) are
 * the exact mode, and fp32 panels would gain nothing on NEON's 128-bit loads. The pack cache keys on the ops'
 * name and each row's format, so these packs never meet the x86 ones. */
#include <math.h>
#include <string.h>
#include "kernels/arm/arm.h"

/* bf16 quad panels: column pairs of 4 k each, 16 bytes (vld1q_bf16 of one BFMMLA operand) */
static void pack_panel_bf16q(uint16_t *dst, const void *w, int dtype, int64_t N, int64_t K, int64_t Kq, int64_t p)
{
    uint16_t *pd = dst + p * Kq * 256;
    for (int c = 0; c < MACT_PANEL; c++) {
        const int64_t n = p * MACT_PANEL + c;
        uint16_t *col = pd + (c / 2) * 8 + (c % 2) * 4; /* then + kq * 256 + k % 4 */
        for (int64_t k = 0; k < 4 * Kq; k++) {
            uint16_t h = 0;
            if (n < N && k < K) {
                if (dtype == MACT_BF16) memcpy(&h, (const uint8_t *)w + 2 * (n * K + k), 2);
                else h = mact_f32_to_bf16(mact_load_f32(w, dtype, n * K + k));
            }
            col[(k / 4) * 256 + k % 4] = h;
        }
    }
}

static int plan_i8(int64_t N, int64_t K, int *fmt, size_t *bytes)
{
    const int64_t np = (N + MACT_PANEL - 1) / MACT_PANEL;
    *fmt = MACT_PACK_I8;
    *bytes = (size_t)np * (size_t)((K + 3) / 4) * 256 + (size_t)np * MACT_PANEL * 8;
    return 1;
}

/* the dotprod and i8mm levels without bf16 arithmetic: int8 packs only */
int mact_arm_pack_plan(int dtype, int64_t N, int64_t K, int precision, int quant, int *fmt, size_t *bytes)
{
    if (N <= 0 || K <= 0 || precision != MACT_PRECISION_INT8 || !quant) return 0;
    if (dtype != MACT_BF16 && dtype != MACT_F32 && dtype != MACT_F16) return 0;
    return plan_i8(N, K, fmt, bytes);
}

/* the bf16 level: BF16 precision packs every weight as bf16 quads; INT8 packs the LLM's and the action
 * expert's as int8 and the rest (the vision stack) as bf16 quads, as the x86 int8 mode does */
int mact_arm_pack_plan_bf16(int dtype, int64_t N, int64_t K, int precision, int quant, int *fmt, size_t *bytes)
{
    if (N <= 0 || K <= 0 || precision == MACT_PRECISION_FP32) return 0;
    if (dtype != MACT_BF16 && dtype != MACT_F32 && dtype != MACT_F16) return 0;
    if (precision == MACT_PRECISION_INT8 && quant) return plan_i8(N, K, fmt, bytes);
    *fmt = MACT_PACK_BF16Q;
    *bytes = (size_t)((N + MACT_PANEL - 1) / MACT_PANEL) * (size_t)((K + 3) / 4) * 512;
    return 1;
}

mact_packed mact_arm_pack_describe(const void *buf, int dtype, int64_t N, int64_t K, int fmt)
{
    (void)dtype;
    const int64_t Kq = (K + 3) / 4, np = (N + MACT_PANEL - 1) / MACT_PANEL;
    /* exact = 0 for both: the bf16 GEMM rounds x to bf16, so the FP32 mode never reads a pack */
    mact_packed pk = {.N = N, .K = K, .Kp = Kq, .npanel = np, .fmt = fmt, .exact = 0, .data = buf};
    if (fmt == MACT_PACK_BF16Q) return pk;
    pk.scale = (const float *)((const uint8_t *)buf + (size_t)np * (size_t)Kq * 256);
    pk.colsum = (const int32_t *)(pk.scale + np * MACT_PANEL);
    return pk;
}

typedef struct {
    void *buf;
    const void *w;
    int dtype, resid;
    int64_t N, K;
    mact_packed pk;
} fill_job;

static void fill_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const fill_job *j = arg;
    if (j->pk.fmt == MACT_PACK_BF16Q) {
        pack_panel_bf16q((uint16_t *)j->buf, j->w, j->dtype, j->N, j->K, j->pk.Kp, p);
        return;
    }
    mact_pack_panel_i8((int8_t *)j->buf, (float *)j->pk.scale, (int32_t *)j->pk.colsum, j->w, j->dtype, j->N, j->K,
                  j->pk.Kp, p, j->resid);
}

/* one panel per pool task (each panel is written by one thread) */
void mact_arm_pack_fill(mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K, int fmt)
{
    const int resid = fmt == MACT_PACK_I8R;  /* a residual plane: MACT_PACK_I8's layout */
    if (resid) fmt = MACT_PACK_I8;
    fill_job j = {buf, w, dtype, resid, N, K, mact_arm_pack_describe(buf, dtype, N, K, fmt)};
    if (N * K > (1 << 18)) mact_pool_run(pool, j.pk.npanel, 0, fill_task, &j);
    else for (int64_t p = 0; p < j.pk.npanel; p++) fill_task(&j, p, 0);
}
