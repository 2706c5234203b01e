/* safetensors reader. See safetensors.h for the contract.
 *
 * Validation happens once, up front, so the rest of the runtime can trust every tensor it finds:
 * known dtype, shape and byte range consistent, range inside its file, no two tensors sharing bytes,
 * every name unique across shards and (with an index) exactly where the index says. */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include "base/file.h"
#include "base/json.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mact.h"
#include "base/err.h"

/* one formatter for every module's errors; this module reports -1 */
#define set_err(err, errlen, ...) ((void)mact_errf((err), (errlen), -1, __VA_ARGS__))

static const struct { const char *name; size_t size; } k_dtypes[MACT_DTYPE_COUNT] = {
    [MACT_F32] = {"F32", 4},  [MACT_BF16] = {"BF16", 2}, [MACT_F16] = {"F16", 2},
    [MACT_F64] = {"F64", 8},  [MACT_I64] = {"I64", 8},   [MACT_I32] = {"I32", 4},
    [MACT_I16] = {"I16", 2},  [MACT_I8] = {"I8", 1},     [MACT_U8] = {"U8", 1},
    [MACT_BOOL] = {"BOOL", 1}, [MACT_U16] = {"U16", 2},  [MACT_U32] = {"U32", 4},
    [MACT_U64] = {"U64", 8},
};

const char *mact_dtype_name(int dtype)
{
    return (dtype >= 0 && dtype < MACT_DTYPE_COUNT) ? k_dtypes[dtype].name : "?";
}

size_t mact_dtype_size(int dtype)
{
    return (dtype >= 0 && dtype < MACT_DTYPE_COUNT) ? k_dtypes[dtype].size : 0;
}

int mact_dtype_from_name(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < MACT_DTYPE_COUNT; i++)
        if (strcmp(name, k_dtypes[i].name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------- handle */

typedef struct {
    char *path;
    void *map;   /* NULL for caller-owned memory (mact_st_parse_header) or an empty file */
    size_t size;
} st_file;

typedef struct {
    char *key, *value;
} st_meta;

struct mact_st {
    st_file *files;
    size_t nfiles, capfiles;
    mact_st_tensor *t;
    size_t count, cap;
    st_meta *meta;
    size_t nmeta, capmeta;
};

/* Returns p, or p reallocated to hold `need` elements (updating *cap); NULL on failure with p intact.
 * Returning the pointer (rather than taking a void **) keeps this free of aliasing tricks. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    if (nc > SIZE_MAX / elem) return NULL;
    void *q = realloc(p, nc * elem);
    if (q) *cap = nc;
    return q;
}

void mact_st_close(mact_st *st)
{
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) free((char *)st->t[i].name);
    for (size_t i = 0; i < st->nfiles; i++) {
        if (st->files[i].map) munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    for (size_t i = 0; i < st->nmeta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->t);
    free(st->files);
    free(st->meta);
    free(st);
}

size_t mact_st_count(const mact_st *st) { return st ? st->count : 0; }

const mact_st_tensor *mact_st_at(const mact_st *st, size_t i)
{
    return (st && i < st->count) ? &st->t[i] : NULL;
}

const mact_st_tensor *mact_st_find(const mact_st *st, const char *name)
{
    if (!st || !name) return NULL;
    size_t lo = 0, hi = st->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->t[mid].name);
        if (c == 0) return &st->t[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *mact_st_metadata(const mact_st *st, const char *key)
{
    if (!st || !key) return NULL;
    for (size_t i = 0; i < st->nmeta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}

/* Registers a file; the returned path string is stable (tensors point at it). */
static st_file *add_file(mact_st *st, const char *path, char *err, size_t errlen)
{
    st_file *nf = grow(st->files, &st->capfiles, st->nfiles + 1, sizeof *st->files);
    if (!nf) goto oom;
    st->files = nf;
    st_file *f = &st->files[st->nfiles];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path))) goto oom;
    st->nfiles++;
    return f;
oom:
    set_err(err, errlen, "%s: out of memory", path);
    return NULL;
}

/* ---------------------------------------------------------------- header parsing */

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* JSON numbers arrive as doubles; only exact non-negative integers below 2^53 are trustworthy. */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0)) return -1;
    uint64_t v = (uint64_t)d;
    if ((double)v != d) return -1;
    *out = v;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    size_t idx;
} range;

