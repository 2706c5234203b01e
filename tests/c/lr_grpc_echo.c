/* The LeRobot gRPC transport (src/server/grpc_lerobot.h) alone, with handlers that record what they get,
 * for tests/test_lerobot_grpc.sh:
 *
 *   lr_grpc_echo [--port N] [--api-key KEY] [--max-payload BYTES] [--threads N] [--wait-ms MS]
 *                [--idle-timeout S] [--drain-timeout S]
 *
 * Prints "port N" once listening, then serves until its standard input closes (or SIGTERM / SIGINT) and
 * stops the transport; exits 0 after a clean stop.
 *
 *   Ready                    counts; "ready=N" in replies
 *   SendPolicyInstructions   data "reject" answers FAILED_PRECONDITION (a handler's error); else kept
 *   SendObservations         each payload: its length and CRC-32 recorded; data "reject" answers
 *                            INVALID_ARGUMENT
 *   GetActions               waits up to --wait-ms for a payload not yet reported, then answers
 *                            "obs=COUNT len=LEN crc=HEX setup=LEN ready=N" for the last one, or no data
 *                            (LeRobot's Empty) when none came */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "server/grpc_lerobot.h"

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    long obs, reported, ready;
    size_t last_len, setup_len;
    uint32_t last_crc;
    int wait_ms;
} rec;

/* zlib's CRC-32 (Python's zlib.crc32 on the other side), over pieces of at most 1 GiB: its length is a uInt */
static uint32_t crc_of(const uint8_t *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t o = 0; o < n; o += 1u << 30) c = crc32(c, p + o, (uInt)(n - o < (1u << 30) ? n - o : (1u << 30)));
    return (uint32_t)c;
}

static int on_ready(void *u, const char *peer, char *msg, size_t ml)
{
    rec *r = u;
    pthread_mutex_lock(&r->m);
    r->ready++;
    pthread_mutex_unlock(&r->m);
    return 0;
}

static int on_setup(void *u, const char *peer, const uint8_t *d, size_t n, char *msg, size_t ml)
{
    rec *r = u;
    if (n == 6 && !memcmp(d, "reject", 6)) {
        snprintf(msg, ml, "echo: policy setup rejected");
        return 9;
    }
    pthread_mutex_lock(&r->m);
    r->setup_len = n;
    pthread_mutex_unlock(&r->m);
    return 0;
}

static int on_obs(void *u, const char *peer, const uint8_t *d, size_t n, char *msg, size_t ml)
{
    rec *r = u;
    if (n == 6 && !memcmp(d, "reject", 6)) {
        snprintf(msg, ml, "echo: observation rejected");
        return 3;
    }
    uint32_t h = crc_of(d, n);
    pthread_mutex_lock(&r->m);
    r->obs++;
    r->last_len = n;
    r->last_crc = h;
    pthread_cond_broadcast(&r->c);
    pthread_mutex_unlock(&r->m);
    return 0;
}

static int on_actions(void *u, const char *peer, uint8_t **out, size_t *n, char *msg, size_t ml)
{
    rec *r = u;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += r->wait_ms / 1000;
    dl.tv_nsec += (long)(r->wait_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&r->m);
    while (r->obs == r->reported)
        if (pthread_cond_timedwait(&r->c, &r->m, &dl) == ETIMEDOUT) break;
    if (r->obs != r->reported) {
        char b[200];
        int k = snprintf(b, sizeof b, "obs=%ld len=%zu crc=%08" PRIx32 " setup=%zu ready=%ld", r->obs, r->last_len,
                         r->last_crc, r->setup_len, r->ready);
        r->reported = r->obs;
        *out = malloc((size_t)k);
        if (*out) { memcpy(*out, b, (size_t)k); *n = (size_t)k; }
    }
    pthread_mutex_unlock(&r->m);
    return 0;
}

int main(int argc, char **argv)
{
    mact_lr_grpc_options o = { 0 };
    rec r = { .wait_ms = 300 };
    pthread_mutex_init(&r.m, NULL);
    pthread_cond_init(&r.c, NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "lr_grpc_echo: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--port")) o.port = atoi(v);
        else if (!strcmp(a, "--api-key")) o.api_key = v;
        else if (!strcmp(a, "--max-payload")) o.max_payload = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--threads")) o.threads = atoi(v);
        else if (!strcmp(a, "--wait-ms")) r.wait_ms = atoi(v);
        else if (!strcmp(a, "--idle-timeout")) o.idle_timeout_s = atoi(v);
        else if (!strcmp(a, "--drain-timeout")) o.drain_timeout_s = atoi(v);
        else { fprintf(stderr, "lr_grpc_echo: unknown option %s\n", a); return 2; }
        i++;
    }
    mact_lr_handlers h = { .user = &r, .ready = on_ready, .policy_setup = on_setup, .observation = on_obs,
                           .get_actions = on_actions };
    /* SIGTERM / SIGINT are waited for by sigwait below, so no thread takes them first */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    mact_lr_grpc *g;
    char err[300];
    if (mact_lr_grpc_start(&o, &h, &g, err, sizeof err)) {
        fprintf(stderr, "lr_grpc_echo: %s\n", err);
        return 1;
    }
    printf("port %d\n", mact_lr_grpc_port(g));
    fflush(stdout);
    /* the test closes stdin to stop; a read error counts as closed */
    char b[64];
    for (;;) {
        struct pollfd pf = { .fd = 0, .events = POLLIN };
        int k = poll(&pf, 1, 100);
        siginfo_t si;
        struct timespec zero = { 0, 0 };
        if (sigtimedwait(&set, &si, &zero) > 0) break;
        if (k > 0 && read(0, b, sizeof b) <= 0) break;
    }
    mact_lr_grpc_stop(g);
    fprintf(stderr, "lr_grpc_echo: stopped (obs=%ld)\n", r.obs);
    pthread_mutex_destroy(&r.m);
    pthread_cond_destroy(&r.c);
    return 0;
}
