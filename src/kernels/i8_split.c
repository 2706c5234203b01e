/* The outlier split of the int8 GEMMs (every backend; docs/parity.md "int8 at depth, with outliers").
 *
 * Trained models carry a few activation channels 10-1000x larger than the rest (LLM "massive activations",
 * ViT register-like channels). With one u8 scale per row, such a channel sets the row's range and the other
 * channels keep a few of the 256 levels. Here, before an int8 GEMM, the columns of x whose largest |value|
 * over the M rows exceeds MACT_I8_OUTLIER_RATIO times the median column maximum are found (at most
 * mact_i8_split_cap(K) of them, the largest first), x is copied with those columns zeroed for the int8 kernel,
 * and their product with the weight's columns is added in fp32 from the stored weights (LLM.int8()'s
 * decomposition, with the threshold relative to the tensor instead of an absolute 6.0, so it adapts to each
 * GEMM's scale). The split is decided per call from the data, so it needs no calibration and no load-time
 * state, and it costs one pass over x when nothing stands out (the usual case on random checkpoints: then the
 * int8 path is unchanged bit for bit).
 *
 * The centring (packs with `centre` set: the vision component's, src/model/packs.c). A weight's quantization
 * error is the same for every row, so on rows that share a common component (x = mu + the rest, as a ViT's
 * patches of one image do) it does not average out over the rows, and the grid token sampler's coordinates,
 * computed from the mean over the cells, inherit it (docs/parity.md "Where int8 vision's error comes from").
 * A centred GEMM takes mu = the mean of its M rows, multiplies mu by the stored weights in fp32 (one GEMV,
 * folded into the bias) and sends only x - mu through the split and the int8 kernel: the mean path is then
 * exact, and the int8 part carries the rows' deviations, with their own, tighter per-row ranges.
 *
 * Two planes (pk->lo, MACT_PACK_I8R): the weight as s1 q1 + s2 q2, q2 the int8 residual of the first plane.
 * The centring removes the weights' error from the mean; what is left of it acts on the deviations, and
 * through the ViT's nonlinearities it still moves the sampler's coordinates (most on checkpoints with outlier
 * channels). The second plane takes the weight's error down ~128x, at a second int8 GEMM on the same x. With two
 * planes the mean path reads them too (their weight, within ~1/254^2 of a channel's max |w|, in fp32) rather than
 * the stored weights, whose pages then stay released after packing (mean_product). */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"
#include "kernels/ops.h"

int mact_i8_split_cap(int64_t K)
{
    const int64_t c = K / 32;
    return (int)(c < 1 ? 1 : c > MACT_I8_MAX_OUTLIERS ? MACT_I8_MAX_OUTLIERS : c);
}

size_t mact_i8_split_scratch(int64_t M, int64_t N, int64_t K)
{
    /* the x copy, the column maxima and their selection copy, the column means (zero-padded to whole k quads),
     * the centred GEMM's bias (N), the outlier columns of x */
    return ((size_t)M * (size_t)K + 3 * (size_t)K + 4 + (size_t)N + (size_t)M * MACT_I8_MAX_OUTLIERS) *
               sizeof(float) + 320;
}

