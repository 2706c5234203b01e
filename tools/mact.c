/* mact: the command-line front end. One table of commands, from which `mact --help` is written; each command
 * parses its flags (tools/common/cli.h) and calls a library, and its return value is the process's exit status
 * (main returns it: nothing in mact calls exit(), the libraries least of all). */
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
    /* still listed by `mact --help`, so its --help answers (on stdout, 0) with why it cannot run */
    int help = cli_help_asked(argc, argv);
    fprintf(help ? stdout : stderr,
            "mact: this build has no policy server (built with SERVER= ; a cross build leaves it out)\n");
    return help ? 0 : 2;
}
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;   /* the synopsis after the name; "\n" continues on the next line, indented */
} command;

/* in the order `mact --help` lists them; a subcommand is a line of its command's entry (dataset frame, eval merge) */
static const command commands[] = {
    {"demo", cmd_demo, "                                  synthesize a tiny random checkpoint (cached) and run it end to end"},
    {"run", cmd_run, " --model DIR --image A.png ... --task T --state S   images + task + state -> actions"},
    {"tokenize", cmd_tokenize, " --model DIR TEXT             token ids of TEXT"},
    {"synth", cmd_synth, " PRESET OUT_DIR [--seed S] [--dtype mixed|f32|bf16] [--no-lm-head] [--threads N]\n"
                         "                                      random checkpoint (tiny|wide|libero|so101)"},
    {"bench", cmd_bench, " [--model DIR | --preset libero|so101] [--threads N] [--precision fp32|bf16|int8]\n"
                         "                                      per-stage timings "
                         "(without --model: a ~11 GB random one)"},
    {"dataset", cmd_dataset, " info DIR                      LeRobot dataset summary and problems\n"
                             "dataset frame DIR --episode E --index T --camera KEY --out F.png   one camera frame\n"
                             "dataset dump FILE.parquet             a parquet file as JSON"},
    {"synth-dataset", cmd_synth_dataset, " OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--episodes N]\n"
                                         "                                      "
                                         "[--video C] [--variant V]  synthetic LeRobot tree"},
    {"stats", cmd_stats, " --dataset DIR [...] --tag TAG [--method lerobot|exact] --out FILE   norm_stats.json from datasets"},
    {"eval", cmd_eval, " --dataset DIR --out DIR [--model DIR] [--policy model|hold|replay] [--shard I/N]  open-loop MAE\n"
                       "eval merge --out DIR SHARD_DIR ...    merge sharded eval results"},
    {"serve", cmd_serve, " --model DIR [--openpi P] [--act P] [--vla-eval P] [--lerobot P]  resident policy server"},
    {"inspect", cmd_inspect, " MODEL [--json]                 config summary, parameters, bytes, dtype mix; per norm\n"
                             "                                      tag what a caller sends and gets (--json: only that)"},
    {"parity", cmd_parity, " GOLDEN_DIR --model MODEL_DIR   run every golden boundary and compare\n"
                           "       [--cos-min C] [--rel-tol R] [--abs-tol A] [--vjp-abs-tol A] [--tol-informational]\n"
                           "       [--max-tokens N]\n"
                           "       [--precision fp32|bf16|int8]     (default fp32: the exact mode; the gates not given are\n"
                           "                                         the precision's, docs/parity.md)\n"
                           "         [--int8-parts llm,vision,expert|all]  (int8: the components quantized; default llm)"},
    {"prune-analyze", cmd_prune_analyze, " --model DIR (--image F ... | --dataset DIR [--frames N]) [--json F] [--png F]\n"
                                         "                                      [--target-depth D]  per-block ViT SNR, a proposed keep-set"},
    {"prune", cmd_prune, " --model DIR --keep LIST [--taps LIST] --out DIR   the ViT-pruned checkpoint"},
    {"distill-eval", cmd_distill_eval, " --teacher DIR --student DIR --image F ...  connector cosine / relative MSE"},
    {"export", cmd_export, " golden --model DIR --image F ... --task T --state S --out DIR   the seed's golden I/O\n"
                           "export onnx --model DIR --out DIR       per-component ONNX graphs (docs/export.md)"},
    {"help", cmd_help, " [COMMAND]                        this list, or a command's options (as mact COMMAND --help)"},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

/* entry c's synopsis after its name, each "\n" continued on the next line, indented by two */
static void synopsis(FILE *f, const command *c)
{
    fputs(c->name, f);
    for (const char *p = c->help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n') fputs("  ", f);
    }
    fputc('\n', f);
}

static int usage(FILE *f)
{
    fprintf(f, "usage: mact <command> [args]   (mact <command> --help: its options)\n");
    for (int i = 0; i < N_COMMANDS; i++) {
        fputs("  ", f);
        synopsis(f, &commands[i]);
    }
    return 2;
}

/* a command's usage from its entry (the commands defined in this file) */
static int command_usage(FILE *f, const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name)) { fputs("usage: mact ", f); synopsis(f, &commands[i]); }
    return 2;
}

