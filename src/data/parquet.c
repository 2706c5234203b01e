/* Parquet reader (src/data/parquet.h; the format subset is docs/spec/datasets.md 3.3). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "data/parquet.h"

#define PQ_MAX_SCHEMA 100000
#define PQ_MAX_DEPTH 32

/* ---------------------------------------------------------------- Thrift compact protocol */

typedef struct {
    const uint8_t *p, *end;
    int bad;
    int depth;
} tc;

enum { T_STOP = 0, T_TRUE = 1, T_FALSE = 2, T_I8 = 3, T_I16 = 4, T_I32 = 5, T_I64 = 6, T_DOUBLE = 7,
       T_BINARY = 8, T_LIST = 9, T_SET = 10, T_MAP = 11, T_STRUCT = 12 };

static uint64_t tc_uvarint(tc *t)
{
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        if (t->p >= t->end) { t->bad = 1; return 0; }
        uint8_t b = *t->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    t->bad = 1;
    return 0;
}
static int64_t tc_zz(tc *t) { uint64_t u = tc_uvarint(t); return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }
static int64_t tc_int(tc *t, int type)
{
    if (type == T_I8) {
        if (t->p >= t->end) { t->bad = 1; return 0; }
        return (int8_t)*t->p++;
    }
    if (type == T_I16 || type == T_I32 || type == T_I64) return tc_zz(t);
    t->bad = 1;
    return 0;
}
static int32_t tc_i32(tc *t, int type)
{
    int64_t v = tc_int(t, type);
    if (v < INT32_MIN || v > INT32_MAX) { t->bad = 1; return 0; }
    return (int32_t)v;
}
/* A binary's bytes (pointer into the input) */
static const uint8_t *tc_bin(tc *t, int type, size_t *len)
{
    if (type != T_BINARY) { t->bad = 1; *len = 0; return NULL; }
    uint64_t n = tc_uvarint(t);
    if (t->bad || n > (uint64_t)(t->end - t->p)) { t->bad = 1; *len = 0; return NULL; }
    const uint8_t *s = t->p;
    t->p += n;
    *len = (size_t)n;
    return s;
}
/* List header: element type and count (count checked against the bytes left: every element takes >= 1
 * byte, except bools packed in... bools take 1 byte each in compact lists too). */
static int64_t tc_list(tc *t, int type, int *etype)
{
    if (type != T_LIST && type != T_SET) { t->bad = 1; return 0; }
    if (t->p >= t->end) { t->bad = 1; return 0; }
    uint8_t h = *t->p++;
    *etype = h & 0x0f;
    uint64_t n = h >> 4;
    if (n == 15) n = tc_uvarint(t);
    if (t->bad || n > (uint64_t)(t->end - t->p)) { t->bad = 1; return 0; }
    return (int64_t)n;
}
/* Next field header: returns its type (T_STOP at the end); *id the field id. */
static int tc_field(tc *t, int *last, int *id)
{
    if (t->p >= t->end) { t->bad = 1; return T_STOP; }
    uint8_t b = *t->p++;
    if (b == 0) return T_STOP;
    int type = b & 0x0f, d = b >> 4;
    if (d) *id = *last + d;
    else {
        int64_t v = tc_zz(t);
        if (v < INT16_MIN || v > INT16_MAX) { t->bad = 1; return T_STOP; }
        *id = (int)v;
    }
    *last = *id;
    if (type == T_STOP || type > T_STRUCT) { t->bad = 1; return T_STOP; }
    return type;
}
static void tc_skip(tc *t, int type);
static void tc_skip_struct(tc *t)
{
    if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; return; }
    int last = 0, id, type;
    while (!t->bad && (type = tc_field(t, &last, &id)) != T_STOP) tc_skip(t, type);
    t->depth--;
}
static void tc_skip(tc *t, int type)
{
    size_t len;
    int et, kt;
    switch (type) {
    case T_TRUE: case T_FALSE: return;
    case T_I8: case T_I16: case T_I32: case T_I64: (void)tc_int(t, type); return;
    case T_DOUBLE:
        if (t->end - t->p < 8) t->bad = 1; else t->p += 8;
        return;
    case T_BINARY: (void)tc_bin(t, type, &len); return;
    case T_LIST: case T_SET: {
        if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; return; }
        int64_t n = tc_list(t, type, &et);
        for (int64_t i = 0; i < n && !t->bad; i++) {
            if (et == T_TRUE || et == T_FALSE) {  /* list bools are one byte each */
                if (t->p >= t->end) t->bad = 1; else t->p++;
            } else tc_skip(t, et);
        }
        t->depth--;
        return;
    }
    case T_MAP: {
        if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; return; }
        uint64_t n = tc_uvarint(t);
        if (n) {
            if (t->p >= t->end) { t->bad = 1; return; }
            uint8_t kv = *t->p++;
            kt = kv >> 4; et = kv & 0x0f;
            if (n > (uint64_t)(t->end - t->p)) { t->bad = 1; return; }
            for (uint64_t i = 0; i < n && !t->bad; i++) {
                if (kt == T_TRUE || kt == T_FALSE) { if (t->p >= t->end) t->bad = 1; else t->p++; } else tc_skip(t, kt);
                if (et == T_TRUE || et == T_FALSE) { if (t->p >= t->end) t->bad = 1; else t->p++; } else tc_skip(t, et);
            }
        }
        t->depth--;
        return;
    }
    case T_STRUCT: tc_skip_struct(t); return;
    default: t->bad = 1;
    }
}
static int tc_bool(tc *t, int type)
{
    if (type == T_TRUE) return 1;
    if (type == T_FALSE) return 0;
    t->bad = 1;
    return 0;
}

/* ---------------------------------------------------------------- metadata */

typedef struct {
    int type, type_length, repetition, num_children, converted_type, logical_string, has_type;
    char name[256];
} pq_schema_el;

typedef struct {
    int type, codec;
    int64_t num_values, total_compressed, data_off, dict_off;
    int has_dict;
} pq_chunk;

typedef struct {
    int64_t num_rows;
    pq_chunk *cols;  /* n_leaves */
} pq_rowgroup;

typedef struct { const char *key, *val; size_t klen, vlen; } pq_kv;

struct mact_pq_file {
    char name[512];
    const uint8_t *data;
    size_t size;
    void *map;
    size_t map_len;
    mact_pq_options o;
    int64_t num_rows;
    int n_leaves, n_rg, n_kv;
    mact_pq_leaf *leaves;
    pq_rowgroup *rg;
    pq_kv *kv;
    char created_by[256];
};

