/* LeRobot MolmoAct2 policy folders: the config, the processor pipelines and their state files (model/lerobot.h).
 * Field meanings follow lerobot/policies/molmoact2/configuration_molmoact2.py and processor_molmoact2.py and
 * lerobot/processor/{pipeline,normalize_processor}.py (docs/spec/molmoact2.md 2, 4.3). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cjson/cJSON.h>
#include "mact.h"
#include "base/err.h"
#include "base/dtype.h"
#include "base/file.h"
#include "base/json.h"
#include "model/lerobot.h"

#define LR_JSON_MAX ((size_t)64 << 20)

/* ---- typed fields: absent and null mean "not given"; a wrong type is an error naming the field ---- */

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_str(const cJSON *o, const char *k, char *dst, size_t cap, const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, k);
    dst[0] = 0;
    if (!v) return 0;
    if (!cJSON_IsString(v)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be a string", file, k);
    if (strlen(v->valuestring) >= cap)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s is %zu bytes; the limit is %zu", file, k,
                         strlen(v->valuestring), cap - 1);
    strcpy(dst, v->valuestring);
    return 0;
}

static int get_int(const cJSON *o, const char *k, int lo, int hi, int *dst, const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, k);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be an integer in %d..%d", file, k, lo, hi);
    *dst = (int)v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *k, int *dst, const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, k);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be true or false", file, k);
    *dst = cJSON_IsTrue(v);
    return 0;
}

/* a field mact's prompt builder always has on (LeRobot's default): false is refused, not ignored */
static int want_true(const cJSON *o, const char *k, const char *file, char *err, size_t el)
{
    int b = 1, rc = get_bool(o, k, &b, file, err, el);
    if (rc) return rc;
    return b ? 0 : mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: %s is false; mact builds the MolmoAct2 prompt with it "
                             "on (LeRobot's default)", file, k);
}

static int get_str_list(const cJSON *o, const char *k, char (*dst)[MACT_NORM_MAX_KEY], int cap, int *n,
                        const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, k), *x;
    *n = 0;
    if (!v) return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > cap)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be a list of at most %d names", file, k, cap);
    cJSON_ArrayForEach(x, v) {
        if (!cJSON_IsString(x) || !*x->valuestring || strlen(x->valuestring) >= MACT_NORM_MAX_KEY)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s[%d] must be a name of 1..%d bytes", file, k, *n,
                             MACT_NORM_MAX_KEY - 1);
        strcpy(dst[(*n)++], x->valuestring);
    }
    return 0;
}

/* joint_signs / joint_offsets: both null, or two lists of the same length (LeRobot's MolmoAct2Config check) */
static int get_joints(const cJSON *o, mact_joint_frame *j, const char *file, char *err, size_t el)
{
    const cJSON *s = field(o, "joint_signs"), *f = field(o, "joint_offsets");
    memset(j, 0, sizeof *j);
    if (!s && !f) return 0;
    if (!s || !f)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_%s is set but joint_%s is null; LeRobot needs both or "
                         "neither", file, s ? "signs" : "offsets", s ? "offsets" : "signs");
    if (!cJSON_IsArray(s) || !cJSON_IsArray(f))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs and joint_offsets must be lists of numbers", file);
    const int n = cJSON_GetArraySize(s);
    if (n != cJSON_GetArraySize(f))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs has %d values but joint_offsets %d; LeRobot needs "
                         "the same length", file, n, cJSON_GetArraySize(f));
    if (n > MACT_NORM_MAX_DIM)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs has %d values; the limit is %d", file, n,
                         MACT_NORM_MAX_DIM);
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(s, i), *b = cJSON_GetArrayItem(f, i);
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !isfinite(a->valuedouble) || !isfinite(b->valuedouble) ||
            fabs(a->valuedouble) > 1e6 || fabs(b->valuedouble) > 1e6)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs[%d] and joint_offsets[%d] must be finite "
                             "numbers within +-1e6", file, i, i);
        if (a->valuedouble == 0)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs[%d] is 0: that joint's actions could not be "
                             "mapped back", file, i);
        j->signs[i] = (float)a->valuedouble;
        j->offsets[i] = (float)b->valuedouble;
    }
    j->n = n;
    return 0;
}

/* LeRobot's NormalizationMode name -> MACT_NORM_* (-1 when unknown) */
static int norm_mode(const char *s)
{
    static const struct { const char *name; int mode; } m[] = {
        {"QUANTILES", MACT_NORM_Q01_Q99}, {"MIN_MAX", MACT_NORM_MIN_MAX}, {"MEAN_STD", MACT_NORM_MEAN_STD},
        {"QUANTILE10", MACT_NORM_Q10_Q90}, {"IDENTITY", MACT_NORM_NONE}};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (!strcmp(s, m[i].name)) return m[i].mode;
    return -1;
}

/* a normalization_mapping / norm_map: the STATE and ACTION modes (absent: QUANTILES, LeRobot MolmoAct2's default) */
static int get_norm_map(const cJSON *o, const char *k, int *state, int *action, const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, k);
    *state = *action = MACT_NORM_Q01_Q99;
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be a mapping", file, k);
    const char *keys[2] = {"STATE", "ACTION"};
    int *dst[2] = {state, action};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = field(v, keys[i]);
        if (!x) continue;
        if (!cJSON_IsString(x) || (*dst[i] = norm_mode(x->valuestring)) < 0)
            return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: %s.%s is not one of QUANTILES, MIN_MAX, MEAN_STD, "
                             "QUANTILE10, IDENTITY", file, k, keys[i]);
    }
    return 0;
}

