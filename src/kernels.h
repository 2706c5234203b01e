/* Numeric kernels used by the stages. Every weight matrix goes through mact_matmul, which takes the
 * weight in its stored dtype, so faster kernels replace the bodies here without touching stage code. */
#ifndef MACT_KERNELS_H
#define MACT_KERNELS_H
#include <stdint.h>
#include "mact_internal.h"

/* Which code path mact_matmul uses; picked once from the CPU's features, overridable for tests. */
enum { MACT_ISA_SCALAR = 0, MACT_ISA_AVX2, MACT_ISA_AVX512 };
int mact_isa_detect(void);
int mact_isa_get(void);
void mact_isa_set(int isa);
const char *mact_isa_name(int isa);

/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]); x rows are ldx apart, y rows ldy apart. */
void mact_matmul_ex(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W, const float *bias,
                    int64_t M, int64_t N, int64_t K);
static inline void mact_matmul(float *y, const float *x, const mact_tensor *W, const float *bias, int64_t M)
{
    mact_matmul_ex(y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1]);
}
/* Same on a raw row-major weight of any supported dtype. */
void mact_matmul_raw(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dtype, const float *bias,
                     int64_t M, int64_t N, int64_t K);

/* One row of a weight (e.g. an embedding) converted to F32. */
void mact_row_f32(float *dst, const mact_tensor *W, int64_t row);

void mact_layernorm(float *y, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t dim);
/* w may be NULL (non-affine). y may alias x. */
void mact_rmsnorm(float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim, int64_t ldx);
void mact_gelu_tanh(float *x, int64_t n);
float mact_silu(float x);

/* Multi-head attention, softmax in fp32.
 * q [nq, q_ld] with head h at column h*hd; k, v [nk, kv_ld] with kv head g at g*hd; heads share kv head
 * h / (n_heads / n_kv). bias [nq, nk] (added, may be NULL); key_ok [nk] (0 masks the key, may be NULL).
 * out [nq, out_ld]. scratch: mact_attention_scratch(nk) floats per thread. */
void mact_attention(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                    int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch);
int64_t mact_attention_scratch(int64_t nk);

/* NeoX rotate-half RoPE on x [n, ld] heads of hd at head*hd, position p of row = pos[row]. */
void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t);
/* cos/sin tables [n, hd/2] for positions 0..n-1 and base theta (angles in double, rounded once). */
void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta);

int mact_threads(void);

#endif
