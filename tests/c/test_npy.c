/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* npy / npz unit tests: C->C round trips for every dtype and awkward shapes, hand-made corrupt
 * files that must fail with a clear message, and exhaustive truncation / byte-flip sweeps that must
 * never crash (run under ASan+UBSan by `make asan`). */
#include "io/npy.h"
#include "export/npz_write.h"
#include "th.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

static char g_dir[512];
static char g_path[1024];

static const char *tpath(const char *name)
{
    snprintf(g_path, sizeof g_path, "%s/%s", g_dir, name);
    return g_path;
}

static const int k_npy_dtypes[] = {MACT_F32, MACT_F64, MACT_F16, MACT_I64, MACT_I32, MACT_I16,
                                   MACT_I8,  MACT_U8,  MACT_U16, MACT_U32, MACT_U64, MACT_BOOL};
#define N_DTYPES (sizeof k_npy_dtypes / sizeof k_npy_dtypes[0])

/* Deterministic, dtype-valid contents (bool must stay 0/1 for numpy to round-trip it). */
static int make(mact_array *a, const char *name, int dtype, int ndim, const int64_t *shape, unsigned seed)
{
    char err[256];
    if (mact_array_alloc(a, name, dtype, ndim, shape, err, sizeof err) != 0) {
        printf("INFO alloc failed: %s\n", err);
        return -1;
    }
    uint8_t *p = a->data;
    for (size_t i = 0; i < a->nbytes; i++) {
        unsigned v = (unsigned)(i * 37u + seed * 101u + (i >> 7));
        p[i] = dtype == MACT_BOOL ? (uint8_t)(v & 1) : (uint8_t)v;
    }
    return 0;
}

static int same(const mact_array *a, const mact_array *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0;
}

