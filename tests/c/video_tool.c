/* Test helper for tests/test_dataset_video.sh (not a suite: its name has no test_ prefix).
 *   video_tool write FILE.mp4 CODEC W H FPS N       N frames numbered 0..N-1 (src/data/video_write.h)
 *   video_tool info FILE.mp4                        codec, size, n_frames, fps, duration (mact_video_info)
 *   video_tool at FILE.mp4 T [TOL]                  the number carried by the frame at T seconds
 *   video_tool seq DIR CAMERA                       every frame of every episode in order: its number must
 *                                                   be (camera, episode, frame); prints "ok FRAMES"
 *   video_tool random DIR CAMERA SEED COUNT         COUNT (episode, frame) picks in random order through one
 *                                                   open video per file; prints "ok COUNT back B fwd F"
 * Errors go to stderr, the exit status is 1. Numbers: camera << 20 | (episode & 255) << 12 | frame. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/lerobot.h"
#include "data/video.h"
#include "synth/video_write.h"

static int die(const char *m) { fprintf(stderr, "video_tool: %s\n", m); return 1; }

static uint64_t rng_state;
static uint64_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }

/* checks (episode i, frame t) of camera cam through the cached open video *vp (reopened when the file changes) */
static int check_frame(mact_ld *d, int cam_i, const char *cam, int i, int64_t t, mact_video **vp, char *open_path,
                       mact_image *img, int *seeks_back, double *last_t)
{
    char path[4096], err[2048];
    double from;
    int rc = mact_ld_episode_video(d, i, cam, path, sizeof path, &from);
    if (rc) { fprintf(stderr, "episode %d camera %s: no video (%d)\n", i, cam, rc); return 1; }
    if (!*vp || strcmp(path, open_path)) {
        mact_video_close(*vp);
        *vp = NULL;
        if (mact_video_open(path, 1, vp, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        snprintf(open_path, 4096, "%s", path);
        *last_t = -1;
    }
    double ts = from + (double)t / mact_ld_fps(d);
    if (ts < *last_t) (*seeks_back)++;
    *last_t = ts;
    if (mact_video_frame_at(*vp, ts, 1e-4, img, err, sizeof err)) { fprintf(stderr, "episode %d frame %lld: %s\n", i, (long long)t, err); return 1; }
    uint32_t num;
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    uint32_t want = (uint32_t)cam_i << 20 | (uint32_t)(e->index & 255) << 12 | (uint32_t)t;
    if (mact_vw_read_number(img->data, (int)img->width, (int)img->height, &num)) {
        fprintf(stderr, "episode %d frame %lld (t=%.6f s in %s): no readable number\n", i, (long long)t, ts, path);
        return 1;
    }
    if (num != want) {
        fprintf(stderr, "episode %d frame %lld (t=%.6f s in %s): got camera %u episode %u frame %u, want camera %d episode %lld frame %lld\n",
                i, (long long)t, ts, path, num >> 20, (num >> 12) & 255, num & 4095, cam_i, (long long)(e->index & 255), (long long)t);
        return 1;
    }
    return 0;
}

static int cam_index(mact_ld *d, const char *cam)
{
    int k = 0;
    for (int i = 0; i < mact_ld_num_features(d); i++) {
        const mact_ld_feature *f = mact_ld_feature_at(d, i);
        if (strcmp(f->dtype, "video")) continue;
        if (!strcmp(f->key, cam)) return k;
        k++;
    }
    return -1;
}

int main(int argc, char **argv)
{
    char err[2048];
    mact_video_quiet_logs();
    if (argc == 9 && !strcmp(argv[1], "write")) {
        mact_vw_options o = {.codec = argv[3], .width = atoi(argv[4]), .height = atoi(argv[5]), .fps = atoi(argv[6])};
        mact_vw *w;
        int n = atoi(argv[7]);
        (void)argv[8];
        if (mact_vw_open(argv[2], &o, &w, err, sizeof err)) return die(err);
        for (int i = 0; i < n; i++)
            if (mact_vw_frame(w, (uint32_t)i, i, 0, err, sizeof err)) { mact_vw_close(w, NULL, 0); return die(err); }
        if (mact_vw_close(w, err, sizeof err)) return die(err);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "info")) {
        mact_video *v;
        if (mact_video_open(argv[2], 1, &v, err, sizeof err)) return die(err);
        const mact_video_meta *m = mact_video_info(v);
        printf("codec %s size %dx%d frames %lld fps %.3f duration %.6f\n", m->codec, m->width, m->height, (long long)m->n_frames, m->fps, m->duration_s);
        mact_video_close(v);
        return 0;
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "at")) {
        mact_video *v;
        if (mact_video_open(argv[2], 1, &v, err, sizeof err)) return die(err);
        mact_image img = {0};
        int rc = mact_video_frame_at(v, atof(argv[3]), argc == 5 ? atof(argv[4]) : 1e-4, &img, err, sizeof err);
        uint32_t num;
        if (!rc) {
            if (mact_vw_read_number(img.data, (int)img.width, (int)img.height, &num)) printf("no number\n");
            else printf("number %u\n", num);
        } else fprintf(stderr, "video_tool: %s\n", err);
        mact_image_free(&img);
        mact_video_close(v);
        return rc ? 1 : 0;
    }
    if ((argc == 4 && !strcmp(argv[1], "seq")) || (argc == 6 && !strcmp(argv[1], "random"))) {
        mact_ld *d;
        if (mact_ld_open(argv[2], &d, err, sizeof err)) return die(err);
        const char *cam = argv[3];
        int ci = cam_index(d, cam), rc = 0, back = 0;
        if (ci < 0) { mact_ld_close(d); return die("no such video camera"); }
        mact_video *v = NULL;
        char open_path[4096] = "";
        mact_image img = {0};
        double last_t = -1;
        int64_t count = 0;
        if (argv[1][0] == 's') {
            for (int i = 0; i < mact_ld_num_episodes(d) && !rc; i++)
                for (int64_t t = 0; t < mact_ld_episode_at(d, i)->length && !rc; t++, count++)
                    rc = check_frame(d, ci, cam, i, t, &v, open_path, &img, &back, &last_t);
            if (!rc) printf("ok %lld frames\n", (long long)count);
        } else {
            rng_state = strtoull(argv[4], NULL, 0) * 2654435761u + 1;
            int64_t n = atoll(argv[5]);
            for (int64_t k = 0; k < n && !rc; k++, count++) {
                int i = (int)(rnd() % (uint64_t)mact_ld_num_episodes(d));
                int64_t t = (int64_t)(rnd() % (uint64_t)mact_ld_episode_at(d, i)->length);
                rc = check_frame(d, ci, cam, i, t, &v, open_path, &img, &back, &last_t);
            }
            if (!rc) printf("ok %lld back %d\n", (long long)count, back);
        }
        mact_image_free(&img);
        mact_video_close(v);
        mact_ld_close(d);
        return rc;
    }
    fprintf(stderr, "usage: video_tool write|info|at|seq|random ... (see the source)\n");
    return 2;
}
