/* ViT depth pruning of a checkpoint (prune.h; docs/compression.md). */
#include "compress/prune.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "io/safetensors.h"
#include "compress/st_write.h"

#define E(code, ...) mact_errf(err, errlen, (code), __VA_ARGS__)
static const char BLOCKS[] = "image_vit.transformer.resblocks.";

/* ---------------------------------------------------------------- small files */

#define JSON_MAX ((size_t)256 << 20)  /* config.json, the shard index */

static int write_all(const char *path, const void *data, size_t n, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f) return E(MACT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    int ok = fwrite(data, 1, n, f) == n;
    int e = errno;
    if (fclose(f) != 0 && ok) { ok = 0; e = errno; }
    if (!ok) return E(MACT_ERR_IO, "cannot write %s: %s", path, strerror(e));
    return 0;
}

static int copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
    FILE *in = fopen(src, "rb");
    if (!in) return E(MACT_ERR_IO, "cannot read %s: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) { int e = errno; fclose(in); return E(MACT_ERR_IO, "cannot create %s: %s", dst, strerror(e)); }
    static const size_t B = (size_t)4 << 20;
    char *buf = malloc(B);
    int ok = buf != NULL, e = ENOMEM;
    while (ok) {
        size_t k = fread(buf, 1, B, in);
        if (k && fwrite(buf, 1, k, out) != k) { ok = 0; e = errno; }
        if (k < B) { if (ferror(in)) { ok = 0; e = errno; } break; }
    }
    free(buf);
    fclose(in);
    if (fclose(out) != 0 && ok) { ok = 0; e = errno; }
    if (!ok) return E(MACT_ERR_IO, "cannot copy %s to %s: %s", src, dst, strerror(e));
    return 0;
}

static int remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return -1;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *de;
            while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", path, de->d_name);
                remove_tree(p);
            }
            closedir(d);
        }
        return rmdir(path);
    }
    return unlink(path);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* ---------------------------------------------------------------- a JSON scanner that keeps byte positions */

static size_t jws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* s[*i] == '"': past the closing quote */
static int jstring(const char *s, size_t n, size_t *i)
{
    size_t k = *i + 1;
    while (k < n && s[k] != '"') k += s[k] == '\\' ? 2 : 1;
    if (k >= n) return -1;
    *i = k + 1;
    return 0;
}

/* any value at *i (after whitespace): *i past it */
static int jvalue(const char *s, size_t n, size_t *i, int depth)
{
    size_t k = jws(s, n, *i);
    if (k >= n || depth > 64) return -1;
    if (s[k] == '"') {
        if (jstring(s, n, &k)) return -1;
    } else if (s[k] == '{' || s[k] == '[') {
        char close = s[k] == '{' ? '}' : ']';
        k = jws(s, n, k + 1);
        if (k < n && s[k] == close) k++;
        else
            for (;;) {
                if (close == '}') {
                    if (k >= n || s[k] != '"' || jstring(s, n, &k)) return -1;
                    k = jws(s, n, k);
                    if (k >= n || s[k] != ':') return -1;
                    k++;
                }
                if (jvalue(s, n, &k, depth + 1)) return -1;
                k = jws(s, n, k);
                if (k < n && s[k] == ',') { k = jws(s, n, k + 1); continue; }
                if (k < n && s[k] == close) { k++; break; }
                return -1;
            }
    } else {
        size_t b = k;
        while (k < n && !strchr(",}] \t\r\n", s[k])) k++;
        if (k == b) return -1;
    }
    *i = k;
    return 0;
}

/* the member `key` of the object at s[obj] == '{': its value's span [*vs, *ve); 1 found, 0 absent, -1 bad */
static int jmember(const char *s, size_t n, size_t obj, const char *key, size_t *vs, size_t *ve)
{
    size_t k = jws(s, n, obj + 1), kl = strlen(key);
    if (k < n && s[k] == '}') return 0;
    for (;;) {
        size_t ks = k;
        if (k >= n || s[k] != '"' || jstring(s, n, &k)) return -1;
        int match = k - ks - 2 == kl && !memcmp(s + ks + 1, key, kl);
        k = jws(s, n, k);
        if (k >= n || s[k] != ':') return -1;
        size_t v = jws(s, n, k + 1);
        k = v;
        if (jvalue(s, n, &k, 1)) return -1;
        if (match) { *vs = v; *ve = k; return 1; }
        k = jws(s, n, k);
        if (k < n && s[k] == ',') { k = jws(s, n, k + 1); continue; }
        if (k < n && s[k] == '}') return 0;
        return -1;
    }
}

/* ---------------------------------------------------------------- config.json */

typedef struct { size_t a, b; char text[64]; } edit;