static int contains(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

/* little-endian zip fields */
static unsigned get16(const uint8_t *p) { return (unsigned)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD    0x06054b50u
#define SIG_EOCD64  0x06064b50u
#define SIG_LOC64   0x07064b50u

static size_t find_sig(const uint8_t *b, size_t n, uint32_t sig, size_t from)
{
    for (size_t i = from; i + 4 <= n; i++)
        if (get32(b + i) == sig) return i;
    return SIZE_MAX;
}

/* Offset of a member's data: after its local header's name and extra field. */
static size_t local_data(const uint8_t *b, size_t loc) { return loc + 30 + get16(b + loc + 26) + get16(b + loc + 28); }

/* numpy's zip64 layout (what MACT_NPZ_ZIP64 asks for): walks the local headers in file order; each
 * must carry a zip64 extra field (id 1) with both sizes, and its compressed size must lead to the
 * next header. Returns the number of members so walked, or -1 with why. */
static long walk_zip64_locals(const uint8_t *b, size_t n, char *why, size_t wl)
{
    size_t p = 0;
    long count = 0;
    while (p + 30 <= n && get32(b + p) == SIG_LOCAL) {
        size_t nlen = get16(b + p + 26), xlen = get16(b + p + 28), x = p + 30 + nlen;
        if (x + xlen > n || xlen < 20 || get16(b + x) != 1 || get16(b + x + 2) < 16 ||
            get16(b + p + 4) < 45) {
            snprintf(why, wl, "local header %ld (offset %zu) has no zip64 extra field", count, p);
            return -1;
        }
        uint64_t csize = get64(b + x + 12);
        if (csize > n - (x + xlen)) {
            snprintf(why, wl, "local header %ld: zip64 compressed size %llu runs past the file", count,
                     (unsigned long long)csize);
            return -1;
        }
        p = x + xlen + (size_t)csize;
        count++;
    }
    return count;
}

/* ------------------------------------------------------------ round trips */

static const struct { int ndim; int64_t shape[8]; } k_shapes[] = {
    {0, {0}}, {1, {0}}, {1, {3}}, {2, {2, 3}}, {3, {1, 1, 5}}, {3, {2, 0, 3}},
    {8, {1, 2, 1, 3, 1, 2, 1, 1}}, {2, {17, 13}},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])

static void test_npy_roundtrip(void)
{
    int ok = 1;
    char err[512] = "";
    for (size_t d = 0; d < N_DTYPES && ok; d++)
        for (size_t s = 0; s < N_SHAPES && ok; s++) {
            mact_array a, b;
            if (make(&a, NULL, k_npy_dtypes[d], k_shapes[s].ndim, k_shapes[s].shape, (unsigned)(d * 7 + s)) != 0) {
                ok = 0;
                break;
            }
            if (mact_npy_write(tpath("rt.npy"), &a, err, sizeof err) != 0 ||
                mact_npy_read(tpath("rt.npy"), &b, err, sizeof err) != 0) {
                ok = 0;
            } else {
                if (!same(&a, &b)) {
                    ok = 0;
                    snprintf(err, sizeof err, "dtype %d shape #%zu differs", a.dtype, s);
                }
                if (b.name != NULL) {
                    ok = 0;
                    snprintf(err, sizeof err, "plain npy read set a name");
                }
                mact_array_free(&b);
            }
            mact_array_free(&a);
        }
    TH_CHECK("npy/roundtrip_all_dtypes_shapes", ok, "%s", err);
}

static int npz_roundtrip(int flags, size_t n_arrays, char *err, size_t errlen)
{
    mact_array *arr = calloc(n_arrays ? n_arrays : 1, sizeof *arr);
    int ok = 1;
    for (size_t i = 0; i < n_arrays; i++) {
        char name[64];
        snprintf(name, sizeof name, "arr_%zu%s", i, i % 3 == 0 ? "/nested.name" : "");
        size_t s = i % N_SHAPES, d = i % N_DTYPES;
        if (make(&arr[i], name, k_npy_dtypes[d], k_shapes[s].ndim, k_shapes[s].shape, (unsigned)i) != 0) ok = 0;
    }
    mact_npz z = {0};
    if (ok && mact_npz_write(tpath("rt.npz"), arr, n_arrays, flags, err, errlen) != 0) ok = 0;
    if (ok && (flags & MACT_NPZ_ZIP64)) {
        /* The zip64 records must really be there. libzip cannot be made to write the zip64 end record
         * for a small archive (npz_write.h), so the flag now means numpy's layout, a zip64 extra field
         * in every local header, and that is checked here; reading the zip64 end record and zip64
         * central fields is test_npz_zip64's job. */
        size_t len = 0;
        uint8_t *b = slurp(tpath("rt.npz"), &len);
        long walked = b ? walk_zip64_locals(b, len, err, errlen) : -1;
        free(b);
        if (walked != (long)n_arrays) {
            if (walked >= 0)
                snprintf(err, errlen, "walked %ld zip64 local headers, wrote %zu members", walked, n_arrays);
            ok = 0;
        }
    }
    if (ok && mact_npz_read(tpath("rt.npz"), &z, err, errlen) != 0) ok = 0;
    if (ok && z.count != n_arrays) {
        snprintf(err, errlen, "read %zu members, wrote %zu", z.count, n_arrays);
        ok = 0;
    }
    for (size_t i = 0; ok && i < n_arrays; i++) {
        const mact_array *m = mact_npz_find(&z, arr[i].name);
        if (!m || !same(m, &arr[i]) || strcmp(z.arrays[i].name, arr[i].name) != 0) {
            snprintf(err, errlen, "member '%s' differs or is missing", arr[i].name);
            ok = 0;
        }
    }
    if (ok && mact_npz_find(&z, "no_such_member") != NULL) {
        snprintf(err, errlen, "lookup of a missing name succeeded");
        ok = 0;
    }
    mact_npz_free(&z);
    for (size_t i = 0; i < n_arrays; i++) mact_array_free(&arr[i]);
    free(arr);
    return ok;
}

static void test_npz_roundtrip(void)
{
    char err[512] = "";
    TH_CHECK("npz/roundtrip_stored", npz_roundtrip(0, 30, err, sizeof err), "%s", err);
    TH_CHECK("npz/roundtrip_deflate", npz_roundtrip(MACT_NPZ_DEFLATE, 30, err, sizeof err), "%s", err);
    TH_CHECK("npz/roundtrip_zip64_stored", npz_roundtrip(MACT_NPZ_ZIP64, 30, err, sizeof err), "%s", err);
    TH_CHECK("npz/roundtrip_zip64_deflate",
             npz_roundtrip(MACT_NPZ_ZIP64 | MACT_NPZ_DEFLATE, 30, err, sizeof err), "%s", err);
    TH_CHECK("npz/roundtrip_empty_archive", npz_roundtrip(MACT_NPZ_DEFLATE, 0, err, sizeof err), "%s", err);
}

/* Several MB so deflate output spans many buffers; half noise, half runs. */
static void test_npz_large_deflate(void)
{
    char err[512] = "";
    mact_array a[2];
    int64_t sh1[2] = {1024, 1024}, sh2[1] = {3000001};
    int ok = make(&a[0], "noise", MACT_F32, 2, sh1, 1) == 0 && make(&a[1], "runs", MACT_U8, 1, sh2, 2) == 0;
    if (ok) {
        uint32_t x = 12345;
        for (size_t i = 0; i < a[0].nbytes; i++) {
            x = x * 1664525u + 1013904223u;
            ((uint8_t *)a[0].data)[i] = (uint8_t)(x >> 24);
        }
        for (size_t i = 0; i < a[1].nbytes; i++) ((uint8_t *)a[1].data)[i] = (uint8_t)(i / 4096);
    }
    mact_npz z = {0};
    ok = ok && mact_npz_write(tpath("big.npz"), a, 2, MACT_NPZ_DEFLATE, err, sizeof err) == 0 &&
         mact_npz_read(tpath("big.npz"), &z, err, sizeof err) == 0 && z.count == 2 &&
         same(&z.arrays[0], &a[0]) && same(&z.arrays[1], &a[1]);
    mact_npz_free(&z);
    mact_array_free(&a[0]);
    mact_array_free(&a[1]);
    TH_CHECK("npz/large_deflate_roundtrip", ok, "%s", err);
}

/* ------------------------------------------------------------ hand-made npy files */

/* Writes magic + version + header (padded with spaces and '\n' to 64 bytes like numpy) + data. */
static void raw_npy(const char *path, int major, const char *dict, const void *data, size_t n)
{
    uint8_t buf[4096];
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hl = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    if (major == 1) {
        buf[8] = (uint8_t)hl;
        buf[9] = (uint8_t)(hl >> 8);
    } else {
        for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(hl >> (8 * i));
    }
    memcpy(buf + pre, dict, dl);
    memset(buf + pre + dl, ' ', hl - dl - 1);
    buf[total - 1] = '\n';
    memcpy(buf + total, data, n);
    spit(path, buf, total + n);
}

static void expect_npy_fail(const char *name, const char *needle)
{
    mact_array a;
    char err[512] = "";
    memset(&a, 0x5a, sizeof a); /* the reader must zero it on failure */
    int rc = mact_npy_read(tpath("bad.npy"), &a, err, sizeof err);
    int zeroed = a.data == NULL && a.name == NULL && a.nbytes == 0;
    TH_CHECK(name, rc < 0 && contains(err, needle) && zeroed, "rc=%d err='%s' (want '%s')", rc, err, needle);
    if (rc == 0) mact_array_free(&a);
}

static void test_npy_corrupt(void)
{
    float f6[6] = {1, 2, 3, 4, 5, 6};
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

    spit(tpath("bad.npy"), "\x93NUMPX\x01\x00\x10\x00{}", 12);
    expect_npy_fail("npy/bad_magic", "bad magic");
    spit(tpath("bad.npy"), "\x93NUM", 4);
    expect_npy_fail("npy/truncated_preamble", "shorter than the npy preamble");
    spit(tpath("bad.npy"), "", 0);
    expect_npy_fail("npy/empty_file", "shorter than the npy preamble");
    spit(tpath("bad.npy"), "\x93NUMPY\x01\x00\xff\x00{'descr'", 18);
    expect_npy_fail("npy/header_len_past_eof", "runs past the end");
    spit(tpath("bad.npy"), "\x93NUMPY\x04\x00\x10\x00", 10);
    expect_npy_fail("npy/unknown_version", "unsupported npy format version 4.0");

    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'shape': (2, 3), }", f6, 24);
    expect_npy_fail("npy/missing_key", "lacks key 'fortran_order'");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f6, 24);
    expect_npy_fail("npy/big_endian", "big-endian");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", f6, 24);
    expect_npy_fail("npy/complex_dtype", "unsupported dtype descr '<c8'");
    raw_npy(tpath("bad.npy"), 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", f6, 12);
    expect_npy_fail("npy/structured_dtype", "structured");
    raw_npy(tpath("bad.npy"), 1, good, f6, 20);
    expect_npy_fail("npy/data_truncated", "truncated");
    raw_npy(tpath("bad.npy"), 1, good, f6, 24);
    {
        FILE *f = fopen(tpath("bad.npy"), "ab");
        fputc(0, f);
        fclose(f);
    }
    expect_npy_fail("npy/data_too_long", "data is 25 bytes but shape (2, 3) of F32 needs 24");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", f6, 24);
    expect_npy_fail("npy/negative_dim", "negative dimension");
    raw_npy(tpath("bad.npy"), 1,
            "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", f6, 1);
    expect_npy_fail("npy/too_many_dims", "more than 8 dimensions");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", f6, 24);
    expect_npy_fail("npy/shape_not_tuple", "not a tuple");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", f6, 24);
    expect_npy_fail("npy/unexpected_key", "unexpected key 'x'");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", f6, 24);
    expect_npy_fail("npy/duplicate_key", "duplicate key 'descr'");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,)}", f6, 24);
    expect_npy_fail("npy/bad_fortran_value", "not True/False");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", f6, 24);
    expect_npy_fail("npy/dim_overflow", "overflows int64");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}", f6, 24);
    expect_npy_fail("npy/size_overflow", "shape too large");
    raw_npy(tpath("bad.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} junk", f6, 24);
    expect_npy_fail("npy/trailing_garbage", "trailing garbage");

    mact_array a;
    char err[512] = "";
    int rc = mact_npy_read(tpath("does_not_exist.npy"), &a, err, sizeof err);
    TH_CHECK("npy/missing_file", rc < 0 && contains(err, "cannot open") && contains(err, "does_not_exist.npy"),
             "rc=%d err='%s'", rc, err);
    rc = mact_npy_read(g_dir, &a, err, sizeof err);
    TH_CHECK("npy/directory", rc < 0 && contains(err, "not a regular file"), "rc=%d err='%s'", rc, err);
}

