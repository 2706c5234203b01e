/* `mact run`, `mact demo`, `mact tokenize`: the integrator's front ends over mact_predict. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "commands.h"
#include "common/cli.h"
#include "mact.h"
#include "io/npy.h"
#include "export/npz_write.h"
#include "synth/synth.h"
#include "base/parse.h"

#define MAX_CAMS 8

static int dump_tensor(mact_session *s, const char *dir, const char *name, char *err, size_t el)
{
    mact_tensor_view v;
    if (mact_session_tensor(s, name, &v)) return 0;
    mact_array a = {0};
    if (mact_array_alloc(&a, name, MACT_F32, v.ndim, v.shape, err, el)) return -1;
    memcpy(a.data, v.data, a.nbytes);
    char p[4200];
    snprintf(p, sizeof p, "%.4000s/%.64s.npy", dir, name);
    int rc = mact_npy_write(p, &a, err, el);  /* temporary name + rename (src/export/npz_write.c) */
    mact_array_free(&a);
    return rc;
}

/* --dump DIR: every tensor written into a fresh sibling folder DIR.tmp.XXXXXX first, then moved into place: DIR
 * itself when it did not exist, else file by file (each rename atomic), so a failed write leaves DIR as it was
 * and no partial file anywhere. */
static const char *const dump_names[] = {"pixel_values", "input_ids", "image_embeds", "keys", "values", "noise",
                                         "actions_norm", "prev_actions_norm", "actions"};

static void remove_dump_tmp(const char *tmp)
{
    char p[4200];
    for (size_t i = 0; i < sizeof dump_names / sizeof dump_names[0]; i++) {
        snprintf(p, sizeof p, "%.4100s/%.64s.npy", tmp, dump_names[i]);
        unlink(p);
    }
    rmdir(tmp);
}

