/* `mact synth PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]`:
 * a random MolmoAct2 checkpoint directory in the real HF layout (src/compress/synth.h, include/mact_compress.h), written from C. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/parse.h"
#include "common/cli.h"
#include "synth/synth.h"

int cmd_synth(int argc, char **argv);

static int synth_usage(FILE *f)
{
    fprintf(f,
            "usage: mact synth PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]\n"
            "                  [--llm-layers N] [--vit-layers N] [--outliers K:S] [--robot libero|so101]\n"
            "  PRESET: %s (tiny: test-sized; wide: real widths, 2 layers, ~0.7 GB; libero/so101: full-size, ~11 GB)\n"
            "  --dtype mixed (default): big VLM matrices BF16, the rest F32; bf16: every matrix BF16;\n"
            "          f32: everything F32\n"
            "  --no-lm-head: leave out lm_head.weight (optional for continuous actions; saves vocab x hidden)\n"
            "  --seed S: values depend only on (S, tensor name); default: random (printed)\n"
            "  --llm-layers N / --vit-layers N: the preset's widths at another depth (the action expert follows the LLM)\n"
            "  --outliers K:S: K outlier channels of scale S in the LLM and ViT residual streams and a massive (1e3)\n"
            "          BOS activation, as trained models carry them (docs/parity.md)\n"
            "  --robot libero|so101: the norm tag's robot (default: the preset's; so101: the tag so100_so101_molmoact2,\n"
            "          6 joints in degrees, cameras observation.images.top and .wrist, a 30-row horizon)\n",
            mact_synth_presets());
    return 2;
}

static int parse_seed(const char *s, void *dst, char *err, size_t el)
{
    if (mact_parse_u64(s, UINT64_MAX, dst)) { snprintf(err, el, "--seed wants a non-negative integer, got '%s'", s); return -1; }
    return 0;
}

static int parse_dtype(const char *s, void *dst, char *err, size_t el)
{
    int d = mact_synth_dtype_from_name(s);
    if (d < 0) { snprintf(err, el, "--dtype must be mixed, f32 or bf16, got '%s'", s); return -1; }
    *(int *)dst = d;
    return 0;
}

/* "K:S": K >= 0 outlier channels of scale S (a finite decimal > 0) */
static int parse_outliers(const char *s, void *dst, char *err, size_t el)
{
    mact_synth_options *o = dst;
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || colon - s > 10) goto bad;
    char k[16];
    memcpy(k, s, (size_t)(colon - s));
    k[colon - s] = 0;
    double sc = 0;
    int64_t n = 0;
    if (mact_parse_i64(k, 0, 1 << 20, &n) || mact_parse_f64(colon + 1, 1e-30, 1e30, &sc)) goto bad;
    o->outlier_channels = (int)n;
    o->outlier_scale = (float)sc;
    return 0;
bad:
    snprintf(err, el, "--outliers wants K:S (K channels, scale S > 0), got '%s'", s);
    return -1;
}

static int parse_robot(const char *s, void *dst, char *err, size_t el)
{
    if (!strcmp(s, "libero")) *(int *)dst = MACT_SYNTH_ROBOT_LIBERO;
    else if (!strcmp(s, "so101")) *(int *)dst = MACT_SYNTH_ROBOT_SO101;
    else { snprintf(err, el, "--robot must be libero or so101, got '%s'", s); return -1; }
    return 0;
}

static uint64_t fresh_seed(void)
{
    uint64_t s = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&s, sizeof s, 1, f) != 1) s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (f) fclose(f);
    return s & 0xFFFFFFFFull;  /* short enough to type back */
}

int cmd_synth(int argc, char **argv)
{
    const char *pos[2];
    mact_synth_options o = {.dtype_mode = MACT_SYNTH_MIXED};
    uint64_t seed = 0;
    int have_seed = 0, n_pos = 0;
    const cli_opt opts[] = {
        CLI_O("--seed", CLI_FN, &seed, .fn = parse_seed, .seen = &have_seed), CLI_O("--dtype", CLI_FN, &o.dtype_mode, .fn = parse_dtype),
        CLI_O("--threads", CLI_THREADS, &o.n_threads), CLI_O("--no-lm-head", CLI_FLAG, &o.no_lm_head),
        CLI_O("--llm-layers", CLI_INT, &o.llm_layers, .lo = 1, .hi = 256),
        CLI_O("--vit-layers", CLI_INT, &o.vit_layers, .lo = 1, .hi = 256),
        CLI_O("--outliers", CLI_FN, &o, .fn = parse_outliers), CLI_O("--robot", CLI_FN, &o.robot, .fn = parse_robot), {0}};
    int rc = cli_parse("mact synth", argc, argv, opts, pos, 2, &n_pos, synth_usage);
    if (rc) return cli_exit(rc);
    if (n_pos != 2) return cli_missing("mact synth", n_pos ? "OUT_DIR" : "PRESET and OUT_DIR", synth_usage);
    const char *preset = pos[0], *out = pos[1];
    if (!have_seed) seed = fresh_seed();
    char err[1024];
    mact_synth_result r;
    if (mact_synth(preset, out, seed, &o, &r, err, sizeof err)) {
        fprintf(stderr, "mact %s\n", err);  /* the library's messages start with "synth: " */
        return 1;
    }
    double mb = (double)r.weight_bytes / 1e6;
    printf("wrote %s: preset %s, seed %llu, dtype %s%s", out, preset, (unsigned long long)seed,
           mact_synth_dtype_name(o.dtype_mode), o.no_lm_head ? ", no lm_head" : "");
    if (o.llm_layers) printf(", %d LLM layers", o.llm_layers);
    if (o.vit_layers) printf(", %d ViT layers", o.vit_layers);
    if (o.outlier_channels) printf(", outliers %d x %g", o.outlier_channels, (double)o.outlier_scale);
    if (o.robot) printf(", robot %s", o.robot == MACT_SYNTH_ROBOT_SO101 ? "so101" : "libero");
    printf("\n");
    printf("  model.safetensors: %lld tensors, %lld parameters, %.1f MB in %.2f s (%.0f MB/s)\n",
           (long long)r.n_tensors, (long long)r.n_params, mb, r.weight_seconds,
           r.weight_seconds > 0 ? mb / r.weight_seconds : 0.0);
    printf("  total %.1f MB (config.json, model.safetensors, norm_stats.json, tokenizer.json) in %.2f s\n",
           (double)r.total_bytes / 1e6, r.seconds);
    return 0;
}
