/* AVX-512 vector math shared by the kernel files (kernels/x86/: vec.c, gemm_avx512.c, attention.c,
 * gemm_int8.c). The target list is the smallest the code needs, so these inline into functions compiled for
 * any superset (the files' TF / TB / TV attributes); the rest of the build stays x86-64-v2. */
#ifndef MACT_VECMATH_AVX512_H
#define MACT_VECMATH_AVX512_H
#include <immintrin.h>

#define MACT_VEC __attribute__((target("avx512f,avx512dq,fma")))

/* exp(x), about 1 ulp; x <= -104 gives 0, x >= 88.7 gives exp(88.7) */
MACT_VEC static inline __attribute__((always_inline)) __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
    return _mm512_scalef_ps(p, n);
}

/* gelu_tanh(v) = 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3) */
MACT_VEC static inline __attribute__((always_inline)) __m512 gelu512(__m512 v)
{
    __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), v3, v));
    __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.f), u));
    return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.f), e));
}

#endif