static void test_npy_versions_and_fortran(void)
{
    char err[512] = "";
    float f6[6] = {1, 2, 3, 4, 5, 6};
    int ok = 1;
    for (int major = 2; major <= 3; major++) {
        mact_array a;
        raw_npy(tpath("v.npy"), major, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 2)}", f6, 24);
        if (mact_npy_read(tpath("v.npy"), &a, err, sizeof err) != 0) {
            ok = 0;
            break;
        }
        ok &= a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 2 && memcmp(a.data, f6, 24) == 0;
        mact_array_free(&a);
    }
    TH_CHECK("npy/format_v2_v3_double_quotes", ok, "%s", err);

    /* F order (2,3): memory holds column-major a[0,0],a[1,0],a[0,1],... */
    float fo[6] = {0, 10, 1, 11, 2, 12}, want[6] = {0, 1, 2, 10, 11, 12};
    mact_array a;
    raw_npy(tpath("f.npy"), 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", fo, 24);
    ok = mact_npy_read(tpath("f.npy"), &a, err, sizeof err) == 0;
    ok = ok && a.ndim == 2 && memcmp(a.data, want, 24) == 0;
    if (ok) mact_array_free(&a);
    /* 3-d Fortran: element (i,j,k) stored at i + 2j + 6k. */
    uint8_t f3[24], c3[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                f3[i + 2 * j + 6 * k] = (uint8_t)(100 * i + 10 * j + k);
                c3[i * 12 + j * 4 + k] = (uint8_t)(100 * i + 10 * j + k);
            }
    raw_npy(tpath("f3.npy"), 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 4), }", f3, 24);
    int ok3 = mact_npy_read(tpath("f3.npy"), &a, err, sizeof err) == 0;
    ok3 = ok3 && memcmp(a.data, c3, 24) == 0;
    if (ok3) mact_array_free(&a);
    TH_CHECK("npy/fortran_order_transposed", ok && ok3, "%s", err);
}

static void test_write_errors(void)
{
    char err[512] = "";
    mact_array a;
    int64_t sh[1] = {4};
    mact_array_alloc(&a, "x", MACT_BF16, 1, sh, err, sizeof err);
    int rc = mact_npy_write(tpath("bf.npy"), &a, err, sizeof err);
    TH_CHECK("npy/write_bf16_refused", rc < 0 && contains(err, "bfloat16"), "rc=%d err='%s'", rc, err);
    a.dtype = MACT_F32; /* same buffer, now 8 bytes for 4 floats */
    rc = mact_npy_write(tpath("bf.npy"), &a, err, sizeof err);
    TH_CHECK("npy/write_nbytes_mismatch", rc < 0 && contains(err, "nbytes is 8 but the shape needs 16"),
             "rc=%d err='%s'", rc, err);
    a.dtype = MACT_BF16;
    float *f = NULL;
    size_t cnt = 0;
    ((uint16_t *)a.data)[0] = 0x3F80; /* 1.0 */
    ((uint16_t *)a.data)[1] = 0xC0A0; /* -5.0 */
    rc = mact_array_to_f32(&a, &f, &cnt, err, sizeof err);
    TH_CHECK("npy/bf16_to_f32", rc == 0 && cnt == 4 && f[0] == 1.0f && f[1] == -5.0f && f[2] == 0.0f,
             "rc=%d err='%s'", rc, err);
    free(f);
    mact_array_free(&a);

    mact_array two[2];
    make(&two[0], "same", MACT_F32, 1, sh, 1);
    make(&two[1], "same", MACT_F32, 1, sh, 2);
    rc = mact_npz_write(tpath("dup.npz"), two, 2, 0, err, sizeof err);
    TH_CHECK("npz/write_duplicate_names", rc < 0 && contains(err, "duplicate array name 'same'"),
             "rc=%d err='%s'", rc, err);
    free(two[1].name);
    two[1].name = NULL;
    rc = mact_npz_write(tpath("dup.npz"), two, 2, 0, err, sizeof err);
    TH_CHECK("npz/write_unnamed", rc < 0 && contains(err, "array 1 has no name"), "rc=%d err='%s'", rc, err);
    two[1].name = strdup("other");
    rc = mact_npz_write("/nonexistent-dir/x.npz", two, 2, 0, err, sizeof err);
    TH_CHECK("npz/write_bad_path", rc < 0 && contains(err, "cannot create"), "rc=%d err='%s'", rc, err);
    mact_array_free(&two[0]);
    mact_array_free(&two[1]);

    rc = mact_array_alloc(&a, "neg", MACT_F32, 1, (int64_t[]){-1}, err, sizeof err);
    TH_CHECK("npy/alloc_negative_dim", rc < 0 && contains(err, "negative dimension"), "rc=%d err='%s'", rc, err);
}

