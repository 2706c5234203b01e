/* The robot prompt of docs/spec/molmoact2.md 4.2: task normalisation, setup/control/state wrapping, image placeholders
 * expanded to <im_start> + K x <im_patch> + <im_end>, one BOS prepended. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <utf8proc.h>
#include "model/model.h"
#include "stages/prompt.h"
#include "io/tokenizer.h"

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* strips one pair of surrounding quotes/brackets; returns 1 if it did */
static int strip_pair(char *s)
{
    static const char *const pairs[][2] = {{"\"", "\""}, {"'", "'"}, {"`", "`"}, {"(", ")"}, {"[", "]"}, {"{", "}"},
                                     {"\xe2\x80\x9c", "\xe2\x80\x9d"}, {"\xe2\x80\x98", "\xe2\x80\x99"}};
    size_t n = strlen(s);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        size_t a = strlen(pairs[i][0]), b = strlen(pairs[i][1]);
        if (n >= a + b && !strncmp(s, pairs[i][0], a) && !strcmp(s + n - b, pairs[i][1])) {
            memmove(s, s + a, n - a - b);
            s[n - a - b] = 0;
            return 1;
        }
    }
    return 0;
}

static void trim(char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && is_ws(s[a])) a++;
    while (n > a && is_ws(s[n - 1])) n--;
    memmove(s, s + a, n - a);
    s[n - a] = 0;
}

static int strip_prefix_ci(char *s, const char *p)
{
    size_t n = strlen(p);
    if (strncasecmp(s, p, n)) return 0;
    memmove(s, s + n, strlen(s + n) + 1);
    trim(s);
    return 1;
}

static int strip_trailing(char *s)
{
    static const char *const tails[] = {".", ",", "!", "?", ";", ":", ")", "]", "}", "\"", "'", "\xe2\x80\xa6",
                                  "\xe2\x80\x9d", "\xe2\x80\x99"};
    size_t n = strlen(s);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t l = strlen(tails[i]);
        if (n >= l && !strcmp(s + n - l, tails[i])) {
            /* a closer that has its opener inside belongs to the text, e.g. "(red) block" stays */
            if (l == 1 && strchr(")]}", tails[i][0])) {
                char open = tails[i][0] == ')' ? '(' : tails[i][0] == ']' ? '[' : '{';
                if (memchr(s, open, n - 1)) continue;
            }
            s[n - l] = 0;
            trim(s);
            return 1;
        }
    }
    return 0;
}

int mact_normalize_task(const char *in, char *out, size_t cap, char *err, size_t el)
{
    if (!in || !out || cap < 2) return mact_errf(err, el, MACT_ERR_INPUT, "task normalisation: NULL text or no room");
    size_t o = 0;
    int space = 0;
    /* collapse whitespace runs to one space */
    for (const char *p = in; *p; p++) {
        if (is_ws(*p)) { space = o > 0; continue; }
        if (o + 2 >= cap) return mact_errf(err, el, MACT_ERR_INPUT, "task is longer than the limit of %zu bytes", cap - 1);
        if (space) out[o++] = ' ';
        space = 0;
        out[o++] = *p;
    }
    out[o] = 0;
    static const char *const prefixes[] = {"task:", "instruction:", "goal:", "the task is to", "your task is to"};
    for (int changed = 1; changed;) {
        changed = strip_pair(out);
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) changed |= strip_prefix_ci(out, prefixes[i]);
        changed |= strip_trailing(out);
        trim(out);
    }
    /* several sentences -> joined with "; ". The joined text can be longer than its input ("a.b" -> "a; b"),
     * so it goes to a buffer sized from the input (at most 2 bytes out per byte in) and is then bounded. */
    size_t n = strlen(out), t = 0;
    char *tmp = malloc(2 * n + 1);
    if (!tmp) return mact_errf(err, el, MACT_ERR_NOMEM, "task normalisation: out of memory");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && !strchr(".!?", out[j])) j++;
        size_t a = i, b = j;
        while (a < b && is_ws(out[a])) a++;
        while (b > a && is_ws(out[b - 1])) b--;
        if (b > a) {
            if (t) { memcpy(tmp + t, "; ", 2); t += 2; }
            memcpy(tmp + t, out + a, b - a);
            t += b - a;
        }
        while (j < n && strchr(".!?", out[j])) j++;
        i = j;
    }
    tmp[t] = 0;
    if (t + 1 > cap) {
        free(tmp);
        return mact_errf(err, el, MACT_ERR_INPUT, "task is longer than the limit of %zu bytes once its sentences are "
                         "joined with \"; \"", cap - 1);
    }
    if (t == 0) {
        free(tmp);
        return mact_errf(err, el, MACT_ERR_INPUT, "task is empty (after removing whitespace, quotes, prefixes and "
                         "punctuation)");
    }
    /* Unicode lowercase */
    utf8proc_uint8_t *low = NULL;
    utf8proc_ssize_t m = utf8proc_map_custom((const utf8proc_uint8_t *)tmp, (utf8proc_ssize_t)t, &low,
                                             UTF8PROC_STABLE, NULL, NULL);
    free(tmp);
    if (m < 0) return mact_errf(err, el, MACT_ERR_INPUT, "task is not valid UTF-8: %s", utf8proc_errmsg(m));
    size_t w = 0;
    for (utf8proc_ssize_t i = 0; i < m;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(low + i, m - i, &cp);
        if (k < 0) break;
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t e = utf8proc_encode_char(utf8proc_tolower(cp), enc);
        if (w + (size_t)e + 1 > cap) {
            free(low);
            return mact_errf(err, el, MACT_ERR_INPUT, "task is longer than the limit of %zu bytes once lowercased",
                             cap - 1);
        }
        memcpy(out + w, enc, (size_t)e);
        w += (size_t)e;
        i += k;
    }
    out[w] = 0;
    free(low);
    return 0;
}

