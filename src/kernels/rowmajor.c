/* The row-major matmul on a weight where the loader left it, in its stored dtype (the ops' mm_rows, or the
 * plain-C reference): the dispatcher's path for unpacked weights (kernels.c) and the centred int8 GEMM's mu W^T
 * (i8_split.c), which kernels.c itself calls, so it lives below both. */
#include "kernels/kernels.h"
#include "kernels/ops.h"

int mact_gemm_parallel(int64_t M, int64_t N, int64_t K) { return M * N * K > 200000; }

typedef struct {
    float *y;
    int64_t ldy, ldx, M, N, K;
    const float *x, *bias;
    const void *w;
    int dt, epi;
    void (*mm_rows)(float *, int64_t, const float *, int64_t, const void *, int, const float *, int64_t, int64_t,
                    int64_t, int64_t, int);
} rowmajor_job;

/* one block of 16 weight rows: the block's weights stay hot in L1/L2 across all M rows */
static void rowmajor_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    const rowmajor_job *j = arg;
    int64_t n0 = b * 16, n1 = n0 + 16 < j->N ? n0 + 16 : j->N;
    j->mm_rows(j->y, j->ldy, j->x, j->ldx, j->w, j->dt, j->bias, j->M, n0, n1, j->K, j->epi);
}

void mact_matmul_rowmajor(const mact_kctx *kc, float *y, int64_t ldy, const float *x, int64_t ldx, const void *w,
                          int dt, const float *bias, int64_t M, int64_t N, int64_t K, int epi)
{
    rowmajor_job j = {y, ldy, ldx, M, N, K, x, bias, w, dt, epi,
                      kc->ops->mm_rows ? kc->ops->mm_rows : mact_ref_mm_rows};
    mact_kctx_run(kc, (N + 15) / 16, mact_gemm_parallel(M, N, K), rowmajor_task, &j);
}
