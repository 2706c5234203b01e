/* bf16 attention (BF16 / INT8 precision at MACT_ISA_AVX512BF16): q, K, V and the softmax numerators p
 * rounded to bf16 (nearest even), q k^T and p v as vdpbf16ps dot products of bf16 pairs with fp32
 * accumulation, the softmax in fp32 (attention.c's rows, the same masking and NaN rules). One pool task per
 * head: K as d pairs [hd/2][nkp] and V as key pairs [nkp/2][hd] (packed per call, or once by
 * mact_attention_kv_pack: the same function, so the two give bitwise the same outputs), then blocks of 8
 * query rows. */
#include <string.h>
#include <immintrin.h>
#include "kernels/x86/x86.h"

typedef mact_att_job att_job;

static inline uint32_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

/* S[r][j] = sum_d q_r[d] k_j[d] over d pairs: q2 [rb][hd/2] pairs, kt2 [hd/2][nkp] pairs */
TB static void attn_scores_bf16(float *S, int64_t nkp, const uint32_t *q2, int rb, const uint32_t *kt2, int hp)
{
    for (int64_t j0 = 0; j0 < nkp; j0 += 32) {
        const int two = j0 + 16 < nkp;
        __m512 acc[8][2];
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int d = 0; d < hp; d++) {
            __m512bh k0 = (__m512bh)_mm512_loadu_si512(kt2 + d * nkp + j0);
            __m512bh k1 = two ? (__m512bh)_mm512_loadu_si512(kt2 + d * nkp + j0 + 16) : (__m512bh)_mm512_setzero_si512();
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) {
                if (r >= rb) break;
                __m512bh qv = (__m512bh)_mm512_set1_epi32((int)q2[r * hp + d]);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], qv, k0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], qv, k1);
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

/* O[r][c] = inv[r] sum_j P[r][j] v[j][c] over key pairs: p2 [rb][nkp/2], v2 [nkp/2][hd] pairs */
TB static INL void attn_pv_bf16_t(const int NZ, const int R, float *out, int64_t out_ld, const uint32_t *p2,
                                  int64_t np2, int rb, const uint32_t *v2, int hd, const float *inv)
{
    const __mmask16 last = (__mmask16)((1u << (hd - 16 * (NZ - 1))) - 1);
    for (int r0 = 0; r0 < rb; r0 += R) {
        __m512 acc[8][8];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_setzero_ps();
        const int rn = rb - r0 < R ? rb - r0 : R;
        for (int64_t jp = 0; jp < np2; jp++) {
            const uint32_t *vj = v2 + jp * hd;
            __m512bh vv[8];
#pragma GCC unroll 8
            for (int z = 0; z < NZ; z++)
                vv[z] = (__m512bh)(z < NZ - 1 ? _mm512_loadu_si512(vj + 16 * z) : _mm512_maskz_loadu_epi32(last, vj + 16 * z));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (r >= rn) break;
                __m512bh pv = (__m512bh)_mm512_set1_epi32((int)p2[(r0 + r) * np2 + jp]);
#pragma GCC unroll 8
                for (int z = 0; z < NZ; z++) acc[r][z] = _mm512_dpbf16_ps(acc[r][z], pv, vv[z]);
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

#define PVB(nz, r)                                                                                               \
    TB static void attn_pv_bf16_##nz(float *out, int64_t out_ld, const uint32_t *p2, int64_t np2, int rb,         \
                                     const uint32_t *v2, int hd, const float *inv)                               \
    {                                                                                                            \
        attn_pv_bf16_t(nz, r, out, out_ld, p2, np2, rb, v2, hd, inv);                                            \
    }
PVB(1, 8) PVB(2, 8) PVB(3, 8) PVB(4, 6) PVB(5, 4) PVB(6, 4) PVB(7, 3) PVB(8, 3)
typedef void (*pvb_fn)(float *, int64_t, const uint32_t *, int64_t, int, const uint32_t *, int, const float *);
static const pvb_fn pvb_tab[9] = {0, attn_pv_bf16_1, attn_pv_bf16_2, attn_pv_bf16_3, attn_pv_bf16_4, attn_pv_bf16_5,
                                  attn_pv_bf16_6, attn_pv_bf16_7, attn_pv_bf16_8};

/* one head: K as d pairs [hd/2][nkp], V as key pairs [nkp/2][hd] (bf16, zero past nk), then blocks of 8 rows */
/* 16 fp32 (as bits) -> bf16 bits in each lane's low half, rounding to nearest even exactly as bf16_bits */
TF static INL __m512i bf16_round16(__m512i u)
{
    __m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
    r = _mm512_add_epi32(r, _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)));
    return _mm512_srli_epi32(r, 16);
}

/* 8 (even, odd) fp32 pairs as 64-bit lanes -> 8 bf16 pairs (even in the low half) */
TF static INL __m256i bf16_pairs8(__m512i pairs)
{
    __m512i r = bf16_round16(pairs);  /* per 64-bit lane: lo = bf(even), bits 32..47 = bf(odd) */
    r = _mm512_or_si512(r, _mm512_srli_epi64(r, 16));
    return _mm512_cvtepi64_epi32(r);
}

/* one kv head (its columns at koff) -> kt2 [hp, nkp] d-pairs of K^T and v2 [np2, hd] key pairs of V, as bf16
 * (keys past nk are zero). K: 8 keys at a time, each (K[j, 2d], K[j, 2d + 1]) fetched as one 64-bit gather lane;
 * V: two key rows at a time, 16 columns per step. */
