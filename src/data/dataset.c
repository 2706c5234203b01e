/* The public face of the LeRobot reader (include/mact_data.h): mact_dataset over data/lerobot.h, a frame as
 * decoded (data/ds_camera.h), `mact dataset info`'s report and `mact dataset dump`'s JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact_data.h"
#include "base/err.h"
#include "data/ds_camera.h"
#include "data/lerobot.h"
#include "data/parquet.h"
#include "data/video.h"
#include "mact.h"

struct mact_dataset {
    mact_ld *ld;
};

const char *mact_data_version(void) { return MACT_VERSION_STRING; }

static int is_camera(const mact_ld_feature *ft) { return !strcmp(ft->dtype, "video") || !strcmp(ft->dtype, "image"); }

mact_status mact_dataset_open(const char *dir, mact_dataset **out, char *err, size_t el)
{
    if (!out) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_open: out is NULL");
    *out = NULL;
    if (!dir) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_open: dir is NULL");
    mact_dataset *d = calloc(1, sizeof *d);
    if (!d) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    int rc = mact_ld_open(dir, &d->ld, err, el);
    if (rc) { free(d); return (mact_status)(rc < 0 ? rc : MACT_ERR_FORMAT); }
    *out = d;
    return MACT_OK;
}

void mact_dataset_close(mact_dataset *d)
{
    if (!d) return;
    mact_ld_close(d->ld);
    free(d);
}

void mact_dataset_get_info(const mact_dataset *d, mact_dataset_info *o)
{
    memset(o, 0, sizeof *o);
    if (!d) return;
    const mact_ld *l = d->ld;
    o->dir = mact_ld_dir(l);
    o->version = mact_ld_version(l);
    o->robot = mact_ld_robot(l);
    o->fps = mact_ld_fps(l);
    o->n_episodes = mact_ld_num_episodes(l);
    o->n_tasks = mact_ld_num_tasks(l);
    o->n_features = mact_ld_num_features(l);
    for (int i = 0; i < o->n_features; i++) o->n_cameras += is_camera(mact_ld_feature_at(l, i));
    for (int i = 0; i < o->n_episodes; i++) o->n_frames += mact_ld_episode_at(l, i)->length;
    o->info_total_frames = mact_ld_total_frames(l);
}

mact_status mact_dataset_feature_at(const mact_dataset *d, int i, mact_dataset_feature *o)
{
    if (!d || !o || i < 0 || i >= mact_ld_num_features(d->ld)) return MACT_ERR_INPUT;
    const mact_ld_feature *ft = mact_ld_feature_at(d->ld, i);
    *o = (mact_dataset_feature){.key = ft->key, .dtype = ft->dtype, .ndim = ft->ndim, .n_names = ft->n_names,
                                .is_camera = is_camera(ft), .height = ft->height, .width = ft->width, .codec = ft->codec};
    memcpy(o->shape, ft->shape, sizeof o->shape);
    return MACT_OK;
}

int mact_dataset_find_feature(const mact_dataset *d, const char *key)
{
    for (int i = 0; d && key && i < mact_ld_num_features(d->ld); i++)
        if (!strcmp(mact_ld_feature_at(d->ld, i)->key, key)) return i;
    return -1;
}

const char *mact_dataset_feature_name(const mact_dataset *d, int i, int k)
{
    if (!d || i < 0 || i >= mact_ld_num_features(d->ld)) return NULL;
    const mact_ld_feature *ft = mact_ld_feature_at(d->ld, i);
    return k >= 0 && k < ft->n_names ? ft->names[k] : NULL;
}

mact_status mact_dataset_episode_at(const mact_dataset *d, int i, mact_dataset_episode *o)
{
    if (!d || !o || i < 0 || i >= mact_ld_num_episodes(d->ld)) return MACT_ERR_INPUT;
    const mact_ld_episode *e = mact_ld_episode_at(d->ld, i);
    *o = (mact_dataset_episode){.index = e->index, .length = e->length, .task = e->task};
    return MACT_OK;
}

mact_status mact_dataset_read(mact_dataset *d, int i, const char *key, double *out, size_t cap, int64_t *rows, int *dim,
                              char *err, size_t el)
{
    if (!d || !key || !rows || !dim) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_read: a NULL argument");
    if (i < 0 || i >= mact_ld_num_episodes(d->ld))
        return mact_errf(err, el, MACT_ERR_INPUT, "%s: no episode at position %d (%d episodes)", mact_ld_dir(d->ld), i,
                         mact_ld_num_episodes(d->ld));
    double *x = NULL;
    int rc = mact_ld_read(d->ld, i, key, &x, rows, dim, err, el);
    if (rc) return (mact_status)(rc < 0 ? rc : MACT_ERR_FORMAT);
    const size_t n = (size_t)*rows * (size_t)*dim;
    if (out && n <= cap) memcpy(out, x, n * sizeof *x);
    free(x);
    if (out && n > cap) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_read: '%s' needs %zu values, the buffer holds %zu", key, n, cap);
    return MACT_OK;
}

/* the image (decoded) of frame t: the parquet's PNG/JPEG bytes, or the video frame at LeRobot's query time */
static int frame_image(mact_ld *d, int i, int64_t t, const char *cam, double tol, int threads, mact_image *img,
                       mact_dataset_frame_info *fi, char *err, size_t el)
{
    const mact_ld_feature *ft = mact_ld_find_feature(d, cam);
    if (!ft || !is_camera(ft))
        return mact_errf(err, el, MACT_ERR_INPUT, "%s: no camera '%s' (a video or image feature of meta/info.json)", mact_ld_dir(d), cam);
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    if (t < 0 || t >= e->length)
        return mact_errf(err, el, MACT_ERR_INPUT, "episode %lld has %lld frames, no frame %lld", (long long)e->index, (long long)e->length, (long long)t);
    char e2[2048];
    ds_camera c;
    int rc = ds_camera_open(d, cam, threads, tol, &c, e2, sizeof e2) || ds_camera_episode(d, i, &c, e2, sizeof e2) ||
             ds_camera_frame(d, &c, t, img, &fi->time_s, e2, sizeof e2);
    if (c.video) {
        fi->from_video = 1;
        snprintf(fi->codec, sizeof fi->codec, "%s", c.v ? mact_video_info(c.v)->codec : "");
        snprintf(fi->source, sizeof fi->source, "%s", c.path);
    }
    ds_camera_close(&c);
    if (rc) return mact_errf(err, el, MACT_ERR_FORMAT, "episode %lld camera %s frame %lld: %s", (long long)e->index, cam, (long long)t, e2);
    fi->height = (int)img->height;
    fi->width = (int)img->width;
    return 0;
}

