/* The CLI's shared front end: one table-driven flag parser, strict number lists, image and .npy files, the cache
 * folder, and the charts (tools/common/chart.c). Every command file parses its flags with cli_parse and calls one
 * library function. */
#ifndef MACT_TOOLS_CLI_H
#define MACT_TOOLS_CLI_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "mact.h"
#include "io/image.h"

typedef enum {
    CLI_STR,     /* const char **dst = the value */
    CLI_LIST,    /* const char *dst[cap], *count: repeated, appended; more than cap: "at most CAP NAME" */
    CLI_INT,     /* int *dst in [lo, hi], strictly (base/parse.h) */
    CLI_F64,     /* double *dst in [lo, hi] */
    CLI_U64,     /* uint64_t *dst */
    CLI_FLAG,    /* int *dst = 1, no value */
    CLI_ATOI,    /* int *dst = atoi(value): the lax flags kept as they were */
    CLI_FN,      /* fn(value, dst, err, errlen): 0, or -1 with err set (printed; left empty: "NAME is CHOICES"), or
                  * -2: "NAME does not take 'VALUE'" and the usage */
    CLI_THREADS, /* int *dst in [0, MACT_MAX_THREADS], then at most the online CPUs (base/parse.h) */
    CLI_BUF,     /* char dst[cap] = a copy of the value; cap bytes or more: "NAME: longer than CAP-1 bytes" */
} cli_kind;

typedef struct {
    const char *name;            /* "--model" */
    cli_kind kind;
    void *dst;
    double lo, hi;               /* CLI_INT, CLI_F64 */
    int *count, cap;             /* CLI_LIST (count, cap), CLI_BUF (cap) */
    int (*fn)(const char *value, void *dst, char *err, size_t errlen);
    int *seen;                   /* set to 1 when given (may be NULL) */
    const char *choices;         /* CLI_FN: what the refusal of a value lists ("identity or vjp") */
    int required;                /* cli_parse names it when it is not given ("prog: --task is required") */
} cli_opt;

/* One table row: CLI_O("--horizon", CLI_INT, &h, .lo = 1, .hi = 256); the table ends with {0}. */
#define CLI_O(flag, k, d, ...) {.name = (flag), .kind = (k), .dst = (d), __VA_ARGS__}

/* What cli_parse returns after printing the usage for -h / --help: not an exit status (cli_exit makes it 0). */
enum { CLI_HELP_SHOWN = -1 };
/* cli_parse's refusal or help as the command's exit status: `if (rc) return cli_exit(rc);` */
static inline int cli_exit(int rc) { return rc == CLI_HELP_SHOWN ? 0 : rc; }

/* Parses argv against opts (terminated by a NULL name); arguments not starting with '-' go to pos (at most max_pos;
 * NULL: none allowed). --name=value is --name value. usage(f) prints the command's usage to f and returns 2.
 *   - an argument that is exactly -h or --help, anywhere (before any other is read, so none is ever taken as a
 *     path): usage(stdout), CLI_HELP_SHOWN;
 *   - an unknown flag ("prog: unknown option X; did you mean Y?"), an argument where none is taken, a flag without
 *     its value, a CLI_FN's -2, a required row not given ("prog: --a and --b are required"): that line, then
 *     usage(stderr), 2;
 *   - a bad value: "prog: why" (the row's message), 2;
 *   - else 0. */
int cli_parse(const char *prog, int argc, char **argv, const cli_opt *opts, const char **pos, int max_pos, int *n_pos,
              int (*usage)(FILE *));

/* 1 when s is -h or --help; cli_help_asked: when any of the n arguments is (for the commands that read argv
 * themselves: tokenize, the subcommand dispatchers) */
int cli_is_help(const char *s);
int cli_help_asked(int argc, char **argv);

/* "prog: WHAT is required" ("are" when WHAT names two: "A and B") to stderr, then usage(stderr): 2 (the checks a
 * table row cannot state: a positional argument, one of two flags, a flag only some modes need) */
int cli_missing(const char *prog, const char *what, int (*usage)(FILE *));

/* Of the n names, the one word most likely meant: at most 2 edits away (a swap of neighbours counts 1), or the only
 * one it starts with / that starts it; NULL when none is close. */
const char *cli_nearest(const char *word, size_t len, const char *const *names, int n);

/* "0.1, -0.2 0.3" or "[0.1,-0.2,0.3]": numbers separated by commas and/or spaces, each strictly a finite decimal
 * number. -1: not a number (bad set to it), -2: over cap, -3: finite but outside float32's range (bad set to it). */
int cli_parse_floats(const char *s, float *out, int cap, int *n, char *bad, size_t badcap);
/* "1,2,3" (or with spaces / brackets): integers in [lo, hi], at most cap. 0, -1: not such a list, -2: over cap. */
int cli_parse_ints(const char *s, int lo, int hi, int *out, int cap, int *n);

/* CLI_FN for a mact_rtc_schedule / mact_rtc_guidance by name (the refusal lists the row's .choices) */
int cli_rtc_schedule(const char *s, void *dst, char *err, size_t errlen);
int cli_rtc_guidance(const char *s, void *dst, char *err, size_t errlen);

/* CLI_FN for --precision: fp32, bf16 or int8 (not "default") into a mact_precision; else
 * "--precision is fp32, bf16 or int8" */
int cli_precision(const char *s, void *dst, char *err, size_t errlen);
/* --int8-parts: "llm,vision,expert" (any subset) or "all" -> unsigned MACT_PART_* bits */
int cli_int8_parts(const char *s, void *dst, char *err, size_t errlen);

/* A model (lo: its load options, NULL: the defaults) and a session on it (threads, max_images: 0 for the defaults). 0,
 * or 1 after printing "prog: why" (nothing left open). */
int cli_open_session(const char *prog, const char *model, const mact_load_options *lo, int threads, int max_images,
                     mact_model **m, mact_session **s);

/* The n image files (PNG, JPEG, HxWx3 .npy) as frames: imgs[n] own the pixels (cli_frames_free, also after a
 * failure), fr[n] point into them. 0, or -1 after printing "prog: --image PATH: why". */
int cli_frames_load(const char *prog, const char *const *paths, int n, mact_image *imgs, mact_frame *fr);
void cli_frames_free(mact_image *imgs, int n);

/* The .npy file at path as float32 values (*out malloc'd, *n of them); ndim / shape (may be NULL): its shape
 * (shape has room for 8). 0, or -1 with err set. */
int cli_npy_f32(const char *path, float **out, size_t *n, int *ndim, int64_t *shape, char *err, size_t errlen);

/* out = $MACT_CACHE/name, else $HOME/.cache/mact/name (./.cache/mact/name without HOME): the folder that keeps
 * what `mact demo` and `mact bench` synthesize once */
void cli_cache_dir(char *out, size_t cap, const char *name);

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
