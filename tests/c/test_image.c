/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* Unit tests for src/io/image.[ch]: decoding (PNG written here with libpng in every colour type, JPEG
 * written with libjpeg), error paths, the bilinear resize on hand-computed cases, normalisation and
 * patch layout.
 *
 * Tool mode, used by tests/test_image_torch.sh to compare against PyTorch:
 *   test_image resize IN.u8 H W OH OW PATCH OUT.u8 OUT.f32   raw HWC uint8 in; resized uint8 and
 *                                                           pixel_values (PATCH 0: none) out
 *   test_image decode FILE OUT.u8                            prints "H W", writes RGB uint8
 *   test_image f32 IN.f32 H W OUT.u8                         mact_image_from_f32 */
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
/* jpeglib.h needs size_t and FILE declared first. */
#include <jpeglib.h>

#include "io/image.h"
#include "th.h"

/* ---------------------------------------------------------------------------- tool mode */

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(sz > 0 ? (size_t)sz : 1);
    *n = buf ? fread(buf, 1, (size_t)sz, f) : 0;
    fclose(f);
    return buf;
}

static int write_all(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

static int tool_main(int argc, char **argv)
{
    char err[512] = "";
    if (argc == 10 && strcmp(argv[1], "resize") == 0) {
        int64_t h = atoll(argv[3]), w = atoll(argv[4]), oh = atoll(argv[5]), ow = atoll(argv[6]);
        int64_t patch = atoll(argv[7]);
        size_t n = 0;
        uint8_t *in = read_all(argv[2], &n);
        if (!in || n != (size_t)(h * w * 3)) {
            fprintf(stderr, "bad input %s (%zu bytes)\n", argv[2], n);
            free(in);
            return 2;
        }
        uint8_t *out = malloc((size_t)(oh * ow * 3));
        int rc = mact_image_resize(in, h, w, out, oh, ow, err, sizeof err);
        if (!rc) rc = write_all(argv[8], out, (size_t)(oh * ow * 3));
        if (!rc && patch > 0) {
            size_t cnt = (size_t)(oh * ow * 3);
            float *pv = malloc(cnt * sizeof *pv);
            rc = mact_image_preprocess(in, h, w, oh, ow, patch, pv, cnt, err, sizeof err);
            if (!rc) rc = write_all(argv[9], pv, cnt * sizeof *pv);
            free(pv);
        }
        free(in);
        free(out);
        if (rc) fprintf(stderr, "resize failed: %d %s\n", rc, err);
        return rc ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[1], "decode") == 0) {
        mact_image im;
        int rc = mact_image_load_file(argv[2], &im, err, sizeof err);
        if (rc) {
            printf("ERROR %d %s\n", rc, err);
            return 1;
        }
        printf("%lld %lld\n", (long long)im.height, (long long)im.width);
        rc = write_all(argv[3], im.data, (size_t)(im.height * im.width * 3));
        mact_image_free(&im);
        return rc ? 1 : 0;
    }
    if (argc == 6 && strcmp(argv[1], "f32") == 0) {
        int64_t h = atoll(argv[3]), w = atoll(argv[4]);
        size_t n = 0;
        float *in = read_all(argv[2], &n);
        mact_image im;
        int rc = (in && n == (size_t)(h * w * 3) * sizeof(float))
                     ? mact_image_from_f32(in, h, w, &im, err, sizeof err) : -1;
        if (!rc) rc = write_all(argv[5], im.data, (size_t)(h * w * 3));
        if (!rc) mact_image_free(&im);
        free(in);
        if (rc) fprintf(stderr, "f32 failed: %s\n", err);
        return rc ? 1 : 0;
    }
    fprintf(stderr, "usage: see the comment at the top of tests/c/test_image.c\n");
    return 2;
}

/* ---------------------------------------------------------------------------- writers */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} membuf;

static void mb_put(membuf *m, const void *d, size_t n)
{
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2 + 64;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}

static void png_write_cb(png_structp png, png_bytep d, size_t n) { mb_put(png_get_io_ptr(png), d, n); }
static void png_flush_cb(png_structp png) { (void)png; }

