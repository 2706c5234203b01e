/* The x86 backend's packed weight layouts, built once per model at load (model/packs.c) for the model's
 * precision and bound to each weight (mact_tensor.pk).
 *
 * MACT_PACK_BF16: the N output rows of W[N, K] are cut into panels of 64; a panel holds, for each pair of k
 * (kp = k / 2), the 64 columns' (W[n, 2kp], W[n, 2kp + 1]) as bf16 pairs: 256 bytes, four zmm registers, the
 * operand order of vdpbf16ps. Rows past N and the k past an odd K are zero. The fp32 kernels widen the same
 * bytes exactly (bf16 -> fp32 is a shift), so a BF16 weight's pack serves both precisions.
 * MACT_PACK_F32: fp32 panels (64 columns per k row) for F32 weights in FP32 mode.
 * MACT_PACK_I8 (INT8 mode, the weights of the int8 components (mact_load_options.int8_parts), any stored dtype; the quantiser shared with ARM: kernels/pack_i8.c): int8 per output
 * channel (symmetric: scale = max|W[n, :]| / 127) in panels of k quads (64 columns x 4 bytes per row:
 * vpdpbusd's operand order), followed by the per-column scales and sums of the int8 values. */
#include <math.h>
#include <string.h>
#include "kernels/x86/x86.h"

static inline uint16_t src_bf16(const void *w, int dtype, int64_t i)
{
    if (dtype == MACT_BF16) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)w + 2 * i, 2);
        return h;
    }
    return mact_f32_to_bf16(mact_load_f32(w, dtype, i));
}

#define src_f32 mact_load_f32

/* Packing walks each panel in blocks of 32 k rows: the destination block (32 x 256 bytes) stays in L1
 * while the 64 source rows are read a block at a time, the next block prefetched (64 read streams are
 * more than the hardware prefetchers follow). */
#define PACK_KB 32

static void pack_panel_bf16(uint16_t *dst, const void *w, int dtype, int64_t N, int64_t K, int64_t Kp, int64_t p)
{
    {
        uint16_t *pd = dst + p * Kp * 2 * MACT_PANEL;
        for (int64_t kp0 = 0; kp0 < Kp; kp0 += PACK_KB) {
            const int64_t kn = Kp - kp0 < PACK_KB ? Kp - kp0 : PACK_KB;
            for (int c = 0; c < MACT_PANEL; c++) {
                const int64_t n = p * MACT_PANEL + c;
                uint16_t *col = pd + kp0 * 2 * MACT_PANEL + 2 * c;
                if (n >= N) {
                    for (int64_t t = 0; t < kn; t++) col[t * 2 * MACT_PANEL] = col[t * 2 * MACT_PANEL + 1] = 0;
                    continue;
                }
                const int64_t base = n * K + 2 * kp0;
                if (2 * (kp0 + PACK_KB) < K) {
                    const uint8_t *nx = (const uint8_t *)w + (dtype == MACT_F32 ? 4 : 2) * (base + 2 * PACK_KB);
                    for (int l = 0; l < (dtype == MACT_F32 ? 4 : 2); l++) __builtin_prefetch(nx + 64 * l);
                }
                /* pairs fully inside K; the last pair of an odd K gets a zero partner */
                const int64_t full = (K - 2 * kp0) / 2 < kn ? (K - 2 * kp0) / 2 : kn;
                if (dtype == MACT_BF16) {
                    const uint8_t *src = (const uint8_t *)w + 2 * base;
                    for (int64_t t = 0; t < full; t++) memcpy(col + t * 2 * MACT_PANEL, src + 4 * t, 4);
                } else
                    for (int64_t t = 0; t < full; t++) {
                        col[t * 2 * MACT_PANEL] = src_bf16(w, dtype, base + 2 * t);
                        col[t * 2 * MACT_PANEL + 1] = src_bf16(w, dtype, base + 2 * t + 1);
                    }
                if (full < kn) {
                    col[full * 2 * MACT_PANEL] = src_bf16(w, dtype, base + 2 * full);
                    col[full * 2 * MACT_PANEL + 1] = 0;
                }
            }
        }
    }
}

