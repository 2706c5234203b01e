/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* Unit tests for src/io/tokenizer.[ch] on a hand-made tokenizer.json (no network): BPE merge order,
 * added tokens (plain, lstrip/rstrip, single_word, normalized), NFC, invalid UTF-8, load errors.
 *
 * Tool mode, used by tests/test_tokenizer_rust.sh:
 *   test_tokenizer encode TOKENIZER.json CORPUS.hex OUT.txt
 * encodes every line of CORPUS (hex-encoded UTF-8) and writes one line per input: the ids separated
 * by spaces, or "ERROR <message>".
 *   test_tokenizer unicode-info OUT.txt
 * writes the code point ranges PCRE2's Unicode tables call unassigned and those NFC can act on
 * (utf8proc); the parity test uses them to keep characters whose treatment depends on the Unicode
 * version out of its exact-match corpus (see tests/tokenizer/gen_corpus.js). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "th.h"
#include "io/tokenizer.h"

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int tool_encode(const char *tok_path, const char *corpus, const char *out_path)
{
    char err[512] = "";
    mact_tokenizer *tok = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (mact_tokenizer_load(tok_path, &tok, err, sizeof err)) {
        fprintf(stderr, "load failed: %s\n", err);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double load_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    FILE *in = fopen(corpus, "rb"), *out = fopen(out_path, "wb");
    if (!in || !out) {
        fprintf(stderr, "cannot open %s or %s\n", corpus, out_path);
        if (in) fclose(in);
        if (out) fclose(out);
        mact_tokenizer_free(tok);
        return 1;
    }
    char *line = NULL, *text = NULL;
    size_t lcap = 0, tcap = 0, idcap = 0, n_lines = 0, n_tokens = 0;
    int64_t *ids = NULL;
    ssize_t ln;
    int rc = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((ln = getline(&line, &lcap, in)) >= 0) {
        while (ln > 0 && (line[ln - 1] == '\n' || line[ln - 1] == '\r')) ln--;
        size_t n = (size_t)ln / 2;
        if (n + 1 > tcap) {
            tcap = 2 * (n + 1);
            text = realloc(text, tcap);
        }
        for (size_t i = 0; i < n; i++) text[i] = (char)(hexval(line[2 * i]) * 16 + hexval(line[2 * i + 1]));
        size_t got = 0;
        int e = mact_tokenizer_encode(tok, text, n, ids, idcap, &got, err, sizeof err);
        if ((e == MACT_OK || e == MACT_ERR_INPUT) && got > idcap) {  /* grow and retry: the size query */
            idcap = got * 2;
            ids = realloc(ids, idcap * sizeof *ids);
            e = mact_tokenizer_encode(tok, text, n, ids, idcap, &got, err, sizeof err);
        }
        if (e) fprintf(out, "ERROR %s\n", err);
        else {
            for (size_t i = 0; i < got; i++) fprintf(out, i ? " %lld" : "%lld", (long long)ids[i]);
            fputc('\n', out);
            n_tokens += got;
        }
        n_lines++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double enc_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (fclose(out) != 0) rc = 1;
    fclose(in);
    fprintf(stderr, "mact: load %.3f s, encoded %zu strings / %zu tokens in %.3f s\n", load_s, n_lines, n_tokens, enc_s);
    free(line);
    free(text);
    free(ids);
    mact_tokenizer_free(tok);
    return rc;
}

static void put_ranges(FILE *out, char tag, const unsigned char *flag)
{
    long first = -1;
    for (long cp = 0; cp <= 0x110000; cp++) {
        int on = cp < 0x110000 && flag[cp];
        if (on && first < 0) first = cp;
        if (!on && first >= 0) {
            fprintf(out, "%c %ld %ld\n", tag, first, cp - 1);
            first = -1;
        }
    }
}

/* "U first last": code points PCRE2's Unicode tables call unassigned (\p{Cn}).
 * "N first last": code points NFC can act on according to utf8proc: a non-zero combining class, a
 * canonical decomposition, or a part of one. */
static int tool_unicode_info(const char *out_path)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR) "^\\p{Cn}$", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    unsigned char *un = calloc(0x110000, 1), *nf = calloc(0x110000, 1);
    FILE *out = fopen(out_path, "wb");
    int rc = (re && un && nf && out) ? 0 : 1;
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    for (long cp = 0; !rc && cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        unsigned char b[4];
        size_t n = (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, b);
        un[cp] = pcre2_match(re, b, n, 0, 0, md, NULL) >= 0;
        if (utf8proc_get_property((utf8proc_int32_t)cp)->combining_class) nf[cp] = 1;
        utf8proc_int32_t d[32];
        int last = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp, d, 32, UTF8PROC_DECOMPOSE, &last);
        if (k > 1 || (k == 1 && d[0] != cp)) {
            nf[cp] = 1;
            for (utf8proc_ssize_t i = 0; i < k; i++) nf[d[i]] = 1;
        }
    }
    if (!rc) {
        put_ranges(out, 'U', un);
        put_ranges(out, 'N', nf);
    }
    if (out && fclose(out) != 0) rc = 1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    free(un);
    free(nf);
    return rc;
}

