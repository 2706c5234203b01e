/* bf16 attention (BF16 / INT8 precision on the neon+fp16+dotprod+i8mm+bf16 level), the x86 bf16 mode's
 * contract: q, K, V and the softmax numerators p rounded to bf16 (BFCVTN: nearest even), q k^T and p v as
 * BFDOT dot products of bf16 pairs with fp32 accumulation, the softmax in fp32 (attention.c's rows, the same
 * masking and NaN rules). BFDOT rounds its fp32 adds to odd (gemm_bf16.c says how); the bf16 rounding of
 * q, k and p dominates the error, as on x86.
 *
 * Layout per kv head, x86's (mact_attention_kv_packed_size): kt2 [hd / 2][nkp] = (K[j, 2d], K[j, 2d + 1])
 * pairs, then v2 [nkp / 2][hd] = (V[2jp, c], V[2jp + 1, c]) pairs, zero past nk; built per call or once by
 * mact_attention_kv_pack (the same function, so the two give bitwise the same outputs).
 * Loops as the fp32 kernel: one pool task per (head, 32 query rows); per block of 8 rows, scores 8 rows x 8
 * keys (BFDOT by lane over 4 d pairs), softmax rows, p to bf16 pairs, p v 8 rows x 8 columns (BFDOT by lane
 * over 4 key pairs), scaled by 1 / sum. The file is compiled for armv8.6-a+bf16+fp16 and reached only through
 * the bf16 level's table. */
#pragma GCC target("arch=armv8.6-a+bf16+fp16")
#include <math.h>
#include <string.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"

typedef mact_att_job att_job;

#define QB 8
#define QC 32
#define INL inline __attribute__((always_inline))

static INL bfloat16x8_t cvt8(float32x4_t a, float32x4_t b) { return vcvtq_high_bf16_f32(vcvtq_low_bf16_f32(a), b); }

/* n floats (even n) -> n bf16 (n / 2 pairs as uint32) */
static void row_bf16(uint32_t *dst, const float *x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) vst1q_bf16((bfloat16_t *)(dst + i / 2), cvt8(vld1q_f32(x + i), vld1q_f32(x + i + 4)));
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, sizeof(float) * (size_t)(n - i));
        uint32_t u[4];
        vst1q_bf16((bfloat16_t *)u, cvt8(vld1q_f32(t), vld1q_f32(t + 4)));
        memcpy(dst + i / 2, u, sizeof(uint32_t) * (size_t)((n - i) / 2));
    }
}

static int64_t head_words(int64_t nk, int hd)
{
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (int64_t)(hd / 2) * nkp + nkp / 2 * hd;
}

/* one kv head (columns koff .. koff + hd of K and V) -> kt2, v2; tmp: 2 hd uint32 */
static void pack_head(uint32_t *kt2, uint32_t *v2, const float *k, const float *v, int64_t kv_ld, int64_t koff,
                      int64_t nk, int hd, uint32_t *tmp)
{
    const int hp = hd / 2;
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    for (int64_t j = 0; j < nkp; j++) {
        if (j < nk) row_bf16(tmp, k + j * kv_ld + koff, hd);
        for (int d = 0; d < hp; d++) kt2[(int64_t)d * nkp + j] = j < nk ? tmp[d] : 0;
    }
    for (int64_t jp = 0; jp < nkp / 2; jp++) {
        uint32_t *dst = v2 + jp * hd;
        const int64_t j0 = 2 * jp, j1 = 2 * jp + 1;
        if (j0 >= nk) {
            memset(dst, 0, sizeof(uint32_t) * (size_t)hd);
            continue;
        }
        uint16_t *a = (uint16_t *)tmp, *b = (uint16_t *)(tmp + hp);
        row_bf16(tmp, v + j0 * kv_ld + koff, hd);
        if (j1 < nk) row_bf16(tmp + hp, v + j1 * kv_ld + koff, hd);
        else memset(tmp + hp, 0, sizeof(uint32_t) * (size_t)hp);
        for (int c = 0; c < hd; c++) dst[c] = (uint32_t)a[c] | (uint32_t)b[c] << 16;
    }
}

