/* The gRPC transport of `mact serve --lerobot PORT`: LeRobot's asynchronous-inference service
 * transport.AsyncInference (src/server/lerobot_services.proto), on the gRPC C core (Debian's libgrpc-dev),
 * messages coded by protobuf-c. It moves bytes only: what the payloads mean (LeRobot pickles) is the
 * caller's, through four callbacks.
 *
 *   Ready(Empty) -> Empty                    handlers.ready
 *   SendPolicyInstructions(PolicySetup)      handlers.policy_setup with PolicySetup.data
 *   SendObservations(stream Observation)     handlers.observation once per reassembled payload
 *   GetActions(Empty) -> Actions             handlers.get_actions: Actions.data, or no data ("Empty")
 *
 * Threads: `threads` workers, each with its own completion queue registered with the server. A worker asks
 * for one call (grpc_server_request_call, the call bound to its queue), then serves that call to the end
 * with blocking batches on its queue, callback included, and asks for the next. So up to `threads` calls run
 * at once (a GetActions blocked in its callback does not hold up observation streams); more wait in gRPC's
 * queue of pending calls. The handlers are called from several workers at once: they must be thread-safe.
 *
 * Status codes: a handler returns 0, or a gRPC status code (3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED,
 * 9 FAILED_PRECONDITION, 13 INTERNAL...) with a message in msg (ml bytes, NUL-terminated), which the client
 * gets as the call's status. The transport itself answers 3 for a message that does not decode or a stream
 * that breaks the chunk rules, 8 for a payload over max_payload or a reply over max_message, 16
 * UNAUTHENTICATED without the key, 12 UNIMPLEMENTED for another method, 4 DEADLINE_EXCEEDED for a stream
 * stalled idle_timeout_s.
 *
 * Chunks (LeRobot's transport/utils.py sends a payload as [END] when it fits in one 2 MiB chunk, else as
 * BEGIN, MIDDLE..., END; its receiver restarts on BEGIN, appends MIDDLE and END, delivers at END, and raises
 * on TRANSFER_UNKNOWN): every sequence that sender makes is accepted, and a stream may carry several
 * payloads one after the other. Refused with INVALID_ARGUMENT, nothing delivered from the open payload:
 * MIDDLE with no payload open (its start is missing: LeRobot would deliver a truncated payload), BEGIN
 * while one is open (LeRobot never sends it; its receiver would silently drop the first part), a
 * transfer_state that is not BEGIN / MIDDLE / END (TRANSFER_UNKNOWN included), a stream that ends inside a
 * payload, a stream with no payload at all. A stream cut by the client (cancel, disconnect, kill) or by
 * the idle timeout delivers nothing of its open payload and frees it. */
#ifndef MACT_GRPC_LEROBOT_H
#define MACT_GRPC_LEROBOT_H
#include <stddef.h>
#include <stdint.h>

typedef struct mact_lr_grpc mact_lr_grpc;

typedef struct {
    void *user;
    /* Each returns 0, or a gRPC status code with a message in msg. peer: gRPC's name of the client
     * ("ipv4:127.0.0.1:53412"), valid during the call. data: valid during the call. */
    int (*ready)(void *user, const char *peer, char *msg, size_t ml);
    int (*policy_setup)(void *user, const char *peer, const uint8_t *data, size_t n, char *msg, size_t ml);
    int (*observation)(void *user, const char *peer, const uint8_t *data, size_t n, char *msg, size_t ml);
    /* Sets *out to a malloc'd Actions.data of *n bytes (the transport frees it), or leaves *out NULL for a
     * reply with no data (LeRobot's client then polls again). May block, up to a bound it chooses (LeRobot's
     * server waits up to obs_queue_timeout, 2 s); stop() waits for it to return. On an error *out is freed
     * if set. */
    int (*get_actions)(void *user, const char *peer, uint8_t **out, size_t *n, char *msg, size_t ml);
} mact_lr_handlers;  /* a NULL handler: the call succeeds and does nothing (get_actions: no data) */

