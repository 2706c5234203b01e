/* numpy values from their pickles (pickle_internal.h): dtype(name, align, copy) + its BUILD state, ndarrays from
 * _reconstruct + BUILD or _frombuffer, bytes from _codecs.encode. Only the dtypes the tree can hold are built. */
#include <stdio.h>
#include "server/pickle_internal.h"



/* numpy.dtype(name, align, copy): the type numbers numpy writes ("f8", "u1", "b1", "i4", ...) */
int pki_make_dtype(rd *r, const pk_value *args)
{
    if (args->u.seq.n != 3 || args->u.seq.v[0]->kind != PK_STR)
        return pki_bad(r, "numpy.dtype expects (name, align, copy), got %zu arguments", args->u.seq.n);
    int f;
    if (pki_as_flag(args->u.seq.v[1], &f) || pki_as_flag(args->u.seq.v[2], &f))
        return pki_bad(r, "numpy.dtype: align and copy must be bool");
    const char *s = args->u.seq.v[0]->u.str.s;
    size_t n = args->u.seq.v[0]->u.str.len;
    char buf[40];
    int sz = n == 2 && s[1] >= '1' && s[1] <= '8' ? s[1] - '0' : 0;
    int ok = n == 2 && ((s[0] == 'f' && (sz == 2 || sz == 4 || sz == 8)) || (s[0] == 'b' && sz == 1) ||
                        ((s[0] == 'i' || s[0] == 'u') && (sz == 1 || sz == 2 || sz == 4 || sz == 8)));
    if (!ok)
        return pki_bad(r, "numpy dtype '%s' is not supported (bool, int8-64, uint8-64, float16/32/64)",
                   pki_printable(s, n, buf, sizeof buf));
    pk_value *v = pki_new(r, PK_DTYPE);
    if (!v) return -1;
    v->u.arr.dt.kind = s[0];
    v->u.arr.dt.itemsize = sz;
    v->u.arr.dt.order = sz == 1 ? '|' : pki_host_little() ? '<' : '>';
    return pki_push(r, v);
}

/* BUILD on a dtype: (3, byteorder, subarray, names, fields, elsize, alignment, flags) or version 4 with metadata */
int pki_build_dtype(rd *r, pk_value *d, const pk_value *st)
{
    if (st->kind != PK_TUPLE || st->u.seq.n < 1 || st->u.seq.v[0]->kind != PK_INT)
        return pki_bad(r, "numpy.dtype state must be a tuple starting with its version");
    pk_value *const *t = st->u.seq.v;
    int64_t ver = t[0]->u.i;
    if (!((ver == 3 && st->u.seq.n == 8) || (ver == 4 && st->u.seq.n == 9)))
        return pki_bad(r, "numpy.dtype state version %lld with %zu fields is not supported (3 with 8, 4 with 9)",
                   (long long)ver, st->u.seq.n);
    if (t[1]->kind != PK_STR || t[1]->u.str.len != 1 || !strchr("<>|=", t[1]->u.str.s[0]))
        return pki_bad(r, "numpy.dtype byte order must be '<', '>', '|' or '='");
    if (t[2]->kind != PK_NONE || t[3]->kind != PK_NONE || t[4]->kind != PK_NONE)
        return pki_bad(r, "structured or sub-array numpy dtypes are not supported");
    if (t[5]->kind != PK_INT || t[6]->kind != PK_INT || t[7]->kind != PK_INT)
        return pki_bad(r, "numpy.dtype elsize, alignment and flags must be int");
    if (t[5]->u.i != -1 && t[5]->u.i != d->u.arr.dt.itemsize)
        return pki_bad(r, "numpy.dtype elsize %lld does not match its type", (long long)t[5]->u.i);
    if (ver == 4 && t[8]->kind != PK_NONE && t[8]->kind != PK_DICT) return pki_bad(r, "numpy.dtype metadata must be a dict or None");
    char o = t[1]->u.str.s[0];
    if (o == '=') o = pki_host_little() ? '<' : '>';
    if (d->u.arr.dt.itemsize == 1) o = '|';
    else if (o == '|') return pki_bad(r, "numpy.dtype of %d bytes needs a byte order", d->u.arr.dt.itemsize);
    d->u.arr.dt.order = o;
    return 0;
}

/* numpy swaps a foreign-order array to native order when it unpickles one (protocols 0-4); the tree does so
 * always, so data is in host byte order for every consumer. Needs a copy only for such arrays. */
int pki_to_host_order(rd *r, pk_value *a)
{
    int n = a->u.arr.dt.itemsize;
    char host = pki_host_little() ? '<' : '>';
    if (n == 1 || a->u.arr.dt.order == host) return 0;
    uint8_t *q = pki_alloc(r->doc, a->u.arr.nbytes ? a->u.arr.nbytes : 1);
    if (!q) return pki_bad(r, "out of memory");
    for (size_t i = 0; i < a->u.arr.count; i++)
        for (int k = 0; k < n; k++) q[i * (size_t)n + (size_t)k] = a->u.arr.data[i * (size_t)n + (size_t)(n - 1 - k)];
    a->u.arr.data = q;
    a->u.arr.dt.order = host;
    return 0;
}

