/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* Sessions are independent: two sessions on one model in two threads at once, each on its own
 * multi-threaded pool, give bitwise the results of the same calls made serially; so do two models of
 * different precisions (fp32 and bf16) run at once, and two sessions sharing one attached pool. A session
 * made after a single-threaded one uses every CPU by default (the pool size it reports), and a planned
 * session never grows its kernels' scratch during inference. Run under ThreadSanitizer by `make tsan`.
 * Inputs are fresh random pixels, prompt text ids and noise each run (MACT_TEST_SEED=S replays one). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mact.h"
#include "mact_stages.h"
#include "model/session.h"
#include "th.h"

#define N_INPUTS 3
#define ROUNDS 2

typedef struct {
    float *pix;
    int64_t *ids;
    int n;
    float *noise;
} input;

static input g_in[N_INPUTS];
static int g_img, g_h, g_a;
static size_t g_traj;

static uint64_t rs;
static double urand(void)
{
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (double)((rs * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static void make_inputs(const mact_model *m)
{
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    const mact_config *c = &m->cfg;
    g_img = 2;
    g_h = mi.max_action_horizon;
    g_a = mi.max_action_dim;
    g_traj = (size_t)g_h * (size_t)g_a;
    for (int k = 0; k < N_INPUTS; k++) {
        input *in = &g_in[k];
        const size_t np = (size_t)g_img * mi.n_patches * mi.patch_dim;
        in->pix = malloc(np * sizeof(float));
        for (size_t i = 0; i < np; i++) in->pix[i] = (float)(2 * urand() - 1);
        in->n = 1 + g_img * (mi.tokens_per_image + 2) + 5 + k;
        in->ids = malloc((size_t)in->n * sizeof(int64_t));
        int p = 0;
        in->ids[p++] = c->eos_id;
        for (int im = 0; im < g_img; im++) {
            in->ids[p++] = c->image_start_id;
            for (int t = 0; t < mi.tokens_per_image; t++) in->ids[p++] = c->image_patch_id;
            in->ids[p++] = c->image_end_id;
        }
        while (p < in->n) in->ids[p++] = 1 + (int64_t)(urand() * (double)(c->vocab_size - 2));
        in->noise = malloc(g_traj * sizeof(float));
        for (size_t i = 0; i < g_traj; i++) {
            double u1 = urand() + 1e-12, u2 = urand();
            in->noise[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        }
    }
}

/* every input through s, results into out[k] */
static int run_all(mact_session *s, float **out)
{
    for (int k = 0; k < N_INPUTS; k++) {
        memcpy(out[k], g_in[k].noise, g_traj * sizeof(float));
        int rc = mact_generate_from_ids(s, g_in[k].pix, g_img, g_in[k].ids, g_in[k].n, out[k], g_h, 7, 2);
        if (rc) return rc;
    }
    return 0;
}

typedef struct {
    const mact_model *m;
    mact_threadpool *pool;  /* NULL: the session's own */
    float **ref;            /* the serial results to match */
    int ok, threads;
    uint64_t grows;
    char why[256];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char err[256];
    mact_session *s;
    mact_session_options so = {.max_images = 2, .max_tokens = 64, .threadpool = w->pool};
    w->ok = 0;
    if (mact_session_new(w->m, &so, &s, err, sizeof err)) {
        snprintf(w->why, sizeof w->why, "session: %.200s", err);
        return NULL;
    }
    w->threads = mact_session_threads(s);
    float *out[N_INPUTS];
    for (int k = 0; k < N_INPUTS; k++) out[k] = malloc(g_traj * sizeof(float));
    w->ok = 1;
    for (int r = 0; r < ROUNDS && w->ok; r++) {
        if (run_all(s, out)) {
            snprintf(w->why, sizeof w->why, "round %d: %s", r, mact_session_error(s));
            w->ok = 0;
        }
        for (int k = 0; k < N_INPUTS && w->ok; k++)
            if (memcmp(out[k], w->ref[k], g_traj * sizeof(float))) {
                snprintf(w->why, sizeof w->why, "round %d input %d differs from the serial run", r, k);
                w->ok = 0;
            }
    }
    w->grows = atomic_load(&s->kc.grows);
    for (int k = 0; k < N_INPUTS; k++) free(out[k]);
    mact_session_free(s);
    return NULL;
}

static int serial(const mact_model *m, float **out, int *threads, char *why, size_t wl)
{
    char err[256];
    mact_session *s;
    mact_session_options so = {.max_images = 2, .max_tokens = 64};
    if (mact_session_new(m, &so, &s, err, sizeof err)) {
        snprintf(why, wl, "%s", err);
        return -1;
    }
    *threads = mact_session_threads(s);
    int rc = run_all(s, out);
    if (rc) snprintf(why, wl, "%s", mact_session_error(s));
    mact_session_free(s);
    return rc;
}

static void pair(const char *name, worker *a, worker *b)
{
    pthread_t ta, tb;
    pthread_create(&ta, NULL, work, a);
    pthread_create(&tb, NULL, work, b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    TH_CHECK(name, a->ok && b->ok && a->threads >= 1 && b->threads >= 1, "A: %s (%d threads) B: %s (%d threads)",
             a->ok ? "ok" : a->why, a->threads, b->ok ? "ok" : b->why, b->threads);
}

static int cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) ? 1 : CPU_COUNT(&set);
}

int main(void)
{
    const char *dir = getenv("MACT_TEST_MODEL");
    if (!dir) { TH_CHECK("concurrency_model", 0, "MACT_TEST_MODEL is not set (tests/run.sh makes one)"); TH_EXIT(); }
    const char *se = getenv("MACT_TEST_SEED");
    uint64_t seed = se ? strtoull(se, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    printf("INFO seed %llu (replay with MACT_TEST_SEED=%llu)\n", (unsigned long long)seed, (unsigned long long)seed);
    rs = seed * 0x9E3779B97F4A7C15ULL + 1;
    char err[512];
    mact_model *m16, *m32;
    mact_load_options l16 = {.precision = MACT_PRECISION_BF16}, l32 = {.precision = MACT_PRECISION_FP32};
    if (mact_model_load(dir, &l16, &m16, err, sizeof err) || mact_model_load(dir, &l32, &m32, err, sizeof err)) {
        TH_CHECK("concurrency_load", 0, "%s", err);
        TH_EXIT();
    }
    make_inputs(m16);
    float *r16[N_INPUTS], *r32[N_INPUTS];
    for (int k = 0; k < N_INPUTS; k++) r16[k] = malloc(g_traj * sizeof(float)), r32[k] = malloc(g_traj * sizeof(float));
    int t16, t32;
    char why[256] = "";
    int rc = serial(m16, r16, &t16, why, sizeof why) || serial(m32, r32, &t32, why, sizeof why);
    TH_CHECK("concurrency_serial_reference", !rc, "%s", why);
    if (rc) TH_EXIT();
    /* bf16 and fp32 really differ here, so a session running in the wrong precision cannot pass */
    if (m16->kprec != m32->kprec)
        TH_CHECK("concurrency_precisions_differ", memcmp(r16[0], r32[0], g_traj * sizeof(float)) != 0,
                 "the bf16 and fp32 models gave identical actions");
    else
        printf("INFO the %s kernels compute bf16 as fp32: the two models' actions are the same\n", mact_ops_name(m16->ops));
    printf("INFO %d CPUs; default sessions have %d (bf16) and %d (fp32) threads\n", cpus(), t16, t32);

    worker a = {.m = m16, .ref = r16}, b = {.m = m16, .ref = r16};
    pair("two sessions on one model in two threads, each multi-threaded: bitwise the serial results", &a, &b);
    TH_CHECK("concurrent sessions own multi-threaded pools", cpus() < 2 || (a.threads >= 2 && b.threads >= 2),
             "%d and %d threads on %d CPUs", a.threads, b.threads, cpus());
    TH_CHECK("no scratch grows during inference (planned at session creation)", a.grows == 0 && b.grows == 0,
             "grew %llu and %llu times", (unsigned long long)a.grows, (unsigned long long)b.grows);
    worker c = {.m = m32, .ref = r32}, d = {.m = m16, .ref = r16};
    pair("fp32 and bf16 models in two threads at once: each bitwise its serial run", &c, &d);

    mact_threadpool *pool;
    if (mact_threadpool_new(0, &pool, err, sizeof err)) {
        TH_CHECK("shared pool", 0, "%s", err);
    } else {
        worker e = {.m = m16, .pool = pool, .ref = r16}, f = {.m = m32, .pool = pool, .ref = r32};
        pair("two sessions sharing one attached pool, concurrently: bitwise the serial results", &e, &f);
        TH_CHECK("a session on an attached pool reports its size", e.threads == mact_threadpool_size(pool),
                 "%d vs %d", e.threads, mact_threadpool_size(pool));
        mact_threadpool_free(pool);
    }

    /* a one-thread session leaves nothing behind: the next default session has every CPU */
    mact_session *s1, *s2;
    mact_session_options one = {.n_threads = 1}, dflt = {0};
    rc = mact_session_new(m16, &one, &s1, err, sizeof err);
    int th1 = rc ? -1 : mact_session_threads(s1);
    if (!rc) mact_session_free(s1);
    rc |= mact_session_new(m16, &dflt, &s2, err, sizeof err);
    int th2 = rc ? -1 : mact_session_threads(s2);
    if (!rc) mact_session_free(s2);
    TH_CHECK("a default session after a one-thread session uses every CPU", !rc && th1 == 1 && th2 == cpus(),
             "rc %d: %d then %d threads, %d CPUs", rc, th1, th2, cpus());

    for (int k = 0; k < N_INPUTS; k++) {
        free(r16[k]), free(r32[k]);
        free(g_in[k].pix), free(g_in[k].ids), free(g_in[k].noise);
    }
    mact_model_free(m16);
    mact_model_free(m32);
    TH_EXIT();
}
