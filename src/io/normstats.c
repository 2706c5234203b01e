#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "mact.h"
#include "base/err.h"
#include "io/normstats.h"
#include "base/json.h"

static int read_vec(const cJSON *o, const char *key, double *v, int *dim, const char *where, char *err, size_t el)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a))
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s missing or not a list", where, key);
    int n = cJSON_GetArraySize(a);
    if (n < 1 || n > MACT_NORM_MAX_DIM)
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s has %d values (1..%d)", where, key, n,
                         MACT_NORM_MAX_DIM);
    if (*dim && n != *dim)
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s has %d values, other stats have %d", where,
                         key, n, *dim);
    *dim = n;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i);
        /* bounded so that every scale and shift stays finite in float32 (hi - lo, x * std + mean) */
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || fabs(x->valuedouble) > 1e30)
            return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s[%d] is not a finite number within "
                             "+-1e30", where, key, i);
        v[i] = x->valuedouble;
    }
    return 0;
}

char *mact_norm_join_names(const char *const *names, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const size_t l = names[i] ? strlen(names[i]) : MACT_NORM_MAX_NAME;
        if (l >= MACT_NORM_MAX_NAME) return NULL;
        for (size_t k = 0; k < l; k++)
            if ((unsigned char)names[i][k] < 0x20 || names[i][k] == 0x7f) return NULL;
        len += l + 1;
    }
    char *s = n > 0 ? malloc(len) : NULL;
    for (size_t o = 0, i = 0; s && i < (size_t)n; i++) {
        const size_t l = strlen(names[i]);
        memcpy(s + o, names[i], l);
        o += l;
        s[o++] = i + 1 < (size_t)n ? '\n' : 0;
    }
    return s;
}

/* a statistic's optional "names": kept when they are dim plain strings (else not shown: they name, never compute) */
static char *read_names(const cJSON *o, int dim)
{
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "names");
    if (!cJSON_IsArray(nm) || cJSON_GetArraySize(nm) != dim || dim < 1) return NULL;
    const char *v[MACT_NORM_MAX_DIM];
    for (int i = 0; i < dim; i++) {
        const cJSON *x = cJSON_GetArrayItem(nm, i);
        if (!cJSON_IsString(x)) return NULL;
        v[i] = x->valuestring;
    }
    return mact_norm_join_names(v, dim);
}

