/* LeRobot PR #3048's format (refs/pull/3048/head, src/lerobot/async_inference/safe_serialization.py):
 * [4-byte big-endian JSON length][JSON metadata][safetensors bytes], read into the tree the pickle of the same
 * payload gives (docs/pickle.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "base/json.h"
#include "io/safetensors.h"
#include "server/pickle_internal.h"

typedef struct {
    rd r;            /* the arena, limits, counters and messages (r.safe set) */
    mact_st *st;
} sf;

#define sbad(s, ...) pki_bad(&(s)->r, __VA_ARGS__)

static pk_value *s_new(sf *s, pk_kind k)
{
    pk_value *v = pki_new(&s->r, k);
    if (v && ++s->r.pushes > s->r.lim.max_items) { sbad(s, "more than max_items (%zu) values", s->r.lim.max_items); return NULL; }
    return v;
}

static pk_value *s_str(sf *s, const char *str)
{
    size_t n = strlen(str);
    if (n > s->r.lim.max_str_bytes) { sbad(s, "str of %zu bytes exceeds max_str_bytes (%zu)", n, s->r.lim.max_str_bytes); return NULL; }
    /* the JSON metadata was checked whole; tensor names come from the safetensors header, which was not */
    size_t bad_at = mact_utf8_check((const unsigned char *)str, n);
    if (bad_at != n) { sbad(s, "name or str is not valid UTF-8 (byte %zu of %zu)", bad_at, n); return NULL; }
    pk_value *v = s_new(s, PK_STR);
    char *c = v ? pki_alloc(s->r.doc, n + 1) : NULL;
    if (!c) { if (v) sbad(s, "out of memory"); return NULL; }
    memcpy(c, str, n + 1);
    v->u.str.s = c;
    v->u.str.len = n;
    return v;
}

static int s_set(sf *s, pk_value *d, const char *key, pk_value *val)
{
    pk_value *k = s_str(s, key);
    if (!k || !val) return -1;
    return pki_dict_set(&s->r, d, k, val);
}

static int s_append(sf *s, pk_value *seq, pk_value *v)
{
    if (!v) return -1;
    if (pki_seq_reserve(&s->r, seq, 1) || pki_adopt(&s->r, seq, v)) return -1;
    seq->u.seq.v[seq->u.seq.n++] = v;
    return 0;
}

static pk_value *s_num(sf *s, double d, int want_float)
{
    pk_value *v;
    if (!want_float && d == floor(d) && fabs(d) <= 9007199254740992.0) {
        if ((v = s_new(s, PK_INT))) v->u.i = (int64_t)d;
    } else if ((v = s_new(s, PK_FLOAT))) v->u.f = d;
    return v;
}

static pk_value *s_json(sf *s, const cJSON *j, int depth)
{
    if (depth > s->r.lim.max_depth) { sbad(s, "nesting deeper than max_depth (%d)", s->r.lim.max_depth); return NULL; }
    pk_value *v;
    if (cJSON_IsNull(j)) return s_new(s, PK_NONE);
    if (cJSON_IsBool(j)) {
        if ((v = s_new(s, PK_BOOL))) v->u.b = cJSON_IsTrue(j);
        return v;
    }
    if (cJSON_IsNumber(j)) return s_num(s, j->valuedouble, 0);
    if (cJSON_IsString(j)) return s_str(s, j->valuestring);
    if (cJSON_IsArray(j)) {
        if (!(v = s_new(s, PK_LIST))) return NULL;
        for (const cJSON *c = j->child; c; c = c->next)
            if (s_append(s, v, s_json(s, c, depth + 1))) return NULL;
        return v;
    }
    if (cJSON_IsObject(j)) {
        if (!(v = s_new(s, PK_DICT))) return NULL;
        for (const cJSON *c = j->child; c; c = c->next)
            if (s_set(s, v, c->string, s_json(s, c, depth + 1))) return NULL;
        return v;
    }
    sbad(s, "unexpected JSON value");
    return NULL;
}

