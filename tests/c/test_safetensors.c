/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* safetensors reader tests: hand-built single files and sharded checkpoints, every validation rule
 * with its own damaged file (each must fail with a message naming the problem), and truncation /
 * byte-flip sweeps of the in-memory parser that must never crash (run under ASan+UBSan). */
#include "io/safetensors.h"
#include "th.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

static char *tpath(const char *name)
{
    static char bufs[4][1024];
    static int k;
    char *p = bufs[k++ & 3];
    snprintf(p, 1024, "%s/%s", g_dir, name);
    return p;
}

static int contains(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

/* Header JSON padded with spaces to a multiple of 8 (as the reference writer does), then data. */
static uint8_t *image(const char *json, const void *data, size_t dlen, size_t *len)
{
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    uint8_t *b = malloc(8 + hl + dlen + 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, jl);
    memset(b + 8 + jl, ' ', hl - jl);
    if (dlen) memcpy(b + 8 + hl, data, dlen);
    *len = 8 + hl + dlen;
    return b;
}

static void write_st(const char *path, const char *json, const void *data, size_t dlen)
{
    size_t n;
    uint8_t *b = image(json, data, dlen, &n);
    spit(path, b, n);
    free(b);
}

/* A fresh empty checkpoint directory per case, so leftovers never leak between cases. */
static const char *fresh_dir(const char *name)
{
    char *d = tpath(name);
    mkdir(d, 0755);
    return d;
}

static char *join(const char *dir, const char *name)
{
    static char bufs[4][1200];
    static int k;
    char *p = bufs[k++ & 3];
    snprintf(p, 1200, "%s/%s", dir, name);
    return p;
}

static void expect_open_fail(const char *test, const char *path, const char *needle, const char *also)
{
    mact_st *st = (mact_st *)0x1;
    char err[1024] = "";
    int rc = mact_st_open(path, &st, err, sizeof err);
    int ok = rc < 0 && st == NULL && contains(err, needle) && (!also || contains(err, also));
    TH_CHECK(test, ok, "rc=%d err='%s' (want '%s'%s%s)", rc, err, needle, also ? " and " : "", also ? also : "");
    if (rc == 0) mact_st_close(st);
}

static float bf16_to_f32(const void *p, size_t i)
{
    uint16_t h;
    memcpy(&h, (const uint8_t *)p + 2 * i, 2);
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ------------------------------------------------------------ valid files */

static uint8_t g_data[96];

static const char *k_valid_json =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[40,48]},"
    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[48,48]},"
    "\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[48,51]}}";

static void fill_valid_data(void)
{
    float w[6] = {1, -2, 3.5f, 0, 1e-3f, 65504};
    uint16_t bf[4] = {0x3F80, 0xC0A0, 0x4049, 0x0000}; /* 1, -5, 3.140625, 0 */
    uint16_t hf[2] = {0x3C00, 0xC000};
    int64_t s = -42;
    uint8_t m[3] = {1, 0, 1};
    memset(g_data, 0, sizeof g_data);
    memcpy(g_data, w, 24);
    memcpy(g_data + 24, bf, 8);
    memcpy(g_data + 32, hf, 4);
    memcpy(g_data + 40, &s, 8);
    memcpy(g_data + 48, m, 3);
}

