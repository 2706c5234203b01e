/* .npy / .npz reader and writer. See npy.h for the contract.
 *
 * Everything is parsed from a complete in-memory image (files are mmapped read-only), so a corrupt
 * file can only ever cause bounds-checked failures, and the same code serves files and buffers. */
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
static int npy_writable(int dtype)
{
    return dtype >= 0 && dtype < MACT_DTYPE_COUNT && k_types[dtype].kind != 0;
}

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

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
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

static int npy_header(const uint8_t *buf, size_t len, const char *what, npy_info *info,
                      char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    if (len < 10) {
        set_err(err, errlen, "%s: truncated: %zu bytes is shorter than the npy preamble", what, len);
        return -1;
    }
    if (memcmp(buf, "\x93NUMPY", 6) != 0) {
        set_err(err, errlen, "%s: not an npy file (bad magic)", what);
        return -1;
    }
    unsigned major = buf[6], minor = buf[7];
    size_t pre, hlen;
    if (major == 1 && minor == 0) {
        pre = 10;
        hlen = rd16(buf + 8);
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) {
            set_err(err, errlen, "%s: truncated: %zu bytes is shorter than the npy preamble", what, len);
            return -1;
        }
        pre = 12;
        hlen = rd32(buf + 8);
    } else {
        set_err(err, errlen, "%s: unsupported npy format version %u.%u", what, major, minor);
        return -1;
    }
    if (hlen > len - pre) {
        set_err(err, errlen, "%s: npy header length %zu runs past the end of the file (%zu bytes)",
                what, hlen, len);
        return -1;
    }
    if (memchr(buf + pre, 0, hlen)) {
        set_err(err, errlen, "%s: npy header contains a NUL byte", what);
        return -1;
    }
    if (parse_header_dict((const char *)buf + pre, hlen, what, info, err, errlen) != 0) return -1;
    size_t isz = elem_size(info->dtype);
    if (shape_bytes(info->ndim, info->shape, isz, NULL, &info->nbytes) != 0) {
        set_err(err, errlen, "%s: shape too large", what);
        return -1;
    }
    info->data_off = pre + hlen;
    size_t have = len - info->data_off;
    if (have != info->nbytes) {
        char sh[256];
        fmt_shape(sh, sizeof sh, info->ndim, info->shape);
        set_err(err, errlen, "%s: data is %zu bytes but shape %s of %s needs %zu%s", what, have, sh,
                dtype_label(info->dtype), info->nbytes, have < info->nbytes ? " (truncated)" : "");
        return -1;
    }
    return 0;
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

/* Takes ownership of raw (a decompressed member) and turns it into out's data without a second
 * full-size buffer: the payload is slid to the front and the allocation shrunk. */
