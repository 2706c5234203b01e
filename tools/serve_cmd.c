/* `mact serve`: the resident policy server's command line (src/server/ does the serving). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "mact.h"
#include "common/cli.h"
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
            "  --int8-parts P           int8: the components quantized, llm,vision,expert or all (default llm)\n"
            "  --openpi-images K1,K2 --openpi-state K --openpi-task K       observation keys (also --act-*, --vla-*,\n"
            "                           --yam-images); dotted keys are paths into nested maps\n"
            "  --replan-steps K         vla-eval: infer again once K rows of a chunk were served, guided (real-time\n"
            "                           chunking) by the rows left, delay 0 (default 0: only when the chunk is used up)\n"
            "  --replan-schedule S      zeros|ones|linear|exp (default linear)   --replan-horizon E (default 10)\n"
            "  --replan-max-guidance-weight B (default 10)   --replan-guidance identity|vjp (default identity)\n"
            "  --quiet                  no per-request log lines\n");
    return 2;
}

static int parse_rtc_onoff(const char *s, void *dst, char *err, size_t el)
{
    if (!strcmp(s, "on")) *(int *)dst = 1;
    else if (!strcmp(s, "off")) *(int *)dst = 0;
    else { snprintf(err, el, "--lerobot-rtc is on or off"); return -1; }
    return 0;
}

/* a comma list of protocol names ("vla" for vla-eval too): those protocols require the key, the others not */
static int parse_key_protocols(const char *v, void *dst, char *err, size_t el)
{
    int *required = dst;
    for (int p = 0; p < SRV_NPROTO; p++) required[p] = 0;
    for (const char *q = v; *q;) {
        size_t n = strcspn(q, ",");
        int p = srv_protocol_find(q, n);
        for (int k = 0; k < SRV_NPROTO && p < 0; k++)
            if (strlen(srv_protocol_key_flag(k)) == n && !strncmp(srv_protocol_key_flag(k), q, n)) p = k;
        if (p < 0) { snprintf(err, el, "--api-key-protocols: unknown protocol '%.*s'", (int)n, q); return -1; }
        required[p] = 1;
        q += n + (q[n] == ',');
    }
    return 0;
}

static int parse_cams(const char *s, void *dst, char *err, size_t el) { return srv_keys_set_cams(dst, s) <= 0 ? -2 : 0; }

/* the flags of the protocol table's rows: --NAME PORT and --KEY-images / -state / -task (SRV_NPROTO x 4 rows) */
typedef struct { char name[SRV_NPROTO][4][48]; } proto_flags;

static int add_protocol_rows(cli_opt *o, proto_flags *f, srv_config *c)
{
    int n = 0;
    for (int p = 0; p < SRV_NPROTO; p++) {
        const char *kf = srv_protocol_key_flag(p);
        snprintf(f->name[p][0], sizeof f->name[p][0], "--%s", srv_protocol_name(p));
        snprintf(f->name[p][1], sizeof f->name[p][1], "--%s-images", kf);
        snprintf(f->name[p][2], sizeof f->name[p][2], "--%s-state", kf);
        snprintf(f->name[p][3], sizeof f->name[p][3], "--%s-task", kf);
        o[n++] = (cli_opt)CLI_O(f->name[p][0], CLI_INT, &c->port[p], .lo = 1, .hi = 65535);
        o[n++] = (cli_opt)CLI_O(f->name[p][1], CLI_FN, &c->keys[p], .fn = parse_cams);
        o[n++] = (cli_opt)CLI_O(f->name[p][2], CLI_BUF, c->keys[p].state, .cap = SRV_MAX_KEY);
        o[n++] = (cli_opt)CLI_O(f->name[p][3], CLI_BUF, c->keys[p].task, .cap = SRV_MAX_KEY);
    }
    return n;
}

