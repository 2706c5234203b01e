/* `mact export golden | onnx`: the seed's deployment inputs from a checkpoint (src/export/, docs/export.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "common/cli.h"
#include "mact.h"
#include "export/export.h"
#include "base/parse.h"

#define MAX_CAMS 8

static int usage_export(FILE *f)
{
    fprintf(f,
            "usage: mact export golden --model DIR --image F [--image F ...] --task T --state S\n"
            "                          [--seed N | --noise F.npy] [--norm-tag T] [--splits 4] [--threads N] --out DIR\n"
            "       mact export onnx --model DIR --out DIR [--splits 4] [--seq-len N] [--weights fp32|fp16]\n"
            "                          [--grid-sample native|decomposed] [--norm-tag T] [--n-images N]\n"
            "                          [--only vision|llm_split<i>|action_context|action_step]\n"
            "  golden: the seed's golden I/O (vision_io.npz, llm_split{i}_io.npz, action_context_io.npz,\n"
            "          action_step_io.npz, action_loop_io.npz, e2e_io.npz, trace.json) from one fp32 inference\n"
            "  onnx:   per-component ONNX graphs (opset 20, weights as external data) with the seed's I/O names\n"
            "  --out must be absent or an empty folder; a failed export leaves nothing behind\n");
    return 2;
}

/* --state: the shared parser (tools/common/cli.h), with this command's messages */
static int parse_state(const char *s, float *out, int cap, int *n)
{
    char bad[64];
    int rc = cli_parse_floats(s, out, cap, n, bad, sizeof bad);
    if (rc == -1 || rc == -3) fprintf(stderr, "mact export: --state: '%.40s' is not a finite number\n", bad);
    return rc ? -1 : 0;
}

static int cmd_export_golden(int argc, char **argv)
{
    mact_export_golden_options o = {0};
    const char *images[MAX_CAMS], *state = NULL, *noise_path = NULL, *out = NULL;
    int n_images = 0, has_seed = 0;
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &o.model_dir, .required = 1),
        CLI_O("--image", CLI_LIST, images, .count = &n_images, .cap = MAX_CAMS, .required = 1),
        CLI_O("--task", CLI_STR, &o.task, .required = 1), CLI_O("--state", CLI_STR, &state, .required = 1),
        CLI_O("--norm-tag", CLI_STR, &o.norm_tag), CLI_O("--noise", CLI_STR, &noise_path),
        CLI_O("--out", CLI_STR, &out, .required = 1), CLI_O("--seed", CLI_U64, &o.seed, .seen = &has_seed),
        CLI_O("--splits", CLI_INT, &o.splits, .lo = 1, .hi = MACT_EXPORT_MAX_SPLITS),
        CLI_O("--threads", CLI_INT, &o.threads, .lo = 0, .hi = MACT_MAX_THREADS), {0}};
    int rc = cli_parse("mact export golden", argc, argv, opts, NULL, 0, NULL, usage_export);
    if (rc) return cli_exit(rc);
    if (has_seed && noise_path) { fprintf(stderr, "mact export golden: --seed and --noise exclude each other\n"); return 2; }
    float st[64];
    int ns = 0;
    if (parse_state(state, st, 64, &ns)) { fprintf(stderr, "mact export golden: --state: at most 64 finite numbers\n"); return 1; }
    o.state = st;
    o.state_dim = (size_t)ns;
    mact_image imgs[MAX_CAMS];
    mact_frame fr[MAX_CAMS];
    float *noise = NULL;
    char err[1024];
    rc = 1;
    if (cli_frames_load("mact export golden", images, n_images, imgs, fr)) goto done;
    o.frames = fr;
    o.n_frames = (size_t)n_images;
    if (noise_path && cli_npy_f32(noise_path, &noise, &o.noise_len, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "mact export golden: --noise: %s\n", err);
        goto done;
    }
    o.noise = noise;
    if (mact_export_golden(&o, out, stdout, err, sizeof err)) { fprintf(stderr, "mact export golden: %s\n", err); goto done; }
    rc = 0;
done:
    cli_frames_free(imgs, n_images);
    free(noise);
    return rc;
}

static int parse_weights(const char *s, void *dst, char *err, size_t el)
{
    if (!strcmp(s, "fp32")) *(mact_export_weights *)dst = MACT_EXPORT_FP32;
    else if (!strcmp(s, "fp16")) *(mact_export_weights *)dst = MACT_EXPORT_FP16;
    else { snprintf(err, el, "--weights is fp32 or fp16"); return -1; }
    return 0;
}

static int parse_grid_sample(const char *s, void *dst, char *err, size_t el)
{
    if (!strcmp(s, "native")) *(mact_export_grid_sample *)dst = MACT_EXPORT_GS_NATIVE;
    else if (!strcmp(s, "decomposed")) *(mact_export_grid_sample *)dst = MACT_EXPORT_GS_DECOMPOSED;
    else { snprintf(err, el, "--grid-sample is native or decomposed"); return -1; }
    return 0;
}

static int cmd_export_onnx(int argc, char **argv)
{
    mact_export_onnx_options o = {0};
    const char *out = NULL;
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &o.model_dir, .required = 1), CLI_O("--out", CLI_STR, &out, .required = 1),
        CLI_O("--norm-tag", CLI_STR, &o.norm_tag),
        CLI_O("--splits", CLI_INT, &o.splits, .lo = 1, .hi = MACT_EXPORT_MAX_SPLITS), CLI_O("--only", CLI_STR, &o.only),
        CLI_O("--n-images", CLI_INT, &o.n_images, .lo = 1, .hi = 64), CLI_O("--seq-len", CLI_INT, &o.seq_len, .lo = 1, .hi = 1 << 20),
        CLI_O("--weights", CLI_FN, &o.weights, .fn = parse_weights),
        CLI_O("--grid-sample", CLI_FN, &o.grid_sample, .fn = parse_grid_sample), {0}};
    int rc = cli_parse("mact export onnx", argc, argv, opts, NULL, 0, NULL, usage_export);
    if (rc) return cli_exit(rc);
    char err[1024];
    if (mact_export_onnx(&o, out, stdout, err, sizeof err)) { fprintf(stderr, "mact export onnx: %s\n", err); return 1; }
    return 0;
}

int cmd_export(int argc, char **argv)
{
    if (argc < 1) { fprintf(stderr, "mact export: which one: golden or onnx?\n"); return usage_export(stderr); }
    if (!strcmp(argv[0], "golden")) return cmd_export_golden(argc - 1, argv + 1);
    if (!strcmp(argv[0], "onnx")) return cmd_export_onnx(argc - 1, argv + 1);
    if (cli_is_help(argv[0])) { usage_export(stdout); return 0; }
    static const char *const targets[] = {"golden", "onnx"};
    const char *near = cli_nearest(argv[0], strlen(argv[0]), targets, 2);
    if (near) fprintf(stderr, "mact export: unknown target '%s'; did you mean %s?\n", argv[0], near);
    else fprintf(stderr, "mact export: unknown target '%s' (golden or onnx)\n", argv[0]);
    return usage_export(stderr);
}
