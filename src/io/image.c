/* Camera frame -> pixel_values: PNG/JPEG decoding, torchvision-exact bilinear resize, normalisation
 * and patchify (docs/spec/molmoact2.md 4.1). See image.h for the contracts. */
#include "io/image.h"
#include "base/file.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
/* jpeglib.h needs size_t and FILE declared first. */
#include <jpeglib.h>
#include "mact.h"
#include "base/err.h"
#include "io/npy.h"

#define set_err mact_errf  /* one formatter for every module's errors */

/* Shared size check: every image entering or leaving this module goes through it, so the
 * h*w*3 products below can never overflow. */
static int check_dims(int64_t h, int64_t w, const char *what, char *err, size_t errlen)
{
    if (h <= 0 || w <= 0)
        return set_err(err, errlen, MACT_ERR_INPUT, "%s: invalid size %lldx%lld (height x width)",
                       what, (long long)h, (long long)w);
    if (h > MACT_IMAGE_MAX_SIDE || w > MACT_IMAGE_MAX_SIDE || h * w > MACT_IMAGE_MAX_PIXELS)
        return set_err(err, errlen, MACT_ERR_INPUT,
                       "%s: %lldx%lld exceeds the limit (%d pixels per side, %lld pixels in all)",
                       what, (long long)h, (long long)w, MACT_IMAGE_MAX_SIDE,
                       (long long)MACT_IMAGE_MAX_PIXELS);
    return MACT_OK;
}

void mact_image_free(mact_image *img)
{
    if (!img) return;
    free(img->data);
    memset(img, 0, sizeof *img);
}

/* ------------------------------------------------------------------------------------------------
 * PNG. libpng reports errors through a callback that must not return, so it longjmps back to
 * decode_png. Everything that changes after setjmp lives in a heap context (only its pointer is a
 * local), which sidesteps the "non-volatile locals are indeterminate after longjmp" rule. */

typedef struct {
    const uint8_t *data;
    size_t size, off;
    uint8_t *pixels;
    png_bytep *rows;
    char msg[256];
} png_ctx;

