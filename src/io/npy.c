/* .npy / .npz reader. See npy.h for the contract; writing is src/dev/npz_write.c.
 *
 * npy is parsed by hand from memory (files are mmapped read-only), so a corrupt file can only cause
 * bounds-checked failures. npz goes through libzip over the same in-memory image: this file keeps only
 * the npy layer, the size bounds and the wording of errors. */
#include "io/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>
#include "mact.h"
#include "base/err.h"

/* one formatter for every module's errors; this module reports -1 */
#define set_err(err, errlen, ...) ((void)mact_errf((err), (errlen), -1, __VA_ARGS__))

/* ---------------------------------------------------------------- dtypes */

/* Kept local (rather than calling mact_dtype_size) so npy.c links on its own, e.g. in tools that
 * never touch checkpoints. Index = MACT_* value. */
static const struct { size_t size; char kind; } k_types[MACT_DTYPE_COUNT] = {
    [MACT_F32] = {4, 'f'}, [MACT_BF16] = {2, 0},  [MACT_F16] = {2, 'f'}, [MACT_F64] = {8, 'f'},
    [MACT_I64] = {8, 'i'}, [MACT_I32] = {4, 'i'}, [MACT_I16] = {2, 'i'}, [MACT_I8] = {1, 'i'},
    [MACT_U8] = {1, 'u'},  [MACT_BOOL] = {1, 'b'}, [MACT_U16] = {2, 'u'}, [MACT_U32] = {4, 'u'},
    [MACT_U64] = {8, 'u'},
};

static size_t elem_size(int dtype)
{
    return (dtype >= 0 && dtype < MACT_DTYPE_COUNT) ? k_types[dtype].size : 0;
}

/* kind 0 marks dtypes numpy has no descr for (bf16). */
static const char *dtype_label(int dtype)
{
    static const char *names[MACT_DTYPE_COUNT] = {
        "F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL", "U16", "U32", "U64"};
    return (dtype >= 0 && dtype < MACT_DTYPE_COUNT) ? names[dtype] : "?";
}

/* Product of the dims times itemsize, refusing anything that does not fit size_t. */
static int shape_bytes(int ndim, const int64_t *shape, size_t itemsize, size_t *numel_out,
                       size_t *nbytes_out)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        uint64_t d = (uint64_t)shape[i];
        if (d > SIZE_MAX) return -1;
        if (d != 0 && numel > SIZE_MAX / (size_t)d) {
            /* A zero dim later makes the product 0, but such a shape is nonsense; refuse it. */
            return -1;
        }
        numel *= (size_t)d;
    }
    if (itemsize != 0 && numel > SIZE_MAX / itemsize) return -1;
    if (numel_out) *numel_out = numel;
    if (nbytes_out) *nbytes_out = numel * itemsize;
    return 0;
}

void mact_npy_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
}

size_t mact_array_numel(const mact_array *a)
{
    size_t numel = 1;
    if (shape_bytes(a->ndim, a->shape, 1, &numel, NULL) != 0) return 0;
    return numel;
}

void mact_array_free(mact_array *a)
{
    if (!a) return;
    free(a->name);
    free(a->data);
    memset(a, 0, sizeof *a);
}

static int check_dims(const char *what, int ndim, const int64_t *shape, char *err, size_t errlen)
{
    if (ndim < 0 || ndim > MACT_NPY_MAX_DIMS) {
        set_err(err, errlen, "%s: %d dimensions (supported: 0..%d)", what, ndim, MACT_NPY_MAX_DIMS);
        return -1;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            set_err(err, errlen, "%s: negative dimension %lld at axis %d", what,
                    (long long)shape[i], i);
            return -1;
        }
    return 0;
}

int mact_array_alloc(mact_array *a, const char *name, int dtype, int ndim, const int64_t *shape,
                     char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    const char *what = name ? name : "array";
    size_t isz = elem_size(dtype);
    if (isz == 0) {
        set_err(err, errlen, "%s: unknown dtype %d", what, dtype);
        return -1;
    }
    if (check_dims(what, ndim, shape, err, errlen) != 0) return -1;
    size_t nbytes;
    if (shape_bytes(ndim, shape, isz, NULL, &nbytes) != 0) {
        set_err(err, errlen, "%s: shape too large", what);
        return -1;
    }
    if (name && !(a->name = strdup(name))) goto oom;
    if (nbytes && !(a->data = calloc(1, nbytes))) goto oom;
    a->dtype = dtype;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
    a->nbytes = nbytes;
    return 0;
oom:
    set_err(err, errlen, "%s: out of memory allocating %zu bytes", what, nbytes);
    mact_array_free(a);
    return -1;
}
int mact_array_check(const mact_array *a, const char *what, char *err, size_t errlen)
{
    size_t isz = elem_size(a->dtype), nbytes;
    if (isz == 0) {
        set_err(err, errlen, "%s: unknown dtype %d", what, a->dtype);
        return -1;
    }
    if (check_dims(what, a->ndim, a->shape, err, errlen) != 0) return -1;
    if (shape_bytes(a->ndim, a->shape, isz, NULL, &nbytes) != 0) {
        set_err(err, errlen, "%s: shape too large", what);
        return -1;
    }
    if (nbytes != a->nbytes) {
        set_err(err, errlen, "%s: nbytes is %zu but the shape needs %zu", what, a->nbytes, nbytes);
        return -1;
    }
    if (nbytes && !a->data) {
        set_err(err, errlen, "%s: data is NULL", what);
        return -1;
    }
    return 0;
}

