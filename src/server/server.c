/* mact serve's event loop, and srv_run, which sets it up, runs it and takes it down. One thread runs
 * libwebsockets (every port, every connection): the callback tracks connections, routes HTTP requests, assembles
 * whole messages and dispatches them to the job queue (queue.c), never decoding or predicting; the workers hand
 * the replies back through the done list and lws_cancel_service, and drain_done queues them on their connections
 * for the out-queue (write.c) to write. A connection has at most one job in flight (its later messages wait in a
 * short per-connection backlog), so replies keep the order of requests. A signal thread turns SIGTERM / SIGINT
 * into the drain and wakes the loop for the connection sweep; the loader thread (loader.c) loads the model. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/resource.h>
#include "base/file.h"
#include "server/loop.h"

_Static_assert(SRV_PRE >= LWS_PRE, "SRV_PRE must cover LWS_PRE");

double srv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ---- connections ---- */
void srv_conn_unref(srv *S, srv_conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    void (*f)(void *) = srv_protocols[c->proto]->conn_free;
    if (f) f(c->pstate);
    else free(c->pstate);
    free(c);
}

void srv_msg_free(srv_msg *m)
{
    if (!m) return;
    free(m->data);
    free(m);
}

static void conn_free_open(srv *S, srv_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else S->all = c->next;
    if (c->next) c->next->prev = c->prev;
    atomic_store(&c->closed, 1);
    c->wsi = NULL;
    free(c->rx);
    c->rx = NULL;
    while (c->backlog) { srv_msg *m = c->backlog; c->backlog = m->next; srv_msg_free(m); }
    srv_outq_drop(S, c);
    atomic_fetch_sub(&S->conns, 1);
    srv_conn_unref(S, c);
}

static void conn_close(srv *S, pss_t *pss)
{
    srv_conn *c = pss->conn;
    if (!c) return;
    pss->conn = NULL;
    conn_free_open(S, c);
}

static srv_conn *conn_new(srv *S, struct lws *wsi, int proto)
{
    srv_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->proto = proto;
    c->wsi = wsi;
    atomic_init(&c->refs, 1);
    lws_get_peer_simple(wsi, c->peer, sizeof c->peer);
    atomic_fetch_add(&S->conns, 1);
    c->next = S->all;
    if (S->all) S->all->prev = c;
    S->all = c;
    return c;
}

void srv_count(srv *S, int proto, srv_outcome oc)
{
    pthread_mutex_lock(&S->mm);
    S->cnt[proto][oc]++;
    pthread_mutex_unlock(&S->mm);
}

/* ---- messages to the job queue (queue.c), replies back from the done list ---- */
static void reject_now(srv *S, srv_conn *c, srv_msg *m, int status, srv_outcome oc, const char *text)
{
    srv_out *o = srv_protocols[c->proto]->error_out(&S->st, m ? m->data : NULL, m ? m->len : 0, status, text);
    srv_conn_send(S, c, o);
    srv_count(S, c->proto, oc);
    srv_log_line(S, c->proto, c->peer, NULL, oc, 0, 0, 0, m ? srv_now_ms() - m->t_recv : 0, m ? m->len : 0, text);
    srv_msg_free(m);
}

static void dispatch(srv *S, srv_conn *c, srv_msg *m)
{
    if (c->inflight) {
        if (c->n_backlog >= 8) {
            reject_now(S, c, m, 429, SRV_OC_BUSY, "busy: more than 8 messages waiting on this connection");
            return;
        }
        if (c->backlog_tail) c->backlog_tail->next = m;
        else c->backlog = m;
        c->backlog_tail = m;
        c->n_backlog++;
        return;
    }
    if (atomic_load(&S->draining)) {
        reject_now(S, c, m, 503, SRV_OC_BUSY, "busy: the server is shutting down");
        return;
    }
    if (!atomic_load(&S->ready)) { reject_now(S, c, m, 503, SRV_OC_BUSY, "busy: the model is still loading"); return; }
    srv_job *j = calloc(1, sizeof *j);
    if (!j) { reject_now(S, c, m, 500, SRV_OC_ERROR, "out of memory"); return; }
    j->conn = c;
    j->msg = m;
    if (srv_enqueue(S, j)) {
        free(j);
        reject_now(S, c, m, 503, SRV_OC_BUSY, "busy: the request queue is full");
        return;
    }
    c->inflight = 1;
}

