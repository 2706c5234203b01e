/* mact export onnx: per-component ONNX graphs (opset 20) with the seed's input / output names, weights as
 * external data, node names prefixed by their block ("llm.layer3/MatMul_12"). The arithmetic follows the stage
 * code (src/stages/llm.c, action.c) op for op: RMSNorm as Mul / ReduceMean / Add / Sqrt / Div, NeoX RoPE from the
 * same fp32 tables (mact_rope_table's formula), grouped-query attention without repeating K/V, the action
 * expert's 9-way modulation, the masked Euler update. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "export/export.h"
#include "export/onnx_build.h"
#include "model/model.h"

#define IN(...) (const char *const[]){__VA_ARGS__}
#define NIN(...) (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *))
#define OP(g, op, ...) og_node(g, op, NULL, NIN(__VA_ARGS__), IN(__VA_ARGS__), NULL)
#define I64(...) (const int64_t[]){__VA_ARGS__}
#define NI(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define RESHAPE(g, x, ...) og_node(g, "Reshape", NULL, 2, IN(x, og_const_i(g, NI(__VA_ARGS__), I64(__VA_ARGS__))), NULL)
#define TRANSPOSE(g, x, ...) og_node(g, "Transpose", NULL, 1, IN(x), og_ais(g, "perm", NI(__VA_ARGS__), I64(__VA_ARGS__)), NULL)
#define UNSQUEEZE(g, x, ...) og_node(g, "Unsqueeze", NULL, 2, IN(x, og_const_i(g, NI(__VA_ARGS__), I64(__VA_ARGS__))), NULL)

typedef struct {
    const mact_model *m;
    const mact_config *c;
    int seq_len, H, A, S, fp16, n_img, decomposed;
    const char *only;
    float *buf;
    size_t buf_cap;
    int failed;
} ctx;

/* weight [rows, cols] (or a vector) as fp32, transposed to [cols, rows] when asked */
static float *as_f32(ctx *x, const mact_tensor *t, int transpose, size_t *n_out)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    if (n > x->buf_cap) {
        free(x->buf);
        x->buf = malloc(n * sizeof(float));
        x->buf_cap = x->buf ? n : 0;
        if (!x->buf) { x->failed = 1; return NULL; }
    }
    if (transpose && t->ndim == 2) {
        /* in 64 x 64 tiles: a row-by-row transpose writes each value a whole column away from the last, a cache
         * and TLB miss per value on a [2560 x 10240] matrix (and a shadow-memory miss too under ASan) */
        const int64_t r = t->shape[0], c = t->shape[1], B = 64;
        for (int64_t i0 = 0; i0 < r; i0 += B)
            for (int64_t j0 = 0; j0 < c; j0 += B) {
                const int64_t i1 = i0 + B < r ? i0 + B : r, j1 = j0 + B < c ? j0 + B : c;
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++) x->buf[j * r + i] = mact_load_f32(t->data, t->dtype, i * c + j);
            }
    } else
        for (size_t i = 0; i < n; i++) x->buf[i] = mact_load_f32(t->data, t->dtype, (int64_t)i);
    *n_out = n;
    return x->buf;
}

static const char *weight(og *g, ctx *x, const char *what, const mact_tensor *t, int transpose)
{
    size_t n;
    float *f = as_f32(x, t, transpose, &n);
    if (!f) return "";
    int64_t d[2] = {t->shape[0], t->ndim == 2 ? t->shape[1] : 0};
    if (transpose && t->ndim == 2) { d[0] = t->shape[1]; d[1] = t->shape[0]; }
    return og_weight(g, what, f, t->ndim == 2 ? 2 : 1, d);
}

/* y = x W^T + b with W [out, in] (stored transposed as the MatMul's [in, out]) */
static const char *linear(og *g, ctx *x, const char *in, const char *what, const mact_tensor *w, const mact_tensor *b)
{
    char nm[96];
    snprintf(nm, sizeof nm, "%s.weight", what);
    const char *y = OP(g, "MatMul", in, weight(g, x, nm, w, 1));
    if (b && b->data) {
        snprintf(nm, sizeof nm, "%s.bias", what);
        y = OP(g, "Add", y, weight(g, x, nm, b, 0));
    }
    return y;
}

/* RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) [* w] */
static const char *rms(og *g, ctx *x, const char *in, float eps, const char *what, const mact_tensor *w)
{
    const char *sq = OP(g, "Mul", in, in);
    const char *m = og_node(g, "ReduceMean", NULL, 2, IN(sq, og_const_i(g, 1, I64(-1))), og_ai(g, "keepdims", 1), NULL);
    const char *d = OP(g, "Sqrt", OP(g, "Add", m, og_const_f(g, eps)));
    const char *y = OP(g, "Div", in, d);
    if (w && w->data) y = OP(g, "Mul", y, weight(g, x, what, w, 0));
    return y;
}

static const char *silu(og *g, const char *in) { return OP(g, "Mul", in, OP(g, "Sigmoid", in)); }

/* NeoX RoPE on x [.., N, heads, hd] with tables cos / sin [N, 1, hd/2] (mact_rope's arithmetic) */
static const char *rope(og *g, const char *in, const char *cs, const char *sn, int hd)
{
    const char *h[2];
    og_node_multi(g, "Split", 2, IN(in, og_const_i(g, 2, I64(hd / 2, hd / 2))), 2, h, og_ai(g, "axis", -1), NULL);
    const char *o1 = OP(g, "Sub", OP(g, "Mul", h[0], cs), OP(g, "Mul", h[1], sn));
    const char *o2 = OP(g, "Add", OP(g, "Mul", h[1], cs), OP(g, "Mul", h[0], sn));
    return og_node(g, "Concat", NULL, 2, IN(o1, o2), og_ai(g, "axis", -1), NULL);
}

