/* `mact eval` (open-loop evaluation on a LeRobot dataset: cameras as videos or as images in the parquet) and
 * `mact eval merge`. docs/datasets.md describes the metrics:
 *   for every frame t with t + H <= length (chunks that would run past the episode end are not evaluated),
 *   the policy's chunk pred[0..H-1] against gt = action[t..t+H-1]; frames whose gt chunk barely moves
 *   (max over k, j of |gt[k,j] - gt[0,j]| <= --static-threshold, raw units, default 0) are excluded;
 *   the hold-still baseline repeats state[t][:D] for absolute control modes and is zero for delta modes
 *   (the tag's control_mode contains "delta"). Per episode, sums of |error| per chunk step (raw and
 *   normalised units: 2(x - q01)/(q99 - q01) - 1 on the mask's dims, no clipping, raw elsewhere) are written
 *   to OUT/episodes/ep_NNNNNN.json atomically (temp + rename); a rerun skips episodes already there; the
 *   result is computed from those files in episode order, so `eval merge` of shards equals the unsharded run
 *   bit for bit. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cairo/cairo.h>
#include <cjson/cJSON.h>
#include "mact.h"
#include "base/file.h"
#include "base/parse.h"
#include "base/rng.h"
#include "io/image.h"
#include "io/lerobot.h"
#include "io/normstats.h"
#include "io/video.h"
#include "eval_frames.h"

int cmd_eval(int argc, char **argv);

#define MAXH 256

/* --replan K --delay D (docs/datasets.md "Replanning and real-time chunking"): the chunks an episode's chains
 * predicted at its replan points t = 0, K, 2K, ... (chain 0 plain, chain 1 RTC-guided), and what was measured on
 * the trajectory the robot executed from them */
typedef struct {
    int K, delay, chains;   /* K 0: no replanning; chains: bit 0 the plain chain, bit 1 the RTC chain */
    int n_chunks;           /* replan points */
    float *chunk[2];        /* [n_chunks][H][D] as the policy returned them (dataset units) */
    double *jump[2];        /* [n_chunks - 1]: per join, mean over dims of |a_first_new - a_last_old|, normalised */
    double *step[2];        /* [n_chunks - 1] when K + delay < H: the old chunk's own step there, |old[K+D] - old[K+D-1]| */
    double ex_raw[2], ex_norm[2], ex_values;  /* sums of |executed - gt| (raw, eval's normalised units); values */
    char rtc[96];           /* the RTC settings, for result.json */
} ep_replan;
static const char *const chain_name[2] = {"plain", "rtc"};

typedef struct {
    int64_t ep;
    int H, D;
    double frames, excluded, outside, gt_values, grip_values;
    double m_raw[MAXH], h_raw[MAXH], m_norm[MAXH], h_norm[MAXH];
    double m_grip, h_grip;
    char config[17];  /* what produced the sums (eval_config): episodes of different settings never mix */
    ep_replan rp;     /* --replan only (rp.K > 0) */
} ep_sums;

static void ep_free(ep_sums *s)
{
    for (int c = 0; c < 2; c++) {
        free(s->rp.chunk[c]); free(s->rp.jump[c]); free(s->rp.step[c]);
        s->rp.chunk[c] = NULL; s->rp.jump[c] = NULL; s->rp.step[c] = NULL;
    }
}

static void eps_free(ep_sums *e, int n)
{
    for (int i = 0; i < n; i++) ep_free(&e[i]);
    free(e);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: mact eval --dataset DIR --out DIR [--model DIR | --norm-stats FILE] [--norm-tag T]\n"
            "       [--policy model|hold|replay] [--episodes A:B|I,J,...] [--horizon H] [--first-k 5,10,30]\n"
            "       [--static-threshold X] [--seed S] [--steps N] [--camera KEY ...] [--action-key K] [--state-key K]\n"
            "       [--tolerance S]   (video frames: seconds between a frame's time and the query; default LeRobot's 1e-4)\n"
            "       [--so101-transform]   (dataset in the new SO-101 calibration, checkpoint in the old one)\n"
            "       [--replan K [--delay D] [--rtc-schedule linear|zeros|ones|exp] [--execution-horizon E]\n"
            "        [--max-guidance-weight B] [--rtc-guidance identity|vjp] [--no-rtc-compare]]\n"
            "          (execute K rows of each chunk, D of them from the old chunk while inferring; with and without RTC)\n"
            "       [--shard I/N]   (else $JOB_COMPLETION_INDEX/$JOB_COMPLETION_COUNT or $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)\n"
            "       mact eval merge --out DIR [--allow-partial] SHARD_DIR ...\n");
    return 2;
}

static char *slurp(const char *p)
{
    char *b = NULL, err[512];
    size_t n;
    if (mact_file_read_text(p, (size_t)1 << 28, &b, &n, err, sizeof err)) return NULL;
    return b;
}

/* temp name next to path, then rename (base/file.h): a killed task leaves no partial file */
static int write_atomic(const char *path, const char *text)
{
    char err[1024];
    if (mact_file_write_atomic(path, text, strlen(text), err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); return -1; }
    return 0;
}

static void put_arr(char **p, size_t *left, const char *key, const double *v, int n)
{
    int w = snprintf(*p, *left, ",\"%s\":[", key);
    *p += w; *left -= (size_t)w;
    for (int i = 0; i < n; i++) { w = snprintf(*p, *left, "%s%.17g", i ? "," : "", v[i]); *p += w; *left -= (size_t)w; }
    w = snprintf(*p, *left, "]");
    *p += w; *left -= (size_t)w;
}

static char *ep_json(const ep_sums *s)
{
    size_t cap = 4096 + (size_t)s->H * 4 * 32;
    if (s->rp.K) cap += (size_t)s->rp.n_chunks * ((size_t)s->H * s->D * 2 * 18 + 2 * 26) + 1024;
    char *b = malloc(cap), *p = b;
    if (!b) return NULL;
    size_t left = cap;
    int w = snprintf(p, left, "{\"config\":\"%s\",\"episode_index\":%lld,\"horizon\":%d,\"action_dim\":%d,\"frames\":%.17g,\"excluded\":%.17g,"
                     "\"outside\":%.17g,\"gt_values\":%.17g,\"grip_values\":%.17g,\"model_grip\":%.17g,\"hold_grip\":%.17g",
                     s->config, (long long)s->ep, s->H, s->D, s->frames, s->excluded, s->outside, s->gt_values, s->grip_values, s->m_grip, s->h_grip);
    p += w; left -= (size_t)w;
    put_arr(&p, &left, "model_raw", s->m_raw, s->H);
    put_arr(&p, &left, "hold_raw", s->h_raw, s->H);
    put_arr(&p, &left, "model_norm", s->m_norm, s->H);
    put_arr(&p, &left, "hold_norm", s->h_norm, s->H);
    if (s->rp.K) {  /* floats as %.9g and doubles as %.17g: read back exactly, so merge rewrites the same bytes */
        const ep_replan *r = &s->rp;
        w = snprintf(p, left, ",\"replan\":{\"K\":%d,\"delay\":%d,\"replan_points\":%d,\"executed_values\":%.17g,\"rtc_settings\":\"%s\"",
                     r->K, r->delay, r->n_chunks, r->ex_values, r->rtc);
        p += w; left -= (size_t)w;
        for (int c = 0; c < 2; c++) {
            if (!(r->chains >> c & 1)) continue;
            w = snprintf(p, left, ",\"%s\":{\"executed_raw\":%.17g,\"executed_norm\":%.17g", chain_name[c], r->ex_raw[c], r->ex_norm[c]);
            p += w; left -= (size_t)w;
            put_arr(&p, &left, "jumps", r->jump[c], r->n_chunks > 1 ? r->n_chunks - 1 : 0);
            if (r->K + r->delay < s->H) put_arr(&p, &left, "old_steps", r->step[c], r->n_chunks > 1 ? r->n_chunks - 1 : 0);
            w = snprintf(p, left, ",\"chunks\":[");
            p += w; left -= (size_t)w;
            for (int i = 0; i < r->n_chunks * s->H * s->D; i++) { w = snprintf(p, left, "%s%.9g", i ? "," : "", (double)r->chunk[c][i]); p += w; left -= (size_t)w; }
            w = snprintf(p, left, "]}");
            p += w; left -= (size_t)w;
        }
        w = snprintf(p, left, "}");
        p += w; left -= (size_t)w;
    }
    snprintf(p, left, "}\n");
    return b;
}

static int get_arr(const cJSON *o, const char *k, double *v, int n)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return -1;
    for (int i = 0; i < n; i++) v[i] = cJSON_GetArrayItem(a, i)->valuedouble;
    return 0;
}