/* Writes a w x h PNG whose samples (already packed per libpng's row format) come from `rows`. */
static membuf make_png(int w, int h, int color_type, int bit_depth, int interlace,
                       const uint8_t *rows, size_t rowbytes, const png_color *pal, int npal,
                       const uint8_t *trns, int ntrns)
{
    membuf m = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(m.p);
        return (membuf){0};
    }
    png_set_write_fn(png, &m, png_write_cb, png_flush_cb);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, bit_depth, color_type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(png, info, pal, npal);
    if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    png_bytep *rp = malloc((size_t)h * sizeof *rp);
    for (int y = 0; y < h; y++) rp[y] = (png_bytep)(rows + (size_t)y * rowbytes);
    png_write_image(png, rp);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rp);
    return m;
}

static membuf make_jpeg(int w, int h, int comps, J_COLOR_SPACE cs, const uint8_t *pix, int quality)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    unsigned char *out = NULL;
    unsigned long outsize = 0;
    jpeg_mem_dest(&c, &out, &outsize);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * (size_t)w * (size_t)comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    membuf m = {0};
    mb_put(&m, out, outsize);
    free(out);
    return m;
}

/* ---------------------------------------------------------------------------- tests */

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Packs `vals` (one sample per entry, already < 2^bits) into a libpng row. */
static void pack_row(uint8_t *dst, const uint16_t *vals, int nsamples, int bits)
{
    if (bits == 16) {
        for (int i = 0; i < nsamples; i++) {
            dst[2 * i] = (uint8_t)(vals[i] >> 8);
            dst[2 * i + 1] = (uint8_t)vals[i];
        }
    } else if (bits == 8) {
        for (int i = 0; i < nsamples; i++) dst[i] = (uint8_t)vals[i];
    } else {
        memset(dst, 0, (size_t)(nsamples * bits + 7) / 8);
        for (int i = 0; i < nsamples; i++) {
            int bit = i * bits;
            dst[bit / 8] |= (uint8_t)(vals[i] << (8 - bits - bit % 8));
        }
    }
}

/* Builds a random PNG of the given type, decodes it and compares with the RGB expected from the
 * documented conversion rules. */
static void check_png_type(const char *name, int color_type, int bits, int interlace)
{
    const int w = 13, h = 7;
    int spp = color_type == PNG_COLOR_TYPE_GRAY ? 1 : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
            : color_type == PNG_COLOR_TYPE_RGB ? 3 : color_type == PNG_COLOR_TYPE_RGBA ? 4 : 1;
    size_t rowbytes = ((size_t)w * (size_t)spp * (size_t)bits + 7) / 8;
    uint8_t *rows = calloc((size_t)h, rowbytes);
    uint8_t *expect = malloc((size_t)(w * h * 3));
    uint16_t vals[13 * 4];
    png_color pal[256];
    uint8_t trns[256];
    int npal = 1 << (bits < 8 ? bits : 8);
    for (int i = 0; i < npal; i++) {
        pal[i].red = (png_byte)rnd();
        pal[i].green = (png_byte)rnd();
        pal[i].blue = (png_byte)rnd();
        trns[i] = (uint8_t)rnd();
    }
    for (int y = 0; y < h; y++) {
        for (int i = 0; i < w * spp; i++) vals[i] = (uint16_t)(rnd() & ((1u << bits) - 1));
        pack_row(rows + (size_t)y * rowbytes, vals, w * spp, bits);
        for (int x = 0; x < w; x++) {
            uint8_t *e = expect + (y * w + x) * 3;
            const uint16_t *v = vals + x * spp;
            if (color_type == PNG_COLOR_TYPE_PALETTE) {
                e[0] = pal[v[0]].red;
                e[1] = pal[v[0]].green;
                e[2] = pal[v[0]].blue;
                continue;
            }
            for (int c = 0; c < 3; c++) {
                uint16_t s = (spp >= 3) ? v[c] : v[0];
                e[c] = bits == 16 ? (uint8_t)(s >> 8) : bits == 8 ? (uint8_t)s
                     : (uint8_t)(s * (255 / ((1 << bits) - 1)));  /* 1/2/4-bit gray scaled up */
            }
        }
    }
    int pal_type = color_type == PNG_COLOR_TYPE_PALETTE;
    membuf m = make_png(w, h, color_type, bits, interlace, rows, rowbytes, pal_type ? pal : NULL,
                        npal, pal_type ? trns : NULL, npal);
    mact_image im;
    char err[256] = "";
    int rc = mact_image_load_memory(m.p, m.n, &im, err, sizeof err);
    int ok = rc == 0 && im.height == h && im.width == w && memcmp(im.data, expect, (size_t)(w * h * 3)) == 0;
    TH_CHECK(name, ok, "rc=%d (%s) size %lldx%lld", rc, err, (long long)im.height, (long long)im.width);
    mact_image_free(&im);
    free(m.p);
    free(rows);
    free(expect);
}

