/* `mact parity`: runs every boundary whose golden npz is present and compares with the reference
 * outputs, like the seed's parity gate. A file that cannot be run is reported as such and fails. */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "io/npy.h"
#include "base/checked.h"
#include "export/parity.h"
#include "base/file.h"
#include "base/json.h"
#include "model/session.h"

typedef struct {
    FILE *out;
    const mact_parity_options *o;
    int passed, failed;
} report;

void mact_compare(const float *got, const float *ref, size_t n, mact_cmp *r)
{
    double dot = 0, ng = 0, nr = 0, mx = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], f = ref[i];
        dot += g * f;
        ng += g * g;
        nr += f * f;
        double e = fabs(g - f);
        if (e > mx || isnan(e)) mx = isnan(e) ? INFINITY : e;
        if (fabs(f) > mr) mr = fabs(f);
    }
    r->cosine = (ng == 0 && nr == 0) ? 1.0 : dot / (sqrt(ng) * sqrt(nr) + 1e-300);
    r->max_abs = mx;
    r->max_ref = mr;
}

/* abs_tol: 0 = the relative bound, 1 = --abs-tol, 2 = the vjp row's bound */
static void row(report *rp, const char *ctx, const char *name, const float *got, const float *ref, size_t n, int abs_tol)
{
    mact_cmp c;
    mact_compare(got, ref, n, &c);
    double vt = rp->o->vjp_abs_tol > 0 ? rp->o->vjp_abs_tol : rp->o->abs_tol;
    double tol = abs_tol == 2 ? vt : abs_tol ? rp->o->abs_tol : rp->o->rel_tol * c.max_ref;
    int within = c.max_abs <= tol;
    int cos_ok = c.cosine >= rp->o->cos_min;
    /* Massive-activation tensors can exceed a relative max-error bound while matching in direction;
     * the gate is the cosine there, and within-tolerance is printed for information (docs/parity.md). */
    int pass = cos_ok && (within || (!abs_tol && rp->o->tol_informational));
    fprintf(rp->out, "%-16s %-16s %12.9f %12.3e %12.3e %-6s %s\n", ctx, name, c.cosine, c.max_abs, c.max_ref,
            within ? "yes" : "no", pass ? "PASS" : "FAIL");
    if (pass) rp->passed++;
    else rp->failed++;
}

static void fail_row(report *rp, const char *ctx, const char *why)
{
    fprintf(rp->out, "%-16s %-16s could not run: %s  FAIL\n", ctx, "-", why);
    rp->failed++;
}

/* Member as float32 with an expected element count; NULL + message on mismatch. */
static float *member(const mact_npz *z, const char *name, size_t want, char *why, size_t wl)
{
    const mact_array *a = mact_npz_find(z, name);
    if (!a) { snprintf(why, wl, "member '%s' missing", name); return NULL; }
    size_t n = mact_array_numel(a);
    if (want && n != want) {
        snprintf(why, wl, "member '%s' has %zu elements, expected %zu", name, n, want);
        return NULL;
    }
    float *f = NULL;
    size_t cnt;
    if (mact_array_to_f32(a, &f, &cnt, why, wl)) return NULL;
    return f;
}

/* 1: absent (boundary not in this golden set); -1: present but unreadable, the reader's reason in why. */
static int open_npz_why(const char *dir, const char *file, mact_npz *z, char *why, size_t wl)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    struct stat sb;
    if (lstat(p, &sb) != 0 && errno == ENOENT) return 1;
    char err[512];
    if (mact_file_check_regular(p, err, sizeof err) || mact_npz_read(p, z, err, sizeof err)) {
        snprintf(why, wl, "%s", err);
        return -1;
    }
    return 0;
}


static int64_t numel_of(const mact_npz *z, const char *name, int dim_from_end)
{
    const mact_array *a = mact_npz_find(z, name);
    if (!a || a->ndim < dim_from_end) return -1;
    return a->shape[a->ndim - dim_from_end];
}

