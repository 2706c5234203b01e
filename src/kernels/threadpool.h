/* A persistent thread pool for the kernels: workers are created once (lazily, as many as the largest thread
 * count asked for) and park between jobs; the caller runs chunks too.
 *
 * Why not an OpenMP parallel region per kernel: a region ends in a barrier that every team thread must
 * reach, so when the machine is oversubscribed (other processes on the cores, the normal case on a robot
 * computer) and one team thread is descheduled, every region waits a scheduler quantum for it: on the
 * 2-core development VM under load, the action expert's 250 small GEMMs per flow step went from 70 ms to
 * 2.7-5 s. Here chunks are claimed from a shared counter and the caller returns as soon as every chunk has
 * run; a worker that was not scheduled in time simply finds no work left. Chunks are whole units of work
 * (a 64-column panel, a head, a row block), each computed the same way whichever thread runs it, so
 * results never depend on the thread count or the schedule.
 *
 * The thread count of a call is omp_get_max_threads() (what mact_session_enter sets from the session's
 * n_threads), or 1 without OpenMP. A call made while another thread's job occupies the pool, or from
 * inside a chunk, runs serially in the caller. */
#ifndef MACT_THREADPOOL_H
#define MACT_THREADPOOL_H
#include <stdint.h>

/* fn(arg, i, tid) for every i in [0, n); tid in [0, threads) identifies the running thread (0 = caller)
 * for per-thread scratch. Returns when all n calls have returned. */
typedef void (*mact_task_fn)(void *arg, int64_t i, int tid);
void mact_parallel_for(int64_t n, mact_task_fn fn, void *arg);
/* Same with an explicit thread count (<= 0: the default above). */
void mact_parallel_for_n(int64_t n, int threads, mact_task_fn fn, void *arg);
/* The default thread count of the calling context. */
int mact_pool_threads(void);

#endif
