/* mact_dataset_sample_frames (include/mact_data.h): frames of a LeRobot dataset for the compression toolkit's
 * calibration and checks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact_data.h"
#include "base/err.h"
#include "data/ds_camera.h"
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
    int64_t total = 0;
    for (int e = 0; e < mact_ld_num_episodes(d); e++) total += mact_ld_episode_at(d, e)->length * nk;
    if (!nk || total < 1) {
        mact_ld_close(d);
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: no image feature to calibrate on", dir);
    }
    if (n > total) n = (int)total;
    mact_dataset_sample *fr = calloc((size_t)n, sizeof *fr);
    ds_camera *cam = calloc((size_t)nk, sizeof *cam);
    if (!fr || !cam) {
        free(fr);
        free(cam);
        mact_ld_close(d);
        return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nk; k++) cam[k].episode = -1;
    for (int k = 0; k < nk && !rc; k++) rc = ds_camera_open(d, keys[k], 1, 0, &cam[k], err, el);
    int used = 0;
    int64_t base = 0, next = 0;  /* the concatenation index of the next frame to take: used * total / n */
    for (int e = 0; e < mact_ld_num_episodes(d) && !rc && used < n; e++)
        for (int k = 0; k < nk && !rc && used < n; k++) {
            const int64_t len = mact_ld_episode_at(d, e)->length;
            if (next >= base + len) { base += len; continue; }
            if (ds_camera_episode(d, e, &cam[k], err, el)) { rc = -1; break; }
            while (used < n && next < base + cam[k].rows) {
                const int64_t t = next - base;
                mact_dataset_sample *f = &fr[used];
                snprintf(f->name, sizeof f->name, "episode %d %s frame %lld", e, keys[k], (long long)t);
                char e2[2048];
                if (ds_camera_frame(d, &cam[k], t, &f->img, NULL, e2, sizeof e2)) {
                    if (cam[k].video) snprintf(err, el, "%s", e2);
                    else mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s", f->name, e2);
                    rc = -1;
                    break;
                }
                used++;
                next = (int64_t)((double)used * (double)total / (double)n);
            }
            base += len;
        }
    for (int k = 0; k < nk; k++) ds_camera_close(&cam[k]);
    free(cam);
    mact_ld_close(d);
    if (rc) {
        mact_dataset_samples_free(fr, used + 1);
        return MACT_ERR_FORMAT;
    }
    *out = fr;
    *count = used;
    return MACT_OK;
}