/* fp32 RoPE tables [n, 1, hd/2] as mact_rope_table computes them */
static void rope_tables(og *g, int64_t n, int hd, double theta, const char **cs, const char **sn)
{
    int half = hd / 2;
    float *c = malloc((size_t)n * half * sizeof *c), *s = malloc((size_t)n * half * sizeof *s);
    if (!c || !s) { free(c); free(s); g->failed = 1; *cs = *sn = ""; return; }
    for (int i = 0; i < half; i++) {
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
        for (int64_t p = 0; p < n; p++) {
            float a = (float)p * inv;
            c[p * half + i] = cosf(a);
            s[p * half + i] = sinf(a);
        }
    }
    int64_t d[3] = {n, 1, half};
    *cs = og_weight(g, "rope_cos", c, 3, d);
    *sn = og_weight(g, "rope_sin", s, 3, d);
    free(c);
    free(s);
}

/* softmax(q k^T * scale + bias) v, q [1, Tq, heads, d] grouped over kv heads: q heads h = kv * G + g */
static const char *attention(og *g, const char *q, const char *k, const char *v, const char *bias, int heads, int kv,
                             int d)
{
    int G = heads / kv;
    const char *qg = TRANSPOSE(g, RESHAPE(g, q, 0, 0, kv, G, d), 0, 2, 3, 1, 4);       /* [1, kv, G, Tq, d] */
    qg = OP(g, "Mul", qg, og_const_f(g, 1.f / sqrtf((float)d)));
    const char *kt = UNSQUEEZE(g, TRANSPOSE(g, k, 0, 2, 3, 1), 2);                   /* [1, kv, 1, d, Tk] */
    const char *s = OP(g, "MatMul", qg, kt);
    if (bias) s = OP(g, "Add", s, bias);
    const char *p = og_node(g, "Softmax", NULL, 1, IN(s), og_ai(g, "axis", -1), NULL);
    const char *vt = UNSQUEEZE(g, TRANSPOSE(g, v, 0, 2, 1, 3), 2);                   /* [1, kv, 1, Tk, d] */
    const char *o = TRANSPOSE(g, OP(g, "MatMul", p, vt), 0, 3, 1, 2, 4);             /* [1, Tq, kv, G, d] */
    return RESHAPE(g, o, 0, 0, heads * d);
}

static const char *identity(og *g, const char *in, const char *name)
{
    return og_node(g, "Identity", name, 1, IN(in), NULL);
}

/* ---- llm_split: hidden_states [1,N,D], attention_bias [1,1,N,N] -> hidden_out, keys, values [b-a,1,N,kv] ---- */
static void build_llm(og *g, ctx *x, int a, int b)
{
    const mact_config *c = x->c;
    const int D = c->d_model, H = c->n_heads, KV = c->n_kv_heads, d = c->head_dim, I = c->ff_inter;
    int64_t N = x->seq_len ? x->seq_len : -1;
    og_input(g, "hidden_states", 3, I64(1, N, D));
    og_input(g, "attention_bias", 4, I64(1, 1, N, N));
    og_block(g, "llm.rope");
    int64_t P = x->seq_len ? x->seq_len : (c->max_position_embeddings < 4096 ? c->max_position_embeddings : 4096);
    const char *cs, *sn;
    rope_tables(g, P, d, c->rope_theta, &cs, &sn);
    if (!x->seq_len) {  /* the first N rows of the tables */
        const char *nv = og_node(g, "Shape", NULL, 1, IN("hidden_states"), og_ai(g, "start", 1), og_ai(g, "end", 2), NULL);
        const char *z = og_const_i(g, 1, I64(0)), *ax = og_const_i(g, 1, I64(0));
        cs = og_node(g, "Slice", NULL, 4, IN(cs, z, nv, ax), NULL);
        sn = og_node(g, "Slice", NULL, 4, IN(sn, z, nv, ax), NULL);
    }
    const char *h = "hidden_states", *ks[MACT_EXPORT_MAX_SPLITS * 64], *vs[MACT_EXPORT_MAX_SPLITS * 64];
    for (int l = a; l < b; l++) {
        const mact_llm_block *B = &x->m->llm.blocks[l];
        og_block(g, "llm.layer%d", l);
        const char *u = rms(g, x, h, c->eps, "attn_norm.weight", &B->attn_norm);
        const char *qkv = linear(g, x, u, "self_attn.att_proj", &B->att_proj, c->qkv_bias ? &B->att_proj_b : NULL);
        const char *p[3];
        og_node_multi(g, "Split", 2, IN(qkv, og_const_i(g, 3, I64((int64_t)H * d, (int64_t)KV * d, (int64_t)KV * d))), 3, p,
                      og_ai(g, "axis", -1), NULL);
        const char *q = p[0], *k = p[1], *v = p[2];
        if (c->qk_norm == MACT_QKNORM_OLMO) {
            q = rms(g, x, q, c->eps, "self_attn.q_norm.weight", &B->q_norm);
            k = rms(g, x, k, c->eps, "self_attn.k_norm.weight", &B->k_norm);
        }
        q = RESHAPE(g, q, 0, 0, H, d);
        k = RESHAPE(g, k, 0, 0, KV, d);
        v = RESHAPE(g, v, 0, 0, KV, d);
        if (c->qk_norm == MACT_QKNORM_QWEN3) {
            q = rms(g, x, q, c->eps, "self_attn.q_norm.weight", &B->q_norm);
            k = rms(g, x, k, c->eps, "self_attn.k_norm.weight", &B->k_norm);
        }
        q = rope(g, q, cs, sn, d);
        k = rope(g, k, cs, sn, d);
        ks[l - a] = UNSQUEEZE(g, RESHAPE(g, k, 0, 0, (int64_t)KV * d), 0);
        vs[l - a] = UNSQUEEZE(g, RESHAPE(g, v, 0, 0, (int64_t)KV * d), 0);
        const char *o = attention(g, q, k, v, "attention_bias", H, KV, d);
        h = OP(g, "Add", h, linear(g, x, o, "self_attn.attn_out", &B->attn_out, NULL));
        u = rms(g, x, h, c->eps, "ff_norm.weight", &B->ff_norm);
        const char *f = linear(g, x, u, "mlp.ff_proj", &B->ff_proj, NULL);
        og_node_multi(g, "Split", 2, IN(f, og_const_i(g, 2, I64(I, I))), 2, p, og_ai(g, "axis", -1), NULL);
        h = OP(g, "Add", h, linear(g, x, OP(g, "Mul", silu(g, p[1]), p[0]), "mlp.ff_out", &B->ff_out, NULL));
    }
    og_block(g, "llm.out");
    identity(g, h, "hidden_out");
    og_node(g, "Concat", "keys", b - a, ks, og_ai(g, "axis", 0), NULL);
    og_node(g, "Concat", "values", b - a, vs, og_ai(g, "axis", 0), NULL);
    og_output(g, "hidden_out", 3, I64(1, N, D));
    og_output(g, "keys", 4, I64(b - a, 1, N, (int64_t)KV * d));
    og_output(g, "values", 4, I64(b - a, 1, N, (int64_t)KV * d));
}

