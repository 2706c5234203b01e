/* The velocity's vector-Jacobian product for RTC's vjp guidance (mact.h MACT_RTC_VJP): e <- e + time * (dv/dx)^T e
 * at the trajectory x, what LeRobot's RTCProcessor gets from torch.autograd.grad(x1, x, err) with
 * x1 = x + time * v(x) (MolmoAct2's direction; docs/design.md "Real-time chunking").
 *
 * A reverse pass through the action expert with respect to its input trajectory only (no weight gradients): the
 * modulation (a function of t alone) and the cross-attention context K/V (a function of the LLM's keys/values) are
 * constants. The forward is recomputed here with every activation the backward reads kept in the session's tape
 * (s->vj_*, planned in model/session.c: no allocation in the flow loop); its matmuls, norms and the cross-attention
 * run on the session's kernels as velocity() does (exact fp32 in FP32 precision), the self-attention and every
 * backward step in plain fp32 C (in BF16 / INT8 precision the forward's GEMMs are the session's reduced ones,
 * so the product is taken at the same linearisation point the velocity was computed with). The backward's
 * products with a weight, grad_x = grad_y W for y = x W^T, read the weight where the loader left it (F32, BF16
 * or F16, converted on the fly) front to back in a fixed split of its rows (tmatmul below), so results do not
 * depend on the thread count. The cross-attention's backward recomputes its probabilities per head from the
 * stored normed q and the context (no [L, heads, h, n] tape). The tape costs ~70 MB of session memory at the
 * real widths (36 layers, H = 30), planned whether or not RTC is used.
 * The padded action dims: the velocity is masked there, so the incoming e is zero there and the product is taken
 * with it as it is; what the product puts in the padded dims is never read (the guided velocity and the Euler
 * update skip them). */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"
#include "model/session.h"

/* ---- grad_x[M, K] (=|+=) grad_y[M, N] . W[N, K], W row-major as stored ----
 * W is read front to back: the N rows are cut into a fixed number of parts (MACT_VJP_PARTS, independent of the
 * thread count), each part's rows in slabs of NR consecutive rows (NR * K contiguous values, what the prefetchers
 * follow), a slab converted to fp32 into the thread's panel as 64-column blocks [K / 64][NR][64], and multiplied
 * into the part's own partial sums [M, Kp]; the parts' sums are then added in part order. Every output element is
 * therefore the same sum in the same order whichever thread computes which part. */
#define TB 64  /* columns of a block */
#define NR MACT_VJP_NR  /* rows of W per slab */

typedef struct {
    float *gx, *part, *panel;
    const float *gy;
    int64_t ldx, ldy, M, N, K, Kp, nparts, panel_stride;
    const void *w;
    int dt, acc;
} tmm_job;

/* On x86 the product is compiled for AVX-512, AVX2 and baseline and picked at load (GCC / clang target_clones,
 * an ifunc): the same C, vectorised; with -std=c11 nothing is contracted into FMAs, so every clone rounds the same
 * way. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define MACT_VJP_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MACT_VJP_CLONES
#endif

typedef float vf16 __attribute__((vector_size(64)));  /* 16 floats: one zmm, two ymm or four xmm */

/* R rows of one 64-column block of the partial sums += gy[rows, n0 .. n0 + nr] . panel block; the R x 4
 * accumulators stay in registers across the slab's rows */
#define TMM_ROWS(R)                                                                                            \
    static inline __attribute__((always_inline)) void tmm_rows##R(float *pp, int64_t ldp, const float *gy, int64_t ldy, const float *blk,    \
                                   int nr)                                                                     \
    {                                                                                                          \
        vf16 acc[R][4];                                                                                        \
        for (int r = 0; r < R; r++)                                                                            \
            for (int q = 0; q < 4; q++) memcpy(&acc[r][q], pp + r * ldp + 16 * q, sizeof(vf16));               \
        for (int n = 0; n < nr; n++) {                                                                         \
            vf16 w[4];                                                                                         \
            memcpy(w, blk + n * TB, sizeof w);                                                                 \
            for (int r = 0; r < R; r++) {                                                                      \
                const float g = gy[r * ldy + n];                                                               \
                for (int q = 0; q < 4; q++) acc[r][q] += g * w[q];                                             \
            }                                                                                                  \
        }                                                                                                      \
        for (int r = 0; r < R; r++)                                                                            \
            for (int q = 0; q < 4; q++) memcpy(pp + r * ldp + 16 * q, &acc[r][q], sizeof(vf16));               \
    }