static int write_dump(mact_session *s, const char *dir, const float *actions, int steps, int adim)
{
    char tmp[4200], err[1024], p[4200], q[4200];
    if (strlen(dir) > 4000) { fprintf(stderr, "mact: --dump: the folder's path is longer than 4000 bytes\n"); return -1; }
    snprintf(tmp, sizeof tmp, "%.4000s.tmp.XXXXXX", dir);
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "mact: --dump: cannot create a folder beside %s: %s\n", dir, strerror(errno));
        return -1;
    }
    chmod(tmp, 0755);
    const size_t n_names = sizeof dump_names / sizeof dump_names[0];
    for (size_t i = 0; i + 1 < n_names; i++)
        if (dump_tensor(s, tmp, dump_names[i], err, sizeof err)) goto fail;
    mact_array o = {0};
    int64_t sh[2] = {steps, adim};
    snprintf(p, sizeof p, "%.4000s/actions.npy", tmp);
    if (mact_array_alloc(&o, "actions", MACT_F32, 2, sh, err, sizeof err) ||
        (memcpy(o.data, actions, o.nbytes), mact_npy_write(p, &o, err, sizeof err))) {
        mact_array_free(&o);
        goto fail;
    }
    mact_array_free(&o);
    if (rename(tmp, dir) == 0) return 0;
    if (errno != EEXIST && errno != ENOTEMPTY) {
        snprintf(err, sizeof err, "cannot move %.400s to %.400s: %s", tmp, dir, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        snprintf(err, sizeof err, "%.900s exists and is not a folder", dir);
        goto fail;
    }
    /* every destination absent or a regular file before anything moves: renames of files over files within one
     * folder's filesystem do not fail half way */
    for (size_t i = 0; i < n_names; i++) {
        snprintf(q, sizeof q, "%.4000s/%.64s.npy", dir, dump_names[i]);
        if (lstat(q, &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(err, sizeof err, "%.900s exists and is not a regular file: nothing written", q);
            goto fail;
        }
    }
    for (size_t i = 0; i < n_names; i++) {
        snprintf(p, sizeof p, "%.4100s/%.64s.npy", tmp, dump_names[i]);
        snprintf(q, sizeof q, "%.4000s/%.64s.npy", dir, dump_names[i]);
        if (access(p, F_OK) == 0 && rename(p, q)) {
            snprintf(err, sizeof err, "cannot move %.400s into %.400s: %s", p, dir, strerror(errno));
            goto fail;
        }
    }
    rmdir(tmp);
    return 0;
fail:
    fprintf(stderr, "mact: --dump: %s\n", err);
    remove_dump_tmp(tmp);
    return -1;
}

typedef struct {
    const char *model, *task, *state, *norm_tag, *noise, *dump;
    const char *images[MAX_CAMS];
    int n_images, steps, json, threads, n_action_steps;
    mact_precision precision;
    unsigned int8_parts;     /* --int8-parts (0: the library's default) */
    const char *pack_cache;
    uint64_t seed;
    const char *prev_actions;        /* --prev-actions F.npy: RTC's previous rows, robot units */
    mact_rtc_options rtc;
} run_args;

/* the chunk [steps x adim] and the stage times: a table, or one JSON object with --json */
static void print_actions(int json, const float *actions, int steps, int adim, const mact_timings *t, int pack_cache)
{
    static const char *const cache_names[4] = {"none", "loaded", "written", "unusable"};
    if (json) {
        printf("{\"actions\": [");
        for (int r = 0; r < steps; r++) {
            printf("%s[", r ? ", " : "");
            for (int i = 0; i < adim; i++) printf("%s%.9g", i ? ", " : "", actions[r * adim + i]);
            printf("]");
        }
        printf("], \"n_tokens\": %d, \"horizon\": %d, \"timings_ms\": {\"preprocess\": %.3f, \"vision\": %.3f, "
               "\"llm\": %.3f, \"action\": %.3f, \"total\": %.3f}, \"pack_cache\": \"%s\"}\n", t->n_tokens, t->horizon,
               t->preprocess_ms, t->vision_ms, t->llm_ms, t->action_ms, t->total_ms, cache_names[pack_cache & 3]);
        return;
    }
    printf("actions [%d x %d] (robot units):\n", steps, adim);
    for (int r = 0; r < steps; r++) {
        printf("  %2d:", r);
        for (int i = 0; i < adim; i++) printf(" %10.4f", actions[r * adim + i]);
        printf("\n");
    }
    printf("prompt %d tokens; time: preprocess %.1f ms, vision %.1f ms, llm %.1f ms, action %.1f ms, total %.1f ms\n",
           t->n_tokens, t->preprocess_ms, t->vision_ms, t->llm_ms, t->action_ms, t->total_ms);
}

static int predict_and_print(const run_args *a, const mact_frame *frames)
{
    char err[1024];
    mact_model *m = NULL;
    mact_session *s = NULL;
    float state[64], *noise = NULL, *actions = NULL, *prev = NULL;
    int ns = 0, rc = 1;
    char bad[64] = "";
    int pf = cli_parse_floats(a->state, state, 64, &ns, bad, sizeof bad);
    /* exit 1 like the library's refusal of a non-finite state (the value is data, not usage) */
    if (pf == -1) { fprintf(stderr, "mact: --state: '%s' is not a number: state values must be finite decimals\n", bad); return 1; }
    if (pf == -2) { fprintf(stderr, "mact: --state: more than the limit of 64 numbers\n"); return 1; }
    if (pf == -3) { fprintf(stderr, "mact: --state: %s is outside float32's range (|x| <= 3.4e38)\n", bad); return 1; }
    mact_load_options lo = {.precision = a->precision, .pack_cache_dir = a->pack_cache, .int8_parts = a->int8_parts};
    if (mact_model_load(a->model, &lo, &m, err, sizeof err)) { fprintf(stderr, "mact: %s\n", err); return 1; }
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    mact_session_options so = {.n_threads = a->threads, .max_images = a->n_images > 4 ? a->n_images : 4};
    if (mact_session_new(m, &so, &s, err, sizeof err)) { fprintf(stderr, "mact: %s\n", err); goto out; }
    mact_predict_input in = {.frames = frames, .n_frames = (size_t)a->n_images, .task = a->task, .state = state,
                             .state_dim = (size_t)ns};
    mact_predict_options *po = &in.options;
    *po = (mact_predict_options){.norm_tag = a->norm_tag, .num_steps = a->steps, .seed = a->seed,
                                 .n_action_steps = a->n_action_steps};
    if (a->noise) {
        size_t cnt;
        if (cli_npy_f32(a->noise, &noise, &cnt, NULL, NULL, err, sizeof err)) { fprintf(stderr, "mact: --noise: %s\n", err); goto out; }
        if (cnt % (size_t)mi.max_action_dim) {
            fprintf(stderr, "mact: --noise: %zu values is not a whole number of %d-wide rows\n", cnt, mi.max_action_dim);
            goto out;
        }
        po->noise = noise;
        po->noise_len = cnt;
    }
    in.rtc = a->rtc;
    if (a->prev_actions) {
        size_t cnt;
        int nd;
        int64_t sh[MACT_NPY_MAX_DIMS];
        if (cli_npy_f32(a->prev_actions, &prev, &cnt, &nd, sh, err, sizeof err)) {
            fprintf(stderr, "mact: --prev-actions: %s\n", err);
            goto out;
        }
        int two_d = nd == 2 || (nd == 3 && sh[0] == 1);
        in.rtc.n_prev = two_d ? (size_t)sh[nd - 2] : 0;
        in.rtc.prev_dim = two_d ? (size_t)sh[nd - 1] : 0;
        if (!two_d || !cnt) {
            fprintf(stderr, "mact: --prev-actions: %s: expected a float32 [n, action_dim] array of n >= 1 rows\n",
                    a->prev_actions);
            goto out;
        }
        in.rtc.prev_actions = prev;
    }
    size_t cap = (size_t)mi.max_action_horizon * mi.max_action_dim;
    actions = malloc(cap * sizeof(float));
    mact_predict_output result = {.actions = actions, .actions_cap = cap};
    if (!actions) { fprintf(stderr, "mact: out of memory\n"); goto out; }
    if (mact_predict(s, &in, &result)) {
        fprintf(stderr, "mact: %s\n", mact_session_error(s));
        goto out;
    }
    const int steps = (int)result.n_steps, adim = (int)result.action_dim;
    if (a->dump && write_dump(s, a->dump, actions, steps, adim)) goto out;
    print_actions(a->json, actions, steps, adim, &result.timings, mi.pack_cache);
    rc = 0;
out:
    free(noise);
    free(prev);
    free(actions);
    mact_session_free(s);
    mact_model_free(m);
    return rc;
}

static int run_usage(FILE *f)
{
    fprintf(f, "usage: mact run --model DIR --image A.png [--image B.jpg] --task \"...\" --state \"s0,s1,...\"\n"
               "       [--norm-tag T] [--steps N] [--seed S | --noise F.npy] [--n-action-steps N]\n"
               "       [--dump DIR] [--json] [--threads N] [--precision bf16|fp32|int8 (default bf16)]\n"
               "       [--int8-parts llm,vision,expert|all (int8: the components quantized; default llm)]\n"
               "       [--pack-cache DIR (cache of the repacked weights; default $MACT_PACK_CACHE)]\n"
               "       real-time chunking: [--prev-actions F.npy (float32 [n, action_dim], robot units)\n"
               "       --inference-delay D --execution-horizon E --rtc-schedule zeros|ones|linear|exp\n"
               "       --max-guidance-weight B --rtc-guidance identity|vjp]\n");
    return 2;
}

static int parse_weight(const char *s, void *dst, char *err, size_t el)
{
    double w;
    if (mact_parse_f64(s, 0, 1e30, &w) || w <= 0) { snprintf(err, el, "--max-guidance-weight must be a number > 0"); return -1; }
    *(float *)dst = (float)w;
    return 0;
}

int cmd_run(int argc, char **argv)
{
    run_args a = {0};
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &a.model, .required = 1),
        CLI_O("--image", CLI_LIST, a.images, .count = &a.n_images, .cap = MAX_CAMS, .required = 1),
        CLI_O("--task", CLI_STR, &a.task, .required = 1), CLI_O("--state", CLI_STR, &a.state, .required = 1),
        CLI_O("--norm-tag", CLI_STR, &a.norm_tag),
        CLI_O("--steps", CLI_INT, &a.steps, .lo = 1, .hi = 1000), CLI_O("--seed", CLI_U64, &a.seed),
        CLI_O("--noise", CLI_STR, &a.noise), CLI_O("--dump", CLI_STR, &a.dump), CLI_O("--json", CLI_FLAG, &a.json),
        CLI_O("--threads", CLI_THREADS, &a.threads), CLI_O("--n-action-steps", CLI_INT, &a.n_action_steps, .lo = 1, .hi = 1024),
        CLI_O("--pack-cache", CLI_STR, &a.pack_cache), CLI_O("--prev-actions", CLI_STR, &a.prev_actions),
        CLI_O("--inference-delay", CLI_INT, &a.rtc.inference_delay, .lo = 0, .hi = 4096),
        CLI_O("--execution-horizon", CLI_INT, &a.rtc.execution_horizon, .lo = 1, .hi = 4096),
        CLI_O("--rtc-schedule", CLI_FN, &a.rtc.schedule, .fn = cli_rtc_schedule, .choices = "zeros, ones, linear or exp"),
        CLI_O("--rtc-guidance", CLI_FN, &a.rtc.guidance, .fn = cli_rtc_guidance, .choices = "identity or vjp"),
        CLI_O("--max-guidance-weight", CLI_FN, &a.rtc.max_guidance_weight, .fn = parse_weight),
        CLI_O("--precision", CLI_FN, &a.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &a.int8_parts, .fn = cli_int8_parts), {0}};
    int rc = cli_parse("mact run", argc, argv, opts, NULL, 0, NULL, run_usage);
    if (rc) return cli_exit(rc);
    if (!a.prev_actions && (a.rtc.inference_delay || a.rtc.execution_horizon || a.rtc.schedule || a.rtc.guidance ||
                            a.rtc.max_guidance_weight != 0.f)) {
        fprintf(stderr, "mact run: the real-time chunking options need --prev-actions\n");
        return 2;
    }
    mact_image imgs[MAX_CAMS];
    mact_frame fr[MAX_CAMS];
    rc = cli_frames_load("mact", a.images, a.n_images, imgs, fr) ? 1 : predict_and_print(&a, fr);
    cli_frames_free(imgs, a.n_images);
    return rc;
}

