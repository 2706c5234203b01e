/* Blocked NEON attention in fp32 (every precision below the bf16 level, and FP32 on it; attention_bf16.c runs
 * bf16 mode there, with the softmax rows below), in the shape of the x86 AVX-512 kernel: one pool task per (head, chunk of QC query rows); the task transposes its kv head's K
 * once (kt[d][j], zero past nk), then for each block of 8 query rows
 *   scores: S[8][nk] = q K^T, 8 rows x 8 keys per step (16 accumulators), 4 d per step with FMLA by lane;
 *           each score is one fp32 chain in d order;
 *   softmax rows: s * scale + bias, masked keys -inf, max, exp (the ~1 ulp vector exp of vec.c) of s - max,
 *           the sum in double; a NaN among the visible scores makes the row NaN (a max would skip it and
 *           hide the fault), no visible key makes it zero (the reference's rules);
 *   p v:    O[8][hd] = sum_j e[r][j] v[j] over keys 4 at a time (FMLA by lane), 8 columns per pass (16
 *           accumulators), then scaled by 1 / sum.
 * Only scores for one block of rows exist at a time (never [nq, nk] per head). Each output is computed by one
 * task in a fixed order, so results never depend on the thread count. Declined (the plain-C loop runs): hd
 * above 128 (the scratch holds a transposed head of up to 128 x nk) and problems under 8 keys or 64 scores,
 * where blocks would be mostly padding. */
#include <math.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"
#include "kernels/arm/vecmath_neon.h"

typedef mact_att_job att_job;

#define QB 8  /* query rows per block */
#define QC 32 /* query rows per task */

/* S[r][j] = sum_d q_r[d] kt[d][j] for r < 8 (rows past rb repeat row 0, not stored), j < nkp (multiple of 8) */
static void scores(float *S, int64_t nkp, const float *q, int64_t q_ld, int rb, const float *kt, int hd)
{
    const float *qr[QB];
    for (int r = 0; r < QB; r++) qr[r] = q + (r < rb ? r : 0) * q_ld;
    const int hd4 = hd & ~3;
    for (int64_t j0 = 0; j0 < nkp; j0 += 8) {
        float32x4_t acc[QB][2];
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) acc[r][0] = acc[r][1] = vdupq_n_f32(0.f);
        int d = 0;
        for (; d < hd4; d += 4) {
            float32x4_t qv[QB];
#pragma GCC unroll 8
            for (int r = 0; r < QB; r++) qv[r] = vld1q_f32(qr[r] + d);
#define DSTEP(t)                                                                                                 \
    {                                                                                                            \
        const float32x4_t k0 = vld1q_f32(kt + (d + t) * nkp + j0), k1 = vld1q_f32(kt + (d + t) * nkp + j0 + 4); \
        for (int r = 0; r < QB; r++) {                                                                           \
            acc[r][0] = vfmaq_laneq_f32(acc[r][0], k0, qv[r], t);                                                \
            acc[r][1] = vfmaq_laneq_f32(acc[r][1], k1, qv[r], t);                                                \
        }                                                                                                        \
    }
            DSTEP(0) DSTEP(1) DSTEP(2) DSTEP(3)
#undef DSTEP
        }
        for (; d < hd; d++) {
            const float32x4_t k0 = vld1q_f32(kt + d * nkp + j0), k1 = vld1q_f32(kt + d * nkp + j0 + 4);
#pragma GCC unroll 8
            for (int r = 0; r < QB; r++) {
                acc[r][0] = vfmaq_n_f32(acc[r][0], k0, qr[r][d]);
                acc[r][1] = vfmaq_n_f32(acc[r][1], k1, qr[r][d]);
            }
        }
        for (int r = 0; r < rb; r++) {
            vst1q_f32(S + r * nkp + j0, acc[r][0]);
            vst1q_f32(S + r * nkp + j0 + 4, acc[r][1]);
        }
    }
}

/* one score row in place -> softmax numerators (zero past nk); returns 1 / sum, 0 when no key is visible (the
 * row zeroed), NaN when a visible score is NaN (the row NaN). Shared with the bf16 kernel (attention_bf16.c). */