mact_status mact_dataset_frame(mact_dataset *d, int i, int64_t t, const char *cam, double tol, int threads, uint8_t *rgb,
                               size_t cap, mact_dataset_frame_info *info, char *err, size_t el)
{
    if (!d || !cam) return mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_frame: a NULL argument");
    if (i < 0 || i >= mact_ld_num_episodes(d->ld)) return mact_errf(err, el, MACT_ERR_INPUT, "%s: no episode at position %d", mact_ld_dir(d->ld), i);
    mact_dataset_frame_info fi;
    memset(&fi, 0, sizeof fi);
    mact_image img = {0};
    int rc = frame_image(d->ld, i, t, cam, tol, threads, &img, &fi, err, el);
    if (!rc && rgb) {
        const size_t n = (size_t)img.height * (size_t)img.width * 3;
        if (n > cap) rc = mact_errf(err, el, MACT_ERR_INPUT, "mact_dataset_frame: the frame needs %zu bytes, the buffer holds %zu", n, cap);
        else memcpy(rgb, img.data, n);
    }
    mact_image_free(&img);
    if (info) *info = fi;
    return (mact_status)rc;
}

mact_status mact_dataset_check(mact_dataset *d, char *buf, size_t cap, int *n_problems)
{
    if (!d || !buf || !cap || !n_problems) return MACT_ERR_INPUT;
    *n_problems = mact_ld_check(d->ld, buf, cap);
    return MACT_OK;
}

void mact_data_quiet_logs(void) { mact_video_quiet_logs(); }

/* ---- mact dataset info ---- */

