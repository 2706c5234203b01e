/* Parquet writer for generated test data (src/data/pq_write.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include "mact.h"
#include "base/err.h"
#include "synth/pq_write.h"

typedef struct { uint8_t *p; size_t n, cap; int oom; } wbuf;

static void wb_put(wbuf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) { b->oom = 1; return; }
        b->p = q; b->cap = c;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void wb_u8(wbuf *b, uint8_t v) { wb_put(b, &v, 1); }
static void wb_u32(wbuf *b, uint32_t v) { uint8_t x[4] = {v, v >> 8, v >> 16, v >> 24}; wb_put(b, x, 4); }
static void wb_uvar(wbuf *b, uint64_t v) { while (v >= 0x80) { wb_u8(b, (uint8_t)(v | 0x80)); v >>= 7; } wb_u8(b, (uint8_t)v); }

/* Thrift compact writer: a stack of last field ids */
typedef struct { wbuf *b; int last[16]; int sp; } tw;
static void tw_field(tw *t, int id, int type)
{
    int d = id - t->last[t->sp];
    if (d > 0 && d <= 15) wb_u8(t->b, (uint8_t)(d << 4 | type));
    else { wb_u8(t->b, (uint8_t)type); int64_t z = id; wb_uvar(t->b, (uint64_t)((z << 1) ^ (z >> 63))); }
    t->last[t->sp] = id;
}
static void tw_i64(tw *t, int id, int64_t v) { tw_field(t, id, 6); wb_uvar(t->b, (uint64_t)((v << 1) ^ (v >> 63))); }
static void tw_i32(tw *t, int id, int32_t v) { tw_field(t, id, 5); int64_t z = v; wb_uvar(t->b, (uint64_t)((z << 1) ^ (z >> 63))); }
static void tw_bin(tw *t, int id, const void *s, size_t n) { tw_field(t, id, 8); wb_uvar(t->b, n); wb_put(t->b, s, n); }
static void tw_bool(tw *t, int id, int v) { tw_field(t, id, v ? 1 : 2); }
static void tw_begin(tw *t, int id) { tw_field(t, id, 12); t->last[++t->sp] = 0; }
static void tw_end(tw *t) { wb_u8(t->b, 0); t->sp--; }
static void tw_list(tw *t, int id, int etype, int64_t n)
{
    tw_field(t, id, 9);
    if (n < 15) wb_u8(t->b, (uint8_t)(n << 4 | etype));
    else { wb_u8(t->b, (uint8_t)(0xf0 | etype)); wb_uvar(t->b, (uint64_t)n); }
}
static void tw_elem_begin(tw *t) { t->last[++t->sp] = 0; }  /* struct element of a list */
static void tw_zz(wbuf *b, int64_t v) { wb_uvar(b, (uint64_t)((v << 1) ^ (v >> 63))); }

/* RLE/bit-packed hybrid of n values of width bw */
static void rle_encode(wbuf *b, const uint32_t *v, int64_t n, int bw)
{
    int nb = (bw + 7) / 8;
    int64_t i = 0;
    while (i < n) {
        int64_t r = 1;
        while (i + r < n && v[i + r] == v[i]) r++;
        if (r >= 8 || bw == 0) {
            wb_uvar(b, (uint64_t)r << 1);
            for (int k = 0; k < nb; k++) wb_u8(b, (uint8_t)(v[i] >> (8 * k)));
            i += r;
            continue;
        }
        /* literal groups of 8 until a run of >= 8 starts at a group boundary */
        int64_t j = i;
        while (j < n) {
            int64_t rr = 1;
            while (j + rr < n && v[j + rr] == v[j]) rr++;
            if (rr >= 8 && j > i) break;
            j += 8;
        }
        if (j > n) j = n;
        int64_t groups = (j - i + 7) / 8;
        wb_uvar(b, (uint64_t)groups << 1 | 1);
        uint64_t acc = 0;
        int bits = 0;
        for (int64_t k = 0; k < groups * 8; k++) {
            uint64_t x = i + k < n ? v[i + k] : 0;
            acc |= x << bits;
            bits += bw;
            while (bits >= 8) { wb_u8(b, (uint8_t)acc); acc >>= 8; bits -= 8; }
        }
        if (bits) wb_u8(b, (uint8_t)acc);
        i += groups * 8 < n - i ? groups * 8 : n - i;
    }
}
static int bitw(uint32_t v) { int w = 0; while (v) { w++; v >>= 1; } return w; }

