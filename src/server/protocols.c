/* The protocol table and the server's configuration defaults. A protocol is one file (proto_*.c) defining a
 * srv_protocol; adding one means a row here, an index in server.h's enum, and its file. No libwebsockets here:
 * the fuzz targets link this file with the protocols and a stubbed model. */
#include <stdio.h>
#include <string.h>
#include "server/internal.h"

const srv_protocol *const srv_protocols[SRV_NPROTO] = {
    [SRV_OPENPI] = &srv_proto_openpi,
    [SRV_ACT] = &srv_proto_act,
    [SRV_VLA] = &srv_proto_vla,
    [SRV_LEROBOT] = &srv_proto_lerobot,
};

const char *const srv_outcome_name[SRV_OC_N] = {
    [SRV_OC_OK] = "ok", [SRV_OC_BAD] = "bad_request", [SRV_OC_ERROR] = "error", [SRV_OC_BUSY] = "busy",
    [SRV_OC_DROPPED] = "dropped", [SRV_OC_DEADLINE] = "deadline", [SRV_OC_CONTROL] = "control",
    [SRV_OC_UNAUTH] = "unauthorized",
};

const char *srv_protocol_name(int p) { return p >= 0 && p < SRV_NPROTO ? srv_protocols[p]->name : NULL; }
const char *srv_protocol_key_flag(int p) { return p >= 0 && p < SRV_NPROTO ? srv_protocols[p]->key_flag : NULL; }

int srv_protocol_find(const char *name, size_t n)
{
    for (int p = 0; p < SRV_NPROTO; p++)
        if (strlen(srv_protocols[p]->name) == n && !strncmp(srv_protocols[p]->name, name, n)) return p;
    return -1;
}

int srv_keys_set_cams(srv_keys *k, const char *list)
{
    int n = 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n == SRV_MAX_CAMS || l == 0 || l >= SRV_MAX_KEY) return -1;
        memcpy(k->cams[n], p, l);
        k->cams[n][l] = 0;
        n++;
        p += l + (e ? 1 : 0);
    }
    k->n_cams = n;
    return n;
}

static void set_keys(srv_keys *k, const char *cams, const char *state, const char *task)
{
    srv_keys_set_cams(k, cams);
    snprintf(k->state, sizeof k->state, "%s", state);
    snprintf(k->task, sizeof k->task, "%s", task);
}

void srv_config_defaults(srv_config *c)
{
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->workers = 1;
    c->max_message = (size_t)64 << 20;
    c->queue_cap = 64;
    c->deadline_ms = 30000;
    c->max_images = 4;
    c->max_image_pixels = (int64_t)4096 * 4096;
    c->max_depth = 16;
    c->max_string = 4096;
    c->idle_timeout_s = 10;
    c->header_timeout_s = 10;
    c->max_conns = 512;
    c->max_conns_per_ip = 256;
    c->drain_timeout_s = 30;
    c->log_requests = 1;
    for (int p = 0; p < SRV_NPROTO; p++) {
        const srv_protocol *pr = srv_protocols[p];
        c->key_required[p] = 1;
        set_keys(&c->keys[p], pr->cams, pr->state, pr->task);
    }
    c->lerobot_fps = 30;              /* LeRobot's DEFAULT_FPS */
    c->lerobot_rtc = 1;
    c->lerobot_obs_timeout_ms = 2000; /* LeRobot's DEFAULT_OBS_QUEUE_TIMEOUT */
    /* /act's second key set: a body with the first YAM camera key */
    set_keys(&c->yam_keys, "top_cam,left_cam,right_cam", "state", "instruction");
}