/* Two synthetic camera frames: a "third-person" scene and a "wrist" close-up, deterministic. */
static void demo_frame(uint8_t *p, int h, int w, int kind)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * w + x) * 3;
            q[0] = (uint8_t)(kind ? 90 + y * 100 / h : 40 + x * 120 / w);
            q[1] = (uint8_t)(kind ? 60 : 80 + y * 80 / h);
            q[2] = (uint8_t)(kind ? 140 - x * 100 / w : 60);
            int cx = kind ? w / 2 : w / 3, cy = kind ? h / 2 : 2 * h / 3, r = kind ? h / 4 : h / 8;
            if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r) { q[0] = 30; q[1] = 60; q[2] = 220; }
        }
}

/* the demo's checkpoint: the cache's demo-tiny (cli_cache_dir), synthesized (and its folders made) on the first run */
static int demo_model(char *dir, size_t cap)
{
    char err[1024], cfg[4200];
    cli_cache_dir(dir, cap, "demo-tiny");
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    struct stat st;
    if (!stat(cfg, &st)) return 0;
    printf("mact demo: synthesizing a tiny random checkpoint in %s (once)\n", dir);
    char base[4200];
    snprintf(base, sizeof base, "%s", dir);
    *strrchr(base, '/') = 0;
    for (char *p = base; *p; p++)
        if (*p == '/' && p != base) { *p = 0; mkdir(base, 0755); *p = '/'; }
    mkdir(base, 0755);
    if (mact_synth("tiny", dir, 1234, NULL, NULL, err, sizeof err)) { fprintf(stderr, "mact demo: %s\n", err); return -1; }
    return 0;
}

