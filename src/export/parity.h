/* The parity gate over a directory of golden boundary files (docs/design.md). */
#ifndef MACT_PARITY_H
#define MACT_PARITY_H
#include <stdio.h>

typedef struct {
    double cos_min;          /* every output's cosine must reach this */
    double rel_tol;          /* and its max abs error <= rel_tol * max|ref| ... */
    int tol_informational;   /* ... unless this is set (massive activations): then only reported */
    double abs_tol;          /* normalised actions: max abs error bound */
    double vjp_abs_tol;      /* the RTC vjp row's bound (its actions are ~3x larger: g = 10 at t = 0); 0 = abs_tol */
    int max_tokens;          /* session size; 0 = default */
    int precision;           /* MACT_PRECISION_*; the gate's default is FP32 (exact mode) */
    unsigned int8_parts;     /* INT8: MACT_PART_* quantized; 0 = the library's default */
} mact_parity_options;

typedef struct { double cosine, max_abs, max_ref; } mact_cmp;
void mact_compare(const float *got, const float *ref, size_t n, mact_cmp *r);

/* Prints the table to out. Returns 0 when every boundary passed, 1 when one failed, negative when the
 * golden set or model could not be opened. */
int mact_parity(const char *golden_dir, const char *model_dir, const mact_parity_options *o, FILE *out);
#endif