/* ---- action_context: keys, values [L,1,N,kv] -> k_ctx, v_ctx [L,1,N,AH] ---- */
static void build_context(og *g, ctx *x)
{
    const mact_config *c = x->c;
    const mact_ae_weights *w = &x->m->ae;
    int64_t N = x->seq_len ? x->seq_len : -1, L = c->n_layers, KVD = (int64_t)c->n_kv_heads * c->head_dim, AH = c->ae_hidden;
    og_input(g, "keys", 4, I64(L, 1, N, KVD));
    og_input(g, "values", 4, I64(L, 1, N, KVD));
    og_block(g, "action_context.k");
    const char *k = linear(g, x, "keys", "context_k_proj", &w->ctx_k, NULL);
    if (c->ae_context_norm) k = rms(g, x, k, c->ae_eps, NULL, NULL);
    if (c->ae_qk_norm) k = RESHAPE(g, rms(g, x, RESHAPE(g, k, 0, 0, 0, c->ae_heads, c->ae_head_dim), c->ae_eps, NULL, NULL), 0, 0, 0, AH);
    identity(g, k, "k_ctx");
    og_block(g, "action_context.v");
    const char *v = linear(g, x, "values", "context_v_proj", &w->ctx_v, NULL);
    if (c->ae_context_norm) v = rms(g, x, v, c->ae_eps, NULL, NULL);
    identity(g, v, "v_ctx");
    og_output(g, "k_ctx", 4, I64(L, 1, N, AH));
    og_output(g, "v_ctx", 4, I64(L, 1, N, AH));
}

/* u = RMSNorm(z) * (1 + scale) + shift */
static const char *norm_mod(og *g, ctx *x, const char *z, const char *shift, const char *scale)
{
    const char *n = rms(g, x, z, x->c->ae_eps, NULL, NULL);
    return OP(g, "Add", OP(g, "Mul", n, OP(g, "Add", scale, og_const_f(g, 1.f))), shift);
}

