/* The policy server's request path without a model (fuzz_serve_*): a srv_state filled as the loader would
 * (config, model info, camera count, state width) and a srv_predict that, instead of calling mact_predict,
 * checks the mact_predict_input the request decoded to and answers a fixed chunk. The protocols (proto_*.c,
 * the table in protocols.c), request.c and wire.c run unchanged: bytes -> the protocol's handle -> decode ->
 * (stub) -> encode, and the reply must decode again. */
#ifndef MACT_FUZZ_SERVE_STUB_H
#define MACT_FUZZ_SERVE_STUB_H
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "server/internal.h"
#include "fuzz_common.h"

/* a violated property: the line on stderr, then a trap (libFuzzer's crash) */
#define STUB_TRAP() do { fprintf(stderr, "serve_stub.h:%d: property violated\n", __LINE__); __builtin_trap(); } while (0)
#define STUB_H 10     /* a `mact synth tiny` checkpoint: horizon 10, 7 action dims, 8 state dims, tag libero */
#define STUB_A 7
#define STUB_S 8

double srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
void srv_identity_json(const srv_state *S, int ready, srv_buf *b) { (void)S; (void)ready; srv_buf_printf(b, "{\"status\": \"ok\"}\n"); }
const char *mact_precision_str(mact_precision p) { return p ? "bf16" : "f32"; }
/* the LeRobot protocol's configure step (proto_lerobot.c) asks the model for its tags; the fuzzed protocols never do */
const mact_tag *mact_model_tag(const mact_model *m, const char *name, char *err, size_t errlen)
{ (void)m; (void)name; (void)err; (void)errlen; __builtin_trap(); }
void mact_tag_get_info(const mact_tag *t, mact_norm_tag_info *out) { (void)t; (void)out; __builtin_trap(); }
const char *mact_model_renamed(const mact_model *m, const char *key) { (void)m; (void)key; __builtin_trap(); }

/* the LeRobot protocol's gRPC service (lerobot_service.c needs gRPC): the table names it, nothing calls it here */
typedef struct srv srv;
int lr_service_start(srv *S, int port, char *err, size_t el);
void lr_service_stop(srv *S);
int lr_service_start(srv *S, int port, char *err, size_t el) { (void)S; (void)port; (void)err; (void)el; __builtin_trap(); }
void lr_service_stop(srv *S) { (void)S; __builtin_trap(); }

/* mact_predict's view of the request: every field inside the server's limits, else a violated property. */
srv_outcome srv_predict(const srv_state *S, srv_worker *w, srv_req *r, mact_predict_output *out, srv_job *j, char *err,
                        size_t el)
{
    const srv_config *c = &S->c;
    if (r->n_img < 0 || r->n_img > c->max_images || r->n_img > SRV_MAX_CAMS) STUB_TRAP();
    for (int i = 0; i < r->n_img; i++) {
        const mact_image *im = &r->img[i];
        if (!im->data || im->width < 1 || im->height < 1) STUB_TRAP();
        if ((int64_t)im->width * (int64_t)im->height > c->max_image_pixels) STUB_TRAP();
        volatile uint8_t s = 0;   /* every pixel readable (ASan) */
        s ^= im->data[0];
        s ^= im->data[(size_t)im->width * im->height * 3 - 1];
    }
    if (r->task && strlen(r->task) > c->max_string) STUB_TRAP();
    if (r->state_dim < 0 || r->state_dim > MACT_NORM_MAX_DIM) STUB_TRAP();
    if (r->noise_len && !r->noise) STUB_TRAP();
    for (size_t i = 0; i < r->noise_len; i++) { volatile float f = r->noise[i]; (void)f; }
    if (r->prev) {
        /* the decoder bounds the rows by the model's sizes; the width against the tag is mact_predict's check */
        if (r->rtc.prev_dim < 1 || r->rtc.prev_dim > (size_t)S->mi.max_action_dim || r->rtc.n_prev < 1 ||
            r->rtc.n_prev > (size_t)S->mi.max_action_horizon)
            STUB_TRAP();
        for (size_t i = 0; i < r->rtc.n_prev * r->rtc.prev_dim; i++) { volatile float f = r->prev[i]; (void)f; }
    } else if (r->rtc.n_prev) STUB_TRAP();
    if (memchr(r->norm_tag, 0, sizeof r->norm_tag) == NULL || memchr(r->req_id, 0, sizeof r->req_id) == NULL)
        STUB_TRAP();
    j->decode_ms = 0;
    j->did_infer = 1;
    int n = r->n_action_steps > 0 && r->n_action_steps < STUB_H ? r->n_action_steps : STUB_H;
    if (w->cap < (size_t)STUB_H * STUB_A) STUB_TRAP();
    for (int i = 0; i < n * STUB_A; i++) w->actions[i] = (float)i * 0.25f;
    *out = (mact_predict_output){.actions = w->actions, .actions_cap = w->cap, .n_steps = (size_t)n,
                                 .action_dim = STUB_A};
    (void)err; (void)el;
    return SRV_OC_OK;
}

