/* Kernel dispatch: every op splits its work over the context's pool and runs the context's ops (ops.h),
 * falling back to the plain-C reference for an op a backend leaves out. Also the reference attention loop
 * and RoPE (plain C on every backend). */
#include <math.h>
#include <float.h>
#include <string.h>
#include "kernels/kernels.h"
#include "kernels/ops.h"

/* an op of the context's table, or its plain-C reference where the backend leaves it out (NULL) */
#define OP(ops, f) ((ops)->f ? (ops)->f : mact_ref_##f)

void mact_row_f32(float *dst, const mact_tensor *W, int64_t row)
{
    int64_t K = W->shape[W->ndim - 1];
    for (int64_t k = 0; k < K; k++) dst[k] = mact_load_f32(W->data, W->dtype, row * K + k);
}

/* ---- matmul ---- */

void mact_matmul_epi(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                     const float *bias, int64_t M, int64_t N, int64_t K, int epi)
{
    if (M <= 0 || N <= 0) return;
    const mact_ops *ops = kc->ops;
    const mact_packed *pk = W->pk;
    if (pk && pk->N == N && pk->K == K && K > 0) {
        /* an int8 pack only in INT8 precision; a rounded bf16 pack never in the exact FP32 mode */
        if (pk->fmt == MACT_PACK_I8) {
            if (kc->prec == MACT_PRECISION_INT8 && ops->gemm_i8) {
                if (!mact_i8_split_gemm(kc, y, ldy, x, ldx, W, pk, bias, M, N, K, epi))
                    ops->gemm_i8(kc, y, ldy, x, ldx, pk, bias, M, epi);
                return;
            }
        } else if (ops->gemm_packed && (kc->prec != MACT_PRECISION_FP32 || pk->exact)) {
            ops->gemm_packed(kc, y, ldy, x, ldx, pk, bias, M, epi, kc->prec != MACT_PRECISION_FP32 && ops->has_bf16);
            return;
        }
    }
    if (K <= 0) {  /* empty dot products */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) mact_epi_store(&y[m * ldy + n], 0.f, bias ? bias[n] : 0.f, epi);
        return;
    }
    mact_matmul_rowmajor(kc, y, ldy, x, ldx, W->data, W->dtype, bias, M, N, K, epi);
}

/* ---- norms and activations ---- */

typedef struct {
    float *y;
    const float *x, *w, *b;
    float eps;
    int64_t rows, dim, ld;
    const mact_ops *ops;
} norm_job;

#define NORM_ROWS 8  /* rows per task */

static void layernorm_task(void *arg, int64_t c, int tid)
{
    (void)tid;
    const norm_job *j = arg;
    for (int64_t r = c * NORM_ROWS; r < j->rows && r < (c + 1) * NORM_ROWS; r++)
        OP(j->ops, layernorm_row)(j->y + r * j->dim, j->x + r * j->dim, j->w, j->b, j->eps, j->dim);
}

void mact_layernorm(const mact_kctx *kc, float *y, const float *x, const float *w, const float *b, float eps,
                    int64_t rows, int64_t dim)
{
    norm_job j = {y, x, w, b, eps, rows, dim, dim, kc->ops};
    mact_kctx_run(kc, (rows + NORM_ROWS - 1) / NORM_ROWS, rows * dim > 65536, layernorm_task, &j);
}

static void rmsnorm_task(void *arg, int64_t c, int tid)
{
    (void)tid;
    const norm_job *j = arg;
    for (int64_t r = c * NORM_ROWS; r < j->rows && r < (c + 1) * NORM_ROWS; r++)
        OP(j->ops, rmsnorm_row)(j->y + r * j->ld, j->x + r * j->ld, j->w, j->eps, j->dim);
}

void mact_rmsnorm(const mact_kctx *kc, float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim,
                  int64_t ldx)
{
    norm_job j = {y, x, w, NULL, eps, rows, dim, ldx, kc->ops};
    mact_kctx_run(kc, (rows + NORM_ROWS - 1) / NORM_ROWS, rows * dim > 65536, rmsnorm_task, &j);
}

typedef struct {
    float *y;
    const float *a, *b;
    int64_t n, ldy, ld;
    const mact_ops *ops;
} elt_job;

