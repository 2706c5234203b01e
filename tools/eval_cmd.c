/* `mact eval` and `mact eval merge`: flags in, mact_eval_run / mact_eval_merge (include/mact_data.h), the table
 * and OUT/mae_per_step.png (and, with --replan, OUT/replan_trajectory.png) out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact_data.h"
#include "base/parse.h"
#include "base/rng.h"
#include "base/file.h"
#include "commands.h"
#include "common/cli.h"

static int usage(FILE *f)
{
    fprintf(f,
            "usage: mact eval --dataset DIR --out DIR [--model DIR | --norm-stats FILE] [--norm-tag T]\n"
            "       [--policy model|hold|replay] [--episodes A:B|I,J,...] [--horizon H] [--first-k 5,10,30]\n"
            "       [--static-threshold X] [--seed S] [--steps N] [--camera KEY ...] [--action-key K] [--state-key K]\n"
            "       [--precision fp32|bf16|int8] [--int8-parts llm,vision,expert|all] [--threads N]   (the model policy's)\n"
            "       [--tolerance S]   (video frames: seconds between a frame's time and the query; default LeRobot's 1e-4)\n"
            "       [--joint-signs S1,S2,... --joint-offsets O1,O2,...]   (a joint frame between the dataset and a checkpoint\n"
            "          trained in another calibration: state' = signs * state + offsets, actions back; --so101-transform\n"
            "          says the same and needs them: mact has no constants for it)\n"
            "       [--replan K [--delay D] [--rtc-schedule linear|zeros|ones|exp] [--execution-horizon E]\n"
            "        [--max-guidance-weight B] [--rtc-guidance identity|vjp] [--no-rtc-compare]]\n"
            "          (execute K rows of each chunk, D of them from the old chunk while inferring; with and without RTC)\n"
            "       [--shard I/N]   (else $JOB_COMPLETION_INDEX/$JOB_COMPLETION_COUNT or $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)\n"
            "       mact eval merge --out DIR [--allow-partial] SHARD_DIR ...\n");
    return 2;
}

static int merge_usage(FILE *f)
{
    fprintf(f, "usage: mact eval merge --out DIR [--allow-partial] [--first-k 5,10,30] SHARD_DIR ...\n"
               "  the shards' OUT folders of a sharded mact eval (--shard I/N) as one result in DIR\n");
    return 2;
}

typedef struct { int v[MACT_EVAL_MAX_FIRST_K], n; } first_k;

static int parse_first_k(const char *s, void *dst, char *err, size_t el)
{
    first_k *f = dst;
    return cli_parse_ints(s, 1, MACT_EVAL_MAX_HORIZON, f->v, MACT_EVAL_MAX_FIRST_K, &f->n) ? -2 : 0;
}

static int parse_policy(const char *s, void *dst, char *err, size_t el)
{
    int *p = dst;
    *p = !strcmp(s, "model") ? MACT_EVAL_MODEL : !strcmp(s, "hold") ? MACT_EVAL_HOLD : !strcmp(s, "replay") ? MACT_EVAL_REPLAY : -1;
    return *p < 0 ? -2 : 0;
}

/* "I/N", both decimal, 0 <= I < N */
static int parse_shard(const char *s, void *dst, char *err, size_t el)
{
    int *v = dst;
    char a[32];
    const char *slash = strchr(s, '/');
    long long i, n;
    char *e1, *e2;
    if (!slash || slash - s >= (long)sizeof a || slash == s) goto bad;
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = 0;
    i = strtoll(a, &e1, 10);
    n = strtoll(slash + 1, &e2, 10);
    if (*e1 || *e2 || !slash[1] || a[0] == '-' || a[0] == '+' || slash[1] == '-' || slash[1] == '+' || i < 0 || n < 1 || i >= n ||
        n > INT32_MAX)
        goto bad;
    v[0] = (int)i; v[1] = (int)n;
    return 0;
bad:
    snprintf(err, el, "--shard must be I/N with 0 <= I < N");
    return -1;
}

/* OUT/mae_per_step.png (raw units, the policy against hold-still) and, with --replan, OUT/replan_trajectory.png
 * (the first episode's executed rows, one panel per action dim, at most 8, without and with RTC; joins marked) */
