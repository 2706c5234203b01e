/* The tensor table: the one list of every tensor a MolmoAct2 checkpoint holds, with the shape its config
 * implies and how the runtime treats it. Every use walks this list: binding and validation at load
 * (model.c), the component table of describe, packing (model/packs.c, through mact_model_for_each_weight),
 * and the synthetic checkpoints (src/compress/synth.c). */
#ifndef MACT_MODEL_TABLE_H
#define MACT_MODEL_TABLE_H
#include "model/model.h"

enum {
    T_VEC = 1,       /* converted to F32 at load: norms, biases, small tables read directly by stages */
    T_OPTIONAL = 2,  /* validated when present, not required (ln_f, lm_head: dead for continuous actions) */
    T_NOPACK = 4,    /* a matrix the stages never multiply by (embedding tables read a row at a time, lm_head) */
};

typedef struct walk_ctx {
    struct mact_model *m;
    struct mact_ctable *ct;     /* the checkpoint's tensors by canonical name (model.c) */
    char *err;
    size_t errlen;
    int mode;                    /* 0 bind, 1 describe */
    /* describe accumulators */
    int64_t params, bytes, dt_bytes[3];
    /* mact_model_for_each_weight */
    void (*wf)(mact_tensor *t, int part, void *ctx);  /* part: MACT_PART_* */
    void *wctx;
} walk_ctx;

/* fn(w, canonical name, the model's field, T_* flags, ndim, shape) for every tensor, in table order; stops at
 * and returns the first non-zero result. Needs w->m's config and its block arrays. */
typedef int (*tensor_fn)(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape);
int mact_table_walk(walk_ctx *w, tensor_fn fn);

#endif
