/* Action expert (docs/spec/molmoact2.md 3.7, 4.5, 5): the KV context computed once per inference, then Euler steps of a
 * DiT velocity field over the action chunk. Modulation vectors depend only on t, so a schedule's worth
 * is cached in the session and reused across inferences. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kernels/kernels.h"
#include "model/session.h"

static int64_t mod_stride(const mact_config *c) { return ((int64_t)c->n_layers * 9 + 2) * c->ae_hidden; }

/* t -> per-block 9-way modulation and final 2-way modulation, written to mod [(L*9 + 2) * AH]. */
static void modulation(struct mact_session *s, float t, float *mod)
{
    const mact_config *c = &s->m->cfg;
    const mact_ae_weights *w = &s->m->ae;
    const int half = c->ae_tdim / 2;
    const int64_t AH = c->ae_hidden;
    float *emb = s->a_cond, *h1 = emb + c->ae_tdim, *cond = h1 + AH;
    /* sin half first; frequencies exp(-ln(1e4) * j / (half - 1)), as upstream's SinusoidalTimeEmbedding */
    for (int j = 0; j < half; j++) {
        float f = expf(-logf(10000.f) * (float)j / (float)(half - 1));
        emb[j] = sinf(t * f);
        emb[half + j] = cosf(t * f);
    }
    mact_matmul(&s->kc, h1, emb, &w->time1_w, mact_f32(&w->time1_b), 1);
    for (int64_t i = 0; i < AH; i++) h1[i] = mact_silu(h1[i]);
    mact_matmul(&s->kc, cond, h1, &w->time3_w, mact_f32(&w->time3_b), 1);
    for (int64_t i = 0; i < AH; i++) cond[i] = mact_silu(cond[i]);  /* both modulations take silu(c) */
    for (int l = 0; l < c->n_layers; l++)
        mact_matmul(&s->kc, mod + (int64_t)l * 9 * AH, cond, &w->blocks[l].mod_w, mact_f32(&w->blocks[l].mod_b), 1);
    mact_matmul(&s->kc, mod + (int64_t)c->n_layers * 9 * AH, cond, &w->fmod_w, mact_f32(&w->fmod_b), 1);
}

/* u = RMSNorm(z) * (1 + scale) + shift, rows of AH */
static void norm_modulate(const struct mact_session *s, const mact_config *c, float *u, const float *z, int64_t h, const float *shift,
                          const float *scale)
{
    const int64_t AH = c->ae_hidden;
    mact_rmsnorm(&s->kc, u, z, NULL, c->ae_eps, h, AH, AH);
    mact_modulate_rows(&s->kc, u, h, AH, shift, scale);
}


static void ensure_ae_rope(struct mact_session *s)
{
    const mact_config *c = &s->m->cfg;
    if (s->a_rope_n) return;
    mact_rope_table(s->a_rope_cos, s->a_rope_sin, c->max_action_horizon, c->ae_head_dim, 10000.0);
    s->a_rope_n = c->max_action_horizon;
}