static int ep_parse(const char *text, ep_sums *s)
{
    memset(s, 0, sizeof *s);
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) { cJSON_Delete(j); return -1; }
#define NUM(k) (cJSON_GetObjectItemCaseSensitive(j, k) ? cJSON_GetObjectItemCaseSensitive(j, k)->valuedouble : NAN)
    s->ep = (int64_t)NUM("episode_index"); s->H = (int)NUM("horizon"); s->D = (int)NUM("action_dim");
    s->frames = NUM("frames"); s->excluded = NUM("excluded"); s->outside = NUM("outside"); s->gt_values = NUM("gt_values");
    s->grip_values = NUM("grip_values"); s->m_grip = NUM("model_grip"); s->h_grip = NUM("hold_grip");
#undef NUM
    const char *cf = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "config"));
    if (cf) snprintf(s->config, sizeof s->config, "%s", cf);
    int rc = s->H < 1 || s->H > MAXH || s->D < 1 || get_arr(j, "model_raw", s->m_raw, s->H) || get_arr(j, "hold_raw", s->h_raw, s->H) ||
             get_arr(j, "model_norm", s->m_norm, s->H) || get_arr(j, "hold_norm", s->h_norm, s->H) ? -1 : 0;
    const cJSON *rj = cJSON_GetObjectItemCaseSensitive(j, "replan");
    if (!rc && rj) {
        ep_replan *r = &s->rp;
#define RN(o, k) (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, k)) ? cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble : -1)
        r->K = (int)RN(rj, "K"); r->delay = (int)RN(rj, "delay"); r->n_chunks = (int)RN(rj, "replan_points"); r->ex_values = RN(rj, "executed_values");
        const char *rs = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rj, "rtc_settings"));
        snprintf(r->rtc, sizeof r->rtc, "%s", rs ? rs : "");
        if (r->K < 1 || r->delay < 0 || r->n_chunks < 0 || r->n_chunks > (1 << 24) / s->H) rc = -1;
        for (int c = 0; !rc && c < 2; c++) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(rj, chain_name[c]);
            if (!o) continue;
            r->chains |= 1 << c;
            r->ex_raw[c] = RN(o, "executed_raw"); r->ex_norm[c] = RN(o, "executed_norm");
            int nj = r->n_chunks > 1 ? r->n_chunks - 1 : 0, nv = r->n_chunks * s->H * s->D;
            r->jump[c] = malloc(sizeof(double) * (size_t)(nj + 1));
            r->step[c] = malloc(sizeof(double) * (size_t)(nj + 1));
            if (!r->step[c] || (r->K + r->delay < s->H && get_arr(o, "old_steps", r->step[c], nj))) rc = -1;
            r->chunk[c] = malloc(sizeof(float) * (size_t)(nv + 1));
            double *tmp = malloc(sizeof(double) * (size_t)(nv + 1));
            if (!r->jump[c] || !r->chunk[c] || !tmp || get_arr(o, "jumps", r->jump[c], nj) || get_arr(o, "chunks", tmp, nv)) rc = -1;
            for (int i = 0; !rc && i < nv; i++) r->chunk[c][i] = (float)tmp[i];
            free(tmp);
        }
#undef RN
        if (!rc && !r->chains) rc = -1;
        if (rc) ep_free(s);
    }
    cJSON_Delete(j);
    return rc;
}

static int cmp_ep(const void *a, const void *b) { int64_t x = ((const ep_sums *)a)->ep, y = ((const ep_sums *)b)->ep; return x < y ? -1 : x > y; }

/* Reads every DIR/episodes/ep_*.json of the given dirs (first occurrence of an episode wins), sorted. */
static int load_eps(char **dirs, int nd, ep_sums **out, int *n)
{
    int cap = 0;
    *out = NULL; *n = 0;
    for (int k = 0; k < nd; k++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/episodes", dirs[k]);
        DIR *dd = opendir(p);
        if (!dd) { fprintf(stderr, "mact eval: %s: %s\n", p, strerror(errno)); eps_free(*out, *n); *out = NULL; *n = 0; return -1; }
        struct dirent *de;
        while ((de = readdir(dd))) {
            size_t L = strlen(de->d_name);
            if (strncmp(de->d_name, "ep_", 3) || L < 8 || strcmp(de->d_name + L - 5, ".json")) continue;
            char fp[8192];
            snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
            char *t = slurp(fp);
            ep_sums s;
            if (!t || ep_parse(t, &s)) { fprintf(stderr, "mact eval: %s: not an episode result\n", fp); free(t); closedir(dd); eps_free(*out, *n); *out = NULL; *n = 0; return -1; }
            free(t);
            if (*n && strcmp(s.config, (*out)[0].config)) {
                fprintf(stderr, "mact eval: %s was computed with other settings (config %s) than episode %lld (config %s): "
                        "policy, seed, steps, horizon, thresholds, cameras, keys or norm stats differ; merge only one run's shards\n",
                        fp, s.config[0] ? s.config : "none", (long long)(*out)[0].ep, (*out)[0].config[0] ? (*out)[0].config : "none");
                closedir(dd);
                ep_free(&s); eps_free(*out, *n); *out = NULL; *n = 0;
                return -1;
            }
            int dup = 0;
            for (int i = 0; i < *n; i++) dup |= (*out)[i].ep == s.ep;
            if (dup) { ep_free(&s); continue; }
            if (*n == cap) { cap = cap ? cap * 2 : 64; *out = realloc(*out, (size_t)cap * sizeof **out); }
            (*out)[(*n)++] = s;
        }
        closedir(dd);
    }
    if (*n) qsort(*out, (size_t)*n, sizeof **out, cmp_ep);
    return 0;
}

/* OUT/mae_per_step.png: MAE per chunk step, the policy against hold-still, raw units (cairo) */
static int plot(const char *path, const double *m, const double *h, int H, double per, const char *policy)
{
    const int W = 720, Hh = 420, l = 70, r = 20, t = 40, b = 50;
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, Hh);
    cairo_t *c = cairo_create(sf);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    double ymax = 0;
    for (int k = 0; k < H; k++) ymax = fmax(ymax, fmax(m[k], h[k]) / per);
    if (!(ymax > 0)) ymax = 1;
    ymax *= 1.1;
    double pw = W - l - r, ph = Hh - t - b;
#define X(k) (l + (H > 1 ? (double)(k) / (H - 1) : 0.5) * pw)
#define Y(v) (t + ph - (v) / ymax * ph)
    cairo_set_source_rgb(c, 0, 0, 0);
    cairo_set_line_width(c, 1);
    cairo_rectangle(c, l, t, pw, ph);
    cairo_stroke(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c, 12);
    char lab[64];
    for (int i = 0; i <= 4; i++) {
        double v = ymax * i / 4;
        snprintf(lab, sizeof lab, "%.3g", v);
        cairo_move_to(c, 8, Y(v) + 4);
        cairo_show_text(c, lab);
        cairo_move_to(c, l - 4, Y(v)); cairo_line_to(c, l, Y(v)); cairo_stroke(c);
    }
    for (int i = 0; i < 5; i++) {
        int k = H > 1 ? (int)lround((double)i * (H - 1) / 4) : 0;
        snprintf(lab, sizeof lab, "%d", k);
        cairo_move_to(c, X(k) - 4, t + ph + 16);
        cairo_show_text(c, lab);
    }
    cairo_move_to(c, l + pw / 2 - 40, Hh - 12);
    cairo_show_text(c, "chunk step");
    cairo_set_font_size(c, 14);
    snprintf(lab, sizeof lab, "MAE per chunk step (raw units): %s vs hold-still", policy);
    cairo_move_to(c, l, 24);
    cairo_show_text(c, lab);
    for (int s = 0; s < 2; s++) {
        const double *v = s ? h : m;
        if (s) { cairo_set_source_rgb(c, 0.85, 0.2, 0.1); double dash[] = {6, 4}; cairo_set_dash(c, dash, 2, 0); }
        else cairo_set_source_rgb(c, 0.1, 0.3, 0.85);
        cairo_set_line_width(c, 2);
        for (int k = 0; k < H; k++) { if (k) cairo_line_to(c, X(k), Y(v[k] / per)); else cairo_move_to(c, X(k), Y(v[k] / per)); }
        cairo_stroke(c);
        cairo_move_to(c, W - r - 170, t + 20 + 18 * s);
        cairo_line_to(c, W - r - 140, t + 20 + 18 * s);
        cairo_stroke(c);
        cairo_set_dash(c, NULL, 0, 0);
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_set_font_size(c, 12);
        cairo_move_to(c, W - r - 132, t + 24 + 18 * s);
        cairo_show_text(c, s ? "hold-still" : policy);
    }
#undef X
#undef Y
    cairo_destroy(c);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.png", path, (int)getpid());
    int rc = cairo_surface_write_to_png(sf, tmp) == CAIRO_STATUS_SUCCESS && rename(tmp, path) == 0 ? 0 : -1;
    if (rc) unlink(tmp);
    cairo_surface_destroy(sf);
    /* cairo's and fontconfig's caches, released so a leak checker sees only ours (as prune-analyze does) */
    cairo_debug_reset_static_data();
    void (*fc_fini)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "FcFini");
    if (fc_fini) fc_fini();
    return rc;
}