void mact_arm_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv, int hd)
{
    const int64_t per = head_words(nk, hd), nkp = (nk + 15) & ~(int64_t)15;
    uint32_t tmp[256];
    for (int g = 0; g < n_kv; g++)
        pack_head(dst + g * per, dst + g * per + (int64_t)(hd / 2) * nkp, k, v, kv_ld, (int64_t)g * hd, nk, hd, tmp);
}

static INL bfloat16x8_t as_bf(uint32x4_t u) { return vreinterpretq_bf16_u32(u); }

/* S[r][j] = sum over d pairs of q2[r] . kt2[.][j], r < 8 (rows past rb repeat row 0, not stored), j < nkp */
static void scores_bf16(float *S, int64_t nkp, const uint32_t *q2, int rb, const uint32_t *kt2, int hp)
{
    const uint32_t *qr[QB];
    for (int r = 0; r < QB; r++) qr[r] = q2 + (r < rb ? r : 0) * hp;
    const int hp4 = hp & ~3;
    for (int64_t j0 = 0; j0 < nkp; j0 += 8) {
        float32x4_t acc[QB][2];
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) acc[r][0] = acc[r][1] = vdupq_n_f32(0.f);
        int d = 0;
        for (; d < hp4; d += 4) {
            bfloat16x8_t qv[QB];
#pragma GCC unroll 8
            for (int r = 0; r < QB; r++) qv[r] = as_bf(vld1q_u32(qr[r] + d));
#define DSTEP(t)                                                                                              \
    {                                                                                                         \
        const bfloat16x8_t k0 = as_bf(vld1q_u32(kt2 + (d + t) * nkp + j0));                                   \
        const bfloat16x8_t k1 = as_bf(vld1q_u32(kt2 + (d + t) * nkp + j0 + 4));                               \
        for (int r = 0; r < QB; r++) {                                                                        \
            acc[r][0] = vbfdotq_laneq_f32(acc[r][0], k0, qv[r], t);                                           \
            acc[r][1] = vbfdotq_laneq_f32(acc[r][1], k1, qv[r], t);                                           \
        }                                                                                                     \
    }
            DSTEP(0) DSTEP(1) DSTEP(2) DSTEP(3)
#undef DSTEP
        }
        for (; d < hp; d++) {
            const bfloat16x8_t k0 = as_bf(vld1q_u32(kt2 + d * nkp + j0)), k1 = as_bf(vld1q_u32(kt2 + d * nkp + j0 + 4));
#pragma GCC unroll 8
            for (int r = 0; r < QB; r++) {
                const bfloat16x8_t qd = as_bf(vdupq_n_u32(qr[r][d]));
                acc[r][0] = vbfdotq_f32(acc[r][0], k0, qd);
                acc[r][1] = vbfdotq_f32(acc[r][1], k1, qd);
            }
        }
        for (int r = 0; r < rb; r++) {
            vst1q_f32(S + r * nkp + j0, acc[r][0]);
            vst1q_f32(S + r * nkp + j0 + 4, acc[r][1]);
        }
    }
}

/* O[r][c0 .. c0 + 4 NZ) = inv[r] sum_jp p2[r][jp] . v2[jp][c] */
static INL void pv_cols(const int NZ, float *out, int64_t out_ld, const uint32_t *p2, int64_t np2, int rb,
                        const uint32_t *v2, int hd, int c0, const float *inv)
{
    const uint32_t *pr[QB];
    for (int r = 0; r < QB; r++) pr[r] = p2 + (r < rb ? r : 0) * np2;
    float32x4_t acc[QB][2];
#pragma GCC unroll 8
    for (int r = 0; r < QB; r++) acc[r][0] = acc[r][1] = vdupq_n_f32(0.f);
    for (int64_t jp = 0; jp < np2; jp += 4) { /* np2 is a multiple of 8 */
        bfloat16x8_t p[QB];
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) p[r] = as_bf(vld1q_u32(pr[r] + jp));
#define JSTEP(t)                                                                                  \
    {                                                                                             \
        const uint32_t *vj = v2 + (jp + t) * hd + c0;                                             \
        const bfloat16x8_t v0 = as_bf(vld1q_u32(vj)), v1 = NZ > 1 ? as_bf(vld1q_u32(vj + 4)) : v0; \
        for (int r = 0; r < QB; r++) {                                                            \
            acc[r][0] = vbfdotq_laneq_f32(acc[r][0], v0, p[r], t);                                \
            if (NZ > 1) acc[r][1] = vbfdotq_laneq_f32(acc[r][1], v1, p[r], t);                    \
        }                                                                                         \
    }
        JSTEP(0) JSTEP(1) JSTEP(2) JSTEP(3)
#undef JSTEP
    }
    for (int r = 0; r < rb; r++) {
        float *o = out + r * out_ld + c0;
        vst1q_f32(o, vmulq_n_f32(acc[r][0], inv[r]));
        if (NZ > 1) vst1q_f32(o + 4, vmulq_n_f32(acc[r][1], inv[r]));
    }
}

