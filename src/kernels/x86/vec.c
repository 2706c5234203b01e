/* AVX-512 rows and activations of the AVX-512 levels (kernels/x86/ops.c): GELU (tanh) and SiLU-and-multiply
 * with the vector exp of vecmath_avx512.h, LayerNorm / RMSNorm rows with their statistics in double (as the
 * plain-C rows), and the action expert's adaLN modulation and gated residual rows. */
#include <math.h>
#include <immintrin.h>
#include "kernels/x86/x86.h"
#include "kernels/x86/vecmath_avx512.h"

TF void mact_gelu_tanh_avx512(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, gelu512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, gelu512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

TF static INL __m512 silu_mul512(__m512 g, __m512 v)
{
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_div_ps(_mm512_mul_ps(g, v), _mm512_add_ps(_mm512_set1_ps(1.f), e));
}

TF void mact_silu_mul_avx512(float *y, const float *gate, const float *val, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, silu_mul512(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(val + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, silu_mul512(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, val + i)));
    }
}

/* ---- norm rows: statistics in double, as the plain-C rows ---- */

TF static INL __m512d sum_pd(__m512 v, __m512d acc)
{
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

TF static INL __m512d sumsq_pd(__m512 v, __m512d acc)
{
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    acc = _mm512_fmadd_pd(lo, lo, acc);
    return _mm512_fmadd_pd(hi, hi, acc);
}

TF static INL __m512d sumdev_pd(__m512 v, __m512d mean, __m512d acc)
{
    __m512d lo = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), mean);
    __m512d hi = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), mean);
    acc = _mm512_fmadd_pd(lo, lo, acc);
    return _mm512_fmadd_pd(hi, hi, acc);
}

TF void mact_layernorm_row_avx512(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    __m512d s = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s = sum_pd(_mm512_loadu_ps(x + i), s);
    if (tm) s = sum_pd(_mm512_maskz_loadu_ps(tm, x + d16), s);
    double mean = _mm512_reduce_add_pd(s) / dim;
    __m512d mv = _mm512_set1_pd(mean), s2 = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s2 = sumdev_pd(_mm512_loadu_ps(x + i), mv, s2);
    if (tm) {
        /* masked-off lanes would add mean^2: use the mean itself there */
        __m512 t = _mm512_mask_loadu_ps(_mm512_set1_ps((float)mean), tm, x + d16);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(t));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
        __mmask8 ml = (__mmask8)(tm & 0xff), mh = (__mmask8)(tm >> 8);
        lo = _mm512_maskz_sub_pd(ml, lo, mv);
        hi = _mm512_maskz_sub_pd(mh, hi, mv);
        s2 = _mm512_fmadd_pd(lo, lo, s2);
        s2 = _mm512_fmadd_pd(hi, hi, s2);
    }
    float inv = (float)(1.0 / sqrt(_mm512_reduce_add_pd(s2) / dim + eps));
    __m512 mf = _mm512_set1_ps((float)mean), iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < dim; i += 16) {
        __mmask16 m = i < d16 ? (__mmask16)0xffff : tm;
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mf), iv),
                                 _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i)));
    }
}

TF void mact_rmsnorm_row_avx512(float *y, const float *x, const float *w, float eps, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    __m512d s2 = _mm512_setzero_pd();
    for (int64_t i = 0; i < d16; i += 16) s2 = sumsq_pd(_mm512_loadu_ps(x + i), s2);
    if (tm) s2 = sumsq_pd(_mm512_maskz_loadu_ps(tm, x + d16), s2);
    float inv = (float)(1.0 / sqrt(_mm512_reduce_add_pd(s2) / dim + eps));
    __m512 iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < dim; i += 16) {
        __mmask16 m = i < d16 ? (__mmask16)0xffff : tm;
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), iv);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

/* ---- adaLN modulation and gated residual rows (the action expert's elementwise work per block) ---- */

TF void mact_modulate_rows_avx512(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    for (int64_t d = 0; d < dim; d += 16) {
        const __mmask16 m = d < d16 ? (__mmask16)0xffff : tm;
        const __m512 s1 = _mm512_add_ps(_mm512_set1_ps(1.f), _mm512_maskz_loadu_ps(m, scale + d));
        const __m512 sh = _mm512_maskz_loadu_ps(m, shift + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = y + r * dim + d;
            _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), s1), sh));
        }
    }
}

TF void mact_gated_add_rows_avx512(float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    const int64_t d16 = dim & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (dim - d16)) - 1);
    for (int64_t d = 0; d < dim; d += 16) {
        const __mmask16 m = d < d16 ? (__mmask16)0xffff : tm;
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = z + r * dim + d;
            __m512 v = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, y + r * dim + d));
            _mm512_mask_storeu_ps(p, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), v));
        }
    }
}
