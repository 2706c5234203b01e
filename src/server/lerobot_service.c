/* The gRPC side of `mact serve --lerobot PORT` (grpc_lerobot.c moves the bytes): LeRobot's policy server's
 * behaviour, per client (gRPC's peer name):
 *   Ready                    forget the client's observation queue, predicted timesteps and last chunk
 *   SendPolicyInstructions   its RemotePolicyConfig (proto_lerobot.c's lr_configure)
 *   SendObservations         each TimedObservation into a queue of one (the newest wins), unless its timestep
 *                            was predicted already or its joints are within 1 (L2, LeRobot's atol) of the last
 *                            one queued; must_go skips both checks
 *   GetActions               waits up to --lerobot-obs-timeout-ms for a queued observation, then runs it on a
 *                            worker (srv_run_sync: the queue, deadline, metrics and log of every protocol) and
 *                            answers its TimedAction list; none queued: an empty Actions (the client polls again)
 * Errors are gRPC statuses: 3 the client's request, 9 no set-up yet, 13 the server's failure, 14 busy or not
 * ready. One `mact serve` process has one service (a file-level context). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "base/clock.h"
#include "server/grpc_lerobot.h"
#include "server/lerobot.h"

#define MAX_CLIENTS 64
#define MAX_PREDICTED 4096   /* timesteps remembered per client (the newest) */

typedef struct lr_client {
    struct lr_client *next;
    char peer[96];
    srv_conn *conn;            /* pstate: lr_conn */
    int busy;                  /* calls of this client in flight (not evicted while > 0) */
    double t_last;
    /* the queue of one */
    uint8_t *obs;
    size_t obs_len;
    int64_t obs_ts;
    /* the last observation queued: its joints, for the similarity check */
    int has_last, last_dim;
    float last_state[MACT_NORM_MAX_DIM];
    int64_t predicted[MAX_PREDICTED];   /* a ring of the timesteps predicted */
    int n_predicted, predicted_pos;
} lr_client;

static struct {
    srv *S;
    mact_lr_grpc *g;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lr_client *clients;
    int n_clients;
} LR = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void client_free(lr_client *c)
{
    srv_conn_release(LR.S, c->conn);
    free(c->obs);
    free(c);
}

/* the client of peer (made when new; the least recently seen idle one evicted when there are too many); LR.mu
 * held; NULL: out of memory or every slot busy */
static lr_client *client_get(const char *peer)
{
    lr_client **pp = &LR.clients, *c;
    for (c = LR.clients; c; c = c->next)
        if (!strcmp(c->peer, peer)) break;
    if (!c) {
        if (LR.n_clients >= MAX_CLIENTS) {
            lr_client **old = NULL;
            for (pp = &LR.clients; *pp; pp = &(*pp)->next)
                if (!(*pp)->busy && (!old || (*pp)->t_last < (*old)->t_last)) old = pp;
            if (!old) return NULL;
            lr_client *v = *old;
            *old = v->next;
            LR.n_clients--;
            client_free(v);
        }
        c = calloc(1, sizeof *c);
        lr_conn *lc = lr_conn_new();
        srv_conn *sc = c && lc ? srv_conn_open(LR.S, SRV_LEROBOT, peer) : NULL;
        if (!sc) { free(c); lr_conn_free(lc); return NULL; }
        sc->pstate = lc;
        c->conn = sc;
        snprintf(c->peer, sizeof c->peer, "%s", peer);
        c->next = LR.clients;
        LR.clients = c;
        LR.n_clients++;
    }
    c->t_last = srv_now_ms();
    return c;
}

/* the client of peer, held (not evicted) until client_leave; NULL: too many clients or out of memory */
static lr_client *client_enter(const char *peer)
{
    pthread_mutex_lock(&LR.mu);
    lr_client *c = client_get(peer);
    if (c) c->busy++;
    pthread_mutex_unlock(&LR.mu);
    return c;
}

static void client_leave(lr_client *c)
{
    pthread_mutex_lock(&LR.mu);
    c->busy--;
    pthread_mutex_unlock(&LR.mu);
}

