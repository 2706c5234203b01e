/* The server's codecs: arrays from msgpack-numpy, json_numpy and vla-eval's __image__ maps, base64, a bounded
 * msgpack pre-scan, a JSON parse that reads Python's NaN / Infinity, and output buffers. Nothing here is
 * ever executed or unpickled: a message is data, decoded into fixed C types. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/dtype.h"
#include "server/internal.h"

#define FAIL(...) do { if (el) snprintf(err, el, __VA_ARGS__); return -1; } while (0)

void srv_arr_free(srv_arr *a)
{
    free(a->owned);
    memset(a, 0, sizeof *a);
}

double srv_arr_get(const srv_arr *a, size_t i)
{
    const uint8_t *p = a->data + i * (size_t)a->isz;
    switch (a->kind) {
    case 'f':
        if (a->isz == 4) { float v; memcpy(&v, p, 4); return v; }
        if (a->isz == 8) { double v; memcpy(&v, p, 8); return v; }
        { uint16_t h; memcpy(&h, p, 2); return mact_f16_to_f32(h); }
    case 'b': return p[0] != 0;
    case 'u':
        if (a->isz == 1) return p[0];
        if (a->isz == 2) { uint16_t v; memcpy(&v, p, 2); return v; }
        if (a->isz == 4) { uint32_t v; memcpy(&v, p, 4); return v; }
        { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    default:
        if (a->isz == 1) return (int8_t)p[0];
        if (a->isz == 2) { int16_t v; memcpy(&v, p, 2); return v; }
        if (a->isz == 4) { int32_t v; memcpy(&v, p, 4); return v; }
        { int64_t v; memcpy(&v, p, 8); return (double)v; }
    }
}

int srv_dtype_parse(const char *s, size_t n, char *kind, int *isz, char *err, size_t el)
{
    static const struct { const char *name; char k; int sz; } named[] = {
        {"float32", 'f', 4}, {"float64", 'f', 8}, {"float16", 'f', 2}, {"uint8", 'u', 1}, {"int8", 'i', 1},
        {"uint16", 'u', 2}, {"int16", 'i', 2}, {"uint32", 'u', 4}, {"int32", 'i', 4}, {"uint64", 'u', 8},
        {"int64", 'i', 8}, {"bool", 'b', 1}};
    char d[16];
    if (n == 0 || n >= sizeof d) FAIL("dtype: expected a numpy descr such as '<f4'");
    memcpy(d, s, n);
    d[n] = 0;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (!strcmp(d, named[i].name)) { *kind = named[i].k; *isz = named[i].sz; return 0; }
    const char *p = d;
    char order = 0;
    if (*p == '<' || *p == '|' || *p == '=' || *p == '>') order = *p++;
    if (!strchr("fiub", p[0]) || !p[0] || !p[1] || p[2]) FAIL("dtype '%s' is not accepted (bool, int, uint or float)", d);
    int sz = p[1] - '0';
    int ok = (p[0] == 'f' && (sz == 2 || sz == 4 || sz == 8)) || (p[0] == 'b' && sz == 1) ||
             ((p[0] == 'i' || p[0] == 'u') && (sz == 1 || sz == 2 || sz == 4 || sz == 8));
    if (!ok) FAIL("dtype '%s' is not accepted", d);
    if (order == '>' && sz > 1) FAIL("dtype '%s': big-endian arrays are not accepted", d);
    *kind = p[0];
    *isz = sz;
    return 0;
}

int srv_arr_check(srv_arr *a, size_t nbytes, char *err, size_t el)
{
    uint64_t cnt = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] < 0) FAIL("negative dimension in shape");
        if (a->shape[i] && cnt > UINT64_MAX / (uint64_t)a->shape[i]) FAIL("shape too large");
        cnt *= (uint64_t)a->shape[i];
    }
    if (cnt > SIZE_MAX / 8 || cnt * (uint64_t)a->isz != nbytes)
        FAIL("array data is %zu bytes; dtype and shape need %llu", nbytes, (unsigned long long)(cnt * (uint64_t)a->isz));
    a->count = (size_t)cnt;
    return 0;
}

/* ---- output buffers ---- */
static int buf_reserve(srv_buf *b, size_t n)
{
    if (b->oom) return -1;
    if (b->len + n + SRV_PRE + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + SRV_PRE + 1) cap *= 2;
    uint8_t *q = realloc(b->buf, cap);
    if (!q) { b->oom = 1; return -1; }
    b->buf = q;
    b->cap = cap;
    return 0;
}