static int cmp_edit(const void *x, const void *y)
{
    const edit *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* value text at [a, b) parses as the integer v */
static int num_is(const char *s, size_t a, size_t b, int v)
{
    char t[64];
    if (b - a >= sizeof t) return 0;
    memcpy(t, s + a, b - a);
    t[b - a] = 0;
    char *end;
    double d = strtod(t, &end);
    return end != t && *end == 0 && d == (double)v;
}

char *mact_prune_edit_config(const char *json, int layers, const int *taps, int n_taps, char *err, size_t errlen)
{
    const size_t n = strlen(json);
    size_t root = jws(json, n, 0), vs, ve, as, ae;
    if (root >= n || json[root] != '{') { E(MACT_ERR_FORMAT, "config.json: not a JSON object"); return NULL; }
    edit ed[2 + MACT_PRUNE_MAX_TAPS];
    int ne = 0;
    if (jmember(json, n, root, "vit_config", &vs, &ve) != 1 || json[vs] != '{' ||
        jmember(json, n, root, "adapter_config", &as, &ae) != 1 || json[as] != '{') {
        E(MACT_ERR_FORMAT, "config.json: vit_config and adapter_config must be objects");
        return NULL;
    }
    size_t a, b;
    int r = jmember(json, n, vs, "num_hidden_layers", &a, &b);
    if (r < 0) { E(MACT_ERR_FORMAT, "config.json: malformed vit_config"); return NULL; }
    if (r == 1) {
        if (!num_is(json, a, b, layers)) {
            ed[ne] = (edit){a, b, ""};
            snprintf(ed[ne++].text, sizeof ed[0].text, "%d", layers);
        }
    } else {  /* absent (the class default 27): inserted as the object's first member */
        size_t k = jws(json, n, vs + 1);
        ed[ne] = (edit){vs + 1, vs + 1, ""};
        snprintf(ed[ne++].text, sizeof ed[0].text, "\"num_hidden_layers\": %d%s", layers, json[k] == '}' ? "" : ", ");
    }
    r = jmember(json, n, as, "vit_layers", &a, &b);
    if (r < 0) { E(MACT_ERR_FORMAT, "config.json: malformed adapter_config"); return NULL; }
    if (r == 1) {
        if (json[a] != '[') { E(MACT_ERR_FORMAT, "config.json: adapter_config.vit_layers is not a list"); return NULL; }
        size_t k = jws(json, n, a + 1);
        for (int i = 0; i < n_taps; i++) {
            size_t es = k;
            if (jvalue(json, n, &k, 1)) { E(MACT_ERR_FORMAT, "config.json: malformed vit_layers"); return NULL; }
            if (!num_is(json, es, k, taps[i])) {
                ed[ne] = (edit){es, k, ""};
                snprintf(ed[ne++].text, sizeof ed[0].text, "%d", taps[i]);
            }
            k = jws(json, n, k);
            if (i + 1 < n_taps) {
                if (json[k] != ',') { E(MACT_ERR_FORMAT, "config.json: vit_layers has fewer than %d entries", n_taps); return NULL; }
                k = jws(json, n, k + 1);
            }
        }
        if (json[k] != ']') { E(MACT_ERR_FORMAT, "config.json: vit_layers has more than %d entries", n_taps); return NULL; }
    } else {
        size_t k = jws(json, n, as + 1);
        char t[64] = "\"vit_layers\": [";
        for (int i = 0; i < n_taps; i++)
            snprintf(t + strlen(t), sizeof t - strlen(t), "%s%d", i ? ", " : "", taps[i]);
        snprintf(t + strlen(t), sizeof t - strlen(t), "]%s", json[k] == '}' ? "" : ", ");
        ed[ne] = (edit){as + 1, as + 1, ""};
        memcpy(ed[ne++].text, t, sizeof t);
    }
    qsort(ed, (size_t)ne, sizeof *ed, cmp_edit);
    size_t cap = n + 1;
    for (int i = 0; i < ne; i++) cap += strlen(ed[i].text);
    char *out = malloc(cap);
    if (!out) { E(MACT_ERR_NOMEM, "out of memory"); return NULL; }
    size_t o = 0, p = 0;
    for (int i = 0; i < ne; i++) {
        memcpy(out + o, json + p, ed[i].a - p);
        o += ed[i].a - p;
        size_t l = strlen(ed[i].text);
        memcpy(out + o, ed[i].text, l);
        o += l;
        p = ed[i].b;
    }
    memcpy(out + o, json + p, n - p);
    out[o + n - p] = 0;
    /* the result must say what was asked */
    cJSON *j = cJSON_Parse(out);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vit_config");
    const cJSON *ad = cJSON_GetObjectItemCaseSensitive(j, "adapter_config");
    const cJSON *L = cJSON_GetObjectItemCaseSensitive(v, "num_hidden_layers");
    const cJSON *T = cJSON_GetObjectItemCaseSensitive(ad, "vit_layers");
    int ok = cJSON_IsNumber(L) && L->valuedouble == layers && cJSON_IsArray(T) && cJSON_GetArraySize(T) == n_taps;
    for (int i = 0; ok && i < n_taps; i++) ok = cJSON_GetArrayItem(T, i)->valuedouble == taps[i];
    cJSON_Delete(j);
    if (!ok) {
        free(out);
        E(MACT_ERR_FORMAT, "config.json: the edited text does not parse back to the new values");
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- names and geometry */

/* the block index of a ViT block tensor (any prefix), -1 for any other name */
static long block_of(const char *name, const char **after)
{
    const char *p = strstr(name, BLOCKS);
    if (!p) return -1;
    p += sizeof BLOCKS - 1;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    char *end;
    long v = strtol(p, &end, 10);
    if (*end != '.' || v > INT_MAX) return -1;
    if (after) *after = end;
    return v;
}

int mact_prune_map_name(const char *name, const int *student_of, int n, char *out, size_t outlen)
{
    const char *after;
    long b = block_of(name, &after);
    if (b < 0) {
        snprintf(out, outlen, "%s", name);
        return 0;
    }
    if (b >= n || student_of[b] < 0) return -1;
    const char *p = strstr(name, BLOCKS) + sizeof BLOCKS - 1;
    snprintf(out, outlen, "%.*s%d%s", (int)(p - name), name, student_of[b], after);
    return 1;
}

int mact_prune_geometry(const char *dir, mact_vit_geometry *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    char path[PATH_MAX], *txt = NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc0 = mact_file_read_text(path, JSON_MAX, &txt, NULL, err, errlen);
    if (rc0) return rc0;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vit_config");
    const cJSON *ad = cJSON_GetObjectItemCaseSensitive(j, "adapter_config");
    int rc = 0;
    if (!cJSON_IsObject(v) || !cJSON_IsObject(ad)) {
        rc = E(MACT_ERR_FORMAT, "%s: vit_config and adapter_config must be objects", path);
        goto out;
    }
    const cJSON *L = cJSON_GetObjectItemCaseSensitive(v, "num_hidden_layers");
    g->cfg_layers = 27;  /* the class default (docs/spec/molmoact2.md 1.1) */
    if (L && !cJSON_IsNull(L)) {
        if (!cJSON_IsNumber(L) || L->valuedouble != floor(L->valuedouble) || L->valuedouble < 1 ||
            L->valuedouble > MACT_PRUNE_MAX_BLOCKS) {
            rc = E(MACT_ERR_FORMAT, "%s: vit_config.num_hidden_layers must be an integer in 1..%d", path,
                   MACT_PRUNE_MAX_BLOCKS);
            goto out;
        }
        g->cfg_layers = (int)L->valuedouble;
    }
    const cJSON *T = cJSON_GetObjectItemCaseSensitive(ad, "vit_layers");
    if (T && !cJSON_IsNull(T)) {
        int nt = cJSON_IsArray(T) ? cJSON_GetArraySize(T) : -1;
        if (nt < 1 || nt > MACT_PRUNE_MAX_TAPS) {
            rc = E(MACT_ERR_FORMAT, "%s: adapter_config.vit_layers must list 1..%d layers", path, MACT_PRUNE_MAX_TAPS);
            goto out;
        }
        g->n_taps = nt;
        for (int i = 0; i < nt; i++) {
            const cJSON *x = cJSON_GetArrayItem(T, i);
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 1e6) {
                rc = E(MACT_ERR_FORMAT, "%s: adapter_config.vit_layers[%d] is not an integer", path, i);
                goto out;
            }
            g->taps_raw[i] = (int)x->valuedouble;
        }
    } else {
        g->n_taps = 2;
        g->taps_raw[0] = -3;
        g->taps_raw[1] = -9;
    }
    for (int i = 0; i < g->n_taps; i++) {
        int t = g->taps_raw[i];
        g->taps_abs[i] = t < 0 ? g->cfg_layers + t : t;
    }
    /* stored blocks: the indices of every ViT block tensor, which must run 0..stored-1 */
    mact_st *st = NULL;
    if (mact_st_open(dir, &st, err, errlen)) { rc = MACT_ERR_FORMAT; goto out; }
    unsigned char *seen = calloc(MACT_PRUNE_MAX_BLOCKS, 1);
    if (!seen) { mact_st_close(st); rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
    int maxb = -1;
    for (size_t i = 0; i < mact_st_count(st); i++) {
        long b = block_of(mact_st_at(st, i)->name, NULL);
        if (b < 0) continue;
        if (b >= MACT_PRUNE_MAX_BLOCKS) {
            rc = E(MACT_ERR_UNSUPPORTED, "%s: ViT block %ld is beyond %d blocks", dir, b, MACT_PRUNE_MAX_BLOCKS);
            break;
        }
        seen[b] = 1;
        if (b > maxb) maxb = (int)b;
    }
    for (int b = 0; !rc && b <= maxb; b++)
        if (!seen[b]) rc = E(MACT_ERR_MODEL, "%s: ViT block %d is missing but block %d is stored", dir, b, maxb);
    free(seen);
    mact_st_close(st);
    if (rc) goto out;
    g->stored = maxb + 1;
    if (g->stored == 0) { rc = E(MACT_ERR_MODEL, "%s: the checkpoint stores no ViT blocks (%s*)", dir, BLOCKS); goto out; }
    if (g->stored > g->cfg_layers) {
        rc = E(MACT_ERR_MODEL, "%s: %d ViT blocks stored but vit_config.num_hidden_layers is %d", dir, g->stored,
               g->cfg_layers);
        goto out;
    }
    for (int i = 0; i < g->n_taps; i++)
        if (g->taps_abs[i] < 0 || g->taps_abs[i] >= g->stored) {
            rc = E(MACT_ERR_MODEL, "%s: adapter tap vit_layers[%d] = %d is layer %d, not among the %d stored blocks",
                   dir, i, g->taps_raw[i], g->taps_abs[i], g->stored);
            goto out;
        }
out:
    cJSON_Delete(j);
    return rc;
}

int mact_prune_check_keep(const mact_vit_geometry *g, const int *keep, int n_keep, char *err, size_t errlen)
{
    if (n_keep < 1) return E(MACT_ERR_INPUT, "--keep: the list is empty");
    for (int i = 0; i < n_keep; i++) {
        if (keep[i] < 0 || keep[i] >= g->stored)
            return E(MACT_ERR_INPUT, "--keep: index %d is out of range (the checkpoint stores ViT blocks 0..%d)",
                     keep[i], g->stored - 1);
        for (int k = 0; k < i; k++)
            if (keep[k] == keep[i]) return E(MACT_ERR_INPUT, "--keep: block %d is listed twice", keep[i]);
        if (i && keep[i] < keep[i - 1])
            return E(MACT_ERR_INPUT, "--keep: the list is not increasing (%d after %d); student block j is teacher "
                     "block keep[j], so the order is the tower's", keep[i], keep[i - 1]);
    }
    return 0;
}

/* Upstream builds the tower up to its deepest tap (27 configured, 25 kept for taps at 24 and 18): a student block
 * after the deepest tap would feed nothing and be an unexpected key there. */
static int last_block_tapped(const int *keep, int n_keep, const int *sblock, int n_taps, char *err, size_t errlen)
{
    int deep = 0;
    for (int i = 0; i < n_taps; i++) if (sblock[i] > deep) deep = sblock[i];
    char after[48];
    if (deep + 2 == n_keep) snprintf(after, sizeof after, "block %d", deep + 1);
    else snprintf(after, sizeof after, "blocks %d..%d", deep + 1, n_keep - 1);
    if (deep != n_keep - 1)
        return E(MACT_ERR_INPUT, "the deepest student tap reads student block %d (teacher layer %d) but --keep keeps %d "
                 "blocks: student %s would feed nothing, and upstream MolmoAct2 builds the tower only up to its "
                 "deepest tap, so their tensors would be unexpected keys; drop them or tap the last block", deep,
                 keep[deep], n_keep, after);
    return 0;
}

int mact_prune_taps(const mact_vit_geometry *g, const int *keep, int n_keep, const int *user, int n_user, int *raw,
                    int *sblock, int *lands, char *err, size_t errlen)
{
    if (user) {
        if (n_user != g->n_taps)
            return E(MACT_ERR_INPUT, "--taps: %d taps given but the checkpoint has %d (the pooling weights take "
                     "%d x vit_hidden features)", n_user, g->n_taps, g->n_taps);
        for (int i = 0; i < n_user; i++) {
            int s = user[i] < 0 ? n_keep + user[i] : user[i];
            if (s < 0 || s >= n_keep)
                return E(MACT_ERR_INPUT, "--taps: tap %d is out of range for a %d-block student (taps are -%d..%d, "
                         "negative ones counted from %d)", user[i], n_keep, n_keep, n_keep - 1, n_keep);
            raw[i] = user[i];
            sblock[i] = s;
            lands[i] = keep[s];
        }
        return last_block_tapped(keep, n_keep, sblock, n_user, err, errlen);
    }
    for (int i = 0; i < g->n_taps; i++) {
        int t = g->taps_abs[i], j = -1;
        for (int k = 0; k < n_keep; k++)
            if (keep[k] == t) j = k;
        if (j < 0)
            return E(MACT_ERR_INPUT, "--keep drops teacher layer %d, which adapter tap vit_layers[%d] = %d reads: keep "
                     "it, or give the student's taps with --taps", t, i, g->taps_raw[i]);
        sblock[i] = j;
        raw[i] = g->taps_raw[i] < 0 ? j - n_keep : j;
        lands[i] = t;
    }
    return last_block_tapped(keep, n_keep, sblock, g->n_taps, err, errlen);
}

/* ---------------------------------------------------------------- one safetensors file */

typedef struct {
    const mact_st_tensor *t;
    char *name;        /* output name */
    size_t pos;        /* data order in the input */
} otensor;

static int cmp_pos(const void *a, const void *b)
{
    const otensor *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_name(const void *a, const void *b) { return strcmp(((const otensor *)a)->name, ((const otensor *)b)->name); }

/* what the safetensors packages write: widest dtype first, then by name */
static int cmp_width_name(const void *a, const void *b)
{
    const otensor *x = a, *y = b;
    size_t sx = mact_dtype_size(x->t->dtype), sy = mact_dtype_size(y->t->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_data(const void *a, const void *b)
{
    const mact_st_tensor *x = *(const mact_st_tensor *const *)a, *y = *(const mact_st_tensor *const *)b;
    const char *p = x->data, *q = y->data;
    if (p != q) return p < q ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

typedef struct {
    const int *student_of;
    int n_blocks;
} name_map;

/* Does the file hold any ViT block tensor? (1 yes, 0 no, <0 error) */
static int has_blocks(const char *path, char *err, size_t errlen)
{
    mact_st *st;
    if (mact_st_open(path, &st, err, errlen)) return MACT_ERR_FORMAT;
    int yes = 0;
    for (size_t i = 0; !yes && i < mact_st_count(st); i++) yes = block_of(mact_st_at(st, i)->name, NULL) >= 0;
    mact_st_close(st);
    return yes;
}

/* src -> dst with ViT blocks renamed / dropped, in the input's order rule; *n_out tensors written (a file left
 * with none is not written), *bytes their data bytes. Every tensor's bytes are copied unchanged. */
static int rewrite_st(const char *src, const char *dst, const name_map *nm, size_t *n_out, uint64_t *bytes,
                      cJSON *weight_map /* the new index's, or NULL */, const char *shard_name, FILE *log, char *err, size_t errlen)
{
    mact_st *st;
    if (mact_st_open(src, &st, err, errlen)) return MACT_ERR_FORMAT;
    int rc = 0;
    size_t n = mact_st_count(st), k = 0;
    char *hdr = NULL, *meta = NULL, *raw = NULL;
    const mact_st_tensor **by_data = malloc((n ? n : 1) * sizeof *by_data);
    otensor *o = calloc(n ? n : 1, sizeof *o);
    if (!by_data || !o) { rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) by_data[i] = mact_st_at(st, i);
    qsort(by_data, n, sizeof *by_data, cmp_data);
    /* the input's order rule, judged on its own names */
    int width_name = 1, by_name = 1;
    for (size_t i = 1; i < n; i++) {
        const mact_st_tensor *a = by_data[i - 1], *b = by_data[i];
        size_t sa = mact_dtype_size(a->dtype), sb = mact_dtype_size(b->dtype);
        if (strcmp(a->name, b->name) > 0) by_name = 0;
        if (sa < sb || (sa == sb && strcmp(a->name, b->name) > 0)) width_name = 0;
    }
    for (size_t i = 0; i < n; i++) {
        char buf[2048];
        int r = mact_prune_map_name(by_data[i]->name, nm->student_of, nm->n_blocks, buf, sizeof buf);
        if (r < 0) continue;
        o[k].t = by_data[i];
        o[k].pos = i;
        o[k].name = strdup(buf);
        if (!o[k].name) { rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
        k++;
    }
    if (width_name) qsort(o, k, sizeof *o, cmp_width_name);
    else if (by_name) qsort(o, k, sizeof *o, cmp_name);
    else qsort(o, k, sizeof *o, cmp_pos);  /* any other order: the input's, renamed tensors in their slots */
    for (size_t i = 1; i < k; i++)
        if (!strcmp(o[i - 1].name, o[i].name)) { rc = E(MACT_ERR_MODEL, "%s: two tensors named %s", src, o[i].name); goto out; }
    /* the input's __metadata__, verbatim, in the same place (first or last) */
    FILE *f = fopen(src, "rb");
    uint8_t l8[8];
    uint64_t hl = 0;
    if (!f || fread(l8, 1, 8, f) != 8) { if (f) fclose(f); rc = E(MACT_ERR_IO, "cannot read %s", src); goto out; }
    for (int i = 0; i < 8; i++) hl |= (uint64_t)l8[i] << (8 * i);
    raw = hl <= MACT_ST_MAX_HEADER ? malloc(hl + 1) : NULL;
    if (!raw || fread(raw, 1, hl, f) != hl) { fclose(f); rc = E(MACT_ERR_IO, "cannot read the header of %s", src); goto out; }
    fclose(f);
    raw[hl] = 0;
    size_t ms, me, root = jws(raw, hl, 0);
    int meta_last = 0;
    if (jmember(raw, hl, root, "__metadata__", &ms, &me) == 1) {
        meta = strndup(raw + ms, me - ms);
        size_t first = jws(raw, hl, root + 1) + 1;  /* past the first key's opening quote */
        meta_last = strncmp(raw + first, "__metadata__\"", 13) != 0;
        if (!meta) { rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
    }
    *n_out = k;
    *bytes = 0;
    if (k == 0) {
        if (log) fprintf(log, "  %s: every tensor dropped, not written\n", shard_name);
        goto out;
    }
    mact_stw_entry *ents = malloc(k * sizeof *ents);
    if (!ents) { rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < k; i++)
        ents[i] = (mact_stw_entry){o[i].name, o[i].t->dtype, o[i].t->ndim, o[i].t->shape, o[i].t->nbytes};
    size_t hn;
    hdr = mact_stw_header(ents, k, meta, meta_last, &hn, bytes);
    free(ents);
    if (!hdr) { rc = E(MACT_ERR_NOMEM, "out of memory"); goto out; }
    FILE *w = fopen(dst, "wb");
    if (!w) { rc = E(MACT_ERR_IO, "cannot create %s: %s", dst, strerror(errno)); goto out; }
    mact_stw_len8(hn, l8);
    int ok = fwrite(l8, 1, 8, w) == 8 && fwrite(hdr, 1, hn, w) == hn;
    for (size_t i = 0; ok && i < k; i++) ok = fwrite(o[i].t->data, 1, o[i].t->nbytes, w) == o[i].t->nbytes;
    int e = errno;
    if (fclose(w) != 0 && ok) { ok = 0; e = errno; }
    if (!ok) { rc = E(MACT_ERR_IO, "cannot write %s: %s", dst, strerror(e)); goto out; }
    for (size_t i = 0; weight_map && i < k; i++)
        cJSON_AddItemToObject(weight_map, o[i].name, cJSON_CreateString(shard_name));
    if (log)
        fprintf(log, "  %s: %zu tensors (%zu dropped), order %s\n", shard_name, k, n - k,
                width_name ? "dtype width then name" : by_name ? "name" : "the input's");
out:
    for (size_t i = 0; o && i < n; i++) free(o[i].name);
    free(o);
    free(by_data);
    free(hdr);
    free(meta);
    free(raw);
    mact_st_close(st);
    return rc;
}

/* ---------------------------------------------------------------- the index */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* as transformers writes it: json.dumps(index, indent=2, sort_keys=True) + "\n" */
static char *print_index(const cJSON *idx, uint64_t total, int trailing_nl)
{
    size_t cap = 1 << 16, o = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
#define PUT(...) do { \
        int k_ = snprintf(s + o, cap - o, __VA_ARGS__); \
        while (k_ >= 0 && o + (size_t)k_ >= cap) { char *p_ = realloc(s, cap *= 2); if (!p_) { free(s); return NULL; } s = p_; \
            k_ = snprintf(s + o, cap - o, __VA_ARGS__); } \
        o += (size_t)(k_ > 0 ? k_ : 0); } while (0)
    int nk = cJSON_GetArraySize(idx);
    char **keys = malloc((size_t)(nk ? nk : 1) * sizeof *keys);
    if (!keys) { free(s); return NULL; }
    int i = 0;
    for (const cJSON *c = idx->child; c; c = c->next) keys[i++] = c->string;
    qsort(keys, (size_t)nk, sizeof *keys, cmp_str);
    PUT("{");
    for (i = 0; i < nk; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(idx, keys[i]);
        PUT("%s\n  \"%s\": ", i ? "," : "", keys[i]);
        if (cJSON_IsObject(v) && v->child) {
            int nm = cJSON_GetArraySize(v), m = 0;
            char **mk = malloc((size_t)nm * sizeof *mk);
            if (!mk) { free(keys); free(s); return NULL; }
            for (const cJSON *c = v->child; c; c = c->next) mk[m++] = c->string;
            qsort(mk, (size_t)nm, sizeof *mk, cmp_str);
            PUT("{");
            for (m = 0; m < nm; m++) {
                const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, mk[m]);
                PUT("%s\n    \"%s\": ", m ? "," : "", mk[m]);
                if (!strcmp(keys[i], "metadata") && !strcmp(mk[m], "total_size")) PUT("%llu", (unsigned long long)total);
                else {
                    char *t = cJSON_PrintUnformatted(x);
                    PUT("%s", t ? t : "null");
                    cJSON_free(t);
                }
            }
            PUT("\n  }");
            free(mk);
        } else {
            char *t = cJSON_PrintUnformatted(v);
            PUT("%s", t ? t : "null");
            cJSON_free(t);
        }
    }
    PUT("\n}%s", trailing_nl ? "\n" : "");
#undef PUT
    free(keys);
    return s;
}

/* ---------------------------------------------------------------- the checkpoint */

static int copy_tree(const char *src, const char *dst, char *err, size_t errlen)
{
    DIR *d = opendir(src);
    if (!d) return E(MACT_ERR_IO, "cannot read directory %s: %s", src, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char s[PATH_MAX], t[PATH_MAX];
        snprintf(s, sizeof s, "%s/%s", src, de->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, de->d_name);
        struct stat sb;
        if (stat(s, &sb) != 0) continue;  /* a dangling link */
        if (S_ISDIR(sb.st_mode)) {
            if (mkdir(t, 0777) != 0) rc = E(MACT_ERR_IO, "cannot create %s: %s", t, strerror(errno));
            else rc = copy_tree(s, t, err, errlen);
        } else if (S_ISREG(sb.st_mode)) rc = copy_file(s, t, err, errlen);
    }
    closedir(d);
    return rc;
}

const char *mact_compress_version(void) { return MACT_VERSION_STRING; }

/* one prune: the teacher's geometry and tap plan, the temporary output directory, and the shard index being
 * rebuilt (prune_job_free frees what it holds) */
typedef struct {
    const char *model_dir;
    const int *keep;
    int n_keep;
    mact_vit_geometry g;
    int raw[MACT_PRUNE_MAX_TAPS], sb[MACT_PRUNE_MAX_TAPS], lands[MACT_PRUNE_MAX_TAPS];  /* mact_prune_taps */
    int student_of[MACT_PRUNE_MAX_BLOCKS];  /* teacher block -> student block, -1: dropped */
    name_map nm;
    char tmp[PATH_MAX / 2];  /* out_dir.partial-XXXXXX, renamed to out_dir at the end */
    cJSON *idx, *new_wm;     /* the shard index (NULL: none) and the weight_map it now holds */
    int idx_nl;              /* the index ended in a newline */
    char **shards;           /* the file names the index's weight_map named */
    int n_shards;
    uint64_t total;          /* the indexed shards' data bytes */
} prune_job;

static void prune_job_free(prune_job *j)
{
    cJSON_Delete(j->idx);
    for (int i = 0; i < j->n_shards; i++) free(j->shards[i]);
    free(j->shards);
}

/* the temporary directory next to out_dir (which must not exist yet) the result is written into */
static int make_out_tmp(const char *out_dir, char *tmp, size_t tmp_cap, char *err, size_t errlen)
{
    struct stat st;
    if (!out_dir || !*out_dir) return E(MACT_ERR_INPUT, "--out: no directory");
    if (stat(out_dir, &st) == 0)
        return E(MACT_ERR_INPUT, "--out %s exists; mact prune writes a new directory", out_dir);
    if (snprintf(tmp, tmp_cap, "%s.partial-XXXXXX", out_dir) >= (int)tmp_cap)
        return E(MACT_ERR_INPUT, "--out: path too long");
    if (!mkdtemp(tmp))
        return E(MACT_ERR_IO, "cannot create a temporary directory next to %s: %s", out_dir, strerror(errno));
    mode_t um = umask(0);  /* mkdtemp makes it 0700: give the result a plain directory's mode */
    umask(um);
    chmod(tmp, 0777 & ~um);
    return 0;
}

/* config.json with vit_config's depth and taps edited (mact_prune_edit_config) */
static int write_config(const prune_job *j, char *err, size_t errlen)
{
    char s[2 * PATH_MAX], t[2 * PATH_MAX], *txt = NULL, *cfg = NULL;
    size_t len;
    snprintf(s, sizeof s, "%s/config.json", j->model_dir);
    int rc = mact_file_read_text(s, JSON_MAX, &txt, &len, err, errlen);
    if (!rc && !(cfg = mact_prune_edit_config(txt, j->n_keep, j->raw, j->g.n_taps, err, errlen))) rc = MACT_ERR_FORMAT;
    if (!rc) {
        snprintf(t, sizeof t, "%s/config.json", j->tmp);
        rc = write_all(t, cfg, strlen(cfg), err, errlen);
    }
    free(cfg);
    free(txt);
    return rc;
}

/* the index, when there is one: the shard names its weight_map lists, and an empty weight_map in its place that
 * follows the shards as they are written */
static int read_index(prune_job *j, char *err, size_t errlen)
{
    char s[2 * PATH_MAX], *txt = NULL;
    struct stat st;
    size_t len;
    snprintf(s, sizeof s, "%s/model.safetensors.index.json", j->model_dir);
    if (stat(s, &st) != 0) return 0;
    int rc = mact_file_read_text(s, JSON_MAX, &txt, &len, err, errlen);
    if (rc) return rc;
    j->idx = cJSON_Parse(txt);
    j->idx_nl = len && txt[len - 1] == '\n';
    free(txt);
    cJSON *wm = cJSON_GetObjectItemCaseSensitive(j->idx, "weight_map");
    if (!cJSON_IsObject(wm)) return E(MACT_ERR_FORMAT, "%s: no weight_map object", s);
    for (const cJSON *c = wm->child; c; c = c->next) {
        int dup = !cJSON_IsString(c);
        for (int i = 0; i < j->n_shards && !dup; i++) dup = !strcmp(j->shards[i], c->valuestring);
        if (dup) continue;
        char **p = realloc(j->shards, (size_t)(j->n_shards + 1) * sizeof *p);
        if (p) j->shards = p;
        if (!p || !(p[j->n_shards] = strdup(c->valuestring))) return E(MACT_ERR_NOMEM, "out of memory");
        j->n_shards++;
    }
    j->new_wm = cJSON_CreateObject();
    if (!j->new_wm || !cJSON_ReplaceItemInObjectCaseSensitive(j->idx, "weight_map", j->new_wm)) {
        cJSON_Delete(j->new_wm);
        j->new_wm = NULL;
        return E(MACT_ERR_NOMEM, "out of memory");
    }
    /* the replace freed the old weight_map (wm): the shard names are read from the files below */
    return 0;
}

/* an indexed shard copied untouched: its tensors go into the new weight_map and its bytes still count */
static int index_untouched_shard(prune_job *j, const char *path, const char *fn, char *err, size_t errlen)
{
    mact_st *x;
    if (mact_st_open(path, &x, err, errlen)) return MACT_ERR_FORMAT;
    for (size_t i = 0; i < mact_st_count(x); i++) {
        j->total += mact_st_at(x, i)->nbytes;
        cJSON_AddItemToObject(j->new_wm, mact_st_at(x, i)->name, cJSON_CreateString(fn));
    }
    mact_st_close(x);
    return 0;
}

/* One entry of the teacher's directory into tmp: a folder copied whole, a safetensors file holding ViT blocks
 * rewritten (rewrite_st), any other regular file copied. config.json and the index are written apart. */
static int write_entry(prune_job *j, const char *fn, FILE *log, char *err, size_t errlen)
{
    char s[2 * PATH_MAX], t[2 * PATH_MAX];
    struct stat st;
    int rc;
    if (!strcmp(fn, ".") || !strcmp(fn, "..") || !strcmp(fn, "config.json") ||
        !strcmp(fn, "model.safetensors.index.json"))
        return 0;
    snprintf(s, sizeof s, "%s/%s", j->model_dir, fn);
    snprintf(t, sizeof t, "%s/%s", j->tmp, fn);
    if (stat(s, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        if (mkdir(t, 0777) != 0) return E(MACT_ERR_IO, "cannot create %s: %s", t, strerror(errno));
        return copy_tree(s, t, err, errlen);
    }
    if (!S_ISREG(st.st_mode)) return 0;
    int in_index = 0;
    for (int i = 0; i < j->n_shards && !in_index; i++) in_index = !strcmp(j->shards[i], fn);
    int blocks = ends_with(fn, ".safetensors") ? has_blocks(s, err, errlen) : 0;
    if (blocks < 0) return blocks;
    if (blocks) {
        size_t n_out;
        uint64_t bytes;
        if ((rc = rewrite_st(s, t, &j->nm, &n_out, &bytes, in_index ? j->new_wm : NULL, fn, log, err, errlen)))
            return rc;
        if (in_index) j->total += bytes;
        return 0;
    }
    if ((rc = copy_file(s, t, err, errlen))) return rc;
    if (in_index && (rc = index_untouched_shard(j, s, fn, err, errlen))) return rc;
    if (log) fprintf(log, "  %s: copied\n", fn);
    return 0;
}

static int write_entries(prune_job *j, FILE *log, char *err, size_t errlen)
{
    DIR *d = opendir(j->model_dir);
    if (!d) return E(MACT_ERR_IO, "cannot read directory %s: %s", j->model_dir, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) rc = write_entry(j, de->d_name, log, err, errlen);
    closedir(d);
    return rc;
}

/* the index with the new weight_map and total_size */
static int write_index(const prune_job *j, FILE *log, char *err, size_t errlen)
{
    if (!j->idx) return 0;
    char t[2 * PATH_MAX], *idx_out = print_index(j->idx, j->total, j->idx_nl);
    if (!idx_out) return E(MACT_ERR_NOMEM, "out of memory");
    snprintf(t, sizeof t, "%s/model.safetensors.index.json", j->tmp);
    int rc = write_all(t, idx_out, strlen(idx_out), err, errlen);
    free(idx_out);
    if (rc) return rc;
    if (log)
        fprintf(log, "  model.safetensors.index.json: weight_map rewritten, total_size %llu\n",
                (unsigned long long)j->total);
    return 0;
}

/* the result must be a checkpoint whose geometry is the one asked for */
static int check_student(const prune_job *j, char *err, size_t errlen)
{
    mact_vit_geometry sg;
    int rc = mact_prune_geometry(j->tmp, &sg, err, errlen);
    if (rc) return rc;
    if (sg.stored != j->n_keep || sg.cfg_layers != j->n_keep)
        return E(MACT_ERR_MODEL, "internal: the pruned checkpoint stores %d blocks (config %d), not %d", sg.stored,
                 sg.cfg_layers, j->n_keep);
    return 0;
}

static void log_student(const prune_job *j, FILE *log)
{
    const mact_vit_geometry *g = &j->g;
    const int n_keep = j->n_keep;
    fprintf(log, "student: %d ViT blocks (teacher stores %d, configures %d); vit_config.num_hidden_layers = %d\n",
            n_keep, g->stored, g->cfg_layers, n_keep);
    fprintf(log, "keep:");
    for (int i = 0; i < n_keep; i++) fprintf(log, " %d->%d", j->keep[i], i);
    fprintf(log, " (teacher block -> student block)\n");
    for (int i = 0; i < g->n_taps; i++)
        fprintf(log, "tap %d: student vit_layers[%d] = %d = student block %d = teacher layer %d (teacher tap %d = "
                "layer %d%s)\n", i, i, j->raw[i], j->sb[i], j->lands[i], g->taps_raw[i], g->taps_abs[i],
                j->lands[i] == g->taps_abs[i] ? ", same layer" : ", a different layer: re-learn it by distillation");
}

mact_status mact_prune(const char *model_dir, const int *keep, int n_keep, const int *user_taps, int n_user_taps,
               const char *out_dir, FILE *log, char *err, size_t errlen)
{
    prune_job j = {.model_dir = model_dir, .keep = keep, .n_keep = n_keep};
    int rc;
    if ((rc = mact_prune_geometry(model_dir, &j.g, err, errlen)) ||
        (rc = mact_prune_check_keep(&j.g, keep, n_keep, err, errlen)) ||
        (rc = mact_prune_taps(&j.g, keep, n_keep, user_taps, n_user_taps, j.raw, j.sb, j.lands, err, errlen)) ||
        (rc = make_out_tmp(out_dir, j.tmp, sizeof j.tmp, err, errlen)))
        return rc;
    for (int b = 0; b < j.g.stored; b++) j.student_of[b] = -1;
    for (int i = 0; i < n_keep; i++) j.student_of[keep[i]] = i;
    j.nm = (name_map){j.student_of, j.g.stored};
    rc = write_config(&j, err, errlen);
    if (!rc) rc = read_index(&j, err, errlen);
    if (!rc && log) fprintf(log, "writing %s (via %s)\n", out_dir, j.tmp);
    if (!rc) rc = write_entries(&j, log, err, errlen);
    if (!rc) rc = write_index(&j, log, err, errlen);
    if (!rc) rc = check_student(&j, err, errlen);
    if (!rc && rename(j.tmp, out_dir) != 0)
        rc = E(MACT_ERR_IO, "cannot rename %s to %s: %s", j.tmp, out_dir, strerror(errno));
    prune_job_free(&j);
    if (rc) {
        remove_tree(j.tmp);
        return rc;
    }
    if (log) log_student(&j, log);
    return 0;
}
