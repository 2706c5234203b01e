/* The frame producer of `mact eval`: one thread walks the shard's episodes in order, reads their action and
 * state columns, decodes the camera frames of every evaluated frame ahead of the inference (data/ds_camera.h, the
 * one camera path: PNG/JPEG images stored in the parquet, videos at LeRobot's query time) and hands them over through
 * a small bounded queue, so decoding overlaps the model's forward pass instead of adding to it.
 *
 * Order and content are those of the single-threaded loop: episodes in selection order, frames t = 0 ..
 * n - H of each, so results do not depend on the queue. Ownership: every item's arrays and images pass to
 * the consumer, who frees them with evf_item_free. */
#ifndef MACT_TOOLS_EVAL_FRAMES_H
#define MACT_TOOLS_EVAL_FRAMES_H
#include <stdint.h>
#include "mact.h"
#include "data/lerobot.h"

#define EVF_MAX_CAMS 8

enum { EVF_FRAME, EVF_EPISODE, EVF_EPISODE_END, EVF_SKIPPED, EVF_ERROR, EVF_DONE };

typedef struct {
    int kind;
    int q;                        /* index into the selection */
    int64_t t;                    /* EVF_FRAME: the frame */
    int excluded;                 /* EVF_FRAME: the static filter dropped it (no images decoded) */
    double *act, *st;             /* EVF_EPISODE: [n x da], [n x dsd] */
    int64_t n;
    int da, dsd;
    mact_image im[EVF_MAX_CAMS];  /* EVF_FRAME, not excluded, decode on: one per camera */
    char err[2048];               /* EVF_ERROR */
} evf_item;

typedef struct {
    mact_ld *d;
    const char *dsdir, *akey, *skey;
    const char *const *cams;
    int ncam;
    int decode;                   /* 0: no images (hold / replay policies) */
    const int *sel;
    int n_sel, shard, nshard, H;
    double static_threshold;
    const char *episode_dir;      /* finished episodes: episode_dir/ep_NNNNNN.json exists */
    double tolerance_s;           /* video frames: |frame time - query time| allowed; 0: LeRobot's 1e-4 s */
    int stride;                   /* 0 or 1: every frame t; S > 1: only the frames t = 0, S, 2S, ... (eval --replan) */
} evf_options;

typedef struct evf evf;

/* Starts the producer thread (the options' pointers must outlive evf_stop). */
int evf_start(const evf_options *o, evf **out, char *err, size_t errlen);
/* The next item, in order (blocks). After EVF_ERROR or EVF_DONE nothing more comes. */
void evf_next(evf *f, evf_item *it);
/* Stops the producer (early, after an error, or at the end), frees what is still queued, joins the thread. */
void evf_stop(evf *f);
void evf_item_free(evf_item *it);

/* The static filter: frame t is excluded when the largest |gt[t+k, j] - gt[t, j]| over k < H and all j is
 * <= threshold (raw units). */
int evf_static(const double *act, int64_t t, int H, int D, double threshold);
#endif
