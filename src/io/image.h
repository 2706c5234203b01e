/* Camera frame -> pixel_values (docs/spec/molmoact2.md 4.1).
 *
 * Pipeline: decode (PNG / JPEG) or take a raw HxWx3 array -> RGB uint8 -> bilinear resize to the
 * model's input size (torchvision Resize(bilinear, antialias=False) on a uint8 tensor, as the HF
 * image processor does) -> x = u8/255*2-1 -> patches [n_patches, patch*patch*3].
 *
 * Every function returning int gives MACT_OK (0) on success and a negative MACT_ERR_* code on error,
 * with a message in err (when err != NULL and errlen > 0). On error, image outputs are left empty
 * (zeroed), so mact_image_free is always safe. Nothing here exits or aborts. */
#ifndef MACT_IMAGE_H
#define MACT_IMAGE_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

/* MACT_IMAGE_MAX_SIDE / MACT_IMAGE_MAX_PIXELS (mact.h): the largest image accepted anywhere in this module. */
/* Largest encoded file read by mact_image_load_file. */
#define MACT_IMAGE_MAX_FILE_BYTES ((int64_t)512 * 1024 * 1024)

/* mact_image (mact.h): an RGB uint8 image, row-major HWC, malloc-owned pixels. */

/* Decodes a PNG or JPEG (chosen by its signature) to RGB uint8.
 * PNG: any bit depth / color type; 16-bit samples keep their high byte (as PIL does), palette is
 * expanded, gray is replicated to R=G=B, alpha (and palette tRNS) is dropped without compositing, no
 * gamma correction. Interlaced images are supported.
 * JPEG: gray and YCbCr/RGB; CMYK/YCCK are rejected (MACT_ERR_UNSUPPORTED). libjpeg warnings
 * (premature end of data, corrupt entropy data) are treated as errors, so truncated files fail.
 * Errors: MACT_ERR_IO (file unreadable), MACT_ERR_FORMAT (empty, unknown, truncated, corrupt),
 * MACT_ERR_INPUT (dimensions above the limits), MACT_ERR_NOMEM. */
int mact_image_load_file(const char *path, mact_image *out, char *err, size_t errlen);
/* mact_image_load_memory (mact.h): the same on bytes in memory */

/* Copies a raw RGB uint8 array [h, w, 3]. */
int mact_image_from_u8(const uint8_t *hwc, int64_t h, int64_t w, mact_image *out, char *err,
                       size_t errlen);
/* Converts a float RGB array [h, w, 3] in [0, 1] to uint8 as LeRobot's _normalize_image does:
 * v*255 in float32, clipped to [0, 255], truncated toward zero (numpy astype(uint8)); NaN -> 0.
 * (LeRobot skips the x255 when the array's max exceeds 1; callers holding 0..255 floats should
 * convert to uint8 themselves.) */
int mact_image_from_f32(const float *hwc, int64_t h, int64_t w, mact_image *out, char *err,
                        size_t errlen);
/* An image file: PNG / JPEG by content, or an .npy HxWx3 array (uint8, or float32 in [0, 1]) by its name. */

/* Bilinear resize of an RGB uint8 array [src_h, src_w, 3] to [dst_h, dst_w, 3], ignoring aspect
 * ratio, with the arithmetic of PyTorch's float upsample_bilinear2d (align_corners=False, no
 * antialias, source coordinate clamped at 0) followed by round-half-even back to uint8: the result
 * is what torchvision.transforms.Resize((dst_h, dst_w), BILINEAR, antialias=False) returns for the
 * HWC uint8 image permuted to CHW (the HF MolmoAct2 image processor's path). dst must not overlap
 * src. */
int mact_image_resize(const uint8_t *src, int64_t src_h, int64_t src_w, uint8_t *dst, int64_t dst_h,
                      int64_t dst_w, char *err, size_t errlen);

/* Normalises (x = u8/255*2-1, float32, mean = std = 0.5) and patchifies an RGB uint8 image [h, w, 3]
 * whose sides are multiples of patch:
 *   out[(ph*npw + pw) * patch*patch*3 + (dy*patch + dx)*3 + c] = x[ph*patch+dy, pw*patch+dx, c]
 * with npw = w/patch. out_count must be >= (h/patch)*(w/patch)*patch*patch*3. */
int mact_image_patchify(const uint8_t *img, int64_t h, int64_t w, int64_t patch, float *out,
                        size_t out_count, char *err, size_t errlen);

/* resize to [out_h, out_w] + patchify: one camera frame -> pixel_values [n_patches, patch_dim]
 * (n_patches = (out_h/patch)*(out_w/patch), patch_dim = patch*patch*3). */
int mact_image_preprocess(const uint8_t *src, int64_t src_h, int64_t src_w, int64_t out_h,
                          int64_t out_w, int64_t patch, float *pixel_values, size_t out_count,
                          char *err, size_t errlen);
#endif
