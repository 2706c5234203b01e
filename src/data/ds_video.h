/* Camera videos of a LeRobot dataset as the tools read them (eval's frame reader, dataset frame, prune's
 * calibration frames): one camera's video kept open while consecutive episodes share the file (v3.0), and
 * LeRobot's query time of frame t, from_timestamp + the parquet's timestamp[t] (t / fps without the column). */
#ifndef MACT_TOOLS_DS_VIDEO_H
#define MACT_TOOLS_DS_VIDEO_H
#include <stddef.h>
#include <stdint.h>
#include "data/lerobot.h"
#include "data/video.h"

typedef struct {
    mact_video *v;       /* NULL until the first episode */
    char path[4096];
    int threads;         /* decoder threads (0: one) */
} ds_video;

/* Makes dv hold episode i's (index into the episodes) video of camera key, opening it (dv->threads decoder
 * threads) unless it is already the open one; *from: the episode's from_timestamp in it. 0, or -1 with err set. */
int ds_video_episode(mact_ld *d, int i, const char *key, ds_video *dv, double *from, char *err, size_t el);
void ds_video_close(ds_video *dv);

/* Episode i's timestamp column, n values (malloc'd; the caller frees), or *ts = NULL when the dataset has none.
 * 0, or -1 with err set (unreadable, or not n x 1 values). */
int ds_timestamps(mact_ld *d, int i, int64_t n, double **ts, char *err, size_t el);

static inline double ds_query_time(const mact_ld *d, double from, const double *ts, int64_t t)
{
    return from + (ts ? ts[t] : (double)t / mact_ld_fps(d));
}
#endif