int mact_npy_descr(int dtype, char *out, size_t cap)
{
    /* kind 0 marks dtypes numpy has no descr for (bf16) */
    if (dtype < 0 || dtype >= MACT_DTYPE_COUNT || k_types[dtype].kind == 0) return -1;
    size_t isz = k_types[dtype].size;
    int n = snprintf(out, cap, "%c%c%zu", isz == 1 ? '|' : '<', k_types[dtype].kind, isz);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* ---------------------------------------------------------------- file mapping */

typedef struct {
    const uint8_t *buf;
    size_t len;
    void *map; /* NULL when the file is empty */
} mapped;

static int map_file(const char *path, mapped *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        set_err(err, errlen, "%s: file too large to map", path);
        close(fd);
        return -1;
    }
    m->len = (size_t)st.st_size;
    if (m->len > 0) {
        m->map = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m->map == MAP_FAILED) {
            set_err(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            m->map = NULL;
            close(fd);
            return -1;
        }
        m->buf = m->map;
    }
    close(fd);
    return 0;
}

static void unmap_file(mapped *m)
{
    if (m->map) munmap(m->map, m->len);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- npy header */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

typedef struct {
    int dtype, ndim, fortran;
    int64_t shape[MACT_NPY_MAX_DIMS];
    size_t data_off, nbytes;
} npy_info;

typedef struct {
    const char *p, *end;
} cur;

static void skip_ws(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A Python str literal without escapes: numpy never needs them for descr or the three keys. */
static int parse_pystr(cur *c, char *out, size_t cap)
{
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n' || n + 1 >= cap) return -1;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return -1;
    c->p++;
    out[n] = 0;
    return 0;
}

static int parse_descr(const char *d, int *dtype)
{
    size_t n = strlen(d);
    if (n < 3) return -1;
    char order = d[0], kind = d[1];
    if (!strchr("<>|=", order)) return -1;
    char *endp;
    errno = 0;
    long size = strtol(d + 2, &endp, 10);
    if (*endp || errno || d[2] < '0' || d[2] > '9') return -1;
    for (int t = 0; t < MACT_DTYPE_COUNT; t++) {
        if (k_types[t].kind == kind && (long)k_types[t].size == size) {
            /* Byte order is meaningless for one-byte types, and '=' is native (little) here. */
            if (size > 1 && order != '<' && order != '=') return -2;
            *dtype = t;
            return 0;
        }
    }
    return -1;
}

static int parse_header_dict(const char *h, size_t hlen, const char *what, npy_info *info,
                             char *err, size_t errlen)
{
    cur c = {h, h + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    char key[32], descr[32];

    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{') {
        set_err(err, errlen, "%s: npy header is not a dict literal", what);
        return -1;
    }
    c.p++;
    for (;;) {
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') break;
        if (parse_pystr(&c, key, sizeof key) != 0) {
            set_err(err, errlen, "%s: npy header: expected a quoted key at byte %td", what, c.p - h);
            return -1;
        }
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':') {
            set_err(err, errlen, "%s: npy header: expected ':' after '%s'", what, key);
            return -1;
        }
        c.p++;
        skip_ws(&c);
        if (strcmp(key, "descr") == 0) {
            if (have_descr++) goto dup;
            if (c.p < c.end && (*c.p == '[' || *c.p == '{')) {
                set_err(err, errlen, "%s: structured dtypes are not supported", what);
                return -1;
            }
            if (parse_pystr(&c, descr, sizeof descr) != 0) {
                set_err(err, errlen, "%s: npy header: 'descr' is not a short string", what);
                return -1;
            }
            int r = parse_descr(descr, &info->dtype);
            if (r == -2) {
                set_err(err, errlen, "%s: big-endian dtype '%s' is not supported", what, descr);
                return -1;
            }
            if (r != 0) {
                set_err(err, errlen, "%s: unsupported dtype descr '%s'", what, descr);
                return -1;
            }
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_fortran++) goto dup;
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                info->fortran = 1;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                info->fortran = 0;
                c.p += 5;
            } else {
                set_err(err, errlen, "%s: npy header: 'fortran_order' is not True/False", what);
                return -1;
            }
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape++) goto dup;
            if (c.p >= c.end || *c.p != '(') {
                set_err(err, errlen, "%s: npy header: 'shape' is not a tuple", what);
                return -1;
            }
            c.p++;
            int n = 0, trailing_comma = 0;
            for (;;) {
                skip_ws(&c);
                if (c.p < c.end && *c.p == ')') break;
                if (c.p < c.end && *c.p == '-') {
                    set_err(err, errlen, "%s: npy header: negative dimension in shape", what);
                    return -1;
                }
                if (c.p >= c.end || *c.p < '0' || *c.p > '9') {
                    set_err(err, errlen, "%s: npy header: bad shape entry", what);
                    return -1;
                }
                int64_t v = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    int dgt = *c.p++ - '0';
                    if (v > (INT64_MAX - dgt) / 10) {
                        set_err(err, errlen, "%s: npy header: dimension overflows int64", what);
                        return -1;
                    }
                    v = v * 10 + dgt;
                }
                if (n >= MACT_NPY_MAX_DIMS) {
                    set_err(err, errlen, "%s: more than %d dimensions", what, MACT_NPY_MAX_DIMS);
                    return -1;
                }
                info->shape[n++] = v;
                skip_ws(&c);
                trailing_comma = 0;
                if (c.p < c.end && *c.p == ',') {
                    c.p++;
                    trailing_comma = 1;
                } else if (c.p < c.end && *c.p == ')') {
                    break;
                } else {
                    set_err(err, errlen, "%s: npy header: bad shape tuple", what);
                    return -1;
                }
            }
            /* "(3)" is the int 3 in Python, not a tuple; numpy would refuse it too. */
            if (n == 1 && !trailing_comma) {
                set_err(err, errlen, "%s: npy header: 'shape' is not a tuple", what);
                return -1;
            }
            c.p++;
            info->ndim = n;
        } else {
            set_err(err, errlen, "%s: npy header: unexpected key '%s'", what, key);
            return -1;
        }
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') break;
        set_err(err, errlen, "%s: npy header: expected ',' or '}' at byte %td", what, c.p - h);
        return -1;
    }
    c.p++; /* the '}' */
    skip_ws(&c);
    if (c.p != c.end) {
        set_err(err, errlen, "%s: npy header: trailing garbage after the dict", what);
        return -1;
    }
    if (!have_descr || !have_fortran || !have_shape) {
        set_err(err, errlen, "%s: npy header lacks key '%s'", what,
                !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
        return -1;
    }
    return 0;
dup:
    set_err(err, errlen, "%s: npy header: duplicate key '%s'", what, key);
    return -1;
}