static int parse_schema_el(tc *t, pq_schema_el *s)
{
    memset(s, 0, sizeof *s);
    s->converted_type = -1;
    s->repetition = 0;
    int last = 0, id, type;
    size_t len;
    while (!t->bad && (type = tc_field(t, &last, &id)) != T_STOP) {
        switch (id) {
        case 1: s->type = tc_i32(t, type); s->has_type = 1; break;
        case 2: s->type_length = tc_i32(t, type); break;
        case 3: s->repetition = tc_i32(t, type); break;
        case 4: {
            const uint8_t *n = tc_bin(t, type, &len);
            if (n) {
                if (len >= sizeof s->name) len = sizeof s->name - 1;
                memcpy(s->name, n, len);
                s->name[len] = 0;
                if (memchr(s->name, 0, len)) t->bad = 1;
            }
            break;
        }
        case 5: s->num_children = tc_i32(t, type); break;
        case 6: s->converted_type = tc_i32(t, type); break;
        case 10: {  /* LogicalType union: field 1 STRING */
            if (type != T_STRUCT) { t->bad = 1; break; }
            if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; break; }
            int l2 = 0, id2, ty2;
            while (!t->bad && (ty2 = tc_field(t, &l2, &id2)) != T_STOP) {
                if (id2 == 1) s->logical_string = 1;
                tc_skip(t, ty2);
            }
            t->depth--;
            break;
        }
        default: tc_skip(t, type);
        }
    }
    return t->bad ? -1 : 0;
}

static int parse_column_meta(tc *t, pq_chunk *c)
{
    int last = 0, id, type;
    while (!t->bad && (type = tc_field(t, &last, &id)) != T_STOP) {
        switch (id) {
        case 1: c->type = tc_i32(t, type); break;
        case 4: c->codec = tc_i32(t, type); break;
        case 5: c->num_values = tc_int(t, type); break;
        case 7: c->total_compressed = tc_int(t, type); break;
        case 9: c->data_off = tc_int(t, type); break;
        case 11: c->dict_off = tc_int(t, type); c->has_dict = 1; break;
        default: tc_skip(t, type);
        }
    }
    return t->bad ? -1 : 0;
}

static int parse_rowgroup(tc *t, pq_rowgroup *g, int n_leaves, const char *name, char *err, size_t el)
{
    int last = 0, id, type, have_cols = 0;
    if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; return -1; }
    while (!t->bad && (type = tc_field(t, &last, &id)) != T_STOP) {
        if (id == 1) {
            int et;
            int64_t n = tc_list(t, type, &et);
            if (t->bad) break;
            if (et != T_STRUCT || n != n_leaves || have_cols)
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: row group lists %lld column chunks, the schema has %d leaves",
                                 name, (long long)n, n_leaves);
            have_cols = 1;
            for (int64_t i = 0; i < n && !t->bad; i++) {
                int l2 = 0, id2, ty2, have_meta = 0;
                while (!t->bad && (ty2 = tc_field(t, &l2, &id2)) != T_STOP) {
                    if (id2 == 1 && ty2 == T_BINARY) {
                        size_t len;
                        (void)tc_bin(t, ty2, &len);
                        if (len) return mact_errf(err, el, MACT_ERR_UNSUPPORTED,
                                                  "%s: column chunk %lld lives in another file (file_path): unsupported", name, (long long)i);
                    } else if (id2 == 3 && ty2 == T_STRUCT) {
                        if (++t->depth > PQ_MAX_DEPTH) { t->bad = 1; break; }
                        parse_column_meta(t, &g->cols[i]);
                        t->depth--;
                        have_meta = 1;
                    } else tc_skip(t, ty2);
                }
                if (!t->bad && !have_meta)
                    return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column chunk %lld has no meta_data", name, (long long)i);
            }
        } else if (id == 3) g->num_rows = tc_int(t, type);
        else tc_skip(t, type);
    }
    t->depth--;
    if (t->bad) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: malformed row group in the footer", name);
    if (!have_cols) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: row group without columns", name);
    if (g->num_rows < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: row group with %lld rows", name, (long long)g->num_rows);
    return 0;
}

/* Walks the flattened schema (depth-first, num_children) and makes the leaves. */
static int build_leaves(mact_pq_file *f, const pq_schema_el *s, int n, char *err, size_t el)
{
    if (n < 1 || s[0].num_children < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: empty schema", f->name);
    int n_leaves = 0;
    for (int i = 1; i < n; i++) n_leaves += s[i].num_children == 0;
    if (!n_leaves) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema has no columns", f->name);
    f->leaves = calloc((size_t)n_leaves, sizeof *f->leaves);
    if (!f->leaves) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name);
    /* stack of (element, children left, def, rep, path length) */
    struct { int el, left, def, rep, list_def; size_t plen; } st[PQ_MAX_DEPTH + 1];
    int sp = 0;
    st[0].el = 0; st[0].left = s[0].num_children; st[0].def = 0; st[0].rep = 0; st[0].list_def = 0; st[0].plen = 0;
    char path[512] = "";
    int li = 0, i = 1;
    char top[256] = "";
    while (i < n) {
        while (sp > 0 && st[sp].left == 0) sp--;
        if (st[sp].left == 0) break;  /* root exhausted: extra elements */
        st[sp].left--;
        const pq_schema_el *e = &s[i];
        if (sp == 0) snprintf(top, sizeof top, "%s", e->name);
        if (e->repetition < 0 || e->repetition > 2)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema element '%s' has repetition %d", f->name, e->name, e->repetition);
        int def = st[sp].def + (e->repetition != 0), rep = st[sp].rep + (e->repetition == 2);
        int list_def = e->repetition == 2 ? def : st[sp].list_def;
        size_t plen = st[sp].plen;
        int w = snprintf(path + plen, sizeof path - plen, "%s%s", plen ? "." : "", e->name);
        if (w < 0 || (size_t)w >= sizeof path - plen)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column path too long", f->name);
        if (e->num_children > 0) {
            if (sp + 1 > PQ_MAX_DEPTH) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema nested deeper than %d", f->name, PQ_MAX_DEPTH);
            sp++;
            st[sp].el = i; st[sp].left = e->num_children; st[sp].def = def; st[sp].rep = rep; st[sp].list_def = list_def;
            st[sp].plen = plen + (size_t)w;
        } else {
            if (e->num_children < 0 || !e->has_type || e->type < 0 || e->type > 7)
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema leaf '%s' has no valid type", f->name, path);
            mact_pq_leaf *l = &f->leaves[li++];
            memcpy(l->path, path, sizeof l->path);
            snprintf(l->top, sizeof l->top, "%s", top);
            size_t tl = strlen(top);
            snprintf(l->sub, sizeof l->sub, "%s", strlen(path) > tl ? path + tl + 1 : "");
            l->type = e->type;
            l->type_length = e->type_length;
            l->max_def = def;
            l->max_rep = rep;
            l->converted_type = e->converted_type;
            l->is_string = e->type == MACT_PQ_BYTE_ARRAY && (e->converted_type == 0 || e->logical_string);
            l->list_def = list_def;
            if (e->type == MACT_PQ_FIXED_LEN_BYTE_ARRAY && (e->type_length <= 0 || e->type_length > (1 << 20)))
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s' has fixed length %d", f->name, path, e->type_length);
            path[plen] = 0;
        }
        i++;
    }
    while (sp > 0 && st[sp].left == 0) sp--;
    if (i != n || st[0].left != 0 || sp != 0 || li != n_leaves)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema children counts do not match its %d elements", f->name, n);
    f->n_leaves = n_leaves;
    return 0;
}

