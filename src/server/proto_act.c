/* act: HTTP POST /act with json_numpy bodies (MolmoAct2's DROID / YAM host servers); GET /act answers the
 * server's identity. Errors: 400 (the client's) / 500 (the server's) with {"error": msg}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/internal.h"

static srv_out *act_error_out(const srv_state *S, const uint8_t *msg, size_t len, int http_status, const char *text)
{
    (void)S; (void)msg; (void)len;
    srv_buf b = {0};
    srv_buf_put(&b, "{\"error\": ", 10);
    srv_json_escape(&b, text);
    srv_buf_put(&b, "}\n", 2);
    srv_out *o = srv_http_out(http_status, "application/json", (const char *)srv_buf_data(&b), b.len);
    free(b.buf);
    return o;
}

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

static int js_request(const srv_state *S, const cJSON *obj, srv_req *r, char *err, size_t el)
{
    const srv_config *c = &S->c;
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
    if ((S->n_cameras == y->n_cams && !srv_js_get(obj, k->cams[0])) || srv_js_get(obj, y->cams[0]) || (jp && (cJSON_GetObjectItemCaseSensitive(jp, y->cams[0]) ||
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
    int rc = srv_copy_str(t->valuestring, strlen(t->valuestring), c->max_string, &r->task, k->task, err, el);
    if (rc) return rc;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "request_id");
    if (cJSON_IsString(id)) { srv_set_small(r->req_id, sizeof r->req_id, id->valuestring, strlen(id->valuestring)); r->has_id = 1; }
    else if (cJSON_IsNumber(id) && id->valuedouble == floor(id->valuedouble) && fabs(id->valuedouble) < 9e15) {
        snprintf(r->req_id, sizeof r->req_id, "%.0f", id->valuedouble);
        r->has_id = r->id_is_int = 1;
    }
    const cJSON *tag = cJSON_GetObjectItemCaseSensitive(obj, "normalization_tag");
    if (cJSON_IsString(tag)) srv_set_small(r->norm_tag, sizeof r->norm_tag, tag->valuestring, strlen(tag->valuestring));
    return srv_read_options(r, obj, js_opt, err, el);
}

static void act_handle(const srv_state *S, srv_worker *w, srv_job *j)
{
    char err[600];
    srv_req r = {0};
    mact_predict_output out = {0};
    int status = 400;
    cJSON *obj = srv_json_parse((const char *)j->msg->data, j->msg->len, S->c.max_depth, err, sizeof err);
    int rc = obj ? js_request(S, obj, &r, err, sizeof err) : -1;
    if (!rc) rc = srv_js_rtc(S, obj, &r, err, sizeof err);
    if (rc) j->outcome = srv_decode_outcome(rc);
    else {
        if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
        j->outcome = srv_predict(S, w, &r, &out, j, err, sizeof err);
    }
    if (j->outcome != SRV_OC_OK) {
        if (j->outcome == SRV_OC_ERROR) status = 500;
        goto fail;
    }
    srv_out *o = srv_out_new(2);
    if (!o) { status = 500; j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "out of memory"); goto fail; }
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
    if (b->oom) { free(b->buf); free(o); status = 500; j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "out of memory"); goto fail; }
    srv_job_push(j, o);
    j->outcome = SRV_OC_OK;
    cJSON_Delete(obj);
    srv_req_free(&r);
    return;
fail:
    snprintf(j->detail, sizeof j->detail, "%.190s", err);
    srv_job_push(j, act_error_out(S, NULL, 0, status, err));
    cJSON_Delete(obj);
    srv_req_free(&r);
}

const srv_protocol srv_proto_act = {
    .name = "act", .key_flag = "act", .transport = SRV_HTTP, .route = "/act",
    .cams = "external_cam,wrist_cam", .state = "state", .task = "instruction",
    .handle = act_handle, .error_out = act_error_out,
};
