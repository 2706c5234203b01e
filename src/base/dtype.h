/* Element types shared by the whole runtime (safetensors tensors, npy arrays, kernels) and the one copy
 * of the scalar conversions between them. The first ten values are fixed by contract; U16/U32/U64 exist
 * because npy files (and safetensors) can carry them. */
#ifndef MACT_BASE_DTYPE_H
#define MACT_BASE_DTYPE_H
#include <stdint.h>
#include <string.h>

enum {
    MACT_F32, MACT_BF16, MACT_F16, MACT_F64, MACT_I64, MACT_I32, MACT_I16, MACT_I8, MACT_U8, MACT_BOOL,
    MACT_U16, MACT_U32, MACT_U64,
    MACT_DTYPE_COUNT
};

static inline float mact_bf16_to_f32(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* round to nearest even; a NaN stays a (quiet) NaN instead of rounding into an infinity */
static inline uint16_t mact_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* IEEE half -> float, exact (every half, subnormals included, is a normal float) */
static inline float mact_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else {
            exp = 113;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* element i of a weight stored as F32, BF16 or F16 (unaligned-safe) */
static inline float mact_load_f32(const void *w, int dtype, int64_t i)
{
    if (dtype == MACT_F32) {
        float f;
        memcpy(&f, (const uint8_t *)w + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const uint8_t *)w + 2 * i, 2);
    return dtype == MACT_BF16 ? mact_bf16_to_f32(h) : mact_f16_to_f32(h);
}

#endif