static void png_error_cb(png_structp png, png_const_charp msg)
{
    png_ctx *c = (png_ctx *)png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings (bad ancillary chunk CRC, unknown chunks, ...) do not affect the pixels: stay silent
 * rather than printing to stderr from library code. */
static void png_warning_cb(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_cb(png_structp png, png_bytep out, size_t len)
{
    png_ctx *c = (png_ctx *)png_get_io_ptr(png);
    if (len > c->size - c->off) png_error(png, "unexpected end of data (truncated file)");
    memcpy(out, c->data + c->off, len);
    c->off += len;
}

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int decode_png(const uint8_t *data, size_t size, mact_image *out, char *err, size_t errlen)
{
    /* Check the IHDR dimensions ourselves before libpng sees them, so an oversized image gets
     * MACT_ERR_INPUT with our message rather than a libpng limit error. */
    if (size >= 24 && memcmp(data + 12, "IHDR", 4) == 0) {
        int rc = check_dims((int64_t)be32(data + 20), (int64_t)be32(data + 16), "PNG", err, errlen);
        if (rc) return rc;
    }
    png_ctx *c = calloc(1, sizeof *c);
    if (!c) return set_err(err, errlen, MACT_ERR_NOMEM, "PNG: out of memory");
    c->data = data;
    c->size = size;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_error_cb, png_warning_cb);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        free(c);
        return set_err(err, errlen, MACT_ERR_NOMEM, "PNG: out of memory creating the decoder");
    }
    if (setjmp(png_jmpbuf(png))) {
        set_err(err, errlen, MACT_ERR_FORMAT, "PNG: corrupt or truncated file: %s", c->msg);
        png_destroy_read_struct(&png, &info, NULL);
        free(c->rows);
        free(c->pixels);
        free(c);
        return MACT_ERR_FORMAT;
    }
    /* Our own limits are stricter than libpng's defaults; keep libpng's as a backstop. */
    png_set_user_limits(png, 0x7fffffffu, 0x7fffffffu);
    png_set_read_fn(png, c, png_read_cb);
    png_read_info(png, info);

    png_uint_32 w32, h32;
    int bit_depth, color_type, interlace;
    png_get_IHDR(png, info, &w32, &h32, &bit_depth, &color_type, &interlace, NULL, NULL);
    int64_t w = w32, h = h32;
    int rc = check_dims(h, w, "PNG", err, errlen);
    if (rc) {
        png_destroy_read_struct(&png, &info, NULL);
        free(c);
        return rc;
    }
    /* Normalise to 8-bit samples but keep the channel layout; gray replication and alpha removal
     * are done below so that every colour type (and palette tRNS, which libpng may expand into an
     * alpha channel) goes through one explicit path. */
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (bit_depth == 16) png_set_strip_16(png);  /* high byte, as PIL's RGB;16B unpacker */
    (void)png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (ch < 1 || ch > 4 || png_get_bit_depth(png, info) != 8 || rowbytes != (size_t)w * (size_t)ch)
        png_error(png, "unexpected sample layout after conversion");

    /* One buffer big enough for the decoded rows (ch channels) and for the RGB result. */
    size_t npix = (size_t)h * (size_t)w;
    c->pixels = malloc(npix * (size_t)(ch > 3 ? ch : 3));
    c->rows = malloc((size_t)h * sizeof *c->rows);
    if (!c->pixels || !c->rows) {
        png_destroy_read_struct(&png, &info, NULL);
        free(c->rows);
        free(c->pixels);
        free(c);
        return set_err(err, errlen, MACT_ERR_NOMEM, "PNG: out of memory for %lldx%lld pixels",
                       (long long)h, (long long)w);
    }
    for (int64_t y = 0; y < h; y++) c->rows[y] = c->pixels + (size_t)y * rowbytes;
    png_read_image(png, c->rows);
    png_read_end(png, NULL);  /* checks the trailing chunks and IEND: rejects truncated files */
    png_destroy_read_struct(&png, &info, NULL);

    uint8_t *p = c->pixels;
    if (ch == 4) {
        /* Drop alpha: compacting forward never overwrites unread input (dst index <= src index). */
        for (size_t i = 0; i < npix; i++)
            for (int k = 0; k < 3; k++) p[i * 3 + k] = p[i * 4 + (size_t)k];
    } else if (ch == 1 || ch == 2) {
        /* Replicate gray (dropping alpha) backwards: the output grows, dst index >= src index. */
        for (size_t i = npix; i-- > 0;) {
            uint8_t g = p[i * (size_t)ch];
            p[i * 3] = p[i * 3 + 1] = p[i * 3 + 2] = g;
        }
    }
    if (ch == 4) {
        uint8_t *shrunk = realloc(p, npix * 3);
        if (shrunk) p = shrunk;
    }
    free(c->rows);
    free(c);
    out->height = h;
    out->width = w;
    out->data = p;
    return MACT_OK;
}

/* ------------------------------------------------------------------------------------------------
 * JPEG. libjpeg's default error_exit calls exit(); ours longjmps back instead. Warnings are made
 * fatal too: libjpeg "recovers" from a truncated or corrupt stream by emitting a warning and
 * filling the rest of the image with gray, which would silently feed garbage to the policy. */

typedef struct {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    jmp_buf jb;
    uint8_t *pixels;
    char msg[JMSG_LENGTH_MAX];
} jpeg_ctx;

static void jpeg_error_exit_cb(j_common_ptr cinfo)
{
    jpeg_ctx *c = (jpeg_ctx *)cinfo->client_data;
    (*cinfo->err->format_message)(cinfo, c->msg);
    longjmp(c->jb, 1);
}

static void jpeg_emit_message_cb(j_common_ptr cinfo, int level)
{
    if (level < 0) jpeg_error_exit_cb(cinfo);  /* a warning: corrupt data, premature end */
    /* level >= 0: trace messages, ignored */
}

static void jpeg_output_message_cb(j_common_ptr cinfo) { (void)cinfo; }