static void stub_init(srv_state *S, srv_worker *w, float *acts)
{
    memset(S, 0, sizeof *S);
    srv_config_defaults(&S->c);
    S->c.model_dir = "tiny";
    S->c.max_image_pixels = 160 * 160;  /* the test clients send 96x128; a small cap keeps decoding quick */
    S->c.max_string = 256;
    S->mi.max_action_horizon = STUB_H;
    S->mi.max_action_dim = 32;
    S->state_dim = STUB_S;
    S->n_cameras = 2;
    memset(w, 0, sizeof *w);
    w->actions = acts;
    w->cap = STUB_H * STUB_A;
}

/* Every reply (error or not; a vla-eval episode_start/end has none) must decode: msgpack for the WebSocket
 * protocols, JSON for /act, openpi's errors a "mact: " text frame with a close. */
static void stub_check_replies(srv_job *j, int json)
{
    for (srv_out *o = j->out, *n; o; o = n) {
        n = o->next;
        if (o->body.oom) STUB_TRAP();
        const char *p = (const char *)srv_buf_data(&o->body);
        size_t len = o->body.len;
        if (o->kind == 1) {   /* openpi's error: a text frame "mact: <why>", then a close */
            if (json || len < 7 || memcmp(p, "mact: ", 6) || !o->close_after) STUB_TRAP();
        } else if (json || o->kind == 2) {
            if (o->kind != 2 || o->http_status < 200 || o->http_status > 599) STUB_TRAP();
            cJSON *x = cJSON_ParseWithLength(p, len);
            if (!x) STUB_TRAP();
            cJSON_Delete(x);
        } else {
            msgpack_unpacked u;
            msgpack_unpacked_init(&u);
            size_t off = 0;
            if (msgpack_unpack_next(&u, p, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len) STUB_TRAP();
            if (u.data.type != MSGPACK_OBJECT_MAP) STUB_TRAP();
            msgpack_unpacked_destroy(&u);
        }
        free(o->body.buf);
        free(o);
    }
    j->out = j->out_tail = NULL;
    if ((unsigned)j->outcome >= SRV_OC_N) STUB_TRAP();
}

/* One message through a handler on connection cn. */
static void stub_run(srv_state *S, srv_worker *w, srv_conn *cn, int proto, const uint8_t *d, size_t n, int json)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) STUB_TRAP();
    memcpy(copy, d, n);
    srv_msg m = {.data = copy, .len = n, .binary = !json, .t_recv = srv_now_ms()};
    srv_job j = {.conn = cn, .msg = &m, .outcome = SRV_OC_N};
    j.t_enq = j.t_start = m.t_recv;
    cn->proto = proto;
    srv_protocols[proto]->handle(S, w, &j);
    static int verbose = -1;   /* STUB_VERBOSE=1: each message's outcome on stderr (for reproducing a case) */
    if (verbose < 0) verbose = getenv("STUB_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "outcome %s: %s\n", j.outcome < SRV_OC_N ? srv_outcome_name[j.outcome] : "(none)", j.detail);
    stub_check_replies(&j, json);
    if (memchr(j.detail, 0, sizeof j.detail) == NULL || memchr(j.id, 0, sizeof j.id) == NULL) STUB_TRAP();
    free(copy);
}
#endif