static pk_value *s_tensor(sf *s, const mact_st_tensor *t)
{
    static const struct { int dt; pk_dtype pd; } map[] = {
        {MACT_F32, {'f', '<', 4}}, {MACT_F64, {'f', '<', 8}}, {MACT_F16, {'f', '<', 2}}, {MACT_I64, {'i', '<', 8}},
        {MACT_I32, {'i', '<', 4}}, {MACT_I16, {'i', '<', 2}}, {MACT_I8, {'i', '|', 1}}, {MACT_U8, {'u', '|', 1}},
        {MACT_BOOL, {'b', '|', 1}}, {MACT_U16, {'u', '<', 2}}, {MACT_U32, {'u', '<', 4}}, {MACT_U64, {'u', '<', 8}}};
    if (t->nbytes > s->r.lim.max_array_bytes) {
        sbad(s, "tensor '%s' of %zu bytes exceeds max_array_bytes (%zu)", t->name, t->nbytes, s->r.lim.max_array_bytes);
        return NULL;
    }
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (map[i].dt != t->dtype) continue;
        pk_value *v = s_new(s, PK_NDARRAY);
        int64_t *sh = v ? pki_alloc(s->r.doc, (t->ndim ? (size_t)t->ndim : 1) * sizeof *sh) : NULL;
        if (!sh) { if (v) sbad(s, "out of memory"); return NULL; }
        size_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            sh[d] = t->shape[d];
            count *= (size_t)t->shape[d];  /* bounded: mact_st checked nbytes = product x size */
        }
        v->u.arr.dt = map[i].pd;
        v->u.arr.ndim = t->ndim;
        v->u.arr.shape = sh;
        v->u.arr.count = count;
        v->u.arr.data = t->data;
        v->u.arr.nbytes = t->nbytes;
        v->flags |= F_BUILT;
        return pki_to_host_order(&s->r, v) ? NULL : v;
    }
    sbad(s, "tensor '%s' has dtype %s, not supported (bool, int, uint, float16/32/64)", t->name, mact_dtype_name(t->dtype));
    return NULL;
}

static pk_value *s_object(sf *s, const char *module, const char *name, pk_value *state)
{
    pk_value *o = state ? s_new(s, PK_OBJECT) : NULL;
    if (!o) return NULL;
    o->u.obj.module = module;
    o->u.obj.name = name;
    if (pki_adopt(&s->r, o, state)) return NULL;
    o->u.obj.state = state;
    return o;
}

static const cJSON *s_need(sf *s, const cJSON *j, const char *key)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!c) sbad(s, "'%s' is missing", key);
    return c;
}

static pk_value *s_number_field(sf *s, const cJSON *j, const char *key, int want_float)
{
    const cJSON *c = s_need(s, j, key);
    if (!c) return NULL;
    if (!cJSON_IsNumber(c)) { sbad(s, "'%s' must be a number", key); return NULL; }
    if (!want_float && (c->valuedouble != floor(c->valuedouble) || fabs(c->valuedouble) > 9007199254740992.0)) {
        sbad(s, "'%s' must be an integer", key);
        return NULL;
    }
    return s_num(s, c->valuedouble, want_float);
}

static pk_value *s_observation(sf *s, const cJSON *j)
{
    pk_value *st = s_new(s, PK_DICT), *obs = st ? s_new(s, PK_DICT) : NULL;
    if (!obs) return NULL;
    const cJSON *scalars = s_need(s, j, "scalar_data");
    if (!scalars) return NULL;
    if (!cJSON_IsObject(scalars)) { sbad(s, "'scalar_data' must be an object"); return NULL; }
    for (const cJSON *c = scalars->child; c; c = c->next)
        if (s_set(s, obs, c->string, s_json(s, c, 2))) return NULL;
    for (size_t i = 0; s->st && i < mact_st_count(s->st); i++) {
        const mact_st_tensor *t = mact_st_at(s->st, i);
        if (s_set(s, obs, t->name, s_tensor(s, t))) return NULL;
    }
    const cJSON *mg = cJSON_GetObjectItemCaseSensitive(j, "must_go");
    if (mg && !cJSON_IsBool(mg)) { sbad(s, "'must_go' must be a bool"); return NULL; }
    pk_value *must = s_new(s, PK_BOOL);
    if (!must) return NULL;
    must->u.b = mg && cJSON_IsTrue(mg);
    if (s_set(s, st, "timestamp", s_number_field(s, j, "timestamp", 1)) ||
        s_set(s, st, "timestep", s_number_field(s, j, "timestep", 0)) || s_set(s, st, "observation", obs) ||
        s_set(s, st, "must_go", must))
        return NULL;
    return s_object(s, HELPERS, "TimedObservation", st);
}

