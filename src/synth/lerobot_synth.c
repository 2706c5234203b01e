/* Synthetic LeRobot datasets (src/data/lerobot_synth.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "base/rng.h"
#include "io/so101.h"
#include "synth/lerobot_synth.h"
#include "synth/pq_write.h"
#include "synth/video_write.h"

const char *mact_lerobot_synth_variants(void) { return "pyarrow plain fallback multipage rowgroups v2pages zstd gzip uncompressed"; }

static double urand(mact_rng *r) { return (double)(mact_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static double nrand(mact_rng *r) { double u = urand(r) + 1e-12, v = urand(r); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }

static const char *const lib_state_names[8] = {"x", "y", "z", "axis_angle1", "axis_angle2", "axis_angle3", "gripper_qpos1", "gripper_qpos2"};
static const char *const lib_action_names[7] = {"x", "y", "z", "roll", "pitch", "yaw", "gripper"};
static const char *const tasks_so[] = {"pick up the cube", "put the cube in the bowl", "push the block left"};
static const char *const tasks_lib[] = {"put the bowl on the plate", "open the top drawer", "turn on the stove"};
/* camera keys: LIBERO's and SO-101's, each named as `mact synth`'s tag for that robot names them, so a synthetic
 * checkpoint evaluates on a synthetic dataset as it is; PNG images in the parquet unless they are videos */
static const char *const cams_lib[2] = {"observation.images.image", "observation.images.wrist_image"};
static const char *const cams_so[2] = {"observation.images.top", "observation.images.wrist"};
#define CAMS(o) ((o)->libero ? cams_lib : cams_so)
#define HAS_PNG(o) (!(o)->video && !(o)->no_cameras)

/* SO-101: minimum-jerk moves between random waypoints with holds; state follows the action 3 frames late
 * plus noise; the gripper state saturates while grasping. */
static void gen_so101(mact_rng *r, int T, float *act, float *st)
{
    static const double lo[6] = {-60, -100, -10, 20, -90, 0}, hi[6] = {30, 10, 100, 95, -20, 40};
    double cur[6], tgt[6];
    for (int j = 0; j < 6; j++) cur[j] = lo[j] + (hi[j] - lo[j]) * urand(r);
    int t = 0;
    while (t < T) {
        int hold = (int)(15 + urand(r) * 75), move = (int)(20 + urand(r) * 60);
        for (int k = 0; k < hold && t < T; k++, t++)
            for (int j = 0; j < 6; j++) act[t * 6 + j] = (float)cur[j];
        for (int j = 0; j < 6; j++) tgt[j] = lo[j] + (hi[j] - lo[j]) * urand(r);
        if (urand(r) < 0.5) tgt[5] = urand(r) < 0.5 ? 0.5 : 38;
        for (int k = 1; k <= move && t < T; k++, t++) {
            double s = (double)k / move, m = s * s * s * (10 - 15 * s + 6 * s * s);
            for (int j = 0; j < 6; j++) act[t * 6 + j] = (float)(cur[j] + (tgt[j] - cur[j]) * m);
        }
        memcpy(cur, tgt, sizeof cur);
    }
    for (t = 0; t < T; t++)
        for (int j = 0; j < 6; j++) {
            int s = t - 3 < 0 ? 0 : t - 3;
            double v = act[s * 6 + j] + 0.3 * nrand(r);
            if (j == 5 && v > 12) v = 12 + 0.1 * (v - 12);  /* stalls on the object */
            st[t * 6 + j] = (float)v;
        }
}

/* LIBERO: smooth deltas in [-1, 1], a +-1 gripper, state = integrated pose + 2 gripper qpos */
static void gen_libero(mact_rng *r, int T, float *act, float *st)
{
    double ph[6], fr[6], pose[6] = {0}, g = -1;
    for (int j = 0; j < 6; j++) { ph[j] = urand(r) * 6.28; fr[j] = 0.02 + 0.1 * urand(r); }
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < 6; j++) {
            double a = 0.8 * sin(ph[j] + fr[j] * t) + 0.05 * nrand(r);
            a = a > 1 ? 1 : a < -1 ? -1 : a;
            act[t * 7 + j] = (float)a;
        }
        if (urand(r) < 0.03) g = -g;
        act[t * 7 + 6] = (float)g;
        for (int j = 0; j < 6; j++) { pose[j] += 0.01 * act[t * 7 + j]; st[t * 8 + j] = (float)pose[j]; }
        st[t * 8 + 6] = (float)(g > 0 ? 0.01 : 0.039);
        st[t * 8 + 7] = (float)-(g > 0 ? 0.01 : 0.039);
    }
}

