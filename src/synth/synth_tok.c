/* The synthetic checkpoint's tokenizer.json: byte-level BPE (Qwen2 pre-tokenizer) with merges learned from a
 * small corpus, the special tokens at the ids of the layout in synth.h. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "base/err.h"
#include "base/rng.h"
#include "synth/synth_internal.h"

const char *const MACT_SYNTH_ROBOT_TOKENS[9] = {"<setup_start>", "<setup_end>", "<control_start>", "<control_end>",
                                      "<state_start>", "<state_end>", "<action_start>", "<action_end>",
                                      "<action_output>"};
const char *const MACT_SYNTH_IMAGE_TOKENS[9] = {"<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>",
                                      "<|image|>", "<im_low>", "<frame_start>", "<frame_end>"};


token_ids mact_synth_layout_ids(int64_t vocab, int num_state_tokens)
{
    token_ids t;
    t.V = vocab;
    t.P = vocab - 12 - num_state_tokens;
    t.endoftext = t.P;
    t.im_start = t.P + 1;
    t.im_end = t.P + 2;
    t.setup_start = t.P + 3;
    t.setup_end = t.P + 4;
    t.control_start = t.P + 5;
    t.control_end = t.P + 6;
    t.state_start = t.P + 7;
    t.state_end = t.P + 8;
    t.action_start = t.P + 9;
    t.action_end = t.P + 10;
    t.action_output = t.P + 11;
    t.state0 = t.P + 12;
    return t;
}

/* ------------------------------------------------------------------------------------------------
 * tokenizer.json: byte-level BPE (Qwen2 pre-tokenizer) with merges learned from a small corpus */

static const char CORPUS[] =
    "Image 1 Image 2 The task is to put both the alphabet soup and the tomato sauce in the basket. "
    "The setup is single franka robotic arm in libero. The current state of the robot is . "
    "The expected control mode is delta end-effector pose. "
    "Given these, what action should the robot take to complete the task?\n"
    "user\nassistant\n"
    "The task is to pick up the red cube and place it in the box. The setup is single so101 robotic arm. "
    "The expected control mode is absolute joint position. "
    "Given these, what action should the robot take to complete the task?\n"
    "put both the cream cheese box and the butter in the basket\n"
    "turn on the stove and put the moka pot on it\n"
    "put the black bowl in the bottom drawer of the cabinet and close it\n"
    "put the white mug on the left plate and put the yellow and white mug on the right plate\n"
    "pick up the book and place it in the back compartment of the caddy\n"
    "put the white mug on the plate and put the chocolate pudding to the right of the plate\n"
    "put both the alphabet soup and the cream cheese box in the basket\n"
    "put both moka pots on the stove\n"
    "put the yellow and white mug in the microwave and close it\n"
    "pick up the black bowl between the plate and the ramekin and place it on the plate\n"
    "pick up the black bowl next to the ramekin and place it on the plate\n"
    "pick up the black bowl from table center and place it on the plate\n"
    "pick up the black bowl on the cookie box and place it on the plate\n"
    "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate\n"
    "pick up the black bowl on the ramekin and place it on the plate\n"
    "pick up the black bowl next to the cookie box and place it on the plate\n"
    "pick up the black bowl on the stove and place it on the plate\n"
    "pick up the black bowl next to the plate and place it on the plate\n"
    "pick up the black bowl on the wooden cabinet and place it on the plate\n"
    "open the middle drawer of the cabinet\n"
    "put the bowl on the stove\n"
    "put the wine bottle on top of the cabinet\n"
    "open the top drawer and put the bowl inside\n"
    "put the bowl on top of the cabinet\n"
    "push the plate to the front of the stove\n"
    "put the cream cheese in the bowl\n"
    "turn on the stove\n"
    "put the bowl on the plate\n"
    "put the wine bottle on the rack\n"
    "pick up the alphabet soup and place it in the basket\n"
    "pick up the cream cheese and place it in the basket\n"
    "pick up the salad dressing and place it in the basket\n"
    "pick up the bbq sauce and place it in the basket\n"
    "pick up the ketchup and place it in the basket\n"
    "pick up the tomato sauce and place it in the basket\n"
    "pick up the butter and place it in the basket\n"
    "pick up the milk and place it in the basket\n"
    "pick up the chocolate pudding and place it in the basket\n"
    "pick up the orange juice and place it in the basket\n"
    "grab the green lego block and drop it into the bowl\n"
    "pick the sponge from the table and put it in the bin\n"
    "stack the blue cube on top of the yellow cube\n"
    "move the pen to the left side of the table\n"
    "fold the towel in half\n"
    "pick up the screwdriver and hand it over\n"
    "close the laptop lid slowly\n"
    "pour the water from the cup into the glass\n"
    "place the apple next to the banana on the tray\n"
    "sort the blocks by color: red, green, blue.\n"
    "Task: pick up 3 markers; put them in the cup!\n"
    "The robot's gripper is open, it's holding nothing and we'll close it 2 times.\n"
    "wrist camera, top camera, front camera, shoulder pan, shoulder lift, elbow flex, wrist flex, wrist roll\n";

