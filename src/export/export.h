/* mact export: the seed's deployment inputs straight from a checkpoint (docs/export.md). Development code,
 * built into libmact_export.a (never into libmact.so).
 *
 * golden: the parity file set of one fp32 inference (docs/design.md "Golden files", the seed's key names and
 *   shapes), which `mact parity` reads back.
 * onnx:   per-component ONNX graphs (opset 20, weights as external data) with the seed's I/O names.
 *
 * Both write into a fresh temporary folder beside the destination and rename it into place at the end: the
 * destination must be absent or an empty folder, and a failure leaves no partial folder behind. Return 0 on
 * success, else a mact_status with a message in err. */
#ifndef MACT_EXPORT_H
#define MACT_EXPORT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mact.h"

#define MACT_EXPORT_MAX_SPLITS 64

typedef struct {
    const char *model_dir;
    const mact_frame *frames;     /* [n_frames] camera frames, the checkpoint's camera order */
    size_t n_frames;
    const char *task;
    const float *state;           /* raw robot units */
    size_t state_dim;
    const char *norm_tag;         /* NULL: the checkpoint's only tag */
    const float *noise;           /* [horizon, max_action_dim] or NULL: drawn from seed */
    size_t noise_len;
    uint64_t seed;
    int splits;                   /* LLM splits; 0: 4 */
    int threads;                  /* 0: all */
} mact_export_golden_options;

/* One fp32 inference (mact_predict) and every boundary re-run through the stage calls of mact_stages.h from
 * its inputs: vision_io, llm_split{i}_io, action_context_io, action_step_io (the last flow step), action_loop_io,
 * e2e_io and trace.json in out_dir. A summary line goes to log (may be NULL). */
int mact_export_golden(const mact_export_golden_options *o, const char *out_dir, FILE *log, char *err, size_t errlen);

typedef enum { MACT_EXPORT_FP32 = 0, MACT_EXPORT_FP16 } mact_export_weights;
typedef enum { MACT_EXPORT_GS_NATIVE = 0, MACT_EXPORT_GS_DECOMPOSED } mact_export_grid_sample;

typedef struct {
    const char *model_dir;
    int splits;                   /* 0: 4 */
    int seq_len;                  /* 0: N is a dynamic dimension ("N") */
    mact_export_weights weights;
    mact_export_grid_sample grid_sample;
    const char *norm_tag;         /* horizon, action width and camera count: this tag (NULL: the only / first) */
    const char *only;             /* NULL: every component; else just this one (vision, llm_split<i>, ...) */
    int n_images;                 /* cameras of the vision graph; 0: the tag's camera_keys count (else 1) */
} mact_export_onnx_options;

/* The seven graphs vision/, llm_split0..S-1/, action_context/, action_step/ in out_dir, each folder one
 * <name>.onnx and its external data <name>.onnx.data. */
int mact_export_onnx(const mact_export_onnx_options *o, const char *out_dir, FILE *log, char *err, size_t errlen);

/* LLM layer ranges of `splits` splits over n_layers layers: [round(i*L/S), round((i+1)*L/S)), as the seed. */
int mact_export_split_ranges(int n_layers, int splits, int (*ranges)[2]);

/* ---- helpers shared by the writers (src/export/outdir.c) ---- */
/* Checks dst (absent or an empty folder), creates dst.tmp.XXXXXX beside it into tmp (cap bytes). */
int mact_export_begin(const char *dst, char *tmp, size_t cap, char *err, size_t errlen);
/* Renames tmp onto dst; on failure removes tmp. */
int mact_export_commit(const char *tmp, const char *dst, char *err, size_t errlen);
/* Test hook: 1 (message in err) when $MACT_EXPORT_FAIL_AT names `what` (a golden file or an ONNX component), so a
 * test can make an export fail half way and check that nothing is left behind. */
int mact_export_fault(const char *what, char *err, size_t errlen);
/* Removes the temporary folder tmp and everything in it (only what mact_export_begin created). */
void mact_export_abort(const char *tmp);
#endif