void srv_buf_put(srv_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n)) return;
    memcpy(b->buf + SRV_PRE + b->len, p, n);
    b->len += n;
    b->buf[SRV_PRE + b->len] = 0;
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { srv_buf_put(b, tmp, (size_t)n); return; }
    if (buf_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf((char *)b->buf + SRV_PRE + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

int srv_msgpack_write(void *data, const char *buf, size_t len)
{
    srv_buf *b = data;
    srv_buf_put(b, buf, len);
    return b->oom ? -1 : 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void srv_b64_encode(srv_buf *b, const uint8_t *p, size_t n)
{
    if (buf_reserve(b, (n + 2) / 3 * 4)) return;
    char *o = (char *)b->buf + SRV_PRE + b->len;
    size_t i = 0, k = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        o[k++] = B64[v >> 18]; o[k++] = B64[(v >> 12) & 63]; o[k++] = B64[(v >> 6) & 63]; o[k++] = B64[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        o[k++] = B64[v >> 18]; o[k++] = B64[(v >> 12) & 63];
        o[k++] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        o[k++] = '=';
    }
    b->len += k;
    b->buf[SRV_PRE + b->len] = 0;
}

static const int8_t B64_REV[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

int srv_b64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
    if (n % 4) return -1;
    size_t pad = n >= 1 && s[n - 1] == '=' ? (n >= 2 && s[n - 2] == '=' ? 2 : 1) : 0;
    size_t olen = n / 4 * 3 - pad;
    uint8_t *o = malloc(olen ? olen : 1);
    if (!o) return -1;
    const uint8_t *u = (const uint8_t *)s;
    size_t full = pad ? n - 4 : n, k = 0;
    int bad = 0;
    for (size_t i = 0; i < full; i += 4) {  /* branch-free body: any invalid character sets a sign bit */
        int32_t a = B64_REV[u[i]], b = B64_REV[u[i + 1]], c = B64_REV[u[i + 2]], d = B64_REV[u[i + 3]];
        bad |= a | b | c | d;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        o[k] = (uint8_t)(v >> 16);
        o[k + 1] = (uint8_t)(v >> 8);
        o[k + 2] = (uint8_t)v;
        k += 3;
    }
    if (pad) {
        size_t i = n - 4;
        int32_t a = B64_REV[u[i]], b = B64_REV[u[i + 1]], c = pad == 2 ? 0 : B64_REV[u[i + 2]];
        bad |= a | b | c;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
        o[k++] = (uint8_t)(v >> 16);
        if (pad == 1) o[k++] = (uint8_t)(v >> 8);
    }
    if (bad < 0) { free(o); return -1; }
    *out = o;
    *outlen = olen;
    return 0;
}

/* ---- msgpack ---- */
static int rd_be(const uint8_t *p, size_t n, size_t *i, int k, uint64_t *v)
{
    if (n - *i < (size_t)k) return -1;
    uint64_t x = 0;
    for (int j = 0; j < k; j++) x = x << 8 | p[*i + j];
    *i += (size_t)k;
    *v = x;
    return 0;
}

int srv_mp_scan(const uint8_t *p, size_t n, int max_depth, char *err, size_t el)
{
    uint64_t stack[65];
    if (max_depth > 64) max_depth = 64;
    int top = 0;
    size_t i = 0;
    stack[top++] = 1;
    while (top) {
        if (!stack[top - 1]) { top--; continue; }
        stack[top - 1]--;
        if (i >= n) FAIL("malformed msgpack: truncated at byte %zu", i);
        uint8_t b = p[i++];
        uint64_t len = 0, cnt = 0, v;
        int container = 0, k = 0;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
        } else if ((b & 0xf0) == 0x80) { cnt = 2u * (b & 0x0f); container = 1; }
        else if ((b & 0xf0) == 0x90) { cnt = b & 0x0f; container = 1; }
        else if ((b & 0xe0) == 0xa0) len = b & 0x1f;
        else switch (b) {
            case 0xc4: case 0xd9: k = 1; break;
            case 0xc5: case 0xda: k = 2; break;
            case 0xc6: case 0xdb: k = 4; break;
            case 0xca: len = 4; break;
            case 0xcb: len = 8; break;
            case 0xcc: case 0xd0: len = 1; break;
            case 0xcd: case 0xd1: len = 2; break;
            case 0xce: case 0xd2: len = 4; break;
            case 0xcf: case 0xd3: len = 8; break;
            case 0xdc: case 0xde:
                if (rd_be(p, n, &i, 2, &v)) FAIL("malformed msgpack: truncated header");
                cnt = b == 0xde ? 2 * v : v; container = 1; break;
            case 0xdd: case 0xdf:
                if (rd_be(p, n, &i, 4, &v)) FAIL("malformed msgpack: truncated header");
                cnt = b == 0xdf ? 2 * v : v; container = 1; break;
            case 0xc1: FAIL("malformed msgpack: reserved byte 0xc1 at %zu", i - 1);
            default: FAIL("msgpack extension types are not accepted (byte 0x%02x at %zu)", b, i - 1);
            }
        if (k) {
            if (rd_be(p, n, &i, k, &v)) FAIL("malformed msgpack: truncated header");
            len = v;
        }
        if (len > n - i) FAIL("malformed msgpack: a %llu-byte value with %zu bytes left", (unsigned long long)len, n - i);
        i += (size_t)len;
        if (container && cnt) {
            if (cnt > n - i) FAIL("malformed msgpack: %llu elements claimed with %zu bytes left", (unsigned long long)cnt, n - i);
            if (top > max_depth) FAIL("msgpack nesting deeper than %d", max_depth);
            stack[top++] = cnt;
        }
    }
    if (i != n) FAIL("malformed msgpack: %zu trailing bytes", n - i);
    return 0;
}

int srv_mp_str(const msgpack_object *o, const char **s, size_t *n)
{
    if (!o) return -1;
    if (o->type == MSGPACK_OBJECT_STR) { *s = o->via.str.ptr; *n = o->via.str.size; return 0; }
    if (o->type == MSGPACK_OBJECT_BIN) { *s = o->via.bin.ptr; *n = o->via.bin.size; return 0; }
    return -1;
}

static const msgpack_object *mp_get1(const msgpack_object *map, const char *key, size_t kl)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const char *s;
        size_t n;
        if (!srv_mp_str(&map->via.map.ptr[i].key, &s, &n) && n == kl && (kl == 0 || !memcmp(s, key, kl)))
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

const msgpack_object *srv_mp_get(const msgpack_object *map, const char *key)
{
    const msgpack_object *o = mp_get1(map, key, strlen(key));
    if (o) return o;
    const char *dot = strchr(key, '.');
    if (!dot) return NULL;
    return srv_mp_get(mp_get1(map, key, (size_t)(dot - key)), dot + 1);
}

static int mp_number(const msgpack_object *o, double *v)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *v = (double)o->via.u64; return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *v = (double)o->via.i64; return 0;
    case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: *v = o->via.f64; return 0;
    case MSGPACK_OBJECT_BOOLEAN: *v = o->via.boolean; return 0;
    default: return -1;
    }
}