/* A small RGB PNG (zlib, no filter) whose pixels carry the frame number */
static uint8_t *make_png(int frame, int cam, size_t *len)
{
    enum { W = 16, H = 16 };
    uint8_t rawimg[H * (1 + W * 3)];
    for (int y = 0; y < H; y++) {
        rawimg[y * (1 + W * 3)] = 0;
        for (int x = 0; x < W; x++) {
            uint8_t *p = &rawimg[y * (1 + W * 3) + 1 + x * 3];
            p[0] = (uint8_t)(frame & 0xff); p[1] = (uint8_t)((frame >> 8) & 0xff); p[2] = (uint8_t)(cam * 64 + x * 4 + y);
        }
    }
    uLongf zl = compressBound(sizeof rawimg);
    uint8_t *z = malloc(zl);
    if (!z || compress2(z, &zl, rawimg, sizeof rawimg, 6) != Z_OK) { free(z); return NULL; }
    size_t n = 8 + 25 + 12 + zl + 12;
    uint8_t *o = malloc(n), *p = o;
    if (!o) { free(z); return NULL; }
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    memcpy(p, sig, 8); p += 8;
#define CHUNK(type, data, dlen) do { \
        uint32_t L = (uint32_t)(dlen); p[0] = L >> 24; p[1] = L >> 16; p[2] = L >> 8; p[3] = L; \
        memcpy(p + 4, type, 4); if (L) memcpy(p + 8, data, L); \
        uint32_t c = (uint32_t)crc32(0, p + 4, 4 + L); p += 8 + L; p[0] = c >> 24; p[1] = c >> 16; p[2] = c >> 8; p[3] = c; p += 4; } while (0)
    uint8_t ihdr[13] = {0, 0, 0, W, 0, 0, 0, H, 8, 2, 0, 0, 0};
    CHUNK("IHDR", ihdr, 13);
    CHUNK("IDAT", z, zl);
    CHUNK("IEND", "", 0);
#undef CHUNK
    free(z);
    *len = (size_t)(p - o);
    return o;
}

static void names_json(FILE *f, const char *const *n, int k)
{
    fputc('[', f);
    for (int i = 0; i < k; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", n[i]);
    fputc(']', f);
}

static int write_info(const char *dir, const mact_lrs_options *o, int n_ep, int64_t total, int n_tasks)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/info.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    int v3 = o->version == 30;
    int ad = o->libero ? 7 : 6, sd = o->libero ? 8 : 6;
    fprintf(f, "{\n  \"codebase_version\": \"%s\",\n  \"robot_type\": \"%s\",\n", v3 ? "v3.0" : "v2.1", o->libero ? "panda" : "so101_follower");
    fprintf(f, "  \"total_episodes\": %d,\n  \"total_frames\": %lld,\n  \"total_tasks\": %d,\n", n_ep, (long long)total, n_tasks);
    if (!v3) fprintf(f, "  \"total_videos\": %d,\n  \"total_chunks\": 1,\n", o->video ? 2 * n_ep : 0);
    fprintf(f, "  \"chunks_size\": 1000,\n");
    if (v3) fprintf(f, "  \"data_files_size_in_mb\": 100,\n  \"video_files_size_in_mb\": 200,\n");
    fprintf(f, "  \"fps\": %d,\n  \"splits\": {\"train\": \"0:%d\"},\n", o->libero ? 10 : 30, n_ep);
    fprintf(f, "  \"data_path\": \"%s\",\n", v3 ? "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
                                              : "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet");
    if (!o->video) fputs("  \"video_path\": null,\n", f);
    else fprintf(f, "  \"video_path\": \"%s\",\n", v3 ? "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
                                                 : "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4");
    fprintf(f, "  \"synthetic_generator\": \"mact synth-dataset seed %llu\",\n  \"features\": {\n", (unsigned long long)o->seed);
    fprintf(f, "    \"action\": {\"dtype\": \"float32\", \"shape\": [%d], \"names\": ", ad);
    if (o->libero) names_json(f, lib_action_names, 7); else names_json(f, mact_so101_joints, 6);
    fprintf(f, "},\n    \"observation.state\": {\"dtype\": \"float32\", \"shape\": [%d], \"names\": ", sd);
    if (o->state_names) {  /* the caller's, comma-separated (checked by mact_lerobot_synth) */
        fputc('[', f);
        for (const char *p = o->state_names, *q; *p; p = *q ? q + 1 : q) {
            q = strchr(p, ',');
            if (!q) q = p + strlen(p);
            fprintf(f, "%s\"%.*s\"", p == o->state_names ? "" : ", ", (int)(q - p), p);
        }
        fputc(']', f);
    } else if (o->libero) { fputs("{\"motors\": ", f); names_json(f, lib_state_names, 8); fputc('}', f); } else names_json(f, mact_so101_joints, 6);
    fputs("},\n", f);
    for (int c = 0; o->video && c < 2; c++)  /* LeRobot's video feature (docs/spec/datasets.md 1.2) */
        fprintf(f, "    \"%s\": {\"dtype\": \"video\", \"shape\": [%d, %d, 3], \"names\": [\"height\", \"width\", \"channels\"], "
                   "\"info\": {\"video.height\": %d, \"video.width\": %d, \"video.codec\": \"%s\", \"video.pix_fmt\": \"yuv420p\", "
                   "\"video.is_depth_map\": false, \"video.fps\": %d, \"video.channels\": 3, \"has_audio\": false}},\n",
                CAMS(o)[c], o->video_h, o->video_w, o->video_h, o->video_w, o->video, o->libero ? 10 : 30);
    if (HAS_PNG(o)) {
        for (int c = 0; c < 2; c++)
            fprintf(f, "    \"%s\": {\"dtype\": \"image\", \"shape\": [16, 16, 3], \"names\": [\"height\", \"width\", "
                    "\"channel\"]},\n", CAMS(o)[c]);
    }
    fprintf(f, "    \"timestamp\": {\"dtype\": \"%s\", \"shape\": [1], \"names\": null},\n", o->ts_f64 ? "float64" : "float32");
    fputs("    \"frame_index\": {\"dtype\": \"int64\", \"shape\": [1], \"names\": null},\n", f);
    fputs("    \"episode_index\": {\"dtype\": \"int64\", \"shape\": [1], \"names\": null},\n", f);
    fputs("    \"index\": {\"dtype\": \"int64\", \"shape\": [1], \"names\": null},\n", f);
    fputs("    \"task_index\": {\"dtype\": \"int64\", \"shape\": [1], \"names\": null}\n  }\n}\n", f);
    return fclose(f);
}