TF static void pack_kv_head_bf16(uint32_t *kt2, uint32_t *v2, const float *k, const float *v, int64_t kv_ld,
                                 int64_t koff, int64_t nk, int hd)
{
    const int hp = hd / 2;
    const int64_t nkp = (nk + 15) & ~(int64_t)15, np2 = nkp / 2;
    const __m256i step = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)kv_ld));
    for (int64_t j0 = 0; j0 < nkp; j0 += 8) {
        const int64_t live = nk - j0 <= 0 ? 0 : nk - j0 >= 8 ? 8 : nk - j0;
        const __mmask8 m = (__mmask8)((1u << live) - 1);
        const float *base = k + (live ? j0 * kv_ld : 0) + koff;
        for (int d = 0; d < hp; d++) {
            __m512i pr = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), m, step, base + 2 * d, 4);
            _mm256_storeu_si256((__m256i *)(kt2 + (int64_t)d * nkp + j0),
                                _mm256_maskz_mov_epi32(m, bf16_pairs8(pr)));
        }
    }
    const int h16 = hd & ~15;
    const __mmask16 tm = (__mmask16)((1u << (hd - h16)) - 1);
    for (int64_t jp = 0; jp < np2; jp++) {
        const int ha = 2 * jp < nk, hb = 2 * jp + 1 < nk;
        const float *a = v + (ha ? 2 * jp : 0) * kv_ld + koff, *b = v + (hb ? 2 * jp + 1 : 0) * kv_ld + koff;
        for (int c = 0; c < hd; c += 16) {
            const __mmask16 cm = c < h16 ? (__mmask16)0xffff : tm;
            __m512i ra = ha ? bf16_round16(_mm512_maskz_loadu_epi32(cm, a + c)) : _mm512_setzero_si512();
            __m512i rb = hb ? bf16_round16(_mm512_maskz_loadu_epi32(cm, b + c)) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(v2 + jp * hd + c, cm, _mm512_or_si512(ra, _mm512_slli_epi32(rb, 16)));
        }
    }
}

static int64_t kv_head_words(int64_t nk, int hd)
{
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (int64_t)(hd / 2) * nkp + nkp / 2 * hd;
}

void mact_x86_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv,
                                 int hd)
{
    const int64_t per = kv_head_words(nk, hd), nkp = (nk + 15) & ~(int64_t)15;
    for (int g = 0; g < n_kv; g++)
        pack_kv_head_bf16(dst + g * per, dst + g * per + (int64_t)(hd / 2) * nkp, k, v, kv_ld, (int64_t)g * hd, nk, hd);
}

TB static void attention_head_bf16_task(void *arg, int64_t hh, int t)
{
    const att_job *j = arg;
    const int h = (int)hh, hd = j->hd, hp = hd / 2, group = j->n_heads / j->n_kv;
    const int64_t nk = j->nk, nq = j->nq, nkp = (nk + 15) & ~(int64_t)15, np2 = nkp / 2;
    const int64_t per = mact_attention_scratch(nk);
    uint32_t *kt2 = (uint32_t *)(j->scratch + t * per);   /* hp * nkp */
    uint32_t *v2 = kt2 + (int64_t)hp * nkp;                /* np2 * hd */
    float *S = (float *)(v2 + np2 * hd);                   /* 8 * nkp */
    uint32_t *p2 = (uint32_t *)(S + 8 * nkp);              /* 8 * np2 */
    uint32_t *q2 = p2 + 8 * np2;                           /* 8 * hp */
    if (j->kvp) {  /* packed once by the caller for this kv head */
        kt2 = (uint32_t *)j->kvp + (int64_t)(h / group) * kv_head_words(nk, hd);
        v2 = kt2 + (int64_t)hp * nkp;
    } else
        pack_kv_head_bf16(kt2, v2, j->k, j->v, j->kv_ld, (int64_t)(h / group) * hd, nk, hd);
    for (int64_t i0 = 0; i0 < nq; i0 += 8) {
        const int rb = (int)(nq - i0 < 8 ? nq - i0 : 8);
        for (int r = 0; r < rb; r++) {
            const float *qr = j->q + (i0 + r) * j->q_ld + (int64_t)h * hd;
            for (int d = 0; d < hp; d++) q2[r * hp + d] = bf16_bits(qr[2 * d]) | bf16_bits(qr[2 * d + 1]) << 16;
        }
        attn_scores_bf16(S, nkp, q2, rb, kt2, hp);
        float inv[8];
        for (int r = 0; r < rb; r++) {
            float *sr = S + r * nkp;
            inv[r] = mact_x86_softmax_row(sr, nk, nkp, j->scale, j->bias ? j->bias + (i0 + r) * nk : NULL, j->key_ok);
            uint32_t *pr = p2 + r * np2;
            for (int64_t jp = 0; jp < np2; jp += 16) {  /* nkp is a multiple of 16: np2 of 8 */
                int64_t left = np2 - jp;
                if (left >= 16) {
                    __m512bh hh2 = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(sr + 2 * jp + 16), _mm512_loadu_ps(sr + 2 * jp));
                    _mm512_storeu_si512(pr + jp, (__m512i)hh2);
                } else {
                    __m512bh hh2 = _mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_loadu_ps(sr + 2 * jp));
                    _mm512_mask_storeu_epi32(pr + jp, (__mmask16)0xff, (__m512i)hh2);
                }
            }
        }
        pvb_tab[(hd + 15) / 16](j->out + i0 * j->out_ld + (int64_t)h * hd, j->out_ld, p2, np2, rb, v2, hd, inv);
    }
}

void mact_x86_attention_bf16(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                             const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                             int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                             const uint32_t *kvp)
{
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, kvp};
    mact_kctx_run(kc, n_heads, (double)nq * (double)nk * (double)hd * n_heads > 2e5, attention_head_bf16_task, &j);
}