int mact_build_prompt_text(int n_images, const char *task_norm, const char *setup, const char *control,
                           const int *bins, int n_state, char *out, size_t cap, char *err, size_t el)
{
    size_t o = 0;
#define P(...) do { \
        int k_ = snprintf(out + o, o < cap ? cap - o : 0, __VA_ARGS__); \
        if (k_ < 0 || o + (size_t)k_ >= cap) \
            return mact_errf(err, el, MACT_ERR_INPUT, "prompt longer than %zu bytes", cap); \
        o += (size_t)k_; \
    } while (0)
    if (n_images == 1) P("<|image|>");
    else for (int i = 0; i < n_images; i++) P("Image %d<|image|>", i + 1);
    P("<|im_start|>user\nThe task is to %s. The setup is <setup_start>%s<setup_end>.", task_norm, setup);
    P(" The current state of the robot is <state_start>");
    for (int i = 0; i < n_state; i++) P("<state_%d>", bins[i]);
    P("<state_end>. The expected control mode is <control_start>%s<control_end>", control);
    P(". Given these, what action should the robot take to complete the task?");
    P("<|im_end|>\n<|im_start|>assistant\n<action_output>");
#undef P
    return 0;
}

/* One field: refused when any added token of the tokenizer occurs in it (matched as the tokenizer would
 * match it: on the raw text, and on its NFC form when the tokenizer normalises). */
static int check_field(const mact_tokenizer *tok, const char *what, const char *text, char *err, size_t el)
{
    size_t n = strlen(text), off = 0;
    const char *content = NULL;
    if (mact_tokenizer_find_added(tok, text, n, &off, &content))
        return mact_errf(err, el, MACT_ERR_INPUT, "%s contains the special token \"%.80s\" at byte %zu; a %s may not "
                         "contain the tokenizer's special tokens", what, content, off, what);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) { free(nfc); return mact_errf(err, el, MACT_ERR_INPUT, "%s is not valid UTF-8", what); }
    int hit = mact_tokenizer_find_added(tok, (const char *)nfc, (size_t)m, &off, &content);
    free(nfc);
    if (hit)
        return mact_errf(err, el, MACT_ERR_INPUT, "%s contains the special token \"%.80s\" (after NFC normalisation); "
                         "a %s may not contain the tokenizer's special tokens", what, content, what);
    return 0;
}

int mact_prompt_check_inputs(const struct mact_tokenizer *tok, const char *task_norm, const char *setup,
                             const char *control, char *err, size_t el)
{
    int rc = check_field(tok, "task", task_norm, err, el);
    if (!rc && setup) rc = check_field(tok, "norm tag setup_type", setup, err, el);
    if (!rc && control) rc = check_field(tok, "norm tag control_mode", control, err, el);
    return rc;
}
