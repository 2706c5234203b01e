/* lerobot: LeRobot's asynchronous inference over gRPC (lerobot_service.c runs the service). This file reads the
 * payloads, LeRobot's pickles, as data (pickle.c: an allow-list, nothing executed; LeRobot PR #3048's
 * JSON + safetensors format too), maps the client's lerobot_features onto the checkpoint's norm tag as LeRobot's
 * raw_observation_to_observation does (observation.state's names in order, the cameras by key in the
 * checkpoint's camera order, the client's rename_map applied), and on a worker turns one TimedObservation into
 * a chunk: a list of TimedAction (timestamps t0 + i dt, timesteps i0 + i), actions_per_chunk rows in robot
 * units, in the format the observation came in.
 *
 * Real-time chunking (on unless --lerobot-rtc off): the client's observation at timestep k says the rows of the
 * chunk sent last up to k were executed, so its rows after k are the unexecuted rest; they guide the new chunk,
 * with the inference delay estimated from this client's own mean inference time at --lerobot-fps (its first
 * request, the cold start, not counted). The client should aggregate with latest_only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/lerobot.h"
#include "server/pickle.h"

#define IMG_PREFIX "observation.images."
#define STATE_KEY "observation.state"

lr_conn *lr_conn_new(void)
{
    lr_conn *lc = calloc(1, sizeof *lc);
    if (lc) pthread_mutex_init(&lc->mu, NULL);
    return lc;
}

void lr_conn_free(void *p)
{
    lr_conn *lc = p;
    if (!lc) return;
    pthread_mutex_destroy(&lc->mu);
    free(lc->chunk);
    free(lc);
}

void lr_conn_reset(lr_conn *lc)
{
    pthread_mutex_lock(&lc->mu);
    free(lc->chunk);
    lc->chunk = NULL;
    lc->rows = lc->dim = 0;
    lc->i0 = 0;
    pthread_mutex_unlock(&lc->mu);
}

static int parse(const srv_state *S, const uint8_t *d, size_t n, pk_doc **doc, char *err, size_t el)
{
    pk_limits lim;
    pk_limits_default(&lim);
    lim.max_input = S->c.max_message;
    lim.max_depth = S->c.max_depth;
    lim.max_str_bytes = S->c.max_message;
    lim.max_array_bytes = S->c.max_message;
    char e2[400];
    if (pk_parse(d, n, &lim, doc, e2, sizeof e2)) { snprintf(err, el, "payload: %s", e2); return -1; }
    return 0;
}

/* a str value into a fixed buffer; -1 with err when it is not a str or too long */
static int key_of(const pk_value *v, char *dst, size_t cap, const char *what, char *err, size_t el)
{
    size_t n;
    const char *s = pk_str(v, &n);
    if (!s) { snprintf(err, el, "%s must be a str, got %s", what, pk_type_name(v)); return -1; }
    if (n >= cap || memchr(s, 0, n)) { snprintf(err, el, "%s '%.60s...' is longer than %zu bytes", what, s, cap - 1); return -1; }
    memcpy(dst, s, n + 1);
    return 0;
}

/* key renamed: by the client's rename_map when it sent one (LeRobot's server overrides the checkpoint's with it), else
 * by the checkpoint's own (a LeRobot policy's rename_observations_processor), else key */
static const char *renamed(const srv_state *S, const pk_value *rename, const char *key)
{
    if (rename && rename->kind == PK_DICT && pk_len(rename)) {
        const char *s = pk_str(pk_dict_get(rename, key), NULL);
        return s ? s : key;
    }
    return mact_model_renamed(S->m, key);
}

/* the checkpoint's camera key k matches feature f (a "observation.images.X" key, renamed r) when k is f, r, X or
 * r's last part after "observation.images." */
static int cam_match(const char *k, const char *f, const char *r)
{
    if (!strcmp(k, f) || !strcmp(k, r)) return 1;
    if (!strncmp(f, IMG_PREFIX, strlen(IMG_PREFIX)) && !strcmp(k, f + strlen(IMG_PREFIX))) return 1;
    return !strncmp(r, IMG_PREFIX, strlen(IMG_PREFIX)) && !strcmp(k, r + strlen(IMG_PREFIX));
}