/* one name, or a list of names, appended to dst */
static int add_names(const cJSON *v, char (*dst)[128], int *n, const char *key, const char *file, char *err, size_t el)
{
    const cJSON *y;
    if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach(y, v) {
            int rc = add_names(y, dst, n, key, file, err, el);
            if (rc) return rc;
        }
        return 0;
    }
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= 128 || *n >= MACT_NORM_MAX_DIM)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: dataset_feature_names.%s: at most %d names of under 128 bytes",
                         file, key, MACT_NORM_MAX_DIM);
    strcpy(dst[(*n)++], v->valuestring);
    return 0;
}

/* dataset_feature_names[key]: a list, or a mapping of lists (LeRobot's _flatten_feature_names) */
static int get_names(const cJSON *o, const char *key, char (*dst)[128], int *n, const char *file, char *err, size_t el)
{
    const cJSON *v = field(o, key), *x;
    int rc = 0;
    *n = 0;
    if (!v) return 0;
    if (cJSON_IsObject(v)) {
        cJSON_ArrayForEach(x, v) {
            if (!cJSON_IsNull(x) && (rc = add_names(x, dst, n, key, file, err, el))) return rc;
        }
        return 0;
    }
    return add_names(v, dst, n, key, file, err, el);
}

int mact_lerobot_is_policy_config(const char *json, size_t len)
{
    cJSON *r = cJSON_ParseWithLength(json, len);
    const int yes = r && cJSON_IsObject(r) && cJSON_GetObjectItemCaseSensitive(r, "type") &&
                    !cJSON_GetObjectItemCaseSensitive(r, "vit_config");
    cJSON_Delete(r);
    return yes;
}

/* input_features / output_features: the VISUAL keys in order, observation.state's and action's widths */
static int read_features(const cJSON *r, mact_lr_config *c, const char *file, char *err, size_t el)
{
    const char *which[2] = {"input_features", "output_features"};
    for (int w = 0; w < 2; w++) {
        const cJSON *fs = field(r, which[w]), *f;
        if (!fs) continue;
        if (!cJSON_IsObject(fs)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be a mapping", file, which[w]);
        cJSON_ArrayForEach(f, fs) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(f, "type"), *sh = cJSON_GetObjectItemCaseSensitive(f, "shape");
            if (!cJSON_IsObject(f) || !cJSON_IsString(t) || !cJSON_IsArray(sh))
                return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s.%s must have a type and a shape", file, which[w],
                                 f->string);
            const cJSON *d0 = cJSON_GetArrayItem(sh, 0);
            const int dim = cJSON_IsNumber(d0) && d0->valuedouble >= 0 && d0->valuedouble <= 1 << 20 ? (int)d0->valuedouble : -1;
            if (!strcmp(t->valuestring, "VISUAL")) {
                if (c->n_visual == MACT_LR_MAX_CAMERAS || strlen(f->string) >= MACT_NORM_MAX_KEY)
                    return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s: at most %d cameras with names under %d bytes",
                                     file, which[w], MACT_LR_MAX_CAMERAS, MACT_NORM_MAX_KEY);
                strcpy(c->visual_keys[c->n_visual++], f->string);
            } else if (!strcmp(f->string, "observation.state")) c->state_dim = dim > 0 ? dim : 0;
            else if (!strcmp(f->string, "action")) c->action_dim = dim > 0 ? dim : 0;
        }
    }
    return 0;
}

/* rtc_config: null, or LeRobot's RTCConfig (its defaults for fields left out) */
static int read_rtc(const cJSON *r, mact_lr_config *c, const char *file, char *err, size_t el)
{
    const cJSON *v = field(r, "rtc_config");
    if (!v) return 0;
    if (!cJSON_IsObject(v)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rtc_config must be a mapping or null", file);
    char mode[32], sched[32];
    int rc;
    c->rtc = 1;
    c->rtc_execution_horizon = 10;
    c->rtc_max_guidance_weight = 10.0f;
    c->rtc_schedule = MACT_RTC_LINEAR;
    if ((rc = get_int(v, "execution_horizon", 1, 1024, &c->rtc_execution_horizon, file, err, el)) ||
        (rc = get_str(v, "mode", mode, sizeof mode, file, err, el)) ||
        (rc = get_str(v, "prefix_attention_schedule", sched, sizeof sched, file, err, el)))
        return rc;
    const cJSON *g = field(v, "max_guidance_weight");
    if (g && (!cJSON_IsNumber(g) || !(g->valuedouble > 0 && g->valuedouble <= 1e6)))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rtc_config.max_guidance_weight must be a positive number", file);
    if (g) c->rtc_max_guidance_weight = (float)g->valuedouble;
    c->rtc_trained = !strcmp(mode, "trained");
    if (*mode && strcmp(mode, "guided") && !c->rtc_trained)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rtc_config.mode '%s' is neither guided nor trained", file, mode);
    if (*sched) {
        char low[32];
        size_t i = 0;
        for (; sched[i] && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)sched[i]);
        low[i] = 0;
        mact_rtc_schedule s;
        if (mact_rtc_schedule_parse(low, &s))
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rtc_config.prefix_attention_schedule '%s' is not ZEROS, "
                             "ONES, LINEAR or EXP", file, sched);
        c->rtc_schedule = (int)s;
    }
    return 0;
}

