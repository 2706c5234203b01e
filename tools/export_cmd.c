/* `mact export golden | onnx`: the seed's deployment inputs from a checkpoint (src/export/, docs/export.md). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "common/cli.h"
#include "mact.h"
#include "export/export.h"
#include "io/image.h"
#include "io/npy.h"
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
    char perr[256], err[1024];
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "mact export golden: %s needs a value\n", k); return 2; }
        i++;
        if (!strcmp(k, "--model")) o.model_dir = v;
        else if (!strcmp(k, "--image")) {
            if (n_images == MAX_CAMS) { fprintf(stderr, "mact export golden: more than %d --image\n", MAX_CAMS); return 2; }
            images[n_images++] = v;
        } else if (!strcmp(k, "--task")) o.task = v;
        else if (!strcmp(k, "--state")) state = v;
        else if (!strcmp(k, "--norm-tag")) o.norm_tag = v;
        else if (!strcmp(k, "--noise")) noise_path = v;
        else if (!strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--seed")) { if (mact_parse_u64_arg("mact export golden: --seed", v, &o.seed, perr, sizeof perr)) goto bad; has_seed = 1; }
        else if (!strcmp(k, "--splits")) { if (mact_parse_int_arg("mact export golden: --splits", v, 1, MACT_EXPORT_MAX_SPLITS, &o.splits, perr, sizeof perr)) goto bad; }
        else if (!strcmp(k, "--threads")) { if (mact_parse_int_arg("mact export golden: --threads", v, 0, MACT_MAX_THREADS, &o.threads, perr, sizeof perr)) goto bad; }
        else { fprintf(stderr, "mact export golden: unknown option %s\n", k); return 2; }
        continue;
    bad:
        fprintf(stderr, "%s\n", perr);
        return 2;
    }
    if (!o.model_dir || !n_images || !o.task || !state || !out) return usage_export(stderr);
    if (has_seed && noise_path) { fprintf(stderr, "mact export golden: --seed and --noise exclude each other\n"); return 2; }
    float st[64];
    int ns = 0;
    if (parse_state(state, st, 64, &ns)) { fprintf(stderr, "mact export golden: --state: at most 64 finite numbers\n"); return 1; }
    o.state = st;
    o.state_dim = (size_t)ns;
    mact_image imgs[MAX_CAMS] = {0};
    mact_frame fr[MAX_CAMS];
    float *noise = NULL;
    int rc = 1;
    for (int i = 0; i < n_images; i++) {
        if (mact_image_load_path(images[i], &imgs[i], err, sizeof err)) { fprintf(stderr, "mact export golden: --image %s: %s\n", images[i], err); goto done; }
        fr[i] = (mact_frame){.rgb = imgs[i].data, .height = (int)imgs[i].height, .width = (int)imgs[i].width};
    }
    o.frames = fr;
    o.n_frames = (size_t)n_images;
    if (noise_path) {
        mact_array na = {0};
        size_t cnt;
        if (mact_npy_read(noise_path, &na, err, sizeof err) || mact_array_to_f32(&na, &noise, &cnt, err, sizeof err)) {
            fprintf(stderr, "mact export golden: --noise: %s\n", err);
            mact_array_free(&na);
            goto done;
        }
        mact_array_free(&na);
        o.noise = noise;
        o.noise_len = cnt;
    }
    if (!has_seed && !noise_path) o.seed = 0;
    if (mact_export_golden(&o, out, stdout, err, sizeof err)) { fprintf(stderr, "mact export golden: %s\n", err); goto done; }
    rc = 0;
done:
    for (int i = 0; i < n_images; i++) mact_image_free(&imgs[i]);
    free(noise);
    return rc;
}

static int cmd_export_onnx(int argc, char **argv)
{
    mact_export_onnx_options o = {0};
    const char *out = NULL;
    char perr[256], err[1024];
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "mact export onnx: %s needs a value\n", k); return 2; }
        i++;
        if (!strcmp(k, "--model")) o.model_dir = v;
        else if (!strcmp(k, "--out")) out = v;
        else if (!strcmp(k, "--norm-tag")) o.norm_tag = v;
        else if (!strcmp(k, "--splits")) { if (mact_parse_int_arg("mact export onnx: --splits", v, 1, MACT_EXPORT_MAX_SPLITS, &o.splits, perr, sizeof perr)) goto bad; }
        else if (!strcmp(k, "--only")) o.only = v;
        else if (!strcmp(k, "--n-images")) { if (mact_parse_int_arg("mact export onnx: --n-images", v, 1, 64, &o.n_images, perr, sizeof perr)) goto bad; }
        else if (!strcmp(k, "--seq-len")) { if (mact_parse_int_arg("mact export onnx: --seq-len", v, 1, 1 << 20, &o.seq_len, perr, sizeof perr)) goto bad; }
        else if (!strcmp(k, "--weights")) {
            if (!strcmp(v, "fp32")) o.weights = MACT_EXPORT_FP32;
            else if (!strcmp(v, "fp16")) o.weights = MACT_EXPORT_FP16;
            else { fprintf(stderr, "mact export onnx: --weights is fp32 or fp16\n"); return 2; }
        } else if (!strcmp(k, "--grid-sample")) {
            if (!strcmp(v, "native")) o.grid_sample = MACT_EXPORT_GS_NATIVE;
            else if (!strcmp(v, "decomposed")) o.grid_sample = MACT_EXPORT_GS_DECOMPOSED;
            else { fprintf(stderr, "mact export onnx: --grid-sample is native or decomposed\n"); return 2; }
        } else { fprintf(stderr, "mact export onnx: unknown option %s\n", k); return 2; }
        continue;
    bad:
        fprintf(stderr, "%s\n", perr);
        return 2;
    }
    if (!o.model_dir || !out) return usage_export(stderr);
    if (mact_export_onnx(&o, out, stdout, err, sizeof err)) { fprintf(stderr, "mact export onnx: %s\n", err); return 1; }
    return 0;
}

int cmd_export(int argc, char **argv)
{
    if (argc < 1) return usage_export(stderr);
    if (!strcmp(argv[0], "golden")) return cmd_export_golden(argc - 1, argv + 1);
    if (!strcmp(argv[0], "onnx")) return cmd_export_onnx(argc - 1, argv + 1);
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) { usage_export(stdout); return 0; }
    fprintf(stderr, "mact export: unknown target '%s' (golden or onnx)\n", argv[0]);
    return usage_export(stderr);
}