/* Largest npy header accepted. numpy itself refuses headers over 10000 bytes unless told otherwise;
 * the bound keeps a corrupt length from sizing an allocation (npz members are read header first). */
#define NPY_MAX_HEADER ((size_t)1 << 20)

/* The preamble: magic, version, header length. buf holds the first min(total, 12) bytes of a
 * `total`-byte file (10 suffice for version 1.0). */
static int npy_preamble(const uint8_t *buf, size_t total, const char *what, size_t *pre, size_t *hlen,
                        char *err, size_t errlen)
{
    if (total < 10) {
        set_err(err, errlen, "%s: truncated: %zu bytes is shorter than the npy preamble", what, total);
        return -1;
    }
    if (memcmp(buf, "\x93NUMPY", 6) != 0) {
        set_err(err, errlen, "%s: not an npy file (bad magic)", what);
        return -1;
    }
    unsigned major = buf[6], minor = buf[7];
    if (major == 1 && minor == 0) {
        *pre = 10;
        *hlen = rd16(buf + 8);
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (total < 12) {
            set_err(err, errlen, "%s: truncated: %zu bytes is shorter than the npy preamble", what, total);
            return -1;
        }
        *pre = 12;
        *hlen = rd32(buf + 8);
    } else {
        set_err(err, errlen, "%s: unsupported npy format version %u.%u", what, major, minor);
        return -1;
    }
    if (*hlen > total - *pre) {
        set_err(err, errlen, "%s: npy header length %zu runs past the end of the file (%zu bytes)",
                what, *hlen, total);
        return -1;
    }
    if (*hlen > NPY_MAX_HEADER) {
        set_err(err, errlen, "%s: npy header length %zu is over the %zu-byte limit", what, *hlen,
                NPY_MAX_HEADER);
        return -1;
    }
    return 0;
}

/* The header dict (hlen bytes at h, which starts at offset pre of a `total`-byte file): fills info
 * and checks that the bytes after the header are exactly what the shape and dtype need. */
static int npy_dict(const uint8_t *h, size_t pre, size_t hlen, size_t total, const char *what,
                    npy_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    if (memchr(h, 0, hlen)) {
        set_err(err, errlen, "%s: npy header contains a NUL byte", what);
        return -1;
    }
    if (parse_header_dict((const char *)h, hlen, what, info, err, errlen) != 0) return -1;
    size_t isz = elem_size(info->dtype);
    if (shape_bytes(info->ndim, info->shape, isz, NULL, &info->nbytes) != 0) {
        set_err(err, errlen, "%s: shape too large", what);
        return -1;
    }
    info->data_off = pre + hlen;
    size_t have = total - info->data_off;
    if (have != info->nbytes) {
        char sh[256];
        mact_npy_shape_str(sh, sizeof sh, info->ndim, info->shape);
        set_err(err, errlen, "%s: data is %zu bytes but shape %s of %s needs %zu%s", what, have, sh,
                dtype_label(info->dtype), info->nbytes, have < info->nbytes ? " (truncated)" : "");
        return -1;
    }
    return 0;
}

static int npy_header(const uint8_t *buf, size_t len, const char *what, npy_info *info,
                      char *err, size_t errlen)
{
    size_t pre, hlen;
    memset(info, 0, sizeof *info);
    if (npy_preamble(buf, len, what, &pre, &hlen, err, errlen) != 0) return -1;
    return npy_dict(buf + pre, pre, hlen, len, what, info, err, errlen);
}

