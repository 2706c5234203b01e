/* vla-eval: WebSocket + msgpack envelopes {type, payload, seq, timestamp} (AllenAI's vla-evaluation-harness
 * model-server protocol). hello / episode_start / episode_end are control messages; each observation is answered
 * with one action row taken from the connection's current chunk, inferred again when the chunk is used up (or,
 * with --replan-steps K, once K rows were served, guided by the rows left: real-time chunking). Errors:
 * {"error": "observation_failed: ..."}, and the connection stays open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"
#include "server/internal.h"

#define FAILJ(...) do { snprintf(err, sizeof err, __VA_ARGS__); goto fail; } while (0)

/* the connection's chunk: the rows of the last inference, the next one to serve */
typedef struct {
    float *chunk;
    int chunk_rows, chunk_pos, chunk_dim;
    long long chunk_served;    /* rows of the current chunk served (--replan-steps counts these) */
} vla_conn;

static vla_conn *vla_state(srv_conn *c)
{
    if (!c->pstate) c->pstate = calloc(1, sizeof(vla_conn));
    return c->pstate;
}

static void vla_conn_free(void *p)
{
    vla_conn *v = p;
    if (v) free(v->chunk);
    free(v);
}

static srv_out *vla_begin(msgpack_packer *pk, const char *type, uint64_t seq)
{
    srv_out *o = srv_out_new(0);
    if (!o) return NULL;
    msgpack_packer_init(pk, &o->body, srv_msgpack_write);
    msgpack_pack_map(pk, 4);
    srv_pk_str(pk, "type"); srv_pk_str(pk, type);
    srv_pk_str(pk, "seq"); msgpack_pack_uint64(pk, seq);
    srv_pk_str(pk, "timestamp"); msgpack_pack_double(pk, mact_wall_s());
    srv_pk_str(pk, "payload");
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
    srv_pk_str(&pk, "error"); srv_pk_str(&pk, text);
    return o;
}