static int demo_usage(FILE *f)
{
    fprintf(f, "usage: mact demo   (no arguments: a tiny random checkpoint, cached, run end to end)\n");
    return 2;
}

int cmd_demo(int argc, char **argv)
{
    const cli_opt opts[] = {{0}};
    int rc = cli_parse("mact demo", argc, argv, opts, NULL, 0, NULL, demo_usage);
    if (rc) return cli_exit(rc);
    char dir[4096];
    if (demo_model(dir, sizeof dir)) return 1;
    printf("mact demo: the weights are RANDOM (no real checkpoint here): the numbers show the pipeline runs end "
           "to end,\nnot a meaningful policy. Point `mact run --model DIR` at a real MolmoAct2 checkpoint for that.\n\n");
    const int H = 240, W = 320;
    uint8_t *a = malloc((size_t)H * W * 3), *b = malloc((size_t)H * W * 3);
    if (!a || !b) { free(a); free(b); fprintf(stderr, "mact demo: out of memory\n"); return 1; }
    demo_frame(a, H, W, 0);
    demo_frame(b, H, W, 1);
    mact_frame fr[2] = {{a, H, W}, {b, H, W}};
    run_args ra = {.model = dir, .task = "Pick up the blue cube and put it in the box.",
                   .state = "0.1, -0.2, 0.05, 0.3, -0.1, 0.0, 0.02, 0.04", .n_images = 2, .seed = 7};
    printf("model:  %s\ncameras: 2 synthetic %dx%d frames\ntask:   %s\nstate:  %s\n\n", dir, W, H, ra.task, ra.state);
    rc = predict_and_print(&ra, fr);
    free(a);
    free(b);
    return rc;
}

