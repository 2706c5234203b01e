/* Norm tags: the per-embodiment statistics and prompt fields a prediction is made with, and the arithmetic that
 * takes a raw state to the model's units and the model's actions back to the robot's.
 *
 * A tag comes from one of two places, and each keeps its own arithmetic:
 *   - norm_stats.json (molmoact2_norm_stats.v1, docs/spec/molmoact2.md 4.3-4.4, docs/spec/datasets.md 2.1-2.2):
 *     HF's predict_action: the file's norm_mode, in double, a zero range floored at 1e-6, min == max dims to 0;
 *   - a LeRobot policy's processors (model/lerobot.c): LeRobot's NormalizerProcessorStep in float32, eps for a
 *     zero range, masked-out dims passed through and required to lie in [-1, 1], the joint frame before and after.
 * Both may carry a joint frame (LeRobot's molmoact2_{state,action}_frame_transform), with the checkpoint's values. */
#ifndef MACT_NORMSTATS_H
#define MACT_NORMSTATS_H
#include <stddef.h>
#include <stdint.h>

#define MACT_NORM_MAX_DIM 64
#define MACT_NORM_MAX_TAGS 1024   /* a generalist base carries one tag per embodiment */
#define MACT_NORM_MAX_NAME 256    /* a tag name's bytes, the NUL included */
#define MACT_NORM_MAX_CAMERAS 8   /* camera_keys kept per tag (a tag may list more; only the count is kept then) */
#define MACT_NORM_MAX_KEY 256     /* a camera key's bytes, the NUL included */

/* the pair each mode reads: q01/q99, min/max, mean/std, q10/q90; NONE (LeRobot's IDENTITY) reads none */
enum { MACT_NORM_Q01_Q99 = 0, MACT_NORM_MIN_MAX, MACT_NORM_MEAN_STD, MACT_NORM_Q10_Q90, MACT_NORM_NONE };

typedef struct {
    int dim;
    int mode;                                             /* MACT_NORM_* */
    double lo[MACT_NORM_MAX_DIM], hi[MACT_NORM_MAX_DIM];  /* the mode's pair (LeRobot tags: float32 values) */
    uint8_t mask[MACT_NORM_MAX_DIM];                      /* 0: dim passes through raw */
    uint8_t zero[MACT_NORM_MAX_DIM];                      /* HF: min == max, normalised value forced to 0 */
    int mask_given;                                       /* the file had a mask (else mask is all 1) */
    char *names;                                          /* the dims' names joined by '\n' (malloc'd; NULL: none given;
                                                             freed by mact_norm_stats_free) */
} mact_feature_stats;

/* state'[:n] = signs * state[:n] + offsets before normalisation; actions[:n] = signs * (a'[:n] - offsets) after */
typedef struct {
    int n;                                                /* 0: no transform */
    float signs[MACT_NORM_MAX_DIM], offsets[MACT_NORM_MAX_DIM];
} mact_joint_frame;

typedef struct mact_tag {
    char name[MACT_NORM_MAX_NAME];
    mact_feature_stats state, action;
    int action_horizon, n_action_steps;
    int n_cameras;                    /* entries of camera_keys (0: the tag names none, as SO100 tags do) */
    char camera_keys[MACT_NORM_MAX_CAMERAS][MACT_NORM_MAX_KEY];  /* the first MACT_NORM_MAX_CAMERAS, in the model's order */
    char setup_type[512], control_mode[256];
    mact_joint_frame state_frame, action_frame;
    int lerobot;                      /* 1: LeRobot's processor arithmetic (above) */
    float eps;                        /* LeRobot: the denominator of a zero range */
    int clamp_state;                  /* LeRobot: molmoact2_clamp_normalized clamps the masked-in state dims */
    int clamp_actions;                /* LeRobot: molmoact2_clamp_action clamps every action dim to [-1, 1] first */
} mact_norm_tag;

typedef struct mact_norm_stats {
    int mode;                         /* norm_stats.json's norm_mode */
    int n_tags;
    int default_tag;                  /* the tag a call without a name gets; -1: only a lone tag is implied */
    mact_norm_tag *tags;              /* [n_tags], malloc'd: mact_norm_stats_free */
} mact_norm_stats;

/* Parses norm_stats.json's text into ns (free with mact_norm_stats_free, also after an error); errors name the tag
 * and key. */
int mact_norm_stats_parse(const char *json, mact_norm_stats *ns, char *err, size_t errlen);
/* The same, reading each tag's state and action statistics for the given modes (a LeRobot normalization_mapping)
 * instead of the file's norm_mode; a statistic the mode needs and the tag lacks is an error naming both. */
int mact_norm_stats_parse_modes(const char *json, int state_mode, int action_mode, mact_norm_stats *ns, char *err,
                                size_t errlen);
void mact_norm_stats_free(mact_norm_stats *ns);
/* n names (each < MACT_NORM_MAX_NAME bytes, no control character) joined by '\n' into a malloc'd string; NULL when n
 * is 0, a name breaks the rule, or memory is short (names are shown, never computed with). */
char *mact_norm_join_names(const char *const *names, int n);
/* Tag by name; NULL: the default tag, else the only tag. On failure err lists the valid tags. */
const mact_norm_tag *mact_norm_find_tag(const mact_norm_stats *ns, const char *name, char *err, size_t errlen);

/* Raw state [state.dim] -> normalised, the tag's joint frame first: 0, or MACT_ERR_INPUT when a LeRobot tag passes a
 * dim through raw (mask false) and it lies outside [-1, 1] (LeRobot refuses it: normalize_gripper). */
int mact_tag_norm_state(const mact_norm_tag *t, const float *x, float *out, char *err, size_t errlen);
/* Normalised state -> bins in [0, n_bins) (rint: round half to even; NaN -> 0, +-inf -> +-1). */
void mact_state_bins(const float *norm, int dim, int n_bins, int *bins);
/* Normalised actions [n rows, stride ld] -> robot units [n, action.dim]: clipped to [-1, 1], un-normalised on the
 * masked-in dims, then the joint frame undone. */
void mact_tag_unnorm_actions(const mact_norm_tag *t, const float *a, int n, int ld, float *out);
/* The inverse: actions [n, action.dim] in robot units -> normalised, row stride ld_out (RTC's previous rows, the
 * evaluation's normalised metrics): the joint frame applied, then normalised and clipped to [-1, 1] in the quantile
 * and min-max modes; masked-out dims pass through. */
void mact_tag_norm_actions(const mact_norm_tag *t, const float *x, int n, int ld_out, float *out);
#endif