static int predicted(const lr_client *c, int64_t ts)
{
    for (int i = 0; i < c->n_predicted; i++)
        if (c->predicted[i] == ts) return 1;
    return 0;
}

static int not_ready(char *msg, size_t ml)
{
    snprintf(msg, ml, "%s", srv_is_draining(LR.S) ? "the server is shutting down" : "the model is still loading");
    return 14;   /* UNAVAILABLE */
}

static int on_ready(void *user, const char *peer, char *msg, size_t ml)
{
    (void)user;
    /* the client's first call: answered once the model is loaded (LeRobot's client gives up on an error) */
    for (int i = 0; i < 6000 && !srv_is_ready(LR.S) && !srv_is_draining(LR.S); i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!srv_is_ready(LR.S)) return not_ready(msg, ml);
    pthread_mutex_lock(&LR.mu);
    lr_client *c = client_get(peer);
    if (c) {
        free(c->obs);
        c->obs = NULL;
        c->has_last = 0;
        c->n_predicted = c->predicted_pos = 0;
        lr_conn_reset(c->conn->pstate);
    }
    pthread_mutex_unlock(&LR.mu);
    if (!c) { snprintf(msg, ml, "too many clients"); return 8; }
    return 0;
}

static int on_setup(void *user, const char *peer, const uint8_t *data, size_t n, char *msg, size_t ml)
{
    (void)user;
    if (!srv_is_ready(LR.S)) return not_ready(msg, ml);
    lr_client *c = client_enter(peer);
    if (!c) { snprintf(msg, ml, "too many clients"); return 8; }
    int rc = lr_configure(srv_get_state(LR.S), c->conn->pstate, data, n, msg, ml);
    srv_record(LR.S, SRV_LEROBOT, peer, rc ? srv_decode_outcome(rc) : SRV_OC_CONTROL, n, msg);
    if (!rc) msg[0] = 0;
    client_leave(c);
    return rc == 0 ? 0 : rc == SRV_EINTERNAL ? 13 : 3;
}

static int on_observation(void *user, const char *peer, const uint8_t *data, size_t n, char *msg, size_t ml)
{
    (void)user;
    if (!srv_is_ready(LR.S)) return not_ready(msg, ml);
    lr_client *c = client_enter(peer);
    if (!c) { snprintf(msg, ml, "too many clients"); return 8; }
    lr_conn *lc = c->conn->pstate;
    int status = 0;
    pthread_mutex_lock(&lc->mu);
    int configured = lc->configured;
    pthread_mutex_unlock(&lc->mu);
    int64_t ts;
    int must_go;
    float st[MACT_NORM_MAX_DIM];
    uint8_t *copy = NULL;
    if (!configured) {
        snprintf(msg, ml, "no policy set-up: SendPolicyInstructions first");
        status = 9;   /* FAILED_PRECONDITION */
    } else if (lr_observation_peek(srv_get_state(LR.S), lc, data, n, &ts, &must_go, st, msg, ml)) {
        status = 3;
    } else if (!(copy = malloc(n ? n : 1))) {
        snprintf(msg, ml, "out of memory");
        status = 13;
    }
    if (status) {
        srv_record(LR.S, SRV_LEROBOT, peer, status == 13 ? SRV_OC_ERROR : SRV_OC_BAD, n, msg);
        client_leave(c);
        return status;
    }
    memcpy(copy, data, n);
    pthread_mutex_lock(&LR.mu);
    int dim = 0;
    pthread_mutex_lock(&lc->mu);
    dim = lc->n_state;
    pthread_mutex_unlock(&lc->mu);
    int take = must_go || !predicted(c, ts);
    if (take && !must_go && c->has_last && c->last_dim == dim) {
        double d2 = 0;
        for (int i = 0; i < dim; i++) d2 += ((double)st[i] - c->last_state[i]) * ((double)st[i] - c->last_state[i]);
        take = !(sqrt(d2) < 1.0);   /* LeRobot's observations_similar: torch.linalg.norm(a - b) < atol (1) */
    }
    if (take) {
        free(c->obs);   /* the newest wins */
        c->obs = copy;
        c->obs_len = n;
        c->obs_ts = ts;
        memcpy(c->last_state, st, (size_t)dim * sizeof(float));
        c->last_dim = dim;
        c->has_last = 1;
        copy = NULL;
        pthread_cond_broadcast(&LR.cv);
    }
    c->busy--;
    pthread_mutex_unlock(&LR.mu);
    free(copy);
    return 0;
}

