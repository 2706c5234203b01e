/* `mact prune-analyze`, `mact prune`, `mact distill-eval`: the ViT depth-pruning tools of the SO-101 card's
 * Stage 1 (docs/compression.md). The surgery is src/dev/prune.c; the per-block energies come from the ViT
 * probe of src/stages/vision.c (stages/vision_probe.h). */
#include <cairo/cairo.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "dev/prune.h"
#include "io/image.h"
#include "io/npy.h"
#include "mact.h"
#include "mact_stages.h"
#include "model/session.h"
#include "stages/vision_probe.h"
#include "io/lerobot.h"
#include "ds_video.h"

#define MAX_IMAGES 4096

static int usage_prune(FILE *f)
{
    fprintf(f,
            "usage: mact prune-analyze --model DIR --image F [--image F ...] [--json F] [--png F] [--target-depth D]\n"
            "                          [--precision fp32|bf16|int8] [--threads N]\n"
            "         per ViT block: SNR = 10 log10(E||in||^2 / E||out - in||^2), E over tokens and images; D: a\n"
            "         keep-set of D blocks (the deepest tap pinned, the rest the lowest SNR) and its student taps.\n"
            "         Frames come from image files (PNG, JPEG, HxWx3 .npy) or --dataset DIR [--frames N]: N frames\n"
            "         (default 64) spread evenly over a LeRobot dataset's episodes and cameras (images stored in the\n"
            "         parquet files, or videos)\n"
            "       mact prune --model DIR --keep LIST [--taps LIST] --out DIR\n"
            "         student block j = teacher block keep[j]; default taps follow their teacher layers; --taps: the\n"
            "         student's vit_layers (negative = from len(keep)); --out must not exist\n"
            "       mact distill-eval --teacher DIR --student DIR (--image F [--image F ...] | --dataset DIR [--frames N])\n"
            "                         [--json F]\n"
            "                         [--precision fp32|bf16|int8] [--threads N]\n"
            "         cosine and relative MSE (MSE / teacher energy) of the student's connector output\n"
            "       prune-analyze and distill-eval compute in fp32 (the exact mode) unless --precision says otherwise\n");
    return 2;
}

/* --opt=value as --opt value */
static char **split_eq(int *argc, char **argv)
{
    char **v = malloc((size_t)(2 * *argc + 1) * sizeof *v);
    if (!v) return NULL;
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        char *eq = argv[i][0] == '-' && argv[i][1] == '-' ? strchr(argv[i], '=') : NULL;
        if (eq) {
            *eq = 0;
            v[n++] = argv[i];
            v[n++] = eq + 1;
        } else v[n++] = argv[i];
    }
    v[n] = NULL;
    *argc = n;
    return v;
}

static int parse_ints(const char *s, int *out, int cap, int *n)
{
    *n = 0;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '[' || *s == ']') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < -1000000 || v > 1000000 || (*end && *end != ',' && *end != ' ' && *end != ']'))
            return -1;
        if (*n == cap) return -2;
        out[(*n)++] = (int)v;
        s = end;
    }
    return *n ? 0 : -1;
}

/* PNG / JPEG by content, or an .npy HxWx3 array (uint8, or float in [0, 1]), resized and patchified by the
 * model's preprocessing (io/image.h) into pv [n_patches * patch_dim]. */
static int load_pixels(const char *path, const mact_model_info *mi, float *pv, char *err, size_t el)
{
    mact_image img = {0};
    size_t l = strlen(path);
    int rc;
    if (l > 4 && !strcmp(path + l - 4, ".npy")) {
        mact_array a = {0};
        if (mact_npy_read(path, &a, err, el)) return -1;
        rc = -1;
        if (a.ndim != 3 || a.shape[2] != 3) snprintf(err, el, "%s: expected an HxWx3 array", path);
        else if (a.dtype == MACT_U8) rc = mact_image_from_u8(a.data, a.shape[0], a.shape[1], &img, err, el);
        else if (a.dtype == MACT_F32) rc = mact_image_from_f32(a.data, a.shape[0], a.shape[1], &img, err, el);
        else snprintf(err, el, "%s: dtype %s; expected uint8 or float32", path, mact_dtype_name(a.dtype));
        mact_array_free(&a);
    } else rc = mact_image_load_file(path, &img, err, el);
    if (rc) return -1;
    rc = mact_image_preprocess(img.data, img.height, img.width, mi->image_height, mi->image_width, mi->patch_size, pv,
                               (size_t)mi->n_patches * mi->patch_dim, err, el);
    mact_image_free(&img);
    return rc ? -1 : 0;
}

