/* `mact dataset info DIR`, `mact dataset frame DIR ...` (one camera frame as PNG, as decoded),
 * `mact dataset dump FILE.parquet` (every row as JSON, for cross-checks) and `mact synth-dataset OUT_DIR [...]`:
 * flags in, the data toolkit (include/mact_data.h) out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <png.h>
#include "mact_data.h"
#include "synth/lerobot_synth.h"
#include "commands.h"
#include "common/cli.h"

static int write_png(const char *path, const uint8_t *rgb, int h, int w, char *err, size_t el)
{
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)w;
    pi.height = (png_uint_32)h;
    pi.format = PNG_FORMAT_RGB;
    if (png_image_write_to_file(&pi, path, 0, rgb, 0, NULL)) return 0;
    snprintf(err, el, "%s: cannot write the PNG: %s", path, pi.message);
    png_image_free(&pi);
    return 1;
}

static int frame_usage(FILE *f)
{
    fprintf(f, "usage: mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] "
               "[--threads N]\n"
               "  frame T (frame_index, from 0) of episode E of camera KEY as decoded (video or PNG in parquet), "
               "as a PNG\n");
    return 2;
}

/* mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] [--threads N]: frame T
 * (frame_index, from 0) of episode E as decoded, before any resize for a model. Video: the frame at
 * from_timestamp + timestamp[T] within LeRobot's 1e-4 s; image features: the PNG/JPEG bytes of row T.
 * --print-number (development): the number a synthetic frame carries (mact_lerobot_synth_frame_number for video,
 * R + 256 G of the first pixel for the synthetic PNG cameras), so tests can check what was decoded. */
static int frame_cmd(int argc, char **argv)
{
    const char *dir = NULL, *cam = NULL, *out = NULL, *ep_s = NULL, *t_s = NULL;
    int print_number = 0, threads = 1, n_pos = 0;
    const cli_opt opts[] = {
        CLI_O("--episode", CLI_STR, &ep_s, .required = 1), CLI_O("--index", CLI_STR, &t_s, .required = 1),
        CLI_O("--camera", CLI_STR, &cam, .required = 1), CLI_O("--out", CLI_STR, &out),
        CLI_O("--threads", CLI_ATOI, &threads), CLI_O("--print-number", CLI_FLAG, &print_number), {0}};
    int rc = cli_parse("mact dataset frame", argc, argv, opts, &dir, 1, &n_pos, frame_usage);
    if (rc) return cli_exit(rc);
    if (!n_pos) return cli_missing("mact dataset frame", "DIR", frame_usage);
    if (!out && !print_number) return cli_missing("mact dataset frame", "--out F.png (or --print-number)", frame_usage);
    long long ep = strtoll(ep_s, NULL, 10), t = strtoll(t_s, NULL, 10);
    if (ep < 0 || t < 0 || threads < 0 || threads > 64) {
        fprintf(stderr, "mact dataset frame: %s\n",
                ep < 0 || t < 0 ? "--episode and --index count from 0" : "--threads is 0..64");
        return frame_usage(stderr);
    }
    char err[4096];
    mact_dataset *d;
    if (mact_dataset_open(dir, &d, err, sizeof err)) { fprintf(stderr, "mact dataset frame: %s\n", err); return 1; }
    mact_dataset_info di;
    mact_dataset_get_info(d, &di);
    int i;
    rc = 1;
    mact_dataset_episode e = {0};
    for (i = 0; i < di.n_episodes && (mact_dataset_episode_at(d, i, &e), e.index != ep); i++) {}
    uint8_t *rgb = NULL;
    mact_dataset_frame_info fi;
    if (i == di.n_episodes) { fprintf(stderr, "mact dataset frame: %s: no episode %lld\n", dir, ep); goto done; }
    if (mact_dataset_frame(d, i, t, cam, 1e-4, threads, NULL, 0, &fi, err, sizeof err) ||
        !(rgb = malloc((size_t)fi.height * fi.width * 3 + 1)) ||
        mact_dataset_frame(d, i, t, cam, 1e-4, threads, rgb, (size_t)fi.height * fi.width * 3, &fi, err, sizeof err)) {
        fprintf(stderr, "mact dataset frame: %s\n", rgb || err[0] ? err : "out of memory");
        goto done;
    }
    if (!fi.from_video) {
        printf("episode %lld camera %s frame %lld: %lldx%lld, from the parquet's image bytes\n", ep, cam, t, (long long)fi.width, (long long)fi.height);
        if (print_number) printf("index %d\n", rgb[0] | rgb[1] << 8);
    } else {
        printf("episode %lld camera %s frame %lld: %lldx%lld %s, t=%.6f s in %s\n", ep, cam, t, (long long)fi.width,
               (long long)fi.height, fi.codec, fi.time_s, fi.source);
        uint32_t num;
        if (print_number) {
            if (mact_lerobot_synth_frame_number(rgb, fi.width, fi.height, &num)) printf("number none\n");
            else printf("number %u (camera %u episode %u frame %u)\n", num, num >> 20, (num >> 12) & 255, num & 4095);
        }
    }
    if (out && write_png(out, rgb, fi.height, fi.width, err, sizeof err)) { fprintf(stderr, "mact dataset frame: %s\n", err); goto done; }
    rc = 0;
done:
    free(rgb);
    mact_dataset_close(d);
    return rc;
}