/* GPT-2 bytes_to_unicode: the id order of the 256 byte tokens (printable bytes first) and each byte's
 * code point. */
static void byte_table(int order[256], int cp[256])
{
    int n = 0, extra = 0, in_bs[256] = {0};
    for (int b = '!'; b <= '~'; b++) in_bs[b] = 1;
    for (int b = 0xA1; b <= 0xAC; b++) in_bs[b] = 1;
    for (int b = 0xAE; b <= 0xFF; b++) in_bs[b] = 1;
    for (int b = 0; b < 256; b++)
        if (in_bs[b]) { order[n++] = b; cp[b] = b; }
    for (int b = 0; b < 256; b++)
        if (!in_bs[b]) { order[n++] = b; cp[b] = 256 + extra++; }
}

static size_t utf8_put(char *o, int c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2;  /* byte-level code points are < 0x800 */
}

/* byte-level (GPT-2 unicode) form of raw bytes; out must hold 2*n+1 */
static void byte_level(const uint8_t *s, size_t n, const int cp[256], char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += utf8_put(out + o, cp[s[i]]);
    out[o] = 0;
}

/* ASCII approximation of the Qwen2 pre-tokenizer, only used to cut the corpus into words for merge
 * learning (any merge list whose parts are in the vocab is a valid tokenizer). */
static size_t next_piece(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c == '\'' && i + 1 < n) {
        static const char *const suf[] = {"ll", "re", "ve", "s", "t", "m", "d"};
        for (int k = 0; k < 7; k++) {
            size_t l = strlen(suf[k]);
            if (i + 1 + l <= n && !strncasecmp(s + i + 1, suf[k], l)) return i + 1 + l;
        }
    }
    if (isalpha(c) || (c != '\r' && c != '\n' && !isalnum(c) && i + 1 < n && isalpha((unsigned char)s[i + 1]))) {
        size_t j = isalpha(c) ? i : i + 1;
        while (j < n && isalpha((unsigned char)s[j])) j++;
        return j;
    }
    if (isdigit(c)) return i + 1;
    size_t j = i;
    if (c == ' ' && i + 1 < n && !isspace((unsigned char)s[i + 1]) && !isalnum((unsigned char)s[i + 1])) j++;
    if (j < n && !isspace((unsigned char)s[j]) && !isalnum((unsigned char)s[j])) {
        while (j < n && !isspace((unsigned char)s[j]) && !isalnum((unsigned char)s[j])) j++;
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    j = i;
    while (j < n && isspace((unsigned char)s[j])) j++;
    return j > i ? j : i + 1;
}

typedef struct { int *sym; int len, count; } bpe_word;
typedef struct { uint8_t *bytes; int len; } bpe_sym;

typedef struct {
    bpe_sym *sym;        /* [n_sym] raw bytes of each token id */
    int n_sym;
    int (*merges)[2];    /* [n_merges] (left id, right id) in rank order */
    int n_merges;
} bpe_model;

static void bpe_free(bpe_model *m)
{
    if (m->sym)
        for (int i = 0; i < m->n_sym; i++) free(m->sym[i].bytes);
    free(m->sym);
    free(m->merges);
}

