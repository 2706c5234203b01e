/* Synthetic LeRobot datasets for tests (development code): v2.1 and v3.0 trees (docs/spec/datasets.md 1)
 * with SO-101-like or LIBERO-like signals, written with src/dev/pq_write.c in pyarrow's layout or a
 * variant. Deterministic for a seed. */
#ifndef MACT_DEV_LEROBOT_SYNTH_H
#define MACT_DEV_LEROBOT_SYNTH_H
#include <stdint.h>
#include <stddef.h>

typedef struct {
    int version;        /* 21 (v2.1, the default when 0) or 30 (v3.0) */
    int libero;         /* LIBERO-like (10 fps, 8-D state, 7-D delta action, PNG images in the parquet) */
    int n_episodes;     /* 0: 4 */
    int min_len, max_len; /* frames per episode; 0: 150..450 (SO-101), 60..160 (LIBERO) */
    uint64_t seed;
    const char *variant; /* NULL/"pyarrow", "plain", "fallback", "multipage", "rowgroups", "v2pages",
                            "zstd", "gzip", "uncompressed" */
    int ts_f64;         /* float64 timestamps */
    const char *video;  /* NULL: no videos; "av1", "h264", "hevc", "mpeg4": the two cameras are mp4 video
                           features (src/dev/video_write.h; frame t of episode e of camera c carries the
                           number c << 20 | (e & 255) << 12 | t). v2.1: one file per episode and camera; v3.0:
                           camera c concatenates 2 + c episodes per file (videos/KEY/from_timestamp ...) */
    int video_w, video_h; /* frame size; 0: 64 x 64 (libsvtav1's smallest) */
} mact_lrs_options;

/* The variants, space-separated (static string). */
const char *mact_lrs_variants(void);
int mact_lerobot_synth(const char *dir, const mact_lrs_options *o, char *err, size_t errlen);
#endif
