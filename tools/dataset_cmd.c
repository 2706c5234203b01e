/* `mact dataset info DIR`, `mact dataset dump FILE.parquet` (every row as JSON, for cross-checks) and
 * `mact synth-dataset OUT_DIR [...]` (src/dev/lerobot_synth.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/lerobot.h"
#include "io/parquet.h"
#include "dev/lerobot_synth.h"

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
        printf("    %s: %s, %dx%d, %s\n", ft->key, !strcmp(ft->dtype, "video") ? (ft->codec[0] ? ft->codec : "video, codec unknown") : "PNG in parquet",
               ft->width, ft->height, !strcmp(ft->dtype, "video") ? "frames not decoded (video support is later work)" : "one frame per row");
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

int cmd_dataset(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[0], "info")) return info(argv[1], 0);
    if (argc == 2 && !strcmp(argv[0], "dump")) return dump(argv[1]);
    fprintf(stderr, "usage: mact dataset info DIR          versions, episodes, frames, features, cameras, problems (exit 3 if any)\n"
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
        else if (a[0] != '-' && !out) out = a;
        else { out = NULL; break; }
    }
    if (!out || o.version < 0) {
        fprintf(stderr, "usage: mact synth-dataset OUT_DIR [--version v2.1|v3.0] [--robot so101|libero] [--episodes N] [--seed S]\n"
                        "       [--len MIN:MAX] [--ts-f64] [--variant V]   (V: %s)\n", mact_lrs_variants());
        return 2;
    }
    char err[1024];
    if (mact_lerobot_synth(out, &o, err, sizeof err)) { fprintf(stderr, "mact synth-dataset: %s\n", err); return 1; }
    return 0;
}
