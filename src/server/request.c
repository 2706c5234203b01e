/* What the protocols share: replies (srv_out), msgpack / JSON encoding helpers, the request options every protocol
 * may carry (seed, noise, num_steps, n_action_steps), the real-time chunking keys, and the msgpack observation
 * decoder of the two msgpack protocols (openpi, vla-eval). Decoders return 0, -1 for the client's error (the
 * message says what), or SRV_EINTERNAL for the server's own (out of memory). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "server/internal.h"

void srv_job_push(srv_job *j, srv_out *o)
{
    if (!o) return;
    if (j->out_tail) j->out_tail->next = o;
    else j->out = o;
    j->out_tail = o;
}

srv_out *srv_out_new(int kind)
{
    srv_out *o = calloc(1, sizeof *o);
    if (o) o->kind = kind;
    return o;
}

srv_out *srv_http_out(int status, const char *ctype, const char *body, size_t n)
{
    srv_out *o = srv_out_new(2);
    if (!o) return NULL;
    o->http_status = status;
    o->ctype = ctype;
    srv_buf_put(&o->body, body, n);
    return o;
}

void srv_json_escape(srv_buf *b, const char *s)
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

void srv_pk_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

void srv_pk_key(msgpack_packer *pk, const char *s, int bin)
{
    size_t n = strlen(s);
    if (bin) { msgpack_pack_bin(pk, n); msgpack_pack_bin_body(pk, s, n); }
    else srv_pk_str(pk, s);
}

/* float32 ndarray: openpi's msgpack-numpy (bin keys) or vla-eval's (str keys) */
void srv_pk_ndarray(msgpack_packer *pk, int bin_keys, const float *x, int ndim, const size_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    msgpack_pack_map(pk, 4);
    srv_pk_key(pk, "__ndarray__", bin_keys);
    msgpack_pack_true(pk);
    srv_pk_key(pk, "data", bin_keys);
    msgpack_pack_bin(pk, n * 4);
    msgpack_pack_bin_body(pk, x, n * 4);
    srv_pk_key(pk, "dtype", bin_keys);
    srv_pk_str(pk, "<f4");
    srv_pk_key(pk, "shape", bin_keys);
    msgpack_pack_array(pk, (size_t)ndim);
    for (int i = 0; i < ndim; i++) msgpack_pack_uint64(pk, shape[i]);
}

void srv_pk_id(msgpack_packer *pk, const srv_req *r)
{
    srv_pk_str(pk, "request_id");
    if (r->id_is_int) msgpack_pack_int64(pk, strtoll(r->req_id, NULL, 10));
    else srv_pk_str(pk, r->req_id);
}

/* ---- request fields shared by the msgpack protocols ---- */
/* the request options every protocol may carry, read by a getter per wire format (msgpack or JSON) into *p
 * (NULL when absent) and applied to r; the arrays are freed either way */
int srv_read_options(srv_req *r, const void *obj, srv_opt_get_fn get, char *err, size_t el)
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

int srv_mp_opt(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el)
{
    const msgpack_object *o = srv_mp_get((const msgpack_object *)obj, key);
    *p = NULL;
    if (!o || o->type == MSGPACK_OBJECT_NIL) return 0;
    char e2[256];
    if (srv_mp_arr(o, a, e2, sizeof e2)) { snprintf(err, el, "'%s': %s", key, e2); return -1; }
    *p = a;
    return 0;
}

int srv_copy_str(const char *s, size_t n, size_t max, char **out, const char *what, char *err, size_t el)
{
    if (n > max) { snprintf(err, el, "%s: %zu bytes (at most %zu)", what, n, max); return -1; }
    if (memchr(s, 0, n)) { snprintf(err, el, "%s: contains a NUL byte", what); return -1; }
    *out = malloc(n + 1);
    if (!*out) { snprintf(err, el, "out of memory"); return SRV_EINTERNAL; }
    memcpy(*out, s, n);
    (*out)[n] = 0;
    return 0;
}

void srv_set_small(char *dst, size_t cap, const char *s, size_t n)
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
    srv_set_small(name, cap, v->s, v->n);
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
static int rtc_rows_alloc(const srv_state *S, srv_req *r, int64_t rows, int64_t cols, char *err, size_t el)
{
    const mact_model_info *mi = &S->mi;
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
    if (!r->prev) { snprintf(err, el, "out of memory"); return SRV_EINTERNAL; }
    r->rtc.n_prev = (size_t)rows;
    r->rtc.prev_dim = (size_t)cols;
    r->rtc_keys |= SRV_RTC_ROWS;
    return 0;
}

/* an ndarray already decoded into a (float32 / float64, 2-D, sizes checked) -> r->prev */
static int rtc_rows_from_arr(const srv_state *S, srv_req *r, const srv_arr *a, char *err, size_t el)
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
    int rc = rtc_rows_alloc(S, r, a->shape[0], a->shape[1], err, el);
    if (rc) return rc;
    for (size_t i = 0; i < a->count; i++) r->prev[i] = (float)srv_arr_get(a, i);
    return 0;
}

/* a 2-D shape's sizes against the model's, read before the array's bytes are decoded */
static int rtc_shape2(int64_t rows, int64_t cols, const srv_state *S, char *err, size_t el)
{
    const mact_model_info *mi = &S->mi;
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

int srv_mp_rtc(const srv_state *S, const msgpack_object *obs, srv_req *r, char *err, size_t el)
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
        int rc = rtc_rows_alloc(S, r, rows, cols, err, el);
        if (rc) return rc;
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

int srv_js_rtc(const srv_state *S, const cJSON *obj, srv_req *r, char *err, size_t el)
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
        int rc = rtc_rows_alloc(S, r, rows, cols, err, el);
        if (rc) return rc;
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

int srv_mp_request(const srv_state *S, int proto, const msgpack_object *obs, srv_req *r, char *err, size_t el)
{
    const srv_config *c = &S->c;
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
    int rc = srv_copy_str(s, n, c->max_string, &r->task, k->task, err, el);
    if (rc) return rc;
    const msgpack_object *id = srv_mp_get(obs, "request_id");
    if (id && !srv_mp_str(id, &s, &n)) { srv_set_small(r->req_id, sizeof r->req_id, s, n); r->has_id = 1; }
    else if (id && (id->type == MSGPACK_OBJECT_POSITIVE_INTEGER || id->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
        snprintf(r->req_id, sizeof r->req_id, "%lld", (long long)id->via.i64);
        r->has_id = r->id_is_int = 1;
    }
    const msgpack_object *tag = srv_mp_get(obs, "normalization_tag");
    if (!tag) tag = srv_mp_get(obs, "norm_tag");
    if (tag && !srv_mp_str(tag, &s, &n)) srv_set_small(r->norm_tag, sizeof r->norm_tag, s, n);
    return srv_read_options(r, obs, srv_mp_opt, err, el);
}

int srv_mp_unpack(const srv_state *S, srv_job *j, msgpack_unpacked *u, char *err, size_t el)
{
    if (!j->msg->binary) { snprintf(err, el, "expected a binary frame (msgpack), got text"); return -1; }
    if (srv_mp_scan(j->msg->data, j->msg->len, S->c.max_depth, err, el)) return -1;
    size_t off = 0;
    if (msgpack_unpack_next(u, (const char *)j->msg->data, j->msg->len, &off) != MSGPACK_UNPACK_SUCCESS) {
        snprintf(err, el, "malformed msgpack");
        return -1;
    }
    return 0;
}
