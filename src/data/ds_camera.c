#include "data/ds_camera.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"

int ds_camera_open(mact_ld *d, const char *key, int threads, double tolerance_s, ds_camera *c, char *err, size_t el)
{
    memset(c, 0, sizeof *c);
    c->episode = -1;
    const mact_ld_feature *ft = mact_ld_find_feature(d, key);
    if (!ft || (strcmp(ft->dtype, "video") && strcmp(ft->dtype, "image"))) {
        snprintf(err, el, "%s: no camera '%s' (a video or image feature of meta/info.json)", mact_ld_dir(d), key);
        return -1;
    }
    c->key = key;
    c->video = !strcmp(ft->dtype, "video");
    c->threads = threads;
    c->tolerance_s = tolerance_s > 0 ? tolerance_s : 1e-4;
    return 0;
}

/* the episode's video file open in c (kept when it is the file already open) and its from_timestamp */
static int open_video(mact_ld *d, int i, ds_camera *c, char *err, size_t el)
{
    char path[4096];
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    int r = mact_ld_episode_video(d, i, c->key, path, sizeof path, &c->from);
    if (r) {
        snprintf(err, el, "%s: episode %lld camera %s: %s", mact_ld_dir(d), e ? (long long)e->index : (long long)i,
                 c->key, r == MACT_ERR_INPUT ? "no such video"
                         : "no video path (info.json video_path, or the v3.0 videos/KEY/... columns)");
        return -1;
    }
    if (c->v && !strcmp(path, c->path)) return 0;
    mact_video_close(c->v);
    c->v = NULL;
    snprintf(c->path, sizeof c->path, "%s", path);
    return mact_video_open(path, c->threads > 0 ? c->threads : 1, &c->v, err, el) ? -1 : 0;
}

/* episode i's timestamp column into c->ts (NULL when the dataset has none): n x 1 values or an error */
static int read_timestamps(mact_ld *d, int i, int64_t n, ds_camera *c, char *err, size_t el)
{
    if (!mact_ld_find_feature(d, "timestamp")) return 0;
    int64_t rows;
    int dim;
    if (mact_ld_read(d, i, "timestamp", &c->ts, &rows, &dim, err, el)) return -1;
    if (rows != n || dim != 1) {
        const mact_ld_episode *e = mact_ld_episode_at(d, i);
        snprintf(err, el, "%s: episode %lld: timestamp has %lld x %d values for %lld frames", mact_ld_dir(d),
                 e ? (long long)e->index : (long long)i, (long long)rows, dim, (long long)n);
        return -1;
    }
    return 0;
}

static void release_episode(ds_camera *c)
{
    free(c->ts);
    free(c->bytes);
    free(c->off);
    c->ts = NULL;
    c->bytes = NULL;
    c->off = NULL;
    c->rows = 0;
    c->episode = -1;
}

int ds_camera_episode(mact_ld *d, int i, ds_camera *c, char *err, size_t el)
{
    release_episode(c);
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    if (!e) {
        snprintf(err, el, "%s: no episode at position %d", mact_ld_dir(d), i);
        return -1;
    }
    int rc = c->video ? open_video(d, i, c, err, el) || read_timestamps(d, i, e->length, c, err, el)
                      : mact_ld_read_images(d, i, c->key, &c->bytes, &c->off, &c->rows, err, el) != 0;
    if (rc) {
        release_episode(c);
        return -1;
    }
    if (c->video) c->rows = e->length;
    c->episode = i;
    return 0;
}

int ds_camera_frame(const mact_ld *d, ds_camera *c, int64_t t, mact_image *img, double *time_s, char *err, size_t el)
{
    if (c->episode < 0 || t < 0 || t >= c->rows) {
        snprintf(err, el, "frame %lld is outside the episode loaded (%lld frames)", (long long)t, (long long)c->rows);
        return -1;
    }
    if (!c->video)
        return mact_image_load_memory(c->bytes + c->off[t], (size_t)(c->off[t + 1] - c->off[t]), img, err, el) ? -1 : 0;
    const double q = c->from + (c->ts ? c->ts[t] : (double)t / mact_ld_fps(d));
    if (time_s) *time_s = q;
    return mact_video_frame_at(c->v, q, c->tolerance_s, img, err, el) ? -1 : 0;
}

void ds_camera_close(ds_camera *c)
{
    release_episode(c);
    mact_video_close(c->v);
    c->v = NULL;
    c->path[0] = 0;
}
