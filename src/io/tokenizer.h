/* Hugging Face byte-level BPE tokenizer (the Qwen2/Qwen3 tokenizer.json family), encode side only.
 *
 * The result is meant to equal HF `tokenizers` (Rust) `encode(text, add_special_tokens=False)`:
 *   1. added tokens (tokenizer.json "added_tokens", special or not) are matched first in the raw text
 *      as literal strings, leftmost-longest, honouring their single_word / lstrip / rstrip flags;
 *      those with normalized=false are matched before normalisation, those with normalized=true in
 *      the normalised text;
 *   2. every stretch between added tokens is normalised (NFC, when the normalizer says so),
 *      split by the pre-tokenizer's regex (Split, behaviour "Isolated", compiled with PCRE2 in
 *      UTF+UCP mode), mapped byte -> unicode with the GPT-2 ByteLevel table;
 *   3. each piece is BPE-merged by merge rank (lowest first, leftmost on ties).
 * Supported configuration (anything else is rejected with MACT_ERR_UNSUPPORTED rather than encoded
 * differently): normalizer null / NFC / Sequence of those; pre_tokenizer ByteLevel(use_regex=false,
 * add_prefix_space=false) alone or in a Sequence after Split steps (Regex or String pattern,
 * behaviour Isolated, invert false); model BPE without dropout, continuing_subword_prefix,
 * end_of_word_suffix or byte_fallback. A piece character missing from the vocab maps to unk_token
 * when the model has one and is an error otherwise (HF would silently drop it).
 *
 * Token ids are the ones written in tokenizer.json (vocab values and added_tokens[].id); look every
 * special token up by name with mact_tokenizer_token_to_id, never hard-code ids.
 *
 * A loaded tokenizer is read-only: any number of threads may encode with it concurrently.
 * Every int function returns MACT_OK (0) or a negative MACT_ERR_* code with a message in err. */
#ifndef MACT_TOKENIZER_H
#define MACT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

typedef struct mact_tokenizer mact_tokenizer;

/* Loads tokenizer.json. Errors: MACT_ERR_IO (unreadable), MACT_ERR_FORMAT (bad JSON, missing or
 * inconsistent fields, e.g. a merge whose parts are not in the vocab), MACT_ERR_UNSUPPORTED. */
int mact_tokenizer_load(const char *path, mact_tokenizer **out, char *err, size_t errlen);
/* Same from a JSON document in memory (need not be NUL-terminated). */
int mact_tokenizer_load_json(const char *json, size_t len, mact_tokenizer **out, char *err,
                             size_t errlen);
void mact_tokenizer_free(mact_tokenizer *tok);

/* Encodes len bytes of UTF-8 text (embedded NULs allowed) without adding any special token.
 * Writes up to cap ids and sets *n_ids to the full count; ids may be NULL with cap 0 to query the
 * length. Errors: MACT_ERR_INPUT for invalid UTF-8 (message gives the byte offset) or when the
 * ids do not fit in cap (*n_ids still tells the size needed), MACT_ERR_NOMEM. */
int mact_tokenizer_encode(const mact_tokenizer *tok, const char *text, size_t len, int64_t *ids,
                          size_t cap, size_t *n_ids, char *err, size_t errlen);

/* Id of a token given by its exact string: added tokens (e.g. "<im_patch>", "<|im_end|>") first,
 * then the BPE vocab (in its byte-level form, e.g. "Ġthe"). -1 when absent. */
int64_t mact_tokenizer_token_to_id(const mact_tokenizer *tok, const char *token);
/* The string of an id (NUL-terminated, owned by the tokenizer), NULL when no token has this id. */
const char *mact_tokenizer_id_to_token(const mact_tokenizer *tok, int64_t id);
/* Finds the first (leftmost) place in text[0..len) where the content of any added token occurs as a
 * literal, ignoring the single_word / lstrip / rstrip conditions (so it finds a superset of what encode
 * would match). Returns 1 and sets *off and *content (owned by the tokenizer), or 0 when none occurs. */
int mact_tokenizer_find_added(const mact_tokenizer *tok, const char *text, size_t len, size_t *off,
                              const char **content);
/* 1 + the largest id of any token (vocab or added). */
int64_t mact_tokenizer_vocab_size(const mact_tokenizer *tok);
#endif
