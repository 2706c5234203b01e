/* `mact dataset info DIR`, `mact dataset frame DIR ...` (one camera frame as PNG, as decoded),
 * `mact dataset dump FILE.parquet` (every row as JSON, for cross-checks) and `mact synth-dataset OUT_DIR [...]`
 * (src/dev/lerobot_synth.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <png.h>
#include "io/image.h"
#include "io/lerobot.h"
#include "io/parquet.h"
#include "io/video.h"
#include "ds_video.h"
#include "dev/lerobot_synth.h"
#include "dev/video_write.h"

int cmd_dataset(int argc, char **argv);
int cmd_synth_dataset(int argc, char **argv);

static void json_str(const uint8_t *s, int64_t n)
{
    putchar('"');
    for (int64_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar((int)c);
    }
    putchar('"');
}

static void print_value(const mact_pq_column *c, const mact_pq_leaf *l, int64_t i)
{
    switch (c->type) {
    case MACT_PQ_BYTE_ARRAY: case MACT_PQ_FIXED_LEN_BYTE_ARRAY:
        if (l->is_string) json_str(c->bytes + c->boff[i], c->boff[i + 1] - c->boff[i]);
        else {
            putchar('"');
            for (int64_t k = c->boff[i]; k < c->boff[i + 1]; k++) printf("%02x", c->bytes[k]);
            putchar('"');
        }
        break;
    case MACT_PQ_BOOLEAN: fputs(((const uint8_t *)c->vals)[i] ? "true" : "false", stdout); break;
    case MACT_PQ_INT32: case MACT_PQ_INT64: {
        int64_t v;
        if (c->type == MACT_PQ_INT32) { int32_t x; memcpy(&x, (const uint8_t *)c->vals + 4 * i, 4); v = x; }
        else memcpy(&v, (const uint8_t *)c->vals + 8 * i, 8);
        printf("%lld", (long long)v);
        break;
    }
    default: printf("%.17g", mact_pq_value_f64(c, i));
    }
}

/* rows as JSON objects: {"top": value | [values] | {"sub": value}} */
static int dump(const char *path)
{
    char err[1024];
    mact_pq_file *f;
    if (mact_pq_open(path, NULL, &f, err, sizeof err)) { fprintf(stderr, "mact dataset dump: %s\n", err); return 1; }
    int nl = mact_pq_num_leaves(f);
    mact_pq_column *cols = calloc((size_t)nl, sizeof *cols);
    for (int i = 0; i < nl; i++)
        if (mact_pq_read(f, i, -1, &cols[i], err, sizeof err)) {
            fprintf(stderr, "mact dataset dump: %s\n", err);
            for (int k = 0; k <= i; k++) mact_pq_column_free(&cols[k]);
            free(cols); mact_pq_close(f);
            return 1;
        }
    int64_t n = mact_pq_num_rows(f);
    printf("[");
    for (int64_t r = 0; r < n; r++) {
        printf("%s\n{", r ? "," : "");
        for (int i = 0; i < nl; i++) {
            const mact_pq_leaf *l = mact_pq_leaf_at(f, i);
            int first_of_top = i == 0 || strcmp(mact_pq_leaf_at(f, i - 1)->top, l->top);
            int last_of_top = i == nl - 1 || strcmp(mact_pq_leaf_at(f, i + 1)->top, l->top);
            int is_struct = l->max_rep == 0 && l->sub[0];
            if (first_of_top) { printf("%s", i ? "," : ""); json_str((const uint8_t *)l->top, (int64_t)strlen(l->top)); printf(":"); if (is_struct) printf("{"); }
            else printf(",");
            if (is_struct) { json_str((const uint8_t *)l->sub, (int64_t)strlen(l->sub)); printf(":"); }
            const mact_pq_column *c = &cols[i];
            if (c->row_null[r]) printf("null");
            else if (l->max_rep) {
                printf("[");
                for (int64_t k = c->row_start[r]; k < c->row_start[r + 1]; k++) { if (k > c->row_start[r]) printf(","); print_value(c, l, k); }
                printf("]");
            } else print_value(c, l, c->row_start[r]);
            if (last_of_top && is_struct) printf("}");
        }
        printf("}");
    }
    printf("\n]\n");
    for (int i = 0; i < nl; i++) mact_pq_column_free(&cols[i]);
    free(cols);
    mact_pq_close(f);
    return 0;
}

