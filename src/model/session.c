/* The session: every activation buffer of every stage, planned once from the config and the session
 * options and carved out of one allocation, so inference itself never allocates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/checked.h"
#include "kernels/kernels.h"
#include "model/session.h"

int mact_session_fail(struct mact_session *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return code;
}

const char *mact_session_error(const mact_session *s) { return s ? s->err : "no session"; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* one activation buffer: where its pointer goes, its size in floats */
typedef struct { float **dst; int64_t n; } plan_item;

/* the session's threads: the caller's pool, or one of its own (more threads than CPUs only lose) */
static int session_pool(struct mact_session *s, const mact_session_options *opt, mact_threadpool **pool, char *err,
                        size_t errlen)
{
    *pool = opt ? opt->threadpool : NULL;
    if (*pool) return 0;
    int nt = opt && opt->n_threads > 0 ? opt->n_threads : mact_cpu_count();
    if (nt > mact_cpu_count()) nt = mact_cpu_count();
    int rc = mact_threadpool_new(nt, &s->own_pool, err, errlen);
    if (rc) return rc;
    *pool = s->own_pool;
    return 0;
}

/* the kernels' context on pool, its scratch sized for the most rows any GEMM has; nonzero: out of memory */
static int session_kernels(struct mact_session *s, mact_threadpool *pool)
{
    const mact_model *m = s->m;
    const mact_config *c = &m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, T = (int64_t)c->pooled_h * c->pooled_w;
    const int64_t W = (int64_t)c->pool_h * c->pool_w, N = s->max_tokens, H = c->max_action_horizon;
    /* the GEMMs' rows: ViT patches, pooling keys, prompt tokens, action rows */
    const int64_t rows = max64(max64(P, T * W), max64(N, H));
    return mact_kctx_init(&s->kc, m->ops, m->kprec, pool, mact_gemm_scratch0(rows, m->max_k),
                          mact_gemm_scratch0(32, m->max_k), mact_gemm_scratch1(rows),
                          m->kprec == MACT_PRECISION_INT8 ? mact_i8_split_scratch(rows, m->max_n, m->max_k) : 0);
}

/* The plan's buffers carved out of one 64-byte aligned arena, in plan order. The items before vj_z are zeroed
 * here; the vjp tape from vj_z on is left unwritten (s->vj_bytes: mact_rtc_vjp zeroes it on its first use). */
static int carve_arena(struct mact_session *s, const plan_item *plan, size_t n_items, char *err, size_t errlen)
{
    size_t first_lazy = 0;
    while (plan[first_lazy].dst != &s->vj_z) first_lazy++;  /* vj_z is in the plan: the loop ends there */
    size_t total = 0, bytes = 0;
    /* every item 64-byte aligned; the sum formed overflow-safe, so the arena's size does not depend on
     * config.c's bounds to be right (a size past the address space is MACT_ERR_NOMEM) */
    int wrap = 0;
    size_t eager = 0;  /* floats before the first lazy item */
    for (size_t i = 0; i < n_items; i++) {
        if (i == first_lazy) eager = total;
        wrap |= plan[i].n < 0 || mact_size_add(total, ((size_t)plan[i].n + 15) & ~(size_t)15, &total);
    }
    wrap |= mact_size_mul(total, sizeof(float), &bytes);
    if (wrap)
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "the activations this model and these session options need "
                         "exceed the address space");
    s->arena = aligned_alloc(64, bytes);
    if (!s->arena) return mact_errf(err, errlen, MACT_ERR_NOMEM, "cannot allocate %zu MiB of activations", bytes >> 20);
    mact_advise_huge(s->arena, eager * sizeof(float));
    memset(s->arena, 0, eager * sizeof(float));
    s->vj_bytes = (total - eager) * sizeof(float);
    s->arena_floats = total;
    float *p = s->arena;
    for (size_t i = 0; i < n_items; i++) {
        *plan[i].dst = p;
        p += ((size_t)plan[i].n + 15) & ~(size_t)15;
    }
    s->mod_steps = 0;
    return 0;
}

/* Every activation buffer of every stage, sized from the config and the session's bounds (images, tokens), then
 * carved out of the arena. */
