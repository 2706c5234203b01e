/* The plain-C reference kernels: every op in portable C11, the twin every faster kernel is tested against
 * and the whole of the MACT_KERNELS_REF backend (fp32 arithmetic throughout, weights read row-major in
 * their stored dtype, nothing packed).
 *
 * Matmul: each output element is one dot product with four accumulators (independent chains for the
 * compiler) whose summation order depends only on K, never on the thread count. Norm statistics accumulate
 * in double: hidden rows reach 1e4 in magnitude (docs/parity.md, "Massive activations"). */
#include <math.h>
#include "mact.h"
#include "kernels/ops.h"

float mact_ref_gelu1(float v)
{
    const float c = 0.7978845608028654f;  /* sqrt(2/pi) */
    return 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
}

void mact_ref_mm_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi)
{
    for (int64_t n = n0; n < n1; n++)
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * ldx;
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            int64_t k = 0, base = n * K;
            for (; k + 4 <= K; k += 4) {
                a0 += xr[k] * mact_load_f32(w, dt, base + k);
                a1 += xr[k + 1] * mact_load_f32(w, dt, base + k + 1);
                a2 += xr[k + 2] * mact_load_f32(w, dt, base + k + 2);
                a3 += xr[k + 3] * mact_load_f32(w, dt, base + k + 3);
            }
            for (; k < K; k++) a0 += xr[k] * mact_load_f32(w, dt, base + k);
            mact_epi_store(&y[m * ldy + n], (a0 + a1) + (a2 + a3), bias ? bias[n] : 0.f, epi);
        }
}

void mact_ref_layernorm_row(float *yr, const float *xr, const float *w, const float *b, float eps, int64_t dim)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < dim; i++) s += xr[i];
    double mean = s / dim;
    for (int64_t i = 0; i < dim; i++) { double d = xr[i] - mean; s2 += d * d; }
    float inv = (float)(1.0 / sqrt(s2 / dim + eps));
    float mf = (float)mean;
    for (int64_t i = 0; i < dim; i++) yr[i] = (xr[i] - mf) * inv * w[i] + b[i];
}

void mact_ref_rmsnorm_row(float *yr, const float *xr, const float *w, float eps, int64_t dim)
{
    double s2 = 0;
    for (int64_t i = 0; i < dim; i++) s2 += (double)xr[i] * xr[i];
    float inv = (float)(1.0 / sqrt(s2 / dim + eps));
    if (w) for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv * w[i];
    else for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv;
}

void mact_ref_gelu(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = mact_ref_gelu1(x[i]);
}

float mact_silu(float x) { return x / (1.f + expf(-x)); }

void mact_ref_silu_mul(float *y, const float *gate, const float *val, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = mact_silu(gate[i]) * val[i];
}

void mact_ref_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < dim; d++) y[r * dim + d] = y[r * dim + d] * (1.f + scale[d]) + shift[d];
}

void mact_ref_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < dim; d++) z[r * dim + d] += gate[d] * y[r * dim + d];
}

void mact_ref_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p)
{
    const int8_t *w = (const int8_t *)pk->data + p * pk->Kp * 256;
    for (int c = 0; c < MACT_PANEL; c++) {
        float s = 0.f;
        for (int64_t kq = 0; kq < pk->Kp; kq++)
            for (int i = 0; i < 4; i++) s += x[4 * kq + i] * (float)w[kq * 256 + 4 * c + i];
        out[c] = s;
    }
}

const mact_ops mact_ops_ref = {
    .name = "ref",
    .kernels = MACT_KERNELS_REF,
    .isa = MACT_ISA_SCALAR,  /* every op NULL: the dispatch runs the mact_ref_* functions above */
};