static int cmp_piece(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* Learns up to max_new new tokens from CORPUS. Deterministic. 0 or MACT_ERR_NOMEM. */
static int bpe_learn(int max_new, const int order[256], bpe_model *m)
{
    memset(m, 0, sizeof *m);
    size_t n = strlen(CORPUS);
    int cap_sym = 256 + max_new;
    m->sym = calloc((size_t)cap_sym, sizeof *m->sym);
    m->merges = malloc((size_t)(max_new > 0 ? max_new : 1) * 4 * sizeof *m->merges);
    char **pieces = malloc(n * sizeof *pieces);
    bpe_word *words = calloc(n, sizeof *words);
    int byte_id[256];
    int rc = MACT_ERR_NOMEM, n_pieces = 0, n_words = 0, max_merges = max_new * 4;
    size_t tsize = 1 << 15;
    uint64_t *tkey = malloc(tsize * sizeof *tkey);
    int *tcnt = malloc(tsize * sizeof *tcnt);
    if (!m->sym || !m->merges || !pieces || !words || !tkey || !tcnt) goto out;
    for (int i = 0; i < 256; i++) {
        byte_id[order[i]] = i;
        m->sym[i].bytes = malloc(1);
        if (!m->sym[i].bytes) goto out;
        m->sym[i].bytes[0] = (uint8_t)order[i];
        m->sym[i].len = 1;
        m->n_sym++;
    }
    for (size_t i = 0; i < n;) {
        size_t j = next_piece(CORPUS, n, i);
        pieces[n_pieces] = strndup(CORPUS + i, j - i);
        if (!pieces[n_pieces]) goto out;
        n_pieces++;
        i = j;
    }
    qsort(pieces, (size_t)n_pieces, sizeof *pieces, cmp_piece);
    for (int i = 0; i < n_pieces;) {
        int j = i;
        while (j < n_pieces && !strcmp(pieces[i], pieces[j])) j++;
        bpe_word *w = &words[n_words++];
        w->len = (int)strlen(pieces[i]);
        w->count = j - i;
        w->sym = malloc((size_t)w->len * sizeof *w->sym);
        if (!w->sym) goto out;
        for (int k = 0; k < w->len; k++) w->sym[k] = byte_id[(uint8_t)pieces[i][k]];
        i = j;
    }
    while (m->n_sym < cap_sym && m->n_merges < max_merges) {
        /* count adjacent pairs */
        for (size_t i = 0; i < tsize; i++) tkey[i] = UINT64_MAX;
        uint64_t best = UINT64_MAX;
        int best_c = 0;
        for (int wi = 0; wi < n_words; wi++) {
            bpe_word *w = &words[wi];
            for (int k = 0; k + 1 < w->len; k++) {
                uint64_t key = ((uint64_t)(uint32_t)w->sym[k] << 32) | (uint32_t)w->sym[k + 1];
                size_t h = mact_splitmix64(key) & (tsize - 1);
                while (tkey[h] != UINT64_MAX && tkey[h] != key) h = (h + 1) & (tsize - 1);
                if (tkey[h] == UINT64_MAX) { tkey[h] = key; tcnt[h] = 0; }
                tcnt[h] += w->count;
                if (tcnt[h] > best_c || (tcnt[h] == best_c && key < best)) { best_c = tcnt[h]; best = key; }
            }
        }
        if (!best_c) break;
        int a = (int)(best >> 32), b = (int)(best & 0xFFFFFFFFu);
        /* the merged token (an existing id when another merge path already built the same string) */
        int la = m->sym[a].len, lb = m->sym[b].len, id = -1;
        for (int s = 256; s < m->n_sym && id < 0; s++)
            if (m->sym[s].len == la + lb && !memcmp(m->sym[s].bytes, m->sym[a].bytes, (size_t)la) &&
                !memcmp(m->sym[s].bytes + la, m->sym[b].bytes, (size_t)lb))
                id = s;
        if (id < 0) {
            uint8_t *nb = malloc((size_t)(la + lb));
            if (!nb) goto out;
            memcpy(nb, m->sym[a].bytes, (size_t)la);
            memcpy(nb + la, m->sym[b].bytes, (size_t)lb);
            id = m->n_sym++;
            m->sym[id].bytes = nb;
            m->sym[id].len = la + lb;
        }
        m->merges[m->n_merges][0] = a;
        m->merges[m->n_merges][1] = b;
        m->n_merges++;
        for (int wi = 0; wi < n_words; wi++) {
            bpe_word *w = &words[wi];
            int o = 0;
            for (int k = 0; k < w->len; k++) {
                if (k + 1 < w->len && w->sym[k] == a && w->sym[k + 1] == b) { w->sym[o++] = id; k++; }
                else w->sym[o++] = w->sym[k];
            }
            w->len = o;
        }
    }
    rc = 0;
out:
    for (int i = 0; i < n_pieces; i++) free(pieces[i]);
    for (int i = 0; i < n_words; i++) free(words[i].sym);
    free(pieces);
    free(words);
    free(tkey);
    free(tcnt);
    if (rc) bpe_free(m);
    return rc;
}

static cJSON *added_token(int64_t id, const char *content)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddBoolToObject(o, "single_word", 0);
    cJSON_AddBoolToObject(o, "lstrip", 0);
    cJSON_AddBoolToObject(o, "rstrip", 0);
    cJSON_AddBoolToObject(o, "normalized", 0);
    cJSON_AddBoolToObject(o, "special", 1);
    return o;
}

