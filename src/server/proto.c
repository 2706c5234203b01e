/* The three protocols, run on an inference worker: decode one message, predict, encode the reply.
 *   openpi    msgpack-numpy (bin-typed ndarray keys); errors: a text frame, then close 1011
 *   act       json_numpy over HTTP POST /act; errors: 400 / 500 with {"error": msg}
 *   vla-eval  msgpack envelopes {type, payload, seq, timestamp}; one action row per observation from a
 *             per-connection chunk (re-planned with RTC every --replan-steps rows); errors:
 *             {"error": "observation_failed: ..."} and the connection stays open
 * Every protocol reads the real-time chunking keys (prev_actions, inference_delay, ...) into mact_predict_input.rtc. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "server/internal.h"

#define FAILJ(...) do { snprintf(err, sizeof err, __VA_ARGS__); goto fail; } while (0)

void srv_job_push(srv_job *j, srv_out *o)
{
    if (!o) return;
    if (j->out_tail) j->out_tail->next = o;
    else j->out = o;
    j->out_tail = o;
}

static srv_out *out_new(int kind)
{
    srv_out *o = calloc(1, sizeof *o);
    if (o) o->kind = kind;
    return o;
}

srv_out *srv_http_out(int status, const char *ctype, const char *body, size_t n)
{
    srv_out *o = out_new(2);
    if (!o) return NULL;
    o->http_status = status;
    o->ctype = ctype;
    srv_buf_put(&o->body, body, n);
    return o;
}

static void json_escape(srv_buf *b, const char *s)
{
    srv_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { srv_buf_put(b, "\\", 1); srv_buf_put(b, s, 1); }
        else if (c < 0x20) srv_buf_printf(b, "\\u%04x", c);
        else srv_buf_put(b, s, 1);
    }
    srv_buf_put(b, "\"", 1);
}

static void pk_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pk_key(msgpack_packer *pk, const char *s, int bin)
{
    size_t n = strlen(s);
    if (bin) { msgpack_pack_bin(pk, n); msgpack_pack_bin_body(pk, s, n); }
    else pk_str(pk, s);
}

/* float32 ndarray: openpi's msgpack-numpy (bin keys) or vla-eval's (str keys) */
static void pk_ndarray(msgpack_packer *pk, int bin_keys, const float *x, int ndim, const size_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    msgpack_pack_map(pk, 4);
    pk_key(pk, "__ndarray__", bin_keys);
    msgpack_pack_true(pk);
    pk_key(pk, "data", bin_keys);
    msgpack_pack_bin(pk, n * 4);
    msgpack_pack_bin_body(pk, x, n * 4);
    pk_key(pk, "dtype", bin_keys);
    pk_str(pk, "<f4");
    pk_key(pk, "shape", bin_keys);
    msgpack_pack_array(pk, (size_t)ndim);
    for (int i = 0; i < ndim; i++) msgpack_pack_uint64(pk, shape[i]);
}

static void pk_id(msgpack_packer *pk, const srv_req *r)
{
    pk_str(pk, "request_id");
    if (r->id_is_int) msgpack_pack_int64(pk, strtoll(r->req_id, NULL, 10));
    else pk_str(pk, r->req_id);
}

/* ---- request fields shared by the msgpack protocols ---- */
/* the request options every protocol may carry, read by a getter per wire format (msgpack or JSON) into *p
 * (NULL when absent) and applied to r; the arrays are freed either way */
typedef int (*opt_get_fn)(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el);
static int read_options(srv_req *r, const void *obj, opt_get_fn get, char *err, size_t el)
{
    static const char *const keys[4] = {"seed", "noise", "num_steps", "n_action_steps"};
    srv_arr a[4], *p[4] = {NULL, NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) rc = get(obj, keys[i], &a[i], &p[i], err, el) ? -1 : 0;
    if (!rc) rc = srv_req_options(r, p[0], p[1], p[2], p[3], err, el);
    for (int i = 0; i < 4; i++)
        if (p[i]) srv_arr_free(p[i]);
    return rc;
}

static int mp_opt_arr(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el)
{
    const msgpack_object *o = srv_mp_get((const msgpack_object *)obj, key);
    *p = NULL;
    if (!o || o->type == MSGPACK_OBJECT_NIL) return 0;
    char e2[256];
    if (srv_mp_arr(o, a, e2, sizeof e2)) { snprintf(err, el, "'%s': %s", key, e2); return -1; }
    *p = a;
    return 0;
}

static int copy_str(const char *s, size_t n, size_t max, char **out, const char *what, char *err, size_t el)
{
    if (n > max) { snprintf(err, el, "%s: %zu bytes (at most %zu)", what, n, max); return -1; }
    if (memchr(s, 0, n)) { snprintf(err, el, "%s: contains a NUL byte", what); return -1; }
    *out = malloc(n + 1);
    if (!*out) { snprintf(err, el, "out of memory"); return -1; }
    memcpy(*out, s, n);
    (*out)[n] = 0;
    return 0;
}

static void set_small(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
    for (size_t i = 0; i < n; i++) if ((unsigned char)dst[i] < 0x20 || dst[i] == '"' || dst[i] == '\\') dst[i] = '_';
}

/* ---- real-time chunking keys (every protocol; docs/serving.md "Real-time chunking") ----
 * prev_actions ([n, action_dim] float32/float64 in the protocol's array form, or a list of rows), inference_delay,
 * execution_horizon (integers), rtc_schedule, rtc_guidance (names), max_guidance_weight (a number) -> r->rtc.
 * Types, names and sizes are checked here (sizes before anything is allocated); the values' meaning (width ==
 * the tag's action dim, finite rows, delay <= rows, weight >= 0, ...) by mact_predict, whose message is sent. */