#define NEED(ptr) do { if (!(ptr)) { fail_row(rp, ctx, why); goto done; } } while (0)

static void run_vision(report *rp, mact_session *s, const char *dir)
{
    const char *ctx = "vision";
    mact_npz z = {0};
    char why[512] = "";
    float *pv = NULL, *ref = NULL, *got = NULL;
    int r = open_npz_why(dir, "vision_io.npz", &z, why, sizeof why);
    if (r > 0) return;
    if (r < 0) { fail_row(rp, ctx, why); return; }
    mact_model_info mi;
    mact_model_get_info(s->m, &mi);
    int64_t P = numel_of(&z, "pixel_values", 2);
    size_t per = (size_t)mi.n_patches * mi.patch_dim;
    const mact_array *a = mact_npz_find(&z, "pixel_values");
    if (!a || P != mi.n_patches || mact_array_numel(a) % per) {
        snprintf(why, sizeof why, "pixel_values does not hold whole [%d, %d] images", mi.n_patches, mi.patch_dim);
        fail_row(rp, ctx, why);
        goto done;
    }
    int n_img = (int)(mact_array_numel(a) / per);
    size_t nout = (size_t)n_img * mi.tokens_per_image * mi.d_model;
    NEED(pv = member(&z, "pixel_values", 0, why, sizeof why));
    NEED(ref = member(&z, "image_embeds", nout, why, sizeof why));
    got = malloc(nout * sizeof(float));
    if (mact_vision(s, pv, n_img, got)) { fail_row(rp, ctx, mact_session_error(s)); goto done; }
    row(rp, ctx, "image_embeds", got, ref, nout, 0);
done:
    free(pv); free(ref); free(got);
    mact_npz_free(&z);
}

static void run_llm_split(report *rp, mact_session *s, const char *dir, int i, int a, int b)
{
    char ctx[32], file[64], why[512] = "";
    snprintf(ctx, sizeof ctx, "llm_split%d", i);
    snprintf(file, sizeof file, "llm_split%d_io.npz", i);
    mact_npz z = {0};
    float *hs = NULL, *bias = NULL, *ho = NULL, *kr = NULL, *vr = NULL, *kg = NULL, *vg = NULL;
    int r = open_npz_why(dir, file, &z, why, sizeof why);
    if (r > 0) { fail_row(rp, ctx, "trace.json names this split but its npz is missing"); return; }
    if (r < 0) { fail_row(rp, ctx, why); return; }
    mact_model_info mi;
    mact_model_get_info(s->m, &mi);
    int64_t n = numel_of(&z, "hidden_states", 2);
    if (n < 1) { fail_row(rp, ctx, "hidden_states missing or not [.., N, D]"); goto done; }
    /* sizes from the golden file's shape: checked, a hostile N must not wrap them */
    size_t nd, nn, nkv;
    if (mact_size_mul((size_t)n, (size_t)mi.d_model, &nd) || mact_size_mul((size_t)n, (size_t)n, &nn) ||
        mact_size_mul3((size_t)(b - a), (size_t)n, (size_t)mi.kv_dim, &nkv) || nkv > SIZE_MAX / sizeof(float)) {
        fail_row(rp, ctx, "hidden_states: N too large (its sizes overflow)");
        goto done;
    }
    NEED(hs = member(&z, "hidden_states", nd, why, sizeof why));
    NEED(bias = member(&z, "attention_bias", nn, why, sizeof why));
    NEED(ho = member(&z, "hidden_out", nd, why, sizeof why));
    NEED(kr = member(&z, "keys", nkv, why, sizeof why));
    NEED(vr = member(&z, "values", nkv, why, sizeof why));
    kg = malloc(nkv * sizeof(float));
    vg = malloc(nkv * sizeof(float));
    if (mact_llm_layers(s, hs, bias, (int)n, a, b, kg, vg)) { fail_row(rp, ctx, mact_session_error(s)); goto done; }
    row(rp, ctx, "hidden_out", hs, ho, nd, 0);
    row(rp, ctx, "keys", kg, kr, nkv, 0);
    row(rp, ctx, "values", vg, vr, nkv, 0);
done:
    free(hs); free(bias); free(ho); free(kr); free(vr); free(kg); free(vg);
    mact_npz_free(&z);
}

