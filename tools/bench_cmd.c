/* `mact bench [--model DIR | --preset libero|so101] [--threads N] [--precision fp32|bf16] [--iters N]`
 *
 * Loads a checkpoint (or synthesizes the full-size random one for the preset once, under
 * $MACT_CACHE or ~/.cache/mact), packs its weights (mact_model_pack), then runs the whole pipeline
 * on random pixel values and a prompt of ids BOS + n_img x (<im_start>, K x <im_patch>, <im_end>) +
 * text up to N tokens: one warm-up through mact_generate_from_ids, then --iters runs timing each stage
 * through the bodies the pipeline runs (model/session.h; the inputs are checked once, by the warm-up):
 *   vision  mact_vision_run (all images)
 *   llm     mact_embed_run + mact_attention_bias_run + mact_llm_layers_run (all layers; the last one K/V only)
 *   action  mact_encoder_mask_run + mact_action_generate_run (context projection + every flow step)
 *   act+rtc / act+vjp  mact_action_generate_run again with RTC guidance (identity / vjp) toward H - 2 random
 *           normalised previous rows (delay 2, execution horizon H, linear, max guidance weight 10), beside
 *           the plain stage (not in the total), and the per-flow-step ms of the three with their ratio
 * Prints per stage the median and min ms, GFLOP (counted from the config), GFLOP/s and the fraction of
 * the GEMM peak measured by a packed-GEMM microbenchmark in the same run (and the instruction-level
 * peak), plus cold start (load + pack), peak RSS, LLM prefill tokens/s and the action expert's weight
 * bandwidth per flow step, beside the rate at which the step's GEMMs alone read the same weights in the same
 * run at M = 1 (the read bound) and at M = H. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include "commands.h"
#include "common/cli.h"
#include "base/parse.h"
#include "base/clock.h"
#include "kernels/kernels.h"
#include "mact.h"
#include "mact_stages.h"
#include "model/session.h"
#include "synth/synth.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static float rnd_unit(void)  /* [-1, 1) */
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)(((g_rng * 2685821657736338717ULL) >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

/* ---- FLOPs from the config (2 per multiply-add; softmax, norms and activations not counted) ---- */

static double vision_flops(const mact_config *c, int n_img)
{
    const double P = (double)c->grid_h * c->grid_w, VH = c->vit_hidden, VQ = (double)c->vit_heads * c->vit_head_dim;
    const double PD = (double)c->patch * c->patch * 3, I = c->vit_inter;
    int last = 0;
    for (int t = 0; t < c->n_taps; t++) last = c->taps[t] > last ? c->taps[t] : last;
    double f = 2 * P * PD * VH;
    f += (last + 1) * (2 * P * VH * 3 * VQ + 2 * P * VQ * VH + 2 * P * VH * I * 2 + 2 * 2 * P * P * VQ);
    const double T = (double)c->pooled_h * c->pooled_w, W = (double)c->pool_h * c->pool_w;
    const double PIN = (double)c->n_taps * VH, PQ = (double)c->pool_heads * c->pool_head_dim;
    f += 2 * T * PIN * PQ + 2 * 2 * T * W * PIN * PQ + 2 * 2 * T * W * PQ + 2 * T * PQ * c->pool_hidden;
    double rows = c->use_sampler && !c->sampler_after_projector ? c->sampler_k : T;
    f += 2 * rows * c->pool_hidden * c->proj_inter * 2 + 2 * rows * c->proj_inter * c->d_model;
    if (c->use_sampler) {
        double C = c->sampler_c, K = c->sampler_k;
        f += 2 * C * c->sampler_hidden + 2 * c->sampler_hidden * 2 * K + K * 2 * (double)c->coord_hidden * C;
    }
    return f * n_img;
}

static double llm_flops(const mact_config *c, int n)
{
    const double N = n, D = c->d_model, qd = (double)c->n_heads * c->head_dim, kvd = (double)c->n_kv_heads * c->head_dim;
    const double I = c->ff_inter;
    double qkv = 2 * N * D * (qd + 2 * kvd);
    double rest = 2 * 2 * N * N * qd + 2 * N * qd * D + 2 * N * D * 2 * I + 2 * N * I * D;
    return c->n_layers * qkv + (c->n_layers - 1) * rest;  /* the last layer: K/V only */
}

static double action_flops(const mact_config *c, int n, int h, int steps)
{
    const double N = n, H = h, AH = c->ae_hidden, A = c->max_action_dim, I = c->ae_inter;
    const double kvd = (double)c->n_kv_heads * c->head_dim;
    double ctx = c->n_layers * 2 * 2 * N * kvd * AH;
    double layer = 2 * H * AH * 3 * AH + 2 * 2 * H * H * AH + 2 * H * AH * AH + 2 * H * AH * AH + 2 * 2 * H * N * AH +
                   2 * H * AH * AH + 2 * H * AH * I * 2 + 2 * H * I * AH;
    double step = 2 * H * A * AH + c->n_layers * layer + 2 * H * AH * A;
    return ctx + steps * step;
}

static double tensor_bytes(const mact_tensor *t, int prec)
{
    if (!t->data) return 0;
    double n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (double)t->shape[i];
    int esz = t->dtype == MACT_F32 ? 4 : 2;
    if (prec == MACT_PRECISION_BF16 && t->ndim == 2) esz = 2;  /* packed as bf16 */
    if (prec == MACT_PRECISION_INT8 && t->ndim == 2) esz = 1;  /* packed as int8 */
    return n * esz;
}

/* the weights one flow step's GEMMs read, in order (the modulation is cached per schedule): action embed,
 * each block's seven matrices, final; i < step_weights(m) */
static int step_weights(const mact_model *m) { return 7 * m->cfg.ae_layers + 2; }

static const mact_tensor *step_weight(const mact_model *m, int i)
{
    const mact_ae_weights *w = &m->ae;
    if (i == 0) return &w->action_embed_w;
    if (i == step_weights(m) - 1) return &w->final_w;
    const mact_ae_block *b = &w->blocks[(i - 1) / 7];
    const mact_tensor *ws[7] = {&b->qkv_w, &b->out_w, &b->xq_w, &b->xo_w, &b->gate_w, &b->up_w, &b->down_w};
    return ws[(i - 1) % 7];
}

/* weight bytes one flow step reads */
static double action_step_bytes(const mact_model *m, int prec)
{
    double b = 0;
    /* the expert's weights are int8 only when it is among the int8 components, else bf16 packs */
    if (prec == MACT_PRECISION_INT8 && !(m->int8_parts & MACT_PART_EXPERT)) prec = MACT_PRECISION_BF16;
    for (int i = 0; i < step_weights(m); i++) b += tensor_bytes(step_weight(m, i), prec);
    return b;
}

/* ---- the flow step's weight stream in this run: every GEMM of one step (step_weight) on the model's own
 * packed weights with M rows of random x, the median of 5 passes after
 * one (the same statistic as the stages': on a shared machine the best pass runs well ahead of a typical one);
 * GB/s of weights read. At M = 1 the kernels do almost no arithmetic per byte, so this is the rate at which
 * this machine streams these weights (the steps' memory bound, measured beside them); at M = H it is the
 * step's GEMMs without the rest of the step. 0 when out of memory. ---- */
static double expert_stream(const mact_kctx *kc, const mact_model *m, int64_t M, double bytes)
{
    const mact_config *c = &m->cfg;
    const int64_t AH = c->ae_hidden, I = c->ae_inter, A = c->max_action_dim;
    int64_t wid = 3 * AH > I ? 3 * AH : I;
    wid = wid > A ? wid : A;
    float *x = malloc(sizeof(float) * (size_t)(M * wid)), *y = malloc(sizeof(float) * (size_t)(M * wid));
    if (!x || !y) { free(x); free(y); return 0; }
    for (int64_t i = 0; i < M * wid; i++) x[i] = rnd_unit();
    double t[6];
    for (int r = 0; r < 6; r++) {
        double t0 = mact_clock_s();
        for (int i = 0; i < step_weights(m); i++) mact_matmul(kc, y, x, step_weight(m, i), NULL, M);
        t[r] = mact_clock_s() - t0;
    }
    free(x);
    free(y);
    return bytes / median(t + 1, 5) / 1e9;
}

/* ---- GEMM microbenchmark: the packed GEMM on synthetic bf16 weights, best of 5 ---- */
static double gemm_bench(const mact_ops *ops, mact_pool *pool, int64_t M, int64_t N, int64_t K, int prec)
{
    mact_kctx kc;
    if (mact_kctx_init(&kc, ops, prec, pool, mact_gemm_scratch0(M, K), mact_gemm_scratch0(32, K),
                       mact_gemm_scratch1(M), 0))
        return 0;
    uint16_t *w = malloc((size_t)(N * K) * 2);
    float *x = malloc((size_t)(M * K) * 4), *y = malloc((size_t)(M * N) * 4);
    if (!w || !x || !y) { free(w); free(x); free(y); mact_kctx_free(&kc); return 0; }
    for (int64_t i = 0; i < N * K; i++) {
        float f = rnd_unit() * 0.05f;
        uint32_t u;
        memcpy(&u, &f, 4);
        w[i] = (uint16_t)(u >> 16);
    }
    for (int64_t i = 0; i < M * K; i++) x[i] = rnd_unit();
    mact_tensor t = {.name = "bench", .dtype = MACT_BF16, .stored_dtype = MACT_BF16, .ndim = 2, .shape = {N, K},
                     .data = w};
    mact_tensor_pack(&kc, &t, 1);
    mact_matmul(&kc, y, x, &t, NULL, M);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = mact_clock_s();
        mact_matmul(&kc, y, x, &t, NULL, M);
        double dt = mact_clock_s() - t0;
        best = dt < best ? dt : best;
    }
    mact_tensor_unpack(&t);
    mact_kctx_free(&kc);
    free(w); free(x); free(y);
    return 2.0 * (double)M * (double)N * (double)K / best / 1e9;
}

/* the instruction each backend level's peak times (kernels' peak_gflops / peak_gops_i8) */
static const char *peak_insn(const mact_ops *o, int bf16)
{
    switch (mact_ops_kernels(o)) {
    case MACT_KERNELS_ARM_NEON:
    case MACT_KERNELS_ARM_DOTPROD: return "FMLA";
    case MACT_KERNELS_ARM_I8MM: return bf16 ? "BFMMLA" : "FMLA";
    case MACT_KERNELS_X86_AVX512_BF16: return bf16 ? "vdpbf16ps" : "vfmadd";
    default: return "vfmadd";
    }
}
static const char *peak_insn_i8(const mact_ops *o)
{
    const int k = mact_ops_kernels(o);
    return k == MACT_KERNELS_ARM_DOTPROD ? "SDOT" : k == MACT_KERNELS_ARM_I8MM ? "SMMLA" : "vpdpbusd";
}

static int bench_usage(FILE *f)
{
    fprintf(f, "usage: mact bench [--model DIR | --preset libero|so101] [--threads N] [--precision fp32|bf16|int8]\n"
            "                  [--int8-parts llm,vision,expert|all]\n"
               "                  [--iters N] [--no-pack] [--pack-cache DIR]\n"
               "  --preset: shapes (libero: N=130, H=10, 2 steps; so101: N=136, H=30, 10 steps, both 2 cameras);\n"
               "            without --model the full-size random checkpoint of the preset is synthesized once\n"
               "            into $MACT_CACHE/bench-PRESET (default ~/.cache/mact)\n"
               "  --no-pack: leave the weights unpacked (row-major kernels; bf16 precision then computes in fp32)\n"
               "  --pack-cache DIR: map the packed weights from a cache file there (written on the first run;\n"
               "            default $MACT_PACK_CACHE): the cold start then shows the cached load\n");
    return 2;
}

typedef struct {
    const char *model, *preset, *pack_cache;
    int threads, iters, no_pack;
    mact_precision precision;
    unsigned int8_parts;     /* --int8-parts (0: the library's default) */
} bench_args;

/* one run: the shapes, the inputs, the stage outputs and the per-iteration times */
typedef struct {
    int N, H, steps, n_img, K, action_dim, iters, n_prev, delay;
    int64_t P, PD, D, kvd, A, L, AH;
    float *pix, *embeds, *hidden, *bias, *keys, *values, *noise, *traj, *traj2, *traj3, *prev, *kctx, *vctx;
    int64_t *ids;
    uint8_t *enc;
    /* seconds per iteration: vision, llm, action, their total, the context projection, generate's preparation,
     * the action stage with RTC identity / vjp guidance */
    double *tv, *tl, *ta, *tt, *tc, *tp, *tri, *trv;
    double rtc_diff;    /* max |RTC - plain| over the trajectories */
} bench_run;

static void bench_free(bench_run *b)
{
    free(b->pix); free(b->embeds); free(b->hidden); free(b->bias); free(b->keys); free(b->values); free(b->noise);
    free(b->traj); free(b->traj2); free(b->traj3); free(b->prev); free(b->kctx); free(b->vctx); free(b->ids); free(b->enc);
    free(b->tv); free(b->tl); free(b->ta); free(b->tt); free(b->tc); free(b->tp); free(b->tri); free(b->trv);
}

/* b's buffers for c, and the inputs: random pixel values and noise, the prompt's ids. -1 when out of memory. */
static int bench_inputs(bench_run *b, const mact_config *c)
{
    const int64_t n_img = b->n_img, N = b->N, H = b->H, it = b->iters;
    b->P = (int64_t)c->grid_h * c->grid_w, b->PD = (int64_t)c->patch * c->patch * 3, b->D = c->d_model;
    b->kvd = (int64_t)c->n_kv_heads * c->head_dim, b->A = c->max_action_dim, b->L = c->n_layers, b->AH = c->ae_hidden;
    b->action_dim = b->A < 7 ? (int)b->A : 7;
    b->n_prev = H > 2 ? (int)H - 2 : 1;
    b->delay = b->n_prev < 2 ? 0 : 2 < H - 1 ? 2 : (int)H - 1;
    const size_t f = sizeof(float), d = sizeof(double);
    b->pix = malloc(f * (size_t)(n_img * b->P * b->PD));
    b->ids = malloc(sizeof(int64_t) * (size_t)N);
    b->embeds = malloc(f * (size_t)(n_img * b->K * b->D)), b->hidden = malloc(f * (size_t)(N * b->D));
    b->bias = malloc(f * (size_t)N * (size_t)N);
    b->keys = malloc(f * (size_t)(b->L * N * b->kvd)), b->values = malloc(f * (size_t)(b->L * N * b->kvd));
    b->noise = malloc(f * (size_t)(H * b->A)), b->traj = malloc(f * (size_t)(H * b->A));
    b->traj2 = malloc(f * (size_t)(H * b->A)), b->traj3 = malloc(f * (size_t)(H * b->A));
    b->enc = malloc((size_t)N);
    b->kctx = malloc(f * (size_t)(b->L * N * b->AH)), b->vctx = malloc(f * (size_t)(b->L * N * b->AH));
    b->prev = malloc(f * (size_t)b->n_prev * (size_t)b->action_dim);
    b->tv = malloc(d * (size_t)it), b->tl = malloc(d * (size_t)it), b->ta = malloc(d * (size_t)it), b->tt = malloc(d * (size_t)it);
    b->tc = malloc(d * (size_t)it), b->tp = malloc(d * (size_t)it), b->tri = malloc(d * (size_t)it), b->trv = malloc(d * (size_t)it);
    if (!b->pix || !b->ids || !b->embeds || !b->hidden || !b->bias || !b->keys || !b->values || !b->noise || !b->traj ||
        !b->traj2 || !b->traj3 || !b->enc || !b->kctx || !b->vctx || !b->prev || !b->tv || !b->tl || !b->ta || !b->tt ||
        !b->tc || !b->tp || !b->tri || !b->trv)
        return -1;
    for (int64_t i = 0; i < n_img * b->P * b->PD; i++) b->pix[i] = rnd_unit();
    for (int64_t i = 0; i < H * b->A; i++) b->noise[i] = rnd_unit();
    int p = 0;
    b->ids[p++] = c->eos_id >= 0 ? c->eos_id : 0;  /* BOS (= EOS in these checkpoints) */
    for (int im = 0; im < n_img; im++) {
        b->ids[p++] = c->image_start_id;
        for (int k = 0; k < b->K; k++) b->ids[p++] = c->image_patch_id;
        b->ids[p++] = c->image_end_id;
    }
    for (int t = 0; p < N; t++) b->ids[p++] = 100 + (t * 37) % (c->vocab_size > 400 ? 300 : c->vocab_size / 2);
    return 0;
}

/* --iters passes over the stages' bodies, as the pipeline runs them (its inputs were checked by the warm-up's
 * pipeline); then the action stage's context projection alone and what mact_action_generate does once per call
 * before the steps (the context with the cross-attention's K/V packed layer by layer), so the flow steps' own time
 * and weight bandwidth can be told apart; then the action stage again with RTC guidance toward random normalised
 * previous rows (n_prev of them, delay, execution horizon H, linear, max guidance weight 10): identity, then vjp
 * (one reverse pass per step). 0, or the failing call's status (mact_session_error says why). */
static int bench_stages(mact_session *s, bench_run *b)
{
    const int N = b->N, H = b->H, ad = b->action_dim, st = b->steps;
    const size_t hb = sizeof(float) * (size_t)(H * b->A);
    int rc = 0;
    for (int it = 0; it < b->iters; it++) {
        double t0 = mact_clock_s();
        mact_vision_run(s, b->pix, b->n_img, b->embeds);
        double t1 = mact_clock_s();
        mact_embed_run(s, b->ids, N, b->embeds, b->hidden);
        mact_attention_bias_run(s, b->ids, N, b->bias);
        mact_llm_layers_run(s, b->hidden, b->bias, N, 0, (int)b->L, b->keys, b->values, 1);
        double t2 = mact_clock_s();
        memcpy(b->traj, b->noise, hb);
        mact_encoder_mask_run(s, b->ids, N, b->enc);
        mact_action_generate_run(s, b->traj, H, ad, st, b->keys, b->values, b->enc, N, NULL);
        double t3 = mact_clock_s();
        b->tv[it] = t1 - t0, b->tl[it] = t2 - t1, b->ta[it] = t3 - t2, b->tt[it] = t3 - t0;
    }
    for (int it = 0; it < b->iters && !rc; it++) {
        double t0 = mact_clock_s();
        rc = mact_action_context(s, b->keys, b->values, N, b->kctx, b->vctx);
        b->tc[it] = mact_clock_s() - t0;
    }
    if (rc) return rc;
    mact_session_enter(s);
    for (int it = 0; it < b->iters; it++) {
        double t0 = mact_clock_s();
        mact_action_prepare(s, b->keys, b->values, N, H);
        b->tp[it] = mact_clock_s() - t0;
    }
    for (int64_t i = 0; i < (int64_t)b->n_prev * ad; i++) b->prev[i] = rnd_unit();
    mact_rtc_options ro = {.prev_actions = b->prev, .n_prev = (size_t)b->n_prev, .prev_dim = (size_t)ad,
                           .inference_delay = b->delay, .execution_horizon = H, .schedule = MACT_RTC_LINEAR,
                           .max_guidance_weight = 10.f, .guidance = MACT_RTC_IDENTITY};
    b->rtc_diff = 0;
    for (int g = 0; g < 2 && !rc; g++) {
        int on = 0;
        ro.guidance = g ? MACT_RTC_VJP : MACT_RTC_IDENTITY;
        if ((rc = mact_rtc_check(s, &ro, H, ad, 1, &on, "bench")) || !on) break;
        for (int it = 0; it < b->iters; it++) {
            memcpy(b->traj3, b->noise, hb);
            double t0 = mact_clock_s();
            mact_action_generate_run(s, b->traj3, H, ad, st, b->keys, b->values, b->enc, N, &ro);
            (g ? b->trv : b->tri)[it] = mact_clock_s() - t0;
        }
        for (int64_t i = 0; i < H * b->A; i++) b->rtc_diff = fmax(b->rtc_diff, fabs((double)b->traj3[i] - b->traj[i]));
    }
    return rc;
}

/* the GEMM peaks of this run, same precision and threads: the ViT MLP and the LLM QKV shapes (g1, g2) and in int8
 * mode the int8 GEMM (g8), and the instruction peaks. In int8 mode the vision stack runs in bf16: its peak is the
 * bf16 GEMM's, the LLM's and the action expert's the int8 one. The microbenchmarks run through the ops table: on
 * the packs where the kernels pack for this precision, else on the row-major kernels (the ARM levels without
 * bf16); never on the plain-C reference (minutes). */
typedef struct { double g1, g2, g8, gpeak, ipeak, ipeak8; int packs, vprec; } bench_peaks;

static bench_peaks gemm_peaks(const mact_model *m, const mact_session *s, mact_pool *pool, int prec, int pack)
{
    bench_peaks p = {.vprec = prec == MACT_PRECISION_INT8 ? MACT_PRECISION_BF16 : prec};
    int pfmt;
    size_t pbytes;
    p.packs = mact_pack_plan(m->ops, MACT_BF16, 64, 64, p.vprec, 0, &pfmt, &pbytes);
    if (pack && (p.packs || mact_ops_isa(m->ops) > MACT_ISA_SCALAR)) {
        p.g1 = gemm_bench(m->ops, pool, 729, 4304, 1152, p.vprec);
        p.g2 = gemm_bench(m->ops, pool, 130, 6144, 2560, p.vprec);
        if (prec == MACT_PRECISION_INT8) p.g8 = gemm_bench(m->ops, pool, 130, 6144, 2560, MACT_PRECISION_INT8);
    }
    p.gpeak = p.g1 > p.g2 ? p.g1 : p.g2;
    p.ipeak = mact_kernels_peak_gflops(&s->kc, p.vprec == MACT_PRECISION_BF16);
    if (prec == MACT_PRECISION_INT8) p.ipeak8 = mact_kernels_peak_gops_i8(&s->kc);
    return p;
}

/* the table: per stage median and min ms, GFLOP, GFLOP/s and the fraction of the GEMM peak; the RTC rows; the
 * prefill rate, the flow step's time and weight bandwidth beside the weight stream (bw1, bwh at M = 1, M = H) */
static void bench_report(const mact_model *m, bench_run *b, const bench_peaks *pk, int prec, double sb, double bw1,
                         double bwh)
{
    const mact_config *c = &m->cfg;
    const int it = b->iters, steps = b->steps;
    char parts[64];
    double *tv = b->tv, *tl = b->tl, *ta = b->ta, *tt = b->tt, *tc = b->tc, *tp = b->tp, *tri = b->tri, *trv = b->trv;
    double fv = vision_flops(c, b->n_img) / 1e9, fl = llm_flops(c, b->N) / 1e9, fa = action_flops(c, b->N, b->H, steps) / 1e9;
    double mv = median(tv, it), ml = median(tl, it), ma = median(ta, it), mt = median(tt, it);
    printf("  GEMM peak (%s GEMM microbenchmark, best of 5): %.0f GFLOP/s (M729 N4304 K1152 %.0f, M130 N6144 K2560 "
           "%.0f); %s instruction peak %.0f GFLOP/s\n", pk->packs ? "packed" : "row-major", pk->gpeak, pk->g1, pk->g2,
           peak_insn(m->ops, pk->vprec == MACT_PRECISION_BF16), pk->ipeak);
    if (prec == MACT_PRECISION_INT8)
        printf("  int8 GEMM peak (M130 N6144 K2560, best of 5): %.0f GOP/s; %s instruction peak %.0f GOP/s "
               "(the int8 stages below are against it: %s)\n", pk->g8, peak_insn_i8(m->ops), pk->ipeak8,
               mact_int8_parts_str(m->int8_parts, parts, sizeof parts));
    printf("  %-8s %10s %10s %9s %10s %12s\n", "stage", "median ms", "min ms", "GFLOP", "GFLOP/s", "% GEMM peak");
    const char *names[3] = {"vision", "llm", "action"};
    double med[3] = {mv, ml, ma}, mins[3] = {min_of(tv, it), min_of(tl, it), min_of(ta, it)}, fl3[3] = {fv, fl, fa};
    for (int i = 0; i < 3; i++) {
        static const unsigned stage_part[3] = {MACT_PART_VISION, MACT_PART_LLM, MACT_PART_EXPERT};
        double peak = (m->int8_parts & stage_part[i]) ? pk->g8 : pk->gpeak;
        printf("  %-8s %10.1f %10.1f %9.1f %10.1f %11.1f%%\n", names[i], med[i] * 1e3, mins[i] * 1e3, fl3[i],
               fl3[i] / med[i], peak > 0 ? 100.0 * fl3[i] / med[i] / peak : 0.0);
    }
    /* the action stage with RTC beside it (not in the total): identity adds only elementwise work; the vjp's
     * FLOPs are not counted here */
    const double mri = median(tri, it), mrv = median(trv, it);
    printf("  %-8s %10.1f %10.1f %9s %10s %12s  (action with RTC identity guidance, x%.2f the action stage)\n",
           "act+rtc", mri * 1e3, min_of(tri, it) * 1e3, "-", "-", "-", mri / ma);
    printf("  %-8s %10.1f %10.1f %9s %10s %12s  (action with RTC vjp guidance, x%.2f the action stage)\n", "act+vjp",
           mrv * 1e3, min_of(trv, it) * 1e3, "-", "-", "-", mrv / ma);
    if (prec == MACT_PRECISION_INT8)  /* bf16 and int8 stages: no single peak to compare the sum with */
        printf("  %-8s %10.1f %10.1f %9.1f %10.1f %12s\n", "total", mt * 1e3, min_of(tt, it) * 1e3, fv + fl + fa,
               (fv + fl + fa) / mt, "-");
    else
        printf("  %-8s %10.1f %10.1f %9.1f %10.1f %11.1f%%\n", "total", mt * 1e3, min_of(tt, it) * 1e3, fv + fl + fa,
               (fv + fl + fa) / mt, pk->gpeak > 0 ? 100.0 * (fv + fl + fa) / mt / pk->gpeak : 0.0);
    const double mc = median(tc, it), mp = median(tp, it), per_step = fmax(0.0, (ma - mp) / steps);  /* noise can make the difference negative */
    const double bws = per_step > 0 ? sb / per_step / 1e9 : 0.0;
    printf("  llm prefill: %.1f tokens/s; action: context %.1f ms (%.1f ms as generate runs it, with the "
           "cross-attention's K/V packed), then %.1f ms per flow step reading %.0f MiB of weights -> %.1f GB/s\n",
           b->N / ml, mc * 1e3, mp * 1e3, per_step * 1e3, sb / 1048576.0, bws);
    printf("  flow-step weight stream (its GEMMs alone, median of 5): M = 1 %.1f GB/s (the read bound), M = H %.1f "
           "GB/s; the whole step reads at %.0f%% of the M = 1 rate\n", bw1, bwh, bw1 > 0 ? 100.0 * bws / bw1 : 0.0);
    const double sp = fmax(0.0, (ma - mp) / steps), si = fmax(0.0, (mri - mp) / steps), sv = fmax(0.0, (mrv - mp) / steps);
    printf("  action with RTC (%d previous rows, delay %d, linear, max guidance weight 10): per flow step plain "
           "%.2f ms, identity %.2f ms, vjp %.2f ms (x%.2f plain; the vjp itself %.2f ms); max |RTC - plain| %.3g\n",
           b->n_prev, b->delay, sp * 1e3, si * 1e3, sv * 1e3, sp > 0 ? sv / sp : 0.0, (sv - sp) * 1e3, b->rtc_diff);
}

/* without --model: the preset's full-size random checkpoint in the cache (cli_cache_dir), synthesized once.
 * 0, or -1 after printing why. */
static int bench_model(const char *preset, char *dir, size_t cap)
{
    char name[64], cfg[4200], err[1024];
    snprintf(name, sizeof name, "bench-%s", preset);
    cli_cache_dir(dir, cap, name);
    snprintf(cfg, sizeof cfg, "%s/model.safetensors", dir);
    struct stat st;
    if (!stat(cfg, &st)) return 0;
    /* gigabytes and minutes the user did not ask for by name: said first, on stderr, with the way around it */
    fprintf(stderr, "mact bench: no --model: writing a full-size random %s checkpoint (~11 GB, minutes) into %s once; "
            "--model DIR times yours instead\n", preset, dir);
    printf("mact bench: synthesizing the full-size %s checkpoint into %s (once; ~11 GB)\n", preset, dir);
    fflush(stdout);
    double t0 = mact_clock_s();
    if (mact_synth(preset, dir, 1, NULL, NULL, err, sizeof err)) { fprintf(stderr, "mact bench: %s\n", err); return -1; }
    printf("mact bench: synthesized in %.1f s\n", mact_clock_s() - t0);
    return 0;
}

/* the benchmark of a's model: cold start (load, then pack, timed apart: mact_model_load would pack itself), a warm-up
 * through the pipeline entry point, the stages (bench_stages), the weight stream and GEMM peaks, the table.
 * 0 when the staged trajectory equals the pipeline's bit for bit, else 1. */
static int bench(const bench_args *a, bench_run *b)
{
    char err[1024];
    double t0 = mact_clock_s();
    mact_model *m = NULL;
    mact_session *s = NULL;
    mact_threadpool *pool = NULL;
    mact_load_options lo = {.precision = a->precision, .no_pack = 1, .int8_parts = a->int8_parts};
    if (mact_model_load(a->model, &lo, &m, err, sizeof err)) { fprintf(stderr, "mact bench: %s\n", err); return 1; }
    const double t_load = mact_clock_s() - t0;
    t0 = mact_clock_s();
    int cache_status = 0, rc = 1;
    const mact_precision prec = m->kprec;
    if (mact_threadpool_new(a->threads, &pool, err, sizeof err) ||
        (!a->no_pack && mact_model_pack(m, pool, a->pack_cache, &cache_status, err, sizeof err))) {
        fprintf(stderr, "mact bench: %s\n", err);
        goto out;
    }
    const double t_pack = mact_clock_s() - t0;
    const mact_config *c = &m->cfg;
    b->n_img = 2, b->K = c->tokens_per_image;
    const int need = 1 + b->n_img * (b->K + 2) + 1;
    if (b->N < need) b->N = need;
    if (b->N > c->max_position_embeddings) {
        fprintf(stderr, "mact bench: the prompt needs %d tokens; the model takes %d\n", b->N, c->max_position_embeddings);
        goto out;
    }
    if (b->H > c->max_action_horizon) b->H = c->max_action_horizon;
    mact_session_options so = {.max_images = b->n_img, .max_tokens = b->N, .threadpool = pool};
    if (mact_session_new(m, &so, &s, err, sizeof err)) { fprintf(stderr, "mact bench: %s\n", err); goto out; }
    if (bench_inputs(b, c)) { fprintf(stderr, "mact bench: out of memory\n"); goto out; }
    printf("mact bench: %s\n  preset %s: %d images, N = %d tokens, H = %d, %d flow steps; precision %s; %d threads; "
           "kernels %s%s%s; %d iterations after 1 warm-up\n",
           a->model, a->preset, b->n_img, b->N, b->H, b->steps, mact_precision_str(a->precision), mact_session_threads(s),
           mact_ops_name(m->ops), prec != a->precision ? ", computing it as " : "",
           prec != a->precision ? mact_precision_str(prec) : "", b->iters);
    static const char *const cache_names[4] = {"", ", from the pack cache", ", pack cache written",
                                               ", pack cache not usable"};
    printf("  cold start: load %.2f s + pack %.2f s = %.2f s (packed %.0f MiB%s)\n", t_load, t_pack, t_load + t_pack,
           (double)m->packed_bytes / 1048576.0, cache_names[cache_status & 3]);
    fflush(stdout);
    /* the warm-up through the pipeline entry point */
    memcpy(b->traj2, b->noise, sizeof(float) * (size_t)(b->H * b->A));
    t0 = mact_clock_s();
    if (mact_generate_from_ids(s, b->pix, b->n_img, b->ids, b->N, b->traj2, b->H, b->action_dim, b->steps)) {
        fprintf(stderr, "mact bench: %s\n", mact_session_error(s));
        goto out;
    }
    const double t_warm = mact_clock_s() - t0, rss_warm = peak_rss_mib();
    if (bench_stages(s, b)) { fprintf(stderr, "mact bench: %s\n", mact_session_error(s)); goto out; }
    double diff = 0;
    for (int64_t i = 0; i < b->H * b->A; i++) diff = fmax(diff, fabs((double)b->traj[i] - b->traj2[i]));
    const double rss = peak_rss_mib();
    /* the flow step's weights streamed by its GEMMs alone, at M = 1 and M = H, in the session's context */
    const double sb = action_step_bytes(m, a->no_pack ? MACT_PRECISION_FP32 : prec);
    const double bw1 = expert_stream(&s->kc, m, 1, sb), bwh = expert_stream(&s->kc, m, b->H, sb);
    const bench_peaks pk = gemm_peaks(m, s, pool, prec, !a->no_pack);
    bench_report(m, b, &pk, prec, sb, bw1, bwh);
    printf("  peak RSS %.0f MiB (after warm-up %.0f MiB); warm-up %.2f s; staged vs pipeline max |diff| %.3g\n", rss,
           rss_warm, t_warm, diff);
    const uint64_t grows = atomic_load(&s->kc.grows);
    if (grows) printf("  warning: the kernels' scratch grew %llu times during inference (a planning gap)\n",
                      (unsigned long long)grows);
    rc = diff == 0 ? 0 : 1;
out:
    mact_session_free(s);
    mact_model_free(m);
    mact_threadpool_free(pool);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    bench_args a = {.preset = "libero", .pack_cache = getenv("MACT_PACK_CACHE"), .iters = 5, .precision = MACT_PRECISION_BF16};
    const cli_opt opts[] = {
        CLI_O("--model", CLI_STR, &a.model), CLI_O("--preset", CLI_STR, &a.preset), CLI_O("--threads", CLI_THREADS, &a.threads),
        CLI_O("--iters", CLI_INT, &a.iters, .lo = 1, .hi = 100000), CLI_O("--precision", CLI_FN, &a.precision, .fn = cli_precision),
        CLI_O("--int8-parts", CLI_FN, &a.int8_parts, .fn = cli_int8_parts),
        CLI_O("--no-pack", CLI_FLAG, &a.no_pack), CLI_O("--pack-cache", CLI_STR, &a.pack_cache), {0}};
    int rc = cli_parse("mact bench", argc, argv, opts, NULL, 0, NULL, bench_usage);
    if (rc) return cli_exit(rc);
    bench_run b = {.iters = a.iters};
    if (!strcmp(a.preset, "libero")) b.N = 130, b.H = 10, b.steps = 2;
    else if (!strcmp(a.preset, "so101")) b.N = 136, b.H = 30, b.steps = 10;
    else { fprintf(stderr, "mact bench: unknown preset '%s' (libero, so101)\n", a.preset); return 2; }
    if (a.threads <= 0 || a.threads > mact_cpu_count()) a.threads = mact_cpu_count();
    char dir[4096];
    if (!a.model && bench_model(a.preset, dir, sizeof dir)) return 1;
    if (!a.model) a.model = dir;
    rc = bench(&a, &b);
    bench_free(&b);
    return rc;
}