static const char *const RTC_KEYS[5] = {"inference_delay", "execution_horizon", "rtc_schedule", "max_guidance_weight",
                                        "rtc_guidance"};

typedef struct {
    int kind;                  /* 0 absent (or null), 1 number, 2 string, 3 something else */
    double num;
    const char *s;
    size_t n;
    const char *what;          /* kind 3: what it is, for the message */
} rtc_val;

static void rtc_mp_val(const msgpack_object *o, rtc_val *v)
{
    memset(v, 0, sizeof *v);
    if (!o || o->type == MSGPACK_OBJECT_NIL) return;
    v->kind = 3;
    if (o->type == MSGPACK_OBJECT_MAP && srv_mp_get(o, "__npgeneric__")) {   /* a numpy scalar */
        o = srv_mp_get(o, "data");
        if (!o) { v->what = "a numpy scalar without data"; return; }
    }
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: v->kind = 1; v->num = (double)o->via.u64; break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: v->kind = 1; v->num = (double)o->via.i64; break;
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: v->kind = 1; v->num = o->via.f64; break;
    case MSGPACK_OBJECT_STR: case MSGPACK_OBJECT_BIN: v->kind = 2; srv_mp_str(o, &v->s, &v->n); break;
    case MSGPACK_OBJECT_BOOLEAN: v->what = "a boolean"; break;
    case MSGPACK_OBJECT_ARRAY: v->what = "a list"; break;
    case MSGPACK_OBJECT_MAP: v->what = "a map"; break;
    default: v->what = "an unexpected msgpack type"; break;
    }
}

static void rtc_js_val(const cJSON *o, rtc_val *v)
{
    memset(v, 0, sizeof *v);
    if (!o || cJSON_IsNull(o)) return;
    v->kind = 3;
    if (cJSON_IsNumber(o)) { v->kind = 1; v->num = o->valuedouble; }
    else if (cJSON_IsString(o)) { v->kind = 2; v->s = o->valuestring; v->n = strlen(o->valuestring); }
    else v->what = cJSON_IsBool(o) ? "a boolean" : cJSON_IsArray(o) ? "a list" : "an object";
}

static int rtc_int(const rtc_val *v, const char *key, int *out, char *err, size_t el)
{
    if (v->kind != 1) {
        snprintf(err, el, "'%s' must be an integer, got %s", key, v->kind == 2 ? "a string" : v->what);
        return -1;
    }
    if (!isfinite(v->num) || v->num != floor(v->num) || fabs(v->num) > 1e9) {
        snprintf(err, el, "'%s' must be an integer, got %g", key, v->num);
        return -1;
    }
    *out = (int)v->num;
    return 0;
}

static int rtc_name(const rtc_val *v, const char *key, const char *choices, char *name, size_t cap, char *err, size_t el)
{
    if (v->kind != 2) {
        snprintf(err, el, "'%s' must be a string (%s), got %s", key, choices, v->kind == 1 ? "a number" : v->what);
        return -1;
    }
    set_small(name, cap, v->s, v->n);
    return 0;
}

static int rtc_scalars(srv_req *r, const rtc_val v[5], char *err, size_t el)
{
    char name[32];
    if (v[0].kind) {
        if (rtc_int(&v[0], RTC_KEYS[0], &r->rtc.inference_delay, err, el)) return -1;
        r->rtc_keys |= SRV_RTC_DELAY;
    }
    if (v[1].kind) {
        if (rtc_int(&v[1], RTC_KEYS[1], &r->rtc.execution_horizon, err, el)) return -1;
        r->rtc_keys |= SRV_RTC_HORIZON;
    }
    if (v[2].kind) {
        static const char ch[] = "zeros, ones, linear or exp";
        if (rtc_name(&v[2], RTC_KEYS[2], ch, name, sizeof name, err, el)) return -1;
        if (v[2].n >= sizeof name || mact_rtc_schedule_parse(name, &r->rtc.schedule)) {
            snprintf(err, el, "'rtc_schedule' is %s, got '%s'", ch, name);
            return -1;
        }
        r->rtc_keys |= SRV_RTC_SCHEDULE;
    }
    if (v[3].kind) {
        if (v[3].kind != 1) {
            snprintf(err, el, "'max_guidance_weight' must be a number, got %s", v[3].kind == 2 ? "a string" : v[3].what);
            return -1;
        }
        r->rtc.max_guidance_weight = (float)v[3].num;  /* the library refuses a negative or non-finite one */
        r->rtc_keys |= SRV_RTC_WEIGHT;
    }
    if (v[4].kind) {
        static const char ch[] = "identity or vjp";
        if (rtc_name(&v[4], RTC_KEYS[4], ch, name, sizeof name, err, el)) return -1;
        if (v[4].n >= sizeof name || mact_rtc_guidance_parse(name, &r->rtc.guidance)) {
            snprintf(err, el, "'rtc_guidance' is %s, got '%s'", ch, name);
            return -1;
        }
        r->rtc_keys |= SRV_RTC_GUIDANCE;
    }
    return 0;
}