typedef struct {
    int64_t n;
    float *act, *st, *ts32;
    double *ts64;
    int64_t *fi, *ei, *gi, *ti;
    uint8_t **img[2];
    size_t *ilen[2];
    char **ipath[2];
} frames;

static int set_variant(const char *v, pqw_options *po)
{
    memset(po, 0, sizeof *po);
    po->codec = 1;
    if (!v || !strcmp(v, "pyarrow")) return 0;
    if (!strcmp(v, "plain")) po->plain = 1;
    else if (!strcmp(v, "fallback")) { po->dict_max = 40; po->page_rows = 50; }
    else if (!strcmp(v, "multipage")) po->page_rows = 37;
    else if (!strcmp(v, "rowgroups")) return 0;  /* handled by the caller */
    else if (!strcmp(v, "v2pages")) { po->page_v2 = 1; po->page_rows = 64; }
    else if (!strcmp(v, "zstd")) po->codec = 6;
    else if (!strcmp(v, "gzip")) po->codec = 2;
    else if (!strcmp(v, "uncompressed")) po->codec = 0;
    else return -1;
    return 0;
}

static int write_frames(const char *path, const frames *fr, int64_t r0, int64_t n, const mact_lrs_options *o,
                        const pqw_options *po0, const int64_t *rg, int n_rg, char *err, size_t el)
{
    int ad = o->libero ? 7 : 6, sd = o->libero ? 8 : 6;
    pqw_column c[9];
    int k = 0;
    c[k++] = (pqw_column){.name = "action", .kind = PQW_F32_LIST, .width = ad, .data = fr->act + r0 * ad};
    c[k++] = (pqw_column){.name = "observation.state", .kind = PQW_F32_LIST, .width = sd, .data = fr->st + r0 * sd};
    if (HAS_PNG(o)) {
        for (int cam = 0; cam < 2; cam++)
            c[k++] = (pqw_column){.name = CAMS(o)[cam], .kind = PQW_IMAGE, .data = fr->img[cam] + r0,
                                  .lens = fr->ilen[cam] + r0, .paths = (const char *const *)fr->ipath[cam] + r0};
    }
    if (o->ts_f64) c[k++] = (pqw_column){.name = "timestamp", .kind = PQW_F64, .data = fr->ts64 + r0};
    else c[k++] = (pqw_column){.name = "timestamp", .kind = PQW_F32, .data = fr->ts32 + r0};
    c[k++] = (pqw_column){.name = "frame_index", .kind = PQW_I64, .data = fr->fi + r0};
    c[k++] = (pqw_column){.name = "episode_index", .kind = PQW_I64, .data = fr->ei + r0};
    c[k++] = (pqw_column){.name = "index", .kind = PQW_I64, .data = fr->gi + r0};
    c[k++] = (pqw_column){.name = "task_index", .kind = PQW_I64, .data = fr->ti + r0};
    pqw_options po = *po0;
    po.rg_rows = rg; po.n_rg = n_rg;
    static const char *const kv[] = {"huggingface", "{\"info\": {\"features\": {}}}"};
    po.kv = kv; po.n_kv = 1;
    return mact_pqw_write(path, c, k, n, &po, err, el);
}

