/* Numeric kernels as the stages see them. Every call takes the kernel context of the session that runs it
 * (mact_kctx: which kernels, the arithmetic precision, the thread pool, per-thread scratch), so nothing here
 * reads process-wide settings and sessions of different models, precisions and thread counts run
 * concurrently. Every weight matrix goes through mact_matmul*, which takes the weight in its stored dtype
 * and the packed copy the model bound to it at load (mact_tensor.pk), so faster kernels replace the bodies
 * behind the ops table (kernels/ops.h) without touching stage code.
 *
 * Two layers of matmul:
 *   - row-major kernels (plain C in kernels/ref/, AVX2 and AVX-512 in kernels/x86/) that read the weight
 *     where the loader left it (zero-copy);
 *   - packed kernels of a backend (x86: AVX-512 F / BF16 / VNNI over 64-column panels, kernels/x86/pack.c)
 *     over the copy made once at load for the model's precision.
 * Precision: FP32 is exact fp32 arithmetic on the stored weights (the parity mode); BF16 rounds each GEMM's
 * activations to bf16 and multiplies them with bf16 weights (fp32 accumulation) and runs attention's q k^T
 * and p v as bf16 products; INT8 is BF16 plus int8 GEMMs for the weights that have an int8 pack. Norms,
 * softmax, activations and all accumulations stay fp32 (int32 inside the int8 GEMM). A context's precision
 * is what its kernels can compute (mact_kernels_effective_precision): BF16 needs the bf16 dot products,
 * INT8 the int8 ones, and each falls back to the next mode up.
 * Work is split into whole units (a 64-column panel, a head, a row block) computed the same way by whichever
 * thread runs them, so results never depend on the thread count. */
#ifndef MACT_KERNELS_H
#define MACT_KERNELS_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "mact.h"
#include "base/tensor.h"
#include "kernels/threadpool.h"

/* Kernel levels, in increasing order; each ops table says its own. AVX512BF16 = AVX-512 + the bf16 dot
 * products (its int8 GEMM needs AVX512-VNNI on top: mact_ops.gemm_i8 is set only then). */
enum { MACT_ISA_SCALAR = 0, MACT_ISA_AVX2, MACT_ISA_AVX512, MACT_ISA_AVX512BF16 };

typedef struct mact_ops mact_ops;

/* Per-thread state of a context: two scratch buffers (0: a GEMM's converted copy of x; 1: a worker's
 * partial sums between K blocks), sized at session creation from the model, and the operand a run of panels
 * reads (set by the run's prep, read by the same thread's panels). */
typedef struct {
    void *buf[3];      /* 2: the int8 GEMMs' outlier split (thread 0 only; kernels/i8_split.c) */
    size_t cap[3];
    const void *own[3];
} mact_kthread;

typedef struct mact_kctx {
    const mact_ops *ops;
    int isa;                 /* ops level (MACT_ISA_*) */
    mact_precision prec;     /* what this context computes in: MACT_PRECISION_FP32, _BF16 or _INT8 */
    mact_pool *pool;         /* NULL: every job runs in the calling thread */
    int n_threads;           /* mact_pool_size(pool) */
    mact_kthread *th;        /* [n_threads] */
    _Atomic uint64_t grows;  /* scratch buffers grown after planning: 0 in a correctly planned session */
} mact_kctx;

/* The ops for a choice of kernels (MACT_KERNELS_*, mact.h) on this CPU, or NULL with err filled when the
 * choice names kernels this build or CPU does not have. AUTO reads $MACT_KERNELS, else the best available. */
const mact_ops *mact_ops_select(int kernels, char *err, size_t errlen);
/* the MACT_KERNELS_* an ops table implements, its level and name */
int mact_ops_kernels(const mact_ops *ops);
int mact_ops_isa(const mact_ops *ops);
const char *mact_ops_name(const mact_ops *ops);
/* what a precision computes as with these ops (FP32 on the plain-C kernels; BF16 and INT8 fall back) */
mact_precision mact_kernels_effective_precision(const mact_ops *ops, mact_precision prec);

/* A context over ops in precision prec (already effective) on pool (may be NULL; not owned). scratch0 /
 * scratch1 / scratch0_worker: the planned buffer sizes in bytes (0: none; they grow on demand, counted in
 * grows). Returns 0 or MACT_ERR_NOMEM. */
int mact_kctx_init(mact_kctx *kc, const mact_ops *ops, mact_precision prec, mact_pool *pool, size_t scratch0,
                   size_t scratch0_worker, size_t scratch1, size_t scratch2);