static int scalar_arr(double v, srv_arr *a, char *err, size_t el)
{
    memset(a, 0, sizeof *a);
    a->owned = malloc(8);
    if (!a->owned) FAIL("out of memory");
    memcpy(a->owned, &v, 8);
    a->data = a->owned;
    a->kind = 'f';
    a->isz = 8;
    a->count = 1;
    return 0;
}

static int list_arr(size_t n, srv_arr *a, char *err, size_t el)
{
    memset(a, 0, sizeof *a);
    a->owned = malloc(n ? n * 8 : 1);
    if (!a->owned) FAIL("out of memory");
    a->data = a->owned;
    a->kind = 'f';
    a->isz = 8;
    a->ndim = 1;
    a->shape[0] = (int64_t)n;
    a->count = n;
    return 0;
}

/* The {data, dtype, shape} triple of an ndarray map (or a raw __image__). */
static int mp_ndarray(const msgpack_object *o, srv_arr *a, char *err, size_t el)
{
    memset(a, 0, sizeof *a);
    const char *ds, *dt;
    size_t dn, tn;
    if (srv_mp_str(srv_mp_get(o, "data"), &ds, &dn)) FAIL("ndarray: 'data' must be bytes");
    if (srv_mp_str(srv_mp_get(o, "dtype"), &dt, &tn)) FAIL("ndarray: 'dtype' must be a string");
    if (srv_dtype_parse(dt, tn, &a->kind, &a->isz, err, el)) return -1;
    const msgpack_object *sh = srv_mp_get(o, "shape");
    if (!sh || sh->type != MSGPACK_OBJECT_ARRAY) FAIL("ndarray: 'shape' must be a list of integers");
    if (sh->via.array.size > 8) FAIL("ndarray: more than 8 dimensions");
    a->ndim = (int)sh->via.array.size;
    for (int i = 0; i < a->ndim; i++) {
        const msgpack_object *d = &sh->via.array.ptr[i];
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER || d->via.u64 > (1ull << 40)) FAIL("ndarray: bad dimension in shape");
        a->shape[i] = (int64_t)d->via.u64;
    }
    if (srv_arr_check(a, dn, err, el)) return -1;
    a->data = (const uint8_t *)ds;
    return 0;
}

