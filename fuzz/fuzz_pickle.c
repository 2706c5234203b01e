/* The data-only pickle reader and the PR #3048 reader (src/server/pickle.c). The first byte picks the entry point:
 *   0 pk_parse (either format, detected), 1 pk_parse_pickle, 2 pk_parse_safe, under small limits; every accepted
 *     tree is walked: depth and size bookkeeping exact (size = 1 + the children's sizes), depth within the limit,
 *     str NUL-terminated UTF-8, ndarray bytes = product(shape) x itemsize in host order and all readable, every str
 *     key found again by pk_dict_get, objects carry a class name
 *   3 the writers on rows x dim floats from the input: the PR #3048 reply must read back bit-exact, the pickle
 *     reply must be a complete pickle that this reader refuses only at its torch global */
#include "fuzz_common.h"
#include "base/json.h"
#include "server/pickle.h"

static pk_limits L;

static size_t walk(const pk_value *v, int depth)
{
    if (!v || depth > L.max_depth || v->depth > L.max_depth) __builtin_trap();
    size_t sum = 1;
    int maxd = -1;
#define CHILD(c) do { const pk_value *c_ = (c); sum += walk(c_, depth + 1); if (c_->depth > maxd) maxd = c_->depth; } while (0)
    switch (v->kind) {
    case PK_NONE: case PK_BOOL: case PK_INT: case PK_FLOAT: case PK_GLOBAL: case PK_DTYPE: break;
    case PK_STR:
        if (v->u.str.s[v->u.str.len] != 0 || mact_utf8_check((const unsigned char *)v->u.str.s, v->u.str.len) != v->u.str.len)
            __builtin_trap();
        break;
    case PK_BYTES: {
        volatile uint8_t s = 0;
        for (size_t i = 0; i < v->u.bytes.len; i++) s ^= v->u.bytes.p[i];
        (void)s;
        if (v->u.bytes.len > L.max_array_bytes) __builtin_trap();
        break;
    }
    case PK_NDARRAY:
    case PK_NPSCALAR: {
        const uint16_t one = 1;
        const char host = *(const uint8_t *)&one ? '<' : '>';  /* data always comes in host order */
        size_t count = 1;
        for (int i = 0; i < v->u.arr.ndim; i++) {
            if (v->u.arr.shape[i] < 0) __builtin_trap();
            count *= (size_t)v->u.arr.shape[i];
        }
        if (v->u.arr.ndim < 0 || v->u.arr.ndim > PK_MAX_DIMS || count != v->u.arr.count ||
            v->u.arr.nbytes != count * (size_t)v->u.arr.dt.itemsize || v->u.arr.nbytes > L.max_array_bytes ||
            (v->u.arr.dt.itemsize > 1 && v->u.arr.dt.order != host) || (v->kind == PK_NPSCALAR && count != 1))
            __builtin_trap();
        volatile double s = 0;
        for (size_t i = 0; i < count; i++) s += pk_arr_get(v, i);
        (void)s;
        break;
    }
    case PK_LIST:
    case PK_TUPLE:
        for (size_t i = 0; i < v->u.seq.n; i++) CHILD(v->u.seq.v[i]);
        break;
    case PK_DICT:
        for (size_t i = 0; i < v->u.dict.n; i++) {
            const pk_value *k = v->u.dict.k[i];
            CHILD(k);
            CHILD(v->u.dict.v[i]);
            if (k->kind == PK_STR && strlen(k->u.str.s) == k->u.str.len && pk_dict_get(v, k->u.str.s) != v->u.dict.v[i])
                __builtin_trap();
        }
        break;
    case PK_OBJECT:
        if (!v->u.obj.module || !v->u.obj.name || !pk_type_name(v)) __builtin_trap();
        if (v->u.obj.args) CHILD(v->u.obj.args);
        if (v->u.obj.state) {
            CHILD(v->u.obj.state);
            for (size_t i = 0; i < pk_len(v->u.obj.state); i++)
                if (pk_dict_key(v->u.obj.state, i)->kind != PK_STR) __builtin_trap();
        }
        break;
    }
    /* a dict entry replaced by a repeated key leaves the depth it had (conservative), never less */
    if (sum != v->size || v->size > L.max_items || v->depth < maxd + 1) __builtin_trap();
    double d;
    int64_t i;
    (void)pk_number(v, &d);
    (void)pk_int(v, &i);
    return sum;
}

static void writers(const uint8_t *d, size_t n)
{
    if (n < 18) return;
    int rows = d[0] % 6, dim = 1 + d[1] % 7;
    double t0, dt;
    memcpy(&t0, d + 2, 8);
    memcpy(&dt, d + 10, 8);
    int64_t i0 = (int64_t)(int8_t)d[1] * 1000003;
    d += 18, n -= 18;
    float a[6 * 7] = {0};
    size_t want = (size_t)rows * (size_t)dim * 4;
    memcpy(a, d, n < want ? n : want);
    char err[300] = {0};
    pk_buf b = {0};
    int rc = pk_write_timed_actions_safe(&b, a, rows, dim, t0, dt, i0, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) {
        pk_doc *doc = NULL;
        if (pk_parse(b.p, b.len, &L, &doc, err, sizeof err)) __builtin_trap();
        const pk_value *l = pk_root(doc);
        if (pk_len(l) != (size_t)rows) __builtin_trap();
        for (int r = 0; r < rows; r++) {
            const pk_value *ta = pk_item(l, (size_t)r), *act = pk_attr(ta, "action");
            int64_t step;
            double ts;
            if (pk_int(pk_attr(ta, "timestep"), &step) || step != i0 + r || pk_number(pk_attr(ta, "timestamp"), &ts) ||
                ts != t0 + (double)r * dt || !act || act->u.arr.count != (size_t)dim ||
                memcmp(act->u.arr.data, a + r * dim, (size_t)dim * 4))
                __builtin_trap();
        }
        pk_free(doc);
    }
    pk_buf_free(&b);
    rc = pk_write_timed_actions(&b, a, rows, dim, t0, dt, i0, err, sizeof err);
    if (rc || b.len < 4 || b.p[b.len - 1] != '.') __builtin_trap();
    pk_doc *doc = NULL;
    rc = pk_parse_pickle(b.p, b.len, &L, &doc, err, sizeof err);
    if (rows ? (rc == 0 || !strstr(err, "torch.Tensor.float")) : rc != 0) __builtin_trap();
    pk_free(doc);
    pk_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static int init;
    if (!init) {
        pk_limits_default(&L);
        L.max_input = 1 << 20;
        L.max_depth = 16;
        L.max_items = 4096;
        L.max_memo = 1024;
        L.max_array_bytes = 1 << 20;
        L.max_str_bytes = 1 << 16;
        init = 1;
    }
    if (n < 1) return 0;
    int sel = d[0] & 3;
    d++, n--;
    if (sel == 3) { writers(d, n); return 0; }
    char err[300] = {0};
    pk_doc *doc = NULL;
    int rc = sel == 0 ? pk_parse(d, n, &L, &doc, err, sizeof err)
             : sel == 1 ? pk_parse_pickle(d, n, &L, &doc, err, sizeof err)
                        : pk_parse_safe(d, n, &L, &doc, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) {
        if (!doc || !pk_root(doc)) __builtin_trap();
        walk(pk_root(doc), 0);
    } else if (doc) __builtin_trap();
    pk_free(doc);
    return 0;
}
