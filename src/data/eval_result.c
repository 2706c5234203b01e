/* The open-loop evaluation's files (data/eval_internal.h): an episode's sums as JSON and back, the episodes of
 * result dirs, episodes.jsonl + result.json + the table from them, and `eval merge`. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include "mact_data.h"
#include "base/err.h"
#include "base/file.h"
#include "data/eval_internal.h"

const char *const mact_eval_chain_name[2] = {"plain", "rtc"};
#define chain_name mact_eval_chain_name

struct mact_eval_result {
    char *json;                      /* result.json's text */
    char *policy;
    int H;
    double frames;
    double *policy_mae, *hold_mae;   /* [H], raw units */
    ep_sums first;                   /* replan: the first episode with chunks (its trajectory) */
};

void mact_eval_ep_free(ep_sums *s)
{
    for (int c = 0; c < 2; c++) {
        free(s->rp.chunk[c]); free(s->rp.jump[c]); free(s->rp.step[c]);
        s->rp.chunk[c] = NULL; s->rp.jump[c] = NULL; s->rp.step[c] = NULL;
    }
}

void mact_eval_eps_free(ep_sums *e, int n)
{
    for (int i = 0; i < n; i++) mact_eval_ep_free(&e[i]);
    free(e);
}

int mact_eval_write_atomic(const char *path, const char *text, char *err, size_t el)
{
    return mact_file_write_atomic(path, text, strlen(text), err, el);
}

static void put_arr(char **p, size_t *left, const char *key, const double *v, int n)
{
    int w = snprintf(*p, *left, ",\"%s\":[", key);
    *p += w; *left -= (size_t)w;
    for (int i = 0; i < n; i++) { w = snprintf(*p, *left, "%s%.17g", i ? "," : "", v[i]); *p += w; *left -= (size_t)w; }
    w = snprintf(*p, *left, "]");
    *p += w; *left -= (size_t)w;
}

char *mact_eval_ep_json(const ep_sums *s)
{
    size_t cap = 4096 + 6 * sizeof s->hold_note + (size_t)s->H * 4 * 32;
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
    if (s->hold_note[0]) {  /* only when the baseline is not state[t][:D]: every other file keeps its bytes */
        cJSON *note = cJSON_CreateString(s->hold_note);
        char *q = note ? cJSON_PrintUnformatted(note) : NULL;
        if (q) { w = snprintf(p, left, ",\"hold_note\":%s", q); p += w; left -= (size_t)w; }
        free(q);
        cJSON_Delete(note);
    }
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

int mact_eval_ep_parse(const char *text, ep_sums *s)
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
    const char *hn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "hold_note"));
    if (hn) snprintf(s->hold_note, sizeof s->hold_note, "%s", hn);
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
        if (rc) mact_eval_ep_free(s);
    }
    cJSON_Delete(j);
    return rc;
}

static int cmp_ep(const void *a, const void *b) { int64_t x = ((const ep_sums *)a)->ep, y = ((const ep_sums *)b)->ep; return x < y ? -1 : x > y; }

