/* The kernels' thread pool: an object (struct mact_threadpool, public as an opaque handle in mact.h) with
 * its workers created at mact_threadpool_new and joined at mact_threadpool_free; a session owns one or
 * shares one the caller attached. The caller of a job runs chunks too.
 *
 * Why not an OpenMP parallel region per kernel: a region ends in a barrier that every team thread must
 * reach, so when the machine is oversubscribed (other processes on the cores, the normal case on a robot
 * computer) and one team thread is descheduled, every region waits a scheduler quantum for it (docs/bugs.md,
 * "OpenMP barriers on a shared 2-core VM"). Here chunks are claimed from a shared counter and the caller
 * returns as soon as every chunk has run; a worker that was not scheduled in time simply finds no work left.
 * Chunks are whole units of work (a 64-column panel, a head, a row block), each computed the same way
 * whichever thread runs it, so results never depend on the thread count or the schedule.
 *
 * One job at a time per pool: a second thread's job waits for the first (sessions sharing a pool take
 * turns, each job still on every thread). A job started from inside one of the pool's own chunks runs
 * serially in that thread (no deadlock, same results). */
#ifndef MACT_THREADPOOL_H
#define MACT_THREADPOOL_H
#include <stdint.h>

typedef struct mact_threadpool mact_pool;

/* fn(arg, i, tid) for every i in [0, n); tid in [0, threads) identifies the running thread (0 = caller)
 * for per-thread scratch. Returns when all n calls have returned. threads <= 0 or > the pool's size: the
 * pool's size; pool NULL: serially in the caller. */
typedef void (*mact_task_fn)(void *arg, int64_t i, int tid);
void mact_pool_run(mact_pool *pool, int64_t n, int threads, mact_task_fn fn, void *arg);
/* the pool's thread count (caller included); 1 for NULL */
int mact_pool_size(const mact_pool *pool);
/* the CPUs this process may run on (its affinity mask), at least 1 */
int mact_cpu_count(void);

#endif
