/* norm_stats.json (molmoact2_norm_stats.v1, docs/spec/molmoact2.md 4.3-4.4, docs/spec/datasets.md 2.1-2.2): per-tag state and action
 * statistics, the q01/q99 normalisation with clipping and masks, state bins, action un-normalisation. */
#ifndef MACT_NORMSTATS_H
#define MACT_NORMSTATS_H
#include <stddef.h>
#include <stdint.h>

#define MACT_NORM_MAX_DIM 64
#define MACT_NORM_MAX_TAGS 32
#define MACT_NORM_MAX_CAMERAS 8   /* camera_keys kept per tag (a tag may list more; only the count is kept then) */

enum { MACT_NORM_Q01_Q99 = 0, MACT_NORM_MIN_MAX, MACT_NORM_MEAN_STD, MACT_NORM_Q10_Q90, MACT_NORM_NONE };

typedef struct {
    int dim;
    double lo[MACT_NORM_MAX_DIM], hi[MACT_NORM_MAX_DIM];  /* q01/q99 (or the mode's pair; mean/std) */
    uint8_t mask[MACT_NORM_MAX_DIM];                      /* 0: dim passes through raw */
    uint8_t zero[MACT_NORM_MAX_DIM];                      /* min == max: normalised value forced to 0 */
} mact_feature_stats;

typedef struct {
    char name[128];
    mact_feature_stats state, action;
    int action_horizon, n_action_steps;
    int n_cameras;                    /* entries of camera_keys (0: the tag names none, as SO100 tags do) */
    char camera_keys[MACT_NORM_MAX_CAMERAS][128];  /* the first MACT_NORM_MAX_CAMERAS of them, in the model's order */
    char setup_type[512], control_mode[256];
} mact_norm_tag;

typedef struct mact_norm_stats_s {
    int mode;
    int n_tags;
    mact_norm_tag tags[MACT_NORM_MAX_TAGS];
} mact_norm_stats;

/* Parses the file text; errors name the tag and key. */
int mact_norm_stats_parse(const char *json, mact_norm_stats *ns, char *err, size_t errlen);
/* Tag by name; NULL name picks the only tag. On failure err lists the valid tags. */
const mact_norm_tag *mact_norm_find_tag(const mact_norm_stats *ns, const char *name, char *err, size_t errlen);
/* Raw state -> normalised (clipped in quantile/min-max modes, masked dims raw, zero dims 0). */
void mact_norm_state(const mact_norm_stats *ns, const mact_feature_stats *f, const float *x, float *out);
/* Normalised state -> bins in [0, n_bins) (rint: round half to even; NaN -> 0, +-inf -> +-1). */
void mact_state_bins(const float *norm, int dim, int n_bins, int *bins);
/* Normalised actions [n, dim] -> robot units: clip to [-1, 1], scale on masked-in dims, raw elsewhere. */
void mact_unnorm_actions(const mact_norm_stats *ns, const mact_feature_stats *f, const float *a, int n, int ld,
                         float *out);
/* The inverse of mact_unnorm_actions: actions [n, dim] in robot units -> normalised, row stride ld_out (RTC's
 * previous rows). Quantile / min-max modes clip to [-1, 1] (what the un-normalisation can return), divisions by a
 * zero range take 1e-6 as mact_norm_state does, masked-out dims pass through, zero dims give 0. */
void mact_norm_actions(const mact_norm_stats *ns, const mact_feature_stats *f, const float *x, int n, int ld_out,
                       float *out);
#endif
