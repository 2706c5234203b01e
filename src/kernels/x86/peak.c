/* The bench's instruction peak on the AVX-512 levels: 24 independent accumulator chains per thread of
 * vfmadd (fp32) or vdpbf16ps (bf16), timed by mact_peak_best_of_3 (kernels/peak.c). */
#include <immintrin.h>
#include "kernels/x86/x86.h"

TB static double peak_bf16(long iters)
{
    __m512 a[24];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
    for (long t = 0; t < iters; t++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_dpbf16_ps(a[i], x, y);
        __asm__ volatile("" ::"v"(a[0]), "v"(a[7]), "v"(a[15]), "v"(a[23]));
    }
    __m512 s = a[0];
#pragma GCC unroll 24
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);  /* constant indices: a[] stays in registers */
    return _mm512_reduce_add_ps(s);
}

TF static double peak_f32(long iters)
{
    __m512 a[24];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) a[i] = _mm512_set1_ps((float)i * 1e-3f);
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
    for (long t = 0; t < iters; t++) {
#pragma GCC unroll 24
        for (int i = 0; i < 24; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
        __asm__ volatile("" ::"v"(a[0]), "v"(a[7]), "v"(a[15]), "v"(a[23]));
    }
    __m512 s = a[0];
#pragma GCC unroll 24
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, a[i]);
    return _mm512_reduce_add_ps(s);
}


double mact_x86_peak_gflops(int use_bf16, int threads)
{
    if (!mact_x86_has_avx512() || (use_bf16 && !mact_x86_has_avx512bf16())) return 0;
    /* ~0.15 s per thread at peak; 24 chains of 16 lanes x (2 bf16 multiply-adds or 1 fp32 FMA) x 2 ops */
    return use_bf16 ? mact_peak_best_of_3(peak_bf16, 20000000, 24.0 * 64.0, threads)
                    : mact_peak_best_of_3(peak_f32, 40000000, 24.0 * 32.0, threads);
}