static pk_value *s_config(sf *s, const cJSON *j)
{
    pk_value *st = s_new(s, PK_DICT), *feats = st ? s_new(s, PK_DICT) : NULL;
    if (!feats) return NULL;
    static const char *const strs[] = {"policy_type", "pretrained_name_or_path"};
    for (int i = 0; i < 2; i++) {
        const cJSON *c = s_need(s, j, strs[i]);
        if (!c) return NULL;
        if (!cJSON_IsString(c)) { sbad(s, "'%s' must be a string", strs[i]); return NULL; }
        if (s_set(s, st, strs[i], s_str(s, c->valuestring))) return NULL;
    }
    const cJSON *lf = s_need(s, j, "lerobot_features");
    if (!lf) return NULL;
    if (!cJSON_IsObject(lf)) { sbad(s, "'lerobot_features' must be an object"); return NULL; }
    for (const cJSON *c = lf->child; c; c = c->next) {
        /* as the PR's reader: {"type": <FeatureType value>, "shape": [...]} becomes a PolicyFeature */
        const cJSON *ty = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "type") : NULL;
        int is_pf = 0;
        for (size_t k = 0; ty && cJSON_IsString(ty) && k < sizeof pki_feature_types / sizeof pki_feature_types[0]; k++)
            is_pf |= !strcmp(ty->valuestring, pki_feature_types[k]);
        pk_value *val;
        if (is_pf) {
            const cJSON *shape = s_need(s, c, "shape");
            if (!shape) return NULL;
            if (!cJSON_IsArray(shape)) { sbad(s, "feature '%s': 'shape' must be a list", c->string); return NULL; }
            pk_value *sh = s_new(s, PK_TUPLE), *fst = sh ? s_new(s, PK_DICT) : NULL, *ftargs = fst ? s_new(s, PK_TUPLE) : NULL;
            pk_value *ft = ftargs ? s_new(s, PK_OBJECT) : NULL;
            if (!ft) return NULL;
            for (const cJSON *d = shape->child; d; d = d->next) {
                if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble) || d->valuedouble < 0) {
                    sbad(s, "feature '%s': shape entries must be non-negative integers", c->string);
                    return NULL;
                }
                if (s_append(s, sh, s_num(s, d->valuedouble, 0))) return NULL;
            }
            if (s_append(s, ftargs, s_str(s, ty->valuestring))) return NULL;
            ft->u.obj.module = "lerobot.configs.types";
            ft->u.obj.name = "FeatureType";
            if (pki_adopt(&s->r, ft, ftargs)) return NULL;
            ft->u.obj.args = ftargs;
            if (s_set(s, fst, "type", ft) || s_set(s, fst, "shape", sh)) return NULL;
            val = s_object(s, "lerobot.configs.types", "PolicyFeature", fst);
        } else {
            val = s_json(s, c, 3);
        }
        if (s_set(s, feats, c->string, val)) return NULL;
    }
    if (s_set(s, st, "lerobot_features", feats) || s_set(s, st, "actions_per_chunk", s_number_field(s, j, "actions_per_chunk", 0)))
        return NULL;
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(j, "device");
    if (dev && !cJSON_IsString(dev)) { sbad(s, "'device' must be a string"); return NULL; }
    if (s_set(s, st, "device", s_str(s, dev ? dev->valuestring : "cpu"))) return NULL;
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(j, "rename_map");
    if (rm && !cJSON_IsObject(rm)) { sbad(s, "'rename_map' must be an object"); return NULL; }
    if (s_set(s, st, "rename_map", rm ? s_json(s, rm, 2) : s_new(s, PK_DICT))) return NULL;
    return s_object(s, HELPERS, "RemotePolicyConfig", st);
}