/* One leaf's data for a row range: levels and value bytes (fixed width or length-prefixed). */
typedef struct {
    int type, max_def, max_rep, conv;  /* physical type, levels, converted type (-1 none) */
    int64_t n_levels;
    uint32_t *def, *rep;
    int64_t n_vals;
    uint8_t **vptr; size_t *vlen;      /* each value's bytes (PLAIN form without the length prefix) */
    int64_t *row_of_level;             /* row index (relative) of each level */
} leafdata;

static const char *leaf_sub(int kind, int k) { return kind == PQW_IMAGE ? (k ? "path" : "bytes") : NULL; }
static int n_leaves_of(int kind) { return kind == PQW_IMAGE ? 2 : 1; }

static int pq_compress(int codec, const uint8_t *s, size_t n, wbuf *out)
{
    out->n = 0;
    if (codec == 0) { wb_put(out, s, n); return out->oom ? -1 : 0; }
    if (codec == 1) {
        size_t cap = snappy_max_compressed_length(n);
        wb_put(out, NULL, 0);
        uint8_t *tmp = malloc(cap + 1);
        if (!tmp) return -1;
        size_t ol = cap;
        if (snappy_compress((const char *)s, n, (char *)tmp, &ol) != SNAPPY_OK) { free(tmp); return -1; }
        wb_put(out, tmp, ol);
        free(tmp);
        return out->oom ? -1 : 0;
    }
    if (codec == 2) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
        size_t cap = deflateBound(&z, (uLong)n) + 32;
        uint8_t *tmp = malloc(cap);
        if (!tmp) { deflateEnd(&z); return -1; }
        z.next_in = (Bytef *)s; z.avail_in = (uInt)n; z.next_out = tmp; z.avail_out = (uInt)cap;
        int r = deflate(&z, Z_FINISH);
        size_t ol = cap - z.avail_out;
        deflateEnd(&z);
        if (r != Z_STREAM_END) { free(tmp); return -1; }
        wb_put(out, tmp, ol);
        free(tmp);
        return out->oom ? -1 : 0;
    }
    if (codec == 6) {
        size_t cap = ZSTD_compressBound(n);
        uint8_t *tmp = malloc(cap + 1);
        if (!tmp) return -1;
        size_t r = ZSTD_compress(tmp, cap, s, n, 3);
        if (ZSTD_isError(r)) { free(tmp); return -1; }
        wb_put(out, tmp, r);
        free(tmp);
        return out->oom ? -1 : 0;
    }
    return -1;
}

/* A simple hash set of value byte strings -> dictionary index */
typedef struct { int64_t *slot; size_t cap; int64_t n; uint8_t **key; size_t *klen; } dictset;
static uint64_t hbytes(const uint8_t *s, size_t n) { uint64_t h = 1469598103934665603ull; for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull; return h; }
static int64_t dict_find_add(dictset *d, uint8_t *k, size_t n, int add)
{
    if ((size_t)(d->n + 1) * 2 > d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        int64_t *ns = malloc(nc * sizeof *ns);
        uint8_t **nk = realloc(d->key, nc * sizeof *nk);
        size_t *nl = realloc(d->klen, nc * sizeof *nl);
        if (!ns || !nk || !nl) { free(ns); if (nk) d->key = nk; if (nl) d->klen = nl; return -2; }
        d->key = nk; d->klen = nl;
        for (size_t i = 0; i < nc; i++) ns[i] = -1;
        for (int64_t i = 0; i < d->n; i++) {
            size_t h = hbytes(d->key[i], d->klen[i]) & (nc - 1);
            while (ns[h] >= 0) h = (h + 1) & (nc - 1);
            ns[h] = i;
        }
        free(d->slot);
        d->slot = ns; d->cap = nc;
    }
    size_t h = hbytes(k, n) & (d->cap - 1);
    while (d->slot[h] >= 0) {
        int64_t i = d->slot[h];
        if (d->klen[i] == n && !memcmp(d->key[i], k, n)) return i;
        h = (h + 1) & (d->cap - 1);
    }
    if (!add) return -1;
    d->slot[h] = d->n;
    d->key[d->n] = k; d->klen[d->n] = n;
    return d->n++;
}