/* Copies Fortran-ordered elements into C order: walk the C index and gather from the F offset. */
static void fortran_to_c(const uint8_t *src, uint8_t *dst, int ndim, const int64_t *shape,
                         size_t isz, size_t numel)
{
    size_t fstride[MACT_NPY_MAX_DIMS], idx[MACT_NPY_MAX_DIMS] = {0};
    size_t s = 1;
    for (int k = 0; k < ndim; k++) {
        fstride[k] = s;
        s *= (size_t)shape[k];
    }
    for (size_t i = 0; i < numel; i++) {
        size_t off = 0;
        for (int k = 0; k < ndim; k++) off += idx[k] * fstride[k];
        memcpy(dst + i * isz, src + off * isz, isz);
        for (int k = ndim - 1; k >= 0; k--) {
            if (++idx[k] < (size_t)shape[k]) break;
            idx[k] = 0;
        }
    }
}

static void fill_array(mact_array *out, const npy_info *info)
{
    out->dtype = info->dtype;
    out->ndim = info->ndim;
    for (int i = 0; i < info->ndim; i++) out->shape[i] = info->shape[i];
    out->nbytes = info->nbytes;
}

static int needs_transpose(const npy_info *info)
{
    /* With at most one dim longer than 1, both orders lay elements out identically. */
    int big = 0;
    for (int i = 0; i < info->ndim; i++) big += info->shape[i] > 1;
    return info->fortran && big > 1;
}

int mact_npy_parse(const uint8_t *buf, size_t len, const char *what, mact_array *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    npy_info info;
    if (npy_header(buf, len, what, &info, err, errlen) != 0) return -1;
    void *data = NULL;
    if (info.nbytes) {
        if (!(data = malloc(info.nbytes))) {
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", what, info.nbytes);
            return -1;
        }
        size_t isz = elem_size(info.dtype);
        if (needs_transpose(&info))
            fortran_to_c(buf + info.data_off, data, info.ndim, info.shape, isz, info.nbytes / isz);
        else
            memcpy(data, buf + info.data_off, info.nbytes);
    }
    fill_array(out, &info);
    out->data = data;
    return 0;
}

int mact_npy_read(const char *path, mact_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mapped m;
    if (map_file(path, &m, err, errlen) != 0) return -1;
    int rc = mact_npy_parse(m.buf, m.len, path, out, err, errlen);
    unmap_file(&m);
    return rc;
}

/* ---------------------------------------------------------------- npz: zip through libzip */

/* Deflate cannot beat ~1032:1, so a larger claimed expansion is corruption (or a bomb) and we
 * refuse before allocating the claimed size. */
#define MAX_DEFLATE_RATIO 1032u
/* The fixed part of a central directory entry: bounds the member count by the archive size. */
#define CD_ENTRY_MIN 46u

#define SIG_EOCD   0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64  0x07064b50u

/* libzip's message for a (zip, system) error pair. */
static void zip_msg(int zcode, int scode, char *buf, size_t cap)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_error_set(&ze, zcode, scode);
    snprintf(buf, cap, "%s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
}

/* Wording for an archive libzip refused. libzip 1.7 (Debian 12's) says only "not a zip archive" or
 * "inconsistent" (detailed codes came with 1.8), so to name the problem this looks at the end records,
 * the few bytes that say where the central directory is. It only words errors: libzip alone decides
 * whether an archive is accepted. `strict` adds the layout rules of libzip's consistency check (the end
 * record closes the file, the directory ends where the end records start). Returns 1 with err set
 * when it found the problem, 0 when the end records look sound. */
static int describe_end_records(const uint8_t *buf, size_t len, const char *what, int strict,
                                char *err, size_t errlen)
{
    size_t eocd = SIZE_MAX;
    size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0; /* the comment is at most 64 KiB */
    for (size_t i = len - 22 + 1; i-- > lo;)
        if (rd32(buf + i) == SIG_EOCD) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX) {
        set_err(err, errlen, "%s: no zip end-of-central-directory record (not a zip archive, or truncated)",
                what);
        return 1;
    }
    const uint8_t *e = buf + eocd;
    uint64_t n_disk = rd16(e + 8), n_total = rd16(e + 10), cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    unsigned disk = rd16(e + 4), cd_disk = rd16(e + 6);
    size_t comment = rd16(e + 20), limit = eocd;
    if (comment > len - eocd - 22) {
        set_err(err, errlen, "%s: the zip end record's comment runs past the end of the file (truncated?)",
                what);
        return 1;
    }
    if (eocd >= 20 && rd32(buf + eocd - 20) == SIG_LOC64) {
        const uint8_t *l = buf + eocd - 20;
        uint64_t z64 = rd64(l + 8);
        if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || rd32(buf + z64) != SIG_EOCD64) {
            set_err(err, errlen, "%s: zip64 end record missing or out of place (offset %llu)", what,
                    (unsigned long long)z64);
            return 1;
        }
        const uint8_t *z = buf + z64;
        disk = rd32(z + 16);
        cd_disk = rd32(z + 20);
        n_disk = rd64(z + 24);
        n_total = rd64(z + 32);
        cd_size = rd64(z + 40);
        cd_off = rd64(z + 48);
        limit = (size_t)z64;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
        set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
        return 1;
    }
    if (cd_off > limit || cd_size > limit - cd_off) {
        set_err(err, errlen,
                "%s: central directory (offset %llu, %llu bytes) lies outside the archive (%zu bytes before "
                "the end record)", what, (unsigned long long)cd_off, (unsigned long long)cd_size, limit);
        return 1;
    }
    if (n_total > cd_size / CD_ENTRY_MIN) {
        set_err(err, errlen, "%s: %llu entries cannot fit in a %llu-byte central directory", what,
                (unsigned long long)n_total, (unsigned long long)cd_size);
        return 1;
    }
    if (strict && eocd + 22 + comment != len) {
        set_err(err, errlen, "%s: %zu bytes of trailing data after the zip end record", what,
                len - eocd - 22 - comment);
        return 1;
    }
    if (strict && cd_off + cd_size != limit) {
        set_err(err, errlen, "%s: %llu stray bytes between the central directory and the end record", what,
                (unsigned long long)(limit - cd_off - cd_size));
        return 1;
    }
    return 0;
}

