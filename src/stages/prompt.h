#ifndef MACT_PROMPT_H
#define MACT_PROMPT_H
#include <stddef.h>
#include <stdlib.h>

#define MACT_MAX_TASK 4096

/* Task normalisation of upstream `_normalize_question_text` (docs/spec/molmoact2.md 4.2): whitespace collapsed, surrounding
 * quotes/brackets and "task:"-style prefixes stripped, trailing punctuation stripped, sentences joined
 * with "; ", lowercased. */
int mact_normalize_task(const char *in, char *out, size_t cap, char *err, size_t errlen);
/* The prompt text before tokenization, with one <|image|> per camera (expanded after tokenizing). */
int mact_build_prompt_text(int n_images, const char *task_norm, const char *setup, const char *control,
                           const int *bins, int n_state, char *out, size_t cap, char *err, size_t errlen);
#endif