static int plots(const char *out, const mact_eval_result *r)
{
    char p[4200], err[4400];
    int rc = 0, F, D, K, delay;
    int64_t ep;
    if (mact_eval_result_trajectory(r, 0, NULL, 0, &F, &D, &ep, &K, &delay) == MACT_OK ||
        mact_eval_result_trajectory(r, 1, NULL, 0, &F, &D, &ep, &K, &delay) == MACT_OK) {
        const int nd = D < 8 ? D : 8;
        float *rows[2] = {malloc(sizeof(float) * ((size_t)F * D + 1)), malloc(sizeof(float) * ((size_t)F * D + 1))};
        double *v = malloc(sizeof(double) * ((size_t)2 * nd * F + 1)), *marks = malloc(sizeof(double) * ((size_t)F + 1));
        cli_series *ser = malloc(sizeof(cli_series) * 2 * (size_t)nd + 1);
        cli_panel *pn = malloc(sizeof(cli_panel) * (size_t)nd + 1);
        char (*labels)[16] = malloc(16 * (size_t)nd + 1);
        int have[2], nm = 0;
        rc = !rows[0] || !rows[1] || !v || !marks || !ser || !pn || !labels;
        for (int ch = 0; !rc && ch < 2; ch++) have[ch] = mact_eval_result_trajectory(r, ch, rows[ch], (size_t)F * D, NULL, NULL, NULL, NULL, NULL) == MACT_OK;
        for (int c = 1; !rc && c * K < F; c++) marks[nm++] = c * K + delay;
        for (int j = 0; !rc && j < nd; j++) {
            int ns = 0;
            for (int ch = 0; ch < 2; ch++) {
                if (!have[ch]) continue;
                double *y = v + ((size_t)ch * nd + j) * F;
                for (int f = 0; f < F; f++) y[f] = rows[ch][(size_t)f * D + j];
                ser[2 * j + ns++] = (cli_series){.y = y, .n = F, .rgb = {ch ? 0.9 : 0.1, ch ? 0.45 : 0.3, ch ? 0.05 : 0.85},
                                                 .label = ch ? "with RTC" : "without RTC"};
            }
            snprintf(labels[j], sizeof labels[j], "dim %d", j);
            pn[j] = (cli_panel){.label = labels[j], .series = ser + 2 * j, .n_series = ns, .marks = marks, .n_marks = nm};
        }
        char title[160];
        snprintf(title, sizeof title, "episode %lld: executed actions, replan every %d, delay %d; grey lines: joins", (long long)ep, K, delay);
        snprintf(p, sizeof p, "%s/replan_trajectory.png", out);
        cli_chart c = {.title = title, .xlabel = "frame", .width = 900, .panel_height = 110, .panels = pn, .n_panels = nd};
        if (!rc && cli_chart_png(p, &c, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); rc = 1; }
        free(rows[0]); free(rows[1]); free(v); free(marks); free(ser); free(pn); free(labels);
        if (rc) return 1;
    }
    const int H = mact_eval_result_horizon(r);
    double *m = malloc(sizeof(double) * ((size_t)H + 1)), *h = malloc(sizeof(double) * ((size_t)H + 1));
    if (!m || !h) { free(m); free(h); fprintf(stderr, "mact eval: out of memory\n"); return 1; }
    mact_eval_result_per_step(r, m, h);
    const char *policy = mact_eval_result_policy(r);
    char title[128];
    snprintf(title, sizeof title, "MAE per chunk step (raw units): %s vs hold-still", policy);
    cli_series s[2] = {{.y = m, .n = H, .rgb = {0.1, 0.3, 0.85}, .label = policy},
                       {.y = h, .n = H, .dashed = 1, .rgb = {0.85, 0.2, 0.1}, .label = "hold-still"}};
    cli_panel pn = {.series = s, .n_series = 2, .from_zero = 1};
    cli_chart c = {.title = title, .xlabel = "chunk step", .width = 720, .panel_height = 330, .panels = &pn, .n_panels = 1};
    snprintf(p, sizeof p, "%s/mae_per_step.png", out);
    if (mact_eval_result_frames(r) > 0 && cli_chart_png(p, &c, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); rc = 1; }
    free(m); free(h);
    cli_chart_cleanup();
    return rc;
}

