/* Blocked fp32 attention of the AVX-512 levels (every precision below the bf16 level, and FP32 on it;
 * attention_bf16.c runs bf16 mode there, with the softmax rows below): one pool task per head; K of the head
 * transposed once, then blocks of 8 query rows: scores [8, nk] only, softmax numerators in fp32, the 1/sum
 * applied to the output rows. Each output is computed by one task in a fixed order, so results never depend
 * on the thread count. Declined (the plain-C loop runs): hd above 128, under 8 keys or 64 scores. */
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "kernels/x86/x86.h"
#include "kernels/x86/vecmath_avx512.h"

/* scores block: S[r][j] = sum_d q_r[d] kt[d][j] for rb <= 8 rows, j < nkp (multiple of 16) */
TF static void attn_scores(float *S, int64_t nkp, const float *q, int64_t q_ld, int rb, const float *kt, int hd)
{
    for (int64_t j0 = 0; j0 < nkp; j0 += 32) {
        const int two = j0 + 16 < nkp;
        __m512 acc[8][2];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d++) {
            __m512 k0 = _mm512_loadu_ps(kt + d * nkp + j0);
            __m512 k1 = two ? _mm512_loadu_ps(kt + d * nkp + j0 + 16) : _mm512_setzero_ps();
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                if (r >= rb) break;
                __m512 qv = _mm512_set1_ps(q[r * q_ld + d]);
                acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            if (r >= rb) break;
            _mm512_storeu_ps(S + r * nkp + j0, acc[r][0]);
            if (two) _mm512_storeu_ps(S + r * nkp + j0 + 16, acc[r][1]);
        }
    }
}

/* out rows: O[r][c] = inv[r] * sum_j P[r][j] v[j][c], c < hd. NZ = ceil(hd / 16) vectors per row, R rows
 * per pass (R * NZ <= 24 accumulators); the last vector of a row is masked. */
TF static INL void attn_pv_t(const int NZ, const int R, float *out, int64_t out_ld, const float *S, int64_t nkp,
                             int64_t nk, int rb, const float *v, int64_t kv_ld, int hd, const float *inv)
{
    const __mmask16 last = (__mmask16)((1u << (hd - 16 * (NZ - 1))) - 1);
    for (int r0 = 0; r0 < rb; r0 += R) {
        __m512 acc[8][8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_setzero_ps();
        const int rn = rb - r0 < R ? rb - r0 : R;
        const float *Sr = S + r0 * nkp;
        for (int64_t j = 0; j < nk; j++) {
            const float *vj = v + j * kv_ld;
            __m512 vv[8];
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++)
                vv[z] = z < NZ - 1 ? _mm512_loadu_ps(vj + 16 * z) : _mm512_maskz_loadu_ps(last, vj + 16 * z);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (r >= rn) break;
                __m512 pv = _mm512_set1_ps(Sr[r * nkp + j]);
#pragma GCC unroll 8
                for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_fmadd_ps(pv, vv[z], acc[r][z]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (r >= rn) break;
            float *o = out + (r0 + r) * out_ld;
            __m512 sc = _mm512_set1_ps(inv[r0 + r]);
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) {
                __m512 val = _mm512_mul_ps(acc[r][z], sc);
                if (z < NZ - 1) _mm512_storeu_ps(o + 16 * z, val);
                else _mm512_mask_storeu_ps(o + 16 * z, last, val);
            }
        }
    }
}

#define PV(nz, r)                                                                                              \
    TF static void attn_pv_##nz(float *out, int64_t out_ld, const float *S, int64_t nkp, int64_t nk, int rb,   \
                                const float *v, int64_t kv_ld, int hd, const float *inv)                       \
    {                                                                                                          \
        attn_pv_t(nz, r, out, out_ld, S, nkp, nk, rb, v, kv_ld, hd, inv);                                      \
    }
PV(1, 8) PV(2, 8) PV(3, 8) PV(4, 6) PV(5, 4) PV(6, 4) PV(7, 3) PV(8, 3)
typedef void (*pv_fn)(float *, int64_t, const float *, int64_t, int64_t, int, const float *, int64_t, int,
                      const float *);
