/* The tensor table (model/table.h). Names are canonical HF names (docs/design.md). */
#include <stdio.h>
#include <string.h>
#include "model/table.h"

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

#define T1(nm, field, fl, a) do { int64_t sh_[1] = {a}; if ((rc = fn(w, nm, field, fl, 1, sh_))) return rc; } while (0)
#define T2(nm, field, fl, a, b) do { int64_t sh_[2] = {a, b}; if ((rc = fn(w, nm, field, fl, 2, sh_))) return rc; } while (0)

/* The one list of tensors. Names are canonical HF names (docs/design.md). */
int mact_table_walk(walk_ctx *w, tensor_fn fn)
{
    struct mact_model *m = w->m;
    const mact_config *c = &m->cfg;
    int rc;
    char n[512];
    const char *V = "model.vision_backbone.";
    /* vision */
    mact_vision_weights *v = &m->vis;
    int64_t pd = (int64_t)c->patch * c->patch * 3, vh = c->vit_hidden, vqd = (int64_t)c->vit_heads * c->vit_head_dim;
#define VN(fmt, ...) (snprintf(n, sizeof n, "%s" fmt, V, __VA_ARGS__), n)
    T2(VN("%s", "image_vit.patch_embedding.weight"), &v->patch_w, 0, vh, pd);
    T1(VN("%s", "image_vit.patch_embedding.bias"), &v->patch_b, T_VEC, vh);
    T2(VN("%s", "image_vit.positional_embedding"), &v->pos_emb, T_VEC, c->image_num_pos, vh);
    for (int j = 0; j < c->vit_layers; j++) {
        mact_vit_block *b = &v->blocks[j];
        const char *R = "image_vit.transformer.resblocks";
        T1(VN("%s.%d.attention_norm.weight", R, j), &b->attention_norm_w, T_VEC, vh);
        T1(VN("%s.%d.attention_norm.bias", R, j), &b->attention_norm_b, T_VEC, vh);
        T2(VN("%s.%d.attention.wq.weight", R, j), &b->wq, 0, vqd, vh);
        T1(VN("%s.%d.attention.wq.bias", R, j), &b->bq, T_VEC, vqd);
        T2(VN("%s.%d.attention.wk.weight", R, j), &b->wk, 0, vqd, vh);
        T1(VN("%s.%d.attention.wk.bias", R, j), &b->bk, T_VEC, vqd);
        T2(VN("%s.%d.attention.wv.weight", R, j), &b->wv, 0, vqd, vh);
        T1(VN("%s.%d.attention.wv.bias", R, j), &b->bv, T_VEC, vqd);
        T2(VN("%s.%d.attention.wo.weight", R, j), &b->wo, 0, vh, vqd);
        T1(VN("%s.%d.attention.wo.bias", R, j), &b->bo, T_VEC, vh);
        T1(VN("%s.%d.ffn_norm.weight", R, j), &b->ffn_norm_w, T_VEC, vh);
        T1(VN("%s.%d.ffn_norm.bias", R, j), &b->ffn_norm_b, T_VEC, vh);
        T2(VN("%s.%d.feed_forward.w1.weight", R, j), &b->w1, 0, c->vit_inter, vh);
        T1(VN("%s.%d.feed_forward.w1.bias", R, j), &b->b1, T_VEC, c->vit_inter);
        T2(VN("%s.%d.feed_forward.w2.weight", R, j), &b->w2, 0, vh, c->vit_inter);
        T1(VN("%s.%d.feed_forward.w2.bias", R, j), &b->b2, T_VEC, vh);
    }
    int64_t pin = (int64_t)c->n_taps * vh, pq = (int64_t)c->pool_heads * c->pool_head_dim, ph = c->pool_hidden;
    T2(VN("%s", "image_pooling_2d.wq.weight"), &v->pool_wq, 0, pq, pin);
    T1(VN("%s", "image_pooling_2d.wq.bias"), &v->pool_bq, T_VEC, pq);
    T2(VN("%s", "image_pooling_2d.wk.weight"), &v->pool_wk, 0, pq, pin);
    T1(VN("%s", "image_pooling_2d.wk.bias"), &v->pool_bk, T_VEC, pq);
    T2(VN("%s", "image_pooling_2d.wv.weight"), &v->pool_wv, 0, pq, pin);
    T1(VN("%s", "image_pooling_2d.wv.bias"), &v->pool_bv, T_VEC, pq);
    T2(VN("%s", "image_pooling_2d.wo.weight"), &v->pool_wo, 0, ph, pq);
    T1(VN("%s", "image_pooling_2d.wo.bias"), &v->pool_bo, T_VEC, ph);
    T2(VN("%s", "image_projector.w1.weight"), &v->proj_w1, 0, c->proj_inter, ph);
    T2(VN("%s", "image_projector.w3.weight"), &v->proj_w3, 0, c->proj_inter, ph);
    T2(VN("%s", "image_projector.w2.weight"), &v->proj_w2, 0, c->d_model, c->proj_inter);
    if (c->use_sampler) {
        const char *S = "token_sampler";
        T2(VN("%s.scout_mlp.0.weight", S), &v->scout0_w, 0, c->sampler_hidden, c->sampler_c);
        T1(VN("%s.scout_mlp.0.bias", S), &v->scout0_b, T_VEC, c->sampler_hidden);
        T2(VN("%s.scout_mlp.2.weight", S), &v->scout2_w, 0, (int64_t)2 * c->sampler_k, c->sampler_hidden);
        T1(VN("%s.scout_mlp.2.bias", S), &v->scout2_b, T_VEC, (int64_t)2 * c->sampler_k);
        T2(VN("%s.coord_encoder.0.weight", S), &v->coord0_w, T_VEC, c->coord_hidden, 2);
        T1(VN("%s.coord_encoder.0.bias", S), &v->coord0_b, T_VEC, c->coord_hidden);
        T2(VN("%s.coord_encoder.2.weight", S), &v->coord2_w, 0, c->sampler_c, c->coord_hidden);
        T1(VN("%s.coord_encoder.2.bias", S), &v->coord2_b, T_VEC, c->sampler_c);
    }
#undef VN
    /* LLM */
    mact_llm_weights *L = &m->llm;
    int64_t D = c->d_model, hd = c->head_dim, qd = (int64_t)c->n_heads * hd, kvd = (int64_t)c->n_kv_heads * hd;
#define LN(fmt, ...) (snprintf(n, sizeof n, "model.transformer." fmt, __VA_ARGS__), n)
    T2(LN("%s", "wte.embedding"), &L->wte, T_NOPACK, c->vocab_size, D);
    T2(LN("%s", "wte.new_embedding"), &L->wte_new, T_NOPACK, c->additional_vocab_size, D);
    for (int i = 0; i < c->n_layers; i++) {
        mact_llm_block *b = &L->blocks[i];
        T1(LN("blocks.%d.attn_norm.weight", i), &b->attn_norm, T_VEC, D);
        T2(LN("blocks.%d.self_attn.att_proj.weight", i), &b->att_proj, 0, qd + 2 * kvd, D);
        if (c->qkv_bias) T1(LN("blocks.%d.self_attn.att_proj.bias", i), &b->att_proj_b, T_VEC, qd + 2 * kvd);
        if (c->qk_norm) {
            int olmo = c->qk_norm == MACT_QKNORM_OLMO;
            T1(LN("blocks.%d.self_attn.q_norm.weight", i), &b->q_norm, T_VEC, olmo ? qd : hd);
            T1(LN("blocks.%d.self_attn.k_norm.weight", i), &b->k_norm, T_VEC, olmo ? kvd : hd);
        }
        T2(LN("blocks.%d.self_attn.attn_out.weight", i), &b->attn_out, 0, D, qd);
        T1(LN("blocks.%d.ff_norm.weight", i), &b->ff_norm, T_VEC, D);
        T2(LN("blocks.%d.mlp.ff_proj.weight", i), &b->ff_proj, 0, 2 * (int64_t)c->ff_inter, D);
        T2(LN("blocks.%d.mlp.ff_out.weight", i), &b->ff_out, 0, D, c->ff_inter);
    }
    T1(LN("%s", "ln_f.weight"), &L->ln_f, T_VEC | T_OPTIONAL, D);
#undef LN
    T2("lm_head.weight", &L->lm_head, T_OPTIONAL | T_NOPACK, c->vocab_size, D);
    /* action expert */
    mact_ae_weights *A = &m->ae;
    int64_t H = c->ae_hidden, AD = c->max_action_dim;
#define AN(fmt, ...) (snprintf(n, sizeof n, "model.action_expert." fmt, __VA_ARGS__), n)
    T2(AN("%s", "time_embed.1.weight"), &A->time1_w, 0, H, c->ae_tdim);
    T1(AN("%s", "time_embed.1.bias"), &A->time1_b, T_VEC, H);
    T2(AN("%s", "time_embed.3.weight"), &A->time3_w, 0, H, H);
    T1(AN("%s", "time_embed.3.bias"), &A->time3_b, T_VEC, H);
    T2(AN("%s", "action_embed.weight"), &A->action_embed_w, 0, H, AD);
    T1(AN("%s", "action_embed.bias"), &A->action_embed_b, T_VEC, H);
    T2(AN("%s", "context_k_proj.weight"), &A->ctx_k, 0, H, kvd);
    T2(AN("%s", "context_v_proj.weight"), &A->ctx_v, 0, H, kvd);
    for (int i = 0; i < c->ae_layers; i++) {
        mact_ae_block *b = &A->blocks[i];
        T2(AN("blocks.%d.self_attn.qkv.weight", i), &b->qkv_w, 0, 3 * H, H);
        T1(AN("blocks.%d.self_attn.qkv.bias", i), &b->qkv_b, T_VEC, 3 * H);
        T2(AN("blocks.%d.self_attn.out_proj.weight", i), &b->out_w, 0, H, H);
        T1(AN("blocks.%d.self_attn.out_proj.bias", i), &b->out_b, T_VEC, H);
        T2(AN("blocks.%d.cross_attn.q_proj.weight", i), &b->xq_w, 0, H, H);
        T1(AN("blocks.%d.cross_attn.q_proj.bias", i), &b->xq_b, T_VEC, H);
        T2(AN("blocks.%d.cross_attn.out_proj.weight", i), &b->xo_w, 0, H, H);
        T1(AN("blocks.%d.cross_attn.out_proj.bias", i), &b->xo_b, T_VEC, H);
        T2(AN("blocks.%d.mlp.gate_proj.weight", i), &b->gate_w, 0, c->ae_inter, H);
        T1(AN("blocks.%d.mlp.gate_proj.bias", i), &b->gate_b, T_VEC, c->ae_inter);
        T2(AN("blocks.%d.mlp.up_proj.weight", i), &b->up_w, 0, c->ae_inter, H);
        T1(AN("blocks.%d.mlp.up_proj.bias", i), &b->up_b, T_VEC, c->ae_inter);
        T2(AN("blocks.%d.mlp.down_proj.weight", i), &b->down_w, 0, H, c->ae_inter);
        T1(AN("blocks.%d.mlp.down_proj.bias", i), &b->down_b, T_VEC, H);
        T2(AN("blocks.%d.modulation.linear.weight", i), &b->mod_w, 0, 9 * H, H);
        T1(AN("blocks.%d.modulation.linear.bias", i), &b->mod_b, T_VEC, 9 * H);
    }
    T2(AN("%s", "final_layer.modulation.linear.weight"), &A->fmod_w, 0, 2 * H, H);
    T1(AN("%s", "final_layer.modulation.linear.bias"), &A->fmod_b, T_VEC, 2 * H);
    T2(AN("%s", "final_layer.linear.weight"), &A->final_w, 0, AD, H);
    T1(AN("%s", "final_layer.linear.bias"), &A->final_b, T_VEC, AD);
#undef AN
    return 0;
}
#undef T1
#undef T2

static int weight_one(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape)
{
    (void)shape;
    if (nd != 2 || (flags & (T_VEC | T_NOPACK)) || !t->data) return 0;
    w->wf(t, starts(name, "model.transformer.") ? MACT_PART_LLM : starts(name, "model.action_expert.") ? MACT_PART_EXPERT
                                                                                                      : MACT_PART_VISION,
          w->wctx);
    return 0;
}

void mact_model_for_each_weight(struct mact_model *m, void (*f)(mact_tensor *t, int part, void *ctx), void *ctx)
{
    walk_ctx w = {.m = m, .wf = f, .wctx = ctx};
    mact_table_walk(&w, weight_one);
}

