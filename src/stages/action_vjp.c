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

/* the pass's widths and where it reads: h rows of the horizon H the tape is planned for */
typedef struct {
    struct mact_session *s;
    const mact_rtc_vjp_ctx *cx;
    const mact_config *c;
    const mact_ae_weights *w;
    const mact_kctx *kc;
    int64_t h, AH, A, hd, I, NH, L, n, H;
    float scale, eps;
} vjp_pass;

/* tape slots, each planned for the whole horizon H */
/* the residual stream before norm i (3 per block, then the final norm) */
static float *tape_z(const vjp_pass *p, int64_t i) { return p->s->vj_z + i * p->H * p->AH; }
/* self-attention q | k | v as projected */
static float *tape_qkv(const vjp_pass *p, int64_t l) { return p->s->vj_qkv + l * p->H * 3 * p->AH; }
/* q | k after the qk norm and RoPE */
static float *tape_qk(const vjp_pass *p, int64_t l) { return p->s->vj_qk + l * p->H * 2 * p->AH; }
/* self-attention probabilities [NH, h, h] */
static float *tape_p(const vjp_pass *p, int64_t l) { return p->s->vj_p + l * p->NH * p->H * p->H; }
/* cross-attention q as projected */
static float *tape_xq(const vjp_pass *p, int64_t l) { return p->s->vj_xq + l * p->H * p->AH; }
/* ... after the q norm */
static float *tape_xqn(const vjp_pass *p, int64_t l) { return p->s->vj_xqn + l * p->H * p->AH; }
static float *tape_gate(const vjp_pass *p, int64_t l) { return p->s->vj_gate + l * p->H * p->I; }
static float *tape_up(const vjp_pass *p, int64_t l) { return p->s->vj_up + l * p->H * p->I; }

/* ---- the forward, keeping the tape ---- */

/* block l's self-attention: z1 = z0 + g_msa * out(attn(rope(norm(q)), rope(norm(k)), v)) */
static void fwd_self_attention(const vjp_pass *p, int64_t l, const float *m)
{
    const mact_kctx *kc = p->kc;
    const mact_ae_block *b = &p->w->blocks[l];
    const int64_t h = p->h, AH = p->AH, hd = p->hd, NH = p->NH;
    const float scale = p->scale, eps = p->eps;
    float *u = p->s->vj_u, *att = p->s->vj_att, *z0 = tape_z(p, 3 * l), *z1 = tape_z(p, 3 * l + 1);
    float *qkv = tape_qkv(p, l), *qk = tape_qk(p, l), *P = tape_p(p, l);
    mact_rmsnorm(kc, u, z0, NULL, eps, h, AH, AH);
    mact_modulate_rows(kc, u, h, AH, m, m + AH);
    mact_matmul(kc, qkv, u, &b->qkv_w, mact_f32(&b->qkv_b), h);
    for (int64_t i = 0; i < h; i++) memcpy(qk + i * 2 * AH, qkv + i * 3 * AH, (size_t)(2 * AH) * sizeof(float));
    if (p->c->ae_qk_norm) mact_rmsnorm(kc, qk, qk, NULL, eps, h * 2 * NH, hd, hd);
    if (p->c->ae_rope) {
        mact_rope(qk, 2 * AH, h, (int)NH, (int)hd, p->s->a_rope_cos, p->s->a_rope_sin);
        mact_rope(qk + AH, 2 * AH, h, (int)NH, (int)hd, p->s->a_rope_cos, p->s->a_rope_sin);
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
                const float pj = Ph[i * h + j], *v = qkv + j * 3 * AH + 2 * AH + hh * hd;
                for (int64_t d = 0; d < hd; d++) o[d] += pj * v[d];
            }
        }
    }
    mact_matmul(kc, u, att, &b->out_w, mact_f32(&b->out_b), h);
    memcpy(z1, z0, (size_t)(h * AH) * sizeof(float));
    mact_gated_add_rows(kc, z1, u, m + 2 * AH, h, AH);
}