/* Reads every DIR/episodes/ep_*.json of the given dirs (first occurrence of an episode wins), sorted. */
int mact_eval_load_eps(const char *const *dirs, int nd, ep_sums **out, int *n, char *err, size_t el)
{
    int cap = 0;
    *out = NULL; *n = 0;
    for (int k = 0; k < nd; k++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/episodes", dirs[k]);
        DIR *dd = opendir(p);
        if (!dd) { mact_eval_eps_free(*out, *n); *out = NULL; *n = 0; return mact_errf(err, el, MACT_ERR_IO, "%s: %s", p, strerror(errno)); }
        struct dirent *de;
        while ((de = readdir(dd))) {
            size_t L = strlen(de->d_name);
            if (strncmp(de->d_name, "ep_", 3) || L < 8 || strcmp(de->d_name + L - 5, ".json")) continue;
            char fp[8192];
            snprintf(fp, sizeof fp, "%s/%s", p, de->d_name);
            char *t = NULL, e2[512];
            ep_sums s;
            if (mact_file_read_text(fp, (size_t)1 << 28, &t, NULL, e2, sizeof e2) || mact_eval_ep_parse(t, &s)) {
                free(t); closedir(dd); mact_eval_eps_free(*out, *n); *out = NULL; *n = 0;
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: not an episode result", fp);
            }
            free(t);
            if (*n && strcmp(s.config, (*out)[0].config)) {
                mact_errf(err, el, MACT_ERR_FORMAT, "%s was computed with other settings (config %s) than episode %lld (config %s): "
                          "policy, seed, steps, horizon, thresholds, cameras, keys or norm stats differ; merge only one run's shards",
                          fp, s.config[0] ? s.config : "none", (long long)(*out)[0].ep, (*out)[0].config[0] ? (*out)[0].config : "none");
                closedir(dd);
                mact_eval_ep_free(&s); mact_eval_eps_free(*out, *n); *out = NULL; *n = 0;
                return MACT_ERR_FORMAT;
            }
            int dup = 0;
            for (int i = 0; i < *n; i++) dup |= (*out)[i].ep == s.ep;
            if (dup) { mact_eval_ep_free(&s); continue; }
            if (*n == cap) {
                ep_sums *g = realloc(*out, (size_t)(cap ? cap * 2 : 64) * sizeof **out);
                if (!g) { closedir(dd); mact_eval_ep_free(&s); mact_eval_eps_free(*out, *n); *out = NULL; *n = 0; return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
                *out = g;
                cap = cap ? cap * 2 : 64;
            }
            (*out)[(*n)++] = s;
        }
        closedir(dd);
    }
    if (*n) qsort(*out, (size_t)*n, sizeof **out, cmp_ep);
    return 0;
}

/* The rows the robot executed in replan segment c (frames cK .. cK+K-1) of chain ch: the first `delay` from the old
 * chunk (its rows K .. K+delay-1, executed while the new one was inferred), the rest from chunk c's rows
 * delay .. K-1. Chunk 0 has no predecessor: all K rows its own. */
const float *mact_eval_exec_row(const ep_replan *r, int ch, int H, int D, int c, int i)
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

#define SAY(...) do { if (rep) fprintf(rep, __VA_ARGS__); } while (0)

/* result.json's "replan" object and the summary lines, from the episodes' chains */
static int replan_result(cJSON *r, const ep_sums *e, int n, FILE *rep, char *err, size_t el)
{
    const ep_replan *r0 = &e[0].rp;
    for (int i = 0; i < n; i++)
        if (e[i].rp.K != r0->K || e[i].rp.delay != r0->delay || e[i].rp.chains != r0->chains) {
            return mact_errf(err, el, MACT_ERR_FORMAT, "episode %lld was replanned with other settings than episode %lld", (long long)e[i].ep, (long long)e[0].ep);
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
    SAY("replanning every %d frames, inference delay %d rows: %d joins, %.0f frames executed; RTC %s\n", r0->K, r0->delay, joins, frames, r0->rtc);
    double *all = malloc(sizeof(double) * (size_t)(joins + 1));
    if (!all) { cJSON_Delete(o); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
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
        SAY("    %-11s join jump mean %.6g, p95 %.6g (normalised); executed MAE %.6g raw, %.6g normalised", ch ? "with RTC:" : "without RTC:", jm, jp, mr, mn);
        if (has_step) SAY("; the old chunk's own step there %.6g", k ? ss / k : 0);
        SAY("\n");
    }
    free(all);
    cJSON_AddItemToObject(r, "replan", o);
    return 0;
}

/* episodes.jsonl + result.json + the table, from the per-episode sums in episode order */
int mact_eval_write_result(const char *out, ep_sums *e, int n, const int *first_k, int n_k, const char *policy, int selected,
                           FILE *rep, mact_eval_result **res, char *err, size_t el)
{
    if (res) *res = NULL;
    if (!n) return mact_errf(err, el, MACT_ERR_FORMAT, "no episode results in %s", out);
    int H = e[0].H, D = e[0].D;
    ep_sums t = {.H = H, .D = D};
    size_t jl_cap = 1 << 16, jl_n = 0;
    char *jl = malloc(jl_cap);
    if (!jl) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    jl[0] = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].H != H || e[i].D != D) { free(jl); return mact_errf(err, el, MACT_ERR_FORMAT, "episode %lld has horizon/dim %d/%d, others %d/%d", (long long)e[i].ep, e[i].H, e[i].D, H, D); }
        t.frames += e[i].frames; t.excluded += e[i].excluded; t.outside += e[i].outside; t.gt_values += e[i].gt_values;
        t.grip_values += e[i].grip_values; t.m_grip += e[i].m_grip; t.h_grip += e[i].h_grip;
        for (int k = 0; k < H; k++) { t.m_raw[k] += e[i].m_raw[k]; t.h_raw[k] += e[i].h_raw[k]; t.m_norm[k] += e[i].m_norm[k]; t.h_norm[k] += e[i].h_norm[k]; }
        char *line = mact_eval_ep_json(&e[i]);
        size_t L = line ? strlen(line) : 0;
        if (line && jl_n + L + 1 > jl_cap) {
            while (jl_n + L + 1 > jl_cap) jl_cap *= 2;
            char *g = realloc(jl, jl_cap);
            if (!g) { free(line); line = NULL; } else jl = g;
        }
        if (!line) { free(jl); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
        memcpy(jl + jl_n, line, L + 1);
        jl_n += L;
        free(line);
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/episodes.jsonl", out);
    char e2[1024];
    if (mact_eval_write_atomic(p, jl, e2, sizeof e2)) { free(jl); return mact_errf(err, el, MACT_ERR_IO, "%s; cannot write %s", e2, p); }
    free(jl);
    /* a mean over no frame is not an MAE of 0: the episode files stay, the result is refused by name */
    if (!(t.frames > 0))
        return mact_errf(err, el, MACT_ERR_INPUT, "no frame was evaluated in %s (%d episodes): %.0f frames were excluded as "
                         "static (the ground truth's next %d actions do not move by more than the static threshold) and "
                         "an episode's last %d frames have no full chunk; nothing to average, so no result.json",
                         out, n, t.excluded, H, H - 1);
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
    SAY("open-loop evaluation: %d episodes, %.0f frames evaluated, %.0f excluded (static), horizon %d, policy %s\n", n,
           t.frames, t.excluded, H, policy);
    SAY("ground truth outside [q01, q99]: %.2f%%\n", t.gt_values > 0 ? 100.0 * t.outside / t.gt_values : 0.0);
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
        SAY("%s units: MAE %.6g, hold-still %.6g, ratio %.4g; step 0 %.6g, step %d %.6g\n", u ? "normalised" : "raw", mae, hmae,
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
            SAY("    first %-3d steps: MAE %.6g, hold-still %.6g\n", first_k[q], per > 0 ? a / (per * K) : 0, per > 0 ? b / (per * K) : 0);
        }
        cJSON_AddItemToObject(o, "first_k", fk);
        cJSON_AddItemToObject(o, "hold_first_k", hfk);
        if (u) cJSON_AddItemToObject(r, "normalized", o);
    }
    cJSON_AddNumberToObject(r, "gripper_mae", t.grip_values > 0 ? t.m_grip / t.grip_values : 0);
    cJSON_AddNumberToObject(r, "gripper_hold_mae", t.grip_values > 0 ? t.h_grip / t.grip_values : 0);
    if (e[0].hold_note[0]) cJSON_AddStringToObject(r, "hold_baseline_note", e[0].hold_note);  /* the state is not the action's space */
    int rrc = e[0].rp.K ? replan_result(r, e, n, rep, err, el) : 0;
    if (rrc) { cJSON_Delete(r); return rrc; }
    char *txt = cJSON_Print(r);
    cJSON_Delete(r);
    if (!txt) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    snprintf(p, sizeof p, "%s/result.json", out);
    size_t L = strlen(txt);
    char *t2 = realloc(txt, L + 2);
    if (!t2) { free(txt); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
    txt = t2;
    txt[L] = '\n'; txt[L + 1] = 0;
    if (mact_eval_write_atomic(p, txt, e2, sizeof e2)) { free(txt); return mact_errf(err, el, MACT_ERR_IO, "%s; cannot write %s", e2, p); }
    if (!res) { free(txt); return 0; }
    mact_eval_result *o = calloc(1, sizeof *o);
    if (o) {
        o->json = txt; o->H = H; o->frames = t.frames; o->policy = strdup(policy);
        o->policy_mae = malloc(sizeof(double) * (size_t)H);
        o->hold_mae = malloc(sizeof(double) * (size_t)H);
    }
    if (!o || !o->policy || !o->policy_mae || !o->hold_mae) {
        if (o) o->json = NULL;
        free(txt);
        mact_eval_result_free(o);
        return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < H; k++) { o->policy_mae[k] = per > 0 ? t.m_raw[k] / per : 0; o->hold_mae[k] = per > 0 ? t.h_raw[k] / per : 0; }
    if (e[0].rp.K) {  /* the first episode with chunks: its trajectory for a plot; the result owns it now */
        int k = 0;
        while (k < n - 1 && e[k].rp.n_chunks < 1) k++;
        if (e[k].rp.n_chunks > 0) { o->first = e[k]; memset(&e[k].rp, 0, sizeof e[k].rp); }
    }
    *res = o;
    return 0;
}

mact_status mact_eval_merge(const mact_eval_merge_options *mo, FILE *rep, mact_eval_result **res, char *err, size_t el)
{
    static const int fk_default[3] = {5, 10, 30};
    if (res) *res = NULL;
    if (!mo || !mo->out || !mo->dirs || mo->n_dirs < 1) return mact_errf(err, el, MACT_ERR_INPUT, "mact_eval_merge: out and the shard dirs are required");
    const char *out = mo->out;
    const char *const *dirs = mo->dirs;
    const int nd = mo->n_dirs, partial = mo->allow_partial, nk = mo->n_first_k > 0 ? mo->n_first_k : 3;
    const int *fk = mo->n_first_k > 0 ? mo->first_k : fk_default;
    char p[4096];
    snprintf(p, sizeof p, "%s/episodes", out);
    if (mact_file_mkdirs(out, err, el) || (mkdir(p, 0777) && errno != EEXIST)) return mact_errf(err, el, MACT_ERR_IO, "cannot create %s", p);
    ep_sums *e;
    int n, rc = mact_eval_load_eps(dirs, nd, &e, &n, err, el);
    if (rc) return (mact_status)rc;
    /* the policy of the first dir; the selection's size, which every shard's result.json records */
    char pol[64] = "merged";
    int sel = 0;
    for (int k = 0; k < nd; k++) {
        char rp[4200];
        snprintf(rp, sizeof rp, "%s/result.json", dirs[k]);
        char *t = NULL, e2[512];
        if (mact_file_read_text(rp, (size_t)1 << 28, &t, NULL, e2, sizeof e2)) t = NULL;
        cJSON *j = t ? cJSON_Parse(t) : NULL;
        const char *ps = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "policy"));
        if (ps && k == 0) snprintf(pol, sizeof pol, "%s", ps);
        const cJSON *es = cJSON_GetObjectItemCaseSensitive(j, "episodes_selected");
        int v = cJSON_IsNumber(es) ? (int)es->valuedouble : 0;
        cJSON_Delete(j);
        free(t);
        if (v > 0 && sel > 0 && v != sel) { mact_eval_eps_free(e, n); return mact_errf(err, el, MACT_ERR_FORMAT, "%s selected %d episodes, an earlier dir %d", dirs[k], v, sel); }
        if (v > 0) sel = v;
    }
    if (sel > 0 && n != sel && !partial) {
        mact_eval_eps_free(e, n);
        return mact_errf(err, el, MACT_ERR_FORMAT, "%d of the %d selected episodes present (a shard missing or unfinished?); --allow-partial merges anyway", n, sel);
    }
    for (int i = 0; i < n; i++) {  /* the merged dir holds every episode too, so it can be merged again */
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/ep_%06lld.json", p, (long long)e[i].ep);
        char *t = mact_eval_ep_json(&e[i]), e2[1024];
        int bad = !t || mact_eval_write_atomic(fp, t, e2, sizeof e2);
        free(t);
        if (bad) { mact_eval_eps_free(e, n); return mact_errf(err, el, MACT_ERR_IO, "cannot write %s", fp); }
    }
    rc = mact_eval_write_result(out, e, n, fk, nk, pol, sel, rep, res, err, el);
    mact_eval_eps_free(e, n);
    return (mact_status)rc;
}


