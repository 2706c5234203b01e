/* Synthetic LeRobot datasets (`mact synth-dataset`, the tests' datasets): v2.1 and v3.0 trees (docs/spec/datasets.md 1)
 * with SO-101-like or LIBERO-like signals, written with src/synth/pq_write.c in pyarrow's layout or a
 * variant. Deterministic for a seed. */
#ifndef MACT_DEV_LEROBOT_SYNTH_H
#define MACT_DEV_LEROBOT_SYNTH_H
#include <stdint.h>
#include <stddef.h>
#include "mact.h"

/* ---- synthetic datasets (`mact synth-dataset`) ---- */

typedef struct {
    int version;                  /* 21 (v2.1, the default when 0) or 30 (v3.0) */
    int libero;                   /* LIBERO-like (10 fps, 8-D state, 7-D delta action); else SO-101-like (30 fps, 6
                                     joints); either with two cameras, PNG images in the parquet unless video */
    int n_episodes;               /* 0: 4 */
    int min_len, max_len;         /* frames per episode; 0: 150..450 (SO-101), 60..160 (LIBERO) */
    uint64_t seed;
    const char *variant;          /* the parquet layout: NULL/"pyarrow", or one of mact_lerobot_synth_variants() */
    int ts_f64;                   /* float64 timestamps */
    const char *video;            /* NULL: no videos; "av1", "h264", "hevc", "mpeg4": the two cameras are mp4 video
                                     features (frame t of episode e of camera c carries the number
                                     c << 20 | (e & 255) << 12 | t); v2.1: one file per episode and camera; v3.0:
                                     camera c concatenates 2 + c episodes per file */
    int video_w, video_h;         /* frame size; 0: 64 x 64 (libsvtav1's smallest) */
    int no_cameras;               /* no camera feature at all (a state-only recording) */
    const char *state_names;      /* NULL: the robot's; else the state's names, comma-separated, one per dim (a
                                     dataset whose state and action name their joints differently) */
} mact_lerobot_synth_options;
/* A synthetic LeRobot dataset tree at dir (docs/datasets.md). */
mact_status mact_lerobot_synth(const char *dir, const mact_lerobot_synth_options *o, char *err, size_t errlen);
/* The variants and video codecs it knows, for a usage line (static strings). */
const char *mact_lerobot_synth_variants(void);
const char *mact_lerobot_synth_codecs(void);
/* The number a synthetic video frame carries (camera << 20 | episode << 12 | frame), read from its pixels. */
mact_status mact_lerobot_synth_frame_number(const uint8_t *rgb, int width, int height, uint32_t *number);


typedef mact_lerobot_synth_options mact_lrs_options;
#endif
