/* mact_stats_compute (include/mact_data.h; `mact stats`): MolmoAct2's molmoact2_norm_stats.v1 statistics of the action and state features (docs/datasets.md,
 * docs/spec/datasets.md 2.3). lerobot: per-episode 5000-bin histograms over linspace(min-1e-10, max+1e-10,
 * 5001) with linear interpolation inside the bin, then count-weighted means of the per-episode quantiles
 * across every episode of every dataset, the per-episode part in the feature's own precision as LeRobot runs
 * under NumPy 2 (float32 for float32 features); lerobot-f64: the same in double throughout; exact: all values sorted, linear interpolation at q*(n-1). min/max
 * global, mean count-weighted, std pooled (population). FILE is created, or one tag of it is replaced in
 * place (written to a temporary name next to it, then renamed), keeping the other tags and the top-level keys. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "mact_data.h"
#include "base/err.h"
#include "base/file.h"
#include "data/lerobot.h"

#define NQ 5
#define NBINS 5000
static const double QS[NQ] = {0.01, 0.10, 0.50, 0.90, 0.99};
static const char *const QN[NQ] = {"q01", "q10", "q50", "q90", "q99"};

typedef struct {
    int dim;
    double n;
    double *min, *max, *sum_mean, *sum_m2, *qsum;  /* count-weighted accumulators */
    double **all; int64_t n_all, cap_all;           /* exact */
    double *ep_mean, *ep_var, *ep_n;                /* per-episode moments, kept for the pooled variance */
    int64_t n_ep, cap_ep;
    char names[64][64];
    int n_names;
} acc;

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

/* The quantile of a 5000-bin histogram as LeRobot's RunningQuantileStats._compute_single_quantile: the first
 * bin whose cumulative count reaches q*n, linear inside it. de(k) is edges[k+1] - edges[k] in the edges'
 * own precision (float32 edges subtract in float32 in numpy). */
static void quantiles_from_hist(const int64_t *hist, int64_t n, const double *edges, const float *edges32, double *q)
{
    for (int j = 0; j < NQ; j++) {
        double target = QS[j] * (double)n;
        int64_t cum = 0, before = 0;
        int idx = 0;
        for (idx = 0; idx < NBINS; idx++) { before = cum; cum += hist[idx]; if ((double)cum >= target) break; }
        double e0 = edges32 ? edges32[idx < NBINS ? idx : NBINS] : edges[idx < NBINS ? idx : NBINS];
        if (idx == 0 || idx >= NBINS) { q[j] = e0; continue; }
        int64_t in_bin = cum - before;
        if (in_bin == 0) { q[j] = e0; continue; }
        double frac = (target - (double)before) / (double)in_bin;
        double de = edges32 ? (double)(float)(edges32[idx + 1] - edges32[idx]) : edges[idx + 1] - edges[idx];
        q[j] = e0 + frac * de;
    }
}

/* Double precision: edges start + i*step over linspace(min-1e-10, max+1e-10, 5001) (NumPy 1's arithmetic, or a
 * float64 feature), a value's bin found from its scaled index and corrected against the edges. */
static void hist_quantiles(const double *x, int64_t n, int stride, double mn, double mx, double *q)
{
    int64_t hist[NBINS];
    double edges[NBINS + 1];
    double start = mn - 1e-10, stop = mx + 1e-10, step = (stop - start) / NBINS;
    for (int i = 0; i <= NBINS; i++) edges[i] = i * step + start;
    edges[NBINS] = stop;
    memset(hist, 0, sizeof hist);
    double norm = NBINS / (stop - start);
    for (int64_t r = 0; r < n; r++) {
        double v = x[r * stride];
        int64_t k = (int64_t)((v - start) * norm);
        if (k >= NBINS) k = NBINS - 1;
        if (k < 0) k = 0;
        if (v < edges[k]) k--;
        else if (v >= edges[k + 1] && k != NBINS - 1) k++;
        if (k >= 0 && k < NBINS) hist[k]++;
    }
    quantiles_from_hist(hist, n, edges, NULL, q);
}

