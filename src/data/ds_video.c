#include "data/ds_video.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"

int ds_video_episode(mact_ld *d, int i, const char *key, ds_video *dv, double *from, char *err, size_t el)
{
    char path[4096];
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    int r = mact_ld_episode_video(d, i, key, path, sizeof path, from);
    if (r) {
        snprintf(err, el, "%s: episode %lld camera %s: %s", mact_ld_dir(d), e ? (long long)e->index : (long long)i, key,
                 r == MACT_ERR_INPUT ? "no such video" : "no video path (info.json video_path, or the v3.0 videos/KEY/... columns)");
        return -1;
    }
    if (dv->v && !strcmp(path, dv->path)) return 0;
    mact_video_close(dv->v);
    dv->v = NULL;
    snprintf(dv->path, sizeof dv->path, "%s", path);
    return mact_video_open(path, dv->threads > 0 ? dv->threads : 1, &dv->v, err, el) ? -1 : 0;
}

void ds_video_close(ds_video *dv)
{
    mact_video_close(dv->v);
    dv->v = NULL;
    dv->path[0] = 0;
}

int ds_timestamps(mact_ld *d, int i, int64_t n, double **ts, char *err, size_t el)
{
    *ts = NULL;
    if (!mact_ld_find_feature(d, "timestamp")) return 0;
    int64_t rows;
    int dim;
    if (mact_ld_read(d, i, "timestamp", ts, &rows, &dim, err, el)) return -1;
    if (rows != n || dim != 1) {
        const mact_ld_episode *e = mact_ld_episode_at(d, i);
        snprintf(err, el, "%s: episode %lld: timestamp has %lld x %d values for %lld frames", mact_ld_dir(d),
                 e ? (long long)e->index : (long long)i, (long long)rows, dim, (long long)n);
        free(*ts);
        *ts = NULL;
        return -1;
    }
    return 0;
}