TMM_ROWS(4)
TMM_ROWS(1)

MACT_VJP_CLONES static void tmm_part(void *arg, int64_t p, int tid)
{
    const tmm_job *j = arg;
    const int64_t n_begin = p * j->N / j->nparts, n_end = (p + 1) * j->N / j->nparts, K = j->K, Kp = j->Kp;
    const int64_t nkb = Kp / TB;
    float *part = j->part + p * j->M * Kp, *panel = j->panel + (int64_t)tid * j->panel_stride;
    memset(part, 0, (size_t)(j->M * Kp) * sizeof(float));
    for (int64_t n0 = n_begin; n0 < n_end; n0 += NR) {
        const int nr = (int)(n_end - n0 < NR ? n_end - n0 : NR);
        for (int n = 0; n < nr; n++) {  /* row n0 + n of W into panel[kb][n][:] */
            const int64_t off = (n0 + n) * K;
            for (int64_t kb = 0; kb < nkb; kb++) {
                float *dst = panel + (kb * NR + n) * TB;
                const int64_t k0 = kb * TB, nk = K - k0 < TB ? K - k0 : TB;
                if (j->dt == MACT_F32) memcpy(dst, (const float *)j->w + off + k0, (size_t)nk * sizeof(float));
                else if (j->dt == MACT_BF16) {
                    const uint16_t *src = (const uint16_t *)j->w + off + k0;
                    for (int64_t k = 0; k < nk; k++) {
                        uint32_t u = (uint32_t)src[k] << 16;
                        memcpy(&dst[k], &u, 4);
                    }
                } else
                    for (int64_t k = 0; k < nk; k++) dst[k] = mact_load_f32(j->w, j->dt, off + k0 + k);
                for (int64_t k = nk; k < TB; k++) dst[k] = 0.f;
            }
        }
        for (int64_t kb = 0; kb < nkb; kb++) {
            const float *blk = panel + kb * NR * TB;
            int64_t m = 0;
            for (; m + 4 <= j->M; m += 4) tmm_rows4(part + m * Kp + kb * TB, Kp, j->gy + m * j->ldy + n0, j->ldy, blk, nr);
            for (; m < j->M; m++) tmm_rows1(part + m * Kp + kb * TB, Kp, j->gy + m * j->ldy + n0, j->ldy, blk, nr);
        }
    }
}

/* gx[:, block b] (=|+=) the parts' sums in part order */
static void tmm_reduce(void *arg, int64_t b, int tid)
{
    (void)tid;
    const tmm_job *j = arg;
    const int64_t k0 = b * TB, nk = j->K - k0 < TB ? j->K - k0 : TB;
    for (int64_t m = 0; m < j->M; m++) {
        float *dst = j->gx + m * j->ldx + k0;
        for (int64_t k = 0; k < nk; k++) {
            float acc = j->part[m * j->Kp + k0 + k];
            for (int64_t p = 1; p < j->nparts; p++) acc += j->part[(p * j->M + m) * j->Kp + k0 + k];
            dst[k] = j->acc ? dst[k] + acc : acc;
        }
    }
}

static void tmatmul(const struct mact_session *s, float *gx, int64_t ldx, const float *gy, int64_t ldy,
                    const mact_tensor *W, int64_t M, int64_t N, int64_t K, int acc)
{
    const mact_kctx *kc = &s->kc;
    int64_t parts = (N + NR - 1) / NR;
    if (parts > MACT_VJP_PARTS) parts = MACT_VJP_PARTS;
    tmm_job j = {gx, s->vj_part, s->vj_panel, gy, ldx, ldy, M, N, K, (K + TB - 1) / TB * TB, parts,
                 s->vj_panel_stride, W->data, W->dtype, acc};
    const int par = mact_gemm_parallel(M, N, K);
    mact_kctx_run(kc, parts, par, tmm_part, &j);
    mact_kctx_run(kc, j.Kp / TB, par && parts * M * K > 65536, tmm_reduce, &j);
}