static int decode_jpeg(const uint8_t *data, size_t size, mact_image *out, char *err, size_t errlen)
{
    jpeg_ctx *c = calloc(1, sizeof *c);
    if (!c) return set_err(err, errlen, MACT_ERR_NOMEM, "JPEG: out of memory");
    c->cinfo.err = jpeg_std_error(&c->jerr);
    c->jerr.error_exit = jpeg_error_exit_cb;
    c->jerr.emit_message = jpeg_emit_message_cb;
    c->jerr.output_message = jpeg_output_message_cb;
    c->cinfo.client_data = c;
    if (setjmp(c->jb)) {
        set_err(err, errlen, MACT_ERR_FORMAT, "JPEG: corrupt or truncated file: %s", c->msg);
        jpeg_destroy_decompress(&c->cinfo);
        free(c->pixels);
        free(c);
        return MACT_ERR_FORMAT;
    }
    jpeg_create_decompress(&c->cinfo);
    /* Progressive files keep all coefficients in memory; cap it (a 64 Mpixel image needs < 400 MiB)
     * so a hostile header fails cleanly instead of exhausting memory. */
    c->cinfo.mem->max_memory_to_use = 1024L * 1024 * 1024;
    /* jpeg_mem_src only reads the buffer; older prototypes lack the const. */
    jpeg_mem_src(&c->cinfo, (unsigned char *)(uintptr_t)data, (unsigned long)size);
    jpeg_read_header(&c->cinfo, TRUE);
    int64_t h = c->cinfo.image_height, w = c->cinfo.image_width;
    int rc = check_dims(h, w, "JPEG", err, errlen);
    if (!rc && (c->cinfo.jpeg_color_space == JCS_CMYK || c->cinfo.jpeg_color_space == JCS_YCCK))
        rc = set_err(err, errlen, MACT_ERR_UNSUPPORTED,
                     "JPEG: CMYK/YCCK images are not supported (convert the frame to RGB)");
    if (!rc && c->cinfo.num_components != 1 && c->cinfo.num_components != 3)
        rc = set_err(err, errlen, MACT_ERR_UNSUPPORTED, "JPEG: %d colour components not supported",
                     c->cinfo.num_components);
    if (rc) {
        jpeg_destroy_decompress(&c->cinfo);
        free(c);
        return rc;
    }
    c->cinfo.out_color_space = JCS_RGB;  /* libjpeg-turbo converts gray -> RGB by replication */
    jpeg_start_decompress(&c->cinfo);
    if (c->cinfo.output_components != 3 || (int64_t)c->cinfo.output_width != w ||
        (int64_t)c->cinfo.output_height != h) {
        jpeg_destroy_decompress(&c->cinfo);
        free(c);
        return set_err(err, errlen, MACT_ERR_FORMAT, "JPEG: decoder produced an unexpected layout");
    }
    size_t stride = (size_t)w * 3;
    c->pixels = malloc((size_t)h * stride);
    if (!c->pixels) {
        jpeg_destroy_decompress(&c->cinfo);
        free(c);
        return set_err(err, errlen, MACT_ERR_NOMEM, "JPEG: out of memory for %lldx%lld pixels",
                       (long long)h, (long long)w);
    }
    while (c->cinfo.output_scanline < c->cinfo.output_height) {
        JSAMPROW row = c->pixels + (size_t)c->cinfo.output_scanline * stride;
        jpeg_read_scanlines(&c->cinfo, &row, 1);
    }
    jpeg_finish_decompress(&c->cinfo);  /* reads up to EOI: a missing EOI warns -> error */
    jpeg_destroy_decompress(&c->cinfo);
    out->height = h;
    out->width = w;
    out->data = c->pixels;
    free(c);
    return MACT_OK;
}