static srv_out *vla_error_out(const srv_state *S, const uint8_t *msg, size_t len, int http_status, const char *text)
{
    (void)http_status;
    /* answer with the message's seq when it can be read */
    uint64_t seq = 0;
    if (msg && !srv_mp_scan(msg, len, S->c.max_depth, NULL, 0)) {
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

static void vla_hello(const srv_state *S, srv_job *j, uint64_t seq)
{
    const srv_config *c = &S->c;
    const mact_model_info *mi = &S->mi;
    msgpack_packer pk;
    srv_out *o = vla_begin(&pk, "hello", seq);
    if (!o) return;
    msgpack_pack_map(&pk, 5);
    srv_pk_str(&pk, "harness_version"); srv_pk_str(&pk, "mact-" MACT_VERSION_STRING);
    srv_pk_str(&pk, "protocol_version"); msgpack_pack_int(&pk, 1);
    srv_pk_str(&pk, "model_server"); srv_pk_str(&pk, "mact");
    srv_pk_str(&pk, "capabilities");
    msgpack_pack_map(&pk, 3);
    srv_pk_str(&pk, "action_chunking"); msgpack_pack_true(&pk);
    srv_pk_str(&pk, "max_action_horizon"); msgpack_pack_int(&pk, mi->max_action_horizon);
    srv_pk_str(&pk, "num_cameras"); msgpack_pack_int(&pk, c->keys[SRV_VLA].n_cams);
    srv_pk_str(&pk, "observation_params");
    msgpack_pack_map(&pk, 2);
    srv_pk_str(&pk, "send_state"); msgpack_pack_true(&pk);
    srv_pk_str(&pk, "send_wrist_image"); msgpack_pack_true(&pk);
    srv_job_push(j, o);
}

static void vla_handle(const srv_state *S, srv_worker *w, srv_job *j)
{
    char err[600];
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    srv_req r = {0};
    uint64_t seq = 0;
    int guided = 0;            /* rows of the previous chunk that guided this observation's inference */
    vla_conn *cn = vla_state(j->conn);
    if (!cn) { j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "out of memory"); goto fail; }
    int rc = srv_mp_unpack(S, j, &u, err, sizeof err);
    if (rc) { j->outcome = srv_decode_outcome(rc); goto fail; }
    const msgpack_object *env = &u.data;
    const msgpack_object *so = srv_mp_get(env, "seq"), *to = srv_mp_get(env, "type"), *po = srv_mp_get(env, "payload");
    if (so && so->type == MSGPACK_OBJECT_POSITIVE_INTEGER) seq = so->via.u64;
    if (env->type != MSGPACK_OBJECT_MAP || !so || !to || !po || !srv_mp_get(env, "timestamp")) {
        j->outcome = SRV_OC_BAD;
        FAILJ("message missing required fields (type, payload, seq, timestamp)");
    }
    const char *ts;
    size_t tn;
    if (srv_mp_str(to, &ts, &tn)) { j->outcome = SRV_OC_BAD; FAILJ("'type' must be a string"); }
    char type[32];
    srv_set_small(type, sizeof type, ts, tn);
    snprintf(j->detail, sizeof j->detail, "type=%s seq=%llu", type, (unsigned long long)seq);
    if (!strcmp(type, "hello")) { vla_hello(S, j, seq); j->outcome = SRV_OC_CONTROL; goto done; }
    if (!strcmp(type, "episode_start") || !strcmp(type, "episode_end")) {
        cn->chunk_rows = cn->chunk_pos = 0;
        cn->chunk_served = 0;
        j->outcome = SRV_OC_CONTROL;
        goto done;
    }
    if (!strcmp(type, "error")) { j->outcome = SRV_OC_CONTROL; goto done; }
    if (strcmp(type, "observation")) { j->outcome = SRV_OC_BAD; FAILJ("unknown message type '%s'", type); }
    /* RTC keys are read on every observation (a bad one is refused even when the row comes from the chunk) */
    if (po->type != MSGPACK_OBJECT_MAP) { j->outcome = SRV_OC_BAD; FAILJ("the observation must be a map"); }
    if ((rc = srv_mp_rtc(S, po, &r, err, sizeof err))) { j->outcome = srv_decode_outcome(rc); goto fail; }
    const srv_config *cf = &S->c;
    int left = cn->chunk_rows - cn->chunk_pos;
    /* inference: the client's own prev_actions; the chunk used up; or --replan-steps K rows of it served, guided by
     * the rows left (the simulator waits for the reply: delay 0 unless the observation says otherwise) */
    int replan = !r.prev && left > 0 && cf->replan_steps > 0 && cn->chunk_served >= cf->replan_steps;
    if (r.prev || left <= 0 || replan) {
        mact_predict_output out = {0};
        if ((rc = srv_mp_request(S, SRV_VLA, po, &r, err, sizeof err))) { j->outcome = srv_decode_outcome(rc); goto fail; }
        if (r.has_id) snprintf(j->id, sizeof j->id, "%s", r.req_id);
        if (replan) {
            /* the server's options for its replans, each overridden by the observation's own key */
            const mact_rtc_options *d = &cf->replan_rtc;
            if (!(r.rtc_keys & SRV_RTC_HORIZON)) r.rtc.execution_horizon = d->execution_horizon;
            if (!(r.rtc_keys & SRV_RTC_SCHEDULE)) r.rtc.schedule = d->schedule;
            if (!(r.rtc_keys & SRV_RTC_WEIGHT)) r.rtc.max_guidance_weight = d->max_guidance_weight;
            if (!(r.rtc_keys & SRV_RTC_GUIDANCE)) r.rtc.guidance = d->guidance;
            r.prev = malloc((size_t)left * (size_t)cn->chunk_dim * sizeof(float));
            if (!r.prev) { j->outcome = SRV_OC_ERROR; FAILJ("out of memory"); }
            memcpy(r.prev, cn->chunk + (size_t)cn->chunk_pos * cn->chunk_dim, (size_t)left * cn->chunk_dim * sizeof(float));
            r.rtc.n_prev = (size_t)left;
            r.rtc.prev_dim = (size_t)cn->chunk_dim;
        }
        if ((j->outcome = srv_predict(S, w, &r, &out, j, err, sizeof err)) != SRV_OC_OK) goto fail;
        int start = r.prev ? r.rtc.inference_delay : 0;   /* rows [0, d) of a guided chunk are already past */
        if (start >= (int)out.n_steps) {
            j->outcome = SRV_OC_BAD;
            FAILJ("inference_delay %d skips every one of the %zu rows returned (n_action_steps)", start, out.n_steps);
        }
        size_t n = out.n_steps * out.action_dim;
        float *c2 = realloc(cn->chunk, n * sizeof(float));
        if (!c2) { j->outcome = SRV_OC_ERROR; FAILJ("out of memory"); }
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
    if (!o) { j->outcome = SRV_OC_ERROR; FAILJ("out of memory"); }
    size_t shape[1] = {(size_t)cn->chunk_dim};
    msgpack_pack_map(&pk, 6 + r.has_id + (guided > 0));
    srv_pk_str(&pk, "server_ms"); msgpack_pack_double(&pk, srv_now_ms() - j->msg->t_recv);
    srv_pk_str(&pk, "actions");
    srv_pk_ndarray(&pk, 0, cn->chunk + (size_t)cn->chunk_pos * cn->chunk_dim, 1, shape);
    srv_pk_str(&pk, "chunk_index"); msgpack_pack_int(&pk, cn->chunk_pos);
    srv_pk_str(&pk, "chunk_rows"); msgpack_pack_int(&pk, cn->chunk_rows);
    srv_pk_str(&pk, "queue_ms"); msgpack_pack_double(&pk, j->t_start - j->t_enq);
    srv_pk_str(&pk, "infer_ms"); msgpack_pack_double(&pk, j->infer_ms);
    if (r.has_id) srv_pk_id(&pk, &r);
    if (guided > 0) { srv_pk_str(&pk, "rtc_prev_rows"); msgpack_pack_int(&pk, guided); }
    cn->chunk_pos++;
    cn->chunk_served++;
    srv_job_push(j, o);
    j->outcome = SRV_OC_OK;
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

const srv_protocol srv_proto_vla = {
    .name = "vla-eval", .key_flag = "vla", .transport = SRV_WS,
    .cams = "images.agentview,images.wrist", .state = "states", .task = "task_description",
    .handle = vla_handle, .error_out = vla_error_out, .conn_free = vla_conn_free, .close_code_oversize = 1009,
};
