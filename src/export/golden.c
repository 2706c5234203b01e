/* mact export golden: the seed's golden file set (docs/design.md "Golden files") from one fp32 mact inference.
 * mact_predict gives the prompt ids, pixel values and noise of the inputs; every boundary is then re-run from
 * them through the stage calls (mact_stages.h), in one chain, exactly as `mact parity` runs them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "export/export.h"
#include "mact_stages.h"
#include "export/npz_write.h"
#include "io/npy.h"

typedef struct {
    mact_array a[8];
    size_t n;
} npz_set;

/* Adds a float32 member of the given shape, copied from src (NULL: zeros); returns its data. */
static float *add(npz_set *z, const char *name, int ndim, const int64_t *shape, const float *src, char *err, size_t el)
{
    mact_array *a = &z->a[z->n];
    if (mact_array_alloc(a, name, MACT_F32, ndim, shape, err, el)) return NULL;
    z->n++;
    if (src) memcpy(a->data, src, a->nbytes);
    return a->data;
}

static void drop(npz_set *z);

static int flush(npz_set *z, const char *dir, const char *file, char *err, size_t el)
{
    char p[4300];
    snprintf(p, sizeof p, "%.4000s/%s", dir, file);
    if (mact_export_fault(file, err, el)) { drop(z); return MACT_ERR_IO; }
    int rc = mact_npz_write(p, z->a, z->n, 0, err, el);
    for (size_t i = 0; i < z->n; i++) mact_array_free(&z->a[i]);
    z->n = 0;
    return rc ? MACT_ERR_IO : 0;
}