float mact_arm_softmax_row(float *s, int64_t nk, int64_t nkp, float scale, const float *brow, const uint8_t *key_ok)
{
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    float32x4_t mx4 = ninf;
    uint32x4_t nan4 = vdupq_n_u32(0);
    const int64_t nk4 = nk & ~(int64_t)3;
    for (int64_t j = 0; j < nk4; j += 4) {
        float32x4_t v = vmulq_n_f32(vld1q_f32(s + j), scale);
        if (brow) v = vaddq_f32(v, vld1q_f32(brow + j));
        if (key_ok) {
            const uint32x4_t ok = {key_ok[j], key_ok[j + 1], key_ok[j + 2], key_ok[j + 3]};
            v = vbslq_f32(vtstq_u32(ok, ok), v, ninf);
        }
        nan4 = vorrq_u32(nan4, vmvnq_u32(vceqq_f32(v, v)));
        mx4 = vmaxnmq_f32(mx4, v);
        vst1q_f32(s + j, v);
    }
    float mx = vmaxnmvq_f32(mx4);
    int nan = vmaxvq_u32(nan4) != 0;
    for (int64_t j = nk4; j < nk; j++) {
        float v = s[j] * scale + (brow ? brow[j] : 0.f);
        if (key_ok && !key_ok[j]) v = -INFINITY;
        nan |= v != v;
        mx = v > mx ? v : mx;
        s[j] = v;
    }
    if (nan || mx == -INFINITY) {
        const float fill = nan ? NAN : 0.f;
        for (int64_t j = 0; j < nkp; j++) s[j] = fill;
        return nan ? NAN : 0.f;
    }
    const float32x4_t mv = vdupq_n_f32(mx);
    float64x2_t sum2 = vdupq_n_f64(0.);
    for (int64_t j = 0; j < nk4; j += 4) {
        const float32x4_t v = vld1q_f32(s + j);
        const uint32x4_t live = vmvnq_u32(vceqq_f32(v, ninf));
        const float32x4_t e = vreinterpretq_f32_u32(vandq_u32(live, vreinterpretq_u32_f32(exp4(vsubq_f32(v, mv)))));
        vst1q_f32(s + j, e);
        sum2 = vaddq_f64(sum2, vaddq_f64(vcvt_f64_f32(vget_low_f32(e)), vcvt_high_f64_f32(e)));
    }
    double sum = vaddvq_f64(sum2);
    for (int64_t j = nk4; j < nk; j++) {
        const float e = s[j] == -INFINITY ? 0.f : expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    for (int64_t j = nk; j < nkp; j++) s[j] = 0.f;
    return (float)(1.0 / sum);
}

/* O[r][c0 .. c0 + 4 NZ) = inv[r] sum_j S[r][j] v[j][c] for r < rb (rows past rb repeat row 0, not stored) */
static inline __attribute__((always_inline)) void pv_cols(const int NZ, float *out, int64_t out_ld, const float *S,
                                                          int64_t nkp, int64_t nk, int rb, const float *v,
                                                          int64_t kv_ld, int c0, const float *inv)
{
    const float *sr[QB];
    for (int r = 0; r < QB; r++) sr[r] = S + (r < rb ? r : 0) * nkp;
    float32x4_t acc[QB][2];
#pragma GCC unroll 8
    for (int r = 0; r < QB; r++) acc[r][0] = acc[r][1] = vdupq_n_f32(0.f);
    const int64_t nk4 = nk & ~(int64_t)3;
    int64_t j = 0;
    for (; j < nk4; j += 4) {
        float32x4_t p[QB];
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) p[r] = vld1q_f32(sr[r] + j);
#define JSTEP(t)                                                                                \
    {                                                                                           \
        const float *vj = v + (j + t) * kv_ld + c0;                                             \
        const float32x4_t v0 = vld1q_f32(vj), v1 = NZ > 1 ? vld1q_f32(vj + 4) : v0;             \
        for (int r = 0; r < QB; r++) {                                                          \
            acc[r][0] = vfmaq_laneq_f32(acc[r][0], v0, p[r], t);                                \
            if (NZ > 1) acc[r][1] = vfmaq_laneq_f32(acc[r][1], v1, p[r], t);                    \
        }                                                                                       \
    }
        JSTEP(0) JSTEP(1) JSTEP(2) JSTEP(3)
#undef JSTEP
    }
    for (; j < nk; j++) {
        const float *vj = v + j * kv_ld + c0;
        const float32x4_t v0 = vld1q_f32(vj), v1 = NZ > 1 ? vld1q_f32(vj + 4) : v0;
#pragma GCC unroll 8
        for (int r = 0; r < QB; r++) {
            acc[r][0] = vfmaq_n_f32(acc[r][0], v0, sr[r][j]);
            if (NZ > 1) acc[r][1] = vfmaq_n_f32(acc[r][1], v1, sr[r][j]);
        }
    }
    for (int r = 0; r < rb; r++) {
        float *o = out + r * out_ld + c0;
        vst1q_f32(o, vmulq_n_f32(acc[r][0], inv[r]));
        if (NZ > 1) vst1q_f32(o + 4, vmulq_n_f32(acc[r][1], inv[r]));
    }
}