int srv_mp_arr(const msgpack_object *o, srv_arr *a, char *err, size_t el)
{
    double v;
    memset(a, 0, sizeof *a);
    if (!o) FAIL("missing");
    if (!mp_number(o, &v)) return scalar_arr(v, a, err, el);
    if (o->type == MSGPACK_OBJECT_MAP) {
        if (srv_mp_get(o, "__ndarray__")) return mp_ndarray(o, a, err, el);
        if (srv_mp_get(o, "__npgeneric__")) {
            const msgpack_object *d = srv_mp_get(o, "data");
            if (!d || mp_number(d, &v)) FAIL("__npgeneric__: 'data' must be a number");
            return scalar_arr(v, a, err, el);
        }
        const msgpack_object *im = srv_mp_get(o, "__image__");
        const char *f;
        size_t fn;
        if (im && !srv_mp_str(srv_mp_get(o, "format"), &f, &fn) && fn == 3 && !memcmp(f, "raw", 3))
            return mp_ndarray(o, a, err, el);
        FAIL("expected an ndarray map (__ndarray__), a number or a list of numbers");
    }
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        if (list_arr(o->via.array.size, a, err, el)) return -1;
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (mp_number(&o->via.array.ptr[i], &v)) { srv_arr_free(a); FAIL("list element %u is not a number", i); }
            memcpy(a->owned + 8 * (size_t)i, &v, 8);
        }
        return 0;
    }
    FAIL("expected an array, got msgpack type %d", (int)o->type);
}

int srv_frame_from_arr(const srv_arr *a, const srv_config *c, mact_image *img, char *err, size_t el)
{
    if (a->ndim != 3 || (a->shape[2] != 3 && a->shape[2] != 1 && a->shape[2] != 4))
        FAIL("a camera frame must be HxWx3 (or x1, x4); got %d dims", a->ndim);
    int64_t h = a->shape[0], w = a->shape[1], ch = a->shape[2];
    if (h < 1 || w < 1 || h > MACT_IMAGE_MAX_SIDE || w > MACT_IMAGE_MAX_SIDE || h * w > c->max_image_pixels)
        FAIL("camera frame %lldx%lld exceeds the limit (%lld pixels, sides <= %d)", (long long)h, (long long)w,
             (long long)c->max_image_pixels, MACT_IMAGE_MAX_SIDE);
    if (a->kind == 'u' && a->isz == 1) {
        if (ch == 3) return mact_image_from_u8(a->data, h, w, img, err, el) ? -1 : 0;
        uint8_t *rgb = malloc((size_t)(h * w * 3));
        if (!rgb) FAIL("out of memory");
        for (int64_t i = 0; i < h * w; i++)
            for (int k = 0; k < 3; k++) rgb[i * 3 + k] = a->data[i * ch + (ch == 1 ? 0 : k)];
        img->data = rgb;
        img->height = h;
        img->width = w;
        return 0;
    }
    if (a->kind == 'f' && a->isz == 4 && ch == 3) {
        /* the bytes sit wherever the message put them: an aligned copy before reading them as floats */
        float *f = malloc(a->count * sizeof(float));
        if (!f) FAIL("out of memory");
        memcpy(f, a->data, a->count * sizeof(float));
        int rc = mact_image_from_f32(f, h, w, img, err, el) ? -1 : 0;
        free(f);
        return rc;
    }
    FAIL("a camera frame must be uint8 (or float32 in [0, 1])");
}