/* the k-th smallest of a[0..n) (a is reordered); Hoare's selection */
static float select_kth(float *a, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const float p = a[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < p) i++;
            while (a[j] > p) j--;
            if (i <= j) {
                const float t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
    return a[k];
}

typedef struct {
    const float *x;
    int64_t ldx, M, K;
    float *colmax;     /* out: max |x - mu| per column (NULL: the column sums into colsum instead) */
    float *colsum;
    const float *mu;   /* NULL: no centre */
    float *xs;         /* NULL: no copy; else [M, K] receives x - mu */
    float probe[MACT_I8_SCAN_TASKS];
} scan_job;

/* 16 columns as four 4-lane vectors (GCC / Clang vector extensions: SSE2 on x86-64, NEON on AArch64, scalar
 * code elsewhere). The scan is a stream over x; written with scalar loops, the compiler at -O2 left it scalar
 * (the probe's one running sum is a serial chain), and it took a quarter of the int8 kernel's time. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
#define SCAN_W 16

static inline v4f ld4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* columns [k0, k1) (whole groups of 16) over every row, row by row (each row's part is one contiguous run, as
 * the hardware prefetcher wants): their sums (each in row order), or the maxima of |x - mu| with the centred
 * copy; the per-lane probes sum x * 0 (NaN exactly when some value is not finite) */
static float scan_groups(const scan_job *j, int64_t k0, int64_t k1)
{
    const v4i absm = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    float *out = j->colmax ? j->colmax : j->colsum;
    v4f pr = {0};
    for (int64_t k = k0; k < k1; k++) out[k] = 0.f;
    for (int64_t m = 0; m < j->M; m++) {
        const float *r = j->x + m * j->ldx;
        if (!j->colmax) {
            for (int64_t k = k0; k < k1; k += 4) st4(out + k, ld4(out + k) + ld4(r + k));
            continue;
        }
        float *o = j->xs ? j->xs + m * j->K : NULL;
        for (int64_t k = k0; k < k1; k += 4) {
            const v4f v = j->mu ? ld4(r + k) - ld4(j->mu + k) : ld4(r + k), a = (v4f)((v4i)v & absm), c = ld4(out + k);
            const v4i gt = a > c;  /* a NaN compares false and leaves the maximum: the probe carries it */
            st4(out + k, (v4f)(((v4i)a & gt) | ((v4i)c & ~gt)));
            pr += v * 0.f;
            if (o) st4(o + k, v);
        }
    }
    if (!j->colmax)  /* a sum that overflowed counts as non-finite too */
        for (int64_t k = k0; k < k1; k += 4) pr += ld4(out + k) * 0.f;
    return pr[0] + pr[1] + pr[2] + pr[3];
}

/* the same for the columns [k0, k1) past the last whole 16 */
static float scan_tail(const scan_job *j, int64_t k0, int64_t k1)
{
    float probe = 0.f;
    float *out = j->colmax ? j->colmax : j->colsum;
    for (int64_t k = k0; k < k1; k++) out[k] = 0.f;
    for (int64_t m = 0; m < j->M; m++) {
        const float *r = j->x + m * j->ldx;
        float *o = j->xs ? j->xs + m * j->K : NULL;
        for (int64_t k = k0; k < k1; k++) {
            if (!j->colmax) {
                out[k] += r[k];
                continue;
            }
            const float v = j->mu ? r[k] - j->mu[k] : r[k], a = fabsf(v);
            if (o) o[k] = v;
            out[k] = a > out[k] ? a : out[k];
            probe += 0.f * v;
        }
    }
    if (!j->colmax)
        for (int64_t k = k0; k < k1; k++) probe += 0.f * out[k];
    return probe;
}

/* one block of whole 16-column groups (the last block also takes the tail). Each column's sum runs over the
 * rows in order, whatever the block split. */
static void scan_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    scan_job *j = arg;
    const int64_t groups = j->K / SCAN_W, per = (groups + MACT_I8_SCAN_TASKS - 1) / MACT_I8_SCAN_TASKS,
                  g0 = b * per, g1 = g0 + per < groups ? g0 + per : groups;
    float probe = 0.f;
    if (g1 > g0) probe += scan_groups(j, g0 * SCAN_W, g1 * SCAN_W);
    if (b == MACT_I8_SCAN_TASKS - 1) probe += scan_tail(j, groups * SCAN_W, j->K);
    j->probe[b] = probe;
}

