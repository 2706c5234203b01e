/* The public face of norm tags (mact.h): a model's, or a norm_stats.json's on its own. The arithmetic is
 * io/normstats.c's; the tags themselves are built at load (model/model.c, model/lerobot.c). */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "base/rng.h"
#include "io/normstats.h"
#include "model/model.h"

size_t mact_model_num_norm_tags(const mact_model *m)
{
    return m && m->ns ? (size_t)m->ns->n_tags : 0;
}

void mact_tag_get_info(const mact_tag *t, mact_norm_tag_info *out)
{
    memset(out, 0, sizeof *out);
    if (!t) return;
    out->name = t->name;
    out->state_dim = t->state.dim;
    out->action_dim = t->action.dim;
    out->action_horizon = t->action_horizon;
    out->n_action_steps = t->n_action_steps;
    out->n_cameras = t->n_cameras;
    for (int c = 0; c < t->n_cameras && c < MACT_MAX_TAG_CAMERAS && c < MACT_NORM_MAX_CAMERAS; c++)
        out->camera_keys[c] = t->camera_keys[c];
    out->setup_type = t->setup_type;
    out->control_mode = t->control_mode;
    out->joint_frame = t->state_frame.n > t->action_frame.n ? t->state_frame.n : t->action_frame.n;
    out->lerobot = t->lerobot;
    out->state_names = t->state.names;
    out->action_names = t->action.names;
}

mact_status mact_model_norm_tag(const mact_model *m, size_t i, mact_norm_tag_info *out)
{
    if (i >= mact_model_num_norm_tags(m)) { memset(out, 0, sizeof *out); return MACT_ERR_INPUT; }
    mact_tag_get_info(&m->ns->tags[i], out);
    return MACT_OK;
}

const mact_tag *mact_model_tag(const mact_model *m, const char *name, char *err, size_t el)
{
    if (!m) { mact_errf(err, el, MACT_ERR_INPUT, "mact_model_tag: model is NULL"); return NULL; }
    if (!m->ns) { mact_errf(err, el, MACT_ERR_IO, "no norm tags: %s", m->ns_err); return NULL; }
    return mact_norm_find_tag(m->ns, name, err, el);
}

void mact_tag_action_stats(const mact_tag *t, double *lo, double *hi, unsigned char *mask)
{
    for (int i = 0; t && i < t->action.dim; i++) {
        if (lo) lo[i] = t->action.lo[i];
        if (hi) hi[i] = t->action.hi[i];
        if (mask) mask[i] = t->action.mask[i];
    }
}

void mact_tag_normalize_actions(const mact_tag *t, const float *actions, size_t n_rows, float *out)
{
    if (t && actions && out) mact_tag_norm_actions(t, actions, (int)n_rows, t->action.dim, out);
}

mact_status mact_norm_stats_open(const char *path, mact_norm_stats **out, char *err, size_t el)
{
    if (!out || !path) return mact_errf(err, el, MACT_ERR_INPUT, "mact_norm_stats_open: a NULL argument");
    *out = NULL;
    char *txt = NULL, e2[1024];
    int rc = mact_file_read_text(path, (size_t)64 << 20, &txt, NULL, err, el);
    if (rc) return (mact_status)rc;
    mact_norm_stats *ns = calloc(1, sizeof *ns);
    if (!ns) rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    else if ((rc = mact_norm_stats_parse(txt, ns, e2, sizeof e2))) {
        mact_errf(err, el, rc, "%s: %s", path, e2);
        mact_norm_stats_free(ns);
        free(ns);
        ns = NULL;
    }
    free(txt);
    *out = ns;
    return (mact_status)rc;
}

void mact_norm_stats_close(mact_norm_stats *ns)
{
    mact_norm_stats_free(ns);
    free(ns);
}

const mact_tag *mact_norm_stats_tag(const mact_norm_stats *ns, const char *name, char *err, size_t el)
{
    if (!ns) { mact_errf(err, el, MACT_ERR_INPUT, "mact_norm_stats_tag: NULL"); return NULL; }
    return mact_norm_find_tag(ns, name, err, el);
}

static uint64_t hash_feature(uint64_t h, const mact_feature_stats *f)
{
    h = mact_fnv1a(h, &f->dim, sizeof f->dim);
    h = mact_fnv1a(h, &f->mode, sizeof f->mode);
    h = mact_fnv1a(h, f->lo, sizeof(double) * (size_t)f->dim);
    h = mact_fnv1a(h, f->hi, sizeof(double) * (size_t)f->dim);
    h = mact_fnv1a(h, f->mask, (size_t)f->dim);
    return mact_fnv1a(h, f->zero, (size_t)f->dim);
}

static uint64_t hash_frame(uint64_t h, const mact_joint_frame *j)
{
    h = mact_fnv1a(h, &j->n, sizeof j->n);
    h = mact_fnv1a(h, j->signs, sizeof(float) * (size_t)j->n);
    return mact_fnv1a(h, j->offsets, sizeof(float) * (size_t)j->n);
}