/* The camera videos: v2.1 one mp4 per episode and camera; v3.0 camera c puts 2 + c episodes in each file,
 * so each camera's videos/KEY/{file_index, from_timestamp, to_timestamp} differ from the data files' and
 * from the other camera's (a reader mixing them up reads the wrong frames). */
static int write_videos(const char *dir, const mact_lrs_options *o, int E, const int *len, int64_t *vfile[2],
                        double *vfrom[2], double *vto[2], char *err, size_t el)
{
    int fps = o->libero ? 10 : 30, v3 = o->version == 30, rc = 0;
    mact_vw_options vo = {.codec = o->video, .width = o->video_w, .height = o->video_h, .fps = fps};
    char p[4096];
    for (int c = 0; c < 2 && !rc; c++) {
        int per = v3 ? 2 + c : 1;
        mact_vw *w = NULL;
        int64_t pos = 0;
        for (int e = 0; e < E && !rc; e++) {
            if (e % per == 0) {
                if (w && (rc = mact_vw_close(w, err, el))) { w = NULL; break; }
                w = NULL;
                if (v3) snprintf(p, sizeof p, "%s/videos/%s/chunk-000", dir, CAMS(o)[c]);
                else snprintf(p, sizeof p, "%s/videos/chunk-000/%s", dir, CAMS(o)[c]);
                if (mact_file_mkdirs(p, NULL, 0)) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot create %s", p);
                size_t l = strlen(p);
                if (v3) snprintf(p + l, sizeof p - l, "/file-%03d.mp4", e / per);
                else snprintf(p + l, sizeof p - l, "/episode_%06d.mp4", e);
                if ((rc = mact_vw_open(p, &vo, &w, err, el))) break;
                pos = 0;
            }
            if (v3) { vfile[c][e] = e / per; vfrom[c][e] = (double)pos / fps; vto[c][e] = (double)(pos + len[e]) / fps; }
            for (int t = 0; t < len[e] && !rc; t++)
                rc = mact_vw_frame(w, (uint32_t)c << 20 | (uint32_t)(e & 255) << 12 | (uint32_t)t, (int)(pos + t), c, err, el);
            pos += len[e];
        }
        if (rc) mact_vw_close(w, NULL, 0);
        else if (w) rc = mact_vw_close(w, err, el);
    }
    return rc;
}

/* one dataset being written: the options with their defaults, the episodes and every frame */
typedef struct {
    const char *dir;
    mact_lrs_options o;
    pqw_options po;  /* the variant's parquet options */
    int rowgroups;   /* the rowgroups variant: more than one row group per episode */
    int E;
    int *len, *task;  /* [E]: frames, task index */
    const char *const *tasks;
    frames fr;        /* fr.n: the frames of all episodes */
} synth;

static void frames_free(frames *fr)
{
    for (int c = 0; c < 2; c++) {
        for (int64_t i = 0; fr->img[c] && i < fr->n; i++) free(fr->img[c][i]);
        for (int64_t i = 0; fr->ipath[c] && i < fr->n; i++) free(fr->ipath[c][i]);
        free(fr->img[c]); free(fr->ilen[c]); free(fr->ipath[c]);
    }
    free(fr->act); free(fr->st); free(fr->ts32); free(fr->ts64); free(fr->fi); free(fr->ei); free(fr->gi); free(fr->ti);
}

