/* Byte-level BPE tokenizer (HF tokenizer.json, Qwen2/Qwen3 family). See tokenizer.h for the
 * contract; the comments here explain where the HF Rust implementation's behaviour is mirrored. */
#include "io/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>
#include "base/file.h"
#include "base/json.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "mact.h"
#include "base/err.h"

/* Ids are stored as int32 internally; a larger id (or a table that big) means a broken file. */
#define MAX_TOKEN_ID ((int64_t)1 << 26)
#define MAX_SPLIT_STEPS 8
#define MAX_JSON_BYTES ((int64_t)1 << 30)

#define set_err mact_errf  /* one formatter for every module's errors */

/* ------------------------------------------------------------------------------------------------
 * String pool: every token string lives in a few big chunks instead of ~150k small allocations. */

typedef struct pool_chunk {
    struct pool_chunk *next;
    size_t used, cap;
    char data[];
} pool_chunk;

static char *pool_strdup(pool_chunk **pool, const char *s, size_t len)
{
    pool_chunk *c = *pool;
    if (!c || c->cap - c->used < len + 1) {
        size_t cap = len + 1 > ((size_t)1 << 20) ? len + 1 : ((size_t)1 << 20);
        pool_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->next = c;
        n->used = 0;
        n->cap = cap;
        *pool = c = n;
    }
    char *d = c->data + c->used;
    memcpy(d, s, len);
    d[len] = 0;
    c->used += len + 1;
    return d;
}

static void pool_free(pool_chunk *c)
{
    while (c) {
        pool_chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Open-addressing hash maps: string -> int32 (vocab, added tokens) and (id, id) -> merge. */

typedef struct {
    const char *s;  /* pooled */
    uint32_t len;
    int32_t val;
} smap_entry;

typedef struct {
    smap_entry *e;
    size_t n, cap;
    uint32_t *slot;  /* entry index + 1; 0 = empty */
    size_t mask;
} smap;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int smap_init(smap *m, size_t expect)
{
    size_t sz = 16;
    while (sz < expect * 2) sz <<= 1;
    m->slot = calloc(sz, sizeof *m->slot);
    m->e = malloc((expect ? expect : 1) * sizeof *m->e);
    m->mask = sz - 1;
    m->n = 0;
    m->cap = expect ? expect : 1;
    return (m->slot && m->e) ? 0 : -1;
}

static void smap_free(smap *m)
{
    free(m->slot);
    free(m->e);
}

static const smap_entry *smap_get(const smap *m, const char *s, size_t n)
{
    if (!m->slot) return NULL;
    for (size_t i = hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t k = m->slot[i];
        if (!k) return NULL;
        const smap_entry *e = &m->e[k - 1];
        if (e->len == n && memcmp(e->s, s, n) == 0) return e;
    }
}

/* Inserts or overwrites (the later duplicate wins, as when HF builds a map from JSON). */
static int smap_put(smap *m, const char *pooled, size_t n, int32_t val)
{
    if ((m->n + 1) * 2 > m->mask + 1) {  /* keep load <= 1/2 */
        size_t sz = (m->mask + 1) * 2;
        uint32_t *ns = calloc(sz, sizeof *ns);
        if (!ns) return -1;
        for (size_t j = 0; j < m->n; j++) {
            size_t i = hash_bytes(m->e[j].s, m->e[j].len) & (sz - 1);
            while (ns[i]) i = (i + 1) & (sz - 1);
            ns[i] = (uint32_t)j + 1;
        }
        free(m->slot);
        m->slot = ns;
        m->mask = sz - 1;
    }
    size_t i = hash_bytes(pooled, n) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t k = m->slot[i];
        if (!k) break;
        smap_entry *e = &m->e[k - 1];
        if (e->len == n && memcmp(e->s, pooled, n) == 0) {
            e->val = val;
            return 0;
        }
    }
    if (m->n == m->cap) {
        size_t nc = m->cap * 2;
        smap_entry *ne = realloc(m->e, nc * sizeof *ne);
        if (!ne) return -1;
        m->e = ne;
        m->cap = nc;
    }
    m->e[m->n] = (smap_entry){pooled, (uint32_t)n, val};
    m->slot[i] = (uint32_t)++m->n;
    return 0;
}

typedef struct {
    uint64_t key;  /* left id << 32 | right id; UINT64_MAX = empty */
    int32_t rank, new_id;
} merge_entry;

typedef struct {
    merge_entry *t;
    size_t mask;
} merge_map;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static const merge_entry *merge_get(const merge_map *m, int32_t a, int32_t b)
{
    if (!m->t) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->t[i].key == key) return &m->t[i];
        if (m->t[i].key == UINT64_MAX) return NULL;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Added-token trie: byte-wise, first-child / next-sibling. Lookups return the longest token that
 * starts at a position, which scanned left to right gives aho-corasick's leftmost-longest. */

typedef struct {
    int32_t child, sibling, tok;  /* tok: index into added[], -1 if no token ends here */
    uint8_t byte;
} trie_node;

typedef struct {
    trie_node *n;
    size_t count, cap;
} trie;

static int32_t trie_new_node(trie *t, uint8_t byte)
{
    if (t->count == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        trie_node *nn = realloc(t->n, nc * sizeof *nn);
        if (!nn) return -1;
        t->n = nn;
        t->cap = nc;
    }
    t->n[t->count] = (trie_node){-1, -1, -1, byte};
    return (int32_t)t->count++;
}

static int trie_insert(trie *t, const char *s, size_t len, int32_t tok)
{
    if (!t->count && trie_new_node(t, 0) < 0) return -1;
    int32_t cur = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = t->n[cur].child;
        while (c >= 0 && t->n[c].byte != b) c = t->n[c].sibling;
        if (c < 0) {
            c = trie_new_node(t, b);
            if (c < 0) return -1;
            t->n[c].sibling = t->n[cur].child;
            t->n[cur].child = c;
        }
        cur = c;
    }
    t->n[cur].tok = tok;  /* a later duplicate content wins, like a map insert */
    return 0;
}