int srv_frame_from_encoded(const uint8_t *p, size_t n, const srv_config *c, mact_image *img, char *err, size_t el)
{
    if (mact_image_load_memory(p, n, img, err, el)) return -1;
    if (img->height * img->width > c->max_image_pixels) {
        int64_t h = img->height, w = img->width;
        mact_image_free(img);
        FAIL("camera frame %lldx%lld exceeds the limit of %lld pixels", (long long)h, (long long)w, (long long)c->max_image_pixels);
    }
    return 0;
}

int srv_mp_frame(const msgpack_object *o, const srv_config *c, mact_image *img, char *err, size_t el)
{
    if (!o) FAIL("missing");
    if (o->type == MSGPACK_OBJECT_MAP && srv_mp_get(o, "__image__")) {
        const char *f, *d;
        size_t fn, dn;
        if (srv_mp_str(srv_mp_get(o, "format"), &f, &fn)) FAIL("__image__: 'format' must be png, jpeg or raw");
        if (srv_mp_str(srv_mp_get(o, "data"), &d, &dn)) FAIL("__image__: 'data' must be bytes");
        if ((fn == 3 && !memcmp(f, "png", 3)) || (fn == 4 && !memcmp(f, "jpeg", 4)) || (fn == 3 && !memcmp(f, "jpg", 3)))
            return srv_frame_from_encoded((const uint8_t *)d, dn, c, img, err, el);
        if (!(fn == 3 && !memcmp(f, "raw", 3))) FAIL("__image__: format must be png, jpeg or raw");
    }
    srv_arr a;
    if (srv_mp_arr(o, &a, err, el)) return -1;
    int rc = srv_frame_from_arr(&a, c, img, err, el);
    srv_arr_free(&a);
    return rc;
}

/* ---- JSON ---- */
/* The bytes srv_json_parse's scan stops at outside strings; every other byte is skipped by one table lookup. */
static const uint8_t JS_MARK[256] = {['"'] = 1, ['['] = 1, ['{'] = 1, [']'] = 1, ['}'] = 1, ['N'] = 1, ['I'] = 1};

/* The first byte at or after i that JS_MARK names (n if none). */
static size_t js_plain_end(const uint8_t *u, size_t n, size_t i)
{
    const uint8_t *e = u + i, *end = u + n;
    while (e != end && !JS_MARK[*e]) e++;
    return (size_t)(e - u);
}

/* From just after a string's opening quote at i: the index of its closing quote (n if it has none). memchr, not a
 * byte loop: a json_numpy body is megabytes of base64 inside strings. *bs caches the next backslash at or after
 * i ((size_t)-1: not looked for yet), so a body of many short strings without one is searched once, not once
 * per string. */
static size_t js_str_end(const char *p, size_t n, size_t i, size_t *bs)
{
    while (i < n) {
        if (*bs == (size_t)-1 || *bs < i) {
            const char *b = memchr(p + i, '\\', n - i);
            *bs = b ? (size_t)(b - p) : n;
        }
        const char *q = memchr(p + i, '"', *bs - i);
        if (q) return (size_t)(q - p);
        if (*bs >= n) return n;
        i = *bs + 2;   /* the escaped byte, whatever it is, is inside the string */
    }
    return n;
}