/* One draccus-style override of a LeRobot fork's RemotePolicyConfig.policy_config_overrides ("--norm_tag=X", also
 * "--policy.norm_tag=X" or "norm_tag=X"): applied when mact computes what it asks (the norm tag, the flow steps,
 * the rows of a chunk, continuous inference), else refused by name. tag: the connection's tag info, updated. */
static int apply_override(const srv_state *S, const char *o, lr_conn *t, mact_norm_tag_info *tag, char *err, size_t el)
{
    const char *k = o;
    while (*k == '-') k++;
    if (!strncmp(k, "policy.", 7)) k += 7;
    const char *eq = strchr(k, '=');
    if (!eq) { snprintf(err, el, "policy_config_overrides '%.100s' is not KEY=VALUE", o); return -1; }
    const size_t kl = (size_t)(eq - k);
    const char *v = eq + 1;
    char e2[400];
    int64_t x;
#define KEY(name) (kl == strlen(name) && !strncmp(k, name, kl))
    if (KEY("norm_tag")) {
        const mact_tag *tg = mact_model_tag(S->m, v, e2, sizeof e2);
        if (!tg) { snprintf(err, el, "policy_config_overrides %.100s: %s", o, e2); return -1; }
        mact_tag_get_info(tg, tag);
        snprintf(t->norm_tag, sizeof t->norm_tag, "%s", tag->name);
    } else if (KEY("num_inference_steps") || KEY("n_action_steps")) {
        char *end;
        x = strtoll(v, &end, 10);
        if (!*v || *end || x < 1 || x > 1000) { snprintf(err, el, "policy_config_overrides %.100s: an integer in 1..1000", o); return -1; }
        if (KEY("num_inference_steps")) t->num_steps = (int)x;
        else t->max_rows = (int)x;
    } else if (KEY("inference_action_mode")) {
        if (strcmp(v, "continuous")) {
            snprintf(err, el, "policy_config_overrides %.100s: mact runs the continuous flow-matching head only", o);
            return -1;
        }
    } else {
        snprintf(err, el, "policy_config_overrides '%.100s': mact does not apply this override (it applies norm_tag, "
                 "num_inference_steps, n_action_steps and inference_action_mode=continuous)", o);
        return -1;
    }
#undef KEY
    return 0;
}

/* the fields LeRobot forks running MolmoAct2 add: policy_config_overrides (a list of str) and fps */
static int fork_fields(const srv_state *S, const pk_value *root, lr_conn *t, mact_norm_tag_info *tag, char *err, size_t el)
{
    const pk_value *ov = pk_attr(root, "policy_config_overrides"), *fps = pk_attr(root, "fps");
    if (ov && ov->kind != PK_NONE) {
        if (ov->kind != PK_LIST && ov->kind != PK_TUPLE) { snprintf(err, el, "policy_config_overrides must be a list of str"); return -1; }
        for (size_t i = 0; i < pk_len(ov); i++) {
            char o[512];
            if (key_of(pk_item(ov, i), o, sizeof o, "policy_config_overrides item", err, el) ||
                apply_override(S, o, t, tag, err, el))
                return -1;
        }
    }
    double f;
    if (fps && fps->kind != PK_NONE) {
        if (pk_number(fps, &f) || !(f > 0 && f <= 1000)) { snprintf(err, el, "fps must be a number in (0, 1000]"); return -1; }
        t->fps = f;
    }
    return 0;
}

/* pretrained_name_or_path is never opened: the server serves the checkpoint it loaded. When it names something else,
 * the set-up's log line says so (note, "" otherwise). */
static void name_note(const srv_state *S, const pk_value *root, char *note, size_t nl)
{
    size_t n;
    const char *p = pk_str(pk_attr(root, "pretrained_name_or_path"), &n);
    note[0] = 0;
    if (!p || (n == strlen(S->c.model_dir) && !strncmp(p, S->c.model_dir, n))) return;
    snprintf(note, nl, "; the client's pretrained_name_or_path '%.*s' is not the loaded model: serving %s", (int)(n > 200 ? 200 : n),
             p, S->c.model_dir);
}