typedef struct {
    const char *model, *json, *png, *images[MAX_IMAGES], *dataset;
    int n_images, target_depth, threads;
    long frames;
    mact_precision precision;
} analyze_args;

/* A calibration or held-out frame picked from a LeRobot dataset: its encoded bytes (PNG/JPEG in the parquet)
 * or, for a video camera, the decoded frame; and a name. */
typedef struct {
    uint8_t *bytes;
    size_t len;
    mact_image img;
    char name[96];
} ds_frame;

static void free_frames(ds_frame *f, int n)
{
    for (int i = 0; f && i < n; i++) { free(f[i].bytes); mact_image_free(&f[i].img); }
    free(f);
}

/* n frames spread evenly over a LeRobot dataset's episodes and image cameras (frame numbers i * total / n of the
 * concatenation, each camera's frames in turn): 0 with *out / *count, or -1 with err set */
static int dataset_frames(const char *dir, long n, ds_frame **out, int *count, char *err, size_t el)
{
    *out = NULL;
    *count = 0;
    mact_ld *d;
    if (mact_ld_open(dir, &d, err, el)) return -1;
    const char *keys[64];
    int nk = 0, rc = 0;
    for (int f = 0; f < mact_ld_num_features(d) && nk < 64; f++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, f);
        if (!strcmp(ft->dtype, "image") || !strcmp(ft->dtype, "video")) keys[nk++] = ft->key;
    }
    ds_video v = {0};
    int64_t total = 0;
    for (int e = 0; e < mact_ld_num_episodes(d); e++) total += mact_ld_episode_at(d, e)->length * nk;
    if (!nk || total < 1) {
        snprintf(err, el, "%s: no image feature to calibrate on", dir);
        mact_ld_close(d);
        return -1;
    }
    if (n > total) n = (long)total;
    ds_frame *fr = calloc((size_t)n, sizeof *fr);
    if (!fr) {
        snprintf(err, el, "out of memory");
        mact_ld_close(d);
        return -1;
    }
    int used = 0;
    int64_t base = 0, next = 0;  /* the concatenation index of the next frame to take: used * total / n */
    for (int e = 0; e < mact_ld_num_episodes(d) && !rc && used < n; e++)
        for (int k = 0; k < nk && !rc && used < n; k++) {
            const int64_t len = mact_ld_episode_at(d, e)->length;
            if (next >= base + len) { base += len; continue; }
            uint8_t *bytes = NULL;
            int64_t *off = NULL, rows = len;
            double from = 0, *ts = NULL;
            const int video = !strcmp(mact_ld_find_feature(d, keys[k])->dtype, "video");
            if (video ? ds_video_episode(d, e, keys[k], &v, &from, err, el) || ds_timestamps(d, e, len, &ts, err, el)
                      : mact_ld_read_images(d, e, keys[k], &bytes, &off, &rows, err, el))
                rc = -1;
            while (!rc && used < n && next < base + rows) {
                const int64_t t = next - base;
                ds_frame *f = &fr[used];
                if (video) {
                    if (mact_video_frame_at(v.v, ds_query_time(d, from, ts, t), 1e-4, &f->img, err, el)) { rc = -1; break; }
                } else {
                    const int64_t sz = off[t + 1] - off[t];
                    f->bytes = malloc((size_t)sz + 1);
                    if (!f->bytes) { snprintf(err, el, "out of memory"); rc = -1; break; }
                    memcpy(f->bytes, bytes + off[t], (size_t)sz);
                    f->len = (size_t)sz;
                }
                snprintf(f->name, sizeof f->name, "episode %d %s frame %lld", e, keys[k], (long long)t);
                used++;
                next = (int64_t)((double)used * (double)total / (double)n);
            }
            free(bytes);
            free(off);
            free(ts);
            base += len;
        }
    ds_video_close(&v);
    mact_ld_close(d);
    if (rc) {
        free_frames(fr, used);
        return -1;
    }
    *out = fr;
    *count = used;
    return 0;
}

