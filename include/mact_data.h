/* mact_data: the data toolkit (libmact_data.so / libmact_data.a; pkg-config mact_data). LeRobot datasets (v2.x and
 * v3.0 trees: parquet columns, images stored in the parquet, camera videos), their norm statistics as MolmoAct2's
 * norm_stats.json, the open-loop evaluation of a policy on them (docs/datasets.md), and synthetic datasets.
 *
 *   mact_dataset *d;
 *   if (mact_dataset_open("/data/so101_pick", &d, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
 *   mact_dataset_info di;
 *   mact_dataset_get_info(d, &di);                  // di.n_episodes, di.fps, ...
 *   int64_t rows; int dim;
 *   mact_dataset_read(d, 0, "action", NULL, 0, &rows, &dim, err, sizeof err);   // the size
 *   double *a = malloc(sizeof(double) * rows * dim);
 *   mact_dataset_read(d, 0, "action", a, (size_t)(rows * dim), &rows, &dim, err, sizeof err);
 *   mact_dataset_close(d);
 *
 * The conventions are mact.h's: every function that can fail returns a mact_status and writes its message to the
 * caller's err buffer; buffers are the caller's; a zero field of an options struct selects its default; nothing
 * exits or aborts. Functions that print (a report, progress) take a FILE *, NULL for silence. Strings returned
 * through the structs below are the dataset's and live until mact_dataset_close. */
#ifndef MACT_DATA_H
#define MACT_DATA_H
#include <stdio.h>
#include "mact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The MACT_VERSION_STRING this toolkit was built from (a binding checks it, as it checks mact_version()). */
MACT_API const char *mact_data_version(void);

/* ---- datasets ---- */

typedef struct mact_dataset mact_dataset;

/* Opens the LeRobot dataset at dir (meta/info.json, episodes, tasks); the data files are read on demand. */
MACT_API mact_status mact_dataset_open(const char *dir, mact_dataset **out, char *err, size_t errlen);
MACT_API void mact_dataset_close(mact_dataset *d);

typedef struct {
    const char *dir;
    const char *version;        /* "v2.0", "v2.1", "v3.0" */
    const char *robot;          /* "" when info.json names none */
    int fps;
    int n_episodes, n_tasks, n_features, n_cameras;
    int64_t n_frames;           /* the episodes' lengths summed */
    int64_t info_total_frames;  /* info.json's total_frames */
} mact_dataset_info;
MACT_API void mact_dataset_get_info(const mact_dataset *d, mact_dataset_info *out);

typedef struct {
    const char *key;
    const char *dtype;          /* float32, float64, int64, int32, bool, string, video, image */
    int ndim, shape[4];
    int n_names;                /* names: mact_dataset_feature_name */
    int is_camera;              /* a video or image feature */
    int height, width;          /* cameras: info.json's size */
    const char *codec;          /* video: info.json's codec ("" when none) */
} mact_dataset_feature;
/* Feature i (0 .. n_features - 1, info.json order); MACT_ERR_INPUT when out of range. */
MACT_API mact_status mact_dataset_feature_at(const mact_dataset *d, int i, mact_dataset_feature *out);
/* The index of feature key, or -1. */
MACT_API int mact_dataset_find_feature(const mact_dataset *d, const char *key);
/* Name k of feature i (info.json's "names"), or NULL. */
MACT_API const char *mact_dataset_feature_name(const mact_dataset *d, int i, int k);

typedef struct {
    int64_t index;              /* episode_index */
    int64_t length;             /* frames */
    const char *task;           /* the first task */
} mact_dataset_episode;
/* Episode i (a position, 0 .. n_episodes - 1, not episode_index); MACT_ERR_INPUT when out of range. */
MACT_API mact_status mact_dataset_episode_at(const mact_dataset *d, int i, mact_dataset_episode *out);

/* Feature key of episode i as doubles, row-major [*rows x *dim] in frame order, into out (cap values). *rows and
 * *dim are set whenever the column was read, also when out is NULL or too small (then MACT_ERR_INPUT): call once
 * with out NULL for the size. */
MACT_API mact_status mact_dataset_read(mact_dataset *d, int episode, const char *key, double *out, size_t cap,
                                       int64_t *rows, int *dim, char *err, size_t errlen);

/* Where a frame came from (mact_dataset_frame). */
typedef struct {
    int height, width;
    int from_video;             /* 0: the PNG/JPEG bytes of the parquet row */
    double time_s;              /* video: the query time, from_timestamp + timestamp[t] (LeRobot's) */
    char codec[32];             /* video: the container's codec */
    char source[4096];          /* video: the file */
} mact_dataset_frame_info;
/* Frame t (frame_index, from 0) of episode i of camera key, decoded, before any resize for a model: HxWx3 RGB
 * into rgb (cap bytes; NULL: only *info). Video: the frame within tolerance_s of the query time (0: LeRobot's
 * 1e-4 s), decoded with threads decoder threads (0: one). */
MACT_API mact_status mact_dataset_frame(mact_dataset *d, int episode, int64_t t, const char *camera, double tolerance_s,
                                        int threads, uint8_t *rgb, size_t cap, mact_dataset_frame_info *info, char *err,
                                        size_t errlen);

