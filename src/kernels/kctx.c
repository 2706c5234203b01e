/* Kernel contexts. A context is what one session's kernels run with: the ops of
 * one backend level, the precision, a thread pool and per-thread scratch planned from the model, so no
 * kernel reads a global and concurrent sessions cannot disturb each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include <sys/mman.h>

/* huge pages for the packs, the session arena and the GEMM scratch: fewer TLB misses when streaming */
void mact_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20, lo = ((uintptr_t)p + huge - 1) & ~(huge - 1),
                    hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}


/* the name of every mact_precision, by value (mact_precision_parse / _str; the pack cache's file names) */
static const char *const precision_names[] = {
    [MACT_PRECISION_DEFAULT] = "default",
    [MACT_PRECISION_FP32] = "fp32",
    [MACT_PRECISION_BF16] = "bf16",
    [MACT_PRECISION_INT8] = "int8",
};
#define N_PRECISIONS (sizeof precision_names / sizeof precision_names[0])

mact_status mact_precision_parse(const char *name, mact_precision *out)
{
    if (!name || !out) return MACT_ERR_INPUT;
    for (size_t i = 0; i < N_PRECISIONS; i++)
        if (!strcmp(name, precision_names[i])) { *out = (mact_precision)i; return MACT_OK; }
    return MACT_ERR_INPUT;
}

const char *mact_precision_str(mact_precision p) { return (unsigned)p < N_PRECISIONS ? precision_names[p] : "?"; }

/* the MACT_PART_* names, by bit (mact_int8_parts_parse / _str) */
static const char *const part_names[] = {"vision", "llm", "expert"};
#define N_PARTS (sizeof part_names / sizeof part_names[0])

mact_status mact_int8_parts_parse(const char *s, unsigned *out)
{
    if (!s || !out || !*s) return MACT_ERR_INPUT;
    if (!strcmp(s, "all")) { *out = MACT_INT8_PARTS_ALL; return MACT_OK; }
    unsigned v = 0;
    for (const char *p = s;;) {
        const char *e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        int hit = 0;
        for (unsigned b = 0; b < N_PARTS; b++)
            if (n == strlen(part_names[b]) && !strncmp(p, part_names[b], n)) { v |= 1u << b; hit = 1; }
        if (!hit) return MACT_ERR_INPUT;
        if (!e) break;
        p = e + 1;
    }
    *out = v;
    return MACT_OK;
}

const char *mact_int8_parts_str(unsigned parts, char *buf, size_t buflen)
{
    if (!buf || !buflen) return buf;
    buf[0] = 0;
    size_t n = 0;
    for (unsigned b = 0; b < N_PARTS; b++)
        if (parts & (1u << b)) {
            int k = snprintf(buf + n, buflen - n, "%s%s", n ? "," : "", part_names[b]);
            if (k < 0 || (size_t)k >= buflen - n) break;
            n += (size_t)k;
        }
    return buf;
}

mact_precision mact_kernels_effective_precision(const mact_ops *ops, mact_precision prec)
{
    if (prec == MACT_PRECISION_INT8 && !ops->gemm_i8) prec = MACT_PRECISION_BF16;
    if (prec == MACT_PRECISION_BF16 && !ops->has_bf16) prec = MACT_PRECISION_FP32;
    return prec;
}

int mact_kctx_init(mact_kctx *kc, const mact_ops *ops, mact_precision prec, mact_pool *pool, size_t scratch0,
                   size_t scratch0_worker, size_t scratch1, size_t scratch2)
{
    memset(kc, 0, sizeof *kc);
    kc->ops = ops;
    kc->isa = ops->isa;
    kc->prec = mact_kernels_effective_precision(ops, prec);
    kc->pool = pool;
    kc->n_threads = mact_pool_size(pool);
    kc->th = calloc((size_t)kc->n_threads, sizeof *kc->th);
    if (!kc->th) return MACT_ERR_NOMEM;
    for (int t = 0; t < kc->n_threads; t++) {
        const size_t want[3] = {t == 0 ? scratch0 : scratch0_worker, scratch1, t == 0 ? scratch2 : 0};
        for (int b = 0; b < 3; b++) {
            if (!want[b]) continue;
            size_t cap = (want[b] + 63) & ~(size_t)63;
            kc->th[t].buf[b] = aligned_alloc(64, cap);
            if (!kc->th[t].buf[b]) {
                mact_kctx_free(kc);
                return MACT_ERR_NOMEM;
            }
            mact_advise_huge(kc->th[t].buf[b], cap);
            kc->th[t].cap[b] = cap;
        }
    }
    return 0;
}