/* an encoded frame -> the model's pixel values */
static int frame_pixels(const ds_frame *f, const mact_model_info *mi, float *pv, char *err, size_t el)
{
    mact_image img = {0};
    const mact_image *im = f->img.data ? &f->img : &img;
    int rc = (!f->img.data && mact_image_load_memory(f->bytes, f->len, &img, err, el)) ||
             mact_image_preprocess(im->data, im->height, im->width, mi->image_height, mi->image_width, mi->patch_size,
                                   pv, (size_t)mi->n_patches * mi->patch_dim, err, el);
    mact_image_free(&img);
    return rc ? -1 : 0;
}

static int load_model(const char *dir, mact_precision prec, int threads, mact_model **m, mact_session **s, char *err,
                      size_t el)
{
    mact_load_options lo = {.precision = prec};
    mact_session_options so = {.max_images = 1, .max_tokens = 64, .n_threads = threads};
    *m = NULL;
    *s = NULL;
    if (mact_model_load(dir, &lo, m, err, el)) return -1;
    if (mact_session_new(*m, &so, s, err, el)) { mact_model_free(*m); *m = NULL; return -1; }
    return 0;
}

static void bar_chart(const char *path, const double *snr, int n, const int *tapped, const int *kept, int has_keep,
                      int n_img, char *err, size_t el, int *rc)
{
    const int W = 120 + 28 * n < 820 ? 820 : 120 + 28 * n, H = 420, x0 = 70, y0 = 40, ph = 300;
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(sf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    double hi = 1;
    for (int j = 0; j < n; j++) if (isfinite(snr[j]) && snr[j] > hi) hi = snr[j];
    double lo = 0;
    for (int j = 0; j < n; j++) if (isfinite(snr[j]) && snr[j] < lo) lo = snr[j];
    hi = ceil(hi / 5) * 5;
    lo = floor(lo / 5) * 5;
    const double scale = ph / (hi - lo);
    const double zero = y0 + hi * scale;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 11);
    cairo_set_line_width(cr, 1);
    for (double v = lo; v <= hi + 1e-9; v += 5) {  /* grid */
        double y = zero - v * scale;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x0, y);
        cairo_line_to(cr, W - 20, y);
        cairo_stroke(cr);
        char t[32];
        snprintf(t, sizeof t, "%g", v);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, x0 - 30, y + 4);
        cairo_show_text(cr, t);
    }
    for (int j = 0; j < n; j++) {
        double v = isfinite(snr[j]) ? snr[j] : hi;
        double x = x0 + 10 + 28 * j, y = zero - (v > 0 ? v : 0) * scale, h = fabs(v) * scale;
        if (has_keep && kept[j]) cairo_set_source_rgb(cr, 0.85, 0.33, 0.1);
        else cairo_set_source_rgb(cr, 0.25, 0.45, 0.75);
        cairo_rectangle(cr, x, y, 20, h);
        cairo_fill(cr);
        char t[16];
        snprintf(t, sizeof t, "%d%s", j, tapped[j] ? "*" : "");
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_move_to(cr, x + 2, y0 + ph + (lo < 0 ? 0 : 0) + 16);
        cairo_show_text(cr, t);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x0, zero);
    cairo_line_to(cr, W - 20, zero);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 13);
    char title[256];
    snprintf(title, sizeof title, "ViT block SNR (dB) = 10 log10(E||in||^2 / E||out-in||^2), %d image%s; * = tap%s", n_img,
             n_img == 1 ? "" : "s", has_keep ? "; orange = proposed keep-set" : "");
    cairo_move_to(cr, x0, 22);
    cairo_show_text(cr, title);
    cairo_move_to(cr, x0, H - 20);
    cairo_show_text(cr, "ViT block (teacher index)");
    cairo_surface_flush(sf);
    cairo_status_t st = cairo_surface_write_to_png(sf, path);
    if (st != CAIRO_STATUS_SUCCESS) {
        snprintf(err, el, "cannot write %s: %s", path, cairo_status_to_string(st));
        *rc = 1;
    }
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
    /* cairo's and fontconfig's caches, released so a leak checker sees only ours */
    cairo_debug_reset_static_data();
    void (*fc_fini)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "FcFini");
    if (fc_fini) fc_fini();
}

