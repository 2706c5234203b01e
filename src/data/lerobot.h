/* LeRobot dataset reader (docs/spec/datasets.md 1): meta/info.json (its data_path / video_path templates;
 * unknown keys ignored), episodes (meta/episodes.jsonl in v2.x, the episodes parquet in v3.0), tasks
 * (tasks.jsonl / tasks.parquet) and the numeric features of the data parquet files. Videos are located
 * here (mact_ld_episode_video) and decoded by io/video.h. Errors name the file and the key. */
#ifndef MACT_IO_LEROBOT_H
#define MACT_IO_LEROBOT_H
#include <stddef.h>
#include <stdint.h>

#define MACT_LD_MAX_FEATURES 64
#define MACT_LD_MAX_NAMES 64

typedef struct {
    char key[256];
    char dtype[32];       /* float32, float64, int64, int32, bool, string, video, image */
    int ndim, shape[4];
    int n_names;
    char names[MACT_LD_MAX_NAMES][64];
    /* video only (info.json's "info"): codec, size */
    char codec[32];
    int height, width;
} mact_ld_feature;

typedef struct {
    int64_t index, length;
    int64_t chunk, file;        /* v3 data/chunk_index, data/file_index (v2: episode_chunk, -1) */
    int64_t from, to;           /* v3 dataset_from_index / dataset_to_index; v2 cumulative */
    char task[256];             /* first task */
} mact_ld_episode;

typedef struct mact_ld mact_ld;

int mact_ld_open(const char *dir, mact_ld **out, char *err, size_t errlen);
void mact_ld_close(mact_ld *d);

const char *mact_ld_version(const mact_ld *d);     /* "v2.0", "v2.1", "v3.0" */
const char *mact_ld_robot(const mact_ld *d);       /* "" when null */
int mact_ld_fps(const mact_ld *d);
int64_t mact_ld_total_frames(const mact_ld *d);    /* info.json's */
int mact_ld_num_features(const mact_ld *d);
const mact_ld_feature *mact_ld_feature_at(const mact_ld *d, int i);
const mact_ld_feature *mact_ld_find_feature(const mact_ld *d, const char *key);
int mact_ld_num_episodes(const mact_ld *d);
const mact_ld_episode *mact_ld_episode_at(const mact_ld *d, int i);
int mact_ld_num_tasks(const mact_ld *d);
const char *mact_ld_dir(const mact_ld *d);

/* The data parquet path of episode i (into buf). */
int mact_ld_data_path(const mact_ld *d, int i, char *buf, size_t n);
/* The video path of episode i, camera key (into buf); -1 when the dataset has no video_path (or, v3.0, the
 * episodes lack the camera's videos/KEY/chunk_index and file_index columns) or it does not format. */
int mact_ld_video_path(const mact_ld *d, int i, const char *key, char *buf, size_t n);
/* The video of episode i (index into the episodes, not episode_index) for video feature key: its path, and
 * the time of the episode's first frame in it (v3.0: videos/KEY/from_timestamp, episodes concatenated; v2.x:
 * one file per episode, 0). Frame t of the episode is at *from_ts + timestamp[t] (docs/spec/datasets.md 1.5).
 * 0, MACT_ERR_INPUT (no such episode or video feature) or MACT_ERR_FORMAT (no video_path, a template that
 * does not format, or v3.0 episodes without the camera's videos/KEY/... columns). */
int mact_ld_episode_video(const mact_ld *d, int i, const char *key, char *path, size_t n, double *from_ts);
/* [*from_ts, *to_ts) of episode i in its video (v2.x: 0 and length / fps); codes as above. */
int mact_ld_episode_video_range(const mact_ld *d, int i, const char *key, double *from_ts, double *to_ts);

/* Feature `key` of episode i as doubles [*rows x *dim] (malloc'd; the caller frees). The rows are the
 * episode's frames in frame order; their count must equal the episode's length. */
int mact_ld_read(mact_ld *d, int i, const char *key, double **out, int64_t *rows, int *dim, char *err, size_t errlen);

/* The encoded bytes (PNG/JPEG) of image feature `key` for every frame of episode i, in frame order: frame t is
 * bytes[off[t] .. off[t+1]) (both malloc'd; the caller frees). */
int mact_ld_read_images(mact_ld *d, int i, const char *key, uint8_t **bytes, int64_t **off, int64_t *rows,
                        char *err, size_t errlen);

/* Checks every data file against the metadata (missing files, frame counts, feature shapes) and every
 * camera video (missing, unreadable, a template that does not resolve, the container's codec or size
 * disagreeing with info.json, frame counts: v2.x the video's frames vs the episode's length, v3.0 the
 * frames within [from_timestamp, to_timestamp) vs the length); appends one line per problem to buf
 * (NUL-terminated). Returns the number of problems. */
int mact_ld_check(mact_ld *d, char *buf, size_t n);
#endif
