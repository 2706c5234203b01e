/* Dicts (insertion order, Python's key equality, an open-addressing index) and the tree accessors of pickle.h. */
#include <math.h>
#include <string.h>
#include "base/dtype.h"
#include "server/pickle_internal.h"

/* ---- dict: insertion-ordered arrays plus an open-addressing index, Python's key equality for the scalar
 * key types (1 == 1.0 == True) ---- */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return mix64(h);
}

static int key_ok(const pk_value *k)
{
    return k->kind == PK_NONE || k->kind == PK_BOOL || k->kind == PK_INT || k->kind == PK_FLOAT ||
           k->kind == PK_STR || k->kind == PK_BYTES;
}

/* numeric keys: an integral value hashes as its int64, so 1, 1.0 and True collide and then compare equal */
static int key_as_int(const pk_value *k, int64_t *i)
{
    if (k->kind == PK_BOOL) { *i = k->u.b; return 1; }
    if (k->kind == PK_INT) { *i = k->u.i; return 1; }
    if (k->kind == PK_FLOAT && k->u.f == floor(k->u.f) && k->u.f >= -9223372036854775808.0 &&
        k->u.f < 9223372036854775808.0) {
        *i = (int64_t)k->u.f;
        return 1;
    }
    return 0;
}

uint64_t pki_key_hash(const pk_value *k)
{
    int64_t i;
    switch (k->kind) {
    case PK_STR: return hash_bytes(k->u.str.s, k->u.str.len, 1);
    case PK_BYTES: return hash_bytes(k->u.bytes.p, k->u.bytes.len, 2);
    case PK_NONE: return 0x9e3779b97f4a7c15ull;
    default:
        if (key_as_int(k, &i)) return mix64((uint64_t)i);
        return hash_bytes(&k->u.f, sizeof k->u.f, 3);
    }
}

static int key_eq(const pk_value *a, const pk_value *b)
{
    if (a == b) return 1;
    if (a->kind == PK_STR || b->kind == PK_STR)
        return a->kind == b->kind && a->u.str.len == b->u.str.len && !memcmp(a->u.str.s, b->u.str.s, a->u.str.len);
    if (a->kind == PK_BYTES || b->kind == PK_BYTES)
        return a->kind == b->kind && a->u.bytes.len == b->u.bytes.len &&
               (!a->u.bytes.len || !memcmp(a->u.bytes.p, b->u.bytes.p, a->u.bytes.len));
    if (a->kind == PK_NONE || b->kind == PK_NONE) return a->kind == b->kind;
    int64_t x, y;
    int ia = key_as_int(a, &x), ib = key_as_int(b, &y);
    if (ia && ib) return x == y;
    if (ia || ib) return 0;  /* an integral and a non-integral number */
    return a->u.f == b->u.f; /* NaN != NaN, as in Python (unless the same object) */
}

/* index of key in d or -1; slot set to the probe position that holds it or the free one */
long pki_dict_find(const pk_value *d, const pk_value *key, uint64_t h, size_t *slot)
{
    size_t mask = d->u.dict.nslot - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        uint32_t e = d->u.dict.slot[s];
        if (!e) { *slot = s; return -1; }
        if (key_eq(d->u.dict.k[e - 1], key)) { *slot = s; return (long)(e - 1); }
    }
}

static int dict_grow(rd *r, pk_value *d)
{
    size_t cap = d->u.dict.cap ? d->u.dict.cap * 2 : 8;
    if (cap > UINT32_MAX / 2) return pki_bad(r, "dict too large");
    pk_value **k = pki_alloc(r->doc, cap * sizeof *k), **v = pki_alloc(r->doc, cap * sizeof *v);
    size_t nslot = cap * 2;
    uint32_t *slot = pki_alloc(r->doc, nslot * sizeof *slot);
    if (!k || !v || !slot) return pki_bad(r, "out of memory");
    memset(slot, 0, nslot * sizeof *slot);
    if (d->u.dict.n) {
        memcpy(k, d->u.dict.k, d->u.dict.n * sizeof *k);
        memcpy(v, d->u.dict.v, d->u.dict.n * sizeof *v);
    }
    d->u.dict.k = k;
    d->u.dict.v = v;
    d->u.dict.slot = slot;
    d->u.dict.nslot = nslot;
    d->u.dict.cap = cap;
    for (size_t i = 0; i < d->u.dict.n; i++) {
        size_t s;
        pki_dict_find(d, k[i], pki_key_hash(k[i]), &s);
        slot[s] = (uint32_t)(i + 1);
    }
    return 0;
}