static void test_to_f32(void)
{
    char err[256] = "";
    uint16_t h[8] = {0x3C00, 0xC000, 0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00};
    float f[8];
    mact_dtype_to_f32(MACT_F16, h, 8, f);
    int ok = f[0] == 1.0f && f[1] == -2.0f && f[2] == ldexpf(1, -24) && f[3] == 1023 * ldexpf(1, -24) &&
             f[4] == 65504.0f && isinf(f[5]) && f[5] > 0 && isinf(f[6]) && f[6] < 0 && isnan(f[7]);
    TH_CHECK("convert/f16", ok, "got %g %g %g %g %g %g %g %g", f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]);

    mact_array a;
    int64_t sh[1] = {3};
    mact_array_alloc(&a, "b", MACT_BOOL, 1, sh, err, sizeof err);
    ((uint8_t *)a.data)[1] = 1;
    ((uint8_t *)a.data)[2] = 7;
    float *o = NULL;
    size_t n = 0;
    ok = mact_array_to_f32(&a, &o, &n, err, sizeof err) == 0 && n == 3 && o[0] == 0 && o[1] == 1 && o[2] == 1;
    free(o);
    mact_array_free(&a);
    TH_CHECK("convert/bool", ok, "%s", err);

    int64_t i64[3] = {-3, 1 << 20, 0};
    ok = mact_dtype_to_f32(MACT_I64, i64, 3, f) == 0 && f[0] == -3.0f && f[1] == 1048576.0f;
    int8_t i8[2] = {-128, 127};
    ok = ok && mact_dtype_to_f32(MACT_I8, i8, 2, f) == 0 && f[0] == -128.0f && f[1] == 127.0f;
    uint64_t u64 = 1ull << 40;
    ok = ok && mact_dtype_to_f32(MACT_U64, &u64, 1, f) == 0 && f[0] == ldexpf(1, 40);
    double d = -0.25;
    ok = ok && mact_dtype_to_f32(MACT_F64, &d, 1, f) == 0 && f[0] == -0.25f;
    ok = ok && mact_dtype_to_f32(999, &d, 1, f) < 0;
    TH_CHECK("convert/ints_f64_unknown", ok, "mismatch");

    int64_t sh0[1] = {0};
    mact_array_alloc(&a, "e", MACT_I32, 1, sh0, err, sizeof err);
    ok = mact_array_to_f32(&a, &o, &n, err, sizeof err) == 0 && o != NULL && n == 0;
    free(o);
    mact_array_free(&a);
    TH_CHECK("convert/empty", ok, "%s", err);
}

/* ------------------------------------------------------------ hand-damaged npz */


/* Writes a two-member npz ("a", "b"), returns its bytes. */
static uint8_t *small_npz(int flags, size_t *len)
{
    char err[256];
    mact_array a[2];
    int64_t s1[2] = {2, 3}, s2[1] = {5};
    make(&a[0], "a", MACT_F32, 2, s1, 3);
    make(&a[1], "b", MACT_I16, 1, s2, 4);
    mact_npz_write(tpath("small.npz"), a, 2, flags, err, sizeof err);
    mact_array_free(&a[0]);
    mact_array_free(&a[1]);
    return slurp(tpath("small.npz"), len);
}

static void expect_npz_fail(const char *name, const uint8_t *b, size_t n, const char *needle)
{
    mact_npz z;
    char err[512] = "";
    int rc = mact_npz_parse(b, n, "mem.npz", &z, err, sizeof err);
    TH_CHECK(name, rc < 0 && contains(err, needle) && z.arrays == NULL && z.count == 0,
             "rc=%d err='%s' (want '%s')", rc, err, needle);
    if (rc == 0) mact_npz_free(&z);
}