static int cmp_range(const void *a, const void *b)
{
    const range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int parse_metadata(mact_st *st, const cJSON *md, const char *file, char *err, size_t errlen)
{
    if (!cJSON_IsObject(md)) {
        set_err(err, errlen, "%s: __metadata__ is not a JSON object", file);
        return -1;
    }
    for (const cJSON *kv = md->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv) || !kv->string) {
            set_err(err, errlen, "%s: __metadata__ entry '%s' is not a string", file,
                    kv->string ? kv->string : "?");
            return -1;
        }
        st_meta *nm = grow(st->meta, &st->capmeta, st->nmeta + 1, sizeof *st->meta);
        if (!nm) goto oom;
        st->meta = nm;
        st_meta *m = &st->meta[st->nmeta];
        m->key = strdup(kv->string);
        m->value = strdup(kv->valuestring);
        if (!m->key || !m->value) {
            free(m->key);
            free(m->value);
            goto oom;
        }
        st->nmeta++;
    }
    return 0;
oom:
    set_err(err, errlen, "%s: out of memory", file);
    return -1;
}

static int parse_entry(mact_st *st, const cJSON *e, const char *file, const uint8_t *data,
                       uint64_t dlen, char *err, size_t errlen)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e)) {
        set_err(err, errlen, "%s: tensor '%s': entry is not a JSON object", file, name);
        return -1;
    }
    if (!*name) {
        set_err(err, errlen, "%s: tensor with an empty name", file);
        return -1;
    }
    const cJSON *jd = NULL, *js = NULL, *jo = NULL;
    for (const cJSON *k = e->child; k; k = k->next) {
        const cJSON **slot = strcmp(k->string, "dtype") == 0          ? &jd
                             : strcmp(k->string, "shape") == 0        ? &js
                             : strcmp(k->string, "data_offsets") == 0 ? &jo
                                                                      : NULL;
        if (!slot) {
            set_err(err, errlen, "%s: tensor '%s': unexpected key '%s'", file, name, k->string);
            return -1;
        }
        if (*slot) {
            set_err(err, errlen, "%s: tensor '%s': duplicate key '%s'", file, name, k->string);
            return -1;
        }
        *slot = k;
    }
    if (!jd || !js || !jo) {
        set_err(err, errlen, "%s: tensor '%s': missing '%s'", file, name,
                !jd ? "dtype" : !js ? "shape" : "data_offsets");
        return -1;
    }
    if (!cJSON_IsString(jd)) {
        set_err(err, errlen, "%s: tensor '%s': dtype is not a string", file, name);
        return -1;
    }
    int dtype = mact_dtype_from_name(jd->valuestring);
    if (dtype < 0) {
        set_err(err, errlen, "%s: tensor '%s': unsupported dtype '%s'", file, name, jd->valuestring);
        return -1;
    }
    if (!cJSON_IsArray(js)) {
        set_err(err, errlen, "%s: tensor '%s': shape is not an array", file, name);
        return -1;
    }
    mact_st_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    /* An overflowing product can never match a real byte range; remember it rather than wrap. */
    uint64_t numel = 1;
    int overflow = 0;
    for (const cJSON *d = js->child; d; d = d->next) {
        uint64_t v;
        if (t.ndim >= MACT_ST_MAX_DIMS) {
            set_err(err, errlen, "%s: tensor '%s': more than %d dimensions", file, name, MACT_ST_MAX_DIMS);
            return -1;
        }
        if (json_uint(d, &v) != 0) {
            set_err(err, errlen, "%s: tensor '%s': shape entry %d is not a non-negative integer", file,
                    name, t.ndim);
            return -1;
        }
        t.shape[t.ndim++] = (int64_t)v;
        if (v && numel > UINT64_MAX / v) overflow = 1;
        else numel *= v;
    }
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets is not a [begin, end] pair", file, name);
        return -1;
    }
    uint64_t b, en;
    if (json_uint(jo->child, &b) != 0 || json_uint(jo->child->next, &en) != 0) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets are not non-negative integers", file, name);
        return -1;
    }
    if (b > en) {
        set_err(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] have begin > end", file, name,
                (unsigned long long)b, (unsigned long long)en);
        return -1;
    }
    if (en > dlen) {
        set_err(err, errlen,
                "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes)",
                file, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)dlen);
        return -1;
    }
    size_t dsz = mact_dtype_size(dtype);
    if (overflow || numel > UINT64_MAX / dsz || numel * dsz != en - b) {
        char sh[200];
        size_t n = (size_t)snprintf(sh, sizeof sh, "[");
        for (int i = 0; i < t.ndim && n < sizeof sh; i++)
            n += (size_t)snprintf(sh + n, sizeof sh - n, i ? ", %lld" : "%lld", (long long)t.shape[i]);
        if (n < sizeof sh) snprintf(sh + n, sizeof sh - n, "]");
        set_err(err, errlen,
                "%s: tensor '%s': byte size %llu (data_offsets) does not match shape %s of %s", file,
                name, (unsigned long long)(en - b), sh, k_dtypes[dtype].name);
        return -1;
    }
    t.file = file;
    t.data = data + b;
    t.nbytes = (size_t)(en - b);
    mact_st_tensor *nt = grow(st->t, &st->cap, st->count + 1, sizeof *st->t);
    if (!nt || !(t.name = strdup(name))) {
        if (nt) st->t = nt;
        set_err(err, errlen, "%s: out of memory", file);
        return -1;
    }
    st->t = nt;
    st->t[st->count++] = t;
    return 0;
}

