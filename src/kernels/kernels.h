/* Numeric kernels used by the stages. Every weight matrix goes through mact_matmul, which takes the
 * weight in its stored dtype, so faster kernels replace the bodies here without touching stage code.
 *
 * Three layers:
 *   - row-major paths (scalar, AVX2, AVX-512) that read the weight where the loader left it (zero-copy);
 *   - packed paths (AVX-512 F, AVX-512 BF16, AVX512-VNNI) over weights repacked once by mact_kernels_prepare
 *     into 64-column panels (bf16 pairs, fp32 for F32 weights in FP32 mode, int8 quads in INT8 mode;
 *     src/gemm_pack.c, src/gemm_avx512.c, src/gemm_int8.c); mact_matmul* looks the weight up by its data
 *     pointer and falls back to the row-major path when it was not prepared;
 *   - the precision mode (mact_set_precision): FP32 is exact fp32 arithmetic on the stored weights (the
 *     parity mode); BF16 rounds each GEMM's activations to bf16 and multiplies them with bf16 weights
 *     (vdpbf16ps, fp32 accumulation), and runs attention's q k^T and p v as bf16 products. BF16 needs the
 *     AVX512BF16 ISA level (and prepared weights for the GEMMs); every other path computes in FP32
 *     whatever the mode. INT8 is BF16 plus int8 GEMMs for the weights that have an int8 pack (below).
 *     Norms, softmax, activations and all accumulations stay fp32 (int32 inside the int8 GEMM).
 * Threads: a persistent pool (src/threadpool.h; why not OpenMP regions: see there). Work is split into
 * whole units (a 64-column panel, a head, a row block) computed the same way by whichever thread runs
 * them, so results never depend on the thread count. */
#ifndef MACT_KERNELS_H
#define MACT_KERNELS_H
#include <stdint.h>
#include "model/model.h"
#include "kernels/threadpool.h"

/* Which code path the kernels use; picked once from the CPU's features, overridable for tests
 * (mact_isa_set clamps to what the CPU has). AVX512BF16 = AVX512 + the bf16 dot-product kernels. */
enum { MACT_ISA_SCALAR = 0, MACT_ISA_AVX2, MACT_ISA_AVX512, MACT_ISA_AVX512BF16 };
int mact_isa_detect(void);
int mact_isa_get(void);
void mact_isa_set(int isa);
const char *mact_isa_name(int isa);

/* Precision of the weight GEMMs and attention: process-wide (default FP32), optionally overridden for the
 * calling thread (e.g. by mact_session_enter from a session field; -1 restores the process-wide value).
 * Every kernel reads it in the calling thread, before handing work to the pool. */
enum { MACT_PREC_FP32 = 0, MACT_PREC_BF16 = 1, MACT_PREC_INT8 = 2 };
void mact_set_precision(int prec);
void mact_set_thread_precision(int prec);
int mact_get_precision(void);
const char *mact_precision_name(int prec);
/* the kernel precision of a public MACT_PRECISION_* (DEFAULT = BF16) */
static inline int mact_prec_of(int precision)
{
    return precision == MACT_PRECISION_FP32 ? MACT_PREC_FP32 : precision == MACT_PRECISION_INT8 ? MACT_PREC_INT8
                                                                                                 : MACT_PREC_BF16;
}
/* INT8 is BF16 plus int8 weights wherever an int8 pack exists (the LLM and the action expert: see
 * mact_kernels_prepare): those GEMMs quantize each activation row to u8 (asymmetric, per row) and multiply
 * with the weight's int8 values (symmetric, per output channel) in int32 (AVX512-VNNI vpdpbusd, or the
 * plain-C kernel computing the same integers; mact_kernels_prepare makes int8 packs only where the CPU has
 * VNNI, so models run INT8 as BF16 elsewhere). 1 when the CPU has AVX512-VNNI. */
int mact_has_vnni(void);

/* Fused epilogues of the weight GEMMs: y = x W^T + bias, then */
enum {
    MACT_EPI_NONE = 0,
    MACT_EPI_GELU_TANH = 1,  /* y = gelu_tanh(x W^T + bias) */
    MACT_EPI_RESIDUAL = 2,   /* y += x W^T + bias (y holds the residual stream on entry) */
};

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
/* With a fused epilogue (MACT_EPI_*). */
void mact_matmul_epi(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W, const float *bias,
                     int64_t M, int64_t N, int64_t K, int epi);
void mact_matmul_raw_epi(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dtype,
                         const float *bias, int64_t M, int64_t N, int64_t K, int epi);