/* Longest token matching s[0..n); returns its index and length, or -1. */
static int32_t trie_longest(const trie *t, const char *s, size_t n, size_t *mlen)
{
    if (!t->count) return -1;
    int32_t cur = 0, best = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t c = t->n[cur].child;
        while (c >= 0 && t->n[c].byte != (uint8_t)s[i]) c = t->n[c].sibling;
        if (c < 0) break;
        cur = c;
        if (t->n[cur].tok >= 0) {
            best = t->n[cur].tok;
            *mlen = i + 1;
        }
    }
    return best;
}

/* ------------------------------------------------------------------------------------------------
 * The tokenizer. */

typedef struct {
    const char *content;  /* pooled */
    size_t len;
    int32_t id;
    uint8_t special, single_word, lstrip, rstrip, normalized;  /* 0 or 1 */
} added_token;

struct mact_tokenizer {
    pool_chunk *pool;
    smap vocab;               /* BPE vocab: byte-level string -> id */
    smap added_map;           /* added token content -> id */
    merge_map merges;
    added_token *added;
    size_t n_added;
    trie raw_trie, norm_trie; /* normalized=false / normalized=true added tokens */
    const char **id_to_tok;   /* [vocab_size] */
    int64_t vocab_size;
    int nfc;
    pcre2_code *split[MAX_SPLIT_STEPS];
    int n_split;
    int32_t byte_id[256];     /* vocab id of each byte's ByteLevel character, -1 if missing */
    char byte_str[256][3];    /* that character in UTF-8 (1 or 2 bytes) */
    uint8_t byte_len[256];
    int32_t unk_id;           /* -1: none */
    int fuse_unk, ignore_merges;
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * U+0100.. in byte order, so every byte becomes one visible character. */
static void init_byte_level(mact_tokenizer *t)
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        int cp = keep ? b : next++;
        if (cp < 0x80) {
            t->byte_str[b][0] = (char)cp;
            t->byte_len[b] = 1;
        } else {  /* all code points here are < 0x800: two UTF-8 bytes */
            t->byte_str[b][0] = (char)(0xC0 | (cp >> 6));
            t->byte_str[b][1] = (char)(0x80 | (cp & 0x3F));
            t->byte_len[b] = 2;
        }
    }
}

void mact_tokenizer_free(mact_tokenizer *t)
{
    if (!t) return;
    smap_free(&t->vocab);
    smap_free(&t->added_map);
    free(t->merges.t);
    free(t->added);
    free(t->raw_trie.n);
    free(t->norm_trie.n);
    free(t->id_to_tok);
    for (int i = 0; i < t->n_split; i++) pcre2_code_free(t->split[i]);
    pool_free(t->pool);
    free(t);
}

