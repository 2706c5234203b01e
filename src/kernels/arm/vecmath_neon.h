/* The NEON vector exp shared by the activations (vec.c) and the attention softmax (attention.c). */
#ifndef MACT_KERNELS_ARM_VECMATH_NEON_H
#define MACT_KERNELS_ARM_VECMATH_NEON_H
#include <arm_neon.h>

#ifndef INL
#define INL inline __attribute__((always_inline))
#endif

/* 2^n for integral n in [-252, 254] (float), as two normal factors */
static INL float32x4_t pow2i(float32x4_t n)
{
    const int32x4_t ni = vcvtq_s32_f32(n), h = vshrq_n_s32(ni, 1), l = vsubq_s32(ni, h);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t a = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, bias), 23));
    const float32x4_t b = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(l, bias), 23));
    return vmulq_f32(a, b);
}

/* exp(x), about 1 ulp (Cephes' polynomial, as the AVX-512 exp512); x <= -104 gives ~0, x >= 88.7 exp(88.7) */
static INL float32x4_t exp4(float32x4_t x)
{
    x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.7f)), vdupq_n_f32(-104.f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500E-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507E-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073E-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894E-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459E-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201E-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.f)), p, vmulq_f32(r, r));
    return vmulq_f32(p, pow2i(n));
}

#endif
