/* The whole path from preprocessed inputs to normalised actions, every buffer from the session arena. */
#include <math.h>
#include "base/clock.h"
#include "kernels/kernels.h"
#include "model/session.h"

/* every value of x finite (no message) */
static int all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* The inputs of a run on preprocessed inputs (mact_generate_from_ids: the caller's ids, pixels and noise), checked
 * once before any stage runs. mact_predict checks its own caller's inputs (predict.c check_call) and builds these
 * from them (ids from its tokenizer, checked where they are made; pixels from bytes; noise checked or drawn), so it
 * runs the pipeline without this. */
static int pipeline_check(struct mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                          const float *traj, int h, int action_dim, int num_steps)
{
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3;
    const int64_t A = c->max_action_dim, K = c->tokens_per_image;
    int rc;
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "prompt of %d tokens; this session takes 1..%d", n, s->max_tokens);
    if ((rc = mact_check_ids(s, ids, n, "prompt"))) return rc;
    if (n_img < 0 || n_img > s->max_images)
        return mact_session_fail(s, MACT_ERR_INPUT, "%d images; this session takes 0..%d", n_img, s->max_images);
    int n_patch = 0;
    for (int i = 0; i < n; i++) n_patch += ids[i] == c->image_patch_id;
    if (n_patch != n_img * K)
        return mact_session_fail(s, MACT_ERR_INPUT, "the prompt has %d <im_patch> tokens but %d images give %lld features",
                                 n_patch, n_img, (long long)(n_img * K));
    if (n_img && (!pixel_values || (rc = mact_check_finite(s, pixel_values, n_img * P * PD, "pixel_values"))))
        return pixel_values ? rc : mact_session_fail(s, MACT_ERR_INPUT, "pixel_values: NULL");
    if (action_dim < 1 || action_dim > A)
        return mact_session_fail(s, MACT_ERR_INPUT, "action dim %d is outside 1..%lld (max_action_dim)", action_dim,
                                 (long long)A);
    if (h < 1 || h > c->max_action_horizon || num_steps < 1)
        return mact_session_fail(s, MACT_ERR_INPUT, "action horizon %d (1..%d) or %d flow steps out of range", h,
                                 c->max_action_horizon, num_steps);
    if ((rc = mact_check_finite(s, traj, (int64_t)h * A, "noise"))) return rc;
    /* the encoder mask of these ids must leave a context token visible: computed here into the bias buffer, which
     * nothing holds before the LLM runs */
    uint8_t *enc = (uint8_t *)s->p_bias;
    mact_encoder_mask_run(s, ids, n, enc);
    return mact_action_check(s, h, n, num_steps, enc, "action");
}

/* The stages on checked inputs, every buffer from the session arena; the result is checked once at the end. A
 * non-finite action is never returned: the first stage whose output is not finite is named (a NaN or an overflow
 * inside reaches the actions: attention rows with a NaN score are NaN, not dropped). */
int mact_pipeline_run(struct mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                      float *traj, int h, int action_dim, int num_steps, const mact_rtc_options *rtc,
                      double stage_ms[3])
{
    const mact_config *c = &s->m->cfg;
    const int64_t D = c->d_model, A = c->max_action_dim, K = c->tokens_per_image, L = c->n_layers;
    const int64_t kvd = (int64_t)c->n_kv_heads * c->head_dim;
    double t0 = mact_clock_ms();
    if (n_img) mact_vision_run(s, pixel_values, n_img, s->p_embeds);
    double t1 = mact_clock_ms();
    mact_embed_run(s, ids, n, s->p_embeds, s->p_hidden);
    mact_attention_bias_run(s, ids, n, s->p_bias);
    mact_llm_layers_run(s, s->p_hidden, s->p_bias, n, 0, c->n_layers, s->p_keys, s->p_values, 1);
    double t2 = mact_clock_ms();
    uint8_t *enc = (uint8_t *)s->p_bias;  /* the bias is dead once the LLM has run */
    mact_encoder_mask_run(s, ids, n, enc);
    mact_action_generate_run(s, traj, h, action_dim, num_steps, s->p_keys, s->p_values, enc, n, rtc);
    if (!all_finite(traj, (int64_t)h * A)) {
        /* the error path only: find where it started */
        const char *where = n_img && !all_finite(s->p_embeds, n_img * K * D) ? "vision (image embeddings)"
                            : !all_finite(s->p_keys, L * n * kvd) || !all_finite(s->p_values, L * n * kvd)
                                ? "llm (keys/values)"
                                : "action expert";
        return mact_session_fail(s, MACT_ERR_MODEL, "non-finite values out of the %s stage: the checkpoint's weights "
                                 "or these inputs overflow fp32", where);
    }
    if (stage_ms) {
        stage_ms[0] = t1 - t0;
        stage_ms[1] = t2 - t1;
        stage_ms[2] = mact_clock_ms() - t2;
    }
    return 0;
}

mact_status mact_generate_from_ids(mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                                   float *traj, int h, int action_dim, int num_steps)
{
    mact_session_enter(s);
    int rc = pipeline_check(s, pixel_values, n_img, ids, n, traj, h, action_dim, num_steps);
    return rc ? rc : mact_pipeline_run(s, pixel_values, n_img, ids, n, traj, h, action_dim, num_steps, NULL, NULL);
}