static void test_npz_corrupt(void)
{
    size_t n;
    uint8_t *b = small_npz(0, &n), *c = malloc(n);
    size_t loc0 = find_sig(b, n, SIG_LOCAL, 0), cen0 = find_sig(b, n, SIG_CENTRAL, 0);
    size_t cen1 = find_sig(b, n, SIG_CENTRAL, cen0 + 4), loc1 = find_sig(b, n, SIG_LOCAL, loc0 + 4);
    size_t eocd = find_sig(b, n, SIG_EOCD, 0);

    memcpy(c, b, n);
    c[local_data(b, loc0) + 70] ^= 0x40; /* inside member a's npy data */
    expect_npz_fail("npz/crc_mismatch", c, n, "CRC mismatch");
    expect_npz_fail("npz/truncated", b, n / 2, "no zip end-of-central-directory record");
    expect_npz_fail("npz/tiny", b, 10, "too small to be a zip");
    expect_npz_fail("npz/not_a_zip", (const uint8_t *)"this is certainly not a zip archive at all", 41,
                    "no zip end-of-central-directory record");

    memcpy(c, b, n);
    put16(c + loc0 + 8, 12);
    put16(c + cen0 + 10, 12);
    expect_npz_fail("npz/unsupported_method", c, n, "unsupported compression method 12");

    memcpy(c, b, n);
    c[loc0 + 30 + 4] = 'z';
    c[cen0 + 46 + 4] = 'z';
    expect_npz_fail("npz/member_not_npy", c, n, "member 'a.npz' is not a .npy file");

    memcpy(c, b, n);
    c[loc1 + 30] = 'a';
    c[cen1 + 46] = 'a';
    expect_npz_fail("npz/duplicate_member", c, n, "duplicate member 'a.npy'");

    memcpy(c, b, n);
    c[cen0 + 46] = 'q';
    expect_npz_fail("npz/local_central_disagree", c, n, "local header disagrees");

    memcpy(c, b, n);
    put32(c + eocd + 16, (uint32_t)n);
    expect_npz_fail("npz/cd_offset_out_of_range", c, n, "lies outside the archive");

    memcpy(c, b, n);
    put32(c + cen0 + 42, (uint32_t)(n - 10));
    expect_npz_fail("npz/local_offset_out_of_range", c, n, "bad local header offset");

    memcpy(c, b, n);
    put32(c + cen0 + 20, 100000);
    put32(c + cen0 + 24, 100000);
    expect_npz_fail("npz/stored_size_overruns", c, n, "overruns the archive");

    memcpy(c, b, n);
    put16(c + cen0 + 8, 1);
    expect_npz_fail("npz/encrypted", c, n, "encrypted");
    free(b);
    free(c);

    b = small_npz(MACT_NPZ_DEFLATE, &n);
    c = malloc(n);
    cen0 = find_sig(b, n, SIG_CENTRAL, 0);
    memcpy(c, b, n);
    put32(c + cen0 + 24, 0x7fffffff);
    expect_npz_fail("npz/impossible_ratio", c, n, "impossible ratio");
    memcpy(c, b, n);
    put32(c + cen0 + 24, get32(b + cen0 + 24) - 1);
    expect_npz_fail("npz/deflate_longer_than_declared", c, n, "longer than the declared");
    memcpy(c, b, n);
    put32(c + cen0 + 24, get32(b + cen0 + 24) + 1);
    expect_npz_fail("npz/deflate_shorter_than_declared", c, n, "ends after");
    memcpy(c, b, n);
    put32(c + cen0 + 20, get32(b + cen0 + 20) - 3);
    expect_npz_fail("npz/deflate_input_truncated", c, n, "deflate data truncated");
    memcpy(c, b, n);
    loc0 = find_sig(b, n, SIG_LOCAL, 0);
    c[local_data(b, loc0)] = 0xff; /* first deflate block header: invalid block type 3 */
    expect_npz_fail("npz/corrupt_deflate", c, n, "corrupt deflate data");
    free(b);
    free(c);

    mact_npz z;
    char err[512] = "";
    int rc = mact_npz_read(tpath("missing.npz"), &z, err, sizeof err);
    TH_CHECK("npz/missing_file", rc < 0 && contains(err, "cannot open") && contains(err, "missing.npz"),
             "rc=%d err='%s'", rc, err);
}

/* ------------------------------------------------------------ zip64, truncation, size lies */

#define REB_END64 1     /* zip64 end record + locator, the classic end record saturated */
#define REB_CENTRAL64 2 /* every central entry's sizes and offset saturated, the values in a zip64 extra */

/* Rewrites the central directory and end records of a comment-less archive without zip64 records (what
 * mact_npz_write makes of a small archive) into the zip64 forms libzip will not write for one.
 * Returns a malloc'd image. */
static uint8_t *rebuild(const uint8_t *b, size_t n, int mode, size_t *out_len)
{
    size_t eocd = n - 22;
    if (n < 22 || get32(b + eocd) != SIG_EOCD) return NULL;
    uint64_t count = get16(b + eocd + 10), cd_off = get32(b + eocd + 16);
    uint8_t *o = malloc(n + count * 28 + 128);
    if (!o) return NULL;
    memcpy(o, b, cd_off);
    size_t p = cd_off, q = cd_off;
    for (uint64_t k = 0; k < count; k++) {
        size_t nlen = get16(b + p + 28), xlen = get16(b + p + 30), clen = get16(b + p + 32);
        memcpy(o + q, b + p, 46 + nlen);
        if (mode & REB_CENTRAL64) {
            uint8_t *c = o + q;
            uint64_t csize = get32(b + p + 20), usize = get32(b + p + 24), off = get32(b + p + 42);
            put16(c + 4, (get16(c + 4) & 0xff00u) | 45);
            put16(c + 6, 45);
            put32(c + 20, 0xFFFFFFFFu);
            put32(c + 24, 0xFFFFFFFFu);
            put32(c + 42, 0xFFFFFFFFu);
            put16(c + 30, (unsigned)xlen + 28);
            q += 46 + nlen;
            put16(o + q, 1);
            put16(o + q + 2, 24);
            put64(o + q + 4, usize); /* the order the spec fixes: usize, csize, offset */
            put64(o + q + 12, csize);
            put64(o + q + 20, off);
            q += 28;
        } else {
            q += 46 + nlen;
        }
        memcpy(o + q, b + p + 46 + nlen, xlen + clen);
        q += xlen + clen;
        p += 46 + nlen + xlen + clen;
    }
    uint64_t cd_size = q - cd_off;
    if (mode & REB_END64) {
        size_t z = q;
        put32(o + q, SIG_EOCD64);
        put64(o + q + 4, 44);
        put16(o + q + 12, (3u << 8) | 45);
        put16(o + q + 14, 45);
        put32(o + q + 16, 0);
        put32(o + q + 20, 0);
        put64(o + q + 24, count);
        put64(o + q + 32, count);
        put64(o + q + 40, cd_size);
        put64(o + q + 48, cd_off);
        q += 56;
        put32(o + q, SIG_LOC64);
        put32(o + q + 4, 0);
        put64(o + q + 8, z);
        put32(o + q + 16, 1);
        q += 20;
    }
    int e64 = (mode & REB_END64) != 0;
    put32(o + q, SIG_EOCD);
    put32(o + q + 4, 0);
    put16(o + q + 8, e64 ? 0xFFFFu : (unsigned)count);
    put16(o + q + 10, e64 ? 0xFFFFu : (unsigned)count);
    put32(o + q + 12, e64 ? 0xFFFFFFFFu : (uint32_t)cd_size);
    put32(o + q + 16, e64 ? 0xFFFFFFFFu : (uint32_t)cd_off);
    put16(o + q + 20, 0);
    *out_len = q + 22;
    return o;
}