/* 1 when every probe of the scan is 0 (every value finite) */
static int scan(const mact_kctx *kc, scan_job *sj)
{
    if (kc) mact_kctx_run(kc, MACT_I8_SCAN_TASKS, sj->M * sj->K > 65536, scan_task, sj);
    else for (int b = 0; b < MACT_I8_SCAN_TASKS; b++) scan_task(sj, b, 0);
    for (int b = 0; b < MACT_I8_SCAN_TASKS; b++)
        if (sj->probe[b] != 0.f) return 0;
    return 1;
}

/* the outlier columns from the column maxima (the detector's rule, mact_i8_find_outliers) */
static int pick_outliers(const float *colmax, float *tmp, int64_t K, int32_t *idx, int cap)
{
#ifdef MACT_I8_NO_SPLIT  /* a build for measuring the split's effect (docs/parity.md), never the default */
    return 0;
#endif
    if (K < 2 * MACT_I8_OUTLIER_MIN_K) return 0;
    memcpy(tmp, colmax, (size_t)K * sizeof *tmp);
    const float med = select_kth(tmp, K, K / 2);
    if (!(med > 0.f)) return 0;
    float thr = MACT_I8_OUTLIER_RATIO * med;
    int64_t n = 0;
    for (int64_t k = 0; k < K; k++)
        if (colmax[k] > thr) tmp[n++] = colmax[k];
    if (n == 0) return 0;
    if (n > cap) thr = select_kth(tmp, n, n - cap - 1);  /* keep the cap largest: strictly above the next one */
    int got = 0;
    for (int64_t k = 0; k < K && got < cap; k++)
        if (colmax[k] > thr) idx[got++] = (int32_t)k;
    return got;
}

int mact_i8_find_outliers(const mact_kctx *kc, const float *x, int64_t ldx, int64_t M, int64_t K, float *colmax,
                          float *tmp, int32_t *idx, int cap)
{
#ifdef MACT_I8_NO_SPLIT
    return 0;
#endif
    if (M <= 0 || K < 2 * MACT_I8_OUTLIER_MIN_K) return 0;
    scan_job sj = {.x = x, .ldx = ldx, .M = M, .K = K, .colmax = colmax};
    if (!scan(kc, &sj)) return 0;  /* a non-finite input keeps the plain path (and its NaN outputs) */
    return pick_outliers(colmax, tmp, K, idx, cap);
}

typedef struct {
    float *y;
    int64_t ldy, M, N;
    const float *xo;   /* [M, n_out] the outlier columns of x */
    const int32_t *idx;
    int n_out;
    const mact_packed *pk;
} side_job;

/* W[n, k] as the pack holds it: s1 q1 (+ s2 q2 with a residual plane). The side pass reads the outlier columns
 * from here, not from the stored weights: one value per row of W would fault every page of the stored tensor
 * back in (the loader dropped them after packing), and int8 mode on a checkpoint with outliers then held both
 * the packs and the stored LLM (docs/benchmarks-log.md, 2026-12-03). */
static inline float packed_w(const mact_packed *pk, int64_t n, int64_t k)
{
    const int64_t at = (n / MACT_PANEL) * pk->Kp * 256 + (k / 4) * 256 + 4 * (n % MACT_PANEL) + k % 4;
    float w = pk->scale[n] * (float)((const int8_t *)pk->data)[at];
    if (pk->lo) w += pk->lo->scale[n] * (float)((const int8_t *)pk->lo->data)[at];
    return w;
}

/* one block of 64 output columns: y[:, n0:n1] += xo . W[n0:n1, idx]^T, in 4-lane vectors (each output's terms
 * in outlier order; columns past N are zero and not stored) */
