/* `mact prune-analyze`, `mact prune`, `mact distill-eval`: the ViT depth-pruning tools of the SO-101 card's
 * Stage 1 (docs/compression.md); flags in, the compression toolkit (include/mact_compress.h) out, and
 * prune-analyze's bar chart. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "mact_compress.h"
#include "commands.h"
#include "common/cli.h"

#define MAX_IMAGES 4096

static int usage_prune(FILE *f)
{
    fprintf(f,
            "usage: mact prune-analyze --model DIR --image F [--image F ...] [--json F] [--png F] [--target-depth D]\n"
            "                          [--precision fp32|bf16|int8] [--int8-parts P] [--threads N]\n"
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
            "                         [--precision fp32|bf16|int8] [--int8-parts P] [--threads N]\n"
            "         cosine and relative MSE (MSE / teacher energy) of the student's connector output\n"
            "       prune-analyze and distill-eval compute in fp32 (the exact mode) unless --precision says otherwise\n");
    return 2;
}

static int parse_depth(const char *s, void *dst, char *err, size_t el)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > MACT_PRUNE_MAX_BLOCKS) { snprintf(err, el, "--target-depth needs a positive integer"); return -1; }
    *(int *)dst = (int)v;
    return 0;
}

typedef struct { int max; int *v; } frames_arg;

static int parse_frames(const char *s, void *dst, char *err, size_t el)
{
    frames_arg *f = dst;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > f->max) { snprintf(err, el, "--frames needs an integer in 1..%d", f->max); return -1; }
    *f->v = (int)v;
    return 0;
}

/* the SNR bars (orange: the proposed keep-set), the blocks an adapter tap reads starred */
static int bar_chart(const char *path, const mact_snr_result *r, int has_keep, char *err, size_t el)
{
    const int n = mact_snr_blocks(r), ni = mact_snr_images(r);
    double *snr = malloc(sizeof(double) * ((size_t)n + 1));
    int *tapped = malloc(sizeof(int) * ((size_t)n + 1)), *kept = malloc(sizeof(int) * ((size_t)n + 1));
    char (*lab)[16] = malloc(16 * ((size_t)n + 1));
    const char **labs = malloc(sizeof(char *) * ((size_t)n + 1));
    int rc = -1;
    if (snr && tapped && kept && lab && labs) {
        mact_snr_values(r, snr, tapped, kept);
        for (int j = 0; j < n; j++) { snprintf(lab[j], sizeof lab[j], "%d%s", j, tapped[j] ? "*" : ""); labs[j] = lab[j]; }
        char title[256];
        snprintf(title, sizeof title, "ViT block SNR (dB) = 10 log10(E||in||^2 / E||out-in||^2), %d image%s; * = tap%s", ni,
                 ni == 1 ? "" : "s", has_keep ? "; orange = proposed keep-set" : "");
        cli_series s = {.y = snr, .n = n, .bars = 1, .rgb = {0.25, 0.45, 0.75}, .alt = has_keep ? kept : NULL, .alt_rgb = {0.85, 0.33, 0.1}};
        cli_panel p = {.series = &s, .n_series = 1, .from_zero = 1, .xlabels = labs};
        cli_chart c = {.title = title, .xlabel = "ViT block (teacher index)", .width = 120 + 28 * n < 820 ? 820 : 120 + 28 * n,
                       .panel_height = 300, .panels = &p, .n_panels = 1};
        rc = cli_chart_png(path, &c, err, el);
    } else snprintf(err, el, "out of memory");
    free(snr); free(tapped); free(kept); free(lab); free(labs);
    cli_chart_cleanup();
    return rc;
}

/* the analyses' frames come from --image files or from --dataset, one of the two: 0, or 2 after saying what is
 * wrong */
static int frames_source(const char *prog, int n_images, const char *dataset, int n_frames)
{
    const char *why = n_images && dataset ? "--image and --dataset exclude each other"
                    : n_frames && !dataset ? "--frames counts --dataset's frames" : NULL;
    if (!n_images && !dataset) return cli_missing(prog, "--image F (one or more) or --dataset DIR", usage_prune);
    if (!why) return 0;
    fprintf(stderr, "%s: %s\n", prog, why);
    return usage_prune(stderr);
}

/* the analyses' model options: fp32 (the exact mode) unless --precision says otherwise */
typedef struct {
    mact_load_options lo;
    int threads;
} analysis_model;

