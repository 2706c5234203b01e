/* The event loop's state (struct srv) and what its files share: server.c (the event loop, connections,
 * signals, srv_run), queue.c (the job queue and the workers), loader.c (the model loader thread), write.c (the
 * out-queue: replies written as HTTP responses and WebSocket frames), metrics.c (/metrics, /config, the identity
 * JSON, the log line), own.c (the API of the protocols with their own transport). Not for the protocols: they see
 * srv_state (internal.h). */
#ifndef MACT_SERVER_LOOP_H
#define MACT_SERVER_LOOP_H
#include <libwebsockets.h>
#include "server/internal.h"

#define PROTO_NAME(p) (srv_protocols[p]->name)
#define NB 15
/* histograms: one request-time histogram per protocol (H_REQ + p), then the shared ones */
enum { H_REQ = 0, H_QUEUE = SRV_NPROTO, H_PRE, H_VISION, H_LLM, H_ACTION, H_INFER, H_OVERHEAD, H_N };

typedef struct { uint64_t n[NB + 1]; double sum; uint64_t count; } histo;

typedef struct { srv *S; int proto; } proto_ctx;
typedef struct { srv_conn *conn; } pss_t;

struct srv {
    srv_state st;              /* what the protocols read: filled by the loader before `ready`, read-only after */
    srv_worker *w;
    pthread_t *wt;
    int nw, nw_started;
    struct lws_context *ctx;
    proto_ctx pctx[SRV_NPROTO];
    struct lws_protocols protos[SRV_NPROTO][2];
    pthread_mutex_t qm;
    pthread_cond_t qc;
    srv_job *qhead, *qtail;
    int qlen, stop_workers;
    pthread_mutex_t dm;
    srv_job *dhead, *dtail;
    pthread_mutex_t sm;        /* srv_run_sync's jobs: done flags */
    pthread_cond_t sc;
    atomic_int ready, draining, load_failed, exiting;
    atomic_int jobs_live, outs_pending, conns;
    srv_conn *all;  /* open connections: freed after lws_context_destroy if lws did not close them */
    char key[512];
    size_t keylen;
    double t0, cold_start_ms;
    pthread_mutex_t mm;
    uint64_t cnt[SRV_NPROTO][SRV_OC_N];
    histo h[H_N];
    uint64_t dropped_conns;
    srv_connlim *cl;           /* event-loop thread */
    uint64_t refused[3];       /* sockets over the per-IP limit, the global limit, past the grace (under mm) */
    uint64_t header_timeouts;  /* sockets closed by the header deadline (or after their refusal's 2 s) */
    uint64_t slow_reader_drops;  /* connections dropped with too many replies unread */
    atomic_llong bytes_in[SRV_NPROTO], bytes_out[SRV_NPROTO];
    int own_started[SRV_NPROTO];
};

/* server.c */
void srv_conn_unref(srv *S, srv_conn *c);
void srv_msg_free(srv_msg *m);
void srv_count(srv *S, int proto, srv_outcome oc);

/* queue.c: srv_enqueue from any thread; the workers started by the loader, stopped and the queue's leftovers freed
 * by srv_run after the drain (in that order) */
int srv_enqueue(srv *S, srv_job *j);   /* onto the worker queue; -1 when it is full (nothing taken) */
int srv_workers_start(srv *S, char *err, size_t el);   /* -1 with err: nw_started of them run */
void srv_workers_stop(srv *S);
void srv_queue_free(srv *S);

/* loader.c: the loader thread's body (arg: the srv) */
void *srv_loader_main(void *arg);

/* write.c: srv_outq_free, a reply list not on a queue (any thread); the rest, the out-queue and its counters, on
 * the event-loop thread only */
void srv_outq_free(srv_out *o);
void srv_conn_send(srv *S, srv_conn *c, srv_out *o);  /* queues the list o (taken); a slow reader is dropped */
void srv_outq_drop(srv *S, srv_conn *c);              /* a closing connection's unsent replies */
/* the WRITEABLE callbacks: one reply written; -1 for lws to close the connection */
int srv_write_http(srv *S, struct lws *wsi, srv_conn *c);
int srv_write_ws(srv *S, struct lws *wsi, srv_conn *c);

/* metrics.c */
void srv_observe(srv *S, int h, double ms);
void srv_log_line(srv *S, int proto, const char *peer, const char *id, srv_outcome outcome, double queue_ms,
                  double decode_ms, double infer_ms, double total_ms, size_t in_bytes, const char *detail);
void srv_metrics_text(srv *S, srv_buf *b);
void srv_config_json(srv *S, srv_buf *b);
#endif