static void test_valid_single(void)
{
    fill_valid_data();
    const char *d = fresh_dir("single");
    write_st(join(d, "model.safetensors"), k_valid_json, g_data, 51);
    mact_st *st = NULL;
    char err[1024] = "";
    int rc = mact_st_open(d, &st, err, sizeof err);
    TH_CHECK("st/valid_single_open", rc == 0 && st && mact_st_count(st) == 6, "rc=%d err='%s'", rc, err);
    if (rc != 0) return;

    const mact_st_tensor *w = mact_st_find(st, "w"), *b = mact_st_find(st, "b"), *h = mact_st_find(st, "h"),
                         *s = mact_st_find(st, "s"), *e = mact_st_find(st, "e"), *m = mact_st_find(st, "m");
    int ok = w && b && h && s && e && m && !mact_st_find(st, "nope") && !mact_st_find(st, "");
    ok = ok && w->dtype == MACT_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3 && w->shape[2] == 0 &&
         w->nbytes == 24 && ((const float *)w->data)[2] == 3.5f && ((const float *)w->data)[5] == 65504.0f;
    ok = ok && s->dtype == MACT_I64 && s->ndim == 0 && s->nbytes == 8 && *(const int64_t *)s->data == -42;
    ok = ok && e->ndim == 2 && e->shape[0] == 0 && e->nbytes == 0;
    ok = ok && m->dtype == MACT_BOOL && ((const uint8_t *)m->data)[2] == 1;
    ok = ok && h->dtype == MACT_F16 && h->nbytes == 4;
    ok = ok && contains(w->file, "single/model.safetensors");
    TH_CHECK("st/valid_single_tensors", ok, "tensor fields wrong");

    ok = b && b->dtype == MACT_BF16 && b->nbytes == 8 && bf16_to_f32(b->data, 0) == 1.0f &&
         bf16_to_f32(b->data, 1) == -5.0f && bf16_to_f32(b->data, 2) == 3.140625f && bf16_to_f32(b->data, 3) == 0.0f;
    TH_CHECK("st/bf16_values", ok, "bf16 values wrong");

    ok = 1;
    for (size_t i = 1; i < mact_st_count(st); i++)
        ok &= strcmp(mact_st_at(st, i - 1)->name, mact_st_at(st, i)->name) < 0;
    ok = ok && mact_st_at(st, mact_st_count(st)) == NULL;
    TH_CHECK("st/at_sorted_by_name", ok, "mact_st_at not sorted");

    const char *fmt = mact_st_metadata(st, "format");
    TH_CHECK("st/metadata", fmt && strcmp(fmt, "pt") == 0 && mact_st_metadata(st, "absent") == NULL, "metadata");
    mact_st_close(st);

    rc = mact_st_open(join(d, "model.safetensors"), &st, err, sizeof err);
    TH_CHECK("st/valid_single_by_file_path", rc == 0 && mact_st_count(st) == 6, "rc=%d err='%s'", rc, err);
    if (rc == 0) mact_st_close(st);

    ok = strcmp(mact_dtype_name(MACT_BF16), "BF16") == 0 && mact_dtype_size(MACT_BF16) == 2 &&
         mact_dtype_size(MACT_F64) == 8 && mact_dtype_size(MACT_BOOL) == 1 && mact_dtype_size(-1) == 0 &&
         strcmp(mact_dtype_name(99), "?") == 0 && mact_dtype_from_name("I16") == MACT_I16 &&
         mact_dtype_from_name("f32") == -1;
    TH_CHECK("st/dtype_helpers", ok, "dtype name/size table wrong");
}

/* Two shards, the index at dir/model.safetensors.index.json. */
static const char *k_shard1 = "model-00001-of-00002.safetensors", *k_shard2 = "model-00002-of-00002.safetensors";

static void make_sharded(const char *d, const char *index_json, const char *json1, const char *json2)
{
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (json1) write_st(join(d, k_shard1), json1, v, 16);
    if (json2) write_st(join(d, k_shard2), json2, v, 32);
    spit(join(d, "model.safetensors.index.json"), index_json, strlen(index_json));
}

static const char *k_j1 = "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
static const char *k_j2 = "{\"b.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                          "\"c.bias\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[16,32]}}";
static const char *k_index =
    "{\"metadata\":{\"total_size\":48},\"weight_map\":{"
    "\"a.weight\":\"model-00001-of-00002.safetensors\","
    "\"b.weight\":\"model-00002-of-00002.safetensors\","
    "\"c.bias\":\"model-00002-of-00002.safetensors\"}}";

static void test_valid_sharded(void)
{
    const char *d = fresh_dir("sharded");
    make_sharded(d, k_index, k_j1, k_j2);
    mact_st *st = NULL;
    char err[1024] = "";
    int rc = mact_st_open(d, &st, err, sizeof err);
    int ok = rc == 0 && mact_st_count(st) == 3;
    if (ok) {
        const mact_st_tensor *a = mact_st_find(st, "a.weight"), *b = mact_st_find(st, "b.weight"),
                             *c = mact_st_find(st, "c.bias");
        ok = a && b && c && contains(a->file, k_shard1) && contains(b->file, k_shard2) &&
             contains(c->file, k_shard2) && ((const float *)b->data)[3] == 4.0f && c->dtype == MACT_BF16 &&
             ((const float *)a->data)[0] == 1.0f;
    }
    TH_CHECK("st/valid_sharded", ok, "rc=%d err='%s'", rc, err);
    if (rc == 0) mact_st_close(st);

    rc = mact_st_open(join(d, "model.safetensors.index.json"), &st, err, sizeof err);
    TH_CHECK("st/valid_sharded_by_index_path", rc == 0 && mact_st_count(st) == 3, "rc=%d err='%s'", rc, err);
    if (rc == 0) mact_st_close(st);
}

/* ------------------------------------------------------------ damaged files */

static void bad_single(const char *test, const char *json, size_t dlen, const char *needle, const char *also)
{
    char dname[128];
    snprintf(dname, sizeof dname, "bad_%s", strchr(test, '/') ? strchr(test, '/') + 1 : test);
    const char *d = fresh_dir(dname);
    write_st(join(d, "model.safetensors"), json, g_data, dlen);
    expect_open_fail(test, d, needle, also);
}