typedef struct {
    const char *host;       /* NULL: "127.0.0.1"; an IPv6 address with or without brackets */
    int port;               /* 0: any free port (mact_lr_grpc_port tells which) */
    size_t max_payload;     /* bytes of one reassembled observation; 0: 64 MiB */
    size_t max_message;     /* bytes of one gRPC message, received or sent; 0: 4 MiB (LeRobot's MAX_MESSAGE_SIZE;
                               its client sends 2 MiB chunks and receives at most 4 MiB) */
    const char *api_key;    /* NULL or "": none; else each call must carry metadata `authorization: Bearer KEY`
                               (or `authorization: Api-Key KEY`, as mact's other protocols) or `x-api-key: KEY` */
    int threads;            /* calls served at once; 0: 8 */
    int idle_timeout_s;     /* a stream waiting this long for its next message is cancelled; 0: 30 */
    int drain_timeout_s;    /* stop(): how long in-flight calls may take before they are cancelled; 0: 5 */
} mact_lr_grpc_options;

/* Binds host:port (insecure credentials, as LeRobot's grpc.insecure_channel) and starts the workers. 0, or
 * -1 with err set (a bad option, the port in use). */
int mact_lr_grpc_start(const mact_lr_grpc_options *o, const mact_lr_handlers *h, mact_lr_grpc **out,
                       char *err, size_t el);
int mact_lr_grpc_port(const mact_lr_grpc *g);  /* the bound port */
/* Graceful: no new calls; in-flight calls finish (cancelled after drain_timeout_s, running callbacks are
 * waited for), then the workers are joined and gRPC shut down. NULL is a no-op. */
void mact_lr_grpc_stop(mact_lr_grpc *g);

/* ---- the pure part: message decoding and chunk reassembly (src/server/grpc_lerobot_msg.c, protobuf-c
 * only, no gRPC), used by the transport and fuzzed by fuzz/fuzz_lr_proto.c ---- */

enum { MACT_LR_TRANSFER_UNKNOWN = 0, MACT_LR_TRANSFER_BEGIN = 1, MACT_LR_TRANSFER_MIDDLE = 2,
       MACT_LR_TRANSFER_END = 3 };  /* LeRobot's TransferState */
typedef enum { MACT_LR_EMPTY, MACT_LR_POLICY_SETUP, MACT_LR_ACTIONS, MACT_LR_OBSERVATION } mact_lr_msg_type;

/* One decoded message: data / n its bytes field (NULL, 0 for Empty), state its transfer_state (Observation). */
typedef struct {
    int state;
    const uint8_t *data;
    size_t n;
    void *pb;  /* the protobuf-c message that owns data */
} mact_lr_msg;
/* 0, or 3 (INVALID_ARGUMENT) with msg when the bytes are not a message of type t. Free with mact_lr_msg_free. */
int mact_lr_msg_unpack(mact_lr_msg_type t, const uint8_t *wire, size_t n, mact_lr_msg *m, char *msg, size_t ml);
void mact_lr_msg_free(mact_lr_msg *m);
/* Actions{data} encoded into *out (malloc'd, *on bytes; data NULL: no data). 0, or 8 when over max_message. */
int mact_lr_actions_pack(const uint8_t *data, size_t n, size_t max_message, uint8_t **out, size_t *on,
                         char *msg, size_t ml);

/* The reassembly state of one SendObservations stream; zero-initialise. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
    int open;        /* BEGIN seen, END not yet */
    int delivered;   /* payloads completed on this stream */
} mact_lr_reasm;
/* Feeds one chunk. 0 with *payload NULL: more to come; 0 with *payload set: a payload of *plen bytes is
 * complete (valid until the next feed or reset); 3 or 8 with msg: the stream is refused (the open payload
 * is dropped; reset before reuse). */
int mact_lr_reasm_feed(mact_lr_reasm *r, int state, const uint8_t *data, size_t n, size_t max_payload,
                       const uint8_t **payload, size_t *plen, char *msg, size_t ml);
/* At the end of the stream: 0 when it ended between payloads after at least one, else 3 with msg. */
int mact_lr_reasm_finish(const mact_lr_reasm *r, char *msg, size_t ml);
void mact_lr_reasm_reset(mact_lr_reasm *r);  /* frees the buffer, back to the zero state */

#endif
