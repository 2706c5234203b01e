/* The safetensors header writer shared by `mact synth` (src/compress/synth.c) and `mact prune` (src/compress/prune.c).
 * The layout is what the safetensors packages write: an 8-byte little-endian header length, the header JSON
 * (compact, the tensors in data order with contiguous data_offsets), padded with spaces to a multiple of 8
 * so the data section starts 8-byte aligned. */
#ifndef MACT_DEV_ST_WRITE_H
#define MACT_DEV_ST_WRITE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    int dtype;               /* MACT_* (safetensors name from mact_dtype_name) */
    int ndim;
    const int64_t *shape;    /* [ndim] */
    uint64_t nbytes;         /* product(shape) * element size */
} mact_stw_entry;

/* The header JSON of entries [n] in data order: {"__metadata__":META,"name":{"dtype":..,"shape":[..],
 * "data_offsets":[a,b]},...} with META (a JSON object's text, inserted verbatim) first, or last when
 * meta_last, or absent when meta_json is NULL; padded with spaces to a multiple of 8. Returns a malloc'd
 * string (its length in *len), NULL when out of memory. *data_bytes (may be NULL): the data section's size. */
char *mact_stw_header(const mact_stw_entry *e, size_t n, const char *meta_json, int meta_last, size_t *len,
                      uint64_t *data_bytes);
/* The 8-byte length prefix of a header of len bytes. */
void mact_stw_len8(size_t len, uint8_t out[8]);
#endif
