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

/* what an argument that cannot be read returns: usage()'s result, or 2 without one */
static int refuse(int (*usage)(void)) { return usage ? usage() : 2; }

static int set(const char *prog, const cli_opt *o, const char *v, int (*usage)(void))
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
    case CLI_FLAG:
    case CLI_HELP: *(int *)o->dst = 1; break;
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
        if (rc == -2) return refuse(usage);
        if (rc && !err[0]) snprintf(err, sizeof err, "%s is %s", o->name, o->choices ? o->choices : "not a value it takes");
        break;
    }
    if (rc) { fprintf(stderr, "%s: %s\n", prog, err); return 2; }
    if (o->seen) *o->seen = 1;
    return 0;
}

int cli_parse(const char *prog, int argc, char **argv, const cli_opt *opts, const char **pos, int max_pos, int *n_pos,
              int flags, int (*usage)(void))
{
    if (n_pos) *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (!pos || !n_pos || *n_pos == max_pos) goto unknown;
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *e = flags & CLI_EQ && a[1] == '-' ? strchr(a, '=') : NULL;
        const cli_opt *o = find(opts, a, e ? (size_t)(e - a) : strlen(a));
        if (!o) goto unknown;
        if (o->kind == CLI_FLAG || o->kind == CLI_HELP) {
            if (e) return refuse(usage);
            int rc = set(prog, o, NULL, usage);
            if (rc || o->kind == CLI_HELP) return rc;
            continue;
        }
        const char *v = e ? e + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            if (flags & CLI_SAY_MISSING) fprintf(stderr, "%s: %s needs a value\n", prog, a);
            return refuse(usage);
        }
        int rc = set(prog, o, v, usage);
        if (rc) return rc;
        continue;
    unknown:
        if (flags & CLI_SAY_UNKNOWN) fprintf(stderr, "%s: unknown option %s\n", prog, a);
        return refuse(usage);
    }
    return 0;
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