void mact_kctx_free(mact_kctx *kc);
/* thread tid's scratch buffer `which` of at least bytes (64-byte aligned); NULL when out of memory */
void *mact_kctx_buf(const mact_kctx *kc, int tid, int which, size_t bytes);
/* fn(arg, i, tid) for i < n on the context's pool when par, else in the caller */
void mact_kctx_run(const mact_kctx *kc, int64_t n, int par, mact_task_fn fn, void *arg);
/* Bytes of scratch buffer 0 / 1 a GEMM of M rows over K needs (the planner and the kernels agree on it). */
size_t mact_gemm_scratch0(int64_t M, int64_t K);
size_t mact_gemm_scratch1(int64_t M);

/* The outlier split of the int8 GEMMs (kernels/i8_split.c): columns of x above MACT_I8_OUTLIER_RATIO times the
 * median column maximum (at most mact_i8_split_cap(K), never more than MACT_I8_MAX_OUTLIERS) go through fp32 on
 * the stored weights, the rest through the int8 kernel. GEMMs over fewer than 2 x MACT_I8_OUTLIER_MIN_K columns
 * are never split. */
#define MACT_I8_OUTLIER_RATIO 6.0f
#define MACT_I8_MAX_OUTLIERS 64
#define MACT_I8_OUTLIER_MIN_K 32
#define MACT_I8_SCAN_TASKS 16    /* column blocks of the detector's scan (kc's pool; the result never depends on it) */
int mact_i8_split_cap(int64_t K);
/* bytes of scratch buffer 2 a split (or a centred GEMM) of M rows, N outputs over K needs */
size_t mact_i8_split_scratch(int64_t M, int64_t N, int64_t K);
/* the outlier columns of x[M, K] (ascending, at most cap) into idx; 0 when none stands out or x holds a
 * non-finite value. colmax and tmp: K floats each. kc: the pool the scan runs on (NULL: this thread). */
int mact_i8_find_outliers(const mact_kctx *kc, const float *x, int64_t ldx, int64_t M, int64_t K, float *colmax,
                          float *tmp, int32_t *idx, int cap);

/* Fused epilogues of the weight GEMMs: y = x W^T + bias, then */
enum {
    MACT_EPI_NONE = 0,
    MACT_EPI_GELU_TANH = 1,  /* y = gelu_tanh(x W^T + bias) */
    MACT_EPI_RESIDUAL = 2,   /* y += x W^T + bias (y holds the residual stream on entry) */
};

/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) with an epilogue; x rows are ldx apart, y rows ldy apart. Uses
 * W's packed copy when it has one for these N, K and the context's precision can read it. */
void mact_matmul_epi(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                     const float *bias, int64_t M, int64_t N, int64_t K, int epi);
static inline void mact_matmul_ex(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx,
                                  const mact_tensor *W, const float *bias, int64_t M, int64_t N, int64_t K)
{
    mact_matmul_epi(kc, y, ldy, x, ldx, W, bias, M, N, K, MACT_EPI_NONE);
}
static inline void mact_matmul(const mact_kctx *kc, float *y, const float *x, const mact_tensor *W, const float *bias,
                               int64_t M)
{
    mact_matmul_epi(kc, y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1], MACT_EPI_NONE);
}
/* y = gelu_tanh(x W^T + b) and y += x W^T + b, full-width rows. */
static inline void mact_matmul_gelu(const mact_kctx *kc, float *y, const float *x, const mact_tensor *W,
                                    const float *bias, int64_t M)
{
    mact_matmul_epi(kc, y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1], MACT_EPI_GELU_TANH);
}
static inline void mact_matmul_residual(const mact_kctx *kc, float *y, const float *x, const mact_tensor *W,
                                        const float *bias, int64_t M)
{
    mact_matmul_epi(kc, y, W->shape[0], x, W->shape[1], W, bias, M, W->shape[0], W->shape[1], MACT_EPI_RESIDUAL);
}

/* ---- packed weights ----
 * A backend's packed layout, described backend-neutrally: the packed bytes and what the backend's GEMMs
 * need to read them. The x86 backend's formats (kernels/x86/pack.c): MACT_PACK_BF16 (bf16 pairs, 64-column
 * panels: vdpbf16ps operand order), MACT_PACK_F32 (fp32 panels) and MACT_PACK_I8 (int8 quads + per-channel
 * scales and column sums). The ARM backend's (kernels/arm/pack.c): MACT_PACK_I8 as above and MACT_PACK_BF16Q
 * (bf16 quads of column pairs: BFMMLA operand order). */
