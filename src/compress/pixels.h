/* What the compression toolkit's analyses share: frames as the model's pixel values, and a model with a one-image
 * session. */
#ifndef MACT_COMPRESS_PIXELS_H
#define MACT_COMPRESS_PIXELS_H
#include <stddef.h>
#include "mact.h"
#include "data/frames.h"

int mact_cmp_file_pixels(const char *path, const mact_model_info *mi, float *pv, char *err, size_t el);
int mact_cmp_frame_pixels(const ds_frame *f, const mact_model_info *mi, float *pv, char *err, size_t el);
/* precision DEFAULT means FP32 here (the exact mode) */
int mact_cmp_load_model(const char *dir, mact_precision prec, int threads, mact_model **m, mact_session **s, char *err,
                        size_t el);
#endif
