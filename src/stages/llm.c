/* LLM stage (docs/spec/molmoact2.md 3.5-3.6): input assembly, the prompt's attention bias, and the decoder layers whose
 * per-layer K (post q/k-norm, post-RoPE) and V are all the action expert consumes. */
#include <float.h>
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"
#include "model/session.h"

/* Token types that see each other bidirectionally (upstream token_type_ids). */
static int is_image_token(const mact_config *c, int64_t id)
{
    return id == c->image_patch_id || id == c->image_col_id || id == c->image_start_id ||
           id == c->low_res_image_start_id || id == c->frame_start_id || id == c->image_end_id ||
           id == c->frame_end_id || id == c->image_low_res_id;
}

int mact_check_ids(struct mact_session *s, const int64_t *ids, int n, const char *who)
{
    const mact_config *c = &s->m->cfg;
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: %d tokens; this session takes 1..%d (max_tokens)", who, n,
                                 s->max_tokens);
    int64_t vt = c->vocab_size + c->additional_vocab_size;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vt)
            return mact_session_fail(s, MACT_ERR_INPUT, "%s: token id %lld at position %d is outside the embedding "
                                     "tables [0, %lld)", who, (long long)ids[i], i, (long long)vt);
    return 0;
}

mact_status mact_attention_bias(mact_session *s, const int64_t *ids, int n, float *bias)
{
    mact_session_enter(s);
    int rc = mact_check_ids(s, ids, n, "attention_bias");
    if (rc) return rc;
    mact_attention_bias_run(s, ids, n, bias);
    return 0;
}

void mact_attention_bias_run(const struct mact_session *s, const int64_t *ids, int n, float *bias)
{
    const mact_config *c = &s->m->cfg;
    for (int q = 0; q < n; q++) {
        int iq = is_image_token(c, ids[q]);
        for (int k = 0; k < n; k++)
            bias[(int64_t)q * n + k] = (k <= q || (iq && is_image_token(c, ids[k]))) ? 0.f : -FLT_MAX;
    }
}

mact_status mact_encoder_mask(mact_session *s, const int64_t *ids, int n, uint8_t *mask)
{
    mact_session_enter(s);
    int rc = mact_check_ids(s, ids, n, "encoder_mask");
    if (rc) return rc;
    mact_encoder_mask_run(s, ids, n, mask);
    return 0;
}

void mact_encoder_mask_run(const struct mact_session *s, const int64_t *ids, int n, uint8_t *mask)
{
    const mact_config *c = &s->m->cfg;
    int in_action = 0;
    for (int i = 0; i < n; i++) {
        mask[i] = 1;
        if (c->encoder_mask != MACT_ENC_DROP_EOS) continue;
        /* HF predict_action with action_mode "both": EOS-id tokens (incl. a BOS that equals EOS) and any
         * <action_start>..<action_end> span are hidden from the expert (docs/spec/molmoact2.md 4.6). */
        if (ids[i] == c->action_start_id) in_action = 1;
        if (ids[i] == c->eos_id || in_action) mask[i] = 0;
        if (ids[i] == c->action_end_id) in_action = 0;
    }
}

mact_status mact_embed(mact_session *s, const int64_t *ids, int n, const float *image_embeds, int n_image_embeds,
                       float *hidden)
{
    mact_session_enter(s);
    int rc = mact_check_ids(s, ids, n, "embed");
    if (rc) return rc;
    const mact_config *c = &s->m->cfg;
    const int64_t D = c->d_model;
    int n_patch = 0;
    for (int i = 0; i < n; i++) n_patch += ids[i] == c->image_patch_id;
    if (n_patch != n_image_embeds)
        return mact_session_fail(s, MACT_ERR_INPUT, "embed: the prompt has %d <im_patch> tokens but %d image features "
                                 "were given", n_patch, n_image_embeds);
    if (n_image_embeds && (rc = mact_check_finite(s, image_embeds, n_image_embeds * D, "embed: image_embeds")))
        return rc;
    mact_embed_run(s, ids, n, image_embeds, hidden);
    return 0;
}

void mact_embed_run(const struct mact_session *s, const int64_t *ids, int n, const float *image_embeds, float *hidden)
{
    const mact_config *c = &s->m->cfg;
    const mact_llm_weights *w = &s->m->llm;
    const int64_t D = c->d_model;
    int m = 0;
    for (int i = 0; i < n; i++) {
        float *h = hidden + (int64_t)i * D;
        if (ids[i] < c->vocab_size) mact_row_f32(h, &w->wte, ids[i]);
        else mact_row_f32(h, &w->wte_new, ids[i] - c->vocab_size);
        /* features are added to the <im_patch> embedding, not substituted (docs/spec/molmoact2.md 3.5) */
        if (ids[i] == c->image_patch_id) {
            const float *f = image_embeds + (int64_t)m++ * D;
            for (int64_t d = 0; d < D; d++) h[d] += f[d];
        }
    }
}

