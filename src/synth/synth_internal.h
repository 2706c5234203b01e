/* What the synthetic checkpoint's files share (dev code: synth.c, synth_tok.c). */
#ifndef MACT_DEV_SYNTH_INTERNAL_H
#define MACT_DEV_SYNTH_INTERNAL_H
#include <stdint.h>
#include <cjson/cJSON.h>

/* Special ids of the token layout in synth.h. */
typedef struct {
    int64_t V, P;   /* vocab_size; first added token */
    int64_t endoftext, im_start, im_end, setup_start, setup_end, control_start, control_end, state_start,
        state_end, action_start, action_end, action_output, state0;
} token_ids;

extern const char *const MACT_SYNTH_ROBOT_TOKENS[9], *const MACT_SYNTH_IMAGE_TOKENS[9];
token_ids mact_synth_layout_ids(int64_t vocab, int num_state_tokens);
/* tokenizer.json for a vocabulary of vocab ids with num_state_tokens state bins; *n_merges: merges learned */
int mact_synth_tokenizer(int64_t vocab, int num_state_tokens, cJSON **out, int *n_merges, char *err, size_t errlen);

#endif