/* y = gelu_tanh(x W^T + b) and y += x W^T + b, full-width rows. */
static inline void mact_matmul_gelu(float *y, const float *x, const mact_tensor *W, const float *bias, int64_t M)
{
    mact_matmul_epi(y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1], MACT_EPI_GELU_TANH);
}
static inline void mact_matmul_residual(float *y, const float *x, const mact_tensor *W, const float *bias, int64_t M)
{
    mact_matmul_epi(y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1], MACT_EPI_RESIDUAL);
}

/* ---- packed weights ----
 * mact_kernels_prepare packs every 2-D weight of the model that goes through mact_matmul into 64-column
 * panels: BF16 weights as bf16 pairs (exact, used in both precisions); F32 weights as fp32 rows when
 * preparing for MACT_PREC_FP32 (exact) and as bf16 pairs, rounded, when preparing for MACT_PREC_BF16
 * (used only in BF16 mode); F16 weights only for BF16 (rounded). Prepare for the precision you run. The packed copies are kept in a
 * process-wide table keyed by the weight's data pointer (checked against a fingerprint of the source on
 * every lookup) and owned on behalf of the model until mact_kernels_release(m), which mact_model_free
 * must call. After packing a tensor that lies in a read-only file mapping, its source pages are handed
 * back to the kernel (madvise DONTNEED: they re-fault from the file if read again), so resident memory
 * holds one copy of each weight. Idempotent; returns 0 or MACT_ERR_NOMEM with err filled.
 * Without it every matmul takes the row-major path (correct, slower). */
int mact_kernels_prepare(struct mact_model *m, int precision, char *err, size_t errlen);
/* Same, with an on-disk cache of the packs in cache_dir (gemm_pack.c: keyed by the model directory's files,
 * every weight's shape and fingerprint, the precision and the format version): a valid cache file is mapped
 * read-only instead of packing; otherwise the weights are packed and the file written. Cache problems never
 * fail the call; *cache_status (may be NULL) says what happened: */
enum { MACT_PACK_CACHE_NONE = 0, MACT_PACK_CACHE_LOADED = 1, MACT_PACK_CACHE_WRITTEN = 2, MACT_PACK_CACHE_FAILED = 3 };
int mact_kernels_prepare_cached(struct mact_model *m, int precision, const char *cache_dir, int *cache_status, char *err,
                                size_t errlen);
void mact_kernels_release(const struct mact_model *m);
/* One weight (tests, benchmarks); owner is any pointer later passed to mact_kernels_release_owner.
 * drop_source: madvise the source pages away when they are file-backed. Returns 0, 1 when the weight
 * is not packable in that precision (not 2-D / dtype), or MACT_ERR_NOMEM. */
int mact_pack_weight(const void *owner, const void *w, int dtype, int64_t N, int64_t K, int precision, int drop_source);
void mact_kernels_release_owner(const void *owner);
/* Bytes held by packed weights (all owners). */
size_t mact_packed_bytes(void);

/* One row of a weight (e.g. an embedding) converted to F32. */
void mact_row_f32(float *dst, const mact_tensor *W, int64_t row);

void mact_layernorm(float *y, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t dim);
/* w may be NULL (non-affine). y may alias x. */
void mact_rmsnorm(float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim, int64_t ldx);
void mact_gelu_tanh(float *x, int64_t n);
float mact_silu(float x);
/* y[i] = silu(gate[i]) * val[i] for i < n; y may alias gate or val. */
void mact_silu_mul(float *y, const float *gate, const float *val, int64_t n);
/* y[r, :n] = silu(gate[r, :n]) * val[r, :n] over rows with the given strides (y may alias gate or val). */
void mact_silu_mul_rows(float *y, int64_t ldy, const float *gate, const float *val, int64_t ldg, int64_t rows,
                        int64_t n);