/* Parses one complete file image and appends its tensors (file = that file's stable path). */
static int parse_into(mact_st *st, const uint8_t *buf, size_t len, const char *file, char *err,
                      size_t errlen)
{
    if (len < 8) {
        set_err(err, errlen, "%s: file is %zu bytes, too small for a safetensors header (truncated?)",
                file, len);
        return -1;
    }
    uint64_t hlen = rd64(buf);
    if (hlen > len - 8) {
        set_err(err, errlen, "%s: header length %llu runs past the end of the file (%zu bytes)", file,
                (unsigned long long)hlen, len);
        return -1;
    }
    if (hlen > MACT_ST_MAX_HEADER) {
        set_err(err, errlen, "%s: header length %llu exceeds the %llu-byte limit", file,
                (unsigned long long)hlen, (unsigned long long)MACT_ST_MAX_HEADER);
        return -1;
    }
    if (memchr(buf + 8, 0, (size_t)hlen)) {
        set_err(err, errlen, "%s: malformed JSON header: contains a NUL byte", file);
        return -1;
    }
    /* cJSON wants a terminated string; a private copy also keeps it from ever reading the data. */
    char *json = malloc((size_t)hlen + 1);
    if (!json) {
        set_err(err, errlen, "%s: out of memory for a %llu-byte header", file, (unsigned long long)hlen);
        return -1;
    }
    memcpy(json, buf + 8, (size_t)hlen);
    json[hlen] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)hlen, &end, 0);
    if (!root) {
        long at = end ? (long)(end - json) : -1;
        set_err(err, errlen, "%s: malformed JSON header (error near byte %ld of %llu)", file, at,
                (unsigned long long)hlen);
        free(json);
        return -1;
    }
    int rc = -1;
    /* Writers pad the header with spaces up to an 8-byte boundary; anything else is garbage. */
    for (const char *p = end; p < json + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            set_err(err, errlen, "%s: malformed JSON header: trailing bytes after the object (byte %ld)",
                    file, (long)(p - json));
            goto out;
        }
    if (!cJSON_IsObject(root)) {
        set_err(err, errlen, "%s: malformed JSON header: not a JSON object", file);
        goto out;
    }
    const uint8_t *data = buf + 8 + hlen;
    uint64_t dlen = len - 8 - hlen;
    size_t first = st->count;
    int have_meta = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (have_meta++) {
                set_err(err, errlen, "%s: duplicate __metadata__", file);
                goto out;
            }
            if (parse_metadata(st, e, file, err, errlen) != 0) goto out;
        } else if (parse_entry(st, e, file, data, dlen, err, errlen) != 0) {
            goto out;
        }
    }
    /* Overlap: after sorting by begin, each non-empty range must start at or after the furthest
     * end seen so far. Empty tensors own no bytes and may sit anywhere. */
    size_t n = st->count - first;
    if (n > 1) {
        range *r = malloc(n * sizeof *r);
        if (!r) {
            set_err(err, errlen, "%s: out of memory", file);
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            const mact_st_tensor *t = &st->t[first + i];
            r[i].begin = (uint64_t)((const uint8_t *)t->data - data);
            r[i].end = r[i].begin + t->nbytes;
            r[i].idx = first + i;
        }
        qsort(r, n, sizeof *r, cmp_range);
        uint64_t max_end = 0;
        size_t max_idx = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if (r[i].begin == r[i].end) continue;
            if (max_idx != SIZE_MAX && r[i].begin < max_end) {
                set_err(err, errlen,
                        "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap in the data section",
                        file, st->t[max_idx].name,
                        (unsigned long long)((const uint8_t *)st->t[max_idx].data - data),
                        (unsigned long long)((const uint8_t *)st->t[max_idx].data - data +
                                             st->t[max_idx].nbytes),
                        st->t[r[i].idx].name, (unsigned long long)r[i].begin,
                        (unsigned long long)r[i].end);
                free(r);
                goto out;
            }
            if (r[i].end > max_end) {
                max_end = r[i].end;
                max_idx = r[i].idx;
            }
        }
        free(r);
    }
    rc = 0;