/* shape tuple -> arena copy and element count */
static int take_shape(rd *r, const pk_value *shape, pk_value *a)
{
    if (shape->kind != PK_TUPLE && shape->kind != PK_LIST) return pki_bad(r, "ndarray shape must be a tuple, got %s", pk_type_name(shape));
    size_t nd = shape->u.seq.n;
    if (nd > PK_MAX_DIMS) return pki_bad(r, "ndarray of %zu dimensions (at most %d)", nd, PK_MAX_DIMS);
    int64_t *sh = pki_alloc(r->doc, (nd ? nd : 1) * sizeof *sh);
    if (!sh) return pki_bad(r, "out of memory");
    size_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        const pk_value *e = shape->u.seq.v[i];
        if (e->kind != PK_INT || e->u.i < 0) return pki_bad(r, "ndarray shape entries must be non-negative ints");
        sh[i] = e->u.i;
        if ((uint64_t)e->u.i > SIZE_MAX || __builtin_mul_overflow(count, (size_t)e->u.i, &count))
            return pki_bad(r, "ndarray shape overflows");
    }
    a->u.arr.ndim = (int)nd;
    a->u.arr.shape = sh;
    a->u.arr.count = count;
    return 0;
}

/* numpy's order flag: Fortran order is accepted only where it is the same layout as C order (at most one axis
 * longer than 1); a real Fortran-order array is refused rather than transposed */
static int fortran_ok(rd *r, const pk_value *a, int fortran)
{
    if (!fortran) return 0;
    int long_axes = 0;
    for (int i = 0; i < a->u.arr.ndim; i++) long_axes += a->u.arr.shape[i] > 1;
    if (long_axes > 1)
        return pki_bad(r, "Fortran-order ndarray is not supported: send a C-contiguous array (numpy.ascontiguousarray)");
    return 0;
}

/* ndarray contents: dtype, shape, raw bytes (exactly count * itemsize) */
int pki_fill_array(rd *r, pk_value *a, const pk_value *dtype, const pk_value *shape, const pk_value *data, int fortran)
{
    if (dtype->kind != PK_DTYPE) return pki_bad(r, "ndarray dtype must be a numpy.dtype, got %s", pk_type_name(dtype));
    if (take_shape(r, shape, a) || fortran_ok(r, a, fortran)) return -1;
    a->u.arr.dt = dtype->u.arr.dt;
    size_t nbytes;
    if (__builtin_mul_overflow(a->u.arr.count, (size_t)a->u.arr.dt.itemsize, &nbytes) || nbytes > r->lim.max_array_bytes)
        return pki_bad(r, "ndarray larger than max_array_bytes (%zu)", r->lim.max_array_bytes);
    if (data->kind == PK_LIST) return pki_bad(r, "ndarray of Python objects is not supported");
    if (data->kind != PK_BYTES) return pki_bad(r, "ndarray data must be bytes, got %s", pk_type_name(data));
    if (data->u.bytes.len != nbytes)
        return pki_bad(r, "ndarray data has %zu bytes, its shape and dtype need %zu", data->u.bytes.len, nbytes);
    a->u.arr.data = data->u.bytes.p;
    a->u.arr.nbytes = nbytes;
    return pki_to_host_order(r, a);
}

/* BUILD on an ndarray from _reconstruct: (version, shape, dtype, is_fortran, rawdata) or without the version */
int pki_build_array(rd *r, pk_value *a, const pk_value *st)
{
    if (st->kind != PK_TUPLE || (st->u.seq.n != 5 && st->u.seq.n != 4))
        return pki_bad(r, "ndarray state must be (version, shape, dtype, is_fortran, data), got %s", pk_type_name(st));
    pk_value *const *t = st->u.seq.v;
    if (st->u.seq.n == 5) {
        if (t[0]->kind != PK_INT || t[0]->u.i != 1) return pki_bad(r, "ndarray state version must be 1");
        t++;
    }
    int fortran;
    if (pki_as_flag(t[2], &fortran)) return pki_bad(r, "ndarray is_fortran must be bool");
    return pki_fill_array(r, a, t[1], t[0], t[3], fortran);
}

/* decodes the UTF-8 str into latin-1 bytes (protocols 0-2 carry bytes as _codecs.encode(str, 'latin1')) */
int pki_codecs_encode(rd *r, const pk_value *args)
{
    if (args->u.seq.n != 2 || args->u.seq.v[0]->kind != PK_STR ||
        !(pki_is_str(args->u.seq.v[1], "latin1") || pki_is_str(args->u.seq.v[1], "latin-1")))
        return pki_bad(r, "_codecs.encode is accepted only as (str, 'latin1'), the form pickle writes for bytes");
    const unsigned char *s = (const unsigned char *)args->u.seq.v[0]->u.str.s;
    size_t n = args->u.seq.v[0]->u.str.len, k = 0;
    uint8_t *out = pki_alloc(r->doc, n ? n : 1);
    if (!out) return pki_bad(r, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x80) out[k++] = s[i];
        else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < n) { out[k++] = (uint8_t)((s[i] & 3) << 6 | (s[i + 1] & 0x3f)); i++; }
        else return pki_bad(r, "_codecs.encode: the str has a character beyond latin-1");
    }
    if (k > r->lim.max_array_bytes) return pki_bad(r, "bytes of %zu exceed max_array_bytes (%zu)", k, r->lim.max_array_bytes);
    pk_value *v = pki_new(r, PK_BYTES);
    if (!v) return -1;
    v->u.bytes.p = out;
    v->u.bytes.len = k;
    return pki_push(r, v);
}

