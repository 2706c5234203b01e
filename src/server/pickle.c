/* The data-only pickle reader (pickle.h): the opcode loop, the allow-list, the stack, the memo and the arena. The
 * numpy constructors are in pickle_numpy.c, dicts and the accessors in pickle_tree.c, LeRobot PR #3048's format in
 * pickle_safe.c, the reply writers in pickle_write.c.
 *
 * The reader is one loop over the opcodes with an explicit value stack, a mark stack and a memo, so no input can
 * make it recurse. Values live in one arena freed by pk_free. Three rules keep the tree a bounded tree:
 *   - a container, object, ndarray or dtype is "sealed" once it becomes part of another value, and a sealed value
 *     is never mutated again (APPEND / SETITEM / BUILD refuse it). Python's pickler only fills a container right
 *     after creating it, so real pickles never hit this, and it rules out cycles: a cycle needs a value added to
 *     one that is already inside it;
 *   - depth and size (values counted as a tree, a shared reference each time it appears) are kept per value and
 *     checked whenever a child is added, so a memo-based "billion laughs" is refused, not expanded;
 *   - every push counts against max_items, which bounds the stack, the arena and the work. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/json.h"
#include "server/pickle_internal.h"

void pk_limits_default(pk_limits *l)
{
    l->max_input = (size_t)64 << 20;
    l->max_depth = 32;
    l->max_items = 262144;
    l->max_memo = 65536;
    l->max_array_bytes = (size_t)64 << 20;
    l->max_str_bytes = (size_t)16 << 20;
}

/* ---- arena ---- */

#define ARENA_CHUNK ((size_t)64 << 10)