static int tokenize_usage(FILE *f)
{
    fprintf(f, "usage: mact tokenize --model DIR TEXT\n"
               "  the token ids of TEXT (one argument: quote it; it may start with '-'), space-separated\n");
    return 2;
}

/* argv read here, not by cli_parse: TEXT is any one argument, dashes and all, as it always was */
int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL;
    if (cli_help_asked(argc, argv)) { tokenize_usage(stdout); return 0; }
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strncmp(argv[i], "--model=", 8)) model = argv[i] + 8;
        else if (!text) text = argv[i];
        else {
            fprintf(stderr, "mact tokenize: one TEXT only (quote it): '%s' is a second\n", argv[i]);
            return tokenize_usage(stderr);
        }
    }
    if (!model || !text)
        return cli_missing("mact tokenize", !text ? !model ? "--model and TEXT" : "TEXT" : "--model", tokenize_usage);
    char err[1024];
    mact_model *m;
    mact_load_options lo = {.no_pack = 1};  /* tokenizing needs no matmuls */
    if (mact_model_load(model, &lo, &m, err, sizeof err)) { fprintf(stderr, "mact: %s\n", err); return 1; }
    size_t n = 0;
    int64_t *ids = NULL;
    mact_status rc = mact_tokenize(m, text, NULL, 0, &n, err, sizeof err);  /* the count first */
    if (!rc && n && !(ids = malloc(n * sizeof *ids))) rc = MACT_ERR_NOMEM, snprintf(err, sizeof err, "out of memory");
    if (!rc && n) rc = mact_tokenize(m, text, ids, n, &n, err, sizeof err);
    if (rc) fprintf(stderr, "mact: %s\n", err);
    else {
        for (size_t i = 0; i < n; i++) printf("%s%lld", i ? " " : "", (long long)ids[i]);
        printf("\n");
    }
    free(ids);
    mact_model_free(m);
    return rc ? 1 : 0;
}
