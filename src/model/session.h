/* The mutable half of an inference: one arena planned from the config at session creation. */
#ifndef MACT_SESSION_H
#define MACT_SESSION_H
#include <math.h>
#include "model/model.h"
#include "kernels/kernels.h"

/* Modulation vectors depend only on t: schedules of up to this many steps are cached per session. */
#define MACT_MOD_CACHE_STEPS 16
#define MACT_PROMPT_TEXT_CAP (64 * 1024)
#define MACT_MAX_STEPS 1000               /* flow steps a call may ask (docs/limits.md) */
/* RTC vjp: the transposed products' fixed split of W's rows (independent of the thread count) and slab rows */
#define MACT_VJP_PARTS 16
#define MACT_VJP_NR 16

struct mact_session {
    const struct mact_model *m;
    int max_images, max_tokens;
    mact_kctx kc;                    /* the kernels' context: ops, precision, pool, per-thread scratch */
    mact_threadpool *own_pool;       /* the pool the session made (NULL when the caller attached one) */
    float *arena;
    size_t arena_floats;
    /* vision (one image at a time) */
    float *v_pix, *v_x, *v_h, *v_q, *v_k, *v_v, *v_att, *v_ff, *v_taps, *v_gather, *v_query, *v_pooled, *v_proj,
        *v_samp;
    /* llm */
    float *l_h, *l_qkv, *l_att, *l_ff, *l_rope_cos, *l_rope_sin;
    int l_rope_n;                    /* rows of the rope table already filled */
    /* action expert */
    float *a_z, *a_u, *a_qkv, *a_att, *a_ff, *a_mod, *a_cond, *a_rope_cos, *a_rope_sin, *a_vel;
    float *a_pad;                    /* max_action_dim bytes: which action dims are padding */
    float *a_kctx, *a_vctx;          /* [L, max_tokens, ae_hidden] for mact_action_generate */
    float *a_kvp;                    /* the context's K/V packed per layer for the cross-attention
                                      * (mact_attention_kv_pack), L x a_kvp_stride uint32; BF16/INT8 only */
    int64_t a_kvp_stride;
    int mod_cache_steps, mod_steps;  /* a_mod holds the schedule of mod_steps steps (0 = none) */
    int a_rope_n;
    /* real-time chunking: the guided rows Y padded to [H, A], their prefix weights [H], the error / correction
     * [H, A], and mact_predict's normalised copy of the caller's rows [H, A] (rtc_prev_n rows of action_dim) */
    float *a_rtc_y, *a_rtc_w, *a_rtc_e, *rtc_prev;
    int rtc_prev_n, rtc_prev_dim;
    /* RTC vjp guidance (stages/action_vjp.c): the forward's tape, each slot for the whole horizon H: residual
     * stream before each of the 3 L + 1 norms [3L+1, H, AH], self-attention q|k|v as projected [L, H, 3AH], its
     * q|k after norm and RoPE [L, H, 2AH], probabilities [L, heads, H, H], cross q as projected and normed
     * [L, H, AH] each, MLP gate and up [L, H, ae_inter] each; then the backward's work rows */
    float *vj_z, *vj_qkv, *vj_qk, *vj_p, *vj_xq, *vj_xqn, *vj_gate, *vj_up;
    float *vj_u, *vj_att, *vj_t1, *vj_t2, *vj_gz, *vj_gu, *vj_gq, *vj_kt, *vj_vt, *vj_s, *vj_dp, *vj_gx;
    /* the transposed weight products: MACT_VJP_PARTS partial sums [H, Kp] and a panel of MACT_VJP_NR weight rows
     * per thread (vj_panel_stride floats apart); Kp = the widest product's columns rounded up to 64 */
    float *vj_part, *vj_panel;
    int64_t vj_panel_stride;
    size_t vj_bytes;                 /* the tape's bytes from vj_z on, zeroed on the first vjp call (vj_ready) */
    int vj_ready;
    /* whole-pipeline buffers (mact_generate_from_ids) */
    float *p_embeds, *p_hidden, *p_bias, *p_keys, *p_values;
    /* mact_predict: preprocessing and outputs kept for mact_session_tensor */
    float *pv;                       /* [max_images, n_patches, patch_dim] */
    uint8_t *resized;                /* [image_h, image_w, 3] */
    int64_t *ids;                    /* [max_tokens] */
    float *ids_f;                    /* ids as float for dumps */
    char *text;                      /* prompt text */
    float *noise, *traj;             /* [max_action_horizon, max_action_dim] */
    int last_images, last_tokens, last_h;
    float *scores;                   /* attention scratch, per thread */
    float *maskf;                    /* small per-call masks */
    char err[1024];
};

