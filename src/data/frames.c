/* mact_dataset_sample_frames (include/mact_data.h): frames of a LeRobot dataset for the compression toolkit's
 * calibration and checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact_data.h"
#include "base/err.h"
#include "data/ds_video.h"
#include "data/lerobot.h"

void mact_dataset_samples_free(mact_dataset_sample *f, int n)
{
    for (int i = 0; f && i < n; i++) mact_image_free(&f[i].img);
    free(f);
}

mact_status mact_dataset_sample_frames(const char *dir, int n, mact_dataset_sample **out, int *count, char *err, size_t el)
{
    if (!dir || !out || !count || n < 1) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_sample_frames: a dataset, n >= 1 and outputs");
    *out = NULL;
    *count = 0;
    mact_ld *d;
    int lrc = mact_ld_open(dir, &d, err, el);
    if (lrc) return lrc < 0 ? (mact_status)lrc : MACT_ERR_FORMAT;
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
        mact_ld_close(d);
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: no image feature to calibrate on", dir);
    }
    if (n > total) n = (int)total;
    mact_dataset_sample *fr = calloc((size_t)n, sizeof *fr);
    if (!fr) {
        mact_ld_close(d);
        return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
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
                mact_dataset_sample *f = &fr[used];
                snprintf(f->name, sizeof f->name, "episode %d %s frame %lld", e, keys[k], (long long)t);
                char e2[1024];
                if (video ? mact_video_frame_at(v.v, ds_query_time(d, from, ts, t), 1e-4, &f->img, err, el)
                          : mact_image_load_memory(bytes + off[t], (size_t)(off[t + 1] - off[t]), &f->img, e2, sizeof e2)) {
                    if (!video) mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s", f->name, e2);
                    rc = -1;
                    break;
                }
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
        mact_dataset_samples_free(fr, used + 1);
        return MACT_ERR_FORMAT;
    }
    *out = fr;
    *count = used;
    return MACT_OK;
}