/* --state-names: one plain name per state dim */
static int check_state_names(const mact_lrs_options *o, char *err, size_t el)
{
    const char *sn = o->state_names;
    if (!sn) return 0;
    int n = 1, sd0 = o->libero ? 8 : 6;
    for (const char *p = sn; *p; p++) {
        n += *p == ',';
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: --state-names: a name with a quote, backslash "
                             "or control character");
    }
    if (n != sd0 || strstr(sn, ",,") || sn[0] == ',' || !sn[0] || sn[strlen(sn) - 1] == ',')
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: --state-names wants %d non-empty names, "
                         "comma-separated", sd0);
    return 0;
}

/* the options' defaults filled in (o is the caller's copy), then checked */
static int resolve_options(mact_lrs_options *o, char *err, size_t el)
{
    if (!o->version) o->version = 21;
    if (o->version != 21 && o->version != 30)
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: version must be 21 or 30");
    if (!o->n_episodes) o->n_episodes = 4;
    if (o->n_episodes < 1 || o->n_episodes > 100000)
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: bad episode count");
    if (!o->min_len) { o->min_len = o->libero ? 60 : 150; o->max_len = o->libero ? 160 : 450; }
    if (o->max_len < o->min_len || o->min_len < 1)
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: bad episode lengths");
    if (o->video && o->no_cameras)
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: --video makes the cameras videos; --no-cameras has none");
    if (o->video) {
        if (!mact_vw_encoder(o->video))
            return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: no encoder for video codec '%s' (%s)", o->video,
                             mact_vw_codecs());
        if (!o->video_w) o->video_w = 64;
        if (!o->video_h) o->video_h = 64;
        if (o->max_len > 4095)
            return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: video frames carry 12-bit frame numbers: "
                             "episodes of at most 4095 frames");
    }
    return check_state_names(o, err, el);
}

/* each episode's length (uniform in min_len..max_len, the seed's first draws) and task (the 3 in turn) */
static int plan_episodes(synth *s, mact_rng *r, char *err, size_t el)
{
    const mact_lrs_options *o = &s->o;
    const int E = s->E = o->n_episodes;
    s->len = calloc((size_t)E, sizeof *s->len);
    s->task = calloc((size_t)E, sizeof *s->task);
    if (!s->len || !s->task) return mact_errf(err, el, MACT_ERR_NOMEM, "synth-dataset: out of memory");
    for (int e = 0; e < E; e++) {
        s->len[e] = o->min_len + (int)(urand(r) * (o->max_len - o->min_len + 1));
        if (s->len[e] > o->max_len) s->len[e] = o->max_len;
        s->task[e] = e % 3;
        s->fr.n += s->len[e];
    }
    return 0;
}

/* the frame arrays, fr->n rows each; the PNG arrays zeroed (frames_free frees the PNGs made so far) */
static int frames_alloc(frames *fr, int ad, int sd, char *err, size_t el)
{
    const int64_t total = fr->n;
    fr->act = malloc((size_t)total * ad * sizeof(float));
    fr->st = malloc((size_t)total * sd * sizeof(float));
    fr->ts32 = malloc((size_t)total * sizeof(float));
    fr->ts64 = malloc((size_t)total * sizeof(double));
    fr->fi = malloc((size_t)total * 8);
    fr->ei = malloc((size_t)total * 8);
    fr->gi = malloc((size_t)total * 8);
    fr->ti = malloc((size_t)total * 8);
    for (int c = 0; c < 2; c++) {
        fr->img[c] = calloc((size_t)total, sizeof(uint8_t *));
        fr->ilen[c] = calloc((size_t)total, sizeof(size_t));
        fr->ipath[c] = calloc((size_t)total, sizeof(char *));
    }
    if (!fr->act || !fr->st || !fr->ts32 || !fr->ts64 || !fr->fi || !fr->ei || !fr->gi || !fr->ti || !fr->img[0] ||
        !fr->img[1] || !fr->ilen[0] || !fr->ilen[1] || !fr->ipath[0] || !fr->ipath[1])
        return mact_errf(err, el, MACT_ERR_NOMEM, "synth-dataset: out of memory");
    return 0;
}

/* frame g's PNG and file name, for each camera */
static int frame_pngs(frames *fr, int64_t g)
{
    for (int c = 0; c < 2; c++) {
        fr->img[c][g] = make_png((int)g, c, &fr->ilen[c][g]);
        char nm[64];
        snprintf(nm, sizeof nm, "frame_%06lld_%d.png", (long long)g, c);
        fr->ipath[c][g] = strdup(nm);
        if (!fr->img[c][g] || !fr->ipath[c][g]) return -1;
    }
    return 0;
}

