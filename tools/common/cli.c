/* tools/common/cli.h: the flag parser and the small parsers every command shares. */
#include "common/cli.h"
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/parse.h"
#include "io/npy.h"

static const cli_opt *find(const cli_opt *opts, const char *name, size_t len)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

int cli_is_help(const char *s) { return !strcmp(s, "-h") || !strcmp(s, "--help"); }

int cli_help_asked(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (cli_is_help(argv[i])) return 1;
    return 0;
}

int cli_missing(const char *prog, const char *what, int (*usage)(FILE *))
{
    fprintf(stderr, "%s: %s %s required\n", prog, what, strstr(what, " and ") ? "are" : "is");
    return usage(stderr);
}

/* the optimal-string-alignment distance of a[0..n) and b[0..m) (n, m < 64): Levenshtein's, and a swap of two
 * neighbours costs 1 (--modle is one slip from --model, not two) */
static int edits(const char *a, size_t n, const char *b, size_t m)
{
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[n][m];
}

const char *cli_nearest(const char *word, size_t len, const char *const *names, int n)
{
    const char *best = NULL, *pre = NULL;
    int best_d = 3, n_pre = 0;
    size_t body = len;  /* the letters after the dashes: a slip of 2 in a 3-letter word is another word */
    for (size_t i = 0; i < len && word[i] == '-'; i++) body--;
    for (int k = 0; k < n && len < 64; k++) {
        size_t m = strlen(names[k]);
        if (m >= 64) continue;
        int d = edits(word, len, names[k], m);
        if (d < best_d && 2 * (size_t)d <= body) best_d = d, best = names[k];
        /* --mod for --model, --images for --image: one name only, else it is a guess between them */
        size_t short_len = m < len ? m : len;
        if (body >= 3 && short_len > 2 + (len - body) && !strncmp(word, names[k], short_len)) n_pre++, pre = names[k];
    }
    return best ? best : n_pre == 1 ? pre : NULL;
}

/* "prog: unknown option X", naming the table's row nearest to it (the flag part of --flag=value only) */
static void say_unknown(const char *prog, const char *a, const cli_opt *opts)
{
    const char *names[256];
    int n = 0;
    for (const cli_opt *o = opts; o->name && n < 255; o++) names[n++] = o->name;
    names[n++] = "--help";
    const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
    const char *near = cli_nearest(a, eq ? (size_t)(eq - a) : strlen(a), names, n);
    if (near) fprintf(stderr, "%s: unknown option %s; did you mean %s?\n", prog, a, near);
    else fprintf(stderr, "%s: unknown option %s\n", prog, a);
}

static int set(const char *prog, const cli_opt *o, const char *v, int (*usage)(FILE *))
{
    char err[1024];
    int rc = 0;
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dst = v; break;
    case CLI_LIST:
        if (*o->count == o->cap) { fprintf(stderr, "%s: at most %d %s\n", prog, o->cap, o->name); return 2; }
        ((const char **)o->dst)[(*o->count)++] = v;
        break;
    case CLI_INT: rc = mact_parse_int_arg(o->name, v, (int)o->lo, (int)o->hi, o->dst, err, sizeof err); break;
    case CLI_F64: rc = mact_parse_f64_arg(o->name, v, o->lo, o->hi, o->dst, err, sizeof err); break;
    case CLI_U64: rc = mact_parse_u64_arg(o->name, v, o->dst, err, sizeof err); break;
    case CLI_FLAG: *(int *)o->dst = 1; break;
    case CLI_THREADS:
        rc = mact_parse_int_arg(o->name, v, 0, MACT_MAX_THREADS, o->dst, err, sizeof err);
        if (!rc && *(int *)o->dst > mact_max_threads()) *(int *)o->dst = mact_max_threads();  /* no more than the machine has */
        break;
    case CLI_BUF:
        if (strlen(v) >= (size_t)o->cap) { snprintf(err, sizeof err, "%s: longer than %d bytes", o->name, o->cap - 1); rc = -1; }
        else memcpy(o->dst, v, strlen(v) + 1);
        break;
    case CLI_ATOI: *(int *)o->dst = atoi(v); break;
    case CLI_FN:
        err[0] = 0;
        rc = o->fn(v, o->dst, err, sizeof err);
        if (rc == -2) {  /* the row lists its values in the usage */
            fprintf(stderr, "%s: %s does not take '%s'\n", prog, o->name, v);
            return usage(stderr);
        }
        if (rc && !err[0]) snprintf(err, sizeof err, "%s is %s", o->name, o->choices ? o->choices : "not a value it takes");
        break;
    }
    if (rc) { fprintf(stderr, "%s: %s\n", prog, err); return 2; }
    if (o->seen) *o->seen = 1;
    return 0;
}

/* the required rows not given (given[i]: row i was): "prog: --a, --b and --c are required", then the usage; 0 when
 * none is missing */
static int say_required(const char *prog, const cli_opt *opts, const unsigned char *given, int (*usage)(FILE *))
{
    int n = 0, k = 0;
    for (int i = 0; opts[i].name; i++) n += opts[i].required && !given[i];
    if (!n) return 0;
    fprintf(stderr, "%s: ", prog);
    for (int i = 0; opts[i].name; i++) {
        if (!opts[i].required || given[i]) continue;
        fprintf(stderr, "%s%s", k == 0 ? "" : k == n - 1 ? " and " : ", ", opts[i].name);
        k++;
    }
    fprintf(stderr, " %s required\n", n == 1 ? "is" : "are");
    return usage(stderr);
}

enum { MAX_ROWS = 256 };  /* the rows whose presence is tracked for .required (the largest table, serve's: ~50) */

