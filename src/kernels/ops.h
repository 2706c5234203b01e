/* The ops table: what a kernel backend implements, one table per level, in three backends: kernels/ref/ref.c
 * (plain C, every op), kernels/x86/ops.c (AVX2, AVX-512, AVX-512 BF16; the int8 GEMM where VNNI is) and
 * kernels/arm/ops.c (NEON, + fp16 + dotprod, + i8mm + bf16). The dispatch in kernels/kernels.c splits work over the
 * context's pool and calls these; an entry left NULL falls back to the plain-C reference, so a new backend can start
 * from the reference and replace one op at a time. Every op of every level has the reference as its twin in
 * tests/c/test_kernels.c. */
#ifndef MACT_KERNELS_OPS_H
#define MACT_KERNELS_OPS_H
#include "kernels/kernels.h"

/* One attention call as its pool tasks see it (shared by the reference, x86 and ARM attention paths). */
typedef struct {
    float *out, *scratch;
    const float *q, *k, *v, *bias;
    const uint8_t *key_ok;
    int64_t out_ld, q_ld, kv_ld, nq, nk;
    int n_heads, n_kv, hd;
    float scale;
    const uint32_t *kvp;  /* packed K/V (the bf16 path's kv_pack) or NULL: k and v */
} mact_att_job;

struct mact_ops {
    const char *name;
    int kernels;  /* MACT_KERNELS_* */
    int isa;      /* MACT_ISA_* */
    int has_bf16; /* bf16 dot products: BF16 precision computes in bf16 */
    /* row-major matmul over output rows [n0, n1) of W (stored dtype dt), every one of the M rows */
    void (*mm_rows)(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                    int64_t M, int64_t n0, int64_t n1, int64_t K, int epi);
    void (*layernorm_row)(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim);
    void (*rmsnorm_row)(float *y, const float *x, const float *w, float eps, int64_t dim);
    void (*gelu)(float *x, int64_t n);
    void (*silu_mul)(float *y, const float *gate, const float *val, int64_t n);
    void (*modulate_rows)(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
    void (*gated_add_rows)(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);
    /* attention over a whole call (NULL: the reference loop); returns 0 when it declines these sizes */
    int (*attention)(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                     const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd,
                     float scale, const float *bias, const uint8_t *key_ok, float *scratch);
    /* bf16 attention with K/V packed once (NULL: none; then mact_attention_packable is 0) */
    void (*kv_pack)(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv, int hd);
    void (*attention_bf16)(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                           const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                           int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                           const uint32_t *kvp);
    /* packing (NULL: this backend reads weights row-major only) */
    int (*pack_plan)(int dtype, int64_t N, int64_t K, int prec, int quant, int *fmt, size_t *bytes);
    mact_packed (*pack_describe)(const void *buf, int dtype, int64_t N, int64_t K, int fmt);
    void (*pack_fill)(mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K, int fmt);
    /* GEMMs on the backend's packs */
    void (*gemm_packed)(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                        const float *bias, int64_t M, int epi, int use_bf16);
    void (*gemm_i8)(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                    const float *bias, int64_t M, int epi);
    /* one panel of an int8 pack times a vector, unscaled: out[c] = sum over k of x[k] W8[64 p + c, k], x zero-padded
     * to Kp * 4 (the centred GEMM's mu W^T from the two weight planes, kernels/i8_split.c; NULL: the reference) */
    void (*dot_panel_i8)(float *out, const float *x, const mact_packed *pk, int64_t p);
    /* instruction peaks for the bench (NULL: 0) */
    double (*peak_gflops)(int use_bf16, int threads);
    double (*peak_gops_i8)(int threads);
};

/* kernels/pack_i8.c: the int8 weight quantiser of every backend's MACT_PACK_I8 pack: panel p of W[N, K] (stored
 * dtype) into dst (Kq quad rows of 256 bytes per panel), scale and colsum (64 per panel); a channel with a NaN
 * or an infinity gets zeros and a NaN scale. resid: the residual plane of a two-plane weight (MACT_PACK_I8R) */
void mact_pack_panel_i8(int8_t *dst, float *scale, int32_t *colsum, const void *w, int dtype, int64_t N, int64_t K,
                        int64_t Kq, int64_t p, int resid);

/* kernels/peak.c: body(iters) on `threads` plain threads, best of 3, in G ops/s for ops_per_iter per iteration
 * (the bench's instruction peaks of every backend) */
double mact_peak_best_of_3(double (*body)(long iters), long iters, double ops_per_iter, int threads);

/* kernels/ref/ref.c */
extern const mact_ops mact_ops_ref;
void mact_ref_mm_rows(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K, int epi);
void mact_ref_layernorm_row(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim);
void mact_ref_rmsnorm_row(float *y, const float *x, const float *w, float eps, int64_t dim);
void mact_ref_gelu(float *x, int64_t n);
void mact_ref_silu_mul(float *y, const float *gate, const float *val, int64_t n);
void mact_ref_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
void mact_ref_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);
void mact_ref_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p);
/* the GELU-tanh of one value and one epilogue store, shared by the reference and the x86 row-major paths */
float mact_ref_gelu1(float v);
static inline void mact_epi_store(float *dst, float s, float b, int epi)
{
    float v = s + b;
    if (epi == MACT_EPI_GELU_TANH) v = mact_ref_gelu1(v);
    if (epi == MACT_EPI_RESIDUAL) v = *dst + v;
    *dst = v;
}

/* MACT_X86: the build has the x86 kernels (the Makefile defines it on x86-64 hosts) */
#ifndef MACT_X86
#define MACT_X86 0
#endif
/* kernels/x86/ops.c (x86-64 builds only): the best x86 table for this CPU up to a level, or NULL */
const mact_ops *mact_ops_x86(int max_isa);

/* MACT_ARM: the build has the ARM64 NEON kernels (the Makefile defines it when the compiler targets aarch64).
 * Their levels reuse the MACT_ISA_* numbers above 0 (a build has one family): */
#ifndef MACT_ARM
#define MACT_ARM 0
#endif
enum {
    MACT_ISA_NEON = 1,          /* Advanced SIMD */
    MACT_ISA_NEON_DOTPROD = 2,  /* + fp16 arithmetic + dotprod (Armv8.2: Cortex-A78, Neoverse N1) */
    MACT_ISA_NEON_I8MM = 3,     /* + i8mm + bf16 (Armv8.6) */
};
/* kernels/arm/ops.c (aarch64 builds only): the best ARM table for this CPU up to a level, or NULL */
const mact_ops *mact_ops_arm(int max_isa);

#endif