static void drop(npz_set *z)
{
    for (size_t i = 0; i < z->n; i++) mact_array_free(&z->a[i]);
    z->n = 0;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static const char *pool_name(mact_pool_mask p)
{
    return p == MACT_POOL_SDPA ? "sdpa" : p == MACT_POOL_EAGER ? "eager" : "none";
}

/* one export: the fp32 session, the inputs mact_predict chose and the chain's buffers (golden_free frees them) */
typedef struct {
    mact_model *m;
    mact_session *s;
    mact_model_info mi;
    npz_set z;
    float *actions, *pv, *noise, *emb, *hidden, *bias, *keys, *values, *kctx, *vctx, *traj, *loop, *e2e, *enc_f,
          *pad_f;
    int64_t *ids;
    uint8_t *enc, *pad;
    const float *pred_norm;  /* the predict path's actions_norm: valid until the next mact_predict (none follows) */
    int n_img, P, PD, N, H, A, adim, K, D, L, KV, AH, S;
    int splits, ranges[MACT_EXPORT_MAX_SPLITS][2], kept;
    double max_hidden, kv_diff;
} golden;

static void golden_free(golden *g)
{
    drop(&g->z);
    free(g->actions); free(g->pv); free(g->noise); free(g->emb); free(g->hidden); free(g->bias); free(g->keys);
    free(g->values); free(g->kctx); free(g->vctx); free(g->traj); free(g->loop); free(g->e2e); free(g->enc_f);
    free(g->pad_f); free(g->ids); free(g->enc); free(g->pad);
    mact_session_free(g->s);
    mact_model_free(g->m);
}

/* count elements of size bytes (at least one element), or NULL with "out of memory" in err */
static void *alloc_n(size_t count, size_t size, char *err, size_t el)
{
    void *p = malloc((count > 0 ? count : 1) * size);
    if (!p) snprintf(err, el, "out of memory");
    return p;
}

/* a stage call's status; on an error its message is the session's */
static int stage(const golden *g, int rc, char *err, size_t el)
{
    if (rc) snprintf(err, el, "%s", mact_session_error(g->s));
    return rc;
}

/* load the model in fp32 and run one mact_predict */
static int golden_predict(golden *g, const mact_export_golden_options *o, char *err, size_t el)
{
    int rc;
    mact_load_options lo = {.precision = MACT_PRECISION_FP32};
    if ((rc = mact_model_load(o->model_dir, &lo, &g->m, err, el))) return rc;
    mact_model_get_info(g->m, &g->mi);
    mact_session_options so = {.n_threads = o->threads, .max_images = o->n_frames > 4 ? o->n_frames : 4};
    if ((rc = mact_session_new(g->m, &so, &g->s, err, el))) return rc;
    size_t cap = (size_t)g->mi.max_action_horizon * g->mi.max_action_dim;
    if (!(g->actions = alloc_n(cap, sizeof *g->actions, err, el))) return MACT_ERR_NOMEM;
    mact_predict_input in = {.frames = o->frames, .n_frames = o->n_frames, .task = o->task, .state = o->state,
                             .state_dim = o->state_dim};
    in.options = (mact_predict_options){.norm_tag = o->norm_tag, .noise = o->noise, .noise_len = o->noise_len,
                                        .seed = o->seed};
    mact_predict_output res = {.actions = g->actions, .actions_cap = cap};
    if ((rc = stage(g, mact_predict(g->s, &in, &res), err, el))) return rc;
    g->adim = (int)res.action_dim;
    return 0;
}

/* copies of the prediction's pixel values, prompt ids and noise (the chain's inputs), and the sizes */
static int golden_inputs(golden *g, char *err, size_t el)
{
    mact_tensor_view v;
    mact_session_tensor(g->s, "pixel_values", &v);
    g->n_img = (int)v.shape[0];
    g->P = (int)v.shape[1];
    g->PD = (int)v.shape[2];
    size_t npv = (size_t)g->n_img * g->P * g->PD;
    if (!(g->pv = alloc_n(npv, sizeof *g->pv, err, el))) return MACT_ERR_NOMEM;
    memcpy(g->pv, v.data, npv * sizeof(float));
    mact_session_tensor(g->s, "input_ids", &v);
    const int N = g->N = (int)v.shape[0];
    if (!(g->ids = alloc_n((size_t)N, sizeof *g->ids, err, el))) return MACT_ERR_NOMEM;
    for (int i = 0; i < N; i++) g->ids[i] = (int64_t)v.data[i];
    mact_session_tensor(g->s, "noise", &v);
    const int H = g->H = (int)v.shape[0], A = g->A = g->mi.max_action_dim;
    if (!(g->noise = alloc_n((size_t)H * A, sizeof *g->noise, err, el))) return MACT_ERR_NOMEM;
    memcpy(g->noise, v.data, (size_t)H * A * sizeof(float));
    mact_session_tensor(g->s, "actions_norm", &v);
    g->pred_norm = v.data;
    g->K = g->mi.tokens_per_image;
    g->D = g->mi.d_model;
    g->L = g->mi.n_layers;
    g->KV = g->mi.kv_dim;
    g->AH = g->mi.ae_hidden;
    g->S = g->mi.flow_steps;
    return 0;
}

/* vision_io.npz */
static int write_vision(golden *g, const char *tmp, char *err, size_t el)
{
    const int n_img = g->n_img, K = g->K, D = g->D;
    int rc;
    if (!(g->emb = alloc_n((size_t)n_img * K * D, sizeof *g->emb, err, el))) return MACT_ERR_NOMEM;
    if ((rc = stage(g, mact_vision(g->s, g->pv, n_img, g->emb), err, el))) return rc;
    if (!add(&g->z, "pixel_values", 4, (int64_t[]){1, n_img, g->P, g->PD}, g->pv, err, el) ||
        !add(&g->z, "image_embeds", 2, (int64_t[]){(int64_t)n_img * K, D}, g->emb, err, el))
        return MACT_ERR_NOMEM;
    return flush(&g->z, tmp, "vision_io.npz", err, el);
}

/* llm_split<i>_io.npz: the decoder's layers in o->splits ranges, each from the hidden state the last one left;
 * keys / values [L, N, KV] fill up range by range */
static int write_llm_splits(golden *g, const mact_export_golden_options *o, const char *tmp, char *err, size_t el)
{
    const int N = g->N, D = g->D, L = g->L, KV = g->KV;
    int rc;
    g->splits = o->splits ? o->splits : 4;
    if (g->splits > MACT_EXPORT_MAX_SPLITS) g->splits = MACT_EXPORT_MAX_SPLITS;
    g->splits = mact_export_split_ranges(L, g->splits, g->ranges);
    size_t nh = (size_t)N * D, nkv = (size_t)L * N * KV;
    if (!(g->hidden = alloc_n(nh, sizeof *g->hidden, err, el)) ||
        !(g->bias = alloc_n((size_t)N * N, sizeof *g->bias, err, el)) ||
        !(g->keys = alloc_n(nkv, sizeof *g->keys, err, el)) || !(g->values = alloc_n(nkv, sizeof *g->values, err, el)))
        return MACT_ERR_NOMEM;
    if ((rc = stage(g, mact_embed(g->s, g->ids, N, g->emb, g->n_img * g->K, g->hidden), err, el)) ||
        (rc = stage(g, mact_attention_bias(g->s, g->ids, N, g->bias), err, el)))
        return rc;
    g->max_hidden = 0;
    for (int i = 0; i < g->splits; i++) {
        int a = g->ranges[i][0], b = g->ranges[i][1];
        char file[64];
        if (!add(&g->z, "hidden_states", 3, (int64_t[]){1, N, D}, g->hidden, err, el) ||
            !add(&g->z, "attention_bias", 4, (int64_t[]){1, 1, N, N}, g->bias, err, el))
            return MACT_ERR_NOMEM;
        float *kk = g->keys + (size_t)a * N * KV, *vv = g->values + (size_t)a * N * KV;
        if ((rc = stage(g, mact_llm_layers(g->s, g->hidden, g->bias, N, a, b, kk, vv), err, el))) return rc;
        for (size_t j = 0; j < nh; j++) if (fabs(g->hidden[j]) > g->max_hidden) g->max_hidden = fabs(g->hidden[j]);
        if (!add(&g->z, "hidden_out", 3, (int64_t[]){1, N, D}, g->hidden, err, el) ||
            !add(&g->z, "keys", 4, (int64_t[]){b - a, 1, N, KV}, kk, err, el) ||
            !add(&g->z, "values", 4, (int64_t[]){b - a, 1, N, KV}, vv, err, el))
            return MACT_ERR_NOMEM;
        snprintf(file, sizeof file, "llm_split%d_io.npz", i);
        if ((rc = flush(&g->z, tmp, file, err, el))) return rc;
    }
    mact_tensor_view v;
    mact_session_tensor(g->s, "keys", &v);  /* the predict path's own KV, for the log */
    g->kv_diff = max_abs_diff(g->keys, v.data, nkv);
    return 0;
}

/* action_context_io.npz */
static int write_action_context(golden *g, const char *tmp, char *err, size_t el)
{
    const int N = g->N, L = g->L, KV = g->KV, AH = g->AH;
    int rc;
    size_t nc = (size_t)L * N * AH;
    if (!(g->kctx = alloc_n(nc, sizeof *g->kctx, err, el)) || !(g->vctx = alloc_n(nc, sizeof *g->vctx, err, el)))
        return MACT_ERR_NOMEM;
    if ((rc = stage(g, mact_action_context(g->s, g->keys, g->values, N, g->kctx, g->vctx), err, el))) return rc;
    if (!add(&g->z, "keys", 4, (int64_t[]){L, 1, N, KV}, g->keys, err, el) ||
        !add(&g->z, "values", 4, (int64_t[]){L, 1, N, KV}, g->values, err, el) ||
        !add(&g->z, "k_ctx", 4, (int64_t[]){L, 1, N, AH}, g->kctx, err, el) ||
        !add(&g->z, "v_ctx", 4, (int64_t[]){L, 1, N, AH}, g->vctx, err, el))
        return MACT_ERR_NOMEM;
    return flush(&g->z, tmp, "action_context_io.npz", err, el);
}

/* action_step_io.npz: the chain of S single steps from the noise; the golden one is the last (t = (S-1)/S), its
 * input the trajectory the earlier steps left */
static int write_action_step(golden *g, const char *tmp, char *err, size_t el)
{
    const int N = g->N, H = g->H, A = g->A, L = g->L, AH = g->AH, S = g->S;
    int rc;
    if (!(g->enc = alloc_n((size_t)N, sizeof *g->enc, err, el)) ||
        !(g->enc_f = alloc_n((size_t)N, sizeof *g->enc_f, err, el)) ||
        !(g->pad = alloc_n((size_t)A, sizeof *g->pad, err, el)) ||
        !(g->pad_f = alloc_n((size_t)A, sizeof *g->pad_f, err, el)) ||
        !(g->traj = alloc_n((size_t)H * A, sizeof *g->traj, err, el)))
        return MACT_ERR_NOMEM;
    uint8_t *enc = g->enc, *pad = g->pad;
    float *traj = g->traj;
    if ((rc = stage(g, mact_encoder_mask(g->s, g->ids, N, enc), err, el))) return rc;
    g->kept = 0;
    for (int i = 0; i < N; i++) { g->enc_f[i] = enc[i] ? 1.f : 0.f; g->kept += enc[i] != 0; }
    for (int d = 0; d < A; d++) { pad[d] = d >= g->adim; g->pad_f[d] = pad[d] ? 1.f : 0.f; }
    for (int r = 0; r < H; r++)
        for (int d = 0; d < A; d++) traj[r * A + d] = pad[d] ? 0.f : g->noise[r * A + d];
    for (int k = 0; k + 1 < S; k++)
        if ((rc = stage(g, mact_action_step(g->s, traj, H, (float)k / (float)S, S, g->kctx, g->vctx, enc, N, pad),
                        err, el)))
            return rc;
    const float tlast = (float)(S - 1) / (float)S;
    if (!add(&g->z, "trajectory", 3, (int64_t[]){1, H, A}, traj, err, el) ||
        !add(&g->z, "timestep", 1, (int64_t[]){1}, &tlast, err, el) ||
        !add(&g->z, "k_ctx", 4, (int64_t[]){L, 1, N, AH}, g->kctx, err, el) ||
        !add(&g->z, "v_ctx", 4, (int64_t[]){L, 1, N, AH}, g->vctx, err, el) ||
        !add(&g->z, "encoder_attention_mask", 2, (int64_t[]){1, N}, g->enc_f, err, el) ||
        !add(&g->z, "action_dim_is_pad", 2, (int64_t[]){1, A}, g->pad_f, err, el))
        return MACT_ERR_NOMEM;
    if ((rc = stage(g, mact_action_step(g->s, traj, H, tlast, S, g->kctx, g->vctx, enc, N, pad), err, el))) return rc;
    if (!add(&g->z, "next_trajectory", 3, (int64_t[]){1, H, A}, traj, err, el)) return MACT_ERR_NOMEM;
    return flush(&g->z, tmp, "action_step_io.npz", err, el);
}

/* action_loop_io.npz: the whole loop in one call */
static int write_action_loop(golden *g, const char *tmp, char *err, size_t el)
{
    const int N = g->N, H = g->H, A = g->A, L = g->L, KV = g->KV;
    int rc;
    if (!(g->loop = alloc_n((size_t)H * A, sizeof *g->loop, err, el))) return MACT_ERR_NOMEM;
    memcpy(g->loop, g->noise, (size_t)H * A * sizeof(float));
    if ((rc = stage(g, mact_action_generate(g->s, g->loop, H, g->adim, g->S, g->keys, g->values, g->enc, N), err, el)))
        return rc;
    if (!add(&g->z, "keys", 4, (int64_t[]){L, 1, N, KV}, g->keys, err, el) ||
        !add(&g->z, "values", 4, (int64_t[]){L, 1, N, KV}, g->values, err, el) ||
        !add(&g->z, "encoder_attention_mask", 2, (int64_t[]){1, N}, g->enc_f, err, el) ||
        !add(&g->z, "noise", 3, (int64_t[]){1, H, A}, g->noise, err, el) ||
        !add(&g->z, "actions_norm", 3, (int64_t[]){1, H, A}, g->loop, err, el))
        return MACT_ERR_NOMEM;
    return flush(&g->z, tmp, "action_loop_io.npz", err, el);
}

/* e2e_io.npz: the whole path from ids, pixel values and noise in one call */
static int write_e2e(golden *g, const char *tmp, char *err, size_t el)
{
    const int N = g->N, H = g->H, A = g->A;
    int rc;
    if (!(g->e2e = alloc_n((size_t)H * A, sizeof *g->e2e, err, el))) return MACT_ERR_NOMEM;
    memcpy(g->e2e, g->noise, (size_t)H * A * sizeof(float));
    if ((rc = stage(g, mact_generate_from_ids(g->s, g->pv, g->n_img, g->ids, N, g->e2e, H, g->adim, g->S), err, el)))
        return rc;
    mact_array *a = &g->z.a[g->z.n];
    if (mact_array_alloc(a, "input_ids", MACT_I64, 2, (int64_t[]){1, N}, err, el)) return MACT_ERR_NOMEM;
    g->z.n++;
    memcpy(a->data, g->ids, (size_t)N * sizeof *g->ids);
    if (!add(&g->z, "pixel_values", 4, (int64_t[]){1, g->n_img, g->P, g->PD}, g->pv, err, el) ||
        !add(&g->z, "noise", 3, (int64_t[]){1, H, A}, g->noise, err, el) ||
        !add(&g->z, "actions_norm", 3, (int64_t[]){1, H, A}, g->e2e, err, el))
        return MACT_ERR_NOMEM;
    return flush(&g->z, tmp, "e2e_io.npz", err, el);
}

/* trace.json: how the set was made */
static int write_trace(const golden *g, const mact_export_golden_options *o, const char *tmp, char *err, size_t el)
{
    const mact_model_info *mi = &g->mi;
    cJSON *tr = cJSON_CreateObject();
    cJSON_AddStringToObject(tr, "preset", "mact export");
    if (o->noise) cJSON_AddNullToObject(tr, "seed");
    else cJSON_AddNumberToObject(tr, "seed", (double)o->seed);
    cJSON_AddStringToObject(tr, "model_dir", o->model_dir);
    cJSON_AddNumberToObject(tr, "n_images", g->n_img);
    cJSON_AddNumberToObject(tr, "seq_len", g->N);
    cJSON *sp = cJSON_AddArrayToObject(tr, "llm_splits");
    for (int i = 0; i < g->splits; i++) cJSON_AddItemToArray(sp, cJSON_CreateIntArray(g->ranges[i], 2));
    cJSON_AddNumberToObject(tr, "num_steps", g->S);
    cJSON_AddNumberToObject(tr, "action_horizon", g->H);
    cJSON_AddStringToObject(tr, "pooling_mask", pool_name(mi->pooling_mask));
    cJSON_AddStringToObject(tr, "encoder_mask", mi->encoder_mask == MACT_ENC_ALL ? "all" : "drop_eos");
    cJSON_AddBoolToObject(tr, "massive_activations", g->max_hidden >= 1e3);
    cJSON_AddNumberToObject(tr, "action_dim", g->adim);
    cJSON_AddNumberToObject(tr, "tokens_per_image", g->K);
    cJSON_AddNumberToObject(tr, "action_step_index", g->S - 1);
    cJSON_AddNumberToObject(tr, "max_abs_hidden", g->max_hidden);
    cJSON_AddNumberToObject(tr, "encoder_mask_kept", g->kept);
    cJSON_AddBoolToObject(tr, "has_sampler", mi->has_sampler);
    cJSON_AddStringToObject(tr, "task", o->task);
    cJSON_AddStringToObject(tr, "generator", "mact export golden (mact " MACT_VERSION_STRING ", fp32)");
    char *txt = cJSON_Print(tr);
    char p[4300];
    snprintf(p, sizeof p, "%.4000s/trace.json", tmp);
    FILE *f = txt ? fopen(p, "w") : NULL;
    int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = 0;
    cJSON_free(txt);
    cJSON_Delete(tr);
    if (!ok) { snprintf(err, el, "cannot write %.900s", p); return MACT_ERR_IO; }
    return 0;
}

int mact_export_golden(const mact_export_golden_options *o, const char *out_dir, FILE *log, char *err, size_t el)
{
    char tmp[4200] = "";
    golden g = {0};
    int rc;
    if ((rc = golden_predict(&g, o, err, el))) goto out;
    /* the model loaded and the inputs were accepted: only now is anything written */
    if ((rc = mact_export_begin(out_dir, tmp, sizeof tmp, err, el)) || (rc = golden_inputs(&g, err, el)) ||
        (rc = write_vision(&g, tmp, err, el)) || (rc = write_llm_splits(&g, o, tmp, err, el)) ||
        (rc = write_action_context(&g, tmp, err, el)) || (rc = write_action_step(&g, tmp, err, el)) ||
        (rc = write_action_loop(&g, tmp, err, el)) || (rc = write_e2e(&g, tmp, err, el)))
        goto out;
    const size_t n = (size_t)g.H * g.A;
    double step_vs_loop = max_abs_diff(g.traj, g.loop, n), e2e_vs_loop = max_abs_diff(g.e2e, g.loop, n);
    double pred_vs_loop = max_abs_diff(g.pred_norm, g.loop, n);
    if ((rc = write_trace(&g, o, tmp, err, el)) || (rc = mact_export_commit(tmp, out_dir, err, el))) goto out;
    tmp[0] = 0;
    if (log)
        fprintf(log, "wrote %s: N=%d K=%d n_img=%d splits=%d steps=%d H=%d A=%d action_dim=%d pooling=%s "
                "encoder_mask=%s (kept %d/%d) max|hidden|=%.4g; chain vs predict: keys max diff %.3g, actions_norm "
                "max diff %.3g; steps vs loop %.3g; e2e vs loop %.3g\n", out_dir, g.N, g.K, g.n_img, g.splits, g.S,
                g.H, g.A, g.adim, pool_name(g.mi.pooling_mask), g.mi.encoder_mask == MACT_ENC_ALL ? "all" : "drop_eos",
                g.kept, g.N, g.max_hidden, g.kv_diff, pred_vs_loop, step_vs_loop, e2e_vs_loop);
out:
    if (tmp[0]) mact_export_abort(tmp);
    golden_free(&g);
    return rc;
}