static void run_action_context(report *rp, mact_session *s, const char *dir)
{
    const char *ctx = "action_context";
    char why[512] = "";
    mact_npz z = {0};
    float *k = NULL, *v = NULL, *kr = NULL, *vr = NULL, *kg = NULL, *vg = NULL;
    int r = open_npz_why(dir, "action_context_io.npz", &z, why, sizeof why);
    if (r > 0) return;
    if (r < 0) { fail_row(rp, ctx, why); return; }
    mact_model_info mi;
    mact_model_get_info(s->m, &mi);
    int64_t n = numel_of(&z, "keys", 2);
    if (n < 1) { fail_row(rp, ctx, "keys missing or not [L, .., N, kv_dim]"); goto done; }
    size_t nkv = (size_t)mi.n_layers * n * mi.kv_dim, nc = (size_t)mi.n_layers * n * mi.ae_hidden;
    NEED(k = member(&z, "keys", nkv, why, sizeof why));
    NEED(v = member(&z, "values", nkv, why, sizeof why));
    NEED(kr = member(&z, "k_ctx", nc, why, sizeof why));
    NEED(vr = member(&z, "v_ctx", nc, why, sizeof why));
    kg = malloc(nc * sizeof(float));
    vg = malloc(nc * sizeof(float));
    if (mact_action_context(s, k, v, (int)n, kg, vg)) { fail_row(rp, ctx, mact_session_error(s)); goto done; }
    row(rp, ctx, "k_ctx", kg, kr, nc, 0);
    row(rp, ctx, "v_ctx", vg, vr, nc, 0);
done:
    free(k); free(v); free(kr); free(vr); free(kg); free(vg);
    mact_npz_free(&z);
}

static uint8_t *mask_of(const float *f, size_t n)
{
    uint8_t *m = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) m[i] = f[i] != 0.f;
    return m;
}

static void run_action_step(report *rp, mact_session *s, const char *dir, int num_steps)
{
    const char *ctx = "action_step";
    char why[512] = "";
    mact_npz z = {0};
    float *tr = NULL, *ts = NULL, *kc = NULL, *vc = NULL, *em = NULL, *pad = NULL, *ref = NULL;
    uint8_t *emu = NULL, *padu = NULL;
    int r = open_npz_why(dir, "action_step_io.npz", &z, why, sizeof why);
    if (r > 0) return;
    if (r < 0) { fail_row(rp, ctx, why); return; }
    mact_model_info mi;
    mact_model_get_info(s->m, &mi);
    int64_t h = numel_of(&z, "trajectory", 2), n = numel_of(&z, "encoder_attention_mask", 1);
    if (h < 1 || n < 1) { fail_row(rp, ctx, "trajectory or encoder_attention_mask missing"); goto done; }
    size_t nt = (size_t)h * mi.max_action_dim, nc = (size_t)mi.n_layers * n * mi.ae_hidden;
    NEED(tr = member(&z, "trajectory", nt, why, sizeof why));
    NEED(ts = member(&z, "timestep", 1, why, sizeof why));
    NEED(kc = member(&z, "k_ctx", nc, why, sizeof why));
    NEED(vc = member(&z, "v_ctx", nc, why, sizeof why));
    NEED(em = member(&z, "encoder_attention_mask", (size_t)n, why, sizeof why));
    NEED(pad = member(&z, "action_dim_is_pad", (size_t)mi.max_action_dim, why, sizeof why));
    NEED(ref = member(&z, "next_trajectory", nt, why, sizeof why));
    emu = mask_of(em, (size_t)n);
    padu = mask_of(pad, (size_t)mi.max_action_dim);
    if (mact_action_step(s, tr, (int)h, ts[0], num_steps, kc, vc, emu, (int)n, padu)) {
        fail_row(rp, ctx, mact_session_error(s));
        goto done;
    }
    row(rp, ctx, "next_trajectory", tr, ref, nt, 0);
done:
    free(tr); free(ts); free(kc); free(vc); free(em); free(pad); free(ref); free(emu); free(padu);
    mact_npz_free(&z);
}

