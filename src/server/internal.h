/* What the server's files share: arrays from the wire, requests, the read-only server state, jobs,
 * connections, and the protocol interface (one file per protocol, proto_*.c; the table in protocols.c). */
#ifndef MACT_SERVER_INTERNAL_H
#define MACT_SERVER_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>
#include <cjson/cJSON.h>
#include "io/image.h"
#include "io/normstats.h"
#include "server/server.h"

/* A connection whose client leaves this many replies (or bytes) unread is dropped. */
#define SRV_MAX_OUTQ 32
#define SRV_MAX_OUTQ_BYTES ((size_t)16 << 20)

/* Headroom libwebsockets needs in front of every buffer handed to lws_write (LWS_PRE in 4.1 is 16). */
#define SRV_PRE 16

/* ---- arrays off the wire (wire.c) ---- */
typedef struct {
    char kind;                 /* 'f' float, 'i' signed, 'u' unsigned, 'b' bool */
    int isz;                   /* bytes per element */
    int ndim;
    int64_t shape[8];
    size_t count;
    const uint8_t *data;       /* little-endian elements, count * isz bytes */
    uint8_t *owned;            /* what to free (NULL when data points into the message) */
} srv_arr;

void srv_arr_free(srv_arr *a);
double srv_arr_get(const srv_arr *a, size_t i);
/* numpy descr ("<f4", "|u1", "<i8", "float32" too) -> kind and size; -1 (with err) for anything else. */
int srv_dtype_parse(const char *s, size_t n, char *kind, int *isz, char *err, size_t el);
/* Checks data bytes == product(shape) * isz (no overflow) and sets count. */
int srv_arr_check(srv_arr *a, size_t nbytes, char *err, size_t el);

/* Growable output buffer with SRV_PRE bytes of headroom in front of the payload. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;           /* len counts payload bytes */
    int oom;
} srv_buf;
void srv_buf_put(srv_buf *b, const void *p, size_t n);
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline uint8_t *srv_buf_data(srv_buf *b) { return b->buf ? b->buf + SRV_PRE : NULL; }
int srv_msgpack_write(void *data, const char *buf, size_t len);  /* msgpack_packer callback over srv_buf */
void srv_b64_encode(srv_buf *b, const uint8_t *p, size_t n);
/* Standard base64 -> malloc'd bytes; -1 on a bad character or length. */
int srv_b64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen);

/* msgpack: bounded pre-scan (every count fits in the bytes left, depth <= max_depth, no ext types) before
 * msgpack-c unpacks, so a hostile header cannot make it allocate more than a few times the message. */
int srv_mp_scan(const uint8_t *p, size_t n, int max_depth, char *err, size_t el);
const msgpack_object *srv_mp_get(const msgpack_object *map, const char *key);   /* str or bin keys; dotted paths */
int srv_mp_str(const msgpack_object *o, const char **s, size_t *n);             /* str or bin */
/* ndarray map (openpi: bin keys; vla-eval: str keys), __npgeneric__, a number, a list of numbers. */
int srv_mp_arr(const msgpack_object *o, srv_arr *a, char *err, size_t el);
/* A camera frame: ndarray (uint8 HxWx{1,3,4} or float HxWx3 in [0,1]) or an __image__ map (png, jpeg, raw). */
int srv_mp_frame(const msgpack_object *o, const srv_config *c, mact_image *img, char *err, size_t el);

/* JSON: Python's NaN / Infinity / -Infinity rewritten to numbers cJSON reads (non-finite), depth checked. */
cJSON *srv_json_parse(const char *p, size_t n, int max_depth, char *err, size_t el);
cJSON *srv_js_get(const cJSON *obj, const char *key);
int srv_js_arr(const cJSON *o, srv_arr *a, char *err, size_t el);   /* json_numpy, a number, a list */
int srv_js_frame(const cJSON *o, const srv_config *c, mact_image *img, char *err, size_t el);
/* an HxWx{1,3,4} uint8 (or HxWx3 float32 in [0, 1]) array -> an RGB frame, within the pixel cap */
int srv_frame_from_arr(const srv_arr *a, const srv_config *c, mact_image *img, char *err, size_t el);
int srv_frame_from_encoded(const uint8_t *p, size_t n, const srv_config *c, mact_image *img, char *err, size_t el);

