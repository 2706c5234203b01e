/* mact stages: the model's boundaries one call at a time (the seed's parity boundaries: vision,
 * llm_split0..3, action context, one flow step, the whole action loop). For parity tools, dumps and
 * integrators who cache or split the work; mact_predict (mact.h) is the whole path in one call.
 *
 * Every function runs on a session (its buffers, threads and error string: mact_session_error) and checks
 * its inputs first: shapes against the session's max_images / max_tokens and the model's sizes
 * (mact_model_get_info), finite floats, token ids inside the embedding tables. Shapes below use the names of
 * mact_model_info: K = tokens_per_image, A = max_action_dim. Arguments that are shapes are int (model
 * dimensions); every buffer is the caller's, with the size stated. */
#ifndef MACT_STAGES_H
#define MACT_STAGES_H
#include "mact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pixel_values [n_img, n_patches, patch_dim] -> image_embeds [n_img * K, d_model]. */
MACT_API mact_status mact_vision(mact_session *s, const float *pixel_values, int n_img, float *image_embeds);

/* One camera frame -> its pixel_values [n_patches, patch_dim] (cap floats at least): the model's preprocessing
 * (docs/spec/molmoact2.md 4.1), as mact_predict applies it. */
MACT_API mact_status mact_pixel_values(const mact_model *m, const mact_frame *frame, float *pixel_values, size_t cap,
                                       char *err, size_t errlen);
/* For analyses of the ViT's depth (`mact prune-analyze`): one image's pixel_values [n_patches, patch_dim] through
 * every stored ViT block (not only up to the deepest tap); for each block j (mact_model_info.vit_layers of them)
 * in_sq[j] += the sum over its tokens of ||x_in||^2 (the block's input stream) and delta_sq[j] += the sum of
 * ||x_out - x_in||^2 (its update). Overwrites the session's vision buffers. */
MACT_API mact_status mact_vit_block_energy(mact_session *s, const float *pixel_values, double *in_sq, double *delta_sq);

/* Token ids [n] -> attention bias [n, n] (0 or -FLT_MAX) per docs/spec/molmoact2.md 3.6. */
MACT_API mact_status mact_attention_bias(mact_session *s, const int64_t *ids, int n, float *bias);
/* Token ids [n] -> the action expert's encoder mask [n] (1 = visible) per the model's encoder mask mode. */
MACT_API mact_status mact_encoder_mask(mact_session *s, const int64_t *ids, int n, uint8_t *mask);
/* ids [n] + image_embeds [n_image_embeds, d_model] -> hidden [n, d_model]. Row j of image_embeds is added to
 * the embedding of the j-th image patch token of ids; n_image_embeds must equal their count. */
MACT_API mact_status mact_embed(mact_session *s, const int64_t *ids, int n, const float *image_embeds,
                                int n_image_embeds, float *hidden);
/* Runs LLM layers [a, b) in place on hidden [n, d_model] under bias [n, n]; writes K (post-norm,
 * post-RoPE) and V of each layer to keys/values [(b - a), n, kv_dim]. */
MACT_API mact_status mact_llm_layers(mact_session *s, float *hidden, const float *bias, int n, int a, int b,
                                     float *keys, float *values);

/* keys/values [n_layers, n, kv_dim] -> k_ctx/v_ctx [n_layers, n, ae_hidden]. */
MACT_API mact_status mact_action_context(mact_session *s, const float *keys, const float *values, int n,
                                         float *k_ctx, float *v_ctx);
/* One Euler step in place on traj [h, A] at time t in [0, 1] with dt = 1/num_steps.
 * enc_mask [n] (nonzero = visible), is_pad [A] (nonzero = padded dim, zeroed in traj). */
MACT_API mact_status mact_action_step(mact_session *s, float *traj, int h, float t, int num_steps,
                                      const float *k_ctx, const float *v_ctx, const uint8_t *enc_mask, int n,
                                      const uint8_t *is_pad);
/* The whole loop: noise [h, A] -> normalised actions [h, A] in place, from the raw per-layer keys/values
 * [n_layers, n, kv_dim]; dims >= action_dim are padding (zeroed). */
MACT_API mact_status mact_action_generate(mact_session *s, float *traj, int h, int action_dim, int num_steps,
                                          const float *keys, const float *values, const uint8_t *enc_mask, int n);

/* mact_action_generate with real-time chunking (mact.h, mact_rtc_options): rtc->prev_actions are the previous
 * chunk's unexecuted rows already normalised, [n_prev, action_dim] (prev_dim = action_dim; the parity boundary
 * action_rtc); rtc NULL
 * or off: mact_action_generate, bit for bit. */
MACT_API mact_status mact_action_generate_rtc(mact_session *s, float *traj, int h, int action_dim, int num_steps,
                                              const float *keys, const float *values, const uint8_t *enc_mask, int n,
                                              const mact_rtc_options *rtc);

/* The whole path from preprocessed inputs: pixel_values [n_img, n_patches, patch_dim] and prompt ids [n]
 * (with n_img * K image patch tokens) -> traj [h, A], noise in, normalised actions out. */
MACT_API mact_status mact_generate_from_ids(mact_session *s, const float *pixel_values, int n_img,
                                            const int64_t *ids, int n, float *traj, int h, int action_dim,
                                            int num_steps);

#ifdef __cplusplus
}
#endif
#endif