static void test_png_types(void)
{
    check_png_type("png_gray1", PNG_COLOR_TYPE_GRAY, 1, 0);
    check_png_type("png_gray2", PNG_COLOR_TYPE_GRAY, 2, 0);
    check_png_type("png_gray4", PNG_COLOR_TYPE_GRAY, 4, 0);
    check_png_type("png_gray8", PNG_COLOR_TYPE_GRAY, 8, 0);
    check_png_type("png_gray16", PNG_COLOR_TYPE_GRAY, 16, 0);
    check_png_type("png_gray_alpha8", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0);
    check_png_type("png_gray_alpha16", PNG_COLOR_TYPE_GRAY_ALPHA, 16, 0);
    check_png_type("png_rgb8", PNG_COLOR_TYPE_RGB, 8, 0);
    check_png_type("png_rgb16", PNG_COLOR_TYPE_RGB, 16, 0);
    check_png_type("png_rgba8", PNG_COLOR_TYPE_RGBA, 8, 0);
    check_png_type("png_rgba16", PNG_COLOR_TYPE_RGBA, 16, 0);
    check_png_type("png_palette1_trns", PNG_COLOR_TYPE_PALETTE, 1, 0);
    check_png_type("png_palette2_trns", PNG_COLOR_TYPE_PALETTE, 2, 0);
    check_png_type("png_palette4_trns", PNG_COLOR_TYPE_PALETTE, 4, 0);
    check_png_type("png_palette8_trns", PNG_COLOR_TYPE_PALETTE, 8, 0);
    check_png_type("png_rgb8_interlaced", PNG_COLOR_TYPE_RGB, 8, 1);
    check_png_type("png_gray_alpha16_interlaced", PNG_COLOR_TYPE_GRAY_ALPHA, 16, 1);
}