typedef struct {
    const pqw_options *o;
    wbuf file;
    /* per row group, per leaf metadata */
    struct chunkmeta { int type; int64_t num_values, usize, csize, data_off, dict_off; int has_dict; int encs[4]; int n_enc; char path[512]; } *cm;
    int n_cm, cap_cm;
    char *err; size_t el;
} writer;

static void put_page_header(wbuf *b, int ptype, int64_t usize, int64_t csize, int64_t nv, int enc, int64_t nrows,
                            int64_t dl, int64_t rl)
{
    tw t = {.b = b};
    tw_i32(&t, 1, ptype);
    tw_i32(&t, 2, (int32_t)usize);
    tw_i32(&t, 3, (int32_t)csize);
    if (ptype == 0) {
        tw_begin(&t, 5);
        tw_i32(&t, 1, (int32_t)nv); tw_i32(&t, 2, enc); tw_i32(&t, 3, 3); tw_i32(&t, 4, 3);
        tw_end(&t);
    } else if (ptype == 2) {
        tw_begin(&t, 7);
        tw_i32(&t, 1, (int32_t)nv); tw_i32(&t, 2, enc);
        tw_end(&t);
    } else {
        tw_begin(&t, 8);
        tw_i32(&t, 1, (int32_t)nv); tw_i32(&t, 2, 0); tw_i32(&t, 3, (int32_t)nrows); tw_i32(&t, 4, enc);
        tw_i32(&t, 5, (int32_t)dl); tw_i32(&t, 6, (int32_t)rl); tw_bool(&t, 7, 1);
        tw_end(&t);
    }
    wb_u8(b, 0);
}