/* One member being read. Reads stop at the first error, which is kept for the verdict. */
typedef struct {
    zip_file_t *f;
    const char *label;   /* "<archive>: member '<name>'" */
    int deflated;
    uint64_t usize;      /* declared uncompressed size */
    uint32_t crc;        /* declared CRC */
    uint64_t got;        /* bytes read so far */
    int eof, zerr, serr; /* end of data seen; libzip's error pair of the failed read (0: none) */
} mstream;

static size_t mread(mstream *s, void *dst, size_t n)
{
    size_t done = 0;
    while (done < n && !s->eof && !s->zerr) {
        zip_int64_t r = zip_fread(s->f, (uint8_t *)dst + done, n - done);
        if (r < 0) {
            zip_error_t *ze = zip_file_get_error(s->f);
            s->zerr = zip_error_code_zip(ze);
            s->serr = zip_error_code_system(ze);
            if (s->zerr == 0) s->zerr = ZIP_ER_INTERNAL;
        } else if (r == 0) {
            s->eof = 1;
        } else {
            done += (size_t)r;
        }
    }
    s->got += done;
    return done;
}

/* Reads whatever is left of the member into a scratch buffer, then once more past its declared end:
 * libzip checks the CRC (and, for stored data, the size) when the data runs out, and a byte beyond the
 * declared size means the directory lies. *crc continues the CRC of what the caller read, for the
 * message. Bounded: at most the declared size plus one byte. */
static void mdrain(mstream *s, uLong *crc)
{
    uint8_t scratch[1 << 14];
    while (!s->eof && !s->zerr && s->got <= s->usize) {
        uint64_t left = s->usize - s->got;
        size_t want = left == 0 ? 1 : left < sizeof scratch ? (size_t)left : sizeof scratch;
        size_t r = mread(s, scratch, want);
        *crc = crc32_z(*crc, scratch, r);
    }
}

/* The zip-level verdict once the member's data has been read through: 0 when it is exactly the declared
 * size and libzip found nothing wrong. `crc` is ours, for a CRC message. */
static int mverdict(const mstream *s, uint32_t crc, char *err, size_t errlen)
{
    const char *what = s->label, *kind = s->deflated ? "deflate data" : "data";
    unsigned long long got = s->got, usize = s->usize;
    char msg[256];
    if (s->got > s->usize) {
        set_err(err, errlen, "%s: %s longer than the declared %llu bytes", what, kind, usize);
        return -1;
    }
    switch (s->zerr) {
    case 0:
        if (s->got == s->usize) return 0;
        set_err(err, errlen, "%s: %s ends after %llu bytes, declared %llu", what, kind, got, usize);
        return -1;
    case ZIP_ER_CRC:
        /* libzip's inflater stops without an error when the compressed data runs out mid-stream; the
         * CRC check at the end is what catches it. */
        if (s->got < s->usize)
            set_err(err, errlen, "%s: deflate data truncated (%llu of %llu bytes produced, CRC mismatch)",
                    what, got, usize);
        else
            set_err(err, errlen, "%s: CRC mismatch (stored %08x, computed %08x)", what, (unsigned)s->crc,
                    (unsigned)crc);
        return -1;
    case ZIP_ER_INCONS: /* libzip's size check at the end of the data */
        set_err(err, errlen, "%s: %s ends after %llu bytes, declared %llu", what, kind, got, usize);
        return -1;
    case ZIP_ER_EOF:
        set_err(err, errlen, "%s: %s overruns the archive (the archive ends after %llu of %llu bytes)",
                what, s->deflated ? "compressed data" : "data", got, usize);
        return -1;
    case ZIP_ER_ZLIB:
    case ZIP_ER_COMPRESSED_DATA:
        zip_msg(s->zerr, s->serr, msg, sizeof msg);
        set_err(err, errlen, "%s: corrupt deflate data: %s (after %llu of %llu bytes)", what, msg, got,
                usize);
        return -1;
    case ZIP_ER_MEMORY:
        set_err(err, errlen, "%s: out of memory reading the member", what);
        return -1;
    default:
        zip_msg(s->zerr, s->serr, msg, sizeof msg);
        set_err(err, errlen, "%s: cannot read the member's data: %s", what, msg);
        return -1;
    }
}

/* Reads member idx into out: the npy header first, so the data buffer is allocated only once the
 * header's size and the directory's agree; then the data, straight into that buffer. When the npy
 * layer objects, the member is still read through (into a scratch buffer) so that zip-level damage,
 * the likelier cause, is what the message names. */