/* every episode's actions and states (the seed's draws after plan_episodes'), its frames' index columns and,
 * where the dataset has PNG frames, their images */
static int fill_frames(synth *s, mact_rng *r, char *err, size_t el)
{
    const mact_lrs_options *o = &s->o;
    frames *fr = &s->fr;
    const int fps = o->libero ? 10 : 30, ad = o->libero ? 7 : 6, sd = o->libero ? 8 : 6;
    int64_t g = 0;
    for (int e = 0; e < s->E; e++) {
        if (o->libero) gen_libero(r, s->len[e], fr->act + g * ad, fr->st + g * sd);
        else gen_so101(r, s->len[e], fr->act + g * ad, fr->st + g * sd);
        for (int t = 0; t < s->len[e]; t++, g++) {
            fr->ts32[g] = (float)t / (float)fps;
            fr->ts64[g] = (double)t / fps;
            fr->fi[g] = t; fr->ei[g] = e; fr->gi[g] = g; fr->ti[g] = s->task[e];
            if (HAS_PNG(o) && frame_pngs(fr, g))
                return mact_errf(err, el, MACT_ERR_NOMEM, "synth-dataset: out of memory");
        }
    }
    return 0;
}

/* meta/info.json and the data folder, in both layouts */
static int write_info_and_dirs(const synth *s, char *err, size_t el)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/meta", s->dir);
    if (mact_file_mkdirs(p, NULL, 0)) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot create %s", p);
    if (write_info(s->dir, &s->o, s->E, s->fr.n, 3))
        return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot write info.json");
    snprintf(p, sizeof p, "%s/data/chunk-000", s->dir);
    if (mact_file_mkdirs(p, NULL, 0)) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot create %s", p);
    return 0;
}

/* The v2.1 layout: meta/tasks.jsonl, meta/episodes.jsonl, a parquet file per episode (rowgroups variant: 3 row
 * groups each) and the videos. */
static int write_v21(const synth *s, char *err, size_t el)
{
    const int E = s->E, *len = s->len;
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/tasks.jsonl", s->dir);
    FILE *f = fopen(p, "w");
    if (!f) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot write %s", p);
    for (int t = 0; t < 3; t++) fprintf(f, "{\"task_index\": %d, \"task\": \"%s\"}\n", t, s->tasks[t]);
    fclose(f);
    snprintf(p, sizeof p, "%s/meta/episodes.jsonl", s->dir);
    if (!(f = fopen(p, "w"))) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot write %s", p);
    for (int e = 0; e < E; e++)
        fprintf(f, "{\"episode_index\": %d, \"tasks\": [\"%s\"], \"length\": %d}\n", e, s->tasks[s->task[e]], len[e]);
    fclose(f);
    int rc = 0;
    int64_t r0 = 0;
    for (int e = 0; e < E && !rc; e++) {
        snprintf(p, sizeof p, "%s/data/chunk-000/episode_%06d.parquet", s->dir, e);
        int64_t rg[3] = {len[e]};
        int n_rg = 1;
        if (s->rowgroups && len[e] >= 3) {
            rg[0] = len[e] / 3; rg[1] = len[e] / 3; rg[2] = len[e] - 2 * (len[e] / 3); n_rg = 3;
        }
        rc = write_frames(p, &s->fr, r0, len[e], &s->o, &s->po, rg, n_rg, err, el);
        r0 += len[e];
    }
    if (!rc && s->o.video) rc = write_videos(s->dir, &s->o, E, len, NULL, NULL, NULL, err, el);
    return rc;
}

/* v3.0: where each episode lies ([E] each): its data file and first row, and per camera its video file and time
 * span (write_videos fills those; vchunk stays 0); rgs [2 E + 2]: one data file's row groups */
typedef struct {
    int *file_of;
    int64_t *from, *rgs, *vchunk, *vfile[2];
    double *vfrom[2], *vto[2];
} v3_index;

static void v3_free(v3_index *v)
{
    free(v->file_of); free(v->from); free(v->rgs); free(v->vchunk);
    for (int c = 0; c < 2; c++) { free(v->vfile[c]); free(v->vfrom[c]); free(v->vto[c]); }
}

