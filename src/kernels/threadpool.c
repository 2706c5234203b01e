/* The kernels' thread pool (threadpool.h). One job at a time: a job is (fn, arg, n, threads) in one of two
 * slots (alternating, so a slow worker reading the previous job's slot never sees the next job's fields
 * half-written in the slot it is about to claim from) and a 64-bit claim word = (job generation << 32) |
 * next chunk index. Claiming is a compare-and-swap on that word, so a worker holding a stale generation
 * can never take a chunk of a newer job. Workers spin briefly after a job, then sleep on a futex. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/threadpool.h"

#define MAX_WORKERS 255
#define WORKER_SPINS 20000  /* pause loops (~50-100 us) before a worker sleeps */

typedef struct {
    _Atomic(mact_task_fn) fn;
    _Atomic(void *) arg;
    _Atomic int64_t n;
    _Atomic int threads;
    _Atomic int64_t done;
} slot_t;

static slot_t g_slot[2];
static _Atomic uint64_t g_claim;      /* generation << 32 | next index; generation 0 = no job */
static _Atomic uint32_t g_seq;        /* futex word, bumped on every publish */
static _Atomic int g_sleepers;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  /* held by the thread whose job is in the pool */
static int g_nworkers;                /* under g_mu */
static uint32_t g_gen;                /* under g_mu */
static __thread int t_inside;         /* this thread is running a chunk or owns the pool */

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* claim and run chunks of the current job until none is left (or this thread is not part of it) */
static void run_available(int tid)
{
    for (;;) {
        uint64_t c = atomic_load_explicit(&g_claim, memory_order_acquire);
        uint32_t gen = (uint32_t)(c >> 32), idx = (uint32_t)c;
        if (!gen) return;
        slot_t *s = &g_slot[gen & 1];
        int64_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
        int th = atomic_load_explicit(&s->threads, memory_order_relaxed);
        mact_task_fn fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&s->arg, memory_order_relaxed);
        if ((int64_t)idx >= n || tid >= th) return;
        /* the fields above belong to generation gen if the claim word still holds it */
        if (!atomic_compare_exchange_weak_explicit(&g_claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        fn(arg, (int64_t)idx, tid);
        atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
    }
}

static void *worker_main(void *p)
{
    const int tid = (int)(intptr_t)p;
    t_inside = 1;  /* a chunk that calls back into the pool runs its inner loop serially */
    uint32_t seen = atomic_load_explicit(&g_seq, memory_order_acquire);
    for (;;) {
        run_available(tid);
        for (int spins = 0;; spins++) {
            uint32_t s = atomic_load_explicit(&g_seq, memory_order_acquire);
            if (s != seen) { seen = s; break; }
            if (spins < WORKER_SPINS) { cpu_relax(); continue; }
            atomic_fetch_add_explicit(&g_sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&g_seq, memory_order_seq_cst) == seen) futex_wait(&g_seq, seen);
            atomic_fetch_sub_explicit(&g_sleepers, 1, memory_order_seq_cst);
            spins = 0;
        }
    }
    return NULL;
}

int mact_pool_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static void run_serial(int64_t n, mact_task_fn fn, void *arg)
{
    for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
}

void mact_parallel_for_n(int64_t n, int threads, mact_task_fn fn, void *arg)
{
    if (n <= 0) return;
    if (threads <= 0) threads = mact_pool_threads();
    if (threads > MAX_WORKERS + 1) threads = MAX_WORKERS + 1;
    if (threads > n) threads = (int)n;
    if (threads <= 1 || t_inside || n >= ((int64_t)1 << 31) || pthread_mutex_trylock(&g_mu)) {
        run_serial(n, fn, arg);
        return;
    }
    while (g_nworkers < threads - 1) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, worker_main, (void *)(intptr_t)(g_nworkers + 1));
        pthread_attr_destroy(&at);
        if (rc) break;
        g_nworkers++;
    }
    if (threads > g_nworkers + 1) threads = g_nworkers + 1;
    if (threads <= 1) {
        pthread_mutex_unlock(&g_mu);
        run_serial(n, fn, arg);
        return;
    }
    if (++g_gen == 0) g_gen = 1;
    slot_t *s = &g_slot[g_gen & 1];
    atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&s->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&s->n, n, memory_order_relaxed);
    atomic_store_explicit(&s->threads, threads, memory_order_relaxed);
    atomic_store_explicit(&s->done, 0, memory_order_relaxed);
    atomic_store_explicit(&g_claim, (uint64_t)g_gen << 32, memory_order_release);
    atomic_fetch_add_explicit(&g_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&g_sleepers, memory_order_seq_cst) > 0) futex_wake_all(&g_seq);
    t_inside = 1;
    run_available(0);
    /* every chunk is claimed; wait for the ones other threads still run */
    for (int spins = 0; atomic_load_explicit(&s->done, memory_order_acquire) < n; spins++) {
        if (spins < 4000) cpu_relax();
        else sched_yield();
    }
    t_inside = 0;
    pthread_mutex_unlock(&g_mu);
}

void mact_parallel_for(int64_t n, mact_task_fn fn, void *arg) { mact_parallel_for_n(n, 0, fn, arg); }
