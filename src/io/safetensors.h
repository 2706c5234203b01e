/* safetensors checkpoint reader: a single file or an HF sharded index, every file mmapped read-only
 * and every header validated before any tensor is handed out (zero-copy: tensor data points into
 * the mappings, which stay alive until mact_st_close).
 *
 * All functions returning int give 0 on success and -1 on error, with a message naming the file and
 * tensor written into err (when err != NULL and errlen > 0). */
#ifndef MACT_SAFETENSORS_H
#define MACT_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"

#define MACT_ST_MAX_DIMS 8
/* Headers beyond this are rejected: real checkpoints stay far below it and it bounds the JSON parse. */
#define MACT_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* safetensors name ("F32", "BF16", ...); "?" for an out-of-range value, never NULL. */
const char *mact_dtype_name(int dtype);
/* bytes per element; 0 for an out-of-range value. */
size_t mact_dtype_size(int dtype);
/* inverse of mact_dtype_name (exact, case-sensitive); -1 when unknown. */
int mact_dtype_from_name(const char *name);

typedef struct mact_st_tensor {
    const char *name;
    int dtype;                          /* MACT_F32 ... */
    int ndim;                           /* 0 for a scalar */
    int64_t shape[MACT_ST_MAX_DIMS];    /* entries past ndim are 0 */
    const void *data;                   /* into the mapping: read-only, not necessarily aligned */
    size_t nbytes;                      /* == product(shape) * mact_dtype_size(dtype) */
    const char *file;                   /* path of the file holding it (or the `what` label) */
} mact_st_tensor;

typedef struct mact_st mact_st;

/* Opens a checkpoint. `path` may be
 *   - a directory: `model.safetensors` there, or, if absent, `model.safetensors.index.json` and every
 *     shard its weight_map names (shard names are plain file names in that directory);
 *   - a file ending in ".json": an HF index, shards resolved next to it;
 *   - any other file: one safetensors file.
 * Tensor names must be unique across all files, and with an index every tensor must be exactly where
 * the weight_map says. */
int mact_st_open(const char *path, mact_st **out, char *err, size_t errlen);

/* Parses and validates one complete safetensors image (8-byte length, JSON header, data) held in
 * memory; `what` labels it in messages and becomes each tensor's `file`. Does not copy `buf`: it must
 * outlive the returned handle, which is released with mact_st_close (which does not free buf). */
int mact_st_parse_header(const uint8_t *buf, size_t len, const char *what, mact_st **out,
                         char *err, size_t errlen);

/* Tensors are kept sorted by name (strcmp order): mact_st_at walks them in that order and
 * mact_st_find is a binary search. */
size_t mact_st_count(const mact_st *st);
const mact_st_tensor *mact_st_at(const mact_st *st, size_t i);          /* NULL when i >= count */
const mact_st_tensor *mact_st_find(const mact_st *st, const char *name); /* NULL when absent */
/* The `__metadata__` string map of the (first) file that has one; NULL when absent. */
const char *mact_st_metadata(const mact_st *st, const char *key);
void mact_st_close(mact_st *st);  /* NULL-safe */

#endif