static membuf small_rgb_png(int w, int h)
{
    size_t rowbytes = (size_t)w * 3;
    uint8_t *rows = malloc(rowbytes * (size_t)h);
    for (size_t i = 0; i < rowbytes * (size_t)h; i++) rows[i] = (uint8_t)rnd();
    membuf m = make_png(w, h, PNG_COLOR_TYPE_RGB, 8, 0, rows, rowbytes, NULL, 0, NULL, 0);
    free(rows);
    return m;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void test_png_errors(const char *tmpdir)
{
    char err[256];
    mact_image im;
    membuf m = small_rgb_png(40, 30);

    /* Every truncation point must fail (the decoder may not invent the missing data). */
    int bad = 0, first_bad = -1;
    for (size_t cut = 0; cut < m.n; cut += (cut < 64 ? 1 : 7)) {
        int rc = mact_image_load_memory(m.p, cut, &im, err, sizeof err);
        if (rc == 0 || im.data != NULL) {
            if (first_bad < 0) first_bad = (int)cut;
            bad++;
        }
        mact_image_free(&im);
    }
    int rc = mact_image_load_memory(m.p, m.n - 1, &im, err, sizeof err);
    TH_CHECK("png_truncated_rejected", bad == 0 && rc == MACT_ERR_FORMAT,
             "%d truncations accepted (first at %d of %zu bytes); last rc=%d", bad, first_bad, m.n, rc);
    TH_CHECK("png_truncated_message", strstr(err, "truncated") != NULL, "message: %s", err);

    /* A flipped bit inside IDAT breaks its CRC. */
    uint8_t *c = malloc(m.n);
    memcpy(c, m.p, m.n);
    uint8_t *idat = NULL;
    for (size_t i = 8; i + 8 < m.n; i++)
        if (memcmp(c + i, "IDAT", 4) == 0) { idat = c + i + 4; break; }
    if (idat) idat[5] ^= 0x10;
    rc = mact_image_load_memory(c, m.n, &im, err, sizeof err);
    TH_CHECK("png_bad_crc_rejected", idat && rc == MACT_ERR_FORMAT, "rc=%d %s", rc, err);
    free(c);

    /* A header claiming a huge image (valid CRC) is rejected before any allocation. */
    c = malloc(m.n);
    memcpy(c, m.p, m.n);
    put_be32(c + 16, 100000);
    put_be32(c + 20, 100000);
    put_be32(c + 29, (uint32_t)crc32(crc32(0, NULL, 0), c + 12, 17));
    rc = mact_image_load_memory(c, m.n, &im, err, sizeof err);
    TH_CHECK("png_too_large_rejected", rc == MACT_ERR_INPUT && strstr(err, "limit"), "rc=%d %s", rc, err);
    put_be32(c + 16, 9000);  /* sides ok, area 81 Mpixel > 64 Mpixel */
    put_be32(c + 20, 9000);
    put_be32(c + 29, (uint32_t)crc32(crc32(0, NULL, 0), c + 12, 17));
    rc = mact_image_load_memory(c, m.n, &im, err, sizeof err);
    TH_CHECK("png_too_many_pixels_rejected", rc == MACT_ERR_INPUT, "rc=%d %s", rc, err);
    put_be32(c + 16, 0);
    put_be32(c + 29, (uint32_t)crc32(crc32(0, NULL, 0), c + 12, 17));
    rc = mact_image_load_memory(c, m.n, &im, err, sizeof err);
    TH_CHECK("png_zero_width_rejected", rc < 0 && im.data == NULL, "rc=%d %s", rc, err);
    free(c);

    /* File paths: success, missing, empty, garbage. */
    char path[1024];
    snprintf(path, sizeof path, "%s/mact_test_image.png", tmpdir);
    write_all(path, m.p, m.n);
    rc = mact_image_load_file(path, &im, err, sizeof err);
    TH_CHECK("png_from_file", rc == 0 && im.width == 40 && im.height == 30, "rc=%d %s", rc, err);
    mact_image_free(&im);
    remove(path);
    rc = mact_image_load_file(path, &im, err, sizeof err);
    TH_CHECK("image_missing_file", rc == MACT_ERR_IO && strstr(err, "mact_test_image.png"), "rc=%d %s", rc, err);
    write_all(path, "", 0);
    rc = mact_image_load_file(path, &im, err, sizeof err);
    TH_CHECK("image_empty_file", rc == MACT_ERR_FORMAT && strstr(err, "empty"), "rc=%d %s", rc, err);
    write_all(path, "GIF89a not an image we take", 27);
    rc = mact_image_load_file(path, &im, err, sizeof err);
    TH_CHECK("image_unknown_format", rc == MACT_ERR_FORMAT && strstr(err, "not a PNG or JPEG"), "rc=%d %s", rc, err);
    remove(path);
    rc = mact_image_load_memory(NULL, 0, &im, err, sizeof err);
    TH_CHECK("image_empty_buffer", rc == MACT_ERR_FORMAT, "rc=%d %s", rc, err);
    free(m.p);
}

static void test_jpeg(void)
{
    const int w = 64, h = 48;
    uint8_t *pix = malloc((size_t)(w * h * 3)), *gray = malloc((size_t)(w * h));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = pix + (y * w + x) * 3;
            p[0] = (uint8_t)(x * 4);
            p[1] = (uint8_t)(y * 5);
            p[2] = (uint8_t)(128 + (x - y));
            gray[y * w + x] = (uint8_t)(x * 2 + y);
        }
    char err[256] = "";
    mact_image im;
    membuf m = make_jpeg(w, h, 3, JCS_RGB, pix, 95);
    int rc = mact_image_load_memory(m.p, m.n, &im, err, sizeof err);
    int maxd = 0;
    if (!rc)
        for (int i = 0; i < w * h * 3; i++) {
            int d = abs((int)im.data[i] - (int)pix[i]);
            if (d > maxd) maxd = d;
        }
    /* libjpeg is its own reference; only sanity-check that the pixels resemble the input. */
    TH_CHECK("jpeg_rgb_decode", rc == 0 && im.width == w && im.height == h && maxd <= 12,
             "rc=%d %s size %lldx%lld max diff %d", rc, err, (long long)im.height, (long long)im.width, maxd);
    mact_image_free(&im);

    /* Truncation anywhere past the header must fail, never return gray-filled pixels. */
    int bad = 0;
    for (size_t cut = 1; cut < m.n; cut += 37) {
        rc = mact_image_load_memory(m.p, cut, &im, err, sizeof err);
        if (rc == 0) bad++;
        mact_image_free(&im);
    }
    rc = mact_image_load_memory(m.p, m.n - 2, &im, err, sizeof err);  /* just the EOI missing */
    TH_CHECK("jpeg_truncated_rejected", bad == 0 && rc == MACT_ERR_FORMAT, "%d truncations accepted; rc=%d %s",
             bad, rc, err);
    /* A frame header claiming 60000 x 60000 is refused before decoding. */
    uint8_t *big = malloc(m.n);
    memcpy(big, m.p, m.n);
    uint8_t *sof = NULL;
    for (size_t i = 2; i + 9 < m.n; i++)
        if (big[i] == 0xFF && big[i + 1] == 0xC0) { sof = big + i; break; }
    if (sof) {
        sof[5] = sof[7] = 0xEA;  /* height, width = 0xEA60 = 60000 */
        sof[6] = sof[8] = 0x60;
    }
    rc = mact_image_load_memory(big, m.n, &im, err, sizeof err);
    TH_CHECK("jpeg_too_large_rejected", sof && rc == MACT_ERR_INPUT && im.data == NULL, "rc=%d %s", rc, err);
    free(big);
    uint8_t junk[64];
    memcpy(junk, m.p, 3);  /* valid SOI signature, garbage after */
    for (int i = 3; i < 64; i++) junk[i] = (uint8_t)rnd();
    rc = mact_image_load_memory(junk, sizeof junk, &im, err, sizeof err);
    TH_CHECK("jpeg_garbage_rejected", rc == MACT_ERR_FORMAT, "rc=%d %s", rc, err);
    free(m.p);

    m = make_jpeg(w, h, 1, JCS_GRAYSCALE, gray, 95);
    rc = mact_image_load_memory(m.p, m.n, &im, err, sizeof err);
    int rep = rc == 0;
    for (int i = 0; rep && i < w * h; i++)
        rep = im.data[i * 3] == im.data[i * 3 + 1] && im.data[i * 3] == im.data[i * 3 + 2] &&
              abs((int)im.data[i * 3] - (int)gray[i]) <= 8;
    TH_CHECK("jpeg_gray_replicated", rep && im.width == w && im.height == h, "rc=%d %s", rc, err);
    mact_image_free(&im);
    free(m.p);

    uint8_t *cmyk = malloc((size_t)(w * h * 4));
    for (int i = 0; i < w * h * 4; i++) cmyk[i] = (uint8_t)i;
    m = make_jpeg(w, h, 4, JCS_CMYK, cmyk, 90);
    rc = mact_image_load_memory(m.p, m.n, &im, err, sizeof err);
    TH_CHECK("jpeg_cmyk_unsupported", rc == MACT_ERR_UNSUPPORTED && im.data == NULL, "rc=%d %s", rc, err);
    free(m.p);
    free(cmyk);
    free(pix);
    free(gray);
}