static void drain_done(srv *S)
{
    pthread_mutex_lock(&S->dm);
    srv_job *j = S->dhead;
    S->dhead = S->dtail = NULL;
    pthread_mutex_unlock(&S->dm);
    while (j) {
        srv_job *n = j->next;
        srv_conn *c = j->conn;
        if (!atomic_load(&c->closed)) {
            srv_out *o = j->out;
            j->out = NULL;
            if (o) c->n_requests++;
            c->inflight = 0;
            srv_conn_send(S, c, o);
            atomic_store(&c->prev_total_us, (long long)((srv_now_ms() - j->msg->t_recv) * 1000));
            if (c->backlog && !c->closing) {
                srv_msg *m = c->backlog;
                c->backlog = m->next;
                if (!c->backlog) c->backlog_tail = NULL;
                m->next = NULL;
                c->n_backlog--;
                dispatch(S, c, m);
            }
        }
        srv_outq_free(j->out);
        srv_msg_free(j->msg);
        srv_conn_unref(S, c);
        free(j);
        atomic_fetch_sub(&S->jobs_live, 1);
        j = n;
    }
}

/* ---- the callback: HTTP requests, WebSocket upgrades and messages, connection limits ---- */
static srv_route_ctx route_ctx(srv *S, int proto)
{
    return (srv_route_ctx){.c = &S->st.c, .proto = proto, .key = S->key, .keylen = S->keylen,
                           .ready = atomic_load(&S->ready), .draining = atomic_load(&S->draining)};
}

/* a header's whole value (lws joins a repeated one with commas), malloc'd; NULL when absent or empty */
static char *hdr_dup(struct lws *wsi, enum lws_token_indexes t)
{
    int n = lws_hdr_total_length(wsi, t);
    if (n <= 0) return NULL;
    char *v = malloc((size_t)n + 1);
    if (v && lws_hdr_copy(wsi, v, n + 1, t) < 0) { free(v); v = NULL; }
    return v;
}

static void http_reply(srv *S, srv_conn *c, int status, const char *ctype, const char *body, int close_after)
{
    srv_out *o = srv_http_out(status, ctype, body, strlen(body));
    if (o) o->close_after = close_after;
    srv_conn_send(S, c, o);
}

static void rx_reset(srv_conn *c)
{
    free(c->rx);
    c->rx = NULL;
    c->rx_len = c->rx_cap = 0;
    c->rx_active = 0;
}

static int rx_append(srv_conn *c, const void *in, size_t len, size_t want)
{
    if (c->rx_len + want + 1 > c->rx_cap) {
        size_t cap = c->rx_cap ? c->rx_cap : 4096;
        while (cap < c->rx_len + want + 1) cap *= 2;
        uint8_t *q = realloc(c->rx, cap);
        if (!q) return -1;
        c->rx = q;
        c->rx_cap = cap;
    }
    memcpy(c->rx + c->rx_len, in, len);
    c->rx_len += len;
    return 0;
}

static srv_msg *rx_take(srv_conn *c, int binary)
{
    srv_msg *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->data = c->rx ? c->rx : malloc(1);
    m->len = c->rx_len;
    m->binary = binary;
    m->t_recv = srv_now_ms();
    c->rx = NULL;
    c->rx_len = c->rx_cap = 0;
    c->rx_active = 0;
    return m;
}