void mact_kctx_free(mact_kctx *kc)
{
    if (kc->th)
        for (int t = 0; t < kc->n_threads; t++) {
            free(kc->th[t].buf[0]);
            free(kc->th[t].buf[1]);
            free(kc->th[t].buf[2]);
        }
    free(kc->th);
    kc->th = NULL;
}

void *mact_kctx_buf(const mact_kctx *kc, int tid, int which, size_t bytes)
{
    mact_kthread *t = &kc->th[tid];
    if (t->cap[which] >= bytes) return t->buf[which];
    /* a size the plan missed: grow (counted, so tests see a hot-path allocation), never fail the op */
    mact_kctx *mk = (mact_kctx *)kc;
    atomic_fetch_add_explicit(&mk->grows, 1, memory_order_relaxed);
    free(t->buf[which]);
    size_t cap = (bytes + bytes / 4 + 4096 + 63) & ~(size_t)63;
    t->buf[which] = aligned_alloc(64, cap);
    t->cap[which] = t->buf[which] ? cap : 0;
    if (t->buf[which]) mact_advise_huge(t->buf[which], cap);
    return t->buf[which];
}

void mact_kctx_run(const mact_kctx *kc, int64_t n, int par, mact_task_fn fn, void *arg)
{
    if (par) mact_pool_run(kc->pool, n, kc->n_threads, fn, arg);
    else for (int64_t i = 0; i < n; i++) fn(arg, i, 0);
}

/* bf16: M rows of ceil(K / 2) pairs (x86), or ceil(M / 2) row pairs of ceil(K / 4) bf16 quads (ARM's BFMMLA
 * operand); int8: M rows of ceil(K / 4) quads plus a scale and a zero point per row */
size_t mact_gemm_scratch0(int64_t M, int64_t K)
{
    const size_t bf = (size_t)M * (size_t)((K + 1) / 2) * 4, i8 = (size_t)M * (size_t)((K + 3) / 4) * 4 + (size_t)M * 8;
    const size_t bq = (size_t)((M + 1) / 2) * (size_t)((K + 3) / 4) * 16, b = bf > bq ? bf : bq;
    return (b > i8 ? b : i8) + 64;
}

size_t mact_gemm_scratch1(int64_t M) { return (size_t)(M + 6) * 64 * sizeof(float); }

int mact_tensor_pack(const mact_kctx *kc, mact_tensor *t, int quant)
{
    int fmt;
    size_t bytes;
    t->pk = NULL;
    if (!t->data || t->ndim != 2 ||
        !mact_pack_plan(kc->ops, t->dtype, t->shape[0], t->shape[1], kc->prec, quant, &fmt, &bytes))
        return 1;
    mact_packed *pk = malloc(sizeof *pk);
    void *buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!pk || !buf) {
        free(pk);
        free(buf);
        return MACT_ERR_NOMEM;
    }
    mact_pack_fill(kc->ops, kc->pool, buf, t->data, t->dtype, t->shape[0], t->shape[1], fmt);
    *pk = mact_pack_describe(kc->ops, buf, t->dtype, t->shape[0], t->shape[1], fmt);
    t->pk = pk;
    return 0;
}

void mact_tensor_unpack(mact_tensor *t)
{
    if (!t->pk) return;
    free((void *)t->pk->data);
    free((void *)t->pk);
    t->pk = NULL;
}

/* ---- packing through the ops ---- */

int mact_pack_plan(const mact_ops *ops, int dtype, int64_t N, int64_t K, int prec, int quant, int *fmt, size_t *bytes)
{
    return ops->pack_plan ? ops->pack_plan(dtype, N, K, prec, quant, fmt, bytes) : 0;
}

mact_packed mact_pack_describe(const mact_ops *ops, const void *buf, int dtype, int64_t N, int64_t K, int fmt)
{
    /* the residual plane is read as any int8 pack */
    return ops->pack_describe(buf, dtype, N, K, fmt == MACT_PACK_I8R ? MACT_PACK_I8 : fmt);
}

void mact_pack_fill(const mact_ops *ops, mact_pool *pool, void *buf, const void *w, int dtype, int64_t N, int64_t K,
                    int fmt)
{
    ops->pack_fill(pool, buf, w, dtype, N, K, fmt);  /* MACT_PACK_I8R too: every backend's int8 fill takes it */
}

double mact_kernels_peak_gflops(const mact_kctx *kc, int use_bf16)
{
    return kc->ops->peak_gflops ? kc->ops->peak_gflops(use_bf16, kc->n_threads) : 0;
}

double mact_kernels_peak_gops_i8(const mact_kctx *kc)
{
    return kc->ops->peak_gops_i8 ? kc->ops->peak_gops_i8(kc->n_threads) : 0;
}
