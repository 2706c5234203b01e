/* .npy reader and the array helpers (npz archives: npz.c). See npy.h for the contract; writing is
 * src/export/npz_write.c.
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
#include "mact.h"
#include "base/err.h"
#include "io/npy_internal.h"
#include "base/file.h"

/* ---------------------------------------------------------------- dtypes */

/* Kept local (rather than calling mact_dtype_size) so npy.c links on its own, e.g. in tools that
 * never touch checkpoints. Index = MACT_* value. */
static const struct { size_t size; char kind; } k_types[MACT_DTYPE_COUNT] = {
    [MACT_F32] = {4, 'f'}, [MACT_BF16] = {2, 0},  [MACT_F16] = {2, 'f'}, [MACT_F64] = {8, 'f'},
    [MACT_I64] = {8, 'i'}, [MACT_I32] = {4, 'i'}, [MACT_I16] = {2, 'i'}, [MACT_I8] = {1, 'i'},
    [MACT_U8] = {1, 'u'},  [MACT_BOOL] = {1, 'b'}, [MACT_U16] = {2, 'u'}, [MACT_U32] = {4, 'u'},
    [MACT_U64] = {8, 'u'},
};

size_t mact_npyi_elem_size(int dtype)
{
    return (dtype >= 0 && dtype < MACT_DTYPE_COUNT) ? k_types[dtype].size : 0;
}

/* kind 0 marks dtypes numpy has no descr for (bf16). */
static const char *dtype_label(int dtype)
{
    static const char *const names[MACT_DTYPE_COUNT] = {
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
    size_t isz = mact_npyi_elem_size(dtype);
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
    size_t isz = mact_npyi_elem_size(a->dtype), nbytes;
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


int mact_npyi_map_file(const char *path, mapped *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    /* checked to be a regular file before the open: a FIFO or a device never blocks the reader */
    int fd = mact_file_open_regular(path, err, errlen);
    if (fd < 0) return -1;
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

void mact_npyi_unmap_file(mapped *m)
{
    if (m->map) munmap(m->map, m->len);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- npy header */


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
int mact_npyi_npy_preamble(const uint8_t *buf, size_t total, const char *what, size_t *pre, size_t *hlen,
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
int mact_npyi_npy_dict(const uint8_t *h, size_t pre, size_t hlen, size_t total, const char *what,
                    npy_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    if (memchr(h, 0, hlen)) {
        set_err(err, errlen, "%s: npy header contains a NUL byte", what);
        return -1;
    }
    if (parse_header_dict((const char *)h, hlen, what, info, err, errlen) != 0) return -1;
    size_t isz = mact_npyi_elem_size(info->dtype);
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
    if (mact_npyi_npy_preamble(buf, len, what, &pre, &hlen, err, errlen) != 0) return -1;
    return mact_npyi_npy_dict(buf + pre, pre, hlen, len, what, info, err, errlen);
}

/* Copies Fortran-ordered elements into C order: walk the C index and gather from the F offset. */
void mact_npyi_fortran_to_c(const uint8_t *src, uint8_t *dst, int ndim, const int64_t *shape,
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

void mact_npyi_fill_array(mact_array *out, const npy_info *info)
{
    out->dtype = info->dtype;
    out->ndim = info->ndim;
    for (int i = 0; i < info->ndim; i++) out->shape[i] = info->shape[i];
    out->nbytes = info->nbytes;
}

int mact_npyi_needs_transpose(const npy_info *info)
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
        size_t isz = mact_npyi_elem_size(info.dtype);
        if (mact_npyi_needs_transpose(&info))
            mact_npyi_fortran_to_c(buf + info.data_off, data, info.ndim, info.shape, isz, info.nbytes / isz);
        else
            memcpy(data, buf + info.data_off, info.nbytes);
    }
    mact_npyi_fill_array(out, &info);
    out->data = data;
    return 0;
}

int mact_npy_read(const char *path, mact_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mapped m;
    if (mact_npyi_map_file(path, &m, err, errlen) != 0) return -1;
    int rc = mact_npy_parse(m.buf, m.len, path, out, err, errlen);
    mact_npyi_unmap_file(&m);
    return rc;
}

/* ---------------------------------------------------------------- conversion */

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
        for (size_t i = 0; i < count; i++) dst[i] = mact_f16_to_f32((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
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
    size_t isz = mact_npyi_elem_size(a->dtype), numel, nbytes;
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