static void pack_panel_f32(float *dst, const float *w, int64_t N, int64_t K, int64_t p)
{
    {
        float *pd = dst + p * K * MACT_PANEL;
        for (int64_t k0 = 0; k0 < K; k0 += PACK_KB) {
            const int64_t kn = K - k0 < PACK_KB ? K - k0 : PACK_KB;
            for (int c = 0; c < MACT_PANEL; c++) {
                const int64_t n = p * MACT_PANEL + c;
                float *col = pd + k0 * MACT_PANEL + c;
                if (n < N && k0 + PACK_KB < K) {
                    const uint8_t *nx = (const uint8_t *)w + 4 * (n * K + k0 + PACK_KB);
                    __builtin_prefetch(nx);
                    __builtin_prefetch(nx + 64);
                }
                if (n >= N)
                    for (int64_t t = 0; t < kn; t++) col[t * MACT_PANEL] = 0.f;
                else
                    for (int64_t t = 0; t < kn; t++)
                        memcpy(&col[t * MACT_PANEL], (const uint8_t *)w + 4 * (n * K + k0 + t), 4);
            }
        }
    }
}

/* The format a weight is packed into for a precision, and its bytes; 0 when it is not packable. */
int mact_x86_pack_plan(int dtype, int64_t N, int64_t K, int precision, int quant, int *fmt, size_t *bytes)
{
    if (N <= 0 || K <= 0) return 0;
    /* INT8 quantizes only the components chosen at load (quant); the others keep their BF16 mode packs */
    if (precision == MACT_PRECISION_INT8 && !quant) precision = MACT_PRECISION_BF16;
    if (dtype != MACT_BF16 && dtype != MACT_F32 && dtype != MACT_F16) return 0;
    if (dtype == MACT_F16 && precision == MACT_PRECISION_FP32) return 0;  /* fp32 mode reads F16 weights as stored */
    const int64_t np = (N + MACT_PANEL - 1) / MACT_PANEL;
    if (precision == MACT_PRECISION_INT8) {
        *fmt = MACT_PACK_I8;
        /* panels of 256-byte quad rows, then scale and colsum, 64 per panel each */
        *bytes = (size_t)np * (size_t)((K + 3) / 4) * 256 + (size_t)np * MACT_PANEL * 8;
        return 1;
    }
    *fmt = dtype == MACT_F32 && precision == MACT_PRECISION_FP32 ? MACT_PACK_F32 : MACT_PACK_BF16;
    const int64_t Kp = *fmt == MACT_PACK_F32 ? K : (K + 1) / 2;
    *bytes = (size_t)np * (size_t)Kp * MACT_PANEL * 4;  /* a row is 64 fp32 or 64 bf16 pairs */
    return 1;
}

/* The packed layout of a weight at buf (panels, then for MACT_PACK_I8 the scales and column sums). */
mact_packed mact_x86_pack_describe(const void *buf, int dtype, int64_t N, int64_t K, int fmt)
{
    const int64_t Kp = fmt == MACT_PACK_F32 ? K : fmt == MACT_PACK_I8 ? (K + 3) / 4 : (K + 1) / 2;
    const int64_t np = (N + MACT_PANEL - 1) / MACT_PANEL;
    mact_packed pk = {.N = N, .K = K, .Kp = Kp, .npanel = np, .fmt = fmt,
                      .exact = fmt != MACT_PACK_I8 && (dtype == MACT_BF16 || fmt == MACT_PACK_F32), .data = buf};
    if (fmt == MACT_PACK_I8) {
        pk.scale = (const float *)((const uint8_t *)buf + (size_t)np * (size_t)Kp * 256);
        pk.colsum = (const int32_t *)(pk.scale + np * MACT_PANEL);
    }
    return pk;
}

typedef struct {
    void *buf;
    const void *w;
    int dtype, fmt, resid;
    int64_t N, K;
    mact_packed pk;
} fill_job;

static void fill_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const fill_job *j = arg;
    if (j->fmt == MACT_PACK_F32) pack_panel_f32(j->buf, j->w, j->N, j->K, p);
    else if (j->fmt == MACT_PACK_I8)
        mact_pack_panel_i8(j->buf, (float *)j->pk.scale, (int32_t *)j->pk.colsum, j->w, j->dtype, j->N, j->K,
                           j->pk.Kp, p, j->resid);
    else pack_panel_bf16(j->buf, j->w, j->dtype, j->N, j->K, j->pk.Kp, p);
}

/* one panel per pool task (panels are independent and each is written by one thread) */
void mact_x86_pack_fill(mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K, int fmt)
{
    const int resid = fmt == MACT_PACK_I8R;  /* a residual plane: MACT_PACK_I8's layout */
    if (resid) fmt = MACT_PACK_I8;
    fill_job j = {buf, w, dtype, fmt, resid, N, K, mact_x86_pack_describe(buf, dtype, N, K, fmt)};
    if (N * K > (1 << 18)) mact_pool_run(pool, j.pk.npanel, 0, fill_task, &j);
    else for (int64_t p = 0; p < j.pk.npanel; p++) fill_task(&j, p, 0);
}
