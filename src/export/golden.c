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

#define TRY(x) do { if ((rc = (x))) goto out; } while (0)
#define STAGE(call) do { if ((rc = (call))) { snprintf(err, el, "%s", mact_session_error(s)); goto out; } } while (0)
#define NEWF(ptr, count) do { if (!((ptr) = malloc(((count) > 0 ? (count) : 1) * sizeof *(ptr)))) { rc = MACT_ERR_NOMEM; snprintf(err, el, "out of memory"); goto out; } } while (0)

int mact_export_golden(const mact_export_golden_options *o, const char *out_dir, FILE *log, char *err, size_t el)
{
    char tmp[4200] = "";
    int rc = 0;
    mact_model *m = NULL;
    mact_session *s = NULL;
    npz_set z = {0};
    float *actions = NULL, *pv = NULL, *noise = NULL, *emb = NULL, *hidden = NULL, *bias = NULL, *keys = NULL,
          *values = NULL, *kctx = NULL, *vctx = NULL, *traj = NULL, *loop = NULL, *e2e = NULL, *enc_f = NULL,
          *pad_f = NULL;
    int64_t *ids = NULL;
    uint8_t *enc = NULL, *pad = NULL;
    cJSON *tr = NULL;
    char *txt = NULL;
    mact_load_options lo = {.precision = MACT_PRECISION_FP32};
    TRY(mact_model_load(o->model_dir, &lo, &m, err, el));
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    mact_session_options so = {.n_threads = o->threads, .max_images = o->n_frames > 4 ? o->n_frames : 4};
    TRY(mact_session_new(m, &so, &s, err, el));
    size_t cap = (size_t)mi.max_action_horizon * mi.max_action_dim;
    NEWF(actions, cap);
    mact_predict_input in = {.frames = o->frames, .n_frames = o->n_frames, .task = o->task, .state = o->state,
                             .state_dim = o->state_dim};
    in.options = (mact_predict_options){.norm_tag = o->norm_tag, .noise = o->noise, .noise_len = o->noise_len,
                                        .seed = o->seed};
    mact_predict_output res = {.actions = actions, .actions_cap = cap};
    STAGE(mact_predict(s, &in, &res));
    /* the model loaded and the inputs were accepted: only now is anything written */
    TRY(mact_export_begin(out_dir, tmp, sizeof tmp, err, el));
    mact_tensor_view v;
    mact_session_tensor(s, "pixel_values", &v);
    const int n_img = (int)v.shape[0], P = (int)v.shape[1], PD = (int)v.shape[2];
    size_t npv = (size_t)n_img * P * PD;
    NEWF(pv, npv);
    memcpy(pv, v.data, npv * sizeof(float));
    mact_session_tensor(s, "input_ids", &v);
    const int N = (int)v.shape[0];
    NEWF(ids, (size_t)N);
    for (int i = 0; i < N; i++) ids[i] = (int64_t)v.data[i];
    mact_session_tensor(s, "noise", &v);
    const int H = (int)v.shape[0], A = mi.max_action_dim, adim = (int)res.action_dim;
    NEWF(noise, (size_t)H * A);
    memcpy(noise, v.data, (size_t)H * A * sizeof(float));
    mact_session_tensor(s, "actions_norm", &v);
    const float *pred_norm = v.data;  /* valid until the next mact_predict (none follows) */
    const int K = mi.tokens_per_image, D = mi.d_model, L = mi.n_layers, KV = mi.kv_dim, AH = mi.ae_hidden;
    const int S = mi.flow_steps;

    /* vision */
    size_t nemb = (size_t)n_img * K * D;
    NEWF(emb, nemb);
    STAGE(mact_vision(s, pv, n_img, emb));
    TRY(!add(&z, "pixel_values", 4, (int64_t[]){1, n_img, P, PD}, pv, err, el) ||
        !add(&z, "image_embeds", 2, (int64_t[]){(int64_t)n_img * K, D}, emb, err, el) ? MACT_ERR_NOMEM : 0);
    TRY(flush(&z, tmp, "vision_io.npz", err, el));

    /* LLM splits */
    int ranges[MACT_EXPORT_MAX_SPLITS][2];
    int splits = o->splits ? o->splits : 4;
    if (splits > MACT_EXPORT_MAX_SPLITS) splits = MACT_EXPORT_MAX_SPLITS;
    splits = mact_export_split_ranges(L, splits, ranges);
    size_t nh = (size_t)N * D, nkv = (size_t)L * N * KV;
    NEWF(hidden, nh);
    NEWF(bias, (size_t)N * N);
    NEWF(keys, nkv);
    NEWF(values, nkv);
    STAGE(mact_embed(s, ids, N, emb, n_img * K, hidden));
    STAGE(mact_attention_bias(s, ids, N, bias));
    double max_hidden = 0;
    for (int i = 0; i < splits; i++) {
        int a = ranges[i][0], b = ranges[i][1];
        char file[64];
        TRY(!add(&z, "hidden_states", 3, (int64_t[]){1, N, D}, hidden, err, el) ||
            !add(&z, "attention_bias", 4, (int64_t[]){1, 1, N, N}, bias, err, el) ? MACT_ERR_NOMEM : 0);
        float *kk = keys + (size_t)a * N * KV, *vv = values + (size_t)a * N * KV;
        STAGE(mact_llm_layers(s, hidden, bias, N, a, b, kk, vv));
        for (size_t j = 0; j < nh; j++) if (fabs(hidden[j]) > max_hidden) max_hidden = fabs(hidden[j]);
        TRY(!add(&z, "hidden_out", 3, (int64_t[]){1, N, D}, hidden, err, el) ||
            !add(&z, "keys", 4, (int64_t[]){b - a, 1, N, KV}, kk, err, el) ||
            !add(&z, "values", 4, (int64_t[]){b - a, 1, N, KV}, vv, err, el) ? MACT_ERR_NOMEM : 0);
        snprintf(file, sizeof file, "llm_split%d_io.npz", i);
        TRY(flush(&z, tmp, file, err, el));
    }
    mact_session_tensor(s, "keys", &v);  /* the predict path's own KV, for the log */
    double kv_diff = max_abs_diff(keys, v.data, nkv);

    /* action context */
    size_t nc = (size_t)L * N * AH;
    NEWF(kctx, nc);
    NEWF(vctx, nc);
    STAGE(mact_action_context(s, keys, values, N, kctx, vctx));
    TRY(!add(&z, "keys", 4, (int64_t[]){L, 1, N, KV}, keys, err, el) ||
        !add(&z, "values", 4, (int64_t[]){L, 1, N, KV}, values, err, el) ||
        !add(&z, "k_ctx", 4, (int64_t[]){L, 1, N, AH}, kctx, err, el) ||
        !add(&z, "v_ctx", 4, (int64_t[]){L, 1, N, AH}, vctx, err, el) ? MACT_ERR_NOMEM : 0);
    TRY(flush(&z, tmp, "action_context_io.npz", err, el));

    /* action step: the chain of S single steps from the noise; the golden one is the last (t = (S-1)/S), its
     * input the trajectory the earlier steps left */
    NEWF(enc, (size_t)N);
    NEWF(enc_f, (size_t)N);
    NEWF(pad, (size_t)A);
    NEWF(pad_f, (size_t)A);
    NEWF(traj, (size_t)H * A);
    STAGE(mact_encoder_mask(s, ids, N, enc));
    int kept = 0;
    for (int i = 0; i < N; i++) { enc_f[i] = enc[i] ? 1.f : 0.f; kept += enc[i] != 0; }
    for (int d = 0; d < A; d++) { pad[d] = d >= adim; pad_f[d] = pad[d] ? 1.f : 0.f; }
    for (int r = 0; r < H; r++)
        for (int d = 0; d < A; d++) traj[r * A + d] = pad[d] ? 0.f : noise[r * A + d];
    for (int k = 0; k + 1 < S; k++) STAGE(mact_action_step(s, traj, H, (float)k / (float)S, S, kctx, vctx, enc, N, pad));
    const float tlast = (float)(S - 1) / (float)S;
    TRY(!add(&z, "trajectory", 3, (int64_t[]){1, H, A}, traj, err, el) ||
        !add(&z, "timestep", 1, (int64_t[]){1}, &tlast, err, el) ||
        !add(&z, "k_ctx", 4, (int64_t[]){L, 1, N, AH}, kctx, err, el) ||
        !add(&z, "v_ctx", 4, (int64_t[]){L, 1, N, AH}, vctx, err, el) ||
        !add(&z, "encoder_attention_mask", 2, (int64_t[]){1, N}, enc_f, err, el) ||
        !add(&z, "action_dim_is_pad", 2, (int64_t[]){1, A}, pad_f, err, el) ? MACT_ERR_NOMEM : 0);
    STAGE(mact_action_step(s, traj, H, tlast, S, kctx, vctx, enc, N, pad));
    TRY(!add(&z, "next_trajectory", 3, (int64_t[]){1, H, A}, traj, err, el) ? MACT_ERR_NOMEM : 0);
    TRY(flush(&z, tmp, "action_step_io.npz", err, el));

    /* the whole loop, and the whole path in one call */
    NEWF(loop, (size_t)H * A);
    memcpy(loop, noise, (size_t)H * A * sizeof(float));
    STAGE(mact_action_generate(s, loop, H, adim, S, keys, values, enc, N));
    TRY(!add(&z, "keys", 4, (int64_t[]){L, 1, N, KV}, keys, err, el) ||
        !add(&z, "values", 4, (int64_t[]){L, 1, N, KV}, values, err, el) ||
        !add(&z, "encoder_attention_mask", 2, (int64_t[]){1, N}, enc_f, err, el) ||
        !add(&z, "noise", 3, (int64_t[]){1, H, A}, noise, err, el) ||
        !add(&z, "actions_norm", 3, (int64_t[]){1, H, A}, loop, err, el) ? MACT_ERR_NOMEM : 0);
    TRY(flush(&z, tmp, "action_loop_io.npz", err, el));
    NEWF(e2e, (size_t)H * A);
    memcpy(e2e, noise, (size_t)H * A * sizeof(float));
    STAGE(mact_generate_from_ids(s, pv, n_img, ids, N, e2e, H, adim, S));
    {
        mact_array *a = &z.a[z.n];
        if (mact_array_alloc(a, "input_ids", MACT_I64, 2, (int64_t[]){1, N}, err, el)) { rc = MACT_ERR_NOMEM; goto out; }
        z.n++;
        memcpy(a->data, ids, (size_t)N * sizeof *ids);
    }
    TRY(!add(&z, "pixel_values", 4, (int64_t[]){1, n_img, P, PD}, pv, err, el) ||
        !add(&z, "noise", 3, (int64_t[]){1, H, A}, noise, err, el) ||
        !add(&z, "actions_norm", 3, (int64_t[]){1, H, A}, e2e, err, el) ? MACT_ERR_NOMEM : 0);
    TRY(flush(&z, tmp, "e2e_io.npz", err, el));
    double step_vs_loop = max_abs_diff(traj, loop, (size_t)H * A), e2e_vs_loop = max_abs_diff(e2e, loop, (size_t)H * A);
    double pred_vs_loop = max_abs_diff(pred_norm, loop, (size_t)H * A);

    /* trace.json */
    tr = cJSON_CreateObject();
    cJSON_AddStringToObject(tr, "preset", "mact export");
    if (o->noise) cJSON_AddNullToObject(tr, "seed");
    else cJSON_AddNumberToObject(tr, "seed", (double)o->seed);
    cJSON_AddStringToObject(tr, "model_dir", o->model_dir);
    cJSON_AddNumberToObject(tr, "n_images", n_img);
    cJSON_AddNumberToObject(tr, "seq_len", N);
    cJSON *sp = cJSON_AddArrayToObject(tr, "llm_splits");
    for (int i = 0; i < splits; i++) cJSON_AddItemToArray(sp, cJSON_CreateIntArray(ranges[i], 2));
    cJSON_AddNumberToObject(tr, "num_steps", S);
    cJSON_AddNumberToObject(tr, "action_horizon", H);
    cJSON_AddStringToObject(tr, "pooling_mask", pool_name(mi.pooling_mask));
    cJSON_AddStringToObject(tr, "encoder_mask", mi.encoder_mask == MACT_ENC_ALL ? "all" : "drop_eos");
    cJSON_AddBoolToObject(tr, "massive_activations", max_hidden >= 1e3);
    cJSON_AddNumberToObject(tr, "action_dim", adim);
    cJSON_AddNumberToObject(tr, "tokens_per_image", K);
    cJSON_AddNumberToObject(tr, "action_step_index", S - 1);
    cJSON_AddNumberToObject(tr, "max_abs_hidden", max_hidden);
    cJSON_AddNumberToObject(tr, "encoder_mask_kept", kept);
    cJSON_AddBoolToObject(tr, "has_sampler", mi.has_sampler);
    cJSON_AddStringToObject(tr, "task", o->task);
    cJSON_AddStringToObject(tr, "generator", "mact export golden (mact " MACT_VERSION_STRING ", fp32)");
    txt = cJSON_Print(tr);
    {
        char p[4300];
        snprintf(p, sizeof p, "%.4000s/trace.json", tmp);
        FILE *f = txt ? fopen(p, "w") : NULL;
        int ok = f && fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
        if (f && fclose(f)) ok = 0;
        if (!ok) { snprintf(err, el, "cannot write %.900s", p); rc = MACT_ERR_IO; goto out; }
    }
    TRY(mact_export_commit(tmp, out_dir, err, el));
    tmp[0] = 0;
    if (log)
        fprintf(log, "wrote %s: N=%d K=%d n_img=%d splits=%d steps=%d H=%d A=%d action_dim=%d pooling=%s encoder_mask=%s "
                "(kept %d/%d) max|hidden|=%.4g; chain vs predict: keys max diff %.3g, actions_norm max diff %.3g; "
                "steps vs loop %.3g; e2e vs loop %.3g\n", out_dir, N, K, n_img, splits, S, H, A, adim,
                pool_name(mi.pooling_mask), mi.encoder_mask == MACT_ENC_ALL ? "all" : "drop_eos", kept, N, max_hidden,
                kv_diff, pred_vs_loop, step_vs_loop, e2e_vs_loop);
out:
    if (tmp[0]) mact_export_abort(tmp);
    drop(&z);
    cJSON_free(txt);
    cJSON_Delete(tr);
    free(actions); free(pv); free(noise); free(emb); free(hidden); free(bias); free(keys); free(values);
    free(kctx); free(vctx); free(traj); free(loop); free(e2e); free(enc_f); free(pad_f); free(ids); free(enc); free(pad);
    mact_session_free(s);
    mact_model_free(m);
    return rc;
}
