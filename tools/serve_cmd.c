/* `mact serve`: the resident policy server's command line (src/server/ does the serving). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "mact.h"
#include "base/parse.h"
#include "server/server.h"

static int serve_usage(FILE *f)
{
    fprintf(f,
            "usage: mact serve --model DIR [--openpi PORT] [--act PORT] [--vla-eval PORT] [--lerobot PORT] [options]\n"
            "  --host ADDR              address to bind (default 127.0.0.1)\n"
            "  --openpi PORT            openpi WebSocket + msgpack-numpy\n"
            "  --act PORT               MolmoAct2 HTTP POST /act (json_numpy)\n"
            "  --vla-eval PORT          vla-evaluation-harness WebSocket model-server protocol\n"
            "  --lerobot PORT           LeRobot's async-inference gRPC service (robot_client; pickles read as data)\n"
            "  --lerobot-fps F          the client's control rate: action timestamps, the RTC delay (default 30)\n"
            "  --lerobot-rtc on|off     real-time chunking from the last chunk's unexecuted rows (default on; run the\n"
            "                           client with --aggregate_fn_name=latest_only)\n"
            "  --lerobot-obs-timeout-ms N  how long GetActions waits for an observation (default 2000)\n"
            "  --api-key-file F         require Authorization: Api-Key <key> / Bearer <key>\n"
            "  --api-key-protocols L    which protocols require it (default all: openpi,act,vla-eval,lerobot)\n"
            "  --workers N              inference sessions (default 1), each with its own thread pool\n"
            "  --threads N              threads per worker (default: the CPUs / workers)\n"
            "  --queue N                requests waiting for a worker before 'busy' (default 64)\n"
            "  --deadline-ms N          a request not started within N ms is answered with an error (default 30000)\n"
            "  --max-message-mb N       largest message or body (default 64)\n"
            "  --max-images N           frames per request (default 4)\n"
            "  --max-image-pixels N     pixels per frame before resizing (default 16777216)\n"
            "  --idle-timeout S         a stalled partial message closes its connection after S s (default 10)\n"
            "  --drain-timeout S        SIGTERM: wait up to S s for requests in flight (default 30)\n"
            "  --header-timeout S       a new connection's request headers must be complete within S s (default 10)\n"
            "  --max-connections N      sockets open at once (default 512); --max-connections-per-ip N (default 256):\n"
            "                           more are answered 503 naming the limit, then closed\n"
            "  --norm-tag T             default normalization tag\n"
            "  --precision P            fp32|bf16|int8 (default bf16)   --pack-cache DIR\n"
            "  --openpi-images K1,K2 --openpi-state K --openpi-task K       observation keys (also --act-*, --vla-*,\n"
            "                           --yam-images); dotted keys are paths into nested maps\n"
            "  --replan-steps K         vla-eval: infer again once K rows of a chunk were served, guided (real-time\n"
            "                           chunking) by the rows left, delay 0 (default 0: only when the chunk is used up)\n"
            "  --replan-schedule S      zeros|ones|linear|exp (default linear)   --replan-horizon E (default 10)\n"
            "  --replan-max-guidance-weight B (default 10)   --replan-guidance identity|vjp (default identity)\n"
            "  --quiet                  no per-request log lines\n");
    return 2;
}

/* --NAME PORT: the protocol table's index of NAME, -1 if it names none */
static int port_flag(const char *name) { return srv_protocol_find(name, strlen(name)); }

static int key_flag(const char *s, size_t n)
{
    for (int p = 0; p < SRV_NPROTO; p++)
        if (strlen(srv_protocol_key_flag(p)) == n && !strncmp(srv_protocol_key_flag(p), s, n)) return p;
    return -1;
}