static const pv_fn pv_tab[9] = {0, attn_pv_1, attn_pv_2, attn_pv_3, attn_pv_4, attn_pv_5, attn_pv_6, attn_pv_7,
                                attn_pv_8};

/* softmax numerators of one score row in place: s = s * scale + bias, masked keys -inf, then exp(s - max),
 * zero past nk. Returns 1 / sum (the caller scales the output rows), or 0 when no key is visible (the
 * row's output must be zero; the row is zeroed). */
TF float mact_x86_softmax_row(float *s, int64_t nk, int64_t nkp, float scale, const float *brow, const uint8_t *key_ok)
{
    const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    __mmask16 nan = 0;
    for (int64_t j = 0; j < nkp; j += 16) {
        __mmask16 m = nk - j >= 16 ? (__mmask16)0xffff : nk - j > 0 ? (__mmask16)((1u << (nk - j)) - 1) : 0;
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + j), sc);
        if (brow) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, brow + j));
        if (key_ok) {
            __m128i ok = _mm_maskz_loadu_epi8(m, key_ok + j);
            m &= _mm_test_epi8_mask(ok, ok);
        }
        v = _mm512_mask_blend_ps(m, ninf, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        _mm512_storeu_ps(s + j, v);
        mx = _mm512_max_ps(mx, v);
    }
    if (nan) {  /* a NaN score poisons its row: max and the live mask below would otherwise drop it */
        for (int64_t j = 0; j < nkp; j++) s[j] = NAN;
        return NAN;
    }
    float mxs = _mm512_reduce_max_ps(mx);
    if (mxs == -INFINITY) {
        memset(s, 0, (size_t)nkp * sizeof(float));
        return 0.f;
    }
    const __m512 mv = _mm512_set1_ps(mxs);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < nkp; j += 16) {
        __m512 v = _mm512_loadu_ps(s + j);
        __mmask16 live = _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_OQ);
        __m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(v, mv)));
        _mm512_storeu_ps(s + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    return (float)(1.0 / (double)_mm512_reduce_add_ps(sum));
}

typedef mact_att_job att_job;

/* one head: K transposed once, then blocks of 8 query rows */
TF static void attention_head_task(void *arg, int64_t hh, int t)
{
    const att_job *j = arg;
    const int h = (int)hh, hd = j->hd, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nq = j->nq, nkp = (nk + 15) & ~(int64_t)15, per = mact_attention_scratch(nk);
    float *kt = j->scratch + t * per, *S = kt + (int64_t)hd * nkp;
    const int64_t koff = (int64_t)(h / group) * hd;
    for (int64_t j0 = 0; j0 < nkp; j0 += 16) {
        int64_t jn = nk - j0 < 16 ? nk - j0 : 16;
        for (int d = 0; d < hd; d++) {
            float *dst = kt + d * nkp + j0;
            for (int64_t jj = 0; jj < jn; jj++) dst[jj] = j->k[(j0 + jj) * j->kv_ld + koff + d];
            for (int64_t jj = jn; jj < 16; jj++) dst[jj] = 0.f;
        }
    }
    for (int64_t i0 = 0; i0 < nq; i0 += 8) {
        const int rb = (int)(nq - i0 < 8 ? nq - i0 : 8);
        attn_scores(S, nkp, j->q + i0 * j->q_ld + (int64_t)h * hd, j->q_ld, rb, kt, hd);
        float inv[8];
        for (int r = 0; r < rb; r++)
            inv[r] = mact_x86_softmax_row(S + r * nkp, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
        /* a row with no visible key has all-zero numerators and inv 0: its output is exactly zero */
        pv_tab[(hd + 15) / 16](j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, S, nkp, nk, rb, j->v + koff,
                               j->kv_ld, hd, inv);
    }
}

int mact_x86_attention_avx512(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                              const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                              int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch)
{
    if (!(hd <= 128 && hd >= 1 && nk >= 8 && nq * nk >= 64)) return 0;
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    mact_kctx_run(kc, n_heads, (double)nq * (double)nk * (double)hd * n_heads > 2e5, attention_head_task, &j);
    return 1;
}