/* full-width product with a weight [N, K]: gx[M, K] = gy[M, N] W */
static void tmm(const struct mact_session *s, float *gx, const float *gy, const mact_tensor *W, int64_t M, int acc)
{
    tmatmul(s, gx, W->shape[1], gy, W->shape[0], W, M, W->shape[0], W->shape[1], acc);
}

/* ---- elementwise backward pieces ---- */

/* y = z / sqrt(mean(z^2) + eps) over rows of dim (z rows ldz apart): gz (=|+=) r (gy - y mean(gy y)) */
static void rms_bwd(float *gz, int64_t ldg, const float *z, int64_t ldz, const float *gy, int64_t ldy, int64_t rows,
                    int64_t dim, float eps, int acc)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *zr = z + i * ldz, *gr = gy + i * ldy;
        float *o = gz + i * ldg;
        double ss = 0, gzd = 0;
        for (int64_t d = 0; d < dim; d++) {
            ss += (double)zr[d] * zr[d];
            gzd += (double)gr[d] * zr[d];
        }
        const double r = 1.0 / sqrt(ss / (double)dim + (double)eps);
        const float rf = (float)r, c = (float)(gzd / (double)dim * r * r * r);  /* mean(gy y) * r = r^3 mean(gy z) */
        for (int64_t d = 0; d < dim; d++) {
            const float v = rf * gr[d] - c * zr[d];
            o[d] = acc ? o[d] + v : v;
        }
    }
}

/* the transpose of NeoX rotate-half RoPE (a rotation by -angle), in place on g [n, ld], heads of hd */
static void rope_bwd(float *g, int64_t ld, int64_t n, int heads, int hd, const float *cos_t, const float *sin_t)
{
    const int half = hd / 2;
    for (int64_t p = 0; p < n; p++)
        for (int h = 0; h < heads; h++) {
            float *x = g + p * ld + (int64_t)h * hd;
            const float *c = cos_t + p * half, *s = sin_t + p * half;
            for (int i = 0; i < half; i++) {
                const float a = x[i], b = x[i + half];
                x[i] = a * c[i] + b * s[i];
                x[i + half] = b * c[i] - a * s[i];
            }
        }
}

static float dotf(const float *a, const float *b, int64_t n)
{
    float s = 0.f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* softmax rows in place over n columns (masked columns: key_ok[j] == 0 -> 0) */
static void softmax_rows(float *s, int64_t rows, int64_t n, const uint8_t *key_ok)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = s + i * n, mx = -INFINITY, sum = 0.f;
        for (int64_t j = 0; j < n; j++)
            if (!key_ok || key_ok[j]) mx = r[j] > mx ? r[j] : mx;
        for (int64_t j = 0; j < n; j++) {
            r[j] = (!key_ok || key_ok[j]) ? expf(r[j] - mx) : 0.f;
            sum += r[j];
        }
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        for (int64_t j = 0; j < n; j++) r[j] *= inv;
    }
}

/* ---- the pass ---- */

