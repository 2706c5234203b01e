/* A weight as the stage code and the kernels see it: stored dtype, zero-copy into the mmap where possible,
 * and the packed copy its model's kernels bound to it at load. Vectors (norms, biases) and small tables are
 * converted to F32 at load so stage code can read them directly. */
#ifndef MACT_BASE_TENSOR_H
#define MACT_BASE_TENSOR_H
#include <stdint.h>
#include "base/dtype.h"

struct mact_packed;

typedef struct {
    const char *name;   /* canonical HF name, owned by the model */
    int dtype;          /* MACT_F32, MACT_BF16 or MACT_F16 */
    int stored_dtype;   /* the dtype in the checkpoint file (before a load-time F32 copy) */
    int ndim;
    int64_t shape[4];
    const void *data;
    const struct mact_packed *pk;  /* the model's packed copy for its precision, or NULL (row-major kernels) */
} mact_tensor;

static inline const float *mact_f32(const mact_tensor *t) { return (const float *)t->data; }

#endif