static int on_http(srv *S, int proto, struct lws *wsi, pss_t *pss, const char *uri)
{
    if (!pss->conn && !(pss->conn = conn_new(S, wsi, proto))) return -1;
    srv_conn *c = pss->conn;
    c->wsi = wsi;
    rx_reset(c);
    /* lws's method names, in its LWSHUMETH_* order */
    static const char *const methods[] = {"GET", "POST", "OPTIONS", "PUT", "PATCH", "DELETE", "CONNECT", "HEAD",
                                          ":path"};
    char *up = NULL;
    int ul = 0, mi = lws_http_get_uri_and_method(wsi, &up, &ul);
    char *auth = hdr_dup(wsi, WSI_TOKEN_HTTP_AUTHORIZATION), *len = hdr_dup(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
    srv_http_head h = {.method = mi >= 0 && mi < (int)(sizeof methods / sizeof *methods) ? methods[mi] : NULL,
                       .uri = uri, .authorization = auth, .content_length = len};
    srv_route_ctx x = route_ctx(S, proto);
    srv_route r;
    srv_route_http(&x, &h, &r);
    free(auth);
    free(len);
    c->http_oversize = r.discard_body;
    if (r.outcome != SRV_OC_N) {
        srv_count(S, proto, r.outcome);
        srv_log_line(S, proto, c->peer, NULL, r.outcome, 0, 0, 0, 0,
                     r.status == 413 ? (size_t)(r.content_length > SIZE_MAX ? SIZE_MAX : r.content_length) : 0, r.log);
    }
    srv_buf b = {0};
    switch (r.kind) {
    case SRV_RT_PROBE:
    case SRV_RT_REFUSE:
        http_reply(S, c, r.status, r.ctype, r.body, r.close_after);
        return 0;
    case SRV_RT_METRICS:
    case SRV_RT_CONFIG:
    case SRV_RT_IDENTITY:
        if (r.kind == SRV_RT_METRICS) srv_metrics_text(S, &b);
        else if (r.kind == SRV_RT_CONFIG) srv_config_json(S, &b);
        else srv_identity_json(&S->st, atomic_load(&S->ready), &b);
        srv_conn_send(S, c, srv_http_out(r.status, r.ctype, (const char *)srv_buf_data(&b), b.len));
        free(b.buf);
        return 0;
    case SRV_RT_BODY:
        lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, S->st.c.idle_timeout_s);
        return 0;  /* the body follows: LWS_CALLBACK_HTTP_BODY */
    }
    return -1;
}

/* A refused WebSocket upgrade: lws_return_http_status answers it as HTTP/1.0, which WebSocket clients reject as
 * "not a valid HTTP response" instead of reading the status, so the response is written whole here. */
static int raw_status(struct lws *wsi, const char *status, const char *body)
{
    char t[LWS_PRE + 512];
    int n = snprintf(t + LWS_PRE, sizeof t - LWS_PRE,
                     "HTTP/1.1 %s\r\ncontent-type: text/plain\r\ncontent-length: %zu\r\n"
                     "connection: close\r\n\r\n%s\n", status, strlen(body) + 1, body);
    lws_write(wsi, (unsigned char *)t + LWS_PRE, (size_t)n, LWS_WRITE_HTTP_FINAL);
    return 1;
}

/* closes the sockets past their header deadline or their refusal's; on the event loop, woken at least every
 * 250 ms by the signal thread */