/* A decoder's return for the server's own failure (out of memory), as opposed to -1, the client's error. */
#define SRV_EINTERNAL (-2)

/* ---- connection limits (connlimit.c; the event loop's) ---- */
typedef struct srv_connlim srv_connlim;
enum { SRV_CONN_OK = 0, SRV_CONN_OVER_IP = 1, SRV_CONN_OVER_TOTAL = 2, SRV_CONN_CLOSE = 3 };
#define SRV_CONN_OVER_PER_IP 8 /* refusals in words pending per address; more sockets from it are closed */
#define SRV_CONN_GRACE 64      /* at least this many sockets past the limit are accepted, to be refused in words */
srv_connlim *srv_connlim_new(int max_total, int max_per_ip);
void srv_connlim_free(srv_connlim *L);
/* a socket accepted from ip: SRV_CONN_OK, OVER_IP / OVER_TOTAL (tracked, to be refused at its first request),
 * CLOSE (not tracked: close it now) */
int srv_connlim_open(srv_connlim *L, const void *key, const char *ip, double now);
int srv_connlim_over(const srv_connlim *L, const void *key);   /* its SRV_CONN_* (0 when not tracked) */
int srv_connlim_close(srv_connlim *L, const void *key);        /* 1 when it was tracked */
int srv_connlim_count(const srv_connlim *L);
/* 0: close a new socket from ip at once (no room, or ip at its limit with SRV_CONN_OVER_PER_IP refusals pending) */
int srv_connlim_admit(const srv_connlim *L, const char *ip);
/* its request headers are in (HTTP request or WebSocket upgrade): the header deadline no longer applies */
void srv_connlim_done(srv_connlim *L, const void *key);
/* sockets past their deadline (headers not in after header_ms; over a limit after over_ms), each returned
 * once, at most max: for the event loop to close */
int srv_connlim_expired(srv_connlim *L, double now, double header_ms, double over_ms, const void **keys, int max);

/* ---- a request, protocol-independent ---- */
typedef struct {
    mact_image img[SRV_MAX_CAMS];
    int n_img;
    char *task;
    float state[MACT_NORM_MAX_DIM];
    int state_dim;
    float *noise;
    size_t noise_len;
    int has_seed;
    uint64_t seed;
    int num_steps, n_action_steps;
    char norm_tag[MACT_NORM_MAX_NAME];
    char req_id[128];
    int has_id, id_is_int;
    /* real-time chunking: the request's RTC keys (rtc.prev_actions points at prev when rows were sent) */
    mact_rtc_options rtc;
    float *prev;               /* [rtc.n_prev, rtc.prev_dim], robot units; NULL: no prev_actions key */
    unsigned rtc_keys;         /* SRV_RTC_* bits: which RTC keys the request carried */
} srv_req;
enum { SRV_RTC_ROWS = 1, SRV_RTC_DELAY = 2, SRV_RTC_HORIZON = 4, SRV_RTC_SCHEDULE = 8, SRV_RTC_WEIGHT = 16,
       SRV_RTC_GUIDANCE = 32 };
void srv_req_free(srv_req *r);
/* Fills the scalar options (seed, noise, num_steps, n_action_steps, request id, tag) from the arrays that
 * were found; each NULL means absent. */
int srv_req_options(srv_req *r, srv_arr *seed, srv_arr *noise, srv_arr *steps, srv_arr *nact, char *err, size_t el);
int srv_state_from_arr(srv_req *r, const srv_arr *a, char *err, size_t el);

