/* mact_eval_run (include/mact_data.h; `mact eval`): open-loop evaluation on a LeRobot dataset, cameras as videos or
 * as images in the parquet. docs/datasets.md describes the metrics:
 *   for every frame t with t + H <= length (chunks that would run past the episode end are not evaluated),
 *   the policy's chunk pred[0..H-1] against gt = action[t..t+H-1]; frames whose gt chunk barely moves
 *   (max over k, j of |gt[k,j] - gt[0,j]| <= --static-threshold, raw units, default 0) are excluded;
 *   the hold-still baseline repeats state[t][:D] for absolute control modes and is zero for delta modes
 *   (the tag's control_mode contains "delta"); when the state and action features name different joints (or
 *   differ in dims), it takes per action dim the state dim of the same name where there is one, and says so. Per episode, sums of |error| per chunk step (raw and
 *   normalised units: 2(x - q01)/(q99 - q01) - 1 on the mask's dims, no clipping, raw elsewhere) are written
 *   to OUT/episodes/ep_NNNNNN.json atomically (temp + rename); a rerun skips episodes already there; the
 *   result is computed from those files in episode order, so `eval merge` of shards equals the unsharded run
 *   bit for bit. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "mact_data.h"
#include "base/err.h"
#include "base/file.h"
#include "base/parse.h"
#include "base/rng.h"
#include "io/image.h"
#include "io/normstats.h"
#include "io/so101.h"
#include "data/eval_frames.h"
#include "data/eval_internal.h"
#include "data/lerobot.h"
#include "data/video.h"

#define so101_sg mact_so101_signs
#define so101_of mact_so101_offsets

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
    mact_tag_norm_actions(tg, m, 1, D, out);
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
                const float *x = mact_eval_exec_row(r, ch, H, D, c, i);
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

/* The shard from a scheduler's environment when --shard is not given. Kubernetes Indexed Jobs set
 * JOB_COMPLETION_INDEX only: the count must come as JOB_COMPLETION_COUNT (docs/cluster.md). Slurm arrays set
 * SLURM_ARRAY_TASK_ID/COUNT/MIN/STEP: the shard is (ID - MIN) / STEP, so --array=1-4 or 0-6:2 work too.
 * Notes go to progress. */