static int on_get_actions(void *user, const char *peer, uint8_t **out, size_t *n, char *msg, size_t ml)
{
    (void)user;
    *out = NULL;
    *n = 0;
    if (!srv_is_ready(LR.S)) return not_ready(msg, ml);
    const srv_state *S = srv_get_state(LR.S);
    pthread_mutex_lock(&LR.mu);
    lr_client *c = client_get(peer);
    if (!c) { pthread_mutex_unlock(&LR.mu); snprintf(msg, ml, "too many clients"); return 8; }
    c->busy++;
    const struct timespec until = mact_wall_after(S->c.lerobot_obs_timeout_ms / 1e3);
    while (!c->obs && !srv_is_draining(LR.S))
        if (pthread_cond_timedwait(&LR.cv, &LR.mu, &until)) break;
    uint8_t *data = c->obs;
    size_t len = c->obs_len;
    double t_recv = srv_now_ms();   /* the request starts when GetActions takes the observation */
    if (data) {
        c->obs = NULL;
        c->predicted[c->predicted_pos] = c->obs_ts;
        c->predicted_pos = (c->predicted_pos + 1) % MAX_PREDICTED;
        if (c->n_predicted < MAX_PREDICTED) c->n_predicted++;
    }
    pthread_mutex_unlock(&LR.mu);
    int status = 0;
    if (data) {
        srv_outcome oc;
        char why[256];
        srv_out *o = srv_run_sync(LR.S, c->conn, data, len, t_recv, &oc, why, sizeof why);
        if (oc == SRV_OC_OK && o && o->body.len) {
            *out = malloc(o->body.len);
            if (*out) {
                memcpy(*out, srv_buf_data(&o->body), o->body.len);
                *n = o->body.len;
            } else {
                snprintf(msg, ml, "out of memory");
                status = 13;
            }
        } else if (oc != SRV_OC_OK) {
            snprintf(msg, ml, "%s", why);
            status = oc == SRV_OC_BAD ? 3 : oc == SRV_OC_BUSY ? 14 : oc == SRV_OC_DEADLINE ? 4 : 13;
        }
        srv_out_free(o);
    }
    client_leave(c);
    return status;
}

int lr_service_start(srv *S, int port, char *err, size_t el)
{
    const srv_state *st = srv_get_state(S);
    LR.S = S;
    mact_lr_grpc_options o = {
        .host = st->c.host, .port = port, .max_payload = st->c.max_message,
        .api_key = srv_api_key(S, SRV_LEROBOT), .idle_timeout_s = st->c.idle_timeout_s,
        .drain_timeout_s = st->c.drain_timeout_s,
    };
    mact_lr_handlers h = {.ready = on_ready, .policy_setup = on_setup, .observation = on_observation,
                          .get_actions = on_get_actions};
    return mact_lr_grpc_start(&o, &h, &LR.g, err, el);
}

void lr_service_stop(srv *S)
{
    (void)S;
    pthread_mutex_lock(&LR.mu);
    pthread_cond_broadcast(&LR.cv);   /* GetActions waiting for an observation: the drain has begun */
    pthread_mutex_unlock(&LR.mu);
    mact_lr_grpc_stop(LR.g);
    LR.g = NULL;
    pthread_mutex_lock(&LR.mu);
    while (LR.clients) {
        lr_client *c = LR.clients;
        LR.clients = c->next;
        client_free(c);
    }
    LR.n_clients = 0;
    pthread_mutex_unlock(&LR.mu);
}