/* ---------------------------------------------------------------------------- unit tests */

/* Byte-level alphabet used below: a b c = themselves, "\u0120" (Ġ) = space, "\u00c3" "\u00a9" = the
 * two bytes of U+00E9 (é). Merges, lowest rank first:
 *   0: a b -> ab   1: b c -> bc   2: ab c -> abc   3: Ġ a -> Ġa   4: Ã © -> Ã©  */
static const char *TOK_JSON =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":100,\"content\":\"<x>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
    "{\"id\":101,\"content\":\"<y>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":true,\"normalized\":false,\"special\":true},"
    "{\"id\":102,\"content\":\"cc\",\"single_word\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false},"
    "{\"id\":103,\"content\":\"\\u00c5\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":false},"
    "{\"id\":104,\"content\":\"<x>>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\" ?\\\\p{L}+|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"post_processor\":null,\"decoder\":null,"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\","
    "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
    "\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"bc\":5,\"abc\":6,\"\\u0120a\":7,"
    "\"<\":30,\"x\":31,\">\":32,\"\\u00c3\":20,\"\\u00a9\":21,\"\\u00c3\\u00a9\":23},"
    "\"merges\":[\"a b\",[\"b\",\"c\"],\"ab c\",\"\\u0120 a\",[\"\\u00c3\",\"\\u00a9\"]]}}";

static mact_tokenizer *TOK;

static void expect_ids(const char *name, const char *text, size_t len, const int64_t *want, size_t n_want)
{
    int64_t ids[64];
    size_t n = 0;
    char err[256] = "";
    int rc = mact_tokenizer_encode(TOK, text, len, ids, 64, &n, err, sizeof err);
    int ok = rc == 0 && n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    char got[256] = "";
    size_t o = 0;
    for (size_t i = 0; i < n && i < 16 && o < sizeof got - 24; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, " %lld", (long long)ids[i]);
    TH_CHECK(name, ok, "rc=%d %s; got [%s ]", rc, err, got);
}
#define EXPECT(name, text, ...)                                                      \
    do {                                                                             \
        const int64_t w_[] = {__VA_ARGS__};                                          \
        expect_ids(name, text, sizeof(text) - 1, w_, sizeof w_ / sizeof w_[0]);      \
    } while (0)

static void test_bpe(void)
{
    EXPECT("bpe_abc", "abc", 6);           /* a b c -> ab c (rank 0) -> abc (rank 2) */
    EXPECT("bpe_bca", "bca", 5, 0);         /* b c -> bc; (bc, a) has no merge */
    EXPECT("bpe_rank_beats_position", " abc", 3, 6); /* (a,b) rank 0 before (Ġ,a) rank 3, then no Ġ+ab */
    EXPECT("bpe_leftmost_on_equal_rank", "abab", 4, 4);
    EXPECT("bpe_space_piece", "ab c", 4, 3, 2); /* pieces "ab", " c"; (Ġ, c) has no merge */
    EXPECT("bpe_space_a", " a", 7);
    EXPECT("pretok_whitespace_run", "a  b", 0, 3, 3, 1); /* "a", "  " (\s+), "b" */
    size_t n = 7;
    char err[128];
    int rc = mact_tokenizer_encode(TOK, "", 0, NULL, 0, &n, err, sizeof err);
    TH_CHECK("encode_empty", rc == 0 && n == 0, "rc=%d n=%zu", rc, n);
}