static void test_resize_hand(void)
{
    char err[256] = "";
    /* Upscale 1x2 -> 1x4: scale 0.5, src x = 0.5*(d+0.5)-0.5 = -0.25(->0), 0.25, 0.75, 1.25(edge). */
    uint8_t src[2 * 3] = {0, 0, 0, 100, 200, 4};
    uint8_t dst[4 * 3];
    int rc = mact_image_resize(src, 1, 2, dst, 1, 4, err, sizeof err);
    uint8_t exp_up[12] = {0, 0, 0, 25, 50, 1, 75, 150, 3, 100, 200, 4};
    TH_CHECK("resize_upscale_hand", rc == 0 && memcmp(dst, exp_up, 12) == 0,
             "rc=%d got %u %u %u | %u %u %u | %u %u %u", rc, dst[3], dst[4], dst[5], dst[6], dst[7], dst[8],
             dst[9], dst[10], dst[11]);
    /* Downscale 1x4 -> 1x2 (no antialias): src x = 0.5 and 2.5, i.e. plain pair averages, and
     * exact .5 results round half to even: 10.5 -> 10, 21.5 -> 22, 0.5 -> 0, 255 stays. */
    uint8_t s4[12] = {10, 0, 255, 11, 1, 255, 20, 7, 0, 23, 8, 1};
    uint8_t d2[6];
    rc = mact_image_resize(s4, 1, 4, d2, 1, 2, err, sizeof err);
    uint8_t exp_dn[6] = {10, 0, 255, 22, 8, 0};
    TH_CHECK("resize_downscale_half_even", rc == 0 && memcmp(d2, exp_dn, 6) == 0,
             "got %u %u %u %u %u %u", d2[0], d2[1], d2[2], d2[3], d2[4], d2[5]);
    /* 2x2 -> 3x3 in both directions: centre pixel averages all four (scale 2/3, src 0.5). */
    uint8_t q[12] = {0, 0, 0, 90, 0, 0, 30, 0, 0, 120, 0, 0};
    uint8_t q3[27];
    rc = mact_image_resize(q, 2, 2, q3, 3, 3, err, sizeof err);
    TH_CHECK("resize_2d_centre", rc == 0 && q3[4 * 3] == 60 && q3[0] == 0 && q3[8 * 3] == 120,
             "centre %u corners %u %u", q3[12], q3[0], q3[24]);
    /* Identity is an exact copy. */
    uint8_t big[31 * 27 * 3], out[31 * 27 * 3];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)rnd();
    rc = mact_image_resize(big, 31, 27, out, 31, 27, err, sizeof err);
    TH_CHECK("resize_identity", rc == 0 && memcmp(big, out, sizeof big) == 0, "rc=%d", rc);
    /* A constant image stays constant at any scale. */
    memset(big, 77, sizeof big);
    uint8_t *o2 = malloc(378 * 378 * 3);
    rc = mact_image_resize(big, 31, 27, o2, 378, 378, err, sizeof err);
    int cst = rc == 0;
    for (int i = 0; cst && i < 378 * 378 * 3; i++) cst = o2[i] == 77;
    TH_CHECK("resize_constant", cst, "rc=%d", rc);
    free(o2);
    rc = mact_image_resize(big, 31, 27, out, 0, 27, err, sizeof err);
    TH_CHECK("resize_rejects_zero", rc == MACT_ERR_INPUT, "rc=%d %s", rc, err);
    rc = mact_image_resize(big, 31, 27, out, 20000, 27, err, sizeof err);
    TH_CHECK("resize_rejects_huge", rc == MACT_ERR_INPUT && strstr(err, "limit"), "rc=%d %s", rc, err);
}