int lr_configure(const srv_state *S, lr_conn *lc, const uint8_t *data, size_t n, char *err, size_t el)
{
    pk_doc *doc = NULL;
    if (parse(S, data, n, &doc, err, el)) return -1;
    int rc = -1;
    const pk_value *root = pk_root(doc);
    lr_conn t;   /* filled, then copied in under the lock */
    memset(&t, 0, sizeof t);
    if (!pk_is_class(root, NULL, "RemotePolicyConfig")) {
        snprintf(err, el, "expected a RemotePolicyConfig, got %s", pk_type_name(root));
        goto done;
    }
    char ptype[64];
    if (key_of(pk_attr(root, "policy_type"), ptype, sizeof ptype, "policy_type", err, el)) goto done;
    if (strcmp(ptype, LR_POLICY_TYPE)) {
        snprintf(err, el, "policy type '%s' is not served here: this server runs %s (start the client with "
                 "--policy_type=%s)", ptype, LR_POLICY_TYPE, LR_POLICY_TYPE);
        goto done;
    }
    mact_norm_tag_info tag = S->tag;
    char note[400];
    if (fork_fields(S, root, &t, &tag, err, el)) goto done;
    name_note(S, root, note, sizeof note);
    int64_t apc;
    int horizon = tag.action_horizon > 0 ? tag.action_horizon : S->mi.max_action_horizon;
    if (pk_int(pk_attr(root, "actions_per_chunk"), &apc) || apc < 1 || apc > horizon) {
        snprintf(err, el, "actions_per_chunk must be an integer in 1..%d (the checkpoint's action horizon)", horizon);
        goto done;
    }
    t.actions_per_chunk = (int)apc;
    const pk_value *feat = pk_attr(root, "lerobot_features");
    const pk_value *rename = pk_attr(root, "rename_map");
    if (!feat || feat->kind != PK_DICT) { snprintf(err, el, "lerobot_features must be a dict"); goto done; }
    if (rename && rename->kind != PK_DICT && rename->kind != PK_NONE) { snprintf(err, el, "rename_map must be a dict"); goto done; }
    const pk_value *sf = pk_dict_get(feat, STATE_KEY);
    const pk_value *names = pk_attr(sf, "names");
    if (!names || (names->kind != PK_LIST && names->kind != PK_TUPLE)) {
        snprintf(err, el, "lerobot_features has no '" STATE_KEY "' with a list of joint names");
        goto done;
    }
    size_t ns = pk_len(names);
    if ((int)ns != tag.state_dim) {
        snprintf(err, el, "the client's " STATE_KEY " has %zu joints, the checkpoint's norm tag '%s' %d", ns,
                 tag.name ? tag.name : "", tag.state_dim);
        goto done;
    }
    for (size_t i = 0; i < ns; i++) {
        char what[48];
        snprintf(what, sizeof what, STATE_KEY " name %zu", i);
        if (key_of(pk_item(names, i), t.state_keys[i], SRV_MAX_KEY, what, err, el)) goto done;
    }
    t.n_state = (int)ns;
    /* the client's image features, in its order */
    const char *fk[SRV_MAX_CAMS * 4];
    int nf = 0;
    for (size_t i = 0; i < pk_len(feat); i++) {
        const char *k = pk_str(pk_dict_key(feat, i), NULL);
        if (!k || strncmp(k, IMG_PREFIX, strlen(IMG_PREFIX))) continue;
        if (nf == (int)(sizeof fk / sizeof *fk)) { snprintf(err, el, "lerobot_features: too many image features"); goto done; }
        fk[nf++] = k;
    }
    if (!nf) { snprintf(err, el, "lerobot_features has no '" IMG_PREFIX "*' camera"); goto done; }
    int want = tag.n_cameras > 0 ? tag.n_cameras : nf;
    if (want > SRV_MAX_CAMS || want > S->c.max_images) {
        snprintf(err, el, "%d cameras: this server takes at most %d (--max-images)", want,
                 S->c.max_images < SRV_MAX_CAMS ? S->c.max_images : SRV_MAX_CAMS);
        goto done;
    }
    for (int i = 0; i < want; i++) {
        int f = i;
        if (tag.n_cameras > 0) {   /* the checkpoint names its cameras: match them */
            const char *k = i < MACT_MAX_TAG_CAMERAS ? tag.camera_keys[i] : NULL;
            for (f = 0; k && f < nf && !cam_match(k, fk[f], renamed(S, rename, fk[f])); f++) {}
            if (!k || f == nf) {
                size_t o = (size_t)snprintf(err, el, "the checkpoint's camera '%s' matches none of the client's image "
                                            "features (", k ? k : "?");
                for (int q = 0; q < nf && o < el; q++) o += (size_t)snprintf(err + o, el - o, "%s%s", q ? ", " : "", fk[q]);
                if (o < el) snprintf(err + o, el - o, "); map it with the client's rename_map");
                goto done;
            }
        }
        /* the raw observation key: the feature key without its prefix */
        snprintf(t.cam_keys[i], SRV_MAX_KEY, "%s", fk[f] + strlen(IMG_PREFIX));
    }
    t.n_cams = want;
    pthread_mutex_lock(&lc->mu);
    lc->configured = 1;
    lc->actions_per_chunk = t.actions_per_chunk;
    lc->n_state = t.n_state;
    memcpy(lc->state_keys, t.state_keys, sizeof t.state_keys);
    lc->n_cams = t.n_cams;
    memcpy(lc->cam_keys, t.cam_keys, sizeof t.cam_keys);
    memcpy(lc->norm_tag, t.norm_tag, sizeof t.norm_tag);
    lc->num_steps = t.num_steps;
    lc->max_rows = t.max_rows;
    lc->fps = t.fps;
    free(lc->chunk);
    lc->chunk = NULL;
    lc->rows = 0;
    pthread_mutex_unlock(&lc->mu);
    rc = 0;
    snprintf(err, el, "policy set-up%s", note);
done:
    pk_free(doc);
    return rc;
}

