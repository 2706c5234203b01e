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
 * int8 path is unchanged bit for bit). */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"
#include "kernels/ops.h"

int mact_i8_split_cap(int64_t K)
{
    const int64_t c = K / 32;
    return (int)(c < 1 ? 1 : c > MACT_I8_MAX_OUTLIERS ? MACT_I8_MAX_OUTLIERS : c);
}

size_t mact_i8_split_scratch(int64_t M, int64_t K)
{
    /* the x copy, the column maxima and their selection copy, the outlier columns of x */
    return ((size_t)M * (size_t)K + 2 * (size_t)K + (size_t)M * MACT_I8_MAX_OUTLIERS) * sizeof(float) + 256;
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
    float *colmax;
    float probe[MACT_I8_SCAN_TASKS];
} scan_job;

/* the column maxima of one block of columns over every row, and x * 0 summed there: NaN exactly when some
 * value is not finite */
static void scan_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    scan_job *j = arg;
    const int64_t per = (j->K + MACT_I8_SCAN_TASKS - 1) / MACT_I8_SCAN_TASKS, k0 = b * per,
                  k1 = k0 + per < j->K ? k0 + per : j->K;
    float *cm = j->colmax, probe = 0.f;
    for (int64_t k = k0; k < k1; k++) cm[k] = 0.f;
    for (int64_t m = 0; m < j->M; m++) {
        const float *r = j->x + m * j->ldx;
        for (int64_t k = k0; k < k1; k++) {
            const float a = fabsf(r[k]);
            cm[k] = a > cm[k] ? a : cm[k];
            probe += 0.f * r[k];
        }
    }
    j->probe[b] = probe;
}

int mact_i8_find_outliers(const mact_kctx *kc, const float *x, int64_t ldx, int64_t M, int64_t K, float *colmax,
                          float *tmp, int32_t *idx, int cap)
{
#ifdef MACT_I8_NO_SPLIT  /* a build for measuring the split's effect (docs/parity.md), never the default */
    return 0;
#endif
    if (M <= 0 || K < 2 * MACT_I8_OUTLIER_MIN_K) return 0;
    scan_job sj = {x, ldx, M, K, colmax, {0}};
    if (kc) mact_kctx_run(kc, MACT_I8_SCAN_TASKS, M * K > 65536, scan_task, &sj);
    else for (int b = 0; b < MACT_I8_SCAN_TASKS; b++) scan_task(&sj, b, 0);
    for (int b = 0; b < MACT_I8_SCAN_TASKS; b++)
        if (sj.probe[b] != 0.f) return 0;  /* a non-finite input keeps the plain path (and its NaN outputs) */
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

typedef struct {
    float *y;
    int64_t ldy, M, N, K;
    const float *xo;   /* [M, n_out] the outlier columns of x */
    const int32_t *idx;
    int n_out, epi;
    const mact_tensor *W;
} side_job;

/* one block of 64 output columns: y[:, n0:n1] += xo . W[n0:n1, idx]^T (then the epilogue, for GELU) */
static void side_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    const side_job *j = arg;
    const int64_t n0 = b * 64, nb = j->N - n0 < 64 ? j->N - n0 : 64;
    float wb[MACT_I8_MAX_OUTLIERS][64];
    for (int o = 0; o < j->n_out; o++)
        for (int64_t c = 0; c < nb; c++) wb[o][c] = mact_load_f32(j->W->data, j->W->dtype, (n0 + c) * j->K + j->idx[o]);
    for (int64_t m = 0; m < j->M; m++) {
        float acc[64] = {0};
        const float *xr = j->xo + m * j->n_out;
        for (int o = 0; o < j->n_out; o++) {
            const float a = xr[o];
            for (int64_t c = 0; c < nb; c++) acc[c] += a * wb[o][c];
        }
        float *yr = j->y + m * j->ldy + n0;
        if (j->epi == MACT_EPI_GELU_TANH)
            for (int64_t c = 0; c < nb; c++) yr[c] = mact_ref_gelu1(yr[c] + acc[c]);
        else
            for (int64_t c = 0; c < nb; c++) yr[c] += acc[c];
    }
}

int mact_i8_split_gemm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                       const mact_packed *pk, const float *bias, int64_t M, int64_t N, int64_t K, int epi)
{
    const int cap = mact_i8_split_cap(K);
    float *buf = mact_kctx_buf(kc, 0, 2, mact_i8_split_scratch(M, K));
    if (!buf) return 0;  /* out of memory: the plain int8 path */
    float *xs = buf, *colmax = xs + M * K, *tmp = colmax + K, *xo = tmp + K;
    int32_t idx[MACT_I8_MAX_OUTLIERS];
    const int n_out = mact_i8_find_outliers(kc, x, ldx, M, K, colmax, tmp, idx, cap);
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
    side_job j = {y, ldy, M, N, K, xo, idx, n_out, epi, W};
    mact_kctx_run(kc, (N + 63) / 64, M * N * n_out > 200000, side_task, &j);
    return 1;
}