static void test_added(void)
{
    EXPECT("added_split", "a<x>b", 0, 100, 1);
    EXPECT("added_adjacent", "<x><x>", 100, 100);
    EXPECT("added_longest_match", "<x>>a", 104, 0);  /* "<x>>" beats "<x>" at the same start */
    EXPECT("added_partial_is_text", "<xab", 30, 31, 4); /* "<" is a gap piece; "xab" -> x ab */
    EXPECT("added_lstrip_rstrip", "a  <y>  b", 0, 101, 1);
    EXPECT("added_single_word_alone", " cc ", 3, 102, 3);
    EXPECT("added_single_word_inside_word", "acc", 0, 2, 2);
    EXPECT("added_normalized_token", "A\xcc\x8a", 103);  /* NFC(A + ring) = U+00C5 = the token */
    EXPECT("added_normalized_token_raw", "\xc3\x85", 103);
    EXPECT("nfc_compose", "e\xcc\x81", 23);  /* é decomposed -> composed -> bytes C3 A9 -> merge */
    TH_CHECK("token_to_id", mact_tokenizer_token_to_id(TOK, "<x>") == 100 && mact_tokenizer_token_to_id(TOK, "abc") == 6 &&
             mact_tokenizer_token_to_id(TOK, "<nope>") == -1, "ids %lld %lld", (long long)mact_tokenizer_token_to_id(TOK, "<x>"),
             (long long)mact_tokenizer_token_to_id(TOK, "abc"));
    const char *s6 = mact_tokenizer_id_to_token(TOK, 6), *s100 = mact_tokenizer_id_to_token(TOK, 100);
    TH_CHECK("id_to_token", s6 && strcmp(s6, "abc") == 0 && s100 && strcmp(s100, "<x>") == 0 &&
             !mact_tokenizer_id_to_token(TOK, 50) && !mact_tokenizer_id_to_token(TOK, 105) && !mact_tokenizer_id_to_token(TOK, -1),
             "got %s %s", s6 ? s6 : "NULL", s100 ? s100 : "NULL");
    TH_CHECK("vocab_size", mact_tokenizer_vocab_size(TOK) == 105, "%lld", (long long)mact_tokenizer_vocab_size(TOK));
}