cJSON *srv_json_parse(const char *p, size_t n, int max_depth, char *err, size_t el)
{
    /* pass 1: the depth outside strings, and how much NaN -> 1e999 (Python's json) grows the text */
    const uint8_t *u = (const uint8_t *)p;
    size_t extra = 0, bs = (size_t)-1;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        i = js_plain_end(u, n, i);
        if (i >= n) break;
        char ch = p[i];
        if (ch == '"') i = js_str_end(p, n, i + 1, &bs);
        else if (ch == '[' || ch == '{') {
            if (++depth > max_depth) { if (el) snprintf(err, el, "JSON nesting deeper than %d", max_depth); return NULL; }
        } else if (ch == ']' || ch == '}') depth--;
        else if (ch == 'N' && n - i >= 3 && !memcmp(p + i, "NaN", 3)) extra += 2;
    }
    /* pass 2: the copy, strings verbatim, NaN / Infinity / -Infinity outside them -> 1e999 (inf) */
    char *q = malloc(n + extra + 1);
    if (!q) { if (el) snprintf(err, el, "out of memory"); return NULL; }
    size_t k = 0;
    bs = (size_t)-1;
    for (size_t i = 0; i < n;) {
        size_t e = js_plain_end(u, n, i);   /* a run of plain bytes, copied as they are */
        memcpy(q + k, p + i, e - i);
        k += e - i;
        if (e >= n) break;
        if (p[e] == '"') {
            size_t c = js_str_end(p, n, e + 1, &bs);
            i = c < n ? c + 1 : n;
            memcpy(q + k, p + e, i - e);
            k += i - e;
        } else if (p[e] == 'N' && n - e >= 3 && !memcmp(p + e, "NaN", 3)) {
            memcpy(q + k, "1e999", 5);
            k += 5;
            i = e + 3;
        } else if (p[e] == 'I' && n - e >= 8 && !memcmp(p + e, "Infinity", 8)) {
            memcpy(q + k, "1e999", 5);
            k += 5;
            i = e + 8;
        } else {
            q[k++] = p[e];
            i = e + 1;
        }
    }
    q[k] = 0;
    cJSON *j = cJSON_ParseWithLength(q, k);
    if (!j && el) {
        const char *e = cJSON_GetErrorPtr();
        long at = e && e >= q && e <= q + k ? (long)(e - q) : -1;
        snprintf(err, el, "malformed JSON (near byte %ld)", at);
    }
    free(q);
    return j;
}

cJSON *srv_js_get(const cJSON *obj, const char *key)
{
    if (!cJSON_IsObject(obj)) return NULL;
    cJSON *o = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (o) return o;
    const char *dot = strchr(key, '.');
    if (!dot) return NULL;
    char head[SRV_MAX_KEY];
    size_t hl = (size_t)(dot - key);
    if (hl >= sizeof head) return NULL;
    memcpy(head, key, hl);
    head[hl] = 0;
    return srv_js_get(cJSON_GetObjectItemCaseSensitive(obj, head), dot + 1);
}

static size_t js_count_numbers(const cJSON *o, int *bad)
{
    if (cJSON_IsNumber(o) || cJSON_IsBool(o)) return 1;
    if (!cJSON_IsArray(o)) { *bad = 1; return 0; }
    size_t n = 0;
    for (const cJSON *c = o->child; c; c = c->next) n += js_count_numbers(c, bad);
    return n;
}

static void js_fill(const cJSON *o, uint8_t *dst, size_t *k)
{
    if (cJSON_IsNumber(o) || cJSON_IsBool(o)) {
        double v = cJSON_IsNumber(o) ? o->valuedouble : cJSON_IsTrue(o);
        memcpy(dst + 8 * (*k)++, &v, 8);
        return;
    }
    for (const cJSON *c = o->child; c; c = c->next) js_fill(c, dst, k);
}

int srv_js_arr(const cJSON *o, srv_arr *a, char *err, size_t el)
{
    memset(a, 0, sizeof *a);
    if (!o) FAIL("missing");
    if (cJSON_IsNumber(o)) return scalar_arr(o->valuedouble, a, err, el);
    if (cJSON_IsObject(o)) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "__numpy__");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
        if (!cJSON_IsString(b)) FAIL("expected a json_numpy array ({\"__numpy__\": base64, \"dtype\", \"shape\"})");
        if (!cJSON_IsString(dt)) FAIL("json_numpy: 'dtype' must be a string");
        if (srv_dtype_parse(dt->valuestring, strlen(dt->valuestring), &a->kind, &a->isz, err, el)) return -1;
        if (!cJSON_IsArray(sh)) FAIL("json_numpy: 'shape' must be a list");
        int nd = cJSON_GetArraySize(sh);
        if (nd > 8) FAIL("json_numpy: more than 8 dimensions");
        a->ndim = nd;
        int i = 0;
        for (const cJSON *d = sh->child; d; d = d->next, i++) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1e12 || d->valuedouble != floor(d->valuedouble))
                FAIL("json_numpy: bad dimension in shape");
            a->shape[i] = (int64_t)d->valuedouble;
        }
        uint8_t *bytes;
        size_t nb;
        if (srv_b64_decode(b->valuestring, strlen(b->valuestring), &bytes, &nb)) FAIL("json_numpy: '__numpy__' is not valid base64");
        a->owned = bytes;
        a->data = bytes;
        if (srv_arr_check(a, nb, err, el)) { srv_arr_free(a); return -1; }
        return 0;
    }
    if (cJSON_IsArray(o)) {
        int bad = 0;
        size_t n = js_count_numbers(o, &bad);
        if (bad) FAIL("list holds something other than numbers");
        if (list_arr(n, a, err, el)) return -1;
        size_t k = 0;
        js_fill(o, a->owned, &k);
        return 0;
    }
    FAIL("expected an array or a number");
}