/* the modes mact computes: continuous flow matching, a continuous-trained (or both) policy */
static int read_modes(const cJSON *r, mact_lr_config *c, const char *file, char *err, size_t el)
{
    char am[32], im[32];
    int rc, one = 1;
    if ((rc = get_str(r, "action_mode", am, sizeof am, file, err, el)) ||
        (rc = get_str(r, "inference_action_mode", im, sizeof im, file, err, el)) ||
        (rc = get_int(r, "n_obs_steps", 1, 1, &one, file, err, el)))
        return rc;
    if (!strcmp(im, "discrete"))
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: inference_action_mode is discrete; mact runs the continuous "
                         "flow-matching head only (set it to continuous)", file);
    if (*im && strcmp(im, "continuous"))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: inference_action_mode '%s' is not continuous", file, im);
    if (!strcmp(am, "discrete"))
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: action_mode is discrete: this policy has no continuous "
                         "action head to run", file);
    if (*am && strcmp(am, "continuous") && strcmp(am, "both"))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: action_mode '%s' is not continuous, both or discrete", file, am);
    c->action_mode_both = !strcmp(am, "both");
    return 0;
}

int mact_lerobot_config_parse(const char *json, size_t len, mact_lr_config *c, char *err, size_t el)
{
    static const char file[] = "config.json (LeRobot policy)";
    memset(c, 0, sizeof *c);
    cJSON *r = NULL;
    int rc = mact_json_parse(json, len, "config.json", &r, err, el);
    if (rc) return rc;
    char type[64], dtype[32], dtype_old[32];
    if (!cJSON_IsObject(r)) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "config.json: not a JSON object"); goto out; }
    if ((rc = get_str(r, "type", type, sizeof type, file, err, el))) goto out;
    if (strcmp(type, "molmoact2")) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "config.json is a LeRobot policy of type '%s'; mact runs MolmoAct2 "
                       "policies (type molmoact2)", type);
        goto out;
    }
    /* LeRobot's defaults for fields a hand-written config leaves out */
    c->chunk_size = c->n_action_steps = 30;
    c->use_sampler = -1;
    c->lora_rank = 64;
    c->lora_alpha = 16;
    strcpy(c->train_mode_vlm, "lora");
    c->num_state_tokens = 256;
    if ((rc = get_str(r, "checkpoint_path", c->checkpoint_path, sizeof c->checkpoint_path, file, err, el)) ||
        (rc = get_str(r, "checkpoint_revision", c->checkpoint_revision, sizeof c->checkpoint_revision, file, err, el)) ||
        (rc = get_str(r, "norm_tag", c->norm_tag, sizeof c->norm_tag, file, err, el)) ||
        (rc = get_str(r, "norm_stats_path", c->norm_stats_path, sizeof c->norm_stats_path, file, err, el)) ||
        (rc = get_int(r, "chunk_size", 1, 1024, &c->chunk_size, file, err, el)) ||
        (rc = get_int(r, "n_action_steps", 1, 1024, &c->n_action_steps, file, err, el)) ||
        (rc = get_int(r, "num_inference_steps", 1, 1000, &c->num_inference_steps, file, err, el)) ||
        (rc = get_str_list(r, "image_keys", c->image_keys, MACT_LR_MAX_CAMERAS, &c->n_image_keys, file, err, el)) ||
        (rc = get_str(r, "setup_type", c->setup_type, sizeof c->setup_type, file, err, el)) ||
        (rc = get_str(r, "control_mode", c->control_mode, sizeof c->control_mode, file, err, el)) ||
        (rc = get_bool(r, "normalize_gripper", &c->normalize_gripper, file, err, el)) ||
        (rc = get_norm_map(r, "normalization_mapping", &c->state_mode, &c->action_mode, file, err, el)) ||
        (rc = get_bool(r, "use_grid_token_sampler", &c->use_sampler, file, err, el)) ||
        (rc = get_int(r, "grid_token_sampler_num_tokens", 1, 1 << 20, &c->sampler_k, file, err, el)) ||
        (rc = get_str(r, "train_mode_vlm", c->train_mode_vlm, sizeof c->train_mode_vlm, file, err, el)) ||
        (rc = get_int(r, "lora_rank", 1, 1 << 20, &c->lora_rank, file, err, el)) ||
        (rc = get_joints(r, &c->joints, file, err, el)) ||
        (rc = get_int(r, "num_state_tokens", 2, 65536, &c->num_state_tokens, file, err, el)) ||
        (rc = get_int(r, "expected_max_action_dim", 1, 1024, &c->expected_max_action_dim, file, err, el)) ||
        (rc = get_str(r, "dtype", dtype, sizeof dtype, file, err, el)) ||
        (rc = get_str(r, "model_dtype", dtype_old, sizeof dtype_old, file, err, el)) ||
        (rc = want_true(r, "normalize_language", file, err, el)) ||
        (rc = want_true(r, "add_setup_tokens", file, err, el)) ||
        (rc = want_true(r, "add_control_tokens", file, err, el)) ||
        (rc = read_modes(r, c, file, err, el)) || (rc = read_features(r, c, file, err, el)) || (rc = read_rtc(r, c, file, err, el)))
        goto out;
    const cJSON *names = field(r, "dataset_feature_names"), *la = field(r, "lora_alpha");
    if (names && ((rc = get_names(names, "observation.state", c->state_names, &c->n_state_names, file, err, el)) ||
                  (rc = get_names(names, "action", c->action_names, &c->n_action_names, file, err, el))))
        goto out;
    if (la && (!cJSON_IsNumber(la) || !(la->valuedouble > 0 && la->valuedouble <= 1e6))) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: lora_alpha must be a positive number", file);
        goto out;
    }
    if (la) c->lora_alpha = la->valuedouble;
    if (!*c->checkpoint_path) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: checkpoint_path is empty: it names the base HF checkpoint (a folder "
                       "or a hub repo id)", file);
        goto out;
    }
    if (c->n_action_steps > c->chunk_size) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: n_action_steps %d exceeds chunk_size %d", file, c->n_action_steps,
                       c->chunk_size);
        goto out;
    }
    if (*c->norm_stats_path && !*c->norm_tag) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: norm_stats_path needs norm_tag to pick an embodiment", file);
        goto out;
    }
    const char *dt = *dtype ? dtype : dtype_old;
    if (!strcmp(dt, "float32")) c->precision = MACT_PRECISION_FP32;
    else if (!strcmp(dt, "bfloat16")) c->precision = MACT_PRECISION_BF16;
    else if (*dt) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s '%s' is neither float32 nor bfloat16", file,
                       *dtype ? "dtype" : "model_dtype", dt);
        goto out;
    }