/* a video camera: the container's codec and size (of its first readable file) and the frames of all its files */
static void video_camera_line(const mact_ld *d, const mact_ld_feature *ft)
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
        printf("    %s: video, %s (info.json: %s, %dx%d)\n", ft->key, unreadable < 0 ? "no usable video path" : "no readable file",
               ft->codec[0] ? ft->codec : "codec unknown", ft->width, ft->height);
        return;
    }
    printf("    %s: video %s, %dx%d, %lld frames in %d file%s", ft->key, m0.codec, m0.width, m0.height, (long long)frames, files, files == 1 ? "" : "s");
    if (unreadable) printf(", %d unreadable", unreadable > 0 ? unreadable : 0);
    if (strcmp(m0.codec, ft->codec)) printf(" (info.json says %s; the container's is decoded)", ft->codec[0] ? ft->codec : "no codec");
    printf("\n");
}

static int info(const char *dir, int json)
{
    char err[2048];
    mact_ld *d;
    if (mact_ld_open(dir, &d, err, sizeof err)) { fprintf(stderr, "mact dataset info: %s\n", err); return 1; }
    int64_t frames = 0;
    for (int i = 0; i < mact_ld_num_episodes(d); i++) frames += mact_ld_episode_at(d, i)->length;
    printf("dataset %s\n  version %s, robot %s, fps %d\n  episodes %d, frames %lld (info.json: %lld), tasks %d\n", dir,
           mact_ld_version(d), mact_ld_robot(d)[0] ? mact_ld_robot(d) : "-", mact_ld_fps(d), mact_ld_num_episodes(d),
           (long long)frames, (long long)mact_ld_total_frames(d), mact_ld_num_tasks(d));
    printf("  features:\n");
    int n_cam = 0;
    for (int i = 0; i < mact_ld_num_features(d); i++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, i);
        printf("    %-32s %-8s [", ft->key, ft->dtype);
        for (int k = 0; k < ft->ndim; k++) printf("%s%d", k ? ", " : "", ft->shape[k]);
        printf("]");
        if (ft->n_names) {
            printf(" names:");
            for (int k = 0; k < ft->n_names; k++) printf(" %s", ft->names[k]);
        }
        printf("\n");
        n_cam += !strcmp(ft->dtype, "video") || !strcmp(ft->dtype, "image");
    }
    printf("  cameras: %d\n", n_cam);
    for (int i = 0; i < mact_ld_num_features(d); i++) {
        const mact_ld_feature *ft = mact_ld_feature_at(d, i);
        if (strcmp(ft->dtype, "video") && strcmp(ft->dtype, "image")) continue;
        if (!strcmp(ft->dtype, "video")) video_camera_line(d, ft);
        else printf("    %s: PNG in parquet, %dx%d, one frame per row\n", ft->key, ft->width, ft->height);
    }
    static char probs[1 << 16];
    int np = mact_ld_check(d, probs, sizeof probs);
    printf("  problems: %d\n", np);
    for (char *s = probs; np && *s;) {
        char *e = strchr(s, '\n');
        if (e) *e = 0;
        printf("    %s\n", s);
        if (!e) break;
        s = e + 1;
    }
    (void)json;
    mact_ld_close(d);
    return np ? 3 : 0;
}

static int write_png(const char *path, const mact_image *img, char *err, size_t el)
{
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)img->width;
    pi.height = (png_uint_32)img->height;
    pi.format = PNG_FORMAT_RGB;
    if (png_image_write_to_file(&pi, path, 0, img->data, 0, NULL)) return 0;
    snprintf(err, el, "%s: cannot write the PNG: %s", path, pi.message);
    png_image_free(&pi);
    return 1;
}

/* mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] [--threads N]: frame T
 * (frame_index, from 0) of episode E as decoded, before any resize for a model. Video: the frame at
 * from_timestamp + timestamp[T] within LeRobot's 1e-4 s; image features: the PNG/JPEG bytes of row T.
 * --print-number (development): the number a synthetic frame carries (src/dev/video_write.h for video,
 * R + 256 G of the first pixel for the synthetic PNG cameras), so tests can check what was decoded. */
static int frame_cmd(int argc, char **argv)
{
    const char *dir = NULL, *cam = NULL, *out = NULL;
    long long ep = -1, t = -1;
    int print_number = 0, threads = 1;
    for (int i = 0; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--episode") && more) ep = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--index") && more) t = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--camera") && more) cam = argv[++i];
        else if (!strcmp(argv[i], "--out") && more) out = argv[++i];
        else if (!strcmp(argv[i], "--threads") && more) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--print-number")) print_number = 1;
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else { dir = NULL; break; }
    }
    if (!dir || !cam || ep < 0 || t < 0 || (!out && !print_number) || threads < 0 || threads > 64) {
        fprintf(stderr, "usage: mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] [--threads N]\n");
        return 2;
    }
    char err[4096];
    mact_ld *d;
    if (mact_ld_open(dir, &d, err, sizeof err)) { fprintf(stderr, "mact dataset frame: %s\n", err); return 1; }
    int i, rc = 1;
    for (i = 0; i < mact_ld_num_episodes(d) && mact_ld_episode_at(d, i)->index != ep; i++) {}
    const mact_ld_feature *ft = mact_ld_find_feature(d, cam);
    mact_image img = {0};
    uint8_t *bytes = NULL;
    int64_t *off = NULL, rows = 0;
    double *ts = NULL;
    if (i == mact_ld_num_episodes(d)) { fprintf(stderr, "mact dataset frame: %s: no episode %lld\n", dir, ep); goto done; }
    if (!ft || (strcmp(ft->dtype, "video") && strcmp(ft->dtype, "image"))) {
        fprintf(stderr, "mact dataset frame: %s: no camera '%s' (a video or image feature of meta/info.json)\n", dir, cam);
        goto done;
    }
    const mact_ld_episode *e = mact_ld_episode_at(d, i);
    if (t >= e->length) { fprintf(stderr, "mact dataset frame: episode %lld has %lld frames, no frame %lld\n", ep, (long long)e->length, t); goto done; }
    if (!strcmp(ft->dtype, "image")) {
        if (mact_ld_read_images(d, i, cam, &bytes, &off, &rows, err, sizeof err) ||
            mact_image_load_memory(bytes + off[t], (size_t)(off[t + 1] - off[t]), &img, err, sizeof err)) {
            fprintf(stderr, "mact dataset frame: episode %lld camera %s frame %lld: %s\n", ep, cam, t, err);
            goto done;
        }
        printf("episode %lld camera %s frame %lld: %lldx%lld, from the parquet's image bytes\n", ep, cam, t, (long long)img.width, (long long)img.height);
        if (print_number) printf("index %d\n", img.data[0] | img.data[1] << 8);
    } else {
        double from;
        ds_video dv = {.threads = threads};
        if (ds_video_episode(d, i, cam, &dv, &from, err, sizeof err) || ds_timestamps(d, i, e->length, &ts, err, sizeof err)) {
            fprintf(stderr, "mact dataset frame: episode %lld camera %s frame %lld: %s\n", ep, cam, t, err);
            ds_video_close(&dv);
            goto done;
        }
        const double tt = ds_query_time(d, from, ts, t);
        int r = mact_video_frame_at(dv.v, tt, 1e-4, &img, err, sizeof err);
        if (r) fprintf(stderr, "mact dataset frame: episode %lld camera %s frame %lld: %s\n", ep, cam, t, err);
        else printf("episode %lld camera %s frame %lld: %lldx%lld %s, t=%.6f s in %s\n", ep, cam, t, (long long)img.width,
                    (long long)img.height, mact_video_info(dv.v)->codec, tt, dv.path);
        ds_video_close(&dv);
        if (r) goto done;
        uint32_t num;
        if (print_number) {
            if (mact_vw_read_number(img.data, (int)img.width, (int)img.height, &num)) printf("number none\n");
            else printf("number %u (camera %u episode %u frame %u)\n", num, num >> 20, (num >> 12) & 255, num & 4095);
        }
    }
    if (out && write_png(out, &img, err, sizeof err)) { fprintf(stderr, "mact dataset frame: %s\n", err); goto done; }
    rc = 0;