int cli_parse(const char *prog, int argc, char **argv, const cli_opt *opts, const char **pos, int max_pos, int *n_pos,
              int (*usage)(FILE *))
{
    unsigned char given[MAX_ROWS] = {0};
    if (n_pos) *n_pos = 0;
    /* -h / --help first, wherever it is: `mact run --model --help` asks for help, not for a model named --help */
    if (cli_help_asked(argc, argv)) { usage(stdout); return CLI_HELP_SHOWN; }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (!pos || !n_pos || *n_pos == max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s'\n", prog, a);
                return usage(stderr);
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *e = a[1] == '-' ? strchr(a, '=') : NULL;
        const cli_opt *o = find(opts, a, e ? (size_t)(e - a) : strlen(a));
        if (!o) { say_unknown(prog, a, opts); return usage(stderr); }
        if (o - opts < MAX_ROWS) given[o - opts] = 1;
        if (o->kind == CLI_FLAG) {
            if (e) { fprintf(stderr, "%s: %s takes no value\n", prog, o->name); return usage(stderr); }
            int rc = set(prog, o, NULL, usage);
            if (rc) return rc;
            continue;
        }
        const char *v = e ? e + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) { fprintf(stderr, "%s: %s needs a value\n", prog, a); return usage(stderr); }
        int rc = set(prog, o, v, usage);
        if (rc) return rc;
    }
    return say_required(prog, opts, given, usage);
}

int cli_parse_floats(const char *s, float *out, int cap, int *n, char *bad, size_t badcap)
{
    *n = 0;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '[' || *s == ']') s++;
        if (!*s) break;
        size_t l = strcspn(s, " ,\t[]");
        char tok[1024];
        double v;
        if (l >= sizeof tok) { snprintf(bad, badcap, "%.40s...", s); return -1; }
        memcpy(tok, s, l);
        tok[l] = 0;
        int pr = mact_parse_f64(tok, -DBL_MAX, DBL_MAX, &v);
        if (pr == 0 && fabs(v) > 3.4028234663852886e38) { snprintf(bad, badcap, "%.40s%s", tok, l > 40 ? "..." : ""); return -3; }
        if (pr) { snprintf(bad, badcap, "%.40s%s", tok, l > 40 ? "..." : ""); return -1; }
        if (*n == cap) return -2;
        out[(*n)++] = (float)v;
        s += l;
    }
    return 0;
}

int cli_parse_ints(const char *s, int lo, int hi, int *out, int cap, int *n)
{
    *n = 0;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '[' || *s == ']') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < lo || v > hi || (*end && *end != ',' && *end != ' ' && *end != ']')) return -1;
        if (*n == cap) return -2;
        out[(*n)++] = (int)v;
        s = end;
    }
    return *n ? 0 : -1;
}

int cli_rtc_schedule(const char *s, void *dst, char *err, size_t el) { return mact_rtc_schedule_parse(s, dst) ? -1 : 0; }
int cli_rtc_guidance(const char *s, void *dst, char *err, size_t el) { return mact_rtc_guidance_parse(s, dst) ? -1 : 0; }

int cli_int8_parts(const char *s, void *dst, char *err, size_t el)
{
    if (mact_int8_parts_parse(s, (unsigned *)dst)) {
        snprintf(err, el, "--int8-parts wants llm, vision, expert (comma-separated) or all, got '%s'", s);
        return -1;
    }
    return 0;
}

int cli_precision(const char *s, void *dst, char *err, size_t el)
{
    mact_precision p;
    if (mact_precision_parse(s, &p) || p == MACT_PRECISION_DEFAULT) {
        snprintf(err, el, "--precision is fp32, bf16 or int8");
        return -1;
    }
    *(mact_precision *)dst = p;
    return 0;
}

int cli_frames_load(const char *prog, const char *const *paths, int n, mact_image *imgs, mact_frame *fr)
{
    char err[1024];
    for (int i = 0; i < n; i++) imgs[i] = (mact_image){0};
    for (int i = 0; i < n; i++) {
        if (mact_image_load_path(paths[i], &imgs[i], err, sizeof err)) {
            fprintf(stderr, "%s: --image %s: %s\n", prog, paths[i], err);
            return -1;
        }
        fr[i] = (mact_frame){.rgb = imgs[i].data, .height = (int)imgs[i].height, .width = (int)imgs[i].width};
    }
    return 0;
}

void cli_frames_free(mact_image *imgs, int n)
{
    for (int i = 0; i < n; i++) mact_image_free(&imgs[i]);
}

int cli_npy_f32(const char *path, float **out, size_t *n, int *ndim, int64_t *shape, char *err, size_t el)
{
    mact_array a = {0};
    *out = NULL;
    int rc = mact_npy_read(path, &a, err, el) || mact_array_to_f32(&a, out, n, err, el) ? -1 : 0;
    if (ndim) *ndim = a.ndim;
    if (shape) memcpy(shape, a.shape, sizeof a.shape);
    mact_array_free(&a);
    return rc;
}

void cli_cache_dir(char *out, size_t cap, const char *name)
{
    const char *cache = getenv("MACT_CACHE"), *home = getenv("HOME");
    char base[4000];
    if (cache) snprintf(base, sizeof base, "%s", cache);
    else snprintf(base, sizeof base, "%s/.cache/mact", home ? home : ".");
    snprintf(out, cap, "%s/%s", base, name);
}

int cli_open_session(const char *prog, const char *model, const mact_load_options *lo, int threads, int max_images,
                     mact_model **m, mact_session **s)
{
    char err[4096];
    mact_session_options so = {.n_threads = threads, .max_images = (size_t)max_images};
    *m = NULL;
    *s = NULL;
    if (mact_model_load(model, lo, m, err, sizeof err) || mact_session_new(*m, &so, s, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        mact_model_free(*m);
        *m = NULL;
        return 1;
    }
    return 0;
}