/* action_loop_io (KV -> actions), action_rtc_io / action_rtc_vjp_io (the same with RTC guidance toward
 * prev_actions_norm, trace.json's "rtc" settings: rtc, NULL when the trace has none) and e2e_io (pixels + ids ->
 * actions) share the action-dim logic. */
static void run_actions(report *rp, mact_session *s, const char *dir, const char *file, int num_steps, int action_dim,
                        const mact_rtc_options *rtc)
{
    int e2e = !strcmp(file, "e2e_io.npz"), vjp = !strcmp(file, "action_rtc_vjp_io.npz"),
        is_rtc = vjp || !strcmp(file, "action_rtc_io.npz");
    const char *ctx = e2e ? "e2e" : vjp ? "action_rtc_vjp" : is_rtc ? "action_rtc" : "action_loop";
    char why[512] = "";
    mact_npz z = {0};
    float *noise = NULL, *ref = NULL, *k = NULL, *v = NULL, *em = NULL, *pv = NULL, *prev = NULL;
    uint8_t *emu = NULL;
    int64_t *ids = NULL;
    int r = open_npz_why(dir, file, &z, why, sizeof why);
    if (r > 0) return;
    if (r < 0) { fail_row(rp, ctx, why); return; }
    mact_model_info mi;
    mact_model_get_info(s->m, &mi);
    int64_t h = numel_of(&z, "noise", 2);
    if (h < 1) { fail_row(rp, ctx, "noise missing"); goto done; }
    if (action_dim < 1) { fail_row(rp, ctx, "trace.json gives no action_dim"); goto done; }
    size_t nt = (size_t)h * mi.max_action_dim;
    NEED(noise = member(&z, "noise", nt, why, sizeof why));
    NEED(ref = member(&z, "actions_norm", nt, why, sizeof why));
    int rc;
    if (!e2e) {
        int64_t n = numel_of(&z, "encoder_attention_mask", 1);
        if (n < 1) { fail_row(rp, ctx, "encoder_attention_mask missing"); goto done; }
        size_t nkv = (size_t)mi.n_layers * n * mi.kv_dim;
        NEED(k = member(&z, "keys", nkv, why, sizeof why));
        NEED(v = member(&z, "values", nkv, why, sizeof why));
        NEED(em = member(&z, "encoder_attention_mask", (size_t)n, why, sizeof why));
        emu = mask_of(em, (size_t)n);
        if (is_rtc) {
            if (!rtc) { fail_row(rp, ctx, "trace.json gives no \"rtc\" settings"); goto done; }
            const mact_array *pa = mact_npz_find(&z, "prev_actions_norm");
            if (!pa || pa->ndim < 2 || pa->shape[pa->ndim - 1] != action_dim || !mact_array_numel(pa)) {
                snprintf(why, sizeof why, "prev_actions_norm missing or not [.., n_prev, %d]", action_dim);
                fail_row(rp, ctx, why);
                goto done;
            }
            NEED(prev = member(&z, "prev_actions_norm", 0, why, sizeof why));
            mact_rtc_options ro = *rtc;
            ro.prev_actions = prev;
            ro.n_prev = mact_array_numel(pa) / (size_t)action_dim;
            ro.prev_dim = (size_t)action_dim;
            ro.guidance = vjp ? MACT_RTC_VJP : MACT_RTC_IDENTITY;
            rc = mact_action_generate_rtc(s, noise, (int)h, action_dim, num_steps, k, v, emu, (int)n, &ro);
        } else
            rc = mact_action_generate(s, noise, (int)h, action_dim, num_steps, k, v, emu, (int)n);
    } else {
        const mact_array *ia = mact_npz_find(&z, "input_ids"), *pa = mact_npz_find(&z, "pixel_values");
        if (!ia || !pa) { fail_row(rp, ctx, "input_ids or pixel_values missing"); goto done; }
        size_t n = mact_array_numel(ia), per = (size_t)mi.n_patches * mi.patch_dim;
        NEED(em = member(&z, "input_ids", 0, why, sizeof why));
        ids = malloc(n * sizeof *ids);
        for (size_t i = 0; i < n; i++) ids[i] = (int64_t)em[i];
        NEED(pv = member(&z, "pixel_values", 0, why, sizeof why));
        rc = mact_generate_from_ids(s, pv, (int)(mact_array_numel(pa) / per), ids, (int)n, noise, (int)h, action_dim,
                                    num_steps);
    }
    if (rc) { fail_row(rp, ctx, mact_session_error(s)); goto done; }
    row(rp, ctx, "actions_norm", noise, ref, nt, vjp ? 2 : 1);
done:
    free(noise); free(ref); free(k); free(v); free(em); free(pv); free(prev); free(emu); free(ids);
    mact_npz_free(&z);
}

