/* The whole path from preprocessed inputs to normalised actions, every buffer from the session arena. */
#include "kernels.h"
#include "session.h"

int mact_generate_from_ids(mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                           float *traj, int h, int action_dim, int num_steps)
{
    const mact_config *c = &s->m->cfg;
    int rc;
    if (n < 1 || n > s->max_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "prompt of %d tokens; this session takes 1..%d", n, s->max_tokens);
    if (n_img && (rc = mact_vision(s, pixel_values, n_img, s->p_embeds))) return rc;
    if ((rc = mact_embed(s, ids, n, s->p_embeds, n_img * c->tokens_per_image, s->p_hidden))) return rc;
    if ((rc = mact_attention_bias(s, ids, n, s->p_bias))) return rc;
    if ((rc = mact_llm_layers_ex(s, s->p_hidden, s->p_bias, n, 0, c->n_layers, s->p_keys, s->p_values, 1))) return rc;
    uint8_t *enc = (uint8_t *)s->p_bias;  /* the bias is dead once the LLM has run */
    if ((rc = mact_encoder_mask(s, ids, n, enc))) return rc;
    return mact_action_generate(s, traj, h, action_dim, num_steps, s->p_keys, s->p_values, enc, n);
}
