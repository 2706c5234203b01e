/* Overflow-safe size arithmetic for sizes that come from files (config products, tensor shapes, cache
 * headers). Each returns 0 when the result fits and -1 on overflow (the output is then unspecified);
 * callers turn -1 into an error that names the quantity. Header-only: safe to include anywhere. */
#ifndef MACT_CHECKED_H
#define MACT_CHECKED_H
#include <stddef.h>
#include <stdint.h>

static inline int mact_size_mul(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int mact_size_add(size_t a, size_t b, size_t *out) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }
static inline int mact_i64_mul(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int mact_i64_add(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }

/* a * b * c as size_t. */
static inline int mact_size_mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t t;
    return mact_size_mul(a, b, &t) || mact_size_mul(t, c, out) ? -1 : 0;
}

/* Product of n non-negative dims, refused (-1) on a negative dim, on overflow or when it exceeds limit. */
static inline int mact_i64_prod(const int64_t *dims, int n, int64_t limit, int64_t *out)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || mact_i64_mul(p, dims[i], &p)) return -1;
    }
    if (p > limit) return -1;
    *out = p;
    return 0;
}

/* off + len <= size without overflow (a byte range inside a buffer or file). */
static inline int mact_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}
#endif