static int dataset_usage(FILE *f)
{
    fprintf(f, "usage: mact dataset info DIR          versions, episodes, frames, features, cameras, problems "
               "(exit 3 if any)\n"
               "       mact dataset frame DIR --episode E --index T --camera KEY --out F.png [--print-number] "
               "[--threads N]\n"
               "                                      one camera frame as decoded (video or PNG in parquet)\n"
               "       mact dataset dump FILE.parquet  every row as JSON (for cross-checks)\n");
    return 2;
}

/* `mact dataset info DIR` and `mact dataset dump FILE`: one path each, read through cli_parse so that --help is help
 * and not a path */
static int one_path(const char *prog, int argc, char **argv, const char *what, const char **path)
{
    const cli_opt opts[] = {{0}};
    int n_pos = 0, rc = cli_parse(prog, argc, argv, opts, path, 1, &n_pos, dataset_usage);
    if (rc) return rc;
    return n_pos ? 0 : cli_missing(prog, what, dataset_usage);
}

int cmd_dataset(int argc, char **argv)
{
    mact_data_quiet_logs();  /* FFmpeg's info lines (decoder banners) would drown the output */
    char err[4096];
    const char *path = NULL, *sub = argc ? argv[0] : "";
    int rc;
    if (!strcmp(sub, "info")) {
        if ((rc = one_path("mact dataset info", argc - 1, argv + 1, "DIR", &path))) return cli_exit(rc);
        int np = 0;
        if (mact_dataset_report(path, stdout, &np, err, sizeof err)) {
            fprintf(stderr, "mact dataset info: %s\n", err);
            return 1;
        }
        return np ? 3 : 0;
    }
    if (!strcmp(sub, "dump")) {
        if ((rc = one_path("mact dataset dump", argc - 1, argv + 1, "FILE.parquet", &path))) return cli_exit(rc);
        if (mact_parquet_dump_json(path, stdout, err, sizeof err)) {
            fprintf(stderr, "mact dataset dump: %s\n", err);
            return 1;
        }
        return 0;
    }
    if (!strcmp(sub, "frame")) return frame_cmd(argc - 1, argv + 1);
    if (argc && cli_is_help(sub)) { dataset_usage(stdout); return 0; }
    static const char *const subs[] = {"info", "frame", "dump"};
    const char *near = argc ? cli_nearest(sub, strlen(sub), subs, 3) : NULL;
    if (!argc) fprintf(stderr, "mact dataset: which one: info, frame or dump?\n");
    else if (near) fprintf(stderr, "mact dataset: unknown subcommand '%s'; did you mean %s?\n", sub, near);
    else fprintf(stderr, "mact dataset: unknown subcommand '%s' (info, frame or dump)\n", sub);
    return dataset_usage(stderr);
}

static int synth_usage(FILE *f)
{
    fprintf(f, "usage: mact synth-dataset OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--episodes N] "
               "[--seed S]\n"
               "       [--len MIN:MAX] [--ts-f64] [--variant V] [--video C] [--video-size WxH] "
               "[--state-names A,B,...] [--no-cameras]\n"
               "  V: %s\n  C: %s (the cameras as mp4 video features; WxH default 64x64)\n"
               "  --state-names: the state's dim names (one per dim; a state that names its joints unlike the "
               "action)\n"
               "  --no-cameras: no camera feature (a state-only recording)\n",
            mact_lerobot_synth_variants(), mact_lerobot_synth_codecs());
    return 2;
}