/* Writes one column chunk from the leaf data. */
static int write_chunk(writer *w, leafdata *L, int64_t n_rows, struct chunkmeta *m)
{
    const pqw_options *o = w->o;
    int use_dict = !o->plain && L->type != 0;
    int64_t page_rows = o->page_rows > 0 ? o->page_rows : n_rows + 1;
    dictset ds = {0};
    int64_t *idx = malloc(((size_t)L->n_vals + 1) * sizeof *idx);
    wbuf pages = {0}, raw = {0}, comp = {0}, lv = {0};
    int rc = -1;
    if (!idx) goto out;
    m->type = L->type;
    m->num_values = L->n_levels;
    int fallback_at = -1;  /* first value index written PLAIN */
    m->n_enc = 0;
    /* page boundaries by rows: levels [l0, l1) */
    int64_t l0 = 0, v0 = 0;
    int any_plain = 0, any_dict = 0;
    while (l0 < L->n_levels) {
        int64_t row0 = L->row_of_level[l0], l1 = l0;
        while (l1 < L->n_levels && L->row_of_level[l1] < row0 + page_rows) l1++;
        int64_t v1 = v0;
        for (int64_t i = l0; i < l1; i++) v1 += (int64_t)(L->def[i] == (uint32_t)L->max_def);
        int dict_page = use_dict && fallback_at < 0;
        if (dict_page) {
            for (int64_t i = v0; i < v1; i++) {
                idx[i] = dict_find_add(&ds, L->vptr[i], L->vlen[i], 1);
                if (idx[i] == -2) goto out;
            }
            if (o->dict_max > 0 && ds.n > o->dict_max && v0 > 0) {
                /* this page would overflow the dictionary: forget its new entries, write it PLAIN */
                int64_t keep = 0;
                for (int64_t i = 0; i < v0; i++) if (idx[i] + 1 > keep) keep = idx[i] + 1;
                ds.n = keep;
                for (size_t s = 0; s < ds.cap; s++) if (ds.slot[s] >= keep) ds.slot[s] = -1;
                /* rebuild the probe chains */
                for (size_t s = 0; s < ds.cap; s++) ds.slot[s] = -1;
                for (int64_t i = 0; i < ds.n; i++) {
                    size_t h = hbytes(ds.key[i], ds.klen[i]) & (ds.cap - 1);
                    while (ds.slot[h] >= 0) h = (h + 1) & (ds.cap - 1);
                    ds.slot[h] = i;
                }
                fallback_at = (int)v0;
                dict_page = 0;
            }
        }
        /* values */
        raw.n = 0;
        if (dict_page) {
            int bw = bitw((uint32_t)(ds.n > 0 ? ds.n - 1 : 0));
            wb_u8(&raw, (uint8_t)bw);
            uint32_t *iv = malloc(((size_t)(v1 - v0) + 1) * sizeof *iv);
            if (!iv) goto out;
            for (int64_t i = v0; i < v1; i++) iv[i - v0] = (uint32_t)idx[i];
            rle_encode(&raw, iv, v1 - v0, bw);
            free(iv);
            any_dict = 1;
        } else {
            if (L->type == 0) {
                uint8_t acc = 0; int bits = 0;
                for (int64_t i = v0; i < v1; i++) {
                    acc |= (uint8_t)((L->vptr[i][0] & 1) << bits);
                    if (++bits == 8) { wb_u8(&raw, acc); acc = 0; bits = 0; }
                }
                if (bits) wb_u8(&raw, acc);
            } else
                for (int64_t i = v0; i < v1; i++) {
                    if (L->type == 6) wb_u32(&raw, (uint32_t)L->vlen[i]);
                    wb_put(&raw, L->vptr[i], L->vlen[i]);
                }
            any_plain = 1;
        }
        /* levels */
        wbuf rl = {0}, dl = {0};
        if (L->max_rep) rle_encode(&rl, L->rep + l0, l1 - l0, bitw((uint32_t)L->max_rep));
        if (L->max_def) rle_encode(&dl, L->def + l0, l1 - l0, bitw((uint32_t)L->max_def));
        int enc = dict_page ? 8 : 0;
        if (o->corrupt == PQW_BAD_DELTA) enc = 5;
        if (o->corrupt == PQW_BAD_BSS) enc = 9;
        int64_t nrows_page = 0;
        for (int64_t i = l0; i < l1; i++) nrows_page += L->max_rep == 0 || L->rep[i] == 0;
        if (o->page_v2) {
            if (pq_compress(o->codec, raw.p ? raw.p : (uint8_t *)"", raw.n, &comp)) { free(rl.p); free(dl.p); goto out; }
            put_page_header(&pages, 3, (int64_t)(rl.n + dl.n + raw.n), (int64_t)(rl.n + dl.n + comp.n), l1 - l0, enc, nrows_page,
                            (int64_t)dl.n, (int64_t)rl.n);
            wb_put(&pages, rl.p, rl.n); wb_put(&pages, dl.p, dl.n); wb_put(&pages, comp.p, comp.n);
            m->usize += (int64_t)(rl.n + dl.n + raw.n);
        } else {
            lv.n = 0;
            if (L->max_rep) { wb_u32(&lv, (uint32_t)rl.n); wb_put(&lv, rl.p, rl.n); }
            if (L->max_def) { wb_u32(&lv, (uint32_t)dl.n); wb_put(&lv, dl.p, dl.n); }
            wb_put(&lv, raw.p, raw.n);
            if (pq_compress(o->codec, lv.p ? lv.p : (uint8_t *)"", lv.n, &comp)) { free(rl.p); free(dl.p); goto out; }
            put_page_header(&pages, 0, (int64_t)lv.n, (int64_t)comp.n + (o->corrupt == PQW_BAD_PAGE_PAST_CHUNK && l0 == 0 ? 1000 : 0),
                            l1 - l0, enc, 0, 0, 0);
            wb_put(&pages, comp.p, comp.n);
            m->usize += (int64_t)lv.n;
        }
        free(rl.p); free(dl.p);
        l0 = l1; v0 = v1;
    }
    if (L->n_levels == 0) goto out;
    /* the chunk: [dictionary page] data pages */
    int64_t start = (int64_t)w->file.n;
    m->has_dict = any_dict;
    if (any_dict) {
        raw.n = 0;
        for (int64_t i = 0; i < ds.n; i++) {
            if (L->type == 6) wb_u32(&raw, (uint32_t)ds.klen[i]);
            wb_put(&raw, ds.key[i], ds.klen[i]);
        }
        if (pq_compress(o->codec, raw.p ? raw.p : (uint8_t *)"", raw.n, &comp)) goto out;
        put_page_header(&w->file, 2, (int64_t)raw.n, (int64_t)comp.n, ds.n - (o->corrupt == PQW_BAD_DICT_SHORT), 2, 0, 0, 0);
        wb_put(&w->file, comp.p, comp.n);
        m->usize += (int64_t)raw.n;
        m->dict_off = start;
    }
    m->data_off = (int64_t)w->file.n;
    wb_put(&w->file, pages.p, pages.n);
    m->csize = (int64_t)w->file.n - start;
    m->encs[m->n_enc++] = 3;  /* RLE levels */
    if (any_dict) { m->encs[m->n_enc++] = 2; m->encs[m->n_enc++] = 8; }
    if (any_plain || !any_dict) m->encs[m->n_enc++] = 0;
    rc = w->file.oom ? -1 : 0;
out:
    (void)fallback_at;
    free(idx); free(pages.p); free(raw.p); free(comp.p); free(lv.p);
    free(ds.slot); free(ds.key); free(ds.klen);
    return rc;
}

