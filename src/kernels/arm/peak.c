/* The bench's instruction peak on ARM64: fp32 FMLA (4 lanes) over 16 independent chains per thread, on
 * `threads` plain threads (no pool: a peak must not wait on a job queue), best of 3. A Cortex-A78 core issues
 * 2 FMLA per cycle (4-cycle latency: 8 chains would do; 16 leave room for wider cores). Under qemu the number
 * measures the emulator, not a CPU. */
#include <arm_neon.h>
#include "kernels/arm/arm.h"

#define CHAINS 16


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

double mact_arm_peak_gflops(int use_bf16, int threads)
{
    (void)use_bf16; /* the ARM levels compute their fp32 / bf16-mode GEMMs as fp32 FMLA today */
    /* ~0.1 s per thread at 2 FMLA per cycle and 2 GHz */
    return mact_peak_best_of_3(fmla_body, 5000000, CHAINS * 4 * 2, threads);
}