static void test_corrupt_single(void)
{
    fill_valid_data();
    const char *d = fresh_dir("trunc");
    spit(join(d, "model.safetensors"), "\x10\0\0\0\0", 5);
    expect_open_fail("st/truncated_file", d, "too small for a safetensors header", "trunc/model.safetensors");

    d = fresh_dir("hdr_past_eof");
    uint8_t b[24] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    spit(join(d, "model.safetensors"), b, sizeof b);
    expect_open_fail("st/header_len_past_eof", d, "header length 65535 runs past the end of the file (24 bytes)", NULL);

    bad_single("st/malformed_json", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]", 24,
               "malformed JSON header", NULL);
    bad_single("st/overlap",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
               "\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}",
               28, "overlap", "'v'");
    bad_single("st/overlap_nested",
               "{\"big\":{\"dtype\":\"U8\",\"shape\":[40],\"data_offsets\":[0,40]},"
               "\"mid\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
               40, "overlap", "'big'");
    bad_single("st/size_mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24,
               "byte size 20 (data_offsets) does not match shape [2, 3] of F32", "'w'");
    bad_single("st/offsets_past_end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]}}", 24,
               "past the end of the data section (24 bytes)", "'w'");
    bad_single("st/unknown_dtype", "{\"w\":{\"dtype\":\"Q4_K\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24,
               "unsupported dtype 'Q4_K'", "'w'");
    bad_single("st/begin_after_end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 24,
               "begin > end", NULL);
    bad_single("st/negative_dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}", 24,
               "shape entry 0 is not a non-negative integer", NULL);
    bad_single("st/fractional_offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24.5]}}", 32,
               "data_offsets are not non-negative integers", NULL);
    bad_single("st/too_many_dims", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
               1, "more than 8 dimensions", NULL);
    bad_single("st/numel_overflow",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,24]}}", 24,
               "does not match shape", NULL);
    bad_single("st/missing_key", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6]}}", 24, "missing 'data_offsets'", NULL);
    bad_single("st/unexpected_key", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24],\"x\":1}}", 24,
               "unexpected key 'x'", NULL);
    bad_single("st/duplicate_key",
               "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", 24,
               "duplicate key 'dtype'", NULL);
    bad_single("st/offsets_not_pair", "{\"w\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24,3]}}", 24,
               "not a [begin, end] pair", NULL);
    bad_single("st/root_not_object", "[1,2,3]", 0, "not a JSON object", NULL);
    bad_single("st/trailing_bytes", "{} x", 0, "trailing bytes", NULL);
    bad_single("st/metadata_not_strings", "{\"__metadata__\":{\"n\":3}}", 0, "__metadata__ entry 'n' is not a string", NULL);
    bad_single("st/duplicate_in_file",
               "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
               8, "duplicate tensor 'w'", NULL);
    bad_single("st/empty_name", "{\"\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 8, "empty name", NULL);
    bad_single("st/entry_not_object", "{\"w\":7}", 0, "entry is not a JSON object", NULL);

    /* Header length beyond the sanity limit, in memory (calloc keeps the untouched pages free). */
    size_t big = (size_t)MACT_ST_MAX_HEADER + 16;
    uint8_t *buf = calloc(1, big);
    mact_st *st = NULL;
    char err[1024] = "";
    int rc = -2;
    if (buf) {
        uint64_t hl = MACT_ST_MAX_HEADER + 1;
        for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> (8 * i));
        rc = mact_st_parse_header(buf, big, "huge", &st, err, sizeof err);
        free(buf);
    }
    TH_CHECK("st/header_len_insane", rc < 0 && contains(err, "exceeds the 100000000-byte limit"), "rc=%d err='%s'", rc, err);

    expect_open_fail("st/missing_path", tpath("nowhere"), "cannot open checkpoint", "nowhere");
    expect_open_fail("st/empty_dir", fresh_dir("empty"), "neither model.safetensors nor model.safetensors.index.json", NULL);
}

