/* What the compression toolkit's analyses share: their frames (image files, or a dataset's samples) as a model's
 * pixel values, through the runtime's public preprocessing (mact_stages.h mact_pixel_values). */
#ifndef MACT_COMPRESS_PIXELS_H
#define MACT_COMPRESS_PIXELS_H
#include <stddef.h>
#include "mact.h"
#include "mact_data.h"

/* The frames of an analysis: n_images files, or n_frames samples of a dataset (0: 64). */
typedef struct {
    const char *const *images;
    int n_images;
    mact_dataset_sample *samples;
    int n_samples;
} cmp_frames;

/* opens them (the dataset's sampled and decoded); 0, or a status with err set */
int mact_cmp_frames_open(cmp_frames *f, const char *const *images, int n_images, const char *dataset, int n_frames,
                         char *err, size_t el);
int mact_cmp_frames_count(const cmp_frames *f);
const char *mact_cmp_frames_name(const cmp_frames *f, int i);
/* frame i as m's pixel values into pv [n_patches * patch_dim] */
int mact_cmp_frames_pixels(const cmp_frames *f, int i, const mact_model *m, float *pv, char *err, size_t el);
void mact_cmp_frames_close(cmp_frames *f);
#endif