static int parse_footer(mact_pq_file *f, char *err, size_t el)
{
    if (f->size < 12) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %zu bytes, too short for parquet", f->name, f->size);
    if (memcmp(f->data, "PAR1", 4) || memcmp(f->data + f->size - 4, "PAR1", 4))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: not a parquet file (no PAR1 magic at both ends)", f->name);
    const uint8_t *q = f->data + f->size - 8;
    uint32_t mlen = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    if (mlen > f->size - 12)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: footer length %u exceeds the file (%zu bytes): truncated?", f->name, mlen, f->size);
    tc t = {.p = q - mlen, .end = q};
    pq_schema_el *schema = NULL;
    int n_schema = 0, rc = 0, have_schema = 0, have_rg = 0;
    int last = 0, id, type;
    const uint8_t *rg_start = NULL;
    int64_t n_rg = 0;
    while (!t.bad && (type = tc_field(&t, &last, &id)) != T_STOP) {
        if (id == 2 && !have_schema) {
            int et;
            int64_t n = tc_list(&t, type, &et);
            if (t.bad) break;
            if (et != T_STRUCT || n < 1 || n > PQ_MAX_SCHEMA) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: schema with %lld elements", f->name, (long long)n); goto out; }
            schema = calloc((size_t)n, sizeof *schema);
            if (!schema) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name); goto out; }
            for (int64_t i = 0; i < n && !t.bad; i++) {
                t.depth++;
                parse_schema_el(&t, &schema[i]);
                t.depth--;
            }
            n_schema = (int)n;
            have_schema = 1;
        } else if (id == 3) f->num_rows = tc_int(&t, type);
        else if (id == 4 && !have_rg) {
            /* parsed after the schema (which may come later in theory): remember where */
            int et;
            n_rg = tc_list(&t, type, &et);
            if (t.bad) break;
            if (et != T_STRUCT) { t.bad = 1; break; }
            rg_start = t.p;
            for (int64_t i = 0; i < n_rg && !t.bad; i++) tc_skip(&t, T_STRUCT);
            have_rg = 1;
        } else if (id == 5) {
            int et;
            int64_t n = tc_list(&t, type, &et);
            if (t.bad) break;
            if (et != T_STRUCT) { t.bad = 1; break; }
            f->kv = calloc((size_t)n + 1, sizeof *f->kv);
            if (!f->kv) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name); goto out; }
            for (int64_t i = 0; i < n && !t.bad; i++) {
                int l2 = 0, id2, ty2;
                pq_kv *k = &f->kv[f->n_kv];
                t.depth++;
                while (!t.bad && (ty2 = tc_field(&t, &l2, &id2)) != T_STOP) {
                    if (id2 == 1) k->key = (const char *)tc_bin(&t, ty2, &k->klen);
                    else if (id2 == 2) k->val = (const char *)tc_bin(&t, ty2, &k->vlen);
                    else tc_skip(&t, ty2);
                }
                t.depth--;
                if (k->key) f->n_kv++;
            }
        } else if (id == 6) {
            size_t len;
            const uint8_t *s = tc_bin(&t, type, &len);
            if (s) {
                if (len >= sizeof f->created_by) len = sizeof f->created_by - 1;
                memcpy(f->created_by, s, len);
                f->created_by[len] = 0;
            }
        } else tc_skip(&t, type);
    }
    if (t.bad) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: malformed footer (Thrift FileMetaData)", f->name); goto out; }
    if (!have_schema || !have_rg) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: footer without %s", f->name, have_schema ? "row groups" : "schema"); goto out; }
    if ((rc = build_leaves(f, schema, n_schema, err, el))) goto out;
    /* each row group takes >= 1 byte and holds n_leaves chunks of >= 1 byte each */
    if (n_rg > (int64_t)(q - rg_start) || n_rg * (int64_t)f->n_leaves > (int64_t)(q - rg_start) * 4) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: %lld row groups cannot fit the footer", f->name, (long long)n_rg);
        goto out;
    }
    f->rg = calloc((size_t)n_rg + 1, sizeof *f->rg);
    if (!f->rg) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name); goto out; }
    tc t2 = {.p = rg_start, .end = q};
    int64_t total = 0;
    for (int64_t i = 0; i < n_rg; i++) {
        f->rg[i].cols = calloc((size_t)f->n_leaves, sizeof(pq_chunk));
        f->n_rg = (int)i + 1;
        if (!f->rg[i].cols) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name); goto out; }
        if ((rc = parse_rowgroup(&t2, &f->rg[i], f->n_leaves, f->name, err, el))) goto out;
        total += f->rg[i].num_rows;
        if (total > ((int64_t)1 << 40)) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: absurd row count", f->name); goto out; }
        for (int c = 0; c < f->n_leaves; c++)
            if (f->rg[i].cols[c].type != f->leaves[c].type) {
                rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s': chunk type %d differs from the schema's %d", f->name,
                               f->leaves[c].path, f->rg[i].cols[c].type, f->leaves[c].type);
                goto out;
            }
    }
    if (total != f->num_rows) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: footer says %lld rows, its row groups hold %lld", f->name,
                       (long long)f->num_rows, (long long)total);
        goto out;
    }
out:
    free(schema);
    return rc;
}

