/* LeRobot's asynchronous inference (`mact serve --lerobot PORT`): what proto_lerobot.c (the payloads: pickles
 * as data, the feature mapping, real-time chunking, the reply) and lerobot_service.c (the gRPC service: clients,
 * the observation queue of one, GetActions) share. docs/serving.md "LeRobot async inference". */
#ifndef MACT_SERVER_LEROBOT_H
#define MACT_SERVER_LEROBOT_H
#include <pthread.h>
#include "server/internal.h"

/* The policy type this server serves (RemotePolicyConfig.policy_type; LeRobot registers MolmoAct2 so). */
#define LR_POLICY_TYPE "molmoact2"

/* A client's set-up and chunk state: the srv_conn's pstate, read and written by the gRPC threads and the
 * worker running its request, under mu. */
typedef struct {
    pthread_mutex_t mu;
    int configured;
    int actions_per_chunk;
    int n_state;                             /* the state's raw keys, in observation.state's order */
    char state_keys[MACT_NORM_MAX_DIM][SRV_MAX_KEY];
    int n_cams;                              /* the cameras' raw keys, in the checkpoint's camera order */
    char cam_keys[SRV_MAX_CAMS][SRV_MAX_KEY];
    /* what the client's RemotePolicyConfig chose (a LeRobot fork's policy_config_overrides, its fps) */
    char norm_tag[MACT_NORM_MAX_NAME];       /* "": the server's */
    int num_steps;                           /* flow steps; 0: the checkpoint's */
    int max_rows;                            /* n_action_steps: rows of a chunk at most; 0: actions_per_chunk */
    double fps;                              /* the client's control rate (RTC's delay estimate); 0: --lerobot-fps */
    /* real-time chunking: the last chunk sent (robot units) and its first timestep */
    float *chunk;
    int rows, dim;
    int64_t i0;
    double lat_ms;                           /* the mean inference time of this client's requests, cold start out */
    int n_lat;
    int last_delay, last_prev_rows;          /* the last request's RTC: delay used, rows guided (0: none) */
} lr_conn;

lr_conn *lr_conn_new(void);
void lr_conn_free(void *p);
/* Ready: forget the chunk (a new episode); the set-up stays until the next SendPolicyInstructions. */
void lr_conn_reset(lr_conn *lc);

/* SendPolicyInstructions: a RemotePolicyConfig -> lc's set-up. 0, -1 (the client's: err says what) or
 * SRV_EINTERNAL. */
int lr_configure(const srv_state *S, lr_conn *lc, const uint8_t *data, size_t n, char *err, size_t el);

/* What SendObservations needs of a TimedObservation before it queues it: its timestep, must_go and the state
 * in observation.state's order (state[lc->n_state]). 0 or -1 with err. */
int lr_observation_peek(const srv_state *S, lr_conn *lc, const uint8_t *data, size_t n, int64_t *timestep,
                        int *must_go, float *state, char *err, size_t el);

/* The service's side (lerobot_service.c) */
int lr_service_start(srv *S, int port, char *err, size_t el);
void lr_service_stop(srv *S);
#endif
