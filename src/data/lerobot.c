/* LeRobot dataset reader (src/data/lerobot.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "data/lerobot.h"
#include "data/parquet.h"
#include "data/video.h"

#define LD_MAX_EPISODES 10000000
#define LD_MAX_JSON (256u << 20)

struct mact_ld {
    char dir[2048];
    char version[16], robot[128];
    int fps, chunks_size, v3;
    int64_t total_frames, total_episodes;
    char data_path[512], video_path[512];
    int n_feat;
    mact_ld_feature feat[MACT_LD_MAX_FEATURES];
    int n_ep, n_tasks;
    mact_ld_episode *ep;
    /* cache: decoded features of the last data files read (a few keys, so reading action and state of
     * each episode in turn decodes every file once per key) */
    struct ld_cache { char path[4096], key[256]; double *vals; int64_t *ep; int64_t rows; int dim; } cache[4];
    int cache_next;
    /* v3.0: per video feature (indexed like feat), the episodes' videos/K/{chunk_index, file_index,
     * from_timestamp, to_timestamp} columns; missing: some episodes file lacks them */
    struct ld_video { int64_t *chunk, *file; double *from, *to; int missing; } vid[MACT_LD_MAX_FEATURES];
};

static char *read_text(const char *path, size_t *len, char *err, size_t el, int *rc)
{
    char *b = NULL;
    *rc = mact_file_read_text(path, LD_MAX_JSON, &b, len, err, el);
    return *rc ? NULL : b;
}

static int file_exists(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISREG(sb.st_mode); }

/* {name} / {name:03d} substitution */
static int format_template(const char *tpl, const char *const *keys, const char *const *svals, const int64_t *ivals, int nk,
                           char *buf, size_t n)
{
    size_t o = 0;
    for (const char *p = tpl; *p;) {
        if (*p != '{') { if (o + 1 >= n) return -1; buf[o++] = *p++; continue; }
        const char *q = strchr(p, '}');
        if (!q) return -1;
        char name[64] = "", fmt[16] = "";
        const char *colon = memchr(p, ':', (size_t)(q - p));
        size_t nl = (size_t)((colon ? colon : q) - p - 1);
        if (nl >= sizeof name) return -1;
        memcpy(name, p + 1, nl);
        if (colon) {
            size_t fl = (size_t)(q - colon - 1);
            if (fl >= sizeof fmt) return -1;
            memcpy(fmt, colon + 1, fl);
        }
        int k;
        for (k = 0; k < nk && strcmp(keys[k], name); k++) {}
        if (k == nk) return -1;
        int w;
        if (svals[k]) w = snprintf(buf + o, n - o, "%s", svals[k]);
        else {
            int width = 0;
            if (fmt[0]) { if (sscanf(fmt, "%dd", &width) != 1) return -1; }
            w = snprintf(buf + o, n - o, "%0*lld", width, (long long)ivals[k]);
        }
        if (w < 0 || (size_t)w >= n - o) return -1;
        o += (size_t)w;
        p = q + 1;
    }
    if (o >= n) return -1;
    buf[o] = 0;
    return 0;
}

