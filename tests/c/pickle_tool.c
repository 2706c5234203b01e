/* Test driver for src/server/pickle.c (tests/test_pickle.sh):
 *   pickle_tool dump FILE [--max-depth N] [--max-items N] [--max-memo N] [--max-array N] [--max-str N]
 *       parses FILE (pickle or PR #3048 format) and prints the tree in the canonical text that
 *       tests/pickle/pk_view.py prints for Python's view of the same bytes; on error prints "ERROR: msg", exits 1
 *   pickle_tool write pickle|safe ROWS DIM T0 DT I0 ACTIONS.f32 OUT
 *       writes the TimedAction reply for ROWS x DIM float32 actions (raw little-endian file)
 *   pickle_tool bench FILE N
 *       parses FILE N times and prints the mean wall time of one parse (docs/pickle.md's numbers) */
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/pickle.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    for (size_t k; b && (k = fread(b + len, 1, cap - len, f)) > 0;) {
        len += k;
        if (len == cap) {
            uint8_t *q = realloc(b, cap *= 2);
            if (!q) { free(b); b = NULL; }
            b = q;
        }
    }
    fclose(f);
    *n = len;
    return b;
}

static void put_str(const char *s, size_t n)
{
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') putchar(c);
        else printf("\\x%02x", c);
    }
    putchar('\'');
}

/* sum of (i + 1) * byte_i mod 2^64: cheap in C and in numpy */
static uint64_t cks(const uint8_t *p, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += (uint64_t)(i + 1) * p[i];
    return s;
}

static void put_dtype(const pk_dtype *d) { printf("%c%c%d", d->order, d->kind, d->itemsize); }

static void dump(const pk_value *v)
{
    switch (v->kind) {
    case PK_NONE: printf("None"); break;
    case PK_BOOL: printf(v->u.b ? "True" : "False"); break;
    case PK_INT: printf("%" PRId64, v->u.i); break;
    case PK_FLOAT: printf("f%.17g", v->u.f); break;
    case PK_STR: put_str(v->u.str.s, v->u.str.len); break;
    case PK_BYTES:
        printf("%s[%zu]:", v->u.bytes.bytearray ? "ba" : "b", v->u.bytes.len);
        if (v->u.bytes.len <= 64)
            for (size_t i = 0; i < v->u.bytes.len; i++) printf("%02x", v->u.bytes.p[i]);
        else printf("cks=%016" PRIx64, cks(v->u.bytes.p, v->u.bytes.len));
        break;
    case PK_LIST:
    case PK_TUPLE:
        putchar(v->kind == PK_LIST ? '[' : '(');
        for (size_t i = 0; i < pk_len(v); i++) {
            if (i) printf(", ");
            dump(pk_item(v, i));
        }
        putchar(v->kind == PK_LIST ? ']' : ')');
        break;
    case PK_DICT:
        putchar('{');
        for (size_t i = 0; i < pk_len(v); i++) {
            if (i) printf(", ");
            dump(pk_dict_key(v, i));
            printf(": ");
            dump(pk_dict_val(v, i));
        }
        putchar('}');
        break;
    case PK_NDARRAY:
        printf("ndarray(");
        put_dtype(&v->u.arr.dt);
        printf(" (");
        for (int i = 0; i < v->u.arr.ndim; i++) printf("%s%" PRId64, i ? "," : "", v->u.arr.shape[i]);
        printf(") cks=%016" PRIx64, cks(v->u.arr.data, v->u.arr.nbytes));
        if (v->u.arr.count <= 16)
            for (size_t i = 0; i < v->u.arr.count; i++) printf(" %.17g", pk_arr_get(v, i));
        putchar(')');
        break;
    case PK_NPSCALAR:
        printf("np(");
        put_dtype(&v->u.arr.dt);
        printf(" %.17g)", pk_arr_get(v, 0));
        break;
    case PK_DTYPE:
        printf("dtype(");
        put_dtype(&v->u.arr.dt);
        putchar(')');
        break;
    case PK_OBJECT:
        printf("%s.%s", v->u.obj.module, v->u.obj.name);
        if (v->u.obj.args) dump(v->u.obj.args);
        if (v->u.obj.state) dump(v->u.obj.state);
        else if (!v->u.obj.args) printf("{}");
        break;
    case PK_GLOBAL: printf("global(%s.%s)", v->u.obj.module, v->u.obj.name); break;
    }
}