/* a video camera: the container's codec and size (of its first readable file) and the frames of all its files */
static void video_camera_line(FILE *o, const mact_ld *d, const mact_ld_feature *ft)
{
    char last[4096] = "", path[4096], err[2048];
    int64_t frames = 0;
    int files = 0, unreadable = 0, have = 0;
    mact_video_meta m0;
    memset(&m0, 0, sizeof m0);
    for (int i = 0; i < mact_ld_num_episodes(d); i++) {
        if (mact_ld_episode_video(d, i, ft->key, path, sizeof path, NULL)) { unreadable = -1; break; }
        if (!strcmp(path, last)) continue;
        snprintf(last, sizeof last, "%s", path);
        mact_video *v;
        if (mact_video_open(path, 1, &v, err, sizeof err)) { unreadable++; continue; }
        if (!have++) m0 = *mact_video_info(v);
        frames += mact_video_info(v)->n_frames;
        files++;
        mact_video_close(v);
    }
    if (!have) {
        fprintf(o, "    %s: video, %s (info.json: %s, %dx%d)\n", ft->key, unreadable < 0 ? "no usable video path" : "no readable file",
                ft->codec[0] ? ft->codec : "codec unknown", ft->width, ft->height);
        return;
    }
    fprintf(o, "    %s: video %s, %dx%d, %lld frames in %d file%s", ft->key, m0.codec, m0.width, m0.height, (long long)frames, files, files == 1 ? "" : "s");
    if (unreadable) fprintf(o, ", %d unreadable", unreadable > 0 ? unreadable : 0);
    if (strcmp(m0.codec, ft->codec)) fprintf(o, " (info.json says %s; the container's is decoded)", ft->codec[0] ? ft->codec : "no codec");
    fprintf(o, "\n");
}

mact_status mact_dataset_report(const char *dir, FILE *o, int *n_problems, char *err, size_t el)
{
    mact_dataset *ds;
    mact_status rc = mact_dataset_open(dir, &ds, err, el);
    if (rc) return rc;
    mact_ld *d = ds->ld;
    mact_dataset_info di;
    mact_dataset_get_info(ds, &di);
    FILE *f = o ? o : fopen("/dev/null", "w");
    if (!f) { mact_dataset_close(ds); return mact_errf(err, el, MACT_ERR_IO, "cannot open /dev/null"); }
    fprintf(f, "dataset %s\n  version %s, robot %s, fps %d\n  episodes %d, frames %lld (info.json: %lld), tasks %d\n", dir,
            di.version, di.robot[0] ? di.robot : "-", di.fps, di.n_episodes, (long long)di.n_frames,
            (long long)di.info_total_frames, di.n_tasks);
    fprintf(f, "  features:\n");
    for (int i = 0; i < di.n_features; i++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, i);
        fprintf(f, "    %-32s %-8s [", ft->key, ft->dtype);
        for (int k = 0; k < ft->ndim; k++) fprintf(f, "%s%d", k ? ", " : "", ft->shape[k]);
        fprintf(f, "]");
        if (ft->n_names) {
            fprintf(f, " names:");
            for (int k = 0; k < ft->n_names; k++) fprintf(f, " %s", ft->names[k]);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  cameras: %d\n", di.n_cameras);
    for (int i = 0; i < di.n_features; i++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, i);
        if (!is_camera(ft)) continue;
        if (!strcmp(ft->dtype, "video")) video_camera_line(f, d, ft);
        else fprintf(f, "    %s: PNG in parquet, %dx%d, one frame per row\n", ft->key, ft->width, ft->height);
    }
    const size_t cap = 1 << 16;
    char *probs = malloc(cap);
    int np = probs ? mact_ld_check(d, probs, cap) : 0;
    fprintf(f, "  problems: %d\n", np);
    for (char *s = probs; np && *s;) {
        char *e = strchr(s, '\n');
        if (e) *e = 0;
        fprintf(f, "    %s\n", s);
        if (!e) break;
        s = e + 1;
    }
    free(probs);
    if (f != o) fclose(f);
    mact_dataset_close(ds);
    if (!probs) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    if (n_problems) *n_problems = np;
    return MACT_OK;
}

/* ---- mact dataset dump ---- */