/* Parses b and compares every member with ref's. */
static int parses_like(const uint8_t *b, size_t n, const mact_npz *ref, char *err, size_t errlen)
{
    mact_npz z;
    if (mact_npz_parse(b, n, "mem.npz", &z, err, errlen) != 0) return 0;
    int ok = z.count == ref->count;
    for (size_t i = 0; ok && i < z.count; i++)
        ok = strcmp(z.arrays[i].name, ref->arrays[i].name) == 0 && same(&z.arrays[i], &ref->arrays[i]);
    if (!ok) snprintf(err, errlen, "members differ from the original archive's");
    mact_npz_free(&z);
    return ok;
}

static void test_npz_zip64(void)
{
    char err[512] = "";
    for (int deflate = 0; deflate <= 1; deflate++) {
        size_t n, m;
        uint8_t *b = small_npz(deflate ? MACT_NPZ_DEFLATE : 0, &n), *c;
        mact_npz ref;
        if (!b || mact_npz_parse(b, n, "ref", &ref, err, sizeof err) != 0) {
            TH_CHECK("npz/zip64_setup", 0, "%s", err);
            free(b);
            return;
        }
        char name[96];
        const char *tag = deflate ? "deflate" : "stored";

        c = rebuild(b, n, REB_END64, &m);
        snprintf(name, sizeof name, "npz/zip64_end_record_read_%s", tag);
        TH_CHECK(name, c && parses_like(c, m, &ref, err, sizeof err), "%s", err);
        free(c);
        c = rebuild(b, n, REB_END64 | REB_CENTRAL64, &m);
        snprintf(name, sizeof name, "npz/zip64_central_extra_and_end_record_read_%s", tag);
        TH_CHECK(name, c && parses_like(c, m, &ref, err, sizeof err), "%s", err);
        free(c);
        c = rebuild(b, n, REB_CENTRAL64, &m);
        snprintf(name, sizeof name, "npz/zip64_central_extra_read_%s", tag);
        TH_CHECK(name, c && parses_like(c, m, &ref, err, sizeof err), "%s", err);

        /* the zip64 extra's sizes lie: far beyond the archive, or beyond what deflate can expand to */
        size_t cen0 = find_sig(c, m, SIG_CENTRAL, 0), x = cen0 + 46 + get16(c + cen0 + 28);
        put64(c + x + 4, (uint64_t)1 << 40);
        if (!deflate) put64(c + x + 12, (uint64_t)1 << 40);
        snprintf(name, sizeof name, "npz/zip64_extra_size_lies_%s", tag);
        expect_npz_fail(name, c, m, deflate ? "impossible ratio" : "overruns the archive");
        /* a zip64 extra too short for the saturated fields it must hold */
        memcpy(c, b, 0);
        free(c);
        c = rebuild(b, n, REB_CENTRAL64, &m);
        put16(c + x + 2, 8);
        snprintf(name, sizeof name, "npz/zip64_extra_truncated_%s", tag);
        expect_npz_fail(name, c, m, "corrupt central directory");
        free(c);

        c = rebuild(b, n, REB_END64, &m);
        size_t z64 = find_sig(c, m, SIG_EOCD64, 0), loc = find_sig(c, m, SIG_LOC64, 0);
        put64(c + loc + 8, 0); /* locator points at the first local header */
        snprintf(name, sizeof name, "npz/zip64_locator_out_of_place_%s", tag);
        expect_npz_fail(name, c, m, "zip64 end record missing or out of place");
        put64(c + loc + 8, z64);
        put64(c + z64 + 24, (uint64_t)1 << 40);
        put64(c + z64 + 32, (uint64_t)1 << 40);
        snprintf(name, sizeof name, "npz/zip64_entry_count_lies_%s", tag);
        expect_npz_fail(name, c, m, "entries cannot fit");
        put64(c + z64 + 24, 2);
        put64(c + z64 + 32, 2);
        put64(c + z64 + 48, m); /* the directory's offset, past the end */
        snprintf(name, sizeof name, "npz/zip64_cd_offset_out_of_range_%s", tag);
        expect_npz_fail(name, c, m, "lies outside the archive");
        free(c);

        /* saturated central fields with no zip64 extra to resolve them */
        c = rebuild(b, n, 0, &m);
        cen0 = find_sig(c, m, SIG_CENTRAL, 0);
        put32(c + cen0 + 20, 0xFFFFFFFFu);
        put32(c + cen0 + 24, 0xFFFFFFFFu);
        snprintf(name, sizeof name, "npz/zip64_saturated_without_extra_%s", tag);
        expect_npz_fail(name, c, m, "no zip64 extra field");
        free(c);
        mact_npz_free(&ref);
        free(b);
    }
}

/* Cut anywhere, an archive loses its end record: named cuts, each with the message that says so. */
static void test_npz_truncated(void)
{
    const char *needle = "no zip end-of-central-directory record";
    static const struct { int flags, mode; const char *tag; } kinds[] = {
        {0, 0, "stored"}, {MACT_NPZ_DEFLATE, 0, "deflate"}, {MACT_NPZ_ZIP64 | MACT_NPZ_DEFLATE, 0, "zip64_local"},
        {0, REB_END64 | REB_CENTRAL64, "zip64_end"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n0, n;
        uint8_t *b0 = small_npz(kinds[k].flags, &n0), *b = b0;
        n = n0;
        if (kinds[k].mode) {
            b = rebuild(b0, n0, kinds[k].mode, &n);
            free(b0);
        }
        size_t loc1 = find_sig(b, n, SIG_LOCAL, 4), cen0 = find_sig(b, n, SIG_CENTRAL, 0);
        size_t loc64 = find_sig(b, n, SIG_LOC64, 0);
        struct { const char *where; size_t len; } cuts[] = {
            {"in_end_record", n - 1}, {"before_end_record", n - 22}, {"in_central_directory", cen0 + 10},
            {"in_member_data", local_data(b, loc1) + 10}, {"in_first_local_header", 20},
            {"before_zip64_locator", loc64}};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            if (cuts[c].len == SIZE_MAX) continue; /* no zip64 locator in this kind */
            char name[128];
            snprintf(name, sizeof name, "npz/truncated_%s_%s", kinds[k].tag, cuts[c].where);
            uint8_t *cut = malloc(cuts[c].len); /* exact size, so ASan sees any overread */
            memcpy(cut, b, cuts[c].len);
            expect_npz_fail(name, cut, cuts[c].len, cuts[c].len < 22 ? "too small" : needle);
            free(cut);
        }
        free(b);
    }
}

