/* mact_eval_run (include/mact_data.h; `mact eval`): the driver of the open-loop evaluation. It takes a policy (a
 * session, or any function with mact_predict's contract) and the norm tag it runs with; the data side is elsewhere:
 * the frames (data/eval_frames.c decodes ahead), the metrics (data/eval_metrics.c), the episode files and the
 * result (data/eval_result.c). docs/datasets.md describes the metrics:
 *   for every frame t with t + H <= length (chunks that would run past the episode end are not evaluated),
 *   the policy's chunk pred[0..H-1] against gt = action[t..t+H-1]; frames whose gt chunk barely moves
 *   (max over k, j of |gt[k,j] - gt[0,j]| <= static_threshold, raw units, default 0) are excluded; the
 *   hold-still baseline repeats state[t][:D] for absolute control modes and is zero for delta modes. Per episode,
 *   sums of |error| per chunk step are written to OUT/episodes/ep_NNNNNN.json atomically (temp + rename); a rerun
 *   skips episodes already there; the result is computed from those files in episode order, so `eval merge` of
 *   shards equals the unsharded run bit for bit. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "mact_data.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/file.h"
#include "base/rng.h"
#include "data/eval_frames.h"
#include "data/eval_internal.h"
#include "data/lerobot.h"
#include "data/video.h"

#define FAIL(code, ...) (mact_errf(err, el, (code), __VA_ARGS__))


mact_status mact_eval_session_predict(void *session, const mact_predict_input *in, mact_predict_output *out, char *err,
                                      size_t el)
{
    mact_status rc = mact_predict(session, in, out);
    if (rc) mact_errf(err, el, rc, "%s", mact_session_error(session));
    return rc;
}

/* The options on their own (before anything is opened): 0, or MACT_ERR_INPUT with the reason. */
static int check_options(const mact_eval_options *o, char *err, size_t el)
{
    if (!o || !o->dataset || !o->out) return FAIL(MACT_ERR_INPUT, "the dataset and the out dir are required");
    if ((unsigned)o->policy > MACT_EVAL_REPLAY) return FAIL(MACT_ERR_INPUT, "policy %d: model, hold or replay", o->policy);
    if (o->policy == MACT_EVAL_MODEL && !o->predict) return FAIL(MACT_ERR_INPUT, "the model policy needs a predict function");
    if (!o->tag) return FAIL(MACT_ERR_INPUT, "a norm tag is required (the model's, or a norm_stats.json's)");
    if (o->n_cameras < 0 || o->n_cameras > MACT_EVAL_MAX_CAMERAS || (o->n_cameras && !o->cameras))
        return FAIL(MACT_ERR_INPUT, "at most %d cameras", MACT_EVAL_MAX_CAMERAS);
    if (o->n_first_k < 0 || o->n_first_k > MACT_EVAL_MAX_FIRST_K || (o->n_first_k && !o->first_k))
        return FAIL(MACT_ERR_INPUT, "at most %d first-k windows", MACT_EVAL_MAX_FIRST_K);
    for (int q = 0; q < o->n_first_k; q++)
        if (o->first_k[q] < 1 || o->first_k[q] > MAXH) return FAIL(MACT_ERR_INPUT, "first-k %d out of 1..%d", o->first_k[q], MAXH);
    const int K = o->replan, delay = o->delay;
    if (o->horizon < 0 || o->horizon > MAXH || K < 0 || K > MAXH || delay < 0 || delay > MAXH || o->steps < 0 ||
        o->steps > 1000 || !(o->static_threshold >= 0))
        return FAIL(MACT_ERR_INPUT, "horizon, replan, delay, steps or static threshold out of range");
    const mact_rtc_options *r = &o->rtc;
    if ((unsigned)r->schedule > MACT_RTC_EXP || (unsigned)r->guidance > MACT_RTC_VJP)
        return FAIL(MACT_ERR_INPUT, "unknown RTC schedule or guidance");
    if (!K && (delay || o->no_rtc_compare || r->execution_horizon || r->max_guidance_weight != 0 || r->schedule || r->guidance))
        return FAIL(MACT_ERR_INPUT, "the RTC options need --replan K");
    if (K && o->policy != MACT_EVAL_MODEL)
        return FAIL(MACT_ERR_INPUT, "--replan needs --policy model (the chunks of hold and replay do not depend on what was executed)");
    if (K && o->static_threshold != 0)
        return FAIL(MACT_ERR_INPUT, "--static-threshold does not apply with --replan (every replan point is evaluated)");
    if (K && delay >= K)
        return FAIL(MACT_ERR_INPUT, "--delay %d must be below --replan %d (a new chunk must execute at least one row of its own)", delay, K);
    const int nshard = o->n_shards ? o->n_shards : 1;
    if (nshard < 1 || o->shard < 0 || o->shard >= nshard) return FAIL(MACT_ERR_INPUT, "shard %d/%d out of range", o->shard, nshard);
    if (o->n_joints < 0 || o->n_joints > MACT_EVAL_MAX_JOINTS || (o->n_joints && (!o->joint_signs || !o->joint_offsets)))
        return FAIL(MACT_ERR_INPUT, "a joint frame of 1..%d joints needs its signs and offsets", MACT_EVAL_MAX_JOINTS);
    for (int j = 0; j < o->n_joints; j++)
        if (!isfinite(o->joint_signs[j]) || !isfinite(o->joint_offsets[j]) || o->joint_signs[j] == 0)
            return FAIL(MACT_ERR_INPUT, "joint %d: signs must be finite and non-zero, offsets finite", j);
    return 0;
}

