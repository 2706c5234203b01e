/* The server's API for protocols with their own transport (SRV_OWN: LeRobot's gRPC service): their state, the
 * API key, connections, and srv_run_sync (a request through the same queue, workers, deadline, metrics and
 * log as every protocol, the caller waiting). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/loop.h"

/* ---- protocols with their own transport (SRV_OWN: gRPC) ---- */
const srv_state *srv_get_state(const srv *S) { return &S->st; }
int srv_is_ready(const srv *S) { return atomic_load(&S->ready) && !atomic_load(&S->draining); }
int srv_is_draining(const srv *S) { return atomic_load(&S->draining); }
int srv_key_ok(const srv *S, int proto, const char *key, size_t kl)
{
    if (!S->keylen || !S->st.c.key_required[proto]) return 1;
    return key && srv_key_equal(S->key, S->keylen, key, kl);
}

const char *srv_api_key(const srv *S, int proto)
{
    return S->keylen && S->st.c.key_required[proto] ? S->key : NULL;
}

srv_conn *srv_conn_open(srv *S, int proto, const char *peer)
{
    srv_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->proto = proto;
    atomic_init(&c->refs, 1);
    snprintf(c->peer, sizeof c->peer, "%s", peer ? peer : "-");
    atomic_fetch_add(&S->conns, 1);
    return c;
}

void srv_conn_release(srv *S, srv_conn *c)
{
    if (!c) return;
    atomic_store(&c->closed, 1);
    atomic_fetch_sub(&S->conns, 1);
    srv_conn_unref(S, c);
}

void srv_record(srv *S, int proto, const char *peer, srv_outcome oc, size_t bytes, const char *detail)
{
    srv_count(S, proto, oc);
    srv_log_line(S, proto, peer, NULL, oc, 0, 0, 0, 0, bytes, detail);
}

srv_out *srv_run_sync(srv *S, srv_conn *c, uint8_t *data, size_t len, double t_recv, srv_outcome *oc, char *why,
                      size_t wl)
{
    srv_msg *m = calloc(1, sizeof *m);
    srv_job *j = calloc(1, sizeof *j);
    if (!m || !j) {
        free(m); free(j); free(data);
        *oc = SRV_OC_ERROR;
        snprintf(why, wl, "out of memory");
        return NULL;
    }
    m->data = data;
    m->len = len;
    m->binary = 1;
    m->t_recv = t_recv;
    j->conn = c;
    j->msg = m;
    j->sync = 1;
    const char *busy = atomic_load(&S->draining) ? "busy: the server is shutting down"
                       : !atomic_load(&S->ready) ? "busy: the model is still loading" : NULL;
    if (busy || srv_enqueue(S, j)) {
        snprintf(why, wl, "%s", busy ? busy : "busy: the request queue is full");
        srv_record(S, c->proto, c->peer, SRV_OC_BUSY, len, why);
        *oc = SRV_OC_BUSY;
        srv_msg_free(m);
        free(j);
        return NULL;
    }
    pthread_mutex_lock(&S->sm);
    while (!j->sync_done) pthread_cond_wait(&S->sc, &S->sm);
    pthread_mutex_unlock(&S->sm);
    srv_out *o = j->out;
    *oc = j->outcome;
    snprintf(why, wl, "%s", j->detail);
    srv_msg_free(m);
    srv_conn_unref(S, c);
    free(j);
    atomic_fetch_sub(&S->jobs_live, 1);
    return o;
}

void srv_out_free(srv_out *o) { srv_outq_free(o); }