static int read_feature(const cJSON *o, int mode, mact_feature_stats *f, const char *where, char *err, size_t el)
{
    static const char *const pairs[][2] = {{"q01", "q99"}, {"min", "max"}, {"mean", "std"}, {"q10", "q90"}, {NULL, NULL}};
    memset(f, 0, sizeof *f);
    if (!cJSON_IsObject(o)) return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s missing", where);
    int rc;
    if (mode != MACT_NORM_NONE) {
        if ((rc = read_vec(o, pairs[mode][0], f->lo, &f->dim, where, err, el))) return rc;
        if ((rc = read_vec(o, pairs[mode][1], f->hi, &f->dim, where, err, el))) return rc;
    } else {  /* only for the dim: the first statistic present */
        static const char *const any[] = {"q01", "min", "mean", "q10", "q99", "max", "std", "q90"};
        size_t k = 0;
        while (k + 1 < sizeof any / sizeof *any && !cJSON_GetObjectItemCaseSensitive(o, any[k])) k++;
        if ((rc = read_vec(o, any[k], f->lo, &f->dim, where, err, el))) return rc;
    }
    f->mode = mode;
    /* the pair must be ordered: q01 <= q99 (min <= max, q10 <= q90), std >= 0 */
    for (int i = 0; mode != MACT_NORM_NONE && i < f->dim; i++)
        if (mode == MACT_NORM_MEAN_STD ? !(f->hi[i] >= 0) : !(f->lo[i] <= f->hi[i]))
            return mact_errf(err, el, MACT_ERR_FORMAT, mode == MACT_NORM_MEAN_STD
                             ? "norm_stats.json: %s.%s[%d] = %g is negative" : "norm_stats.json: %s: %s[%d] = %g is "
                             "above %s[%d] = %g", where, mode == MACT_NORM_MEAN_STD ? "std" : pairs[mode][0], i,
                             mode == MACT_NORM_MEAN_STD ? f->hi[i] : f->lo[i], pairs[mode][1], i, f->hi[i]);
    double mn[MACT_NORM_MAX_DIM], mx[MACT_NORM_MAX_DIM];
    int d2 = f->dim;
    int has_min = cJSON_GetObjectItemCaseSensitive(o, "min") != NULL, has_max = cJSON_GetObjectItemCaseSensitive(o, "max") != NULL;
    if (has_min != has_max)
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s has %s without %s", where,
                         has_min ? "min" : "max", has_min ? "max" : "min");
    int have_mm = has_min && has_max;
    if (have_mm && ((rc = read_vec(o, "min", mn, &d2, where, err, el)) || (rc = read_vec(o, "max", mx, &d2, where, err, el))))
        return rc;
    for (int i = 0; have_mm && i < f->dim; i++)
        if (!(mn[i] <= mx[i]))
            return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s: min[%d] = %g is above max[%d] = %g", where,
                             i, mn[i], i, mx[i]);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mask");
    if (m && (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != f->dim))
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.mask must list %d booleans", where, f->dim);
    for (int i = 0; i < f->dim; i++) {
        const cJSON *b = m ? cJSON_GetArrayItem(m, i) : NULL;
        if (m && !cJSON_IsBool(b))
            return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.mask[%d] is not a boolean (true/false)",
                             where, i);
        f->mask[i] = m ? cJSON_IsTrue(b) : 1;
        f->mask_given = m != NULL;
        f->zero[i] = have_mm && mn[i] == mx[i];
    }
    f->names = read_names(o, f->dim);
    return 0;
}

/* An optional string field of a tag, copied whole or refused with the limit named. */
static int tag_str(const cJSON *t, const char *tag, const char *key, char *dst, size_t cap, char *err, size_t el)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
    dst[0] = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s must be a string", tag, key);
    if (strlen(v->valuestring) >= cap)
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s is %zu bytes; the limit is %zu", tag, key,
                         strlen(v->valuestring), cap - 1);
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return 0;
}

/* An optional positive integer field of a tag (0 when absent). */
static int tag_int(const cJSON *t, const char *tag, const char *key, int *dst, char *err, size_t el)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
    *dst = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !(v->valuedouble >= 1 && v->valuedouble <= 1024))
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.%s must be an integer in 1..1024", tag, key);
    *dst = (int)v->valuedouble;
    return 0;
}

