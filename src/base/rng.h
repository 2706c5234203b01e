/* The project's one pseudo-random generator: xoshiro256** seeded by splitmix64 (noise for the flow, the
 * synthetic checkpoints, test inputs). Deterministic for a seed on every platform. */
#ifndef MACT_BASE_RNG_H
#define MACT_BASE_RNG_H
#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } mact_rng;

static inline uint64_t mact_splitmix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t mact_rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t mact_rng_next(mact_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t res = mact_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = mact_rotl64(s[3], 45);
    return res;
}

/* the state words are the first four outputs of splitmix64 started at seed (its reference seeding) */
static inline void mact_rng_seed(mact_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        r->s[i] = mact_splitmix64(seed);
        seed += 0x9E3779B97F4A7C15ull;
    }
}

/* uniform in [0, 1) with 53 random bits */
static inline double mact_rng_uniform(mact_rng *r) { return (double)(mact_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* uniform in (0, 1): the same 53 bits, centred in their step, so never 0 (its log is finite) */
static inline double mact_rng_uniform_open(mact_rng *r)
{
    return ((double)(mact_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* n standard normal values, Box-Muller on pairs of open uniforms (cos then sin; an odd n drops the last sin).
 * The flow's seeded noise (mact_predict_options.seed) is exactly this stream from mact_rng_seed(seed): callers
 * reproduce it bit for bit, so neither the formula nor the order may change. */
static inline void mact_rng_normal_f32(mact_rng *r, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = mact_rng_uniform_open(r), u2 = mact_rng_uniform_open(r), rad = sqrt(-2.0 * log(u1));
        out[i] = (float)(rad * cos(2 * M_PI * u2));
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(2 * M_PI * u2));
    }
}

/* 64-bit FNV-1a over bytes, chainable (start from MACT_FNV_BASIS) */
#define MACT_FNV_BASIS 0xcbf29ce484222325ULL
static inline uint64_t mact_fnv1a(uint64_t h, const void *p, uint64_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    for (uint64_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#endif