int pki_dict_set(rd *r, pk_value *d, pk_value *key, pk_value *val)
{
    if (!key_ok(key)) return pki_bad(r, "dict key of type %s is not supported (None, bool, int, float, str, bytes)", pk_type_name(key));
    if (d->u.dict.n == d->u.dict.cap && dict_grow(r, d)) return -1;
    uint64_t h = pki_key_hash(key);
    size_t s;
    long at = pki_dict_find(d, key, h, &s);
    if (at >= 0) {
        /* Python keeps the first key object and its place, and takes the new value; the replaced value's size
         * leaves the tree */
        if (pki_adopt(r, d, val)) return -1;
        d->size -= d->u.dict.v[at]->size;
        d->u.dict.v[at] = val;
        return 0;
    }
    if (pki_adopt(r, d, key) || pki_adopt(r, d, val)) return -1;
    d->u.dict.k[d->u.dict.n] = key;
    d->u.dict.v[d->u.dict.n] = val;
    d->u.dict.slot[s] = (uint32_t)(++d->u.dict.n);
    return 0;
}

/* ---- reading the tree ---- */
const char *pk_type_name(const pk_value *v)
{
    if (!v) return "nothing";
    switch (v->kind) {
    case PK_NONE: return "None";
    case PK_BOOL: return "bool";
    case PK_INT: return "int";
    case PK_FLOAT: return "float";
    case PK_STR: return "str";
    case PK_BYTES: return v->u.bytes.bytearray ? "bytearray" : "bytes";
    case PK_LIST: return "list";
    case PK_TUPLE: return "tuple";
    case PK_DICT: return "dict";
    case PK_NDARRAY: return "numpy.ndarray";
    case PK_NPSCALAR: return "numpy scalar";
    case PK_DTYPE: return "numpy.dtype";
    case PK_OBJECT: return v->u.obj.name;
    case PK_GLOBAL: return "global";
    }
    return "?";
}

const pk_value *pk_dict_get(const pk_value *d, const char *key)
{
    if (!d || d->kind != PK_DICT || !key || !d->u.dict.n) return NULL;
    pk_value k = {.kind = PK_STR};
    k.u.str.s = key;
    k.u.str.len = strlen(key);
    size_t s;
    long at = pki_dict_find(d, &k, pki_key_hash(&k), &s);
    return at >= 0 ? d->u.dict.v[at] : NULL;
}

const pk_value *pk_attr(const pk_value *o, const char *name)
{
    if (o && o->kind == PK_OBJECT) return pk_dict_get(o->u.obj.state, name);
    return pk_dict_get(o, name);
}

int pk_is_class(const pk_value *v, const char *module, const char *name)
{
    if (!v || (v->kind != PK_OBJECT && v->kind != PK_GLOBAL) || !name) return 0;
    return !strcmp(v->u.obj.name, name) && (!module || !strcmp(v->u.obj.module, module));
}

size_t pk_len(const pk_value *v)
{
    if (!v) return 0;
    if (v->kind == PK_LIST || v->kind == PK_TUPLE) return v->u.seq.n;
    if (v->kind == PK_DICT) return v->u.dict.n;
    return 0;
}

const pk_value *pk_item(const pk_value *v, size_t i)
{
    if (!v || (v->kind != PK_LIST && v->kind != PK_TUPLE) || i >= v->u.seq.n) return NULL;
    return v->u.seq.v[i];
}