static int parse(const char *json, int state_mode, int action_mode, mact_norm_stats *ns, char *err, size_t el)
{
    memset(ns, 0, sizeof *ns);
    ns->default_tag = -1;
    cJSON *r = NULL;
    int rc = mact_json_parse(json, strlen(json), "norm_stats.json", &r, err, el);
    if (rc) return rc;
    if (!cJSON_IsObject(r)) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: not a JSON object"); goto out; }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(r, "format");
    if (fmt && !cJSON_IsNull(fmt) && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "molmoact2_norm_stats.v1"))) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "norm_stats.json: format \"%.80s\" is not supported (only "
                       "molmoact2_norm_stats.v1)", cJSON_IsString(fmt) ? fmt->valuestring : "(not a string)");
        goto out;
    }
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(r, "norm_mode");
    if (mo && !cJSON_IsNull(mo) && !cJSON_IsString(mo)) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: norm_mode must be a string");
        goto out;
    }
    const char *mode = cJSON_GetStringValue(mo);
    if (!mode || !strcmp(mode, "q01_q99")) ns->mode = MACT_NORM_Q01_Q99;
    else if (!strcmp(mode, "min_max")) ns->mode = MACT_NORM_MIN_MAX;
    else if (!strcmp(mode, "mean_std")) ns->mode = MACT_NORM_MEAN_STD;
    else if (!strcmp(mode, "q10_q90")) ns->mode = MACT_NORM_Q10_Q90;
    else if (!strcmp(mode, "none")) ns->mode = MACT_NORM_NONE;
    else { rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "norm_stats.json: unknown norm_mode \"%.80s\"", mode); goto out; }
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(r, "metadata_by_tag"), *t;
    if (!cJSON_IsObject(tags) || !cJSON_GetArraySize(tags)) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: metadata_by_tag missing or empty");
        goto out;
    }
    if (cJSON_GetArraySize(tags) > MACT_NORM_MAX_TAGS) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: metadata_by_tag has %d tags; the limit is %d",
                       cJSON_GetArraySize(tags), MACT_NORM_MAX_TAGS);
        goto out;
    }
    if (!(ns->tags = calloc((size_t)cJSON_GetArraySize(tags), sizeof *ns->tags))) {
        rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (state_mode < 0) state_mode = action_mode = ns->mode;
    cJSON_ArrayForEach(t, tags) {
        mact_norm_tag *g = &ns->tags[ns->n_tags++];   /* counted at once: a failed tag's names are freed too */
        size_t nl = strlen(t->string);
        if (nl == 0 || nl >= sizeof g->name) {
            rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: tag name of %zu bytes (\"%.40s...\"); names "
                           "have 1..%zu bytes", nl, t->string, sizeof g->name - 1);
            goto out;
        }
        memcpy(g->name, t->string, nl + 1);
        if (!cJSON_IsObject(t)) {
            rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: tag %s is not an object", g->name);
            goto out;
        }
        char where[200];
        snprintf(where, sizeof where, "%s.state_stats", g->name);
        if ((rc = read_feature(cJSON_GetObjectItemCaseSensitive(t, "state_stats"), state_mode, &g->state, where, err, el)))
            goto out;
        snprintf(where, sizeof where, "%s.action_stats", g->name);
        if ((rc = read_feature(cJSON_GetObjectItemCaseSensitive(t, "action_stats"), action_mode, &g->action, where, err, el)))
            goto out;
        if ((rc = tag_int(t, g->name, "action_horizon", &g->action_horizon, err, el)) ||
            (rc = tag_int(t, g->name, "n_action_steps", &g->n_action_steps, err, el)) ||
            (rc = tag_str(t, g->name, "setup_type", g->setup_type, sizeof g->setup_type, err, el)) ||
            (rc = tag_str(t, g->name, "control_mode", g->control_mode, sizeof g->control_mode, err, el)))
            goto out;
        const cJSON *ck = cJSON_GetObjectItemCaseSensitive(t, "camera_keys");
        if (ck && !cJSON_IsNull(ck)) {
            const cJSON *k;
            if (!cJSON_IsArray(ck) || cJSON_GetArraySize(ck) > 64) {
                rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.camera_keys must be a list of at most 64 "
                               "names", g->name);
                goto out;
            }
            int ci = 0;
            cJSON_ArrayForEach(k, ck) {
                if (!cJSON_IsString(k) || strlen(k->valuestring) >= sizeof g->camera_keys[0]) {
                    rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.camera_keys has a %s entry", g->name,
                                   cJSON_IsString(k) ? "too long (>= 256 bytes)" : "non-string");
                    goto out;
                }
                if (ci < MACT_NORM_MAX_CAMERAS) snprintf(g->camera_keys[ci], sizeof g->camera_keys[ci], "%s", k->valuestring);
                ci++;
            }
            g->n_cameras = cJSON_GetArraySize(ck);
        }
        if (g->action_horizon && g->n_action_steps > g->action_horizon) {
            rc = mact_errf(err, el, MACT_ERR_FORMAT, "norm_stats.json: %s.n_action_steps %d exceeds action_horizon %d",
                           g->name, g->n_action_steps, g->action_horizon);
            goto out;
        }
    }
