/* Vision stage (docs/spec/molmoact2.md 3.1-3.4): pixel_values -> ViT -> tapped features -> 2x2 attention pooling ->
 * SwiGLU projector, with the grid token sampler before or after the projector when present.
 * Each image runs alone through the session's single-image buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "mact_stages.h"
#include "io/image.h"
#include "kernels/kernels.h"
#include "model/session.h"

/* the per-block probe of mact_vit_block_energy: energies summed in, the block's input kept in x_in */
typedef struct {
    double *in_sq, *delta_sq;
    float *x_in;
} mact_vit_probe;

static void add_inplace(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* ViT over one image; leaves the concatenated taps [P, n_taps * VH] in s->v_taps. With a probe (prune-analyze)
 * it runs every stored block and adds each block's input and residual-update energies to it; without one
 * (every inference path) it computes exactly what it always did. */
static void vit_forward(struct mact_session *s, const float *pix, const mact_vit_probe *probe)
{
    const mact_config *c = &s->m->cfg;
    const mact_vision_weights *w = &s->m->vis;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, VH = c->vit_hidden, VQ = (int64_t)c->vit_heads * c->vit_head_dim;
    const int64_t PD = (int64_t)c->patch * c->patch * 3, PIN = (int64_t)c->n_taps * VH;
    /* Upstream snaps float pixels back onto the uint8 grid (docs/spec/molmoact2.md 3.2); identity for uint8-derived input. */
    for (int64_t i = 0; i < P * PD; i++) s->v_pix[i] = rintf((pix[i] + 1.f) / 2.f * 255.f) / 255.f * 2.f - 1.f;
    float *x = s->v_x;
    mact_matmul(&s->kc, x, s->v_pix, &w->patch_w, mact_f32(&w->patch_b), P);
    add_inplace(x, mact_f32(&w->pos_emb), P * VH);
    int last = 0;  /* blocks after the deepest tap feed nothing */
    for (int t = 0; t < c->n_taps; t++) if (c->taps[t] > last) last = c->taps[t];
    if (probe) last = c->vit_layers - 1;
    const float scale = 1.f / sqrtf((float)c->vit_head_dim);
    for (int j = 0; j <= last; j++) {
        const mact_vit_block *b = &w->blocks[j];
        if (probe) memcpy(probe->x_in, x, (size_t)(P * VH) * sizeof(float));
        mact_layernorm(&s->kc, s->v_h, x, mact_f32(&b->attention_norm_w), mact_f32(&b->attention_norm_b), c->vit_eps, P, VH);
        mact_matmul(&s->kc, s->v_q, s->v_h, &b->wq, mact_f32(&b->bq), P);
        mact_matmul(&s->kc, s->v_k, s->v_h, &b->wk, mact_f32(&b->bk), P);
        mact_matmul(&s->kc, s->v_v, s->v_h, &b->wv, mact_f32(&b->bv), P);
        mact_attention(&s->kc, s->v_att, VQ, s->v_q, VQ, s->v_k, s->v_v, VQ, P, P, c->vit_heads, c->vit_heads,
                       c->vit_head_dim, scale, NULL, NULL, s->scores);
        mact_matmul_residual(&s->kc, x, s->v_att, &b->wo, mact_f32(&b->bo), P);  /* x += attn . Wo^T + bo */
        mact_layernorm(&s->kc, s->v_h, x, mact_f32(&b->ffn_norm_w), mact_f32(&b->ffn_norm_b), c->vit_eps, P, VH);
        mact_matmul_gelu(&s->kc, s->v_ff, s->v_h, &b->w1, mact_f32(&b->b1), P);
        mact_matmul_residual(&s->kc, x, s->v_ff, &b->w2, mact_f32(&b->b2), P);
        if (probe)
            for (int64_t i = 0; i < P * VH; i++) {
                const double a = probe->x_in[i], d = (double)x[i] - a;
                probe->in_sq[j] += a * a;
                probe->delta_sq[j] += d * d;
            }
        for (int t = 0; t < c->n_taps; t++)
            if (c->taps[t] == j)
                for (int64_t r = 0; r < P; r++) memcpy(s->v_taps + r * PIN + t * VH, x + r * VH, VH * sizeof(float));
    }
}

/* 2x2 attention pooling over the padded patch grid (docs/spec/molmoact2.md 3.2, mask variants docs/spec/molmoact2.md 7.3) -> s->v_pooled. */
static void pool_forward(struct mact_session *s)
{
    const mact_config *c = &s->m->cfg;
    const mact_vision_weights *w = &s->m->vis;
    const int64_t T = (int64_t)c->pooled_h * c->pooled_w, W = (int64_t)c->pool_h * c->pool_w;
    const int64_t PIN = (int64_t)c->n_taps * c->vit_hidden, PQ = (int64_t)c->pool_heads * c->pool_head_dim;
    /* The 27-patch side is padded to 28 with the pad at the bottom/right (top = pad / 2 = 0). */
    const int pad_top = (c->pooled_h * c->pool_h - c->grid_h) / 2, pad_left = (c->pooled_w * c->pool_w - c->grid_w) / 2;
    uint8_t validbuf[16];  /* W <= 16: config.c caps the pooling window at 4x4 */
    for (int64_t t = 0; t < T; t++) {
        int ti = (int)(t / c->pooled_w), tj = (int)(t % c->pooled_w), nv = 0;
        float *q = s->v_query + t * PIN;
        memset(q, 0, PIN * sizeof(float));
        for (int64_t k = 0; k < W; k++) {
            int r = ti * c->pool_h + (int)(k / c->pool_w) - pad_top, cc = tj * c->pool_w + (int)(k % c->pool_w) - pad_left;
            float *g = s->v_gather + (t * W + k) * PIN;
            if (r >= 0 && r < c->grid_h && cc >= 0 && cc < c->grid_w) {
                memcpy(g, s->v_taps + ((int64_t)r * c->grid_w + cc) * PIN, PIN * sizeof(float));
                nv++;
            } else memset(g, 0, PIN * sizeof(float));
            for (int64_t i = 0; i < PIN; i++) q[i] += g[i];
        }
        float div = c->pooling_mask == MACT_POOL_NONE ? (float)W : (float)(nv ? nv : 1);
        for (int64_t i = 0; i < PIN; i++) q[i] /= div;
    }
    mact_matmul(&s->kc, s->v_q, s->v_query, &w->pool_wq, mact_f32(&w->pool_bq), T);
    mact_matmul(&s->kc, s->v_k, s->v_gather, &w->pool_wk, mact_f32(&w->pool_bk), T * W);
    mact_matmul(&s->kc, s->v_v, s->v_gather, &w->pool_wv, mact_f32(&w->pool_bv), T * W);
    const float scale = 1.f / sqrtf((float)c->pool_head_dim);
    for (int64_t t = 0; t < T; t++) {
        const uint8_t *ok = NULL;
        if (c->pooling_mask == MACT_POOL_SDPA) {
            int ti = (int)(t / c->pooled_w), tj = (int)(t % c->pooled_w);
            for (int64_t k = 0; k < W; k++) {
                int r = ti * c->pool_h + (int)(k / c->pool_w) - pad_top, cc = tj * c->pool_w + (int)(k % c->pool_w) - pad_left;
                validbuf[k] = r >= 0 && r < c->grid_h && cc >= 0 && cc < c->grid_w;
            }
            ok = validbuf;
        }
        mact_attention(&s->kc, s->v_att + t * PQ, PQ, s->v_q + t * PQ, PQ, s->v_k + t * W * PQ, s->v_v + t * W * PQ, PQ, 1, W,
                       c->pool_heads, c->pool_heads, c->pool_head_dim, scale, NULL, ok, s->scores);
    }
    mact_matmul(&s->kc, s->v_pooled, s->v_att, &w->pool_wo, mact_f32(&w->pool_bo), T);
}

/* SwiGLU projector on rows [n, pool_hidden] -> out [n, d_model]. */
static void project(struct mact_session *s, const float *in, int64_t n, float *out)
{
    const mact_config *c = &s->m->cfg;
    const mact_vision_weights *w = &s->m->vis;
    const int64_t I = c->proj_inter;
    float *a = s->v_ff, *g = s->v_ff + n * I;
    mact_matmul(&s->kc, a, in, &w->proj_w1, NULL, n);
    mact_matmul(&s->kc, g, in, &w->proj_w3, NULL, n);
    mact_silu_mul(&s->kc, a, a, g, n * I);
    mact_matmul(&s->kc, out, a, &w->proj_w2, NULL, n);
}

/* Grid token sampler (docs/spec/molmoact2.md 3.4) on feat [T, C] (row-major over the pooled grid) -> out [K, C]. The
 * bilinear read mirrors F.grid_sample(bilinear, align_corners=False, zeros). */
static void sample_tokens(struct mact_session *s, const float *feat, float *out)
{
    const mact_config *c = &s->m->cfg;
    const mact_vision_weights *w = &s->m->vis;
    const int64_t T = (int64_t)c->pooled_h * c->pooled_w, C = c->sampler_c, K = c->sampler_k;
    const int GH = c->pooled_h, GW = c->pooled_w;
    float *g = s->v_samp, *hid = g + C, *pts = hid + c->sampler_hidden, *ch = pts + 2 * K;
    for (int64_t i = 0; i < C; i++) g[i] = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < C; i++) g[i] += feat[t * C + i];
    for (int64_t i = 0; i < C; i++) g[i] /= (float)T;
    mact_matmul(&s->kc, hid, g, &w->scout0_w, mact_f32(&w->scout0_b), 1);
    for (int i = 0; i < c->sampler_hidden; i++) hid[i] = !(hid[i] <= 0) ? hid[i] : 0;  /* ReLU keeping NaN */
    mact_matmul(&s->kc, pts, hid, &w->scout2_w, mact_f32(&w->scout2_b), 1);
    for (int64_t i = 0; i < 2 * K; i++) pts[i] = 1.f / (1.f + expf(-pts[i]));
    const float *c0w = mact_f32(&w->coord0_w), *c0b = mact_f32(&w->coord0_b);
    for (int64_t k = 0; k < K; k++) {
        float px = pts[2 * k], py = pts[2 * k + 1];
        float *o = out + k * C;
        if (!isfinite(px) || !isfinite(py)) {  /* a NaN point: the token is NaN (never a silent zero) */
            for (int64_t i = 0; i < C; i++) o[i] = NAN;
            continue;
        }
        float gx = 2.f * px - 1.f, gy = 2.f * py - 1.f;
        float ix = ((gx + 1.f) * GW - 1.f) / 2.f, iy = ((gy + 1.f) * GH - 1.f) / 2.f;
        int x0 = (int)floorf(ix), y0 = (int)floorf(iy);
        float wx = ix - x0, wy = iy - y0;
        for (int64_t i = 0; i < C; i++) o[i] = 0;
        const int xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
        const float ws[4] = {(1 - wx) * (1 - wy), wx * (1 - wy), (1 - wx) * wy, wx * wy};
        for (int q = 0; q < 4; q++) {
            if (xs[q] < 0 || xs[q] >= GW || ys[q] < 0 || ys[q] >= GH) continue;  /* zero padding */
            const float *f = feat + ((int64_t)ys[q] * GW + xs[q]) * C;
            for (int64_t i = 0; i < C; i++) o[i] += ws[q] * f[i];
        }
        for (int j = 0; j < c->coord_hidden; j++) {
            float v = c0w[j * 2] * px + c0w[j * 2 + 1] * py + c0b[j];
            ch[j] = !(v <= 0) ? v : 0;
        }
        mact_matmul_ex(&s->kc, g, C, ch, c->coord_hidden, &w->coord2_w, mact_f32(&w->coord2_b), 1, C, c->coord_hidden);
        for (int64_t i = 0; i < C; i++) o[i] += g[i];
    }
}

