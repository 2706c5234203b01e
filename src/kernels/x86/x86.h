/* Declarations shared by the x86 kernel files (x86-64 builds only; every function carries target attributes
 * and is reached through the ops tables of kernels/x86/ops.c after run-time CPU detection). */
#ifndef MACT_KERNELS_X86_H
#define MACT_KERNELS_X86_H
#include "kernels/ops.h"

/* The kernel files' target attributes: TF the AVX-512 levels' (FMA, F16C), TB with the bf16 dot products on
 * top (reached only at MACT_ISA_AVX512BF16); INL forces a helper into its caller (one instance per tile shape
 * keeps its accumulators in registers). */
#define TF __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define TB __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512bf16")))
#define INL inline __attribute__((always_inline))

/* CPU features, probed once (the only process-wide state of the library: read-only after the probe) */
int mact_x86_has_avx2(void);
int mact_x86_has_avx512(void);
int mact_x86_has_avx512bf16(void);
int mact_x86_has_vnni(void);

void mact_x86_mm_rows_avx2(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt,
                           const float *bias, int64_t M, int64_t n0, int64_t n1, int64_t K, int epi);
void mact_x86_mm_rows_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt,
                             const float *bias, int64_t M, int64_t n0, int64_t n1, int64_t K, int epi);

/* pack.c: the x86 packed layouts (kernels.h, mact_packed) */
int mact_x86_pack_plan(int dtype, int64_t N, int64_t K, int prec, int quant, int *fmt, size_t *bytes);
mact_packed mact_x86_pack_describe(const void *buf, int dtype, int64_t N, int64_t K, int fmt);
void mact_x86_pack_fill(mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K, int fmt);

/* the packed fp32 / bf16 GEMM (gemm_avx512.c) */
void mact_x86_gemm_packed(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                          const mact_packed *pk, const float *bias, int64_t M, int epi, int use_bf16);
/* attention (attention.c): blocked fp32; 0 (declined: the plain-C loop runs) when hd > 128 or under 8 keys or
 * 64 scores */
int mact_x86_attention_avx512(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                              const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                              int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok,
                              float *scratch);
/* a score row in place -> softmax numerators, zero past nk up to nkp: returns 1 / sum, 0 (row zeroed) when no key
 * is visible, NaN (row NaN) when a visible score is NaN (attention.c) */
float mact_x86_softmax_row(float *s, int64_t nk, int64_t nkp, float scale, const float *brow, const uint8_t *key_ok);
/* bf16 attention (attention_bf16.c; MACT_ISA_AVX512BF16): q k^T and p v as vdpbf16ps products */
void mact_x86_attention_bf16(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                             const float *k, const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads,
                             int n_kv, int hd, float scale, const float *bias, const uint8_t *key_ok, float *scratch,
                             const uint32_t *kvp);
void mact_x86_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv,
                           int hd);
/* rows and activations (vec.c) */
void mact_gelu_tanh_avx512(float *x, int64_t n);
void mact_silu_mul_avx512(float *y, const float *gate, const float *val, int64_t n);
void mact_layernorm_row_avx512(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim);
void mact_rmsnorm_row_avx512(float *y, const float *x, const float *w, float eps, int64_t dim);
void mact_modulate_rows_avx512(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
void mact_gated_add_rows_avx512(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);
/* the bench's fp32 FMA / bf16 dot-product peak over threads in GFLOP/s (peak.c) */
double mact_x86_peak_gflops(int use_bf16, int threads);

/* gemm_int8.c: y = x W^T on an MACT_PACK_I8 weight (x quantized per row to u8 inside); the plain-C kernel
 * computes the same int32 sums and the same fp32 rescale (tests compare the two) */
void mact_x86_gemm_i8(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                      const float *bias, int64_t M, int epi);
void mact_gemm_i8_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                         const float *bias, int64_t M, int epi);
/* Row quantization the int8 GEMMs use: q[k] = clamp(round(x[k] / s) + z, 0, 255) with s = (max - min) / 255
 * over the row and 0 (min <= 0 <= max), z = round(-min / s); x ~ s (q - z). Quads of q written to A[Kq]
 * (zero past K). Scalar and AVX-512 versions produce identical bytes. */