/* velocity v(x, t) -> s->a_vel [h, A], with modulation mod for this t */
static void velocity(struct mact_session *s, const float *x, int64_t h, const float *mod, const float *kctx,
                     const float *vctx, const uint32_t *kvp, const uint8_t *enc, int64_t n)
{
    const mact_config *c = &s->m->cfg;
    const mact_ae_weights *w = &s->m->ae;
    const int64_t AH = c->ae_hidden, A = c->max_action_dim, hd = c->ae_head_dim, I = c->ae_inter;
    const float scale = 1.f / sqrtf((float)hd);
    float *z = s->a_z, *u = s->a_u, *qkv = s->a_qkv, *att = s->a_att;
    mact_matmul(&s->kc, z, x, &w->action_embed_w, mact_f32(&w->action_embed_b), h);
    ensure_ae_rope(s);
    for (int l = 0; l < c->n_layers; l++) {
        const mact_ae_block *b = &w->blocks[l];
        const float *m = mod + (int64_t)l * 9 * AH;
        const float *sh_msa = m, *sc_msa = m + AH, *g_msa = m + 2 * AH, *sh_mca = m + 3 * AH, *sc_mca = m + 4 * AH,
                    *g_mca = m + 5 * AH, *sh_mlp = m + 6 * AH, *sc_mlp = m + 7 * AH, *g_mlp = m + 8 * AH;
        /* self-attention over the action tokens */
        norm_modulate(s, c, u, z, h, sh_msa, sc_msa);
        mact_matmul(&s->kc, qkv, u, &b->qkv_w, mact_f32(&b->qkv_b), h);
        if (c->ae_qk_norm) {
            for (int64_t i = 0; i < h; i++) {
                mact_rmsnorm(&s->kc, qkv + i * 3 * AH, qkv + i * 3 * AH, NULL, c->ae_eps, c->ae_heads, hd, hd);
                mact_rmsnorm(&s->kc, qkv + i * 3 * AH + AH, qkv + i * 3 * AH + AH, NULL, c->ae_eps, c->ae_heads, hd, hd);
            }
        }
        if (c->ae_rope) {
            mact_rope(qkv, 3 * AH, h, c->ae_heads, (int)hd, s->a_rope_cos, s->a_rope_sin);
            mact_rope(qkv + AH, 3 * AH, h, c->ae_heads, (int)hd, s->a_rope_cos, s->a_rope_sin);
        }
        mact_attention(&s->kc, att, AH, qkv, 3 * AH, qkv + AH, qkv + 2 * AH, 3 * AH, h, h, c->ae_heads, c->ae_heads, (int)hd,
                       scale, NULL, NULL, s->scores);
        mact_matmul(&s->kc, u, att, &b->out_w, mact_f32(&b->out_b), h);
        mact_gated_add_rows(&s->kc, z, u, g_msa, h, AH);
        /* cross-attention to this layer's LLM context */
        norm_modulate(s, c, u, z, h, sh_mca, sc_mca);
        mact_matmul(&s->kc, qkv, u, &b->xq_w, mact_f32(&b->xq_b), h);
        if (c->ae_qk_norm) mact_rmsnorm(&s->kc, qkv, qkv, NULL, c->ae_eps, h * c->ae_heads, hd, hd);
        if (kvp)  /* the same context for every step: K/V packed once per call (bitwise the same result) */
            mact_attention_packed(&s->kc, att, AH, qkv, AH, kvp + l * s->a_kvp_stride, h, n, c->ae_heads, c->ae_heads, (int)hd,
                                  scale, NULL, enc, s->scores);
        else
            mact_attention(&s->kc, att, AH, qkv, AH, kctx + (int64_t)l * n * AH, vctx + (int64_t)l * n * AH, AH, h, n,
                           c->ae_heads, c->ae_heads, (int)hd, scale, NULL, enc, s->scores);
        mact_matmul(&s->kc, u, att, &b->xo_w, mact_f32(&b->xo_b), h);
        mact_gated_add_rows(&s->kc, z, u, g_mca, h, AH);
        /* SwiGLU MLP */
        norm_modulate(s, c, u, z, h, sh_mlp, sc_mlp);
        float *g = s->a_ff, *up = s->a_ff + h * I;
        mact_matmul(&s->kc, g, u, &b->gate_w, mact_f32(&b->gate_b), h);
        mact_matmul(&s->kc, up, u, &b->up_w, mact_f32(&b->up_b), h);
        mact_silu_mul(&s->kc, g, g, up, h * I);
        mact_matmul(&s->kc, u, g, &b->down_w, mact_f32(&b->down_b), h);
        mact_gated_add_rows(&s->kc, z, u, g_mlp, h, AH);
    }
    const float *mf = mod + (int64_t)c->n_layers * 9 * AH;
    norm_modulate(s, c, u, z, h, mf, mf + AH);
    mact_matmul_ex(&s->kc, s->a_vel, A, u, AH, &w->final_w, mact_f32(&w->final_b), h, A, AH);
}

static void euler(struct mact_session *s, float *x, int64_t h, float dt, const uint8_t *is_pad)
{
    const int64_t A = s->m->cfg.max_action_dim;
    for (int64_t i = 0; i < h; i++)
        for (int64_t d = 0; d < A; d++) {
            /* padded dims are zeroed in the velocity and in the updated trajectory (docs/spec/molmoact2.md 4.5) */
            float v = is_pad[d] ? 0.f : s->a_vel[i * A + d];
            x[i * A + d] = is_pad[d] ? 0.f : x[i * A + d] + dt * v;
        }
}

