/* Calibration and held-out frames picked from a LeRobot dataset (the compression toolkit's --dataset): n frames
 * spread evenly over the episodes and image cameras. */
#ifndef MACT_DATA_FRAMES_H
#define MACT_DATA_FRAMES_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

/* A frame: its encoded bytes (PNG/JPEG in the parquet) or, for a video camera, the decoded frame; and a name. */
typedef struct {
    uint8_t *bytes;
    size_t len;
    mact_image img;
    char name[96];
} ds_frame;

/* n frames spread evenly over the dataset's episodes and image cameras (frame numbers i * total / n of the
 * concatenation, each camera's frames in turn): 0 with *out / *count, or -1 with err set */
int mact_ds_frames(const char *dir, long n, ds_frame **out, int *count, char *err, size_t el);
void mact_ds_frames_free(ds_frame *f, int n);
#endif