/* Checks every data file and camera video against the metadata (docs/datasets.md): one line per problem into
 * buf (NUL-terminated, truncated to cap), their number in *n_problems. MACT_ERR_INPUT without d, buf or cap. */
MACT_API mact_status mact_dataset_check(mact_dataset *d, char *buf, size_t cap, int *n_problems);

/* `mact dataset info`'s summary of the dataset at dir (versions, episodes, features, cameras with their videos'
 * codecs and frames, problems) printed to out. *n_problems: the count (the CLI exits 3 when any). */
MACT_API mact_status mact_dataset_report(const char *dir, FILE *out, int *n_problems, char *err, size_t errlen);

/* Every row of a parquet file as a JSON array of objects (`mact dataset dump`, for cross-checks), to out. */
MACT_API mact_status mact_parquet_dump_json(const char *path, FILE *out, char *err, size_t errlen);

/* FFmpeg's own log lines (decoder banners) off: call once before reading videos when they would drown a report. */
MACT_API void mact_data_quiet_logs(void);

/* ---- norm statistics (`mact stats`) ---- */

typedef enum {
    MACT_STATS_LEROBOT = 0,     /* LeRobot's: per-episode 5000-bin histograms in the feature's own precision */
    MACT_STATS_LEROBOT_F64,     /* the same in double throughout */
    MACT_STATS_EXACT,           /* all values sorted, linear interpolation */
} mact_stats_method;

typedef struct {
    const char *const *datasets;  /* the LeRobot dataset dirs pooled */
    int n_datasets;
    const char *tag;              /* metadata_by_tag key written (required) */
    const char *out;              /* norm_stats.json: created, or its tag replaced in place */
    const char *action_key;       /* NULL: "action" */
    const char *state_key;        /* NULL: "observation.state" */
    mact_stats_method method;     /* 0: LEROBOT */
    int horizon;                  /* action_horizon; 0: the tag's in out, else 30 */
    const char *control_mode;     /* NULL: the tag's in out, else "absolute joint pose" */
    const char *setup_type;       /* NULL: the tag's in out, else "" */
    int normalize_gripper;        /* 0: the tag's in out, else yes; 1: yes; 2: no */
    const char *lerobot_stats;    /* also LeRobot's meta/stats.json layout here (NULL: no) */
} mact_stats_options;

/* MolmoAct2's molmoact2_norm_stats.v1 statistics of the action and state features over every episode of the
 * datasets (docs/datasets.md, docs/spec/datasets.md 2.3), written to o->out atomically (temp + rename). *frames
 * (may be NULL): the frames pooled. */
MACT_API mact_status mact_stats_compute(const mact_stats_options *o, double *frames, char *err, size_t errlen);
/* "lerobot", "lerobot-f64", "exact" -> *out; MACT_ERR_INPUT otherwise. */
MACT_API mact_status mact_stats_method_parse(const char *name, mact_stats_method *out);

/* ---- open-loop evaluation (`mact eval`, docs/datasets.md) ---- */

/* What is evaluated: a policy (a session, or any function with mact_predict's contract), or one of the two
 * baselines that need none. */
typedef enum { MACT_EVAL_MODEL = 0, MACT_EVAL_HOLD, MACT_EVAL_REPLAY } mact_eval_policy;

#define MACT_EVAL_MAX_HORIZON 256
#define MACT_EVAL_MAX_CAMERAS 8
#define MACT_EVAL_MAX_FIRST_K 16

/* A policy the evaluation asks for action chunks, with mact_predict's contract: in is checked, out->actions gets
 * [n_steps, action_dim] in robot units and out->n_steps / action_dim are set. Returns MACT_OK, or a status with its
 * message in err. Called from the thread that called mact_eval_run. */
typedef mact_status (*mact_eval_predict_fn)(void *user, const mact_predict_input *in, mact_predict_output *out,
                                             char *err, size_t errlen);
/* The mact_eval_predict_fn of a session: user is the mact_session (the model it was made on, at its precision). */
MACT_API mact_status mact_eval_session_predict(void *session, const mact_predict_input *in, mact_predict_output *out,
                                               char *err, size_t errlen);