void mact_rtc_vjp(struct mact_session *s, const mact_rtc_vjp_ctx *cx, const float *x, int h_, float time, float *e)
{
    if (!s->vj_ready) {  /* the tape's pages are touched only by sessions that use vjp guidance (session.c) */
        memset(s->vj_z, 0, s->vj_bytes);
        s->vj_ready = 1;
    }
    const mact_config *c = &s->m->cfg;
    const mact_ae_weights *w = &s->m->ae;
    const mact_kctx *kc = &s->kc;
    const int64_t h = h_, AH = c->ae_hidden, A = c->max_action_dim, hd = c->ae_head_dim, I = c->ae_inter,
                  NH = c->ae_heads, L = c->n_layers, n = cx->n, H = c->max_action_horizon;
    const float scale = 1.f / sqrtf((float)hd), eps = c->ae_eps;
    /* tape slots, each planned for the whole horizon H */
#define ZS(i) (s->vj_z + (int64_t)(i) * H * AH)        /* residual stream before norm i (3 per block, final) */
#define QKV(l) (s->vj_qkv + (int64_t)(l) * H * 3 * AH) /* self-attention q | k | v as projected */
#define QK(l) (s->vj_qk + (int64_t)(l) * H * 2 * AH)   /* q | k after the qk norm and RoPE */
#define PS(l) (s->vj_p + (int64_t)(l) * NH * H * H)    /* self-attention probabilities [NH, h, h] */
#define XQ(l) (s->vj_xq + (int64_t)(l) * H * AH)       /* cross-attention q as projected */
#define XQN(l) (s->vj_xqn + (int64_t)(l) * H * AH)     /* ... after the q norm */
#define GATE(l) (s->vj_gate + (int64_t)(l) * H * I)
#define UP(l) (s->vj_up + (int64_t)(l) * H * I)
    float *u = s->vj_u, *att = s->vj_att, *t1 = s->vj_t1;

    /* forward */
    mact_matmul(kc, ZS(0), x, &w->action_embed_w, mact_f32(&w->action_embed_b), h);
    for (int64_t l = 0; l < L; l++) {
        const mact_ae_block *b = &w->blocks[l];
        const float *m = cx->mod + l * 9 * AH;
        float *z0 = ZS(3 * l), *z1 = ZS(3 * l + 1), *z2 = ZS(3 * l + 2), *z3 = ZS(3 * l + 3);
        float *qkv = QKV(l), *qk = QK(l), *P = PS(l);
        /* self-attention */
        mact_rmsnorm(kc, u, z0, NULL, eps, h, AH, AH);
        mact_modulate_rows(kc, u, h, AH, m, m + AH);
        mact_matmul(kc, qkv, u, &b->qkv_w, mact_f32(&b->qkv_b), h);
        for (int64_t i = 0; i < h; i++) memcpy(qk + i * 2 * AH, qkv + i * 3 * AH, (size_t)(2 * AH) * sizeof(float));
        if (c->ae_qk_norm) mact_rmsnorm(kc, qk, qk, NULL, eps, h * 2 * NH, hd, hd);
        if (c->ae_rope) {
            mact_rope(qk, 2 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
            mact_rope(qk + AH, 2 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
        }
        for (int64_t hh = 0; hh < NH; hh++) {
            float *Ph = P + hh * h * h;
            for (int64_t i = 0; i < h; i++)
                for (int64_t j = 0; j < h; j++)
                    Ph[i * h + j] = scale * dotf(qk + i * 2 * AH + hh * hd, qk + j * 2 * AH + AH + hh * hd, hd);
            softmax_rows(Ph, h, h, NULL);
            for (int64_t i = 0; i < h; i++) {
                float *o = att + i * AH + hh * hd;
                memset(o, 0, (size_t)hd * sizeof(float));
                for (int64_t j = 0; j < h; j++) {
                    const float p = Ph[i * h + j], *v = qkv + j * 3 * AH + 2 * AH + hh * hd;
                    for (int64_t d = 0; d < hd; d++) o[d] += p * v[d];
                }
            }
        }
        mact_matmul(kc, u, att, &b->out_w, mact_f32(&b->out_b), h);
        memcpy(z1, z0, (size_t)(h * AH) * sizeof(float));
        mact_gated_add_rows(kc, z1, u, m + 2 * AH, h, AH);
        /* cross-attention to the fixed context */
        mact_rmsnorm(kc, u, z1, NULL, eps, h, AH, AH);
        mact_modulate_rows(kc, u, h, AH, m + 3 * AH, m + 4 * AH);
        mact_matmul(kc, XQ(l), u, &b->xq_w, mact_f32(&b->xq_b), h);
        if (c->ae_qk_norm) mact_rmsnorm(kc, XQN(l), XQ(l), NULL, eps, h * NH, hd, hd);
        else memcpy(XQN(l), XQ(l), (size_t)(h * AH) * sizeof(float));
        mact_attention(kc, att, AH, XQN(l), AH, cx->kctx + l * n * AH, cx->vctx + l * n * AH, AH, h, n, (int)NH,
                       (int)NH, (int)hd, scale, NULL, cx->enc, s->scores);
        mact_matmul(kc, u, att, &b->xo_w, mact_f32(&b->xo_b), h);
        memcpy(z2, z1, (size_t)(h * AH) * sizeof(float));
        mact_gated_add_rows(kc, z2, u, m + 5 * AH, h, AH);
        /* SwiGLU MLP */
        mact_rmsnorm(kc, u, z2, NULL, eps, h, AH, AH);
        mact_modulate_rows(kc, u, h, AH, m + 6 * AH, m + 7 * AH);
        mact_matmul(kc, GATE(l), u, &b->gate_w, mact_f32(&b->gate_b), h);
        mact_matmul(kc, UP(l), u, &b->up_w, mact_f32(&b->up_b), h);
        mact_silu_mul(kc, t1, GATE(l), UP(l), h * I);
        mact_matmul(kc, u, t1, &b->down_w, mact_f32(&b->down_b), h);
        memcpy(z3, z2, (size_t)(h * AH) * sizeof(float));
        mact_gated_add_rows(kc, z3, u, m + 8 * AH, h, AH);
    }

    /* backward: gz = dL/dz with L = <e, v> */
    float *gz = s->vj_gz, *gu = s->vj_gu, *gq = s->vj_gq, *t2 = s->vj_t2;
    const float *mf = cx->mod + L * 9 * AH;
    tmatmul(s, gu, AH, e, A, &w->final_w, h, A, AH, 0);  /* final_w [A, AH] */
    for (int64_t i = 0; i < h; i++)
        for (int64_t d = 0; d < AH; d++) gu[i * AH + d] *= 1.f + mf[AH + d];
    rms_bwd(gz, AH, ZS(3 * L), AH, gu, AH, h, AH, eps, 0);
    for (int64_t l = L - 1; l >= 0; l--) {
        const mact_ae_block *b = &w->blocks[l];
        const float *m = cx->mod + l * 9 * AH;
        const float *z0 = ZS(3 * l), *z1 = ZS(3 * l + 1), *z2 = ZS(3 * l + 2);
        /* MLP: z3 = z2 + g_mlp * down(silu(gate) * up) */
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] = m[8 * AH + d] * gz[i * AH + d];
        tmm(s, t1, gu, &b->down_w, h, 0);  /* d hmid [h, I] */
        {
            const float *G = GATE(l), *U = UP(l);
            for (int64_t k = 0; k < h * I; k++) {
                const float g = G[k], sg = 1.f / (1.f + expf(-g)), gh = t1[k];
                t2[k] = gh * U[k] * sg * (1.f + g * (1.f - sg));  /* d gate */
                t1[k] = gh * g * sg;                              /* d up */
            }
        }
        tmm(s, gu, t2, &b->gate_w, h, 0);
        tmm(s, gu, t1, &b->up_w, h, 1);
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] *= 1.f + m[7 * AH + d];
        rms_bwd(gz, AH, z2, AH, gu, AH, h, AH, eps, 1);
        /* cross-attention: z2 = z1 + g_mca * xo(attn(qn(xq(u)), K, V)) */
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] = m[5 * AH + d] * gz[i * AH + d];
        tmm(s, att, gu, &b->xo_w, h, 0);  /* d att [h, AH] */
        {
            const float *K = cx->kctx + l * n * AH, *V = cx->vctx + l * n * AH;
            float *kt = s->vj_kt, *vt = s->vj_vt, *S = s->vj_s, *dP = s->vj_dp;
            for (int64_t hh = 0; hh < NH; hh++) {
                for (int64_t j = 0; j < n; j++) {
                    memcpy(kt + j * hd, K + j * AH + hh * hd, (size_t)hd * sizeof(float));
                    memcpy(vt + j * hd, V + j * AH + hh * hd, (size_t)hd * sizeof(float));
                }
                const mact_tensor Kt = {.dtype = MACT_F32, .stored_dtype = MACT_F32, .ndim = 2, .shape = {n, hd},
                                        .data = kt},
                                  Vt = {.dtype = MACT_F32, .stored_dtype = MACT_F32, .ndim = 2, .shape = {n, hd},
                                        .data = vt};
                mact_matmul_ex(kc, S, n, XQN(l) + hh * hd, AH, &Kt, NULL, h, n, hd);  /* q k^T */
                for (int64_t k = 0; k < h * n; k++) S[k] *= scale;
                softmax_rows(S, h, n, cx->enc);
                mact_matmul_ex(kc, dP, n, att + hh * hd, AH, &Vt, NULL, h, n, hd);    /* dO v^T */
                for (int64_t i = 0; i < h; i++) {
                    float *pr = S + i * n, *dr = dP + i * n, D = dotf(pr, dr, n);
                    for (int64_t j = 0; j < n; j++) dr[j] = scale * pr[j] * (dr[j] - D);
                }
                tmatmul(s, gq + hh * hd, AH, dP, n, &Kt, h, n, hd, 0);  /* dq = dS k */
            }
        }
        if (c->ae_qk_norm) {
            rms_bwd(t2, hd, XQ(l), hd, gq, hd, h * NH, hd, eps, 0);
            tmm(s, gu, t2, &b->xq_w, h, 0);
        } else
            tmm(s, gu, gq, &b->xq_w, h, 0);
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] *= 1.f + m[4 * AH + d];
        rms_bwd(gz, AH, z1, AH, gu, AH, h, AH, eps, 1);
        /* self-attention: z1 = z0 + g_msa * out(attn(rope(norm(q)), rope(norm(k)), v)) */
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] = m[2 * AH + d] * gz[i * AH + d];
        tmm(s, att, gu, &b->out_w, h, 0);  /* d att [h, AH] */
        {
            const float *qkv = QKV(l), *qk = QK(l), *P = PS(l);
            float *g3 = t2, *dS = s->vj_dp;  /* g3: d (q | k | v) [h, 3 AH] */
            for (int64_t hh = 0; hh < NH; hh++) {
                const float *Ph = P + hh * h * h;
                for (int64_t i = 0; i < h; i++) {
                    const float *dO = att + i * AH + hh * hd;
                    float D = 0.f;
                    for (int64_t j = 0; j < h; j++) {
                        dS[i * h + j] = dotf(dO, qkv + j * 3 * AH + 2 * AH + hh * hd, hd);
                        D += Ph[i * h + j] * dS[i * h + j];
                    }
                    for (int64_t j = 0; j < h; j++) dS[i * h + j] = scale * Ph[i * h + j] * (dS[i * h + j] - D);
                }
                for (int64_t i = 0; i < h; i++) {
                    float *dq = g3 + i * 3 * AH + hh * hd, *dk = g3 + i * 3 * AH + AH + hh * hd,
                          *dv = g3 + i * 3 * AH + 2 * AH + hh * hd;
                    memset(dq, 0, (size_t)hd * sizeof(float));
                    memset(dk, 0, (size_t)hd * sizeof(float));
                    memset(dv, 0, (size_t)hd * sizeof(float));
                    for (int64_t j = 0; j < h; j++) {
                        const float sq = dS[i * h + j], sk = dS[j * h + i], pv = Ph[j * h + i];
                        const float *kj = qk + j * 2 * AH + AH + hh * hd, *qj = qk + j * 2 * AH + hh * hd,
                                    *dOj = att + j * AH + hh * hd;
                        for (int64_t d = 0; d < hd; d++) {
                            dq[d] += sq * kj[d];   /* dq_i = sum_j dS_ij k_j */
                            dk[d] += sk * qj[d];   /* dk_i = sum_j dS_ji q_j */
                            dv[d] += pv * dOj[d];  /* dv_i = sum_j P_ji dO_j */
                        }
                    }
                }
            }
            if (c->ae_rope) {
                rope_bwd(g3, 3 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
                rope_bwd(g3 + AH, 3 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
            }
            if (c->ae_qk_norm)  /* the q | k heads of each row: 2 NH rows of hd, in place (rms_bwd reads gy[d]
                                 * only to write gz[d]) */
                for (int64_t i = 0; i < h; i++)
                    rms_bwd(g3 + i * 3 * AH, hd, qkv + i * 3 * AH, hd, g3 + i * 3 * AH, hd, 2 * NH, hd, eps, 0);
        }
        tmm(s, gu, t2, &b->qkv_w, h, 0);
        for (int64_t i = 0; i < h; i++)
            for (int64_t d = 0; d < AH; d++) gu[i * AH + d] *= 1.f + m[AH + d];
        rms_bwd(gz, AH, z0, AH, gu, AH, h, AH, eps, 1);
    }
    /* through action_embed [AH, A]: e += time * gz W */
    tmatmul(s, s->vj_gx, A, gz, AH, &w->action_embed_w, h, AH, A, 0);
    for (int64_t k = 0; k < h * A; k++) e[k] += time * s->vj_gx[k];
#undef ZS
#undef QKV
#undef QK
#undef PS
#undef XQ
#undef XQN
#undef GATE
#undef UP
}