/* The rows the robot executed in replan segment c (frames cK .. cK+K-1) of chain ch: the first `delay` from the old
 * chunk (its rows K .. K+delay-1, executed while the new one was inferred), the rest from chunk c's rows
 * delay .. K-1. Chunk 0 has no predecessor: all K rows its own. */
static const float *exec_row(const ep_replan *r, int ch, int H, int D, int c, int i)
{
    return c > 0 && i < r->delay ? r->chunk[ch] + ((size_t)(c - 1) * H + r->K + i) * D : r->chunk[ch] + ((size_t)c * H + i) * D;
}

static int cmp_dbl(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

/* the 95th percentile as numpy's default (linear between the closest ranks) */
static double pct95(const double *v, int n)
{
    if (n < 1) return 0;
    double *w = malloc(sizeof(double) * (size_t)n);
    memcpy(w, v, sizeof(double) * (size_t)n);
    qsort(w, (size_t)n, sizeof *w, cmp_dbl);
    double pos = 0.95 * (n - 1), f = pos - floor(pos);
    int lo = (int)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double q = w[lo] + (w[hi] - w[lo]) * f;
    free(w);
    return q;
}

/* OUT/replan_trajectory.png: the executed trajectories of the first episode, one panel per action dim (raw units,
 * each its own scale; at most 8 dims), plain chain and RTC chain, the joins (first row from a new chunk) marked */
static int plot_replan(const char *path, const ep_sums *e)
{
    const ep_replan *r = &e->rp;
    const int H = e->H, D = e->D, nd = D < 8 ? D : 8, F = r->n_chunks * r->K;
    const int W = 900, ph = 110, l = 70, rr = 20, t = 50, gap = 14, Hh = t + nd * (ph + gap) + 30;
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, Hh);
    cairo_t *c = cairo_create(sf);
    cairo_set_source_rgb(c, 1, 1, 1);
    cairo_paint(c);
    cairo_select_font_face(c, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c, 14);
    cairo_set_source_rgb(c, 0, 0, 0);
    char lab[160];
    snprintf(lab, sizeof lab, "episode %lld: executed actions, replan every %d, delay %d; grey lines: joins", (long long)e->ep, r->K, r->delay);
    cairo_move_to(c, l, 22);
    cairo_show_text(c, lab);
    cairo_set_font_size(c, 12);
    for (int ch = 0; ch < 2; ch++) {
        if (!(r->chains >> ch & 1)) continue;
        if (ch) cairo_set_source_rgb(c, 0.9, 0.45, 0.05); else cairo_set_source_rgb(c, 0.1, 0.3, 0.85);
        cairo_set_line_width(c, 2);
        cairo_move_to(c, W - rr - 260 + 130 * ch, 38); cairo_line_to(c, W - rr - 230 + 130 * ch, 38); cairo_stroke(c);
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_move_to(c, W - rr - 224 + 130 * ch, 42);
        cairo_show_text(c, ch ? "with RTC" : "without RTC");
    }
    double pw = W - l - rr;
#define X(f) (l + (F > 1 ? (double)(f) / (F - 1) : 0.5) * pw)
    for (int j = 0; j < nd; j++) {
        double y0 = t + j * (ph + gap), lo = INFINITY, hi = -INFINITY;
        for (int ch = 0; ch < 2; ch++)
            for (int cc = 0; (r->chains >> ch & 1) && cc < r->n_chunks; cc++)
                for (int i = 0; i < r->K; i++) { double v = exec_row(r, ch, H, D, cc, i)[j]; lo = fmin(lo, v); hi = fmax(hi, v); }
        if (!(hi > lo)) { lo -= 1; hi += 1; }
        double pad = 0.05 * (hi - lo);
        lo -= pad; hi += pad;
#define Y(v) (y0 + ph - ((v) - lo) / (hi - lo) * ph)
        cairo_set_source_rgb(c, 0, 0, 0);
        cairo_set_line_width(c, 1);
        cairo_rectangle(c, l, y0, pw, ph);
        cairo_stroke(c);
        snprintf(lab, sizeof lab, "dim %d", j);
        cairo_move_to(c, 8, y0 + ph / 2 + 4); cairo_show_text(c, lab);
        snprintf(lab, sizeof lab, "%.3g", hi); cairo_move_to(c, 8, y0 + 10); cairo_show_text(c, lab);
        snprintf(lab, sizeof lab, "%.3g", lo); cairo_move_to(c, 8, y0 + ph); cairo_show_text(c, lab);
        cairo_set_source_rgb(c, 0.6, 0.6, 0.6);
        double dash[] = {3, 3};
        cairo_set_dash(c, dash, 2, 0);
        for (int cc = 1; cc < r->n_chunks; cc++) { cairo_move_to(c, X(cc * r->K + r->delay), y0); cairo_line_to(c, X(cc * r->K + r->delay), y0 + ph); cairo_stroke(c); }
        cairo_set_dash(c, NULL, 0, 0);
        for (int ch = 0; ch < 2; ch++) {
            if (!(r->chains >> ch & 1)) continue;
            if (ch) cairo_set_source_rgb(c, 0.9, 0.45, 0.05); else cairo_set_source_rgb(c, 0.1, 0.3, 0.85);
            cairo_set_line_width(c, 1.6);
            for (int f = 0; f < F; f++) {
                double v = exec_row(r, ch, H, D, f / r->K, f % r->K)[j];
                if (f) cairo_line_to(c, X(f), Y(v)); else cairo_move_to(c, X(f), Y(v));
            }
            cairo_stroke(c);
        }
#undef Y
    }
    cairo_set_source_rgb(c, 0, 0, 0);
    for (int i = 0; i < 5 && F > 0; i++) {
        int f = F > 1 ? (int)lround((double)i * (F - 1) / 4) : 0;
        snprintf(lab, sizeof lab, "%d", f);
        cairo_move_to(c, X(f) - 4, Hh - 12);
        cairo_show_text(c, lab);
    }
#undef X
    cairo_destroy(c);
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.png", path, (int)getpid());
    int rc = cairo_surface_write_to_png(sf, tmp) == CAIRO_STATUS_SUCCESS && rename(tmp, path) == 0 ? 0 : -1;
    if (rc) unlink(tmp);
    cairo_surface_destroy(sf);
    return rc;
}

/* result.json's "replan" object and the summary lines, from the episodes' chains */
static int replan_result(cJSON *r, const ep_sums *e, int n)
{
    const ep_replan *r0 = &e[0].rp;
    for (int i = 0; i < n; i++)
        if (e[i].rp.K != r0->K || e[i].rp.delay != r0->delay || e[i].rp.chains != r0->chains) {
            fprintf(stderr, "mact eval: episode %lld was replanned with other settings than episode %lld\n", (long long)e[i].ep, (long long)e[0].ep);
            return 1;
        }
    cJSON *o = cJSON_CreateObject();
    int joins = 0;
    double frames = 0, values = 0;
    for (int i = 0; i < n; i++) { joins += e[i].rp.n_chunks > 1 ? e[i].rp.n_chunks - 1 : 0; frames += (double)e[i].rp.n_chunks * r0->K; values += e[i].rp.ex_values; }
    cJSON_AddNumberToObject(o, "replan", r0->K);
    cJSON_AddNumberToObject(o, "delay", r0->delay);
    cJSON_AddStringToObject(o, "rtc_settings", r0->rtc);
    cJSON_AddStringToObject(o, "jump_definition", "mean over action dims of |a_first_new - a_last_old| in the model's normalised units");
    cJSON_AddNumberToObject(o, "joins", joins);
    cJSON_AddNumberToObject(o, "frames_executed", frames);
    printf("replanning every %d frames, inference delay %d rows: %d joins, %.0f frames executed; RTC %s\n", r0->K, r0->delay, joins, frames, r0->rtc);
    double *all = malloc(sizeof(double) * (size_t)(joins + 1));
    for (int ch = 0; ch < 2; ch++) {
        if (!(r0->chains >> ch & 1)) continue;
        int k = 0;
        double js = 0, xr = 0, xn = 0, ss = 0;
        const int has_step = r0->K + r0->delay < e[0].H;
        for (int i = 0; i < n; i++) {
            for (int q = 0; q + 1 < e[i].rp.n_chunks; q++) {
                all[k++] = e[i].rp.jump[ch][q]; js += e[i].rp.jump[ch][q];
                if (has_step) ss += e[i].rp.step[ch][q];
            }
            xr += e[i].rp.ex_raw[ch]; xn += e[i].rp.ex_norm[ch];
        }
        cJSON *c = cJSON_CreateObject();
        double jm = k ? js / k : 0, jp = pct95(all, k), mr = values > 0 ? xr / values : 0, mn = values > 0 ? xn / values : 0;
        cJSON_AddNumberToObject(c, "jump_mean", jm);
        cJSON_AddNumberToObject(c, "jump_p95", jp);
        if (has_step) cJSON_AddNumberToObject(c, "old_step_mean", k ? ss / k : 0);
        cJSON_AddNumberToObject(c, "mae", mr);
        cJSON_AddNumberToObject(c, "normalized_mae", mn);
        cJSON_AddItemToObject(o, chain_name[ch], c);
        printf("    %-11s join jump mean %.6g, p95 %.6g (normalised); executed MAE %.6g raw, %.6g normalised", ch ? "with RTC:" : "without RTC:", jm, jp, mr, mn);
        if (has_step) printf("; the old chunk's own step there %.6g", k ? ss / k : 0);
        printf("\n");
    }
    free(all);
    cJSON_AddItemToObject(r, "replan", o);
    return 0;
}

