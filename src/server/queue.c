/* The job queue and the inference workers. srv_enqueue puts a whole message on the bounded queue (from the event
 * loop's dispatch, and from srv_run_sync on an own transport's thread); N worker threads, started by the loader
 * once every session is warm (srv_workers_start) and joined by srv_run after the drain (srv_workers_stop), take
 * jobs in order, run the protocol's handle (decode, srv_predict, encode), count and log each, and hand it back:
 * onto the done list with lws_cancel_service for the event loop, or to the srv_run_sync caller waiting on sc.
 * srv_predict is here because only a worker calls it (inside handle, with its own session); the fuzz targets
 * stub it, so this file is left out of their build. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/loop.h"

/* j (conn and msg set) onto the worker queue; -1 when the queue is full (nothing taken) */
int srv_enqueue(srv *S, srv_job *j)
{
    j->t_enq = srv_now_ms();
    pthread_mutex_lock(&S->qm);
    if (S->qlen >= S->st.c.queue_cap) {
        pthread_mutex_unlock(&S->qm);
        return -1;
    }
    atomic_fetch_add(&j->conn->refs, 1);
    atomic_fetch_add(&S->jobs_live, 1);
    if (S->qtail) S->qtail->next = j;
    else S->qhead = j;
    S->qtail = j;
    S->qlen++;
    pthread_cond_signal(&S->qc);
    pthread_mutex_unlock(&S->qm);
    return 0;
}

srv_outcome srv_predict(const srv_state *S, srv_worker *w, srv_req *r, mact_predict_output *out, srv_job *j, char *err,
                        size_t el)
{
    mact_frame fr[SRV_MAX_CAMS];
    for (int i = 0; i < r->n_img; i++)
        fr[i] = (mact_frame){r->img[i].data, (int)r->img[i].height, (int)r->img[i].width};
    mact_predict_input in = {.frames = fr, .n_frames = (size_t)r->n_img, .task = r->task, .state = r->state,
                             .state_dim = (size_t)r->state_dim};
    in.options.norm_tag = r->norm_tag[0] ? r->norm_tag : S->c.norm_tag;
    in.options.num_steps = r->num_steps;
    in.options.n_action_steps = r->n_action_steps;
    in.options.noise = r->noise;
    in.options.noise_len = r->noise_len;
    in.options.seed = r->seed;
    in.rtc = r->rtc;   /* all zero without RTC keys: off, today's result bit for bit */
    in.rtc.prev_actions = r->prev;
    *out = (mact_predict_output){.actions = w->actions, .actions_cap = w->cap};
    double t0 = srv_now_ms();
    j->decode_ms = t0 - j->t_start;
    int rc = mact_predict(w->s, &in, out);
    j->infer_ms = srv_now_ms() - t0;
    j->did_infer = 1;
    if (rc) {
        /* UNSUPPORTED from mact_predict: a request option this build lacks (RTC guidance vjp), the client's to drop */
        snprintf(err, el, "%s", mact_session_error(w->s));
        return rc == MACT_ERR_INPUT || rc == MACT_ERR_UNSUPPORTED ? SRV_OC_BAD : SRV_OC_ERROR;
    }
    j->timings = out->timings;
    for (size_t i = 0; i < out->n_steps * out->action_dim; i++)
        if (!isfinite(out->actions[i])) {
            snprintf(err, el, "non-finite action at row %zu, dim %zu (not sent)", i / out->action_dim,
                     i % out->action_dim);
            return SRV_OC_ERROR;
        }
    return SRV_OC_OK;
}

typedef struct { srv *S; int index; } worker_arg;