int cmd_prune_analyze(int argc, char **argv)
{
    const char *images[MAX_IMAGES], *json = NULL, *png = NULL;
    mact_snr_options o = {.images = images};
    analysis_model am = {.lo = {.precision = MACT_PRECISION_FP32}};
    frames_arg fa = {1000000, &o.n_frames};
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &o.model, .required = 1),
        CLI_O("--image", CLI_LIST, images, .count = &o.n_images, .cap = MAX_IMAGES),
        CLI_O("--json", CLI_STR, &json), CLI_O("--png", CLI_STR, &png), CLI_O("--target-depth", CLI_FN, &o.target_depth, .fn = parse_depth),
        CLI_O("--threads", CLI_THREADS, &am.threads), CLI_O("--precision", CLI_FN, &am.lo.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &am.lo.int8_parts, .fn = cli_int8_parts),
        CLI_O("--dataset", CLI_STR, &o.dataset), CLI_O("--frames", CLI_FN, &fa, .fn = parse_frames), {0}};
    int rc = cli_parse("mact prune-analyze", argc, argv, opts, NULL, 0, NULL, usage_prune);
    if (rc) return cli_exit(rc);
    if ((rc = frames_source("mact prune-analyze", o.n_images, o.dataset, o.n_frames))) return rc;
    mact_model *m;
    if (cli_open_session("mact prune-analyze", o.model, &am.lo, am.threads, 1, &m, &o.session)) return 1;
    char err[4096];
    mact_snr_result *r;
    rc = mact_snr_analyze(&o, stdout, &r, err, sizeof err);
    mact_session_free(o.session);
    mact_model_free(m);
    if (rc) { fprintf(stderr, "mact prune-analyze: %s\n", err); return 1; }
    if (json && mact_snr_write_json(r, json, err, sizeof err)) { fprintf(stderr, "mact prune-analyze: %s\n", err); rc = 1; }
    if (!rc && png && bar_chart(png, r, o.target_depth > 0, err, sizeof err)) { fprintf(stderr, "mact prune-analyze: %s\n", err); rc = 1; }
    mact_snr_free(r);
    return rc;
}

int cmd_prune(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *keep_s = NULL, *taps_s = NULL;
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &model, .required = 1), CLI_O("--out", CLI_STR, &out, .required = 1),
        CLI_O("--keep", CLI_STR, &keep_s, .required = 1), CLI_O("--taps", CLI_STR, &taps_s), {0}};
    int rc = cli_parse("mact prune", argc, argv, opts, NULL, 0, NULL, usage_prune);
    if (rc) return cli_exit(rc);
    static int keep[MACT_PRUNE_MAX_BLOCKS];
    int nk = 0, taps[MACT_PRUNE_MAX_TAPS], nt = 0;
    if (cli_parse_ints(keep_s, -1000000, 1000000, keep, MACT_PRUNE_MAX_BLOCKS, &nk)) {
        fprintf(stderr, "mact prune: --keep '%s' is not a comma-separated list of block indices; nothing written\n", keep_s);
        return 1;
    }
    if (taps_s && cli_parse_ints(taps_s, -1000000, 1000000, taps, MACT_PRUNE_MAX_TAPS, &nt)) {
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

int cmd_distill_eval(int argc, char **argv)
{
    const char *images[MAX_IMAGES], *teacher = NULL, *student = NULL;
    mact_distill_options o = {.images = images};
    analysis_model am = {.lo = {.precision = MACT_PRECISION_FP32}};
    frames_arg fa = {MAX_IMAGES, &o.n_frames};
    const cli_opt opts[] = {
        CLI_O("--teacher", CLI_STR, &teacher, .required = 1), CLI_O("--student", CLI_STR, &student, .required = 1),
        CLI_O("--json", CLI_STR, &o.json),
        CLI_O("--threads", CLI_THREADS, &am.threads), CLI_O("--image", CLI_LIST, images, .count = &o.n_images, .cap = MAX_IMAGES),
        CLI_O("--precision", CLI_FN, &am.lo.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &am.lo.int8_parts, .fn = cli_int8_parts), CLI_O("--dataset", CLI_STR, &o.dataset),
        CLI_O("--frames", CLI_FN, &fa, .fn = parse_frames), {0}};
    int rc = cli_parse("mact distill-eval", argc, argv, opts, NULL, 0, NULL, usage_prune);
    if (rc) return cli_exit(rc);
    if ((rc = frames_source("mact distill-eval", o.n_images, o.dataset, o.n_frames))) return rc;
    mact_model *mt = NULL, *ms = NULL;
    if (cli_open_session("mact distill-eval", teacher, &am.lo, am.threads, 1, &mt, &o.teacher)) return 1;
    if (cli_open_session("mact distill-eval", student, &am.lo, am.threads, 1, &ms, &o.student)) rc = 1;
    o.teacher_name = teacher;
    o.student_name = student;
    char err[4096];
    if (!rc && mact_distill_eval(&o, stdout, NULL, err, sizeof err)) { fprintf(stderr, "mact distill-eval: %s\n", err); rc = 1; }
    mact_session_free(o.teacher);
    mact_session_free(o.student);
    mact_model_free(mt);
    mact_model_free(ms);
    return rc;
}
