/* `mact synth PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]`:
 * a random MolmoAct2 checkpoint directory in the real HF layout (src/compress/synth.h, include/mact_compress.h), written from C. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/parse.h"
#include "compress/synth.h"

int cmd_synth(int argc, char **argv);

static int synth_usage(FILE *f)
{
    fprintf(f,
            "usage: mact synth PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]\n"
            "                  [--llm-layers N] [--vit-layers N] [--outliers K:S]\n"
            "  PRESET: %s (tiny: test-sized; wide: real widths, 2 layers, ~0.7 GB; libero/so101: full-size, ~11 GB)\n"
            "  --dtype mixed (default): big VLM matrices BF16, the rest F32; bf16: every matrix BF16;\n"
            "          f32: everything F32\n"
            "  --no-lm-head: leave out lm_head.weight (optional for continuous actions; saves vocab x hidden)\n"
            "  --seed S: values depend only on (S, tensor name); default: random (printed)\n"
            "  --llm-layers N / --vit-layers N: the preset's widths at another depth (the action expert follows the LLM)\n"
            "  --outliers K:S: K outlier channels of scale S in the LLM and ViT residual streams and a massive (1e3)\n"
            "          BOS activation, as trained models carry them (docs/parity.md)\n",
            mact_synth_presets());
    return 2;
}

static int parse_u64(const char *s, uint64_t *out) { return mact_parse_u64(s, UINT64_MAX, out) ? -1 : 0; }

/* "K:S": K >= 0 outlier channels of scale S (a finite decimal > 0) */
static int parse_outliers(const char *s, mact_synth_options *o)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || colon - s > 10) return -1;
    char k[16];
    memcpy(k, s, (size_t)(colon - s));
    k[colon - s] = 0;
    double sc = 0;
    int64_t n = 0;
    if (mact_parse_i64(k, 0, 1 << 20, &n) || mact_parse_f64(colon + 1, 1e-30, 1e30, &sc)) return -1;
    o->outlier_channels = (int)n;
    o->outlier_scale = (float)sc;
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
    const char *preset = NULL, *out = NULL;
    mact_synth_options o = {.dtype_mode = MACT_SYNTH_MIXED};
    uint64_t seed = 0;
    int have_seed = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--seed") && more) {
            if (parse_u64(argv[++i], &seed)) {
                fprintf(stderr, "mact synth: --seed wants a non-negative integer, got '%s'\n", argv[i]);
                return 2;
            }
            have_seed = 1;
        } else if (!strcmp(a, "--dtype") && more) {
            o.dtype_mode = mact_synth_dtype_from_name(argv[++i]);
            if (o.dtype_mode < 0) {
                fprintf(stderr, "mact synth: --dtype must be mixed, f32 or bf16, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--threads") && more) {
            char perr[256];
            if (mact_parse_int_arg("mact synth: --threads", argv[++i], 0, MACT_MAX_THREADS, &o.n_threads, perr, sizeof perr)) {
                fprintf(stderr, "%s\n", perr);
                return 2;
            }
            if (o.n_threads > mact_max_threads()) o.n_threads = mact_max_threads();
        } else if ((!strcmp(a, "--llm-layers") || !strcmp(a, "--vit-layers")) && more) {
            char perr[256];
            if (mact_parse_int_arg(a[2] == 'l' ? "mact synth: --llm-layers" : "mact synth: --vit-layers", argv[++i], 1,
                                   256, a[2] == 'l' ? &o.llm_layers : &o.vit_layers, perr, sizeof perr)) {
                fprintf(stderr, "%s\n", perr);
                return 2;
            }
        } else if (!strcmp(a, "--outliers") && more) {
            if (parse_outliers(argv[++i], &o)) {
                fprintf(stderr, "mact synth: --outliers wants K:S (K channels, scale S > 0), got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--no-lm-head")) {
            o.no_lm_head = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            synth_usage(stdout);
            return 0;
        } else if (a[0] != '-' && !preset) {
            preset = a;
        } else if (a[0] != '-' && !out) {
            out = a;
        } else {
            return synth_usage(stderr);
        }
    }
    if (!preset || !out) return synth_usage(stderr);
    if (!have_seed) seed = fresh_seed();
    char err[1024];
    mact_synth_result r;
    int rc = mact_synth_ex(preset, out, seed, &o, &r, err, sizeof err);
    if (rc) {
        fprintf(stderr, "mact %s\n", err);  /* the library's messages start with "synth: " */
        return 1;
    }
    double mb = (double)r.weight_bytes / 1e6;
    printf("wrote %s: preset %s, seed %llu, dtype %s%s", out, preset, (unsigned long long)seed,
           mact_synth_dtype_name(o.dtype_mode), o.no_lm_head ? ", no lm_head" : "");
    if (o.llm_layers || o.vit_layers) printf(", layers llm %d vit %d", o.llm_layers, o.vit_layers);
    if (o.outlier_channels) printf(", outliers %d x %g", o.outlier_channels, (double)o.outlier_scale);
    printf("\n");
    printf("  model.safetensors: %lld tensors, %lld parameters, %.1f MB in %.2f s (%.0f MB/s)\n",
           (long long)r.n_tensors, (long long)r.n_params, mb, r.weight_seconds,
           r.weight_seconds > 0 ? mb / r.weight_seconds : 0.0);
    printf("  total %.1f MB (config.json, model.safetensors, norm_stats.json, tokenizer.json) in %.2f s\n",
           (double)r.total_bytes / 1e6, r.seconds);
    return 0;
}