int cmd_serve(int argc, char **argv)
{
    srv_config c;
    srv_config_defaults(&c);
    int quiet = 0, have_mb = 0, have_px = 0, have_beta = 0, px = 0;
    double mb = 0, beta = 0;
    const cli_opt fixed[] = {
        CLI_O("--model", CLI_STR, &c.model_dir), CLI_O("--host", CLI_STR, &c.host), CLI_O("--api-key-file", CLI_STR, &c.api_key_file),
        CLI_O("--lerobot-fps", CLI_F64, &c.lerobot_fps, .lo = 0.1, .hi = 10000),
        CLI_O("--lerobot-obs-timeout-ms", CLI_INT, &c.lerobot_obs_timeout_ms, .lo = 1, .hi = 600000),
        CLI_O("--lerobot-rtc", CLI_FN, &c.lerobot_rtc, .fn = parse_rtc_onoff),
        CLI_O("--api-key-protocols", CLI_FN, c.key_required, .fn = parse_key_protocols),
        CLI_O("--workers", CLI_INT, &c.workers, .lo = 1, .hi = 64), CLI_O("--threads", CLI_INT, &c.threads_per_worker, .lo = 0, .hi = 4096),
        CLI_O("--queue", CLI_INT, &c.queue_cap, .lo = 1, .hi = 1 << 20), CLI_O("--deadline-ms", CLI_INT, &c.deadline_ms, .lo = 0, .hi = 1 << 30),
        CLI_O("--max-message-mb", CLI_F64, &mb, .lo = 0.0009765625, .hi = 4096, .seen = &have_mb),
        CLI_O("--max-images", CLI_INT, &c.max_images, .lo = 1, .hi = 256),
        CLI_O("--max-image-pixels", CLI_INT, &px, .lo = 1, .hi = 1 << 30, .seen = &have_px),
        CLI_O("--idle-timeout", CLI_INT, &c.idle_timeout_s, .lo = 1, .hi = 86400),
        CLI_O("--header-timeout", CLI_INT, &c.header_timeout_s, .lo = 1, .hi = 3600),
        CLI_O("--max-connections", CLI_INT, &c.max_conns, .lo = 1, .hi = 65536),
        CLI_O("--max-connections-per-ip", CLI_INT, &c.max_conns_per_ip, .lo = 1, .hi = 65536),
        CLI_O("--drain-timeout", CLI_INT, &c.drain_timeout_s, .lo = 0, .hi = 86400), CLI_O("--norm-tag", CLI_STR, &c.norm_tag),
        CLI_O("--replan-steps", CLI_INT, &c.replan_steps, .lo = 0, .hi = 4096),
        CLI_O("--replan-horizon", CLI_INT, &c.replan_rtc.execution_horizon, .lo = 0, .hi = 4096),
        CLI_O("--replan-schedule", CLI_FN, &c.replan_rtc.schedule, .fn = cli_rtc_schedule, .choices = "zeros, ones, linear or exp"),
        CLI_O("--replan-guidance", CLI_FN, &c.replan_rtc.guidance, .fn = cli_rtc_guidance, .choices = "identity or vjp"),
        CLI_O("--replan-max-guidance-weight", CLI_F64, &beta, .lo = 0, .hi = 1e30, .seen = &have_beta),
        CLI_O("--pack-cache", CLI_STR, &c.pack_cache), CLI_O("--precision", CLI_FN, &c.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &c.int8_parts, .fn = cli_int8_parts),
        CLI_O("--yam-images", CLI_FN, &c.yam_keys, .fn = parse_cams), CLI_O("--quiet", CLI_FLAG, &quiet)};
    enum { NFIXED = sizeof fixed / sizeof fixed[0] };
    cli_opt opts[NFIXED + 4 * SRV_NPROTO + 1];
    proto_flags names;
    memcpy(opts, fixed, sizeof fixed);
    opts[NFIXED + add_protocol_rows(opts + NFIXED, &names, &c)] = (cli_opt){0};
    int rc = cli_parse("mact serve", argc, argv, opts, NULL, 0, NULL, serve_usage);
    if (rc) return cli_exit(rc);
    if (quiet) c.log_requests = 0;
    if (have_mb) c.max_message = (size_t)(mb * 1048576.0);
    if (have_px) c.max_image_pixels = px;
    if (have_beta) c.replan_rtc.max_guidance_weight = (float)beta;
    int any = 0;
    for (int p = 0; p < SRV_NPROTO; p++) any |= c.port[p] != 0;
    if (!c.model_dir || !any) {  /* named: the one missing, or both */
        char ports[256] = "";
        for (int p = 0; p < SRV_NPROTO; p++) {
            size_t l = strlen(ports);
            snprintf(ports + l, sizeof ports - l, "%s--%s", p ? ", " : "", srv_protocol_name(p));
        }
        if (any) fprintf(stderr, "mact serve: --model is required\n");
        else fprintf(stderr, "mact serve: %sat least one protocol port (%s) %s required\n",
                     c.model_dir ? "" : "--model and ", ports, c.model_dir ? "is" : "are");
        return serve_usage(stderr);
    }
    if (c.max_message < 1024) { fprintf(stderr, "mact serve: --max-message-mb: at least 1 KiB\n"); return 2; }
    return srv_run(&c);
}