static int parse_features(mact_ld *d, const cJSON *fs, const char *path, char *err, size_t el)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, fs) {
        if (d->n_feat == MACT_LD_MAX_FEATURES)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: more than %d features", path, MACT_LD_MAX_FEATURES);
        mact_ld_feature *ft = &d->feat[d->n_feat];
        memset(ft, 0, sizeof *ft);
        snprintf(ft->key, sizeof ft->key, "%s", f->string);
        const char *dt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "dtype"));
        if (!dt) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: features.%s.dtype missing", path, ft->key);
        snprintf(ft->dtype, sizeof ft->dtype, "%s", dt);
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(f, "shape"), *x;
        if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) < 1 || cJSON_GetArraySize(sh) > 4)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: features.%s.shape must be a list of 1..4 sizes", path, ft->key);
        cJSON_ArrayForEach(x, sh) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 1e8)
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: features.%s.shape has a bad size", path, ft->key);
            ft->shape[ft->ndim++] = (int)x->valuedouble;
        }
        /* names: a list, a nested list [[...]], a dict {"motors": [...]}, or null */
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "names");
        if (cJSON_IsObject(nm) && nm->child) nm = nm->child;
        if (cJSON_IsArray(nm) && cJSON_GetArraySize(nm) == 1 && cJSON_IsArray(cJSON_GetArrayItem(nm, 0))) nm = cJSON_GetArrayItem(nm, 0);
        if (cJSON_IsArray(nm))
            cJSON_ArrayForEach(x, nm) {
                if (ft->n_names == MACT_LD_MAX_NAMES) break;
                const char *s = cJSON_GetStringValue(x);
                snprintf(ft->names[ft->n_names++], sizeof ft->names[0], "%s", s ? s : "?");
            }
        if (!strcmp(dt, "video") || !strcmp(dt, "image")) {
            const cJSON *info = cJSON_GetObjectItemCaseSensitive(f, "info");
            if (!info) info = cJSON_GetObjectItemCaseSensitive(f, "video_info");
            const char *codec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(info, "video.codec"));
            snprintf(ft->codec, sizeof ft->codec, "%s", codec ? codec : "");
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(info, "video.height"), *w = cJSON_GetObjectItemCaseSensitive(info, "video.width");
            ft->height = cJSON_IsNumber(h) ? h->valueint : ft->ndim == 3 ? ft->shape[0] : 0;
            ft->width = cJSON_IsNumber(w) ? w->valueint : ft->ndim == 3 ? ft->shape[1] : 0;
        }
        d->n_feat++;
    }
    return 0;
}

static int64_t jint(const cJSON *o, const char *k, int64_t def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

static int load_episodes_jsonl(mact_ld *d, char *err, size_t el)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/episodes.jsonl", d->dir);
    int rc;
    char *t = read_text(p, NULL, err, el, &rc);
    if (!t) return rc;
    int cap = 0;
    int64_t acc = 0;
    int line = 0;
    for (char *s = t; *s;) {
        char *e = strchr(s, '\n');
        if (e) *e = 0;
        line++;
        if (strspn(s, " \t\r") != strlen(s)) {
            cJSON *j = cJSON_Parse(s);
            if (!cJSON_IsObject(j)) { cJSON_Delete(j); free(t); return mact_errf(err, el, MACT_ERR_FORMAT, "%s:%d: not a JSON object", p, line); }
            if (d->n_ep == cap) {
                cap = cap ? cap * 2 : 64;
                if (cap > LD_MAX_EPISODES) { cJSON_Delete(j); free(t); return mact_errf(err, el, MACT_ERR_FORMAT, "%s: too many episodes", p); }
                mact_ld_episode *q = realloc(d->ep, (size_t)cap * sizeof *q);
                if (!q) { cJSON_Delete(j); free(t); return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", p); }
                d->ep = q;
            }
            mact_ld_episode *ep = &d->ep[d->n_ep];
            memset(ep, 0, sizeof *ep);
            ep->index = jint(j, "episode_index", -1);
            ep->length = jint(j, "length", -1);
            if (ep->index < 0 || ep->length < 0) { cJSON_Delete(j); free(t); return mact_errf(err, el, MACT_ERR_FORMAT, "%s:%d: episode_index/length missing", p, line); }
            ep->chunk = ep->index / (d->chunks_size > 0 ? d->chunks_size : 1000);
            ep->file = -1;
            ep->from = acc; ep->to = acc + ep->length; acc += ep->length;
            const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "tasks");
            const char *t0 = cJSON_GetStringValue(cJSON_GetArrayItem(tk, 0));
            snprintf(ep->task, sizeof ep->task, "%s", t0 ? t0 : "");
            d->n_ep++;
            cJSON_Delete(j);
        }
        if (!e) break;
        s = e + 1;
    }
    free(t);
    snprintf(p, sizeof p, "%s/meta/tasks.jsonl", d->dir);
    if ((t = read_text(p, NULL, err, el, &rc))) {
        for (char *s = t; *s; s++) d->n_tasks += *s == '\n';
        free(t);
    }
    return 0;
}

