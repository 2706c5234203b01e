/* Kernel contexts and the choice of kernels. A context is what one session's kernels run with: the ops of
 * one backend level, the precision, a thread pool and per-thread scratch planned from the model, so no
 * kernel reads a global and concurrent sessions cannot disturb each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"

static const mact_ops *best_ops(int max_isa)
{
#if defined(__x86_64__)
    const mact_ops *o = mact_ops_x86(max_isa);
    if (o) return o;
#else
    (void)max_isa;
#endif
    return &mact_ops_ref;
}

const mact_ops *mact_ops_select(int kernels, char *err, size_t errlen)
{
    if (kernels == MACT_KERNELS_AUTO) {
        const char *e = getenv("MACT_KERNELS");
        if (e && *e && strcmp(e, "auto")) {
            static const char *names[] = {"auto", "ref", "avx2", "avx512", "avx512bf16"};
            kernels = -1;
            for (int i = 1; i < 5; i++)
                if (!strcmp(e, names[i])) kernels = i;
            if (kernels < 0) {
                if (err && errlen)
                    snprintf(err, errlen, "MACT_KERNELS=%s: expected auto, ref, avx2, avx512 or avx512bf16", e);
                return NULL;
            }
        }
    }
    switch (kernels) {
    case MACT_KERNELS_AUTO: return best_ops(MACT_ISA_AVX512BF16);
    case MACT_KERNELS_REF: return &mact_ops_ref;
    case MACT_KERNELS_X86_AVX2:
    case MACT_KERNELS_X86_AVX512:
    case MACT_KERNELS_X86_AVX512_BF16: {
        const int want = kernels == MACT_KERNELS_X86_AVX2     ? MACT_ISA_AVX2
                         : kernels == MACT_KERNELS_X86_AVX512 ? MACT_ISA_AVX512
                                                              : MACT_ISA_AVX512BF16;
        const mact_ops *o = best_ops(want);
        /* a cap, clamped to what the CPU has; only a build without x86 kernels refuses it */
        if (o == &mact_ops_ref && want > MACT_ISA_SCALAR) {
#if !defined(__x86_64__)
            if (err && errlen) snprintf(err, errlen, "x86 kernels were asked for; this build has none");
            return NULL;
#endif
        }
        return o;
    }
    default:
        if (err && errlen) snprintf(err, errlen, "unknown kernels choice %d", kernels);
        return NULL;
    }
}

int mact_ops_kernels(const mact_ops *ops) { return ops->kernels; }
int mact_ops_isa(const mact_ops *ops) { return ops->isa; }
const char *mact_ops_name(const mact_ops *ops) { return ops->name; }

int mact_kernels_effective_precision(const mact_ops *ops, int prec)
{
    if (prec == MACT_PREC_INT8 && !ops->gemm_i8) prec = MACT_PREC_BF16;
    if (prec == MACT_PREC_BF16 && !ops->has_bf16) prec = MACT_PREC_FP32;
    return prec;
}

int mact_kctx_init(mact_kctx *kc, const mact_ops *ops, int prec, mact_pool *pool, size_t scratch0,
                   size_t scratch0_worker, size_t scratch1)
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
        const size_t want[2] = {t == 0 ? scratch0 : scratch0_worker, scratch1};
        for (int b = 0; b < 2; b++) {
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

/* bf16: M rows of ceil(K / 2) pairs; int8: M rows of ceil(K / 4) quads plus a scale and a zero point per row */
size_t mact_gemm_scratch0(int64_t M, int64_t K)
{
    const size_t bf = (size_t)M * (size_t)((K + 1) / 2) * 4, i8 = (size_t)M * (size_t)((K + 3) / 4) * 4 + (size_t)M * 8;
    return (bf > i8 ? bf : i8) + 64;
}

size_t mact_gemm_scratch1(int64_t M) { return (size_t)(M + 6) * 64 * sizeof(float); }

int mact_tensor_pack(const mact_kctx *kc, mact_tensor *t, int lm)
{
    int fmt;
    size_t bytes;
    t->pk = NULL;
    if (!t->data || t->ndim != 2 ||
        !mact_pack_plan(kc->ops, t->dtype, t->shape[0], t->shape[1], kc->prec, lm, &fmt, &bytes))
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
