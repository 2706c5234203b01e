/* A camera of a LeRobot dataset, read episode by episode: the one path by which mact gets a dataset's camera frames
 * (`mact dataset frame`: mact_dataset_frame; the compression toolkit's calibration frames: mact_dataset_sample_frames;
 * `mact eval`'s frame producer: eval_frames.c). Below it, data/video.h decodes a video file (FFmpeg) and
 * io/image.h a PNG or JPEG; this layer knows the dataset: which file and where in it an episode's frames are.
 *   - image cameras: the episode's encoded images from its parquet rows, frame t decoded from row t;
 *   - video cameras: the episode's video kept open while consecutive episodes share the file (v3.0), frame t the one
 *     at LeRobot's query time, from_timestamp + the parquet's timestamp[t] (t / fps without the column), within a
 *     tolerance (0: LeRobot's 1e-4 s). */
#ifndef MACT_DATA_DS_CAMERA_H
#define MACT_DATA_DS_CAMERA_H
#include <stddef.h>
#include <stdint.h>
#include "data/lerobot.h"
#include "data/video.h"

typedef struct {
    const char *key;     /* the camera's feature key (the caller's string, kept for the reader's life) */
    int video;           /* the feature's dtype is video (else image) */
    int threads;         /* video: decoder threads (0: one) */
    double tolerance_s;  /* video: a frame's time within this of the query (0: 1e-4 s) */
    /* the episode loaded (ds_camera_episode) */
    int episode;         /* -1: none */
    mact_video *v;       /* video: the open file, kept while the next episode is in it */
    char path[4096];
    double from, *ts;    /* video: the episode's from_timestamp in the file and its timestamp column (NULL: none) */
    uint8_t *bytes;      /* image: the episode's encoded images, row t at bytes + off[t] .. off[t + 1] */
    int64_t *off, rows;
} ds_camera;

/* A reader of camera key (a video or image feature): 0, or -1 with err set when the dataset has no such camera. */
int ds_camera_open(mact_ld *d, const char *key, int threads, double tolerance_s, ds_camera *c, char *err, size_t el);
/* Loads episode i (index into the episodes) of the camera, releasing the previous one's: 0, or -1 with err set. */
int ds_camera_episode(mact_ld *d, int i, ds_camera *c, char *err, size_t el);
/* Frame t of the loaded episode, decoded into img (mact_image_free); *time_s (may be NULL) gets a video frame's query
 * time. 0, or -1 with err holding the decoder's message (the caller names the frame). */
int ds_camera_frame(const mact_ld *d, ds_camera *c, int64_t t, mact_image *img, double *time_s, char *err, size_t el);
void ds_camera_close(ds_camera *c);
#endif