out:
    cJSON_Delete(r);
    return rc;
}

/* ---- processor pipelines ---- */

/* the steps MolmoAct2's factory writes, in its order (make_molmoact2_pre_post_processors): phase numbers rise */
static const struct { const char *name; int post, phase; } known_steps[] = {
    {"rename_observations_processor", 0, 0}, {"to_batch_processor", 0, 1}, {"molmoact2_state_frame_transform", 0, 2},
    {"molmoact2_masked_normalizer", 0, 3}, {"normalizer_processor", 0, 3}, {"molmoact2_clamp_normalized", 0, 4},
    {"molmoact2_pack_inputs", 0, 5}, {"device_processor", 0, 6},
    {"molmoact2_clamp_action", 1, 0}, {"molmoact2_masked_unnormalizer", 1, 1}, {"unnormalizer_processor", 1, 1},
    {"molmoact2_action_frame_transform", 1, 2}, {"device_processor", 1, 3},
};

static int read_norm_step(const cJSON *cfg, const cJSON *step, mact_lr_pipeline *p, const char *file, char *err,
                          size_t el)
{
    int rc;
    const cJSON *eps = field(cfg, "eps");
    p->has_norm = 1;
    p->eps = 1e-8f;
    if (eps && (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0 && eps->valuedouble < 1)))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: the normalizer's eps must be in (0, 1)", file);
    if (eps) p->eps = (float)eps->valuedouble;
    if ((rc = get_norm_map(cfg, "norm_map", &p->state_mode, &p->action_mode, file, err, el)) ||
        (rc = get_str(step, "state_file", p->state_file, sizeof p->state_file, file, err, el)))
        return rc;
    if (field(cfg, "normalize_observation_keys"))
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: the normalizer's normalize_observation_keys is not "
                         "supported", file);
    if (!*p->state_file)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: the normalizer has no state_file: it holds no statistics, so "
                         "LeRobot would normalise nothing", file);
    if (strchr(p->state_file, '/') || strchr(p->state_file, '\\') || !strcmp(p->state_file, "..") ||
        !strcmp(p->state_file, "."))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: state_file '%s' must be a file name in the policy folder", file,
                         p->state_file);
    return 0;
}

static int read_pack_step(const cJSON *cfg, mact_lr_pipeline *p, const char *file, char *err, size_t el)
{
    int rc;
    char am[32] = "";
    p->has_pack = 1;
    p->num_state_tokens = 256;
    if ((rc = get_str_list(cfg, "image_keys", p->image_keys, MACT_LR_MAX_CAMERAS, &p->n_image_keys, file, err, el)) ||
        (rc = get_str(cfg, "setup_type", p->setup_type, sizeof p->setup_type, file, err, el)) ||
        (rc = get_str(cfg, "control_mode", p->control_mode, sizeof p->control_mode, file, err, el)) ||
        (rc = get_str(cfg, "checkpoint_path", p->checkpoint_path, sizeof p->checkpoint_path, file, err, el)) ||
        (rc = get_str(cfg, "action_mode", am, sizeof am, file, err, el)) ||
        (rc = get_int(cfg, "num_state_tokens", 2, 65536, &p->num_state_tokens, file, err, el)) ||
        (rc = get_int(cfg, "chunk_size", 1, 1024, &p->chunk_size, file, err, el)) ||
        (rc = get_int(cfg, "env_action_dim", 0, 1024, &p->env_action_dim, file, err, el)) ||
        (rc = want_true(cfg, "normalize_language", file, err, el)) ||
        (rc = want_true(cfg, "add_setup_tokens", file, err, el)) ||
        (rc = want_true(cfg, "add_control_tokens", file, err, el)))
        return rc;
    if (!strcmp(am, "discrete"))
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: molmoact2_pack_inputs.action_mode is discrete", file);
    return 0;
}

