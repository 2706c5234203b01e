/* libFuzzer target for the safetensors header parser (mact_st_parse_header): the input is a whole
 * file image. Anything accepted is walked end to end, so a tensor pointing outside the input shows
 * up as an ASan report rather than passing silently. Build/run: see fuzz/README.md. */
#include "io/safetensors.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    mact_st *st = NULL;
    if (mact_st_parse_header(data, size, "fuzz", &st, err, sizeof err) != 0) {
        /* Every failure must leave a terminated, non-empty message and no handle. */
        if (st != NULL || err[0] == 0 || memchr(err, 0, sizeof err) == NULL) __builtin_trap();
        return 0;
    }
    volatile uint8_t sink = 0;
    size_t n = mact_st_count(st);
    for (size_t i = 0; i < n; i++) {
        const mact_st_tensor *t = mact_st_at(st, i);
        if (mact_st_find(st, t->name) != t) __builtin_trap();
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        if ((const uint8_t *)t->data < data || (const uint8_t *)t->data + t->nbytes > data + size)
            __builtin_trap();
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (numel * mact_dtype_size(t->dtype) != t->nbytes) __builtin_trap();
    }
    /* The parser promises that no two non-empty tensors share a byte; recheck it the slow way. */
    for (size_t i = 0; i < n && n <= 64; i++)
        for (size_t j = i + 1; j < n; j++) {
            const mact_st_tensor *a = mact_st_at(st, i), *b = mact_st_at(st, j);
            const uint8_t *a0 = a->data, *b0 = b->data;
            if (a->nbytes && b->nbytes && a0 < b0 + b->nbytes && b0 < a0 + a->nbytes) __builtin_trap();
        }
    (void)sink;
    mact_st_close(st);
    return 0;
}