/* Levels and values of leaf k of column c over rows [r0, r1). Value pointers point into the caller's data
 * (numbers are converted into `scratch`). */
static int make_leaf(const pqw_column *c, int k, int64_t r0, int64_t r1, leafdata *L, uint8_t **scratch,
                     int64_t *str_base)
{
    memset(L, 0, sizeof *L);
    int64_t n = r1 - r0, nl = 0, nv;
    int w = c->width > 0 ? c->width : 1;
    switch (c->kind) {
    case PQW_F32_LIST: case PQW_F64_LIST: L->max_def = 3; L->max_rep = 1; nl = n * w; break;
    case PQW_STRING_LIST: {
        L->max_def = 3; L->max_rep = 1;
        for (int64_t r = r0; r < r1; r++) nl += c->counts[r] > 0 ? c->counts[r] : 1;
        break;
    }
    case PQW_IMAGE: L->max_def = 2; nl = n; break;
    default: L->max_def = 1; nl = n;
    }
    static const int ptype[] = {4, 5, 1, 2, 0, 6, 4, 5, 6, 6};
    L->type = ptype[c->kind];
    L->n_levels = nl;
    L->def = malloc(((size_t)nl + 1) * sizeof(uint32_t));
    L->rep = malloc(((size_t)nl + 1) * sizeof(uint32_t));
    L->row_of_level = malloc(((size_t)nl + 1) * sizeof(int64_t));
    L->vptr = malloc(((size_t)nl + 1) * sizeof(uint8_t *));
    L->vlen = malloc(((size_t)nl + 1) * sizeof(size_t));
    int vw = L->type == 5 || L->type == 2 ? 8 : L->type == 0 ? 1 : 4;
    *scratch = malloc((size_t)(nl + 1) * (size_t)vw);
    if (!L->def || !L->rep || !L->row_of_level || !L->vptr || !L->vlen || !*scratch) return -1;
    nv = 0;
    int64_t li = 0;
    for (int64_t r = r0; r < r1; r++) {
        if (c->kind == PQW_F32_LIST || c->kind == PQW_F64_LIST) {
            for (int j = 0; j < w; j++, li++) {
                L->rep[li] = j > 0; L->def[li] = 3; L->row_of_level[li] = r - r0;
                uint8_t *s = *scratch + nv * vw;
                if (c->kind == PQW_F32_LIST) memcpy(s, (const float *)c->data + r * w + j, 4);
                else memcpy(s, (const double *)c->data + r * w + j, 8);
                L->vptr[nv] = s; L->vlen[nv] = (size_t)vw; nv++;
            }
        } else if (c->kind == PQW_STRING_LIST) {
            int cnt = c->counts[r];
            const char *const *strs = c->data;
            if (cnt <= 0) { L->rep[li] = 0; L->def[li] = 1; L->row_of_level[li] = r - r0; li++; continue; }
            for (int j = 0; j < cnt; j++, li++) {
                L->rep[li] = j > 0; L->def[li] = 3; L->row_of_level[li] = r - r0;
                const char *s = strs[*str_base + j];
                L->vptr[nv] = (uint8_t *)s; L->vlen[nv] = strlen(s); nv++;
            }
            *str_base += cnt;
        } else if (c->kind == PQW_IMAGE) {
            L->rep[li] = 0; L->def[li] = 2; L->row_of_level[li] = r - r0; li++;
            if (k == 0) { L->vptr[nv] = (uint8_t *)((const uint8_t *const *)c->data)[r]; L->vlen[nv] = c->lens[r]; }
            else { L->vptr[nv] = (uint8_t *)c->paths[r]; L->vlen[nv] = strlen(c->paths[r]); }
            nv++;
        } else {
            L->rep[li] = 0; L->def[li] = 1; L->row_of_level[li] = r - r0; li++;
            uint8_t *s = *scratch + nv * vw;
            switch (c->kind) {
            case PQW_F32: memcpy(s, (const float *)c->data + r, 4); break;
            case PQW_F64: memcpy(s, (const double *)c->data + r, 8); break;
            case PQW_I32: memcpy(s, (const int32_t *)c->data + r, 4); break;
            case PQW_I64: memcpy(s, (const int64_t *)c->data + r, 8); break;
            case PQW_BOOL: s[0] = ((const uint8_t *)c->data)[r] ? 1 : 0; break;
            }
            if (c->kind == PQW_STRING) { const char *str = ((const char *const *)c->data)[r]; L->vptr[nv] = (uint8_t *)str; L->vlen[nv] = strlen(str); }
            else { L->vptr[nv] = s; L->vlen[nv] = (size_t)vw; }
            nv++;
        }
    }
    L->n_levels = li;
    L->n_vals = nv;
    return 0;
}
static void leaf_free(leafdata *L) { free(L->def); free(L->rep); free(L->row_of_level); free(L->vptr); free(L->vlen); }