void mact_quant_row_u8(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z);
void mact_quant_row_u8_avx512(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z);
double mact_x86_peak_gops_i8(int threads);
/* one int8 panel times a zero-padded vector, unscaled (the ops table's dot_panel_i8; AVX-512) */
void mact_x86_dot_panel_i8(float *out, const float *x, const mact_packed *pk, int64_t p);

/* Rows (256 bytes each in every pack format) that the first row tile of a packed GEMM's K block prefetches
 * ahead of itself when the GEMM has at most two row tiles (mact_tile_prefetch). */
#define MACT_PF_AHEAD 16
/* What the row tile at row mt of a K block prefetches: *pfl lines (1, 2 or 4) per k step from the returned
 * address on (NULL: nothing). blk: the block's first panel row; kn its rows; kc the K block size; the panel's
 * rows run on into the next block and the next panel, so "the next block" is always blk + kn rows.
 * Up to two row tiles (M <= 12) the first tile streams the block and prefetches MACT_PF_AHEAD rows ahead of
 * itself, a row per k step: at M = 10 this read faster than prefetching the whole next block during the last
 * tile or spreading it over both tiles. From three tiles on, the next block's kc rows are spread over the
 * tiles (the first tile still streams this block from wherever it is), so the first tile's stream no longer
 * waits on memory while the other tiles compute: faster at M = 16-30 (A/B numbers in docs/benchmarks-log.md,
 * 2026-11-30: "Tried this session and not kept" and "the next K block prefetched across the row tiles"). */
/* n (1, 2 or 4) 64-byte lines of panel at p, towards L2: what a row tile issues per k step by that plan (the
 * including file has <immintrin.h>) */
#define MACT_PREFETCH_LINES(p, n)                                                                              \
    do {                                                                                                       \
        const char *q_ = (p);                                                                                  \
        _mm_prefetch(q_, _MM_HINT_T1);                                                                         \
        if ((n) > 1) _mm_prefetch(q_ + 64, _MM_HINT_T1);                                                       \
        if ((n) > 2) {                                                                                         \
            _mm_prefetch(q_ + 128, _MM_HINT_T1);                                                               \
            _mm_prefetch(q_ + 192, _MM_HINT_T1);                                                               \
        }                                                                                                      \
    } while (0)
static inline const char *mact_tile_prefetch(const char *blk, int64_t kn, int64_t kc, int64_t M, int64_t mt, int *pfl)
{
    const int64_t tiles = (M + 5) / 6, t = mt / 6;  /* 6-row tiles (MR in both GEMMs) */
    if (tiles <= 2) {
        *pfl = 4;
        return t == 0 ? blk + MACT_PF_AHEAD * 256 : NULL;
    }
    const int64_t lines = kc * 4, per = (lines + tiles * kn - 1) / (tiles * kn);
    *pfl = per <= 1 ? 1 : per <= 2 ? 2 : 4;
    const int64_t off = t * kn * *pfl;
    return off < lines ? blk + kn * 256 + off * 64 : NULL;
}
/* Runs fn(arg, p, tid) for the np panels of a packed GEMM with M rows: claimed panel by panel when the
 * GEMM is compute-bound, as one contiguous run of panels per thread when it streams its weights from
 * memory (gemm_avx512.c says why); serially when par is 0. In the contiguous-run case only
 * (mact_panels_in_runs), prep (if not NULL) is called as prep(arg, tid) by the thread that takes a run,
 * before the run's first panel: the place for a thread's own copy of the GEMM's operand. */
typedef void (*mact_prep_fn)(void *arg, int tid);
void mact_for_panels(const mact_kctx *kc, int64_t np, int64_t M, int par, mact_task_fn fn, mact_prep_fn prep,
                     void *arg);
int mact_panels_in_runs(int64_t M, int par);

#endif