/* The tag: its statistics and fields, the horizon, and the checks that need them. */
static int resolve_tag(ev_run *R, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    mact_tag_get_info(o->tag, &R->ti);
    if (R->ti.action_dim < 1 || R->ti.action_dim > MACT_EVAL_MAX_JOINTS)
        return FAIL(MACT_ERR_INPUT, "norm tag %s has %d action dims (1..%d)", R->ti.name, R->ti.action_dim, MACT_EVAL_MAX_JOINTS);
    mact_tag_action_stats(o->tag, R->lo, R->hi, R->mask);
    if (o->n_joints && R->ti.joint_frame)
        return FAIL(MACT_ERR_INPUT, "norm tag %s applies a joint frame of its own (%d joints, from the checkpoint's processors): "
                    "the policy already maps the dataset's states and its actions; a second joint frame would apply it twice",
                    R->ti.name, R->ti.joint_frame);
    const int K = o->replan, delay = o->delay;
    R->H = o->horizon ? o->horizon : R->ti.action_horizon > 0 ? R->ti.action_horizon : 10;
    if (R->H < 1 || R->H > MAXH) return FAIL(MACT_ERR_INPUT, "horizon %d out of range", R->H);
    if (K && K >= R->H) return FAIL(MACT_ERR_INPUT, "--replan %d must be below the horizon %d (the old chunk keeps no unexecuted rows to guide with)", K, R->H);
    if (K && K + delay > R->H)
        return FAIL(MACT_ERR_INPUT, "--replan %d + --delay %d exceeds the horizon %d (the old chunk has no rows for the frames of the delay)", K, delay, R->H);
    if (K && o->rtc.execution_horizon > R->H) return FAIL(MACT_ERR_INPUT, "--execution-horizon %d exceeds the horizon %d", o->rtc.execution_horizon, R->H);
    R->delta = strstr(R->ti.control_mode, "delta") != NULL;
    return 0;
}

static int is_camera(const mact_ld_feature *f) { return f && (!strcmp(f->dtype, "image") || !strcmp(f->dtype, "video")); }

/* cameras in the policy's order: as given, else the tag's camera_keys (each must be a camera of the dataset), else
 * the dataset's cameras in info.json order (tags such as SO100's name none) */