static int col_i64(mact_pq_file *f, const char *name, int64_t **out, int64_t *n, char *err, size_t el)
{
    double *v;
    int rc = mact_pq_read_f64(f, name, -1, 1, &v, n, err, el);
    if (rc) return rc;
    *out = malloc((size_t)(*n ? *n : 1) * sizeof(int64_t));
    if (!*out) { free(v); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
    for (int64_t i = 0; i < *n; i++) (*out)[i] = (int64_t)v[i];
    free(v);
    return 0;
}

/* videos/K/... of episodes [e0, e0 + n) from one episodes file f; a camera without the columns is marked
 * missing (mact_ld_check lists it, mact_ld_episode_video refuses it) */
static int load_video_columns(mact_ld *d, mact_pq_file *f, int e0, int n, const char *p, char *err, size_t el)
{
    for (int k = 0; k < d->n_feat; k++) {
        if (strcmp(d->feat[k].dtype, "video")) continue;
        struct ld_video *v = &d->vid[k];
        int64_t *q0 = realloc(v->chunk, (size_t)(e0 + n + 1) * sizeof *q0);
        if (q0) v->chunk = q0;
        int64_t *q1 = realloc(v->file, (size_t)(e0 + n + 1) * sizeof *q1);
        if (q1) v->file = q1;
        double *q2 = realloc(v->from, (size_t)(e0 + n + 1) * sizeof *q2);
        if (q2) v->from = q2;
        double *q3 = realloc(v->to, (size_t)(e0 + n + 1) * sizeof *q3);
        if (q3) v->to = q3;
        if (!q0 || !q1 || !q2 || !q3) return mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", p);
        char name[4][320];
        static const char *const col[4] = {"chunk_index", "file_index", "from_timestamp", "to_timestamp"};
        double *vals[4] = {0};
        int64_t m[4] = {0};
        int ok = 1;
        for (int c = 0; c < 4; c++) {
            snprintf(name[c], sizeof name[c], "videos/%s/%s", d->feat[k].key, col[c]);
            if (mact_pq_find(f, name[c], NULL) < 0) { ok = 0; break; }
            int rc = mact_pq_read_f64(f, name[c], -1, 1, &vals[c], &m[c], err, el);
            if (rc) { for (int i = 0; i < c; i++) free(vals[i]); return rc; }
            if (m[c] != n) {
                for (int i = 0; i <= c; i++) free(vals[i]);
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s' has %lld rows, the file has %d episodes", p, name[c], (long long)m[c], n);
            }
        }
        for (int i = 0; i < n; i++) {
            v->chunk[e0 + i] = ok ? (int64_t)vals[0][i] : 0;
            v->file[e0 + i] = ok ? (int64_t)vals[1][i] : 0;
            v->from[e0 + i] = ok ? vals[2][i] : 0;
            v->to[e0 + i] = ok ? vals[3][i] : 0;
        }
        if (!ok) v->missing = 1;
        for (int c = 0; c < 4; c++) free(vals[c]);
    }
    return 0;
}

static int load_episodes_v3(mact_ld *d, char *err, size_t el)
{
    /* every meta/episodes/chunk-NNN/file-NNN.parquet, in order */
    int rc = 0;
    for (int c = 0; c < 1000; c++) {
        int found_any = 0;
        for (int fi = 0; fi < 10000; fi++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/meta/episodes/chunk-%03d/file-%03d.parquet", d->dir, c, fi);
            if (!file_exists(p)) break;
            found_any = 1;
            mact_pq_file *f;
            if ((rc = mact_pq_open(p, NULL, &f, err, el))) return rc;
            int64_t n = 0, m;
            int64_t *ei = NULL, *ln = NULL, *ci = NULL, *fl = NULL, *fr = NULL, *to = NULL;
            if ((rc = col_i64(f, "episode_index", &ei, &n, err, el)) || (rc = col_i64(f, "length", &ln, &m, err, el)) ||
                (rc = col_i64(f, "data/chunk_index", &ci, &m, err, el)) || (rc = col_i64(f, "data/file_index", &fl, &m, err, el)) ||
                (rc = col_i64(f, "dataset_from_index", &fr, &m, err, el)) || (rc = col_i64(f, "dataset_to_index", &to, &m, err, el))) {
                free(ei); free(ln); free(ci); free(fl); free(fr); free(to);
                mact_pq_close(f);
                return rc;
            }
            mact_pq_column tc = {0};
            int tl = mact_pq_find(f, "tasks", NULL);
            if (tl >= 0 && mact_pq_read(f, tl, -1, &tc, err, el)) mact_pq_column_free(&tc), tl = -1;
            if (d->n_ep + n > LD_MAX_EPISODES) rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: too many episodes", p);
            mact_ld_episode *q = rc ? NULL : realloc(d->ep, (size_t)(d->n_ep + n + 1) * sizeof *q);
            if (!rc && !q) rc = mact_errf(err, el, MACT_ERR_NOMEM, "%s: out of memory", p);
            if (!rc) {
                d->ep = q;
                for (int64_t i = 0; i < n; i++) {
                    mact_ld_episode *ep = &d->ep[d->n_ep++];
                    memset(ep, 0, sizeof *ep);
                    ep->index = ei[i]; ep->length = ln[i]; ep->chunk = ci[i]; ep->file = fl[i]; ep->from = fr[i]; ep->to = to[i];
                    if (tl >= 0 && i < tc.n_rows && tc.row_start[i + 1] > tc.row_start[i]) {
                        int64_t v = tc.row_start[i];
                        int64_t len = tc.boff[v + 1] - tc.boff[v];
                        if (len >= (int64_t)sizeof ep->task) len = sizeof ep->task - 1;
                        memcpy(ep->task, tc.bytes + tc.boff[v], (size_t)len);
                        ep->task[len] = 0;
                    }
                }
            }
            mact_pq_column_free(&tc);
            free(ei); free(ln); free(ci); free(fl); free(fr); free(to);
            if (!rc) rc = load_video_columns(d, f, d->n_ep - (int)n, (int)n, p, err, el);
            mact_pq_close(f);
            if (rc) return rc;
        }
        if (!found_any) break;
    }
    if (!d->n_ep) return mact_errf(err, el, MACT_ERR_FORMAT, "%s/meta/episodes: no episodes parquet (meta/episodes/chunk-000/file-000.parquet)", d->dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/tasks.parquet", d->dir);
    mact_pq_file *f;
    if (file_exists(p) && !mact_pq_open(p, NULL, &f, err, el)) {
        d->n_tasks = (int)mact_pq_num_rows(f);
        mact_pq_close(f);
    }
    return 0;
}

int mact_ld_open(const char *dir, mact_ld **out, char *err, size_t el)
{
    *out = NULL;
    mact_ld *d = calloc(1, sizeof *d);
    if (!d) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/info.json", dir);
    int rc;
    char *t = read_text(p, NULL, err, el, &rc);
    if (!t) { free(d); return rc; }
    cJSON *j = cJSON_Parse(t);
    free(t);
    if (!cJSON_IsObject(j)) { cJSON_Delete(j); free(d); return mact_errf(err, el, MACT_ERR_FORMAT, "%s: not a JSON object", p); }
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "codebase_version"));
    if (!v || (strcmp(v, "v2.0") && strcmp(v, "v2.1") && strcmp(v, "v3.0"))) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: codebase_version %s%s%s (this reader knows v2.0, v2.1, v3.0)", p,
                       v ? "\"" : "", v ? v : "missing", v ? "\"" : "");
        goto fail;
    }
    snprintf(d->version, sizeof d->version, "%s", v);
    d->v3 = !strcmp(v, "v3.0");
    const char *rb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "robot_type"));
    snprintf(d->robot, sizeof d->robot, "%s", rb ? rb : "");
    d->fps = (int)jint(j, "fps", 0);
    d->chunks_size = (int)jint(j, "chunks_size", 1000);
    d->total_frames = jint(j, "total_frames", -1);
    d->total_episodes = jint(j, "total_episodes", -1);
    if (d->fps <= 0) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: fps missing or not positive", p); goto fail; }
    const char *dp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "data_path"));
    if (!dp) dp = d->v3 ? "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet" : "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet";
    snprintf(d->data_path, sizeof d->data_path, "%s", dp);
    const char *vp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "video_path"));
    snprintf(d->video_path, sizeof d->video_path, "%s", vp ? vp : "");
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(j, "features");
    if (!cJSON_IsObject(fs)) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: features missing", p); goto fail; }
    if ((rc = parse_features(d, fs, p, err, el))) goto fail;
    cJSON_Delete(j);
    j = NULL;
    if ((rc = d->v3 ? load_episodes_v3(d, err, el) : load_episodes_jsonl(d, err, el))) goto fail;
    *out = d;
    return 0;
