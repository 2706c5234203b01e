/* mact: the command-line front end. Only this file calls exit(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "commands.h"
#include "dev/parity.h"
#include "base/parse.h"

static int usage(FILE *f)
{
    fprintf(f,
            "usage: mact <command> [args]\n"
            "  demo                                  synthesize a tiny random checkpoint (cached) and run it end to end\n"
            "  run --model DIR --image A.png ... --task T --state S   images + task + state -> actions\n"
            "  tokenize --model DIR TEXT             token ids of TEXT\n"
            "  synth PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]\n"
            "                                        random checkpoint (tiny|wide|libero|so101)\n"
            "  bench [--model DIR] [--threads N] [--precision fp32|bf16|int8]  per-stage timings\n"
            "  dataset info DIR | dump FILE.parquet  LeRobot dataset summary and problems; a parquet file as JSON\n"
            "  synth-dataset OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--variant V]  synthetic LeRobot tree\n"
            "  stats --dataset DIR [...] --tag TAG [--method lerobot|exact] --out FILE   norm_stats.json from datasets\n"
            "  eval --dataset DIR --out DIR [--model DIR] [--policy model|hold|replay] [--shard I/N]  open-loop MAE\n"
            "  eval merge --out DIR SHARD_DIR ...    merge sharded eval results\n"
            "  serve --model DIR [--openpi P] [--act P] [--vla-eval P]  resident policy server (serve --help)\n"
            "  inspect MODEL_DIR                     config summary, parameters, bytes, dtype mix\n"
            "  parity GOLDEN_DIR --model MODEL_DIR   run every golden boundary and compare\n"
            "         [--cos-min C] [--rel-tol R] [--abs-tol A] [--vjp-abs-tol A] [--tol-informational]\n"
            "         [--max-tokens N]\n"
            "         [--precision fp32|bf16|int8]     (default fp32: the exact mode)\n"
            "  prune-analyze --model DIR --image F ... [--json F] [--png F] [--target-depth D]\n"
            "                                        per-block ViT SNR, a proposed keep-set (--dataset: not yet)\n"
            "  prune --model DIR --keep LIST [--taps LIST] --out DIR   the ViT-pruned checkpoint\n"
            "  distill-eval --teacher DIR --student DIR --image F ...  connector cosine / relative MSE\n"
            "  export golden|onnx --model DIR ... --out DIR   the seed's golden I/O / per-component ONNX graphs\n"
            "                                        (export --help; docs/export.md)\n");
    return 2;
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc != 1) return usage(stderr);
    char err[1024];
    mact_model *m;
    mact_load_options lo = {.no_pack = 1};  /* inspect reads, never computes */
    int rc = mact_model_load(argv[0], &lo, &m, err, sizeof err);
    if (rc) { fprintf(stderr, "mact inspect: %s\n", err); return 1; }
    static char buf[1 << 16];
    mact_model_describe(m, buf, sizeof buf);
    fputs(buf, stdout);
    mact_model_free(m);
    return 0;
}

static int cmd_parity(int argc, char **argv)
{
    const char *golden = NULL, *model = NULL;
    mact_parity_options o = {.cos_min = 0.99999, .rel_tol = 1e-4, .abs_tol = 1e-4};
    char perr[256];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--model") && more) model = argv[++i];
        else if (!strcmp(a, "--cos-min") && more) { if (mact_parse_f64_arg("mact parity: --cos-min", argv[++i], -1, 1, &o.cos_min, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--rel-tol") && more) { if (mact_parse_f64_arg("mact parity: --rel-tol", argv[++i], 0, 1e6, &o.rel_tol, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--abs-tol") && more) { if (mact_parse_f64_arg("mact parity: --abs-tol", argv[++i], 0, 1e30, &o.abs_tol, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--vjp-abs-tol") && more) { if (mact_parse_f64_arg("mact parity: --vjp-abs-tol", argv[++i], 0, 1e30, &o.vjp_abs_tol, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--max-tokens") && more) { if (mact_parse_int_arg("mact parity: --max-tokens", argv[++i], 1, 1 << 20, &o.max_tokens, perr, sizeof perr)) goto bad_num; }
        else if (!strcmp(a, "--tol-informational")) o.tol_informational = 1;
        else if (!strcmp(a, "--precision") && more) {
            mact_precision p;
            if (mact_precision_parse(argv[++i], &p)) return usage(stderr);
            o.precision = p;
        }
        else if (a[0] != '-' && !golden) golden = a;
        else return usage(stderr);
        continue;
    bad_num:
        fprintf(stderr, "%s\n", perr);
        return 2;
    }
    if (!golden || !model) return usage(stderr);
    int rc = mact_parity(golden, model, &o, stdout);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    const char *c = argv[1];
    if (!strcmp(c, "demo")) return cmd_demo(argc - 2, argv + 2);
    if (!strcmp(c, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 2, argv + 2);
    if (!strcmp(c, "synth")) return cmd_synth(argc - 2, argv + 2);
    if (!strcmp(c, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(c, "dataset")) return cmd_dataset(argc - 2, argv + 2);
    if (!strcmp(c, "synth-dataset")) return cmd_synth_dataset(argc - 2, argv + 2);
    if (!strcmp(c, "stats")) return cmd_stats(argc - 2, argv + 2);
    if (!strcmp(c, "eval")) return cmd_eval(argc - 2, argv + 2);
#ifndef MACT_NO_SERVER
    if (!strcmp(c, "serve")) return cmd_serve(argc - 2, argv + 2);
#else
    if (!strcmp(c, "serve")) {
        fprintf(stderr, "mact: this build has no policy server (built with SERVER= ; a cross build leaves it out)\n");
        return 2;
    }
#endif
    if (!strcmp(c, "inspect")) return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(c, "parity")) return cmd_parity(argc - 2, argv + 2);
    if (!strcmp(c, "prune-analyze")) return cmd_prune_analyze(argc - 2, argv + 2);
    if (!strcmp(c, "prune")) return cmd_prune(argc - 2, argv + 2);
    if (!strcmp(c, "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(c, "distill-eval")) return cmd_distill_eval(argc - 2, argv + 2);
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) { usage(stdout); return 0; }
    fprintf(stderr, "mact: unknown command '%s'\n", c);
    return usage(stderr);
}