out:
    cJSON_Delete(root);
    free(json);
    return rc;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const mact_st_tensor *)a)->name, ((const mact_st_tensor *)b)->name);
}

/* Sorts by name (for mact_st_find) and rejects any name seen twice, within a file or across files. */
static int finalize(mact_st *st, char *err, size_t errlen)
{
    if (st->count > 1) qsort(st->t, st->count, sizeof *st->t, cmp_tensor_name);
    for (size_t i = 1; i < st->count; i++)
        if (strcmp(st->t[i - 1].name, st->t[i].name) == 0) {
            if (st->t[i - 1].file == st->t[i].file)
                set_err(err, errlen, "%s: duplicate tensor '%s'", st->t[i].file, st->t[i].name);
            else
                set_err(err, errlen, "duplicate tensor '%s' in %s and %s", st->t[i].name,
                        st->t[i - 1].file, st->t[i].file);
            return -1;
        }
    return 0;
}

int mact_st_parse_header(const uint8_t *buf, size_t len, const char *what, mact_st **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    const char *label = what ? what : "<memory>";
    mact_st *st = calloc(1, sizeof *st);
    if (!st) {
        set_err(err, errlen, "%s: out of memory", label);
        return -1;
    }
    st_file *f = add_file(st, label, err, errlen);
    if (!f || parse_into(st, buf, len, f->path, err, errlen) != 0 || finalize(st, err, errlen) != 0) {
        mact_st_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

/* ---------------------------------------------------------------- files */

/* Maps path read-only and parses it into st. */
static int open_one(mact_st *st, const char *path, const char *role, char *err, size_t errlen)
{
    /* checked before the open: a FIFO or device would block or stream */
    char why[512];
    int fd = mact_file_open_regular(path, why, sizeof why);
    if (fd < 0) {
        set_err(err, errlen, "cannot open %s: %s", role, why);
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        set_err(err, errlen, "%s: cannot open %s: not a regular file", path, role);
        close(fd);
        return -1;
    }
    st_file *f = add_file(st, path, err, errlen);
    if (!f) {
        close(fd);
        return -1;
    }
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            set_err(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        f->map = m;
    }
    close(fd);
    return parse_into(st, f->map, f->size, f->path, err, errlen);
}

typedef struct {
    const char *tensor, *shard;
    size_t file; /* index into st->files */
} idx_entry;

static int cmp_idx_tensor(const void *a, const void *b)
{
    return strcmp(((const idx_entry *)a)->tensor, ((const idx_entry *)b)->tensor);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int open_index(mact_st *st, const char *index_path, char *err, size_t errlen)
{
    int rc = -1;
    char *text = NULL, *dir = NULL, *spath = NULL;
    const char **shards = NULL;
    idx_entry *ents = NULL;
    cJSON *root = NULL;

    size_t n = 0;
    char why[512];
    if (mact_file_read_all(index_path, (size_t)MACT_ST_MAX_HEADER, &text, &n, why, sizeof why)) {
        set_err(err, errlen, "cannot read the index: %s", why);
        return -1;
    }
    if (mact_json_parse(text, n, index_path, &root, why, sizeof why)) {
        set_err(err, errlen, "malformed JSON in the index: %s", why);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        set_err(err, errlen, "%s: malformed JSON in the index (not an object)", index_path);
        goto out;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        set_err(err, errlen, "%s: index has no \"weight_map\" object", index_path);
        goto out;
    }
    size_t ne = (size_t)cJSON_GetArraySize(wm);
    if (ne == 0) {
        set_err(err, errlen, "%s: index has an empty weight_map", index_path);
        goto out;
    }
    ents = calloc(ne, sizeof *ents);
    shards = calloc(ne, sizeof *shards);
    if (!ents || !shards) {
        set_err(err, errlen, "%s: out of memory", index_path);
        goto out;
    }
    size_t k = 0;
    for (const cJSON *e = wm->child; e; e = e->next, k++) {
        const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
        /* Shards live next to the index; refusing separators keeps a crafted index from pointing
         * the loader at arbitrary files. */
        if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
            set_err(err, errlen, "%s: weight_map entry '%s' -> '%s' is not a plain shard file name", index_path,
                    e->string, s ? s : "(not a string)");
            goto out;
        }
        ents[k].tensor = e->string;
        ents[k].shard = s;
        shards[k] = s;
    }
    qsort(ents, ne, sizeof *ents, cmp_idx_tensor);
    for (size_t i = 1; i < ne; i++)
        if (strcmp(ents[i - 1].tensor, ents[i].tensor) == 0) {
            set_err(err, errlen, "%s: tensor '%s' listed twice in the weight_map", index_path,
                    ents[i].tensor);
            goto out;
        }
    qsort(shards, ne, sizeof *shards, cmp_str_ptr);
    size_t ns = 0;
    for (size_t i = 0; i < ne; i++)
        if (ns == 0 || strcmp(shards[ns - 1], shards[i]) != 0) shards[ns++] = shards[i];

    const char *slash = strrchr(index_path, '/');
    dir = slash ? strndup(index_path, (size_t)(slash - index_path)) : strdup(".");
    if (slash && slash == index_path) {
        free(dir);
        dir = strdup("");
    }
    if (!dir) {
        set_err(err, errlen, "%s: out of memory", index_path);
        goto out;
    }
    /* shards[i] is opened as st->files[base + i]. */
    size_t base = st->nfiles;
    for (size_t i = 0; i < ns; i++) {
        free(spath);
        if (!(spath = join_path(dir, shards[i]))) {
            set_err(err, errlen, "%s: out of memory", index_path);
            goto out;
        }
        char role[64 + 256];
        snprintf(role, sizeof role, "shard '%.255s' listed in the index", shards[i]);
        if (open_one(st, spath, role, err, errlen) != 0) goto out;
    }
    for (size_t i = 0; i < ne; i++) {
        const char **hit = bsearch(&ents[i].shard, shards, ns, sizeof *shards, cmp_str_ptr);
        ents[i].file = base + (size_t)(hit - shards);
    }
    if (finalize(st, err, errlen) != 0) goto out;

    /* Both lists are sorted by name: walk them together. */
    size_t i = 0, j = 0;
    while (i < st->count || j < ne) {
        int c = i >= st->count ? 1 : j >= ne ? -1 : strcmp(st->t[i].name, ents[j].tensor);
        if (c < 0) {
            set_err(err, errlen, "%s: tensor '%s' is not listed in the index %s", st->t[i].file,
                    st->t[i].name, index_path);
            goto out;
        }
        const char *want = st->files[ents[j].file].path;
        if (c > 0) {
            set_err(err, errlen,
                    "%s: index lists tensor '%s' in shard '%s' but that shard does not contain it",
                    index_path, ents[j].tensor, ents[j].shard);
            goto out;
        }
        if (st->t[i].file != want) {
            set_err(err, errlen,
                    "%s: index lists tensor '%s' in shard '%s' but that shard does not contain it "
                    "(it is in %s)",
                    index_path, ents[j].tensor, ents[j].shard, st->t[i].file);
            goto out;
        }
        i++;
        j++;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    free(text);
    free(dir);
    free(spath);
    free(shards);
    free(ents);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int mact_st_open(const char *path, mact_st **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path) {
        set_err(err, errlen, "mact_st_open: path is NULL");
        return -1;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        set_err(err, errlen, "%s: cannot open checkpoint: %s", path, strerror(errno));
        return -1;
    }
    mact_st *st = calloc(1, sizeof *st);
    if (!st) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc;
    if (S_ISDIR(sb.st_mode)) {
        char *single = join_path(path, "model.safetensors");
        char *index = join_path(path, "model.safetensors.index.json");
        if (!single || !index) {
            set_err(err, errlen, "%s: out of memory", path);
            rc = -1;
        } else if (stat(single, &sb) == 0) {
            rc = open_one(st, single, "checkpoint", err, errlen);
            if (rc == 0) rc = finalize(st, err, errlen);
        } else if (stat(index, &sb) == 0) {
            rc = open_index(st, index, err, errlen);
        } else {
            set_err(err, errlen, "%s: neither model.safetensors nor model.safetensors.index.json found",
                    path);
            rc = -1;
        }
        free(single);
        free(index);
    } else if (ends_with(path, ".json")) {
        rc = open_index(st, path, err, errlen);
    } else {
        rc = open_one(st, path, "checkpoint", err, errlen);
        if (rc == 0) rc = finalize(st, err, errlen);
    }
    if (rc != 0) {
        mact_st_close(st);
        return -1;
    }
    *out = st;
    return 0;
}