/* ---- loading helpers */

static int json_bool(const cJSON *obj, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
}

static const char *json_type(const cJSON *obj)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int parse_normalizer(mact_tokenizer *t, const cJSON *n, char *err, size_t errlen)
{
    if (!n || cJSON_IsNull(n)) return MACT_OK;
    const char *type = json_type(n);
    if (type && strcmp(type, "NFC") == 0) {
        t->nfc = 1;
        return MACT_OK;
    }
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: normalizer Sequence without a normalizers list");
        cJSON_ArrayForEach(it, list)
        {
            int rc = parse_normalizer(t, it, err, errlen);
            if (rc) return rc;
        }
        return MACT_OK;
    }
    return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: normalizer type '%s' not supported (only NFC)",
                   type ? type : "?");
}

static int add_split_regex(mact_tokenizer *t, const char *pat, int literal, char *err, size_t errlen)
{
    if (t->n_split == MAX_SPLIT_STEPS)
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: more than %d Split pre-tokenizers",
                       MAX_SPLIT_STEPS);
    int ec;
    PCRE2_SIZE eo;
    /* UTF + UCP: \s, \p{L}, \p{N} and case folding use Unicode properties, as in Oniguruma. */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0), &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED,
                       "tokenizer.json: split pattern does not compile with PCRE2 at offset %zu: %s", (size_t)eo,
                       (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  /* optional speed-up; the interpreter is the fallback */
    t->split[t->n_split++] = re;
    return MACT_OK;
}

static int parse_pretok(mact_tokenizer *t, const cJSON *p, int *has_bl, char *err, size_t errlen)
{
    const char *type = p ? json_type(p) : NULL;
    if (!type)
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED,
                       "tokenizer.json: a ByteLevel pre_tokenizer is required (got none)");
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"), *it;
        if (!cJSON_IsArray(list))
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: pre_tokenizer Sequence without pretokenizers");
        cJSON_ArrayForEach(it, list)
        {
            int rc = parse_pretok(t, it, has_bl, err, errlen);
            if (rc) return rc;
        }
        return MACT_OK;
    }
    if (*has_bl)  /* anything after ByteLevel would see mapped characters */
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED,
                       "tokenizer.json: pre_tokenizer '%s' after ByteLevel not supported", type);
    if (strcmp(type, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(p, "behavior");
        const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        if (!cJSON_IsString(rx) && !cJSON_IsString(str))
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: Split without a Regex/String pattern");
        if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0)
            return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: Split behavior '%s' not supported (only Isolated)",
                           cJSON_IsString(beh) ? beh->valuestring : "?");
        if (json_bool(p, "invert", 0))
            return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: Split invert=true not supported");
        return cJSON_IsString(rx) ? add_split_regex(t, rx->valuestring, 0, err, errlen)
                                  : add_split_regex(t, str->valuestring, 1, err, errlen);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (json_bool(p, "add_prefix_space", 0))
            return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: ByteLevel add_prefix_space=true not supported");
        if (json_bool(p, "use_regex", 1))
            return set_err(err, errlen, MACT_ERR_UNSUPPORTED,
                           "tokenizer.json: ByteLevel use_regex=true not supported (use a Split step)");
        *has_bl = 1;
        return MACT_OK;
    }
    return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer type '%s' not supported", type);
}

static int check_id(double v, const char *what, const char *name, char *err, size_t errlen)
{
    if (!(v >= 0 && v < (double)MAX_TOKEN_ID) || v != (double)(int64_t)v)
        return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: %s '%s' has invalid id %g", what, name, v);
    return MACT_OK;
}

