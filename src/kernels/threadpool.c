/* The thread pool (threadpool.h). A job is (fn, arg, n, threads) in one of two slots (alternating, so a
 * slow worker reading the previous job's slot never sees the next job's fields half-written in the slot it
 * is about to claim from) and a 64-bit claim word = (job generation << 32) | next chunk index. Claiming is a
 * compare-and-swap on that word, so a worker holding a stale generation can never take a chunk of a newer
 * job. Workers spin briefly after a job, then sleep on a futex. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mact.h"
#include "kernels/threadpool.h"

#define MAX_THREADS 256
#define WORKER_SPINS 20000  /* pause loops before a worker sleeps */

typedef struct {
    _Atomic(mact_task_fn) fn;
    _Atomic(void *) arg;
    _Atomic int64_t n;
    _Atomic int threads;
    _Atomic int64_t done;
} slot_t;

struct mact_threadpool {
    slot_t slot[2];
    _Atomic uint64_t claim;     /* generation << 32 | next index; generation 0 = no job */
    _Atomic uint32_t seq;       /* futex word, bumped on every publish and at shutdown */
    _Atomic int sleepers;
    _Atomic int stop;
    pthread_mutex_t mu;         /* held by the thread whose job is in the pool */
    _Atomic(pthread_t) owner;   /* that thread (valid while busy) */
    _Atomic int busy;
    uint32_t gen;               /* under mu */
    int size;                   /* threads, the caller's included */
    int nworkers;
    pthread_t workers[MAX_THREADS];
};

typedef struct {
    mact_pool *p;
    int tid;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* claim and run chunks of the current job until none is left (or this thread is not part of it) */
static void run_available(mact_pool *p, int tid)
{
    for (;;) {
        uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
        uint32_t gen = (uint32_t)(c >> 32), idx = (uint32_t)c;
        if (!gen) return;
        slot_t *s = &p->slot[gen & 1];
        int64_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
        int th = atomic_load_explicit(&s->threads, memory_order_relaxed);
        mact_task_fn fn = atomic_load_explicit(&s->fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&s->arg, memory_order_relaxed);
        if ((int64_t)idx >= n || tid >= th) return;
        /* the fields above belong to generation gen if the claim word still holds it */
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        fn(arg, (int64_t)idx, tid);
        atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
    }
}

static void *worker_main(void *a)
{
    worker_arg wa = *(worker_arg *)a;
    free(a);
    mact_pool *p = wa.p;
    uint32_t seen = atomic_load_explicit(&p->seq, memory_order_acquire);
    for (;;) {
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        run_available(p, wa.tid);
        for (int spins = 0;; spins++) {
            uint32_t s = atomic_load_explicit(&p->seq, memory_order_acquire);
            if (s != seen) { seen = s; break; }
            if (spins < WORKER_SPINS) { cpu_relax(); continue; }
            atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&p->seq, memory_order_seq_cst) == seen) futex_wait(&p->seq, seen);
            atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
            spins = 0;
        }
    }
}

int mact_cpu_count(void)
{
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

MACT_API mact_status mact_threadpool_new(int n_threads, mact_threadpool **out, char *err, size_t errlen)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = mact_cpu_count();
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    mact_pool *p = calloc(1, sizeof *p);
    if (!p) {
        if (err && errlen) snprintf(err, errlen, "out of memory for a thread pool");
        return MACT_ERR_NOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->size = 1;
    for (int t = 1; t < n_threads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->p = p;
        wa->tid = t;
        int rc = pthread_create(&p->workers[p->nworkers], NULL, worker_main, wa);
        if (rc) {
            free(wa);
            if (err && errlen) snprintf(err, errlen, "cannot start worker thread %d of %d: %s", t, n_threads, strerror(rc));
            mact_threadpool_free(p);
            return MACT_ERR_NOMEM;
        }
        p->nworkers++;
        p->size++;
    }
    if (p->size < n_threads) {
        if (err && errlen) snprintf(err, errlen, "out of memory starting %d worker threads", n_threads - 1);
        mact_threadpool_free(p);
        return MACT_ERR_NOMEM;
    }
    *out = p;
    return MACT_OK;
}

MACT_API void mact_threadpool_free(mact_threadpool *p)
{
    if (!p) return;
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&p->seq, 1, memory_order_seq_cst);
    futex_wake_all(&p->seq);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

MACT_API int mact_threadpool_size(const mact_threadpool *p) { return p ? p->size : 1; }

int mact_pool_size(const mact_pool *p) { return p ? p->size : 1; }

static void run_serial(int64_t n, mact_task_fn fn, void *arg)
{
    for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
}

/* a thread of this pool: its workers, or the thread whose job runs in it */
static int inside(mact_pool *p)
{
    const pthread_t self = pthread_self();
    if (atomic_load_explicit(&p->busy, memory_order_acquire) && pthread_equal(atomic_load(&p->owner), self)) return 1;
    for (int i = 0; i < p->nworkers; i++)
        if (pthread_equal(p->workers[i], self)) return 1;
    return 0;
}

void mact_pool_run(mact_pool *p, int64_t n, int threads, mact_task_fn fn, void *arg)
{
    if (n <= 0) return;
    if (!p || p->size <= 1 || n >= ((int64_t)1 << 31) || inside(p)) {
        run_serial(n, fn, arg);
        return;
    }
    if (threads <= 0 || threads > p->size) threads = p->size;
    if (threads > n) threads = (int)n;
    if (threads <= 1) {
        run_serial(n, fn, arg);
        return;
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->owner, pthread_self());
    atomic_store_explicit(&p->busy, 1, memory_order_release);
    if (++p->gen == 0) p->gen = 1;
    slot_t *s = &p->slot[p->gen & 1];
    atomic_store_explicit(&s->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&s->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&s->n, n, memory_order_relaxed);
    atomic_store_explicit(&s->threads, threads, memory_order_relaxed);
    atomic_store_explicit(&s->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint64_t)p->gen << 32, memory_order_release);
    atomic_fetch_add_explicit(&p->seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) futex_wake_all(&p->seq);
    run_available(p, 0);
    /* every chunk is claimed; wait for the ones other threads still run */
    for (int spins = 0; atomic_load_explicit(&s->done, memory_order_acquire) < n; spins++) {
        if (spins < 4000) cpu_relax();
        else sched_yield();
    }
    atomic_store_explicit(&p->busy, 0, memory_order_release);
    pthread_mutex_unlock(&p->mu);
}