/* ---- action_step: one masked Euler step at t = timestep with dt = 1/num_steps ---- */
static void build_step(og *g, ctx *x)
{
    const mact_config *c = x->c;
    const mact_ae_weights *w = &x->m->ae;
    const int64_t N = x->seq_len ? x->seq_len : -1, L = c->n_layers, AH = c->ae_hidden, H = x->H, A = x->A;
    const int nh = c->ae_heads, hd = c->ae_head_dim, half = c->ae_tdim / 2;
    og_input(g, "trajectory", 3, I64(1, H, A));
    og_input(g, "timestep", 1, I64(1));
    og_input(g, "k_ctx", 4, I64(L, 1, N, AH));
    og_input(g, "v_ctx", 4, I64(L, 1, N, AH));
    og_input(g, "encoder_attention_mask", 2, I64(1, N));
    og_input(g, "action_dim_is_pad", 2, I64(1, A));
    /* time conditioning: [sin(t f), cos(t f)], f_j = exp(-ln(1e4) j / (half - 1)) in fp32 as the stage code */
    og_block(g, "action_step.time_embed");
    float *fr = malloc((size_t)half * sizeof *fr);
    if (!fr) { g->failed = 1; return; }
    for (int j = 0; j < half; j++) fr[j] = expf(-logf(10000.f) * (float)j / (float)(half - 1));
    const char *tf = OP(g, "Mul", UNSQUEEZE(g, "timestep", 1), og_const_fv(g, fr, 2, I64(1, half)));
    free(fr);
    const char *emb = og_node(g, "Concat", NULL, 2, IN(OP(g, "Sin", tf), OP(g, "Cos", tf)), og_ai(g, "axis", -1), NULL);
    const char *h1 = silu(g, linear(g, x, emb, "time_embed.1", &w->time1_w, &w->time1_b));
    const char *cond = silu(g, linear(g, x, h1, "time_embed.3", &w->time3_w, &w->time3_b));
    og_block(g, "action_step.masks");
    const char *cross_bias = og_node(g, "Where", NULL, 3, IN(OP(g, "Equal", "encoder_attention_mask", og_const_f(g, 0.f)),
                                     og_const_f(g, -FLT_MAX), og_const_f(g, 0.f)), NULL);
    cross_bias = RESHAPE(g, cross_bias, 1, 1, 1, -1);
    const char *cs = NULL, *sn = NULL;
    if (c->ae_rope) rope_tables(g, H, hd, 10000.0, &cs, &sn);
    og_block(g, "action_step.action_embed");
    const char *z = linear(g, x, "trajectory", "action_embed", &w->action_embed_w, &w->action_embed_b);
    for (int l = 0; l < c->n_layers; l++) {
        const mact_ae_block *B = &w->blocks[l];
        og_block(g, "action_step.block%d", l);
        const char *mod = linear(g, x, cond, "modulation.linear", &B->mod_w, &B->mod_b);
        const char *m[9];
        og_node_multi(g, "Split", 2, IN(mod, og_const_i(g, 9, I64(AH, AH, AH, AH, AH, AH, AH, AH, AH))), 9, m,
                      og_ai(g, "axis", -1), NULL);
        /* self-attention over the action rows */
        const char *u = norm_mod(g, x, z, m[0], m[1]);
        const char *qkv = RESHAPE(g, linear(g, x, u, "self_attn.qkv", &B->qkv_w, &B->qkv_b), 0, 0, 3, nh, hd);
        const char *p[3];
        og_node_multi(g, "Split", 2, IN(qkv, og_const_i(g, 3, I64(1, 1, 1))), 3, p, og_ai(g, "axis", 2), NULL);
        const char *q = RESHAPE(g, p[0], 0, 0, nh, hd), *k = RESHAPE(g, p[1], 0, 0, nh, hd), *v = RESHAPE(g, p[2], 0, 0, nh, hd);
        if (c->ae_qk_norm) { q = rms(g, x, q, c->ae_eps, NULL, NULL); k = rms(g, x, k, c->ae_eps, NULL, NULL); }
        if (c->ae_rope) { q = rope(g, q, cs, sn, hd); k = rope(g, k, cs, sn, hd); }
        const char *o = attention(g, q, k, v, NULL, nh, nh, hd);
        z = OP(g, "Add", z, OP(g, "Mul", m[2], linear(g, x, o, "self_attn.out_proj", &B->out_w, &B->out_b)));
        /* cross-attention to this layer's context */
        u = norm_mod(g, x, z, m[3], m[4]);
        q = RESHAPE(g, linear(g, x, u, "cross_attn.q_proj", &B->xq_w, &B->xq_b), 0, 0, nh, hd);
        if (c->ae_qk_norm) q = rms(g, x, q, c->ae_eps, NULL, NULL);
        const char *li = og_const_i(g, 1, I64(l));
        const char *kc = RESHAPE(g, og_node(g, "Gather", NULL, 2, IN("k_ctx", li), og_ai(g, "axis", 0), NULL), 1, -1, nh, hd);
        const char *vc = RESHAPE(g, og_node(g, "Gather", NULL, 2, IN("v_ctx", li), og_ai(g, "axis", 0), NULL), 1, -1, nh, hd);
        o = attention(g, q, kc, vc, cross_bias, nh, nh, hd);
        z = OP(g, "Add", z, OP(g, "Mul", m[5], linear(g, x, o, "cross_attn.out_proj", &B->xo_w, &B->xo_b)));
        /* SwiGLU MLP */
        u = norm_mod(g, x, z, m[6], m[7]);
        const char *gt = silu(g, linear(g, x, u, "mlp.gate_proj", &B->gate_w, &B->gate_b));
        const char *up = linear(g, x, u, "mlp.up_proj", &B->up_w, &B->up_b);
        z = OP(g, "Add", z, OP(g, "Mul", m[8], linear(g, x, OP(g, "Mul", gt, up), "mlp.down_proj", &B->down_w, &B->down_b)));
    }
    og_block(g, "action_step.final_layer");
    const char *fm = linear(g, x, cond, "modulation.linear", &w->fmod_w, &w->fmod_b);
    const char *f[2];
    og_node_multi(g, "Split", 2, IN(fm, og_const_i(g, 2, I64(AH, AH))), 2, f, og_ai(g, "axis", -1), NULL);
    const char *vel = linear(g, x, norm_mod(g, x, z, f[0], f[1]), "linear", &w->final_w, &w->final_b);
    og_block(g, "action_step.euler");
    const char *keep = OP(g, "Equal", "action_dim_is_pad", og_const_f(g, 0.f));
    const char *nx = OP(g, "Add", "trajectory", OP(g, "Mul", vel, og_const_f(g, 1.f / (float)x->S)));
    og_node(g, "Where", "next_trajectory", 3, IN(keep, nx, og_const_f(g, 0.f)), NULL);
    og_output(g, "next_trajectory", 3, I64(1, H, A));
}


/* GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static const char *gelu_tanh(og *g, const char *in)
{
    const char *x3 = OP(g, "Mul", OP(g, "Mul", in, in), in);
    const char *inner = OP(g, "Mul", OP(g, "Add", in, OP(g, "Mul", x3, og_const_f(g, 0.044715f))), og_const_f(g, 0.7978845608028654f));
    return OP(g, "Mul", OP(g, "Mul", in, og_const_f(g, 0.5f)), OP(g, "Add", OP(g, "Tanh", inner), og_const_f(g, 1.f)));
}

static const char *layernorm(og *g, ctx *x, const char *in, const char *what, const mact_tensor *w, const mact_tensor *b, float eps)
{
    char nw[96], nb[96];
    snprintf(nw, sizeof nw, "%s.weight", what);
    snprintf(nb, sizeof nb, "%s.bias", what);
    return og_node(g, "LayerNormalization", NULL, 3, IN(in, weight(g, x, nw, w, 0), weight(g, x, nb, b, 0)),
                   og_ai(g, "axis", -1), og_af(g, "epsilon", eps), NULL);
}

/* SwiGLU projector rows [.., pool_hidden] -> [.., d_model] */
static const char *projector(og *g, ctx *x, const char *in)
{
    const mact_vision_weights *w = &x->m->vis;
    og_block(g, "vision.projector");
    const char *a = silu(g, linear(g, x, in, "w1", &w->proj_w1, NULL));
    const char *b = linear(g, x, in, "w3", &w->proj_w3, NULL);
    return linear(g, x, OP(g, "Mul", a, b), "w2", &w->proj_w2, NULL);
}

/* the grid token sampler on feat [n, T, C] -> [n, K, C]: GridSample (native) or the four bilinear neighbours
 * gathered and weighted (decomposed), both F.grid_sample(bilinear, zeros, align_corners=False) */
static const char *sampler(og *g, ctx *x, const char *feat, int n, int decomposed)
{
    const mact_config *c = x->c;
    const mact_vision_weights *w = &x->m->vis;
    const int64_t C = c->sampler_c, K = c->sampler_k, GH = c->pooled_h, GW = c->pooled_w, T = GH * GW;
    og_block(g, "vision.sampler.scout");
    const char *gm = og_node(g, "ReduceMean", NULL, 2, IN(feat, og_const_i(g, 1, I64(1))), og_ai(g, "keepdims", 0), NULL);
    const char *hid = OP(g, "Relu", linear(g, x, gm, "scout_mlp.0", &w->scout0_w, &w->scout0_b));
    const char *pts = RESHAPE(g, OP(g, "Sigmoid", linear(g, x, hid, "scout_mlp.2", &w->scout2_w, &w->scout2_b)), n, K, 2);
    const char *samp;
    og_block(g, "vision.sampler.grid_sample");
    const char *grid = OP(g, "Sub", OP(g, "Mul", pts, og_const_f(g, 2.f)), og_const_f(g, 1.f));  /* [n, K, 2] (x, y) */
    if (!decomposed) {
        const char *M = TRANSPOSE(g, RESHAPE(g, feat, n, GH, GW, C), 0, 3, 1, 2);  /* [n, C, GH, GW] */
        const char *gs = og_node(g, "GridSample", NULL, 2, IN(M, RESHAPE(g, grid, n, 1, K, 2)), og_as(g, "mode", "linear"),
                                 og_as(g, "padding_mode", "zeros"), og_ai(g, "align_corners", 0), NULL);  /* [n, C, 1, K] */
        samp = TRANSPOSE(g, RESHAPE(g, gs, n, C, K), 0, 2, 1);
    } else {
        const char *xy[2];
        og_node_multi(g, "Split", 2, IN(grid, og_const_i(g, 2, I64(1, 1))), 2, xy, og_ai(g, "axis", -1), NULL);  /* [n, K, 1] */
        /* ix = ((gx + 1) * W - 1) / 2 */
        const char *ix = OP(g, "Div", OP(g, "Sub", OP(g, "Mul", OP(g, "Add", xy[0], og_const_f(g, 1.f)), og_const_f(g, (float)GW)), og_const_f(g, 1.f)), og_const_f(g, 2.f));
        const char *iy = OP(g, "Div", OP(g, "Sub", OP(g, "Mul", OP(g, "Add", xy[1], og_const_f(g, 1.f)), og_const_f(g, (float)GH)), og_const_f(g, 1.f)), og_const_f(g, 2.f));
        const char *x0 = OP(g, "Floor", ix), *y0 = OP(g, "Floor", iy);
        const char *wx = OP(g, "Sub", ix, x0), *wy = OP(g, "Sub", iy, y0);
        const char *one = og_const_f(g, 1.f);
        const char *wxs[2] = {OP(g, "Sub", one, wx), wx}, *wys[2] = {OP(g, "Sub", one, wy), wy};
        float offs[64];
        for (int i = 0; i < n && i < 64; i++) offs[i] = (float)(i * T);
        const char *off = og_const_fv(g, offs, 3, I64(n, 1, 1));
        const char *flat = RESHAPE(g, feat, -1, C);  /* [n*T, C] */
        samp = NULL;
        for (int q = 0; q < 4; q++) {
            int dx = q & 1, dy = q >> 1;
            const char *xi = dx ? OP(g, "Add", x0, one) : x0, *yi = dy ? OP(g, "Add", y0, one) : y0;
            /* inside the grid: 0 <= xi < GW and 0 <= yi < GH (zero padding outside) */
            const char *vx = OP(g, "And", OP(g, "GreaterOrEqual", xi, og_const_f(g, 0.f)), OP(g, "Less", xi, og_const_f(g, (float)GW)));
            const char *vy = OP(g, "And", OP(g, "GreaterOrEqual", yi, og_const_f(g, 0.f)), OP(g, "Less", yi, og_const_f(g, (float)GH)));
            const char *valid = og_node(g, "Cast", NULL, 1, IN(OP(g, "And", vx, vy)), og_ai(g, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT), NULL);
            const char *xc = OP(g, "Clip", xi, og_const_f(g, 0.f), og_const_f(g, (float)(GW - 1)));
            const char *yc = OP(g, "Clip", yi, og_const_f(g, 0.f), og_const_f(g, (float)(GH - 1)));
            const char *idx = OP(g, "Add", OP(g, "Add", OP(g, "Mul", yc, og_const_f(g, (float)GW)), xc), off);  /* [n, K, 1] */
            idx = og_node(g, "Cast", NULL, 1, IN(RESHAPE(g, idx, n, K)), og_ai(g, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64), NULL);
            const char *rows = og_node(g, "Gather", NULL, 2, IN(flat, idx), og_ai(g, "axis", 0), NULL);  /* [n, K, C] */
            const char *wq = OP(g, "Mul", OP(g, "Mul", wxs[dx], wys[dy]), valid);
            const char *term = OP(g, "Mul", wq, rows);
            samp = samp ? OP(g, "Add", samp, term) : term;
        }
    }
    og_block(g, "vision.sampler.coord_encoder");
    const char *ch = OP(g, "Relu", linear(g, x, pts, "coord_encoder.0", &w->coord0_w, &w->coord0_b));
    return OP(g, "Add", samp, linear(g, x, ch, "coord_encoder.2", &w->coord2_w, &w->coord2_b));
}

