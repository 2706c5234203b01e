/* mact serve: a resident policy server speaking three robot protocols over one loaded model.
 *
 *   openpi     WebSocket + msgpack-numpy (Physical Intelligence's openpi_client), metadata frame first
 *   act        HTTP POST /act with json_numpy bodies (MolmoAct2's DROID / YAM host servers)
 *   vla-eval   WebSocket + msgpack envelopes (AllenAI's vla-evaluation-harness model-server protocol)
 *   lerobot    gRPC transport.AsyncInference (LeRobot's asynchronous robot client), pickles read as data
 *
 * Each protocol listens on its own port (libwebsockets: HTTP and WebSocket on one port; lerobot: gRPC); every
 * libwebsockets port also answers GET /livez, /readyz, /metrics and /config. Network I/O runs on one event-loop thread that never
 * waits on inference: complete messages go through a bounded queue to N inference workers, each with its
 * own mact_session and thread pool; the workers decode, predict and encode, and hand the reply back.
 * docs/serving.md describes the wire formats, the key mappings and deployment. */
#ifndef MACT_SERVER_H
#define MACT_SERVER_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

enum { SRV_OPENPI = 0, SRV_ACT, SRV_VLA, SRV_LEROBOT, SRV_NPROTO };

#define SRV_MAX_CAMS 8
#define SRV_MAX_KEY 128

/* Which observation keys hold the cameras (in the checkpoint's camera order), the state and the task. A key
 * with dots ("images.agentview") is also looked up as a path through nested maps. */
typedef struct {
    char cams[SRV_MAX_CAMS][SRV_MAX_KEY];
    int n_cams;
    char state[SRV_MAX_KEY], task[SRV_MAX_KEY];
} srv_keys;

typedef struct {
    const char *model_dir, *host;
    int port[SRV_NPROTO];            /* 0: protocol off */
    const char *api_key_file;        /* NULL: no key */
    int key_required[SRV_NPROTO];    /* with a key: which protocols must present it */
    int workers;                     /* inference sessions; 0: 1 */
    int threads_per_worker;          /* 0: the CPUs / workers */
    size_t max_message;              /* bytes of one WebSocket message or HTTP body */
    int queue_cap;                   /* requests waiting for a worker; more are answered busy */
    int deadline_ms;                 /* a request not started by then is answered with an error */
    int max_images;                  /* camera frames per request */
    int64_t max_image_pixels;        /* per frame, before resizing */
    int max_depth;                   /* nesting of msgpack / JSON containers */
    size_t max_string;               /* bytes of the task text */
    int idle_timeout_s;              /* a partial message or body stalled this long closes the connection */
    int header_timeout_s;            /* a new connection's request line and headers must be in by then */
    int max_conns, max_conns_per_ip; /* sockets open at once (all, from one address); more are refused */
    int drain_timeout_s;             /* SIGTERM: how long to wait for in-flight requests */
    srv_keys keys[SRV_NPROTO];
    srv_keys yam_keys;               /* /act: used when the body has the first YAM camera key */
    const char *norm_tag;            /* NULL: the checkpoint's only tag */
    mact_precision precision;
    unsigned int8_parts;             /* INT8: MACT_PART_* quantized (0: the library's default) */
    const char *pack_cache;
    int log_requests;                /* one line per request on stderr */
    /* vla-eval: with replan_steps K > 0, infer again once K rows of the current chunk were served, guided (RTC)
     * by the rows left; replan_rtc holds the guidance options of those inferences (delay 0, rows filled in) */
    int replan_steps;
    mact_rtc_options replan_rtc;
    /* lerobot: the client's control rate (TimedAction timestamps t0 + i / fps; the RTC delay estimate), real-time
     * chunking on (1) or off, how long GetActions waits for an observation */
    double lerobot_fps;
    int lerobot_rtc;
    int lerobot_obs_timeout_ms;
} srv_config;

void srv_config_defaults(srv_config *c);
/* The protocol table's names: p's name ("openpi"; its port flag is --NAME) and observation-key flag prefix
 * ("openpi": --openpi-images ...); NULL out of range. srv_protocol_find: the index of a name, -1 if none. */
const char *srv_protocol_name(int p);
const char *srv_protocol_key_flag(int p);
int srv_protocol_find(const char *name, size_t n);
/* Parses "a,b,c" into keys->cams; 0 or -1 when there are too many or one is too long. */
int srv_keys_set_cams(srv_keys *k, const char *list);
/* Loads the model, serves until SIGTERM/SIGINT, drains; returns the process exit status. */
int srv_run(const srv_config *c);
#endif