static void test_patchify(void)
{
    char err[256] = "";
    const int H = 28, W = 42, P = 14;
    uint8_t img[28 * 42 * 3];
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)rnd();
    img[0] = 0;
    img[1] = 255;
    img[2] = 128;
    const int npw = W / P, pdim = P * P * 3, n = (H / P) * npw;
    float *pv = malloc(sizeof(float) * (size_t)(n * pdim));
    int rc = mact_image_patchify(img, H, W, P, pv, (size_t)(n * pdim), err, sizeof err);
    int ok = rc == 0, bad = -1;
    for (int ph = 0; ok && ph < H / P; ph++)
        for (int pw = 0; ok && pw < npw; pw++)
            for (int dy = 0; ok && dy < P; dy++)
                for (int dx = 0; ok && dx < P; dx++)
                    for (int c = 0; ok && c < 3; c++) {
                        float x = (float)img[((ph * P + dy) * W + pw * P + dx) * 3 + c] / 255.0f * 2.0f - 1.0f;
                        float got = pv[(ph * npw + pw) * pdim + (dy * P + dx) * 3 + c];
                        if (got != x) { ok = 0; bad = ph; }
                    }
    TH_CHECK("patchify_layout", ok, "rc=%d mismatch in patch row %d", rc, bad);
    TH_CHECK("normalise_endpoints", pv[0] == -1.0f && pv[1] == 1.0f && fabsf(pv[2] - (128.0f / 255.0f * 2 - 1)) < 1e-7f,
             "%g %g %g", pv[0], pv[1], pv[2]);
    rc = mact_image_patchify(img, H, W, 15, pv, (size_t)(n * pdim), err, sizeof err);
    TH_CHECK("patchify_rejects_non_multiple", rc == MACT_ERR_INPUT, "rc=%d", rc);
    rc = mact_image_patchify(img, H, W, P, pv, (size_t)(n * pdim) - 1, err, sizeof err);
    TH_CHECK("patchify_rejects_small_output", rc == MACT_ERR_INPUT, "rc=%d", rc);
    free(pv);

    /* preprocess at the model size: 378 identity keeps every pixel. */
    uint8_t *frame = malloc(378 * 378 * 3);
    for (int i = 0; i < 378 * 378 * 3; i++) frame[i] = (uint8_t)rnd();
    size_t cnt = 729 * 588;
    float *all = malloc(cnt * sizeof *all);
    rc = mact_image_preprocess(frame, 378, 378, 378, 378, 14, all, cnt, err, sizeof err);
    /* patch 28 (row 1, col 1) dy=3 dx=5 channel 2 <- pixel (17, 19) */
    float want = (float)frame[(17 * 378 + 19) * 3 + 2] / 255.0f * 2.0f - 1.0f;
    TH_CHECK("preprocess_378", rc == 0 && all[28 * 588 + (3 * 14 + 5) * 3 + 2] == want, "rc=%d %s", rc, err);
    free(all);
    free(frame);
}