/* ---- vision: pixel_values [1, n_img, P, PD] -> image_embeds [n_img * K, D] ---- */
static void build_vision(og *g, ctx *x, int n, int decomposed)
{
    const mact_config *c = x->c;
    const mact_vision_weights *w = &x->m->vis;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3, VH = c->vit_hidden;
    const int64_t T = (int64_t)c->pooled_h * c->pooled_w, W = (int64_t)c->pool_h * c->pool_w, PIN = (int64_t)c->n_taps * VH;
    og_input(g, "pixel_values", 4, I64(1, n, P, PD));
    og_block(g, "vision.canonicalize");
    /* round((x + 1) / 2 * 255) / 255 * 2 - 1, Round being half-to-even as rintf */
    const char *px = RESHAPE(g, "pixel_values", n, P, PD);
    px = OP(g, "Round", OP(g, "Mul", OP(g, "Div", OP(g, "Add", px, og_const_f(g, 1.f)), og_const_f(g, 2.f)), og_const_f(g, 255.f)));
    px = OP(g, "Sub", OP(g, "Mul", OP(g, "Div", px, og_const_f(g, 255.f)), og_const_f(g, 2.f)), og_const_f(g, 1.f));
    og_block(g, "vision.patch_embedding");
    size_t npos;
    const char *h = linear(g, x, px, "patch_embedding", &w->patch_w, &w->patch_b);
    float *pos = as_f32(x, &w->pos_emb, 0, &npos);
    h = OP(g, "Add", h, og_weight(g, "positional_embedding", pos ? pos : (float[]){0}, 2, I64(P, VH)));
    int last = 0;
    for (int t = 0; t < c->n_taps; t++) if (c->taps[t] > last) last = c->taps[t];
    const char *taps[MACT_MAX_TAPS] = {0};
    for (int j = 0; j <= last; j++) {
        const mact_vit_block *b = &w->blocks[j];
        og_block(g, "vision.vit.block%d", j);
        const char *u = layernorm(g, x, h, "attention_norm", &b->attention_norm_w, &b->attention_norm_b, c->vit_eps);
        const char *q = RESHAPE(g, linear(g, x, u, "attention.wq", &b->wq, &b->bq), 0, 0, c->vit_heads, c->vit_head_dim);
        const char *k = RESHAPE(g, linear(g, x, u, "attention.wk", &b->wk, &b->bk), 0, 0, c->vit_heads, c->vit_head_dim);
        const char *v = RESHAPE(g, linear(g, x, u, "attention.wv", &b->wv, &b->bv), 0, 0, c->vit_heads, c->vit_head_dim);
        const char *o = attention(g, q, k, v, NULL, c->vit_heads, c->vit_heads, c->vit_head_dim);
        h = OP(g, "Add", h, linear(g, x, o, "attention.wo", &b->wo, &b->bo));
        u = layernorm(g, x, h, "ffn_norm", &b->ffn_norm_w, &b->ffn_norm_b, c->vit_eps);
        u = gelu_tanh(g, linear(g, x, u, "feed_forward.w1", &b->w1, &b->b1));
        h = OP(g, "Add", h, linear(g, x, u, "feed_forward.w2", &b->w2, &b->b2));
        for (int t = 0; t < c->n_taps; t++) if (c->taps[t] == j) taps[t] = h;
    }
    og_block(g, "vision.pooling");
    const char *feats = c->n_taps == 1 ? taps[0] : og_node(g, "Concat", NULL, c->n_taps, taps, og_ai(g, "axis", -1), NULL);
    /* the 2x2 windows over the padded grid (pad bottom / right): index, validity, query divisor */
    int64_t *idx = malloc((size_t)(T * W) * sizeof *idx);
    float *valid = malloc((size_t)(T * W) * sizeof *valid), *div = malloc((size_t)T * sizeof *div), *bias = malloc((size_t)(T * W) * sizeof *bias);
    if (!idx || !valid || !div || !bias) { free(idx); free(valid); free(div); free(bias); g->failed = 1; return; }
    const int pad_top = (c->pooled_h * c->pool_h - c->grid_h) / 2, pad_left = (c->pooled_w * c->pool_w - c->grid_w) / 2;
    for (int64_t t = 0; t < T; t++) {
        int ti = (int)(t / c->pooled_w), tj = (int)(t % c->pooled_w), nv = 0;
        for (int64_t k = 0; k < W; k++) {
            int r = ti * c->pool_h + (int)(k / c->pool_w) - pad_top, cc = tj * c->pool_w + (int)(k % c->pool_w) - pad_left;
            int ok = r >= 0 && r < c->grid_h && cc >= 0 && cc < c->grid_w;
            idx[t * W + k] = ok ? (int64_t)r * c->grid_w + cc : 0;
            valid[t * W + k] = ok ? 1.f : 0.f;
            bias[t * W + k] = ok ? 0.f : -FLT_MAX;
            nv += ok;
        }
        div[t] = c->pooling_mask == MACT_POOL_NONE ? (float)W : (float)(nv ? nv : 1);
    }
    const char *ix = og_const_i(g, (int)(T * W), idx);
    const char *X = og_node(g, "Gather", NULL, 2, IN(feats, ix), og_ai(g, "axis", 1), NULL);
    X = OP(g, "Mul", RESHAPE(g, X, n, T, W, PIN), og_const_fv(g, valid, 3, I64(T, W, 1)));      /* [n, T, W, PIN] */
    const char *qry = og_node(g, "ReduceSum", NULL, 2, IN(X, og_const_i(g, 1, I64(2))), og_ai(g, "keepdims", 1), NULL);
    qry = OP(g, "Div", qry, og_const_fv(g, div, 3, I64(T, 1, 1)));                            /* [n, T, 1, PIN] */
    const int ph = c->pool_heads, pd = c->pool_head_dim;
    const char *q = TRANSPOSE(g, RESHAPE(g, linear(g, x, qry, "image_pooling_2d.wq", &w->pool_wq, &w->pool_bq), n, T, 1, ph, pd), 0, 1, 3, 2, 4);
    const char *k = TRANSPOSE(g, RESHAPE(g, linear(g, x, X, "image_pooling_2d.wk", &w->pool_wk, &w->pool_bk), n, T, W, ph, pd), 0, 1, 3, 4, 2);
    const char *v = TRANSPOSE(g, RESHAPE(g, linear(g, x, X, "image_pooling_2d.wv", &w->pool_wv, &w->pool_bv), n, T, W, ph, pd), 0, 1, 3, 2, 4);
    const char *s = OP(g, "MatMul", OP(g, "Mul", q, og_const_f(g, 1.f / sqrtf((float)pd))), k);  /* [n, T, ph, 1, W] */
    if (c->pooling_mask == MACT_POOL_SDPA) s = OP(g, "Add", s, og_const_fv(g, bias, 4, I64(T, 1, 1, W)));
    free(idx); free(valid); free(div); free(bias);
    const char *att = OP(g, "MatMul", og_node(g, "Softmax", NULL, 1, IN(s), og_ai(g, "axis", -1), NULL), v);  /* [n, T, ph, 1, pd] */
    const char *pooled = linear(g, x, RESHAPE(g, att, n, T, (int64_t)ph * pd), "image_pooling_2d.wo", &w->pool_wo, &w->pool_bo);
    const char *e;
    if (!c->use_sampler) e = projector(g, x, pooled);
    else if (c->sampler_after_projector) e = sampler(g, x, projector(g, x, pooled), n, decomposed);
    else e = projector(g, x, sampler(g, x, pooled, n, decomposed));
    og_block(g, "vision.out");
    og_node(g, "Reshape", "image_embeds", 2, IN(e, og_const_i(g, 2, I64(-1, c->d_model))), NULL);
    og_output(g, "image_embeds", 2, I64((int64_t)n * c->tokens_per_image, c->d_model));
}