/* trace.json's "rtc": {"inference_delay": int 0..4096, "execution_horizon": int 0..4096 (0: mact's default),
 * "schedule": "linear" | "zeros" | "ones" | "exp", "max_guidance_weight": finite number >= 0}, every member
 * required and no other; the rows and the guidance come from each golden file. */
static int parse_rtc(const cJSON *j, mact_rtc_options *r, char *err, size_t errlen)
{
    static const char *const keys[] = {"inference_delay", "execution_horizon", "schedule", "max_guidance_weight"};
    if (!cJSON_IsObject(j)) { snprintf(err, errlen, "not a JSON object"); return 1; }
    for (const cJSON *it = j->child; it; it = it->next) {
        int known = 0;
        for (int i = 0; i < 4; i++) known |= it->string && !strcmp(it->string, keys[i]);
        if (!known) { snprintf(err, errlen, "unknown member \"%.60s\"", it->string ? it->string : ""); return 1; }
    }
    int *ints[2] = {&r->inference_delay, &r->execution_horizon};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
            v->valuedouble > 4096) {
            snprintf(err, errlen, "%s must be an integer in 0..4096", keys[i]);
            return 1;
        }
        *ints[i] = (int)v->valuedouble;
    }
    const char *sch = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "schedule"));
    if (!sch || mact_rtc_schedule_parse(sch, &r->schedule)) {
        snprintf(err, errlen, "schedule must be one of \"linear\", \"zeros\", \"ones\", \"exp\"");
        return 1;
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "max_guidance_weight");
    if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble) || b->valuedouble < 0 || b->valuedouble > 3.4e38) {
        snprintf(err, errlen, "max_guidance_weight must be a finite number >= 0");
        return 1;
    }
    r->max_guidance_weight = (float)b->valuedouble;
    return 0;
}

/* the fields o leaves 0 from the precision's gates (parity.h) */
static mact_parity_options gates_of(const mact_parity_options *o)
{
    mact_parity_options g = *o;
    const int reduced = o->precision != MACT_PRECISION_FP32, int8 = o->precision == MACT_PRECISION_INT8;
    if (g.cos_min == 0) g.cos_min = reduced ? 0.999 : 0.99999;
    if (reduced && g.rel_tol == 0) g.tol_informational = 1;
    if (g.rel_tol == 0) g.rel_tol = 1e-4;
    if (g.abs_tol == 0) g.abs_tol = int8 ? 0.25 : reduced ? 0.05 : 1e-4;
    if (g.vjp_abs_tol == 0) g.vjp_abs_tol = reduced ? 3 * g.abs_tol : g.abs_tol;
    return g;
}

