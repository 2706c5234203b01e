/* The ARM64 NEON backend (kernels/arm/; aarch64 builds only, MACT_ARM): the CPU probe and the kernels its
 * ops tables (ops.c) point at. Every function here has the plain-C reference (kernels/ref/ref.c) as its twin
 * in tests/c/test_kernels.c. */
#ifndef MACT_KERNELS_ARM_H
#define MACT_KERNELS_ARM_H
#include "kernels/ops.h"

/* features from getauxval(AT_HWCAP / AT_HWCAP2), probed once */
enum {
    MACT_ARM_ASIMD = 1,    /* Advanced SIMD (every Armv8-A Linux system) */
    MACT_ARM_FP16 = 2,     /* fphp + asimdhp: half-precision arithmetic (Armv8.2) */
    MACT_ARM_DOTPROD = 4,  /* asimddp: SDOT / UDOT (Armv8.2 optional, Armv8.4) */
    MACT_ARM_I8MM = 8,     /* SMMLA / USDOT (Armv8.6) */
    MACT_ARM_BF16 = 16,    /* BFDOT / BFMMLA (Armv8.6) */
};
int mact_arm_features(void);

/* row-major matmul rows (rowmajor.c): F32, BF16 and F16 weights widened to fp32 in registers, fp32 FMLA */
void mact_arm_mm_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi);
/* rows and activations (vec.c) */
void mact_arm_layernorm_row(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim);
void mact_arm_rmsnorm_row(float *y, const float *x, const float *w, float eps, int64_t dim);
void mact_arm_gelu(float *x, int64_t n);
void mact_arm_silu_mul(float *y, const float *gate, const float *val, int64_t n);
void mact_arm_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
void mact_arm_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);
/* attention (attention.c): blocked fp32 (per block of 8 query rows: scores over every key, softmax rows, p v);
 * 0 (declined: the plain-C loop runs) when hd > 128 or under 8 keys or 64 scores */
int mact_arm_attention(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                       const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd,
                       float scale, const float *bias, const uint8_t *key_ok, float *scratch);
/* a score row in place -> softmax numerators, zero past nk up to nkp: returns 1 / sum, 0 (row zeroed) when no key
 * is visible, NaN (row NaN) when a visible score is NaN (attention.c) */
float mact_arm_softmax_row(float *s, int64_t nk, int64_t nkp, float scale, const float *brow, const uint8_t *key_ok);
/* bf16 attention (attention_bf16.c; bf16 CPUs): q k^T and p v as BFDOT products, K / V packed in x86's layout */
void mact_arm_attention_bf16(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                             const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                             int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                             const uint32_t *kvp);
void mact_arm_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv, int hd);
/* the bench's instruction peaks over threads (timed by mact_peak_best_of_3, kernels/peak.c): fp32 FMLA in
 * GFLOP/s (peak.c), SDOT / SMMLA in GOP/s (gemm_i8.c, gemm_i8mm.c) */
double mact_arm_peak_gflops(int use_bf16, int threads);
double mact_arm_peak_gops_i8(int threads);
double mact_arm_peak_gops_i8mm(int threads); /* SMMLA (gemm_i8mm.c) */

/* the ARM packed layouts (pack.c): MACT_PACK_I8 panels for INT8 precision (mact_arm_pack_plan: the levels
 * without bf16 arithmetic), plus MACT_PACK_BF16Q panels for BF16 precision and INT8's vision weights on the
 * bf16 level (mact_arm_pack_plan_bf16) */
int mact_arm_pack_plan(int dtype, int64_t N, int64_t K, int precision, int quant, int *fmt, size_t *bytes);
int mact_arm_pack_plan_bf16(int dtype, int64_t N, int64_t K, int precision, int quant, int *fmt, size_t *bytes);
mact_packed mact_arm_pack_describe(const void *buf, int dtype, int64_t N, int64_t K, int fmt);
void mact_arm_pack_fill(mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K, int fmt);
/* the int8 GEMMs: SDOT (gemm_i8.c; dotprod CPUs) and SMMLA (gemm_i8mm.c; i8mm CPUs) */
void mact_arm_gemm_i8(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                      const float *bias, int64_t M, int epi);
void mact_arm_gemm_i8mm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const mact_packed *pk, const float *bias, int64_t M, int epi);
/* one int8 panel times a zero-padded vector, unscaled (the ops table's dot_panel_i8; gemm_i8.c) */
void mact_arm_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p);
/* the bf16 GEMM with BFMMLA on MACT_PACK_BF16Q panels (gemm_bf16.c; bf16 CPUs), and the bf16 level's
 * instruction peak (BFMMLA when use_bf16, else fp32 FMLA) */
void mact_arm_gemm_bf16(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                        const mact_packed *pk, const float *bias, int64_t M, int epi, int use_bf16);
double mact_arm_peak_gflops_bf16(int use_bf16, int threads);
/* what both int8 GEMMs share: x quantized once (rows lda bytes apart, q - 128, zero past K), one panel task each */
typedef struct {
    float *y;
    int64_t ldy, M, N, Kq, lda;
    const int8_t *A;      /* [M][lda] quantized rows */
    const float *rs;      /* [M] row scales */
    const int32_t *rz;    /* [M] row zero points */
    const mact_packed *pk;
    const float *bias;
    int epi;
} mact_arm_i8_job;
/* quantizes x (row stride rounded up to kq_multiple quads) and runs panel(job, p, tid) for every panel */
void mact_arm_gemm_i8_run(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                          const mact_packed *pk, const float *bias, int64_t M, int epi, int kq_multiple,
                          mact_task_fn panel);
/* y[m, n] from acc = sum_k (q - 128) W8: the x86 int8 mode's rescale, then the epilogue */
static inline void mact_arm_i8_store(const mact_arm_i8_job *j, int64_t m, int64_t n, int32_t acc)
{
    const int32_t cs = j->pk->colsum[n];
    const int32_t acc_u = acc + 128 * cs; /* sum_k q W8, exact */
    const float v = (float)(acc_u - j->rz[m] * cs) * (j->rs[m] * j->pk->scale[n]);
    mact_epi_store(&j->y[m * j->ldy + n], v, j->bias ? j->bias[n] : 0.f, j->epi);
}

#endif