static void test_errors(const char *tmpdir)
{
    char err[256] = "";
    int64_t ids[8];
    size_t n = 0;
    const char *bad[] = {"a\xff", "\xc3", "ab\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82", "\x80"};
    int all = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = mact_tokenizer_encode(TOK, bad[i], strlen(bad[i]), ids, 8, &n, err, sizeof err);
        if (rc != MACT_ERR_INPUT || !strstr(err, "invalid UTF-8")) {
            all = 0;
            printf("  case %zu: rc=%d %s\n", i, rc, err);
        }
    }
    TH_CHECK("invalid_utf8_rejected", all, "see above");
    mact_tokenizer_encode(TOK, "ab\xed\xa0\x80", 5, ids, 8, &n, err, sizeof err);
    TH_CHECK("invalid_utf8_offset", strstr(err, "offset 2") != NULL, "message: %s", err);

    int rc = mact_tokenizer_encode(TOK, "a!", 2, ids, 8, &n, err, sizeof err);
    TH_CHECK("unknown_byte_without_unk", rc == MACT_ERR_FORMAT && strstr(err, "0x21"), "rc=%d %s", rc, err);

    rc = mact_tokenizer_encode(TOK, "abcabcab", 8, ids, 2, &n, err, sizeof err);
    TH_CHECK("cap_too_small", rc == MACT_ERR_INPUT && n == 3 && ids[0] == 6 && ids[1] == 6, "rc=%d n=%zu", rc, n);
    rc = mact_tokenizer_encode(TOK, "abcabcab", 8, NULL, 0, &n, err, sizeof err);
    TH_CHECK("length_query", rc == 0 && n == 3, "rc=%d n=%zu", rc, n);

    mact_tokenizer *t = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/mact_no_such_tokenizer.json", tmpdir);
    rc = mact_tokenizer_load(path, &t, err, sizeof err);
    TH_CHECK("load_missing_file", rc == MACT_ERR_IO && !t && strstr(err, "mact_no_such_tokenizer.json"), "rc=%d %s", rc, err);

    const char *malformed = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,, }}";
    rc = mact_tokenizer_load_json(malformed, strlen(malformed), &t, err, sizeof err);
    TH_CHECK("load_malformed_json", rc == MACT_ERR_FORMAT && !t && strstr(err, "invalid JSON"), "rc=%d %s", rc, err);
    snprintf(path, sizeof path, "%s/mact_bad_tokenizer.json", tmpdir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(malformed, 1, strlen(malformed) - 3, f);  /* truncated file */
        fclose(f);
    }
    rc = mact_tokenizer_load(path, &t, err, sizeof err);
    TH_CHECK("load_truncated_file", rc == MACT_ERR_FORMAT && !t && strstr(err, "mact_bad_tokenizer.json"), "rc=%d %s", rc, err);
    remove(path);

    /* A merge whose result is not in the vocab. */
    char *j = strdup(TOK_JSON), *m = strstr(j, "\"ab c\"");
    memcpy(m, "\"bc a\"", 6);
    rc = mact_tokenizer_load_json(j, strlen(j), &t, err, sizeof err);
    TH_CHECK("load_bad_merge", rc == MACT_ERR_FORMAT && !t && strstr(err, "merge #2"), "rc=%d %s", rc, err);
    free(j);

    /* Unsupported configuration is refused, not silently encoded differently. */
    j = strdup(TOK_JSON);
    m = strstr(j, "\"Isolated\"");
    memcpy(m, "\"Removed\" ", 10);
    rc = mact_tokenizer_load_json(j, strlen(j), &t, err, sizeof err);
    TH_CHECK("load_unsupported_split", rc == MACT_ERR_UNSUPPORTED && !t && strstr(err, "Removed"), "rc=%d %s", rc, err);
    free(j);
    j = strdup(TOK_JSON);
    m = strstr(j, "\"Regex\":\"");
    memcpy(m + 9, "((", 2);  /* " ?" -> "((": unbalanced parentheses */
    rc = mact_tokenizer_load_json(j, strlen(j), &t, err, sizeof err);
    TH_CHECK("load_bad_regex", rc == MACT_ERR_UNSUPPORTED && !t && strstr(err, "PCRE2"), "rc=%d %s", rc, err);
    free(j);
    const char *noarr = "[1, 2, 3]";
    rc = mact_tokenizer_load_json(noarr, strlen(noarr), &t, err, sizeof err);
    TH_CHECK("load_not_an_object", rc == MACT_ERR_FORMAT && !t, "rc=%d %s", rc, err);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "encode") == 0) return tool_encode(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "unicode-info") == 0) return tool_unicode_info(argv[2]);
    if (argc > 1) {
        fprintf(stderr, "usage: %s [encode TOKENIZER.json CORPUS.hex OUT.txt]\n", argv[0]);
        return 2;
    }
    const char *tmp = getenv("MACT_TMP");
    if (!tmp || !*tmp) tmp = "/tmp";
    char err[512] = "";
    int rc = mact_tokenizer_load_json(TOK_JSON, strlen(TOK_JSON), &TOK, err, sizeof err);
    TH_CHECK("load_handmade", rc == 0 && TOK, "rc=%d %s", rc, err);
    if (TOK) {
        test_bpe();
        test_added();
        test_errors(tmp);
        mact_tokenizer_free(TOK);
    }
    TH_EXIT();
}