/* block l's cross-attention to the fixed context: z2 = z1 + g_mca * xo(attn(qn(xq(u)), K, V)) */
static void fwd_cross_attention(const vjp_pass *p, int64_t l, const float *m)
{
    const mact_kctx *kc = p->kc;
    const mact_ae_block *b = &p->w->blocks[l];
    const mact_rtc_vjp_ctx *cx = p->cx;
    const int64_t h = p->h, AH = p->AH, hd = p->hd, NH = p->NH, n = p->n;
    float *u = p->s->vj_u, *att = p->s->vj_att, *z1 = tape_z(p, 3 * l + 1), *z2 = tape_z(p, 3 * l + 2);
    mact_rmsnorm(kc, u, z1, NULL, p->eps, h, AH, AH);
    mact_modulate_rows(kc, u, h, AH, m + 3 * AH, m + 4 * AH);
    mact_matmul(kc, tape_xq(p, l), u, &b->xq_w, mact_f32(&b->xq_b), h);
    if (p->c->ae_qk_norm) mact_rmsnorm(kc, tape_xqn(p, l), tape_xq(p, l), NULL, p->eps, h * NH, hd, hd);
    else memcpy(tape_xqn(p, l), tape_xq(p, l), (size_t)(h * AH) * sizeof(float));
    mact_attention(kc, att, AH, tape_xqn(p, l), AH, cx->kctx + l * n * AH, cx->vctx + l * n * AH, AH, h, n, (int)NH,
                   (int)NH, (int)hd, p->scale, NULL, cx->enc, p->s->scores);
    mact_matmul(kc, u, att, &b->xo_w, mact_f32(&b->xo_b), h);
    memcpy(z2, z1, (size_t)(h * AH) * sizeof(float));
    mact_gated_add_rows(kc, z2, u, m + 5 * AH, h, AH);
}

/* block l's SwiGLU MLP: z3 = z2 + g_mlp * down(silu(gate) * up) */
static void fwd_mlp(const vjp_pass *p, int64_t l, const float *m)
{
    const mact_kctx *kc = p->kc;
    const mact_ae_block *b = &p->w->blocks[l];
    const int64_t h = p->h, AH = p->AH;
    float *u = p->s->vj_u, *t1 = p->s->vj_t1, *z2 = tape_z(p, 3 * l + 2), *z3 = tape_z(p, 3 * l + 3);
    mact_rmsnorm(kc, u, z2, NULL, p->eps, h, AH, AH);
    mact_modulate_rows(kc, u, h, AH, m + 6 * AH, m + 7 * AH);
    mact_matmul(kc, tape_gate(p, l), u, &b->gate_w, mact_f32(&b->gate_b), h);
    mact_matmul(kc, tape_up(p, l), u, &b->up_w, mact_f32(&b->up_b), h);
    mact_silu_mul(kc, t1, tape_gate(p, l), tape_up(p, l), h * p->I);
    mact_matmul(kc, u, t1, &b->down_w, mact_f32(&b->down_b), h);
    memcpy(z3, z2, (size_t)(h * AH) * sizeof(float));
    mact_gated_add_rows(kc, z3, u, m + 8 * AH, h, AH);
}

/* ---- the backward: gz = dL/dz with L = <e, v> ---- */

/* through a gated residual branch z' = z + gate * branch: gu = gate * gz [h, AH] */
static void gate_bwd(const vjp_pass *p, float *gu, const float *gz, const float *gate)
{
    for (int64_t i = 0; i < p->h; i++)
        for (int64_t d = 0; d < p->AH; d++) gu[i * p->AH + d] = gate[d] * gz[i * p->AH + d];
}

/* through a modulation u = norm(z) * (1 + scale) + shift: gu *= 1 + scale [h, AH] */
static void modulate_bwd(const vjp_pass *p, float *gu, const float *scale)
{
    for (int64_t i = 0; i < p->h; i++)
        for (int64_t d = 0; d < p->AH; d++) gu[i * p->AH + d] *= 1.f + scale[d];
}

/* through the final projection, its modulation and norm: gz from e */
static void bwd_final(const vjp_pass *p, const float *e)
{
    const float *mf = p->cx->mod + p->L * 9 * p->AH;
    float *gu = p->s->vj_gu;
    tmatmul(p->s, gu, p->AH, e, p->A, &p->w->final_w, p->h, p->A, p->AH, 0);  /* final_w [A, AH] */
    modulate_bwd(p, gu, mf + p->AH);
    rms_bwd(p->s->vj_gz, p->AH, tape_z(p, 3 * p->L), p->AH, gu, p->AH, p->h, p->AH, p->eps, 0);
}