/* ---- the server's state: filled once by the loader before the server is ready, read-only after ---- */
typedef struct {
    srv_config c;
    mact_model *m;
    mact_model_info mi;
    mact_norm_tag_info tag;    /* the default norm tag (--norm-tag, or the checkpoint's first) */
    int state_dim, n_cameras;  /* of that tag (n_cameras 0: the tag names none) */
    int workers;
    char *tags_json;           /* every tag's contract (mact_model_tags_json), GET /act's "norm_tags"; malloc'd */
} srv_state;

/* How a request ended: the metrics' outcome label and the log line's. */
typedef enum {
    SRV_OC_OK, SRV_OC_BAD, SRV_OC_ERROR, SRV_OC_BUSY, SRV_OC_DROPPED, SRV_OC_DEADLINE, SRV_OC_CONTROL,
    SRV_OC_UNAUTH, SRV_OC_N
} srv_outcome;
extern const char *const srv_outcome_name[SRV_OC_N];

typedef struct srv_out {
    struct srv_out *next;
    srv_buf body;
    int kind;                  /* 0 binary ws, 1 text ws, 2 http */
    int http_status;
    const char *ctype;
    int close_after;           /* ws: close after this frame with close_code */
    int close_code;
} srv_out;

typedef struct srv_msg {
    struct srv_msg *next;
    uint8_t *data;
    size_t len;
    int binary;
    double t_recv;             /* ms, monotonic */
} srv_msg;

typedef struct srv_conn {
    struct srv_conn *prev, *next;  /* every open connection (event-loop thread) */
    int proto;
    struct lws *wsi;           /* event-loop thread only; NULL once closed */
    atomic_int refs;
    atomic_int closed;
    char peer[64];
    /* event-loop thread */
    uint8_t *rx;
    size_t rx_len, rx_cap;
    int rx_binary, rx_active, is_ws, http_oversize;
    int inflight;
    srv_msg *backlog, *backlog_tail;
    int n_backlog;
    srv_out *outq, *outq_tail;
    int n_outq;                /* replies queued unsent, and their bytes: bounded (SRV_MAX_OUTQ) */
    size_t outq_bytes;
    int closing;
    /* the worker holding this connection's in-flight job (one at a time) */
    void *pstate;              /* the protocol's own per-connection state; freed by its conn_free */
    atomic_llong prev_total_us;  /* the previous request's total time on this connection */
    long long n_requests;
} srv_conn;

typedef struct srv_job {
    struct srv_job *next;
    srv_conn *conn;
    srv_msg *msg;
    double t_enq, t_start, t_done;
    srv_out *out, *out_tail;
    /* for the log line and metrics */
    srv_outcome outcome;
    double infer_ms, decode_ms;   /* decode: from the worker's start to mact_predict */
    mact_timings timings;
    int did_infer;
    int sync, sync_done;       /* srv_run_sync's: the caller waits for it instead of the event loop */
    char id[128];
    char detail[200];
} srv_job;

typedef struct {
    mact_session *s;
    float *actions;
    size_t cap;
    int index;
    double busy_ms;            /* time spent on requests (its own thread writes it) */
} srv_worker;

/* ---- a protocol: what the event loop and the workers need of it ---- */
/* SRV_OWN: the protocol runs its own listener (gRPC) through start / stop and hands each request to a worker
 * with srv_run_sync */