static void put_schema(tw *t, const pqw_column *cols, int n)
{
    int n_el = 1;
    for (int i = 0; i < n; i++) n_el += cols[i].kind == PQW_IMAGE ? 3 : (cols[i].kind >= PQW_F32_LIST && cols[i].kind <= PQW_STRING_LIST) ? 3 : 1;
    tw_list(t, 2, 12, n_el);
    tw_elem_begin(t); tw_bin(t, 4, "schema", 6); tw_i32(t, 5, n); tw_end(t);
    static const int ptype[] = {4, 5, 1, 2, 0, 6, 4, 5, 6, 6};
    for (int i = 0; i < n; i++) {
        const pqw_column *c = &cols[i];
        const char *nm = c->name;
        if (c->kind >= PQW_F32_LIST && c->kind <= PQW_STRING_LIST) {
            tw_elem_begin(t); tw_i32(t, 3, 1); tw_bin(t, 4, nm, strlen(nm)); tw_i32(t, 5, 1); tw_i32(t, 6, 3); tw_end(t);
            tw_elem_begin(t); tw_i32(t, 3, 2); tw_bin(t, 4, "list", 4); tw_i32(t, 5, 1); tw_end(t);
            tw_elem_begin(t); tw_i32(t, 1, ptype[c->kind]); tw_i32(t, 3, 1); tw_bin(t, 4, "element", 7);
            if (c->kind == PQW_STRING_LIST) tw_i32(t, 6, 0);
            tw_end(t);
        } else if (c->kind == PQW_IMAGE) {
            tw_elem_begin(t); tw_i32(t, 3, 1); tw_bin(t, 4, nm, strlen(nm)); tw_i32(t, 5, 2); tw_end(t);
            tw_elem_begin(t); tw_i32(t, 1, 6); tw_i32(t, 3, 1); tw_bin(t, 4, "bytes", 5); tw_end(t);
            tw_elem_begin(t); tw_i32(t, 1, 6); tw_i32(t, 3, 1); tw_bin(t, 4, "path", 4); tw_i32(t, 6, 0); tw_end(t);
        } else {
            tw_elem_begin(t); tw_i32(t, 1, ptype[c->kind]); tw_i32(t, 3, 1); tw_bin(t, 4, nm, strlen(nm));
            if (c->kind == PQW_STRING) tw_i32(t, 6, 0);
            tw_end(t);
        }
    }
}