/* y[i] += x[i] */
void mact_add_inplace(float *y, const float *x, int64_t n);
/* adaLN: y[r, d] = y[r, d] * (1 + scale[d]) + shift[d], rows of dim, contiguous */
void mact_modulate_rows(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
/* gated residual: z[r, d] += gate[d] * y[r, d] */
void mact_gated_add_rows(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);

/* Multi-head attention, softmax in fp32 (in BF16 precision on AVX512BF16: q k^T and p v as bf16 dot products
 * with fp32 accumulation, the softmax in fp32).
 * q [nq, q_ld] with head h at column h*hd; k, v [nk, kv_ld] with kv head g at g*hd; heads share kv head
 * h / (n_heads / n_kv). bias [nq, nk] (added, may be NULL); key_ok [nk] (0 masks the key, may be NULL).
 * out [nq, out_ld]. scratch: mact_attention_scratch(nk) floats per thread. Scores are materialised one
 * block of query rows at a time (never [nq, nk] per head). */
void mact_attention(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                    int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch);
int64_t mact_attention_scratch(int64_t nk);
/* Keys and values packed once for several attention calls over the same keys (the action expert's
 * cross-attention reads one context in every flow step): per kv head, K transposed into bf16 d-pairs and V
 * into bf16 key pairs, exactly what the bf16 path builds inside each call, so mact_attention_packed returns
 * bitwise what mact_attention returns. Valid only where mact_attention_packable (the bf16 path would run:
 * BF16/INT8 precision on AVX512BF16, even hd <= 128, nk >= 8, nq nk >= 64). Sizes in uint32. */
int mact_attention_packable(int64_t nq, int64_t nk, int hd);
int64_t mact_attention_kv_packed_size(int64_t nk, int n_kv, int hd);
void mact_attention_kv_pack(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv, int hd);
void mact_attention_packed(float *out, int64_t out_ld, const float *q, int64_t q_ld, const uint32_t *kv, int64_t nq,
                           int64_t nk, int n_heads, int n_kv, int hd, float scale, const float *bias,
                           const uint8_t *key_ok, float *scratch);
/* One attention call as the thread pool's jobs see it (shared by the scalar and AVX-512 paths). */
typedef struct {
    float *out, *scratch;
    const float *q, *k, *v, *bias;
    const uint8_t *key_ok;
    int64_t out_ld, q_ld, kv_ld, nq, nk;
    int n_heads, n_kv, hd;
    float scale;
    const uint32_t *kvp;  /* packed K/V (mact_attention_kv_pack) or NULL: k and v */
} mact_att_job;

/* NeoX rotate-half RoPE on x [n, ld] heads of hd at head*hd, position p of row = pos[row]. */
void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t);
/* cos/sin tables [n, hd/2] for positions 0..n-1 and base theta (angles in double, rounded once). */
void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta);

int mact_threads(void);

/* Instruction-level peak of this machine in GFLOP/s over `threads` threads: independent chains of
 * vdpbf16ps (use_bf16) or fp32 FMA on zmm registers, best of 3 runs of ~0.1 s. 0 when the ISA lacks them. */
double mact_isa_peak_gflops(int use_bf16, int threads);
/* Same for AVX512-VNNI vpdpbusd in int8 GOP/s (2 per u8 x s8 multiply-add); 0 without VNNI. */
double mact_vnni_peak_gops(int threads);

/* ---- internal: shared by kernels.c and src/gemm_*.c ---- */
#define MACT_PANEL 64  /* output columns per packed panel */
enum { MACT_PACK_BF16 = 0, MACT_PACK_F32 = 1, MACT_PACK_I8 = 2, MACT_PACK_NFMT = 3 };
typedef struct {
    int64_t N, K;
    int64_t Kp;           /* k rows per panel: ceil(K / 2) bf16 pairs (MACT_PACK_BF16), K (MACT_PACK_F32),
                           * ceil(K / 4) int8 quads (MACT_PACK_I8) */
    int64_t npanel;       /* ceil(N / MACT_PANEL) */
    int fmt;              /* MACT_PACK_* */
    int exact;            /* 1: the packed values equal the source (BF16 source, or F32 in MACT_PACK_F32) */
    const void *data;     /* 64-byte aligned; panel p at p * Kp * 64 elements of the format's row:
                           * MACT_PACK_BF16: row kp = 64 columns x (W[n, 2kp], W[n, 2kp + 1]) as bf16 (256 B);
                           * MACT_PACK_F32:  row k = 64 columns of W[n, k] as fp32 (256 B);
                           * MACT_PACK_I8:   row kq = 64 columns x W8[n, 4kq .. 4kq + 3] as int8 (256 B),
                           *                 W[n, k] ~ scale[n] * W8[n, k] */
    const float *scale;   /* MACT_PACK_I8: [npanel * 64] per-output-channel scale (0 past N) */
    const int32_t *colsum;/* MACT_PACK_I8: [npanel * 64] sum over k of W8[n, k] (the zero-point correction) */
} mact_packed;
/* The packed copy of w for this precision, or NULL. */
const mact_packed *mact_packed_find(const void *w, int dtype, int64_t N, int64_t K, int precision);
/* gemm_avx512.c */
void mact_gemm_packed(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk, const float *bias,
                      int64_t M, int epi, int use_bf16);