static int resolve_cameras(ev_run *R, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    for (int c = 0; c < o->n_cameras; c++) R->cams[R->ncam++] = o->cameras[c];
    if (!R->ncam && R->ti.n_cameras > 0) {
        if (R->ti.n_cameras > EVF_MAX_CAMS)
            return FAIL(MACT_ERR_FORMAT, "tag %s names %d cameras, at most %d are evaluated", R->ti.name, R->ti.n_cameras, EVF_MAX_CAMS);
        for (int c = 0; c < R->ti.n_cameras; c++) {
            if (is_camera(mact_ld_find_feature(R->d, R->ti.camera_keys[c]))) { R->cams[R->ncam++] = R->ti.camera_keys[c]; continue; }
            char list[2048] = "";
            size_t ll = 0;
            for (int i = 0; i < mact_ld_num_features(R->d) && ll < sizeof list; i++)
                if (is_camera(mact_ld_feature_at(R->d, i))) ll += (size_t)snprintf(list + ll, sizeof list - ll, " %s", mact_ld_feature_at(R->d, i)->key);
            return FAIL(MACT_ERR_FORMAT, "the tag %s's camera '%s' is not a camera of %s; its cameras:%s (map them with --camera KEY, "
                        "in the tag's order)", R->ti.name, R->ti.camera_keys[c], o->dataset, ll ? list : " none: the model policy "
                        "needs the frames the checkpoint was trained on; record the dataset with its cameras (mact "
                        "synth-dataset writes two unless --no-cameras)");
        }
    }
    for (int i = 0; !R->ncam && i < mact_ld_num_features(R->d) && R->ncam < EVF_MAX_CAMS; i++)
        if (is_camera(mact_ld_feature_at(R->d, i))) R->cams[R->ncam++] = mact_ld_feature_at(R->d, i)->key;
    if (!R->ncam && o->policy == MACT_EVAL_MODEL)
        return FAIL(MACT_ERR_FORMAT, "the dataset %s has no camera (image or video feature): the model policy needs frames; "
                    "record it with its cameras (mact synth-dataset writes two unless --no-cameras), or evaluate "
                    "--policy hold / replay", o->dataset);
    return 0;
}

/* the dataset: its action width against the tag's, the cameras, the gripper dim, the hold baseline's state dims,
 * and the shard's episodes */
static int open_dataset(ev_run *R, FILE *progress, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    int lrc = mact_ld_open(o->dataset, &R->d, err, el);
    if (lrc) return lrc < 0 && lrc != MACT_ERR_INPUT ? lrc : MACT_ERR_FORMAT;
    const mact_ld_feature *fa = mact_ld_find_feature(R->d, R->akey);
    R->D = fa && fa->ndim == 1 ? fa->shape[0] : 0;
    if (!R->D || R->D != R->ti.action_dim)
        return FAIL(MACT_ERR_FORMAT, "dataset '%s' has %d dims, the tag's action stats %d", R->akey, R->D, R->ti.action_dim);
    int rc = resolve_cameras(R, err, el);
    if (rc) return rc;
    R->grip = -1;
    for (int j = 0; j < fa->n_names && j < R->D; j++) if (strstr(fa->names[j], "gripper")) R->grip = j;
    if (!(R->hmap = malloc(sizeof(int) * (size_t)R->D))) return FAIL(MACT_ERR_NOMEM, "out of memory");
    mact_eval_hold_map(fa, mact_ld_find_feature(R->d, R->skey), R->akey, R->skey, R->D, progress, R->hmap, R->hold_note,
                       sizeof R->hold_note, R->delta);
    const int NE = mact_ld_num_episodes(R->d);
    if (!(R->sel = calloc((size_t)NE + 1, sizeof *R->sel))) return FAIL(MACT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < NE; i++)
        if (mact_eval_episode_selected(o->episodes, mact_ld_episode_at(R->d, i)->index)) R->sel[R->n_sel++] = i;
    return 0;
}

/* the settings an episode's sums depend on (not the paths: shards may mount the data elsewhere), the tag and the
 * policy by what identifies them */