static int v3_alloc(v3_index *v, int E, char *err, size_t el)
{
    v->file_of = calloc((size_t)E, sizeof *v->file_of);
    v->from = calloc((size_t)E, sizeof *v->from);
    v->rgs = calloc((size_t)E * 2 + 2, sizeof *v->rgs);
    v->vfile[0] = calloc((size_t)E, 8);
    v->vfile[1] = calloc((size_t)E, 8);
    v->vchunk = calloc((size_t)E, 8);
    v->vfrom[0] = calloc((size_t)E, 8);
    v->vfrom[1] = calloc((size_t)E, 8);
    v->vto[0] = calloc((size_t)E, 8);
    v->vto[1] = calloc((size_t)E, 8);
    if (!v->file_of || !v->from || !v->rgs || !v->vchunk || !v->vfile[0] || !v->vfile[1] || !v->vfrom[0] ||
        !v->vfrom[1] || !v->vto[0] || !v->vto[1])
        return mact_errf(err, el, MACT_ERR_NOMEM, "synth-dataset: out of memory");
    return 0;
}

/* v3.0 data: files of up to 3 episodes, one row group per episode (rowgroups variant: 2 per episode) */
static int write_v30_data(const synth *s, v3_index *v, char *err, size_t el)
{
    const int E = s->E, *len = s->len, per_file = 3, n_files = (E + per_file - 1) / per_file;
    char p[4096];
    int rc = 0;
    int64_t acc = 0;
    for (int e = 0; e < E; e++) { v->file_of[e] = e / per_file; v->from[e] = acc; acc += len[e]; }
    for (int fi = 0; fi < n_files && !rc; fi++) {
        int e0 = fi * per_file, e1 = e0 + per_file < E ? e0 + per_file : E, n_rg = 0;
        int64_t n = 0;
        for (int e = e0; e < e1; e++) {
            if (s->rowgroups && len[e] >= 2) { v->rgs[n_rg++] = len[e] / 2; v->rgs[n_rg++] = len[e] - len[e] / 2; }
            else v->rgs[n_rg++] = len[e];
            n += len[e];
        }
        snprintf(p, sizeof p, "%s/data/chunk-000/file-%03d.parquet", s->dir, fi);
        rc = write_frames(p, &s->fr, v->from[e0], n, &s->o, &s->po, v->rgs, n_rg, err, el);
    }
    return rc;
}

/* meta/tasks.parquet: task_index + the text as the pandas index */
static int write_v30_tasks(const synth *s, char *err, size_t el)
{
    int64_t ti[3] = {0, 1, 2};
    pqw_column c[2] = {{.name = "task_index", .kind = PQW_I64, .data = ti},
                       {.name = "__index_level_0__", .kind = PQW_STRING, .data = s->tasks}};
    pqw_options tp = {.codec = 1};
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/tasks.parquet", s->dir);
    return mact_pqw_write(p, c, 2, 3, &tp, err, el);
}

/* meta/episodes' own columns, a row per episode */
typedef struct {
    int64_t *ei, *ln, *ci, *fi, *dfrom, *dto;
    const char **tl;
    int *cnt;
} episode_rows;

static void episode_rows_free(episode_rows *r)
{
    free(r->ei); free(r->ln); free(r->ci); free(r->fi); free(r->dfrom); free(r->dto); free(r->tl); free(r->cnt);
}

static int episode_rows_fill(episode_rows *r, const synth *s, const v3_index *v, char *err, size_t el)
{
    const int E = s->E;
    r->ei = malloc((size_t)E * 8);
    r->ln = malloc((size_t)E * 8);
    r->ci = calloc((size_t)E, 8);
    r->fi = malloc((size_t)E * 8);
    r->dfrom = malloc((size_t)E * 8);
    r->dto = malloc((size_t)E * 8);
    r->tl = malloc((size_t)E * sizeof *r->tl);
    r->cnt = malloc((size_t)E * sizeof *r->cnt);
    if (!r->ei || !r->ln || !r->ci || !r->fi || !r->dfrom || !r->dto || !r->tl || !r->cnt)
        return mact_errf(err, el, MACT_ERR_NOMEM, "synth-dataset: out of memory");
    for (int e = 0; e < E; e++) {
        r->ei[e] = e; r->ln[e] = s->len[e]; r->fi[e] = v->file_of[e]; r->dfrom[e] = v->from[e];
        r->dto[e] = v->from[e] + s->len[e];
        r->tl[e] = s->tasks[s->task[e]]; r->cnt[e] = 1;
    }
    return 0;
}

/* meta/episodes/chunk-000/file-000.parquet: per episode its task, length and rows, and with videos where each
 * camera's frames are */