static int merge(int argc, char **argv)
{
    mact_eval_merge_options o = {0};
    const char *dirs[256];
    first_k fk = {.n = 0};
    const cli_opt opts[] = {
        CLI_O("--out", CLI_STR, &o.out, .required = 1), CLI_O("--allow-partial", CLI_FLAG, &o.allow_partial),
        CLI_O("--first-k", CLI_FN, &fk, .fn = parse_first_k), {0}};
    int rc = cli_parse("mact eval merge", argc, argv, opts, dirs, 256, &o.n_dirs, merge_usage);
    if (rc) return cli_exit(rc);
    if (!o.n_dirs) return cli_missing("mact eval merge", "SHARD_DIR (one or more)", merge_usage);
    o.dirs = dirs;
    o.first_k = fk.v;
    o.n_first_k = fk.n;
    char err[4096];
    mact_eval_result *r;
    mact_status st = mact_eval_merge(&o, stdout, &r, err, sizeof err);
    if (st) { fprintf(stderr, "mact eval merge: %s\n", err); return st == MACT_ERR_INPUT ? 2 : 1; }
    rc = plots(o.out, r);
    mact_eval_result_free(r);
    return rc;
}

/* The shard from a scheduler's environment when --shard is not given (the CLI's and Python's job, not the
 * library's). Kubernetes Indexed Jobs set JOB_COMPLETION_INDEX only: the count must come as JOB_COMPLETION_COUNT
 * (docs/cluster.md). Slurm arrays set SLURM_ARRAY_TASK_ID/COUNT/MIN/STEP: the shard is (ID - MIN) / STEP, so
 * --array=1-4 or 0-6:2 work too. 0 (shard untouched when none is set), or -1 after printing why. */
static int shard_from_env(int *shard, int *nshard)
{
    const char *ix = getenv("JOB_COMPLETION_INDEX"), *cn = getenv("JOB_COMPLETION_COUNT");
    int64_t i, n, mn = 0, st = 1;
    if (ix) {
        if (!cn) {
            fprintf(stderr, "mact eval: JOB_COMPLETION_INDEX is set but not JOB_COMPLETION_COUNT (Kubernetes sets the index "
                    "only): set it to the Job's completions, or pass --shard I/N\n");
            return -1;
        }
        if (mact_parse_i64(ix, 0, INT32_MAX, &i) || mact_parse_i64(cn, 1, INT32_MAX, &n) || i >= n) {
            fprintf(stderr, "mact eval: JOB_COMPLETION_INDEX=%s / JOB_COMPLETION_COUNT=%s is not an index below a count\n", ix, cn);
            return -1;
        }
        *shard = (int)i; *nshard = (int)n;
        return 0;
    }
    ix = getenv("SLURM_ARRAY_TASK_ID"); cn = getenv("SLURM_ARRAY_TASK_COUNT");
    if (!ix) return 0;
    const char *smin = getenv("SLURM_ARRAY_TASK_MIN"), *sstep = getenv("SLURM_ARRAY_TASK_STEP");
    if (!cn || mact_parse_i64(ix, 0, INT32_MAX, &i) || mact_parse_i64(cn, 1, INT32_MAX, &n) ||
        (smin && mact_parse_i64(smin, 0, INT32_MAX, &mn)) || (sstep && mact_parse_i64(sstep, 1, INT32_MAX, &st)) ||
        i < mn || (i - mn) % st || (i - mn) / st >= n) {
        fprintf(stderr, "mact eval: SLURM_ARRAY_TASK_ID=%s (COUNT=%s MIN=%s STEP=%s) does not name one of COUNT evenly spaced "
                "tasks: pass --shard I/N\n", ix, cn ? cn : "unset", smin ? smin : "unset", sstep ? sstep : "unset");
        return -1;
    }
    *shard = (int)((i - mn) / st); *nshard = (int)n;
    if (n == 1 && i > 0)
        fprintf(stderr, "mact eval: SLURM_ARRAY_TASK_ID=%s in a one-task array: evaluating every episode as shard 0/1 (to rerun "
                "one shard of N, pass --shard %s/N or scontrol requeue the original task)\n", ix, ix);
    return 0;
}

typedef struct { float v[64]; int n; } joint_list;

static int parse_joints(const char *s, void *dst, char *err, size_t el)
{
    joint_list *j = dst;
    char bad[64];
    return cli_parse_floats(s, j->v, 64, &j->n, bad, sizeof bad) || !j->n ? -2 : 0;
}

/* the policy the run evaluates and the tag it runs with: the model (a session at the chosen precision), or, for the
 * baselines, the model's tags or a norm_stats.json's */
typedef struct {
    const char *model, *norm_stats, *tag;
    mact_precision precision;
    unsigned int8_parts;
    int threads;
    mact_model *m;
    mact_session *s;
    mact_norm_stats *ns;
    char id[64];
} eval_policy;