const pk_value *pk_dict_key(const pk_value *d, size_t i)
{
    return d && d->kind == PK_DICT && i < d->u.dict.n ? d->u.dict.k[i] : NULL;
}

const pk_value *pk_dict_val(const pk_value *d, size_t i)
{
    return d && d->kind == PK_DICT && i < d->u.dict.n ? d->u.dict.v[i] : NULL;
}

const char *pk_str(const pk_value *v, size_t *len)
{
    if (!v || v->kind != PK_STR) return NULL;
    if (len) *len = v->u.str.len;
    return v->u.str.s;
}

/* an element's bytes in host order */
static void elem(const pk_value *a, size_t i, uint8_t out[8])
{
    int n = a->u.arr.dt.itemsize;
    const uint8_t *p = a->u.arr.data + i * (size_t)n;
    int swap = n > 1 && (a->u.arr.dt.order == '<') != pki_host_little();
    for (int k = 0; k < n; k++) out[k] = swap ? p[n - 1 - k] : p[k];
}

double pk_arr_get(const pk_value *a, size_t i)
{
    if (!a || (a->kind != PK_NDARRAY && a->kind != PK_NPSCALAR) || i >= a->u.arr.count || !a->u.arr.data) return 0;
    uint8_t b[8];
    elem(a, i, b);
    int n = a->u.arr.dt.itemsize;
    switch (a->u.arr.dt.kind) {
    case 'f':
        if (n == 8) { double d; memcpy(&d, b, 8); return d; }
        if (n == 4) { float f; memcpy(&f, b, 4); return f; }
        { uint16_t h; memcpy(&h, b, 2); return mact_f16_to_f32(h); }
    case 'b': return b[0] != 0;
    case 'u':
        if (n == 1) return b[0];
        if (n == 2) { uint16_t u; memcpy(&u, b, 2); return u; }
        if (n == 4) { uint32_t u; memcpy(&u, b, 4); return u; }
        { uint64_t u; memcpy(&u, b, 8); return (double)u; }
    default:
        if (n == 1) return (int8_t)b[0];
        if (n == 2) { int16_t s; memcpy(&s, b, 2); return s; }
        if (n == 4) { int32_t s; memcpy(&s, b, 4); return s; }
        { int64_t s; memcpy(&s, b, 8); return (double)s; }
    }
}

int pk_number(const pk_value *v, double *out)
{
    if (!v || !out) return -1;
    switch (v->kind) {
    case PK_BOOL: *out = v->u.b; return 0;
    case PK_INT: *out = (double)v->u.i; return 0;
    case PK_FLOAT: *out = v->u.f; return 0;
    case PK_NPSCALAR: *out = pk_arr_get(v, 0); return 0;
    case PK_NDARRAY:
        if (v->u.arr.count != 1) return -1;
        *out = pk_arr_get(v, 0);
        return 0;
    default: return -1;
    }
}

int pk_int(const pk_value *v, int64_t *out)
{
    if (!v || !out) return -1;
    if (v->kind == PK_BOOL) { *out = v->u.b; return 0; }
    if (v->kind == PK_INT) { *out = v->u.i; return 0; }
    if (v->kind != PK_NPSCALAR || v->u.arr.dt.kind == 'f') return -1;
    uint8_t b[8] = {0};
    elem(v, 0, b);
    int n = v->u.arr.dt.itemsize;
    if (v->u.arr.dt.kind == 'b') { *out = b[0] != 0; return 0; }
    uint64_t u = 0;
    memcpy(&u, b, (size_t)n);  /* host order; little-endian hosts only below for the sign extension */
    if (!pki_host_little()) {
        u = 0;
        for (int k = 0; k < n; k++) u = u << 8 | b[k];
    }
    if (v->u.arr.dt.kind == 'i') {
        if (n < 8 && (u >> (8 * n - 1)) & 1) u |= ~(uint64_t)0 << (8 * n);
        *out = (int64_t)u;
        return 0;
    }
    if (u > (uint64_t)INT64_MAX) return -1;
    *out = (int64_t)u;
    return 0;
}