void mact_session_enter(struct mact_session *s);
int mact_check_finite(struct mact_session *s, const float *x, int64_t n, const char *what);

/* The stages' bodies, for the pipeline and the bench: the caller has validated every input (the public entry
 * points of mact_stages.h check theirs and call these). Each input is checked once, where it comes in: mact_predict
 * checks its caller's in check_call (and its token ids where it makes them), mact_generate_from_ids its caller's
 * ids, pixels and noise, then mact_pipeline_run runs unchecked and checks only its result. */
void mact_vision_run(struct mact_session *s, const float *pixel_values, int n_img, float *image_embeds);
void mact_embed_run(const struct mact_session *s, const int64_t *ids, int n, const float *image_embeds, float *hidden);
void mact_attention_bias_run(const struct mact_session *s, const int64_t *ids, int n, float *bias);
void mact_encoder_mask_run(const struct mact_session *s, const int64_t *ids, int n, uint8_t *mask);
/* kv_only_last: the model's last layer computes only its K/V (all the action expert reads of it) */
void mact_llm_layers_run(struct mact_session *s, float *hidden, const float *bias, int n, int a, int b, float *keys,
                         float *values, int kv_only_last);
int mact_llm_layers_ex(struct mact_session *s, float *hidden, const float *bias, int n, int a, int b, float *keys,
                       float *values, int kv_only_last);
/* rtc: NULL, or options already checked by mact_rtc_check whose prev_actions are normalised [n_prev, action_dim] */
void mact_action_generate_run(struct mact_session *s, float *traj, int h, int action_dim, int num_steps,
                              const float *keys, const float *values, const uint8_t *enc_mask, int n,
                              const mact_rtc_options *rtc);
/* stages/rtc.c: Y and W into the session before the flow steps; one step's guidance on s->a_vel (x the trajectory
 * the velocity was evaluated at) */
typedef struct {
    const float *mod;                /* this step's modulation */
    const float *kctx, *vctx;        /* [L, n, ae_hidden] */
    const uint8_t *enc;
    int n;
} mact_rtc_vjp_ctx;
void mact_rtc_prepare(struct mact_session *s, const mact_rtc_options *r, int h, int action_dim);
void mact_rtc_guide(struct mact_session *s, const mact_rtc_options *r, const float *x, int h, int action_dim, float t,
                    const mact_rtc_vjp_ctx *vjp);
/* stages/action_vjp.c: e [h, A] <- e + time * (dv/dx)^T e, the velocity's vector-Jacobian product at x */
void mact_rtc_vjp(struct mact_session *s, const mact_rtc_vjp_ctx *c, const float *x, int h, float time, float *e);
/* RTC options against a call of h rows of action_dim (errors named after who); *on = 0 when they are all off.
 * Checks the rows' count and, when rows_finite, their values. */
int mact_rtc_check(struct mact_session *s, const mact_rtc_options *r, int h, int action_dim, int rows_finite,
                   int *on, const char *who);
/* What mact_action_generate_run does once per call before its flow steps: the context K/V of every layer into
 * s->a_kctx / s->a_vctx and, where the bf16 cross-attention runs for h action rows, each layer's K/V packed for
 * it (returned, else NULL). */
const uint32_t *mact_action_prepare(struct mact_session *s, const float *keys, const float *values, int n, int h);
/* input checks shared by the entry points: token ids in range and n within the session; the action call's
 * horizon, context length, steps and a visible context token */
int mact_check_ids(struct mact_session *s, const int64_t *ids, int n, const char *who);
int mact_action_check(struct mact_session *s, int h, int n, int num_steps, const uint8_t *enc, const char *who);
/* pipeline.c: the whole path on checked, preprocessed inputs (rtc: NULL or the checked RTC rows, normalised); stage_ms
 * (may be NULL) gets vision / llm / action ms */
int mact_pipeline_run(struct mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                      float *traj, int h, int action_dim, int num_steps, const mact_rtc_options *rtc,
                      double stage_ms[3]);

#endif