static int open_policy(eval_policy *P, mact_eval_options *o)
{
    char err[4096];
    if (P->model) {
        mact_load_options lo = {.precision = P->precision, .int8_parts = P->int8_parts, .no_pack = o->policy != MACT_EVAL_MODEL};
        if (mact_model_load(P->model, &lo, &P->m, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
        if (!(o->tag = mact_model_tag(P->m, P->tag, err, sizeof err))) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
        if (o->policy == MACT_EVAL_MODEL) {
            mact_session_options so = {.n_threads = P->threads, .max_images = MACT_EVAL_MAX_CAMERAS};
            if (mact_session_new(P->m, &so, &P->s, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
            o->predict = mact_eval_session_predict;
            o->predict_user = P->s;
        }
        /* the policy in the episode files' fingerprint: its config (a pruned student keeps its teacher's norm stats;
         * two checkpoints of one architecture sharing their norm stats are not told apart: docs/cluster.md says to
         * use a fresh --out per checkpoint) */
        char cp[4200], *ct = NULL;
        snprintf(cp, sizeof cp, "%s/config.json", P->model);
        uint64_t h = 0;
        if (!mact_file_read_text(cp, (size_t)1 << 28, &ct, NULL, err, sizeof err)) h = mact_fnv1a(MACT_FNV_BASIS, ct, strlen(ct));
        free(ct);
        snprintf(P->id, sizeof P->id, "%016llx", (unsigned long long)h);
        o->policy_id = P->id;
        return 0;
    }
    if (mact_norm_stats_open(P->norm_stats, &P->ns, err, sizeof err) ||
        !(o->tag = mact_norm_stats_tag(P->ns, P->tag, err, sizeof err))) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
    return 0;
}

static void close_policy(eval_policy *P)
{
    mact_session_free(P->s);
    mact_model_free(P->m);
    mact_norm_stats_close(P->ns);
}

int cmd_eval(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "merge")) return merge(argc - 1, argv + 1);
    mact_eval_options o = {.policy = MACT_EVAL_MODEL, .tolerance_s = 1e-4};
    eval_policy P = {0};
    const char *cams[MACT_EVAL_MAX_CAMERAS];
    first_k fk = {.n = 0};
    joint_list js = {.n = 0}, jo = {.n = 0};
    int shard[2] = {0, 1}, have_shard = 0, so101 = 0;
    double beta = 0;
    /* the RTC flags, which need --replan: the first given names the refusal */
    static const char *const rtc_flags[] = {"--delay", "--execution-horizon", "--max-guidance-weight", "--rtc-schedule",
                                            "--rtc-guidance", "--no-rtc-compare"};
    int thr_given = 0;
    const cli_opt opts[] = {
        CLI_O("--dataset", CLI_STR, &o.dataset, .required = 1), CLI_O("--out", CLI_STR, &o.out, .required = 1),
        CLI_O("--model", CLI_STR, &P.model),
        CLI_O("--norm-stats", CLI_STR, &P.norm_stats), CLI_O("--norm-tag", CLI_STR, &P.tag),
        CLI_O("--precision", CLI_FN, &P.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &P.int8_parts, .fn = cli_int8_parts), CLI_O("--threads", CLI_THREADS, &P.threads),
        CLI_O("--policy", CLI_FN, &o.policy, .fn = parse_policy), CLI_O("--episodes", CLI_STR, &o.episodes),
        CLI_O("--horizon", CLI_INT, &o.horizon, .lo = 1, .hi = MACT_EVAL_MAX_HORIZON), CLI_O("--first-k", CLI_FN, &fk, .fn = parse_first_k),
        CLI_O("--static-threshold", CLI_F64, &o.static_threshold, .lo = 0, .hi = 1e30, .seen = &thr_given),
        CLI_O("--replan", CLI_INT, &o.replan, .lo = 1, .hi = MACT_EVAL_MAX_HORIZON),
        CLI_O("--delay", CLI_INT, &o.delay, .lo = 0, .hi = MACT_EVAL_MAX_HORIZON),
        CLI_O("--execution-horizon", CLI_INT, &o.rtc.execution_horizon, .lo = 1, .hi = MACT_EVAL_MAX_HORIZON),
        CLI_O("--max-guidance-weight", CLI_F64, &beta, .lo = 0, .hi = 1e30),
        CLI_O("--rtc-schedule", CLI_FN, &o.rtc.schedule, .fn = cli_rtc_schedule, .choices = "linear, zeros, ones or exp"),
        CLI_O("--rtc-guidance", CLI_FN, &o.rtc.guidance, .fn = cli_rtc_guidance, .choices = "identity or vjp"),
        CLI_O("--no-rtc-compare", CLI_FLAG, &o.no_rtc_compare),
        CLI_O("--tolerance", CLI_F64, &o.tolerance_s, .lo = 1e-9, .hi = 10), CLI_O("--seed", CLI_U64, &o.seed),
        CLI_O("--steps", CLI_INT, &o.steps, .lo = 1, .hi = 1000),
        CLI_O("--camera", CLI_LIST, cams, .count = &o.n_cameras, .cap = MACT_EVAL_MAX_CAMERAS),
        CLI_O("--action-key", CLI_STR, &o.action_key), CLI_O("--state-key", CLI_STR, &o.state_key),
        CLI_O("--so101-transform", CLI_FLAG, &so101), CLI_O("--joint-signs", CLI_FN, &js, .fn = parse_joints),
        CLI_O("--joint-offsets", CLI_FN, &jo, .fn = parse_joints),
        CLI_O("--shard", CLI_FN, shard, .fn = parse_shard, .seen = &have_shard), {0}};
    int rc = cli_parse("mact eval", argc, argv, opts, NULL, 0, NULL, usage);
    if (rc) return cli_exit(rc);
    /* the first RTC flag in argv order, for the refusal without --replan */
    const char *rtc_flag = NULL;
    for (int i = 0; i < argc && !rtc_flag; i++)
        for (size_t k = 0; k < sizeof rtc_flags / sizeof rtc_flags[0] && !rtc_flag; k++)
            if (!strcmp(argv[i], rtc_flags[k])) rtc_flag = rtc_flags[k];
    o.rtc.max_guidance_weight = (float)beta;
    o.cameras = cams;
    o.first_k = fk.v;
    o.n_first_k = fk.n;
    if (o.policy == MACT_EVAL_MODEL && !P.model) {
        fprintf(stderr, "mact eval: --model is required (the policy evaluated; the baselines --policy hold|replay take "
                "--norm-stats instead)\n");
        return usage(stderr);
    }
    if (!P.model && !P.norm_stats)
        return cli_missing("mact eval", "--model or --norm-stats (the baselines' normalization)", usage);
    if (P.model && P.norm_stats) {
        fprintf(stderr, "mact eval: --norm-stats is for the baselines without a model; with --model the model's norm tags are "
                "used (drop one of them)\n");
        return 2;
    }
    if (js.n != jo.n) { fprintf(stderr, "mact eval: --joint-signs has %d values but --joint-offsets %d\n", js.n, jo.n); return 2; }
    if (so101 && !js.n) {
        fprintf(stderr, "mact eval: --so101-transform needs the joint frame's values: --joint-signs and --joint-offsets (LeRobot "
                "documents 1,-1,1,1,1,1 and 0,90,90,0,0,0 for MolmoAct2-SO100_101 on arms calibrated with LeRobot >= 0.5); "
                "a checkpoint whose processors carry them applies them itself\n");
        return 2;
    }
    o.n_joints = js.n;
    o.joint_signs = js.v;
    o.joint_offsets = jo.v;
    if (!o.replan && rtc_flag) { fprintf(stderr, "mact eval: %s needs --replan K\n", rtc_flag); return 2; }
    if (o.replan && o.policy != MACT_EVAL_MODEL) {
        fprintf(stderr, "mact eval: --replan needs --policy model (the chunks of hold and replay do not depend on what was executed)\n");
        return 2;
    }
    if (o.replan && thr_given) { fprintf(stderr, "mact eval: --static-threshold does not apply with --replan (every replan point is evaluated)\n"); return 2; }
    if (!have_shard && shard_from_env(&shard[0], &shard[1])) return 2;
    o.shard = shard[0];
    o.n_shards = shard[1];
    char err[4096];
    if (open_policy(&P, &o)) { close_policy(&P); return 1; }
    mact_eval_result *r;
    mact_status st = mact_eval_run(&o, stdout, stderr, &r, err, sizeof err);
    close_policy(&P);
    if (st) { fprintf(stderr, "mact eval: %s\n", err); return st == MACT_ERR_INPUT ? 2 : 1; }
    rc = plots(o.out, r);
    mact_eval_result_free(r);
    return rc;
}
