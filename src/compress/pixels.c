/* compress/pixels.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "mact_stages.h"
#include "base/err.h"
#include "compress/pixels.h"

int mact_cmp_frames_open(cmp_frames *f, const char *const *images, int n_images, const char *dataset, int n_frames,
                         char *err, size_t el)
{
    memset(f, 0, sizeof *f);
    f->images = images;
    f->n_images = n_images;
    if (!dataset) return 0;
    return mact_dataset_sample_frames(dataset, n_frames ? n_frames : 64, &f->samples, &f->n_samples, err, el);
}

int mact_cmp_frames_count(const cmp_frames *f) { return f->samples ? f->n_samples : f->n_images; }

const char *mact_cmp_frames_name(const cmp_frames *f, int i) { return f->samples ? f->samples[i].name : f->images[i]; }

int mact_cmp_frames_pixels(const cmp_frames *f, int i, const mact_model *m, float *pv, char *err, size_t el)
{
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    mact_image file = {0};
    char e2[2048];
    const mact_image *im = f->samples ? &f->samples[i].img : &file;
    int rc = f->samples ? 0 : mact_image_load_path(f->images[i], &file, e2, sizeof e2);
    if (!rc) {
        const mact_frame fr = {im->data, (int)im->height, (int)im->width};
        rc = mact_pixel_values(m, &fr, pv, (size_t)mi.n_patches * mi.patch_dim, e2, sizeof e2);
    }
    mact_image_free(&file);
    return rc ? mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s", mact_cmp_frames_name(f, i), e2) : 0;
}

void mact_cmp_frames_close(cmp_frames *f)
{
    mact_dataset_samples_free(f->samples, f->n_samples);
    memset(f, 0, sizeof *f);
}
