/* NEON attention: the plain-C loop of kernels/kernels.c (one pool task per (head, query row), softmax in fp32
 * with a double sum, the same masking and NaN rules) with its two inner loops over the head dimension
 * vectorised: q . k as 4 chains of 4 lanes, and p v accumulated with FMLA. Each output is computed by one
 * task in a fixed order, so results never depend on the thread count. */
#include <math.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"

typedef mact_att_job att_job;

static inline float dot(const float *a, const float *b, int n)
{
    float32x4_t s0 = vdupq_n_f32(0.f), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float d = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) d += a[i] * b[i];
    return d;
}

static void att_task(void *arg, int64_t t, int tid)
{
    const att_job *j = arg;
    const int h = (int)(t / j->nq), group = j->n_heads / j->n_kv, hd = j->hd;
    const int64_t i = t % j->nq, nk = j->nk;
    float *s = j->scratch + tid * mact_attention_scratch(nk);
    const float *qi = j->q + i * j->q_ld + (int64_t)h * hd;
    const int64_t koff = (int64_t)(h / group) * hd;
    float mx = -INFINITY;
    int nan = 0;
    for (int64_t jj = 0; jj < nk; jj++) {
        if (j->key_ok && !j->key_ok[jj]) { s[jj] = -INFINITY; continue; }
        float d = dot(qi, j->k + jj * j->kv_ld + koff, hd);
        d = d * j->scale + (j->bias ? j->bias[i * nk + jj] : 0.f);
        s[jj] = d;
        nan |= d != d;
        if (d > mx) mx = d;
    }
    float *o = j->out + i * j->out_ld + (int64_t)h * hd;
    for (int t2 = 0; t2 < hd; t2++) o[t2] = nan ? NAN : 0.f;
    /* a NaN score poisons its row; no visible key gives zeros (as the reference) */
    if (nan || mx == -INFINITY) return;
    double sum = 0;
    for (int64_t jj = 0; jj < nk; jj++) {
        const float e = s[jj] == -INFINITY ? 0.f : expf(s[jj] - mx);
        s[jj] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    const int hd4 = hd & ~3;
    for (int64_t jj = 0; jj < nk; jj++) {
        if (s[jj] == 0.f) continue;
        const float *vj = j->v + jj * j->kv_ld + koff;
        const float p = s[jj] * inv;
        int t2 = 0;
        for (; t2 < hd4; t2 += 4) vst1q_f32(o + t2, vaddq_f32(vld1q_f32(o + t2), vmulq_n_f32(vld1q_f32(vj + t2), p)));
        for (; t2 < hd; t2++) o[t2] += p * vj[t2];
    }
}

int mact_arm_attention(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                       const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd,
                       float scale, const float *bias, const uint8_t *key_ok, float *scratch)
{
    if (hd < 4) return 0; /* nothing to vectorise: the reference loop */
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    mact_kctx_run(kc, (int64_t)n_heads * nq, nq * nk * n_heads > 4096, att_task, &j);
    return 1;
}
