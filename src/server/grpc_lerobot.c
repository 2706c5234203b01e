/* The gRPC transport of `mact serve --lerobot` (grpc_lerobot.h): LeRobot's transport.AsyncInference service
 * on the gRPC C core's completion-queue API.
 *
 * Each worker thread owns one completion queue (registered with the server, so it may take new calls) and
 * has at most one operation outstanding on it: first a grpc_server_request_call whose call is bound to the
 * same queue, then that call's batches one at a time (receive a message, ..., send the reply and status).
 * So a worker's queue only ever returns the event it waits for, every wait can carry a deadline (the idle
 * timeout of a stream), and a callback that blocks holds up only its own worker. Shutdown fails the
 * outstanding request_calls (success 0), which is how idle workers learn to exit. */
#include "server/grpc_lerobot.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "base/err.h"

#define MSG_CAP 512
#define KEY_CAP 512

typedef enum { M_UNKNOWN, M_READY, M_SETUP, M_OBS, M_ACTIONS } method;

typedef struct worker {
    struct mact_lr_grpc *g;
    grpc_completion_queue *cq;
    pthread_t th;
    int started;
} worker;

struct mact_lr_grpc {
    grpc_server *server;
    grpc_completion_queue *shutdown_cq;  /* only for grpc_server_shutdown_and_notify's event */
    mact_lr_handlers h;
    size_t max_payload, max_message;
    char key[KEY_CAP];
    size_t keylen;
    int idle_ms, drain_ms, port, nw;
    worker *w;
    atomic_int stopping;
};

static gpr_timespec after_ms(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* Starts a batch and waits for it. idle_ms > 0: past that, the call is cancelled (DEADLINE_EXCEEDED for
 * the client) and the wait goes on for the batch, which cancellation completes. Returns the event's
 * success, 0 also when the batch could not be started. */
static int run_batch(worker *w, grpc_call *call, const grpc_op *ops, size_t n, int idle_ms)
{
    void *tag = (void *)ops;
    if (grpc_call_start_batch(call, ops, n, tag, NULL) != GRPC_CALL_OK) return 0;
    gpr_timespec dl = idle_ms > 0 ? after_ms(idle_ms) : gpr_inf_future(GPR_CLOCK_MONOTONIC);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(w->cq, dl, NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == tag) return ev.success;
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                         "no progress from the client within the server's idle timeout", NULL);
            dl = gpr_inf_future(GPR_CLOCK_MONOTONIC);
            continue;
        }
        if (ev.type == GRPC_QUEUE_SHUTDOWN) return 0;  /* not reached: the queue is shut down after the workers */
        /* another tag cannot be outstanding on this queue (one operation at a time); ignore it */
    }
}

/* Constant time in the configured key: every byte of it is compared whatever the candidate. */
static int key_eq(const mact_lr_grpc *g, const char *k, size_t kl)
{
    volatile unsigned char d = (unsigned char)(kl != g->keylen);
    for (size_t i = 0; i < g->keylen; i++) d |= (unsigned char)(g->key[i] ^ (i < kl ? k[i] : 0));
    return d == 0;
}

static int auth_ok(const mact_lr_grpc *g, const grpc_metadata_array *md)
{
    if (!g->keylen) return 1;
    int ok = 0;
    for (size_t i = 0; i < md->count; i++) {
        const grpc_metadata *m = &md->metadata[i];
        const char *v = (const char *)GRPC_SLICE_START_PTR(m->value);
        size_t vl = GRPC_SLICE_LENGTH(m->value);
        /* HTTP/2 header names arrive lower-cased */
        if (!grpc_slice_str_cmp(m->key, "x-api-key")) {
            ok |= key_eq(g, v, vl);
        } else if (!grpc_slice_str_cmp(m->key, "authorization")) {
            size_t skip = 0;
            if (vl >= 7 && !strncasecmp(v, "Bearer ", 7)) skip = 7;
            else if (vl >= 8 && !strncasecmp(v, "Api-Key ", 8)) skip = 8;
            else continue;
            while (skip < vl && v[skip] == ' ') skip++;
            ok |= key_eq(g, v + skip, vl - skip);
        }
    }
    return ok;
}

static method method_of(grpc_slice m)
{
    if (!grpc_slice_str_cmp(m, "/transport.AsyncInference/SendObservations")) return M_OBS;
    if (!grpc_slice_str_cmp(m, "/transport.AsyncInference/GetActions")) return M_ACTIONS;
    if (!grpc_slice_str_cmp(m, "/transport.AsyncInference/SendPolicyInstructions")) return M_SETUP;
    if (!grpc_slice_str_cmp(m, "/transport.AsyncInference/Ready")) return M_READY;
    return M_UNKNOWN;
}