mact_status mact_vision(mact_session *s, const float *pixel_values, int n_img, float *image_embeds)
{
    mact_session_enter(s);
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3;
    if (n_img < 1 || n_img > s->max_images)
        return mact_session_fail(s, MACT_ERR_INPUT, "vision: %d images; this session takes 1..%d", n_img, s->max_images);
    if (!pixel_values || !image_embeds) return mact_session_fail(s, MACT_ERR_INPUT, "vision: NULL buffer");
    int rc = mact_check_finite(s, pixel_values, n_img * P * PD, "vision: pixel_values");
    if (rc) return rc;
    mact_vision_run(s, pixel_values, n_img, image_embeds);
    return 0;
}

void mact_vision_run(struct mact_session *s, const float *pixel_values, int n_img, float *image_embeds)
{
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3, D = c->d_model;
    const int64_t T = (int64_t)c->pooled_h * c->pooled_w, K = c->tokens_per_image;
    for (int im = 0; im < n_img; im++) {
        vit_forward(s, pixel_values + im * P * PD, NULL);
        pool_forward(s);
        float *dst = image_embeds + im * K * D;
        if (!c->use_sampler) project(s, s->v_pooled, T, dst);
        else if (c->sampler_after_projector) {
            project(s, s->v_pooled, T, s->v_proj);
            sample_tokens(s, s->v_proj, dst);
        } else {
            /* sampler on the pooled features; v_proj holds the K sampled rows before projecting */
            sample_tokens(s, s->v_pooled, s->v_proj);
            project(s, s->v_proj, K, dst);
        }
    }
}