static int parse_model(mact_tokenizer *t, const cJSON *m, char *err, size_t errlen)
{
    const char *type = json_type(m);
    if (!cJSON_IsObject(m))
        return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: missing \"model\"");
    if (type && strcmp(type, "BPE") != 0)
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: model type '%s' not supported (only BPE)", type);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (cJSON_IsNumber(drop) && drop->valuedouble != 0.0)
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout not supported");
    const char *affix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(m, affix[i]);
        if (cJSON_IsString(a) && a->valuestring[0])
            return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: BPE %s not supported", affix[i]);
    }
    if (json_bool(m, "byte_fallback", 0))
        return set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: BPE byte_fallback not supported");
    t->fuse_unk = json_bool(m, "fuse_unk", 0);
    t->ignore_merges = json_bool(m, "ignore_merges", 0);

    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab"), *it;
    if (!cJSON_IsObject(vocab))
        return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: model.vocab is missing or not an object");
    size_t nv = (size_t)cJSON_GetArraySize(vocab);
    if (smap_init(&t->vocab, nv) != 0) return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    cJSON_ArrayForEach(it, vocab)
    {
        if (!cJSON_IsNumber(it) || !it->string)
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: vocab entry '%s' is not a number",
                           it->string ? it->string : "?");
        int rc = check_id(it->valuedouble, "vocab entry", it->string, err, errlen);
        if (rc) return rc;
        size_t len = strlen(it->string);
        const char *s = pool_strdup(&t->pool, it->string, len);
        if (!s || smap_put(&t->vocab, s, len, (int32_t)it->valuedouble))
            return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
        if ((int64_t)it->valuedouble + 1 > t->vocab_size) t->vocab_size = (int64_t)it->valuedouble + 1;
    }

    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    t->unk_id = -1;
    if (cJSON_IsString(unk)) {
        const smap_entry *e = smap_get(&t->vocab, unk->valuestring, strlen(unk->valuestring));
        if (!e)
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: unk_token '%s' is not in the vocab",
                           unk->valuestring);
        t->unk_id = e->val;
    }

    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!merges || cJSON_IsNull(merges)) return MACT_OK;
    if (!cJSON_IsArray(merges))
        return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: model.merges is not an array");
    size_t nm = (size_t)cJSON_GetArraySize(merges), sz = 16;
    while (sz < nm * 2) sz <<= 1;
    t->merges.t = malloc(sz * sizeof *t->merges.t);
    if (!t->merges.t) return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    t->merges.mask = sz - 1;
    for (size_t i = 0; i < sz; i++) t->merges.t[i].key = UINT64_MAX;
    char *buf = NULL;
    size_t bufcap = 0;
    int32_t rank = 0;
    int rc = MACT_OK;
    cJSON_ArrayForEach(it, merges)
    {
        /* A merge is "left right" (older files) or ["left", "right"] (newer ones). Byte-level
         * tokens never contain a space, so splitting the string form at its space is unambiguous. */
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if (cJSON_IsString(it)) {
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = it->valuestring;
                la = (size_t)(sp - a);
                b = sp + 1;
                lb = strlen(b);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 0)) && cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring;
            b = cJSON_GetArrayItem(it, 1)->valuestring;
            la = strlen(a);
            lb = strlen(b);
        }
        if (!a || !la || !lb) {
            rc = set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: merge #%d is malformed", (int)rank);
            break;
        }
        if (la + lb > bufcap) {
            bufcap = (la + lb) * 2;
            char *nb = realloc(buf, bufcap);
            if (!nb) {
                rc = set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
                break;
            }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        const smap_entry *ea = smap_get(&t->vocab, a, la), *eb = smap_get(&t->vocab, b, lb);
        const smap_entry *ec = smap_get(&t->vocab, buf, la + lb);
        if (!ea || !eb || !ec) {
            rc = set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: merge #%d '%.*s' + '%.*s': %s not in the vocab",
                         (int)rank, (int)la, a, (int)lb, b, !ea ? "left part" : !eb ? "right part" : "merged token");
            break;
        }
        uint64_t key = ((uint64_t)(uint32_t)ea->val << 32) | (uint32_t)eb->val;
        size_t i = mix64(key) & t->merges.mask;
        while (t->merges.t[i].key != UINT64_MAX && t->merges.t[i].key != key) i = (i + 1) & t->merges.mask;
        if (t->merges.t[i].key == UINT64_MAX)  /* a repeated pair keeps its first (best) rank */
            t->merges.t[i] = (merge_entry){key, rank, ec->val};
        rank++;
    }
    free(buf);
    return rc;
}

