/* config.json (HF MolmoAct2Config, docs/spec/molmoact2.md section 8) -> mact_config.
 * Unknown keys are ignored; a missing key takes the documented class default. Values that would make a
 * stage compute something other than what the checkpoint was trained with (norm_after, rope_scaling,
 * causal action attention) are refused rather than ignored. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "model/model.h"

static const cJSON *obj(const cJSON *o, const char *k)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

/* Reads a number; rejects a present key of the wrong type so a typo'd config fails loudly. */
static int get_num(const cJSON *o, const char *sect, const char *k, double def, double *out, char *err,
                   size_t errlen)
{
    const cJSON *v = obj(o, k);
    if (!v) { *out = def; return 0; }
    if (cJSON_IsBool(v)) { *out = cJSON_IsTrue(v); return 0; }
    if (!cJSON_IsNumber(v))
        return mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: %s%s must be a number", sect, k);
    *out = v->valuedouble;
    return 0;
}

typedef struct { const char *key; int *dst; int def; int min; } int_field;

static int read_ints(const cJSON *o, const char *sect, const int_field *f, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        double d;
        int rc = get_num(o, sect, f[i].key, f[i].def, &d, err, errlen);
        if (rc) return rc;
        if (d != floor(d) || d < f[i].min || d > 1e9)
            return mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: %s%s = %g is out of range (>= %d integer)",
                             sect, f[i].key, d, f[i].min);
        *f[i].dst = (int)d;
    }
    return 0;
}

static int get_i64(const cJSON *o, const cJSON *alt, const char *k, int64_t def, int64_t *out)
{
    const cJSON *v = obj(o, k);
    if (!v) v = obj(alt, k);
    *out = (v && cJSON_IsNumber(v)) ? (int64_t)v->valuedouble : def;
    return 0;
}

static int get_bool(const cJSON *o, const char *k, int def)
{
    const cJSON *v = obj(o, k);
    if (!v) return def;
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    return def;
}

static const char *get_str(const cJSON *o, const char *k, const char *def)
{
    const cJSON *v = obj(o, k);
    return (v && cJSON_IsString(v)) ? v->valuestring : def;
}