static int pq_init(mact_pq_file *f, const mact_pq_options *o, char *err, size_t el)
{
    f->o.max_values = o && o->max_values > 0 ? o->max_values : (int64_t)1 << 28;
    f->o.max_page_bytes = o && o->max_page_bytes > 0 ? o->max_page_bytes : (int64_t)1 << 30;
    f->o.max_bytes = o && o->max_bytes > 0 ? o->max_bytes : (int64_t)1 << 32;
    return parse_footer(f, err, el);
}

int mact_pq_open_mem(const uint8_t *data, size_t size, const char *name, const mact_pq_options *o,
                     mact_pq_file **out, char *err, size_t el)
{
    *out = NULL;
    mact_pq_file *f = calloc(1, sizeof *f);
    if (!f) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", name ? name : "parquet");
    snprintf(f->name, sizeof f->name, "%s", name ? name : "parquet");
    f->data = data;
    f->size = size;
    int rc = pq_init(f, o, err, el);
    if (rc) { mact_pq_close(f); return rc; }
    *out = f;
    return 0;
}

int mact_pq_open(const char *path, const mact_pq_options *o, mact_pq_file **out, char *err, size_t el)
{
    *out = NULL;
    int fd = mact_file_open_regular(path, err, el);  /* a FIFO never blocks */
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mact_errf(err, el, MACT_ERR_IO, "%s: not a regular file", path);
    }
    mact_pq_file *f = calloc(1, sizeof *f);
    if (!f) { close(fd); return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path); }
    snprintf(f->name, sizeof f->name, "%s", path);
    f->size = (size_t)sb.st_size;
    if (f->size) {
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            close(fd);
            free(f);
            return mact_errf(err, el, MACT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
        }
        f->map_len = f->size;
        f->data = f->map;
    }
    close(fd);
    int rc = pq_init(f, o, err, el);
    if (rc) { mact_pq_close(f); return rc; }
    *out = f;
    return 0;
}

void mact_pq_close(mact_pq_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n_rg; i++) free(f->rg[i].cols);
    free(f->rg);
    free(f->leaves);
    free(f->kv);
    if (f->map) munmap(f->map, f->map_len);
    free(f);
}

int64_t mact_pq_num_rows(const mact_pq_file *f) { return f->num_rows; }
int mact_pq_num_row_groups(const mact_pq_file *f) { return f->n_rg; }
int64_t mact_pq_row_group_rows(const mact_pq_file *f, int rg) { return rg >= 0 && rg < f->n_rg ? f->rg[rg].num_rows : -1; }
int mact_pq_num_leaves(const mact_pq_file *f) { return f->n_leaves; }
const mact_pq_leaf *mact_pq_leaf_at(const mact_pq_file *f, int i) { return i >= 0 && i < f->n_leaves ? &f->leaves[i] : NULL; }
const char *mact_pq_created_by(const mact_pq_file *f) { return f->created_by; }

const char *mact_pq_kv(const mact_pq_file *f, const char *key, size_t *len)
{
    size_t kl = strlen(key);
    for (int i = 0; i < f->n_kv; i++)
        if (f->kv[i].klen == kl && !memcmp(f->kv[i].key, key, kl)) {
            if (len) *len = f->kv[i].vlen;
            return f->kv[i].val ? f->kv[i].val : "";
        }
    return NULL;
}

/* top-level field name of a leaf: the schema names may contain '.', so match by the leaf's path prefix
 * against the candidate (whole name followed by end or '.'). Ambiguity ("a" vs "a.b" as two fields) is
 * resolved by preferring the exact leaf path, then the shortest remainder. */
int mact_pq_find(const mact_pq_file *f, const char *name, const char *sub)
{
    int found = -1, count = 0;
    for (int i = 0; i < f->n_leaves; i++) {
        const mact_pq_leaf *l = &f->leaves[i];
        if (strcmp(l->top, name)) continue;
        if (sub) { if (!strcmp(l->sub, sub)) return i; continue; }
        found = i;
        count++;
    }
    return count == 1 ? found : -1;
}

/* ---------------------------------------------------------------- decoding */

typedef struct {
    mact_pq_file *f;
    const mact_pq_leaf *l;
    mact_pq_column *c;
    int64_t cap_vals, cap_rows, cap_bytes;
    int width;  /* fixed value width in vals (1 bool, 4, 8), 0 for byte arrays */
    /* dictionary */
    uint8_t *dict;      /* fixed width: n_dict * width; byte arrays: dict_boff into dict_bytes */
    int64_t n_dict;
    int64_t *dict_boff;
    const uint8_t *dict_bytes;
    uint8_t *dict_buf;  /* owned decompressed dictionary page */
    int64_t levels_left; /* chunk's num_values budget */
    char *err;
    size_t el;
    int rg;
} pq_dec;

static int dec_err(pq_dec *d, int code, const char *fmt, const char *what)
{
    return mact_errf(d->err, d->el, code, "%s: column '%s', row group %d: %s%s", d->f->name, d->l->path, d->rg, fmt, what ? what : "");
}

