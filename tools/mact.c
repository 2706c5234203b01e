/* mact: the command-line front end. One table of commands, from which `mact --help` is written; each command
 * parses its flags (tools/common/cli.h) and calls a library. Only this file calls exit(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "commands.h"
#include "common/cli.h"
#include "export/parity.h"

static int cmd_inspect(int argc, char **argv);
static int cmd_parity(int argc, char **argv);
static int cmd_help(int argc, char **argv);
#ifdef MACT_NO_SERVER
#define cmd_serve cmd_no_server
static int cmd_no_server(int argc, char **argv)
{
    fprintf(stderr, "mact: this build has no policy server (built with SERVER= ; a cross build leaves it out)\n");
    return 2;
}
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;   /* the synopsis after the name; "\n" continues on the next line, indented */
} command;

/* in the order `mact --help` lists them */
static const command commands[] = {
    {"demo", cmd_demo, "                                  synthesize a tiny random checkpoint (cached) and run it end to end"},
    {"run", cmd_run, " --model DIR --image A.png ... --task T --state S   images + task + state -> actions"},
    {"tokenize", cmd_tokenize, " --model DIR TEXT             token ids of TEXT"},
    {"synth", cmd_synth, " PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]\n"
                         "                                      random checkpoint (tiny|wide|libero|so101)"},
    {"bench", cmd_bench, " [--model DIR] [--threads N] [--precision fp32|bf16|int8]  per-stage timings"},
    {"dataset", cmd_dataset, " info DIR | dump FILE.parquet  LeRobot dataset summary and problems; a parquet file as JSON"},
    {"synth-dataset", cmd_synth_dataset, " OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--variant V]  synthetic LeRobot tree"},
    {"stats", cmd_stats, " --dataset DIR [...] --tag TAG [--method lerobot|exact] --out FILE   norm_stats.json from datasets"},
    {"eval", cmd_eval, " --dataset DIR --out DIR [--model DIR] [--policy model|hold|replay] [--shard I/N]  open-loop MAE\n"
                       "eval merge --out DIR SHARD_DIR ...    merge sharded eval results"},
    {"serve", cmd_serve, " --model DIR [--openpi P] [--act P] [--vla-eval P]  resident policy server (serve --help)"},
    {"inspect", cmd_inspect, " MODEL_DIR                     config summary, parameters, bytes, dtype mix"},
    {"parity", cmd_parity, " GOLDEN_DIR --model MODEL_DIR   run every golden boundary and compare\n"
                           "       [--cos-min C] [--rel-tol R] [--abs-tol A] [--vjp-abs-tol A] [--tol-informational]\n"
                           "       [--max-tokens N]\n"
                           "       [--precision fp32|bf16|int8]     (default fp32: the exact mode)\n"
                           "         [--int8-parts llm,vision,expert|all]  (int8: the components quantized; default llm)"},
    {"prune-analyze", cmd_prune_analyze, " --model DIR (--image F ... | --dataset DIR [--frames N]) [--json F] [--png F]\n"
                                         "                                      [--target-depth D]  per-block ViT SNR, a proposed keep-set"},
    {"prune", cmd_prune, " --model DIR --keep LIST [--taps LIST] --out DIR   the ViT-pruned checkpoint"},
    {"distill-eval", cmd_distill_eval, " --teacher DIR --student DIR --image F ...  connector cosine / relative MSE"},
    {"export", cmd_export, " golden|onnx --model DIR ... --out DIR   the seed's golden I/O / per-component ONNX graphs\n"
                           "                                      (export --help; docs/export.md)"},
    {"help", cmd_help, NULL},
};

static int usage(FILE *f)
{
    fprintf(f, "usage: mact <command> [args]\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!commands[i].help) continue;
        fprintf(f, "  %s", commands[i].name);
        for (const char *p = commands[i].help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fputs("  ", f);
        }
        fputc('\n', f);
    }
    return 2;
}

static int cmd_help(int argc, char **argv)
{
    usage(stdout);
    return 0;
}

static int usage_err(void) { return usage(stderr); }

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

static int parse_precision(const char *s, void *dst, char *err, size_t el)
{
    mact_precision p;
    if (mact_precision_parse(s, &p)) return -2;
    *(int *)dst = p;
    return 0;
}

/* `mact parity`: the golden boundaries against the runtime (src/export/parity.c beside the golden writer) */
static int cmd_parity(int argc, char **argv)
{
    const char *golden = NULL, *model = NULL;
    mact_parity_options o = {.cos_min = 0.99999, .rel_tol = 1e-4, .abs_tol = 1e-4};
    int n_pos = 0;
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &model), CLI_O("--cos-min", CLI_F64, &o.cos_min, .lo = -1, .hi = 1), CLI_O("--rel-tol", CLI_F64, &o.rel_tol, .lo = 0, .hi = 1e6),
        CLI_O("--abs-tol", CLI_F64, &o.abs_tol, .lo = 0, .hi = 1e30), CLI_O("--vjp-abs-tol", CLI_F64, &o.vjp_abs_tol, .lo = 0, .hi = 1e30),
        CLI_O("--max-tokens", CLI_INT, &o.max_tokens, .lo = 1, .hi = 1 << 20), CLI_O("--tol-informational", CLI_FLAG, &o.tol_informational),
        CLI_O("--precision", CLI_FN, &o.precision, .fn = parse_precision),
        CLI_O("--int8-parts", CLI_FN, &o.int8_parts, .fn = cli_int8_parts), {0}};
    int rc = cli_parse("mact parity", argc, argv, opts, &golden, 1, &n_pos, 0, usage_err);
    if (rc) return rc;
    if (!golden || !model) return usage(stderr);
    return mact_parity(golden, model, &o, stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    const char *c = argv[1];
    if (!strcmp(c, "-h") || !strcmp(c, "--help")) c = "help";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(c, commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "mact: unknown command '%s'\n", c);
    return usage(stderr);
}