#define ELT_CHUNK 16384

static void gelu_task(void *arg, int64_t c, int tid)
{
    (void)tid;
    const elt_job *j = arg;
    int64_t a = c * ELT_CHUNK, len = j->n - a < ELT_CHUNK ? j->n - a : ELT_CHUNK;
    OP(j->ops, gelu)(j->y + a, len);
}

void mact_gelu_tanh(const mact_kctx *kc, float *x, int64_t n)
{
    elt_job j = {x, NULL, NULL, n, 0, 0, kc->ops};
    mact_kctx_run(kc, (n + ELT_CHUNK - 1) / ELT_CHUNK, n > 65536, gelu_task, &j);
}

static void silu_mul_task(void *arg, int64_t c, int tid)
{
    (void)tid;
    const elt_job *j = arg;
    int64_t a = c * ELT_CHUNK, len = j->n - a < ELT_CHUNK ? j->n - a : ELT_CHUNK;
    OP(j->ops, silu_mul)(j->y + a, j->a + a, j->b + a, len);
}

void mact_silu_mul(const mact_kctx *kc, float *y, const float *gate, const float *val, int64_t n)
{
    elt_job j = {y, gate, val, n, 0, 0, kc->ops};
    mact_kctx_run(kc, (n + ELT_CHUNK - 1) / ELT_CHUNK, n > 65536, silu_mul_task, &j);
}

static void silu_mul_rows_task(void *arg, int64_t r, int tid)
{
    (void)tid;
    const elt_job *j = arg;
    OP(j->ops, silu_mul)(j->y + r * j->ldy, j->a + r * j->ld, j->b + r * j->ld, j->n);
}

void mact_silu_mul_rows(const mact_kctx *kc, float *y, int64_t ldy, const float *gate, const float *val, int64_t ldg,
                        int64_t rows, int64_t n)
{
    elt_job j = {y, gate, val, n, ldy, ldg, kc->ops};
    mact_kctx_run(kc, rows, rows * n > 65536, silu_mul_rows_task, &j);
}