int mact_pqw_write(const char *path, const pqw_column *cols, int n_cols, int64_t n_rows, const pqw_options *o,
                   char *err, size_t el)
{
    writer w = {.o = o, .err = err, .el = el};
    int64_t one = n_rows;
    const int64_t *rgr = o->rg_rows ? o->rg_rows : &one;
    int n_rg = o->rg_rows ? o->n_rg : 1;
    int n_leaves = 0;
    for (int i = 0; i < n_cols; i++) n_leaves += n_leaves_of(cols[i].kind);
    w.cm = calloc((size_t)(n_leaves * n_rg + 1), sizeof *w.cm);
    if (!w.cm) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path);
    wb_put(&w.file, "PAR1", 4);
    int64_t r0 = 0;
    int64_t *str_base = calloc((size_t)n_cols + 1, sizeof *str_base);
    int rc = 0;
    for (int g = 0; g < n_rg && !rc; g++) {
        int64_t r1 = r0 + rgr[g];
        int li = 0;
        for (int i = 0; i < n_cols && !rc; i++)
            for (int k = 0; k < n_leaves_of(cols[i].kind) && !rc; k++, li++) {
                leafdata L;
                uint8_t *scratch = NULL;
                int64_t sb = str_base[i];
                struct chunkmeta *m = &w.cm[g * n_leaves + li];
                const char *sub = leaf_sub(cols[i].kind, k);
                if (cols[i].kind >= PQW_F32_LIST && cols[i].kind <= PQW_STRING_LIST) snprintf(m->path, sizeof m->path, "%s\x1flist\x1f" "element", cols[i].name);
                else if (sub) snprintf(m->path, sizeof m->path, "%s\x1f%s", cols[i].name, sub);
                else snprintf(m->path, sizeof m->path, "%s", cols[i].name);
                if (make_leaf(&cols[i], k, r0, r1, &L, &scratch, &sb) || write_chunk(&w, &L, r1 - r0, m))
                    rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: writing column %s failed", path, cols[i].name);
                if (k == n_leaves_of(cols[i].kind) - 1) str_base[i] = sb;
                leaf_free(&L);
                free(scratch);
            }
        r0 = r1;
    }
    free(str_base);
    if (!rc) {
        size_t meta0 = w.file.n;
        tw t = {.b = &w.file};
        tw_i32(&t, 1, 1);
        put_schema(&t, cols, n_cols);
        tw_i64(&t, 3, n_rows);
        tw_list(&t, 4, 12, n_rg);
        for (int g = 0; g < n_rg; g++) {
            tw_elem_begin(&t);
            tw_list(&t, 1, 12, n_leaves);
            int64_t tot = 0;
            for (int li = 0; li < n_leaves; li++) {
                struct chunkmeta *m = &w.cm[g * n_leaves + li];
                tot += m->usize;
                tw_elem_begin(&t);
                tw_i64(&t, 2, m->has_dict ? m->dict_off : m->data_off);
                tw_begin(&t, 3);
                tw_i32(&t, 1, m->type);
                tw_list(&t, 2, 5, m->n_enc);
                for (int e = 0; e < m->n_enc; e++) tw_zz(&w.file, m->encs[e]);
                int np = 1;
                for (const char *p = m->path; *p; p++) np += *p == '\x1f';
                tw_list(&t, 3, 8, np);
                for (const char *p = m->path;;) {
                    const char *q = strchr(p, '\x1f');
                    size_t len = q ? (size_t)(q - p) : strlen(p);
                    wb_uvar(&w.file, len); wb_put(&w.file, p, len);
                    if (!q) break;
                    p = q + 1;
                }
                tw_i32(&t, 4, o->corrupt == PQW_BAD_BROTLI ? 4 : o->codec);
                tw_i64(&t, 5, m->num_values);
                tw_i64(&t, 6, m->usize);
                tw_i64(&t, 7, m->csize);
                tw_i64(&t, 9, m->data_off);
                if (m->has_dict) tw_i64(&t, 11, m->dict_off);
                tw_end(&t);
                tw_end(&t);
            }
            tw_i64(&t, 2, tot);
            tw_i64(&t, 3, rgr[g]);
            tw_end(&t);
        }
        if (o->n_kv) {
            tw_list(&t, 5, 12, o->n_kv);
            for (int i = 0; i < o->n_kv; i++) {
                tw_elem_begin(&t);
                tw_bin(&t, 1, o->kv[2 * i], strlen(o->kv[2 * i]));
                tw_bin(&t, 2, o->kv[2 * i + 1], strlen(o->kv[2 * i + 1]));
                tw_end(&t);
            }
        }
        const char *cb = "parquet-cpp-arrow version 21.0.0 (mact synth-dataset)";
        tw_bin(&t, 6, cb, strlen(cb));
        wb_u8(&w.file, 0);
        wb_u32(&w.file, (uint32_t)(w.file.n - meta0));
        wb_put(&w.file, "PAR1", 4);
        if (w.file.oom) rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", path);
    }
    if (!rc) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(w.file.p, 1, w.file.n, f) != w.file.n || fclose(f) || rename(tmp, path))
            rc = mact_errf(err, el, MACT_ERR_IO, "%s: cannot write", path);
    }
    free(w.file.p);
    free(w.cm);
    return rc;
}