static int inspect_usage(FILE *f) { return command_usage(f, "inspect"); }
static int parity_usage(FILE *f) { return command_usage(f, "parity"); }

/* `mact help [COMMAND]`: the list, or the command's own --help */
static int cmd_help(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "help") || cli_is_help(argv[0])) { usage(stdout); return 0; }
    char help[] = "--help", *hargv[] = {help, NULL};
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[0], commands[i].name)) return commands[i].run(1, hargv);
    fprintf(stderr, "mact help: unknown command '%s'\n", argv[0]);
    return usage(stderr);
}

static int cmd_inspect(int argc, char **argv)
{
    const char *dir = NULL;
    int n_pos = 0, json = 0;
    const cli_opt opts[] = {CLI_O("--json", CLI_FLAG, &json), {0}};
    int rc = cli_parse("mact inspect", argc, argv, opts, &dir, 1, &n_pos, inspect_usage);
    if (rc) return cli_exit(rc);
    if (!n_pos) return cli_missing("mact inspect", "MODEL_DIR", inspect_usage);
    char err[1024];
    mact_model *m;
    mact_load_options lo = {.no_pack = 1};  /* inspect reads, never computes */
    rc = mact_model_load(dir, &lo, &m, err, sizeof err);
    if (rc) { fprintf(stderr, "mact inspect: %s\n", err); return 1; }
    if (json) {  /* the callers' contract, as GET /act and Python's describe(as_json=True) give it */
        size_t n = 0;
        mact_model_tags_json(m, NULL, 0, &n);
        char *tj = malloc(n + 1);
        rc = !tj ? MACT_ERR_NOMEM : mact_model_tags_json(m, tj, n + 1, NULL);
        if (!rc) printf("{\"norm_tags\": %s}\n", tj);
        else fprintf(stderr, "mact inspect: %s\n", rc == MACT_ERR_IO ? "the checkpoint has no norm tags" : "out of memory");
        free(tj);
        mact_model_free(m);
        return rc ? 1 : 0;
    }
    static char buf[1 << 16];
    mact_model_describe(m, buf, sizeof buf);
    fputs(buf, stdout);
    mact_model_free(m);
    return 0;
}

/* `mact parity`: the golden boundaries against the runtime (src/export/parity.c beside the golden writer) */
static int cmd_parity(int argc, char **argv)
{
    const char *golden = NULL, *model = NULL;
    mact_parity_options o = {.precision = MACT_PRECISION_FP32};  /* a gate left 0: the precision's (parity.h) */
    int n_pos = 0;
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &model, .required = 1), CLI_O("--cos-min", CLI_F64, &o.cos_min, .lo = -1, .hi = 1),
        CLI_O("--rel-tol", CLI_F64, &o.rel_tol, .lo = 0, .hi = 1e6),
        CLI_O("--abs-tol", CLI_F64, &o.abs_tol, .lo = 0, .hi = 1e30),
        CLI_O("--vjp-abs-tol", CLI_F64, &o.vjp_abs_tol, .lo = 0, .hi = 1e30),
        CLI_O("--max-tokens", CLI_INT, &o.max_tokens, .lo = 1, .hi = 1 << 20),
        CLI_O("--tol-informational", CLI_FLAG, &o.tol_informational),
        CLI_O("--precision", CLI_FN, &o.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &o.int8_parts, .fn = cli_int8_parts), {0}};
    int rc = cli_parse("mact parity", argc, argv, opts, &golden, 1, &n_pos, parity_usage);
    if (rc) return cli_exit(rc);
    if (!golden) return cli_missing("mact parity", "GOLDEN_DIR", parity_usage);
    return mact_parity(golden, model, &o, stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    const char *c = argv[1];
    if (cli_is_help(c)) c = "help";
    const char *names[N_COMMANDS];
    for (int i = 0; i < N_COMMANDS; i++) {
        if (!strcmp(c, commands[i].name)) return commands[i].run(argc - 2, argv + 2);
        names[i] = commands[i].name;
    }
    const char *near = cli_nearest(c, strlen(c), names, N_COMMANDS);
    if (near) fprintf(stderr, "mact: unknown command '%s'; did you mean %s?\n", c, near);
    else fprintf(stderr, "mact: unknown command '%s'\n", c);
    return usage(stderr);
}