static int parse_version(const char *v, void *dst, char *err, size_t el)
{
    int *o = dst;
    *o = !strcmp(v, "v3.0") || !strcmp(v, "30") ? 30 : !strcmp(v, "v2.1") || !strcmp(v, "21") ? 21 : -1;
    return *o < 0 ? -2 : 0;
}

static int parse_robot(const char *v, void *dst, char *err, size_t el)
{
    if (!strcmp(v, "libero")) *(int *)dst = 1;
    else if (strcmp(v, "so101")) return -2;
    return 0;
}

static int parse_len(const char *v, void *dst, char *err, size_t el)
{
    int *o = dst;
    return sscanf(v, "%d:%d", &o[0], &o[1]) == 2 ? 0 : -2;
}

static int parse_size(const char *v, void *dst, char *err, size_t el)
{
    int *o = dst;
    return sscanf(v, "%dx%d", &o[0], &o[1]) == 2 ? 0 : -2;
}

static int parse_seed(const char *v, void *dst, char *err, size_t el)
{
    *(uint64_t *)dst = strtoull(v, NULL, 0);
    return 0;
}

/* the one line saying what synth-dataset wrote, counted by reading the tree back as any dataset is read (mact synth
 * says what it wrote too) */
static void say_written(const char *out, const mact_lerobot_synth_options *o)
{
    char err[1024], cams[160];
    mact_dataset *d;
    if (mact_dataset_open(out, &d, err, sizeof err)) {  /* written, yet not readable: said, not fatal here */
        printf("wrote %s (reading it back: %s)\n", out, err);
        return;
    }
    mact_dataset_info di;
    mact_dataset_get_info(d, &di);
    if (!di.n_cameras) snprintf(cams, sizeof cams, "no cameras");
    else snprintf(cams, sizeof cams, "%d camera%s (%s)", di.n_cameras, di.n_cameras == 1 ? "" : "s",
                  o->video ? o->video : "images in the parquet files");
    printf("wrote %s: LeRobot %s, robot %s, %d episodes, %lld frames at %d fps, %s\n", out, di.version,
           di.robot[0] ? di.robot : o->libero ? "libero" : "so101", di.n_episodes, (long long)di.n_frames, di.fps,
           cams);
    mact_dataset_close(d);
}

int cmd_synth_dataset(int argc, char **argv)
{
    mact_lerobot_synth_options o = {0};
    const char *out = NULL;
    int len[2] = {0, 0}, size[2] = {0, 0}, n_pos = 0;
    const cli_opt opts[] = {
        CLI_O("--version", CLI_FN, &o.version, .fn = parse_version), CLI_O("--robot", CLI_FN, &o.libero, .fn = parse_robot),
        CLI_O("--episodes", CLI_ATOI, &o.n_episodes), CLI_O("--seed", CLI_FN, &o.seed, .fn = parse_seed),
        CLI_O("--variant", CLI_STR, &o.variant), CLI_O("--len", CLI_FN, len, .fn = parse_len), CLI_O("--ts-f64", CLI_FLAG, &o.ts_f64),
        CLI_O("--video", CLI_STR, &o.video), CLI_O("--video-size", CLI_FN, size, .fn = parse_size),
        CLI_O("--state-names", CLI_STR, &o.state_names), CLI_O("--no-cameras", CLI_FLAG, &o.no_cameras), {0}};
    int rc = cli_parse("mact synth-dataset", argc, argv, opts, &out, 1, &n_pos, synth_usage);
    if (rc) return cli_exit(rc);
    if (!n_pos) return cli_missing("mact synth-dataset", "OUT_DIR", synth_usage);
    o.min_len = len[0]; o.max_len = len[1]; o.video_w = size[0]; o.video_h = size[1];
    mact_data_quiet_logs();
    /* SVT-AV1 prints its configuration banner itself, not through FFmpeg's log; 1 = errors only */
    setenv("SVT_LOG", "1", 0);
    char err[1024];
    if (mact_lerobot_synth(out, &o, err, sizeof err)) { fprintf(stderr, "mact synth-dataset: %s\n", err); return 1; }
    say_written(out, &o);
    return 0;
}