static void test_from_arrays(void)
{
    char err[256] = "";
    float f[12] = {0.0f, 1.0f, 0.5f, 0.999f, -0.2f, 1.7f, NAN, INFINITY, -INFINITY, 0.1f, 0.2f, 0.00392157f};
    /* 0.5*255 = 127.5 -> 127 (truncation), 0.999*255 = 254.745 -> 254, 0.1*255 = 25.5 -> 25,
     * 0.2*255 = 51.000004 -> 51, 0.00392157*255 = 1.00000035 -> 1 */
    uint8_t want[12] = {0, 255, 127, 254, 0, 255, 0, 255, 0, 25, 51, 1};
    mact_image im;
    int rc = mact_image_from_f32(f, 2, 2, &im, err, sizeof err);
    TH_CHECK("from_f32", rc == 0 && memcmp(im.data, want, 12) == 0, "rc=%d got %u %u %u %u %u %u %u %u %u %u %u %u",
             rc, im.data[0], im.data[1], im.data[2], im.data[3], im.data[4], im.data[5], im.data[6], im.data[7],
             im.data[8], im.data[9], im.data[10], im.data[11]);
    mact_image_free(&im);
    rc = mact_image_from_u8(want, 2, 2, &im, err, sizeof err);
    TH_CHECK("from_u8", rc == 0 && im.data != want && memcmp(im.data, want, 12) == 0, "rc=%d", rc);
    mact_image_free(&im);
    rc = mact_image_from_u8(want, 0, 2, &im, err, sizeof err);
    TH_CHECK("from_u8_rejects_empty", rc == MACT_ERR_INPUT && im.data == NULL, "rc=%d", rc);
}

int main(int argc, char **argv)
{
    if (argc > 1) return tool_main(argc, argv);
    const char *tmp = getenv("MACT_TMP");
    if (!tmp || !*tmp) tmp = "/tmp";
    test_resize_hand();
    test_patchify();
    test_from_arrays();
    test_png_types();
    test_png_errors(tmp);
    test_jpeg();
    TH_EXIT();
}