#define MACT_PANEL 64  /* output columns per packed panel */
/* MACT_PACK_I8R: the residual plane of a two-plane int8 weight, in MACT_PACK_I8's layout and bytes, built by
 * the shared quantiser (every backend's pack_fill takes it); its descriptor says MACT_PACK_I8 and hangs from the
 * first plane's (mact_packed.lo) */
enum { MACT_PACK_BF16 = 0, MACT_PACK_F32 = 1, MACT_PACK_I8 = 2, MACT_PACK_BF16Q = 3, MACT_PACK_I8R = 4, MACT_PACK_NFMT = 5 };
typedef struct mact_packed {
    int64_t N, K;
    int64_t Kp;           /* k rows per panel: ceil(K / 2) bf16 pairs (MACT_PACK_BF16), K (MACT_PACK_F32),
                           * ceil(K / 4) int8 quads (MACT_PACK_I8) or bf16 quads (MACT_PACK_BF16Q) */
    int64_t npanel;       /* ceil(N / MACT_PANEL) */
    int fmt;              /* MACT_PACK_* */
    int exact;            /* 1: the packed values equal the source (BF16 source, or F32 in MACT_PACK_F32) */
    const void *data;     /* 64-byte aligned; panel p at p * Kp * 64 elements of the format's row:
                           * MACT_PACK_BF16: row kp = 64 columns x (W[n, 2kp], W[n, 2kp + 1]) as bf16 (256 B);
                           * MACT_PACK_F32:  row k = 64 columns of W[n, k] as fp32 (256 B);
                           * MACT_PACK_I8:   row kq = 64 columns x W8[n, 4kq .. 4kq + 3] as int8 (256 B),
                           *                 W[n, k] ~ scale[n] * W8[n, k];
                           * MACT_PACK_BF16Q: row kq = 32 column pairs x (W[2c, 4kq .. 4kq + 3],
                           *                 W[2c + 1, 4kq .. 4kq + 3]) as bf16 (512 B) */
    const float *scale;   /* MACT_PACK_I8: [npanel * 64] per-output-channel scale (0 past N) */
    const int32_t *colsum;/* MACT_PACK_I8: [npanel * 64] sum over k of W8[n, k] (the zero-point correction) */
    int centre;           /* MACT_PACK_I8: 1: its GEMMs run centred on their rows' mean (kernels/i8_split.c); set
                           * by whoever binds the pack (the model: its vision weights), 0 from mact_pack_describe */
    const struct mact_packed *lo; /* MACT_PACK_I8 of a centred GEMM: the residual plane (W ~ s1 q1 + s2 q2), whose
                           * product the GEMM adds (kernels/i8_split.c), or NULL; set by the binder like centre */
} mact_packed;

/* Packing through the ops (the model's prepare and the pack cache, tests, the bench). The pack a weight
 * gets for a precision (quant: a weight of a component INT8 quantizes, mact_load_options.int8_parts): its format and bytes;
 * 0 when these ops do not pack it. */
int mact_pack_plan(const mact_ops *ops, int dtype, int64_t N, int64_t K, int prec, int quant, int *fmt, size_t *bytes);
/* the descriptor of a pack of that format whose bytes are at buf */
mact_packed mact_pack_describe(const mact_ops *ops, const void *buf, int dtype, int64_t N, int64_t K, int fmt);
/* fills buf (mact_pack_plan's bytes) with w's pack, the panels split over pool */
void mact_pack_fill(const mact_ops *ops, mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K,
                    int fmt);
/* One tensor packed into its own allocation (tests, the bench): t->pk set, or left NULL when not packable
 * (returns 1); MACT_ERR_NOMEM. Free with mact_tensor_unpack. */
int mact_tensor_pack(const mact_kctx *kc, mact_tensor *t, int quant);
void mact_tensor_unpack(mact_tensor *t);

/* One row of a weight (e.g. an embedding) converted to F32. */
void mact_row_f32(float *dst, const mact_tensor *W, int64_t row);

void mact_layernorm(const mact_kctx *kc, float *y, const float *x, const float *w, const float *b, float eps,
                    int64_t rows, int64_t dim);
/* w may be NULL (non-affine). y may alias x. */
void mact_rmsnorm(const mact_kctx *kc, float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim,
                  int64_t ldx);
void mact_gelu_tanh(const mact_kctx *kc, float *x, int64_t n);
float mact_silu(float x);
/* y[i] = silu(gate[i]) * val[i] for i < n; y may alias gate or val. */
void mact_silu_mul(const mact_kctx *kc, float *y, const float *gate, const float *val, int64_t n);
/* y[r, :n] = silu(gate[r, :n]) * val[r, :n] over rows with the given strides (y may alias gate or val). */
void mact_silu_mul_rows(const mact_kctx *kc, float *y, int64_t ldy, const float *gate, const float *val, int64_t ldg,
                        int64_t rows, int64_t n);