out:
    cJSON_Delete(r);
    return rc;
}

int mact_norm_stats_parse(const char *json, mact_norm_stats *ns, char *err, size_t el)
{
    return parse(json, -1, -1, ns, err, el);
}

int mact_norm_stats_parse_modes(const char *json, int state_mode, int action_mode, mact_norm_stats *ns, char *err,
                                size_t el)
{
    return parse(json, state_mode, action_mode, ns, err, el);
}

void mact_norm_stats_free(mact_norm_stats *ns)
{
    if (!ns) return;
    for (int i = 0; ns->tags && i < ns->n_tags; i++) {
        free(ns->tags[i].state.names);
        free(ns->tags[i].action.names);
    }
    free(ns->tags);
    ns->tags = NULL;
    ns->n_tags = 0;
}

const mact_norm_tag *mact_norm_find_tag(const mact_norm_stats *ns, const char *name, char *err, size_t el)
{
    if (!name && ns->default_tag >= 0 && ns->default_tag < ns->n_tags) return &ns->tags[ns->default_tag];
    if (!name && ns->n_tags == 1) return &ns->tags[0];
    for (int i = 0; name && i < ns->n_tags; i++)
        if (!strcmp(ns->tags[i].name, name)) return &ns->tags[i];
    size_t o = 0;
    if (err && el) {
        o += snprintf(err, el, name ? "unknown norm tag \"%s\"; valid tags:" : "%snorm tag required; valid tags:",
                      name ? name : "");
        for (int i = 0; i < ns->n_tags && o < el; i++) o += snprintf(err + o, el - o, " %s", ns->tags[i].name);
    }
    return NULL;
}

/* HF (norm_stats.json): double, the range floored at 1e-6, clipped in the quantile and min-max modes */
static double hf_norm(const mact_feature_stats *f, int i, double v)
{
    double n;
    switch (f->mode) {
    case MACT_NORM_MEAN_STD: n = (v - f->lo[i]) / fmax(f->hi[i], 1e-6); break;
    case MACT_NORM_NONE: n = v; break;
    default:
        n = 2.0 * (v - f->lo[i]) / fmax(f->hi[i] - f->lo[i], 1e-6) - 1.0;
        n = n < -1 ? -1 : n > 1 ? 1 : n;
    }
    return n;
}

/* LeRobot (NormalizerProcessorStep._apply_transform): float32, each operation rounded as torch rounds it, eps for a
 * zero range; the two inverse forms keep their own operation order */
static float lr_norm(const mact_feature_stats *f, float eps, int i, float v)
{
    const float lo = (float)f->lo[i], hi = (float)f->hi[i];
    if (f->mode == MACT_NORM_NONE) return v;
    if (f->mode == MACT_NORM_MEAN_STD) return (v - lo) / (hi + eps);
    float d = hi - lo;
    if (d == 0) d = eps;
    return 2.0f * (v - lo) / d - 1.0f;
}

static float lr_unnorm(const mact_feature_stats *f, float eps, int i, float v)
{
    const float lo = (float)f->lo[i], hi = (float)f->hi[i];
    if (f->mode == MACT_NORM_NONE) return v;
    if (f->mode == MACT_NORM_MEAN_STD) return v * hi + lo;
    float d = hi - lo;
    if (d == 0) d = eps;
    return f->mode == MACT_NORM_MIN_MAX ? (v + 1.0f) / 2.0f * d + lo : (v + 1.0f) * d / 2.0f + lo;
}

static float clip1(float v) { return v < -1 ? -1 : v > 1 ? 1 : v; }