int cmd_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_defaults(&c);
    char perr[256];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { serve_usage(stdout); return 0; }
        if (!strcmp(a, "--quiet")) { c.log_requests = 0; continue; }
        if (!v) return serve_usage(stderr);
        if (!strcmp(a, "--model")) c.model_dir = v;
        else if (!strcmp(a, "--host")) c.host = v;
        else if (a[0] == '-' && a[1] == '-' && port_flag(a + 2) >= 0) {
            int p = port_flag(a + 2);
            if (mact_parse_int_arg(a, v, 1, 65535, &c.port[p], perr, sizeof perr)) goto bad_num;
        }
        else if (!strcmp(a, "--api-key-file")) c.api_key_file = v;
        else if (!strcmp(a, "--lerobot-fps")) { if (mact_parse_f64_arg(a, v, 0.1, 10000, &c.lerobot_fps, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--lerobot-obs-timeout-ms")) { if (mact_parse_int_arg(a, v, 1, 600000, &c.lerobot_obs_timeout_ms, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--lerobot-rtc")) {
            if (!strcmp(v, "on")) c.lerobot_rtc = 1;
            else if (!strcmp(v, "off")) c.lerobot_rtc = 0;
            else { fprintf(stderr, "mact serve: --lerobot-rtc is on or off\n"); return 2; }
        }
        else if (!strcmp(a, "--api-key-protocols")) {
            for (int p = 0; p < SRV_NPROTO; p++) c.key_required[p] = 0;
            for (const char *q = v; *q;) {   /* a comma list of protocol names ("vla" for vla-eval too) */
                size_t n = strcspn(q, ",");
                int p = srv_protocol_find(q, n);
                if (p < 0) p = key_flag(q, n);
                if (p < 0) { fprintf(stderr, "mact serve: --api-key-protocols: unknown protocol '%.*s'\n", (int)n, q); return 2; }
                c.key_required[p] = 1;
                q += n + (q[n] == ',');
            }
        }
        else if (!strcmp(a, "--workers")) { if (mact_parse_int_arg(a, v, 1, 64, &c.workers, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--threads")) { if (mact_parse_int_arg(a, v, 0, 4096, &c.threads_per_worker, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--queue")) { if (mact_parse_int_arg(a, v, 1, 1 << 20, &c.queue_cap, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--deadline-ms")) { if (mact_parse_int_arg(a, v, 0, 1 << 30, &c.deadline_ms, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--max-message-mb")) {
            double mb;
            if (mact_parse_f64_arg(a, v, 0.0009765625, 4096, &mb, perr, sizeof perr)) goto bad_num;
            c.max_message = (size_t)(mb * 1048576.0);
        }
        else if (!strcmp(a, "--max-images")) { if (mact_parse_int_arg(a, v, 1, 256, &c.max_images, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--max-image-pixels")) {
            int px;
            if (mact_parse_int_arg(a, v, 1, 1 << 30, &px, perr, sizeof perr)) goto bad_num;
            c.max_image_pixels = px;
        }
        else if (!strcmp(a, "--idle-timeout")) { if (mact_parse_int_arg(a, v, 1, 86400, &c.idle_timeout_s, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--header-timeout")) { if (mact_parse_int_arg(a, v, 1, 3600, &c.header_timeout_s, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--max-connections")) { if (mact_parse_int_arg(a, v, 1, 65536, &c.max_conns, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--max-connections-per-ip")) { if (mact_parse_int_arg(a, v, 1, 65536, &c.max_conns_per_ip, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--drain-timeout")) { if (mact_parse_int_arg(a, v, 0, 86400, &c.drain_timeout_s, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--norm-tag")) c.norm_tag = v;
        else if (!strcmp(a, "--replan-steps") || !strcmp(a, "--replan-horizon")) {
            char *end;
            long k = strtol(v, &end, 10);
            if (*end || k < 0 || k > 4096) { fprintf(stderr, "mact serve: %s takes an integer in 0..4096\n", a); return 2; }
            if (a[9] == 's') c.replan_steps = (int)k;
            else c.replan_rtc.execution_horizon = (int)k;
        } else if (!strcmp(a, "--replan-schedule")) {
            if (mact_rtc_schedule_parse(v, &c.replan_rtc.schedule)) { fprintf(stderr, "mact serve: --replan-schedule is zeros, ones, linear or exp\n"); return 2; }
        } else if (!strcmp(a, "--replan-guidance")) {
            if (mact_rtc_guidance_parse(v, &c.replan_rtc.guidance)) { fprintf(stderr, "mact serve: --replan-guidance is identity or vjp\n"); return 2; }
        } else if (!strcmp(a, "--replan-max-guidance-weight")) {
            char *end;
            double b = strtod(v, &end);
            if (*end || !(b >= 0) || b > 1e30) { fprintf(stderr, "mact serve: --replan-max-guidance-weight takes a finite number >= 0\n"); return 2; }
            c.replan_rtc.max_guidance_weight = (float)b;
        }
        else if (!strcmp(a, "--pack-cache")) c.pack_cache = v;
        else if (!strcmp(a, "--precision")) {
            mact_precision p;
            if (mact_precision_parse(v, &p)) return serve_usage(stderr);
            c.precision = p;
        } else if (!strcmp(a, "--yam-images")) {
            if (srv_keys_set_cams(&c.yam_keys, v) <= 0) return serve_usage(stderr);
        } else {
            used = 0;
            for (int p = 0; p < SRV_NPROTO && !used; p++) {
                const char *kf = srv_protocol_key_flag(p);
                size_t n = strlen(kf);
                if (strncmp(a, "--", 2) || strncmp(a + 2, kf, n) || a[2 + n] != '-') continue;
                srv_keys *k = &c.keys[p];
                const char *f = a + 3 + n;
                used = 1;
                if (!strcmp(f, "images")) { if (srv_keys_set_cams(k, v) <= 0) return serve_usage(stderr); }
                else if (!strcmp(f, "state") && strlen(v) < SRV_MAX_KEY) snprintf(k->state, sizeof k->state, "%s", v);
                else if (!strcmp(f, "task") && strlen(v) < SRV_MAX_KEY) snprintf(k->task, sizeof k->task, "%s", v);
                else used = 0;
            }
            if (!used) { fprintf(stderr, "mact serve: unknown option %s\n", a); return serve_usage(stderr); }
        }
        i++;
    }
    int any = 0;
    for (int p = 0; p < SRV_NPROTO; p++) any |= c.port[p] != 0;
    if (!c.model_dir || !any) {
        fprintf(stderr, "mact serve: --model and at least one protocol port (");
        for (int p = 0; p < SRV_NPROTO; p++) fprintf(stderr, "%s--%s", p ? ", " : "", srv_protocol_name(p));
        fprintf(stderr, ") are required\n");
        return serve_usage(stderr);
    }
    if (c.max_message < 1024) { fprintf(stderr, "mact serve: --max-message-mb: at least 1 KiB\n"); return 2; }
    return srv_run(&c);
bad_num:
    fprintf(stderr, "mact serve: %s\n", perr);
    return 2;
}