/* result.json + episodes.jsonl + mae_per_step.png + the table, from the per-episode sums in episode order */
static int write_result(const char *out, ep_sums *e, int n, const int *first_k, int n_k, const char *policy, int selected)
{
    if (!n) { fprintf(stderr, "mact eval: no episode results in %s\n", out); return 1; }
    int H = e[0].H, D = e[0].D;
    ep_sums t = {.H = H, .D = D};
    size_t jl_cap = 1 << 16, jl_n = 0;
    char *jl = malloc(jl_cap);
    jl[0] = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].H != H || e[i].D != D) { fprintf(stderr, "mact eval: episode %lld has horizon/dim %d/%d, others %d/%d\n", (long long)e[i].ep, e[i].H, e[i].D, H, D); free(jl); return 1; }
        t.frames += e[i].frames; t.excluded += e[i].excluded; t.outside += e[i].outside; t.gt_values += e[i].gt_values;
        t.grip_values += e[i].grip_values; t.m_grip += e[i].m_grip; t.h_grip += e[i].h_grip;
        for (int k = 0; k < H; k++) { t.m_raw[k] += e[i].m_raw[k]; t.h_raw[k] += e[i].h_raw[k]; t.m_norm[k] += e[i].m_norm[k]; t.h_norm[k] += e[i].h_norm[k]; }
        char *line = ep_json(&e[i]);
        size_t L = strlen(line);
        if (jl_n + L + 1 > jl_cap) { while (jl_n + L + 1 > jl_cap) jl_cap *= 2; jl = realloc(jl, jl_cap); }
        memcpy(jl + jl_n, line, L + 1);
        jl_n += L;
        free(line);
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/episodes.jsonl", out);
    if (write_atomic(p, jl)) { fprintf(stderr, "mact eval: cannot write %s\n", p); free(jl); return 1; }
    free(jl);
    double per = t.frames * D;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "policy", policy);
    cJSON_AddNumberToObject(r, "episodes", n);
    if (n) cJSON_AddStringToObject(r, "config", e[0].config);  /* the settings' fingerprint, as in every episode file */
    if (selected > 0) cJSON_AddNumberToObject(r, "episodes_selected", selected);  /* by --episodes, over all shards */
    cJSON_AddNumberToObject(r, "horizon", H);
    cJSON_AddNumberToObject(r, "action_dim", D);
    cJSON_AddNumberToObject(r, "frames_evaluated", t.frames);
    cJSON_AddNumberToObject(r, "frames_excluded", t.excluded);
    cJSON_AddNumberToObject(r, "gt_outside_q01_q99", t.gt_values > 0 ? t.outside / t.gt_values : 0);
    printf("open-loop evaluation: %d episodes, %.0f frames evaluated, %.0f excluded (static), horizon %d, policy %s\n", n,
           t.frames, t.excluded, H, policy);
    printf("ground truth outside [q01, q99]: %.2f%%\n", t.gt_values > 0 ? 100.0 * t.outside / t.gt_values : 0.0);
    for (int u = 0; u < 2; u++) {
        const double *m = u ? t.m_norm : t.m_raw, *h = u ? t.h_norm : t.h_raw;
        cJSON *o = u ? cJSON_CreateObject() : r;
        double ms = 0, hs = 0;
        for (int k = 0; k < H; k++) { ms += m[k]; hs += h[k]; }
        double mae = per > 0 ? ms / (per * H) : 0, hmae = per > 0 ? hs / (per * H) : 0;
        cJSON_AddNumberToObject(o, "mae", mae);
        cJSON_AddNumberToObject(o, "hold_mae", hmae);
        cJSON_AddNumberToObject(o, "ratio_to_hold", hmae > 0 ? mae / hmae : (mae == 0 ? 1 : INFINITY));
        cJSON *ps = cJSON_CreateArray(), *hp = cJSON_CreateArray(), *fk = cJSON_CreateObject(), *hfk = cJSON_CreateObject();
        for (int k = 0; k < H; k++) { cJSON_AddItemToArray(ps, cJSON_CreateNumber(per > 0 ? m[k] / per : 0)); cJSON_AddItemToArray(hp, cJSON_CreateNumber(per > 0 ? h[k] / per : 0)); }
        cJSON_AddItemToObject(o, "mae_per_step", ps);
        cJSON_AddItemToObject(o, "hold_mae_per_step", hp);
        printf("%s units: MAE %.6g, hold-still %.6g, ratio %.4g; step 0 %.6g, step %d %.6g\n", u ? "normalised" : "raw", mae, hmae,
               hmae > 0 ? mae / hmae : 1.0, per > 0 ? m[0] / per : 0, H - 1, per > 0 ? m[H - 1] / per : 0);
        for (int q = 0; q < n_k; q++) {
            if (first_k[q] > H) continue;  /* beyond the chunk */
            int K = first_k[q];
            double a = 0, b = 0;
            for (int k = 0; k < K; k++) { a += m[k]; b += h[k]; }
            char key[16];
            snprintf(key, sizeof key, "%d", first_k[q]);
            cJSON_AddNumberToObject(fk, key, per > 0 ? a / (per * K) : 0);
            cJSON_AddNumberToObject(hfk, key, per > 0 ? b / (per * K) : 0);
            printf("    first %-3d steps: MAE %.6g, hold-still %.6g\n", first_k[q], per > 0 ? a / (per * K) : 0, per > 0 ? b / (per * K) : 0);
        }
        cJSON_AddItemToObject(o, "first_k", fk);
        cJSON_AddItemToObject(o, "hold_first_k", hfk);
        if (u) cJSON_AddItemToObject(r, "normalized", o);
    }
    cJSON_AddNumberToObject(r, "gripper_mae", t.grip_values > 0 ? t.m_grip / t.grip_values : 0);
    cJSON_AddNumberToObject(r, "gripper_hold_mae", t.grip_values > 0 ? t.h_grip / t.grip_values : 0);
    if (e[0].rp.K && replan_result(r, e, n)) { cJSON_Delete(r); return 1; }
    char *txt = cJSON_Print(r);
    cJSON_Delete(r);
    snprintf(p, sizeof p, "%s/result.json", out);
    size_t L = strlen(txt);
    txt = realloc(txt, L + 2);
    txt[L] = '\n'; txt[L + 1] = 0;
    int rc = write_atomic(p, txt);
    free(txt);
    if (rc) { fprintf(stderr, "mact eval: cannot write %s\n", p); return 1; }
    snprintf(p, sizeof p, "%s/mae_per_step.png", out);
    if (e[0].rp.K) {  /* before plot(), which releases cairo's and fontconfig's caches */
        char rp[4200];
        snprintf(rp, sizeof rp, "%s/replan_trajectory.png", out);
        int k = 0;
        while (k < n - 1 && e[k].rp.n_chunks < 1) k++;
        if (e[k].rp.n_chunks > 0 && plot_replan(rp, &e[k])) { fprintf(stderr, "mact eval: cannot write %s\n", rp); return 1; }
    }
    if (per > 0 && plot(p, t.m_raw, t.h_raw, H, per, policy)) { fprintf(stderr, "mact eval: cannot write %s\n", p); return 1; }
    return 0;
}

static int parse_list(const char *s, int *v, int max)
{
    int n = 0;
    for (const char *p = s; *p && n < max;) {
        char *e;
        long x = strtol(p, &e, 10);
        if (e == p || x < 1 || x > MAXH) return -1;
        v[n++] = (int)x;
        p = *e == ',' ? e + 1 : e;
        if (*e && *e != ',') return -1;
    }
    return n;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char b[4096];
    if (snprintf(b, sizeof b, "%s", path) >= (int)sizeof b) return -1;
    for (char *q = b + 1; *q; q++)
        if (*q == '/') { *q = 0; if (mkdir(b, 0777) && errno != EEXIST) return -1; *q = '/'; }
    return mkdir(b, 0777) && errno != EEXIST ? -1 : 0;
}

