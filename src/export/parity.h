/* The parity gate over a directory of golden boundary files (docs/design.md). */
#ifndef MACT_PARITY_H
#define MACT_PARITY_H
#include <stdio.h>
#include "mact.h"

/* The gates: a field left 0 takes the precision's documented gate (docs/parity.md): fp32 cosine >= 0.99999, max abs
 * <= 1e-4 x max|ref|, actions max abs <= 1e-4; bf16 (also DEFAULT) cosine >= 0.999, actions <= 0.05, int8 cosine >=
 * 0.999, actions <= 0.25, the relative bound reported only unless rel_tol is given; the RTC vjp row 3x the actions'. */
typedef struct {
    double cos_min;          /* every output's cosine must reach this */
    double rel_tol;          /* and its max abs error <= rel_tol * max|ref| ... */
    int tol_informational;   /* ... unless this is set (massive activations): then only reported */
    double abs_tol;          /* normalised actions: max abs error bound */
    double vjp_abs_tol;      /* the RTC vjp row's bound (its actions are ~3x larger: g = 10 at t = 0) */
    int max_tokens;          /* session size; 0 = default */
    mact_precision precision; /* as mact_load_options (DEFAULT: the library's, BF16); `mact parity` asks FP32, the
                                 exact mode its default gates are for */
    unsigned int8_parts;     /* INT8: MACT_PART_* quantized; 0 = the library's default */
} mact_parity_options;

typedef struct { double cosine, max_abs, max_ref; } mact_cmp;
void mact_compare(const float *got, const float *ref, size_t n, mact_cmp *r);

/* Prints the table to out. Returns 0 when every boundary passed, 1 when one failed, negative when the
 * golden set or model could not be opened. */
int mact_parity(const char *golden_dir, const char *model_dir, const mact_parity_options *o, FILE *out);
#endif
