/* The bench's instruction peaks: a backend's peak loop (body) on `threads` plain threads (no pool: a peak must
 * not wait on a job queue), best of 3 runs, in G ops/s for ops_per_iter per iteration; 0 when the threads could
 * not all be started. Shared by the x86 and ARM backends. */
#include <pthread.h>
#include "base/clock.h"
#include "kernels/ops.h"

typedef struct {
    double (*body)(long);
    long iters;
    double sink;
} peak_arg;

static void *peak_thread(void *a)
{
    peak_arg *p = a;
    p->sink = p->body(p->iters);
    return NULL;
}

double mact_peak_best_of_3(double (*body)(long iters), long iters, double ops_per_iter, int threads)
{
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double sink = 0;
        pthread_t th[256];
        peak_arg pa[256];
        int started = 0;
        const double t0 = mact_clock_s();
        for (int t = 1; t < threads; t++) {
            pa[t] = (peak_arg){body, iters, 0};
            if (pthread_create(&th[t], NULL, peak_thread, &pa[t])) break;
            started = t;
        }
        sink += body(iters);
        for (int t = 1; t <= started; t++) {
            pthread_join(th[t], NULL);
            sink += pa[t].sink;
        }
        const double s = mact_clock_s() - t0;
        if (started + 1 < threads) return 0;
        double g = (double)threads * (double)iters * ops_per_iter / s / 1e9;
        if (g > best && sink == sink) best = g;
    }
    return best;
}