/* MLP: z3 = z2 + g_mlp * down(silu(gate) * up) */
static void bwd_mlp(const vjp_pass *p, int64_t l, const float *m)
{
    struct mact_session *s = p->s;
    const mact_ae_block *b = &p->w->blocks[l];
    const int64_t h = p->h, AH = p->AH;
    float *gz = s->vj_gz, *gu = s->vj_gu, *t1 = s->vj_t1, *t2 = s->vj_t2;
    gate_bwd(p, gu, gz, m + 8 * AH);
    tmm(s, t1, gu, &b->down_w, h, 0);  /* d hmid [h, I] */
    const float *G = tape_gate(p, l), *U = tape_up(p, l);
    for (int64_t k = 0; k < h * p->I; k++) {
        const float g = G[k], sg = 1.f / (1.f + expf(-g)), gh = t1[k];
        t2[k] = gh * U[k] * sg * (1.f + g * (1.f - sg));  /* d gate */
        t1[k] = gh * g * sg;                              /* d up */
    }
    tmm(s, gu, t2, &b->gate_w, h, 0);
    tmm(s, gu, t1, &b->up_w, h, 1);
    modulate_bwd(p, gu, m + 7 * AH);
    rms_bwd(gz, AH, tape_z(p, 3 * l + 2), AH, gu, AH, h, AH, p->eps, 1);
}

/* one head hh of the cross-attention: its probabilities recomputed from the stored normed q and the context,
 * then dq [h, hd] into s->vj_gq's head columns from d att */
static void bwd_cross_attention_head(const vjp_pass *p, int64_t l, int64_t hh)
{
    struct mact_session *s = p->s;
    const int64_t h = p->h, AH = p->AH, hd = p->hd, n = p->n;
    const float scale = p->scale;
    const float *K = p->cx->kctx + l * n * AH, *V = p->cx->vctx + l * n * AH;
    float *kt = s->vj_kt, *vt = s->vj_vt, *S = s->vj_s, *dP = s->vj_dp;
    for (int64_t j = 0; j < n; j++) {
        memcpy(kt + j * hd, K + j * AH + hh * hd, (size_t)hd * sizeof(float));
        memcpy(vt + j * hd, V + j * AH + hh * hd, (size_t)hd * sizeof(float));
    }
    const mact_tensor Kt = {.dtype = MACT_F32, .stored_dtype = MACT_F32, .ndim = 2, .shape = {n, hd}, .data = kt},
                      Vt = {.dtype = MACT_F32, .stored_dtype = MACT_F32, .ndim = 2, .shape = {n, hd}, .data = vt};
    mact_matmul_ex(p->kc, S, n, tape_xqn(p, l) + hh * hd, AH, &Kt, NULL, h, n, hd);  /* q k^T */
    for (int64_t k = 0; k < h * n; k++) S[k] *= scale;
    softmax_rows(S, h, n, p->cx->enc);
    mact_matmul_ex(p->kc, dP, n, s->vj_att + hh * hd, AH, &Vt, NULL, h, n, hd);    /* dO v^T */
    for (int64_t i = 0; i < h; i++) {
        float *pr = S + i * n, *dr = dP + i * n, D = dotf(pr, dr, n);
        for (int64_t j = 0; j < n; j++) dr[j] = scale * pr[j] * (dr[j] - D);
    }
    tmatmul(s, s->vj_gq + hh * hd, AH, dP, n, &Kt, h, n, hd, 0);  /* dq = dS k */
}

/* cross-attention: z2 = z1 + g_mca * xo(attn(qn(xq(u)), K, V)) */
static void bwd_cross_attention(const vjp_pass *p, int64_t l, const float *m)
{
    struct mact_session *s = p->s;
    const mact_ae_block *b = &p->w->blocks[l];
    const int64_t h = p->h, AH = p->AH, hd = p->hd, NH = p->NH;
    float *gz = s->vj_gz, *gu = s->vj_gu, *gq = s->vj_gq, *t2 = s->vj_t2;
    gate_bwd(p, gu, gz, m + 5 * AH);
    tmm(s, s->vj_att, gu, &b->xo_w, h, 0);  /* d att [h, AH] */
    for (int64_t hh = 0; hh < NH; hh++) bwd_cross_attention_head(p, l, hh);
    if (p->c->ae_qk_norm) {
        rms_bwd(t2, hd, tape_xq(p, l), hd, gq, hd, h * NH, hd, p->eps, 0);
        tmm(s, gu, t2, &b->xq_w, h, 0);
    } else
        tmm(s, gu, gq, &b->xq_w, h, 0);
    modulate_bwd(p, gu, m + 4 * AH);
    rms_bwd(gz, AH, tape_z(p, 3 * l + 1), AH, gu, AH, h, AH, p->eps, 1);
}