void mact_add_inplace(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void mact_modulate_rows(const mact_kctx *kc, float *y, int64_t rows, int64_t dim, const float *shift,
                        const float *scale)
{
    OP(kc->ops, modulate_rows)(y, rows, dim, shift, scale);
}

void mact_gated_add_rows(const mact_kctx *kc, float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    OP(kc->ops, gated_add_rows)(z, y, gate, rows, dim);
}

/* ---- attention ---- */

/* Per thread: the plain-C path needs nk + 16; the AVX-512 paths a transposed K head (hd <= 128 floats, or
 * hd / 2 bf16 pairs) plus, for bf16, the V head as key pairs, a block of 8 query rows of scores and their
 * bf16 copy, each over nk rounded up to 16. */
int64_t mact_attention_scratch(int64_t nk)
{
    int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (128 + 16) * nkp + 1024;
}

typedef mact_att_job att_job;

/* one (head, query row) */
static void attention_ref_task(void *arg, int64_t t, int tid)
{
    const att_job *j = arg;
    const int h = (int)(t / j->nq), group = j->n_heads / j->n_kv, hd = j->hd;
    const int64_t i = t % j->nq, nk = j->nk;
    float *s = j->scratch + tid * mact_attention_scratch(nk);
    const float *qi = j->q + i * j->q_ld + (int64_t)h * hd;
    const int64_t koff = (int64_t)(h / group) * hd;
    float mx = -INFINITY;
    int nan = 0;
    for (int64_t jj = 0; jj < nk; jj++) {
        if (j->key_ok && !j->key_ok[jj]) { s[jj] = -INFINITY; continue; }
        const float *kj = j->k + jj * j->kv_ld + koff;
        float d = 0;
        for (int t2 = 0; t2 < hd; t2++) d += qi[t2] * kj[t2];
        d = d * j->scale + (j->bias ? j->bias[i * nk + jj] : 0.f);
        s[jj] = d;
        nan |= d != d;
        if (d > mx) mx = d;
    }
    float *o = j->out + i * j->out_ld + (int64_t)h * hd;
    for (int t2 = 0; t2 < hd; t2++) o[t2] = nan ? NAN : 0.f;
    /* a NaN score poisons its row (a comparison-based max would skip it and hide the fault); no visible key
     * gives zeros, as a fully masked row must not NaN */
    if (nan || mx == -INFINITY) return;
    double sum = 0;
    for (int64_t jj = 0; jj < nk; jj++) {
        float e = s[jj] == -INFINITY ? 0.f : expf(s[jj] - mx);
        s[jj] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t jj = 0; jj < nk; jj++) {
        if (s[jj] == 0.f) continue;
        const float *vj = j->v + jj * j->kv_ld + koff;
        float p = s[jj] * inv;
        for (int t2 = 0; t2 < hd; t2++) o[t2] += p * vj[t2];
    }
}

int mact_attention_packable(const mact_kctx *kc, int64_t nq, int64_t nk, int hd)
{
    return kc->ops->attention_bf16 && kc->prec != MACT_PRECISION_FP32 && hd <= 128 && hd >= 2 && !(hd & 1) && nk >= 8 &&
           nq * nk >= 64;
}

void mact_attention(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                    const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch)
{
    if (mact_attention_packable(kc, nq, nk, hd)) {
        kc->ops->attention_bf16(kc, out, out_ld, q, q_ld, k, v, kv_ld, nq, nk, n_heads, n_kv, hd, scale, bias, key_ok,
                                scratch, NULL);
        return;
    }
    /* the blocked paths pay off from a few query rows and keys on; tiny problems (pooling windows) stay on the
     * plain loop */
    if (kc->ops->attention && kc->ops->attention(kc, out, out_ld, q, q_ld, k, v, kv_ld, nq, nk, n_heads, n_kv, hd,
                                                 scale, bias, key_ok, scratch))
        return;
    att_job j = {out, scratch, q, k, v, bias, key_ok, out_ld, q_ld, kv_ld, nq, nk, n_heads, n_kv, hd, scale, NULL};
    mact_kctx_run(kc, (int64_t)n_heads * nq, nq * nk * n_heads > 4096, attention_ref_task, &j);
}

int64_t mact_attention_kv_packed_size(int64_t nk, int n_kv, int hd)
{
    const int64_t nkp = (nk + 15) & ~(int64_t)15;
    return (int64_t)n_kv * ((int64_t)(hd / 2) * nkp + nkp / 2 * hd);
}

void mact_attention_kv_pack(const mact_kctx *kc, uint32_t *dst, const float *k, const float *v, int64_t kv_ld,
                            int64_t nk, int n_kv, int hd)
{
    kc->ops->kv_pack(dst, k, v, kv_ld, nk, n_kv, hd);
}

void mact_attention_packed(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                           const uint32_t *kv, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                           const float *bias, const uint8_t *key_ok, float *scratch)
{
    kc->ops->attention_bf16(kc, out, out_ld, q, q_ld, NULL, NULL, 0, nq, nk, n_heads, n_kv, hd, scale, bias, key_ok,
                            scratch, kv);
}

/* ---- RoPE ---- */

void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        /* HF computes inv_freq = 1 / theta^(2i/hd) and the angle pos * inv_freq in fp32; mirror it so
         * the rounding of large angles matches the reference. */
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
        for (int64_t p = 0; p < n; p++) {
            float a = (float)p * inv;
            cos_t[p * half + i] = cosf(a);
            sin_t[p * half + i] = sinf(a);
        }
    }
}

/* GCC's default -O2 cost model vectorises no loop that needs a run-time alias check or a scalar tail, which this
 * one needs (hd is a run-time value, x and the tables are separate arrays the compiler cannot prove apart); the
 * dynamic model vectorises it with SSE/AVX or NEON. Each output is still a*c - b*s with both products rounded
 * (no contraction in ISO C mode), so every build gives the same bits. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("vect-cost-model=dynamic")))
#endif
void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t)
{
    int half = hd / 2;
    for (int64_t p = 0; p < n; p++)
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + p * ld + (int64_t)h * hd;
            const float *c = cos_t + p * half, *s = sin_t + p * half;
            for (int i = 0; i < half; i++) {
                float a = xh[i], b = xh[i + half];
                xh[i] = a * c[i] - b * s[i];
                xh[i + half] = b * c[i] + a * s[i];
            }
        }
}