static void pv(float *out, int64_t out_ld, const float *S, int64_t nkp, int64_t nk, int rb, const float *v,
               int64_t kv_ld, int hd, const float *inv)
{
    int c = 0;
    for (; c + 8 <= hd; c += 8) pv_cols(2, out, out_ld, S, nkp, nk, rb, v, kv_ld, c, inv);
    if (c + 4 <= hd) pv_cols(1, out, out_ld, S, nkp, nk, rb, v, kv_ld, c, inv), c += 4;
    for (; c < hd; c++) /* the last hd % 4 columns: one chain per output in key order */
        for (int r = 0; r < rb; r++) {
            float a = 0.f;
            for (int64_t j = 0; j < nk; j++) a += S[r * nkp + j] * v[j * kv_ld + c];
            out[r * out_ld + c] = a * inv[r];
        }
}

static void att_task(void *arg, int64_t t, int tid)
{
    const att_job *j = arg;
    const int64_t chunks = (j->nq + QC - 1) / QC;
    const int h = (int)(t / chunks), hd = j->hd, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nkp = (nk + 15) & ~(int64_t)15, c0 = (t % chunks) * QC;
    const int64_t c1 = c0 + QC < j->nq ? c0 + QC : j->nq;
    float *kt = j->scratch + tid * mact_attention_scratch(nk), *S = kt + (int64_t)hd * nkp;
    const int64_t koff = (int64_t)(h / group) * hd;
    for (int d = 0; d < hd; d++) {
        float *dst = kt + d * nkp;
        for (int64_t jj = 0; jj < nk; jj++) dst[jj] = j->k[jj * j->kv_ld + koff + d];
        for (int64_t jj = nk; jj < nkp; jj++) dst[jj] = 0.f;
    }
    for (int64_t i0 = c0; i0 < c1; i0 += QB) {
        const int rb = (int)(c1 - i0 < QB ? c1 - i0 : QB);
        scores(S, nkp, j->q + i0 * j->q_ld + (int64_t)h * hd, j->q_ld, rb, kt, hd);
        float inv[QB];
        for (int r = 0; r < rb; r++)
            inv[r] = mact_arm_softmax_row(S + r * nkp, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
        pv(j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, S, nkp, nk, rb, j->v + koff, j->kv_ld, hd, inv);
    }
}

int mact_arm_attention(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                       const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd,
                       float scale, const float *bias, const uint8_t *key_ok, float *scratch)
{
    if (!(hd <= 128 && hd >= 1 && nk >= 8 && nq * nk >= 64)) return 0;
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    const int64_t tasks = (int64_t)n_heads * ((nq + QC - 1) / QC);
    mact_kctx_run(kc, tasks, (double)nq * (double)nk * (double)hd * n_heads > 2e5, att_task, &j);
    return 1;
}
