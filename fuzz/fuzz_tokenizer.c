/* libFuzzer target for the tokenizer. The first byte picks the mode:
 *   even: the rest is a tokenizer.json (mact_tokenizer_load_json); if it loads, a fixed mixed text
 *         (ASCII, accents, CJK, emoji, whitespace runs) is encoded with it;
 *   odd:  the rest is text encoded with a fixed tokenizer (Qwen-style regex, NFC, added tokens). Valid
 *         UTF-8 must encode, to ids that all exist; invalid UTF-8 must be refused with its offset. */
#include "io/tokenizer.h"
#include "base/json.h"
#include "fuzz_common.h"

static mact_tokenizer *fixed;

static void check_ids(const mact_tokenizer *t, const int64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!mact_tokenizer_id_to_token(t, ids[i])) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    if (!fixed) {
        char *j = fuzz_tokenizer_text();
        if (mact_tokenizer_load_json(j, strlen(j), &fixed, err, sizeof err)) __builtin_trap();
        free(j);
    }
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        size_t cap = 4 * n + 8, got = 0;
        int64_t *ids = malloc(cap * sizeof *ids);
        int rc = mact_tokenizer_encode(fixed, text, n, ids, cap, &got, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        int valid = mact_utf8_check((const unsigned char *)text, n) == n;
        if (valid != (rc == 0)) __builtin_trap();
        if (rc == 0) {
            if (n && !got) __builtin_trap();
            check_ids(fixed, ids, got);
        }
        size_t off;
        const char *content;
        if (mact_tokenizer_find_added(fixed, text, n, &off, &content) && (off >= n || !content)) __builtin_trap();
        free(ids);
        return 0;
    }
    mact_tokenizer *t = NULL;
    int rc = mact_tokenizer_load_json(text, n, &t, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        static const char sample[] = "Pick up the caf\xc3\xa9 mug  \t\n 12345 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 e\xcc\x81!";
        int64_t ids[512];
        size_t got = 0;
        if (mact_tokenizer_encode(t, sample, sizeof sample - 1, ids, 512, &got, err, sizeof err) == 0)
            check_ids(t, ids, got < 512 ? got : 512);
        mact_tokenizer_free(t);
    } else if (t) __builtin_trap();
    return 0;
}
