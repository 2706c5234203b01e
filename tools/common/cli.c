/* tools/common/cli.h: the flag parser and the small parsers every command shares. */
#include "common/cli.h"
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/parse.h"

static const cli_opt *find(const cli_opt *opts, const char *name, size_t len)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
    return NULL;
}

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
    case CLI_FLAG: *(int *)o->dst = 1; break;
    case CLI_ATOI: *(int *)o->dst = atoi(v); break;
    case CLI_FN:
        err[0] = 0;
        rc = o->fn(v, o->dst, err, sizeof err);
        if (rc == -2) return usage();
        break;
    }
    if (rc) { fprintf(stderr, "%s: %s\n", prog, err); return 2; }
    if (o->seen) *o->seen = 1;
    return 0;
}

int cli_parse(const char *prog, int argc, char **argv, const cli_opt *opts, const char **pos, int max_pos, int *n_pos,
              int eq, int (*usage)(void))
{
    if (n_pos) *n_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (!pos || !n_pos || *n_pos == max_pos) return usage();
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *e = eq && a[1] == '-' ? strchr(a, '=') : NULL;
        const cli_opt *o = find(opts, a, e ? (size_t)(e - a) : strlen(a));
        if (!o) return usage();
        if (o->kind == CLI_FLAG) {
            if (e) return usage();
            int rc = set(prog, o, NULL, usage);
            if (rc) return rc;
            continue;
        }
        const char *v = e ? e + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return usage();
        int rc = set(prog, o, v, usage);
        if (rc) return rc;
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