/* [rows, cols] checked against the model's sizes, then r->prev allocated */
static int rtc_rows_alloc(srv *S, srv_req *r, int64_t rows, int64_t cols, char *err, size_t el)
{
    const mact_model_info *mi = srv_model_info(S);
    if (rows < 1) { snprintf(err, el, "'prev_actions' needs at least one row ([n, action_dim], n >= 1)"); return -1; }
    if (rows > mi->max_action_horizon) {
        snprintf(err, el, "'prev_actions' has %lld rows; at most the model's max_action_horizon %d", (long long)rows,
                 mi->max_action_horizon);
        return -1;
    }
    if (cols < 1 || cols > mi->max_action_dim) {
        snprintf(err, el, "'prev_actions' rows have %lld values; at most the model's max_action_dim %d", (long long)cols,
                 mi->max_action_dim);
        return -1;
    }
    r->prev = malloc((size_t)(rows * cols) * sizeof(float));
    if (!r->prev) { snprintf(err, el, "internal: out of memory"); return -1; }
    r->rtc.n_prev = (size_t)rows;
    r->rtc.prev_dim = (size_t)cols;
    r->rtc_keys |= SRV_RTC_ROWS;
    return 0;
}

/* an ndarray already decoded into a (float32 / float64, 2-D, sizes checked) -> r->prev */
static int rtc_rows_from_arr(srv *S, srv_req *r, const srv_arr *a, char *err, size_t el)
{
    if (a->kind != 'f' || (a->isz != 4 && a->isz != 8)) {
        snprintf(err, el, "'prev_actions' must be float32 or float64 (got %s%d)", a->kind == 'f' ? "float" :
                 a->kind == 'u' ? "uint" : a->kind == 'b' ? "bool" : "int", a->isz * 8);
        return -1;
    }
    if (a->ndim != 2) {
        snprintf(err, el, "'prev_actions' must be 2-D [n, action_dim] (got %d dims)", a->ndim);
        return -1;
    }
    if (rtc_rows_alloc(S, r, a->shape[0], a->shape[1], err, el)) return -1;
    for (size_t i = 0; i < a->count; i++) r->prev[i] = (float)srv_arr_get(a, i);
    return 0;
}

/* a 2-D shape's sizes against the model's, read before the array's bytes are decoded */
static int rtc_shape2(int64_t rows, int64_t cols, srv *S, char *err, size_t el)
{
    const mact_model_info *mi = srv_model_info(S);
    if (rows > mi->max_action_horizon || cols > mi->max_action_dim) {
        snprintf(err, el, "'prev_actions' shape [%lld, %lld] exceeds the model's max_action_horizon %d x max_action_dim %d",
                 (long long)rows, (long long)cols, mi->max_action_horizon, mi->max_action_dim);
        return -1;
    }
    return 0;
}

static int mp_num(const msgpack_object *o, double *v)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *v = (double)o->via.u64; return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *v = (double)o->via.i64; return 0;
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: *v = o->via.f64; return 0;
    default: return -1;
    }
}

static int mp_rtc(srv *S, const msgpack_object *obs, srv_req *r, char *err, size_t el)
{
    rtc_val v[5];
    for (int i = 0; i < 5; i++) rtc_mp_val(srv_mp_get(obs, RTC_KEYS[i]), &v[i]);
    if (rtc_scalars(r, v, err, el)) return -1;
    const msgpack_object *pa = srv_mp_get(obs, "prev_actions");
    if (!pa || pa->type == MSGPACK_OBJECT_NIL) return 0;
    if (pa->type == MSGPACK_OBJECT_MAP && srv_mp_get(pa, "__ndarray__")) {
        const msgpack_object *sh = srv_mp_get(pa, "shape");
        if (sh && sh->type == MSGPACK_OBJECT_ARRAY && sh->via.array.size == 2 &&
            sh->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
            sh->via.array.ptr[1].type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            uint64_t d0 = sh->via.array.ptr[0].via.u64, d1 = sh->via.array.ptr[1].via.u64;
            if (rtc_shape2(d0 > (1ull << 40) ? (int64_t)1 << 40 : (int64_t)d0, d1 > (1ull << 40) ? (int64_t)1 << 40 : (int64_t)d1,
                           S, err, el))
                return -1;
        }
        srv_arr a;
        char e2[256];
        if (srv_mp_arr(pa, &a, e2, sizeof e2)) { snprintf(err, el, "'prev_actions': %s", e2); return -1; }
        int rc = rtc_rows_from_arr(S, r, &a, err, el);   /* the bytes are the message's: nothing allocated before */
        srv_arr_free(&a);
        return rc;
    }
    if (pa->type == MSGPACK_OBJECT_ARRAY) {   /* a list of rows of numbers */
        uint32_t rows = pa->via.array.size;
        const msgpack_object *r0 = rows ? &pa->via.array.ptr[0] : NULL;
        if (r0 && r0->type != MSGPACK_OBJECT_ARRAY) {
            snprintf(err, el, "'prev_actions' must be 2-D [n, action_dim] (a list of rows)");
            return -1;
        }
        uint32_t cols = r0 ? r0->via.array.size : 0;
        if (rtc_rows_alloc(S, r, rows, cols, err, el)) return -1;
        for (uint32_t i = 0; i < rows; i++) {
            const msgpack_object *row = &pa->via.array.ptr[i];
            if (row->type != MSGPACK_OBJECT_ARRAY || row->via.array.size != cols) {
                snprintf(err, el, "'prev_actions': row %u is not a list of %u numbers", i, cols);
                return -1;
            }
            for (uint32_t k = 0; k < cols; k++) {
                double x;
                if (mp_num(&row->via.array.ptr[k], &x)) {
                    snprintf(err, el, "'prev_actions'[%u][%u] is not a number", i, k);
                    return -1;
                }
                r->prev[(size_t)i * cols + k] = (float)x;
            }
        }
        return 0;
    }
    snprintf(err, el, "'prev_actions' must be an ndarray [n, action_dim] (or a list of rows)");
    return -1;
}