typedef enum { SRV_WS, SRV_HTTP, SRV_OWN } srv_transport;
typedef struct srv srv;
typedef struct {
    const char *name;          /* metrics label, log lines, /config; its port flag is --NAME */
    const char *key_flag;      /* observation-key flags: --KEY_FLAG-images / -state / -task */
    srv_transport transport;
    const char *route;         /* SRV_HTTP: the path it answers (GET: identity, POST: a request) */
    const char *cams, *state, *task;   /* default observation keys */
    /* on a worker: decode j->msg, predict, encode the reply into j->out, set j->outcome (and j->detail / j->id) */
    void (*handle)(const srv_state *S, srv_worker *w, srv_job *j);
    /* an error answer in the protocol's form (msg: the request, when the reply must echo something of it) */
    srv_out *(*error_out)(const srv_state *S, const uint8_t *msg, size_t len, int http_status, const char *text);
    srv_out *(*on_open)(const srv_state *S);   /* SRV_WS: the first frame after the upgrade; NULL: none */
    void (*conn_free)(void *pstate);           /* NULL: free() */
    int close_code_oversize;                   /* SRV_WS: close code after an oversized message; 0: keep open */
    /* SRV_OWN: listen on port (called before the model loads; requests wait for srv_is_ready); stop: after the
     * drain, before the workers stop: every call in flight answered, nothing of it left */
    int (*start)(srv *S, int port, char *err, size_t el);
    void (*stop)(srv *S);
} srv_protocol;
extern const srv_protocol *const srv_protocols[SRV_NPROTO];
extern const srv_protocol srv_proto_openpi, srv_proto_act, srv_proto_vla, srv_proto_lerobot;

/* ---- shared by the protocols (request.c) ---- */
srv_out *srv_out_new(int kind);
srv_out *srv_http_out(int status, const char *ctype, const char *body, size_t n);
void srv_job_push(srv_job *j, srv_out *o);
void srv_json_escape(srv_buf *b, const char *s);
void srv_pk_str(msgpack_packer *pk, const char *s);
void srv_pk_key(msgpack_packer *pk, const char *s, int bin);
/* float32 ndarray: openpi's msgpack-numpy (bin keys) or vla-eval's (str keys) */
void srv_pk_ndarray(msgpack_packer *pk, int bin_keys, const float *x, int ndim, const size_t *shape);
void srv_pk_id(msgpack_packer *pk, const srv_req *r);
typedef int (*srv_opt_get_fn)(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el);
int srv_read_options(srv_req *r, const void *obj, srv_opt_get_fn get, char *err, size_t el);
int srv_mp_opt(const void *obj, const char *key, srv_arr *a, srv_arr **p, char *err, size_t el);
int srv_copy_str(const char *s, size_t n, size_t max, char **out, const char *what, char *err, size_t el);
/* a short client string (id, tag) into a fixed buffer, control characters and quotes replaced */
void srv_set_small(char *dst, size_t cap, const char *s, size_t n);
int srv_mp_rtc(const srv_state *S, const msgpack_object *obs, srv_req *r, char *err, size_t el);
int srv_js_rtc(const srv_state *S, const cJSON *obj, srv_req *r, char *err, size_t el);
/* the msgpack observation (cameras, state, task, id, tag, options) by the protocol's keys */
int srv_mp_request(const srv_state *S, int proto, const msgpack_object *obs, srv_req *r, char *err, size_t el);
int srv_mp_unpack(const srv_state *S, srv_job *j, msgpack_unpacked *u, char *err, size_t el);
/* the outcome of a failed decode (rc -1 or SRV_EINTERNAL) */
static inline srv_outcome srv_decode_outcome(int rc) { return rc == SRV_EINTERNAL ? SRV_OC_ERROR : SRV_OC_BAD; }