mact_status mact_eval_shard_from_env(int *shard, int *nshard, FILE *progress, char *err, size_t el)
{
    if (!shard || !nshard) return mact_errf(err, el, MACT_ERR_INPUT, "mact_eval_shard_from_env: a NULL argument");
    const char *ix = getenv("JOB_COMPLETION_INDEX"), *cn = getenv("JOB_COMPLETION_COUNT");
    int64_t i, n, mn = 0, st = 1;
    if (ix) {
        if (!cn) return mact_errf(err, el, MACT_ERR_INPUT, "JOB_COMPLETION_INDEX is set but not JOB_COMPLETION_COUNT (Kubernetes sets the index only): set it to the Job's completions, or pass --shard I/N");
        if (mact_parse_i64(ix, 0, INT32_MAX, &i) || mact_parse_i64(cn, 1, INT32_MAX, &n) || i >= n) {
            return mact_errf(err, el, MACT_ERR_INPUT, "JOB_COMPLETION_INDEX=%s / JOB_COMPLETION_COUNT=%s is not an index below a count", ix, cn);
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
        return mact_errf(err, el, MACT_ERR_INPUT, "SLURM_ARRAY_TASK_ID=%s (COUNT=%s MIN=%s STEP=%s) does not name one of COUNT evenly spaced tasks: pass --shard I/N",
                         ix, cn ? cn : "unset", smin ? smin : "unset", sstep ? sstep : "unset");
    }
    *shard = (int)((i - mn) / st); *nshard = (int)n;
    if (n == 1 && i > 0 && progress)
        fprintf(progress, "mact eval: SLURM_ARRAY_TASK_ID=%s in a one-task array: evaluating every episode as shard 0/1 "
                        "(to rerun one shard of N, pass --shard %s/N or scontrol requeue the original task)\n", ix, ix);
    return 0;
}

/* hmap[j]: the state dim the hold-still baseline repeats for action dim j (-1: none, zero). state[t][j] while the
 * features agree (the same names, or no names and the same dims); else, when they differ, the state dim named as
 * action dim j where there is one and state[t][j] elsewhere, with note saying so (stderr, result.json), as a
 * baseline across joint spaces means little. Delta control modes use no state: no note. */
static int hold_map(const mact_ld_feature *fa, const mact_ld_feature *fs, const char *akey, const char *skey, int D,
                    FILE *progress, int *hmap, char *note, size_t nl, int delta)
{
    const int sd = fs && fs->ndim == 1 ? fs->shape[0] : 0;
    for (int j = 0; j < D; j++) hmap[j] = j < sd ? j : -1;
    note[0] = 0;
    if (delta || !fs) return 0;
    const int named = fa->n_names == D && fs->n_names == sd;
    int same = sd == D;
    for (int j = 0; same && named && j < D; j++) same = !strcmp(fa->names[j], fs->names[j]);
    if (same) return 0;
    char matched[256] = "", unmatched[256] = "";
    size_t ml = 0, ul = 0;
    for (int j = 0; j < D; j++) {
        int k = -1;
        for (int i = 0; named && i < sd && k < 0; i++) if (!strcmp(fa->names[j], fs->names[i])) k = i;
        if (k >= 0) {
            hmap[j] = k;
            if (ml < sizeof matched) ml += (size_t)snprintf(matched + ml, sizeof matched - ml, "%s%d<-%d", ml ? ", " : "", j, k);
        } else if (ul < sizeof unmatched) ul += (size_t)snprintf(unmatched + ul, sizeof unmatched - ul, "%s%d", ul ? ", " : "", j);
    }
    snprintf(note, nl, "the state '%s' (%d dims) and the action '%s' (%d dims) %s: the hold-still baseline takes, per action "
             "dim, the state dim of the same name (action<-state: %s) and state[t][j] elsewhere (%s)", skey, sd, akey, D,
             named ? "name their dims differently" : "differ in dims", ml ? matched : "none", ul ? unmatched : "none");
    if (progress) fprintf(progress, "mact eval: warning: %s\n", note);
    return 1;
}

static const char *const sched_names[] = {"linear", "linear", "zeros", "ones", "exp"}, *const guid_names[] = {"identity", "vjp"};

/* Every failure after the options are checked goes through here: the message into err, the status returned. */
#define FAIL(code, ...) (mact_errf(err, el, (code), __VA_ARGS__))

static mact_status eval_run(const mact_eval_options *o, FILE *rep, FILE *progress, mact_eval_result **result, mact_norm_stats *nsp,
                            char *err, size_t el)
{
    static const int fk_default[3] = {5, 10, 30};
    if (result) *result = NULL;
    if (!o || !o->dataset || !o->out) return FAIL(MACT_ERR_INPUT, "the dataset and the out dir are required");
    const char *dsdir = o->dataset, *out = o->out, *model = o->model, *nsfile = o->norm_stats, *tag = o->norm_tag, *eps = o->episodes;
    const char *akey = o->action_key ? o->action_key : "action", *skey = o->state_key ? o->state_key : "observation.state";
    const int pm = o->policy;
    const char *policy = pm == MACT_EVAL_MODEL ? "model" : pm == MACT_EVAL_HOLD ? "hold" : "replay";
    const char *cams[MACT_EVAL_MAX_CAMERAS];
    int ncam = 0, H = o->horizon, steps = o->steps, shard = o->shard, nshard = o->n_shards ? o->n_shards : 1;
    const int nk = o->n_first_k > 0 ? o->n_first_k : 3, *fk = o->n_first_k > 0 ? o->first_k : fk_default;
    const double thr = o->static_threshold, tol = o->tolerance_s > 0 ? o->tolerance_s : 1e-4;
    const int so101_tf = o->so101_transform;  /* the dataset is in the new SO-101 calibration, the checkpoint in the old one */
    const uint64_t seed = o->seed;
    /* replan: K rows executed per chunk, D of them the old chunk's (the inference delay); the RTC chain's options */
    const int K = o->replan, delay = o->delay, compare = !o->no_rtc_compare;
    const mact_rtc_options ro = o->rtc;
    if (pm < MACT_EVAL_MODEL || pm > MACT_EVAL_REPLAY) return FAIL(MACT_ERR_INPUT, "policy %d: model, hold or replay", pm);
    if (pm == MACT_EVAL_MODEL && !model) return FAIL(MACT_ERR_INPUT, "the model policy needs a model");
    if (!model && !nsfile) return FAIL(MACT_ERR_INPUT, "norm stats needed: a model or a norm_stats.json");
    if (o->n_cameras < 0 || o->n_cameras > MACT_EVAL_MAX_CAMERAS || (o->n_cameras && !o->cameras)) return FAIL(MACT_ERR_INPUT, "at most 8 --camera");
    for (int c = 0; c < o->n_cameras; c++) cams[ncam++] = o->cameras[c];
    if (nk > MACT_EVAL_MAX_FIRST_K || !fk) return FAIL(MACT_ERR_INPUT, "at most %d first-k windows", MACT_EVAL_MAX_FIRST_K);
    for (int q = 0; q < nk; q++) if (fk[q] < 1 || fk[q] > MAXH) return FAIL(MACT_ERR_INPUT, "first-k %d out of 1..%d", fk[q], MAXH);
    if (H < 0 || H > MAXH || K < 0 || K > MAXH || delay < 0 || delay > MAXH || steps < 0 || steps > 1000 || !(thr >= 0))
        return FAIL(MACT_ERR_INPUT, "horizon, replan, delay, steps or static threshold out of range");
    if ((unsigned)ro.schedule > MACT_RTC_EXP || (unsigned)ro.guidance > 1) return FAIL(MACT_ERR_INPUT, "unknown RTC schedule or guidance");
    const char *sched_name = sched_names[ro.schedule], *guid_name = guid_names[ro.guidance];
    if (!K && (delay || !compare || ro.execution_horizon || ro.max_guidance_weight != 0 || ro.schedule || ro.guidance))
        return FAIL(MACT_ERR_INPUT, "the RTC options need --replan K");
    if (K && pm != MACT_EVAL_MODEL) return FAIL(MACT_ERR_INPUT, "--replan needs --policy model (the chunks of hold and replay do not depend on what was executed)");
    if (K && thr != 0) return FAIL(MACT_ERR_INPUT, "--static-threshold does not apply with --replan (every replan point is evaluated)");
    if (K && delay >= K) return FAIL(MACT_ERR_INPUT, "--delay %d must be below --replan %d (a new chunk must execute at least one row of its own)", delay, K);
    if (nshard < 1 || shard < 0 || shard >= nshard) return FAIL(MACT_ERR_INPUT, "shard %d/%d out of range", shard, nshard);
    /* norm stats: the model's or the given file */
    char p[4096];
    if (model) snprintf(p, sizeof p, "%s/norm_stats.json", model); else snprintf(p, sizeof p, "%s", nsfile);
    char *nstxt = NULL, e2[2048];
    if (mact_file_read_text(p, (size_t)1 << 28, &nstxt, NULL, e2, sizeof e2)) nstxt = NULL;
#define ns (*nsp)
    if (!nstxt || mact_norm_stats_parse(nstxt, &ns, e2, sizeof e2)) { free(nstxt); return FAIL(MACT_ERR_FORMAT, "%s: %s", p, nstxt ? e2 : "cannot read"); }
    const uint64_t ns_hash = mact_fnv1a(MACT_FNV_BASIS, nstxt, strlen(nstxt));
    free(nstxt);
    const mact_norm_tag *tg = mact_norm_find_tag(&ns, tag, err, el);
    if (!tg) return MACT_ERR_MODEL;
    /* the action stats' q01/q99 for normalised units (read again: the parsed table keeps the mode's pair) */
    if (!H) H = tg->action_horizon > 0 ? tg->action_horizon : 10;
    if (H < 1 || H > MAXH) return FAIL(MACT_ERR_INPUT, "horizon %d out of range", H);
    if (K && K >= H) return FAIL(MACT_ERR_INPUT, "--replan %d must be below the horizon %d (the old chunk keeps no unexecuted rows to guide with)", K, H);
    if (K && K + delay > H) {
        return FAIL(MACT_ERR_INPUT, "--replan %d + --delay %d exceeds the horizon %d (the old chunk has no rows for the frames of the delay)", K, delay, H);
    }
    if (K && ro.execution_horizon > H) return FAIL(MACT_ERR_INPUT, "--execution-horizon %d exceeds the horizon %d", ro.execution_horizon, H);
    int delta = strstr(tg->control_mode, "delta") != NULL;
    mact_ld *d;
    int lrc = mact_ld_open(dsdir, &d, err, el);
    if (lrc) return lrc < 0 && lrc != MACT_ERR_INPUT ? (mact_status)lrc : MACT_ERR_FORMAT;
    const mact_ld_feature *fa = mact_ld_find_feature(d, akey);
    int D = fa && fa->ndim == 1 ? fa->shape[0] : 0;
    if (!D || D != tg->action.dim) { mact_ld_close(d); return FAIL(MACT_ERR_FORMAT, "dataset '%s' has %d dims, the tag's action stats %d", akey, D, tg->action.dim); }
    /* cameras in the model's order: --camera as given, else the tag's camera_keys (each must be a camera of the
     * dataset), else the dataset's cameras in info.json order (tags such as SO100's name none) */
    if (!ncam && tg->n_cameras > 0) {
        if (tg->n_cameras > EVF_MAX_CAMS) { mact_ld_close(d); return FAIL(MACT_ERR_FORMAT, "tag %s names %d cameras, at most %d are evaluated", tg->name, tg->n_cameras, EVF_MAX_CAMS); }
        for (int c = 0; c < tg->n_cameras; c++) {
            const mact_ld_feature *cf = mact_ld_find_feature(d, tg->camera_keys[c]);
            if (!cf || (strcmp(cf->dtype, "image") && strcmp(cf->dtype, "video"))) {
                char list[2048] = "";
                size_t ll = 0;
                for (int i = 0; i < mact_ld_num_features(d) && ll < sizeof list; i++)
                    if (!strcmp(mact_ld_feature_at(d, i)->dtype, "image") || !strcmp(mact_ld_feature_at(d, i)->dtype, "video"))
                        ll += (size_t)snprintf(list + ll, sizeof list - ll, " %s", mact_ld_feature_at(d, i)->key);
                FAIL(MACT_ERR_FORMAT, "the tag %s's camera '%s' is not a camera of %s; its cameras:%s (map them with --camera KEY, in the tag's order)",
                     tg->name, tg->camera_keys[c], dsdir, list);
                mact_ld_close(d);
                return MACT_ERR_FORMAT;
            }
            cams[ncam++] = tg->camera_keys[c];
        }
    }
    if (!ncam)
        for (int i = 0; i < mact_ld_num_features(d) && ncam < EVF_MAX_CAMS; i++)
            if (!strcmp(mact_ld_feature_at(d, i)->dtype, "image") || !strcmp(mact_ld_feature_at(d, i)->dtype, "video")) cams[ncam++] = mact_ld_feature_at(d, i)->key;
    int grip = -1;
    for (int j = 0; j < fa->n_names && j < D; j++) if (strstr(fa->names[j], "gripper")) grip = j;
    /* the hold-still baseline's state dim per action dim: state[t][j], unless the state and action features name
     * their dims differently (or differ in dims): then the state dim of the same name where there is one */
    int *hmap = malloc(sizeof(int) * (size_t)D);
    char hold_note[512] = "";
    if (!hmap) { mact_ld_close(d); return FAIL(MACT_ERR_NOMEM, "out of memory"); }
    if (hold_map(fa, mact_ld_find_feature(d, skey), akey, skey, D, progress, hmap, hold_note, sizeof hold_note, delta)) {}
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
    if (!sel || mact_file_mkdirs(out, NULL, 0) || (mkdir(p, 0777) && errno != EEXIST)) { free(sel); mact_ld_close(d); return FAIL(sel ? MACT_ERR_IO : MACT_ERR_NOMEM, sel ? "cannot create %s" : "out of memory", p); }
    /* the settings an episode's sums depend on (not the paths: shards may mount the data elsewhere); the norm stats
     * and the model's config.json by content. Two checkpoints of one architecture sharing their norm stats are not
     * told apart (their weights are not hashed): docs/cluster.md says to use a fresh --out per checkpoint */
    char cfg_txt[4096], cfg[17];
    uint64_t model_hash = 0;  /* the model policy: its config.json too (a pruned student keeps the teacher's norm stats) */
    if (pm == 0) {
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/config.json", model);
        char *ct = NULL;
        if (mact_file_read_text(cp, (size_t)1 << 28, &ct, NULL, e2, sizeof e2)) ct = NULL;
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
                 (double)(ro.max_guidance_weight > 0 ? ro.max_guidance_weight : MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT), guid_name);
        if (cl > 0 && cl < (int)sizeof cfg_txt)
            cl += snprintf(cfg_txt + cl, sizeof cfg_txt - (size_t)cl, " replan=%d delay=%d compare=%d rtc=%s", K, delay, compare, rtc_txt);
    }
    snprintf(cfg, sizeof cfg, "%016llx", (unsigned long long)mact_fnv1a(MACT_FNV_BASIS, cfg_txt, strlen(cfg_txt)));
    /* refuse up front (before loading the model) when OUT already holds episodes of other settings: nothing new
     * is written into it then */
    {
        ep_sums *old_eps = NULL;
        int n_old = 0;
        const char *od[1] = {out};
        int erc = mact_eval_load_eps(od, 1, &old_eps, &n_old, err, el);
        if (erc) { free(sel); mact_ld_close(d); return (mact_status)erc; }
        for (int i = 0; i < n_old; i++)
            if (strcmp(old_eps[i].config, cfg)) {
                FAIL(MACT_ERR_FORMAT, "%s/episodes/ep_%06lld.json was computed with other settings (config %s, now %s): policy, seed, "
                        "steps, horizon, thresholds, cameras, keys or norm stats differ; use a fresh --out", out,
                        (long long)old_eps[i].ep, old_eps[i].config[0] ? old_eps[i].config : "none", cfg);
                mact_eval_eps_free(old_eps, n_old); free(sel); mact_ld_close(d);
                return MACT_ERR_FORMAT;
            }
        mact_eval_eps_free(old_eps, n_old);
    }
    mact_model *m = NULL;
    mact_session *s = NULL;
    int mrc = 0;
    if (pm == 0 && ((mrc = mact_model_load(model, NULL, &m, err, el)) || (mrc = mact_session_new(m, NULL, &s, err, el)))) {
        free(sel); mact_model_free(m); mact_ld_close(d);
        return mrc == MACT_ERR_INPUT ? MACT_ERR_MODEL : (mact_status)mrc;  /* INPUT: the options' status only */
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
    if (K && (!rp_raw[0] || !rp_raw[1])) rc = FAIL(MACT_ERR_NOMEM, "out of memory");
    evf *fr_src = NULL;
    if (!rc && !pred) rc = FAIL(MACT_ERR_NOMEM, "out of memory");
    if (!rc && evf_start(&fo, &fr_src, e2, sizeof e2)) rc = FAIL(MACT_ERR_FORMAT, "%s", e2);
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
        case EVF_ERROR: rc = FAIL(MACT_ERR_FORMAT, "%s", it.err); break;
        case EVF_DONE: fin = 1; break;
        case EVF_SKIPPED: {  /* finished by an earlier run: only if with these settings */
            char fp[4200];
            ep_sums prev;
            snprintf(fp, sizeof fp, "%s/ep_%06lld.json", p, (long long)mact_ld_episode_at(d, sel[it.q])->index);
            char *txt = NULL;
            memset(&prev, 0, sizeof prev);
            if (mact_file_read_text(fp, (size_t)1 << 28, &txt, NULL, e2, sizeof e2) || mact_eval_ep_parse(txt, &prev))
                rc = FAIL(MACT_ERR_FORMAT, "%s: not an episode result (remove it to recompute)", fp);
            else if (strcmp(prev.config, cfg)) {
                rc = FAIL(MACT_ERR_FORMAT, "%s was computed with other settings (config %s, now %s): policy, seed, steps, horizon, "
                          "thresholds, cameras, keys or norm stats differ; use a fresh --out", fp, prev.config[0] ? prev.config : "none", cfg);
            }
            free(txt);
            mact_eval_ep_free(&prev);
            done++;
            break;
        }
        case EVF_EPISODE:
            q = it.q; e = mact_ld_episode_at(d, sel[q]);
            act = it.act; st = it.st; dsd = it.dsd;
            mact_eval_ep_free(&S);
            memset(&S, 0, sizeof S);
            memcpy(S.config, cfg, sizeof S.config);
            snprintf(S.hold_note, sizeof S.hold_note, "%s", hold_note);
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
                    mact_predict_output po = {.actions = pred, .actions_cap = 256 * 64};
                    struct timespec tp0, tp1;
                    clock_gettime(CLOCK_MONOTONIC, &tp0);
                    int prc = mact_predict(s, &in, &po);
                    clock_gettime(CLOCK_MONOTONIC, &tp1);
                    t_predict += (double)(tp1.tv_sec - tp0.tv_sec) + 1e-9 * (double)(tp1.tv_nsec - tp0.tv_nsec);
                    n_predict++;
                    if (prc) rc = FAIL(prc == MACT_ERR_INPUT ? MACT_ERR_MODEL : prc, "episode %lld frame %lld%s: %s", (long long)e->index, (long long)t, K ? (ch ? " (RTC chain)" : " (plain chain)") : "", mact_session_error(s));
                    if (!rc && ((int)po.n_steps != H || (int)po.action_dim != D)) rc = FAIL(MACT_ERR_MODEL, "the model returned %zux%zu actions, want %dx%d", po.n_steps, po.action_dim, H, D);
                    if (!rc && K) memcpy(rp_raw[ch], pred, sizeof(float) * (size_t)H * D);
                }
                evf_item_free(&it);
                if (rc) break;
                if (K) {  /* the chains' chunks in the dataset's units; the per-chunk metrics below take the first chain's */
                    S.rp.n_chunks = c + 1;
                    for (int ch = 0; ch < 2 && !rc; ch++) {
                        if (!(chains >> ch & 1)) continue;
                        float *g = realloc(S.rp.chunk[ch], sizeof(float) * (size_t)(c + 1) * H * D);
                        if (!g) { rc = FAIL(MACT_ERR_NOMEM, "out of memory"); break; }
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
                    double hv = delta || hmap[j] < 0 || hmap[j] >= dsd ? 0 : st[t * dsd + hmap[j]];
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
            char *txt = mact_eval_ep_json(&S);
            if (!txt || mact_eval_write_atomic(fp, txt, e2, sizeof e2)) rc = FAIL(MACT_ERR_IO, "cannot write %s", fp);
            free(txt);
            mact_eval_ep_free(&S);
            done++;
            clock_gettime(CLOCK_MONOTONIC, &ts1);
            double elapsed = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
            int left = 0;
            for (int r = q + 1; r < ns_sel; r++) left += r % nshard == shard;
            double fps = elapsed > 0 ? frames_run / elapsed : 0, per_ep = done ? elapsed / done : 0;
            if (progress) fprintf(progress, "\rmact eval: shard %d/%d: %d episodes done, %d left, %.0f frames, %.3g frames/s, ETA %.0f s   ", shard, nshard,
                    done, left, frames_run, fps, per_ep * left);
            break;
        }
        }
        if (rc) evf_item_free(&it);
    }
    evf_stop(fr_src);
    free(act); free(st);
    mact_eval_ep_free(&S);
    free(rp_raw[0]); free(rp_raw[1]);
    if (progress) fprintf(progress, "\n");
    if (!rc && frames_run > 0 && progress) {  /* the evaluation's rate against the inference's own: what the frame reader costs */
        clock_gettime(CLOCK_MONOTONIC, &ts1);
        double elapsed = (double)(ts1.tv_sec - ts0.tv_sec) + 1e-9 * (double)(ts1.tv_nsec - ts0.tv_nsec);
        if (pm == 0 && K)
            fprintf(progress, "mact eval: %.0f replan points, %.0f inferences in %.2f s: %.1f ms per inference, %.1f%% of the wall time\n",
                    frames_run, n_predict, elapsed, 1e3 * t_predict / n_predict, 100 * t_predict / elapsed);
        else if (pm == 0)
            fprintf(progress, "mact eval: %.0f frames in %.2f s: %.4g frames/s; inference %.1f ms per frame (%.4g frames/s), %.1f%% of the wall time\n",
                    frames_run, elapsed, frames_run / elapsed, 1e3 * t_predict / frames_run, frames_run / t_predict, 100 * t_predict / elapsed);
        else fprintf(progress, "mact eval: %.0f frames in %.2f s\n", frames_run, elapsed);
    }
    free(pred); free(sel); free(hmap);
    mact_session_free(s);
    mact_model_free(m);
    mact_ld_close(d);
    if (rc) return (mact_status)rc;
    ep_sums *all;
    int n_all;
    const char *dl[1] = {out};
    if ((rc = mact_eval_load_eps(dl, 1, &all, &n_all, err, el))) return (mact_status)rc;
    rc = mact_eval_write_result(out, all, n_all, fk, nk, policy, ns_sel, rep, result, err, el);
    mact_eval_eps_free(all, n_all);
    return (mact_status)rc;
}

#undef ns

mact_status mact_eval_run(const mact_eval_options *o, FILE *rep, FILE *progress, mact_eval_result **result, char *err, size_t el)
{
    mact_norm_stats *stats = calloc(1, sizeof *stats);  /* large: on the heap */
    if (!stats) return FAIL(MACT_ERR_NOMEM, "out of memory");
    mact_video_quiet_logs();  /* FFmpeg's decoder banners would drown the progress line */
    mact_status rc = eval_run(o, rep, progress, result, stats, err, el);
    free(stats);
    return rc;
}