static int grow(void **p, int64_t *cap, int64_t need, size_t elsz)
{
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elsz);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static const char *encoding_name(int e)
{
    static const char *const n[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED", "DELTA_BINARY_PACKED",
                              "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? n[e] : "unknown";
}

/* RLE / bit-packed hybrid decoder over [p, end) for `n` values of bit width bw (<= 32). */
typedef struct {
    const uint8_t *p, *end;
    int bw;
    int64_t run_left;  /* RLE run */
    uint32_t run_val;
    int64_t bp_left;   /* bit-packed values left in the current group set */
    const uint8_t *bp;
    int64_t bp_bit;
} rle_dec;

static int rle_next(rle_dec *r, uint32_t *v)
{
    for (;;) {
        if (r->run_left > 0) { r->run_left--; *v = r->run_val; return 0; }
        if (r->bp_left > 0) {
            uint64_t acc = 0;
            int64_t bit = r->bp_bit;
            for (int i = 0; i < r->bw; i++, bit++)
                acc |= (uint64_t)((r->bp[bit >> 3] >> (bit & 7)) & 1) << i;
            r->bp_bit = bit;
            r->bp_left--;
            *v = (uint32_t)acc;
            return 0;
        }
        if (r->p >= r->end) return -1;
        uint64_t h = 0;
        int s = 0;
        for (;;) {
            if (r->p >= r->end || s > 35) return -1;
            uint8_t b = *r->p++;
            h |= (uint64_t)(b & 0x7f) << s;
            s += 7;
            if (!(b & 0x80)) break;
        }
        if (h & 1) {
            uint64_t groups = h >> 1;
            if (groups == 0) continue;
            uint64_t nbytes = groups * (uint64_t)r->bw;  /* 8 values * bw bits = bw bytes per group */
            if (nbytes > (uint64_t)(r->end - r->p)) {
                /* the last group may be cut short at the page end: accept only the bytes there are */
                nbytes = (uint64_t)(r->end - r->p);
                if (r->bw == 0) return -1;
                groups = 0;
                r->bp_left = (int64_t)(nbytes * 8 / (uint64_t)r->bw);
            } else r->bp_left = (int64_t)(groups * 8);
            if (r->bw == 0) { r->run_left = r->bp_left; r->run_val = 0; r->bp_left = 0; continue; }
            r->bp = r->p;
            r->bp_bit = 0;
            r->p += nbytes;
        } else {
            uint64_t n = h >> 1;
            int nb = (r->bw + 7) / 8;
            if (r->end - r->p < nb) return -1;
            uint32_t val = 0;
            for (int i = 0; i < nb; i++) val |= (uint32_t)r->p[i] << (8 * i);
            r->p += nb;
            if (r->bw < 32 && (val >> r->bw)) return -1;
            if (n > ((uint64_t)1 << 40)) return -1;
            r->run_left = (int64_t)n;
            r->run_val = val;
        }
    }
}

static int bit_width(int v) { int w = 0; while (v) { w++; v >>= 1; } return w; }

static int decompress(pq_dec *d, int codec, const uint8_t *src, size_t slen, uint8_t *dst, size_t dlen)
{
    switch (codec) {
    case 0:
        if (slen != dlen) return dec_err(d, MACT_ERR_FORMAT, "uncompressed page sizes disagree", NULL);
        if (slen) memcpy(dst, src, slen);
        return 0;
    case 1: {
        size_t ul;
        if (snappy_uncompressed_length((const char *)src, slen, &ul) != SNAPPY_OK || ul != dlen)
            return dec_err(d, MACT_ERR_FORMAT, "bad SNAPPY block (length disagrees with the page header)", NULL);
        size_t ol = dlen;
        if (snappy_uncompress((const char *)src, slen, (char *)dst, &ol) != SNAPPY_OK || ol != dlen)
            return dec_err(d, MACT_ERR_FORMAT, "corrupt SNAPPY page", NULL);
        return 0;
    }
    case 2: {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return dec_err(d, MACT_ERR_NOMEM, "zlib init failed", NULL);
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)slen;
        z.next_out = dst;
        z.avail_out = (uInt)dlen;
        int r = inflate(&z, Z_FINISH);
        size_t got = dlen - z.avail_out;
        inflateEnd(&z);
        if (r != Z_STREAM_END || got != dlen) return dec_err(d, MACT_ERR_FORMAT, "corrupt GZIP page", NULL);
        return 0;
    }
    case 6: {
        size_t r = ZSTD_decompress(dst, dlen, src, slen);
        if (ZSTD_isError(r) || r != dlen) return dec_err(d, MACT_ERR_FORMAT, "corrupt ZSTD page", NULL);
        return 0;
    }
    default: {
        static const char *const n[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
        return dec_err(d, MACT_ERR_UNSUPPORTED, "unsupported compression codec ", codec >= 0 && codec < 8 ? n[codec] : "unknown");
    }
    }
}

/* PLAIN values: n values from [p, end) appended (n_present values only). */
static int plain_fixed_width(int type, int tl)
{
    switch (type) {
    case MACT_PQ_INT32: case MACT_PQ_FLOAT: return 4;
    case MACT_PQ_INT64: case MACT_PQ_DOUBLE: return 8;
    case MACT_PQ_FIXED_LEN_BYTE_ARRAY: return tl;
    default: return 0;
    }
}

static int append_byte_value(pq_dec *d, const uint8_t *s, int64_t len)
{
    mact_pq_column *c = d->c;
    if (c->boff[c->n_values] + len > d->f->o.max_bytes) return dec_err(d, MACT_ERR_FORMAT, "more value bytes than the reader's cap", NULL);
    if (grow((void **)&c->bytes, &d->cap_bytes, c->boff[c->n_values] + len + 1, 1)) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
    if (len) memcpy(c->bytes + c->boff[c->n_values], s, (size_t)len);
    c->boff[c->n_values + 1] = c->boff[c->n_values] + len;
    return 0;
}

/* Makes room for one more value (vals or boff). */
static int reserve_value(pq_dec *d)
{
    mact_pq_column *c = d->c;
    if (c->n_values >= d->f->o.max_values) return dec_err(d, MACT_ERR_FORMAT, "more values than the reader's cap", NULL);
    int64_t cap = d->cap_vals;
    if (d->width) {
        if (grow(&c->vals, &cap, c->n_values + 1, (size_t)d->width)) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
    } else {
        if (grow((void **)&c->boff, &cap, c->n_values + 2, sizeof(int64_t))) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
    }
    d->cap_vals = cap;
    return 0;
}

static int read_dictionary(pq_dec *d, const uint8_t *v, size_t vlen, int64_t n)
{
    const mact_pq_leaf *l = d->l;
    if (d->dict || d->dict_boff) return dec_err(d, MACT_ERR_FORMAT, "second dictionary page", NULL);
    if (n < 0 || n > d->f->o.max_values) return dec_err(d, MACT_ERR_FORMAT, "dictionary size out of range", NULL);
    if (l->type == MACT_PQ_BOOLEAN) return dec_err(d, MACT_ERR_UNSUPPORTED, "dictionary-encoded BOOLEAN", NULL);
    if (l->type == MACT_PQ_BYTE_ARRAY) {
        if ((uint64_t)n * 4 > vlen) return dec_err(d, MACT_ERR_FORMAT, "dictionary page shorter than its entries", NULL);
        d->dict_boff = malloc(((size_t)n + 1) * sizeof(int64_t));
        if (!d->dict_boff) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
        size_t o = 0;
        /* offsets: entry i is at dict_bytes + dict_boff[i], length dict_boff[i+1] - dict_boff[i] - 4 */
        for (int64_t i = 0; i < n; i++) {
            if (vlen - o < 4) return dec_err(d, MACT_ERR_FORMAT, "dictionary entry past the page", NULL);
            uint32_t len = (uint32_t)v[o] | (uint32_t)v[o + 1] << 8 | (uint32_t)v[o + 2] << 16 | (uint32_t)v[o + 3] << 24;
            if (len > vlen - o - 4) return dec_err(d, MACT_ERR_FORMAT, "dictionary entry past the page", NULL);
            d->dict_boff[i] = (int64_t)o;
            o += 4 + len;
        }
        d->dict_boff[n] = (int64_t)o;
        d->dict_bytes = v;
    } else {
        int w = plain_fixed_width(l->type, l->type_length);
        if (!w) return dec_err(d, MACT_ERR_UNSUPPORTED, "dictionary of an unsupported type", NULL);
        if ((uint64_t)n * (uint64_t)w > vlen) return dec_err(d, MACT_ERR_FORMAT, "dictionary page shorter than its entries", NULL);
        d->dict = malloc((size_t)n * (size_t)w + 1);
        if (!d->dict) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
        memcpy(d->dict, v, (size_t)n * (size_t)w);
    }
    d->n_dict = n;
    return 0;
}

/* One data page's levels and values. lv/lvlen: the level bytes (V2) or NULL (V1: inside vals). */
static int decode_page(pq_dec *d, int64_t n, int enc, const uint8_t *rep, size_t rep_len, const uint8_t *def,
                       size_t def_len, const uint8_t *v, size_t vlen)
{
    const mact_pq_leaf *l = d->l;
    mact_pq_column *c = d->c;
    if (n < 0 || n > d->levels_left) return dec_err(d, MACT_ERR_FORMAT, "pages hold more values than the chunk's num_values", NULL);
    d->levels_left -= n;
    rle_dec rr = {.p = rep, .end = rep ? rep + rep_len : NULL, .bw = bit_width(l->max_rep)};
    rle_dec dr = {.p = def, .end = def ? def + def_len : NULL, .bw = bit_width(l->max_def)};
    int dictionary = enc == 2 || enc == 8;
    if (!dictionary && enc != 0 && !(enc == 3 && l->type == MACT_PQ_BOOLEAN))
        return dec_err(d, MACT_ERR_UNSUPPORTED, "unsupported encoding ", encoding_name(enc));
    rle_dec ir = {0};
    if (dictionary) {
        if (!d->dict && !d->dict_boff) return dec_err(d, MACT_ERR_FORMAT, "dictionary-encoded page without a dictionary page", NULL);
        if (vlen < 1 || v[0] > 32) return dec_err(d, MACT_ERR_FORMAT, "bad dictionary index bit width", NULL);
        ir.p = v + 1; ir.end = v + vlen; ir.bw = v[0];
    }
    rle_dec br = {0};
    if (enc == 3) {  /* RLE booleans: 4-byte length prefix */
        if (vlen < 4) return dec_err(d, MACT_ERR_FORMAT, "RLE boolean page too short", NULL);
        uint32_t bl = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
        if (bl > vlen - 4) return dec_err(d, MACT_ERR_FORMAT, "RLE boolean run past the page", NULL);
        br.p = v + 4; br.end = v + 4 + bl; br.bw = 1;
    }
    size_t vo = 0;
    int64_t bool_bit = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = 0, df = (uint32_t)l->max_def;
        if (l->max_rep && rle_next(&rr, &r)) return dec_err(d, MACT_ERR_FORMAT, "repetition levels end early", NULL);
        if (l->max_def && rle_next(&dr, &df)) return dec_err(d, MACT_ERR_FORMAT, "definition levels end early", NULL);
        if ((int)r > l->max_rep || (int)df > l->max_def) return dec_err(d, MACT_ERR_FORMAT, "level above its maximum", NULL);
        if (r == 0) {  /* a new row */
            if (c->n_rows >= d->f->o.max_values) return dec_err(d, MACT_ERR_FORMAT, "more rows than the reader's cap", NULL);
            int64_t cap0 = d->cap_rows;
            if (grow((void **)&c->row_start, &d->cap_rows, c->n_rows + 2, sizeof(int64_t)))
                return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
            if (d->cap_rows != cap0) {
                uint8_t *rn = realloc(c->row_null, (size_t)d->cap_rows);
                if (!rn) return dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL);
                c->row_null = rn;
            }
            c->row_start[c->n_rows] = c->n_values;
            c->row_null[c->n_rows] = 0;
            c->n_rows++;
            c->row_start[c->n_rows] = c->n_values;
        } else if (c->n_rows == 0) return dec_err(d, MACT_ERR_FORMAT, "first level of a page continues a row", NULL);
        if ((int)df < l->max_def) {
            if (l->max_rep && (int)df >= l->list_def)
                return dec_err(d, MACT_ERR_UNSUPPORTED, "null element inside a list", NULL);
            /* no value: an empty list (the level just above the list's elements) or a null row */
            if (!(l->max_rep && (int)df == l->list_def - 1)) c->row_null[c->n_rows - 1] = 1;
            continue;
        }
        if (reserve_value(d)) return -1;
        if (dictionary) {
            uint32_t idx;
            if (rle_next(&ir, &idx)) return dec_err(d, MACT_ERR_FORMAT, "dictionary indices end early", NULL);
            if ((int64_t)idx >= d->n_dict) return dec_err(d, MACT_ERR_FORMAT, "dictionary index out of range", NULL);
            if (d->width) memcpy((uint8_t *)c->vals + c->n_values * d->width, d->dict + (size_t)idx * d->width, (size_t)d->width);
            else {
                int64_t o = d->dict_boff[idx];
                if (append_byte_value(d, d->dict_bytes + o + 4, d->dict_boff[idx + 1] - o - 4)) return -1;
            }
        } else if (l->type == MACT_PQ_BOOLEAN) {
            uint32_t b;
            if (enc == 3) {
                if (rle_next(&br, &b)) return dec_err(d, MACT_ERR_FORMAT, "boolean values end early", NULL);
            } else {
                if ((uint64_t)(bool_bit >> 3) >= vlen) return dec_err(d, MACT_ERR_FORMAT, "boolean values past the page", NULL);
                b = (v[bool_bit >> 3] >> (bool_bit & 7)) & 1;
                bool_bit++;
            }
            ((uint8_t *)c->vals)[c->n_values] = (uint8_t)b;
        } else if (l->type == MACT_PQ_BYTE_ARRAY) {
            if (vlen - vo < 4) return dec_err(d, MACT_ERR_FORMAT, "PLAIN value past the page", NULL);
            uint32_t len = (uint32_t)v[vo] | (uint32_t)v[vo + 1] << 8 | (uint32_t)v[vo + 2] << 16 | (uint32_t)v[vo + 3] << 24;
            if (len > vlen - vo - 4) return dec_err(d, MACT_ERR_FORMAT, "PLAIN value past the page", NULL);
            if (append_byte_value(d, v + vo + 4, len)) return -1;
            vo += 4 + (size_t)len;
        } else {
            int w = plain_fixed_width(l->type, l->type_length);
            if (vlen - vo < (size_t)w) return dec_err(d, MACT_ERR_FORMAT, "PLAIN values past the page", NULL);
            if (d->width) memcpy((uint8_t *)c->vals + c->n_values * d->width, v + vo, (size_t)w);
            else if (append_byte_value(d, v + vo, w)) return -1;
            vo += (size_t)w;
        }
        c->n_values++;
        c->row_start[c->n_rows] = c->n_values;
    }
    return 0;
}

