/* The integrator's call (docs/spec/molmoact2.md 4-5): frames + task + raw state -> actions in robot units. Inputs are
 * validated before any stage runs, so a rejected call leaves no half-written output. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "base/clock.h"
#include "base/rng.h"
#include "io/image.h"
#include "io/normstats.h"
#include "stages/prompt.h"
#include "model/session.h"
#include "io/tokenizer.h"


mact_status mact_tokenize(const mact_model *m, const char *text, int64_t *ids, size_t cap, size_t *n, char *err,
                          size_t el)
{
    if (!m || !text || !n || (!ids && cap))
        return mact_errf(err, el, MACT_ERR_INPUT, "mact_tokenize: %s is NULL", !m ? "model" : !text ? "text" : !n ? "n"
                         : "ids (with cap > 0)");
    *n = 0;
    if (!m->tok) return mact_errf(err, el, MACT_ERR_IO, "no tokenizer: %s", m->tok_err);
    return (mact_status)mact_tokenizer_encode(m->tok, text, strlen(text), ids, cap, n, err, el);
}

/* What a checked call asks for: the tag and the sizes every later step reads. */
typedef struct {
    const mact_norm_tag *tag;
    int state_dim, A, adim;  /* the tag's state dims, the model's action dims, the tag's action dims */
    int H, steps_out, steps; /* horizon, rows returned, flow steps */
    int rtc_on;
} predict_plan;

/* Every input of the call against the session, the model and the norm tag, before any stage runs: *p filled,
 * or the session's error set and its status returned. */
static int check_call(mact_session *s, const mact_predict_input *in, const mact_predict_output *out,
                      predict_plan *p)
{
    if (!in || !out) return mact_session_fail(s, MACT_ERR_INPUT, "predict: %s is NULL", !in ? "in" : "out");
    if (!out->actions) return mact_session_fail(s, MACT_ERR_INPUT, "predict: out->actions is NULL");
    if (in->n_frames > (size_t)s->max_images)
        return mact_session_fail(s, MACT_ERR_INPUT, "%zu camera frames; this session takes 1..%d", in->n_frames,
                                 s->max_images);
    const float *state = in->state;
    const struct mact_model *m = s->m;
    const mact_config *c = &m->cfg;
    const mact_predict_options *o = &in->options;
    char err[768];
    if (!m->tok) return mact_session_fail(s, MACT_ERR_IO, "predict needs tokenizer.json: %s", m->tok_err);
    if (!m->ns) return mact_session_fail(s, MACT_ERR_IO, "predict needs norm_stats.json: %s", m->ns_err);
    const mact_norm_tag *tag = mact_norm_find_tag(m->ns, o->norm_tag, err, sizeof err);
    if (!tag) return mact_session_fail(s, MACT_ERR_INPUT, "%s", err);
    /* the one input rule of every surface (CLI, Python, each server protocol): a tag that names its cameras takes
     * exactly those, in that order (the model was trained on that many images) */
    if (tag->n_cameras > 0 && in->n_frames != (size_t)tag->n_cameras) {
        char keys[512] = "";
        for (int c = 0, o2 = 0; c < tag->n_cameras && c < MACT_NORM_MAX_CAMERAS && o2 < (int)sizeof keys; c++)
            o2 += snprintf(keys + o2, sizeof keys - (size_t)o2, "%s%s", c ? ", " : "", tag->camera_keys[c]);
        return mact_session_fail(s, MACT_ERR_INPUT, "%zu camera frames; norm tag \"%s\" takes %d (%s%s), in that order",
                                 in->n_frames, tag->name, tag->n_cameras, keys,
                                 tag->n_cameras > MACT_NORM_MAX_CAMERAS ? ", ..." : "");
    }
    if (in->n_frames < 1)
        return mact_session_fail(s, MACT_ERR_INPUT, "0 camera frames; this session takes 1..%d", s->max_images);
    if (!in->frames) return mact_session_fail(s, MACT_ERR_INPUT, "predict: frames is NULL");
    if (!state || in->state_dim != (size_t)tag->state.dim)
        return mact_session_fail(s, MACT_ERR_INPUT, "state has %zu values but norm tag \"%s\" expects %d",
                                 state ? in->state_dim : 0, tag->name, tag->state.dim);
    const int state_dim = tag->state.dim;
    for (int i = 0; i < state_dim; i++)
        if (!isfinite(state[i]))
            return mact_session_fail(s, MACT_ERR_INPUT, "state[%d] is %g: state must be finite", i, (double)state[i]);
    if (!in->task) return mact_session_fail(s, MACT_ERR_INPUT, "task is NULL");
    const int A = c->max_action_dim, adim = tag->action.dim;
    if (adim > A)
        return mact_session_fail(s, MACT_ERR_INPUT, "norm tag \"%s\" has %d action dims; the model has %d", tag->name,
                                 adim, A);
    int H = tag->action_horizon ? tag->action_horizon : c->max_action_horizon;
    if (H > c->max_action_horizon)
        return mact_session_fail(s, MACT_ERR_INPUT, "norm tag action_horizon %d exceeds max_action_horizon %d", H,
                                 c->max_action_horizon);
    int steps_out = o->n_action_steps ? o->n_action_steps : tag->n_action_steps ? tag->n_action_steps : H;
    if (steps_out < 1 || steps_out > H)
        return mact_session_fail(s, MACT_ERR_INPUT, "n_action_steps %d is outside 1..%d (the horizon)", steps_out, H);
    if ((size_t)steps_out * (size_t)adim > out->actions_cap)
        return mact_session_fail(s, MACT_ERR_INPUT, "actions buffer holds %zu floats; %d x %d needed",
                                 out->actions_cap, steps_out, adim);
    int steps = o->num_steps ? o->num_steps : c->flow_steps;
    if (steps < 1 || steps > MACT_MAX_STEPS)
        return mact_session_fail(s, MACT_ERR_INPUT, "num_steps %d: flow steps must be in 1..%d (0: the config's)", steps,
                                 MACT_MAX_STEPS);
    if (o->noise && o->noise_len != (size_t)H * A)
        return mact_session_fail(s, MACT_ERR_INPUT, "noise has %zu values; the tag's horizon %d x max_action_dim %d "
                                 "needs %d", o->noise_len, H, A, H * A);
    if (o->noise && (mact_check_finite(s, o->noise, (int64_t)H * A, "noise"))) return MACT_ERR_INPUT;
    /* RTC: the caller's rows in robot units, checked here, normalised by rtc_to_model (the inverse of the
     * output's path) */
    int rtc_on, rc;
    if ((rc = mact_rtc_check(s, &in->rtc, H, adim, 1, &rtc_on, "rtc"))) return rc;
    *p = (predict_plan){tag, state_dim, A, adim, H, steps_out, steps, rtc_on};
    return MACT_OK;
}