static int read_member(zip_t *za, zip_uint64_t idx, const zip_stat_t *st, const char *label,
                       mact_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mstream s = {.label = label, .deflated = st->comp_method == ZIP_CM_DEFLATE, .usize = st->size,
                 .crc = st->crc};
    if (!(s.f = zip_fopen_index(za, idx, 0))) {
        zip_error_t *ze = zip_get_error(za);
        char msg[256];
        zip_msg(zip_error_code_zip(ze), zip_error_code_system(ze), msg, sizeof msg);
        if (zip_error_code_zip(ze) == ZIP_ER_MEMORY)
            set_err(err, errlen, "%s: out of memory opening the member", label);
        else /* what is left to fail here is finding the data behind the local header */
            set_err(err, errlen, "%s: bad local header offset: libzip cannot read the local header (%s)",
                    label, msg);
        return -1;
    }
    const size_t total = (size_t)st->size; /* the caller checked it fits */
    uint8_t pb[12], *hbuf = NULL, *raw = NULL;
    size_t pre = 0, hlen = 0, pn = total < 10 ? total : 10;
    npy_info info;
    uLong crc = crc32_z(0L, Z_NULL, 0);
    int rc = -1;

    if (mread(&s, pb, pn) != pn) goto zip_fail;
    if (total >= 12 && memcmp(pb, "\x93NUMPY", 6) == 0 && (pb[6] == 2 || pb[6] == 3)) {
        if (mread(&s, pb + 10, 2) != 2) goto zip_fail;
        pn = 12;
    }
    if (npy_preamble(pb, total, label, &pre, &hlen, err, errlen) != 0) {
        crc = crc32_z(crc, pb, pn);
        goto npy_fail;
    }
    if (!(hbuf = malloc(pre + hlen))) {
        set_err(err, errlen, "%s: out of memory for a %zu-byte npy header", label, hlen);
        goto done;
    }
    memcpy(hbuf, pb, pre);
    if (mread(&s, hbuf + pre, hlen) != hlen) goto zip_fail;
    crc = crc32_z(crc, hbuf, pre + hlen);
    if (npy_dict(hbuf + pre, pre, hlen, total, label, &info, err, errlen) != 0) goto npy_fail;
    if (info.nbytes) {
        if (!(raw = malloc(info.nbytes))) {
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", label, info.nbytes);
            goto done;
        }
        if (mread(&s, raw, info.nbytes) != info.nbytes) goto zip_fail;
    }
    mdrain(&s, &crc); /* nothing is left: this reaches the end, where libzip checks the CRC */
    if (s.zerr == ZIP_ER_CRC && s.got == s.usize && info.nbytes) crc = crc32_z(crc, raw, info.nbytes);
    if (mverdict(&s, (uint32_t)crc, err, errlen) != 0) goto done;
    void *data = raw;
    if (info.nbytes && needs_transpose(&info)) {
        if (!(data = malloc(info.nbytes))) {
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", label, info.nbytes);
            goto done;
        }
        size_t isz = elem_size(info.dtype);
        fortran_to_c(raw, data, info.ndim, info.shape, isz, info.nbytes / isz);
        free(raw);
    }
    raw = NULL;
    fill_array(out, &info);
    out->data = data;
    rc = 0;
    goto done;

npy_fail: { /* err holds the npy message; a zip-level problem, if there is one, replaces it */
    char zmsg[1024] = "";
    mdrain(&s, &crc);
    if (mverdict(&s, (uint32_t)crc, zmsg, sizeof zmsg) != 0) set_err(err, errlen, "%s", zmsg);
    goto done;
}
zip_fail: /* a read came up short: the verdict names why */
    if (mverdict(&s, (uint32_t)crc, err, errlen) == 0)
        set_err(err, errlen, "%s: data ends after %llu bytes, declared %llu", label,
                (unsigned long long)s.got, (unsigned long long)s.usize);
done:
    free(hbuf);
    free(raw);
    zip_fclose(s.f);
    return rc;
}

static int cmp_stat_name(const void *a, const void *b)
{
    const zip_stat_t *x = *(const zip_stat_t *const *)a, *y = *(const zip_stat_t *const *)b;
    return strcmp(x->name, y->name);
}

/* Printable copy of a member name for messages, so a corrupt name cannot garble them. */
static void printable(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (; name[n] && n + 1 < cap; n++)
        out[n] = ((unsigned char)name[n] >= 32 && (unsigned char)name[n] < 127) ? name[n] : '?';
    out[n] = 0;
}

/* Every check that needs only the central directory, for every member, before any data is read or
 * any array allocated; then each member in archive order. */