/* one head hh of the self-attention: dS [h, h] from d att (in s->vj_att) and the taped probabilities, then
 * d (q | k | v) into g3 [h, 3 AH]'s head columns */
static void bwd_self_attention_head(const vjp_pass *p, int64_t l, int64_t hh, float *g3, float *dS)
{
    const int64_t h = p->h, AH = p->AH, hd = p->hd;
    const float scale = p->scale, *att = p->s->vj_att, *qkv = tape_qkv(p, l), *qk = tape_qk(p, l);
    const float *Ph = tape_p(p, l) + hh * h * h;
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

/* self-attention: z1 = z0 + g_msa * out(attn(rope(norm(q)), rope(norm(k)), v)) */
static void bwd_self_attention(const vjp_pass *p, int64_t l, const float *m)
{
    struct mact_session *s = p->s;
    const mact_ae_block *b = &p->w->blocks[l];
    const int64_t h = p->h, AH = p->AH, hd = p->hd, NH = p->NH;
    const float *qkv = tape_qkv(p, l);
    float *gz = s->vj_gz, *gu = s->vj_gu, *g3 = s->vj_t2, *dS = s->vj_dp;  /* g3: d (q | k | v) [h, 3 AH] */
    gate_bwd(p, gu, gz, m + 2 * AH);
    tmm(s, s->vj_att, gu, &b->out_w, h, 0);  /* d att [h, AH] */
    for (int64_t hh = 0; hh < NH; hh++) bwd_self_attention_head(p, l, hh, g3, dS);
    if (p->c->ae_rope) {
        rope_bwd(g3, 3 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
        rope_bwd(g3 + AH, 3 * AH, h, (int)NH, (int)hd, s->a_rope_cos, s->a_rope_sin);
    }
    if (p->c->ae_qk_norm)  /* the q | k heads of each row: 2 NH rows of hd, in place (rms_bwd reads gy[d] only to
                            * write gz[d]) */
        for (int64_t i = 0; i < h; i++)
            rms_bwd(g3 + i * 3 * AH, hd, qkv + i * 3 * AH, hd, g3 + i * 3 * AH, hd, 2 * NH, hd, p->eps, 0);
    tmm(s, gu, g3, &b->qkv_w, h, 0);
    modulate_bwd(p, gu, m + AH);
    rms_bwd(gz, AH, tape_z(p, 3 * l), AH, gu, AH, h, AH, p->eps, 1);
}

void mact_rtc_vjp(struct mact_session *s, const mact_rtc_vjp_ctx *cx, const float *x, int h_, float time, float *e)
{
    if (!s->vj_ready) {  /* the tape's pages are touched only by sessions that use vjp guidance (session.c) */
        memset(s->vj_z, 0, s->vj_bytes);
        s->vj_ready = 1;
    }
    const mact_config *c = &s->m->cfg;
    const vjp_pass p = {s, cx, c, &s->m->ae, &s->kc, h_, c->ae_hidden, c->max_action_dim, c->ae_head_dim,
                        c->ae_inter, c->ae_heads, c->n_layers, cx->n, c->max_action_horizon,
                        1.f / sqrtf((float)c->ae_head_dim), c->ae_eps};
    const int64_t AH = p.AH, A = p.A, L = p.L, h = p.h;
    /* forward: the residual stream through every block, each block's activations on the tape */
    mact_matmul(p.kc, tape_z(&p, 0), x, &p.w->action_embed_w, mact_f32(&p.w->action_embed_b), h);
    for (int64_t l = 0; l < L; l++) {
        const float *m = cx->mod + l * 9 * AH;
        fwd_self_attention(&p, l, m);
        fwd_cross_attention(&p, l, m);
        fwd_mlp(&p, l, m);
    }
    /* backward: the blocks in reverse, each branch in reverse */
    bwd_final(&p, e);
    for (int64_t l = L - 1; l >= 0; l--) {
        const float *m = cx->mod + l * 9 * AH;
        bwd_mlp(&p, l, m);
        bwd_cross_attention(&p, l, m);
        bwd_self_attention(&p, l, m);
    }
    /* through action_embed [AH, A]: e += time * gz W */
    tmatmul(s, s->vj_gx, A, s->vj_gz, AH, &p.w->action_embed_w, h, AH, A, 0);
    for (int64_t k = 0; k < h * A; k++) e[k] += time * s->vj_gx[k];
}