static int read_rename_step(const cJSON *cfg, mact_lr_pipeline *p, const char *file, char *err, size_t el)
{
    const cJSON *m = field(cfg, "rename_map"), *x;
    if (!m) return 0;
    if (!cJSON_IsObject(m) || cJSON_GetArraySize(m) > MACT_LR_MAX_RENAMES)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rename_map must be a mapping of at most %d names", file,
                         MACT_LR_MAX_RENAMES);
    cJSON_ArrayForEach(x, m) {
        if (!cJSON_IsString(x) || strlen(x->string) >= MACT_NORM_MAX_KEY || strlen(x->valuestring) >= MACT_NORM_MAX_KEY)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: rename_map entries map a name to a name (under %d bytes)",
                             file, MACT_NORM_MAX_KEY);
        strcpy(p->rename_from[p->n_renames], x->string);
        strcpy(p->rename_to[p->n_renames++], x->valuestring);
    }
    return 0;
}

static int read_clamp_step(const cJSON *cfg, mact_lr_pipeline *p, const char *file, char *err, size_t el)
{
    p->has_clamp = 1;
    const cJSON *m = field(cfg, "normalization_masks"), *s, *b;
    if (!m) return 0;
    if (!cJSON_IsObject(m)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: normalization_masks must be a mapping", file);
    if (!(s = field(m, "observation.state"))) return 0;
    if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) < 1 || cJSON_GetArraySize(s) > MACT_NORM_MAX_DIM)
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: normalization_masks.observation.state must list 1..%d booleans",
                         file, MACT_NORM_MAX_DIM);
    cJSON_ArrayForEach(b, s) {
        if (!cJSON_IsBool(b))
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s: normalization_masks.observation.state holds a non-boolean",
                             file);
        p->clamp_state_mask[p->clamp_n_state++] = cJSON_IsTrue(b);
    }
    return 0;
}

static int read_step(const cJSON *step, int k, int *phase, mact_lr_pipeline *p, const char *file, char *err, size_t el)
{
    const cJSON *rn = cJSON_GetObjectItemCaseSensitive(step, "registry_name");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(step, "class"), *cfg = field(step, "config");
    if (!cJSON_IsObject(step) || (!cJSON_IsString(rn) && !cJSON_IsString(cls)))
        return mact_errf(err, el, MACT_ERR_FORMAT, "%s: step %d has neither a registry_name nor a class", file, k);
    if (cfg && !cJSON_IsObject(cfg)) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: step %d's config is not a mapping", file, k);
    const char *name = cJSON_IsString(rn) ? rn->valuestring : cls->valuestring;
    size_t s = 0;
    while (s < sizeof known_steps / sizeof *known_steps &&
           (!cJSON_IsString(rn) || strcmp(known_steps[s].name, name) || known_steps[s].post != p->post))
        s++;
    if (s == sizeof known_steps / sizeof *known_steps)
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: step %d '%.200s' is not a step of LeRobot's MolmoAct2 %s "
                         "that mact applies; refusing to run without it", file, k, name,
                         p->post ? "postprocessor" : "preprocessor");
    if (known_steps[s].phase <= *phase)
        return mact_errf(err, el, MACT_ERR_UNSUPPORTED, "%s: step %d '%s' is out of MolmoAct2's order (or repeated)",
                         file, k, name);
    *phase = known_steps[s].phase;
    cJSON *empty = NULL;
    if (!cfg && !(cfg = empty = cJSON_CreateObject())) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    int rc = 0;
    if (strstr(name, "frame_transform")) { p->has_frame = 1; rc = get_joints(cfg, &p->frame, file, err, el); }
    else if (strstr(name, "normalizer")) rc = read_norm_step(cfg, step, p, file, err, el);
    else if (!strcmp(name, "molmoact2_pack_inputs")) rc = read_pack_step(cfg, p, file, err, el);
    else if (!strcmp(name, "rename_observations_processor")) rc = read_rename_step(cfg, p, file, err, el);
    else if (!strcmp(name, "molmoact2_clamp_normalized")) rc = read_clamp_step(cfg, p, file, err, el);
    else if (!strcmp(name, "molmoact2_clamp_action")) p->has_clamp = 1;
    cJSON_Delete(empty);
    return rc;
}

int mact_lerobot_pipeline_parse(const char *json, size_t len, const char *file, int post, mact_lr_pipeline *p,
                                char *err, size_t el)
{
    memset(p, 0, sizeof *p);
    p->post = post;
    cJSON *r = NULL;
    int rc = mact_json_parse(json, len, file, &r, err, el);
    if (rc) return rc;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(r, "steps"), *st;
    if (!cJSON_IsObject(r) || !cJSON_IsArray(steps)) {
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: expected {\"name\": ..., \"steps\": [...]}", file);
        goto out;
    }
    int k = 0, phase = -1;
    cJSON_ArrayForEach(st, steps) {
        if ((rc = read_step(st, k++, &phase, p, file, err, el))) goto out;
    }
    if (!p->has_norm)
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: no %s step: mact would not know the statistics LeRobot applies",
                       file, post ? "unnormalizer" : "normalizer");
    else if (!post && !p->has_pack)
        rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: no molmoact2_pack_inputs step (the cameras and the prompt's "
                       "fields are there)", file);
out:
    cJSON_Delete(r);
    return rc;
}

/* ---- the normalizer's state file ---- */

static const char *const pair_names[][2] = {{"q01", "q99"}, {"min", "max"}, {"mean", "std"}, {"q10", "q90"}};