static int cmd_dump(int argc, char **argv)
{
    pk_limits lim;
    pk_limits_default(&lim);
    for (int i = 3; i + 1 < argc; i += 2) {
        unsigned long long x = strtoull(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--max-depth")) lim.max_depth = (int)x;
        else if (!strcmp(argv[i], "--max-items")) lim.max_items = x;
        else if (!strcmp(argv[i], "--max-memo")) lim.max_memo = x;
        else if (!strcmp(argv[i], "--max-array")) lim.max_array_bytes = x;
        else if (!strcmp(argv[i], "--max-str")) lim.max_str_bytes = x;
        else if (!strcmp(argv[i], "--max-input")) lim.max_input = x;
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    size_t n = 0;
    uint8_t *buf = slurp(argv[2], &n);
    if (!buf) { printf("ERROR: cannot read %s\n", argv[2]); return 2; }
    char err[512];
    pk_doc *d = NULL;
    if (pk_parse(buf, n, &lim, &d, err, sizeof err)) {
        printf("ERROR: %s\n", err);
        free(buf);
        return 1;
    }
    dump(pk_root(d));
    putchar('\n');
    pk_free(d);
    free(buf);
    return 0;
}

static int cmd_write(int argc, char **argv)
{
    if (argc != 10) { fprintf(stderr, "usage: pickle_tool write pickle|safe ROWS DIM T0 DT I0 ACTIONS.f32 OUT\n"); return 2; }
    int rows = atoi(argv[3]), dim = atoi(argv[4]);
    double t0 = strtod(argv[5], NULL), dt = strtod(argv[6], NULL);
    int64_t i0 = strtoll(argv[7], NULL, 10);
    size_t n = 0;
    uint8_t *raw = slurp(argv[8], &n);
    if (!raw || n != (size_t)rows * (size_t)dim * 4) { fprintf(stderr, "%s: expected %d x %d float32\n", argv[8], rows, dim); return 2; }
    float *a = malloc(n ? n : 1);
    memcpy(a, raw, n);
    pk_buf b = {0};
    char err[256];
    int rc = !strcmp(argv[2], "safe") ? pk_write_timed_actions_safe(&b, a, rows, dim, t0, dt, i0, err, sizeof err)
                                      : pk_write_timed_actions(&b, a, rows, dim, t0, dt, i0, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ERROR: %s\n", err);
        free(a);
        free(raw);
        return 1;
    }
    FILE *f = fopen(argv[9], "wb");
    if (!f || fwrite(b.p, 1, b.len, f) != b.len || fclose(f)) { fprintf(stderr, "cannot write %s\n", argv[9]); return 2; }
    pk_buf_free(&b);
    free(a);
    free(raw);
    return 0;
}

static int cmd_bench(const char *path, int n)
{
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    if (!buf || n < 1) return 2;
    char err[512];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        pk_doc *d = NULL;
        if (pk_parse(buf, len, NULL, &d, err, sizeof err)) { printf("ERROR: %s\n", err); return 1; }
        pk_free(d);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / n;
    printf("%s: %zu bytes, %.1f us per parse (mean of %d)\n", path, len, us, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "bench")) return cmd_bench(argv[2], atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "dump")) return cmd_dump(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "write")) return cmd_write(argc, argv);
    fprintf(stderr, "usage: pickle_tool dump FILE [--max-... N] | write pickle|safe ROWS DIM T0 DT I0 ACTIONS.f32 OUT\n");
    return 2;
}