static void sweep_conns(srv *S)
{
    const void *k[64];
    int n = srv_connlim_expired(S->cl, srv_now_ms(), S->st.c.header_timeout_s * 1000.0, 2000.0, k, 64);
    /* synchronously: an async kill is undone when the next byte restarts lws's own timeout */
    for (int i = 0; i < n; i++) lws_set_timeout((struct lws *)k[i], PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
    if (n) {
        pthread_mutex_lock(&S->mm);
        S->header_timeouts += (uint64_t)n;
        pthread_mutex_unlock(&S->mm);
    }
}

static void count_refused(srv *S, int r)
{
    pthread_mutex_lock(&S->mm);
    S->refused[r == SRV_CONN_OVER_IP ? 0 : r == SRV_CONN_OVER_TOTAL ? 1 : 2]++;
    pthread_mutex_unlock(&S->mm);
}

/* a socket over a connection limit: its first request answered 503 naming the limit, then closed */
static int refuse_over(srv *S, int proto, struct lws *wsi, int r)
{
    char t[160], peer[64];
    lws_get_peer_simple(wsi, peer, sizeof peer);
    if (r == SRV_CONN_OVER_IP)
        snprintf(t, sizeof t, "busy: %s has %d connections open, the limit per address (--max-connections-per-ip)",
                 peer, S->st.c.max_conns_per_ip);
    else snprintf(t, sizeof t, "busy: %d connections open, the server's limit (--max-connections)", S->st.c.max_conns);
    srv_log_line(S, proto, peer, NULL, SRV_OC_BUSY, 0, 0, 0, 0, 0, t);
    srv_count(S, proto, SRV_OC_BUSY);
    return raw_status(wsi, "503 Service Unavailable", t);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    const struct lws_protocols *pr = lws_get_protocol(wsi);
    proto_ctx *pc = pr ? pr->user : NULL;
    if (!pc) return lws_callback_http_dummy(wsi, reason, user, in, len);
    srv *S = pc->S;
    int proto = pc->proto;
    pss_t *pss = user;
    switch (reason) {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        drain_done(S);
        sweep_conns(S);
        return 0;
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
        if (atomic_load(&S->draining)) return 1;
        /* past the limit and its grace: closed before lws makes anything of the socket */
        {
            const struct lws_filter_network_conn_args *fa = user;
            char ip[64] = "";
            if (fa && fa->cli_addr.ss_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)&fa->cli_addr)->sin_addr, ip, sizeof ip);
            if (!srv_connlim_admit(S->cl, ip)) { count_refused(S, SRV_CONN_CLOSE); return 1; }
        }
        return 0;
    case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED: {
        char ip[64];
        lws_get_peer_simple(wsi, ip, sizeof ip);
        int r = srv_connlim_open(S->cl, wsi, ip, srv_now_ms());
        if (r) count_refused(S, r);
        /* (full: refused by the filter above) The header deadline (--header-timeout; lws's own ah timeout restarts on
         * every byte, so a client dribbling headers would hold its socket for ever) and the 2 s a socket over a
         * limit gets to ask for its refusal are swept from the event loop (sweep_conns) */
        if (r == SRV_CONN_CLOSE) lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);  /* not reached */
        return 0;
    }
    case LWS_CALLBACK_HTTP:
        srv_connlim_done(S->cl, wsi);
        if (srv_connlim_over(S->cl, wsi)) return refuse_over(S, proto, wsi, srv_connlim_over(S->cl, wsi));
        return on_http(S, proto, wsi, pss, in);
    case LWS_CALLBACK_HTTP_BODY:
        if (!pss || !pss->conn || pss->conn->http_oversize) return 0;
        if (pss->conn->rx_len + len > S->st.c.max_message) {
            pss->conn->http_oversize = 1;
            http_reply(S, pss->conn, 413, "application/json", "{\"error\": \"body exceeds the size limit\"}\n", 1);
            return 0;
        }
        atomic_fetch_add(&S->bytes_in[proto], (long long)len);
        if (rx_append(pss->conn, in, len, len)) return -1;
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        if (!pss || !pss->conn) return -1;
        srv_conn *c = pss->conn;
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
        if (c->http_oversize) return 0;
        srv_msg *m = rx_take(c, 0);
        if (!m) return -1;
        dispatch(S, c, m);
        return 0;
    }
    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (!pss || !pss->conn) return -1;
        return srv_write_http(S, wsi, pss->conn);
    case LWS_CALLBACK_WSI_DESTROY:
        srv_connlim_close(S->cl, wsi);
        if (pss) conn_close(S, pss);
        return 0;
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:  /* a finished keep-alive transaction: lws frees the pss */
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_CLOSED:
        if (pss) conn_close(S, pss);
        return 0;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        srv_connlim_done(S->cl, wsi);
        if (srv_connlim_over(S->cl, wsi)) return refuse_over(S, proto, wsi, srv_connlim_over(S->cl, wsi));
        {
            char *auth = hdr_dup(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
            srv_route_ctx x = route_ctx(S, proto);
            srv_upgrade u;
            int rc = srv_route_upgrade(&x, auth, &u);
            free(auth);
            if (!rc) return 0;
            if (u.outcome != SRV_OC_N) {
                srv_count(S, proto, u.outcome);
                srv_log_line(S, proto, pss && pss->conn ? pss->conn->peer : "-", NULL, u.outcome, 0, 0, 0, 0, 0, u.log);
            }
            return raw_status(wsi, u.status, u.text);
        }
    case LWS_CALLBACK_ESTABLISHED: {
        if (pss->conn) conn_close(S, pss);
        if (!(pss->conn = conn_new(S, wsi, proto))) return -1;
        pss->conn->is_ws = 1;
        if (srv_protocols[proto]->on_open) srv_conn_send(S, pss->conn, srv_protocols[proto]->on_open(&S->st));
        return 0;
    }
    case LWS_CALLBACK_RECEIVE: {
        srv_conn *c = pss ? pss->conn : NULL;
        if (!c) return -1;
        if (c->closing) return 0;
        size_t rem = lws_remaining_packet_payload(wsi);
        int final = lws_is_final_fragment(wsi);
        if (!c->rx_active) { c->rx_active = 1; c->rx_len = 0; c->rx_binary = lws_frame_is_binary(wsi); }
        if (c->rx_len + len + rem > S->st.c.max_message) {
            char t[160];
            snprintf(t, sizeof t, "message of at least %zu bytes exceeds the limit of %zu", c->rx_len + len + rem,
                     S->st.c.max_message);
            const srv_protocol *pr = srv_protocols[proto];
            srv_out *o = pr->error_out(&S->st, NULL, 0, 413, t);
            if (o && pr->close_code_oversize) { o->close_after = 1; o->close_code = pr->close_code_oversize; }
            rx_reset(c);
            srv_conn_send(S, c, o);
            c->closing = 1;
            srv_count(S, proto, SRV_OC_BAD);
            srv_log_line(S, proto, c->peer, NULL, SRV_OC_BAD, 0, 0, 0, 0, c->rx_len + len + rem, t);
            return 0;
        }
        atomic_fetch_add(&S->bytes_in[proto], (long long)len);
        if (rx_append(c, in, len, len + rem)) return -1;
        if (final && rem == 0) {
            lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
            srv_msg *m = rx_take(c, c->rx_binary);
            if (!m) return -1;
            dispatch(S, c, m);
        } else {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, S->st.c.idle_timeout_s);
        }
        return 0;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!pss || !pss->conn) return -1;
        return srv_write_ws(S, wsi, pss->conn);
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