static int read_archive(zip_t *za, size_t len, const char *what, mact_npz *out, char *err, size_t errlen)
{
    zip_int64_t ne = zip_get_num_entries(za, 0);
    if (ne < 0 || (uint64_t)ne > len / CD_ENTRY_MIN) {
        set_err(err, errlen, "%s: %lld entries cannot fit in a %zu-byte archive", what, (long long)ne, len);
        return -1;
    }
    if (ne == 0) return 0;
    size_t n = (size_t)ne;
    zip_stat_t *st = calloc(n, sizeof *st);
    const zip_stat_t **sorted = calloc(n, sizeof *sorted);
    int rc = -1;
    char member[320], label[1024];
    if (!st || !sorted || !(out->arrays = calloc(n, sizeof *out->arrays))) {
        set_err(err, errlen, "%s: out of memory for %zu members", what, n);
        goto done;
    }
    const zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC |
                              ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    uint64_t data_sum = 0;
    for (size_t i = 0; i < n; i++) {
        zip_stat_t *s = &st[i];
        /* raw names: the bytes numpy wrote (UTF-8), never a libzip CP437 conversion */
        if (zip_stat_index(za, i, ZIP_FL_ENC_RAW, s) != 0 || (s->valid & need) != need || !s->name) {
            set_err(err, errlen, "%s: central directory entry %zu is unreadable", what, i);
            goto done;
        }
        sorted[i] = s;
        printable(s->name, member, sizeof member);
        size_t nlen = strlen(s->name);
        unsigned long long usize = s->size, csize = s->comp_size;
        if (s->encryption_method != ZIP_EM_NONE) {
            set_err(err, errlen, "%s: member '%s' is encrypted", what, member);
            goto done;
        }
        if (s->comp_method != ZIP_CM_STORE && s->comp_method != ZIP_CM_DEFLATE) {
            set_err(err, errlen, "%s: member '%s' uses unsupported compression method %u", what, member,
                    (unsigned)s->comp_method);
            goto done;
        }
        if (nlen < 5 || strcmp(s->name + nlen - 4, ".npy") != 0) {
            set_err(err, errlen, "%s: member '%s' is not a .npy file", what, member);
            goto done;
        }
        if (s->comp_method == ZIP_CM_STORE && csize != usize) {
            set_err(err, errlen, "%s: member '%s': stored sizes differ (%llu vs %llu)", what, member,
                    csize, usize);
            goto done;
        }
        if (csize > len) {
            set_err(err, errlen, "%s: member '%s': data (%llu bytes) overruns the archive (%zu bytes)",
                    what, member, csize, len);
            goto done;
        }
        if (s->comp_method == ZIP_CM_DEFLATE && usize / MAX_DEFLATE_RATIO > csize + 1) {
            set_err(err, errlen,
                    "%s: member '%s': declares %llu bytes from %llu compressed (impossible ratio)", what,
                    member, usize, csize);
            goto done;
        }
        if (usize > SIZE_MAX) {
            set_err(err, errlen, "%s: member '%s': %llu bytes do not fit in memory here", what, member,
                    usize);
            goto done;
        }
        /* Members may not share data: together they fit in the archive (which, with the ratio above,
         * bounds everything that will be allocated). Overlapping members are a known zip bomb. */
        data_sum += csize;
        if (data_sum > len) {
            set_err(err, errlen,
                    "%s: members' data adds up to more than the archive's %zu bytes (overlapping members)",
                    what, len);
            goto done;
        }
    }
    qsort(sorted, n, sizeof *sorted, cmp_stat_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            printable(sorted[i]->name, member, sizeof member);
            set_err(err, errlen, "%s: duplicate member '%s'", what, member);
            goto done;
        }
    for (size_t i = 0; i < n; i++) {
        printable(st[i].name, member, sizeof member);
        snprintf(label, sizeof label, "%s: member '%s'", what, member);
        mact_array *arr = &out->arrays[out->count];
        if (read_member(za, i, &st[i], label, arr, err, errlen) != 0) goto done;
        out->count++;
        size_t nlen = strlen(st[i].name) - 4;
        if (!(arr->name = malloc(nlen + 1))) {
            set_err(err, errlen, "%s: out of memory", what);
            goto done;
        }
        memcpy(arr->name, st[i].name, nlen);
        arr->name[nlen] = 0;
    }
    rc = 0;
done:
    free(st);
    free(sorted);
    if (rc != 0) mact_npz_free(out);
    return rc;
}

static zip_t *open_buffer(const uint8_t *buf, size_t len, int flags, zip_error_t *ze)
{
    zip_source_t *src = zip_source_buffer_create(buf, len, 0, ze);
    if (!src) return NULL;
    zip_t *za = zip_open_from_source(src, flags, ze);
    if (!za) zip_source_free(src);
    return za;
}