static int parse_added(mact_tokenizer *t, const cJSON *list, char *err, size_t errlen)
{
    if (!list || cJSON_IsNull(list)) return MACT_OK;
    if (!cJSON_IsArray(list)) return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: added_tokens is not an array");
    size_t n = (size_t)cJSON_GetArraySize(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added || smap_init(&t->added_map, n)) return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content) || !content->valuestring[0])
            return set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] needs an id and a non-empty content",
                           t->n_added);
        int rc = check_id(id->valuedouble, "added token", content->valuestring, err, errlen);
        if (rc) return rc;
        added_token *a = &t->added[t->n_added];
        a->len = strlen(content->valuestring);
        a->content = pool_strdup(&t->pool, content->valuestring, a->len);
        if (!a->content) return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
        a->id = (int32_t)id->valuedouble;
        a->special = (uint8_t)json_bool(it, "special", 0);
        a->single_word = (uint8_t)json_bool(it, "single_word", 0);
        a->lstrip = (uint8_t)json_bool(it, "lstrip", 0);
        a->rstrip = (uint8_t)json_bool(it, "rstrip", 0);
        a->normalized = (uint8_t)json_bool(it, "normalized", !a->special);  /* HF's default */
        if (smap_put(&t->added_map, a->content, a->len, a->id) ||
            trie_insert(a->normalized ? &t->norm_trie : &t->raw_trie, a->content, a->len, (int32_t)t->n_added))
            return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
        if ((int64_t)a->id + 1 > t->vocab_size) t->vocab_size = (int64_t)a->id + 1;
        t->n_added++;
    }
    return MACT_OK;
}