static inline float bf_lo(uint32_t u)
{
    const uint32_t b = u << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static inline float bf_hi(uint32_t u)
{
    const uint32_t b = u & 0xffff0000u;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void pv_bf16(float *out, int64_t out_ld, const uint32_t *p2, int64_t np2, int rb, const uint32_t *v2, int hd,
                    const float *inv)
{
    int c = 0;
    for (; c + 8 <= hd; c += 8) pv_cols(2, out, out_ld, p2, np2, rb, v2, hd, c, inv);
    if (c + 4 <= hd) pv_cols(1, out, out_ld, p2, np2, rb, v2, hd, c, inv), c += 4;
    for (; c < hd; c++) /* hd % 4 (even hd: 2) last columns: the same bf16 products, fp32 sums in key order */
        for (int r = 0; r < rb; r++) {
            float a = 0.f;
            for (int64_t jp = 0; jp < np2; jp++) {
                const uint32_t pp = p2[r * np2 + jp], vv = v2[jp * hd + c];
                a += bf_lo(pp) * bf_lo(vv) + bf_hi(pp) * bf_hi(vv);
            }
            out[r * out_ld + c] = a * inv[r];
        }
}

static void att_bf16_task(void *arg, int64_t t, int tid)
{
    const att_job *j = arg;
    const int64_t chunks = (j->nq + QC - 1) / QC;
    const int h = (int)(t / chunks), hd = j->hd, hp = hd / 2, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nkp = (nk + 15) & ~(int64_t)15, np2 = nkp / 2, c0 = (t % chunks) * QC;
    const int64_t c1 = c0 + QC < j->nq ? c0 + QC : j->nq;
    uint32_t *kt2 = (uint32_t *)(j->scratch + tid * mact_attention_scratch(nk)); /* hp * nkp */
    uint32_t *v2 = kt2 + (int64_t)hp * nkp;                                         /* np2 * hd */
    float *S = (float *)(v2 + np2 * hd);                                            /* 8 * nkp */
    uint32_t *p2 = (uint32_t *)(S + QB * nkp);                                      /* 8 * np2 */
    uint32_t *q2 = p2 + QB * np2;                                                   /* 8 * hp */
    if (j->kvp) {
        kt2 = (uint32_t *)j->kvp + (int64_t)(h / group) * head_words(nk, hd);
        v2 = kt2 + (int64_t)hp * nkp;
    } else {
        uint32_t tmp[256];
        pack_head(kt2, v2, j->k, j->v, j->kv_ld, (int64_t)(h / group) * hd, nk, hd, tmp);
    }
    for (int64_t i0 = c0; i0 < c1; i0 += QB) {
        const int rb = (int)(c1 - i0 < QB ? c1 - i0 : QB);
        for (int r = 0; r < rb; r++) row_bf16(q2 + r * hp, j->q + (i0 + r) * j->q_ld + (int64_t)h * hd, hd);
        scores_bf16(S, nkp, q2, rb, kt2, hp);
        float inv[QB];
        for (int r = 0; r < rb; r++) {
            float *sr = S + r * nkp;
            inv[r] = mact_arm_softmax_row(sr, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
            row_bf16(p2 + r * np2, sr, (int)nkp); /* zero past nk */
        }
        pv_bf16(j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, p2, np2, rb, v2, hd, inv);
    }
}

void mact_arm_attention_bf16(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                             const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                             int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                             const uint32_t *kvp)
{
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, kvp};
    const int64_t tasks = (int64_t)n_heads * ((nq + QC - 1) / QC);
    mact_kctx_run(kc, tasks, (double)nq * (double)nk * (double)hd * n_heads > 2e5, att_bf16_task, &j);
}