static int read_chunk(pq_dec *d, const pq_chunk *ck)
{
    mact_pq_file *f = d->f;
    int64_t start = ck->has_dict && ck->dict_off > 0 && ck->dict_off < ck->data_off ? ck->dict_off : ck->data_off;
    if (start < 4 || ck->total_compressed < 0 || start > (int64_t)f->size - 8 ||
        ck->total_compressed > (int64_t)f->size - 8 - start)
        return dec_err(d, MACT_ERR_FORMAT, "column chunk lies outside the file", NULL);
    if (ck->num_values < 0 || ck->num_values > f->o.max_values)
        return dec_err(d, MACT_ERR_FORMAT, "column chunk num_values out of range", NULL);
    d->levels_left = ck->num_values;
    const uint8_t *p = f->data + start, *end = p + ck->total_compressed;
    uint8_t *buf = NULL;
    int rc = 0;
    while (p < end && d->levels_left > 0) {
        tc t = {.p = p, .end = end};
        int last = 0, id, type;
        int ptype = -1;
        int64_t usize = -1, csize = -1;
        int64_t nv = -1, nnulls = 0, nrows = 0;
        int enc = -1, def_enc = 3, rep_enc = 3;
        int64_t dl = 0, rl = 0;
        int is_compressed = 1, hdr_kind = 0;
        while (!t.bad && (type = tc_field(&t, &last, &id)) != T_STOP) {
            if (id == 1) ptype = tc_i32(&t, type);
            else if (id == 2) usize = tc_i32(&t, type);
            else if (id == 3) csize = tc_i32(&t, type);
            else if ((id == 5 || id == 7 || id == 8) && type == T_STRUCT) {
                hdr_kind = id;
                int l2 = 0, id2, ty2;
                t.depth++;
                while (!t.bad && (ty2 = tc_field(&t, &l2, &id2)) != T_STOP) {
                    if (id == 5) {
                        if (id2 == 1) nv = tc_i32(&t, ty2);
                        else if (id2 == 2) enc = tc_i32(&t, ty2);
                        else if (id2 == 3) def_enc = tc_i32(&t, ty2);
                        else if (id2 == 4) rep_enc = tc_i32(&t, ty2);
                        else tc_skip(&t, ty2);
                    } else if (id == 7) {
                        if (id2 == 1) nv = tc_i32(&t, ty2);
                        else if (id2 == 2) enc = tc_i32(&t, ty2);
                        else tc_skip(&t, ty2);
                    } else {
                        if (id2 == 1) nv = tc_i32(&t, ty2);
                        else if (id2 == 2) nnulls = tc_i32(&t, ty2);
                        else if (id2 == 3) nrows = tc_i32(&t, ty2);
                        else if (id2 == 4) enc = tc_i32(&t, ty2);
                        else if (id2 == 5) dl = tc_i32(&t, ty2);
                        else if (id2 == 6) rl = tc_i32(&t, ty2);
                        else if (id2 == 7) is_compressed = tc_bool(&t, ty2);
                        else tc_skip(&t, ty2);
                    }
                }
                t.depth--;
            } else tc_skip(&t, type);
        }
        (void)nnulls; (void)nrows;
        if (t.bad) { rc = dec_err(d, MACT_ERR_FORMAT, "malformed page header", NULL); goto out; }
        if (usize < 0 || csize < 0 || csize > end - t.p) { rc = dec_err(d, MACT_ERR_FORMAT, "page runs past the column chunk", NULL); goto out; }
        if (usize > f->o.max_page_bytes) { rc = dec_err(d, MACT_ERR_FORMAT, "page larger than the reader's cap", NULL); goto out; }
        const uint8_t *body = t.p;
        p = t.p + csize;
        if (ptype == 0 || ptype == 2 || ptype == 3) {
            int want = ptype == 0 ? 5 : ptype == 2 ? 7 : 8;
            if (hdr_kind != want) { rc = dec_err(d, MACT_ERR_FORMAT, "page header without its typed header", NULL); goto out; }
        } else continue;  /* index pages and unknown kinds are skipped */
        if (nv < 0) { rc = dec_err(d, MACT_ERR_FORMAT, "negative value count in a page", NULL); goto out; }
        free(buf);
        buf = malloc((size_t)usize + 1);
        if (!buf) { rc = dec_err(d, MACT_ERR_NOMEM, "out of memory", NULL); goto out; }
        if (ptype == 3) {
            if (dl < 0 || rl < 0 || dl + rl > csize || dl + rl > usize) { rc = dec_err(d, MACT_ERR_FORMAT, "V2 level lengths exceed the page", NULL); goto out; }
            const uint8_t *rep = body, *def = body + rl, *vals = body + rl + dl;
            size_t vc = (size_t)(csize - rl - dl), vu = (size_t)(usize - rl - dl);
            if (is_compressed && ck->codec != 0) { if ((rc = decompress(d, ck->codec, vals, vc, buf, vu))) goto out; }
            else if (vc != vu) { rc = dec_err(d, MACT_ERR_FORMAT, "uncompressed V2 page sizes disagree", NULL); goto out; }
            else if (vc) memcpy(buf, vals, vc);
            if ((rc = decode_page(d, nv, enc, rep, (size_t)rl, def, (size_t)dl, buf, vu))) goto out;
            continue;
        }
        if ((rc = decompress(d, ck->codec, body, (size_t)csize, buf, (size_t)usize))) goto out;
        if (ptype == 2) {
            if (enc != 0 && enc != 2) { rc = dec_err(d, MACT_ERR_UNSUPPORTED, "dictionary page encoding ", encoding_name(enc)); goto out; }
            if (d->dict_buf || d->dict || d->dict_boff) { rc = dec_err(d, MACT_ERR_FORMAT, "second dictionary page", NULL); goto out; }
            d->dict_buf = buf;  /* byte-array entries point into it */
            buf = NULL;
            if ((rc = read_dictionary(d, d->dict_buf, (size_t)usize, nv))) goto out;
            continue;
        }
        /* V1: [u32 len][rep][u32 len][def][values] */
        size_t o = 0, ul = (size_t)usize;
        const uint8_t *rep = NULL, *def = NULL;
        size_t rep_len = 0, def_len = 0;
        for (int k = 0; k < 2; k++) {
            int maxl = k == 0 ? d->l->max_rep : d->l->max_def;
            if (!maxl) continue;
            int le = k == 0 ? rep_enc : def_enc;
            if (le != 3) { rc = dec_err(d, MACT_ERR_UNSUPPORTED, "level encoding ", encoding_name(le)); goto out; }
            if (ul - o < 4) { rc = dec_err(d, MACT_ERR_FORMAT, "levels past the page", NULL); goto out; }
            uint32_t len = (uint32_t)buf[o] | (uint32_t)buf[o + 1] << 8 | (uint32_t)buf[o + 2] << 16 | (uint32_t)buf[o + 3] << 24;
            if (len > ul - o - 4) { rc = dec_err(d, MACT_ERR_FORMAT, "levels past the page", NULL); goto out; }
            if (k == 0) { rep = buf + o + 4; rep_len = len; } else { def = buf + o + 4; def_len = len; }
            o += 4 + len;
        }
        if ((rc = decode_page(d, nv, enc, rep, rep_len, def, def_len, buf + o, ul - o))) goto out;
    }
    if (d->levels_left != 0) rc = dec_err(d, MACT_ERR_FORMAT, "column chunk ends before its num_values (truncated?)", NULL);
out:
    free(buf);
    free(d->dict); d->dict = NULL;
    free(d->dict_boff); d->dict_boff = NULL;
    free(d->dict_buf); d->dict_buf = NULL;
    d->n_dict = 0;
    return rc;
}