static int plan_activations(struct mact_session *s, char *err, size_t errlen)
{
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, VH = c->vit_hidden, VQ = (int64_t)c->vit_heads * c->vit_head_dim;
    const int64_t T = (int64_t)c->pooled_h * c->pooled_w, W = (int64_t)c->pool_h * c->pool_w;
    const int64_t PIN = (int64_t)c->n_taps * VH, PQ = (int64_t)c->pool_heads * c->pool_head_dim;
    const int64_t PD = (int64_t)c->patch * c->patch * 3, D = c->d_model;
    const int64_t N = s->max_tokens, qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t H = c->max_action_horizon, AH = c->ae_hidden, L = c->n_layers;
    const int64_t SC = c->use_sampler ? c->sampler_c : 0, K = c->use_sampler ? c->sampler_k : 0;
    const int64_t maxkeys = max64(max64(P, N), max64(W, H));
    const int64_t nthr = s->kc.n_threads;
    s->mod_cache_steps = MACT_MOD_CACHE_STEPS;
    /* the packed cross-attention context exists only where the bf16 attention path can run */
    const int64_t kvp_stride = mact_attention_packable(&s->kc, H, N, c->ae_head_dim)
                                   ? mact_attention_kv_packed_size(N, c->ae_heads, c->ae_head_dim)
                                   : 0;
    s->a_kvp_stride = kvp_stride;
    /* the vjp's transposed products: columns up to the widest of ae_hidden, ae_inter, max_action_dim, head dim */
    const int64_t vkp = (max64(max64(AH, c->ae_inter), max64(c->max_action_dim, c->ae_head_dim)) + 63) / 64 * 64;
    s->vj_panel_stride = (int64_t)MACT_VJP_NR * vkp;
    plan_item plan[] = {
        {&s->v_pix, P * PD},
        {&s->v_x, P * VH},
        {&s->v_h, P * max64(VH, VQ)},
        {&s->v_q, max64(P * VQ, T * PQ)},
        {&s->v_k, max64(P * VQ, T * W * PQ)},
        {&s->v_v, max64(P * VQ, T * W * PQ)},
        {&s->v_att, max64(P * VQ, T * PQ)},
        {&s->v_ff, max64(P * c->vit_inter, 2 * max64(T, K) * c->proj_inter)},
        {&s->v_taps, P * PIN},
        {&s->v_gather, T * W * PIN},
        {&s->v_query, T * PIN},
        {&s->v_pooled, T * c->pool_hidden},
        {&s->v_proj, max64(T * D, K * SC)},
        {&s->v_samp, K * max64(SC, D) + max64(SC, 1) * 2 +
                         (int64_t)(c->use_sampler ? c->sampler_hidden + c->coord_hidden : 0) + 4 * K + 16},
        {&s->l_h, N * D},
        {&s->l_qkv, N * (qd + 2 * kvd)},
        {&s->l_att, N * qd},
        {&s->l_ff, N * 2 * (int64_t)c->ff_inter},
        {&s->l_rope_cos, N * c->head_dim / 2},
        {&s->l_rope_sin, N * c->head_dim / 2},
        {&s->a_z, H * AH},
        {&s->a_u, H * AH},
        {&s->a_qkv, H * 3 * AH},
        {&s->a_att, H * AH},
        {&s->a_ff, H * 2 * (int64_t)c->ae_inter},
        {&s->a_mod, (int64_t)MACT_MOD_CACHE_STEPS * (L * 9 + 2) * AH + (L * 9 + 2) * AH},
        {&s->a_cond, 4 * max64(AH, c->ae_tdim)},
        {&s->a_rope_cos, H * c->ae_head_dim / 2},
        {&s->a_rope_sin, H * c->ae_head_dim / 2},
        {&s->a_vel, H * c->max_action_dim},
        {&s->a_pad, (c->max_action_dim + 3) / 4},
        {&s->a_rtc_y, H * c->max_action_dim},
        {&s->a_rtc_w, H},
        {&s->a_rtc_e, H * c->max_action_dim},
        {&s->rtc_prev, H * c->max_action_dim},
        {&s->a_kctx, L * N * AH},
        {&s->a_vctx, L * N * AH},
        {&s->a_kvp, L * kvp_stride},
        {&s->p_embeds, (int64_t)s->max_images * c->tokens_per_image * D},
        {&s->p_hidden, N * D},
        {&s->p_bias, N * N},
        {&s->p_keys, L * N * kvd},
        {&s->p_values, L * N * kvd},
        {&s->scores, nthr * mact_attention_scratch(maxkeys)},
        {&s->maskf, N + W + H + 16},
        /* RTC's vjp tape last: left unwritten here (zeroed on its first use, mact_rtc_vjp), so a session that
         * never runs vjp guidance keeps those pages unmapped (tens of MB at full size) */
        {&s->vj_z, (3 * L + 1) * H * AH},
        {&s->vj_qkv, L * H * 3 * AH},
        {&s->vj_qk, L * H * 2 * AH},
        {&s->vj_p, L * c->ae_heads * H * H},
        {&s->vj_xq, L * H * AH},
        {&s->vj_xqn, L * H * AH},
        {&s->vj_gate, L * H * c->ae_inter},
        {&s->vj_up, L * H * c->ae_inter},
        {&s->vj_u, H * AH},
        {&s->vj_att, H * AH},
        {&s->vj_t1, H * c->ae_inter},
        {&s->vj_t2, H * max64(c->ae_inter, 3 * AH)},
        {&s->vj_gz, H * AH},
        {&s->vj_gu, H * AH},
        {&s->vj_gq, H * AH},
        {&s->vj_kt, N * c->ae_head_dim},
        {&s->vj_vt, N * c->ae_head_dim},
        {&s->vj_s, H * N},
        {&s->vj_dp, H * max64(N, H)},
        {&s->vj_gx, H * c->max_action_dim},
        {&s->vj_part, (int64_t)MACT_VJP_PARTS * H * vkp},
        {&s->vj_panel, nthr * s->vj_panel_stride},
    };
    return carve_arena(s, plan, sizeof plan / sizeof plan[0], err, errlen);
}

