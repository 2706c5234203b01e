/* What the server's files share: arrays from the wire, requests, jobs, connections, metrics. */
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
int srv_frame_from_encoded(const uint8_t *p, size_t n, const srv_config *c, mact_image *img, char *err, size_t el);

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
    char norm_tag[128];
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

/* ---- the server ---- */
typedef struct srv srv;

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
    int port_index;
    struct lws *wsi;           /* event-loop thread only; NULL once closed */
    atomic_int refs;
    atomic_int closed;
    char peer[64];
    /* event-loop thread */
    uint8_t *rx;
    size_t rx_len, rx_cap;
    int rx_binary, rx_active, is_ws, http_post, http_oversize;
    int inflight;
    srv_msg *backlog, *backlog_tail;
    int n_backlog;
    srv_out *outq, *outq_tail;
    int closing;
    /* the worker holding this connection's in-flight job */
    float *chunk;              /* vla-eval: the rows left of the last chunk */
    int chunk_rows, chunk_pos, chunk_dim;
    long long chunk_served;    /* vla-eval: rows of the current chunk served (--replan-steps counts these) */
    atomic_llong prev_total_us;  /* openpi: the previous request's total time */
    long long n_requests;
} srv_conn;

typedef struct srv_job {
    struct srv_job *next;
    srv_conn *conn;
    srv_msg *msg;
    double t_enq, t_start, t_done;
    srv_out *out, *out_tail;
    /* for the log line and metrics */
    const char *outcome;       /* ok, bad_request, error, dropped, deadline, control */
    double infer_ms, decode_ms;   /* decode: from the worker's start to mact_predict */
    mact_timings timings;
    int did_infer;
    char id[128];
    char detail[200];
} srv_job;

typedef struct {
    mact_session *s;
    float *actions;
    size_t cap;
    int index;
} srv_worker;

/* proto.c: runs on a worker; fills job->out (and the log fields). */
void srv_handle_openpi(srv *S, srv_worker *w, srv_job *j);
void srv_handle_act(srv *S, srv_worker *w, srv_job *j);
void srv_handle_vla(srv *S, srv_worker *w, srv_job *j);
/* Messages the event loop sends itself (metadata, busy answers). */
srv_out *srv_openpi_metadata(srv *S);
srv_out *srv_error_out(srv *S, int proto, const uint8_t *msg, size_t len, int http_status, const char *text);
srv_out *srv_http_out(int status, const char *ctype, const char *body, size_t n);
void srv_job_push(srv_job *j, srv_out *o);

/* What proto.c needs from server.c. */
const srv_config *srv_cfg(const srv *S);
const mact_model_info *srv_model_info(const srv *S);
const mact_norm_stats *srv_norms(const srv *S);
int srv_default_state_dim(const srv *S);
int srv_model_cameras(const srv *S);   /* the default tag's camera count; 0 when it names none */
void srv_identity_json(srv *S, srv_buf *b);
/* Runs mact_predict for r; fills out. 0 or -1 with err. Checks the actions are finite. */
int srv_predict(srv *S, srv_worker *w, srv_req *r, mact_predict_output *out, srv_job *j, char *err, size_t el);
double srv_now_ms(void);
#endif