void mact_pq_column_free(mact_pq_column *c)
{
    if (!c) return;
    free(c->row_start); free(c->row_null); free(c->vals); free(c->bytes); free(c->boff);
    memset(c, 0, sizeof *c);
}

int mact_pq_read(mact_pq_file *f, int leaf, int rg, mact_pq_column *col, char *err, size_t el)
{
    memset(col, 0, sizeof *col);
    if (leaf < 0 || leaf >= f->n_leaves) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no column %d", f->name, leaf);
    if (rg >= f->n_rg) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no row group %d", f->name, rg);
    const mact_pq_leaf *l = &f->leaves[leaf];
    pq_dec d = {.f = f, .l = l, .c = col, .err = err, .el = el};
    col->type = l->type;
    if (l->max_rep > 1) { d.rg = rg < 0 ? 0 : rg; return dec_err(&d, MACT_ERR_UNSUPPORTED, "nested lists (repetition depth > 1)", NULL); }
    if (l->type == MACT_PQ_INT96) { d.rg = 0; return dec_err(&d, MACT_ERR_UNSUPPORTED, "INT96 values", NULL); }
    d.width = l->type == MACT_PQ_BOOLEAN ? 1 : l->type == MACT_PQ_BYTE_ARRAY || l->type == MACT_PQ_FIXED_LEN_BYTE_ARRAY ? 0 : plain_fixed_width(l->type, 0);
    col->row_start = calloc(2, sizeof(int64_t));
    col->row_null = calloc(2, 1);
    d.cap_rows = 2;
    if (!d.width) {
        col->boff = calloc(2, sizeof(int64_t));
        d.cap_vals = 1;
    }
    if (!col->row_start || !col->row_null || (!d.width && !col->boff)) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name);
    int a = rg < 0 ? 0 : rg, b = rg < 0 ? f->n_rg : rg + 1;
    for (int g = a; g < b; g++) {
        d.rg = g;
        int64_t rows0 = col->n_rows;
        int rc = read_chunk(&d, &f->rg[g].cols[leaf]);
        if (rc) return rc;
        if (col->n_rows - rows0 != f->rg[g].num_rows)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s', row group %d: %lld rows decoded, the row group has %lld",
                             f->name, l->path, g, (long long)(col->n_rows - rows0), (long long)f->rg[g].num_rows);
    }
    return 0;
}