typedef struct {
    const char *dataset;          /* the LeRobot dataset (required) */
    const char *out;              /* the result dir: episodes/, episodes.jsonl, result.json (required) */
    mact_eval_policy policy;      /* MODEL (0): predict; HOLD / REPLAY: the baselines */
    mact_eval_predict_fn predict; /* MODEL: the policy (mact_eval_session_predict with a session, or the caller's) */
    void *predict_user;           /* its first argument */
    const mact_tag *tag;          /* the norm tag the policy predicts with (mact_model_tag; the baselines:
                                   * mact_norm_stats_tag): the metrics' statistics, its camera order and horizon
                                   * by default, its name passed to predict (required) */
    const char *policy_id;        /* names the policy in the fingerprint of the episode files (a rerun resumes only
                                   * episodes of the same settings and policy): the CLI gives the checkpoint's
                                   * config's hash; NULL: "" */
    const char *episodes;         /* "A:B" (episode_index in [A, B)) or "I,J,..."; NULL: all */
    int horizon;                  /* 0: the tag's action_horizon, else 10 */
    const int *first_k;           /* the first-k step windows reported; n_first_k 0: 5, 10, 30 */
    int n_first_k;
    double static_threshold;      /* frames whose gt chunk moves <= this (raw units) are excluded; default 0 */
    uint64_t seed;
    int steps;                    /* flow steps passed to predict; 0: the model's */
    const char *const *cameras;   /* the policy's cameras in order; n_cameras 0: the tag's, else the dataset's */
    int n_cameras;
    const char *action_key;       /* NULL: "action" */
    const char *state_key;        /* NULL: "observation.state" */
    double tolerance_s;           /* video frames: |frame time - query time| allowed; 0: LeRobot's 1e-4 */
    /* A joint frame between the dataset and the policy, for a dataset recorded in another calibration than the
     * checkpoint was trained in (docs/spec/datasets.md 1.6): the state goes to predict as signs * state + offsets on
     * the first n_joints dims and the actions come back as signs * (a - offsets). 0: none. Refused when the tag has
     * a joint frame of its own (it would be applied twice). */
    int n_joints;
    const float *joint_signs, *joint_offsets;
    int replan;                   /* K > 0: execute K rows of each chunk (docs/datasets.md "Replanning") */
    int delay;                    /* with replan: D rows of the old chunk executed while inferring */
    int no_rtc_compare;           /* with replan: the RTC chain only */
    mact_rtc_options rtc;         /* with replan: the RTC chain's schedule, guidance, E, B */
    int shard, n_shards;          /* this task's episodes: position % n_shards == shard; n_shards 0: 1 */
} mact_eval_options;

typedef struct mact_eval_result mact_eval_result;

/* Evaluates the shard's episodes (each written to out/episodes/ep_NNNNNN.json as it finishes; a rerun skips those
 * already there with the same settings), then writes out/episodes.jsonl and out/result.json from every episode
 * file of out. report: the result table (stdout in the CLI); progress: the progress line, rates and warnings.
 * *result (may be NULL): the result, freed with mact_eval_result_free. MACT_ERR_INPUT: options out of range or
 * contradicting each other. */
MACT_API mact_status mact_eval_run(const mact_eval_options *o, FILE *report, FILE *progress, mact_eval_result **result,
                                   char *err, size_t errlen);

typedef struct {
    const char *out;              /* the merged dir (required) */
    const char *const *dirs;      /* the shards' out dirs */
    int n_dirs;
    const int *first_k;           /* as mact_eval_options */
    int n_first_k;
    int allow_partial;            /* merge even when episodes of the selection are missing */
} mact_eval_merge_options;
/* Merges sharded results into o->out (its episodes/, episodes.jsonl, result.json), equal to the unsharded run. */
MACT_API mact_status mact_eval_merge(const mact_eval_merge_options *o, FILE *report, mact_eval_result **result,
                                     char *err, size_t errlen);

/* result.json's text (the result's; valid until mact_eval_result_free). */
MACT_API const char *mact_eval_result_json(const mact_eval_result *r);
/* The chunk horizon H of the result. */
MACT_API int mact_eval_result_horizon(const mact_eval_result *r);
/* The per-step MAE of the policy and of the hold-still baseline, raw units, H values each (either may be NULL). */
MACT_API void mact_eval_result_per_step(const mact_eval_result *r, double *policy_mae, double *hold_mae);
/* The frames evaluated (result.json's frames_evaluated). */
MACT_API double mact_eval_result_frames(const mact_eval_result *r);
/* The policy's name as result.json states it. */
MACT_API const char *mact_eval_result_policy(const mact_eval_result *r);
/* With replan: the executed trajectory of the first evaluated episode, chain 0 (without RTC) or 1 (with RTC),
 * [*frames x *dim] into rows (cap values; NULL: only the sizes); *episode_index, *replan, *delay describe it.
 * MACT_ERR_INPUT when the result has no such chain. */
MACT_API mact_status mact_eval_result_trajectory(const mact_eval_result *r, int chain, float *rows, size_t cap,
                                                 int *frames, int *dim, int64_t *episode_index, int *replan, int *delay);
MACT_API void mact_eval_result_free(mact_eval_result *r);

/* ---- frames for analyses (`mact prune-analyze --dataset`, `mact distill-eval --dataset`) ---- */

typedef struct {
    mact_image img;               /* decoded RGB (mact.h) */
    char name[96];                /* "episode E KEY frame T" */
} mact_dataset_sample;

/* n frames spread evenly over the dataset's episodes and cameras (frame numbers i * total / n of the concatenation
 * of every episode's cameras, each camera's frames in turn), decoded: *out (free with mact_dataset_samples_free)
 * holds *count of them. MACT_ERR_FORMAT for a dataset without a camera. */
MACT_API mact_status mact_dataset_sample_frames(const char *dir, int n, mact_dataset_sample **out, int *count, char *err,
                                                size_t errlen);
MACT_API void mact_dataset_samples_free(mact_dataset_sample *samples, int n);

#ifdef __cplusplus
}
#endif
#endif