/* gemm_int8.c: y = x W^T on an MACT_PACK_I8 weight (x quantized per row to u8 inside); the plain-C kernel
 * computes the same int32 sums and the same fp32 rescale (tests compare the two) */
void mact_gemm_i8(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk, const float *bias,
                  int64_t M, int epi);
void mact_gemm_i8_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_packed *pk,
                         const float *bias, int64_t M, int epi);
/* Row quantization the int8 GEMMs use: q[k] = clamp(round(x[k] / s) + z, 0, 255) with s = (max - min) / 255
 * over the row and 0 (min <= 0 <= max), z = round(-min / s); x ~ s (q - z). Quads of q written to A[Kq]
 * (zero past K). Scalar and AVX-512 versions produce identical bytes. */
void mact_quant_row_u8(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z);
void mact_quant_row_u8_avx512(uint32_t *A, int64_t Kq, const float *x, int64_t K, float *s, int32_t *z);
void mact_attention_avx512(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                           int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                           const float *bias, const uint8_t *key_ok, float *scratch);
void mact_attention_bf16(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                         int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                         const float *bias, const uint8_t *key_ok, float *scratch, const uint32_t *kvp);
void mact_attention_kv_pack_bf16(uint32_t *dst, const float *k, const float *v, int64_t kv_ld, int64_t nk, int n_kv,
                                 int hd);
void mact_gelu_tanh_avx512(float *x, int64_t n);
void mact_silu_mul_avx512(float *y, const float *gate, const float *val, int64_t n);
void mact_layernorm_row_avx512(float *y, const float *x, const float *w, const float *b, float eps, int64_t dim);
void mact_rmsnorm_row_avx512(float *y, const float *x, const float *w, float eps, int64_t dim);
void mact_modulate_rows_avx512(float *y, int64_t rows, int64_t dim, const float *shift, const float *scale);
void mact_gated_add_rows_avx512(float *z, const float *y, const float *gate, int64_t rows, int64_t dim);
/* Grow-only per-thread scratch (gemm_avx512.c; the bf16 and int8 GEMMs): 0 = the calling thread's converted
 * copy of x, 1 = a worker's partial sums between K blocks. NULL when out of memory. */
void *mact_thread_buf(int which, size_t bytes);
/* Instruction-peak timing shared by the ISA peaks: best of 3 runs of body(iters) on `threads` threads (OpenMP),
 * in G ops/s for ops_per_iter per call iteration. */
double mact_peak_best_of_3(double (*body)(long iters), long iters, double ops_per_iter, int threads);
/* Rows (256 bytes each in every pack format) that the first row tile of a packed GEMM's K block prefetches
 * ahead of itself when the GEMM has at most two row tiles (mact_tile_prefetch). */
#define MACT_PF_AHEAD 16
/* What the row tile at row mt of a K block prefetches: *pfl lines (1, 2 or 4) per k step from the returned
 * address on (NULL: nothing). blk: the block's first panel row; kn its rows; kc the K block size; the panel's
 * rows run on into the next block and the next panel, so "the next block" is always blk + kn rows.
 * Up to two row tiles (M <= 12) the first tile streams the block and prefetches MACT_PF_AHEAD rows ahead of
 * itself, a row per k step (at M = 10: 31-34 GB/s against 26-27 GB/s with the whole next block prefetched
 * during the last tile, and 39.1 against 37.5 GB/s with it spread over both tiles). From three tiles on, the next block's kc rows are spread over the tiles (the
 * first tile still streams this block from wherever it is): on the 2-core Zen 5, the 252 action-expert
 * GEMMs at M = 30 read 21.2 against 18.4 GB/s (bf16, medians of 7), the first tile's stream no longer
 * waiting on memory while the other four compute (docs/benchmarks.md). */
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
void mact_for_panels(int64_t np, int64_t M, int par, mact_task_fn fn, mact_prep_fn prep, void *arg);
int mact_panels_in_runs(int64_t M, int par);
/* Marks the 2 MiB-aligned interior of [p, p + bytes) for transparent huge pages (before first touch); used for
 * the packs, the session arena and the GEMM scratch. */
void mact_advise_huge(void *p, size_t bytes);
/* The thread count above which a GEMM of this size is split (shared by both matmul paths). */
int mact_gemm_parallel(int64_t M, int64_t N, int64_t K);

#endif