done:
    free(ts); free(bytes); free(off);
    mact_image_free(&img);
    mact_ld_close(d);
    return rc;
}

int cmd_dataset(int argc, char **argv)
{
    mact_video_quiet_logs();  /* FFmpeg's info lines (decoder banners) would drown the output */
    if (argc == 2 && !strcmp(argv[0], "info")) return info(argv[1], 0);
    if (argc == 2 && !strcmp(argv[0], "dump")) return dump(argv[1]);
    if (argc >= 1 && !strcmp(argv[0], "frame")) return frame_cmd(argc - 1, argv + 1);
    fprintf(stderr, "usage: mact dataset info DIR          versions, episodes, frames, features, cameras, problems (exit 3 if any)\n"
                    "       mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] [--threads N]\n"
                    "                                      one camera frame as decoded (video or PNG in parquet)\n"
                    "       mact dataset dump FILE.parquet  every row as JSON (for cross-checks)\n");
    return 2;
}

int cmd_synth_dataset(int argc, char **argv)
{
    mact_lrs_options o = {0};
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--version") && more) { const char *v = argv[++i]; o.version = !strcmp(v, "v3.0") || !strcmp(v, "30") ? 30 : !strcmp(v, "v2.1") || !strcmp(v, "21") ? 21 : -1; }
        else if (!strcmp(a, "--robot") && more) { const char *v = argv[++i]; if (!strcmp(v, "libero")) o.libero = 1; else if (strcmp(v, "so101")) o.version = -1; }
        else if (!strcmp(a, "--episodes") && more) o.n_episodes = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && more) o.seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(a, "--variant") && more) o.variant = argv[++i];
        else if (!strcmp(a, "--len") && more) { if (sscanf(argv[++i], "%d:%d", &o.min_len, &o.max_len) != 2) o.version = -1; }
        else if (!strcmp(a, "--ts-f64")) o.ts_f64 = 1;
        else if (!strcmp(a, "--video") && more) o.video = argv[++i];
        else if (!strcmp(a, "--video-size") && more) { if (sscanf(argv[++i], "%dx%d", &o.video_w, &o.video_h) != 2) o.version = -1; }
        else if (a[0] != '-' && !out) out = a;
        else { out = NULL; break; }
    }
    if (!out || o.version < 0) {
        fprintf(stderr, "usage: mact synth-dataset OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--episodes N] [--seed S]\n"
                        "       [--len MIN:MAX] [--ts-f64] [--variant V] [--video C] [--video-size WxH]\n"
                        "  V: %s\n  C: %s (the cameras as mp4 video features; WxH default 64x64)\n", mact_lrs_variants(), mact_vw_codecs());
        return 2;
    }
    mact_video_quiet_logs();
    /* SVT-AV1 prints its configuration banner itself, not through FFmpeg's log; 1 = errors only */
    setenv("SVT_LOG", "1", 0);
    char err[1024];
    if (mact_lerobot_synth(out, &o, err, sizeof err)) { fprintf(stderr, "mact synth-dataset: %s\n", err); return 1; }
    return 0;
}
