/* openpi: WebSocket + msgpack-numpy (Physical Intelligence's openpi_client). The server sends a metadata frame
 * first; each binary frame is an observation dict (bin-typed ndarray keys), answered with {actions,
 * server_timing, policy_timing}; an error is a text frame "mact: <why>", then close 1011. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/internal.h"

static srv_out *openpi_metadata(const srv_state *S)
{
    const srv_config *c = &S->c;
    const mact_model_info *mi = &S->mi;
    srv_out *o = srv_out_new(0);
    if (!o) return NULL;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &o->body, srv_msgpack_write);
    msgpack_pack_map(&pk, 7);
    srv_pk_str(&pk, "server"); srv_pk_str(&pk, "mact " MACT_VERSION_STRING);
    srv_pk_str(&pk, "model"); srv_pk_str(&pk, c->model_dir);
    srv_pk_str(&pk, "precision"); srv_pk_str(&pk, mact_precision_str(mi->precision));
    srv_pk_str(&pk, "max_action_horizon"); msgpack_pack_int(&pk, mi->max_action_horizon);
    srv_pk_str(&pk, "state_dim"); msgpack_pack_int(&pk, S->state_dim);
    srv_pk_str(&pk, "image_keys");
    msgpack_pack_array(&pk, (size_t)c->keys[SRV_OPENPI].n_cams);
    for (int i = 0; i < c->keys[SRV_OPENPI].n_cams; i++) srv_pk_str(&pk, c->keys[SRV_OPENPI].cams[i]);
    srv_pk_str(&pk, "prompt_key"); srv_pk_str(&pk, c->keys[SRV_OPENPI].task);
    return o;
}

static srv_out *openpi_error(const char *msg)
{
    srv_out *o = srv_out_new(1);
    if (!o) return NULL;
    srv_buf_printf(&o->body, "mact: %s", msg);
    o->close_after = 1;
    o->close_code = 1011;
    return o;
}

static void openpi_handle(const srv_state *S, srv_worker *w, srv_job *j)
{
    char err[600];
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    srv_req r = {0};
    mact_predict_output out = {0};
    int rc = srv_mp_unpack(S, j, &u, err, sizeof err);
    if (!rc) rc = srv_mp_request(S, SRV_OPENPI, &u.data, &r, err, sizeof err);
    if (!rc) rc = srv_mp_rtc(S, &u.data, &r, err, sizeof err);
    if (rc) { j->outcome = srv_decode_outcome(rc); goto fail; }
    if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
    if ((j->outcome = srv_predict(S, w, &r, &out, j, err, sizeof err)) != SRV_OC_OK) goto fail;
    srv_out *o = srv_out_new(0);
    if (!o) goto oom;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &o->body, srv_msgpack_write);
    long long prev = atomic_load(&j->conn->prev_total_us);
    msgpack_pack_map(&pk, 3 + r.has_id);
    srv_pk_str(&pk, "actions");
    size_t shape[2] = {out.n_steps, out.action_dim};
    srv_pk_ndarray(&pk, 1, out.actions, 2, shape);
    srv_pk_str(&pk, "server_timing");
    msgpack_pack_map(&pk, prev > 0 ? 4 : 3);
    srv_pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, j->infer_ms);
    srv_pk_str(&pk, "server_ms"); msgpack_pack_double(&pk, srv_now_ms() - j->msg->t_recv);
    srv_pk_str(&pk, "queue_ms"); msgpack_pack_double(&pk, j->t_start - j->t_enq);
    if (prev > 0) { srv_pk_str(&pk, "prev_total_ms"); msgpack_pack_double(&pk, (double)prev / 1000.0); }
    srv_pk_str(&pk, "policy_timing");
    msgpack_pack_map(&pk, 1);
    srv_pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, out.timings.total_ms);
    if (r.has_id) srv_pk_id(&pk, &r);
    if (o->body.oom) { free(o->body.buf); free(o); goto oom; }
    srv_job_push(j, o);
    j->outcome = SRV_OC_OK;
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
    return;
oom:
    snprintf(err, sizeof err, "out of memory");
    j->outcome = SRV_OC_ERROR;
fail:
    snprintf(j->detail, sizeof j->detail, "%.190s", err);
    srv_job_push(j, openpi_error(err));
    srv_req_free(&r);
    msgpack_unpacked_destroy(&u);
}

static srv_out *openpi_error_out(const srv_state *S, const uint8_t *msg, size_t len, int http_status, const char *text)
{
    (void)S; (void)msg; (void)len; (void)http_status;
    return openpi_error(text);
}

const srv_protocol srv_proto_openpi = {
    .name = "openpi", .key_flag = "openpi", .transport = SRV_WS,
    .cams = "observation/image,observation/wrist_image", .state = "observation/state", .task = "prompt",
    .handle = openpi_handle, .error_out = openpi_error_out, .on_open = openpi_metadata,
};
