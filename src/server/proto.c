/* The three protocols, run on an inference worker: decode one message, predict, encode the reply.
 *   openpi    msgpack-numpy (bin-typed ndarray keys); errors: a text frame, then close 1011
 *   act       json_numpy over HTTP POST /act; errors: 400 / 500 with {"error": msg}
 *   vla-eval  msgpack envelopes {type, payload, seq, timestamp}; one action row per observation from a
 *             per-connection chunk; errors: {"error": "observation_failed: ..."} and the connection stays open */
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
    if (unpack(S, j, &u, err, sizeof err) || mp_request(S, SRV_OPENPI, &u.data, &r, err, sizeof err)) {
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
        j->outcome = "control";
        goto done;
    }
    if (!strcmp(type, "error")) { j->outcome = "control"; goto done; }
    if (strcmp(type, "observation")) { j->outcome = "bad_request"; FAILJ("unknown message type '%s'", type); }
    if (cn->chunk_pos >= cn->chunk_rows) {
        mact_predict_output out = {0};
        if (mp_request(S, SRV_VLA, po, &r, err, sizeof err)) { j->outcome = "bad_request"; goto fail; }
        if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
        if (srv_predict(S, w, &r, &out, j, err, sizeof err)) {
            j->outcome = is_input_error(err) ? "bad_request" : "error";
            goto fail;
        }
        size_t n = out.n_steps * out.action_dim;
        float *c2 = realloc(cn->chunk, n * sizeof(float));
        if (!c2) { j->outcome = "error"; FAILJ("out of memory"); }
        cn->chunk = c2;
        memcpy(c2, out.actions, n * sizeof(float));
        cn->chunk_rows = (int)out.n_steps;
        cn->chunk_dim = (int)out.action_dim;
        cn->chunk_pos = 0;
    }
    msgpack_packer pk;
    srv_out *o = vla_begin(&pk, "action", seq);
    if (!o) { j->outcome = "error"; FAILJ("out of memory"); }
    size_t shape[1] = {(size_t)cn->chunk_dim};
    msgpack_pack_map(&pk, 6 + r.has_id);
    pk_str(&pk, "server_ms"); msgpack_pack_double(&pk, srv_now_ms() - j->msg->t_recv);
    pk_str(&pk, "actions");
    pk_ndarray(&pk, 0, cn->chunk + (size_t)cn->chunk_pos * cn->chunk_dim, 1, shape);
    pk_str(&pk, "chunk_index"); msgpack_pack_int(&pk, cn->chunk_pos);
    pk_str(&pk, "chunk_rows"); msgpack_pack_int(&pk, cn->chunk_rows);
    pk_str(&pk, "queue_ms"); msgpack_pack_double(&pk, j->t_start - j->t_enq);
    pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, j->infer_ms);
    if (r.has_id) pk_id(&pk, &r);
    cn->chunk_pos++;
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
    if (!obj || js_request(S, obj, &r, err, sizeof err)) { j->outcome = "bad_request"; goto fail; }
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
