/* The out-queue: each connection's replies waiting for its socket, and their writing as HTTP responses or
 * WebSocket frames. Event-loop thread only: srv_conn_send queues (from the callback, and from drain_done with a
 * worker's replies), lws's WRITEABLE callbacks write one reply each (srv_write_http, srv_write_ws), and
 * srv_outq_drop empties the queue of a connection being closed. The out-queue's counters (the connection's
 * n_outq and outq_bytes, the server's outs_pending, which the drain waits on, and bytes_out) change only here:
 * added in srv_conn_send, taken back in outq_take or srv_outq_drop. */
#include <stdlib.h>
#include "server/loop.h"

void srv_outq_free(srv_out *o)
{
    while (o) {
        srv_out *n = o->next;
        free(o->body.buf);
        free(o);
        o = n;
    }
}

void srv_conn_send(srv *S, srv_conn *c, srv_out *o)
{
    if (!o) return;
    while (o) {
        srv_out *n = o->next;
        o->next = NULL;
        if (c->closing) { free(o->body.buf); free(o); o = n; continue; }
        if (c->n_outq >= SRV_MAX_OUTQ || c->outq_bytes + o->body.len > SRV_MAX_OUTQ_BYTES) {
            /* a client that sends requests but does not read the replies: dropped, its replies freed */
            free(o->body.buf);
            free(o);
            c->closing = 1;
            if (c->wsi) lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
            pthread_mutex_lock(&S->mm);
            S->slow_reader_drops++;
            pthread_mutex_unlock(&S->mm);
            srv_log_line(S, c->proto, c->peer, NULL, SRV_OC_BUSY, 0, 0, 0, 0, 0,
                         "connection dropped: more than 32 replies or 16 MiB unread");
            o = n;
            continue;
        }
        if (o->close_after) c->closing = 1;
        if (c->outq_tail) c->outq_tail->next = o;
        else c->outq = o;
        c->outq_tail = o;
        c->n_outq++;
        c->outq_bytes += o->body.len;
        atomic_fetch_add(&S->outs_pending, 1);
        o = n;
    }
    if (c->wsi) lws_callback_on_writable(c->wsi);
}

/* the next reply off c's queue, its counters taken back and its bytes counted as written (the caller writes and
 * frees it); NULL when the queue is empty */
static srv_out *outq_take(srv *S, srv_conn *c)
{
    srv_out *o = c->outq;
    if (!o) return NULL;
    c->outq = o->next;
    if (!c->outq) c->outq_tail = NULL;
    c->n_outq--;
    c->outq_bytes -= o->body.len;
    atomic_fetch_sub(&S->outs_pending, 1);
    atomic_fetch_add(&S->bytes_out[c->proto], (long long)o->body.len);
    return o;
}

void srv_outq_drop(srv *S, srv_conn *c)
{
    for (srv_out *o = c->outq; o; o = o->next) atomic_fetch_sub(&S->outs_pending, 1);
    srv_outq_free(c->outq);
    c->outq = c->outq_tail = NULL;
    c->n_outq = 0;
    c->outq_bytes = 0;
}

int srv_write_http(srv *S, struct lws *wsi, srv_conn *c)
{
    srv_out *o = outq_take(S, c);
    if (!o) return 0;
    uint8_t hb[LWS_PRE + 1024], *start = hb + LWS_PRE, *p = start, *end = hb + sizeof hb - 1;
    int close_after = o->close_after;
    if (lws_add_http_common_headers(wsi, (unsigned)o->http_status, o->ctype ? o->ctype : "text/plain", o->body.len,
                                    &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end) ||
        lws_write(wsi, o->body.buf + SRV_PRE, o->body.len, LWS_WRITE_HTTP_FINAL) < (int)o->body.len) {
        srv_outq_free(o);
        return -1;
    }
    srv_outq_free(o);
    if (close_after) return -1;
    if (lws_http_transaction_completed(wsi)) return -1;
    return 0;
}

int srv_write_ws(srv *S, struct lws *wsi, srv_conn *c)
{
    srv_out *o = outq_take(S, c);
    if (!o) return 0;
    int n = lws_write(wsi, o->body.buf + SRV_PRE, o->body.len, o->kind == 1 ? LWS_WRITE_TEXT : LWS_WRITE_BINARY);
    int close_after = o->close_after, code = o->close_code;
    srv_outq_free(o);
    if (n < 0) return -1;
    if (close_after) {
        lws_close_reason(wsi, (enum lws_close_status)(code ? code : 1011), (unsigned char *)"error", 5);
        return -1;
    }
    if (c->outq) lws_callback_on_writable(wsi);
    return 0;
}