static int js_rtc(srv *S, const cJSON *obj, srv_req *r, char *err, size_t el)
{
    rtc_val v[5];
    for (int i = 0; i < 5; i++) rtc_js_val(cJSON_GetObjectItemCaseSensitive(obj, RTC_KEYS[i]), &v[i]);
    if (rtc_scalars(r, v, err, el)) return -1;
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(obj, "prev_actions");
    if (!pa || cJSON_IsNull(pa)) return 0;
    if (cJSON_IsObject(pa)) {   /* json_numpy: shape and dtype read before the base64 is decoded */
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(pa, "shape");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(pa, "dtype");
        if (cJSON_IsArray(sh)) {
            int nd = cJSON_GetArraySize(sh);
            const cJSON *d0 = cJSON_GetArrayItem(sh, 0), *d1 = cJSON_GetArrayItem(sh, 1);
            if (nd != 2 || !cJSON_IsNumber(d0) || !cJSON_IsNumber(d1)) {
                snprintf(err, el, "'prev_actions' must be 2-D [n, action_dim] (got a shape of %d dims)", nd);
                return -1;
            }
            if (rtc_shape2(d0->valuedouble > 1e12 ? (int64_t)1e12 : (int64_t)d0->valuedouble,
                           d1->valuedouble > 1e12 ? (int64_t)1e12 : (int64_t)d1->valuedouble, S, err, el))
                return -1;
        }
        if (cJSON_IsString(dt) && strcmp(dt->valuestring, "<f4") && strcmp(dt->valuestring, "<f8") &&
            strcmp(dt->valuestring, "float32") && strcmp(dt->valuestring, "float64") && strcmp(dt->valuestring, "=f4") &&
            strcmp(dt->valuestring, "=f8")) {
            snprintf(err, el, "'prev_actions' must be float32 or float64 (got dtype '%.20s')", dt->valuestring);
            return -1;
        }
        srv_arr a;
        char e2[256];
        if (srv_js_arr(pa, &a, e2, sizeof e2)) { snprintf(err, el, "'prev_actions': %s", e2); return -1; }
        int rc = rtc_rows_from_arr(S, r, &a, err, el);
        srv_arr_free(&a);
        return rc;
    }
    if (cJSON_IsArray(pa)) {
        int rows = cJSON_GetArraySize(pa);
        const cJSON *r0 = pa->child;
        if (r0 && !cJSON_IsArray(r0)) {
            snprintf(err, el, "'prev_actions' must be 2-D [n, action_dim] (a list of rows)");
            return -1;
        }
        int cols = r0 ? cJSON_GetArraySize(r0) : 0;
        if (rtc_rows_alloc(S, r, rows, cols, err, el)) return -1;
        int i = 0;
        for (const cJSON *row = pa->child; row; row = row->next, i++) {
            if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols) {
                snprintf(err, el, "'prev_actions': row %d is not a list of %d numbers", i, cols);
                return -1;
            }
            int k = 0;
            for (const cJSON *x = row->child; x; x = x->next, k++) {
                if (!cJSON_IsNumber(x)) { snprintf(err, el, "'prev_actions'[%d][%d] is not a number", i, k); return -1; }
                r->prev[(size_t)i * cols + k] = (float)x->valuedouble;
            }
        }
        return 0;
    }
    snprintf(err, el, "'prev_actions' must be a json_numpy array [n, action_dim] (or a list of rows)");
    return -1;
}