static pk_value *s_actions(sf *s, const cJSON *j)
{
    const cJSON *acts = s_need(s, j, "actions");
    if (!acts) return NULL;
    if (!cJSON_IsArray(acts)) { sbad(s, "'actions' must be a list"); return NULL; }
    pk_value *list = s_new(s, PK_LIST);
    if (!list) return NULL;
    size_t i = 0;
    for (const cJSON *a = acts->child; a; a = a->next, i++) {
        if (!cJSON_IsObject(a)) { sbad(s, "actions[%zu] must be an object", i); return NULL; }
        char name[40];
        snprintf(name, sizeof name, "action_%zu", i);
        const mact_st_tensor *t = s->st ? mact_st_find(s->st, name) : NULL;
        if (!t) { sbad(s, "tensor '%s' is missing", name); return NULL; }
        pk_value *st = s_new(s, PK_DICT);
        if (!st || s_set(s, st, "timestamp", s_number_field(s, a, "timestamp", 1)) ||
            s_set(s, st, "timestep", s_number_field(s, a, "timestep", 0)) || s_set(s, st, "action", s_tensor(s, t)))
            return NULL;
        if (s_append(s, list, s_object(s, HELPERS, "TimedAction", st))) return NULL;
    }
    return list;
}

int pk_parse_safe(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen)
{
    sf s = {0};
    pki_clamp_limits(&s.r.lim, lim);
    if (pki_check_input(buf, len, &s.r.lim, out, err, errlen)) return -1;
    s.r.err = err;
    s.r.el = errlen;
    s.r.safe = 1;
    if (len < 4) return sbad(&s, "shorter than its 4-byte length");
    size_t jl = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
    if (jl > len - 4) return sbad(&s, "JSON length %zu exceeds the %zu bytes that follow", jl, len - 4);
    s.r.doc = calloc(1, sizeof *s.r.doc);
    if (!s.r.doc) return sbad(&s, "out of memory");
    s.r.doc->format = PK_FMT_SAFE;
    cJSON *j = NULL;
    char jerr[256];
    int rc = -1;
    pk_value *root = NULL;
    if (mact_json_parse((const char *)buf + 4, jl, "JSON metadata", &j, jerr, sizeof jerr)) {
        sbad(&s, "%s (NaN and Infinity are not accepted)", jerr);
        goto done;
    }
    if (len - 4 - jl > 0 && mact_st_parse_header(buf + 4 + jl, len - 4 - jl, "tensors", &s.st, jerr, sizeof jerr)) {
        sbad(&s, "%s", jerr);
        goto done;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsObject(j) || !cJSON_IsString(type)) {
        sbad(&s, "the JSON metadata must be an object with a \"type\" string");
        goto done;
    }
    if (!strcmp(type->valuestring, "TimedObservation")) root = s_observation(&s, j);
    else if (!strcmp(type->valuestring, "RemotePolicyConfig")) root = s_config(&s, j);
    else if (!strcmp(type->valuestring, "TimedActions")) root = s_actions(&s, j);
    else {
        char b[96];
        sbad(&s, "type '%s' is not TimedObservation, RemotePolicyConfig or TimedActions",
             pki_printable(type->valuestring, strlen(type->valuestring), b, sizeof b));
    }
    if (root) {
        s.r.doc->root = root;
        rc = 0;
    }
done:
    cJSON_Delete(j);
    mact_st_close(s.st);
    if (rc) { pk_free(s.r.doc); return -1; }
    *out = s.r.doc;
    return 0;
}

int pk_parse(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen)
{
    if (buf && len >= 5 && buf[0] == 0 && buf[4] == '{') return pk_parse_safe(buf, len, lim, out, err, errlen);
    return pk_parse_pickle(buf, len, lim, out, err, errlen);
}