/* ---- signals and the main loop ---- */
typedef struct { srv *S; sigset_t set; } sig_arg;

static void *signal_main(void *arg)
{
    sig_arg *a = arg;
    int sig = 0;
    unsigned tick = 0;
    while (!atomic_load(&a->S->exiting)) {
        struct timespec to = {0, 100 * 1000 * 1000};
        sig = sigtimedwait(&a->set, NULL, &to);
        if (sig == SIGTERM || sig == SIGINT) {
            if (!atomic_load(&a->S->draining))
                fprintf(stderr, "mact serve: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            atomic_store(&a->S->draining, 1);
        }
        /* the event loop's wake-up: the drain, and the connection sweep (at least every 250 ms) */
        if (atomic_load(&a->S->draining) || ++tick % 3 == 0) lws_cancel_service(a->S->ctx);
    }
    return NULL;
}

static void lws_log_quiet(int level, const char *line)
{
    if (level & LLL_ERR) fprintf(stderr, "lws: %s", line);
}

/* stops the own-transport protocols started so far (below index `upto`) */
static void stop_own(srv *S, int upto)
{
    for (int p = 0; p < upto; p++)
        if (S->own_started[p]) { srv_protocols[p]->stop(S); S->own_started[p] = 0; }
}

/* a start that failed before any thread ran: what srv_run allocated so far (the exit path's frees, minus
 * the threads, sessions and connections that do not exist yet) */
static int start_failed(srv *S)
{
    free(S->w);
    free(S->wt);
    if (S->cl) srv_connlim_free(S->cl);
    free(S);
    return 1;
}

int srv_run(const srv_config *cfg)
{
    srv *S = calloc(1, sizeof *S);
    if (!S) return 1;
    S->st.c = *cfg;
    S->t0 = srv_now_ms();
    S->nw = cfg->workers > 0 ? cfg->workers : 1;
    S->w = calloc((size_t)S->nw, sizeof *S->w);
    S->wt = calloc((size_t)S->nw, sizeof *S->wt);
    pthread_mutex_init(&S->qm, NULL);
    pthread_cond_init(&S->qc, NULL);
    pthread_mutex_init(&S->dm, NULL);
    pthread_mutex_init(&S->sm, NULL);
    pthread_cond_init(&S->sc, NULL);
    pthread_mutex_init(&S->mm, NULL);
    int rc = 1;
    if (cfg->api_key_file) {
        char *k, kerr[512];
        size_t n;
        if (mact_file_read_text(cfg->api_key_file, sizeof S->key - 1, &k, &n, kerr, sizeof kerr)) {
            fprintf(stderr, "mact serve: --api-key-file: %s\n", kerr);
            return start_failed(S);
        }
        while (n && (k[n - 1] == '\n' || k[n - 1] == '\r' || k[n - 1] == ' ')) n--;
        memcpy(S->key, k, n);
        S->keylen = n;
        free(k);
        if (!n) {
            fprintf(stderr, "mact serve: --api-key-file %s is empty\n", cfg->api_key_file);
            return start_failed(S);
        }
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    lws_set_log_level(LLL_ERR, lws_log_quiet);
    struct lws_context_creation_info ci;
    memset(&ci, 0, sizeof ci);
    ci.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    ci.timeout_secs = (unsigned)cfg->idle_timeout_s;
    ci.max_http_header_data = 8192;
    /* descriptors: the soft limit raised to the hard one, and the sockets tracked (limit + grace) kept under it */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        if (rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)S->st.c.max_conns * 2 + 128 > rl.rlim_cur) {
            int m = rl.rlim_cur > 256 ? (int)((rl.rlim_cur - 128) / 2) : 64;
            fprintf(stderr, "mact serve: %llu descriptors allowed: --max-connections %d lowered to %d\n",
                    (unsigned long long)rl.rlim_cur, S->st.c.max_conns, m);
            S->st.c.max_conns = m;
            if (S->st.c.max_conns_per_ip > m) S->st.c.max_conns_per_ip = m;
        }
    }
    S->cl = srv_connlim_new(S->st.c.max_conns, S->st.c.max_conns_per_ip);
    if (!S->cl) { fprintf(stderr, "mact serve: out of memory\n"); return start_failed(S); }
    S->ctx = lws_create_context(&ci);
    if (!S->ctx) { fprintf(stderr, "mact serve: lws_create_context failed\n"); return start_failed(S); }
    for (int p = 0; p < SRV_NPROTO; p++) {
        if (!cfg->port[p]) continue;
        if (srv_protocols[p]->transport == SRV_OWN) {
            char err[512];
            if (srv_protocols[p]->start(S, cfg->port[p], err, sizeof err)) {
                fprintf(stderr, "mact serve: cannot listen on %s:%d (%s): %s\n", cfg->host, cfg->port[p],
                        PROTO_NAME(p), err);
                stop_own(S, p);
                lws_context_destroy(S->ctx);
                return start_failed(S);
            }
            S->own_started[p] = 1;
            continue;
        }
        S->pctx[p] = (proto_ctx){S, p};
        S->protos[p][0] = (struct lws_protocols){.name = PROTO_NAME(p), .callback = callback,
                                                 .per_session_data_size = sizeof(pss_t), .rx_buffer_size = 65536,
                                                 .user = &S->pctx[p]};
        memset(&S->protos[p][1], 0, sizeof S->protos[p][1]);
        struct lws_context_creation_info vi;
        memset(&vi, 0, sizeof vi);
        vi.port = cfg->port[p];
        vi.iface = cfg->host;
        vi.protocols = S->protos[p];
        vi.vhost_name = PROTO_NAME(p);
        vi.timeout_secs = (unsigned)cfg->idle_timeout_s;
        vi.options = LWS_SERVER_OPTION_DISABLE_IPV6;
        if (!lws_create_vhost(S->ctx, &vi)) {
            fprintf(stderr, "mact serve: cannot listen on %s:%d (%s)\n", cfg->host, cfg->port[p], PROTO_NAME(p));
            stop_own(S, SRV_NPROTO);
            lws_context_destroy(S->ctx);
            return start_failed(S);
        }
    }
    pthread_t loader, sigt;
    sig_arg sa = {S, set};
    pthread_create(&sigt, NULL, signal_main, &sa);
    pthread_create(&loader, NULL, srv_loader_main, S);
    double t_drain = 0;
    for (;;) {
        lws_service(S->ctx, 0);
        if (atomic_load(&S->load_failed)) { rc = 1; break; }
        if (atomic_load(&S->draining)) {
            if (!t_drain) t_drain = srv_now_ms();
            if (atomic_load(&S->jobs_live) == 0 && atomic_load(&S->outs_pending) == 0) { rc = 0; break; }
            if (srv_now_ms() - t_drain > cfg->drain_timeout_s * 1000.0) {
                fprintf(stderr, "mact serve: drain timeout with %d requests in flight\n", atomic_load(&S->jobs_live));
                rc = 0;
                break;
            }
        }
    }
    atomic_store(&S->draining, 1);   /* a load failure: own transports refuse from here */
    stop_own(S, SRV_NPROTO);         /* their calls in flight end while the workers still run */
    pthread_join(loader, NULL);
    srv_workers_stop(S);
    atomic_store(&S->exiting, 1);
    pthread_join(sigt, NULL);
    lws_context_destroy(S->ctx);
    while (S->all) conn_free_open(S, S->all);
    drain_done(S);
    srv_queue_free(S);
    for (int i = 0; i < S->nw; i++) {
        if (S->w[i].s) mact_session_free(S->w[i].s);
        free(S->w[i].actions);
    }
    if (S->st.m) mact_model_free(S->st.m);
    free(S->st.tags_json);
    free(S->w);
    free(S->wt);
    srv_connlim_free(S->cl);
    fprintf(stderr, "mact serve: exit %d\n", rc);
    free(S);
    return rc;
}