/* numpy's pairwise summation of a contiguous float32 run (numpy/core/src/umath/loops_utils.h: blocks of 128,
 * eight partial sums, split at a multiple of 8 above): what np.mean(axis=0) does when the reduced axis is the
 * contiguous one, i.e. a feature of one dimension. */
static float np_pairwise_f32(const float *a, int64_t n)
{
    if (n < 8) {
        float r = 0.f;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        float r[8];
        int64_t i;
        for (int k = 0; k < 8; k++) r[k] = a[k];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++) r[k] += a[i + k];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return np_pairwise_f32(a, n2) + np_pairwise_f32(a + n2, n - n2);
}

/* One episode of a float32 feature exactly as LeRobot computes it under NumPy 2 (NEP 50 keeps float32 scalars
 * float32): mean and mean of squares in float32 (np.mean over axis 0: a running sum in frame order when the
 * feature has several dimensions, numpy's pairwise sum when it has one), std = sqrt(max(0, E[x^2] - E[x]^2))
 * in float32, and the histogram over np.linspace(min - 1e-10, max + 1e-10, 5001) computed in float32: the
 * subtraction rounds back to min for |min| above ~1e-3, edge i is f32(f32(i * step) + start) with the last
 * edge = stop, and np.histogram puts a value in the last bin whose edge is <= it (the last bin closed).
 * Reproduces real meta/stats.json files to double rounding (docs/datasets.md). col: n floats (scratch). */
static void episode_f32(const double *x, int64_t n, int D, int j, float *col, double *mean, double *var, double *q)
{
    for (int64_t r = 0; r < n; r++) col[r] = (float)x[r * D + j];
    float s, s2;
    if (D == 1) {
        s = np_pairwise_f32(col, n);
        for (int64_t r = 0; r < n; r++) col[r] = col[r] * col[r];
        s2 = np_pairwise_f32(col, n);
        for (int64_t r = 0; r < n; r++) col[r] = (float)x[r * D + j];
    } else {
        s = 0.f; s2 = 0.f;
        for (int64_t r = 0; r < n; r++) { float v = col[r]; float v2 = v * v; s += v; s2 += v2; }
    }
    float m = s / (float)n, m2 = s2 / (float)n;
    float mm = m * m, vr = m2 - mm;
    float sd = n < 2 ? 0.f : sqrtf(vr > 0.f ? vr : 0.f);
    float sd2 = sd * sd;  /* aggregate_stats squares the float32 std */
    *mean = m;
    *var = sd2;
    if (n < 2) { for (int k = 0; k < NQ; k++) q[k] = m; return; }
    float mn = col[0], mx = col[0];
    for (int64_t r = 1; r < n; r++) { if (col[r] < mn) mn = col[r]; if (col[r] > mx) mx = col[r]; }
    float e[NBINS + 1];
    float start = mn - 1e-10f, stop = mx + 1e-10f, delta = stop - start, step = delta / (float)NBINS;
    for (int i = 0; i <= NBINS; i++) { float t = (float)i * step; e[i] = t + start; }
    e[NBINS] = stop;
    int64_t hist[NBINS];
    memset(hist, 0, sizeof hist);
    for (int64_t r = 0; r < n; r++) {
        float v = col[r];
        if (!(v >= e[0] && v <= e[NBINS])) continue;  /* outside the range: np.histogram drops it */
        int lo = 0, hi = NBINS - 1;                    /* the last k in [0, NBINS-1] with e[k] <= v */
        while (lo < hi) { int mid = (lo + hi + 1) / 2; if (e[mid] <= v) lo = mid; else hi = mid - 1; }
        hist[lo]++;
    }
    quantiles_from_hist(hist, n, NULL, e, q);
}

