/* The whole path from preprocessed inputs to normalised actions, every buffer from the session arena. */
#include <time.h>
#include "kernels/kernels.h"
#include "model/session.h"

double mact_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int mact_pipeline_run(struct mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                      float *traj, int h, int action_dim, int num_steps, double stage_ms[3])
{
    const mact_config *c = &s->m->cfg;
    int rc;
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "prompt of %d tokens; this session takes 1..%d", n, s->max_tokens);
    double t0 = mact_now_ms();
    if (n_img && (rc = mact_vision(s, pixel_values, n_img, s->p_embeds))) return rc;
    double t1 = mact_now_ms();
    if ((rc = mact_embed(s, ids, n, s->p_embeds, n_img * c->tokens_per_image, s->p_hidden))) return rc;
    if ((rc = mact_attention_bias(s, ids, n, s->p_bias))) return rc;
    if ((rc = mact_llm_layers_ex(s, s->p_hidden, s->p_bias, n, 0, c->n_layers, s->p_keys, s->p_values, 1))) return rc;
    double t2 = mact_now_ms();
    uint8_t *enc = (uint8_t *)s->p_bias;  /* the bias is dead once the LLM has run */
    if ((rc = mact_encoder_mask(s, ids, n, enc))) return rc;
    if ((rc = mact_action_generate(s, traj, h, action_dim, num_steps, s->p_keys, s->p_values, enc, n))) return rc;
    if (stage_ms) {
        stage_ms[0] = t1 - t0;
        stage_ms[1] = t2 - t1;
        stage_ms[2] = mact_now_ms() - t2;
    }
    return 0;
}

mact_status mact_generate_from_ids(mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                                   float *traj, int h, int action_dim, int num_steps)
{
    return mact_pipeline_run(s, pixel_values, n_img, ids, n, traj, h, action_dim, num_steps, NULL);
}