static void side_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    const side_job *j = arg;
    const int64_t n0 = b * 64, nb = j->N - n0 < 64 ? j->N - n0 : 64;
    v4f wb[MACT_I8_MAX_OUTLIERS][16];
    for (int o = 0; o < j->n_out; o++) {
        float *w = (float *)wb[o];
        for (int64_t c = 0; c < 64; c++)
            w[c] = c < nb ? packed_w(j->pk, n0 + c, j->idx[o]) : 0.f;
    }
    for (int64_t m = 0; m < j->M; m++) {
        v4f acc[16] = {0};
        const float *xr = j->xo + m * j->n_out;
        for (int o = 0; o < j->n_out; o++) {
            const float a = xr[o];
            for (int i = 0; i < 16; i++) acc[i] += a * wb[o][i];
        }
        float *yr = j->y + m * j->ldy + n0;
        const float *ac = (const float *)acc;
        for (int64_t c = 0; c < nb; c++) yr[c] += ac[c];
    }
}

typedef struct {
    float *y;
    int64_t ldy, N;
    void (*gelu)(float *, int64_t);
} gelu_job;

static void gelu_rows_task(void *arg, int64_t m, int tid)
{
    (void)tid;
    const gelu_job *j = arg;
    j->gelu(j->y + m * j->ldy, j->N);
}

/* GELU over y's M x N outputs, by the backend's vector GELU */
static void gelu_rows(const mact_kctx *kc, float *y, int64_t ldy, int64_t M, int64_t N)
{
    gelu_job g = {y, ldy, N, kc->ops->gelu ? kc->ops->gelu : mact_ref_gelu};
    mact_kctx_run(kc, M, M * N > 65536, gelu_rows_task, &g);
}

/* the split's side pass over y: the outlier columns' product, then GELU when the epilogue is GELU (the int8
 * part landed without it: GELU is not linear) */
static void side_pass(const mact_kctx *kc, float *y, int64_t ldy, const float *xo, const int32_t *idx, int n_out,
                      const mact_packed *pk, int64_t M, int64_t N, int epi)
{
    side_job j = {y, ldy, M, N, xo, idx, n_out, pk};
    mact_kctx_run(kc, (N + 63) / 64, M * N * n_out > 200000, side_task, &j);
    if (epi == MACT_EPI_GELU_TANH) gelu_rows(kc, y, ldy, M, N);
}

typedef struct {
    float *cb;
    const float *mu, *bias;
    const mact_packed *pk;
    void (*dot)(float *, const float *, const mact_packed *, int64_t);
} mean_job;

/* one panel of mu W^T + bias from the two planes: s1 (q1 . mu) + s2 (q2 . mu) + bias */
static void mean_task(void *arg, int64_t p, int tid)
{
    (void)tid;
    const mean_job *j = arg;
    float d1[MACT_PANEL], d2[MACT_PANEL];
    j->dot(d1, j->mu, j->pk, p);
    j->dot(d2, j->mu, j->pk->lo, p);
    for (int64_t c = 0, n = p * MACT_PANEL; c < MACT_PANEL && n < j->pk->N; c++, n++)
        j->cb[n] = (j->pk->scale[n] * d1[c] + j->pk->lo->scale[n] * d2[c]) + (j->bias ? j->bias[n] : 0.f);
}

/* mu W^T + bias into cb. With two planes, from the planes: their weight is within ~1/254^2 of each channel's
 * max |w|, and reading them instead of the stored tensor leaves its pages dropped (the loader released them after
 * packing; int8 vision otherwise faults every stored vision weight back in, per image). With one plane, whose
 * error is what the centring keeps out of the mean path, from the stored weights. mu: zero-padded to Kp * 4. */
static void mean_product(const mact_kctx *kc, float *cb, const float *mu, const mact_tensor *W, const mact_packed *pk,
                         const float *bias, int64_t N, int64_t K)
{
    if (!pk->lo) {
        mact_matmul_rowmajor(kc, cb, N, mu, K, W->data, W->dtype, bias, 1, N, K, MACT_EPI_NONE);
        return;
    }
    mean_job j = {cb, mu, bias, pk, kc->ops->dot_panel_i8 ? kc->ops->dot_panel_i8 : mact_ref_dot_panel_i8};
    mact_kctx_run(kc, pk->npanel, N * K > 65536, mean_task, &j);
}

