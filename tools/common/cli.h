/* The CLI's shared front end: one table-driven flag parser, strict float lists, image files, and the charts
 * (tools/common/chart.c). Every command file parses its flags with cli_parse and calls one library function. */
#ifndef MACT_TOOLS_CLI_H
#define MACT_TOOLS_CLI_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    CLI_STR,     /* const char **dst = the value */
    CLI_LIST,    /* const char *dst[cap], *count: repeated, appended; more than cap: "at most CAP NAME" */
    CLI_INT,     /* int *dst in [lo, hi], strictly (base/parse.h) */
    CLI_F64,     /* double *dst in [lo, hi] */
    CLI_U64,     /* uint64_t *dst */
    CLI_FLAG,    /* int *dst = 1, no value */
    CLI_ATOI,    /* int *dst = atoi(value): the lax flags kept as they were */
    CLI_FN,      /* fn(value, dst, err, errlen): 0, or -1 with err set (printed), or -2: the usage */
} cli_kind;

typedef struct {
    const char *name;            /* "--model" */
    cli_kind kind;
    void *dst;
    double lo, hi;               /* CLI_INT, CLI_F64 */
    int *count, cap;             /* CLI_LIST */
    int (*fn)(const char *value, void *dst, char *err, size_t errlen);
    int *seen;                   /* set to 1 when given (may be NULL) */
} cli_opt;

/* One table row: CLI_O("--horizon", CLI_INT, &h, .lo = 1, .hi = 256); the table ends with {0}. */
#define CLI_O(flag, k, d, ...) {.name = (flag), .kind = (k), .dst = (d), __VA_ARGS__}

/* Parses argv against opts (terminated by a NULL name); arguments not starting with '-' go to pos (at most max_pos;
 * NULL: none allowed). eq: also accept --name=value. Returns 0, or 2 after printing "prog: message" to stderr (a bad
 * value), or the usage() result (an unknown flag, a missing value, too many positionals). */
int cli_parse(const char *prog, int argc, char **argv, const cli_opt *opts, const char **pos, int max_pos, int *n_pos,
              int eq, int (*usage)(void));

/* "0.1, -0.2 0.3" or "[0.1,-0.2,0.3]": numbers separated by commas and/or spaces, each strictly a finite decimal
 * number. -1: not a number (bad set to it), -2: over cap, -3: finite but outside float32's range (bad set to it). */
int cli_parse_floats(const char *s, float *out, int cap, int *n, char *bad, size_t badcap);
/* "1,2,3" (or with spaces / brackets): integers in [lo, hi], at most cap. 0, -1: not such a list, -2: over cap. */
int cli_parse_ints(const char *s, int lo, int hi, int *out, int cap, int *n);

/* ---- charts (tools/common/chart.c, cairo) ---- */

typedef struct {
    const double *y;             /* n values: x = 0 .. n - 1 */
    int n;
    int bars;                    /* bars instead of a line */
    int dashed;
    double rgb[3];
    const int *alt;              /* bars: alt[i] != 0 draws bar i in alt_rgb (may be NULL) */
    double alt_rgb[3];
    const char *label;           /* the legend's (NULL: none) */
} cli_series;

typedef struct {
    const char *label;           /* left of the panel (NULL: none) */
    const cli_series *series;
    int n_series;
    const double *marks;         /* dashed vertical lines at these x (may be NULL) */
    int n_marks;
    int from_zero;               /* the y axis starts at 0 (else at the data's range, padded) */
    const char *const *xlabels;  /* bars: one label per bar (may be NULL) */
} cli_panel;

typedef struct {
    const char *title, *xlabel;
    int width, panel_height;     /* pixels */
    const cli_panel *panels;     /* stacked, sharing x */
    int n_panels;
} cli_chart;

/* The chart as a PNG at path (temp + rename). 0, or -1 with err set. */
int cli_chart_png(const char *path, const cli_chart *c, char *err, size_t errlen);
/* cairo's and fontconfig's caches released (at exit), so a leak checker sees only ours */
void cli_chart_cleanup(void);
#endif