static int npy_adopt(uint8_t *raw, size_t len, const char *what, mact_array *out, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    npy_info info;
    if (npy_header(raw, len, what, &info, err, errlen) != 0) {
        free(raw);
        return -1;
    }
    void *data = NULL;
    if (info.nbytes == 0) {
        free(raw);
    } else if (needs_transpose(&info)) {
        if (!(data = malloc(info.nbytes))) {
            free(raw);
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", what, info.nbytes);
            return -1;
        }
        size_t isz = elem_size(info.dtype);
        fortran_to_c(raw + info.data_off, data, info.ndim, info.shape, isz, info.nbytes / isz);
        free(raw);
    } else {
        memmove(raw, raw + info.data_off, info.nbytes);
        data = realloc(raw, info.nbytes);
        if (!data) data = raw; /* shrinking failed: keep the larger block */
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

/* ---------------------------------------------------------------- npy writing */

static int validate_for_write(const mact_array *a, const char *what, char *err, size_t errlen)
{
    if (!npy_writable(a->dtype)) {
        set_err(err, errlen, "%s: dtype %s cannot be stored in npy%s", what, dtype_label(a->dtype),
                a->dtype == MACT_BF16 ? " (numpy has no bfloat16; convert to float32 first)" : "");
        return -1;
    }
    if (check_dims(what, a->ndim, a->shape, err, errlen) != 0) return -1;
    size_t nbytes;
    if (shape_bytes(a->ndim, a->shape, elem_size(a->dtype), NULL, &nbytes) != 0) {
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

#define NPY_HDR_CAP 512

/* numpy's own layout: dict literal padded with spaces so the data starts on a 64-byte boundary
 * (lets readers mmap aligned arrays), terminated by '\n'. */
static size_t npy_build_header(const mact_array *a, uint8_t *out)
{
    char dict[NPY_HDR_CAP], sh[300];
    size_t isz = elem_size(a->dtype);
    fmt_shape(sh, sizeof sh, a->ndim, a->shape);
    int dl = snprintf(dict, sizeof dict, "{'descr': '%c%c%zu', 'fortran_order': False, 'shape': %s, }",
                      isz == 1 ? '|' : '<', k_types[a->dtype].kind, isz, sh);
    size_t total = 10 + (size_t)dl + 1; /* +1 for the newline */
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)dl);
    memset(out + 10 + dl, ' ', padded - 10 - (size_t)dl - 1);
    out[padded - 1] = '\n';
    return padded;
}

int mact_npy_write(const char *path, const mact_array *arr, char *err, size_t errlen)
{
    if (validate_for_write(arr, path, err, errlen) != 0) return -1;
    uint8_t hdr[NPY_HDR_CAP];
    size_t hl = npy_build_header(arr, hdr);
    FILE *f = fopen(path, "wb");
    if (!f) {
        set_err(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    int ok = fwrite(hdr, 1, hl, f) == hl;
    if (ok && arr->nbytes) ok = fwrite(arr->data, 1, arr->nbytes, f) == arr->nbytes;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        set_err(err, errlen, "%s: write failed: %s", path, strerror(saved));
        remove(path);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- zip reading */

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD    0x06054b50u
#define SIG_EOCD64  0x06064b50u
#define SIG_LOC64   0x07064b50u
#define U32MAX      0xFFFFFFFFu

/* Deflate cannot beat ~1032:1, so a larger claimed expansion is corruption (or a bomb) and we
 * refuse before allocating the claimed size. */
#define MAX_DEFLATE_RATIO 1032u

/* zlib counts in uInt; feed it in pieces so members over 4 GiB work. */
#define ZCHUNK ((size_t)1 << 30)

static int cmp_name_ptr(const void *a, const void *b)
{
    const mact_array *x = *(const mact_array *const *)a, *y = *(const mact_array *const *)b;
    return strcmp(x->name, y->name);
}

static int inflate_member(const uint8_t *src, uint64_t csize, uint8_t *dst, uint64_t usize,
                          const char *what, const char *member, char *err, size_t errlen)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
        set_err(err, errlen, "%s: member '%s': inflateInit failed", what, member);
        return -1;
    }
    uint64_t in_left = csize, out_left = usize;
    zs.next_in = (Bytef *)src;
    zs.next_out = dst;
    /* Once the declared size is produced, a one-byte probe buffer lets inflate reach the end-of-
     * stream marker (success) or reveal that the data is longer than declared (corruption). */
    uint8_t probe;
    int probing = 0, zr;
    for (;;) {
        if (zs.avail_in == 0 && in_left) {
            zs.avail_in = (uInt)(in_left < ZCHUNK ? in_left : ZCHUNK);
            in_left -= zs.avail_in;
        }
        if (zs.avail_out == 0) {
            if (out_left) {
                zs.avail_out = (uInt)(out_left < ZCHUNK ? out_left : ZCHUNK);
                out_left -= zs.avail_out;
            } else if (!probing) {
                probing = 1;
                zs.next_out = &probe;
                zs.avail_out = 1;
            } else {
                inflateEnd(&zs);
                set_err(err, errlen, "%s: member '%s': deflate data longer than the declared %llu bytes",
                        what, member, (unsigned long long)usize);
                return -1;
            }
        }
        zr = inflate(&zs, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) break;
        if (zr == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
            uint64_t produced = probing ? usize : usize - out_left - zs.avail_out;
            inflateEnd(&zs);
            set_err(err, errlen,
                    "%s: member '%s': deflate data truncated (%llu of %llu bytes produced)", what,
                    member, (unsigned long long)produced, (unsigned long long)usize);
            return -1;
        }
        if (zr != Z_OK) {
            const char *msg = zs.msg ? zs.msg : zError(zr);
            set_err(err, errlen, "%s: member '%s': corrupt deflate data: %s", what, member, msg);
            inflateEnd(&zs);
            return -1;
        }
    }
    uint64_t produced = probing ? usize + (zs.avail_out == 0) : usize - out_left - zs.avail_out;
    inflateEnd(&zs);
    if (produced > usize) {
        set_err(err, errlen, "%s: member '%s': deflate data longer than the declared %llu bytes",
                what, member, (unsigned long long)usize);
        return -1;
    }
    if (produced < usize) {
        set_err(err, errlen, "%s: member '%s': deflate data ends after %llu bytes, declared %llu",
                what, member, (unsigned long long)produced, (unsigned long long)usize);
        return -1;
    }
    return 0;
}

int mact_npz_parse(const uint8_t *buf, size_t len, const char *what, mact_npz *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < 22) {
        set_err(err, errlen, "%s: %zu bytes is too small to be a zip archive", what, len);
        return -1;
    }
    /* The end record sits before an optional comment of up to 64 KiB; accept only a signature whose
     * comment length reaches exactly the end of the file, so signature bytes inside data or the
     * comment are not mistaken for it. */
    size_t eocd = SIZE_MAX;
    size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
    for (size_t i = len - 22 + 1; i-- > lo;) {
        if (rd32(buf + i) == SIG_EOCD && i + 22 + rd16(buf + i + 20) == len) {
            eocd = i;
            break;
        }
    }
    if (eocd == SIZE_MAX) {
        set_err(err, errlen, "%s: no zip end-of-central-directory record (not a zip archive, or truncated)",
                what);
        return -1;
    }
    const uint8_t *e = buf + eocd;
    uint64_t n_disk = rd16(e + 8), n_total = rd16(e + 10), cd_size = rd32(e + 12),
             cd_off = rd32(e + 16);
    unsigned disk = rd16(e + 4), cd_disk = rd16(e + 6);
    size_t cd_limit = eocd; /* the central directory must end before the end records */
    if (eocd >= 20 && rd32(buf + eocd - 20) == SIG_LOC64) {
        const uint8_t *l = buf + eocd - 20;
        uint64_t z64 = rd64(l + 8);
        if (rd32(l + 4) != 0 || rd32(l + 16) > 1) {
            set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
            return -1;
        }
        if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || rd32(buf + z64) != SIG_EOCD64) {
            set_err(err, errlen, "%s: zip64 end record missing or out of place (offset %llu)", what,
                    (unsigned long long)z64);
            return -1;
        }
        const uint8_t *z = buf + z64;
        disk = rd32(z + 16);
        cd_disk = rd32(z + 20);
        n_disk = rd64(z + 24);
        n_total = rd64(z + 32);
        cd_size = rd64(z + 40);
        cd_off = rd64(z + 48);
        cd_limit = (size_t)z64;
    } else if (n_total == 0xFFFF || cd_size == U32MAX || cd_off == U32MAX) {
        set_err(err, errlen, "%s: zip end record needs zip64 but the zip64 locator is missing", what);
        return -1;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
        set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
        return -1;
    }
    if (cd_off > cd_limit || cd_size > cd_limit - cd_off) {
        set_err(err, errlen,
                "%s: central directory (offset %llu, %llu bytes) lies outside the archive (%zu bytes)",
                what, (unsigned long long)cd_off, (unsigned long long)cd_size, cd_limit);
        return -1;
    }
    if (n_total > cd_size / 46) {
        set_err(err, errlen, "%s: %llu entries cannot fit in a %llu-byte central directory", what,
                (unsigned long long)n_total, (unsigned long long)cd_size);
        return -1;
    }
    if (n_total == 0) return 0;
    out->arrays = calloc((size_t)n_total, sizeof *out->arrays);
    if (!out->arrays) {
        set_err(err, errlen, "%s: out of memory", what);
        return -1;
    }

    size_t p = (size_t)cd_off, cd_end = (size_t)(cd_off + cd_size);
    char member[320];
    for (uint64_t k = 0; k < n_total; k++) {
        if (cd_end - p < 46 || rd32(buf + p) != SIG_CENTRAL) {
            set_err(err, errlen, "%s: central directory entry %llu is corrupt (offset %zu)", what,
                    (unsigned long long)k, p);
            goto fail;
        }
        const uint8_t *c = buf + p;
        unsigned flags = rd16(c + 8), method = rd16(c + 10);
        uint32_t crc = rd32(c + 16);
        uint64_t csize = rd32(c + 20), usize = rd32(c + 24);
        size_t nlen = rd16(c + 28), xlen = rd16(c + 30), clen = rd16(c + 32);
        uint64_t loff = rd32(c + 42);
        unsigned dstart = rd16(c + 34);
        if (cd_end - p - 46 < nlen + xlen + clen) {
            set_err(err, errlen, "%s: central directory entry %llu runs past the directory", what,
                    (unsigned long long)k);
            goto fail;
        }
        const uint8_t *name = c + 46, *extra = name + nlen;
        /* Name for messages: printable prefix only, so a corrupt name cannot garble the message. */
        size_t ml = nlen < sizeof member - 1 ? nlen : sizeof member - 1;
        for (size_t i = 0; i < ml; i++) member[i] = (name[i] >= 32 && name[i] < 127) ? (char)name[i] : '?';
        member[ml] = 0;

        /* zip64 extra: the 64-bit values appear, in this order, only for the fields that are
         * saturated in the fixed record. */
        for (size_t x = 0; x + 4 <= xlen;) {
            unsigned id = rd16(extra + x), sz = rd16(extra + x + 2);
            if (x + 4 + sz > xlen) {
                set_err(err, errlen, "%s: member '%s': extra field runs past its record", what, member);
                goto fail;
            }
            if (id == 0x0001) {
                const uint8_t *q = extra + x + 4;
                size_t left = sz;
                uint64_t *fields[3] = {&usize, &csize, &loff};
                for (int f = 0; f < 3; f++) {
                    if (*fields[f] != U32MAX) continue;
                    if (left < 8) {
                        set_err(err, errlen, "%s: member '%s': truncated zip64 extra field", what, member);
                        goto fail;
                    }
                    *fields[f] = rd64(q);
                    q += 8;
                    left -= 8;
                }
                if (dstart == 0xFFFF && left >= 4) dstart = (unsigned)rd32(q);
            }
            x += 4 + sz;
        }
        if (dstart != 0) {
            set_err(err, errlen, "%s: member '%s' starts on another disk", what, member);
            goto fail;
        }
        if (flags & 1) {
            set_err(err, errlen, "%s: member '%s' is encrypted", what, member);
            goto fail;
        }
        if (method != 0 && method != 8) {
            set_err(err, errlen, "%s: member '%s' uses unsupported compression method %u", what,
                    member, method);
            goto fail;
        }
        if (nlen < 5 || memcmp(name + nlen - 4, ".npy", 4) != 0 || memchr(name, 0, nlen)) {
            set_err(err, errlen, "%s: member '%s' is not a .npy file", what, member);
            goto fail;
        }

        /* The local header repeats name and method; sizes there may be zero (data descriptor) or
         * saturated (numpy's forced zip64), so the central directory is authoritative for them. */
        if (loff > cd_off || cd_off - loff < 30 || rd32(buf + loff) != SIG_LOCAL) {
            set_err(err, errlen, "%s: member '%s': bad local header offset %llu", what, member,
                    (unsigned long long)loff);
            goto fail;
        }
        const uint8_t *lh = buf + loff;
        size_t lnlen = rd16(lh + 26), lxlen = rd16(lh + 28);
        uint64_t data = loff + 30 + lnlen + lxlen;
        if (data > cd_off || csize > cd_off - data) {
            set_err(err, errlen, "%s: member '%s': data (offset %llu, %llu bytes) overruns the archive",
                    what, member, (unsigned long long)data, (unsigned long long)csize);
            goto fail;
        }
        if (lnlen != nlen || memcmp(lh + 30, name, nlen) != 0 || rd16(lh + 8) != method) {
            set_err(err, errlen, "%s: member '%s': local header disagrees with the central directory",
                    what, member);
            goto fail;
        }
        const uint8_t *src = buf + data;
        mact_array *arr = &out->arrays[out->count];
        uint8_t *raw = NULL;
        if (method == 0) {
            if (csize != usize) {
                set_err(err, errlen, "%s: member '%s': stored sizes differ (%llu vs %llu)", what,
                        member, (unsigned long long)csize, (unsigned long long)usize);
                goto fail;
            }
        } else {
            if (usize / MAX_DEFLATE_RATIO > csize + 1) {
                set_err(err, errlen,
                        "%s: member '%s': declares %llu bytes from %llu compressed (impossible ratio)",
                        what, member, (unsigned long long)usize, (unsigned long long)csize);
                goto fail;
            }
            if (usize > SIZE_MAX - 1 || !(raw = malloc(usize ? (size_t)usize : 1))) {
                set_err(err, errlen, "%s: member '%s': out of memory for %llu bytes", what, member,
                        (unsigned long long)usize);
                goto fail;
            }
            if (inflate_member(src, csize, raw, usize, what, member, err, errlen) != 0) {
                free(raw);
                goto fail;
            }
        }
        const uint8_t *plain = raw ? raw : src;
        uint32_t got = (uint32_t)crc32_z(0L, plain, (z_size_t)usize);
        if (got != crc) {
            free(raw);
            set_err(err, errlen, "%s: member '%s': CRC mismatch (stored %08x, computed %08x)", what,
                    member, (unsigned)crc, (unsigned)got);
            goto fail;
        }
        char label[1024];
        snprintf(label, sizeof label, "%s: member '%s'", what, member);
        int rc = raw ? npy_adopt(raw, (size_t)usize, label, arr, err, errlen)
                     : mact_npy_parse(src, (size_t)usize, label, arr, err, errlen);
        if (rc != 0) goto fail;
        out->count++;
        if (!(arr->name = malloc(nlen - 3))) {
            set_err(err, errlen, "%s: out of memory", what);
            goto fail;
        }
        memcpy(arr->name, name, nlen - 4);
        arr->name[nlen - 4] = 0;
        p += 46 + nlen + xlen + clen;
    }
    if (p != cd_end) {
        set_err(err, errlen, "%s: central directory has %zu trailing bytes after %llu entries", what,
                cd_end - p, (unsigned long long)n_total);
        goto fail;
    }
    if (out->count > 1) {
        mact_array **sorted = malloc(out->count * sizeof *sorted);
        if (!sorted) {
            set_err(err, errlen, "%s: out of memory", what);
            goto fail;
        }
        for (size_t i = 0; i < out->count; i++) sorted[i] = &out->arrays[i];
        qsort(sorted, out->count, sizeof *sorted, cmp_name_ptr);
        for (size_t i = 1; i < out->count; i++)
            if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
                set_err(err, errlen, "%s: duplicate member '%s.npy'", what, sorted[i]->name);
                free(sorted);
                goto fail;
            }
        free(sorted);
    }
    return 0;
fail:
    mact_npz_free(out);
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

/* ---------------------------------------------------------------- zip writing */

typedef struct {
    FILE *f;
    uint64_t pos; /* bytes written so far == current offset (we never seek except to patch) */
    int failed, saved_errno;
} zout;

static void zput(zout *z, const void *p, size_t n)
{
    if (z->failed || n == 0) return;
    if (fwrite(p, 1, n, z->f) != n) {
        z->failed = 1;
        z->saved_errno = errno;
        return;
    }
    z->pos += n;
}

static void wr16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct {
    char *mname;
    size_t mlen;
    uint64_t off, csize, usize;
    uint32_t crc;
    unsigned method, gpflags;
    int z64;
} zentry;

/* Fixed DOS timestamp (1980-01-01 00:00) so identical arrays give identical files. */
#define DOS_TIME 0
#define DOS_DATE 0x21

/* Feeds header then payload through deflate (or straight to the file), computing the CRC. */
static int zwrite_payload(zout *z, const uint8_t *hdr, size_t hl, const uint8_t *data, size_t dn,
                          int deflate_it, zentry *ze, const char *path, char *err, size_t errlen)
{
    uLong crc = crc32_z(0L, hdr, hl);
    if (dn) {
        for (size_t o = 0; o < dn; o += ZCHUNK) {
            size_t n = dn - o < ZCHUNK ? dn - o : ZCHUNK;
            crc = crc32_z(crc, data + o, n);
        }
    }
    ze->crc = (uint32_t)crc;
    uint64_t start = z->pos;
    if (!deflate_it) {
        zput(z, hdr, hl);
        zput(z, data, dn);
        ze->csize = z->pos - start;
        return 0;
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        set_err(err, errlen, "%s: member '%s': deflateInit failed", path, ze->mname);
        return -1;
    }
    enum { OUTCAP = 1 << 18 };
    uint8_t *obuf = malloc(OUTCAP);
    if (!obuf) {
        deflateEnd(&zs);
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    const uint8_t *pieces[2] = {hdr, data};
    size_t lens[2] = {hl, dn};
    int zr = Z_OK;
    for (int piece = 0; piece < 2; piece++) {
        size_t off = 0;
        do {
            size_t n = lens[piece] - off < ZCHUNK ? lens[piece] - off : ZCHUNK;
            zs.next_in = (Bytef *)(pieces[piece] ? pieces[piece] + off : hdr);
            zs.avail_in = (uInt)n;
            off += n;
            int flush = (piece == 1 && off == lens[piece]) ? Z_FINISH : Z_NO_FLUSH;
            do {
                zs.next_out = obuf;
                zs.avail_out = OUTCAP;
                zr = deflate(&zs, flush);
                if (zr == Z_STREAM_ERROR) break;
                zput(z, obuf, OUTCAP - zs.avail_out);
            } while (zs.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
        } while (off < lens[piece] && zr != Z_STREAM_ERROR);
    }
    free(obuf);
    deflateEnd(&zs);
    if (zr != Z_STREAM_END) {
        set_err(err, errlen, "%s: member '%s': deflate failed (%d)", path, ze->mname, zr);
        return -1;
    }
    ze->csize = z->pos - start;
    return 0;
}

int mact_npz_write(const char *path, const mact_array *arrays, size_t n, int flags, char *err,
                   size_t errlen)
{
    const int deflate_it = (flags & 0xff) != 0, force64 = (flags & MACT_NPZ_ZIP64) != 0;
    if (n && !arrays) {
        set_err(err, errlen, "%s: arrays is NULL", path);
        return -1;
    }
    char what[512];
    for (size_t i = 0; i < n; i++) {
        const char *nm = arrays[i].name;
        if (!nm || !*nm) {
            set_err(err, errlen, "%s: array %zu has no name", path, i);
            return -1;
        }
        if (strlen(nm) > 65535 - 4) {
            set_err(err, errlen, "%s: array %zu: name too long for zip", path, i);
            return -1;
        }
        snprintf(what, sizeof what, "%.250s: array '%.250s'", path, nm);
        if (validate_for_write(&arrays[i], what, err, errlen) != 0) return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(arrays[j].name, nm) == 0) {
                set_err(err, errlen, "%s: duplicate array name '%s'", path, nm);
                return -1;
            }
    }
    zentry *ents = calloc(n ? n : 1, sizeof *ents);
    if (!ents) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    zout z = {0};
    int rc = -1;
    if (!(z.f = fopen(path, "wb"))) {
        set_err(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        free(ents);
        return -1;
    }
    uint8_t rec[128];
    for (size_t i = 0; i < n; i++) {
        const mact_array *a = &arrays[i];
        zentry *ze = &ents[i];
        uint8_t hdr[NPY_HDR_CAP];
        size_t hl = npy_build_header(a, hdr);
        ze->mlen = strlen(a->name) + 4;
        if (!(ze->mname = malloc(ze->mlen + 1))) {
            set_err(err, errlen, "%s: out of memory", path);
            goto done;
        }
        snprintf(ze->mname, ze->mlen + 1, "%s.npy", a->name);
        ze->usize = hl + a->nbytes;
        ze->method = deflate_it ? 8 : 0;
        ze->off = z.pos;
        for (size_t k = 0; k < ze->mlen; k++)
            if ((unsigned char)ze->mname[k] >= 0x80) ze->gpflags |= 0x800; /* UTF-8 name */
        /* The local header is written before the compressed size is known, so decide zip64 from
         * the worst case deflate can produce (~0.03% growth plus block overhead). */
        uint64_t worst = ze->usize + (ze->usize >> 12) + (ze->usize >> 14) + 1024;
        ze->z64 = force64 || worst >= U32MAX;

        wr32(rec, SIG_LOCAL);
        wr16(rec + 4, ze->z64 ? 45 : 20);
        wr16(rec + 6, ze->gpflags);
        wr16(rec + 8, ze->method);
        wr16(rec + 10, DOS_TIME);
        wr16(rec + 12, DOS_DATE);
        wr32(rec + 14, 0);                                   /* CRC, patched below */
        wr32(rec + 18, ze->z64 ? U32MAX : 0);                /* csize, patched below */
        wr32(rec + 22, ze->z64 ? U32MAX : (uint32_t)ze->usize);
        wr16(rec + 26, (unsigned)ze->mlen);
        wr16(rec + 28, ze->z64 ? 20 : 0);
        zput(&z, rec, 30);
        zput(&z, ze->mname, ze->mlen);
        if (ze->z64) {
            wr16(rec, 1);
            wr16(rec + 2, 16);
            wr64(rec + 4, ze->usize);
            wr64(rec + 12, 0);                               /* csize, patched below */
            zput(&z, rec, 20);
        }
        if (z.failed) break;
        if (zwrite_payload(&z, hdr, hl, a->data, a->nbytes, deflate_it, ze, path, err, errlen) != 0)
            goto done;
        if (z.failed) break;
        /* Patch CRC and compressed size now that they are known. */
        uint64_t resume = z.pos;
        wr32(rec, ze->crc);
        if (fseeko(z.f, (off_t)(ze->off + 14), SEEK_SET) != 0 || fwrite(rec, 1, 4, z.f) != 4) goto ioerr;
        if (ze->z64) {
            wr64(rec, ze->csize);
            if (fseeko(z.f, (off_t)(ze->off + 30 + ze->mlen + 12), SEEK_SET) != 0 ||
                fwrite(rec, 1, 8, z.f) != 8)
                goto ioerr;
        } else {
            wr32(rec, (uint32_t)ze->csize);
            if (fseeko(z.f, (off_t)(ze->off + 18), SEEK_SET) != 0 || fwrite(rec, 1, 4, z.f) != 4)
                goto ioerr;
        }
        if (fseeko(z.f, (off_t)resume, SEEK_SET) != 0) goto ioerr;
    }
    uint64_t cd_off = z.pos;
    for (size_t i = 0; i < n && !z.failed; i++) {
        zentry *ze = &ents[i];
        int big_u = force64 || ze->usize >= U32MAX, big_c = force64 || ze->csize >= U32MAX,
            big_o = force64 || ze->off >= U32MAX;
        unsigned xlen = (big_u || big_c || big_o) ? 4 + 8 * (unsigned)(big_u + big_c + big_o) : 0;
        unsigned need = (xlen || ze->z64) ? 45 : 20;
        wr32(rec, SIG_CENTRAL);
        wr16(rec + 4, (3u << 8) | need); /* made by Unix, so the mode bits below are honoured */
        wr16(rec + 6, need);
        wr16(rec + 8, ze->gpflags);
        wr16(rec + 10, ze->method);
        wr16(rec + 12, DOS_TIME);
        wr16(rec + 14, DOS_DATE);
        wr32(rec + 16, ze->crc);
        wr32(rec + 20, big_c ? U32MAX : (uint32_t)ze->csize);
        wr32(rec + 24, big_u ? U32MAX : (uint32_t)ze->usize);
        wr16(rec + 28, (unsigned)ze->mlen);
        wr16(rec + 30, xlen);
        wr16(rec + 32, 0);
        wr16(rec + 34, 0);
        wr16(rec + 36, 0);
        wr32(rec + 38, 0100644u << 16);
        wr32(rec + 42, big_o ? U32MAX : (uint32_t)ze->off);
        zput(&z, rec, 46);
        zput(&z, ze->mname, ze->mlen);
        if (xlen) {
            uint8_t x[28];
            size_t q = 4;
            wr16(x, 1);
            wr16(x + 2, xlen - 4);
            if (big_u) { wr64(x + q, ze->usize); q += 8; }
            if (big_c) { wr64(x + q, ze->csize); q += 8; }
            if (big_o) { wr64(x + q, ze->off); q += 8; }
            zput(&z, x, q);
        }
    }
    uint64_t cd_size = z.pos - cd_off;
    int z64end = force64 || n >= 0xFFFF || cd_off >= U32MAX || cd_size >= U32MAX;
    if (z64end) {
        uint64_t rec64 = z.pos;
        wr32(rec, SIG_EOCD64);
        wr64(rec + 4, 44);
        wr16(rec + 12, (3u << 8) | 45);
        wr16(rec + 14, 45);
        wr32(rec + 16, 0);
        wr32(rec + 20, 0);
        wr64(rec + 24, n);
        wr64(rec + 32, n);
        wr64(rec + 40, cd_size);
        wr64(rec + 48, cd_off);
        zput(&z, rec, 56);
        wr32(rec, SIG_LOC64);
        wr32(rec + 4, 0);
        wr64(rec + 8, rec64);
        wr32(rec + 16, 1);
        zput(&z, rec, 20);
    }
    wr32(rec, SIG_EOCD);
    wr16(rec + 4, 0);
    wr16(rec + 6, 0);
    wr16(rec + 8, z64end ? 0xFFFF : (unsigned)n);
    wr16(rec + 10, z64end ? 0xFFFF : (unsigned)n);
    wr32(rec + 12, z64end ? U32MAX : (uint32_t)cd_size);
    wr32(rec + 16, z64end ? U32MAX : (uint32_t)cd_off);
    wr16(rec + 20, 0);
    zput(&z, rec, 22);
    if (z.failed) {
        set_err(err, errlen, "%s: write failed: %s", path, strerror(z.saved_errno));
        goto done;
    }
    rc = 0;
    goto done;
ioerr:
    set_err(err, errlen, "%s: write failed: %s", path, strerror(errno));
done:
    if (fclose(z.f) != 0 && rc == 0) {
        set_err(err, errlen, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        if (z.failed) set_err(err, errlen, "%s: write failed: %s", path, strerror(z.saved_errno));
        remove(path);
    }
    for (size_t i = 0; i < n; i++) free(ents[i].mname);
    free(ents);
    return rc;
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