static int acc_init(acc *a, int dim)
{
    memset(a, 0, sizeof *a);
    a->dim = dim;
    a->min = malloc(dim * sizeof(double)); a->max = malloc(dim * sizeof(double));
    a->sum_mean = calloc(dim, sizeof(double)); a->sum_m2 = calloc(dim, sizeof(double)); a->qsum = calloc((size_t)dim * NQ, sizeof(double));
    a->all = calloc(dim, sizeof(double *));
    if (!a->min || !a->max || !a->sum_mean || !a->sum_m2 || !a->qsum || !a->all) return -1;
    for (int j = 0; j < dim; j++) { a->min[j] = INFINITY; a->max[j] = -INFINITY; }
    return 0;
}

static int acc_episode(acc *a, const double *x, int64_t n, int exact, int f32)
{
    if (n <= 0) return 0;
    int D = a->dim;
    if (a->n_ep == a->cap_ep) {
        a->cap_ep = a->cap_ep ? a->cap_ep * 2 : 64;
        a->ep_mean = realloc(a->ep_mean, (size_t)a->cap_ep * D * sizeof(double));
        a->ep_var = realloc(a->ep_var, (size_t)a->cap_ep * D * sizeof(double));
        a->ep_n = realloc(a->ep_n, (size_t)a->cap_ep * sizeof(double));
        if (!a->ep_mean || !a->ep_var || !a->ep_n) return -1;
    }
    if (exact && a->n_all + n > a->cap_all) {
        int64_t c = a->cap_all ? a->cap_all : 1024;
        while (c < a->n_all + n) c *= 2;
        for (int j = 0; j < D; j++) { a->all[j] = realloc(a->all[j], (size_t)c * sizeof(double)); if (!a->all[j]) return -1; }
        a->cap_all = c;
    }
    float *col = f32 ? malloc((size_t)n * sizeof(float)) : NULL;
    if (f32 && !col) return -1;
    for (int j = 0; j < D; j++) {
        double mn = INFINITY, mx = -INFINITY, s = 0;
        for (int64_t r = 0; r < n; r++) { double v = x[r * D + j]; s += v; if (v < mn) mn = v; if (v > mx) mx = v; }
        double m = s / n, ss = 0, q[NQ];
        for (int64_t r = 0; r < n; r++) { double dv = x[r * D + j] - m; ss += dv * dv; }
        a->ep_mean[a->n_ep * D + j] = m;
        a->ep_var[a->n_ep * D + j] = ss / n;
        if (mn < a->min[j]) a->min[j] = mn;
        if (mx > a->max[j]) a->max[j] = mx;
        if (f32) episode_f32(x, n, D, j, col, &a->ep_mean[a->n_ep * D + j], &a->ep_var[a->n_ep * D + j], q);
        else if (n < 2) for (int k = 0; k < NQ; k++) q[k] = m;
        else hist_quantiles(x + j, n, D, mn, mx, q);
        for (int k = 0; k < NQ; k++) a->qsum[j * NQ + k] += q[k] * n;
        if (exact) for (int64_t r = 0; r < n; r++) a->all[j][a->n_all + r] = x[r * D + j];
    }
    free(col);
    a->ep_n[a->n_ep++] = (double)n;
    if (exact) a->n_all += n;
    a->n += (double)n;
    return 0;
}