/* images: decode is the caller's; resize + normalise + patchify per docs/spec/molmoact2.md 4.1 into s->pv */
static int preprocess_frames(mact_session *s, const mact_frame *frames, int n_frames)
{
    const mact_config *c = &s->m->cfg;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3;
    char err[768];
    for (int i = 0; i < n_frames; i++) {
        if (!frames[i].rgb || frames[i].height < 1 || frames[i].width < 1)
            return mact_session_fail(s, MACT_ERR_INPUT, "camera frame %d is empty", i);
        /* resize into the session's buffer, then normalise + patchify (same as mact_image_preprocess) */
        if (mact_image_resize(frames[i].rgb, frames[i].height, frames[i].width, s->resized, c->image_h, c->image_w, err,
                              sizeof err) ||
            mact_image_patchify(s->resized, c->image_h, c->image_w, c->patch, s->pv + i * P * PD, (size_t)(P * PD), err,
                                sizeof err))
            return mact_session_fail(s, MACT_ERR_INPUT, "camera frame %d: %s", i, err);
    }
    return MACT_OK;
}

/* state -> the tag's joint frame and normalisation -> bins */
static int state_to_bins(mact_session *s, const predict_plan *p, const float *state, int *bins)
{
    float sn[MACT_NORM_MAX_DIM];
    char err[768];
    if (mact_tag_norm_state(p->tag, state, sn, err, sizeof err)) return mact_session_fail(s, MACT_ERR_INPUT, "%s", err);
    mact_state_bins(sn, p->state_dim, s->m->cfg.num_state_tokens, bins);
    return MACT_OK;
}