/* one component: <tmp>/<name>/<name>.onnx + <name>.onnx.data */
static int write_component(ctx *x, const char *tmp, const char *name, int kind, int a, int b, FILE *log, char *err, size_t el)
{
    char dir[4300], path[4400], dname[128];
    if (x->only && strcmp(x->only, name)) return 0;
    if (mact_export_fault(name, err, el)) return MACT_ERR_IO;
    snprintf(dir, sizeof dir, "%.4000s/%s", tmp, name);
    if (mkdir(dir, 0755)) { snprintf(err, el, "cannot create %.900s", dir); return MACT_ERR_IO; }
    snprintf(dname, sizeof dname, "%s.onnx.data", name);
    snprintf(path, sizeof path, "%.4200s/%.100s", dir, dname);
    FILE *df = fopen(path, "wb");
    if (!df) { snprintf(err, el, "cannot create %.900s", path); return MACT_ERR_IO; }
    og g;
    og_init(&g, df, dname, x->fp16);
    if (kind == 3) build_vision(&g, x, x->n_img, x->decomposed);
    else if (kind == 0) build_llm(&g, x, a, b);
    else if (kind == 1) build_context(&g, x);
    else build_step(&g, x);
    int bad = fclose(df) != 0 || g.failed || x->failed;
    size_t len = 0;
    char doc[512];
    snprintf(doc, sizeof doc, "mact export: %.40s of %.100s (opset 20, %s weights as external data in %.60s)", name,
             x->m->src.dir, x->fp16 ? "fp16" : "fp32", dname);
    uint8_t *buf = bad ? NULL : og_pack(&g, name, doc, &len);
    uint64_t nw = g.n_weights, db = g.data_off;
    size_t nn = g.n_node;
    og_free(&g);
    if (!buf) { snprintf(err, el, "%s: building the graph failed (out of memory or a write error)", name); return MACT_ERR_IO; }
    snprintf(path, sizeof path, "%.4200s/%.60s.onnx", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f)) ok = 0;
    free(buf);
    if (!ok) { snprintf(err, el, "cannot write %.900s", path); return MACT_ERR_IO; }
    if (log)
        fprintf(log, "%-16s %6zu nodes %12llu parameters  %s.onnx %zu bytes, %s %llu bytes\n", name, nn,
                (unsigned long long)nw, name, len, dname, (unsigned long long)db);
    return 0;
}

