/* mact_compress: the compression toolkit (libmact_compress.so / libmact_compress.a; pkg-config mact_compress).
 * ViT depth pruning of a MolmoAct2 checkpoint after docs/compression.md: the per-block SNR analysis and the
 * keep-set it proposes (`mact prune-analyze`), the surgery (`mact prune`), the student-vs-teacher check of the
 * connector output (`mact distill-eval`). The analyses run the runtime's sessions (mact.h, mact_stages.h): a client of
 * libmact.so, which it needs. (The random checkpoints of `mact synth` are src/synth/'s, the CLI's and the tests'.)
 *
 * The conventions are mact.h's (mact_status, err buffers, caller-owned buffers, zero = default, no exit); a
 * function that prints its report takes a FILE *, NULL for silence. Calibration frames come from image files
 * (PNG, JPEG, HxWx3 .npy) or from a LeRobot dataset (include/mact_data.h). */
#ifndef MACT_COMPRESS_H
#define MACT_COMPRESS_H
#include <stdio.h>
#include "mact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The MACT_VERSION_STRING this toolkit was built from (a binding checks it, as it checks mact_version()). */
MACT_API const char *mact_compress_version(void);

#define MACT_PRUNE_MAX_TAPS 8
#define MACT_PRUNE_MAX_BLOCKS 4096

/* ---- per-block SNR and the proposed keep-set (`mact prune-analyze`) ---- */

typedef struct {
    mact_session *session;        /* a session on the teacher (required; any precision: fp32 is the exact mode) */
    const char *model;            /* the teacher's folder (required): its config's taps, and the report's next command */
    const char *const *images;    /* calibration image files ... */
    int n_images;
    const char *dataset;          /* ... or a LeRobot dataset: n_frames frames spread evenly over its episodes and
                                     cameras (0: 64) */
    int n_frames;
    int target_depth;             /* D > 0: propose a keep-set of D blocks and its student taps */
} mact_snr_options;

typedef struct mact_snr_result mact_snr_result;

/* Runs the teacher's ViT over the frames and measures each block's SNR = 10 log10(E||in||^2 / E||out - in||^2)
 * (E over tokens and images); with a target depth, proposes the keep-set (the deepest tap pinned, the rest the
 * lowest SNR) and the student's taps. report: the table and the proposal. */
MACT_API mact_status mact_snr_analyze(const mact_snr_options *o, FILE *report, mact_snr_result **out, char *err,
                                      size_t errlen);
/* The analysis as JSON (snr_db, in_energy, delta_energy, blocks, taps, keep, student_taps, ...) into path. */
MACT_API mact_status mact_snr_write_json(const mact_snr_result *r, const char *path, char *err, size_t errlen);
/* Blocks (stored ViT blocks) and images averaged over. */
MACT_API int mact_snr_blocks(const mact_snr_result *r);
MACT_API int mact_snr_images(const mact_snr_result *r);
/* Per block (mact_snr_blocks values each, any may be NULL): SNR in dB (+inf when the block changes nothing),
 * whether an adapter tap reads it, whether the proposed keep-set keeps it (all 0 without a target depth). */
MACT_API void mact_snr_values(const mact_snr_result *r, double *snr_db, int *tapped, int *kept);
/* The proposed keep-set: its size (0 without a target depth); keep (n values) and the student's taps
 * (MACT_PRUNE_MAX_TAPS at most; *n_taps) into the caller's arrays when not NULL. */
MACT_API int mact_snr_keep(const mact_snr_result *r, int *keep, int *student_taps, int *n_taps);
MACT_API void mact_snr_free(mact_snr_result *r);

/* ---- the surgery (`mact prune`) ---- */

/* Writes the pruned checkpoint to out_dir, which must not exist: student block j = teacher block keep[j];
 * user_taps (n_user_taps, NULL: each teacher tap moves to the student block holding its layer) are the student's
 * vit_layers (negative: from n_keep). Everything goes to a temporary directory renamed at the end, so a refusal
 * or failure leaves nothing. log (may be NULL): one line per file written and the tap mapping. */
MACT_API mact_status mact_prune(const char *model_dir, const int *keep, int n_keep, const int *user_taps, int n_user_taps,
                                const char *out_dir, FILE *log, char *err, size_t errlen);

/* ---- student against teacher (`mact distill-eval`) ---- */

typedef struct {
    mact_session *teacher, *student;  /* sessions on the two checkpoints (required; their precisions are the caller's) */
    const char *teacher_name, *student_name;  /* how the report names them (NULL: "teacher", "student") */
    const char *const *images;      /* held-out image files ... */
    int n_images;
    const char *dataset;            /* ... or frames of a LeRobot dataset, as mact_snr_options */
    int n_frames;
    const char *json;               /* also the per-image and overall numbers as JSON here (NULL: no) */
} mact_distill_options;

typedef struct {
    double cos_token;   /* per-token cosine of the connector output, averaged over tokens and images */
    double cos_flat;    /* cosine of the whole output */
    double rel_mse;     /* sum (s - t)^2 / sum t^2 */
    double max_abs;
    int n_images, identical;
} mact_distill_result;

/* The cosine and relative MSE of the student's connector output against the teacher's, image by image (the
 * table to report) and overall (*res, may be NULL). */
MACT_API mact_status mact_distill_eval(const mact_distill_options *o, FILE *report, mact_distill_result *res, char *err,
                                       size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