mact_status mact_image_load_memory(const void *data, size_t size, mact_image *out, char *err, size_t errlen)
{
    if (!out) return set_err(err, errlen, MACT_ERR_INPUT, "image: NULL output");
    memset(out, 0, sizeof *out);
    if (!data || size == 0) return set_err(err, errlen, MACT_ERR_FORMAT, "image: empty input (0 bytes)");
    const uint8_t *p = data;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (size >= 8 && memcmp(p, png_sig, 8) == 0) return decode_png(p, size, out, err, errlen);
    if (size >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return decode_jpeg(p, size, out, err, errlen);
    return set_err(err, errlen, MACT_ERR_FORMAT, "image: not a PNG or JPEG file (%zu bytes, unknown signature)",
                   size);
}

int mact_image_load_file(const char *path, mact_image *out, char *err, size_t errlen)
{
    if (!out) return set_err(err, errlen, MACT_ERR_INPUT, "image: NULL output");
    memset(out, 0, sizeof *out);
    if (!path) return set_err(err, errlen, MACT_ERR_INPUT, "image: NULL path");
    char why[512];
    int fd = mact_file_open_regular(path, why, sizeof why);  /* a FIFO or device is refused before the open */
    if (fd < 0) return set_err(err, errlen, fd, "%s", why);
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return set_err(err, errlen, MACT_ERR_IO, "%s: cannot open: %s", path, strerror(errno)); }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return set_err(err, errlen, MACT_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        fclose(f);
        return set_err(err, errlen, MACT_ERR_FORMAT, "%s: empty file (0 bytes)", path);
    }
    if ((int64_t)st.st_size > MACT_IMAGE_MAX_FILE_BYTES) {
        fclose(f);
        return set_err(err, errlen, MACT_ERR_INPUT, "%s: %lld bytes exceeds the %lld-byte limit", path,
                       (long long)st.st_size, (long long)MACT_IMAGE_MAX_FILE_BYTES);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n);
    if (!buf) {
        fclose(f);
        return set_err(err, errlen, MACT_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int rerr = ferror(f);
    fclose(f);
    if (got != n || rerr) {
        free(buf);
        return set_err(err, errlen, MACT_ERR_IO, "%s: read failed (%zu of %zu bytes)", path, got, n);
    }
    char sub[256] = "";
    int rc = mact_image_load_memory(buf, n, out, sub, sizeof sub);
    free(buf);
    if (rc) set_err(err, errlen, rc, "%s: %s", path, sub);
    return rc;
}

/* The shared half of the two array entry points: validate, then allocate h x w x 3 bytes. */
static int image_alloc(const void *hwc, int64_t h, int64_t w, mact_image *out, char *err, size_t errlen)
{
    if (!out) return set_err(err, errlen, MACT_ERR_INPUT, "image: NULL output");
    memset(out, 0, sizeof *out);
    int rc = check_dims(h, w, "image", err, errlen);
    if (rc) return rc;
    if (!hwc) return set_err(err, errlen, MACT_ERR_INPUT, "image: NULL pixels");
    out->data = malloc((size_t)h * (size_t)w * 3);
    if (!out->data) return set_err(err, errlen, MACT_ERR_NOMEM, "image: out of memory");
    out->height = h;
    out->width = w;
    return MACT_OK;
}

int mact_image_from_u8(const uint8_t *hwc, int64_t h, int64_t w, mact_image *out, char *err,
                       size_t errlen)
{
    int rc = image_alloc(hwc, h, w, out, err, errlen);
    if (!rc) memcpy(out->data, hwc, (size_t)h * (size_t)w * 3);
    return rc;
}

int mact_image_from_f32(const float *hwc, int64_t h, int64_t w, mact_image *out, char *err,
                        size_t errlen)
{
    int rc = image_alloc(hwc, h, w, out, err, errlen);
    if (rc) return rc;
    size_t n = (size_t)h * (size_t)w * 3;
    for (size_t i = 0; i < n; i++) {
        float v = hwc[i] * 255.0f;  /* float32 product, as numpy does for a float32 array */
        /* !(v > 0) also catches NaN, which numpy's astype leaves undefined; 0 is the sane choice. */
        out->data[i] = !(v > 0.0f) ? 0 : v >= 255.0f ? 255 : (uint8_t)v;  /* truncation */
    }
    return MACT_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Resize. The HF processor runs torchvision's Resize on the uint8 image permuted HWC -> CHW, i.e. a
 * channels-last tensor; torchvision casts it to float32, calls F.interpolate (bilinear,
 * align_corners=False, antialias=False), rounds half-to-even and casts back to uint8.
 *
 * The arithmetic below reproduces the float32 output of the reference torch (Debian's 1.13, the one
 * tests/test_image_torch.sh runs) bit for bit; it was pinned down by probing the kernel's weights
 * (a one-hot input returns them) and comparing candidate formulas over ~2e7 outputs:
 *   scale   = (float)in / (float)out                        (float32)
 *   src     = max(0, scale * (d + 0.5) - 0.5)                (evaluated in double)
 *   i0      = min((int64)src, in - 1), i1 = i0 + (i0 < in - 1)
 *   l1      = (float)(src - i0) clamped to [0, 1], l0 = 1 - l1 (float32)
 *   w_ab    = ly_a * lx_b                                     (float32 products)
 *   out     = (float)(x00*w00 + x01*w01 + x10*w10 + x11*w11)  (sum in double, rounded once to float)
 * Current PyTorch sources compute src in float32 (static_cast<scalar_t>(0.5)); emulating that in
 * numpy moves a few weights by an ulp and flips the uint8 rounding of up to ~0.2% of values by
 * 1 LSB against this reference. No single C formula can match every torch build; this one matches
 * the reference we can run, and any other build is within 1 LSB.
 * Compiler FMA contraction cannot change the result: every product that meets an addition (u8 x
 * float, float scale x small integer) is exact in double. */

typedef struct {
    int64_t i0, i1;
    float l0, l1;
} lin_tap;

static void linear_taps(int64_t in, int64_t out, lin_tap *t)
{
    if (in == out) {  /* ATen's scale-1 shortcut: a plain copy */
        for (int64_t d = 0; d < out; d++) t[d] = (lin_tap){d, d, 1.0f, 0.0f};
        return;
    }
    const float scale = (float)in / (float)out;  /* no scale_factor given: in/out in float */
    for (int64_t d = 0; d < out; d++) {
        double real = (double)scale * ((double)d + 0.5) - 0.5;  /* half-pixel centres */
        if (real < 0.0) real = 0.0;                               /* clamp below, never above */
        int64_t i0 = (int64_t)real;
        if (i0 > in - 1) i0 = in - 1;
        float l1 = (float)(real - (double)i0);
        if (l1 < 0.0f) l1 = 0.0f;
        if (l1 > 1.0f) l1 = 1.0f;
        t[d].i0 = i0;
        t[d].i1 = i0 + (i0 < in - 1 ? 1 : 0);
        t[d].l1 = l1;
        t[d].l0 = 1.0f - l1;
    }
}

int mact_image_resize(const uint8_t *src, int64_t src_h, int64_t src_w, uint8_t *dst, int64_t dst_h,
                      int64_t dst_w, char *err, size_t errlen)
{
    int rc = check_dims(src_h, src_w, "resize source", err, errlen);
    if (!rc) rc = check_dims(dst_h, dst_w, "resize target", err, errlen);
    if (rc) return rc;
    if (!src || !dst) return set_err(err, errlen, MACT_ERR_INPUT, "resize: NULL buffer");
    lin_tap *ty = malloc((size_t)dst_h * sizeof *ty), *tx = malloc((size_t)dst_w * sizeof *tx);
    if (!ty || !tx) {
        free(ty);
        free(tx);
        return set_err(err, errlen, MACT_ERR_NOMEM, "resize: out of memory");
    }
    linear_taps(src_h, dst_h, ty);
    linear_taps(src_w, dst_w, tx);
    const size_t sstride = (size_t)src_w * 3;
    for (int64_t oy = 0; oy < dst_h; oy++) {
        const lin_tap *a = &ty[oy];
        const uint8_t *r0 = src + (size_t)a->i0 * sstride, *r1 = src + (size_t)a->i1 * sstride;
        uint8_t *o = dst + (size_t)oy * (size_t)dst_w * 3;
        for (int64_t ox = 0; ox < dst_w; ox++) {
            const lin_tap *b = &tx[ox];
            const float w00 = a->l0 * b->l0, w01 = a->l0 * b->l1;
            const float w10 = a->l1 * b->l0, w11 = a->l1 * b->l1;
            const uint8_t *p00 = r0 + b->i0 * 3, *p01 = r0 + b->i1 * 3;
            const uint8_t *p10 = r1 + b->i0 * 3, *p11 = r1 + b->i1 * 3;
            for (int ch = 0; ch < 3; ch++) {
                /* Each product is exact in double; the sum is left to right as in the kernel. */
                double acc = (double)p00[ch] * w00;
                acc += (double)p01[ch] * w01;
                acc += (double)p10[ch] * w10;
                acc += (double)p11[ch] * w11;
                /* Round to the float32 the tensor holds first, then torch.round (half to even). */
                float v = nearbyintf((float)acc);
                o[ox * 3 + ch] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
            }
        }
    }
    free(ty);
    free(tx);
    return MACT_OK;
}

int mact_image_patchify(const uint8_t *img, int64_t h, int64_t w, int64_t patch, float *out,
                        size_t out_count, char *err, size_t errlen)
{
    int rc = check_dims(h, w, "patchify", err, errlen);
    if (rc) return rc;
    if (!img || !out) return set_err(err, errlen, MACT_ERR_INPUT, "patchify: NULL buffer");
    if (patch <= 0 || h % patch || w % patch)
        return set_err(err, errlen, MACT_ERR_INPUT,
                       "patchify: image %lldx%lld is not a multiple of patch size %lld", (long long)h,
                       (long long)w, (long long)patch);
    const int64_t nph = h / patch, npw = w / patch, pdim = patch * patch * 3;
    if (out_count < (size_t)(nph * npw * pdim))
        return set_err(err, errlen, MACT_ERR_INPUT, "patchify: output holds %zu floats, need %lld",
                       out_count, (long long)(nph * npw * pdim));
    /* The 256 possible values, computed the way the HF processor does it in float32:
     * (u8 / 255) then * 2 - 1, each step rounded to float. */
    float lut[256];
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        x = x * 2.0f;
        lut[v] = x - 1.0f;
    }
    for (int64_t ph = 0; ph < nph; ph++)
        for (int64_t pw = 0; pw < npw; pw++) {
            float *o = out + (ph * npw + pw) * pdim;
            for (int64_t dy = 0; dy < patch; dy++) {
                const uint8_t *row = img + ((size_t)(ph * patch + dy) * (size_t)w + (size_t)(pw * patch)) * 3;
                for (int64_t k = 0; k < patch * 3; k++) o[dy * patch * 3 + k] = lut[row[k]];
            }
        }
    return MACT_OK;
}

int mact_image_preprocess(const uint8_t *src, int64_t src_h, int64_t src_w, int64_t out_h,
                          int64_t out_w, int64_t patch, float *pixel_values, size_t out_count,
                          char *err, size_t errlen)
{
    int rc = check_dims(out_h, out_w, "preprocess target", err, errlen);
    if (rc) return rc;
    uint8_t *tmp = malloc((size_t)out_h * (size_t)out_w * 3);
    if (!tmp) return set_err(err, errlen, MACT_ERR_NOMEM, "preprocess: out of memory");
    rc = mact_image_resize(src, src_h, src_w, tmp, out_h, out_w, err, errlen);
    if (!rc) rc = mact_image_patchify(tmp, out_h, out_w, patch, pixel_values, out_count, err, errlen);
    free(tmp);
    return rc;
}

mact_status mact_image_load_path(const char *path, mact_image *img, char *err, size_t el)
{
    size_t l = strlen(path);
    if (l > 4 && !strcmp(path + l - 4, ".npy")) {
        mact_array a = {0};
        if (mact_npy_read(path, &a, err, el)) return -1;
        int rc = -1;
        if (a.ndim != 3 || a.shape[2] != 3) snprintf(err, el, "%s: expected an HxWx3 array", path);
        else if (a.dtype == MACT_U8) rc = mact_image_from_u8(a.data, a.shape[0], a.shape[1], img, err, el);
        else if (a.dtype == MACT_F32) rc = mact_image_from_f32(a.data, a.shape[0], a.shape[1], img, err, el);
        else snprintf(err, el, "%s: dtype %s; expected uint8 or float32", path, mact_dtype_name(a.dtype));
        mact_array_free(&a);
        return rc;
    }
    return mact_image_load_file(path, img, err, el);
}
