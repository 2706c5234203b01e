/* The bench's instruction peak on ARM64: fp32 FMLA (4 lanes) over 16 independent chains per thread, on
 * `threads` plain threads (no pool: a peak must not wait on a job queue), best of 3. A Cortex-A78 core issues
 * 2 FMLA per cycle (4-cycle latency: 8 chains would do; 16 leave room for wider cores). Under qemu the number
 * measures the emulator, not a CPU. */
#include <arm_neon.h>
#include <pthread.h>
#include <time.h>
#include "kernels/arm/arm.h"

#define CHAINS 16

typedef struct { double (*body)(long); long iters; double sink; } peak_arg;

static double fmla_body(long iters)
{
    float32x4_t a[CHAINS];
    const float32x4_t x = vdupq_n_f32(0.999f), y = vdupq_n_f32(1e-4f);
    for (int c = 0; c < CHAINS; c++) a[c] = vdupq_n_f32((float)c);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int c = 0; c < CHAINS; c++) a[c] = vfmaq_f32(y, a[c], x);
        __asm__ volatile("" : "+w"(a[0]), "+w"(a[1]), "+w"(a[2]), "+w"(a[3]), "+w"(a[4]), "+w"(a[5]), "+w"(a[6]),
                         "+w"(a[7]));
    }
    float32x4_t s = a[0];
    for (int c = 1; c < CHAINS; c++) s = vaddq_f32(s, a[c]);
    return vaddvq_f32(s);
}

static void *peak_thread(void *p)
{
    peak_arg *a = p;
    a->sink = a->body(a->iters);
    return NULL;
}

double mact_arm_peak_run(double (*body)(long), long iters, double ops_per_iter, int threads)
{
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0, t1;
        pthread_t th[256];
        peak_arg pa[256];
        int started = 0;
        double sink = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
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
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (started + 1 < threads) return 0;
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        const double g = (double)threads * (double)iters * ops_per_iter / s / 1e9;
        if (g > best && sink == sink) best = g;
    }
    return best;
}

double mact_arm_peak_gflops(int use_bf16, int threads)
{
    (void)use_bf16; /* the ARM levels compute their fp32 / bf16-mode GEMMs as fp32 FMLA today */
    /* ~0.1 s per thread at 2 FMLA per cycle and 2 GHz */
    return mact_arm_peak_run(fmla_body, 5000000, CHAINS * 4 * 2, threads);
}