int mact_tag_norm_state(const mact_norm_tag *t, const float *x, float *out, char *err, size_t el)
{
    const mact_feature_stats *f = &t->state;
    const mact_joint_frame *j = &t->state_frame;
    for (int i = 0; i < f->dim; i++) {
        const float v = i < j->n ? j->signs[i] * x[i] + j->offsets[i] : x[i];
        if (!t->lerobot) {
            const double n = f->mask[i] ? hf_norm(f, i, v) : v;
            out[i] = f->zero[i] ? 0.f : (float)n;
        } else if (f->mask[i]) {
            const float n = lr_norm(f, t->eps, i, v);
            out[i] = t->clamp_state ? clip1(n) : n;
        } else {
            if (!(v >= -1 && v <= 1))
                return mact_errf(err, el, MACT_ERR_INPUT, "state[%d] is %g%s: norm tag "
                                 "\"%s\" passes it through un-normalised (its mask is false, as LeRobot does for a "
                                 "gripper unless normalize_gripper is set), and LeRobot requires such a value within "
                                 "[-1, 1]", i, (double)v, i < j->n ? " after the joint frame" : "", t->name);
            out[i] = v;
        }
    }
    return 0;
}

void mact_state_bins(const float *norm, int dim, int n_bins, int *bins)
{
    for (int i = 0; i < dim; i++) {
        float v = norm[i];
        if (isnan(v)) v = 0;
        v = v < -1 ? -1 : v > 1 ? 1 : v;
        /* float32 arithmetic and rint (round half to even), as numpy on the float32 state */
        float b = rintf((v + 1.f) / 2.f * (float)(n_bins - 1));
        bins[i] = b < 0 ? 0 : b > n_bins - 1 ? n_bins - 1 : (int)b;
    }
}

void mact_tag_unnorm_actions(const mact_norm_tag *t, const float *a, int n, int ld, float *out)
{
    const mact_feature_stats *f = &t->action;
    const mact_joint_frame *j = &t->action_frame;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < f->dim; i++) {
            float y;
            if (!t->lerobot) {
                double v = a[r * ld + i], x;
                if (f->mode == MACT_NORM_NONE) x = v;
                else if (f->mode == MACT_NORM_MEAN_STD) x = v * f->hi[i] + f->lo[i];
                else {
                    v = v < -1 ? -1 : v > 1 ? 1 : v;
                    x = (v + 1.0) * (f->hi[i] - f->lo[i]) / 2.0 + f->lo[i];
                }
                y = (float)(f->mask[i] ? x : v);
            } else {
                const float v = t->clamp_actions ? clip1(a[r * ld + i]) : a[r * ld + i];
                y = f->mask[i] ? lr_unnorm(f, t->eps, i, v) : v;
            }
            out[r * f->dim + i] = i < j->n ? j->signs[i] * (y - j->offsets[i]) : y;
        }
}

void mact_tag_norm_actions(const mact_norm_tag *t, const float *x, int n, int ld_out, float *out)
{
    const mact_feature_stats *f = &t->action;
    const mact_joint_frame *j = &t->action_frame;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < f->dim; i++) {
            /* the frame's inverse: a' = a / signs + offsets (a sign is never 0: refused at load) */
            const float v = i < j->n ? x[r * f->dim + i] / j->signs[i] + j->offsets[i] : x[r * f->dim + i];
            float y;
            if (!t->lerobot) {
                double w = v;
                if (f->mode == MACT_NORM_NONE) w = v;
                else if (f->mode == MACT_NORM_MEAN_STD) w = (v - f->lo[i]) / fmax(f->hi[i], 1e-6);
                else {
                    w = 2.0 * (v - f->lo[i]) / fmax(f->hi[i] - f->lo[i], 1e-6) - 1.0;
                    w = w < -1 ? -1 : w > 1 ? 1 : w;
                }
                y = f->zero[i] ? 0.f : (float)(f->mask[i] ? w : v);
            } else {
                y = f->mask[i] ? lr_norm(f, t->eps, i, v) : v;
                if (f->mode != MACT_NORM_MEAN_STD && f->mode != MACT_NORM_NONE) y = clip1(y);
            }
            out[r * ld_out + i] = y;
        }
}