/* one FEATURE.STAT tensor into v[dim] (float32 values, as LeRobot loads them); 0, or an error naming it */
static int stat_vec(const mact_st *st, const char *key, const char *stat, double *v, int *dim, int is_mask,
                    const char *file, char *err, size_t el)
{
    char name[320];
    snprintf(name, sizeof name, "%s.%s", key, stat);
    const mact_st_tensor *t = mact_st_find(st, name);
    if (!t) return 1;
    int64_t n = t->ndim ? 1 : 0;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    if (t->ndim != 1 || n < 1 || n > MACT_NORM_MAX_DIM || (*dim && n != *dim))
        return -mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s must be a vector of %s values", file, name,
                          *dim ? "the feature's" : "1..64");
    float f[MACT_NORM_MAX_DIM];
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *b = (const uint8_t *)t->data + (size_t)i * mact_dtype_size(t->dtype);
        double x;
        switch (t->dtype) {
        case MACT_F32: { float y; memcpy(&y, b, 4); x = y; break; }
        case MACT_F64: { double y; memcpy(&y, b, 8); x = y; break; }
        case MACT_BF16: { uint16_t h; memcpy(&h, b, 2); x = mact_bf16_to_f32(h); break; }
        case MACT_F16: { uint16_t h; memcpy(&h, b, 2); x = mact_f16_to_f32(h); break; }
        case MACT_BOOL: case MACT_U8: x = b[0]; break;
        case MACT_I8: x = (int8_t)b[0]; break;
        case MACT_I16: { int16_t y; memcpy(&y, b, 2); x = y; break; }
        case MACT_I32: { int32_t y; memcpy(&y, b, 4); x = y; break; }
        case MACT_I64: { int64_t y; memcpy(&y, b, 8); x = (double)y; break; }
        default: return -mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s has dtype %s", file, name, mact_dtype_name(t->dtype));
        }
        f[i] = (float)x;  /* LeRobot: tensor.to(dtype=torch.float32) */
        if (!is_mask && (!isfinite(f[i]) || fabsf(f[i]) > 1e30f))
            return -mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s[%lld] = %g is not a finite number within +-1e30", file,
                              name, (long long)i, x);
        v[i] = is_mask ? (f[i] != 0) : f[i];
    }
    *dim = (int)n;
    return 0;
}

static int feature_stats(const mact_st *st, const char *key, int mode, mact_feature_stats *f, const char *file,
                         char *err, size_t el)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    int rc;
    for (int k = 0; mode != MACT_NORM_NONE && k < 2; k++) {
        double *dst = k ? f->hi : f->lo;
        if ((rc = stat_vec(st, key, pair_names[mode][k], dst, &f->dim, 0, file, err, el)) < 0) return -rc;
        if (rc)
            return mact_errf(err, el, MACT_ERR_FORMAT, "%s has no %s.%s: the %s normalisation of %s needs %s and %s",
                             file, key, pair_names[mode][k], mode == MACT_NORM_Q01_Q99 ? "QUANTILES" :
                             mode == MACT_NORM_MIN_MAX ? "MIN_MAX" : mode == MACT_NORM_MEAN_STD ? "MEAN_STD" : "QUANTILE10",
                             key, pair_names[mode][0], pair_names[mode][1]);
    }
    double m[MACT_NORM_MAX_DIM];
    if (mode == MACT_NORM_NONE) {  /* the width from any statistic */
        for (int k = 0; k < 4 && !f->dim; k++)
            for (int h = 0; h < 2 && !f->dim; h++)
                if ((rc = stat_vec(st, key, pair_names[k][h], m, &f->dim, 0, file, err, el)) < 0) return -rc;
        if (!f->dim) return mact_errf(err, el, MACT_ERR_FORMAT, "%s has no statistics for %s", file, key);
    }
    if ((rc = stat_vec(st, key, "mask", m, &f->dim, 1, file, err, el)) < 0) return -rc;
    for (int i = 0; i < f->dim; i++) f->mask[i] = rc ? 1 : m[i] != 0;
    return 0;
}

int mact_lerobot_stats_read(const mact_st *st, const char *file, int state_mode, int action_mode,
                            mact_feature_stats *state, mact_feature_stats *action, char *err, size_t el)
{
    int rc = 0;
    if (state && (rc = feature_stats(st, "observation.state", state_mode, state, file, err, el))) return rc;
    if (action && (rc = feature_stats(st, "action", action_mode, action, file, err, el))) return rc;
    return 0;
}

/* ---- the policy's tags ---- */

static int read_json_file(const char *path, char **txt, size_t *len, char *err, size_t el)
{
    return mact_file_read_text(path, LR_JSON_MAX, txt, len, err, el);
}

static int read_pipeline(const char *dir, const char *name, int post, mact_lr_pipeline *p, char *err, size_t el)
{
    char path[4400], *txt = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = read_json_file(path, &txt, &len, err, el);
    if (!rc) rc = mact_lerobot_pipeline_parse(txt, len, name, post, p, err, el);
    free(txt);
    return rc;
}

static int read_state_file(const char *dir, const mact_lr_pipeline *p, mact_feature_stats *state,
                           mact_feature_stats *action, char *err, size_t el)
{
    char path[4400];
    mact_st *st = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, p->state_file);
    int rc = mact_st_open(path, &st, err, el) ? MACT_ERR_FORMAT : 0;
    if (!rc) rc = mact_lerobot_stats_read(st, p->state_file, p->state_mode, p->action_mode, state, action, err, el);
    mact_st_close(st);
    return rc;
}

static int cmp_key(const void *a, const void *b) { return strcmp(a, b); }

/* the camera order: the preprocessor's image_keys, else the config's, else the VISUAL features sorted (LeRobot's
 * fallback sorts the observation's image keys) */