int mact_export_onnx(const mact_export_onnx_options *o, const char *out_dir, FILE *log, char *err, size_t el)
{
    mact_load_options lo = {.no_pack = 1, .precision = MACT_PRECISION_FP32};
    mact_model *m = NULL;
    int rc = mact_model_load(o->model_dir, &lo, &m, err, el);
    if (rc) return rc;
    const mact_config *c = &m->cfg;
    ctx x = {.m = m, .c = c, .seq_len = o->seq_len, .A = c->max_action_dim, .S = c->flow_steps,
             .fp16 = o->weights == MACT_EXPORT_FP16, .only = o->only};
    /* the horizon from the norm tag (as mact_predict), else max_action_horizon */
    x.H = c->max_action_horizon;
    x.n_img = 0;
    x.decomposed = o->grid_sample == MACT_EXPORT_GS_DECOMPOSED;
    size_t nt = mact_model_num_norm_tags(m);
    for (size_t i = 0; i < nt; i++) {
        mact_norm_tag_info ti;
        if (mact_model_norm_tag(m, i, &ti)) continue;
        if (o->norm_tag ? !strcmp(o->norm_tag, ti.name) : i == 0) {
            if (ti.action_horizon > 0) x.H = ti.action_horizon;
            if (ti.n_cameras > 0) x.n_img = ti.n_cameras;
            break;
        }
        if (o->norm_tag && i + 1 == nt) { snprintf(err, el, "no norm tag \"%.200s\" in norm_stats.json", o->norm_tag); mact_model_free(m); return MACT_ERR_INPUT; }
    }
    /* what the graphs cannot express is refused by name before anything is written */
    const char *why = NULL;
    if (c->ae_tdim % 2) why = "action_expert_config.timestep_embed_dim is odd";
    else if (c->n_heads % c->n_kv_heads) why = "text_config.num_attention_heads is not a multiple of num_key_value_heads";
    else if (o->seq_len && o->seq_len > c->max_position_embeddings) why = "--seq-len exceeds max_position_embeddings";
    else if (c->use_sampler && c->pooled_h != c->pooled_w) why = "the grid token sampler on a non-square pooled grid";
    else if (o->n_images > 64) why = "more than 64 cameras";
    if (o->n_images > 0) x.n_img = o->n_images;
    if (!x.n_img) x.n_img = 1;
    if (why) {
        snprintf(err, el, "unsupported for ONNX export: %s (nothing written)", why);
        mact_model_free(m);
        return MACT_ERR_UNSUPPORTED;
    }
    int ranges[MACT_EXPORT_MAX_SPLITS][2];
    int splits = mact_export_split_ranges(c->n_layers, o->splits ? o->splits : 4, ranges);
    if (o->only) {
        int ok = !strcmp(o->only, "vision") || !strcmp(o->only, "action_context") || !strcmp(o->only, "action_step");
        for (int i = 0; i < splits && !ok; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "llm_split%d", i);
            ok = !strcmp(o->only, nm);
        }
        if (!ok) {
            snprintf(err, el, "--only %.100s: not a component (vision, llm_split0..%d, action_context, action_step)", o->only, splits - 1);
            mact_model_free(m);
            return MACT_ERR_INPUT;
        }
    }
    char tmp[4200] = "";
    if ((rc = mact_export_begin(out_dir, tmp, sizeof tmp, err, el))) { mact_model_free(m); return rc; }
    rc = write_component(&x, tmp, "vision", 3, 0, 0, log, err, el);
    for (int i = 0; i < splits && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "llm_split%d", i);
        rc = write_component(&x, tmp, name, 0, ranges[i][0], ranges[i][1], log, err, el);
    }
    if (!rc) rc = write_component(&x, tmp, "action_context", 1, 0, 0, log, err, el);
    if (!rc) rc = write_component(&x, tmp, "action_step", 2, 0, 0, log, err, el);
    if (!rc) {
        char p[4300];
        snprintf(p, sizeof p, "%.4000s/export.json", tmp);
        FILE *f = fopen(p, "w");
        if (f) {
            fprintf(f, "{\"opset\": 20, \"weights\": \"%s\", \"seq_len\": %d, \"llm_splits\": [", x.fp16 ? "fp16" : "fp32", o->seq_len);
            for (int i = 0; i < splits; i++) fprintf(f, "%s[%d, %d]", i ? ", " : "", ranges[i][0], ranges[i][1]);
            fprintf(f, "], \"action_horizon\": %d, \"max_action_dim\": %d, \"num_steps\": %d, \"grid_sample\": \"%s\"}\n",
                    x.H, x.A, x.S, o->grid_sample == MACT_EXPORT_GS_DECOMPOSED ? "decomposed" : "native");
            if (fclose(f)) rc = MACT_ERR_IO;
        } else rc = MACT_ERR_IO;
        if (rc) snprintf(err, el, "cannot write %.900s", p);
    }
    if (!rc) { rc = mact_export_commit(tmp, out_dir, err, el); tmp[0] = 0; }
    if (tmp[0]) mact_export_abort(tmp);
    free(x.buf);
    mact_model_free(m);
    return rc;
}