static void fingerprint(ev_run *R)
{
    const mact_eval_options *o = R->o;
    char cfg_txt[4096], frame[1024] = "";
    size_t fl = 0;
    for (int j = 0; j < o->n_joints && fl < sizeof frame; j++)
        fl += (size_t)snprintf(frame + fl, sizeof frame - fl, "%s%.9g:%.9g", j ? "," : "", (double)o->joint_signs[j], (double)o->joint_offsets[j]);
    int cl = snprintf(cfg_txt, sizeof cfg_txt, "policy=%s tag=%s seed=%llu steps=%d H=%d thr=%.17g tol=%.17g frame=%s akey=%s "
                      "skey=%s ns=%016llx model=%s cams=", R->policy_name, R->ti.name, (unsigned long long)o->seed, o->steps,
                      R->H, o->static_threshold, R->tol, frame, R->akey, R->skey, (unsigned long long)mact_tag_fingerprint(o->tag),
                      o->policy_id ? o->policy_id : "");
    for (int c = 0; c < R->ncam && cl > 0 && cl < (int)sizeof cfg_txt; c++) cl += snprintf(cfg_txt + cl, sizeof cfg_txt - (size_t)cl, "%s,", R->cams[c]);
    if (R->K) {  /* only when given: the fingerprints of runs without --replan stay what they were */
        /* the settings in effect: the library's defaults for 0 (E 10, capped at the H - K rows given; B 10) */
        const mact_rtc_options *ro = &o->rtc;
        int eff_e = ro->execution_horizon ? ro->execution_horizon : MACT_RTC_DEFAULT_EXECUTION_HORIZON;
        if (eff_e > R->H - R->K) eff_e = R->H - R->K;
        /* the schedule the default (0) stands for is the checkpoint's: written as "default" */
        snprintf(R->rtc_txt, sizeof R->rtc_txt, "%s,E=%d,B=%.9g,%s", mact_rtc_schedule_str(ro->schedule), eff_e,
                 (double)(ro->max_guidance_weight > 0 ? ro->max_guidance_weight : MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT),
                 mact_rtc_guidance_str(ro->guidance));
        if (cl > 0 && cl < (int)sizeof cfg_txt)
            snprintf(cfg_txt + cl, sizeof cfg_txt - (size_t)cl, " replan=%d delay=%d compare=%d rtc=%s", R->K, R->delay,
                     !o->no_rtc_compare, R->rtc_txt);
    }
    snprintf(R->cfg, sizeof R->cfg, "%016llx", (unsigned long long)mact_fnv1a(MACT_FNV_BASIS, cfg_txt, strlen(cfg_txt)));
}

static int other_settings(const char *file, const char *was, const char *now, char *err, size_t el)
{
    return FAIL(MACT_ERR_FORMAT, "%s was computed with other settings (config %s, now %s): policy, seed, steps, horizon, thresholds, "
                "cameras, keys or norm stats differ; use a fresh --out", file, was[0] ? was : "none", now);
}

/* refuse up front when OUT already holds episodes of other settings: nothing new is written into it then */
static int refuse_other_settings(const ev_run *R, char *err, size_t el)
{
    ep_sums *old = NULL;
    int n_old = 0, rc;
    const char *od[1] = {R->o->out};
    if ((rc = mact_eval_load_eps(od, 1, &old, &n_old, err, el))) return rc;
    for (int i = 0; i < n_old && !rc; i++)
        if (strcmp(old[i].config, R->cfg)) {
            char f[4300];
            snprintf(f, sizeof f, "%s/ep_%06lld.json", R->epdir, (long long)old[i].ep);
            rc = other_settings(f, old[i].config, R->cfg, err, el);
        }
    mact_eval_eps_free(old, n_old);
    return rc;
}

/* an episode an earlier run finished: resumed only if with these settings */
static int check_skipped(const ev_run *R, int q, char *err, size_t el)
{
    char fp[4300], e2[2048], *txt = NULL;
    ep_sums prev;
    int rc = 0;
    snprintf(fp, sizeof fp, "%s/ep_%06lld.json", R->epdir, (long long)mact_ld_episode_at(R->d, R->sel[q])->index);
    memset(&prev, 0, sizeof prev);
    if (mact_file_read_text(fp, (size_t)1 << 28, &txt, NULL, e2, sizeof e2) || mact_eval_ep_parse(txt, &prev))
        rc = FAIL(MACT_ERR_FORMAT, "%s: not an episode result (remove it to recompute)", fp);
    else if (strcmp(prev.config, R->cfg)) rc = other_settings(fp, prev.config, R->cfg, err, el);
    free(txt);
    mact_eval_ep_free(&prev);
    return rc;
}

/* the joint frame of the options: dataset units -> the policy's (state), and back (actions [n x D]) */
static void frame_state(const mact_eval_options *o, const double *st, int dsd, float *sv)
{
    for (int j = 0; j < dsd && j < MACT_EVAL_MAX_JOINTS; j++)
        sv[j] = (float)(j < o->n_joints ? o->joint_signs[j] * st[j] + o->joint_offsets[j] : st[j]);
}

void mact_eval_frame_back(const mact_eval_options *o, float *x, int n, int D)
{
    for (int k = 0; k < n; k++)
        for (int j = 0; j < D && j < o->n_joints; j++) x[k * D + j] = (float)(o->joint_signs[j] * (x[k * D + j] - o->joint_offsets[j]));
}

/* one predict call of chain ch at frame t (chain 1 guided by its previous chunk's rows from the replan point on,
 * in the robot's units as returned): the chunk into R->pred */