static void set_cameras(mact_norm_tag *t, const mact_lr_pipeline *pre, const mact_lr_config *c)
{
    char keys[MACT_LR_MAX_CAMERAS][MACT_NORM_MAX_KEY];
    int n = pre && pre->n_image_keys ? pre->n_image_keys : c->n_image_keys ? c->n_image_keys : c->n_visual;
    memcpy(keys, pre && pre->n_image_keys ? pre->image_keys : c->n_image_keys ? c->image_keys : c->visual_keys,
           sizeof keys);
    if (!(pre && pre->n_image_keys) && !c->n_image_keys) qsort(keys, (size_t)n, sizeof keys[0], cmp_key);
    t->n_cameras = n;
    for (int i = 0; i < n && i < MACT_NORM_MAX_CAMERAS; i++) strcpy(t->camera_keys[i], keys[i]);
}

/* the dims' names from the config's dataset_feature_names, when it names each dim of the feature (display only) */
static void set_names(mact_feature_stats *f, const char (*names)[128], int n)
{
    if (n != f->dim) return;
    const char *v[MACT_NORM_MAX_DIM];
    for (int i = 0; i < n; i++) v[i] = names[i];
    char *s = mact_norm_join_names(v, n);
    if (!s) return;
    free(f->names);
    f->names = s;
}

static int check_frame(const mact_joint_frame *j, int dim, const char *what, const char *file, char *err, size_t el)
{
    return j->n > dim ? mact_errf(err, el, MACT_ERR_FORMAT, "%s: joint_signs has %d values but the %s has %d dims",
                                  file, j->n, what, dim) : 0;
}

static int tags_from_processors(const char *dir, const mact_lr_config *c, mact_norm_stats *ns, mact_lr_pipeline *pre,
                                char *src, size_t cap, char *err, size_t el)
{
    mact_lr_pipeline *post = calloc(1, sizeof *post);
    mact_norm_tag *t = calloc(1, sizeof *t);
    int rc = !post || !t ? mact_errf(err, el, MACT_ERR_NOMEM, "out of memory") : 0;
    if (!rc) rc = read_pipeline(dir, "policy_preprocessor.json", 0, pre, err, el);
    if (!rc) rc = read_pipeline(dir, "policy_postprocessor.json", 1, post, err, el);
    if (!rc) rc = read_state_file(dir, pre, &t->state, NULL, err, el);
    if (!rc) rc = read_state_file(dir, post, NULL, &t->action, err, el);
    if (rc) goto out;
    if (pre->eps != post->eps) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "the normalizer's eps (%g) and the unnormalizer's (%g) differ",
                       (double)pre->eps, (double)post->eps);
        goto out;
    }
    if (pre->clamp_n_state && (pre->clamp_n_state != t->state.dim ||
                               memcmp(pre->clamp_state_mask, t->state.mask, (size_t)t->state.dim))) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "policy_preprocessor.json: molmoact2_clamp_normalized's state mask "
                       "differs from the normalizer's");
        goto out;
    }
    if (*pre->checkpoint_path && strcmp(pre->checkpoint_path, c->checkpoint_path)) {
        rc = mact_errf(err, el, MACT_ERR_UNSUPPORTED, "policy_preprocessor.json's molmoact2_pack_inputs takes the "
                       "tokenizer from '%s' but config.json's checkpoint_path is '%s': LeRobot would read them from two "
                       "bases; make both name the same one", pre->checkpoint_path, c->checkpoint_path);
        goto out;
    }
    if ((rc = check_frame(&pre->frame, t->state.dim, "state", "policy_preprocessor.json", err, el)) ||
        (rc = check_frame(&post->frame, t->action.dim, "action", "policy_postprocessor.json", err, el)))
        goto out;
    snprintf(t->name, sizeof t->name, "%s", MACT_LR_POLICY_TAG);
    t->lerobot = 1;
    t->eps = pre->eps;
    t->clamp_state = pre->has_clamp;
    t->clamp_actions = post->has_clamp;
    t->state_frame = pre->frame;
    t->action_frame = post->frame;
    t->action_horizon = c->chunk_size;
    t->n_action_steps = c->n_action_steps;
    snprintf(t->setup_type, sizeof t->setup_type, "%s", pre->setup_type);
    snprintf(t->control_mode, sizeof t->control_mode, "%s", pre->control_mode);
    set_cameras(t, pre, c);
    set_names(&t->state, c->state_names, c->n_state_names);
    set_names(&t->action, c->action_names, c->n_action_names);
    ns->tags = t;
    t = NULL;
    ns->n_tags = 1;
    ns->default_tag = 0;
    snprintf(src, cap, "the policy's processors (%s, %s)", pre->state_file, post->state_file);
out:
    free(post);
    free(t);
    return rc;
}

static int has_gripper(const char *s)
{
    for (; *s; s++)
        if (!strncasecmp(s, "gripper", 7)) return 1;
    return 0;
}

/* LeRobot's _add_gripper_masks_to_stats for one feature: normalize_gripper, else the file's mask, else the names */
static int gripper_mask(mact_feature_stats *f, const mact_lr_config *c, int action, const char *tag, char *err, size_t el)
{
    const int n = action ? c->n_action_names : c->n_state_names;
    const char (*names)[128] = action ? c->action_names : c->state_names;
    if (c->normalize_gripper) { memset(f->mask, 1, sizeof f->mask); return 0; }
    if (f->mask_given) return 0;
    if (n != f->dim)
        return mact_errf(err, el, MACT_ERR_FORMAT, "norm tag %s: normalize_gripper is false and config.json's "
                         "dataset_feature_names.%s has %d names for %d dims, so the gripper dim cannot be found; set "
                         "dataset_feature_names or normalize_gripper (as LeRobot asks)", tag,
                         action ? "action" : "observation.state", n, f->dim);
    for (int i = 0; i < n; i++) f->mask[i] = !has_gripper(names[i]);
    return 0;
}