int mact_parity(const char *golden_dir, const char *model_dir, const mact_parity_options *o0, FILE *out)
{
    const mact_parity_options g = gates_of(o0), *o = &g;
    char path[4200], err[1024], *txt = NULL;
    snprintf(path, sizeof path, "%s/trace.json", golden_dir);
    size_t tlen = 0;
    int frc = mact_file_read_all(path, (size_t)16 << 20, &txt, &tlen, err, sizeof err);
    if (frc) { fprintf(out, "error: %s\n", err); return frc; }
    cJSON *tr = NULL;
    frc = mact_json_parse(txt, tlen, "trace.json", &tr, err, sizeof err);
    free(txt);
    if (frc) { fprintf(out, "error: %s\n", err); return frc; }
    if (!cJSON_IsObject(tr)) { fprintf(out, "error: trace.json: not a JSON object\n"); cJSON_Delete(tr); return MACT_ERR_FORMAT; }
    const cJSON *j;
    int num_steps = 0, action_dim = 0;
    struct { const char *k; int *dst; int max; } ints[] = {{"num_steps", &num_steps, 1000}, {"action_dim", &action_dim, 256}};
    for (int i = 0; i < 2; i++)
        if ((j = cJSON_GetObjectItemCaseSensitive(tr, ints[i].k)) && !cJSON_IsNull(j)) {
            if (!cJSON_IsNumber(j) || j->valuedouble != (int)j->valuedouble || j->valueint < 1 || j->valueint > ints[i].max) {
                fprintf(out, "error: trace.json: %s must be an integer in 1..%d\n", ints[i].k, ints[i].max);
                cJSON_Delete(tr);
                return MACT_ERR_FORMAT;
            }
            *ints[i].dst = j->valueint;
        }
    const char *pm0 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tr, "pooling_mask"));
    const char *em0 = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tr, "encoder_mask"));
    if ((pm0 && strcmp(pm0, "sdpa") && strcmp(pm0, "eager") && strcmp(pm0, "none")) ||
        (em0 && strcmp(em0, "all") && strcmp(em0, "drop_eos"))) {
        fprintf(out, "error: trace.json: %s \"%.60s\" is not one of %s\n", pm0 && strcmp(pm0, "sdpa") && strcmp(pm0, "eager") &&
                strcmp(pm0, "none") ? "pooling_mask" : "encoder_mask", pm0 && strcmp(pm0, "sdpa") && strcmp(pm0, "eager") &&
                strcmp(pm0, "none") ? pm0 : em0, pm0 && strcmp(pm0, "sdpa") && strcmp(pm0, "eager") && strcmp(pm0, "none")
                ? "sdpa, eager, none" : "all, drop_eos");
        cJSON_Delete(tr);
        return MACT_ERR_FORMAT;
    }
    mact_rtc_options rtc = {0};
    int has_rtc = 0;
    if ((j = cJSON_GetObjectItemCaseSensitive(tr, "rtc")) && !cJSON_IsNull(j)) {
        if (parse_rtc(j, &rtc, err, sizeof err)) {
            fprintf(out, "error: trace.json: rtc: %s\n", err);
            cJSON_Delete(tr);
            return MACT_ERR_FORMAT;
        }
        has_rtc = 1;
    }
    mact_load_options lo = {.precision = o->precision, .int8_parts = o->int8_parts};
    const char *pm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tr, "pooling_mask"));
    const char *em = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tr, "encoder_mask"));
    if (pm) lo.pooling_mask = !strcmp(pm, "sdpa") ? MACT_POOL_SDPA : !strcmp(pm, "eager") ? MACT_POOL_EAGER : MACT_POOL_NONE;
    if (em) lo.encoder_mask = !strcmp(em, "all") ? MACT_ENC_ALL : MACT_ENC_DROP_EOS;
    mact_model *m = NULL;
    mact_session *s = NULL;
    int rc = mact_model_load(model_dir, &lo, &m, err, sizeof err);
    if (rc) { fprintf(out, "error: %s\n", err); cJSON_Delete(tr); return rc; }
    mact_session_options so = {.max_tokens = o->max_tokens};
    if ((rc = mact_session_new(m, &so, &s, err, sizeof err))) {
        fprintf(out, "error: %s\n", err);
        mact_model_free(m);
        cJSON_Delete(tr);
        return rc;
    }
    if (!num_steps) num_steps = m->cfg.flow_steps;
    report rp = {.out = out, .o = o};
    char parts[64];
    fprintf(out, "precision: %s%s%s%s%s\n", mact_precision_str(lo.precision),
            m->kprec != lo.precision ? " computed as " : "",
            m->kprec != lo.precision ? mact_precision_str(m->kprec) : "",
            m->int8_parts ? ", int8 components " : "", m->int8_parts ? mact_int8_parts_str(m->int8_parts, parts, sizeof parts) : "");
    fprintf(out, "%-16s %-16s %12s %12s %12s %-6s %s\n", "context", "output", "cosine", "max_abs_err", "max|ref|",
            "in_tol", "result");
    run_vision(&rp, s, golden_dir);
    /* Split ranges come from trace.json when it has them; otherwise (e.g. a golden set whose trace
     * lacks them) each split starts where the previous ended and spans as many layers as its keys. */
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(tr, "llm_splits");
    for (int i = 0, next = 0;; i++) {
        char file[64], ctx[32];
        snprintf(file, sizeof file, "%s/llm_split%d_io.npz", golden_dir, i);
        snprintf(ctx, sizeof ctx, "llm_split%d", i);
        struct stat sb;
        int present = lstat(file, &sb) == 0;
        int in_trace = sp && i < cJSON_GetArraySize(sp);
        if (!present && !in_trace) break;
        int a = next, b = -1;
        if (in_trace) {
            const cJSON *p = cJSON_GetArrayItem(sp, i);
            const cJSON *pa = cJSON_GetArrayItem(p, 0), *pb = cJSON_GetArrayItem(p, 1);
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(pa) || !cJSON_IsNumber(pb) ||
                pa->valuedouble != (int)pa->valuedouble || pb->valuedouble != (int)pb->valuedouble ||
                pa->valueint < 0 || pb->valueint <= pa->valueint || pb->valueint > m->cfg.n_layers) {
                fail_row(&rp, ctx, "bad llm_splits entry in trace.json (want [a, b] integers, 0 <= a < b <= layers)");
                continue;
            }
            a = pa->valueint;
            b = pb->valueint;
        } else {
            mact_npz z = {0};
            char e[256];
            if (!mact_npz_read(file, &z, e, sizeof e)) {
                const mact_array *k = mact_npz_find(&z, "keys");
                if (k && k->ndim >= 3) b = a + (int)k->shape[0];
            }
            mact_npz_free(&z);
            if (b < 0) { fail_row(&rp, ctx, "cannot infer the layer range: no llm_splits in trace.json, no keys"); break; }
        }
        run_llm_split(&rp, s, golden_dir, i, a, b);
        next = b;
    }
    run_action_context(&rp, s, golden_dir);
    run_action_step(&rp, s, golden_dir, num_steps);
    run_actions(&rp, s, golden_dir, "action_loop_io.npz", num_steps, action_dim, NULL);
    run_actions(&rp, s, golden_dir, "action_rtc_io.npz", num_steps, action_dim, has_rtc ? &rtc : NULL);
    run_actions(&rp, s, golden_dir, "action_rtc_vjp_io.npz", num_steps, action_dim, has_rtc ? &rtc : NULL);
    run_actions(&rp, s, golden_dir, "e2e_io.npz", num_steps, action_dim, NULL);
    fprintf(out, "parity: %d passed, %d failed (cosine >= %g; max abs <= %g x max|ref|%s; actions max abs <= %g, "
            "the RTC vjp row's <= %g)\n", rp.passed, rp.failed, o->cos_min, o->rel_tol,
            o->tol_informational ? " informational" : "", o->abs_tol, o->vjp_abs_tol);
    mact_session_free(s);
    mact_model_free(m);
    cJSON_Delete(tr);
    if (rp.passed + rp.failed == 0) { fprintf(out, "error: no golden boundary file found in %s\n", golden_dir); return MACT_ERR_IO; }
    return rp.failed ? 1 : 0;
}
