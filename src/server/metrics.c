/* /metrics (Prometheus text), /config, the identity JSON and the per-request log line. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/clock.h"
#include "server/loop.h"

static const double BUCKET[NB] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const char *const H_NAME[H_N - H_QUEUE] = {
    "mact_queue_wait_seconds", "mact_stage_seconds{stage=\"preprocess\"}", "mact_stage_seconds{stage=\"vision\"}",
    "mact_stage_seconds{stage=\"llm\"}", "mact_stage_seconds{stage=\"action\"}", "mact_stage_seconds{stage=\"inference\"}",
    "mact_stage_seconds{stage=\"server_overhead\"}"};

static const char *tag_name(const srv_state *S) { return S->tag.name ? S->tag.name : ""; }

/* ---- metrics ---- */
void srv_observe(srv *S, int h, double ms)
{
    double s = ms / 1000.0;
    histo *x = &S->h[h];
    int b = 0;
    while (b < NB && s > BUCKET[b]) b++;
    x->n[b]++;
    x->sum += s;
    x->count++;
}

void srv_log_line(srv *S, int proto, const char *peer, const char *id, srv_outcome outcome, double queue_ms,
                     double decode_ms, double infer_ms, double total_ms, size_t in_bytes, const char *detail)
{
    if (!S->st.c.log_requests) return;
    const double now = mact_wall_s();
    const time_t sec = (time_t)now;
    struct tm tm;
    gmtime_r(&sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s peer=%s id=%s outcome=%s queue_ms=%.2f decode_ms=%.2f "
            "infer_ms=%.2f total_ms=%.2f bytes=%zu%s%s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
            tm.tm_sec, (long)((now - (double)sec) * 1e3), PROTO_NAME(proto), peer, id && *id ? id : "-", srv_outcome_name[outcome], queue_ms,
            decode_ms, infer_ms, total_ms, in_bytes, detail && *detail ? " detail=" : "", detail ? detail : "");
}

/* the process's resident memory, open descriptors and threads, from /proc (Linux; absent elsewhere) */
static void process_metrics(srv_buf *b)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) == 2)
            srv_buf_printf(b, "# TYPE mact_process_resident_bytes gauge\nmact_process_resident_bytes %lld\n",
                           (long long)rss * sysconf(_SC_PAGESIZE));
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int n = 0;
        for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
        closedir(d);
        srv_buf_printf(b, "# TYPE mact_process_open_fds gauge\nmact_process_open_fds %d\n", n - 1);  /* less the dir's own */
    }
    f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Threads:", 8)) srv_buf_printf(b, "# TYPE mact_process_threads gauge\nmact_process_threads %d\n", atoi(line + 8));
        fclose(f);
    }
}