static int tags_from_stats(const mact_lr_config *c, const char *stats_path, mact_norm_stats *ns, char *src, size_t cap,
                           char *err, size_t el)
{
    const char *path = *c->norm_stats_path ? c->norm_stats_path : stats_path;
    char *txt = NULL, e2[1024];
    int rc = read_json_file(path, &txt, NULL, e2, sizeof e2);
    if (rc) return mact_errf(err, el, rc, "a LeRobot policy without policy_preprocessor.json normalises with the base's "
                             "norm stats: %s", e2);
    rc = mact_norm_stats_parse_modes(txt, c->state_mode, c->action_mode, ns, err, el);
    free(txt);
    for (int i = 0; !rc && i < ns->n_tags; i++) {
        mact_norm_tag *t = &ns->tags[i];
        t->lerobot = 1;
        t->eps = 1e-8f;
        t->clamp_state = t->clamp_actions = 1;
        t->state_frame = t->action_frame = c->joints;
        t->action_horizon = c->chunk_size;
        t->n_action_steps = c->n_action_steps;
        if (*c->setup_type) snprintf(t->setup_type, sizeof t->setup_type, "%s", c->setup_type);
        if (*c->control_mode) snprintf(t->control_mode, sizeof t->control_mode, "%s", c->control_mode);
        set_names(&t->state, c->state_names, c->n_state_names);
        set_names(&t->action, c->action_names, c->n_action_names);
        /* the tag's camera_keys stand when the config names none and they are among its VISUAL features */
        int all = 1;
        for (int k = 0; k < t->n_cameras && k < MACT_NORM_MAX_CAMERAS && c->n_visual; k++) {
            int f = 0;
            while (f < c->n_visual && strcmp(c->visual_keys[f], t->camera_keys[k])) f++;
            all &= f < c->n_visual;
        }
        if (c->n_image_keys || !t->n_cameras || !all) {
            memset(t->camera_keys, 0, sizeof t->camera_keys);
            t->n_cameras = c->n_image_keys ? c->n_image_keys : c->n_visual;
            for (int k = 0; k < t->n_cameras && k < MACT_NORM_MAX_CAMERAS; k++)
                strcpy(t->camera_keys[k], c->n_image_keys ? c->image_keys[k] : c->visual_keys[k]);
        }
        if ((rc = gripper_mask(&t->state, c, 0, t->name, err, el)) || (rc = gripper_mask(&t->action, c, 1, t->name, err, el)) ||
            (rc = check_frame(&c->joints, t->state.dim, "state", t->name, err, el)) ||
            (rc = check_frame(&c->joints, t->action.dim, "action", t->name, err, el)))
            break;
    }
    if (!rc && *c->norm_tag) {
        const mact_norm_tag *t = mact_norm_find_tag(ns, c->norm_tag, e2, sizeof e2);
        if (!t) rc = mact_errf(err, el, MACT_ERR_MODEL, "config.json's norm_tag: %s (in %s)", e2, path);
        else ns->default_tag = (int)(t - ns->tags);
    }
    snprintf(src, cap, "%s (no policy_preprocessor.json: the config's norm_tag over the base's statistics)", path);
    return rc;
}

int mact_lerobot_tags(const char *dir, const mact_lr_config *c, const char *stats_path, mact_norm_stats *ns,
                      mact_lr_pipeline *pre, char *src, size_t cap, char *err, size_t el)
{
    char path[4400];
    memset(ns, 0, sizeof *ns);
    memset(pre, 0, sizeof *pre);
    ns->default_tag = -1;
    snprintf(path, sizeof path, "%s/policy_preprocessor.json", dir);
    int rc = !mact_file_absent(path) ? tags_from_processors(dir, c, ns, pre, src, cap, err, el)
                                       : tags_from_stats(c, stats_path, ns, src, cap, err, el);
    if (rc) mact_norm_stats_free(ns);
    return rc;
}

int mact_lerobot_frame_parse(const char *json, size_t len, const char *file, int post, mact_joint_frame *j, int *found,
                             char *err, size_t el)
{
    cJSON *r = NULL;
    int rc = mact_json_parse(json, len, file, &r, err, el);
    memset(j, 0, sizeof *j);
    *found = 0;
    if (rc) return rc;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(r, "steps"), *st;
    const char *want = post ? "molmoact2_action_frame_transform" : "molmoact2_state_frame_transform";
    if (!cJSON_IsArray(steps)) rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: no \"steps\" list", file);
    else cJSON_ArrayForEach(st, steps) {
        const cJSON *rn = cJSON_GetObjectItemCaseSensitive(st, "registry_name"), *cfg = field(st, "config");
        if (!cJSON_IsString(rn) || strcmp(rn->valuestring, want)) continue;
        if (*found) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: two %s steps", file, want); break; }
        *found = 1;
        if (cfg && !cJSON_IsObject(cfg)) { rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s's config is not a mapping", file, want); break; }
        if (cfg && (rc = get_joints(cfg, j, file, err, el))) break;
    }
    cJSON_Delete(r);
    return rc;
}
