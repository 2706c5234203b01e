/* tier: fast — the parquet reader (src/data/parquet.c) against the dev writer (src/data/pq_write.c):
 *   pq_roundtrip_*     every column kind (float32/64, int32/64, bool, string, float lists, string lists, the
 *                      {bytes, path} image struct) in every layout variant (dictionary, PLAIN, the
 *                      dictionary->PLAIN fallback, several pages, several row groups, V2 pages, each codec)
 *                      read back exactly, per row group and whole
 *   pq_truncated       every truncation of a valid file fails with a message naming the file
 *   pq_bad_*           wrong magic, a page past the chunk, a dictionary index out of range, DELTA_* and
 *                      BYTE_STREAM_SPLIT pages, a BROTLI chunk, a list longer than the shape: errors naming
 *                      the file, the column and the problem */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "th.h"
#include "data/parquet.h"
#include "synth/pq_write.h"

#define N 203

static float f32[N], lst[N * 6];
static double f64[N];
static int32_t i32[N];
static int64_t i64[N];
static uint8_t bl[N];
static const char *str[N];
static char strbuf[N][32];
static const char *tasks[N * 3];
static int counts[N];
static const uint8_t *img[N];
static size_t ilen[N];
static const char *ipath[N];
static uint8_t imgbuf[N][40];
static char pathbuf[N][24];

static void fill(void)
{
    uint64_t s = 12345;
    int nt = 0;
    for (int i = 0; i < N; i++) {
        snprintf(strbuf[i], sizeof strbuf[i], "task %d", (int)(i % 17));
        str[i] = strbuf[i];
    }
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        f32[i] = (float)((int)(s >> 40) % 1000) / 7.0f;          /* repeats: the dictionary has work to do */
        f64[i] = (double)(s >> 11) / 9007199254740992.0 * 1e6 - 5e5;
        i32[i] = (int32_t)(s >> 33) - (1 << 30);
        i64[i] = (int64_t)(s >> 2) - (int64_t)(1ll << 61);
        bl[i] = (s >> 17) & 1;
        for (int j = 0; j < 6; j++) lst[i * 6 + j] = (float)(i * 6 + j) * 0.25f - 100.0f;
        counts[i] = i % 4 == 3 ? 0 : 1 + i % 3;
        for (int j = 0; j < counts[i]; j++) tasks[nt++] = str[(i + j) % N];
        ilen[i] = (size_t)(i % 40);
        for (size_t k = 0; k < ilen[i]; k++) imgbuf[i][k] = (uint8_t)(i * 31 + k);
        img[i] = imgbuf[i];
        snprintf(pathbuf[i], sizeof pathbuf[i], "f%03d.png", i);
        ipath[i] = pathbuf[i];
    }
}

static pqw_column cols[] = {
    {.name = "f32", .kind = PQW_F32, .data = f32},
    {.name = "f64", .kind = PQW_F64, .data = f64},
    {.name = "i32", .kind = PQW_I32, .data = i32},
    {.name = "i64", .kind = PQW_I64, .data = i64},
    {.name = "bool", .kind = PQW_BOOL, .data = bl},
    {.name = "str", .kind = PQW_STRING, .data = str},
    {.name = "observation.state", .kind = PQW_F32_LIST, .width = 6, .data = lst},
    {.name = "tasks", .kind = PQW_STRING_LIST, .data = tasks, .counts = counts},
    {.name = "image", .kind = PQW_IMAGE, .data = img, .lens = ilen, .paths = ipath},
};
#define NCOLS ((int)(sizeof cols / sizeof cols[0]))