void srv_metrics_text(srv *S, srv_buf *b)
{
    pthread_mutex_lock(&S->mm);
    srv_buf_printf(b, "# HELP mact_requests_total Requests by protocol and outcome.\n# TYPE mact_requests_total counter\n");
    for (int p = 0; p < SRV_NPROTO; p++)
        for (int o = 0; o < SRV_OC_N; o++)
            srv_buf_printf(b, "mact_requests_total{protocol=\"%s\",outcome=\"%s\"} %llu\n", PROTO_NAME(p), srv_outcome_name[o],
                           (unsigned long long)S->cnt[p][o]);
    char prev[96] = "";
    for (int h = 0; h < H_N; h++) {
        char name[96], inner[96] = "", full[128];
        if (h < H_QUEUE) snprintf(full, sizeof full, "mact_request_seconds{protocol=\"%s\"}", PROTO_NAME(h));
        else snprintf(full, sizeof full, "%s", H_NAME[h - H_QUEUE]);
        const char *br = strchr(full, '{');
        size_t nl = br ? (size_t)(br - full) : strlen(full);
        memcpy(name, full, nl);
        name[nl] = 0;
        if (br) snprintf(inner, sizeof inner, "%.*s", (int)(strlen(br) - 2), br + 1);
        if (strcmp(prev, name)) {
            srv_buf_printf(b, "# TYPE %s histogram\n", name);
            snprintf(prev, sizeof prev, "%s", name);
        }
        uint64_t acc = 0;
        for (int i = 0; i <= NB; i++) {
            acc += S->h[h].n[i];
            char le[32];
            if (i < NB) snprintf(le, sizeof le, "%g", BUCKET[i]);
            else snprintf(le, sizeof le, "+Inf");
            srv_buf_printf(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, inner, br ? "," : "", le, (unsigned long long)acc);
        }
        srv_buf_printf(b, "%s_sum%s%s%s %.6f\n", name, br ? "{" : "", inner, br ? "}" : "", S->h[h].sum);
        srv_buf_printf(b, "%s_count%s%s%s %llu\n", name, br ? "{" : "", inner, br ? "}" : "", (unsigned long long)S->h[h].count);
    }
    pthread_mutex_unlock(&S->mm);
    pthread_mutex_lock(&S->qm);
    int ql = S->qlen;
    pthread_mutex_unlock(&S->qm);
    srv_buf_printf(b, "# TYPE mact_queue_depth gauge\nmact_queue_depth %d\n", ql);
    srv_buf_printf(b, "# TYPE mact_queue_capacity gauge\nmact_queue_capacity %d\n", S->st.c.queue_cap);
    srv_buf_printf(b, "# TYPE mact_jobs_in_flight gauge\nmact_jobs_in_flight %d\n", atomic_load(&S->jobs_live));
    srv_buf_printf(b, "# TYPE mact_connections gauge\nmact_connections %d\n", atomic_load(&S->conns));
    srv_buf_printf(b, "# HELP mact_sockets_open Accepted sockets open (every protocol, any state).\n"
                   "# TYPE mact_sockets_open gauge\nmact_sockets_open %d\n", srv_connlim_count(S->cl));
    srv_buf_printf(b, "# TYPE mact_sockets_limit gauge\nmact_sockets_limit{scope=\"total\"} %d\n"
                   "mact_sockets_limit{scope=\"per_ip\"} %d\n", S->st.c.max_conns, S->st.c.max_conns_per_ip);
    pthread_mutex_lock(&S->mm);
    srv_buf_printf(b, "# HELP mact_sockets_refused_total Sockets refused by a connection limit, dropped by the header "
                   "deadline or for not reading replies.\n# TYPE mact_sockets_refused_total counter\n"
                   "mact_sockets_refused_total{reason=\"per_ip_limit\"} %llu\n"
                   "mact_sockets_refused_total{reason=\"total_limit\"} %llu\n"
                   "mact_sockets_refused_total{reason=\"past_grace\"} %llu\n"
                   "mact_sockets_refused_total{reason=\"header_timeout\"} %llu\n"
                   "mact_sockets_refused_total{reason=\"replies_unread\"} %llu\n",
                   (unsigned long long)S->refused[0], (unsigned long long)S->refused[1],
                   (unsigned long long)S->refused[2], (unsigned long long)S->header_timeouts,
                   (unsigned long long)S->slow_reader_drops);
    pthread_mutex_unlock(&S->mm);
    srv_buf_printf(b, "# TYPE mact_received_bytes_total counter\n");
    for (int p = 0; p < SRV_NPROTO; p++)
        srv_buf_printf(b, "mact_received_bytes_total{protocol=\"%s\"} %lld\n", PROTO_NAME(p), atomic_load(&S->bytes_in[p]));
    srv_buf_printf(b, "# TYPE mact_sent_bytes_total counter\n");
    for (int p = 0; p < SRV_NPROTO; p++)
        srv_buf_printf(b, "mact_sent_bytes_total{protocol=\"%s\"} %lld\n", PROTO_NAME(p), atomic_load(&S->bytes_out[p]));
    srv_buf_printf(b, "# HELP mact_worker_busy_seconds_total Time each worker spent on requests.\n"
                   "# TYPE mact_worker_busy_seconds_total counter\n");
    for (int i = 0; i < S->nw && S->w; i++)
        srv_buf_printf(b, "mact_worker_busy_seconds_total{worker=\"%d\"} %.3f\n", i, S->w[i].busy_ms / 1000.0);
    process_metrics(b);
    srv_buf_printf(b, "# TYPE mact_workers gauge\nmact_workers %d\n", S->nw);
    srv_buf_printf(b, "# TYPE mact_ready gauge\nmact_ready %d\n", atomic_load(&S->ready) && !atomic_load(&S->draining));
    srv_buf_printf(b, "# TYPE mact_cold_start_seconds gauge\nmact_cold_start_seconds %.3f\n", S->cold_start_ms / 1000);
    srv_buf_printf(b, "# TYPE mact_model_info gauge\nmact_model_info{version=\"%s\",precision=\"%s\",norm_tag=\"%s\","
                   "d_model=\"%d\",n_layers=\"%d\",max_action_horizon=\"%d\",max_action_dim=\"%d\"} 1\n",
                   MACT_VERSION_STRING, mact_precision_str(S->st.mi.precision), tag_name(&S->st), S->st.mi.d_model,
                   S->st.mi.n_layers, S->st.mi.max_action_horizon, S->st.mi.max_action_dim);
}

