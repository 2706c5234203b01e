#ifndef MACT_PROMPT_H
#define MACT_PROMPT_H
#include <stddef.h>
#include <stdlib.h>

/* Longest normalised task in bytes, including its NUL (docs/limits.md): 4095 bytes of text. */
#define MACT_MAX_TASK 4096

struct mact_tokenizer;

/* Task normalisation of upstream `_normalize_question_text` (docs/spec/molmoact2.md 4.2): whitespace collapsed, surrounding
 * quotes/brackets and "task:"-style prefixes stripped, trailing punctuation stripped, sentences joined
 * with "; ", lowercased. */
int mact_normalize_task(const char *in, char *out, size_t cap, char *err, size_t errlen);
/* Refuses (MACT_ERR_INPUT, naming the field and the token) a normalised task, setup type or control mode
 * (either may be NULL) that contains any added token of the tokenizer: chat markers, image, state, setup,
 * control and action tokens would change the prompt's structure. */
int mact_prompt_check_inputs(const struct mact_tokenizer *tok, const char *task_norm, const char *setup,
                             const char *control, char *err, size_t errlen);
/* The prompt text before tokenization, with one <|image|> per camera (expanded after tokenizing). */
int mact_build_prompt_text(int n_images, const char *task_norm, const char *setup, const char *control,
                           const int *bins, int n_state, char *out, size_t cap, char *err, size_t errlen);
#endif