/* A one-member archive made with libzip itself from raw member bytes, which need not be a valid npy:
 * the zip layer is sound, so what fails is the npy layer's check against the zip's sizes. */
static uint8_t *zip_one(const void *bytes, size_t nbytes, int deflate, size_t *len)
{
    int ze = 0;
    zip_t *za = zip_open(tpath("one.npz"), ZIP_CREATE | ZIP_TRUNCATE, &ze);
    if (!za) return NULL;
    zip_source_t *src = zip_source_buffer(za, bytes, nbytes, 0);
    zip_int64_t i = src ? zip_file_add(za, "m.npy", src, 0) : -1;
    if (i < 0 || zip_set_file_compression(za, (zip_uint64_t)i, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) ||
        zip_close(za) != 0) {
        zip_discard(za);
        return NULL;
    }
    return slurp(tpath("one.npz"), len);
}

static void test_npz_size_lies(void)
{
    uint8_t data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const struct { const char *name, *dict; size_t n; const char *needle; } cases[] = {
        /* a header claiming 4 TiB: refused by size before any allocation (else: out of memory) */
        {"huge_shape", "{'descr': '|u1', 'fortran_order': False, 'shape': (4398046511104,), }", 16,
         "data is 16 bytes but shape (4398046511104,) of U8 needs 4398046511104 (truncated)"},
        {"shape_needs_less", "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", 10,
         "data is 10 bytes but shape (4,) of U8 needs 4"},
        {"shape_needs_more", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 16,
         "data is 16 bytes but shape (2, 3) of F32 needs 24 (truncated)"},
    };
    for (int deflate = 0; deflate <= 1; deflate++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            raw_npy(tpath("lie.npy"), 1, cases[k].dict, data, cases[k].n);
            size_t nn, n;
            uint8_t *npy = slurp(tpath("lie.npy"), &nn), *z = npy ? zip_one(npy, nn, deflate, &n) : NULL;
            char name[96];
            snprintf(name, sizeof name, "npz/npy_header_vs_member_%s_%s", cases[k].name, deflate ? "deflate" : "stored");
            if (!z) TH_CHECK(name, 0, "could not build the archive");
            else expect_npz_fail(name, z, n, cases[k].needle);
            free(z);
            free(npy);
        }
    static const struct { const char *name; const char *bytes; size_t n; const char *needle; } raw[] = {
        {"not_npy_content", "hello, this is not numpy", 24, "not an npy file (bad magic)"},
        {"shorter_than_preamble", "\x93NUMP", 5, "shorter than the npy preamble"},
        {"header_length_past_end", "\x93NUMPY\x01\x00\xff\x00{'descr'", 18, "runs past the end"},
        {"v2_header_length_2GiB", "\x93NUMPY\x02\x00\x00\x00\x00\x80{'descr'", 20, "runs past the end"},
    };
    for (size_t k = 0; k < sizeof raw / sizeof raw[0]; k++) {
        size_t n;
        uint8_t *z = zip_one(raw[k].bytes, raw[k].n, 1, &n);
        char name[96];
        snprintf(name, sizeof name, "npz/member_%s", raw[k].name);
        if (!z) TH_CHECK(name, 0, "could not build the archive");
        else expect_npz_fail(name, z, n, raw[k].needle);
        free(z);
    }

    /* The directory's sizes lie (one byte more, local header untouched) while the npy header is right:
     * the zip-level damage is what the message names, not the npy header's disagreement. */
    size_t n;
    uint8_t *b = small_npz(0, &n);
    size_t cen0 = find_sig(b, n, SIG_CENTRAL, 0);
    put32(b + cen0 + 20, get32(b + cen0 + 20) + 1);
    put32(b + cen0 + 24, get32(b + cen0 + 24) + 1);
    expect_npz_fail("npz/stored_size_lie_named_by_crc", b, n, "CRC mismatch");
    free(b);

    /* Bytes after the end record fail libzip's consistency check; the message counts them. */
    b = small_npz(MACT_NPZ_DEFLATE, &n);
    uint8_t *t = malloc(n + 7);
    memcpy(t, b, n);
    memcpy(t + n, "garbage", 7);
    expect_npz_fail("npz/trailing_data_after_end_record", t, n + 7, "7 bytes of trailing data after the zip end record");
    free(t);
    free(b);
}

/* A write that fails leaves nothing behind: here the final rename meets a directory. */
static int leftovers(const char *prefix)
{
    int found = 0;
    DIR *d = opendir(g_dir);
    for (struct dirent *e; d && (e = readdir(d));)
        found += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strcmp(e->d_name, prefix) != 0;
    if (d) closedir(d);
    return found;
}