static int merge(int argc, char **argv)
{
    const char *out = NULL;
    char *dirs[256];
    int nd = 0, fk[16] = {5, 10, 30}, nk = 3, partial = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--allow-partial")) partial = 1;
        else if (!strcmp(argv[i], "--first-k") && i + 1 < argc) { if ((nk = parse_list(argv[++i], fk, 16)) < 1) return usage(); }
        else if (argv[i][0] != '-' && nd < 256) dirs[nd++] = argv[i];
        else return usage();
    }
    if (!out || !nd) return usage();
    char p[4096];
    snprintf(p, sizeof p, "%s/episodes", out);
    if (make_dirs(out) || (mkdir(p, 0777) && errno != EEXIST)) { fprintf(stderr, "mact eval merge: cannot create %s\n", p); return 1; }
    ep_sums *e;
    int n;
    if (load_eps(dirs, nd, &e, &n)) return 1;
    /* the policy of the first dir; the selection's size, which every shard's result.json records */
    char pol[64] = "merged";
    int sel = 0;
    for (int k = 0; k < nd; k++) {
        char rp[4200];
        snprintf(rp, sizeof rp, "%s/result.json", dirs[k]);
        char *t = slurp(rp);
        cJSON *j = t ? cJSON_Parse(t) : NULL;
        const char *ps = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "policy"));
        if (ps && k == 0) snprintf(pol, sizeof pol, "%s", ps);
        const cJSON *es = cJSON_GetObjectItemCaseSensitive(j, "episodes_selected");
        int v = cJSON_IsNumber(es) ? (int)es->valuedouble : 0;
        cJSON_Delete(j);
        free(t);
        if (v > 0 && sel > 0 && v != sel) { fprintf(stderr, "mact eval merge: %s selected %d episodes, an earlier dir %d\n", dirs[k], v, sel); eps_free(e, n); return 1; }
        if (v > 0) sel = v;
    }
    if (sel > 0 && n != sel && !partial) {
        fprintf(stderr, "mact eval merge: %d of the %d selected episodes present (a shard missing or unfinished?); --allow-partial merges anyway\n", n, sel);
        eps_free(e, n);
        return 1;
    }
    for (int i = 0; i < n; i++) {  /* the merged dir holds every episode too, so it can be merged again */
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/ep_%06lld.json", p, (long long)e[i].ep);
        char *t = ep_json(&e[i]);
        int bad = write_atomic(fp, t);
        free(t);
        if (bad) { fprintf(stderr, "mact eval merge: cannot write %s\n", fp); eps_free(e, n); return 1; }
    }
    int rc = write_result(out, e, n, fk, nk, pol, sel);
    eps_free(e, n);
    return rc;
}

static const double so101_sg[6] = {1, -1, 1, 1, 1, 1}, so101_of[6] = {0, 90, 90, 0, 0, 0};

/* back to the dataset's calibration: arm = signs * (model - offsets) */
static void so101_back(float *x, int H, int D)
{
    for (int k = 0; k < H; k++)
        for (int j = 0; j < D && j < 6; j++) x[k * D + j] = (float)(so101_sg[j] * (x[k * D + j] - so101_of[j]));
}

/* one action row (dataset units) in the model's normalised units: the library's own normalisation of RTC's rows
 * (io/normstats.h mact_norm_actions: the tag's mode, clipped to [-1, 1] in quantile and min-max modes), after
 * the --so101-transform calibration the model sees */
static void norm_row(const mact_norm_stats *ns, const mact_norm_tag *tg, const float *x, int D, int so101, float *out)
{
    float m[64];
    for (int j = 0; j < D && j < 64; j++) m[j] = so101 && j < 6 ? (float)(so101_sg[j] * x[j] + so101_of[j]) : x[j];
    mact_norm_actions(ns, &tg->action, m, 1, D, out);
}

/* At an episode's end: its joins' jumps and the executed rows' errors against the ground truth act [n x D] */
static void replan_measure(ep_replan *r, const mact_norm_stats *ns, const mact_norm_tag *tg, const double *act, int H, int D, int so101)
{
    r->ex_values = (double)r->n_chunks * r->K * D;
    const mact_feature_stats *fs = &tg->action;
    for (int ch = 0; ch < 2; ch++) {
        if (!(r->chains >> ch & 1)) continue;
        free(r->jump[ch]); free(r->step[ch]);
        r->jump[ch] = malloc(sizeof(double) * (size_t)(r->n_chunks + 1));
        r->step[ch] = malloc(sizeof(double) * (size_t)(r->n_chunks + 1));
        for (int c = 1; c < r->n_chunks; c++) {
            float a[64], b[64];
            norm_row(ns, tg, r->chunk[ch] + ((size_t)(c - 1) * H + r->K + r->delay - 1) * D, D, so101, a);  /* the old chunk's last executed row */
            norm_row(ns, tg, r->chunk[ch] + ((size_t)c * H + r->delay) * D, D, so101, b);                   /* the new chunk's first */
            double sum = 0;
            for (int j = 0; j < D; j++) sum += fabs((double)b[j] - (double)a[j]);
            r->jump[ch][c - 1] = sum / D;
            if (r->K + r->delay < H) {  /* the step the old chunk itself takes there: what "continuing it" costs */
                norm_row(ns, tg, r->chunk[ch] + ((size_t)(c - 1) * H + r->K + r->delay) * D, D, so101, b);
                sum = 0;
                for (int j = 0; j < D; j++) sum += fabs((double)b[j] - (double)a[j]);
                r->step[ch][c - 1] = sum / D;
            }
        }
        r->ex_raw[ch] = r->ex_norm[ch] = 0;
        for (int c = 0; c < r->n_chunks; c++)
            for (int i = 0; i < r->K; i++) {
                const float *x = exec_row(r, ch, H, D, c, i);
                const double *g = act + ((size_t)c * r->K + i) * D;
                for (int j = 0; j < D; j++) {  /* normalised as the per-chunk MAE: 2(x - lo)/(hi - lo) - 1 on the mask, no clipping */
                    double sc = fmax(fs->hi[j] - fs->lo[j], 1e-6), pv = x[j];
                    double gn = fs->mask[j] ? 2 * (g[j] - fs->lo[j]) / sc - 1 : g[j], pn = fs->mask[j] ? 2 * (pv - fs->lo[j]) / sc - 1 : pv;
                    r->ex_raw[ch] += fabs(pv - g[j]);
                    r->ex_norm[ch] += fabs(pn - gn);
                }
            }
    }
}

static int arg_error(const char *msg)
{
    fprintf(stderr, "mact eval: %s\n", msg);
    return 2;
}

/* "I/N", both decimal, 0 <= I < N */
static int parse_shard(const char *s, int *shard, int *nshard)
{
    char a[32], *slash = strchr(s, '/');
    int64_t i, n;
    if (!slash || slash - s >= (ptrdiff_t)sizeof a) return -1;
    memcpy(a, s, (size_t)(slash - s));
    a[slash - s] = 0;
    if (mact_parse_i64(a, 0, INT32_MAX, &i) || mact_parse_i64(slash + 1, 1, INT32_MAX, &n) || i >= n) return -1;
    *shard = (int)i; *nshard = (int)n;
    return 0;
}

/* The shard from a scheduler's environment when --shard is not given. Kubernetes Indexed Jobs set
 * JOB_COMPLETION_INDEX only: the count must come as JOB_COMPLETION_COUNT (docs/cluster.md). Slurm arrays set
 * SLURM_ARRAY_TASK_ID/COUNT/MIN/STEP: the shard is (ID - MIN) / STEP, so --array=1-4 or 0-6:2 work too.
 * Returns 0, or -1 after a message. */