static int mp_request(srv *S, int proto, const msgpack_object *obs, srv_req *r, char *err, size_t el)
{
    const srv_config *c = srv_cfg(S);
    const srv_keys *k = &c->keys[proto];
    char e2[300];
    if (obs->type != MSGPACK_OBJECT_MAP) { snprintf(err, el, "the observation must be a map"); return -1; }
    for (int i = 0; i < k->n_cams; i++) {
        const msgpack_object *o = srv_mp_get(obs, k->cams[i]);
        if (!o) { snprintf(err, el, "missing key '%s' (camera %d)", k->cams[i], i); return -1; }
        if (srv_mp_frame(o, c, &r->img[i], e2, sizeof e2)) { snprintf(err, el, "'%s': %s", k->cams[i], e2); return -1; }
        r->n_img = i + 1;
    }
    const msgpack_object *st = srv_mp_get(obs, k->state);
    if (!st) { snprintf(err, el, "missing key '%s' (state)", k->state); return -1; }
    srv_arr a = {0};
    if (srv_mp_arr(st, &a, e2, sizeof e2) || srv_state_from_arr(r, &a, e2, sizeof e2)) {
        srv_arr_free(&a);
        snprintf(err, el, "'%s': %s", k->state, e2);
        return -1;
    }
    srv_arr_free(&a);
    const char *s;
    size_t n;
    const msgpack_object *t = srv_mp_get(obs, k->task);
    if (!t) { snprintf(err, el, "missing key '%s' (task)", k->task); return -1; }
    if (t->type != MSGPACK_OBJECT_STR) { snprintf(err, el, "'%s' must be a string", k->task); return -1; }
    srv_mp_str(t, &s, &n);
    if (copy_str(s, n, c->max_string, &r->task, k->task, err, el)) return -1;
    const msgpack_object *id = srv_mp_get(obs, "request_id");
    if (id && !srv_mp_str(id, &s, &n)) { set_small(r->req_id, sizeof r->req_id, s, n); r->has_id = 1; }
    else if (id && (id->type == MSGPACK_OBJECT_POSITIVE_INTEGER || id->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
        snprintf(r->req_id, sizeof r->req_id, "%lld", (long long)id->via.i64);
        r->has_id = r->id_is_int = 1;
    }
    const msgpack_object *tag = srv_mp_get(obs, "normalization_tag");
    if (!tag) tag = srv_mp_get(obs, "norm_tag");
    if (tag && !srv_mp_str(tag, &s, &n)) set_small(r->norm_tag, sizeof r->norm_tag, s, n);
    return read_options(r, obs, mp_opt_arr, err, el);
}

static int unpack(srv *S, srv_job *j, msgpack_unpacked *u, char *err, size_t el)
{
    if (!j->msg->binary) { snprintf(err, el, "expected a binary frame (msgpack), got text"); return -1; }
    if (srv_mp_scan(j->msg->data, j->msg->len, srv_cfg(S)->max_depth, err, el)) return -1;
    size_t off = 0;
    if (msgpack_unpack_next(u, (const char *)j->msg->data, j->msg->len, &off) != MSGPACK_UNPACK_SUCCESS) {
        snprintf(err, el, "malformed msgpack");
        return -1;
    }
    return 0;
}

static int is_input_error(const char *err) { return strncmp(err, "internal:", 9) != 0; }

/* ---- openpi ---- */
srv_out *srv_openpi_metadata(srv *S)
{
    const srv_config *c = srv_cfg(S);
    const mact_model_info *mi = srv_model_info(S);
    srv_out *o = out_new(0);
    if (!o) return NULL;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &o->body, srv_msgpack_write);
    msgpack_pack_map(&pk, 7);
    pk_str(&pk, "server"); pk_str(&pk, "mact " MACT_VERSION_STRING);
    pk_str(&pk, "model"); pk_str(&pk, c->model_dir);
    pk_str(&pk, "precision"); pk_str(&pk, mact_precision_str(mi->precision));
    pk_str(&pk, "max_action_horizon"); msgpack_pack_int(&pk, mi->max_action_horizon);
    pk_str(&pk, "state_dim"); msgpack_pack_int(&pk, srv_default_state_dim(S));
    pk_str(&pk, "image_keys");
    msgpack_pack_array(&pk, (size_t)c->keys[SRV_OPENPI].n_cams);
    for (int i = 0; i < c->keys[SRV_OPENPI].n_cams; i++) pk_str(&pk, c->keys[SRV_OPENPI].cams[i]);
    pk_str(&pk, "prompt_key"); pk_str(&pk, c->keys[SRV_OPENPI].task);
    return o;
}

static srv_out *openpi_error(const char *msg)
{
    srv_out *o = out_new(1);
    if (!o) return NULL;
    srv_buf_printf(&o->body, "mact: %s", msg);
    o->close_after = 1;
    o->close_code = 1011;
    return o;
}

void srv_handle_openpi(srv *S, srv_worker *w, srv_job *j)
{
    char err[600];
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    srv_req r = {0};
    mact_predict_output out = {0};
    if (unpack(S, j, &u, err, sizeof err) || mp_request(S, SRV_OPENPI, &u.data, &r, err, sizeof err) ||
        mp_rtc(S, &u.data, &r, err, sizeof err)) {
        j->outcome = "bad_request";
        goto fail;
    }
    if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
    if (srv_predict(S, w, &r, &out, j, err, sizeof err)) {
        j->outcome = is_input_error(err) ? "bad_request" : "error";
        goto fail;
    }
    srv_out *o = out_new(0);
    if (!o) goto oom;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &o->body, srv_msgpack_write);
    long long prev = atomic_load(&j->conn->prev_total_us);
    msgpack_pack_map(&pk, 3 + r.has_id);
    pk_str(&pk, "actions");
    size_t shape[2] = {out.n_steps, out.action_dim};
    pk_ndarray(&pk, 1, out.actions, 2, shape);
    pk_str(&pk, "server_timing");
    msgpack_pack_map(&pk, prev > 0 ? 4 : 3);
    pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, j->infer_ms);
    pk_str(&pk, "server_ms"); msgpack_pack_double(&pk, srv_now_ms() - j->msg->t_recv);
    pk_str(&pk, "queue_ms"); msgpack_pack_double(&pk, j->t_start - j->t_enq);
    if (prev > 0) { pk_str(&pk, "prev_total_ms"); msgpack_pack_double(&pk, (double)prev / 1000.0); }
    pk_str(&pk, "policy_timing");
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, out.timings.total_ms);
    if (r.has_id) pk_id(&pk, &r);
    if (o->body.oom) { free(o->body.buf); free(o); goto oom; }
    srv_job_push(j, o);
    j->outcome = "ok";
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
    return;
oom:
    snprintf(err, sizeof err, "out of memory");
    j->outcome = "error";
fail:
    snprintf(j->detail, sizeof j->detail, "%.190s", err);
    srv_job_push(j, openpi_error(err));
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
}

/* ---- vla-eval ---- */
static srv_out *vla_begin(msgpack_packer *pk, const char *type, uint64_t seq)
{
    srv_out *o = out_new(0);
    if (!o) return NULL;
    msgpack_packer_init(pk, &o->body, srv_msgpack_write);
    msgpack_pack_map(pk, 4);
    pk_str(pk, "type"); pk_str(pk, type);
    pk_str(pk, "seq"); msgpack_pack_uint64(pk, seq);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pk_str(pk, "timestamp"); msgpack_pack_double(pk, (double)ts.tv_sec + ts.tv_nsec * 1e-9);
    pk_str(pk, "payload");
    return o;
}