static void test_write_atomic(void)
{
    char err[512] = "";
    mact_array a[2];
    int64_t sh[1] = {4};
    make(&a[0], "x", MACT_F32, 1, sh, 1);
    make(&a[1], "y", MACT_F32, 1, sh, 2);
    mkdir(tpath("dir.npz"), 0755);
    mkdir(tpath("dir.npy"), 0755);
    int rc = mact_npz_write(tpath("dir.npz"), a, 2, MACT_NPZ_DEFLATE, err, sizeof err);
    int left = leftovers("dir.npz");
    TH_CHECK("npz/write_failure_leaves_no_temp", rc < 0 && left == 0 && contains(err, "dir.npz"),
             "rc=%d leftovers=%d err='%s'", rc, left, err);
    rc = mact_npy_write(tpath("dir.npy"), &a[0], err, sizeof err);
    left = leftovers("dir.npy");
    TH_CHECK("npy/write_failure_leaves_no_temp", rc < 0 && left == 0 && contains(err, "into place"),
             "rc=%d leftovers=%d err='%s'", rc, left, err);
    rmdir(tpath("dir.npz"));
    rmdir(tpath("dir.npy"));

    /* success replaces the old file whole, and leaves no temporary either */
    mact_npz z = {0};
    rc = mact_npz_write(tpath("rt.npz"), a, 2, 0, err, sizeof err) != 0 ||
         mact_npz_write(tpath("rt.npz"), a, 1, MACT_NPZ_DEFLATE, err, sizeof err) != 0 ||
         mact_npz_read(tpath("rt.npz"), &z, err, sizeof err) != 0;
    TH_CHECK("npz/write_replaces_file", !rc && z.count == 1 && same(&z.arrays[0], &a[0]) && leftovers("rt.npz") == 0,
             "rc=%d count=%zu err='%s'", rc, z.count, err);
    mact_npz_free(&z);
    mact_array_free(&a[0]);
    mact_array_free(&a[1]);
}

/* Every prefix must fail cleanly; every single-byte corruption must either fail cleanly or (for
 * bytes no check covers, like timestamps) succeed. ASan/UBSan turn any overrun into a failure. */
static void test_sweeps(void)
{
    /* the last: the stored archive rebuilt with zip64 central fields and end record */
    int flags_list[4] = {0, MACT_NPZ_DEFLATE, MACT_NPZ_ZIP64 | MACT_NPZ_DEFLATE, -1};
    const char *labels[4] = {"0", "1", "257", "zip64_end"}; /* the first three: the flags, as before */
    for (int fi = 0; fi < 4; fi++) {
        size_t n;
        uint8_t *b = small_npz(flags_list[fi] < 0 ? 0 : flags_list[fi], &n);
        if (flags_list[fi] < 0) {
            uint8_t *r = rebuild(b, n, REB_END64 | REB_CENTRAL64, &n);
            free(b);
            b = r;
        }
        int prefix_ok = 1, msg_ok = 1;
        size_t bad_prefix = 0;
        char err[512], bad_msg[600] = "";
        for (size_t k = 0; k < n; k++) {
            uint8_t *cut = malloc(k ? k : 1); /* exact-size copy so ASan sees any overread */
            memcpy(cut, b, k);
            mact_npz z;
            err[0] = 0;
            if (mact_npz_parse(cut, k, "cut", &z, err, sizeof err) == 0) {
                prefix_ok = 0;
                bad_prefix = k;
                mact_npz_free(&z);
            } else if (strncmp(err, "cut: ", 5) != 0 || strlen(err) < 15) { /* names the archive and why */
                msg_ok = 0;
                snprintf(bad_msg, sizeof bad_msg, "prefix %zu: '%s'", k, err);
            }
            free(cut);
        }
        uint8_t *c = malloc(n);
        size_t flips = 0;
        for (size_t k = 0; k < n; k++)
            for (int v = 0; v < 3; v++) {
                static const uint8_t xors[3] = {0x01, 0x80, 0xff};
                memcpy(c, b, n);
                c[k] ^= xors[v];
                mact_npz z;
                err[0] = 0;
                if (mact_npz_parse(c, n, "flip", &z, err, sizeof err) == 0) {
                    mact_npz_free(&z);
                } else if (strncmp(err, "flip: ", 6) != 0 || strlen(err) < 16) {
                    msg_ok = 0;
                    snprintf(bad_msg, sizeof bad_msg, "flip at %zu: '%s'", k, err);
                }
                flips++;
            }
        free(c);
        free(b);
        char name[64];
        snprintf(name, sizeof name, "npz/sweep_truncate_flip_%s", labels[fi]);
        TH_CHECK(name, prefix_ok, "a %zu-byte prefix parsed as valid", bad_prefix);
        snprintf(name, sizeof name, "npz/sweep_messages_%s", labels[fi]);
        TH_CHECK(name, msg_ok, "a refusal without a message naming the archive: %s", bad_msg);
    }

    mact_array a;
    int64_t sh[2] = {3, 2};
    make(&a, NULL, MACT_I32, 2, sh, 9);
    char err[512];
    mact_npy_write(tpath("sweep.npy"), &a, err, sizeof err);
    mact_array_free(&a);
    size_t n;
    uint8_t *b = slurp(tpath("sweep.npy"), &n);
    int prefix_ok = 1;
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, b, k);
        mact_array x;
        if (mact_npy_parse(cut, k, "cut", &x, err, sizeof err) == 0) {
            prefix_ok = 0;
            mact_array_free(&x);
        }
        free(cut);
    }
    for (size_t k = 0; k < n; k++)
        for (int v = 0; v < 256; v += 17) {
            uint8_t *c = malloc(n);
            memcpy(c, b, n);
            c[k] ^= (uint8_t)(v | 1);
            mact_array x;
            if (mact_npy_parse(c, n, "flip", &x, err, sizeof err) == 0) mact_array_free(&x);
            free(c);
        }
    free(b);
    TH_CHECK("npy/sweep_truncate_flip", prefix_ok, "a prefix parsed as valid");
}

int main(void)
{
    const char *base = getenv("MACT_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/test_npy.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        printf("FAIL npy/setup: cannot create a temp dir under %s\n", base ? base : "/tmp");
        return 1;
    }
    test_npy_roundtrip();
    test_npz_roundtrip();
    test_npz_large_deflate();
    test_npy_corrupt();
    test_npy_versions_and_fortran();
    test_write_errors();
    test_to_f32();
    test_npz_corrupt();
    test_npz_zip64();
    test_npz_truncated();
    test_npz_size_lies();
    test_write_atomic();
    test_sweeps();

    const char *files[] = {"rt.npy", "rt.npz", "big.npz", "bad.npy", "v.npy", "f.npy", "f3.npy",
                           "bf.npy", "dup.npz", "small.npz", "sweep.npy", "one.npz", "lie.npy"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(tpath(files[i]));
    rmdir(g_dir);
    TH_EXIT();
}