int mact_npz_parse(const uint8_t *buf, size_t len, const char *what, mact_npz *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < 22) {
        set_err(err, errlen, "%s: %zu bytes is too small to be a zip archive", what, len);
        return -1;
    }
    /* The normal path: libzip with its consistency check (every local header read and compared with
     * the central directory, no stray bytes around the end records). */
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = open_buffer(buf, len, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (za) {
        zip_error_fini(&ze);
        int rc = read_archive(za, len, what, out, err, errlen);
        zip_discard(za);
        return rc;
    }
    int strict = zip_error_code_zip(&ze), strict_sys = zip_error_code_system(&ze);
    zip_error_fini(&ze);
    if (strict == ZIP_ER_MEMORY) {
        set_err(err, errlen, "%s: out of memory reading the zip directory", what);
        return -1;
    }
    /* Refused. Find the most specific reason: open without the consistency check and read every
     * member, whose checks name a member and what is wrong with it; the consistency failure itself is
     * reported only when nothing more specific turns up. */
    char msg[256];
    zip_error_init(&ze);
    za = open_buffer(buf, len, ZIP_RDONLY, &ze);
    if (!za) {
        int code = zip_error_code_zip(&ze);
        zip_msg(code, zip_error_code_system(&ze), msg, sizeof msg);
        zip_error_fini(&ze);
        if (code == ZIP_ER_MEMORY)
            set_err(err, errlen, "%s: out of memory reading the zip directory", what);
        else if (describe_end_records(buf, len, what, 0, err, errlen))
            ;
        else if (code == ZIP_ER_MULTIDISK)
            set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
        else if (code == ZIP_ER_NOENT) /* libzip's lookup of the extra field the entry needs */
            set_err(err, errlen,
                    "%s: corrupt central directory: an entry's sizes or offset say zip64 but it has no zip64 "
                    "extra field (libzip: %s)", what, msg);
        else
            set_err(err, errlen, "%s: corrupt central directory (libzip: %s)", what, msg);
        return -1;
    }
    zip_error_fini(&ze);
    int rc = read_archive(za, len, what, out, err, errlen);
    zip_discard(za);
    if (rc != 0) return -1;
    mact_npz_free(out);
    zip_msg(strict, strict_sys, msg, sizeof msg);
    if (describe_end_records(buf, len, what, 1, err, errlen))
        ;
    else if (strict == ZIP_ER_NOZIP) /* what libzip's check reports for a local header out of place */
        set_err(err, errlen,
                "%s: bad local header offset: a member's local header is missing, or its data runs into "
                "the central directory (libzip: %s)", what, msg);
    else if (strict == ZIP_ER_INCONS)
        set_err(err, errlen,
                "%s: a local header disagrees with the central directory (name, method, time, CRC or "
                "sizes; libzip: %s)", what, msg);
    else
        set_err(err, errlen, "%s: fails libzip's consistency check: %s", what, msg);
    return -1;
}

int mact_npz_read(const char *path, mact_npz *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mapped m;
    if (map_file(path, &m, err, errlen) != 0) return -1;
    int rc = mact_npz_parse(m.buf, m.len, path, out, err, errlen);
    unmap_file(&m);
    return rc;
}

const mact_array *mact_npz_find(const mact_npz *z, const char *name)
{
    if (!z || !name) return NULL;
    for (size_t i = 0; i < z->count; i++)
        if (z->arrays[i].name && strcmp(z->arrays[i].name, name) == 0) return &z->arrays[i];
    return NULL;
}

void mact_npz_free(mact_npz *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->count; i++) mact_array_free(&z->arrays[i]);
    free(z->arrays);
    memset(z, 0, sizeof *z);
}

/* ---------------------------------------------------------------- conversion */

static float half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal half: renormalise, every f16 subnormal is a normal f32 */
            exp = 113;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int mact_dtype_to_f32(int dtype, const void *src, size_t count, float *dst)
{
    const uint8_t *s = src;
#define CONV(T)                                                                                    \
    for (size_t i = 0; i < count; i++) {                                                           \
        T v;                                                                                       \
        memcpy(&v, s + i * sizeof(T), sizeof(T));                                                  \
        dst[i] = (float)v;                                                                         \
    }                                                                                              \
    return 0
    switch (dtype) {
    case MACT_F32: if (count) memcpy(dst, src, count * 4); return 0;
    case MACT_F64: CONV(double);
    case MACT_I64: CONV(int64_t);
    case MACT_I32: CONV(int32_t);
    case MACT_I16: CONV(int16_t);
    case MACT_I8: CONV(int8_t);
    case MACT_U8: CONV(uint8_t);
    case MACT_U16: CONV(uint16_t);
    case MACT_U32: CONV(uint32_t);
    case MACT_U64: CONV(uint64_t);
    case MACT_BOOL:
        for (size_t i = 0; i < count; i++) dst[i] = s[i] ? 1.0f : 0.0f;
        return 0;
    case MACT_F16:
        for (size_t i = 0; i < count; i++) dst[i] = half_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        return 0;
    case MACT_BF16:
        for (size_t i = 0; i < count; i++) {
            uint32_t bits = ((uint32_t)s[2 * i] << 16) | ((uint32_t)s[2 * i + 1] << 24);
            memcpy(&dst[i], &bits, 4);
        }
        return 0;
    default: return -1;
    }
#undef CONV
}

int mact_array_to_f32(const mact_array *a, float **out, size_t *count, char *err, size_t errlen)
{
    *out = NULL;
    if (count) *count = 0;
    const char *what = a->name ? a->name : "array";
    size_t isz = elem_size(a->dtype), numel, nbytes;
    if (isz == 0) {
        set_err(err, errlen, "%s: unknown dtype %d", what, a->dtype);
        return -1;
    }
    if (check_dims(what, a->ndim, a->shape, err, errlen) != 0) return -1;
    if (shape_bytes(a->ndim, a->shape, isz, &numel, &nbytes) != 0 || nbytes != a->nbytes ||
        (nbytes && !a->data) || numel > SIZE_MAX / sizeof(float)) {
        set_err(err, errlen, "%s: inconsistent array (nbytes %zu for its shape and dtype)", what,
                a->nbytes);
        return -1;
    }
    float *f = malloc(numel ? numel * sizeof(float) : sizeof(float));
    if (!f) {
        set_err(err, errlen, "%s: out of memory converting %zu elements to float32", what, numel);
        return -1;
    }
    mact_dtype_to_f32(a->dtype, a->data, numel, f);
    *out = f;
    if (count) *count = numel;
    return 0;
}