static void test_corrupt_sharded(void)
{
    const char *dup2 = "{\"b.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                       "\"a.weight\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[16,32]}}";
    const char *d = fresh_dir("dup_shards");
    make_sharded(d,
                 "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                 "\"b.weight\":\"model-00002-of-00002.safetensors\"}}",
                 k_j1, dup2);
    expect_open_fail("st/duplicate_across_shards", d, "duplicate tensor 'a.weight'", k_shard2);

    d = fresh_dir("missing_shard");
    make_sharded(d, k_index, k_j1, NULL);
    expect_open_fail("st/index_missing_shard", d, "cannot open shard 'model-00002-of-00002.safetensors'", "No such file");

    d = fresh_dir("index_wrong_shard");
    make_sharded(d,
                 "{\"weight_map\":{\"a.weight\":\"model-00002-of-00002.safetensors\","
                 "\"b.weight\":\"model-00002-of-00002.safetensors\",\"c.bias\":\"model-00002-of-00002.safetensors\"}}",
                 k_j1, k_j2);
    expect_open_fail("st/index_tensor_not_in_shard", d, "index lists tensor 'a.weight' in shard", "does not contain it");

    d = fresh_dir("index_swapped");
    make_sharded(d,
                 "{\"weight_map\":{\"a.weight\":\"model-00002-of-00002.safetensors\","
                 "\"b.weight\":\"model-00001-of-00002.safetensors\",\"c.bias\":\"model-00002-of-00002.safetensors\"}}",
                 k_j1, k_j2);
    expect_open_fail("st/index_maps_to_other_shard", d, "does not contain it (it is in", k_shard1);

    d = fresh_dir("index_phantom");
    make_sharded(d,
                 "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                 "\"ghost\":\"model-00001-of-00002.safetensors\","
                 "\"b.weight\":\"model-00002-of-00002.safetensors\",\"c.bias\":\"model-00002-of-00002.safetensors\"}}",
                 k_j1, k_j2);
    expect_open_fail("st/index_phantom_tensor", d, "index lists tensor 'ghost'", "does not contain it");

    d = fresh_dir("unlisted");
    make_sharded(d,
                 "{\"weight_map\":{\"a.weight\":\"model-00001-of-00002.safetensors\","
                 "\"b.weight\":\"model-00002-of-00002.safetensors\"}}",
                 k_j1, k_j2);
    expect_open_fail("st/shard_tensor_not_in_index", d, "tensor 'c.bias' is not listed in the index", k_shard2);

    d = fresh_dir("escape");
    make_sharded(d, "{\"weight_map\":{\"a.weight\":\"../model-00001-of-00002.safetensors\"}}", k_j1, NULL);
    expect_open_fail("st/index_path_escape", d, "not a plain shard file name", NULL);

    d = fresh_dir("no_weight_map");
    make_sharded(d, "{\"metadata\":{}}", k_j1, NULL);
    expect_open_fail("st/index_without_weight_map", d, "no \"weight_map\"", NULL);

    d = fresh_dir("bad_index_json");
    make_sharded(d, "{\"weight_map\":{", k_j1, NULL);
    expect_open_fail("st/index_malformed_json", d, "malformed JSON in the index", NULL);

    d = fresh_dir("bad_shard");
    make_sharded(d, k_index, k_j1, "{\"b.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,99]}}");
    expect_open_fail("st/bad_shard_header", d, "past the end of the data section", k_shard2);
}

/* ------------------------------------------------------------ sweeps */

static void test_sweeps(void)
{
    fill_valid_data();
    size_t n;
    uint8_t *img = image(k_valid_json, g_data, 51, &n);
    char err[1024];
    int prefix_ok = 1;
    size_t bad = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k ? k : 1); /* exact size so ASan catches any overread */
        memcpy(cut, img, k);
        mact_st *st;
        /* Tensor 'm' ends on the last byte, so every proper prefix is damaged. */
        if (mact_st_parse_header(cut, k, "cut", &st, err, sizeof err) == 0) {
            prefix_ok = 0;
            bad = k;
            mact_st_close(st);
        }
        free(cut);
    }
    TH_CHECK("st/sweep_truncations", prefix_ok, "a %zu-byte prefix parsed as valid", bad);

    uint8_t *c = malloc(n);
    size_t accepted = 0, total = 0;
    for (size_t k = 0; k < n; k++)
        for (int v = 1; v < 256; v += 23) {
            memcpy(c, img, n);
            c[k] ^= (uint8_t)v;
            mact_st *st;
            total++;
            if (mact_st_parse_header(c, n, "flip", &st, err, sizeof err) == 0) {
                accepted++;
                /* Whatever was accepted must be internally consistent. */
                for (size_t i = 0; i < mact_st_count(st); i++) {
                    const mact_st_tensor *t = mact_st_at(st, i);
                    volatile uint8_t sink = 0;
                    for (size_t j = 0; j < t->nbytes; j++) sink ^= ((const uint8_t *)t->data)[j];
                    (void)sink;
                }
                mact_st_close(st);
            }
        }
    free(c);
    free(img);
    printf("INFO st/sweep_flips: %zu of %zu single-byte corruptions still parse (data bytes, names)\n", accepted, total);
    TH_CHECK("st/sweep_flips_no_crash", 1, "");
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("INFO could not remove %s\n", dir);
}

int main(void)
{
    const char *base = getenv("MACT_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/test_st.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        printf("FAIL st/setup: cannot create a temp dir\n");
        return 1;
    }
    test_valid_single();
    test_valid_sharded();
    test_corrupt_single();
    test_corrupt_sharded();
    test_sweeps();
    rm_rf(g_dir);
    TH_EXIT();
}