static cJSON *byte_level_obj(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 0);
    cJSON_AddBoolToObject(o, "use_regex", 0);
    return o;
}

static const char QWEN2_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define MAX_LEARNED_TOKENS 4096

int mact_synth_tokenizer(int64_t vocab_size, int num_state_tokens, cJSON **out, int *n_merges_out, char *err, size_t errlen)
{
    *out = NULL;
    token_ids id = mact_synth_layout_ids(vocab_size, num_state_tokens);
    if (id.P < 256)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: vocab %lld too small for the token layout",
                         (long long)vocab_size);
    int order[256], cp[256];
    byte_table(order, cp);
    int64_t budget = id.P - 256;
    bpe_model bm;
    if (bpe_learn((int)(budget < MAX_LEARNED_TOKENS ? budget : MAX_LEARNED_TOKENS), order, &bm))
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (BPE)");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON_AddItemToArray(added, added_token(id.endoftext, "<|endoftext|>"));
    cJSON_AddItemToArray(added, added_token(id.im_start, "<|im_start|>"));
    cJSON_AddItemToArray(added, added_token(id.im_end, "<|im_end|>"));
    for (int i = 0; i < 9; i++) cJSON_AddItemToArray(added, added_token(id.setup_start + i, MACT_SYNTH_ROBOT_TOKENS[i]));
    char nm[64];
    for (int k = 0; k < num_state_tokens; k++) {
        snprintf(nm, sizeof nm, "<state_%d>", k);
        cJSON_AddItemToArray(added, added_token(id.state0 + k, nm));
    }
    for (int i = 0; i < 9; i++) cJSON_AddItemToArray(added, added_token(id.V + i, MACT_SYNTH_IMAGE_TOKENS[i]));
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pres = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON *pat = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(pat, "Regex", QWEN2_REGEX);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON_AddItemToArray(pres, split);
    cJSON_AddItemToArray(pres, byte_level_obj("ByteLevel"));
    cJSON_AddItemToObject(root, "post_processor", byte_level_obj("ByteLevel"));
    cJSON_AddItemToObject(root, "decoder", byte_level_obj("ByteLevel"));
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    int maxlen = 0;
    for (int s = 0; s < bm.n_sym; s++) maxlen = bm.sym[s].len > maxlen ? bm.sym[s].len : maxlen;
    char *a = malloc((size_t)maxlen * 4 + 64), *b = malloc((size_t)maxlen * 2 + 2);
    int rc = 0;
    if (!root || !vocab || !a || !b) rc = MACT_ERR_NOMEM;
    for (int s = 0; !rc && s < bm.n_sym; s++) {
        byte_level(bm.sym[s].bytes, (size_t)bm.sym[s].len, cp, a);
        if (!cJSON_AddNumberToObject(vocab, a, s)) rc = MACT_ERR_NOMEM;
    }
    /* unreachable entries (no merge builds them) keep the ids contiguous up to the first added token */
    for (int64_t s = bm.n_sym; !rc && s < id.P; s++) {
        snprintf(a, (size_t)maxlen * 4 + 64, "<|mact_pad_%lld|>", (long long)s);
        if (!cJSON_AddNumberToObject(vocab, a, (double)s)) rc = MACT_ERR_NOMEM;
    }
    cJSON *merges = rc ? NULL : cJSON_AddArrayToObject(model, "merges");
    for (int k = 0; !rc && k < bm.n_merges; k++) {
        const bpe_sym *l = &bm.sym[bm.merges[k][0]], *r = &bm.sym[bm.merges[k][1]];
        byte_level(l->bytes, (size_t)l->len, cp, a);
        byte_level(r->bytes, (size_t)r->len, cp, b);
        strcat(a, " ");
        strcat(a, b);
        cJSON *str = cJSON_CreateString(a);
        if (!str || !merges) rc = MACT_ERR_NOMEM;
        else cJSON_AddItemToArray(merges, str);
    }
    *n_merges_out = bm.n_merges;
    free(a);
    free(b);
    bpe_free(&bm);
    if (rc) {
        cJSON_Delete(root);
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (tokenizer.json)");
    }
    *out = root;
    return 0;
}