/* Receives one message into a flat slice. 1: got one, 0: the client half-closed (no more), -1: the call
 * failed (cancelled, disconnected, over the size limit, timed out). */
static int recv_msg(worker *w, grpc_call *call, grpc_slice *out, int idle_ms)
{
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    int ok = run_batch(w, call, &op, 1, idle_ms);
    if (!ok) {
        if (bb) grpc_byte_buffer_destroy(bb);
        return -1;
    }
    if (!bb) return grpc_call_failed_before_recv_message(call) ? -1 : 0;
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb)) {  /* fails only on a message it cannot decompress */
        grpc_byte_buffer_destroy(bb);
        return -1;
    }
    *out = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    grpc_byte_buffer_destroy(bb);
    return 1;
}

/* The last batch: initial metadata, the reply (reply != NULL and status 0), the status, and the close. */
static void finish(worker *w, grpc_call *call, int status, const char *msg, const uint8_t *reply, size_t rn)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    grpc_byte_buffer *bb = NULL;
    if (status == 0 && reply) {
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)reply, rn);
        bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = bb;
    }
    grpc_slice details = grpc_slice_from_copied_string(status && msg && *msg ? msg : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)status;
    ops[n++].data.send_status_from_server.status_details = status ? &details : NULL;
    int cancelled = 0;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &cancelled;
    /* bounded too: a client that stops reading cannot keep the worker */
    run_batch(w, call, ops, n, w->g->idle_ms);
    if (bb) grpc_byte_buffer_destroy(bb);
    grpc_slice_unref(details);
}

/* A handler's status code, kept inside gRPC's range (1..16); its message made non-empty. */
static int handler_rc(int rc, char *msg, const char *what)
{
    if (rc == 0) return 0;
    if (rc < 1 || rc > 16) rc = GRPC_STATUS_INTERNAL;
    if (!msg[0]) snprintf(msg, MSG_CAP, "%s failed (status %d)", what, rc);
    return rc;
}

static void serve_unary(worker *w, grpc_call *call, method m, const char *peer)
{
    mact_lr_grpc *g = w->g;
    char msg[MSG_CAP] = "";
    grpc_slice in;
    int r = recv_msg(w, call, &in, g->idle_ms);
    if (r < 0) return;  /* the call is gone: nothing to answer */
    if (r == 0) {
        finish(w, call, GRPC_STATUS_INVALID_ARGUMENT, "the call carried no request message", NULL, 0);
        return;
    }
    mact_lr_msg_type t = m == M_SETUP ? MACT_LR_POLICY_SETUP : MACT_LR_EMPTY;
    mact_lr_msg req;
    int rc = mact_lr_msg_unpack(t, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in), &req, msg, sizeof msg);
    grpc_slice_unref(in);
    if (rc) {
        finish(w, call, rc, msg, NULL, 0);
        return;
    }
    uint8_t *reply = NULL, *data = NULL;
    size_t rn = 0, dn = 0;
    static const uint8_t empty_reply[1];
    switch (m) {
    case M_READY:
        rc = g->h.ready ? handler_rc(g->h.ready(g->h.user, peer, msg, sizeof msg), msg, "Ready") : 0;
        break;
    case M_SETUP:
        rc = g->h.policy_setup ? handler_rc(g->h.policy_setup(g->h.user, peer, req.data, req.n, msg, sizeof msg), msg,
                                            "SendPolicyInstructions") : 0;
        break;
    case M_ACTIONS:
        if (g->h.get_actions) rc = handler_rc(g->h.get_actions(g->h.user, peer, &data, &dn, msg, sizeof msg), msg, "GetActions");
        if (!rc) rc = mact_lr_actions_pack(data, dn, g->max_message, &reply, &rn, msg, sizeof msg);
        free(data);
        break;
    default:
        rc = GRPC_STATUS_INTERNAL;
        break;
    }
    mact_lr_msg_free(&req);
    /* Empty and an Actions without data are both zero bytes on the wire */
    finish(w, call, rc, msg, reply ? reply : empty_reply, reply ? rn : 0);
    free(reply);
}