/* the TimedObservation's fields; state[lc->n_state] in observation.state's order (lc->mu held) */
static int observation_fields(const pk_value *root, const lr_conn *lc, int64_t *timestep, double *timestamp,
                              int *must_go, float *state, const pk_value **obs, char *err, size_t el)
{
    if (!pk_is_class(root, NULL, "TimedObservation")) {
        snprintf(err, el, "expected a TimedObservation, got %s", pk_type_name(root));
        return -1;
    }
    if (pk_int(pk_attr(root, "timestep"), timestep)) { snprintf(err, el, "timestep must be an int"); return -1; }
    if (timestamp && pk_number(pk_attr(root, "timestamp"), timestamp)) { snprintf(err, el, "timestamp must be a number"); return -1; }
    int64_t mg = 0;
    const pk_value *m = pk_attr(root, "must_go");
    if (m && m->kind != PK_NONE && pk_int(m, &mg)) { snprintf(err, el, "must_go must be a bool"); return -1; }
    *must_go = mg != 0;
    *obs = pk_attr(root, "observation");
    if (!*obs || (*obs)->kind != PK_DICT) { snprintf(err, el, "observation must be a dict"); return -1; }
    for (int i = 0; i < lc->n_state; i++) {
        double v;
        const pk_value *x = pk_dict_get(*obs, lc->state_keys[i]);
        if (!x) { snprintf(err, el, "the observation has no '%s' (joint %d of " STATE_KEY ")", lc->state_keys[i], i); return -1; }
        if (pk_number(x, &v)) { snprintf(err, el, "'%s' must be a number, got %s", lc->state_keys[i], pk_type_name(x)); return -1; }
        state[i] = (float)v;
    }
    return 0;
}

int lr_observation_peek(const srv_state *S, lr_conn *lc, const uint8_t *data, size_t n, int64_t *timestep,
                        int *must_go, float *state, char *err, size_t el)
{
    pk_doc *doc = NULL;
    if (parse(S, data, n, &doc, err, el)) return -1;
    const pk_value *obs;
    pthread_mutex_lock(&lc->mu);
    int rc = observation_fields(pk_root(doc), lc, timestep, NULL, must_go, state, &obs, err, el);
    pthread_mutex_unlock(&lc->mu);
    pk_free(doc);
    return rc;
}