/* the buffers outside the arena: the frames' pixel values, the resized image, the prompt, noise and trajectory */
static int alloc_buffers(struct mact_session *s, char *err, size_t errlen)
{
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3, N = s->max_tokens;
    size_t hw = (size_t)c->image_h * c->image_w * 3, ha = (size_t)c->max_action_horizon * c->max_action_dim;
    s->pv = malloc((size_t)s->max_images * P * PD * sizeof(float));
    s->resized = malloc(hw);
    s->ids = malloc((size_t)N * sizeof(int64_t));
    s->ids_f = malloc((size_t)N * sizeof(float));
    s->text = malloc(MACT_PROMPT_TEXT_CAP);
    s->noise = malloc(ha * sizeof(float));
    s->traj = malloc(ha * sizeof(float));
    if (!s->pv || !s->resized || !s->ids || !s->ids_f || !s->text || !s->noise || !s->traj)
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory for the session's buffers");
    return 0;
}

mact_status mact_session_new(const mact_model *m, const mact_session_options *opt, mact_session **out, char *err,
                             size_t errlen)
{
    if (!out) return mact_errf(err, errlen, MACT_ERR_INPUT, "mact_session_new: out is NULL");
    *out = NULL;
    if (!m) return mact_errf(err, errlen, MACT_ERR_INPUT, "mact_session_new: model is NULL");
    const mact_config *c = &m->cfg;
    size_t max_images = opt && opt->max_images ? opt->max_images : MACT_DEFAULT_MAX_IMAGES;
    size_t max_tokens = opt && opt->max_tokens ? opt->max_tokens : MACT_DEFAULT_MAX_TOKENS;
    if (max_tokens > (size_t)c->max_position_embeddings) max_tokens = (size_t)c->max_position_embeddings;
    /* the image bound keeps every [max_images, ...] buffer size and the prompt's image tokens in int range */
    if (max_images > 256)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "max_images %zu: a session takes at most 256 frames", max_images);
    struct mact_session *s = calloc(1, sizeof *s);
    if (!s) return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory");
    s->m = m;
    s->max_images = (int)max_images;
    s->max_tokens = (int)max_tokens;
    mact_threadpool *pool;
    int rc = session_pool(s, opt, &pool, err, errlen);
    if (rc) {
        free(s);
        return rc;
    }
    if (session_kernels(s, pool)) {
        mact_session_free(s);
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory for the kernels' scratch");
    }
    if ((rc = plan_activations(s, err, errlen)) || (rc = alloc_buffers(s, err, errlen))) {
        mact_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void mact_session_free(mact_session *s)
{
    if (!s) return;
    mact_kctx_free(&s->kc);
    mact_threadpool_free(s->own_pool);
    free(s->arena);
    free(s->pv); free(s->resized); free(s->ids); free(s->ids_f); free(s->text); free(s->noise); free(s->traj);
    free(s);
}

void mact_session_enter(struct mact_session *s) { s->err[0] = 0; }

int mact_session_threads(const mact_session *s) { return s ? s->kc.n_threads : 0; }

int mact_check_finite(struct mact_session *s, const float *x, int64_t n, const char *what)
{
    /* blocks without an early exit (the compiler vectorizes the exponent test); the element is located only
     * in a block that has one. The inputs are tens of MB (per-layer keys and values). */
    typedef uint32_t v4u __attribute__((vector_size(16)));
    const v4u ex = {0x7f800000u, 0x7f800000u, 0x7f800000u, 0x7f800000u};
    for (int64_t b = 0; b < n; b += 4096) {
        const int64_t e = b + 4096 < n ? b + 4096 : n;
        v4u bad = {0, 0, 0, 0};
        int64_t i = b;
        for (; i + 4 <= e; i += 4) {
            v4u v;
            memcpy(&v, x + i, sizeof v);
            bad |= (v4u)((v & ex) == ex);
        }
        uint32_t any = bad[0] | bad[1] | bad[2] | bad[3];
        for (; i < e; i++) any |= !isfinite(x[i]);
        if (!any) continue;
        for (int64_t i = b; i < e; i++)
            if (!isfinite(x[i]))
                return mact_session_fail(s, MACT_ERR_INPUT, "%s has a non-finite value (%g) at element %lld", what,
                                         (double)x[i], (long long)i);
    }
    return 0;
}

const mact_model *mact_session_model(const mact_session *s) { return s ? s->m : NULL; }