static srv_out *vla_error(uint64_t seq, const char *prefix, const char *msg)
{
    msgpack_packer pk;
    srv_out *o = vla_begin(&pk, "error", seq);
    if (!o) return NULL;
    char text[700];
    snprintf(text, sizeof text, "%s%s", prefix, msg);
    msgpack_pack_map(&pk, 1);
    pk_str(&pk, "error"); pk_str(&pk, text);
    return o;
}

srv_out *srv_error_out(srv *S, int proto, const uint8_t *msg, size_t len, int http_status, const char *text)
{
    if (proto == SRV_OPENPI) return openpi_error(text);
    if (proto == SRV_ACT) {
        srv_buf b = {0};
        srv_buf_put(&b, "{\"error\": ", 10);
        json_escape(&b, text);
        srv_buf_put(&b, "}\n", 2);
        srv_out *o = srv_http_out(http_status, "application/json", (const char *)srv_buf_data(&b), b.len);
        free(b.buf);
        return o;
    }
    /* vla-eval: answer with the message's seq when it can be read */
    uint64_t seq = 0;
    if (msg && !srv_mp_scan(msg, len, srv_cfg(S)->max_depth, NULL, 0)) {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        if (msgpack_unpack_next(&u, (const char *)msg, len, &off) == MSGPACK_UNPACK_SUCCESS) {
            const msgpack_object *s = srv_mp_get(&u.data, "seq");
            if (s && s->type == MSGPACK_OBJECT_POSITIVE_INTEGER) seq = s->via.u64;
        }
        msgpack_unpacked_destroy(&u);
    }
    return vla_error(seq, "observation_failed: ", text);
}

static void vla_hello(srv *S, srv_job *j, uint64_t seq)
{
    const srv_config *c = srv_cfg(S);
    const mact_model_info *mi = srv_model_info(S);
    msgpack_packer pk;
    srv_out *o = vla_begin(&pk, "hello", seq);
    if (!o) return;
    msgpack_pack_map(&pk, 5);
    pk_str(&pk, "harness_version"); pk_str(&pk, "mact-" MACT_VERSION_STRING);
    pk_str(&pk, "protocol_version"); msgpack_pack_int(&pk, 1);
    pk_str(&pk, "model_server"); pk_str(&pk, "mact");
    pk_str(&pk, "capabilities");
    msgpack_pack_map(&pk, 3);
    pk_str(&pk, "action_chunking"); msgpack_pack_true(&pk);
    pk_str(&pk, "max_action_horizon"); msgpack_pack_int(&pk, mi->max_action_horizon);
    pk_str(&pk, "num_cameras"); msgpack_pack_int(&pk, c->keys[SRV_VLA].n_cams);
    pk_str(&pk, "observation_params");
    msgpack_pack_map(&pk, 2);
    pk_str(&pk, "send_state"); msgpack_pack_true(&pk);
    pk_str(&pk, "send_wrist_image"); msgpack_pack_true(&pk);
    srv_job_push(j, o);
}