uint64_t mact_tag_fingerprint(const mact_tag *t)
{
    if (!t) return 0;
    uint64_t h = mact_fnv1a(MACT_FNV_BASIS, t->name, strlen(t->name) + 1);
    h = hash_feature(hash_feature(h, &t->state), &t->action);
    h = hash_frame(hash_frame(h, &t->state_frame), &t->action_frame);
    const int ints[6] = {t->action_horizon, t->n_action_steps, t->lerobot, t->clamp_state, t->clamp_actions, t->n_cameras};
    h = mact_fnv1a(h, ints, sizeof ints);
    h = mact_fnv1a(h, &t->eps, sizeof t->eps);
    h = mact_fnv1a(h, t->setup_type, strlen(t->setup_type) + 1);
    h = mact_fnv1a(h, t->control_mode, strlen(t->control_mode) + 1);
    for (int c = 0; c < t->n_cameras && c < MACT_NORM_MAX_CAMERAS; c++) h = mact_fnv1a(h, t->camera_keys[c], strlen(t->camera_keys[c]) + 1);
    return h;
}

/* ---- the contract as JSON (mact_model_tags_json; `mact inspect --json`, Python's describe, GET /act) ---- */

/* a '\n'-joined name list -> a JSON array of strings, or null */
static cJSON *names_json(const char *names)
{
    if (!names) return cJSON_CreateNull();
    cJSON *a = cJSON_CreateArray();
    for (const char *p = names; a && *p;) {
        const size_t l = strcspn(p, "\n");
        char one[MACT_NORM_MAX_NAME];
        snprintf(one, sizeof one, "%.*s", (int)l, p);
        cJSON_AddItemToArray(a, cJSON_CreateString(one));
        p += l + (p[l] == '\n');
    }
    return a;
}

static cJSON *frame_json(const mact_joint_frame *j)
{
    if (!j->n) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject(), *s = cJSON_CreateArray(), *f = cJSON_CreateArray();
    for (int i = 0; i < j->n; i++) {
        cJSON_AddItemToArray(s, cJSON_CreateNumber(j->signs[i]));
        cJSON_AddItemToArray(f, cJSON_CreateNumber(j->offsets[i]));
    }
    cJSON_AddItemToObject(o, "signs", s);
    cJSON_AddItemToObject(o, "offsets", f);
    return o;
}

static cJSON *tag_json(const struct mact_model *m, const mact_norm_tag *t, int is_default)
{
    const int H = t->action_horizon ? t->action_horizon : m->cfg.max_action_horizon;
    cJSON *o = cJSON_CreateObject(), *st = cJSON_CreateObject(), *ac = cJSON_CreateObject(), *cams = cJSON_CreateArray();
    cJSON *jf = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddBoolToObject(o, "default", is_default);
    cJSON_AddNumberToObject(st, "dim", t->state.dim);
    cJSON_AddItemToObject(st, "names", names_json(t->state.names));
    cJSON_AddItemToObject(o, "state", st);
    for (int c = 0; c < t->n_cameras && c < MACT_NORM_MAX_CAMERAS; c++)
        cJSON_AddItemToArray(cams, cJSON_CreateString(t->camera_keys[c]));
    cJSON_AddItemToObject(o, "cameras", cams);
    cJSON_AddNumberToObject(ac, "dim", t->action.dim);
    cJSON_AddItemToObject(ac, "names", names_json(t->action.names));
    cJSON_AddNumberToObject(ac, "horizon", H);
    cJSON_AddNumberToObject(ac, "n_action_steps", t->n_action_steps ? t->n_action_steps : H);
    cJSON_AddItemToObject(o, "actions", ac);
    cJSON_AddNumberToObject(o, "flow_steps", m->cfg.flow_steps);
    cJSON_AddStringToObject(o, "setup_type", t->setup_type);
    cJSON_AddStringToObject(o, "control_mode", t->control_mode);
    cJSON_AddStringToObject(o, "arithmetic", t->lerobot ? "lerobot" : "hf");
    cJSON_AddItemToObject(jf, "state", frame_json(&t->state_frame));
    cJSON_AddItemToObject(jf, "actions", frame_json(&t->action_frame));
    cJSON_AddItemToObject(o, "joint_frame", jf);
    return o;
}

mact_status mact_model_tags_json(const mact_model *m, char *buf, size_t cap, size_t *len)
{
    if (len) *len = 0;
    if (!m || (!buf && cap)) return MACT_ERR_INPUT;
    if (!m->ns) return MACT_ERR_IO;
    const mact_norm_tag *def = mact_norm_find_tag(m->ns, NULL, NULL, 0);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < m->ns->n_tags; i++) cJSON_AddItemToArray(a, tag_json(m, &m->ns->tags[i], def == &m->ns->tags[i]));
    char *s = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    if (!s) return MACT_ERR_NOMEM;
    const size_t n = strlen(s);
    if (len) *len = n;
    const int fits = n < cap;
    if (cap) snprintf(buf, cap, "%s", s);
    free(s);
    return fits ? MACT_OK : MACT_ERR_INPUT;
}

const char *mact_model_renamed(const mact_model *m, const char *key)
{
    for (int i = 0; m && key && i < m->n_renames; i++)
        if (!strcmp(m->rename_from[i], key)) return m->rename_to[i];
    return key;
}