/* ---- an HTTP request's head as the server reads it (route.c: no libwebsockets, fuzz/fuzz_serve_route.c) ---- */
typedef struct {
    const char *method;          /* the request line's: "GET", "POST", ... (NULL: none) */
    const char *uri;             /* the path as lws gives it (normalised); a "?query" is ignored */
    const char *authorization;   /* the Authorization header's value; NULL: absent */
    const char *content_length;  /* the Content-Length header's value; NULL: absent */
} srv_http_head;
typedef struct {
    const srv_config *c;
    int proto;                   /* the port's protocol */
    const char *key;             /* the API key; keylen 0: none configured */
    size_t keylen;
    int ready, draining;
} srv_route_ctx;
typedef enum {
    SRV_RT_PROBE,                /* /livez, /readyz, /healthz, /health: status, ctype and body are the answer */
    SRV_RT_METRICS, SRV_RT_CONFIG,   /* GET /metrics, /config: the event loop writes the text */
    SRV_RT_IDENTITY,             /* GET on the protocol's route */
    SRV_RT_BODY,                 /* POST on the protocol's route: content_length bytes follow, to run as a request */
    SRV_RT_REFUSE,               /* 400, 401, 404, 411, 413: status, ctype, body */
} srv_route_kind;
typedef struct {
    srv_route_kind kind;
    int status;
    const char *ctype;
    char body[192];
    int close_after;             /* close the connection after the answer */
    int discard_body;            /* a body that follows is not run as a request */
    srv_outcome outcome;         /* SRV_OC_N: not counted; else counted and logged with log */
    const char *log;
    unsigned long long content_length;
} srv_route;
typedef struct {
    const char *status;          /* "401 Unauthorized", ... */
    char text[128];
    srv_outcome outcome;         /* SRV_OC_N: not counted; else counted and logged with log */
    const char *log;
} srv_upgrade;
void srv_route_http(const srv_route_ctx *x, const srv_http_head *h, srv_route *r);
/* a WebSocket upgrade on the port (any path: one protocol per port): 0 to take it, -1 refused as u says */
int srv_route_upgrade(const srv_route_ctx *x, const char *authorization, srv_upgrade *u);
/* "Api-Key <key>" / "Bearer <key>" (1 when no key is configured or the port's protocol needs none) */
int srv_route_auth_ok(const srv_route_ctx *x, const char *authorization);
/* key == cand, in time independent of cand */
int srv_key_equal(const char *key, size_t keylen, const char *cand, size_t cl);

/* ---- the server, for protocols with their own transport (own.c) ---- */
const srv_state *srv_get_state(const srv *S);   /* read-only; complete once srv_is_ready */
int srv_is_ready(const srv *S);                   /* loaded and not draining */
int srv_is_draining(const srv *S);
/* the API key check for proto (1 when no key is configured or proto does not require one); constant time */
int srv_key_ok(const srv *S, int proto, const char *key, size_t kl);
/* the configured API key when proto requires one, else NULL */
const char *srv_api_key(const srv *S, int proto);
/* A connection for a client of proto (peer: its address, for the log); released when the client is gone (its
 * pstate is freed by the protocol's conn_free once no job holds it). */
srv_conn *srv_conn_open(srv *S, int proto, const char *peer);
void srv_conn_release(srv *S, srv_conn *c);
/* counts an outcome decided outside a worker (refused before queueing) and logs it */
void srv_record(srv *S, int proto, const char *peer, srv_outcome oc, size_t bytes, const char *detail);
/* Runs the message data[0..len) (taken: freed here) on a worker as a request of c (its protocol's handle, the
 * queue, deadline, metrics and log as for every protocol) and waits for it. Returns the replies (free with
 * srv_out_free; NULL when none) and the outcome; when the queue is full, the server draining or not ready:
 * NULL, SRV_OC_BUSY, why. */
srv_out *srv_run_sync(srv *S, srv_conn *c, uint8_t *data, size_t len, double t_recv, srv_outcome *oc, char *why,
                      size_t wl);
void srv_out_free(srv_out *o);

/* ---- from the server (the fuzz targets stub them: fuzz/serve_stub.h) ---- */
/* queue.c, on a worker (inside the protocol's handle): runs mact_predict for r; fills out. SRV_OC_OK, or
 * SRV_OC_BAD (the client's input: mact_predict's MACT_ERR_INPUT / MACT_ERR_UNSUPPORTED) / SRV_OC_ERROR (the
 * server's failure) with err. Checks the actions are finite. */
srv_outcome srv_predict(const srv_state *S, srv_worker *w, srv_req *r, mact_predict_output *out, srv_job *j, char *err,
                        size_t el);
/* metrics.c: GET /act's identity JSON (and the metadata frames') */
void srv_identity_json(const srv_state *S, int ready, srv_buf *b);
double srv_now_ms(void);   /* server.c: ms, monotonic */
#endif