static int check_file(const char *path, char *why, size_t wl)
{
    char err[1024];
    mact_pq_file *f;
    if (mact_pq_open(path, NULL, &f, err, sizeof err)) { snprintf(why, wl, "open: %s", err); return 0; }
    int ok = mact_pq_num_rows(f) == N;
    if (!ok) snprintf(why, wl, "%lld rows", (long long)mact_pq_num_rows(f));
    for (int rgsel = -1; ok && rgsel < mact_pq_num_row_groups(f); rgsel++) {
        int64_t r0 = 0;
        for (int g = 0; g < rgsel; g++) r0 += mact_pq_row_group_rows(f, g);
        for (int li = 0; ok && li < mact_pq_num_leaves(f); li++) {
            const mact_pq_leaf *l = mact_pq_leaf_at(f, li);
            mact_pq_column c;
            if (mact_pq_read(f, li, rgsel, &c, err, sizeof err)) { snprintf(why, wl, "read %s: %s", l->path, err); ok = 0; mact_pq_column_free(&c); break; }
            int64_t rows = rgsel < 0 ? N : mact_pq_row_group_rows(f, rgsel);
            if (c.n_rows != rows) { snprintf(why, wl, "%s: %lld rows", l->path, (long long)c.n_rows); ok = 0; }
            int64_t tb = 0;
            for (int64_t g = 0; g < r0; g++) tb += counts[g];
            for (int64_t rr = 0; ok && rr < rows; rr++) {
                int64_t r = r0 + rr, a = c.row_start[rr], n = c.row_start[rr + 1] - a;
                const char *t = l->top;
                int bad = c.row_null[rr];
                if (!strcmp(t, "f32")) bad |= n != 1 || mact_pq_value_f64(&c, a) != f32[r];
                else if (!strcmp(t, "f64")) bad |= n != 1 || mact_pq_value_f64(&c, a) != f64[r];
                else if (!strcmp(t, "i32")) bad |= n != 1 || ((int32_t *)c.vals)[a] != i32[r];
                else if (!strcmp(t, "i64")) bad |= n != 1 || ((int64_t *)c.vals)[a] != i64[r];
                else if (!strcmp(t, "bool")) bad |= n != 1 || ((uint8_t *)c.vals)[a] != bl[r];
                else if (!strcmp(t, "str")) bad |= n != 1 || c.boff[a + 1] - c.boff[a] != (int64_t)strlen(str[r]) || memcmp(c.bytes + c.boff[a], str[r], strlen(str[r]));
                else if (!strcmp(t, "observation.state")) { bad |= n != 6; for (int j = 0; !bad && j < 6; j++) bad |= mact_pq_value_f64(&c, a + j) != lst[r * 6 + j]; }
                else if (!strcmp(t, "tasks")) {
                    bad |= n != counts[r];
                    for (int j = 0; !bad && j < n; j++) {
                        const char *e = tasks[tb + j];
                        bad |= c.boff[a + j + 1] - c.boff[a + j] != (int64_t)strlen(e) || memcmp(c.bytes + c.boff[a + j], e, strlen(e));
                    }
                    tb += counts[r];
                } else if (!strcmp(t, "image") && !strcmp(l->sub, "bytes")) bad |= n != 1 || c.boff[a + 1] - c.boff[a] != (int64_t)ilen[r] || (ilen[r] && memcmp(c.bytes + c.boff[a], img[r], ilen[r]));
                else if (!strcmp(t, "image")) bad |= n != 1 || memcmp(c.bytes + c.boff[a], ipath[r], strlen(ipath[r]));
                else bad = 1;
                if (bad) { snprintf(why, wl, "%s (row group %d): row %lld differs", l->path, rgsel, (long long)r); ok = 0; }
            }
            mact_pq_column_free(&c);
        }
    }
    mact_pq_close(f);
    return ok;
}

static int write_variant(const char *path, const char *v, int corrupt)
{
    static const int64_t rg[] = {50, 1, 100, 52};
    pqw_options o = {.codec = 1, .corrupt = corrupt};
    if (!strcmp(v, "plain")) o.plain = 1;
    else if (!strcmp(v, "fallback")) { o.dict_max = 30; o.page_rows = 40; }
    else if (!strcmp(v, "multipage")) o.page_rows = 17;
    else if (!strcmp(v, "rowgroups")) { o.rg_rows = rg; o.n_rg = 4; }
    else if (!strcmp(v, "v2pages")) { o.page_v2 = 1; o.page_rows = 64; }
    else if (!strcmp(v, "v2plain")) { o.page_v2 = 1; o.plain = 1; o.codec = 6; }
    else if (!strcmp(v, "zstd")) { o.codec = 6; o.page_rows = 50; o.rg_rows = rg; o.n_rg = 4; }
    else if (!strcmp(v, "gzip")) o.codec = 2;
    else if (!strcmp(v, "uncompressed")) o.codec = 0;
    char err[512];
    return mact_pqw_write(path, cols, NCOLS, N, &o, err, sizeof err);
}

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) { free(b); b = NULL; }
    fclose(f);
    return b;
}