void srv_handle_vla(srv *S, srv_worker *w, srv_job *j)
{
    char err[600];
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    srv_req r = {0};
    uint64_t seq = 0;
    int guided = 0;            /* rows of the previous chunk that guided this observation's inference */
    srv_conn *cn = j->conn;
    if (unpack(S, j, &u, err, sizeof err)) { j->outcome = "bad_request"; goto fail; }
    const msgpack_object *env = &u.data;
    const msgpack_object *so = srv_mp_get(env, "seq"), *to = srv_mp_get(env, "type"), *po = srv_mp_get(env, "payload");
    if (so && so->type == MSGPACK_OBJECT_POSITIVE_INTEGER) seq = so->via.u64;
    if (env->type != MSGPACK_OBJECT_MAP || !so || !to || !po || !srv_mp_get(env, "timestamp")) {
        j->outcome = "bad_request";
        FAILJ("message missing required fields (type, payload, seq, timestamp)");
    }
    const char *ts;
    size_t tn;
    if (srv_mp_str(to, &ts, &tn)) { j->outcome = "bad_request"; FAILJ("'type' must be a string"); }
    char type[32];
    set_small(type, sizeof type, ts, tn);
    snprintf(j->detail, sizeof j->detail, "type=%s seq=%llu", type, (unsigned long long)seq);
    if (!strcmp(type, "hello")) { vla_hello(S, j, seq); j->outcome = "control"; goto done; }
    if (!strcmp(type, "episode_start") || !strcmp(type, "episode_end")) {
        cn->chunk_rows = cn->chunk_pos = 0;
        cn->chunk_served = 0;
        j->outcome = "control";
        goto done;
    }
    if (!strcmp(type, "error")) { j->outcome = "control"; goto done; }
    if (strcmp(type, "observation")) { j->outcome = "bad_request"; FAILJ("unknown message type '%s'", type); }
    /* RTC keys are read on every observation (a bad one is refused even when the row comes from the chunk) */
    if (po->type != MSGPACK_OBJECT_MAP) { j->outcome = "bad_request"; FAILJ("the observation must be a map"); }
    if (mp_rtc(S, po, &r, err, sizeof err)) { j->outcome = is_input_error(err) ? "bad_request" : "error"; goto fail; }
    const srv_config *cf = srv_cfg(S);
    int left = cn->chunk_rows - cn->chunk_pos;
    /* inference: the client's own prev_actions; the chunk used up; or --replan-steps K rows of it served, guided by
     * the rows left (the simulator waits for the reply: delay 0 unless the observation says otherwise) */
    int replan = !r.prev && left > 0 && cf->replan_steps > 0 && cn->chunk_served >= cf->replan_steps;
    if (r.prev || left <= 0 || replan) {
        mact_predict_output out = {0};
        if (mp_request(S, SRV_VLA, po, &r, err, sizeof err)) { j->outcome = "bad_request"; goto fail; }
        if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
        if (replan) {
            /* the server's options for its replans, each overridden by the observation's own key */
            const mact_rtc_options *d = &cf->replan_rtc;
            if (!(r.rtc_keys & SRV_RTC_HORIZON)) r.rtc.execution_horizon = d->execution_horizon;
            if (!(r.rtc_keys & SRV_RTC_SCHEDULE)) r.rtc.schedule = d->schedule;
            if (!(r.rtc_keys & SRV_RTC_WEIGHT)) r.rtc.max_guidance_weight = d->max_guidance_weight;
            if (!(r.rtc_keys & SRV_RTC_GUIDANCE)) r.rtc.guidance = d->guidance;
            r.prev = malloc((size_t)left * (size_t)cn->chunk_dim * sizeof(float));
            if (!r.prev) { j->outcome = "error"; FAILJ("out of memory"); }
            memcpy(r.prev, cn->chunk + (size_t)cn->chunk_pos * cn->chunk_dim, (size_t)left * cn->chunk_dim * sizeof(float));
            r.rtc.n_prev = (size_t)left;
            r.rtc.prev_dim = (size_t)cn->chunk_dim;
        }
        if (srv_predict(S, w, &r, &out, j, err, sizeof err)) {
            j->outcome = is_input_error(err) ? "bad_request" : "error";
            goto fail;
        }
        int start = r.prev ? r.rtc.inference_delay : 0;   /* rows [0, d) of a guided chunk are already past */
        if (start >= (int)out.n_steps) {
            j->outcome = "bad_request";
            FAILJ("inference_delay %d skips every one of the %zu rows returned (n_action_steps)", start, out.n_steps);
        }
        size_t n = out.n_steps * out.action_dim;
        float *c2 = realloc(cn->chunk, n * sizeof(float));
        if (!c2) { j->outcome = "error"; FAILJ("out of memory"); }
        cn->chunk = c2;
        memcpy(c2, out.actions, n * sizeof(float));
        cn->chunk_rows = (int)out.n_steps;
        cn->chunk_dim = (int)out.action_dim;
        cn->chunk_pos = start;
        cn->chunk_served = 0;
        guided = r.prev ? (int)r.rtc.n_prev : 0;
    }
    msgpack_packer pk;
    srv_out *o = vla_begin(&pk, "action", seq);
    if (!o) { j->outcome = "error"; FAILJ("out of memory"); }
    size_t shape[1] = {(size_t)cn->chunk_dim};
    msgpack_pack_map(&pk, 6 + r.has_id + (guided > 0));
    pk_str(&pk, "server_ms"); msgpack_pack_double(&pk, srv_now_ms() - j->msg->t_recv);
    pk_str(&pk, "actions");
    pk_ndarray(&pk, 0, cn->chunk + (size_t)cn->chunk_pos * cn->chunk_dim, 1, shape);
    pk_str(&pk, "chunk_index"); msgpack_pack_int(&pk, cn->chunk_pos);
    pk_str(&pk, "chunk_rows"); msgpack_pack_int(&pk, cn->chunk_rows);
    pk_str(&pk, "queue_ms"); msgpack_pack_double(&pk, j->t_start - j->t_enq);
    pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, j->infer_ms);
    if (r.has_id) pk_id(&pk, &r);
    if (guided > 0) { pk_str(&pk, "rtc_prev_rows"); msgpack_pack_int(&pk, guided); }
    cn->chunk_pos++;
    cn->chunk_served++;
    srv_job_push(j, o);
    j->outcome = "ok";
done:
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
    return;
fail:
    snprintf(j->detail, sizeof j->detail, "%.190s", err);
    srv_job_push(j, vla_error(seq, "observation_failed: ", err));
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
}

/* ---- /act ---- */
static int js_opt(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el)
{
    const cJSON *o = srv_js_get((const cJSON *)obj, key);
    *p = NULL;
    if (!o || cJSON_IsNull(o)) return 0;
    char e2[256];
    if (srv_js_arr(o, a, e2, sizeof e2)) { snprintf(err, el, "'%s': %s", key, e2); return -1; }
    *p = a;
    return 0;
}