/* the centred GEMM: y = (x - mu) W^T through the split and the int8 kernel (both planes of a two-plane weight),
 * + (mu W^T + bias) in fp32 */
static int centred_gemm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                        const mact_packed *pk, const float *bias, int64_t M, int64_t N, int64_t K, int epi, float *buf)
{
    float *xs = buf, *colmax = xs + M * K, *tmp = colmax + K, *mu = tmp + K, *cb = mu + K + 4, *xo = cb + N;
    scan_job sj = {.x = x, .ldx = ldx, .M = M, .K = K, .colsum = mu};
    if (!scan(kc, &sj)) return 0;  /* non-finite: the plain path, and its NaN outputs */
    const float inv = 1.f / (float)M;
    for (int64_t k = 0; k < K; k++) mu[k] *= inv;
    for (int64_t k = K; k < 4 * pk->Kp; k++) mu[k] = 0.f;
    sj = (scan_job){.x = x, .ldx = ldx, .M = M, .K = K, .colmax = colmax, .mu = mu, .xs = xs};
    if (!scan(kc, &sj)) return 0;  /* x - mu overflowed */
    int32_t idx[MACT_I8_MAX_OUTLIERS];
    const int n_out = pick_outliers(colmax, tmp, K, idx, mact_i8_split_cap(K));
    for (int64_t m = 0; m < M; m++)
        for (int o = 0; o < n_out; o++) {
            xo[m * n_out + o] = xs[m * K + idx[o]];
            xs[m * K + idx[o]] = 0.f;
        }
    mean_product(kc, cb, mu, W, pk, bias, N, K);
    /* GELU waits for the residual plane's product and the outlier columns' (the side pass, or the GELU rows
     * after the second plane); with neither, the kernel fuses it */
    const int gelu = epi == MACT_EPI_GELU_TANH, later = gelu && (n_out || pk->lo);
    kc->ops->gemm_i8(kc, y, ldy, xs, K, pk, cb, M, later ? MACT_EPI_NONE : epi);
    if (pk->lo) kc->ops->gemm_i8(kc, y, ldy, xs, K, pk->lo, NULL, M, MACT_EPI_RESIDUAL);
    if (n_out) side_pass(kc, y, ldy, xo, idx, n_out, pk, M, N, epi);
    else if (later) gelu_rows(kc, y, ldy, M, N);
    return 1;
}

int mact_i8_split_gemm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                       const mact_packed *pk, const float *bias, int64_t M, int64_t N, int64_t K, int epi)
{
    float *buf = mact_kctx_buf(kc, 0, 2, mact_i8_split_scratch(M, N, K));
    if (!buf) return 0;  /* out of memory: the plain int8 path */
    if (pk->centre) return centred_gemm(kc, y, ldy, x, ldx, W, pk, bias, M, N, K, epi, buf);
    float *xs = buf, *colmax = xs + M * K, *tmp = colmax + K, *xo = tmp + K;
    int32_t idx[MACT_I8_MAX_OUTLIERS];
    const int n_out = mact_i8_find_outliers(kc, x, ldx, M, K, colmax, tmp, idx, mact_i8_split_cap(K));
    if (!n_out) return 0;
    for (int64_t m = 0; m < M; m++) {
        memcpy(xs + m * K, x + m * ldx, (size_t)K * sizeof *xs);
        for (int o = 0; o < n_out; o++) {
            xo[m * n_out + o] = xs[m * K + idx[o]];
            xs[m * K + idx[o]] = 0.f;
        }
    }
    /* GELU is not linear: the int8 part lands without it and the side pass applies it to the sum */
    kc->ops->gemm_i8(kc, y, ldy, xs, K, pk, bias, M, epi == MACT_EPI_GELU_TANH ? MACT_EPI_NONE : epi);
    side_pass(kc, y, ldy, xo, idx, n_out, pk, M, N, epi);
    return 1;
}