/* prompt text -> s->ids (and s->ids_f): <|image|> expanded, BOS (= EOS for Qwen) prepended; *n_ids the count */
static int prompt_ids(mact_session *s, const predict_plan *p, const char *task, const int *bins, int n_frames,
                      int *n_ids)
{
    const struct mact_model *m = s->m;
    const mact_config *c = &m->cfg;
    const mact_norm_tag *tag = p->tag;
    char err[768], task_norm[MACT_MAX_TASK];
    if (mact_normalize_task(task, task_norm, sizeof task_norm, err, sizeof err))
        return mact_session_fail(s, MACT_ERR_INPUT, "%s", err);
    if (mact_prompt_check_inputs(m->tok, task_norm, tag->setup_type, tag->control_mode, err, sizeof err))
        return mact_session_fail(s, MACT_ERR_INPUT, "%s", err);
    if (mact_build_prompt_text(n_frames, task_norm, tag->setup_type, tag->control_mode, bins, p->state_dim, s->text,
                               MACT_PROMPT_TEXT_CAP, err, sizeof err))
        return mact_session_fail(s, MACT_ERR_INPUT, "%s", err);
    int64_t img_tok = mact_tokenizer_token_to_id(m->tok, "<|image|>");
    if (img_tok < 0) return mact_session_fail(s, MACT_ERR_MODEL, "tokenizer.json has no <|image|> token");
    size_t nt = 0;
    const int K = c->tokens_per_image;
    int64_t *ids = s->ids;
    /* tokens go after the BOS slot; each <|image|> grows by K + 1 */
    size_t cap = (size_t)s->max_tokens - 1 - (size_t)n_frames * (K + 1);
    if ((int64_t)s->max_tokens - 1 - (int64_t)n_frames * (K + 1) < 1)
        return mact_session_fail(s, MACT_ERR_INPUT, "prompt longer than the model allows (%d tokens)", s->max_tokens);
    if (mact_tokenizer_encode(m->tok, s->text, strlen(s->text), ids + 1 + (size_t)n_frames * (K + 1), cap, &nt, err,
                              sizeof err))
        return mact_session_fail(s, MACT_ERR_INPUT, "%s%s", strstr(err, "do not fit") ? "prompt longer than the "
                                 "session's max_tokens allows: " : "", err);
    int64_t *src = ids + 1 + (size_t)n_frames * (K + 1);
    size_t w = 1;
    int seen = 0;
    ids[0] = c->eos_id;
    for (size_t i = 0; i < nt; i++) {
        if (src[i] != img_tok) { ids[w++] = src[i]; continue; }
        seen++;
        ids[w++] = c->image_start_id;
        for (int k = 0; k < K; k++) ids[w++] = c->image_patch_id;
        ids[w++] = c->image_end_id;
    }
    if (seen != n_frames)
        return mact_session_fail(s, MACT_ERR_INPUT, "the task text adds %d <|image|> markers; tasks may not contain "
                                 "special tokens", seen - n_frames);
    const int n = (int)w;
    int rc = mact_check_ids(s, ids, n, "prompt");   /* a tokenizer.json with ids past the model's embedding tables */
    if (rc) return rc;
    for (int i = 0; i < n; i++) s->ids_f[i] = (float)ids[i];
    *n_ids = n;
    return MACT_OK;
}

/* s->noise: the caller's, else the seed's stream (base/rng.h); s->traj starts from it */
static void initial_noise(mact_session *s, const mact_predict_options *o, int64_t n)
{
    if (o->noise) memcpy(s->noise, o->noise, (size_t)n * sizeof(float));
    else {
        mact_rng r;
        mact_rng_seed(&r, o->seed);
        mact_rng_normal_f32(&r, s->noise, n);
    }
    memcpy(s->traj, s->noise, (size_t)n * sizeof(float));
}

/* RTC's previous rows, robot units -> the model's into s->rtc_prev (the inverse of the output's path: the tag's joint
 * frame, then its normalisation); rtc->prev_actions then points there. The options a caller leaves at 0 take a
 * LeRobot policy's rtc_config. */
static int rtc_to_model(mact_session *s, const predict_plan *p, mact_rtc_options *rtc)
{
    const mact_lr_config *lr = s->m->src.lr;
    if (lr && lr->rtc) {
        if (lr->rtc_trained)
            return mact_session_fail(s, MACT_ERR_UNSUPPORTED, "this policy's rtc_config.mode is trained (hard "
                                     "inpainting); mact runs guided RTC only");
        if (!rtc->execution_horizon) rtc->execution_horizon = lr->rtc_execution_horizon;
        if (rtc->max_guidance_weight == 0) rtc->max_guidance_weight = lr->rtc_max_guidance_weight;
        if (rtc->schedule == MACT_RTC_SCHEDULE_DEFAULT) rtc->schedule = (mact_rtc_schedule)lr->rtc_schedule;
    }
    mact_tag_norm_actions(p->tag, rtc->prev_actions, (int)rtc->n_prev, p->adim, s->rtc_prev);
    rtc->prev_actions = s->rtc_prev;
    s->rtc_prev_n = (int)rtc->n_prev;
    s->rtc_prev_dim = p->adim;
    return MACT_OK;
}