double mact_pq_value_f64(const mact_pq_column *c, int64_t i)
{
    switch (c->type) {
    case MACT_PQ_BOOLEAN: return ((const uint8_t *)c->vals)[i];
    case MACT_PQ_INT32: { int32_t v; memcpy(&v, (const uint8_t *)c->vals + 4 * i, 4); return v; }
    case MACT_PQ_INT64: { int64_t v; memcpy(&v, (const uint8_t *)c->vals + 8 * i, 8); return (double)v; }
    case MACT_PQ_FLOAT: { float v; memcpy(&v, (const uint8_t *)c->vals + 4 * i, 4); return v; }
    case MACT_PQ_DOUBLE: { double v; memcpy(&v, (const uint8_t *)c->vals + 8 * i, 8); return v; }
    default: return 0;
    }
}

int mact_pq_read_f64(mact_pq_file *f, const char *name, int rg, int width, double **out, int64_t *n_rows,
                     char *err, size_t el)
{
    *out = NULL;
    *n_rows = 0;
    int li = mact_pq_find(f, name, NULL);
    if (li < 0) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: no column '%s'", f->name, name);
    const mact_pq_leaf *l = &f->leaves[li];
    if (l->type == MACT_PQ_BYTE_ARRAY || l->type == MACT_PQ_FIXED_LEN_BYTE_ARRAY || l->type == MACT_PQ_INT96)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s' is not numeric", f->name, name);
    if (width < 1) return mact_errf(err, el, MACT_ERR_INPUT, "%s: column '%s': width %d", f->name, name, width);
    mact_pq_column c;
    int rc = mact_pq_read(f, li, rg, &c, err, el);
    if (rc) { mact_pq_column_free(&c); return rc; }
    double *v = malloc((size_t)(c.n_rows ? c.n_rows : 1) * (size_t)width * sizeof(double));
    if (!v) { mact_pq_column_free(&c); return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", f->name); }
    for (int64_t r = 0; r < c.n_rows; r++) {
        int64_t n = c.row_start[r + 1] - c.row_start[r];
        if (c.row_null[r] || n != width) {
            rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s', row %lld: %s%lld values, the feature's shape is [%d]",
                           f->name, name, (long long)r, c.row_null[r] ? "null, " : "", (long long)n, width);
            free(v);
            mact_pq_column_free(&c);
            return rc;
        }
        for (int k = 0; k < width; k++) v[r * width + k] = mact_pq_value_f64(&c, c.row_start[r] + k);
    }
    *out = v;
    *n_rows = c.n_rows;
    mact_pq_column_free(&c);
    return 0;
}