void *pki_alloc(pk_doc *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    pk_chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        /* a big block goes behind the current chunk so the current one keeps serving small requests */
        if (n > ARENA_CHUNK && d->chunks) {
            c->next = d->chunks->next;
            d->chunks->next = c;
        } else {
            c->next = d->chunks;
            d->chunks = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

void pk_free(pk_doc *d)
{
    if (!d) return;
    for (pk_chunk *c = d->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(d);
}

const pk_value *pk_root(const pk_doc *d) { return d ? d->root : NULL; }
pk_format pk_doc_format(const pk_doc *d) { return d ? d->format : 0; }
int pk_doc_protocol(const pk_doc *d) { return d ? d->protocol : 0; }

/* ---- value flags ---- */

/* what an allowed global is for */
enum {
    G_RECONSTRUCT = 1, G_SCALAR, G_FROMBUFFER, G_DTYPE, G_NDARRAY, G_NEWOBJ, G_RECONSTRUCTOR, G_OBJECT,
    G_CODECS_ENCODE, G_BYTES, G_ORDEREDDICT, G_DATACLASS, G_ENUM
};

/* The allow-list (docs/pickle.md). numpy 1.x names its modules numpy.core.*, numpy 2.x numpy._core.*; protocols
 * 0-2 write Python 2 spellings (copy_reg, __builtin__); LeRobot's helpers moved from lerobot.scripts.server to
 * lerobot.async_inference in 2025. */
static const struct { const char *module, *name; int role; } allowed[] = {
    {"numpy.core.multiarray", "_reconstruct", G_RECONSTRUCT},
    {"numpy._core.multiarray", "_reconstruct", G_RECONSTRUCT},
    {"numpy.core.multiarray", "scalar", G_SCALAR},
    {"numpy._core.multiarray", "scalar", G_SCALAR},
    {"numpy.core.numeric", "_frombuffer", G_FROMBUFFER},
    {"numpy._core.numeric", "_frombuffer", G_FROMBUFFER},
    {"numpy", "dtype", G_DTYPE},
    {"numpy", "ndarray", G_NDARRAY},
    {"copyreg", "__newobj__", G_NEWOBJ},
    {"copy_reg", "__newobj__", G_NEWOBJ},
    {"copyreg", "_reconstructor", G_RECONSTRUCTOR},
    {"copy_reg", "_reconstructor", G_RECONSTRUCTOR},
    {"builtins", "object", G_OBJECT},
    {"__builtin__", "object", G_OBJECT},
    {"_codecs", "encode", G_CODECS_ENCODE},
    {"builtins", "bytes", G_BYTES},      /* protocols 0-2 write b'' as bytes() */
    {"__builtin__", "bytes", G_BYTES},
    {"collections", "OrderedDict", G_ORDEREDDICT},
    {"lerobot.async_inference.helpers", "TimedObservation", G_DATACLASS},
    {"lerobot.async_inference.helpers", "TimedAction", G_DATACLASS},
    {"lerobot.async_inference.helpers", "RemotePolicyConfig", G_DATACLASS},
    {"lerobot.scripts.server.helpers", "TimedObservation", G_DATACLASS},
    {"lerobot.scripts.server.helpers", "TimedAction", G_DATACLASS},
    {"lerobot.scripts.server.helpers", "RemotePolicyConfig", G_DATACLASS},
    {"lerobot.configs.types", "PolicyFeature", G_DATACLASS},
    {"lerobot.configs.types", "FeatureType", G_ENUM},
};
const char *const pki_feature_types[PKI_N_FEATURE_TYPES] = {"STATE", "VISUAL", "ENV", "ACTION", "REWARD", "LANGUAGE"};

/* ---- opcodes ---- */
static const char *opname(int op)
{
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

/* ---- reader state ---- */

int pki_bad(rd *r, const char *fmt, ...)
{
    if (!r->el) return -1;
    const char *n = opname(r->op);
    int k = r->safe ? snprintf(r->err, r->el, "PR #3048 message: ")
            : n     ? snprintf(r->err, r->el, "pickle byte %zu (%s): ", r->op_at, n)
                    : snprintf(r->err, r->el, "pickle byte %zu: ", r->op_at);
    if (k < 0 || (size_t)k >= r->el) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + k, r->el - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

/* a name from the input, printable for a message: at most 80 characters, others as '?' */
const char *pki_printable(const char *s, size_t n, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) {
        if (k >= 80) { memcpy(buf + k, "...", 3); k += 3; break; }
        unsigned char ch = (unsigned char)s[i];
        buf[k++] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    buf[k] = 0;
    return buf;
}

/* ---- values and the stack ---- */
pk_value *pki_new(rd *r, pk_kind kind)
{
    pk_value *v = pki_alloc(r->doc, sizeof *v);
    if (!v) { pki_bad(r, "out of memory"); return NULL; }
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->size = 1;
    return v;
}

int pki_push(rd *r, pk_value *v)
{
    if (!v) return -1;
    if (++r->pushes > r->lim.max_items) return pki_bad(r, "more than max_items (%zu) values", r->lim.max_items);
    if (r->sp == r->scap) {
        size_t cap = r->scap ? r->scap * 2 : 64;
        pk_value **s = realloc(r->stack, cap * sizeof *s);
        if (!s) return pki_bad(r, "out of memory");
        r->stack = s;
        r->scap = cap;
    }
    r->stack[r->sp++] = v;
    return 0;
}

static size_t fence(const rd *r) { return r->nmark ? r->marks[r->nmark - 1] : 0; }

static pk_value *pop(rd *r)
{
    if (r->sp <= fence(r)) { pki_bad(r, "stack underflow"); return NULL; }
    return r->stack[--r->sp];
}

static pk_value *top(rd *r)
{
    if (r->sp <= fence(r)) { pki_bad(r, "stack underflow"); return NULL; }
    return r->stack[r->sp - 1];
}

/* pops the last mark: the items above it are stack[*from .. r->sp) */
static int pop_mark(rd *r, size_t *from)
{
    if (!r->nmark) return pki_bad(r, "no MARK on the stack");
    *from = r->marks[--r->nmark];
    return 0;
}

static int is_compound(const pk_value *v)
{
    return v->kind == PK_LIST || v->kind == PK_TUPLE || v->kind == PK_DICT || v->kind == PK_OBJECT ||
           v->kind == PK_NDARRAY || v->kind == PK_DTYPE;
}

/* v may still be changed (it is not part of another value) */
static int mutable_check(rd *r, pk_value *v, const char *what)
{
    if (v->flags & F_SEALED)
        return pki_bad(r, "%s on a %s that is already part of another value (recursive or re-opened values are refused)",
                   what, pk_type_name(v));
    return 0;
}

/* child becomes part of parent: parent's depth and tree size grow, child is sealed */
int pki_adopt(rd *r, pk_value *parent, pk_value *child)
{
    if (child == parent) return pki_bad(r, "a %s containing itself is refused", pk_type_name(parent));
    if (child->depth + 1 > r->lim.max_depth)
        return pki_bad(r, "nesting deeper than max_depth (%d)", r->lim.max_depth);
    if (child->depth + 1 > parent->depth) parent->depth = child->depth + 1;
    if (child->size > r->lim.max_items || parent->size > r->lim.max_items - child->size)
        return pki_bad(r, "value tree larger than max_items (%zu values, shared references counted each time)",
                   r->lim.max_items);
    parent->size += child->size;
    if (is_compound(child)) child->flags |= F_SEALED;
    return 0;
}

/* room for one more element in a seq (list/tuple) */
int pki_seq_reserve(rd *r, pk_value *v, size_t extra)
{
    size_t need = v->u.seq.n + extra;
    if (need <= v->u.seq.cap) return 0;
    size_t cap = v->u.seq.cap ? v->u.seq.cap : 4;
    while (cap < need) cap *= 2;
    pk_value **a = pki_alloc(r->doc, cap * sizeof *a);
    if (!a) return pki_bad(r, "out of memory");
    if (v->u.seq.n) memcpy(a, v->u.seq.v, v->u.seq.n * sizeof *a);
    v->u.seq.v = a;
    v->u.seq.cap = cap;
    return 0;
}

/* ---- reading bytes ---- */
static int need(rd *r, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return pki_bad(r, "truncated: needs %zu more bytes, %zu left", n, (size_t)(r->end - r->p));
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* a text line (protocol 0 style argument) without its '\n' */
static int read_line(rd *r, const char **s, size_t *n, size_t maxlen)
{
    const uint8_t *nl = memchr(r->p, '\n', (size_t)(r->end - r->p) < maxlen + 1 ? (size_t)(r->end - r->p) : maxlen + 1);
    if (!nl && (size_t)(r->end - r->p) <= maxlen) return pki_bad(r, "truncated: no end of line");
    if (!nl) return pki_bad(r, "line longer than %zu bytes", maxlen);
    *s = (const char *)r->p;
    *n = (size_t)(nl - r->p);
    r->p = nl + 1;
    return 0;
}

static int parse_decimal(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == n) return -1;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int push_int(rd *r, int64_t i)
{
    pk_value *v = pki_new(r, PK_INT);
    if (!v) return -1;
    v->u.i = i;
    return pki_push(r, v);
}

/* LONG1 / LONG4: little-endian two's complement of n bytes, kept when it fits in 64 bits */
static int push_long(rd *r, size_t n)
{
    if (need(r, n)) return -1;
    const uint8_t *b = r->p;
    r->p += n;
    if (n == 0) return push_int(r, 0);
    int neg = b[n - 1] & 0x80;
    if (n > 8) {
        for (size_t i = 8; i < n; i++)
            if (b[i] != (neg ? 0xff : 0x00)) return pki_bad(r, "integer of %zu bytes does not fit in 64 bits", n);
        if (((b[7] & 0x80) != 0) != (neg != 0)) return pki_bad(r, "integer of %zu bytes does not fit in 64 bits", n);
        n = 8;
    }
    uint64_t u = rd_le(b, (int)n);
    if (n < 8 && neg) u |= ~(uint64_t)0 << (8 * n);
    return push_int(r, (int64_t)u);
}

static int push_str(rd *r, size_t n)
{
    if (n > r->lim.max_str_bytes) return pki_bad(r, "str of %zu bytes exceeds max_str_bytes (%zu)", n, r->lim.max_str_bytes);
    if (need(r, n)) return -1;
    size_t bad_at = mact_utf8_check(r->p, n);
    if (bad_at != n) return pki_bad(r, "str is not valid UTF-8 (byte %zu of %zu)", bad_at, n);
    pk_value *v = pki_new(r, PK_STR);
    if (!v) return -1;
    char *s = pki_alloc(r->doc, n + 1);
    if (!s) return pki_bad(r, "out of memory");
    memcpy(s, r->p, n);
    s[n] = 0;
    r->p += n;
    v->u.str.s = s;
    v->u.str.len = n;
    return pki_push(r, v);
}

static int push_bytes(rd *r, uint64_t n, int bytearray)
{
    if (n > r->lim.max_array_bytes)
        return pki_bad(r, "%s of %llu bytes exceeds max_array_bytes (%zu)", bytearray ? "bytearray" : "bytes",
                   (unsigned long long)n, r->lim.max_array_bytes);
    if (need(r, (size_t)n)) return -1;
    pk_value *v = pki_new(r, PK_BYTES);
    if (!v) return -1;
    v->u.bytes.p = r->p;
    v->u.bytes.len = (size_t)n;
    v->u.bytes.bytearray = bytearray;
    r->p += n;
    return pki_push(r, v);
}

/* ---- globals ---- */
static int push_global(rd *r, const char *mod, size_t ml, const char *name, size_t nl)
{
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        if (strlen(allowed[i].module) == ml && strlen(allowed[i].name) == nl && !memcmp(allowed[i].module, mod, ml) &&
            !memcmp(allowed[i].name, name, nl)) {
            pk_value *v = pki_new(r, PK_GLOBAL);
            if (!v) return -1;
            v->u.obj.module = allowed[i].module;
            v->u.obj.name = allowed[i].name;
            v->flags = (unsigned)allowed[i].role << F_ROLE_SHIFT;
            return pki_push(r, v);
        }
    }
    char a[96], b[96];
    return pki_bad(r, "global %s.%s is refused: this reader builds data only (numpy arrays, scalars and dtypes, the LeRobot "
                  "async-inference dataclasses; docs/pickle.md)",
               pki_printable(mod, ml, a, sizeof a), pki_printable(name, nl, b, sizeof b));
}

static int role(const pk_value *v) { return v->kind == PK_GLOBAL ? (int)(v->flags >> F_ROLE_SHIFT) : 0; }

/* a new object of an allowed dataclass; its fields come with BUILD */
static int new_object(rd *r, const pk_value *cls, pk_value *args)
{
    pk_value *o = pki_new(r, PK_OBJECT);
    if (!o) return -1;
    o->u.obj.module = cls->u.obj.module;
    o->u.obj.name = cls->u.obj.name;
    if (args) {
        if (pki_adopt(r, o, args)) return -1;
        o->u.obj.args = args;
    }
    return pki_push(r, o);
}

static int reduce(rd *r)
{
    pk_value *args = pop(r), *fn = args ? pop(r) : NULL;
    if (!fn) return -1;
    if (fn->kind != PK_GLOBAL) return pki_bad(r, "the callable is a %s, not an allowed global", pk_type_name(fn));
    if (args->kind != PK_TUPLE) return pki_bad(r, "arguments of %s.%s must be a tuple", fn->u.obj.module, fn->u.obj.name);
    pk_value *const *a = args->u.seq.v;
    size_t n = args->u.seq.n;
    switch (role(fn)) {
    case G_RECONSTRUCT: {
        /* _reconstruct(ndarray, (0,), b'b'): an empty array, filled by the BUILD that follows */
        if (n != 3 || role(a[0]) != G_NDARRAY || a[1]->kind != PK_TUPLE || (a[2]->kind != PK_BYTES && a[2]->kind != PK_STR))
            return pki_bad(r, "_reconstruct expects (numpy.ndarray, shape, typecode)");
        pk_value *v = pki_new(r, PK_NDARRAY);
        if (!v) return -1;
        static const int64_t zero = 0;
        v->u.arr.dt = (pk_dtype){'i', '|', 1};
        v->u.arr.ndim = 1;
        v->u.arr.shape = &zero;
        return pki_push(r, v);
    }
    case G_FROMBUFFER: {
        /* protocol 5: _frombuffer(buffer, dtype, shape, order) */
        if (n != 4 || (a[3]->kind != PK_STR || a[3]->u.str.len != 1 || !strchr("CF", a[3]->u.str.s[0])))
            return pki_bad(r, "_frombuffer expects (buffer, dtype, shape, 'C' or 'F')");
        pk_value *v = pki_new(r, PK_NDARRAY);
        if (!v || pki_fill_array(r, v, a[1], a[2], a[0], a[3]->u.str.s[0] == 'F')) return -1;
        v->flags |= F_BUILT;
        return pki_push(r, v);
    }
    case G_SCALAR: {
        /* numpy scalar: scalar(dtype, itemsize raw bytes) */
        if (n != 2 || a[0]->kind != PK_DTYPE) return pki_bad(r, "numpy scalar expects (dtype, bytes)");
        if (a[1]->kind != PK_BYTES) return pki_bad(r, "numpy scalar of Python objects is not supported");
        if (a[1]->u.bytes.len != (size_t)a[0]->u.arr.dt.itemsize)
            return pki_bad(r, "numpy scalar has %zu bytes, its dtype needs %d", a[1]->u.bytes.len, a[0]->u.arr.dt.itemsize);
        pk_value *v = pki_new(r, PK_NPSCALAR);
        if (!v) return -1;
        v->u.arr.dt = a[0]->u.arr.dt;
        v->u.arr.count = 1;
        v->u.arr.data = a[1]->u.bytes.p;
        v->u.arr.nbytes = a[1]->u.bytes.len;
        if (pki_to_host_order(r, v)) return -1;
        return pki_push(r, v);
    }
    case G_DTYPE: return pki_make_dtype(r, args);
    case G_CODECS_ENCODE: return pki_codecs_encode(r, args);
    case G_NEWOBJ:
        /* copyreg.__newobj__(cls, *args): cls.__new__(cls) for a dataclass */
        if (n < 1 || role(a[0]) != G_DATACLASS) return pki_bad(r, "copyreg.__newobj__ on anything but an allowed dataclass is refused");
        if (n != 1) return pki_bad(r, "copyreg.__newobj__: a dataclass takes no constructor arguments");
        return new_object(r, a[0], NULL);
    case G_RECONSTRUCTOR:
        /* protocols 0-1: copyreg._reconstructor(cls, object, None) */
        if (n != 3 || role(a[0]) != G_DATACLASS || role(a[1]) != G_OBJECT || a[2]->kind != PK_NONE)
            return pki_bad(r, "copyreg._reconstructor expects (allowed dataclass, object, None)");
        return new_object(r, a[0], NULL);
    case G_BYTES:
        if (n != 0) return pki_bad(r, "bytes() is accepted only without arguments (protocols 0-2 write b'' so)");
        return pki_push(r, pki_new(r, PK_BYTES));
    case G_ORDEREDDICT:
        if (n != 0) return pki_bad(r, "collections.OrderedDict expects no arguments (its items follow as SETITEMS)");
        return pki_push(r, pki_new(r, PK_DICT));
    case G_ENUM: {
        if (n != 1 || a[0]->kind != PK_STR) return pki_bad(r, "%s expects (value,)", fn->u.obj.name);
        for (size_t i = 0; i < sizeof pki_feature_types / sizeof pki_feature_types[0]; i++)
            if (pki_is_str(a[0], pki_feature_types[i])) return new_object(r, fn, args);
        char b[96];
        return pki_bad(r, "'%s' is not a %s", pki_printable(a[0]->u.str.s, a[0]->u.str.len, b, sizeof b), fn->u.obj.name);
    }
    default:
        return pki_bad(r, "REDUCE on %s.%s is refused (a dataclass arrives as NEWOBJ + BUILD)", fn->u.obj.module, fn->u.obj.name);
    }
}

static int build(rd *r)
{
    pk_value *st = pop(r), *t = st ? top(r) : NULL;
    if (!t) return -1;
    if (mutable_check(r, t, "BUILD")) return -1;
    if (t->flags & F_BUILT) return pki_bad(r, "BUILD applied twice to one %s", pk_type_name(t));
    if (st == t) return pki_bad(r, "a %s built from itself is refused", pk_type_name(t));
    if (t->kind == PK_NDARRAY) {
        if (pki_build_array(r, t, st)) return -1;
    } else if (t->kind == PK_DTYPE) {
        if (pki_build_dtype(r, t, st)) return -1;
    } else if (t->kind == PK_OBJECT && !t->u.obj.args) {
        /* a dataclass's fields: a dict with str keys */
        if (st->kind != PK_DICT) return pki_bad(r, "state of %s must be a dict, got %s", t->u.obj.name, pk_type_name(st));
        for (size_t i = 0; i < st->u.dict.n; i++)
            if (st->u.dict.k[i]->kind != PK_STR) return pki_bad(r, "field names of %s must be str", t->u.obj.name);
        if (pki_adopt(r, t, st)) return -1;
        t->u.obj.state = st;
    } else {
        return pki_bad(r, "BUILD on a %s is not supported", pk_type_name(t));
    }
    t->flags |= F_BUILT;
    return 0;
}

/* a tuple of the n values at the top of the stack (above `from`) */
static int make_tuple(rd *r, size_t from)
{
    size_t n = r->sp - from;
    pk_value *t = pki_new(r, PK_TUPLE);
    if (!t || pki_seq_reserve(r, t, n)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (pki_adopt(r, t, r->stack[from + i])) return -1;
        t->u.seq.v[i] = r->stack[from + i];
    }
    t->u.seq.n = n;
    r->sp = from;
    return pki_push(r, t);
}

static int appends(rd *r, pk_value *list, size_t from)
{
    if (list->kind != PK_LIST) return pki_bad(r, "APPEND to a %s is not supported", pk_type_name(list));
    if (mutable_check(r, list, "APPEND")) return -1;
    size_t n = r->sp - from;
    if (pki_seq_reserve(r, list, n)) return -1;
    for (size_t i = 0; i < n; i++) {
        if (pki_adopt(r, list, r->stack[from + i])) return -1;
        list->u.seq.v[list->u.seq.n++] = r->stack[from + i];
    }
    r->sp = from;
    return 0;
}

static int setitems(rd *r, pk_value *d, size_t from)
{
    if (d->kind != PK_DICT) return pki_bad(r, "SETITEM on a %s is not supported", pk_type_name(d));
    if (mutable_check(r, d, "SETITEM")) return -1;
    if ((r->sp - from) % 2) return pki_bad(r, "odd number of items for SETITEMS");
    for (size_t i = from; i < r->sp; i += 2)
        if (pki_dict_set(r, d, r->stack[i], r->stack[i + 1])) return -1;
    r->sp = from;
    return 0;
}

static int memo_put(rd *r, uint64_t idx)
{
    pk_value *v = top(r);
    if (!v) return -1;
    if (idx >= r->lim.max_memo) return pki_bad(r, "memo index %llu exceeds max_memo (%zu)", (unsigned long long)idx, r->lim.max_memo);
    if (idx >= r->memo_cap) {
        size_t cap = r->memo_cap ? r->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        if (cap > r->lim.max_memo) cap = r->lim.max_memo;
        pk_value **m = realloc(r->memo, cap * sizeof *m);
        if (!m) return pki_bad(r, "out of memory");
        memset(m + r->memo_cap, 0, (cap - r->memo_cap) * sizeof *m);
        r->memo = m;
        r->memo_cap = cap;
    }
    if (!r->memo[idx]) r->memo_len++;
    r->memo[idx] = v;
    return 0;
}

static int memo_get(rd *r, uint64_t idx)
{
    if (idx >= r->memo_cap || !r->memo[idx]) return pki_bad(r, "memo entry %llu was never stored", (unsigned long long)idx);
    return pki_push(r, r->memo[idx]);
}

/* ---- the opcodes that take more than one line (run's switch calls them) ---- */

/* an n-byte little-endian argument (n <= 8) */
static int arg_le(rd *r, int n, uint64_t *out)
{
    if (need(r, (size_t)n)) return -1;
    *out = rd_le(r->p, n);
    r->p += n;
    return 0;
}

static int op_proto(rd *r)
{
    if (need(r, 1)) return -1;
    if (*r->p > 5) return pki_bad(r, "protocol %d is newer than 5", *r->p);
    r->doc->protocol = *r->p++;
    return 0;
}

/* FRAME: a length hint */
static int op_frame(rd *r)
{
    if (need(r, 8)) return -1;
    if (rd_le(r->p, 8) > (uint64_t)(r->end - r->p - 8)) return pki_bad(r, "frame longer than the input");
    r->p += 8;
    return 0;
}

/* STOP: the one value left on the stack is the document's root */
static int op_stop(rd *r)
{
    if (r->nmark) return pki_bad(r, "STOP with an open MARK");
    if (r->sp != 1) return pki_bad(r, "STOP with %zu values on the stack (expected 1)", r->sp);
    if (r->p != r->end) return pki_bad(r, "%zu bytes after STOP", (size_t)(r->end - r->p));
    r->doc->root = r->stack[0];
    return 0;
}

static int op_mark(rd *r)
{
    if (++r->pushes > r->lim.max_items) return pki_bad(r, "more than max_items (%zu) values", r->lim.max_items);
    if (r->nmark == r->mcap) {
        size_t cap = r->mcap ? r->mcap * 2 : 16;
        size_t *m = realloc(r->marks, cap * sizeof *m);
        if (!m) return pki_bad(r, "out of memory");
        r->marks = m;
        r->mcap = cap;
    }
    r->marks[r->nmark++] = r->sp;
    return 0;
}

static int push_bool(rd *r, int b)
{
    pk_value *v = pki_new(r, PK_BOOL);
    if (!v) return -1;
    v->u.b = b;
    return pki_push(r, v);
}

static int op_long4(rd *r)
{
    uint64_t n;
    if (arg_le(r, 4, &n)) return -1;
    if (n > 64) return pki_bad(r, "integer of %llu bytes: beyond 64 bits is not supported", (unsigned long long)n);
    return push_long(r, (size_t)n);
}

/* INT: the protocol 0-1 int; "00" / "01" are False / True */
static int op_int_line(rd *r)
{
    const char *s;
    size_t n;
    int64_t i;
    if (read_line(r, &s, &n, 32)) return -1;
    if (n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1')) return push_bool(r, s[1] == '1');
    if (parse_decimal(s, n, &i)) return pki_bad(r, "not a 64-bit decimal integer");
    return push_int(r, i);
}

/* BINFLOAT: a big-endian double */
static int op_binfloat(rd *r)
{
    if (need(r, 8)) return -1;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | r->p[i];
    r->p += 8;
    pk_value *v = pki_new(r, PK_FLOAT);
    if (!v) return -1;
    memcpy(&v->u.f, &u, 8);
    return pki_push(r, v);
}

static int op_binunicode8(rd *r)
{
    uint64_t n;
    if (arg_le(r, 8, &n)) return -1;
    if (n > r->lim.max_str_bytes)
        return pki_bad(r, "str of %llu bytes exceeds max_str_bytes (%zu)", (unsigned long long)n,
                       r->lim.max_str_bytes);
    return push_str(r, (size_t)n);
}

/* TUPLE1..3: the top 1..3 values */
static int op_tuple_n(rd *r)
{
    size_t n = (size_t)(r->op - 0x84);
    if (r->sp < fence(r) + n) return pki_bad(r, "stack underflow");
    return make_tuple(r, r->sp - n);
}

static int op_tuple_mark(rd *r)
{
    size_t from = 0;
    if (pop_mark(r, &from)) return -1;
    return make_tuple(r, from);
}

/* LIST / DICT: the new container takes the items above the mark and sits where the mark was */
static int op_list_mark(rd *r)
{
    size_t from = 0;
    pk_value *v;
    if (pop_mark(r, &from)) return -1;
    if (!(v = pki_new(r, PK_LIST)) || appends(r, v, from) || pki_push(r, v)) return -1;
    return 0;
}

static int op_dict_mark(rd *r)
{
    size_t from = 0;
    pk_value *v;
    if (pop_mark(r, &from)) return -1;
    if (!(v = pki_new(r, PK_DICT)) || setitems(r, v, from) || pki_push(r, v)) return -1;
    return 0;
}

static int op_append(rd *r)
{
    if (r->sp < fence(r) + 2) return pki_bad(r, "stack underflow");
    return appends(r, r->stack[r->sp - 2], r->sp - 1);
}

static int op_appends(rd *r)
{
    size_t from = 0;
    if (pop_mark(r, &from)) return -1;
    if (from <= fence(r) || from == 0) return pki_bad(r, "APPENDS without a list below its MARK");
    return appends(r, r->stack[from - 1], from);
}

static int op_setitem(rd *r)
{
    if (r->sp < fence(r) + 3) return pki_bad(r, "stack underflow");
    return setitems(r, r->stack[r->sp - 3], r->sp - 2);
}

static int op_setitems(rd *r)
{
    size_t from = 0;
    if (pop_mark(r, &from)) return -1;
    if (from <= fence(r) || from == 0) return pki_bad(r, "SETITEMS without a dict below its MARK");
    return setitems(r, r->stack[from - 1], from);
}

/* GLOBAL: "module\nname\n" */
static int op_global_line(rd *r)
{
    const char *m, *n;
    size_t ml, nl;
    if (read_line(r, &m, &ml, 256) || read_line(r, &n, &nl, 256)) return -1;
    return push_global(r, m, ml, n, nl);
}

static int op_stack_global(rd *r)
{
    pk_value *name = pop(r), *mod = name ? pop(r) : NULL;
    if (!mod) return -1;
    if (name->kind != PK_STR || mod->kind != PK_STR) return pki_bad(r, "module and name must be str");
    return push_global(r, mod->u.str.s, mod->u.str.len, name->u.str.s, name->u.str.len);
}

/* NEWOBJ / NEWOBJ_EX: cls.__new__(cls) of an allowed dataclass, without arguments */
static int op_newobj(rd *r)
{
    pk_value *kw = NULL;
    if (r->op == 0x92 && !(kw = pop(r))) return -1;
    pk_value *args = pop(r), *cls = args ? pop(r) : NULL;
    if (!cls) return -1;
    if (role(cls) != G_DATACLASS) {
        char a[96];
        return pki_bad(r, "%s of a %s is refused (only the allowed dataclasses)", opname(r->op),
                       cls->kind == PK_GLOBAL ? pki_printable(cls->u.obj.name, strlen(cls->u.obj.name), a, sizeof a)
                                              : pk_type_name(cls));
    }
    if (args->kind != PK_TUPLE || args->u.seq.n || (kw && (kw->kind != PK_DICT || kw->u.dict.n)))
        return pki_bad(r, "%s: a dataclass takes no constructor arguments", opname(r->op));
    return new_object(r, cls, NULL);
}

/* PUT / GET: the protocol 0 memo opcodes, a decimal index on a line */
static int op_memo_line(rd *r)
{
    const char *s;
    size_t n;
    int64_t i;
    if (read_line(r, &s, &n, 32)) return -1;
    if (parse_decimal(s, n, &i) || i < 0) return pki_bad(r, "memo index is not a decimal number");
    return r->op == 'p' ? memo_put(r, (uint64_t)i) : memo_get(r, (uint64_t)i);
}

/* every opcode the switch does not read: why */
static int op_refused(rd *r)
{
    switch (r->op) {
    case 0x97:
    case 0x98:
        return pki_bad(r, "out-of-band buffers (pickle protocol 5 buffer_callback) are not supported: pickle in-band");
    case 'P':
    case 'Q':
        return pki_bad(r, "persistent ids (torch.save-style pickles) are not supported");
    case 'i':
    case 'o':
    case 0x82:
    case 0x83:
    case 0x84:
        return pki_bad(r, "this opcode instantiates classes by name or registry code and is refused");
    default:
        if (opname(r->op)) return pki_bad(r, "opcode not supported (docs/pickle.md lists those read)");
        return pki_bad(r, "unknown opcode 0x%02x", r->op);
    }
}

/* The opcode switch is deliberately one function with one-line cases, as SQLite's VDBE: the whole instruction set
 * reads at a glance, and an opcode that needs more than one line gets a static helper above (op_*, or the value
 * helpers). The project's rule is that no function in src/ or tools/ is longer than 150 lines (signature to closing
 * brace); this switch is the one function that may grow past it, and only while every case stays one line. A case
 * leaves rc nonzero on an error (the message is in r->err); STOP is the only way out with 0. */
static int run(rd *r)
{
    for (;;) {
        r->op_at = (size_t)(r->p - r->start);
        if (r->p >= r->end) { r->op = 0; return pki_bad(r, "truncated: no STOP"); }
        r->op = *r->p++;
        uint64_t u;
        int rc;
        switch (r->op) {
        case 0x80: rc = op_proto(r); break;
        case 0x95: rc = op_frame(r); break;
        case '.': return op_stop(r);
        case '(': rc = op_mark(r); break;
        case 'N': rc = pki_push(r, pki_new(r, PK_NONE)); break;
        case 0x88: case 0x89: rc = push_bool(r, r->op == 0x88); break;
        case 'J': rc = arg_le(r, 4, &u) || push_int(r, (int32_t)(uint32_t)u); break;
        case 'K': rc = arg_le(r, 1, &u) || push_int(r, (int64_t)u); break;
        case 'M': rc = arg_le(r, 2, &u) || push_int(r, (int64_t)u); break;
        case 0x8a: rc = arg_le(r, 1, &u) || push_long(r, (size_t)u); break;
        case 0x8b: rc = op_long4(r); break;
        case 'I': rc = op_int_line(r); break;
        case 'G': rc = op_binfloat(r); break;
        case 0x8c: rc = arg_le(r, 1, &u) || push_str(r, (size_t)u); break;
        case 'X': rc = arg_le(r, 4, &u) || push_str(r, (size_t)u); break;
        case 0x8d: rc = op_binunicode8(r); break;
        case 'C': rc = arg_le(r, 1, &u) || push_bytes(r, u, 0); break;
        case 'B': rc = arg_le(r, 4, &u) || push_bytes(r, u, 0); break;
        case 0x8e: case 0x96: rc = arg_le(r, 8, &u) || push_bytes(r, u, r->op == 0x96); break;
        case ']': rc = pki_push(r, pki_new(r, PK_LIST)); break;
        case '}': rc = pki_push(r, pki_new(r, PK_DICT)); break;
        case ')': rc = pki_push(r, pki_new(r, PK_TUPLE)); break;
        case 0x85: case 0x86: case 0x87: rc = op_tuple_n(r); break;
        case 't': rc = op_tuple_mark(r); break;
        case 'l': rc = op_list_mark(r); break;
        case 'd': rc = op_dict_mark(r); break;
        case 'a': rc = op_append(r); break;
        case 'e': rc = op_appends(r); break;
        case 's': rc = op_setitem(r); break;
        case 'u': rc = op_setitems(r); break;
        case 'c': rc = op_global_line(r); break;
        case 0x93: rc = op_stack_global(r); break;
        case 'R': rc = reduce(r); break;
        case 0x81: case 0x92: rc = op_newobj(r); break;
        case 'b': rc = build(r); break;
        case 0x94: rc = memo_put(r, r->memo_len); break;
        case 'q': rc = arg_le(r, 1, &u) || memo_put(r, u); break;
        case 'r': rc = arg_le(r, 4, &u) || memo_put(r, u); break;
        case 'p': case 'g': rc = op_memo_line(r); break;
        case 'h': rc = arg_le(r, 1, &u) || memo_get(r, u); break;
        case 'j': rc = arg_le(r, 4, &u) || memo_get(r, u); break;
        default: return op_refused(r);
        }
        if (rc) return -1;
    }
}

int pki_check_input(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t el)
{
    if (!out) return -1;
    *out = NULL;
    if (!buf && len) { if (el) snprintf(err, el, "pickle: NULL input"); return -1; }
    if (len > lim->max_input) {
        if (el) snprintf(err, el, "message of %zu bytes exceeds max_input (%zu)", len, lim->max_input);
        return -1;
    }
    return 0;
}

void pki_clamp_limits(pk_limits *l, const pk_limits *in)
{
    if (in) *l = *in;
    else pk_limits_default(l);
    if (l->max_depth < 1) l->max_depth = 1;
    if (l->max_depth > PK_MAX_DEPTH_CAP) l->max_depth = PK_MAX_DEPTH_CAP;
}

int pk_parse_pickle(const uint8_t *buf, size_t len, const pk_limits *lim, pk_doc **out, char *err, size_t errlen)
{
    rd r = {0};
    pki_clamp_limits(&r.lim, lim);
    if (pki_check_input(buf, len, &r.lim, out, err, errlen)) return -1;
    r.start = r.p = buf;
    r.end = buf + len;
    r.err = err;
    r.el = errlen;
    r.doc = calloc(1, sizeof *r.doc);
    if (!r.doc) { if (errlen) snprintf(err, errlen, "out of memory"); return -1; }
    r.doc->format = PK_FMT_PICKLE;
    int rc = len ? run(&r) : (snprintf(err, errlen, "pickle: empty input"), -1);
    free(r.stack);
    free(r.marks);
    free(r.memo);
    if (rc) { pk_free(r.doc); return -1; }
    *out = r.doc;
    return 0;
}