static void serve_stream(worker *w, grpc_call *call, const char *peer)
{
    mact_lr_grpc *g = w->g;
    char msg[MSG_CAP] = "";
    mact_lr_reasm ra;
    memset(&ra, 0, sizeof ra);
    int rc = 0;
    for (;;) {
        grpc_slice in;
        int r = recv_msg(w, call, &in, g->idle_ms);
        if (r < 0) {  /* cut: the open payload is dropped, nothing to answer */
            mact_lr_reasm_reset(&ra);
            return;
        }
        if (r == 0) {
            rc = mact_lr_reasm_finish(&ra, msg, sizeof msg);
            break;
        }
        mact_lr_msg ob;
        rc = mact_lr_msg_unpack(MACT_LR_OBSERVATION, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in), &ob, msg, sizeof msg);
        grpc_slice_unref(in);
        if (rc) break;
        const uint8_t *p;
        size_t pn;
        rc = mact_lr_reasm_feed(&ra, ob.state, ob.data, ob.n, g->max_payload, &p, &pn, msg, sizeof msg);
        mact_lr_msg_free(&ob);
        if (rc) break;
        if (p && g->h.observation) {
            rc = handler_rc(g->h.observation(g->h.user, peer, p, pn, msg, sizeof msg), msg, "SendObservations");
            if (rc) break;
        }
    }
    mact_lr_reasm_reset(&ra);
    finish(w, call, rc, msg, rc ? NULL : (const uint8_t *)"", 0);
}

static void serve_call(worker *w, grpc_call *call, const grpc_call_details *d, const grpc_metadata_array *md)
{
    char *peer = grpc_call_get_peer(call);
    method m = method_of(d->method);
    if (m == M_UNKNOWN) {
        char msg[MSG_CAP];
        snprintf(msg, sizeof msg, "method %.*s is not served here (transport.AsyncInference only)",
                 (int)(GRPC_SLICE_LENGTH(d->method) > 200 ? 200 : GRPC_SLICE_LENGTH(d->method)),
                 (const char *)GRPC_SLICE_START_PTR(d->method));
        finish(w, call, GRPC_STATUS_UNIMPLEMENTED, msg, NULL, 0);
    } else if (!auth_ok(w->g, md)) {
        finish(w, call, GRPC_STATUS_UNAUTHENTICATED,
               "unauthenticated: send metadata authorization: Bearer <key> (or Api-Key <key>), or x-api-key: <key>",
               NULL, 0);
    } else if (m == M_OBS) {
        serve_stream(w, call, peer ? peer : "?");
    } else {
        serve_unary(w, call, m, peer ? peer : "?");
    }
    gpr_free(peer);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    mact_lr_grpc *g = w->g;
    while (!atomic_load(&g->stopping)) {
        grpc_call *call = NULL;
        grpc_call_details d;
        grpc_metadata_array md;
        grpc_call_details_init(&d);
        grpc_metadata_array_init(&md);
        int ok = 0;
        if (grpc_server_request_call(g->server, &call, &d, &md, w->cq, w->cq, w) == GRPC_CALL_OK) {
            grpc_event ev = grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
            ok = ev.type == GRPC_OP_COMPLETE && ev.tag == w && ev.success;
        }
        if (ok) serve_call(w, call, &d, &md);
        if (call) grpc_call_unref(call);  /* unref of an unfinished call cancels it */
        grpc_metadata_array_destroy(&md);
        grpc_call_details_destroy(&d);
        if (!ok) break;  /* the server is shutting down */
    }
    return NULL;
}

int mact_lr_grpc_port(const mact_lr_grpc *g) { return g ? g->port : 0; }

static void drain_destroy(grpc_completion_queue *cq)
{
    if (!cq) return;
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {}
    grpc_completion_queue_destroy(cq);
}

/* Tears down what start built, in the order gRPC needs: server shut down, workers joined, server destroyed,
 * queues drained. Also the failure path of start (before or after grpc_server_start). */