void srv_identity_json(const srv_state *S, int ready, srv_buf *b)
{
    const char *base = strrchr(S->c.model_dir, '/');
    base = base && base[1] ? base + 1 : S->c.model_dir;
    srv_buf_printf(b, "{\"status\": \"%s\", \"repo_id\": \"%s\", \"norm_tag\": \"%s\", \"num_cameras\": %d, "
                   "\"state_dim\": %d, \"device\": \"cpu\", \"dtype\": \"%s\", \"server\": \"mact %s\", "
                   "\"max_action_horizon\": %d, \"workers\": %d, \"norm_tags\": %s}\n",
                   ready ? "ok" : "loading", base, tag_name(S), S->n_cameras > 0 ? S->n_cameras : S->c.keys[SRV_ACT].n_cams,
                   S->state_dim, mact_precision_str(S->mi.precision), MACT_VERSION_STRING, S->mi.max_action_horizon,
                   S->workers, ready && S->tags_json ? S->tags_json : "null");
}

void srv_config_json(srv *S, srv_buf *b)
{
    const srv_config *c = &S->st.c;
    srv_buf_printf(b, "{\"server\": \"mact %s\", \"model_dir\": \"%s\", \"host\": \"%s\", \"ports\": {", MACT_VERSION_STRING,
                   c->model_dir, c->host);
    for (int p = 0, f = 0; p < SRV_NPROTO; p++)
        if (c->port[p]) srv_buf_printf(b, "%s\"%s\": %d", f++ ? ", " : "", PROTO_NAME(p), c->port[p]);
    srv_buf_printf(b, "}, \"workers\": %d, \"threads_per_worker\": %d, \"queue_capacity\": %d, \"deadline_ms\": %d, "
                   "\"max_message_bytes\": %zu, \"max_images\": %d, \"max_image_pixels\": %lld, \"max_depth\": %d, "
                   "\"max_string\": %zu, \"idle_timeout_s\": %d, \"api_key\": %s, \"api_key_required\": {",
                   S->nw, S->nw ? mact_session_threads(S->w[0].s) : 0, c->queue_cap, c->deadline_ms, c->max_message,
                   c->max_images, (long long)c->max_image_pixels, c->max_depth, c->max_string, c->idle_timeout_s,
                   S->keylen ? "true" : "false");
    for (int p = 0; p < SRV_NPROTO; p++)
        srv_buf_printf(b, "%s\"%s\": %s", p ? ", " : "", PROTO_NAME(p), S->keylen && c->key_required[p] ? "true" : "false");
    srv_buf_printf(b, "}, \"replan_steps\": %d, \"replan_rtc\": {\"schedule\": \"%s\", \"execution_horizon\": %d, "
                   "\"max_guidance_weight\": %g, \"guidance\": \"%s\"}", c->replan_steps,
                   mact_rtc_schedule_str(c->replan_rtc.schedule), c->replan_rtc.execution_horizon ? c->replan_rtc.execution_horizon
                   : MACT_RTC_DEFAULT_EXECUTION_HORIZON, c->replan_rtc.max_guidance_weight > 0 ?
                   (double)c->replan_rtc.max_guidance_weight : (double)MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT,
                   mact_rtc_guidance_str(c->replan_rtc.guidance));
    srv_buf_printf(b, ", \"precision\": \"%s\", \"norm_tag\": \"%s\", \"keys\": {", mact_precision_str(S->st.mi.precision),
                   tag_name(&S->st));
    for (int p = 0; p < SRV_NPROTO; p++) {
        const srv_keys *k = &c->keys[p];
        srv_buf_printf(b, "%s\"%s\": {\"cameras\": [", p ? ", " : "", PROTO_NAME(p));
        for (int i = 0; i < k->n_cams; i++) srv_buf_printf(b, "%s\"%s\"", i ? ", " : "", k->cams[i]);
        srv_buf_printf(b, "], \"state\": \"%s\", \"task\": \"%s\"}", k->state, k->task);
    }
    srv_buf_printf(b, "}}\n");
}
