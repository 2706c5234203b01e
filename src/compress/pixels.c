/* compress/pixels.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "compress/pixels.h"
#include "io/image.h"

/* an image file (io/image.h: PNG / JPEG / .npy) resized and patchified by the model's preprocessing into pv
 * [n_patches * patch_dim] */
int mact_cmp_file_pixels(const char *path, const mact_model_info *mi, float *pv, char *err, size_t el)
{
    mact_image img = {0};
    if (mact_image_load_path(path, &img, err, el)) return -1;
    int rc = mact_image_preprocess(img.data, img.height, img.width, mi->image_height, mi->image_width, mi->patch_size, pv,
                                   (size_t)mi->n_patches * mi->patch_dim, err, el);
    mact_image_free(&img);
    return rc ? -1 : 0;
}

/* an encoded frame -> the model's pixel values */
int mact_cmp_frame_pixels(const ds_frame *f, const mact_model_info *mi, float *pv, char *err, size_t el)
{
    mact_image img = {0};
    const mact_image *im = f->img.data ? &f->img : &img;
    int rc = (!f->img.data && mact_image_load_memory(f->bytes, f->len, &img, err, el)) ||
             mact_image_preprocess(im->data, im->height, im->width, mi->image_height, mi->image_width, mi->patch_size,
                                   pv, (size_t)mi->n_patches * mi->patch_dim, err, el);
    mact_image_free(&img);
    return rc ? -1 : 0;
}

int mact_cmp_load_model(const char *dir, mact_precision prec, int threads, mact_model **m, mact_session **s, char *err,
                      size_t el)
{
    mact_load_options lo = {.precision = prec ? prec : MACT_PRECISION_FP32};
    mact_session_options so = {.max_images = 1, .max_tokens = 64, .n_threads = threads};
    *m = NULL;
    *s = NULL;
    if (mact_model_load(dir, &lo, m, err, el)) return -1;
    if (mact_session_new(*m, &so, s, err, el)) { mact_model_free(*m); *m = NULL; return -1; }
    return 0;
}