int mact_action_check(struct mact_session *s, int h, int n, int num_steps, const uint8_t *enc, const char *who)
{
    const mact_config *c = &s->m->cfg;
    if (h < 1 || h > c->max_action_horizon)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: action horizon %d is outside 1..%d (max_action_horizon)", who, h,
                                 c->max_action_horizon);
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: %d context tokens; this session takes 1..%d", who, n,
                                 s->max_tokens);
    if (num_steps < 1 || num_steps > MACT_MAX_STEPS)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: %d flow steps is outside 1..%d", who, num_steps, MACT_MAX_STEPS);
    int vis = 0;
    for (int i = 0; i < n; i++) vis += enc[i] != 0;
    if (!vis) return mact_session_fail(s, MACT_ERR_INPUT, "%s: encoder mask hides every context token", who);
    return 0;
}

static void context_layer(struct mact_session *s, const float *K, const float *V, int64_t n, float *kc, float *vc)
{
    const mact_config *c = &s->m->cfg;
    const mact_ae_weights *w = &s->m->ae;
    const int64_t AH = c->ae_hidden, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    mact_matmul_ex(&s->kc, kc, AH, K, kvd, &w->ctx_k, NULL, n, AH, kvd);
    mact_matmul_ex(&s->kc, vc, AH, V, kvd, &w->ctx_v, NULL, n, AH, kvd);
    if (c->ae_context_norm) {
        mact_rmsnorm(&s->kc, kc, kc, NULL, c->ae_eps, n, AH, AH);
        mact_rmsnorm(&s->kc, vc, vc, NULL, c->ae_eps, n, AH, AH);
    }
    if (c->ae_qk_norm) mact_rmsnorm(&s->kc, kc, kc, NULL, c->ae_eps, n * c->ae_heads, c->ae_head_dim, c->ae_head_dim);
}

/* keys / values checked (errors named after `who`), then every layer's context K/V into k_ctx / v_ctx
 * [L, n, AH]; with pack (else NULL) each layer's K/V is also packed for the cross-attention right after it is
 * computed, while it is in cache (no measured difference against packing after the last layer:
 * docs/benchmarks-log.md, 2026-11-30, second session, "Kept without a measured speedup") */
/* the caller's keys and values [L, n, kv_dim] are finite */
static int check_kv(struct mact_session *s, const float *keys, const float *values, int64_t n, const char *who)
{
    const mact_config *c = &s->m->cfg;
    const int64_t L = c->n_layers, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    char what[2][64];
    snprintf(what[0], sizeof what[0], "%s: keys", who);
    snprintf(what[1], sizeof what[1], "%s: values", who);
    int rc;
    if ((rc = mact_check_finite(s, keys, L * n * kvd, what[0])) ||
        (rc = mact_check_finite(s, values, L * n * kvd, what[1])))
        return rc;
    return 0;
}

static void context_all(struct mact_session *s, const float *keys, const float *values, int64_t n, float *k_ctx,
                        float *v_ctx, uint32_t *pack)
{
    const mact_config *c = &s->m->cfg;
    const int64_t L = c->n_layers, kvd = (int64_t)c->n_kv_heads * c->head_dim, AH = c->ae_hidden;
    for (int64_t l = 0; l < L; l++) {
        float *kc = k_ctx + l * n * AH, *vc = v_ctx + l * n * AH;
        context_layer(s, keys + l * n * kvd, values + l * n * kvd, n, kc, vc);
        if (pack) mact_attention_kv_pack(&s->kc, pack + l * s->a_kvp_stride, kc, vc, AH, n, c->ae_heads, c->ae_head_dim);
    }
}

mact_status mact_action_context(mact_session *s, const float *keys, const float *values, int n, float *k_ctx,
                                float *v_ctx)
{
    mact_session_enter(s);
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "action_context: %d tokens; this session takes 1..%d", n, s->max_tokens);
    int rc = check_kv(s, keys, values, n, "action_context");
    if (rc) return rc;
    context_all(s, keys, values, n, k_ctx, v_ctx, NULL);
    return 0;
}

const uint32_t *mact_action_prepare(struct mact_session *s, const float *keys, const float *values, int n, int h)
{
    uint32_t *dst = s->a_kvp_stride && mact_attention_packable(&s->kc, h, n, s->m->cfg.ae_head_dim) ? (uint32_t *)s->a_kvp
                                                                                             : NULL;
    context_all(s, keys, values, n, s->a_kctx, s->a_vctx, dst);
    return dst;
}