static int cmd_prune_analyze_main(int argc, char **argv)
{
    analyze_args a = {.precision = MACT_PRECISION_FP32};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(o, "--model") && more) a.model = argv[++i];
        else if (!strcmp(o, "--image") && more) {
            if (a.n_images == MAX_IMAGES) { fprintf(stderr, "mact prune-analyze: at most %d images\n", MAX_IMAGES); return 2; }
            a.images[a.n_images++] = argv[++i];
        } else if (!strcmp(o, "--json") && more) a.json = argv[++i];
        else if (!strcmp(o, "--png") && more) a.png = argv[++i];
        else if (!strcmp(o, "--target-depth") && more) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > MACT_PRUNE_MAX_BLOCKS) { fprintf(stderr, "mact prune-analyze: --target-depth needs a positive integer\n"); return 2; }
            a.target_depth = (int)v;
        } else if (!strcmp(o, "--threads") && more) a.threads = atoi(argv[++i]);
        else if (!strcmp(o, "--precision") && more) {
            if (mact_precision_parse(argv[++i], &a.precision)) return usage_prune(stderr);
        } else if (!strcmp(o, "--dataset") && more) a.dataset = argv[++i];
        else if (!strcmp(o, "--frames") && more) {
            char *end;
            a.frames = strtol(argv[++i], &end, 10);
            if (*end || a.frames < 1 || a.frames > 1000000) {
                fprintf(stderr, "mact prune-analyze: --frames needs an integer in 1..1000000\n");
                return 2;
            }
        } else return usage_prune(stderr);
    }
    if (!a.model || (!a.n_images == !a.dataset)) return usage_prune(stderr);
    if (a.frames && !a.dataset) return usage_prune(stderr);
    char err[2048];
    mact_vit_geometry g;
    if (mact_prune_geometry(a.model, &g, err, sizeof err)) { fprintf(stderr, "mact prune-analyze: %s\n", err); return 1; }
    mact_model *m;
    mact_session *s;
    if (load_model(a.model, a.precision, a.threads, &m, &s, err, sizeof err)) {
        fprintf(stderr, "mact prune-analyze: %s\n", err);
        return 1;
    }
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    const mact_config *c = &m->cfg;
    const int nb = c->vit_layers;
    const int64_t P = mi.n_patches;
    float *pv = malloc((size_t)P * mi.patch_dim * sizeof(float));
    float *xin = malloc((size_t)P * c->vit_hidden * sizeof(float));
    double *in_sq = calloc((size_t)nb, sizeof(double)), *d_sq = calloc((size_t)nb, sizeof(double));
    double *snr = calloc((size_t)nb, sizeof(double));
    int *tapped = calloc((size_t)nb, sizeof(int)), *kept = calloc((size_t)nb, sizeof(int));
    int rc = 0;
    if (!pv || !xin || !in_sq || !d_sq || !snr || !tapped || !kept) { fprintf(stderr, "mact prune-analyze: out of memory\n"); rc = 1; goto out; }
    mact_vit_probe probe = {in_sq, d_sq, xin};
    for (int i = 0; i < a.n_images; i++) {
        if (load_pixels(a.images[i], &mi, pv, err, sizeof err)) { fprintf(stderr, "mact prune-analyze: %s\n", err); rc = 1; goto out; }
        mact_session_enter(s);
        mact_vit_probe_run(s, pv, &probe);
    }
    if (a.dataset) {
        ds_frame *fr;
        int n;
        if (dataset_frames(a.dataset, a.frames ? a.frames : 64, &fr, &n, err, sizeof err)) {
            fprintf(stderr, "mact prune-analyze: %s\n", err);
            rc = 1;
            goto out;
        }
        for (int i = 0; i < n && !rc; i++) {
            if (frame_pixels(&fr[i], &mi, pv, err, sizeof err)) {
                fprintf(stderr, "mact prune-analyze: %s: %s\n", fr[i].name, err);
                rc = 1;
            } else {
                mact_session_enter(s);
                mact_vit_probe_run(s, pv, &probe);
            }
        }
        free_frames(fr, n);
        if (rc) goto out;
        a.n_images = n;
    }
    int deepest = 0;
    for (int t = 0; t < g.n_taps; t++) {
        tapped[g.taps_abs[t]] = 1;
        if (g.taps_abs[t] > deepest) deepest = g.taps_abs[t];
    }
    const double count = (double)a.n_images * (double)P;  /* tokens averaged over */
    printf("model: %s\n", a.model);
    printf("ViT: %d blocks stored, vit_config.num_hidden_layers %d, taps", nb, g.cfg_layers);
    for (int t = 0; t < g.n_taps; t++) printf(" %d (layer %d)", g.taps_raw[t], g.taps_abs[t]);
    printf("\ncalibration: %d image%s x %lld tokens, precision %s\n", a.n_images, a.n_images == 1 ? "" : "s",
           (long long)P, mact_precision_str(mi.precision));
    printf("SNR_j = 10 log10(E||in_j||^2 / E||out_j - in_j||^2), E = the mean over tokens and images of the per-token\n"
           "squared L2 norm of block j's input residual stream (in) and of its update (out - in); high = the block\n"
           "barely changes its input\n");
    printf("%5s %16s %16s %10s\n", "block", "E||in||^2", "E||out-in||^2", "SNR_dB");
    for (int j = 0; j < nb; j++) {
        snr[j] = d_sq[j] > 0 ? 10.0 * log10(in_sq[j] / d_sq[j]) : INFINITY;
        printf("%5d %16.6g %16.6g %10.4f%s%s\n", j, in_sq[j] / count, d_sq[j] / count, snr[j], tapped[j] ? "  tap" : "",
               j > deepest ? "  (after the deepest tap: feeds nothing)" : "");
    }
    /* the proposal */
    int keep[MACT_PRUNE_MAX_BLOCKS], nk = 0, raw[MACT_PRUNE_MAX_TAPS], lands[MACT_PRUNE_MAX_TAPS];
    if (a.target_depth) {
        if (a.target_depth > deepest + 1) {
            fprintf(stderr, "mact prune-analyze: --target-depth %d: only %d blocks (0..%d, the deepest tap) feed the "
                    "connector\n", a.target_depth, deepest + 1, deepest);
            rc = 1;
            goto out;
        }
        kept[deepest] = 1;
        for (int k = 1; k < a.target_depth; k++) {  /* the lowest SNR first; ties: the shallower block */
            int best = -1;
            for (int j = 0; j < deepest; j++)
                if (!kept[j] && (best < 0 || snr[j] < snr[best])) best = j;
            kept[best] = 1;
        }
        for (int j = 0; j < nb; j++) if (kept[j]) keep[nk++] = j;
        /* taps: the deep one on its teacher layer; any other on the student block whose teacher layer is the
         * deepest kept layer at or below its own (the stream the tap reads once the dropped blocks are gone) */
        printf("proposed keep-set (%d blocks: teacher layer %d pinned, the rest the lowest SNR):", nk, deepest);
        for (int j = 0; j < nk; j++) printf("%s%d", j ? "," : " ", keep[j]);
        printf("\n");
        for (int t = 0; t < g.n_taps; t++) {
            int sj = 0;
            for (int j = 0; j < nk; j++) if (keep[j] <= g.taps_abs[t]) sj = j;
            lands[t] = keep[sj];
            raw[t] = g.taps_raw[t] < 0 ? sj - nk : sj;
            printf("tap %d: teacher vit_layers[%d] = %d (layer %d) -> student vit_layers[%d] = %d = student block %d = "
                   "teacher layer %d%s\n", t, t, g.taps_raw[t], g.taps_abs[t], t, raw[t], sj, lands[t],
                   lands[t] == g.taps_abs[t] ? "" : " (a different layer: distillation re-learns it)");
        }
        printf("next: mact prune --model %s --keep ", a.model);
        for (int j = 0; j < nk; j++) printf("%s%d", j ? "," : "", keep[j]);
        printf(" --taps ");
        for (int t = 0; t < g.n_taps; t++) printf("%s%d", t ? "," : "", raw[t]);
        printf(" --out OUT_DIR\n");
    }
    if (a.json) {
        FILE *f = fopen(a.json, "w");
        if (!f) { fprintf(stderr, "mact prune-analyze: cannot write %s: %s\n", a.json, strerror(errno)); rc = 1; goto out; }
#define ARR(name, expr) do { fprintf(f, "  \"%s\": [", name); \
        for (int j = 0; j < nb; j++) { double v_ = (expr); \
            if (isfinite(v_)) fprintf(f, "%s%.17g", j ? ", " : "", v_); else fprintf(f, "%snull", j ? ", " : ""); } \
        fprintf(f, "],\n"); } while (0)
        fprintf(f, "{\n");
        ARR("snr_db", snr[j]);
        ARR("in_energy", in_sq[j] / count);
        ARR("delta_energy", d_sq[j] / count);