static int predict_chain(ev_run *R, mact_predict_input *in, int ch, int c, const evf_item *it, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    const int H = R->H, D = R->D;
    if (R->K && ch == 1 && c > 0) {
        in->rtc = o->rtc;
        in->rtc.prev_actions = R->rp_raw[1] + (size_t)R->K * D;
        in->rtc.n_prev = (size_t)(H - R->K);
        in->rtc.prev_dim = (size_t)D;
        in->rtc.inference_delay = R->delay;
    } else in->rtc = (mact_rtc_options){0};
    mact_predict_output po = {.actions = R->pred, .actions_cap = (size_t)MAXH * MACT_EVAL_MAX_JOINTS};
    char e2[2048];
    const double t0 = mact_clock_s();
    mact_status prc = o->predict(o->predict_user, in, &po, e2, sizeof e2);
    R->t_predict += mact_clock_s() - t0;
    R->n_predict++;
    if (prc)
        return FAIL(prc == MACT_ERR_INPUT ? MACT_ERR_MODEL : prc, "episode %lld frame %lld%s: %s", (long long)R->e->index,
                    (long long)it->t, R->K ? (ch ? " (RTC chain)" : " (plain chain)") : "", e2);
    if ((int)po.n_steps != H || (int)po.action_dim != D)
        return FAIL(MACT_ERR_MODEL, "the policy returned %zux%zu actions, want %dx%d", po.n_steps, po.action_dim, H, D);
    if (R->K) memcpy(R->rp_raw[ch], R->pred, sizeof(float) * (size_t)H * D);
    return 0;
}

/* the policy's chunk at frame it->t into R->pred, in the dataset's units; with replan, every chain's, the chunks kept
 * for the episode's replan measures */
static int predict_frame(ev_run *R, const evf_item *it, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    const int H = R->H, D = R->D;
    mact_frame fr[EVF_MAX_CAMS];
    for (int c = 0; c < R->ncam; c++) fr[c] = (mact_frame){it->im[c].data, (int)it->im[c].height, (int)it->im[c].width};
    float sv[MACT_EVAL_MAX_JOINTS];
    frame_state(o, R->st + it->t * R->dsd, R->dsd, sv);
    mact_predict_input in = {.frames = fr, .n_frames = (size_t)R->ncam, .task = R->e->task, .state = sv,
                             .state_dim = (size_t)R->dsd,
                             .options = {.norm_tag = R->ti.name, .num_steps = o->steps, .n_action_steps = H,
                                         .seed = o->seed + (uint64_t)it->t}};
    const int c = R->K ? (int)(it->t / R->K) : 0;
    int rc = 0;
    for (int ch = R->K ? 0 : 1; ch < 2 && !rc; ch++) {
        if (R->K && !(R->chains >> ch & 1)) continue;
        if (R->K && ch == 1 && c == 0 && (R->chains & 1)) {  /* no old chunk: chain 0's call */
            memcpy(R->rp_raw[1], R->rp_raw[0], sizeof(float) * (size_t)H * D);
            continue;
        }
        rc = predict_chain(R, &in, ch, c, it, err, el);
    }
    if (rc || !R->K) {
        if (!rc) mact_eval_frame_back(o, R->pred, H, D);
        return rc;
    }
    /* the chains' chunks in the dataset's units; the per-chunk metrics take the first chain's */
    R->S.rp.n_chunks = c + 1;
    for (int ch = 0; ch < 2; ch++) {
        if (!(R->chains >> ch & 1)) continue;
        float *g = realloc(R->S.rp.chunk[ch], sizeof(float) * (size_t)(c + 1) * H * D);
        if (!g) return FAIL(MACT_ERR_NOMEM, "out of memory");
        R->S.rp.chunk[ch] = g;
        memcpy(g + (size_t)c * H * D, R->rp_raw[ch], sizeof(float) * (size_t)H * D);
        mact_eval_frame_back(o, g + (size_t)c * H * D, H, D);
    }
    memcpy(R->pred, R->rp_raw[R->chains & 1 ? 0 : 1], sizeof(float) * (size_t)H * D);
    mact_eval_frame_back(o, R->pred, H, D);
    return 0;
}