/* a camera: an HxWx{1,3,4} uint8 (or float32 in [0, 1]) ndarray, as every protocol's frames */
static int frame_of(const srv_state *S, const pk_value *v, const char *key, mact_image *img, char *err, size_t el)
{
    if (!v) { snprintf(err, el, "the observation has no camera '%s'", key); return -1; }
    if (v->kind != PK_NDARRAY) { snprintf(err, el, "camera '%s' must be a numpy array, got %s", key, pk_type_name(v)); return -1; }
    if (v->u.arr.dt.itemsize > 1 && v->u.arr.dt.order == '>') { snprintf(err, el, "camera '%s': big-endian data", key); return -1; }
    srv_arr a = {.kind = v->u.arr.dt.kind, .isz = v->u.arr.dt.itemsize, .ndim = v->u.arr.ndim,
                 .count = v->u.arr.count, .data = v->u.arr.data};
    if (a.ndim > 8) { snprintf(err, el, "camera '%s' has %d dims", key, a.ndim); return -1; }
    for (int i = 0; i < a.ndim; i++) a.shape[i] = v->u.arr.shape[i];
    char e2[300];
    if (srv_frame_from_arr(&a, &S->c, img, e2, sizeof e2)) { snprintf(err, el, "camera '%s': %s", key, e2); return -1; }
    return 0;
}