#undef ARR
        fprintf(f, "  \"blocks\": %d,\n  \"config_layers\": %d,\n  \"images\": %d,\n  \"tokens_per_image\": %lld,\n",
                nb, g.cfg_layers, a.n_images, (long long)P);
        fprintf(f, "  \"precision\": \"%s\",\n  \"taps\": [", mact_precision_str(mi.precision));
        for (int t = 0; t < g.n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", g.taps_abs[t]);
        fprintf(f, "]");
        if (a.target_depth) {
            fprintf(f, ",\n  \"keep\": [");
            for (int j = 0; j < nk; j++) fprintf(f, "%s%d", j ? ", " : "", keep[j]);
            fprintf(f, "],\n  \"student_taps\": [");
            for (int t = 0; t < g.n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", raw[t]);
            fprintf(f, "],\n  \"student_taps_teacher_layers\": [");
            for (int t = 0; t < g.n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", lands[t]);
            fprintf(f, "]");
        }
        fprintf(f, "\n}\n");
        if (fclose(f) != 0) { fprintf(stderr, "mact prune-analyze: cannot write %s\n", a.json); rc = 1; goto out; }
    }
    if (a.png) {
        bar_chart(a.png, snr, nb, tapped, kept, a.target_depth > 0, a.n_images, err, sizeof err, &rc);
        if (rc) fprintf(stderr, "mact prune-analyze: %s\n", err);
    }
out:
    free(pv);
    free(xin);
    free(in_sq);
    free(d_sq);
    free(snr);
    free(tapped);
    free(kept);
    mact_session_free(s);
    mact_model_free(m);
    return rc;
}

static int cmd_prune_main(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *keep_s = NULL, *taps_s = NULL;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(o, "--model") && more) model = argv[++i];
        else if (!strcmp(o, "--out") && more) out = argv[++i];
        else if (!strcmp(o, "--keep") && more) keep_s = argv[++i];
        else if (!strcmp(o, "--taps") && more) taps_s = argv[++i];
        else return usage_prune(stderr);
    }
    if (!model || !out || !keep_s) return usage_prune(stderr);
    static int keep[MACT_PRUNE_MAX_BLOCKS];
    int nk = 0, taps[MACT_PRUNE_MAX_TAPS], nt = 0;
    if (parse_ints(keep_s, keep, MACT_PRUNE_MAX_BLOCKS, &nk)) {
        fprintf(stderr, "mact prune: --keep '%s' is not a comma-separated list of block indices; nothing written\n", keep_s);
        return 1;
    }
    if (taps_s && parse_ints(taps_s, taps, MACT_PRUNE_MAX_TAPS, &nt)) {
        fprintf(stderr, "mact prune: --taps '%s' is not a comma-separated list of at most %d layers; nothing written\n",
                taps_s, MACT_PRUNE_MAX_TAPS);
        return 1;
    }
    char err[2048];
    if (mact_prune(model, keep, nk, taps_s ? taps : NULL, nt, out, stdout, err, sizeof err)) {
        fprintf(stderr, "mact prune: %s; nothing written\n", err);
        return 1;
    }
    return 0;
}