static void episode_start(ev_run *R, const evf_item *it)
{
    R->q = it->q;
    R->e = mact_ld_episode_at(R->d, R->sel[R->q]);
    R->act = it->act;
    R->st = it->st;
    R->dsd = it->dsd;
    mact_eval_ep_free(&R->S);
    memset(&R->S, 0, sizeof R->S);
    memcpy(R->S.config, R->cfg, sizeof R->S.config);
    snprintf(R->S.hold_note, sizeof R->S.hold_note, "%s", R->hold_note);
    R->S.ep = R->e->index;
    R->S.H = R->H;
    R->S.D = R->D;
    if (R->K) {
        R->S.rp.K = R->K;
        R->S.rp.delay = R->delay;
        R->S.rp.chains = R->chains;
        snprintf(R->S.rp.rtc, sizeof R->S.rp.rtc, "%s", R->rtc_txt);
    }
}

/* the episode's file, and the progress line */
static int episode_end(ev_run *R, FILE *progress, char *err, size_t el)
{
    if (R->K) mact_eval_replan_measure(&R->S.rp, R->o, R->lo, R->hi, R->mask, R->act, R->H, R->D);
    free(R->act);
    free(R->st);
    R->act = R->st = NULL;
    char fp[4300], e2[2048];
    snprintf(fp, sizeof fp, "%s/ep_%06lld.json", R->epdir, (long long)R->e->index);
    char *txt = mact_eval_ep_json(&R->S);
    int rc = !txt || mact_eval_write_atomic(fp, txt, e2, sizeof e2) ? FAIL(MACT_ERR_IO, "cannot write %s", fp) : 0;
    free(txt);
    mact_eval_ep_free(&R->S);
    R->done++;
    const int nshard = R->o->n_shards ? R->o->n_shards : 1;
    int left = 0;
    for (int r = R->q + 1; r < R->n_sel; r++) left += r % nshard == R->o->shard;
    const double elapsed = mact_clock_s() - R->t0, per_ep = R->done ? elapsed / R->done : 0;
    if (progress)
        fprintf(progress, "\rmact eval: shard %d/%d: %d episodes done, %d left, %.0f frames, %.3g frames/s, ETA %.0f s   ",
                R->o->shard, nshard, R->done, left, R->frames_run, elapsed > 0 ? R->frames_run / elapsed : 0, per_ep * left);
    return rc;
}

/* every item of the frame producer, in order */
static int run_items(ev_run *R, evf *src, FILE *progress, char *err, size_t el)
{
    int rc = 0;
    for (int fin = 0; !rc && !fin;) {
        evf_item it;
        evf_next(src, &it);
        switch (it.kind) {
        case EVF_ERROR: rc = FAIL(MACT_ERR_FORMAT, "%s", it.err); break;
        case EVF_DONE: fin = 1; break;
        case EVF_SKIPPED: rc = check_skipped(R, it.q, err, el); R->done++; break;
        case EVF_EPISODE: episode_start(R, &it); break;
        case EVF_FRAME:
            if (it.excluded) { R->S.excluded++; break; }
            if (R->o->policy == MACT_EVAL_MODEL) rc = predict_frame(R, &it, err, el);
            evf_item_free(&it);
            if (!rc) mact_eval_add_frame(&R->S, R, it.t);
            break;
        case EVF_EPISODE_END: rc = episode_end(R, progress, err, el); break;
        }
        if (rc) evf_item_free(&it);
    }
    return rc;
}

/* the evaluation's rate against the inference's own: what the frame reader costs */
static void report_rates(const ev_run *R, FILE *progress)
{
    if (!progress) return;
    fprintf(progress, "\n");
    if (R->frames_run <= 0) return;
    const double elapsed = mact_clock_s() - R->t0;
    if (R->o->policy == MACT_EVAL_MODEL && R->K)
        fprintf(progress, "mact eval: %.0f replan points, %.0f inferences in %.2f s: %.1f ms per inference, %.1f%% of the wall time\n",
                R->frames_run, R->n_predict, elapsed, 1e3 * R->t_predict / R->n_predict, 100 * R->t_predict / elapsed);
    else if (R->o->policy == MACT_EVAL_MODEL)
        fprintf(progress, "mact eval: %.0f frames in %.2f s: %.4g frames/s; inference %.1f ms per frame (%.4g frames/s), %.1f%% of "
                "the wall time\n", R->frames_run, elapsed, R->frames_run / elapsed, 1e3 * R->t_predict / R->frames_run,
                R->frames_run / R->t_predict, 100 * R->t_predict / elapsed);
    else fprintf(progress, "mact eval: %.0f frames in %.2f s\n", R->frames_run, elapsed);
}

