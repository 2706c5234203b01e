/* The int8 weight quantiser every backend's MACT_PACK_I8 pack is built with (kernels/x86/pack.c,
 * kernels/arm/pack.c): one 64-column panel of W[N, K] (any stored dtype) as per-output-channel symmetric int8
 * (scale = max|W[n, :]| / 127, values rounded to nearest even and clamped to [-127, 127]) in k quads
 * (row kq = 64 columns x 4 bytes: vpdpbusd's and SDOT's operand order), with the per-column scales and sums
 * of the int8 values. A channel holding a NaN or an infinity gets zeros and a NaN scale, so its outputs are
 * NaN on every backend (quantized, the fault would come out finite, and a non-finite value reaching the
 * float-to-int8 cast is undefined behaviour). Columns past N get zeros, scale 0 and sum 0.
 *
 * resid: the second plane of a two-plane weight (MACT_PACK_I8R): the same layout, quantizing what the first
 * plane leaves, W - s1 q1, with its own per-channel scale (max of that residual / 127, about s1 / 254), so that
 * s1 q1 + s2 q2 is W to ~1/128 of the one plane's error. */
#include <math.h>
#include "kernels/ops.h"
#include "base/dtype.h"

/* the first plane's value of w (symmetric int8 at inv = 127 / amax, rounded to nearest even, clamped) */
static inline float plane1(float w, float inv)
{
    const float r = nearbyintf(w * inv);
    return r > 127.f ? 127.f : r < -127.f ? -127.f : r;
}

void mact_pack_panel_i8(int8_t *dst, float *scale, int32_t *colsum, const void *w, int dtype, int64_t N, int64_t K,
                        int64_t Kq, int64_t p, int resid)
{
    int8_t *pd = dst + p * Kq * 256;
    for (int c = 0; c < MACT_PANEL; c++) {
        const int64_t n = p * MACT_PANEL + c;
        float amax = 0.f;
        int bad = 0;
        if (n < N)
            for (int64_t k = 0; k < K; k++) {
                const float a = fabsf(mact_load_f32(w, dtype, n * K + k));
                bad |= !isfinite(a);
                amax = a > amax ? a : amax;
            }
        float inv = bad ? 0.f : amax > 0.f ? 127.f / amax : 0.f;
        /* the residual plane: what the first plane (s1 q1, s1 = amax / 127 as the first pack stores it) leaves */
        const float s1 = amax / 127.f, inv1 = inv;
        if (resid && n < N && !bad) {
            float rmax = 0.f;
            for (int64_t k = 0; k < K; k++) {
                const float v = mact_load_f32(w, dtype, n * K + k), a = fabsf(v - s1 * plane1(v, inv1));
                rmax = a > rmax ? a : rmax;
            }
            amax = rmax;
            inv = rmax > 0.f ? 127.f / rmax : 0.f;
        }
        int32_t sum = 0;
        for (int64_t k = 0; k < 4 * Kq; k++) {
            int8_t q = 0;
            if (n < N && k < K && !bad) {
                float v = mact_load_f32(w, dtype, n * K + k);
                if (resid) v -= s1 * plane1(v, inv1);
                q = (int8_t)plane1(v, inv);
            }
            pd[(k / 4) * 256 + 4 * c + (k % 4)] = q;
            sum += q;
        }
        scale[n] = n >= N ? 0.f : bad ? NAN : amax / 127.f;
        colsum[n] = sum;
    }
}