static cJSON *darr(const double *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *acc_json(acc *a, int exact, int normalize_gripper)
{
    int D = a->dim;
    double *mean = calloc(D, sizeof(double)), *std = calloc(D, sizeof(double)), *q = calloc((size_t)D * NQ, sizeof(double)), *col = malloc(D * sizeof(double));
    for (int j = 0; j < D; j++) {
        double sm = 0;
        for (int64_t e = 0; e < a->n_ep; e++) sm += a->ep_n[e] * a->ep_mean[e * D + j];
        mean[j] = sm / a->n;
        double v = 0;
        for (int64_t e = 0; e < a->n_ep; e++) { double dm = a->ep_mean[e * D + j] - mean[j]; v += a->ep_n[e] * (a->ep_var[e * D + j] + dm * dm); }
        std[j] = sqrt(v / a->n);
        if (exact) {
            qsort(a->all[j], (size_t)a->n_all, sizeof(double), cmp_d);
            for (int k = 0; k < NQ; k++) {
                double pos = QS[k] * (double)(a->n_all - 1);
                int64_t lo = (int64_t)floor(pos), hi = lo + 1 < a->n_all ? lo + 1 : lo;
                double fr = pos - (double)lo;
                q[k * D + j] = a->all[j][lo] + fr * (a->all[j][hi] - a->all[j][lo]);
            }
        } else
            for (int k = 0; k < NQ; k++) q[k * D + j] = a->qsum[j * NQ + k] / a->n;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "min", darr(a->min, D));
    cJSON_AddItemToObject(o, "max", darr(a->max, D));
    cJSON_AddItemToObject(o, "mean", darr(mean, D));
    cJSON_AddItemToObject(o, "std", darr(std, D));
    for (int k = 0; k < NQ; k++) cJSON_AddItemToObject(o, QN[k], darr(q + k * D, D));
    double cnt = a->n;
    cJSON_AddItemToObject(o, "count", darr(&cnt, 1));
    cJSON *names = cJSON_CreateArray(), *mask = cJSON_CreateArray();
    for (int j = 0; j < D; j++) {
        char nm[64];
        if (j < a->n_names) snprintf(nm, sizeof nm, "%s", a->names[j]); else snprintf(nm, sizeof nm, "dim_%d", j);
        cJSON_AddItemToArray(names, cJSON_CreateString(nm));
        cJSON_AddItemToArray(mask, cJSON_CreateBool(normalize_gripper || !strstr(nm, "gripper")));
    }
    cJSON_AddItemToObject(o, "names", names);
    cJSON_AddItemToObject(o, "mask", mask);
    free(mean); free(std); free(q); free(col);
    return o;
}

static void acc_free(acc *a)
{
    free(a->min); free(a->max); free(a->sum_mean); free(a->sum_m2); free(a->qsum);
    for (int j = 0; a->all && j < a->dim; j++) free(a->all[j]);
    free(a->all); free(a->ep_mean); free(a->ep_var); free(a->ep_n);
}

mact_status mact_stats_method_parse(const char *name, mact_stats_method *out)
{
    static const char *const names[] = {"lerobot", "lerobot-f64", "exact"};
    for (int i = 0; name && out && i < 3; i++)
        if (!strcmp(name, names[i])) { *out = (mact_stats_method)i; return MACT_OK; }
    return MACT_ERR_INPUT;
}

mact_status mact_stats_compute(const mact_stats_options *o, double *frames_out, char *err, size_t el)
{
    static const char *const method_names[] = {"lerobot", "lerobot-f64", "exact"};
    if (!o || !o->datasets || o->n_datasets < 1 || !o->tag || !o->out)
        return mact_errf(err, el, MACT_ERR_INPUT, "mact_stats_compute: datasets, tag and out are required");
    if ((unsigned)o->method > MACT_STATS_EXACT) return mact_errf(err, el, MACT_ERR_INPUT, "--method must be lerobot, lerobot-f64 or exact");
    const char *const *ds = o->datasets, *tag = o->tag, *out = o->out, *method = method_names[o->method];
    const char *akey = o->action_key ? o->action_key : "action", *skey = o->state_key ? o->state_key : "observation.state";
    const char *control = o->control_mode, *setup = o->setup_type, *lrs = o->lerobot_stats;
    const int nds = o->n_datasets, exact = o->method == MACT_STATS_EXACT, f64 = o->method == MACT_STATS_LEROBOT_F64;
    int horizon = o->horizon > 0 ? o->horizon : -1, ngrip = o->normalize_gripper == 1 ? 1 : o->normalize_gripper == 2 ? 0 : -1;
    /* the existing file and tag, if any */
    cJSON *root = NULL;
    int exists = access(out, F_OK) == 0;
    char *old = NULL;
    if (exists) {
        mact_status frc = (mact_status)mact_file_read_text(out, (size_t)1 << 28, &old, NULL, err, el);
        if (frc) return frc;
    }
    if (old) {
        root = cJSON_Parse(old);
        free(old);
        if (!cJSON_IsObject(root) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "metadata_by_tag"))) {
            cJSON_Delete(root);
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s exists but is not a norm_stats.json (no metadata_by_tag); not touching it", out);
        }
    } else {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "format", "molmoact2_norm_stats.v1");
        cJSON_AddStringToObject(root, "norm_mode", "q01_q99");
        cJSON_AddItemToObject(root, "metadata_by_tag", cJSON_CreateObject());
    }
    cJSON *tags = cJSON_GetObjectItemCaseSensitive(root, "metadata_by_tag");
    cJSON *prev = cJSON_GetObjectItemCaseSensitive(tags, tag);
    if (ngrip < 0) { const cJSON *g = cJSON_GetObjectItemCaseSensitive(prev, "normalize_gripper"); ngrip = g ? cJSON_IsTrue(g) : 1; }
    acc A, S;
    int lrs_failed = 0;  /* --lerobot-stats unwritable: reported after the norm stats are written */
    int rc = 0, adim = 0, sdim = 0;
    cJSON *cams = cJSON_CreateArray();
    memset(&A, 0, sizeof A); memset(&S, 0, sizeof S);
    for (int k = 0; k < nds && !rc; k++) {
        mact_ld *d;
        if ((rc = mact_ld_open(ds[k], &d, err, el))) break;
        const mact_ld_feature *fa = mact_ld_find_feature(d, akey), *fs = mact_ld_find_feature(d, skey);
        if (!fa || !fs || fa->ndim != 1 || fs->ndim != 1) {
            rc = mact_errf(err, el, MACT_ERR_INPUT, "%s: feature '%s' missing or not a vector", ds[k], !fa || fa->ndim != 1 ? akey : skey);
            mact_ld_close(d); break;
        }
        if (k == 0) {
            adim = fa->shape[0]; sdim = fs->shape[0];
            if (acc_init(&A, adim) || acc_init(&S, sdim)) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); mact_ld_close(d); break; }
            A.n_names = fa->n_names == adim ? adim : 0; S.n_names = fs->n_names == sdim ? sdim : 0;
            for (int j = 0; j < A.n_names && j < 64; j++) snprintf(A.names[j], 64, "%s", fa->names[j]);
            for (int j = 0; j < S.n_names && j < 64; j++) snprintf(S.names[j], 64, "%s", fs->names[j]);
            for (int i = 0; i < mact_ld_num_features(d); i++) {
                const mact_ld_feature *ft = mact_ld_feature_at(d, i);
                if (!strcmp(ft->dtype, "video") || !strcmp(ft->dtype, "image")) cJSON_AddItemToArray(cams, cJSON_CreateString(ft->key));
            }
        } else if (fa->shape[0] != adim || fs->shape[0] != sdim) {
            rc = mact_errf(err, el, MACT_ERR_INPUT, "%s: '%s'/'%s' are [%d]/[%d], the first dataset's are [%d]/[%d]", ds[k], akey, skey,
                           fa->shape[0], fs->shape[0], adim, sdim);
            mact_ld_close(d); break;
        }
        /* LeRobot's arithmetic follows the stored dtype: float32 features are reduced in float32 */
        int f32[2] = {!f64 && !exact && !strcmp(fa->dtype, "float32"), !f64 && !exact && !strcmp(fs->dtype, "float32")};
        for (int e = 0; e < mact_ld_num_episodes(d) && !rc; e++) {
            double *x; int64_t n; int dim;
            for (int f = 0; f < 2 && !rc; f++) {
                if ((rc = mact_ld_read(d, e, f ? skey : akey, &x, &n, &dim, err, el))) break;
                for (int64_t i = 0; i < n * dim; i++)
                    if (!isfinite(x[i])) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: episode %d, '%s': non-finite value at row %lld", ds[k], e, f ? skey : akey, (long long)(i / dim)); break; }
                if (!rc && acc_episode(f ? &S : &A, x, n, exact, f32[f])) rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
                free(x);
            }
        }
        mact_ld_close(d);
    }
    if (!rc && A.n <= 0) rc = mact_errf(err, el, MACT_ERR_INPUT, "no frames");
    if (rc) { acc_free(&A); acc_free(&S); cJSON_Delete(cams); cJSON_Delete(root); return (mact_status)(rc < 0 ? rc : MACT_ERR_FORMAT); }
    cJSON *t = cJSON_CreateObject();
    const cJSON *pv;
    cJSON_AddStringToObject(t, "action_key", akey);
    cJSON_AddStringToObject(t, "state_key", skey);
    cJSON_AddItemToObject(t, "camera_keys", cams);
    cJSON_AddBoolToObject(t, "normalize_gripper", ngrip);
    cJSON_AddNumberToObject(t, "action_dim", adim);
    if (horizon < 0) { pv = cJSON_GetObjectItemCaseSensitive(prev, "action_horizon"); horizon = cJSON_IsNumber(pv) ? pv->valueint : 30; }
    cJSON_AddNumberToObject(t, "action_horizon", horizon);
    pv = cJSON_GetObjectItemCaseSensitive(prev, "n_action_steps");
    cJSON_AddNumberToObject(t, "n_action_steps", cJSON_IsNumber(pv) ? pv->valueint : horizon);
    if (!setup) { setup = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(prev, "setup_type")); if (!setup) setup = ""; }
    if (!control) { control = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(prev, "control_mode")); if (!control) control = "absolute joint pose"; }
    cJSON_AddStringToObject(t, "setup_type", setup);
    cJSON_AddStringToObject(t, "control_mode", control);
    cJSON_AddStringToObject(t, "stats_method", method);
    cJSON *as = acc_json(&A, exact, ngrip), *ss = acc_json(&S, exact, ngrip);
    if (lrs) {  /* LeRobot's meta/stats.json: {feature: {min, max, mean, std, count, q01, ...}} */
        cJSON *l = cJSON_CreateObject(), *la = cJSON_Duplicate(as, 1), *ls = cJSON_Duplicate(ss, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(la, "names"); cJSON_DeleteItemFromObjectCaseSensitive(la, "mask");
        cJSON_DeleteItemFromObjectCaseSensitive(ls, "names"); cJSON_DeleteItemFromObjectCaseSensitive(ls, "mask");
        cJSON_AddItemToObject(l, akey, la);
        cJSON_AddItemToObject(l, skey, ls);
        char *lt = cJSON_Print(l);
        cJSON_Delete(l);
        /* as before the move into the library: a failure here is reported and the norm stats still written */
        int lrc = !lt ? mact_errf(err, el, MACT_ERR_NOMEM, "out of memory") : mact_file_write_atomic(lrs, lt, strlen(lt), err, el);
        free(lt);
        if (lrc) lrs_failed = lrc;
    }
    cJSON_AddItemToObject(t, "action_stats", as);
    cJSON_AddItemToObject(t, "state_stats", ss);
    acc_free(&A); acc_free(&S);
    if (prev) cJSON_ReplaceItemInObjectCaseSensitive(tags, tag, t);
    else cJSON_AddItemToObject(tags, tag, t);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    size_t tl = strlen(txt);
    char *t2 = realloc(txt, tl + 2);
    if (t2) { txt = t2; txt[tl++] = '\n'; txt[tl] = 0; }
    char e3[1024];
    int wrc = mact_file_write_atomic(out, txt, tl, e3, sizeof e3);
    free(txt);
    if (wrc) return mact_errf(err, el, wrc, "%s", e3);
    if (frames_out) *frames_out = A.n;
    return (mact_status)lrs_failed;
}