/* resolve, fingerprint, refuse a mixed OUT, then the frames through the policy */
static int run(ev_run *R, FILE *progress, char *err, size_t el)
{
    const mact_eval_options *o = R->o;
    int rc;
    if ((rc = check_options(o, err, el)) || (rc = resolve_tag(R, err, el)) || (rc = open_dataset(R, progress, err, el)))
        return rc;
    snprintf(R->epdir, sizeof R->epdir, "%s/episodes", o->out);
    if (mact_file_mkdirs(o->out, NULL, 0) || (mkdir(R->epdir, 0777) && errno != EEXIST))
        return FAIL(MACT_ERR_IO, "cannot create %s", R->epdir);
    fingerprint(R);
    if ((rc = refuse_other_settings(R, err, el))) return rc;
    R->pred = malloc(sizeof(float) * MAXH * MACT_EVAL_MAX_JOINTS);
    for (int ch = 0; ch < 2 && R->K; ch++) R->rp_raw[ch] = malloc(sizeof(float) * MAXH * MACT_EVAL_MAX_JOINTS);
    if (!R->pred || (R->K && (!R->rp_raw[0] || !R->rp_raw[1]))) return FAIL(MACT_ERR_NOMEM, "out of memory");
    evf_options fo = {.d = R->d, .dsdir = o->dataset, .akey = R->akey, .skey = R->skey, .cams = R->cams, .ncam = R->ncam,
                      .decode = o->policy == MACT_EVAL_MODEL, .sel = R->sel, .n_sel = R->n_sel, .shard = o->shard,
                      .nshard = o->n_shards ? o->n_shards : 1, .H = R->H, .static_threshold = R->K ? -1 : o->static_threshold,
                      .episode_dir = R->epdir, .tolerance_s = R->tol, .stride = R->K};
    evf *src = NULL;
    char e2[2048];
    if (evf_start(&fo, &src, e2, sizeof e2)) return FAIL(MACT_ERR_FORMAT, "%s", e2);
    R->t0 = mact_clock_s();
    rc = run_items(R, src, progress, err, el);
    /* an episode's arrays are the producer's until EVF_EPISODE_END: on an early stop it is joined before they go */
    evf_stop(src);
    report_rates(R, progress);
    return rc;
}

mact_status mact_eval_run(const mact_eval_options *o, FILE *rep, FILE *progress, mact_eval_result **result, char *err, size_t el)
{
    if (result) *result = NULL;
    ev_run *R = calloc(1, sizeof *R);
    if (!R) return FAIL(MACT_ERR_NOMEM, "out of memory");
    mact_video_quiet_logs();  /* FFmpeg's decoder banners would drown the progress line */
    R->o = o;
    if (o) {
        R->akey = o->action_key ? o->action_key : "action";
        R->skey = o->state_key ? o->state_key : "observation.state";
        R->policy_name = o->policy == MACT_EVAL_MODEL ? "model" : o->policy == MACT_EVAL_HOLD ? "hold" : "replay";
        R->tol = o->tolerance_s > 0 ? o->tolerance_s : 1e-4;
        R->K = o->replan;
        R->delay = o->delay;
        R->chains = R->K ? (o->no_rtc_compare ? 2 : 3) : 0;
    }
    int rc = run(R, progress, err, el);
    free(R->act);
    free(R->st);
    mact_eval_ep_free(&R->S);
    free(R->rp_raw[0]);
    free(R->rp_raw[1]);
    free(R->pred);
    free(R->sel);
    free(R->hmap);
    mact_ld_close(R->d);
    const int n_sel = R->n_sel;
    free(R);
    if (rc) return (mact_status)rc;
    ep_sums *all;
    int n_all;
    const char *dl[1] = {o->out};
    if ((rc = mact_eval_load_eps(dl, 1, &all, &n_all, err, el))) return (mact_status)rc;
    static const int fk_default[3] = {5, 10, 30};
    rc = mact_eval_write_result(o->out, all, n_all, o->n_first_k ? o->first_k : fk_default, o->n_first_k ? o->n_first_k : 3,
                                o->policy == MACT_EVAL_MODEL ? "model" : o->policy == MACT_EVAL_HOLD ? "hold" : "replay",
                                n_sel, rep, result, err, el);
    mact_eval_eps_free(all, n_all);
    return (mact_status)rc;
}