fail:
    cJSON_Delete(j);
    mact_ld_close(d);
    return rc;
}

void mact_ld_close(mact_ld *d)
{
    if (!d) return;
    free(d->ep);
    for (int i = 0; i < 4; i++) { free(d->cache[i].vals); free(d->cache[i].ep); }
    for (int k = 0; k < MACT_LD_MAX_FEATURES; k++) { free(d->vid[k].chunk); free(d->vid[k].file); free(d->vid[k].from); free(d->vid[k].to); }
    free(d);
}

const char *mact_ld_version(const mact_ld *d) { return d->version; }
const char *mact_ld_robot(const mact_ld *d) { return d->robot; }
int mact_ld_fps(const mact_ld *d) { return d->fps; }
int64_t mact_ld_total_frames(const mact_ld *d) { return d->total_frames; }
int mact_ld_num_features(const mact_ld *d) { return d->n_feat; }
const mact_ld_feature *mact_ld_feature_at(const mact_ld *d, int i) { return i >= 0 && i < d->n_feat ? &d->feat[i] : NULL; }
const mact_ld_feature *mact_ld_find_feature(const mact_ld *d, const char *key)
{
    for (int i = 0; i < d->n_feat; i++) if (!strcmp(d->feat[i].key, key)) return &d->feat[i];
    return NULL;
}
int mact_ld_num_episodes(const mact_ld *d) { return d->n_ep; }
const mact_ld_episode *mact_ld_episode_at(const mact_ld *d, int i) { return i >= 0 && i < d->n_ep ? &d->ep[i] : NULL; }
int mact_ld_num_tasks(const mact_ld *d) { return d->n_tasks; }
const char *mact_ld_dir(const mact_ld *d) { return d->dir; }

