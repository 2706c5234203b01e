/* `mact serve`: the resident policy server's command line (src/server/ does the serving). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "mact.h"
#include "server/server.h"

static int serve_usage(FILE *f)
{
    fprintf(f,
            "usage: mact serve --model DIR [--openpi PORT] [--act PORT] [--vla-eval PORT] [options]\n"
            "  --host ADDR              address to bind (default 127.0.0.1)\n"
            "  --openpi PORT            openpi WebSocket + msgpack-numpy\n"
            "  --act PORT               MolmoAct2 HTTP POST /act (json_numpy)\n"
            "  --vla-eval PORT          vla-evaluation-harness WebSocket model-server protocol\n"
            "  --api-key-file F         require Authorization: Api-Key <key> / Bearer <key>\n"
            "  --api-key-protocols L    which protocols require it (default openpi,act,vla-eval)\n"
            "  --workers N              inference sessions (default 1), each with its own thread pool\n"
            "  --threads N              threads per worker (default: the CPUs / workers)\n"
            "  --queue N                requests waiting for a worker before 'busy' (default 64)\n"
            "  --deadline-ms N          a request not started within N ms is answered with an error (default 30000)\n"
            "  --max-message-mb N       largest message or body (default 64)\n"
            "  --max-images N           frames per request (default 4)\n"
            "  --max-image-pixels N     pixels per frame before resizing (default 16777216)\n"
            "  --idle-timeout S         a stalled partial message closes its connection after S s (default 10)\n"
            "  --drain-timeout S        SIGTERM: wait up to S s for requests in flight (default 30)\n"
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

int cmd_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_defaults(&c);
    static const char *const pfx[SRV_NPROTO] = {"--openpi-", "--act-", "--vla-"};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { serve_usage(stdout); return 0; }
        if (!strcmp(a, "--quiet")) { c.log_requests = 0; continue; }
        if (!v) return serve_usage(stderr);
        if (!strcmp(a, "--model")) c.model_dir = v;
        else if (!strcmp(a, "--host")) c.host = v;
        else if (!strcmp(a, "--openpi")) c.port[SRV_OPENPI] = atoi(v);
        else if (!strcmp(a, "--act")) c.port[SRV_ACT] = atoi(v);
        else if (!strcmp(a, "--vla-eval")) c.port[SRV_VLA] = atoi(v);
        else if (!strcmp(a, "--api-key-file")) c.api_key_file = v;
        else if (!strcmp(a, "--api-key-protocols")) {
            for (int p = 0; p < SRV_NPROTO; p++) c.key_required[p] = 0;
            if (strstr(v, "openpi")) c.key_required[SRV_OPENPI] = 1;
            if (strstr(v, "act")) c.key_required[SRV_ACT] = 1;
            if (strstr(v, "vla")) c.key_required[SRV_VLA] = 1;
        }
        else if (!strcmp(a, "--workers")) c.workers = atoi(v);
        else if (!strcmp(a, "--threads")) c.threads_per_worker = atoi(v);
        else if (!strcmp(a, "--queue")) c.queue_cap = atoi(v);
        else if (!strcmp(a, "--deadline-ms")) c.deadline_ms = atoi(v);
        else if (!strcmp(a, "--max-message-mb")) c.max_message = (size_t)(atof(v) * 1048576.0);
        else if (!strcmp(a, "--max-images")) c.max_images = atoi(v);
        else if (!strcmp(a, "--max-image-pixels")) c.max_image_pixels = atoll(v);
        else if (!strcmp(a, "--idle-timeout")) c.idle_timeout_s = atoi(v);
        else if (!strcmp(a, "--drain-timeout")) c.drain_timeout_s = atoi(v);
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
                size_t n = strlen(pfx[p]);
                if (strncmp(a, pfx[p], n)) continue;
                srv_keys *k = &c.keys[p];
                const char *f = a + n;
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
    if (!c.model_dir || (!c.port[0] && !c.port[1] && !c.port[2])) {
        fprintf(stderr, "mact serve: --model and at least one of --openpi, --act, --vla-eval are required\n");
        return serve_usage(stderr);
    }
    for (int p = 0; p < SRV_NPROTO; p++)
        if (c.port[p] < 0 || c.port[p] > 65535) { fprintf(stderr, "mact serve: bad port %d\n", c.port[p]); return 2; }
    if (c.workers < 1 || c.workers > 64 || c.queue_cap < 1 || c.max_images < 1 || c.max_images > 256 ||
        c.max_message < 1024 || c.max_image_pixels < 1 || c.idle_timeout_s < 1) {
        fprintf(stderr, "mact serve: a limit is out of range\n");
        return 2;
    }
    return srv_run(&c);
}