static void json_str(FILE *o, const uint8_t *s, int64_t n)
{
    fputc('"', o);
    for (int64_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc((int)c, o);
    }
    fputc('"', o);
}

static void print_value(FILE *o, const mact_pq_column *c, const mact_pq_leaf *l, int64_t i)
{
    switch (c->type) {
    case MACT_PQ_BYTE_ARRAY: case MACT_PQ_FIXED_LEN_BYTE_ARRAY:
        if (l->is_string) json_str(o, c->bytes + c->boff[i], c->boff[i + 1] - c->boff[i]);
        else {
            fputc('"', o);
            for (int64_t k = c->boff[i]; k < c->boff[i + 1]; k++) fprintf(o, "%02x", c->bytes[k]);
            fputc('"', o);
        }
        break;
    case MACT_PQ_BOOLEAN: fputs(((const uint8_t *)c->vals)[i] ? "true" : "false", o); break;
    case MACT_PQ_INT32: case MACT_PQ_INT64: {
        int64_t v;
        if (c->type == MACT_PQ_INT32) { int32_t x; memcpy(&x, (const uint8_t *)c->vals + 4 * i, 4); v = x; }
        else memcpy(&v, (const uint8_t *)c->vals + 8 * i, 8);
        fprintf(o, "%lld", (long long)v);
        break;
    }
    default: fprintf(o, "%.17g", mact_pq_value_f64(c, i));
    }
}

/* rows as JSON objects: {"top": value | [values] | {"sub": value}} */
mact_status mact_parquet_dump_json(const char *path, FILE *o, char *err, size_t el)
{
    mact_pq_file *f;
    int rc = mact_pq_open(path, NULL, &f, err, el);
    if (rc) return (mact_status)(rc < 0 ? rc : MACT_ERR_FORMAT);
    int nl = mact_pq_num_leaves(f);
    mact_pq_column *cols = calloc((size_t)nl + 1, sizeof *cols);
    if (!cols) { mact_pq_close(f); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
    for (int i = 0; i < nl; i++)
        if ((rc = mact_pq_read(f, i, -1, &cols[i], err, el))) {
            for (int k = 0; k <= i; k++) mact_pq_column_free(&cols[k]);
            free(cols);
            mact_pq_close(f);
            return (mact_status)(rc < 0 ? rc : MACT_ERR_FORMAT);
        }
    int64_t n = mact_pq_num_rows(f);
    fprintf(o, "[");
    for (int64_t r = 0; r < n; r++) {
        fprintf(o, "%s\n{", r ? "," : "");
        for (int i = 0; i < nl; i++) {
            const mact_pq_leaf *l = mact_pq_leaf_at(f, i);
            int first_of_top = i == 0 || strcmp(mact_pq_leaf_at(f, i - 1)->top, l->top);
            int last_of_top = i == nl - 1 || strcmp(mact_pq_leaf_at(f, i + 1)->top, l->top);
            int is_struct = l->max_rep == 0 && l->sub[0];
            if (first_of_top) {
                fprintf(o, "%s", i ? "," : "");
                json_str(o, (const uint8_t *)l->top, (int64_t)strlen(l->top));
                fprintf(o, ":");
                if (is_struct) fprintf(o, "{");
            } else fprintf(o, ",");
            if (is_struct) { json_str(o, (const uint8_t *)l->sub, (int64_t)strlen(l->sub)); fprintf(o, ":"); }
            const mact_pq_column *c = &cols[i];
            if (c->row_null[r]) fprintf(o, "null");
            else if (l->max_rep) {
                fprintf(o, "[");
                for (int64_t k = c->row_start[r]; k < c->row_start[r + 1]; k++) { if (k > c->row_start[r]) fprintf(o, ","); print_value(o, c, l, k); }
                fprintf(o, "]");
            } else print_value(o, c, l, c->row_start[r]);
            if (last_of_top && is_struct) fprintf(o, "}");
        }
        fprintf(o, "}");
    }
    fprintf(o, "\n]\n");
    for (int i = 0; i < nl; i++) mact_pq_column_free(&cols[i]);
    free(cols);
    mact_pq_close(f);
    return MACT_OK;
}