int mact_ld_data_path(const mact_ld *d, int i, char *buf, size_t n)
{
    const mact_ld_episode *e = &d->ep[i];
    static const char *const keys[] = {"episode_chunk", "episode_index", "chunk_index", "file_index"};
    const char *sv[4] = {0};
    int64_t iv[4] = {e->chunk, e->index, e->chunk, e->file};
    char rel[2048];
    if (format_template(d->data_path, keys, sv, iv, 4, rel, sizeof rel)) return -1;
    int w = snprintf(buf, n, "%s/%s", d->dir, rel);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

static int video_feature(const mact_ld *d, const char *key)
{
    for (int k = 0; k < d->n_feat; k++) if (!strcmp(d->feat[k].key, key) && !strcmp(d->feat[k].dtype, "video")) return k;
    return -1;
}

int mact_ld_video_path(const mact_ld *d, int i, const char *key, char *buf, size_t n)
{
    if (!d->video_path[0] || i < 0 || i >= d->n_ep) return -1;
    const mact_ld_episode *e = &d->ep[i];
    static const char *const keys[] = {"episode_chunk", "episode_index", "chunk_index", "file_index", "video_key"};
    const char *sv[5] = {0, 0, 0, 0, key};
    int64_t iv[5] = {e->chunk, e->index, e->chunk, e->file < 0 ? 0 : e->file, 0};
    int k = video_feature(d, key);
    if (d->v3 && k >= 0 && d->vid[k].chunk) {  /* v3.0: the camera's own file, not the data file */
        if (d->vid[k].missing) return -1;
        iv[2] = d->vid[k].chunk[i];
        iv[3] = d->vid[k].file[i];
    }
    char rel[2048];
    if (format_template(d->video_path, keys, sv, iv, 5, rel, sizeof rel)) return -1;
    int w = snprintf(buf, n, "%s/%s", d->dir, rel);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int mact_ld_episode_video(const mact_ld *d, int i, const char *key, char *path, size_t n, double *from_ts)
{
    if (from_ts) *from_ts = 0;
    if (n) path[0] = 0;
    int k = video_feature(d, key);
    if (i < 0 || i >= d->n_ep || k < 0) return MACT_ERR_INPUT;
    if (!d->video_path[0] || (d->v3 && (!d->vid[k].chunk || d->vid[k].missing))) return MACT_ERR_FORMAT;
    if (mact_ld_video_path(d, i, key, path, n)) return MACT_ERR_FORMAT;
    if (d->v3 && from_ts) *from_ts = d->vid[k].from[i];
    return 0;
}

int mact_ld_episode_video_range(const mact_ld *d, int i, const char *key, double *from_ts, double *to_ts)
{
    int k = video_feature(d, key);
    if (i < 0 || i >= d->n_ep || k < 0) return MACT_ERR_INPUT;
    if (!d->v3) { *from_ts = 0; *to_ts = (double)d->ep[i].length / d->fps; return 0; }
    if (!d->vid[k].chunk || d->vid[k].missing) return MACT_ERR_FORMAT;
    *from_ts = d->vid[k].from[i];
    *to_ts = d->vid[k].to[i];
    return 0;
}

static struct ld_cache *load_file_feature(mact_ld *d, const char *path, const char *key, int dim, char *err, size_t el, int *rc)
{
    *rc = 0;
    for (int i = 0; i < 4; i++)
        if (d->cache[i].vals && !strcmp(d->cache[i].path, path) && !strcmp(d->cache[i].key, key) && d->cache[i].dim == dim)
            return &d->cache[i];
    struct ld_cache *c = &d->cache[d->cache_next];
    d->cache_next = (d->cache_next + 1) % 4;
    free(c->vals); free(c->ep);
    c->vals = NULL; c->ep = NULL; c->path[0] = 0;
    mact_pq_file *f;
    if ((*rc = mact_pq_open(path, NULL, &f, err, el))) return NULL;
    int64_t n, m;
    if ((*rc = mact_pq_read_f64(f, key, -1, dim, &c->vals, &n, err, el)) || (*rc = col_i64(f, "episode_index", &c->ep, &m, err, el))) {
        mact_pq_close(f);
        free(c->vals); c->vals = NULL;
        return NULL;
    }
    mact_pq_close(f);
    c->rows = n;
    c->dim = dim;
    snprintf(c->path, sizeof c->path, "%s", path);
    snprintf(c->key, sizeof c->key, "%s", key);
    return c;
}

int mact_ld_read(mact_ld *d, int i, const char *key, double **out, int64_t *rows, int *dim, char *err, size_t el)
{
    *out = NULL; *rows = 0; *dim = 0;
    if (i < 0 || i >= d->n_ep) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no episode %d", d->dir, i);
    const mact_ld_feature *ft = mact_ld_find_feature(d, key);
    if (!ft) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no feature '%s' in meta/info.json", d->dir, key);
    if (ft->ndim != 1) return mact_errf(err, el, MACT_ERR_INPUT, "%s: feature '%s' is not a vector", d->dir, key);
    int w = ft->shape[0];
    char path[4096];
    if (mact_ld_data_path(d, i, path, sizeof path)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: data_path template \"%s\" does not format", d->dir, d->data_path);
    int rc;
    struct ld_cache *c = load_file_feature(d, path, key, w, err, el, &rc);
    if (!c) return rc;
    const mact_ld_episode *e = &d->ep[i];
    int64_t cnt = 0;
    for (int64_t r = 0; r < c->rows; r++) cnt += c->ep[r] == e->index;
    if (cnt != e->length)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: episode %lld has %lld rows, the episodes metadata says %lld", path,
                         (long long)e->index, (long long)cnt, (long long)e->length);
    double *v = malloc((size_t)(cnt ? cnt : 1) * (size_t)w * sizeof(double));
    if (!v) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (int64_t r = 0; r < c->rows; r++)
        if (c->ep[r] == e->index) memcpy(v + (k++) * w, c->vals + r * w, (size_t)w * sizeof(double));
    *out = v; *rows = cnt; *dim = w;
    return 0;
}

int mact_ld_read_images(mact_ld *d, int i, const char *key, uint8_t **bytes, int64_t **off, int64_t *rows,
                        char *err, size_t el)
{
    *bytes = NULL; *off = NULL; *rows = 0;
    if (i < 0 || i >= d->n_ep) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no episode %d", d->dir, i);
    char path[4096];
    if (mact_ld_data_path(d, i, path, sizeof path)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: data_path template does not format", d->dir);
    mact_pq_file *f;
    int rc = mact_pq_open(path, NULL, &f, err, el);
    if (rc) return rc;
    int li = mact_pq_find(f, key, "bytes");
    if (li < 0) { mact_pq_close(f); return mact_errf(err, el, MACT_ERR_FORMAT, "%s: no image column '%s.bytes'", path, key); }
    int64_t *ep = NULL, m;
    mact_pq_column c;
    if ((rc = col_i64(f, "episode_index", &ep, &m, err, el)) || (rc = mact_pq_read(f, li, -1, &c, err, el))) {
        free(ep); mact_pq_close(f);
        if (!rc) mact_pq_column_free(&c);
        return rc;
    }
    mact_pq_close(f);
    const mact_ld_episode *e = &d->ep[i];
    int64_t cnt = 0, nb = 0;
    for (int64_t r = 0; r < m && r < c.n_rows; r++)
        if (ep[r] == e->index) {
            if (c.row_null[r] || c.row_start[r + 1] != c.row_start[r] + 1) {
                rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: column '%s', row %lld: no image bytes", path, key, (long long)r);
                break;
            }
            cnt++;
            nb += c.boff[c.row_start[r] + 1] - c.boff[c.row_start[r]];
        }
    if (!rc && (m != c.n_rows || cnt != e->length))
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: episode %lld has %lld image rows, length %lld", path, (long long)e->index, (long long)cnt, (long long)e->length);
    uint8_t *b = rc ? NULL : malloc((size_t)nb + 1);
    int64_t *o = rc ? NULL : malloc(((size_t)cnt + 1) * sizeof *o);
    if (!rc && (!b || !o)) rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    if (!rc) {
        int64_t k = 0, p = 0;
        for (int64_t r = 0; r < m; r++)
            if (ep[r] == e->index) {
                int64_t v = c.row_start[r], len = c.boff[v + 1] - c.boff[v];
                o[k++] = p;
                if (len) memcpy(b + p, c.bytes + c.boff[v], (size_t)len);
                p += len;
            }
        o[k] = p;
        *bytes = b; *off = o; *rows = cnt;
    } else { free(b); free(o); }
    free(ep);
    mact_pq_column_free(&c);
    return rc;
}

int mact_ld_check(mact_ld *d, char *buf, size_t n)
{
    size_t o = 0;
    int np = 0;
    buf[0] = 0;
#define PROBLEM(...) do { np++; if (o < n) { int w_ = snprintf(buf + o, n - o, __VA_ARGS__); if (w_ > 0) o += (size_t)w_; if (o < n) buf[o++] = '\n', buf[o < n ? o : n - 1] = 0; } } while (0)
    int64_t sum = 0;
    for (int i = 0; i < d->n_ep; i++) sum += d->ep[i].length;
    if (d->total_frames >= 0 && sum != d->total_frames)
        PROBLEM("info.json total_frames %lld, the episodes add up to %lld", (long long)d->total_frames, (long long)sum);
    if (d->total_episodes >= 0 && d->total_episodes != d->n_ep)
        PROBLEM("info.json total_episodes %lld, the episodes metadata lists %d", (long long)d->total_episodes, d->n_ep);
    char last[4096] = "";
    int64_t *ep_rows = calloc((size_t)d->n_ep + 1, sizeof *ep_rows);
    for (int i = 0; i < d->n_ep; i++) {
        char path[4096], err[1024];
        if (mact_ld_data_path(d, i, path, sizeof path)) { PROBLEM("episode %lld: data_path template does not format", (long long)d->ep[i].index); continue; }
        if (!strcmp(path, last)) continue;
        snprintf(last, sizeof last, "%s", path);
        if (!file_exists(path)) { PROBLEM("episode %lld: data file %s missing", (long long)d->ep[i].index, path); continue; }
        mact_pq_file *f;
        if (mact_pq_open(path, NULL, &f, err, sizeof err)) { PROBLEM("%s", err); continue; }
        int64_t *ei = NULL, m;
        if (col_i64(f, "episode_index", &ei, &m, err, sizeof err)) PROBLEM("%s", err);
        else
            for (int64_t r = 0; r < m; r++)
                for (int k = 0; k < d->n_ep; k++)
                    if (d->ep[k].index == ei[r]) { if (ep_rows) ep_rows[k]++; break; }
        free(ei);
        for (int k = 0; k < d->n_feat; k++) {
            const mact_ld_feature *ft = &d->feat[k];
            if (!strcmp(ft->dtype, "video")) continue;
            int li = mact_pq_find(f, ft->key, !strcmp(ft->dtype, "image") ? "bytes" : NULL);
            if (li < 0) { PROBLEM("%s: feature '%s' has no column", path, ft->key); continue; }
            const mact_pq_leaf *l = mact_pq_leaf_at(f, li);
            int list = l->max_rep > 0;
            if (ft->ndim == 1 && ft->shape[0] > 1 && !list && strcmp(ft->dtype, "string"))
                PROBLEM("%s: feature '%s' has shape [%d] but its column is not a list", path, ft->key, ft->shape[0]);
        }
        mact_pq_close(f);
    }
    for (int i = 0; ep_rows && i < d->n_ep; i++) {
        char path[4096];
        if (mact_ld_data_path(d, i, path, sizeof path) || !file_exists(path)) continue;
        if (ep_rows[i] != d->ep[i].length)
            PROBLEM("episode %lld: %lld rows in the data, length %lld in the episodes metadata", (long long)d->ep[i].index,
                    (long long)ep_rows[i], (long long)d->ep[i].length);
    }
    free(ep_rows);
    for (int k = 0; k < d->n_feat; k++) {
        const mact_ld_feature *ft = &d->feat[k];
        if (strcmp(ft->dtype, "video")) continue;
        if (d->v3 && d->vid[k].missing) {
            PROBLEM("camera %s: the episodes parquet has no videos/%s/{chunk_index,file_index,from_timestamp,to_timestamp} columns", ft->key, ft->key);
            continue;
        }
        /* each file opened once (v3.0: episodes share one); its problems (missing, unreadable) said once */
        char last[4096] = "", err[2048];
        mact_video *v = NULL;
        double *times = NULL;
        int64_t nt = 0;
        int bad_file = 0, said_codec = 0, said_size = 0;
        for (int i = 0; i < d->n_ep; i++) {
            char path[4096];
            long long ei = (long long)d->ep[i].index;
            if (mact_ld_video_path(d, i, ft->key, path, sizeof path)) { PROBLEM("camera %s: video_path template \"%s\" does not resolve", ft->key, d->video_path); break; }
            if (strcmp(path, last)) {
                snprintf(last, sizeof last, "%s", path);
                mact_video_close(v); v = NULL;
                free(times); times = NULL; nt = 0;
                bad_file = 1;
                if (!file_exists(path)) { PROBLEM("episode %lld camera %s: video %s missing", ei, ft->key, path); continue; }
                if (mact_video_open(path, 1, &v, err, sizeof err)) { PROBLEM("episode %lld camera %s: %s", ei, ft->key, err); continue; }
                const mact_video_meta *m = mact_video_info(v);
                if (ft->codec[0] && strcmp(ft->codec, m->codec) && !said_codec++)
                    PROBLEM("camera %s: %s is %s, info.json says video.codec %s (the container's codec is decoded)", ft->key, path, m->codec, ft->codec);
                if (ft->width > 0 && (ft->width != m->width || ft->height != m->height) && !said_size++)
                    PROBLEM("camera %s: %s is %dx%d, info.json says %dx%d", ft->key, path, m->width, m->height, ft->width, ft->height);
                if (d->v3 && mact_video_frame_times(v, &times, &nt, err, sizeof err)) { PROBLEM("episode %lld camera %s: %s", ei, ft->key, err); continue; }
                bad_file = 0;
            } else if (bad_file) continue;
            int64_t len = d->ep[i].length;
            if (d->v3) {
                /* LeRobot's tolerance (1e-4 s): a frame exactly at to_timestamp is the next episode's first */
                double from = d->vid[k].from[i], to = d->vid[k].to[i];
                int64_t c = 0;
                for (int64_t j = 0; j < nt; j++) c += times[j] >= from - 1e-4 && times[j] < to - 1e-4;
                if (c != len)
                    PROBLEM("episode %lld camera %s: %lld frames in [%.6f, %.6f) s of %s, length %lld", ei, ft->key, (long long)c, from, to, path, (long long)len);
            } else if (mact_video_info(v)->n_frames != len)
                PROBLEM("episode %lld camera %s: %s has %lld frames, length %lld", ei, ft->key, path, (long long)mact_video_info(v)->n_frames, (long long)len);
        }
        mact_video_close(v);
        free(times);
    }
#undef PROBLEM
    return np;
}