mact_status mact_action_step(mact_session *s, float *traj, int h, float t, int num_steps, const float *k_ctx,
                             const float *v_ctx, const uint8_t *enc_mask, int n, const uint8_t *is_pad)
{
    mact_session_enter(s);
    const mact_config *c = &s->m->cfg;
    int rc = mact_action_check(s, h, n, num_steps, enc_mask, "action_step");
    if (rc) return rc;
    if (!(t >= 0.f && t <= 1.f)) return mact_session_fail(s, MACT_ERR_INPUT, "action_step: timestep %g is outside [0, 1]", t);
    const int64_t L = c->n_layers, AH = c->ae_hidden;
    if ((rc = mact_check_finite(s, traj, (int64_t)h * c->max_action_dim, "action_step: trajectory")) ||
        (rc = mact_check_finite(s, k_ctx, L * n * AH, "action_step: k_ctx")) ||
        (rc = mact_check_finite(s, v_ctx, L * n * AH, "action_step: v_ctx")))
        return rc;
    float *mod = s->a_mod + (int64_t)s->mod_cache_steps * mod_stride(c);  /* the uncached slot */
    modulation(s, t, mod);
    velocity(s, traj, h, mod, k_ctx, v_ctx, NULL, enc_mask, n);
    euler(s, traj, h, 1.f / (float)num_steps, is_pad);
    return 0;
}

mact_status mact_action_generate(mact_session *s, float *traj, int h, int action_dim, int num_steps,
                                 const float *keys, const float *values, const uint8_t *enc_mask, int n)
{
    return mact_action_generate_rtc(s, traj, h, action_dim, num_steps, keys, values, enc_mask, n, NULL);
}

mact_status mact_action_generate_rtc(mact_session *s, float *traj, int h, int action_dim, int num_steps,
                                     const float *keys, const float *values, const uint8_t *enc_mask, int n,
                                     const mact_rtc_options *rtc)
{
    if (!s) return MACT_ERR_INPUT;
    mact_session_enter(s);
    const mact_config *c = &s->m->cfg;
    int rc = mact_action_check(s, h, n, num_steps, enc_mask, "action");
    if (rc) return rc;
    if (action_dim < 1 || action_dim > c->max_action_dim)
        return mact_session_fail(s, MACT_ERR_INPUT, "action: action dim %d is outside 1..%d (max_action_dim)", action_dim,
                                 c->max_action_dim);
    if ((rc = mact_check_finite(s, traj, (int64_t)h * c->max_action_dim, "action: noise")) ||
        (rc = check_kv(s, keys, values, n, "action")))
        return rc;
    int on;
    if ((rc = mact_rtc_check(s, rtc, h, action_dim, 1, &on, "action"))) return rc;
    mact_action_generate_run(s, traj, h, action_dim, num_steps, keys, values, enc_mask, n, on ? rtc : NULL);
    return 0;
}

void mact_action_generate_run(struct mact_session *s, float *traj, int h, int action_dim, int num_steps,
                              const float *keys, const float *values, const uint8_t *enc_mask, int n,
                              const mact_rtc_options *rtc)
{
    const mact_config *c = &s->m->cfg;
    const int64_t A = c->max_action_dim, stride = mod_stride(c);
    const uint32_t *kvp = mact_action_prepare(s, keys, values, n, h);
    uint8_t *pad = (uint8_t *)s->a_pad;
    for (int64_t d = 0; d < A; d++) pad[d] = d >= action_dim;
    for (int64_t i = 0; i < h; i++)
        for (int64_t d = action_dim; d < A; d++) traj[i * A + d] = 0.f;
    int cached = num_steps <= s->mod_cache_steps;
    if (cached && s->mod_steps != num_steps) {
        for (int k = 0; k < num_steps; k++) modulation(s, (float)k / (float)num_steps, s->a_mod + k * stride);
        s->mod_steps = num_steps;
    }
    float *slot = s->a_mod + (int64_t)s->mod_cache_steps * stride;
    if (rtc) mact_rtc_prepare(s, rtc, h, action_dim);
    for (int k = 0; k < num_steps; k++) {
        /* t = k / S: t = 0 is noise, t = 1 (data) is never evaluated */
        const float t = (float)k / (float)num_steps;
        const float *mod = cached ? s->a_mod + k * stride : (modulation(s, t, slot), slot);
        velocity(s, traj, h, mod, s->a_kctx, s->a_vctx, kvp, enc_mask, n);
        if (rtc) {
            const mact_rtc_vjp_ctx vc = {.mod = mod, .kctx = s->a_kctx, .vctx = s->a_vctx, .enc = enc_mask, .n = n};
            mact_rtc_guide(s, rtc, traj, h, action_dim, t, &vc);
        }
        euler(s, traj, h, 1.f / (float)num_steps, pad);
    }
}