static int shard_from_env(int *shard, int *nshard)
{
    const char *ix = getenv("JOB_COMPLETION_INDEX"), *cn = getenv("JOB_COMPLETION_COUNT");
    int64_t i, n, mn = 0, st = 1;
    if (ix) {
        if (!cn) { fprintf(stderr, "mact eval: JOB_COMPLETION_INDEX is set but not JOB_COMPLETION_COUNT (Kubernetes sets the index only): set it to the Job's completions, or pass --shard I/N\n"); return -1; }
        if (mact_parse_i64(ix, 0, INT32_MAX, &i) || mact_parse_i64(cn, 1, INT32_MAX, &n) || i >= n) {
            fprintf(stderr, "mact eval: JOB_COMPLETION_INDEX=%s / JOB_COMPLETION_COUNT=%s is not an index below a count\n", ix, cn); return -1;
        }
        *shard = (int)i; *nshard = (int)n;
        return 0;
    }
    ix = getenv("SLURM_ARRAY_TASK_ID"); cn = getenv("SLURM_ARRAY_TASK_COUNT");
    if (!ix) return 0;
    const char *smin = getenv("SLURM_ARRAY_TASK_MIN"), *sstep = getenv("SLURM_ARRAY_TASK_STEP");
    if (!cn || mact_parse_i64(ix, 0, INT32_MAX, &i) || mact_parse_i64(cn, 1, INT32_MAX, &n) ||
        (smin && mact_parse_i64(smin, 0, INT32_MAX, &mn)) || (sstep && mact_parse_i64(sstep, 1, INT32_MAX, &st)) ||
        i < mn || (i - mn) % st || (i - mn) / st >= n) {
        fprintf(stderr, "mact eval: SLURM_ARRAY_TASK_ID=%s (COUNT=%s MIN=%s STEP=%s) does not name one of COUNT evenly spaced tasks: pass --shard I/N\n",
                ix, cn ? cn : "unset", smin ? smin : "unset", sstep ? sstep : "unset");
        return -1;
    }
    *shard = (int)((i - mn) / st); *nshard = (int)n;
    if (n == 1 && i > 0)
        fprintf(stderr, "mact eval: SLURM_ARRAY_TASK_ID=%s in a one-task array: evaluating every episode as shard 0/1 "
                        "(to rerun one shard of N, pass --shard %s/N or scontrol requeue the original task)\n", ix, ix);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    mact_video_quiet_logs();  /* FFmpeg's decoder banners would drown the progress line */
    if (argc >= 1 && !strcmp(argv[0], "merge")) return merge(argc - 1, argv + 1);
    const char *dsdir = NULL, *out = NULL, *model = NULL, *nsfile = NULL, *tag = NULL, *policy = "model", *eps = NULL;
    const char *akey = "action", *skey = "observation.state", *cams[8];
    int ncam = 0, H = 0, fk[16] = {5, 10, 30}, nk = 3, steps = 0, shard = 0, nshard = 1, have_shard = 0;
    double thr = 0, tol = 1e-4;
    int so101_tf = 0;  /* the dataset is in the new SO-101 calibration, the checkpoint in the old one */
    uint64_t seed = 0;
    char err[2048];
    /* --replan: K rows executed per chunk, D of them the old chunk's (the inference delay); the RTC chain's options */
    int K = 0, delay = 0, compare = 1, thr_given = 0;
    const char *rtc_flag = NULL, *sched_name = "linear", *guid_name = "identity";
    mact_rtc_options ro = {0};
    double beta = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--dataset") && more) dsdir = argv[++i];
        else if (!strcmp(a, "--out") && more) out = argv[++i];
        else if (!strcmp(a, "--model") && more) model = argv[++i];
        else if (!strcmp(a, "--norm-stats") && more) nsfile = argv[++i];
        else if (!strcmp(a, "--norm-tag") && more) tag = argv[++i];
        else if (!strcmp(a, "--policy") && more) policy = argv[++i];
        else if (!strcmp(a, "--episodes") && more) eps = argv[++i];
        else if (!strcmp(a, "--horizon") && more) { if (mact_parse_int_arg(a, argv[++i], 1, MAXH, &H, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--first-k") && more) { if ((nk = parse_list(argv[++i], fk, 16)) < 1) return usage(); }
        else if (!strcmp(a, "--static-threshold") && more) { thr_given = 1; if (mact_parse_f64_arg(a, argv[++i], 0, 1e30, &thr, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--replan") && more) { if (mact_parse_int_arg(a, argv[++i], 1, MAXH, &K, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--delay") && more) { rtc_flag = rtc_flag ? rtc_flag : a; if (mact_parse_int_arg(a, argv[++i], 0, MAXH, &delay, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--execution-horizon") && more) { rtc_flag = rtc_flag ? rtc_flag : a; if (mact_parse_int_arg(a, argv[++i], 1, MAXH, &ro.execution_horizon, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--max-guidance-weight") && more) {
            rtc_flag = rtc_flag ? rtc_flag : a;
            if (mact_parse_f64_arg(a, argv[++i], 0, 1e30, &beta, err, sizeof err)) return arg_error(err);
            ro.max_guidance_weight = (float)beta;
        }
        else if (!strcmp(a, "--rtc-schedule") && more) {
            rtc_flag = rtc_flag ? rtc_flag : a; sched_name = argv[++i];
            if (mact_rtc_schedule_parse(sched_name, &ro.schedule)) return arg_error("--rtc-schedule is linear, zeros, ones or exp");
        }
        else if (!strcmp(a, "--rtc-guidance") && more) {
            rtc_flag = rtc_flag ? rtc_flag : a; guid_name = argv[++i];
            if (mact_rtc_guidance_parse(guid_name, &ro.guidance)) return arg_error("--rtc-guidance is identity or vjp");
        }
        else if (!strcmp(a, "--no-rtc-compare")) { rtc_flag = rtc_flag ? rtc_flag : a; compare = 0; }
        else if (!strcmp(a, "--tolerance") && more) { if (mact_parse_f64_arg(a, argv[++i], 1e-9, 10, &tol, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--seed") && more) { if (mact_parse_u64_arg(a, argv[++i], &seed, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--steps") && more) { if (mact_parse_int_arg(a, argv[++i], 1, 1000, &steps, err, sizeof err)) return arg_error(err); }
        else if (!strcmp(a, "--camera") && more) { if (ncam == EVF_MAX_CAMS) return arg_error("at most 8 --camera"); cams[ncam++] = argv[++i]; }
        else if (!strcmp(a, "--action-key") && more) akey = argv[++i];
        else if (!strcmp(a, "--state-key") && more) skey = argv[++i];
        else if (!strcmp(a, "--so101-transform")) so101_tf = 1;
        else if (!strcmp(a, "--shard") && more) { if (parse_shard(argv[++i], &shard, &nshard)) return arg_error("--shard must be I/N with 0 <= I < N"); have_shard = 1; }
        else return usage();
    }
    int pm = !strcmp(policy, "model") ? 0 : !strcmp(policy, "hold") ? 1 : !strcmp(policy, "replay") ? 2 : -1;
    if (!dsdir || !out || pm < 0 || (pm == 0 && !model) || (!model && !nsfile)) return usage();
    if (!K && rtc_flag) { fprintf(stderr, "mact eval: %s needs --replan K\n", rtc_flag); return 2; }
    if (K && pm != 0) return arg_error("--replan needs --policy model (the chunks of hold and replay do not depend on what was executed)");
    if (K && thr_given) return arg_error("--static-threshold does not apply with --replan (every replan point is evaluated)");
    if (K && delay >= K) { fprintf(stderr, "mact eval: --delay %d must be below --replan %d (a new chunk must execute at least one row of its own)\n", delay, K); return 2; }
    if (!have_shard && shard_from_env(&shard, &nshard)) return 2;
    if (nshard < 1 || shard < 0 || shard >= nshard) { fprintf(stderr, "mact eval: shard %d/%d out of range\n", shard, nshard); return 2; }
    /* norm stats: the model's or the given file */
    char p[4096];
    if (model) snprintf(p, sizeof p, "%s/norm_stats.json", model); else snprintf(p, sizeof p, "%s", nsfile);
    char *nstxt = slurp(p);
    static mact_norm_stats ns;
    if (!nstxt || mact_norm_stats_parse(nstxt, &ns, err, sizeof err)) { fprintf(stderr, "mact eval: %s: %s\n", p, nstxt ? err : "cannot read"); free(nstxt); return 1; }
    const uint64_t ns_hash = mact_fnv1a(MACT_FNV_BASIS, nstxt, strlen(nstxt));
    free(nstxt);
    const mact_norm_tag *tg = mact_norm_find_tag(&ns, tag, err, sizeof err);
    if (!tg) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
    /* the action stats' q01/q99 for normalised units (read again: the parsed table keeps the mode's pair) */
    if (!H) H = tg->action_horizon > 0 ? tg->action_horizon : 10;
    if (H < 1 || H > MAXH) { fprintf(stderr, "mact eval: horizon %d out of range\n", H); return 2; }
    if (K && K >= H) { fprintf(stderr, "mact eval: --replan %d must be below the horizon %d (the old chunk keeps no unexecuted rows to guide with)\n", K, H); return 2; }
    if (K && K + delay > H) {
        fprintf(stderr, "mact eval: --replan %d + --delay %d exceeds the horizon %d (the old chunk has no rows for the frames of the delay)\n", K, delay, H);
        return 2;
    }
    if (K && ro.execution_horizon > H) { fprintf(stderr, "mact eval: --execution-horizon %d exceeds the horizon %d\n", ro.execution_horizon, H); return 2; }
    int delta = strstr(tg->control_mode, "delta") != NULL;
    mact_ld *d;
    if (mact_ld_open(dsdir, &d, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", err); return 1; }
    const mact_ld_feature *fa = mact_ld_find_feature(d, akey);
    int D = fa && fa->ndim == 1 ? fa->shape[0] : 0;
    if (!D || D != tg->action.dim) { fprintf(stderr, "mact eval: dataset '%s' has %d dims, the tag's action stats %d\n", akey, D, tg->action.dim); mact_ld_close(d); return 1; }
    /* cameras in the model's order: --camera as given, else the tag's camera_keys (each must be a camera of the
     * dataset), else the dataset's cameras in info.json order (tags such as SO100's name none) */
    if (!ncam && tg->n_cameras > 0) {
        if (tg->n_cameras > EVF_MAX_CAMS) { fprintf(stderr, "mact eval: tag %s names %d cameras, at most %d are evaluated\n", tg->name, tg->n_cameras, EVF_MAX_CAMS); mact_ld_close(d); return 1; }
        for (int c = 0; c < tg->n_cameras; c++) {
            const mact_ld_feature *cf = mact_ld_find_feature(d, tg->camera_keys[c]);
            if (!cf || (strcmp(cf->dtype, "image") && strcmp(cf->dtype, "video"))) {
                fprintf(stderr, "mact eval: the tag %s's camera '%s' is not a camera of %s; its cameras:", tg->name, tg->camera_keys[c], dsdir);
                for (int i = 0; i < mact_ld_num_features(d); i++)
                    if (!strcmp(mact_ld_feature_at(d, i)->dtype, "image") || !strcmp(mact_ld_feature_at(d, i)->dtype, "video")) fprintf(stderr, " %s", mact_ld_feature_at(d, i)->key);
                fprintf(stderr, " (map them with --camera KEY, in the tag's order)\n");
                mact_ld_close(d);
                return 1;
            }
            cams[ncam++] = tg->camera_keys[c];
        }
    }
    if (!ncam)
        for (int i = 0; i < mact_ld_num_features(d) && ncam < EVF_MAX_CAMS; i++)
            if (!strcmp(mact_ld_feature_at(d, i)->dtype, "image") || !strcmp(mact_ld_feature_at(d, i)->dtype, "video")) cams[ncam++] = mact_ld_feature_at(d, i)->key;
    int grip = -1;
    for (int j = 0; j < fa->n_names && j < D; j++) if (strstr(fa->names[j], "gripper")) grip = j;
    /* the episodes of this shard */
    int NE = mact_ld_num_episodes(d), *sel = calloc((size_t)NE + 1, sizeof *sel), ns_sel = 0;
    for (int i = 0; i < NE; i++) {
        int64_t ix = mact_ld_episode_at(d, i)->index;
        int want = 1;
        if (eps) {
            long a0, b0;
            if (strchr(eps, ':') && sscanf(eps, "%ld:%ld", &a0, &b0) == 2) want = ix >= a0 && ix < b0;
            else { want = 0; char *q = (char *)eps; while (*q) { long v = strtol(q, &q, 10); if (v == ix) want = 1; if (*q == ',') q++; else break; } }
        }
        if (want) sel[ns_sel++] = i;
    }
    snprintf(p, sizeof p, "%s/episodes", out);
    if (make_dirs(out) || (mkdir(p, 0777) && errno != EEXIST)) { fprintf(stderr, "mact eval: cannot create %s\n", p); free(sel); mact_ld_close(d); return 1; }
    /* the settings an episode's sums depend on (not the paths: shards may mount the data elsewhere); the norm stats
     * and the model's config.json by content. Two checkpoints of one architecture sharing their norm stats are not
     * told apart (their weights are not hashed): docs/cluster.md says to use a fresh --out per checkpoint */
    char cfg_txt[4096], cfg[17];
    uint64_t model_hash = 0;  /* the model policy: its config.json too (a pruned student keeps the teacher's norm stats) */
    if (pm == 0) {
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/config.json", model);
        char *ct = slurp(cp);
        if (ct) model_hash = mact_fnv1a(MACT_FNV_BASIS, ct, strlen(ct));
        free(ct);
    }
    int cl = snprintf(cfg_txt, sizeof cfg_txt, "policy=%s tag=%s seed=%llu steps=%d H=%d thr=%.17g tol=%.17g so101=%d akey=%s skey=%s ns=%016llx model=%016llx cams=",
                      policy, tg->name, (unsigned long long)seed, steps, H, thr, tol, so101_tf, akey, skey, (unsigned long long)ns_hash,
                      (unsigned long long)model_hash);
    for (int c = 0; c < ncam && cl > 0 && cl < (int)sizeof cfg_txt; c++) cl += snprintf(cfg_txt + cl, sizeof cfg_txt - (size_t)cl, "%s,", cams[c]);
    char rtc_txt[96] = "";
    if (K) {  /* only when given: the fingerprints of runs without --replan stay what they were */
        /* the settings in effect: the library's defaults for 0 (E 10, capped at the H - K rows given; B 10) */
        int eff_e = ro.execution_horizon ? ro.execution_horizon : MACT_RTC_DEFAULT_EXECUTION_HORIZON;
        if (eff_e > H - K) eff_e = H - K;
        snprintf(rtc_txt, sizeof rtc_txt, "%s,E=%d,B=%.9g,%s", sched_name, eff_e,
                 (double)(ro.max_guidance_weight > 0 || beta > 0 ? ro.max_guidance_weight : MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT), guid_name);
        if (cl > 0 && cl < (int)sizeof cfg_txt)
            cl += snprintf(cfg_txt + cl, sizeof cfg_txt - (size_t)cl, " replan=%d delay=%d compare=%d rtc=%s", K, delay, compare, rtc_txt);
    }
    snprintf(cfg, sizeof cfg, "%016llx", (unsigned long long)mact_fnv1a(MACT_FNV_BASIS, cfg_txt, strlen(cfg_txt)));
    /* refuse up front (before loading the model) when OUT already holds episodes of other settings: nothing new
     * is written into it then */
    {
        ep_sums *old_eps = NULL;
        int n_old = 0;
        char *od[1] = {(char *)out};
        if (load_eps(od, 1, &old_eps, &n_old)) { free(sel); mact_ld_close(d); return 1; }
        for (int i = 0; i < n_old; i++)
            if (strcmp(old_eps[i].config, cfg)) {
                fprintf(stderr, "mact eval: %s/episodes/ep_%06lld.json was computed with other settings (config %s, now %s): policy, seed, "
                        "steps, horizon, thresholds, cameras, keys or norm stats differ; use a fresh --out\n", out,
                        (long long)old_eps[i].ep, old_eps[i].config[0] ? old_eps[i].config : "none", cfg);
                eps_free(old_eps, n_old); free(sel); mact_ld_close(d);
                return 1;
            }
        eps_free(old_eps, n_old);
    }
    mact_model *m = NULL;
    mact_session *s = NULL;
    if (pm == 0 && (mact_model_load(model, NULL, &m, err, sizeof err) || mact_session_new(m, NULL, &s, err, sizeof err))) {
        fprintf(stderr, "mact eval: %s\n", err); free(sel); mact_model_free(m); mact_ld_close(d); return 1;
    }
    float *pred = malloc(sizeof(float) * 256 * 64);
    int rc = 0, done = 0;
    struct timespec ts0, ts1;
    clock_gettime(CLOCK_MONOTONIC, &ts0);
    double frames_run = 0, t_predict = 0, n_predict = 0;  /* t_predict: seconds inside mact_predict (the inference rate) */
    evf_options fo = {.d = d, .dsdir = dsdir, .akey = akey, .skey = skey, .cams = cams, .ncam = ncam, .decode = pm == 0,
                      .sel = sel, .n_sel = ns_sel, .shard = shard, .nshard = nshard, .H = H, .static_threshold = thr, .episode_dir = p,
                      .tolerance_s = tol, .stride = K};
    if (K) fo.static_threshold = -1;  /* nothing excluded: every replan point is a link of the chain */
    const int chains = K ? (compare ? 3 : 2) : 0;
    float *rp_raw[2] = {K ? malloc(sizeof(float) * 256 * 64) : NULL, K ? malloc(sizeof(float) * 256 * 64) : NULL};  /* chains' last chunks, as mact_predict returned them */
    if (K && (!rp_raw[0] || !rp_raw[1])) { fprintf(stderr, "mact eval: out of memory\n"); rc = 1; }
    evf *fr_src = NULL;
    if (!pred || evf_start(&fo, &fr_src, err, sizeof err)) { fprintf(stderr, "mact eval: %s\n", pred ? err : "out of memory"); rc = 1; }
    /* the episode being evaluated: its arrays are the producer's until EVF_EPISODE_END, so on an early stop the
     * producer is joined (evf_stop) before they are freed */
    double *act = NULL, *st = NULL;
    int dsd = 0, q = 0;
    const mact_ld_episode *e = NULL;
    ep_sums S;
    memset(&S, 0, sizeof S);
    for (int fin = 0; !rc && !fin;) {
        evf_item it;
        evf_next(fr_src, &it);
        switch (it.kind) {
        case EVF_ERROR: fprintf(stderr, "mact eval: %s\n", it.err); rc = 1; break;
        case EVF_DONE: fin = 1; break;
        case EVF_SKIPPED: {  /* finished by an earlier run: only if with these settings */
            char fp[4200];
            ep_sums prev;
            snprintf(fp, sizeof fp, "%s/ep_%06lld.json", p, (long long)mact_ld_episode_at(d, sel[it.q])->index);
            char *txt = slurp(fp);
            if (!txt || ep_parse(txt, &prev)) { fprintf(stderr, "mact eval: %s: not an episode result (remove it to recompute)\n", fp); rc = 1; }
            else if (strcmp(prev.config, cfg)) {
                fprintf(stderr, "mact eval: %s was computed with other settings (config %s, now %s): policy, seed, steps, horizon, "
                        "thresholds, cameras, keys or norm stats differ; use a fresh --out\n", fp, prev.config[0] ? prev.config : "none", cfg);
                rc = 1;
            }
            free(txt);
            ep_free(&prev);
            done++;
            break;
        }
        case EVF_EPISODE:
            q = it.q; e = mact_ld_episode_at(d, sel[q]);
            act = it.act; st = it.st; dsd = it.dsd;
            ep_free(&S);
            memset(&S, 0, sizeof S);
            memcpy(S.config, cfg, sizeof S.config);
            S.ep = e->index; S.H = H; S.D = D;
            if (K) { S.rp.K = K; S.rp.delay = delay; S.rp.chains = chains; snprintf(S.rp.rtc, sizeof S.rp.rtc, "%s", rtc_txt); }
            break;
        case EVF_FRAME: {
            int64_t t = it.t;
            const double *gt = act + t * D;
            if (it.excluded) { S.excluded++; break; }
            if (pm == 0) {
                mact_frame fr[EVF_MAX_CAMS];
                for (int c = 0; c < ncam; c++) fr[c] = (mact_frame){it.im[c].data, (int)it.im[c].height, (int)it.im[c].width};
                float sv[64];
                for (int j = 0; j < dsd && j < 64; j++)
                    sv[j] = (float)(so101_tf && j < 6 ? so101_sg[j] * st[t * dsd + j] + so101_of[j] : st[t * dsd + j]);
                mact_predict_input in = {.frames = fr, .n_frames = (size_t)ncam, .task = e->task, .state = sv, .state_dim = (size_t)dsd,
                                         .options = {.norm_tag = tag, .num_steps = steps, .n_action_steps = H, .seed = seed + (uint64_t)t}};
                /* --replan: frame t = cK is replan point c; each chain predicts its chunk (same seed), the RTC chain
                 * guided by its previous chunk's rows from the replan point on (the robot's units, as returned) */
                int c = K ? (int)(t / K) : 0;
                for (int ch = K ? 0 : 1; ch < 2 && !rc; ch++) {
                    if (K && !(chains >> ch & 1)) continue;
                    if (K && ch == 1 && c == 0 && (chains & 1)) { memcpy(rp_raw[1], rp_raw[0], sizeof(float) * (size_t)H * D); continue; }  /* no old chunk: chain 0's call */
                    if (K && ch == 1 && c > 0) {
                        in.rtc = ro;
                        in.rtc.prev_actions = rp_raw[1] + (size_t)K * D;
                        in.rtc.n_prev = (size_t)(H - K);
                        in.rtc.prev_dim = (size_t)D;
                        in.rtc.inference_delay = delay;
                    } else in.rtc = (mact_rtc_options){0};
                    mact_predict_output o = {.actions = pred, .actions_cap = 256 * 64};
                    struct timespec tp0, tp1;
                    clock_gettime(CLOCK_MONOTONIC, &tp0);
                    int prc = mact_predict(s, &in, &o);
                    clock_gettime(CLOCK_MONOTONIC, &tp1);
                    t_predict += (double)(tp1.tv_sec - tp0.tv_sec) + 1e-9 * (double)(tp1.tv_nsec - tp0.tv_nsec);
                    n_predict++;
                    if (prc) { fprintf(stderr, "mact eval: episode %lld frame %lld%s: %s\n", (long long)e->index, (long long)t, K ? (ch ? " (RTC chain)" : " (plain chain)") : "", mact_session_error(s)); rc = 1; }
                    if (!rc && ((int)o.n_steps != H || (int)o.action_dim != D)) { fprintf(stderr, "mact eval: the model returned %zux%zu actions, want %dx%d\n", o.n_steps, o.action_dim, H, D); rc = 1; }
                    if (!rc && K) memcpy(rp_raw[ch], pred, sizeof(float) * (size_t)H * D);
                }
                evf_item_free(&it);
                if (rc) break;
                if (K) {  /* the chains' chunks in the dataset's units; the per-chunk metrics below take the first chain's */
                    S.rp.n_chunks = c + 1;
                    for (int ch = 0; ch < 2 && !rc; ch++) {
                        if (!(chains >> ch & 1)) continue;
                        float *g = realloc(S.rp.chunk[ch], sizeof(float) * (size_t)(c + 1) * H * D);
                        if (!g) { fprintf(stderr, "mact eval: out of memory\n"); rc = 1; break; }
                        S.rp.chunk[ch] = g;
                        memcpy(g + (size_t)c * H * D, rp_raw[ch], sizeof(float) * (size_t)H * D);
                        if (so101_tf) so101_back(g + (size_t)c * H * D, H, D);
                    }
                    if (rc) break;
                    memcpy(pred, rp_raw[chains & 1 ? 0 : 1], sizeof(float) * (size_t)H * D);
                }
                if (so101_tf) so101_back(pred, H, D);
            }
            S.frames++;
            frames_run++;
            for (int k = 0; k < H; k++)
                for (int j = 0; j < D; j++) {
                    double g = gt[k * D + j];
                    double hv = delta ? 0 : (j < dsd ? st[t * dsd + j] : 0);
                    double pv = pm == 0 ? pred[k * D + j] : pm == 1 ? hv : g;
                    const mact_feature_stats *fs = &tg->action;
                    double sc = fmax(fs->hi[j] - fs->lo[j], 1e-6);
                    double gn = fs->mask[j] ? 2 * (g - fs->lo[j]) / sc - 1 : g;
                    double pn = fs->mask[j] ? 2 * (pv - fs->lo[j]) / sc - 1 : pv;
                    double hn = fs->mask[j] ? 2 * (hv - fs->lo[j]) / sc - 1 : hv;
                    S.m_raw[k] += fabs(pv - g); S.h_raw[k] += fabs(hv - g);
                    S.m_norm[k] += fabs(pn - gn); S.h_norm[k] += fabs(hn - gn);
                    S.gt_values++;
                    S.outside += g < fs->lo[j] || g > fs->hi[j];
                    if (j == grip) { S.m_grip += fabs(pv - g); S.h_grip += fabs(hv - g); S.grip_values++; }
                }
            break;
        }
        case EVF_EPISODE_END: {
            if (K) replan_measure(&S.rp, &ns, tg, act, H, D, so101_tf);
            free(act); free(st); act = st = NULL;
            char fp[4200];
            snprintf(fp, sizeof fp, "%s/ep_%06lld.json", p, (long long)e->index);
            char *txt = ep_json(&S);
            if (!txt || write_atomic(fp, txt)) { fprintf(stderr, "mact eval: cannot write %s\n", fp); rc = 1; }
            free(txt);
            ep_free(&S);
            done++;
            clock_gettime(CLOCK_MONOTONIC, &ts1);
            double el = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
            int left = 0;
            for (int r = q + 1; r < ns_sel; r++) left += r % nshard == shard;
            double fps = el > 0 ? frames_run / el : 0, per_ep = done ? el / done : 0;
            fprintf(stderr, "\rmact eval: shard %d/%d: %d episodes done, %d left, %.0f frames, %.3g frames/s, ETA %.0f s   ", shard, nshard,
                    done, left, frames_run, fps, per_ep * left);
            break;
        }
        }
        if (rc) evf_item_free(&it);
    }
    evf_stop(fr_src);
    free(act); free(st);
    ep_free(&S);
    free(rp_raw[0]); free(rp_raw[1]);
    fprintf(stderr, "\n");
    if (!rc && frames_run > 0) {  /* the evaluation's rate against the inference's own: what the frame reader costs */
        clock_gettime(CLOCK_MONOTONIC, &ts1);
        double el = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
        if (pm == 0 && K)
            fprintf(stderr, "mact eval: %.0f replan points, %.0f inferences in %.2f s: %.1f ms per inference, %.1f%% of the wall time\n",
                    frames_run, n_predict, el, 1e3 * t_predict / n_predict, 100 * t_predict / el);
        else if (pm == 0)
            fprintf(stderr, "mact eval: %.0f frames in %.2f s: %.4g frames/s; inference %.1f ms per frame (%.4g frames/s), %.1f%% of the wall time\n",
                    frames_run, el, frames_run / el, 1e3 * t_predict / frames_run, frames_run / t_predict, 100 * t_predict / el);
        else fprintf(stderr, "mact eval: %.0f frames in %.2f s\n", frames_run, el);
    }
    free(pred); free(sel);
    mact_session_free(s);
    mact_model_free(m);
    mact_ld_close(d);
    if (rc) return 1;
    ep_sums *all;
    int n_all;
    char *dl[1] = {(char *)out};
    if (load_eps(dl, 1, &all, &n_all)) return 1;
    rc = write_result(out, all, n_all, fk, nk, policy, ns_sel);
    eps_free(all, n_all);
    return rc;
}