static void ensure_rope(struct mact_session *s)
{
    const mact_config *c = &s->m->cfg;
    if (s->l_rope_n) return;
    mact_rope_table(s->l_rope_cos, s->l_rope_sin, s->max_tokens, c->head_dim, c->rope_theta);
    s->l_rope_n = s->max_tokens;
}

static void qk_norm(const struct mact_session *s, const mact_config *c, float *x, int64_t ld, int64_t n, int heads, const mact_tensor *w)
{
    if (c->qk_norm == MACT_QKNORM_QWEN3)
        for (int64_t i = 0; i < n; i++)
            mact_rmsnorm(&s->kc, x + i * ld, x + i * ld, mact_f32(w), c->eps, heads, c->head_dim, c->head_dim);
    else if (c->qk_norm == MACT_QKNORM_OLMO)
        mact_rmsnorm(&s->kc, x, x, mact_f32(w), c->eps, n, (int64_t)heads * c->head_dim, ld);
}

mact_status mact_llm_layers(mact_session *s, float *hidden, const float *bias, int n, int a, int b, float *keys,
                            float *values)
{
    return mact_llm_layers_ex(s, hidden, bias, n, a, b, keys, values, 0);
}

int mact_llm_layers_ex(struct mact_session *s, float *hidden, const float *bias, int n, int a, int b, float *keys,
                       float *values, int kv_only_last)
{
    mact_session_enter(s);
    const mact_config *c = &s->m->cfg;
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "llm: %d tokens; this session takes 1..%d (max_tokens)", n,
                                 s->max_tokens);
    if (a < 0 || b > c->n_layers || a >= b)
        return mact_session_fail(s, MACT_ERR_INPUT, "llm: layer range [%d, %d) is not within [0, %d)", a, b, c->n_layers);
    const int64_t D = c->d_model, N = n;
    int rc = mact_check_finite(s, hidden, N * D, "llm: hidden_states");
    if (rc) return rc;
    for (int64_t i = 0; i < N * N; i++)
        if (isnan(bias[i])) return mact_session_fail(s, MACT_ERR_INPUT, "llm: attention_bias has NaN at %lld", (long long)i);
    mact_llm_layers_run(s, hidden, bias, n, a, b, keys, values, kv_only_last);
    return 0;
}

void mact_llm_layers_run(struct mact_session *s, float *hidden, const float *bias, int n, int a, int b, float *keys,
                         float *values, int kv_only_last)
{
    const mact_config *c = &s->m->cfg;
    const int64_t D = c->d_model, hd = c->head_dim, qd = (int64_t)c->n_heads * hd, kvd = (int64_t)c->n_kv_heads * hd;
    const int64_t ld = qd + 2 * kvd, I = c->ff_inter, N = n;
    ensure_rope(s);
    const float scale = 1.f / sqrtf((float)hd);
    for (int l = a; l < b; l++) {
        const mact_llm_block *w = &s->m->llm.blocks[l];
        float *qkv = s->l_qkv;
        mact_rmsnorm(&s->kc, s->l_h, hidden, mact_f32(&w->attn_norm), c->eps, N, D, D);
        mact_matmul(&s->kc, qkv, s->l_h, &w->att_proj, w->att_proj_b.data ? mact_f32(&w->att_proj_b) : NULL, N);
        qk_norm(s, c, qkv, ld, N, c->n_heads, &w->q_norm);
        qk_norm(s, c, qkv + qd, ld, N, c->n_kv_heads, &w->k_norm);
        mact_rope(qkv, ld, N, c->n_heads, (int)hd, s->l_rope_cos, s->l_rope_sin);
        mact_rope(qkv + qd, ld, N, c->n_kv_heads, (int)hd, s->l_rope_cos, s->l_rope_sin);
        float *ko = keys + (int64_t)(l - a) * N * kvd, *vo = values + (int64_t)(l - a) * N * kvd;
        for (int64_t i = 0; i < N; i++) {
            memcpy(ko + i * kvd, qkv + i * ld + qd, kvd * sizeof(float));
            memcpy(vo + i * kvd, qkv + i * ld + qd + kvd, kvd * sizeof(float));
        }
        if (kv_only_last && l == c->n_layers - 1) break;  /* the expert reads only this layer's K/V */
        mact_attention(&s->kc, s->l_att, qd, qkv, ld, qkv + qd, qkv + qd + kvd, ld, N, N, c->n_heads, c->n_kv_heads, (int)hd,
                       scale, bias, NULL, s->scores);
        mact_matmul_residual(&s->kc, hidden, s->l_att, &w->attn_out, NULL, N);
        mact_rmsnorm(&s->kc, s->l_h, hidden, mact_f32(&w->ff_norm), c->eps, N, D, D);
        mact_matmul(&s->kc, s->l_ff, s->l_h, &w->ff_proj, NULL, N);
        /* ff_proj rows: first half is the value, second half the gate */
        mact_silu_mul_rows(&s->kc, s->l_ff, 2 * I, s->l_ff + I, s->l_ff, 2 * I, N, I);
        mact_matmul_epi(&s->kc, hidden, D, s->l_ff, 2 * I, &w->ff_out, NULL, N, D, I, MACT_EPI_RESIDUAL);
    }
}