/* y[i] += x[i] */
void mact_add_inplace(float *y, const float *x, int64_t n);
/* adaLN: y[r, d] = y[r, d] * (1 + scale[d]) + shift[d], rows of dim, contiguous */
void mact_modulate_rows(const mact_kctx *kc, float *y, int64_t rows, int64_t dim, const float *shift,
                        const float *scale);
/* gated residual: z[r, d] += gate[d] * y[r, d] */
void mact_gated_add_rows(const mact_kctx *kc, float *z, const float *y, const float *gate, int64_t rows, int64_t dim);

/* Multi-head attention, softmax in fp32 (in BF16 precision where the ops have bf16 attention: q k^T and p v
 * as bf16 dot products with fp32 accumulation, the softmax in fp32).
 * q [nq, q_ld] with head h at column h*hd; k, v [nk, kv_ld] with kv head g at g*hd; heads share kv head
 * h / (n_heads / n_kv). bias [nq, nk] (added, may be NULL); key_ok [nk] (0 masks the key, may be NULL).
 * out [nq, out_ld]. scratch: mact_attention_scratch(nk) floats per thread of kc. Scores are materialised one
 * block of query rows at a time (never [nq, nk] per head). A row whose visible scores include a NaN gives
 * NaN outputs (never a silently finite row); a row with no visible key gives zeros. */
void mact_attention(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k,
                    const float *v, int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch);
int64_t mact_attention_scratch(int64_t nk);
/* Keys and values packed once for several attention calls over the same keys (the action expert's
 * cross-attention reads one context in every flow step): per kv head, K transposed into bf16 d-pairs and V
 * into bf16 key pairs, exactly what the bf16 path builds inside each call, so mact_attention_packed returns
 * bitwise what mact_attention returns. Valid only where mact_attention_packable (the bf16 path would run).
 * Sizes in uint32. */
int mact_attention_packable(const mact_kctx *kc, int64_t nq, int64_t nk, int hd);
int64_t mact_attention_kv_packed_size(int64_t nk, int n_kv, int hd);
void mact_attention_kv_pack(const mact_kctx *kc, uint32_t *dst, const float *k, const float *v, int64_t kv_ld,
                            int64_t nk, int n_kv, int hd);
void mact_attention_packed(const mact_kctx *kc, float *out, int64_t out_ld, const float *q, int64_t q_ld,
                           const uint32_t *kv, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                           const float *bias, const uint8_t *key_ok, float *scratch);

/* NeoX rotate-half RoPE on x [n, ld] heads of hd at head*hd, position p of row = pos[row]. */
void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t);
/* cos/sin tables [n, hd/2] for positions 0..n-1 and base theta (fp32 as HF computes them). */
void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta);

/* Instruction-level peaks of the context's kernels over its threads, for the bench: bf16 dot products
 * (use_bf16) or fp32 FMA in GFLOP/s, int8 dot products in GOP/s; 0 when the ops have none. */
double mact_kernels_peak_gflops(const mact_kctx *kc, int use_bf16);
double mact_kernels_peak_gops_i8(const mact_kctx *kc);

/* The thread count above which a GEMM of this size is split (shared by every matmul path; kernels/rowmajor.c). */
int mact_gemm_parallel(int64_t M, int64_t N, int64_t K);
/* kernels/rowmajor.c: y = x W^T (+ bias, epilogue) on w[N, K] as stored (dtype dt), fp32 products, over kc's pool */
void mact_matmul_rowmajor(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                          int dt, const float *bias, int64_t M, int64_t N, int64_t K, int epi);
/* Marks the 2 MiB-aligned interior of [p, p + bytes) for transparent huge pages (before first touch); used for
 * the packs, the session arena and the GEMM scratch. */
void mact_advise_huge(void *p, size_t bytes);

/* kernels/i8_split.c: y = x W^T (+ bias, epilogue) as the int8 kernel on x without its outlier columns plus their fp32 product
 * (with pk->centre: on x - mu, mu the rows' mean, plus mu W^T in fp32); 1 when done, 0 when the caller is to run the
 * plain int8 kernel (no outlier column and no centring, a non-finite x, or no scratch) */
int mact_i8_split_gemm(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W,
                       const mact_packed *pk, const float *bias, int64_t M, int64_t N, int64_t K, int epi);

#endif