int srv_js_frame(const cJSON *o, const srv_config *c, mact_image *img, char *err, size_t el)
{
    if (!o) FAIL("missing");
    if (cJSON_IsString(o)) {  /* a base64 JPEG / PNG */
        uint8_t *bytes;
        size_t nb;
        if (srv_b64_decode(o->valuestring, strlen(o->valuestring), &bytes, &nb)) FAIL("frame: not valid base64");
        int rc = srv_frame_from_encoded(bytes, nb, c, img, err, el);
        free(bytes);
        return rc;
    }
    if (!cJSON_IsObject(o)) FAIL("a camera frame must be a json_numpy uint8 array");
    srv_arr a;
    if (srv_js_arr(o, &a, err, el)) return -1;
    int rc = srv_frame_from_arr(&a, c, img, err, el);
    srv_arr_free(&a);
    return rc;
}

/* ---- requests ---- */
void srv_req_free(srv_req *r)
{
    for (int i = 0; i < SRV_MAX_CAMS; i++) mact_image_free(&r->img[i]);
    free(r->task);
    free(r->noise);
    free(r->prev);
    memset(r, 0, sizeof *r);
}

int srv_state_from_arr(srv_req *r, const srv_arr *a, char *err, size_t el)
{
    if (a->ndim > 2 || (a->ndim == 2 && a->shape[0] != 1)) FAIL("state must be a vector");
    if (a->kind == 'b') FAIL("state: dtype bool is not accepted");
    if (a->count > MACT_NORM_MAX_DIM) FAIL("state has %zu values (at most %d)", a->count, MACT_NORM_MAX_DIM);
    for (size_t i = 0; i < a->count; i++) {
        double v = srv_arr_get(a, i);
        if (!isfinite(v)) FAIL("state[%zu] is not finite", i);
        r->state[i] = (float)v;
    }
    r->state_dim = (int)a->count;
    return 0;
}

static int int_of(const srv_arr *a, const char *name, double lo, double hi, double *out, char *err, size_t el)
{
    if (a->count != 1) FAIL("%s must be one integer", name);
    double v = srv_arr_get(a, 0);
    if (!isfinite(v) || v != floor(v) || v < lo || v > hi) FAIL("%s must be an integer in [%.0f, %.0f]", name, lo, hi);
    *out = v;
    return 0;
}

int srv_req_options(srv_req *r, srv_arr *seed, srv_arr *noise, srv_arr *steps, srv_arr *nact, char *err, size_t el)
{
    double v;
    if (seed) {
        if (seed->kind == 'u' && seed->isz == 8 && seed->count == 1) { memcpy(&r->seed, seed->data, 8); }
        else if (seed->kind == 'i' && seed->isz == 8 && seed->count == 1) {
            int64_t s;
            memcpy(&s, seed->data, 8);
            if (s < 0) FAIL("seed must be a non-negative integer");
            r->seed = (uint64_t)s;
        } else {
            if (int_of(seed, "seed", 0, 9007199254740992.0, &v, err, el)) return -1;
            r->seed = (uint64_t)v;
        }
        r->has_seed = 1;
    }
    if (steps) {
        if (int_of(steps, "num_steps", 1, 1000, &v, err, el)) return -1;
        r->num_steps = (int)v;
    }
    if (nact) {
        if (int_of(nact, "n_action_steps", 1, 100000, &v, err, el)) return -1;
        r->n_action_steps = (int)v;
    }
    if (noise) {
        if (noise->count == 0 || noise->count > (1u << 24)) FAIL("noise: bad size");
        r->noise = malloc(noise->count * sizeof(float));
        if (!r->noise) { snprintf(err, el, "out of memory"); return SRV_EINTERNAL; }
        for (size_t i = 0; i < noise->count; i++) {
            double x = srv_arr_get(noise, i);
            if (!isfinite(x)) FAIL("noise[%zu] is not finite", i);
            r->noise[i] = (float)x;
        }
        r->noise_len = noise->count;
    }
    return 0;
}