static void teardown(mact_lr_grpc *g, int started)
{
    atomic_store(&g->stopping, 1);
    if (started) {
        int tag;
        grpc_server_shutdown_and_notify(g->server, g->shutdown_cq, &tag);
        grpc_event ev = grpc_completion_queue_next(g->shutdown_cq, after_ms(g->drain_ms), NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            /* drain time is over: cancel what is still running (a callback in progress is still waited for) */
            grpc_server_cancel_all_calls(g->server);
            grpc_completion_queue_next(g->shutdown_cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        }
    }
    for (int i = 0; i < g->nw; i++)
        if (g->w[i].started) pthread_join(g->w[i].th, NULL);
    if (g->server) grpc_server_destroy(g->server);
    for (int i = 0; i < g->nw; i++) drain_destroy(g->w[i].cq);
    drain_destroy(g->shutdown_cq);
    free(g->w);
    free(g);
    grpc_shutdown();
}

int mact_lr_grpc_start(const mact_lr_grpc_options *o, const mact_lr_handlers *h, mact_lr_grpc **out,
                       char *err, size_t el)
{
    *out = NULL;
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    if (o->port < 0 || o->port > 65535) return mact_errf(err, el, -1, "lerobot: port %d is not in 0..65535", o->port);
    if (o->threads < 0 || o->threads > 256) return mact_errf(err, el, -1, "lerobot: threads %d is not in 0..256", o->threads);
    if (o->idle_timeout_s < 0 || o->drain_timeout_s < 0) return mact_errf(err, el, -1, "lerobot: a negative timeout");
    size_t max_message = o->max_message ? o->max_message : 4u << 20;
    if (max_message > INT_MAX || max_message < 1024) {
        mact_errf(err, el, -1, "lerobot: max_message %zu is not in 1 KiB..2 GiB (gRPC's limit is an int)", max_message);
        return -1;
    }
    size_t klen = o->api_key ? strlen(o->api_key) : 0;
    if (klen >= KEY_CAP) return mact_errf(err, el, -1, "lerobot: the API key is longer than %d bytes", KEY_CAP - 1);
    char addr[300];
    int bracket = strchr(host, ':') && host[0] != '[';  /* an IPv6 literal */
    if (snprintf(addr, sizeof addr, bracket ? "[%s]:%d" : "%s:%d", host, o->port) >= (int)sizeof addr) {
        mact_errf(err, el, -1, "lerobot: host name too long");
        return -1;
    }

    mact_lr_grpc *g = calloc(1, sizeof *g);
    if (!g) return mact_errf(err, el, -1, "lerobot: out of memory");
    g->h = *h;
    g->max_payload = o->max_payload ? o->max_payload : (size_t)64 << 20;
    g->max_message = max_message;
    memcpy(g->key, o->api_key ? o->api_key : "", klen);
    g->keylen = klen;
    g->idle_ms = (o->idle_timeout_s ? o->idle_timeout_s : 30) * 1000;
    g->drain_ms = (o->drain_timeout_s ? o->drain_timeout_s : 5) * 1000;
    g->nw = o->threads ? o->threads : 8;
    g->w = calloc((size_t)g->nw, sizeof *g->w);
    grpc_init();
    if (!g->w) { mact_errf(err, el, -1, "lerobot: out of memory"); teardown(g, 0); return -1; }

    grpc_arg args[6];
    memset(args, 0, sizeof args);
    args[0].type = GRPC_ARG_INTEGER; args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)max_message;
    args[1].type = GRPC_ARG_INTEGER; args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[1].value.integer = (int)max_message;
    /* gRPC sets SO_REUSEPORT by default: a second server on the same port would bind without an error */
    args[2].type = GRPC_ARG_INTEGER; args[2].key = (char *)GRPC_ARG_ALLOW_REUSEPORT; args[2].value.integer = 0;
    /* a peer that vanished without closing its socket is found by keepalive pings (gRPC's default: 2 h) */
    args[3].type = GRPC_ARG_INTEGER; args[3].key = (char *)GRPC_ARG_KEEPALIVE_TIME_MS; args[3].value.integer = 60000;
    args[4].type = GRPC_ARG_INTEGER; args[4].key = (char *)GRPC_ARG_KEEPALIVE_TIMEOUT_MS; args[4].value.integer = 20000;
    /* LeRobot's client has two calls open per channel at most; more streams wait in gRPC's queue */
    args[5].type = GRPC_ARG_INTEGER; args[5].key = (char *)GRPC_ARG_MAX_CONCURRENT_STREAMS; args[5].value.integer = 100;
    grpc_channel_args ca = { sizeof args / sizeof args[0], args };
    g->server = grpc_server_create(&ca, NULL);
    g->shutdown_cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(g->server, g->shutdown_cq, NULL);
    for (int i = 0; i < g->nw; i++) {
        g->w[i].g = g;
        g->w[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(g->server, g->w[i].cq, NULL);
    }
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(g->server, addr, cr);
    grpc_server_credentials_release(cr);
    if (port <= 0) {
        mact_errf(err, el, -1, "lerobot: cannot listen on %s (the port is in use, or the host is not an address of this machine)", addr);
        teardown(g, 0);
        return -1;
    }
    g->port = port;
    grpc_server_start(g->server);
    for (int i = 0; i < g->nw; i++) {
        if (pthread_create(&g->w[i].th, NULL, worker_main, &g->w[i])) {
            mact_errf(err, el, -1, "lerobot: cannot start worker thread %d", i);
            teardown(g, 1);
            return -1;
        }
        g->w[i].started = 1;
    }
    *out = g;
    return 0;
}

void mact_lr_grpc_stop(mact_lr_grpc *g)
{
    if (g) teardown(g, 1);
}