static int cmd_distill_eval_main(int argc, char **argv)
{
    const char *teacher = NULL, *student = NULL, *json = NULL, *images[MAX_IMAGES], *dataset = NULL;
    int n_img = 0, threads = 0;
    long frames = 0;
    mact_precision prec = MACT_PRECISION_FP32;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(o, "--teacher") && more) teacher = argv[++i];
        else if (!strcmp(o, "--student") && more) student = argv[++i];
        else if (!strcmp(o, "--json") && more) json = argv[++i];
        else if (!strcmp(o, "--threads") && more) threads = atoi(argv[++i]);
        else if (!strcmp(o, "--image") && more) {
            if (n_img == MAX_IMAGES) { fprintf(stderr, "mact distill-eval: at most %d images\n", MAX_IMAGES); return 2; }
            images[n_img++] = argv[++i];
        } else if (!strcmp(o, "--precision") && more) {
            if (mact_precision_parse(argv[++i], &prec)) return usage_prune(stderr);
        } else if (!strcmp(o, "--dataset") && more) dataset = argv[++i];
        else if (!strcmp(o, "--frames") && more) {
            char *end;
            frames = strtol(argv[++i], &end, 10);
            if (*end || frames < 1 || frames > MAX_IMAGES) {
                fprintf(stderr, "mact distill-eval: --frames needs an integer in 1..%d\n", MAX_IMAGES);
                return 2;
            }
        } else return usage_prune(stderr);
    }
    if (!teacher || !student || (!n_img == !dataset) || (frames && !dataset)) return usage_prune(stderr);
    ds_frame *fr = NULL;
    char derr[1024];
    if (dataset) {
        if (dataset_frames(dataset, frames ? frames : 64, &fr, &n_img, derr, sizeof derr)) {
            fprintf(stderr, "mact distill-eval: %s\n", derr);
            return 1;
        }
        for (int i = 0; i < n_img; i++) images[i] = fr[i].name;
    }
    char err[2048];
    mact_model *mt = NULL, *ms = NULL;
    mact_session *st = NULL, *ss = NULL;
    int rc = 1;
    float *pv = NULL, *et = NULL, *es = NULL;
    FILE *jf = NULL;
    if (load_model(teacher, prec, threads, &mt, &st, err, sizeof err) ||
        load_model(student, prec, threads, &ms, &ss, err, sizeof err)) {
        fprintf(stderr, "mact distill-eval: %s\n", err);
        goto out;
    }
    mact_model_info it, is;
    mact_model_get_info(mt, &it);
    mact_model_get_info(ms, &is);
    if (it.tokens_per_image != is.tokens_per_image || it.d_model != is.d_model || it.image_height != is.image_height ||
        it.image_width != is.image_width || it.patch_size != is.patch_size) {
        fprintf(stderr, "mact distill-eval: the teacher's connector output (%d x %d, %dx%d images) and the student's "
                "(%d x %d, %dx%d) differ in shape\n", it.tokens_per_image, it.d_model, it.image_height, it.image_width,
                is.tokens_per_image, is.d_model, is.image_height, is.image_width);
        goto out;
    }
    const int64_t K = it.tokens_per_image, D = it.d_model, N = K * D;
    pv = malloc((size_t)it.n_patches * it.patch_dim * sizeof(float));
    et = malloc((size_t)N * sizeof(float));
    es = malloc((size_t)N * sizeof(float));
    if (!pv || !et || !es) { fprintf(stderr, "mact distill-eval: out of memory\n"); goto out; }
    if (json && !(jf = fopen(json, "w"))) { fprintf(stderr, "mact distill-eval: cannot write %s: %s\n", json, strerror(errno)); goto out; }
    printf("teacher %s, student %s: connector output %lld tokens x %lld per image, precision %s\n", teacher, student,
           (long long)K, (long long)D, mact_precision_str(it.precision));
    printf("cos_token: per-token cosine over the %lld features, averaged over tokens; cos_flat: cosine of the whole "
           "output; rel_mse = mean((s - t)^2) / mean(t^2)\n", (long long)D);
    printf("%-40s %12s %12s %12s %12s %s\n", "image", "cos_token", "cos_flat", "rel_mse", "max_abs", "identical");
    if (jf) fprintf(jf, "{\n  \"images\": [\n");
    double sum_tok_cos = 0, sum_se = 0, sum_te = 0, sum_dot = 0, sum_ss = 0;
    int64_t n_tok = 0, n_ident = 0;
    double worst_abs = 0;
    for (int i = 0; i < n_img; i++) {
        if (fr ? frame_pixels(&fr[i], &it, pv, err, sizeof err) : load_pixels(images[i], &it, pv, err, sizeof err)) {
            fprintf(stderr, "mact distill-eval: %s: %s\n", images[i], err);
            goto out;
        }
        if (mact_vision(st, pv, 1, et) || mact_vision(ss, pv, 1, es)) {
            fprintf(stderr, "mact distill-eval: %s%s\n", mact_session_error(st), mact_session_error(ss));
            goto out;
        }
        double tc = 0, dot = 0, tt = 0, sq = 0, se = 0, mx = 0;
        for (int64_t k = 0; k < K; k++) {
            double d1 = 0, a1 = 0, b1 = 0;
            for (int64_t j = 0; j < D; j++) {
                double t = et[k * D + j], s = es[k * D + j], e = s - t;
                d1 += s * t;
                a1 += t * t;
                b1 += s * s;
                se += e * e;
                if (fabs(e) > mx) mx = fabs(e);
            }
            tc += (a1 > 0 && b1 > 0) ? d1 / sqrt(a1 * b1) : (a1 == b1 ? 1.0 : 0.0);
            dot += d1;
            tt += a1;
            sq += b1;
        }
        int ident = !memcmp(et, es, (size_t)N * sizeof(float));
        double cos_flat = (tt > 0 && sq > 0) ? dot / sqrt(tt * sq) : (tt == sq ? 1.0 : 0.0);
        double rel = tt > 0 ? se / tt : (se > 0 ? INFINITY : 0.0);
        printf("%-40s %12.8f %12.8f %12.6g %12.6g %s\n", images[i], tc / K, cos_flat, rel, mx, ident ? "yes" : "no");
        if (jf)
            fprintf(jf, "    {\"image\": \"%s\", \"cos_token\": %.17g, \"cos_flat\": %.17g, \"rel_mse\": %.17g, \"max_abs\": "
                    "%.17g, \"identical\": %s}%s\n", images[i], tc / K, cos_flat, rel, mx, ident ? "true" : "false",
                    i + 1 < n_img ? "," : "");
        sum_tok_cos += tc;
        n_tok += K;
        sum_se += se;
        sum_te += tt;
        sum_dot += dot;
        sum_ss += sq;
        n_ident += ident;
        if (mx > worst_abs) worst_abs = mx;
    }
    double ocos = sum_tok_cos / (double)n_tok, orel = sum_te > 0 ? sum_se / sum_te : 0.0;
    double oflat = (sum_te > 0 && sum_ss > 0) ? sum_dot / sqrt(sum_te * sum_ss) : 1.0;
    printf("%-40s %12.8f %12.8f %12.6g %12.6g %s\n", "overall", ocos, oflat, orel, worst_abs,
           n_ident == n_img ? "yes" : "no");
    if (jf) {
        fprintf(jf, "  ],\n  \"overall\": {\"cos_token\": %.17g, \"cos_flat\": %.17g, \"rel_mse\": %.17g, \"max_abs\": %.17g, "
                "\"identical\": %s, \"n_images\": %d}\n}\n", ocos, oflat, orel, worst_abs, n_ident == n_img ? "true" : "false",
                n_img);
        int bad = fclose(jf) != 0;
        jf = NULL;
        if (bad) { fprintf(stderr, "mact distill-eval: cannot write %s\n", json); goto out; }
    }
    rc = 0;
out:
    free_frames(fr, n_img);
    if (jf) fclose(jf);
    free(pv);
    free(et);
    free(es);
    mact_session_free(st);
    mact_session_free(ss);
    mact_model_free(mt);
    mact_model_free(ms);
    return rc;
}

int cmd_prune_analyze(int argc, char **argv)
{
    char **v = split_eq(&argc, argv);
    if (!v) return 1;
    int rc = cmd_prune_analyze_main(argc, v);
    free(v);
    return rc;
}

int cmd_prune(int argc, char **argv)
{
    char **v = split_eq(&argc, argv);
    if (!v) return 1;
    int rc = cmd_prune_main(argc, v);
    free(v);
    return rc;
}

int cmd_distill_eval(int argc, char **argv)
{
    char **v = split_eq(&argc, argv);
    if (!v) return 1;
    int rc = cmd_distill_eval_main(argc, v);
    free(v);
    return rc;
}
