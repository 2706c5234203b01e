/* data/frames.h: frames of a LeRobot dataset for the compression toolkit's calibration and checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "data/ds_video.h"
#include "data/frames.h"
#include "data/lerobot.h"

void mact_ds_frames_free(ds_frame *f, int n)
{
    for (int i = 0; f && i < n; i++) { free(f[i].bytes); mact_image_free(&f[i].img); }
    free(f);
}

int mact_ds_frames(const char *dir, long n, ds_frame **out, int *count, char *err, size_t el)
{
    *out = NULL;
    *count = 0;
    mact_ld *d;
    if (mact_ld_open(dir, &d, err, el)) return -1;
    const char *keys[64];
    int nk = 0, rc = 0;
    for (int f = 0; f < mact_ld_num_features(d) && nk < 64; f++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, f);
        if (!strcmp(ft->dtype, "image") || !strcmp(ft->dtype, "video")) keys[nk++] = ft->key;
    }
    ds_video v = {0};
    int64_t total = 0;
    for (int e = 0; e < mact_ld_num_episodes(d); e++) total += mact_ld_episode_at(d, e)->length * nk;
    if (!nk || total < 1) {
        snprintf(err, el, "%s: no image feature to calibrate on", dir);
        mact_ld_close(d);
        return -1;
    }
    if (n > total) n = (long)total;
    ds_frame *fr = calloc((size_t)n, sizeof *fr);
    if (!fr) {
        snprintf(err, el, "out of memory");
        mact_ld_close(d);
        return -1;
    }
    int used = 0;
    int64_t base = 0, next = 0;  /* the concatenation index of the next frame to take: used * total / n */
    for (int e = 0; e < mact_ld_num_episodes(d) && !rc && used < n; e++)
        for (int k = 0; k < nk && !rc && used < n; k++) {
            const int64_t len = mact_ld_episode_at(d, e)->length;
            if (next >= base + len) { base += len; continue; }
            uint8_t *bytes = NULL;
            int64_t *off = NULL, rows = len;
            double from = 0, *ts = NULL;
            const int video = !strcmp(mact_ld_find_feature(d, keys[k])->dtype, "video");
            if (video ? ds_video_episode(d, e, keys[k], &v, &from, err, el) || ds_timestamps(d, e, len, &ts, err, el)
                      : mact_ld_read_images(d, e, keys[k], &bytes, &off, &rows, err, el))
                rc = -1;
            while (!rc && used < n && next < base + rows) {
                const int64_t t = next - base;
                ds_frame *f = &fr[used];
                if (video) {
                    if (mact_video_frame_at(v.v, ds_query_time(d, from, ts, t), 1e-4, &f->img, err, el)) { rc = -1; break; }
                } else {
                    const int64_t sz = off[t + 1] - off[t];
                    f->bytes = malloc((size_t)sz + 1);
                    if (!f->bytes) { snprintf(err, el, "out of memory"); rc = -1; break; }
                    memcpy(f->bytes, bytes + off[t], (size_t)sz);
                    f->len = (size_t)sz;
                }
                snprintf(f->name, sizeof f->name, "episode %d %s frame %lld", e, keys[k], (long long)t);
                used++;
                next = (int64_t)((double)used * (double)total / (double)n);
            }
            free(bytes);
            free(off);
            free(ts);
            base += len;
        }
    ds_video_close(&v);
    mact_ld_close(d);
    if (rc) {
        mact_ds_frames_free(fr, used);
        return -1;
    }
    *out = fr;
    *count = used;
    return 0;
}

