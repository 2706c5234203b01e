/* libFuzzer target for the video decoder (src/data/video.c over FFmpeg's libavformat / libavcodec /
 * libswscale): the input is a whole file image, read through mact_video_open_memory's custom AVIOContext.
 * An accepted file has its metadata checked (size within the caps), its packet times listed, and frames
 * asked for forward, backward (seeks) and past the end; every decoded frame must have the stream's
 * buffer size and every failure a message. FFmpeg itself is not instrumented (fuzz/README.md). */
#include "data/video.h"

#include <libavutil/log.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet++) av_log_set_level(AV_LOG_QUIET);
    char err[1024];
    err[0] = 0;
    mact_video *v = NULL;
    int rc = mact_video_open_memory(data, size, "fuzz", 1, &v, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc) {
        if (v) __builtin_trap();
        return 0;
    }
    const mact_video_meta *m = mact_video_info(v);
    if (m->width <= 0 || m->height <= 0 || m->width > MACT_IMAGE_MAX_SIDE || m->height > MACT_IMAGE_MAX_SIDE ||
        (int64_t)m->width * m->height > MACT_IMAGE_MAX_PIXELS || m->n_frames < 0 || !memchr(m->codec, 0, sizeof m->codec))
        __builtin_trap();
    double *t = NULL;
    int64_t n = 0;
    err[0] = 0;
    rc = mact_video_frame_times(v, &t, &n, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    for (int64_t i = 1; !rc && i < n; i++)
        if (!(t[i] >= t[i - 1])) __builtin_trap();
    /* the first frames in order, then backwards (a seek), then a time past the last packet */
    double want[8];
    int k = 0;
    for (int64_t i = 0; !rc && i < n && k < 4; i++) want[k++] = t[i];
    if (!rc && n > 1) want[k++] = t[0];
    if (!rc && n > 0) want[k++] = t[n - 1] + 10;
    free(t);
    mact_image img = {0};
    volatile unsigned sink = 0;
    for (int i = 0; i < k; i++) {
        if (!isfinite(want[i]) || want[i] < 0 || want[i] > 1e6) continue;
        err[0] = 0;
        rc = mact_video_frame_at(v, want[i], 1e-4, &img, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (rc) continue;
        if (!img.data || img.width <= 0 || img.height <= 0 || img.width > MACT_IMAGE_MAX_SIDE || img.height > MACT_IMAGE_MAX_SIDE)
            __builtin_trap();
        sink += img.data[0] + img.data[img.width * img.height * 3 - 1];  /* the whole buffer is there */
    }
    (void)sink;
    mact_image_free(&img);
    mact_video_close(v);
    return 0;
}
