/* NEON rows and activations: layernorm / rmsnorm rows (statistics in double, as the plain-C rows: float64x2
 * lanes, then the K % 4 tail), GELU-tanh and SiLU*mul (a vector exp of about 1 ulp), the adaLN modulation and
 * gated residual rows. Tails past the last 4 lanes run the same formulas in scalar code. */
#include <math.h>
#include <arm_neon.h>
#include "kernels/arm/arm.h"
#include "kernels/arm/vecmath_neon.h"

#define INL inline __attribute__((always_inline))

/* gelu_tanh(v) = 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3) */
static INL float32x4_t gelu4(float32x4_t v)
{
    const float32x4_t v3 = vmulq_f32(vmulq_f32(v, v), v);
    const float32x4_t u = vmulq_f32(vdupq_n_f32(0.7978845608028654f), vfmaq_f32(v, vdupq_n_f32(0.044715f), v3));
    const float32x4_t e = exp4(vmulq_f32(vdupq_n_f32(-2.f), u));
    return vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.f), e));
}

void mact_arm_gelu(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, gelu4(vld1q_f32(x + i)));
    for (; i < n; i++) x[i] = mact_ref_gelu1(x[i]);
}

void mact_arm_silu_mul(float *y, const float *gate, const float *val, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t g = vld1q_f32(gate + i), v = vld1q_f32(val + i);
        const float32x4_t e = exp4(vnegq_f32(g));
        vst1q_f32(y + i, vdivq_f32(vmulq_f32(g, v), vaddq_f32(vdupq_n_f32(1.f), e)));
    }
    for (; i < n; i++) y[i] = mact_silu(gate[i]) * val[i];
}

/* ---- norm rows: statistics in double ---- */

void mact_arm_layernorm_row(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim)
{
    const int64_t d4 = dim & ~(int64_t)3;
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    for (int64_t i = 0; i < d4; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
    }
    double s = vaddvq_f64(vaddq_f64(s0, s1));
    for (int64_t i = d4; i < dim; i++) s += x[i];
    const double mean = s / dim;
    const float64x2_t mv = vdupq_n_f64(mean);
    s0 = s1 = vdupq_n_f64(0);
    for (int64_t i = 0; i < d4; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float64x2_t lo = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), mv);
        const float64x2_t hi = vsubq_f64(vcvt_high_f64_f32(v), mv);
        s0 = vfmaq_f64(s0, lo, lo);
        s1 = vfmaq_f64(s1, hi, hi);
    }
    double s2 = vaddvq_f64(vaddq_f64(s0, s1));
    for (int64_t i = d4; i < dim; i++) { double d = x[i] - mean; s2 += d * d; }
    const float inv = (float)(1.0 / sqrt(s2 / dim + eps)), mf = (float)mean;
    const float32x4_t iv = vdupq_n_f32(inv), mfv = vdupq_n_f32(mf);
    for (int64_t i = 0; i < d4; i += 4) {
        const float32x4_t v = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(x + i), mfv), iv), vld1q_f32(w + i));
        vst1q_f32(y + i, vaddq_f32(v, vld1q_f32(b + i)));
    }
    for (int64_t i = d4; i < dim; i++) y[i] = (x[i] - mf) * inv * w[i] + b[i];
}

void mact_arm_rmsnorm_row(float *y, const float *x, const float *w, float eps, int64_t dim)
{
    const int64_t d4 = dim & ~(int64_t)3;
    float64x2_t s0 = vdupq_n_f64(0), s1 = vdupq_n_f64(0);
    for (int64_t i = 0; i < d4; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        s0 = vfmaq_f64(s0, lo, lo);
        s1 = vfmaq_f64(s1, hi, hi);
    }
    double s2 = vaddvq_f64(vaddq_f64(s0, s1));
    for (int64_t i = d4; i < dim; i++) s2 += (double)x[i] * x[i];
    const float inv = (float)(1.0 / sqrt(s2 / dim + eps));
    const float32x4_t iv = vdupq_n_f32(inv);
    for (int64_t i = 0; i < d4; i += 4) {
        float32x4_t v = vmulq_f32(vld1q_f32(x + i), iv);
        if (w) v = vmulq_f32(v, vld1q_f32(w + i));
        vst1q_f32(y + i, v);
    }
    for (int64_t i = d4; i < dim; i++) y[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}

/* ---- adaLN modulation and gated residual rows ---- */

void mact_arm_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale)
{
    const int64_t d4 = dim & ~(int64_t)3;
    for (int64_t d = 0; d < d4; d += 4) {
        const float32x4_t s1 = vaddq_f32(vdupq_n_f32(1.f), vld1q_f32(scale + d)), sh = vld1q_f32(shift + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = y + r * dim + d;
            vst1q_f32(p, vfmaq_f32(sh, vld1q_f32(p), s1));
        }
    }
    for (int64_t d = d4; d < dim; d++)
        for (int64_t r = 0; r < rows; r++) y[r * dim + d] = y[r * dim + d] * (1.f + scale[d]) + shift[d];
}

void mact_arm_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    const int64_t d4 = dim & ~(int64_t)3;
    for (int64_t d = 0; d < d4; d += 4) {
        const float32x4_t g = vld1q_f32(gate + d);
        for (int64_t r = 0; r < rows; r++) {
            float *p = z + r * dim + d;
            vst1q_f32(p, vfmaq_f32(vld1q_f32(p), g, vld1q_f32(y + r * dim + d)));
        }
    }
    for (int64_t d = d4; d < dim; d++)
        for (int64_t r = 0; r < rows; r++) z[r * dim + d] += gate[d] * y[r * dim + d];
}