static int write_v30_episodes(const synth *s, const v3_index *v, char *err, size_t el)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/meta/episodes/chunk-000", s->dir);
    if (mact_file_mkdirs(p, NULL, 0)) return mact_errf(err, el, MACT_ERR_IO, "synth-dataset: cannot create %s", p);
    episode_rows r = {0};
    int rc = episode_rows_fill(&r, s, v, err, el);
    if (!rc) {
        pqw_column c[15] = {
            {.name = "episode_index", .kind = PQW_I64, .data = r.ei},
            {.name = "tasks", .kind = PQW_STRING_LIST, .data = r.tl, .counts = r.cnt},
            {.name = "length", .kind = PQW_I64, .data = r.ln},
            {.name = "data/chunk_index", .kind = PQW_I64, .data = r.ci},
            {.name = "data/file_index", .kind = PQW_I64, .data = r.fi},
            {.name = "dataset_from_index", .kind = PQW_I64, .data = r.dfrom},
            {.name = "dataset_to_index", .kind = PQW_I64, .data = r.dto},
        };
        int k = 7;
        char vn[2][4][300];  /* LeRobot's per-camera columns (docs/spec/datasets.md 1.3) */
        for (int cam = 0; s->o.video && cam < 2; cam++) {
            static const char *const sfx[4] = {"chunk_index", "file_index", "from_timestamp", "to_timestamp"};
            for (int q = 0; q < 4; q++)
                snprintf(vn[cam][q], sizeof vn[cam][q], "videos/%s/%s", CAMS(&s->o)[cam], sfx[q]);
            c[k++] = (pqw_column){.name = vn[cam][0], .kind = PQW_I64, .data = v->vchunk};
            c[k++] = (pqw_column){.name = vn[cam][1], .kind = PQW_I64, .data = v->vfile[cam]};
            c[k++] = (pqw_column){.name = vn[cam][2], .kind = PQW_F64, .data = v->vfrom[cam]};
            c[k++] = (pqw_column){.name = vn[cam][3], .kind = PQW_F64, .data = v->vto[cam]};
        }
        pqw_options ep = {.codec = 1};
        snprintf(p, sizeof p, "%s/meta/episodes/chunk-000/file-000.parquet", s->dir);
        rc = mact_pqw_write(p, c, k, s->E, &ep, err, el);
    }
    episode_rows_free(&r);
    return rc;
}

/* The v3.0 layout: the data files, the videos, meta/tasks.parquet and meta/episodes. */
static int write_v30(const synth *s, char *err, size_t el)
{
    v3_index v = {0};
    int rc = v3_alloc(&v, s->E, err, el);
    if (!rc) rc = write_v30_data(s, &v, err, el);
    if (!rc && s->o.video) rc = write_videos(s->dir, &s->o, s->E, s->len, v.vfile, v.vfrom, v.vto, err, el);
    if (!rc) rc = write_v30_tasks(s, err, el);
    if (!rc) rc = write_v30_episodes(s, &v, err, el);
    v3_free(&v);
    return rc;
}

mact_status mact_lerobot_synth(const char *dir, const mact_lrs_options *o0, char *err, size_t el)
{
    synth s = {.dir = dir, .o = *o0};
    int rc;
    if ((rc = resolve_options(&s.o, err, el))) return rc;
    if (set_variant(s.o.variant, &s.po))
        return mact_errf(err, el, MACT_ERR_INPUT, "synth-dataset: unknown variant '%s' (%s)", s.o.variant,
                         mact_lerobot_synth_variants());
    s.rowgroups = s.o.variant && !strcmp(s.o.variant, "rowgroups");
    s.tasks = s.o.libero ? tasks_lib : tasks_so;
    mact_rng r;
    mact_rng_seed(&r, s.o.seed);
    rc = plan_episodes(&s, &r, err, el);
    if (!rc) rc = frames_alloc(&s.fr, s.o.libero ? 7 : 6, s.o.libero ? 8 : 6, err, el);
    if (!rc) rc = fill_frames(&s, &r, err, el);
    if (!rc) rc = write_info_and_dirs(&s, err, el);
    if (!rc) rc = s.o.version == 21 ? write_v21(&s, err, el) : write_v30(&s, err, el);
    frames_free(&s.fr);
    free(s.len);
    free(s.task);
    return rc;
}

mact_status mact_lerobot_synth_frame_number(const uint8_t *rgb, int w, int h, uint32_t *number)
{
    return rgb && number && !mact_vw_read_number(rgb, w, h, number) ? MACT_OK : MACT_ERR_INPUT;
}

const char *mact_lerobot_synth_codecs(void) { return mact_vw_codecs(); }