static void lr_handle(const srv_state *S, srv_worker *w, srv_job *j)
{
    char err[600] = "";
    lr_conn *lc = j->conn->pstate;
    pk_doc *doc = NULL;
    srv_req r;
    memset(&r, 0, sizeof r);
    pk_buf b = {0};
    if (!lc) { j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "no client state"); goto out; }
    pthread_mutex_lock(&lc->mu);
    j->outcome = SRV_OC_BAD;
    if (!lc->configured) { snprintf(err, sizeof err, "no policy set-up: SendPolicyInstructions first"); goto unlock; }
    if (parse(S, j->msg->data, j->msg->len, &doc, err, sizeof err)) goto unlock;
    int64_t ts;
    double t0;
    int must_go;
    const pk_value *obs;
    if (observation_fields(pk_root(doc), lc, &ts, &t0, &must_go, r.state, &obs, err, sizeof err)) goto unlock;
    snprintf(j->id, sizeof j->id, "%lld", (long long)ts);
    for (int i = 0; i < lc->n_state; i++)
        if (!isfinite(r.state[i])) {
            snprintf(err, sizeof err, "joint '%s' is not finite (%g)", lc->state_keys[i], (double)r.state[i]);
            goto unlock;
        }
    r.state_dim = lc->n_state;
    for (int i = 0; i < lc->n_cams; i++) {
        if (frame_of(S, pk_dict_get(obs, lc->cam_keys[i]), lc->cam_keys[i], &r.img[i], err, sizeof err)) goto unlock;
        r.n_img = i + 1;
    }
    size_t tn;
    const char *task = pk_str(pk_dict_get(obs, "task"), &tn);
    if (!task) { snprintf(err, sizeof err, "the observation has no 'task' str (the client's --task)"); goto unlock; }
    int rc = srv_copy_str(task, tn, S->c.max_string, &r.task, "task", err, sizeof err);
    if (rc) { j->outcome = srv_decode_outcome(rc); goto unlock; }
    r.n_action_steps = lc->max_rows && lc->max_rows < lc->actions_per_chunk ? lc->max_rows : lc->actions_per_chunk;
    r.num_steps = lc->num_steps;
    snprintf(r.norm_tag, sizeof r.norm_tag, "%s", lc->norm_tag);
    double dt_ms = 1000.0 / (lc->fps > 0 ? lc->fps : S->c.lerobot_fps);
    /* RTC. LeRobot's client stamps an observation with the timestep of the last action it executed (k), and
     * skips a chunk's rows at timesteps <= the last executed one. So the new chunk's row i (timestep k + i)
     * continues the last chunk's row at k + i: the guide is the last chunk from k on, and the frozen prefix is
     * row 0 (executed at k) plus the rows executed while this inference runs (its mean time at --lerobot-fps). */
    lc->last_delay = lc->last_prev_rows = 0;
    if (S->c.lerobot_rtc && lc->chunk && ts >= lc->i0 && ts < lc->i0 + lc->rows) {
        int k = (int)(ts - lc->i0), left = lc->rows - k;
        int d = 1 + (lc->n_lat ? (int)ceil(lc->lat_ms / dt_ms) : 0);
        if (d > left) d = left;
        if (d >= r.n_action_steps) d = r.n_action_steps - 1;
        r.prev = malloc((size_t)left * lc->dim * sizeof(float));
        if (!r.prev) { j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "out of memory"); goto unlock; }
        memcpy(r.prev, lc->chunk + (size_t)k * lc->dim, (size_t)left * lc->dim * sizeof(float));
        r.rtc.n_prev = (size_t)left;
        r.rtc.prev_dim = (size_t)lc->dim;
        r.rtc.inference_delay = d;
        lc->last_delay = d;
        lc->last_prev_rows = left;
    }
    mact_predict_output out = {0};
    if ((j->outcome = srv_predict(S, w, &r, &out, j, err, sizeof err)) != SRV_OC_OK) goto unlock;
    if (lc->chunk) {   /* the client's first request (the cold start) is not counted */
        lc->lat_ms = lc->n_lat ? 0.8 * lc->lat_ms + 0.2 * j->infer_ms : j->infer_ms;
        lc->n_lat++;
    }
    size_t nv = out.n_steps * out.action_dim;
    float *c2 = realloc(lc->chunk, nv * sizeof(float));
    if (!c2) { j->outcome = SRV_OC_ERROR; snprintf(err, sizeof err, "out of memory"); goto unlock; }
    memcpy(c2, out.actions, nv * sizeof(float));
    lc->chunk = c2;
    lc->rows = (int)out.n_steps;
    lc->dim = (int)out.action_dim;
    lc->i0 = ts;
    int safe = pk_doc_format(doc) == PK_FMT_SAFE;
    char e2[300];
    if ((safe ? pk_write_timed_actions_safe : pk_write_timed_actions)(&b, out.actions, (int)out.n_steps,
                                                                       (int)out.action_dim, t0, dt_ms / 1000.0, ts,
                                                                       e2, sizeof e2) || b.oom) {
        j->outcome = SRV_OC_ERROR;
        snprintf(err, sizeof err, "the reply: %s", b.oom ? "out of memory" : e2);
        goto unlock;
    }
    srv_out *o = srv_out_new(0);
    if (o) srv_buf_put(&o->body, b.p, b.len);
    if (!o || o->body.oom) {
        if (o) { free(o->body.buf); free(o); }
        j->outcome = SRV_OC_ERROR;
        snprintf(err, sizeof err, "out of memory");
        goto unlock;
    }
    srv_job_push(j, o);
    j->outcome = SRV_OC_OK;
    if (lc->last_prev_rows)
        snprintf(j->detail, sizeof j->detail, "rtc_prev_rows=%d delay=%d", lc->last_prev_rows, lc->last_delay);
unlock:
    pthread_mutex_unlock(&lc->mu);
out:
    if (j->outcome != SRV_OC_OK) snprintf(j->detail, sizeof j->detail, "%.190s", err);
    pk_buf_free(&b);
    pk_free(doc);
    srv_req_free(&r);
}

/* errors travel as gRPC statuses (lerobot_service.c), not as a reply body */
static srv_out *lr_error_out(const srv_state *S, const uint8_t *msg, size_t len, int http_status, const char *text)
{
    (void)S; (void)msg; (void)len; (void)http_status; (void)text;
    return NULL;
}

const srv_protocol srv_proto_lerobot = {
    .name = "lerobot", .key_flag = "lerobot", .transport = SRV_OWN,
    .cams = "", .state = "", .task = "",   /* the client's lerobot_features say */
    .handle = lr_handle, .error_out = lr_error_out, .conn_free = lr_conn_free,
    .start = lr_service_start, .stop = lr_service_stop,
};