int mact_tokenizer_load_json(const char *json, size_t len, mact_tokenizer **out, char *err, size_t errlen)
{
    if (!out) return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: NULL output");
    *out = NULL;
    if (!json) return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: NULL json");
    /* strict JSON: every key and string valid UTF-8 (added tokens split the text, and the pieces between them
     * go to PCRE2 without its UTF check), no duplicated key, bounded depth */
    cJSON *root = NULL;
    int jrc = mact_json_parse(json, len, "tokenizer.json", &root, err, errlen);
    if (jrc) return jrc;
    mact_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    }
    init_byte_level(t);
    int has_bl = 0;
    int rc = cJSON_IsObject(root) ? MACT_OK
                                  : set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: top level is not an object");
    if (!rc) rc = parse_model(t, cJSON_GetObjectItemCaseSensitive(root, "model"), err, errlen);
    if (!rc) rc = parse_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err, errlen);
    if (!rc) rc = parse_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), err, errlen);
    if (!rc) rc = parse_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &has_bl, err, errlen);
    if (!rc && !has_bl)
        rc = set_err(err, errlen, MACT_ERR_UNSUPPORTED, "tokenizer.json: pre_tokenizer has no ByteLevel step");
    cJSON_Delete(root);
    /* the id table is sized by the largest id: refuse a file whose ids are far sparser than a real vocab */
    if (!rc && t->vocab_size > 2 * (int64_t)(t->vocab.n + t->n_added) + 4096)
        rc = set_err(err, errlen, MACT_ERR_FORMAT, "tokenizer.json: the largest token id %lld is far above the %zu "
                     "tokens defined (ids may leave at most as many gaps as tokens, plus 4096)",
                     (long long)t->vocab_size - 1, t->vocab.n + t->n_added);
    if (!rc) {
        t->id_to_tok = calloc((size_t)(t->vocab_size ? t->vocab_size : 1), sizeof *t->id_to_tok);
        if (!t->id_to_tok) rc = set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (!rc) {
        for (size_t i = 0; i < t->vocab.n; i++) t->id_to_tok[t->vocab.e[i].val] = t->vocab.e[i].s;
        for (size_t i = 0; i < t->n_added; i++) t->id_to_tok[t->added[i].id] = t->added[i].content;
        for (int b = 0; b < 256; b++) {
            const smap_entry *e = smap_get(&t->vocab, t->byte_str[b], t->byte_len[b]);
            t->byte_id[b] = e ? e->val : -1;
        }
    }
    if (rc) {
        mact_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return MACT_OK;
}

int mact_tokenizer_load(const char *path, mact_tokenizer **out, char *err, size_t errlen)
{
    if (!out) return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: NULL output");
    *out = NULL;
    if (!path) return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: NULL path");
    char *buf = NULL;
    size_t n = 0;
    int frc = mact_file_read_all(path, (size_t)MAX_JSON_BYTES, &buf, &n, err, errlen);
    if (frc) return frc;
    char sub[1024] = "";
    int rc = mact_tokenizer_load_json(buf, n, out, sub, sizeof sub);
    free(buf);
    if (rc) set_err(err, errlen, rc, "%s: %s", path, sub);
    return rc;
}

int64_t mact_tokenizer_token_to_id(const mact_tokenizer *t, const char *token)
{
    if (!t || !token) return -1;
    size_t n = strlen(token);
    const smap_entry *e = smap_get(&t->added_map, token, n);
    if (!e) e = smap_get(&t->vocab, token, n);
    return e ? e->val : -1;
}

const char *mact_tokenizer_id_to_token(const mact_tokenizer *t, int64_t id)
{
    if (!t || id < 0 || id >= t->vocab_size) return NULL;
    return t->id_to_tok[id];
}

int mact_tokenizer_find_added(const mact_tokenizer *t, const char *text, size_t len, size_t *off,
                              const char **content)
{
    if (!t || !text) return 0;
    for (size_t i = 0; i < len; i++) {
        size_t ml = 0;
        int32_t k = trie_longest(&t->raw_trie, text + i, len - i, &ml);
        if (k < 0) k = trie_longest(&t->norm_trie, text + i, len - i, &ml);
        if (k >= 0) {
            *off = i;
            *content = t->added[k].content;
            return 1;
        }
    }
    return 0;
}

int64_t mact_tokenizer_vocab_size(const mact_tokenizer *t) { return t ? t->vocab_size : 0; }

/* ------------------------------------------------------------------------------------------------
 * Encoding. All scratch memory of one call lives in a workspace that grows geometrically, so the
 * steady state allocates nothing per token; the tokenizer itself stays read-only. */

typedef struct {
    int32_t rank, pos, new_id;
} heap_item;

typedef struct {
    int32_t id, prev, next;  /* linked list over the word's symbols; next = -1 at the end */
    int alive;
} symbol;

typedef struct {
    const mact_tokenizer *t;
    int64_t *ids;
    size_t n_ids, cap_ids;
    symbol *sym;
    size_t cap_sym;
    heap_item *heap;
    size_t n_heap, cap_heap;
    char *mapped;  /* ignore_merges lookup buffer */
    size_t cap_mapped;
    pcre2_match_data *md[MAX_SPLIT_STEPS];
    char *err;
    size_t errlen;
} workspace;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int emit(workspace *w, int64_t id)
{
    if (grow((void **)&w->ids, &w->cap_ids, w->n_ids + 1, sizeof *w->ids))
        return set_err(w->err, w->errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    w->ids[w->n_ids++] = id;
    return MACT_OK;
}

static int heap_less(const heap_item *a, const heap_item *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(workspace *w, heap_item it)
{
    size_t i = w->n_heap++;  /* capacity reserved by the caller */
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = it;
}

static heap_item heap_pop(workspace *w)
{
    heap_item top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!heap_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void push_pair(workspace *w, int32_t pos)
{
    const symbol *s = &w->sym[pos];
    if (s->next < 0) return;
    const merge_entry *m = merge_get(&w->t->merges, s->id, w->sym[s->next].id);
    if (m) heap_push(w, (heap_item){m->rank, pos, m->new_id});
}

/* BPE on one pre-tokenized piece (raw bytes; the ByteLevel mapping is implicit in byte_id).
 * Mirrors HF's Word::merge_all: a priority queue keyed by (rank, position) so equal ranks merge
 * leftmost first, and stale entries are skipped when the pair at their position has changed. */
static int bpe_piece(workspace *w, const uint8_t *s, size_t n)
{
    const mact_tokenizer *t = w->t;
    if (t->ignore_merges) {  /* a piece that is itself a vocab token is emitted whole */
        if (grow((void **)&w->mapped, &w->cap_mapped, 2 * n + 1, 1))
            return set_err(w->err, w->errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(w->mapped + m, t->byte_str[s[i]], t->byte_len[s[i]]);
            m += t->byte_len[s[i]];
        }
        const smap_entry *e = smap_get(&t->vocab, w->mapped, m);
        if (e) return emit(w, e->val);
    }
    if (grow((void **)&w->sym, &w->cap_sym, n, sizeof *w->sym) ||
        grow((void **)&w->heap, &w->cap_heap, 3 * n + 1, sizeof *w->heap))
        return set_err(w->err, w->errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0) {
            if (t->unk_id < 0)
                return set_err(w->err, w->errlen, MACT_ERR_FORMAT,
                               "tokenizer: byte 0x%02x has no vocab entry and the model has no unk_token", s[i]);
            if (t->fuse_unk && ns > 0 && w->sym[ns - 1].id == t->unk_id) continue;
            id = t->unk_id;
        }
        w->sym[ns] = (symbol){id, ns - 1, ns + 1, 1};
        ns++;
    }
    if (ns == 0) return MACT_OK;
    w->sym[ns - 1].next = -1;
    w->n_heap = 0;
    for (int32_t i = 0; i + 1 < ns; i++) push_pair(w, i);
    while (w->n_heap) {
        heap_item top = heap_pop(w);
        symbol *l = &w->sym[top.pos];
        if (!l->alive || l->next < 0) continue;
        symbol *r = &w->sym[l->next];
        const merge_entry *m = merge_get(&t->merges, l->id, r->id);
        if (!m || m->new_id != top.new_id) continue;  /* stale entry */
        l->id = top.new_id;
        r->alive = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = top.pos;
        if (l->prev >= 0) push_pair(w, l->prev);
        push_pair(w, top.pos);
    }
    for (int32_t i = 0; i >= 0; i = w->sym[i].next) {
        int rc = emit(w, w->sym[i].id);
        if (rc) return rc;
    }
    return MACT_OK;
}

/* Split step k (regex, behaviour Isolated: every match and every gap between matches becomes a
 * piece); after the last step, BPE. The subject is just this piece, so lookarounds see its ends
 * exactly as HF's per-split regex does. */
static int split_and_bpe(workspace *w, int k, const char *s, size_t n)
{
    if (n == 0) return MACT_OK;
    if (k == w->t->n_split) return bpe_piece(w, (const uint8_t *)s, n);
    pcre2_code *re = w->t->split[k];
    size_t off = 0, last = 0;
    uint32_t opts = PCRE2_NO_UTF_CHECK;  /* validated once up front */
    while (off <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, opts, w->md[k], NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !(opts & PCRE2_NO_JIT)) {
            opts |= PCRE2_NO_JIT;  /* very long runs: the interpreter keeps its frames on the heap */
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return set_err(w->err, w->errlen, MACT_ERR_INPUT, "tokenizer: regex match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md[k]);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {  /* empty match: not a piece; step over one character */
            off = me + 1;
            while (off < n && ((uint8_t)s[off] & 0xC0) == 0x80) off++;
            continue;
        }
        if (ms > last) {
            int r2 = split_and_bpe(w, k + 1, s + last, ms - last);
            if (r2) return r2;
        }
        int r2 = split_and_bpe(w, k + 1, s + ms, me - ms);
        if (r2) return r2;
        last = off = me;
    }
    return last < n ? split_and_bpe(w, k + 1, s + last, n - last) : MACT_OK;
}

/* Decodes the code point starting at s[0] (valid UTF-8 assumed), returning its length. */
static int utf8_decode(const uint8_t *s, int32_t *cp)
{
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    if (s[0] < 0xE0) { *cp = ((s[0] & 0x1F) << 6) | (s[1] & 0x3F); return 2; }
    if (s[0] < 0xF0) { *cp = ((s[0] & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F); return 3; }
    *cp = ((s[0] & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

/* Start of the character that ends just before s[i]. */
static size_t utf8_prev(const char *s, size_t i)
{
    do i--; while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
    return i;
}

/* Rust's char::is_whitespace (the Unicode White_Space property). */
static int is_ws(int32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* Rust's is_alphanumeric() || '_' as HF's single_word uses it, approximated by the general
 * category (letters and numbers; misses Other_Alphabetic marks). */
static int is_word_char(int32_t c)
{
    if (c == '_') return 1;
    utf8proc_category_t cat = utf8proc_category(c);
    return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
           (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

typedef int (*segment_fn)(workspace *w, const char *s, size_t n);

/* Finds added tokens of trie tr in s[0..n) (HF AddedVocabulary::find_matches) and calls `rest` on
 * the text between them. */
static int split_added(workspace *w, const trie *tr, const char *s, size_t n, segment_fn rest)
{
    if (!tr->count) return rest(w, s, n);
    const mact_tokenizer *t = w->t;
    size_t seg = 0, pos = 0;
    while (pos < n) {
        size_t mlen = 0;
        int32_t ti = trie_longest(tr, s + pos, n - pos, &mlen);
        if (ti < 0) {
            pos++;
            continue;
        }
        const added_token *a = &t->added[ti];
        size_t start = pos, stop = pos + mlen;
        if (a->single_word) {
            int32_t c;
            int left_ok = start == 0 || (utf8_decode((const uint8_t *)s + utf8_prev(s, start), &c), !is_word_char(c));
            int right_ok = stop == n || (utf8_decode((const uint8_t *)s + stop, &c), !is_word_char(c));
            if (!left_ok || !right_ok) {  /* aho-corasick has consumed the match anyway */
                pos = stop;
                continue;
            }
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > seg) {
                size_t p = utf8_prev(s, ns);
                int32_t c;
                utf8_decode((const uint8_t *)s + p, &c);
                if (!is_ws(c)) break;
                ns = p;
            }
            start = ns;
        }
        if (a->rstrip) {
            int32_t c;
            while (stop < n) {
                int l = utf8_decode((const uint8_t *)s + stop, &c);
                if (!is_ws(c)) break;
                stop += (size_t)l;
            }
        }
        if (start > seg) {
            int rc = rest(w, s + seg, start - seg);
            if (rc) return rc;
        }
        int rc = emit(w, a->id);
        if (rc) return rc;
        seg = pos = stop;
    }
    return n > seg ? rest(w, s + seg, n - seg) : MACT_OK;
}

static int pretokenize(workspace *w, const char *s, size_t n) { return split_and_bpe(w, 0, s, n); }

/* Normalises one stretch between raw added tokens, then looks for normalized added tokens in it. */
static int normalize_segment(workspace *w, const char *s, size_t n)
{
    const mact_tokenizer *t = w->t;
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = (uint8_t)s[i] < 0x80;
    if (!t->nfc || ascii)  /* ASCII is NFC already */
        return split_added(w, &t->norm_trie, s, n, pretokenize);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (m < 0) {
        free(nfc);
        return set_err(w->err, w->errlen, m == UTF8PROC_ERROR_NOMEM ? MACT_ERR_NOMEM : MACT_ERR_INPUT,
                       "tokenizer: NFC normalisation failed: %s", utf8proc_errmsg(m));
    }
    int rc = split_added(w, &t->norm_trie, (const char *)nfc, (size_t)m, pretokenize);
    free(nfc);
    return rc;
}

/* Strict UTF-8: no overlongs, surrogates, code points above U+10FFFF or truncated sequences.
 * Returns the offset of the first bad byte, or len. */
static size_t utf8_validate(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        uint32_t lo = 0x80, hi = 0xBF;  /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;  /* overlong */
            if (c == 0xED) hi = 0x9F;  /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;  /* overlong */
            if (c == 0xF4) hi = 0x8F;  /* > U+10FFFF */
        } else return i;
        if (i + need >= len) return i;  /* truncated sequence */
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return len;
}

int mact_tokenizer_encode(const mact_tokenizer *t, const char *text, size_t len, int64_t *ids, size_t cap,
                          size_t *n_ids, char *err, size_t errlen)
{
    if (n_ids) *n_ids = 0;
    if (!t || (!text && len) || !n_ids || (!ids && cap))
        return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: NULL argument");
    size_t bad = utf8_validate((const uint8_t *)text, len);
    if (bad < len)
        return set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: invalid UTF-8 at byte offset %zu (byte 0x%02x)", bad,
                       (unsigned)(uint8_t)text[bad]);
    workspace w;
    memset(&w, 0, sizeof w);
    w.t = t;
    w.err = err;
    w.errlen = errlen;
    int rc = MACT_OK;
    for (int k = 0; k < t->n_split && !rc; k++) {
        w.md[k] = pcre2_match_data_create_from_pattern(t->split[k], NULL);
        if (!w.md[k]) rc = set_err(err, errlen, MACT_ERR_NOMEM, "tokenizer: out of memory");
    }
    if (!rc && len) rc = split_added(&w, &t->raw_trie, text, len, normalize_segment);
    if (!rc) {
        *n_ids = w.n_ids;
        size_t k = w.n_ids < cap ? w.n_ids : cap;
        if (k) memcpy(ids, w.ids, k * sizeof *ids);
        if (w.n_ids > cap && (ids || cap))
            rc = set_err(err, errlen, MACT_ERR_INPUT, "tokenizer: %zu ids do not fit in the %zu provided", w.n_ids, cap);
    }
    for (int k = 0; k < t->n_split; k++) pcre2_match_data_free(w.md[k]);
    free(w.ids);
    free(w.sym);
    free(w.heap);
    free(w.mapped);
    return rc;
}