mact_status mact_vit_block_energy(mact_session *s, const float *pixel_values, double *in_sq, double *delta_sq)
{
    if (!s) return MACT_ERR_INPUT;
    mact_session_enter(s);
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3;
    if (!pixel_values || !in_sq || !delta_sq) return mact_session_fail(s, MACT_ERR_INPUT, "vit_block_energy: NULL buffer");
    int rc = mact_check_finite(s, pixel_values, P * PD, "vit_block_energy: pixel_values");
    if (rc) return rc;
    /* the block's input, kept while it runs: an analysis's scratch, not the inference path's */
    float *x_in = malloc((size_t)(P * c->vit_hidden) * sizeof(float));
    if (!x_in) return mact_session_fail(s, MACT_ERR_NOMEM, "vit_block_energy: out of memory");
    const mact_vit_probe probe = {in_sq, delta_sq, x_in};
    vit_forward(s, pixel_values, &probe);
    free(x_in);
    return MACT_OK;
}

mact_status mact_pixel_values(const mact_model *m, const mact_frame *f, float *pv, size_t cap, char *err, size_t el)
{
    if (!m || !f || !pv) return mact_errf(err, el, MACT_ERR_INPUT, "mact_pixel_values: a NULL argument");
    const mact_config *c = &m->cfg;
    if (!f->rgb || f->height < 1 || f->width < 1) return mact_errf(err, el, MACT_ERR_INPUT, "the frame is empty");
    return (mact_status)mact_image_preprocess(f->rgb, f->height, f->width, c->image_h, c->image_w, c->patch, pv, cap,
                                              err, el);
}