int mact_config_parse(const char *json_text, mact_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    cJSON *root = cJSON_Parse(json_text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: not a well-formed JSON object");
    }
    int rc = 0;
    const cJSON *vit = obj(root, "vit_config"), *ad = obj(root, "adapter_config");
    const cJSON *tx = obj(root, "text_config"), *ae = obj(root, "action_expert_config");
    if (!vit || !ad || !tx || !ae) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT,
                       "config.json: vit_config, adapter_config, text_config and action_expert_config are all "
                       "required (missing: %s%s%s%s)", vit ? "" : "vit_config ", ad ? "" : "adapter_config ",
                       tx ? "" : "text_config ", ae ? "" : "action_expert_config");
        goto out;
    }

    /* ---- vit_config ---- */
    int vit_kv = 0;
    int_field vf[] = {
        {"hidden_size", &c->vit_hidden, 1152, 1}, {"intermediate_size", &c->vit_inter, 4304, 1},
        {"num_hidden_layers", &c->vit_layers, 27, 1}, {"num_attention_heads", &c->vit_heads, 16, 1},
        {"num_key_value_heads", &vit_kv, 16, 1}, {"head_dim", &c->vit_head_dim, 72, 1},
        {"image_patch_size", &c->patch, 14, 1}, {"image_num_pos", &c->image_num_pos, 577, 1},
    };
    if ((rc = read_ints(vit, "vit_config.", vf, sizeof vf / sizeof vf[0], err, errlen))) goto out;
    double d;
    if ((rc = get_num(vit, "vit_config.", "layer_norm_eps", 1e-6, &d, err, errlen))) goto out;
    c->vit_eps = (float)d;
    c->image_h = c->image_w = 378;
    const cJSON *isz = obj(vit, "image_default_input_size");
    if (isz) {
        if (!cJSON_IsArray(isz) || cJSON_GetArraySize(isz) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(isz, 0)) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(isz, 1))) {
            rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: vit_config.image_default_input_size must be [h, w]");
            goto out;
        }
        c->image_h = cJSON_GetArrayItem(isz, 0)->valueint;
        c->image_w = cJSON_GetArrayItem(isz, 1)->valueint;
    }
    const char *act = get_str(vit, "hidden_act", "gelu_pytorch_tanh");
    if (strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_tanh")) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: vit_config.hidden_act \"%s\" unsupported "
                       "(only gelu_pytorch_tanh)", act);
        goto out;
    }
    if (vit_kv != c->vit_heads) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: ViT with num_key_value_heads %d != heads %d",
                       vit_kv, c->vit_heads);
        goto out;
    }
    if (c->image_h <= 0 || c->image_w <= 0 || c->image_h % c->patch || c->image_w % c->patch) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: image size %dx%d is not a multiple of patch %d",
                       c->image_h, c->image_w, c->patch);
        goto out;
    }
    c->grid_h = c->image_h / c->patch;
    c->grid_w = c->image_w / c->patch;

    /* ---- adapter_config ---- */
    int ad_kv = 0;
    int_field af[] = {
        {"hidden_size", &c->pool_hidden, 1152, 1}, {"num_attention_heads", &c->pool_heads, 16, 1},
        {"num_key_value_heads", &ad_kv, 16, 1}, {"head_dim", &c->pool_head_dim, 72, 1},
        {"intermediate_size", &c->proj_inter, 18944, 1},
    };
    if ((rc = read_ints(ad, "adapter_config.", af, sizeof af / sizeof af[0], err, errlen))) goto out;
    if (ad_kv != c->pool_heads) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: pooling with num_key_value_heads %d != heads %d",
                       ad_kv, c->pool_heads);
        goto out;
    }
    const cJSON *vl = obj(ad, "vit_layers");
    int taps_def[2] = {-3, -9};
    int nt = vl ? cJSON_GetArraySize(vl) : 2;
    if ((vl && !cJSON_IsArray(vl)) || nt < 1 || nt > MACT_MAX_TAPS) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: adapter_config.vit_layers must list 1..%d layers",
                       MACT_MAX_TAPS);
        goto out;
    }
    c->n_taps = nt;
    for (int i = 0; i < nt; i++) {
        int t = vl ? cJSON_GetArrayItem(vl, i)->valueint : taps_def[i];
        /* Negative taps count from vit_config.num_hidden_layers, as upstream does; the original checkpoint
         * stores fewer blocks (27 configured, 25 stored), so the loader checks them against what is stored. */
        int a = t < 0 ? c->vit_layers + t : t;
        if (a < 0 || a >= c->vit_layers) {
            rc = mact_errf(err, errlen, MACT_ERR_MODEL, "config.json: adapter_config.vit_layers[%d] = %d is outside "
                           "the %d ViT layers", i, t, c->vit_layers);
            goto out;
        }
        c->taps[i] = a;
    }
    c->pool_h = c->pool_w = 2;
    const cJSON *ps = obj(ad, "pooling_size");
    if (ps && cJSON_IsArray(ps) && cJSON_GetArraySize(ps) == 2) {
        c->pool_h = cJSON_GetArrayItem(ps, 0)->valueint;
        c->pool_w = cJSON_GetArrayItem(ps, 1)->valueint;
    }
    if (c->pool_h < 1 || c->pool_w < 1 || c->pool_h > 4 || c->pool_w > 4) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: adapter_config.pooling_size must be within 1..4");
        goto out;
    }
    c->pooled_h = (c->grid_h + c->pool_h - 1) / c->pool_h;
    c->pooled_w = (c->grid_w + c->pool_w - 1) / c->pool_w;
    if (!get_bool(ad, "pooling_attention_mask", 0)) c->pooling_mask = MACT_POOL_NONE;
    else c->pooling_mask = strcmp(get_str(ad, "attn_implementation", "sdpa"), "eager") ? MACT_POOL_SDPA : MACT_POOL_EAGER;

    /* ---- text_config ---- */
    int_field tf[] = {
        {"hidden_size", &c->d_model, 3584, 1}, {"num_attention_heads", &c->n_heads, 28, 1},
        {"num_key_value_heads", &c->n_kv_heads, 4, 1}, {"head_dim", &c->head_dim, 128, 2},
        {"num_hidden_layers", &c->n_layers, 48, 1}, {"intermediate_size", &c->ff_inter, 18944, 1},
        {"max_position_embeddings", &c->max_position_embeddings, 4096, 1},
    };
    if ((rc = read_ints(tx, "text_config.", tf, sizeof tf / sizeof tf[0], err, errlen))) goto out;
    if ((rc = get_num(tx, "text_config.", "vocab_size", 152064, &d, err, errlen))) goto out;
    c->vocab_size = (int64_t)d;
    if ((rc = get_num(tx, "text_config.", "additional_vocab_size", 128, &d, err, errlen))) goto out;
    c->additional_vocab_size = (int64_t)d;
    if ((rc = get_num(tx, "text_config.", "layer_norm_eps", 1e-6, &d, err, errlen))) goto out;
    c->eps = (float)d;
    if ((rc = get_num(tx, "text_config.", "rope_theta", 1e6, &d, err, errlen))) goto out;
    c->rope_theta = (float)d;
    c->qkv_bias = get_bool(tx, "qkv_bias", 1);
    if (!get_bool(tx, "use_qk_norm", 0)) c->qk_norm = MACT_QKNORM_NONE;
    else {
        const char *t = get_str(tx, "qk_norm_type", "olmo");
        if (!strcmp(t, "qwen3")) c->qk_norm = MACT_QKNORM_QWEN3;
        else if (!strcmp(t, "olmo")) c->qk_norm = MACT_QKNORM_OLMO;
        else { rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: text_config.qk_norm_type \"%s\"", t); goto out; }
    }
    if (get_bool(tx, "norm_after", 0)) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: text_config.norm_after=true is not supported");
        goto out;
    }
    if (obj(tx, "rope_scaling")) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: text_config.rope_scaling is not supported");
        goto out;
    }
    if (c->n_heads % c->n_kv_heads) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: %d attention heads not divisible by %d kv heads",
                       c->n_heads, c->n_kv_heads);
        goto out;
    }
    if (c->head_dim % 2) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: text head_dim %d must be even for RoPE", c->head_dim);
        goto out;
    }

    /* ---- action_expert_config ---- */
    int ffn_mult = 256;
    int_field ef[] = {
        {"hidden_size", &c->ae_hidden, 1024, 1}, {"num_layers", &c->ae_layers, 32, 1},
        {"num_heads", &c->ae_heads, 16, 1}, {"ffn_multiple_of", &ffn_mult, 256, 1},
        {"timestep_embed_dim", &c->ae_tdim, 256, 4},
    };
    if ((rc = read_ints(ae, "action_expert_config.", ef, sizeof ef / sizeof ef[0], err, errlen))) goto out;
    double mlp_ratio;
    if ((rc = get_num(ae, "action_expert_config.", "mlp_ratio", 8.0 / 3.0, &mlp_ratio, err, errlen))) goto out;
    if ((rc = get_num(ae, "action_expert_config.", "qk_norm_eps", 1e-6, &d, err, errlen))) goto out;
    c->ae_eps = (float)d;
    int inner = (int)(c->ae_hidden * mlp_ratio);
    c->ae_inter = (inner + ffn_mult - 1) / ffn_mult * ffn_mult;
    c->ae_context_norm = get_bool(ae, "context_layer_norm", 1);
    c->ae_qk_norm = get_bool(ae, "qk_norm", 1);
    c->ae_rope = get_bool(ae, "rope", 1);
    if (get_bool(ae, "causal_attn", 0)) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: action_expert_config.causal_attn=true is not supported");
        goto out;
    }
    if (c->ae_hidden % c->ae_heads || (c->ae_hidden / c->ae_heads) % 2 || c->ae_tdim % 2) {
        rc = mact_errf(err, errlen, MACT_ERR_FORMAT, "config.json: action expert hidden %d / heads %d / timestep dim %d "
                       "must give an even head_dim and an even timestep dim", c->ae_hidden, c->ae_heads, c->ae_tdim);
        goto out;
    }
    c->ae_head_dim = c->ae_hidden / c->ae_heads;
    if (c->ae_layers != c->n_layers) {
        rc = mact_errf(err, errlen, MACT_ERR_MODEL, "config.json: action_expert_config.num_layers %d must equal "
                       "text_config.num_hidden_layers %d (one expert block per LLM layer's KV)", c->ae_layers, c->n_layers);
        goto out;
    }

    /* ---- top level ---- */
    int_field top[] = {
        {"max_action_dim", &c->max_action_dim, 32, 1}, {"max_action_horizon", &c->max_action_horizon, 30, 1},
        {"flow_matching_num_steps", &c->flow_steps, 10, 1}, {"num_state_tokens", &c->num_state_tokens, 256, 0},
    };
    if ((rc = read_ints(root, "", top, sizeof top / sizeof top[0], err, errlen))) goto out;
    int64_t v0 = c->vocab_size;  /* docs/spec/molmoact2.md 4.2: image tokens sit at vocab_size + index */
    get_i64(root, NULL, "image_start_token_id", v0 + 0, &c->image_start_id);
    get_i64(root, NULL, "image_end_token_id", v0 + 1, &c->image_end_id);
    get_i64(root, NULL, "image_patch_id", v0 + 2, &c->image_patch_id);
    get_i64(root, NULL, "image_col_id", v0 + 3, &c->image_col_id);
    get_i64(root, NULL, "low_res_image_start_token_id", v0 + 4, &c->low_res_image_start_id);
    get_i64(root, NULL, "image_low_res_id", v0 + 6, &c->image_low_res_id);
    get_i64(root, NULL, "frame_start_token_id", v0 + 7, &c->frame_start_id);
    get_i64(root, NULL, "frame_end_token_id", v0 + 8, &c->frame_end_id);
    get_i64(root, tx, "eos_token_id", -1, &c->eos_id);
    get_i64(root, NULL, "action_start_token_id", -1, &c->action_start_id);
    get_i64(root, NULL, "action_end_token_id", -1, &c->action_end_id);
    get_i64(root, NULL, "action_output_token_id", -1, &c->action_output_id);
    get_i64(root, NULL, "state_start_token_id", -1, &c->state_start_id);
    get_i64(root, NULL, "state_end_token_id", -1, &c->state_end_id);
    get_i64(root, NULL, "state_token_start_id", -1, &c->state_token_start_id);
    c->use_sampler = get_bool(root, "use_grid_token_sampler", 0);
    c->encoder_mask = strcmp(get_str(root, "action_mode", "both"), "both") ? MACT_ENC_ALL : MACT_ENC_DROP_EOS;
out:
    cJSON_Delete(root);
    return rc;
}