/* ---- the result ---- */

const char *mact_eval_result_json(const mact_eval_result *r) { return r ? r->json : NULL; }
int mact_eval_result_horizon(const mact_eval_result *r) { return r ? r->H : 0; }
double mact_eval_result_frames(const mact_eval_result *r) { return r ? r->frames : 0; }
const char *mact_eval_result_policy(const mact_eval_result *r) { return r ? r->policy : NULL; }

void mact_eval_result_per_step(const mact_eval_result *r, double *policy_mae, double *hold_mae)
{
    if (!r) return;
    if (policy_mae) memcpy(policy_mae, r->policy_mae, sizeof(double) * (size_t)r->H);
    if (hold_mae) memcpy(hold_mae, r->hold_mae, sizeof(double) * (size_t)r->H);
}

mact_status mact_eval_result_trajectory(const mact_eval_result *r, int ch, float *rows, size_t cap, int *frames, int *dim,
                                        int64_t *episode_index, int *replan, int *delay)
{
    if (!r || ch < 0 || ch > 1 || !r->first.rp.K || !(r->first.rp.chains >> ch & 1)) return MACT_ERR_INPUT;
    const ep_replan *p = &r->first.rp;
    const int F = p->n_chunks * p->K, D = r->first.D;
    if (frames) *frames = F;
    if (dim) *dim = D;
    if (episode_index) *episode_index = r->first.ep;
    if (replan) *replan = p->K;
    if (delay) *delay = p->delay;
    if (!rows) return MACT_OK;
    if ((size_t)F * (size_t)D > cap) return MACT_ERR_INPUT;
    for (int f = 0; f < F; f++) memcpy(rows + (size_t)f * D, mact_eval_exec_row(p, ch, r->first.H, D, f / p->K, f % p->K), sizeof(float) * (size_t)D);
    return MACT_OK;
}

void mact_eval_result_free(mact_eval_result *r)
{
    if (!r) return;
    free(r->json); free(r->policy); free(r->policy_mae); free(r->hold_mae);
    mact_eval_ep_free(&r->first);
    free(r);
}