mact_status mact_predict(mact_session *s, const mact_predict_input *in, mact_predict_output *out)
{
    if (!s) return MACT_ERR_INPUT;
    mact_session_enter(s);
    mact_timings t = {0};
    double t0 = mact_clock_ms();
    predict_plan p;
    int rc;
    if ((rc = check_call(s, in, out, &p))) return rc;
    const int n_frames = (int)in->n_frames;
    if ((rc = preprocess_frames(s, in->frames, n_frames))) return rc;
    int bins[MACT_NORM_MAX_DIM], n = 0;
    mact_rtc_options rtc = in->rtc;
    s->rtc_prev_n = 0;
    if ((rc = state_to_bins(s, &p, in->state, bins)) || (rc = prompt_ids(s, &p, in->task, bins, n_frames, &n)) ||
        (p.rtc_on && (rc = rtc_to_model(s, &p, &rtc))))
        return rc;
    initial_noise(s, &in->options, (int64_t)p.H * p.A);
    t.preprocess_ms = mact_clock_ms() - t0;

    double stage[3];
    rc = mact_pipeline_run(s, s->pv, n_frames, s->ids, n, s->traj, p.H, p.adim, p.steps, p.rtc_on ? &rtc : NULL,
                           stage);
    if (rc) return rc;
    mact_tag_unnorm_actions(p.tag, s->traj, p.steps_out, p.A, out->actions);
    s->last_images = n_frames;
    s->last_tokens = n;
    s->last_h = p.H;
    t.vision_ms = stage[0];
    t.llm_ms = stage[1];
    t.action_ms = stage[2];
    t.total_ms = mact_clock_ms() - t0;
    t.n_tokens = n;
    t.horizon = p.H;
    out->n_steps = (size_t)p.steps_out;
    out->action_dim = (size_t)p.adim;
    out->timings = t;
    return MACT_OK;
}

mact_status mact_session_tensor(mact_session *s, const char *name, mact_tensor_view *view)
{
    if (!s) return MACT_ERR_INPUT;
    if (!name || !view) return mact_session_fail(s, MACT_ERR_INPUT, "mact_session_tensor: name and view are required");
    const mact_config *c = &s->m->cfg;
    const float **data = &view->data;
    int64_t *shape = view->shape;
    int *ndim = &view->ndim;
    *data = NULL;
    *ndim = 0;
    const int64_t P = (int64_t)c->grid_h * c->grid_w, PD = (int64_t)c->patch * c->patch * 3, N = s->last_tokens;
    const int64_t L = c->n_layers, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    memset(shape, 0, 4 * sizeof *shape);
    if (!s->last_tokens)
        return mact_session_fail(s, MACT_ERR_INPUT, "mact_session_tensor: no tensors before a successful mact_predict");
    if (!strcmp(name, "pixel_values")) {
        *data = s->pv; *ndim = 3; shape[0] = s->last_images; shape[1] = P; shape[2] = PD;
    } else if (!strcmp(name, "image_embeds")) {
        *data = s->p_embeds; *ndim = 2; shape[0] = (int64_t)s->last_images * c->tokens_per_image; shape[1] = c->d_model;
    } else if (!strcmp(name, "keys") || !strcmp(name, "values")) {
        *data = name[0] == 'k' ? s->p_keys : s->p_values; *ndim = 3; shape[0] = L; shape[1] = N; shape[2] = kvd;
    } else if (!strcmp(name, "noise") || !strcmp(name, "actions_norm")) {
        *data = name[0] == 'n' ? s->noise : s->traj; *ndim = 2; shape[0] = s->last_h; shape[1] = c->max_action_dim;
    } else if (!strcmp(name, "prev_actions_norm")) {
        if (!s->rtc_prev_n)
            return mact_session_fail(s, MACT_ERR_INPUT, "mact_session_tensor: prev_actions_norm exists only after a "
                                     "prediction with RTC rows");
        *data = s->rtc_prev; *ndim = 2; shape[0] = s->rtc_prev_n; shape[1] = s->rtc_prev_dim;
    } else if (!strcmp(name, "input_ids")) {
        *data = s->ids_f; *ndim = 1; shape[0] = N;
    } else
        return mact_session_fail(s, MACT_ERR_INPUT, "mact_session_tensor: unknown tensor '%.64s' (pixel_values, "
                                 "image_embeds, keys, values, noise, actions_norm, prev_actions_norm, input_ids)", name);
    return MACT_OK;
}