static int js_request(srv *S, const cJSON *obj, srv_req *r, char *err, size_t el)
{
    const srv_config *c = srv_cfg(S);
    char e2[300];
    if (!cJSON_IsObject(obj)) { snprintf(err, el, "the body must be a JSON object"); return -1; }
    const cJSON *jp = cJSON_GetObjectItemCaseSensitive(obj, "images_jpeg");
    if (jp && !cJSON_IsObject(jp)) { snprintf(err, el, "'images_jpeg' must be an object of base64 strings"); return -1; }
    if (jp && cJSON_GetArraySize(jp) > c->max_images) { snprintf(err, el, "'images_jpeg': more than %d frames", c->max_images); return -1; }
    const srv_keys *k = &c->keys[SRV_ACT];
    const srv_keys *y = &c->yam_keys;
    char yshort[SRV_MAX_KEY];
    snprintf(yshort, sizeof yshort, "%s", y->cams[0]);
    char *us = strstr(yshort, "_cam");
    if (us) *us = 0;
    if ((srv_model_cameras(S) == y->n_cams && !srv_js_get(obj, k->cams[0])) || srv_js_get(obj, y->cams[0]) || (jp && (cJSON_GetObjectItemCaseSensitive(jp, y->cams[0]) ||
                                              cJSON_GetObjectItemCaseSensitive(jp, yshort))))
        k = y;
    for (int i = 0; i < k->n_cams; i++) {
        const cJSON *o = NULL;
        if (jp) {
            o = cJSON_GetObjectItemCaseSensitive(jp, k->cams[i]);
            if (!o) {
                char sh[SRV_MAX_KEY];
                snprintf(sh, sizeof sh, "%s", k->cams[i]);
                char *p = strstr(sh, "_cam");
                if (p) *p = 0;
                o = cJSON_GetObjectItemCaseSensitive(jp, sh);
            }
            if (o && !cJSON_IsString(o)) { snprintf(err, el, "images_jpeg.%s must be a base64 string", k->cams[i]); return -1; }
        }
        if (!o) o = srv_js_get(obj, k->cams[i]);
        if (!o) { snprintf(err, el, "missing key '%s' (camera %d)", k->cams[i], i); return -1; }
        if (srv_js_frame(o, c, &r->img[i], e2, sizeof e2)) { snprintf(err, el, "'%s': %s", k->cams[i], e2); return -1; }
        r->n_img = i + 1;
    }
    const cJSON *st = srv_js_get(obj, k->state);
    if (!st) { snprintf(err, el, "missing key '%s' (state)", k->state); return -1; }
    srv_arr a;
    if (srv_js_arr(st, &a, e2, sizeof e2) || srv_state_from_arr(r, &a, e2, sizeof e2)) {
        srv_arr_free(&a);
        snprintf(err, el, "'%s': %s", k->state, e2);
        return -1;
    }
    srv_arr_free(&a);
    const cJSON *t = srv_js_get(obj, k->task);
    if (!t) { snprintf(err, el, "missing key '%s' (task)", k->task); return -1; }
    if (!cJSON_IsString(t)) { snprintf(err, el, "'%s' must be a string", k->task); return -1; }
    if (copy_str(t->valuestring, strlen(t->valuestring), c->max_string, &r->task, k->task, err, el)) return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "request_id");
    if (cJSON_IsString(id)) { set_small(r->req_id, sizeof r->req_id, id->valuestring, strlen(id->valuestring)); r->has_id = 1; }
    else if (cJSON_IsNumber(id) && id->valuedouble == floor(id->valuedouble) && fabs(id->valuedouble) < 9e15) {
        snprintf(r->req_id, sizeof r->req_id, "%.0f", id->valuedouble);
        r->has_id = r->id_is_int = 1;
    }
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(obj, "normalization_tag");
    if (cJSON_IsString(tag)) set_small(r->norm_tag, sizeof r->norm_tag, tag->valuestring, strlen(tag->valuestring));
    return read_options(r, obj, js_opt, err, el);
}

void srv_handle_act(srv *S, srv_worker *w, srv_job *j)
{
    char err[600];
    srv_req r = {0};
    mact_predict_output out = {0};
    int status = 400;
    cJSON *obj = srv_json_parse((const char *)j->msg->data, j->msg->len, srv_cfg(S)->max_depth, err, sizeof err);
    if (!obj || js_request(S, obj, &r, err, sizeof err) || js_rtc(S, obj, &r, err, sizeof err)) {
        if (!is_input_error(err)) status = 500;
        j->outcome = status == 500 ? "error" : "bad_request";
        goto fail;
    }
    if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
    if (srv_predict(S, w, &r, &out, j, err, sizeof err)) {
        if (!is_input_error(err)) { status = 500; j->outcome = "error"; }
        else j->outcome = "bad_request";
        goto fail;
    }
    srv_out *o = out_new(2);
    if (!o) { status = 500; snprintf(err, sizeof err, "out of memory"); goto fail; }
    o->http_status = 200;
    o->ctype = "application/json";
    srv_buf *b = &o->body;
    srv_buf_put(b, "{\"actions\": {\"__numpy__\": \"", 27);
    srv_b64_encode(b, (const uint8_t *)out.actions, out.n_steps * out.action_dim * sizeof(float));
    srv_buf_printf(b, "\", \"dtype\": \"<f4\", \"shape\": [%zu, %zu]}, \"dt_ms\": %.3f, \"infer_ms\": %.3f, \"queue_ms\": %.3f",
                   out.n_steps, out.action_dim, srv_now_ms() - j->msg->t_recv, j->infer_ms, j->t_start - j->t_enq);
    if (r.has_id) {
        if (r.id_is_int) srv_buf_printf(b, ", \"request_id\": %s", r.req_id);
        else srv_buf_printf(b, ", \"request_id\": \"%s\"", r.req_id);
    }
    srv_buf_put(b, "}\n", 2);
    if (b->oom) { free(b->buf); free(o); status = 500; snprintf(err, sizeof err, "out of memory"); goto fail; }
    srv_job_push(j, o);
    j->outcome = "ok";
    cJSON_Delete(obj);
    srv_req_free(&r);
    return;
fail:
    snprintf(j->detail, sizeof j->detail, "%.190s", err);
    srv_job_push(j, srv_error_out(S, SRV_ACT, NULL, 0, status, err));
    cJSON_Delete(obj);
    srv_req_free(&r);
}