static void *worker_main(void *arg)
{
    srv *S = ((worker_arg *)arg)->S;
    srv_worker *w = &S->w[((worker_arg *)arg)->index];
    free(arg);
    for (;;) {
        pthread_mutex_lock(&S->qm);
        while (!S->qhead && !S->stop_workers) pthread_cond_wait(&S->qc, &S->qm);
        if (S->stop_workers) { pthread_mutex_unlock(&S->qm); break; }
        srv_job *j = S->qhead;
        S->qhead = j->next;
        if (!S->qhead) S->qtail = NULL;
        S->qlen--;
        pthread_mutex_unlock(&S->qm);
        j->next = NULL;
        j->t_start = srv_now_ms();
        srv_conn *c = j->conn;
        const srv_protocol *pr = srv_protocols[c->proto];
        j->outcome = SRV_OC_ERROR;   /* a handler that returns without saying */
        if (atomic_load(&c->closed)) j->outcome = SRV_OC_DROPPED;
        else if (S->st.c.deadline_ms > 0 && j->t_start - j->t_enq > S->st.c.deadline_ms) {
            char t[128];
            snprintf(t, sizeof t, "deadline exceeded: queued %.0f ms (limit %d ms)", j->t_start - j->t_enq,
                     S->st.c.deadline_ms);
            srv_job_push(j, pr->error_out(&S->st, j->msg->data, j->msg->len, 503, t));
            snprintf(j->detail, sizeof j->detail, "%s", t);
            j->outcome = SRV_OC_DEADLINE;
        } else pr->handle(&S->st, w, j);
        j->t_done = srv_now_ms();
        w->busy_ms += j->t_done - j->t_start;   /* the worker's own field; /metrics reads it racily (a gauge) */
        double total = j->t_done - j->msg->t_recv, qms = j->t_start - j->t_enq;
        pthread_mutex_lock(&S->mm);
        S->cnt[c->proto][j->outcome]++;
        if (j->outcome != SRV_OC_CONTROL) {
            srv_observe(S, H_REQ + c->proto, total);
            srv_observe(S, H_QUEUE, qms);
        }
        if (j->did_infer && j->outcome == SRV_OC_OK) {
            srv_observe(S, H_PRE, j->timings.preprocess_ms);
            srv_observe(S, H_VISION, j->timings.vision_ms);
            srv_observe(S, H_LLM, j->timings.llm_ms);
            srv_observe(S, H_ACTION, j->timings.action_ms);
            srv_observe(S, H_INFER, j->infer_ms);
            srv_observe(S, H_OVERHEAD, total - j->infer_ms > 0 ? total - j->infer_ms : 0);
        }
        pthread_mutex_unlock(&S->mm);
        if (j->outcome != SRV_OC_CONTROL || j->detail[0] == 0 || strstr(j->detail, "hello"))
            srv_log_line(S, c->proto, c->peer, j->id, j->outcome, qms, j->decode_ms, j->infer_ms, total, j->msg->len,
                         j->detail);
        if (j->sync) {   /* an own-transport protocol's request: its caller waits in srv_run_sync */
            pthread_mutex_lock(&S->sm);
            j->sync_done = 1;
            pthread_cond_broadcast(&S->sc);
            pthread_mutex_unlock(&S->sm);
            continue;
        }
        pthread_mutex_lock(&S->dm);
        if (S->dtail) S->dtail->next = j;
        else S->dhead = j;
        S->dtail = j;
        pthread_mutex_unlock(&S->dm);
        lws_cancel_service(S->ctx);
    }
    return NULL;
}

int srv_workers_start(srv *S, char *err, size_t el)
{
    for (int i = 0; i < S->nw; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) { snprintf(err, el, "out of memory"); return -1; }
        a->S = S;
        a->index = i;
        if (pthread_create(&S->wt[i], NULL, worker_main, a)) {
            free(a);
            snprintf(err, el, "pthread_create failed");
            return -1;
        }
        S->nw_started++;
    }
    return 0;
}

void srv_workers_stop(srv *S)
{
    pthread_mutex_lock(&S->qm);
    S->stop_workers = 1;
    pthread_cond_broadcast(&S->qc);
    pthread_mutex_unlock(&S->qm);
    for (int i = 0; i < S->nw_started; i++) pthread_join(S->wt[i], NULL);
}

void srv_queue_free(srv *S)
{
    while (S->qhead) {
        srv_job *j = S->qhead;
        S->qhead = j->next;
        srv_msg_free(j->msg);
        srv_outq_free(j->out);
        srv_conn_unref(S, j->conn);
        free(j);
    }
}