/* Opens path and reads every leaf; returns the first error text (static) or NULL. */
static const char *first_error(const char *path)
{
    static char err[1024];
    mact_pq_file *f;
    if (mact_pq_open(path, NULL, &f, err, sizeof err)) return err;
    const char *res = NULL;
    for (int li = 0; !res && li < mact_pq_num_leaves(f); li++) {
        mact_pq_column c;
        if (mact_pq_read(f, li, -1, &c, err, sizeof err)) res = err;
        mact_pq_column_free(&c);
    }
    mact_pq_close(f);
    return res;
}

int main(void)
{
    fill();
    char dir[] = "/tmp/mact_pq_XXXXXX";
    if (!mkdtemp(dir)) { printf("FAIL pq_setup: mkdtemp\n"); return 1; }
    char path[256], why[2048];
    static const char *variants[] = {"pyarrow", "plain", "fallback", "multipage", "rowgroups", "v2pages", "v2plain", "zstd", "gzip", "uncompressed"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "pq_roundtrip_%s", variants[i]);
        snprintf(path, sizeof path, "%s/%s.parquet", dir, variants[i]);
        why[0] = 0;
        int ok = write_variant(path, variants[i], 0) == 0 && check_file(path, why, sizeof why);
        TH_CHECK(name, ok, "%s", why[0] ? why : "write failed");
    }

    /* truncations and magic */
    snprintf(path, sizeof path, "%s/pyarrow.parquet", dir);
    size_t n = 0;
    unsigned char *b = slurp(path, &n);
    int bad = 0;
    for (size_t k = 0; b && k < n; k++) {
        char err[512] = "";
        mact_pq_file *f = NULL;
        int rc = mact_pq_open_mem(b, k, "cut.parquet", NULL, &f, err, sizeof err);
        if (rc == 0) {  /* the footer may survive only if the cut keeps both magics: it cannot */
            mact_pq_close(f);
            bad++;
        } else if (!strstr(err, "cut.parquet")) bad++;
    }
    TH_CHECK("pq_truncated", b && bad == 0, "%d of %zu truncations accepted or unnamed", bad, n);
    if (b) {
        char err[512];
        mact_pq_file *f;
        b[1] = 'X';
        int rc = mact_pq_open_mem(b, n, "magic.parquet", NULL, &f, err, sizeof err);
        TH_CHECK("pq_bad_magic", rc != 0 && strstr(err, "PAR1"), "rc %d: %s", rc, err);
        b[1] = 'A';
        /* a footer length pointing before the file */
        b[n - 5] = 0x7f;
        rc = mact_pq_open_mem(b, n, "len.parquet", NULL, &f, err, sizeof err);
        TH_CHECK("pq_bad_footer_len", rc != 0 && strstr(err, "footer length"), "rc %d: %s", rc, err);
        free(b);
    }

    struct { const char *name; int corrupt; const char *variant; const char *want; } bads[] = {
        {"pq_bad_page_past_chunk", PQW_BAD_PAGE_PAST_CHUNK, "multipage", "page runs past the column chunk"},
        {"pq_bad_dict_index", PQW_BAD_DICT_SHORT, "pyarrow", "dictionary index out of range"},
        {"pq_bad_delta", PQW_BAD_DELTA, "plain", "unsupported encoding DELTA_BINARY_PACKED"},
        {"pq_bad_bss", PQW_BAD_BSS, "plain", "unsupported encoding BYTE_STREAM_SPLIT"},
        {"pq_bad_brotli", PQW_BAD_BROTLI, "pyarrow", "unsupported compression codec BROTLI"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.parquet", dir, bads[i].name);
        int wr = write_variant(path, bads[i].variant, bads[i].corrupt);
        const char *e = wr ? "write failed" : first_error(path);
        TH_CHECK(bads[i].name, e && strstr(e, bads[i].want) && strstr(e, "column 'f32'") && strstr(e, path),
                 "got: %s", e ? e : "(no error)");
    }
    /* a list longer than the feature's shape */
    snprintf(path, sizeof path, "%s/pyarrow.parquet", dir);
    {
        char err[1024] = "";
        mact_pq_file *f;
        double *v = NULL;
        int64_t rows;
        int rc = mact_pq_open(path, NULL, &f, err, sizeof err);
        if (!rc) { rc = mact_pq_read_f64(f, "observation.state", -1, 5, &v, &rows, err, sizeof err); mact_pq_close(f); }
        free(v);
        TH_CHECK("pq_bad_list_len", rc != 0 && strstr(err, "observation.state") && strstr(err, "6 values") && strstr(err, "[5]"), "rc %d: %s", rc, err);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    TH_EXIT();
}
