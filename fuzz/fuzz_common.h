/* Shared helpers of the libFuzzer targets: a NUL-terminated copy of the input, the error-message
 * contract (a failure leaves a terminated, non-empty message) and a tiny byte-level BPE tokenizer with
 * the special tokens of the MolmoAct2 prompt, for the targets that encode text. */
#ifndef MACT_FUZZ_COMMON_H
#define MACT_FUZZ_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline char *fuzz_cstr(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) __builtin_trap();
    memcpy(s, d, n);
    s[n] = 0;
    return s;
}

static inline void fuzz_check_err(int rc, const char *err, size_t cap)
{
    if (rc != 0 && (err[0] == 0 || memchr(err, 0, cap) == NULL)) __builtin_trap();
}

/* Qwen-style pre-tokenizer regex, a vocab of every ByteLevel byte character plus a few merges, and the
 * added tokens the prompt uses. */
static const char fuzz_tokenizer_json[] =
    "{\"added_tokens\":["
    "{\"id\":300,\"content\":\"<|im_start|>\",\"special\":true,\"normalized\":false},"
    "{\"id\":301,\"content\":\"<|im_end|>\",\"special\":true,\"normalized\":false},"
    "{\"id\":302,\"content\":\"<|image|>\",\"special\":true,\"normalized\":false},"
    "{\"id\":303,\"content\":\"<im_patch>\",\"special\":true,\"normalized\":false},"
    "{\"id\":304,\"content\":\"<state_start>\",\"special\":true,\"normalized\":false},"
    "{\"id\":305,\"content\":\"<state_end>\",\"special\":true,\"normalized\":false},"
    "{\"id\":306,\"content\":\"<state_0>\",\"special\":true,\"normalized\":false},"
    "{\"id\":307,\"content\":\"<state_1>\",\"special\":true,\"normalized\":false},"
    "{\"id\":308,\"content\":\"<setup_start>\",\"special\":true,\"normalized\":false},"
    "{\"id\":309,\"content\":\"<setup_end>\",\"special\":true,\"normalized\":false},"
    "{\"id\":310,\"content\":\"<control_start>\",\"special\":true,\"normalized\":false},"
    "{\"id\":311,\"content\":\"<control_end>\",\"special\":true,\"normalized\":false},"
    "{\"id\":312,\"content\":\"<action_output>\",\"special\":true,\"normalized\":false},"
    "{\"id\":313,\"content\":\"caf\\u00e9\",\"special\":false,\"normalized\":true}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{VOCAB},\"merges\":[\"p i\",\"c k\",\"\\u0120 t\"]}}";

/* Builds the JSON text above with VOCAB replaced by the 256 ByteLevel characters (ids 0..255) and the
 * merge results (256..258). */
static inline char *fuzz_tokenizer_text(void)
{
    char *vocab = malloc(256 * 16 + 64);
    size_t o = 0;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int cp = ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174)) ? b : 256 + n++;
        if (cp == '"' || cp == '\\') o += (size_t)sprintf(vocab + o, "%s\"\\%c\":%d", b ? "," : "", cp, b);
        else if (cp < 128) o += (size_t)sprintf(vocab + o, "%s\"%c\":%d", b ? "," : "", cp, b);
        else o += (size_t)sprintf(vocab + o, "%s\"\\u%04x\":%d", b ? "," : "", cp, b);
    }
    o += (size_t)sprintf(vocab + o, ",\"pi\":256,\"ck\":257,\"\\u0120t\":258");
    const char *at = strstr(fuzz_tokenizer_json, "VOCAB");
    size_t pre = (size_t)(at - fuzz_tokenizer_json);
    char *out = malloc(sizeof fuzz_tokenizer_json + o + 1);
    memcpy(out, fuzz_tokenizer_json, pre);
    memcpy(out + pre, vocab, o);
    strcpy(out + pre + o, at + 5);
    free(vocab);
    return out;
}
#endif
