/* config.json (HF MolmoAct2Config, docs/spec/molmoact2.md section 8) -> mact_config.
 * Unknown keys are ignored; a missing key takes the documented class default. A present key must have the
 * right JSON type and a value in range, and a value that would make a stage compute something other than
 * what the checkpoint was trained with (another activation, attention implementation, action mode, pooling
 * size, norm_after, rope_scaling, causal action attention, ...) is refused by name rather than replaced by
 * a default. The file itself must be strict JSON (src/base/json.h: UTF-8, no duplicated key, depth). Size
 * fields are bounded (docs/limits.md) so that every product the stages form fits in 32 bits. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "base/json.h"
#include "model/model.h"

/* Largest max_action_dim accepted: a sanity bound (real checkpoints use 32) that keeps the per-dimension
 * buffers and noise sizes small (docs/limits.md). */
#define MACT_MAX_ACTION_DIM 256

#define CFG_ERR(code, ...) mact_errf(err, errlen, code, "config.json: " __VA_ARGS__)

static const cJSON *obj(const cJSON *o, const char *k)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

/* A number (not a bool, not a string); finite. */
static int get_num(const cJSON *o, const char *sect, const char *k, double def, double lo, double hi, double *out,
                   char *err, size_t errlen)
{
    const cJSON *v = obj(o, k);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s must be a number", sect, k);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s = %g is out of range (%g..%g)", sect, k, v->valuedouble, lo, hi);
    *out = v->valuedouble;
    return 0;
}

typedef struct { const char *key; int *dst; int def; int min; int max; } int_field;

static int get_int(const cJSON *o, const char *sect, const char *k, int def, int lo, int hi, int *out, char *err,
                   size_t errlen)
{
    const cJSON *v = obj(o, k);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s must be an integer", sect, k);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s = %g is out of range (%d..%d)", sect, k, v->valuedouble, lo, hi);
    *out = (int)v->valuedouble;
    return 0;
}

static int read_ints(const cJSON *o, const char *sect, const int_field *f, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int rc = get_int(o, sect, f[i].key, f[i].def, f[i].min, f[i].max, f[i].dst, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

static int get_bool(const cJSON *o, const char *sect, const char *k, int def, int *out, char *err, size_t errlen)
{
    const cJSON *v = obj(o, k);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsBool(v)) return CFG_ERR(MACT_ERR_FORMAT, "%s%s must be true or false", sect, k);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_str(const cJSON *o, const char *sect, const char *k, const char *def, const char **out, char *err,
                   size_t errlen)
{
    const cJSON *v = obj(o, k);
    if (!v) { *out = def; return 0; }
    if (!cJSON_IsString(v)) return CFG_ERR(MACT_ERR_FORMAT, "%s%s must be a string", sect, k);
    *out = v->valuestring;
    return 0;
}

/* A string field whose value must be one of the NULL-terminated list (the first is the default). */
static int get_choice(const cJSON *o, const char *sect, const char *k, const char *const *ok, const char **out,
                      char *err, size_t errlen)
{
    const char *s = NULL;
    int rc = get_str(o, sect, k, ok[0], &s, err, errlen);
    if (rc) return rc;
    for (int i = 0; ok[i]; i++)
        if (!strcmp(s, ok[i])) { *out = ok[i]; return 0; }
    char list[256] = "";
    size_t l = 0;
    for (int i = 0; ok[i] && l < sizeof list; i++) l += (size_t)snprintf(list + l, sizeof list - l, "%s\"%s\"", i ? ", " : "", ok[i]);
    return CFG_ERR(MACT_ERR_UNSUPPORTED, "%s%s \"%.100s\" is not supported (supported: %s)", sect, k, s, list);
}

/* A bool field of which only one value is implemented. */
static int want_bool(const cJSON *o, const char *sect, const char *k, int implemented, char *err, size_t errlen)
{
    int v = 0;
    int rc = get_bool(o, sect, k, implemented, &v, err, errlen);
    if (rc) return rc;
    if (v != implemented)
        return CFG_ERR(MACT_ERR_UNSUPPORTED, "%s%s=%s is not supported (only %s)", sect, k, v ? "true" : "false",
                       implemented ? "true" : "false");
    return 0;
}

/* A token id: an integer in [0, vocab_total) when present; an absent key takes def, or is an error naming
 * the key when def < 0 (required). */
static int get_id(const cJSON *o, const cJSON *alt, const char *k, int64_t def, int64_t vocab_total, int64_t *out,
                  char *err, size_t errlen)
{
    const cJSON *v = obj(o, k);
    const char *sect = "";
    if (!v && alt) { v = obj(alt, k); sect = "text_config."; }
    if (!v) {
        if (def < 0) return CFG_ERR(MACT_ERR_FORMAT, "%s is missing (a required token id)", k);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s must be one integer token id", sect, k);
    if (!(v->valuedouble >= 0 && v->valuedouble < (double)vocab_total))
        return CFG_ERR(MACT_ERR_FORMAT, "%s%s = %.0f is outside the vocabulary (0..%lld: vocab_size + "
                       "additional_vocab_size)", sect, k, v->valuedouble, (long long)vocab_total - 1);
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* One weight matrix rows x cols must stay below 2^31 elements (the stages index with int products). */
static int small_product(const char *what, int64_t a, int64_t b, char *err, size_t errlen)
{
    if (a * b > INT32_MAX)
        return CFG_ERR(MACT_ERR_UNSUPPORTED, "%s = %lld x %lld elements exceeds the limit of 2^31-1", what,
                       (long long)a, (long long)b);
    return 0;
}

/* the values of the string fields that the stages implement (get_choice: the first is the default) */
static const char *const act_gelu[] = {"gelu_pytorch_tanh", "gelu_tanh", NULL};
static const char *const act_silu[] = {"silu", "swish", NULL};
static const char *const attn_any[] = {"sdpa", "eager", "flash_attention_2", NULL};
static const char *const attn_pool[] = {"sdpa", "eager", NULL};
static const char *const modes[] = {"both", "continuous", NULL};
static const char *const state_fmt[] = {"discrete", NULL};
static const char *const crop[] = {"resize", NULL};
static const char *const ns_file[] = {"norm_stats.json", NULL};
static const char *const qk_types[] = {"olmo", "qwen3", NULL};

/* vit_config: the ViT, its image size and patch grid */
static int parse_vit(const cJSON *vit, mact_config *c, char *err, size_t errlen)
{
    int rc;
    const char *s = NULL;
    int vit_kv = 0;
    int_field vf[] = {
        {"hidden_size", &c->vit_hidden, 1152, 1, 16384}, {"intermediate_size", &c->vit_inter, 4304, 1, 131072},
        {"num_hidden_layers", &c->vit_layers, 27, 1, 256}, {"num_attention_heads", &c->vit_heads, 16, 1, 256},
        {"num_key_value_heads", &vit_kv, 16, 1, 256}, {"head_dim", &c->vit_head_dim, 72, 1, 1024},
        {"image_patch_size", &c->patch, 14, 1, 64}, {"image_num_pos", &c->image_num_pos, 577, 1, 65536},
    };
    if ((rc = read_ints(vit, "vit_config.", vf, sizeof vf / sizeof vf[0], err, errlen))) return rc;
    double d;
    if ((rc = get_num(vit, "vit_config.", "layer_norm_eps", 1e-6, 1e-30, 1, &d, err, errlen))) return rc;
    c->vit_eps = (float)d;
    c->image_h = c->image_w = 378;
    const cJSON *isz = obj(vit, "image_default_input_size");
    if (isz) {
        const cJSON *h = cJSON_GetArrayItem(isz, 0), *w = cJSON_GetArrayItem(isz, 1);
        if (!cJSON_IsArray(isz) || cJSON_GetArraySize(isz) != 2 || !cJSON_IsNumber(h) || !cJSON_IsNumber(w) ||
            h->valuedouble != floor(h->valuedouble) || w->valuedouble != floor(w->valuedouble) ||
            !(h->valuedouble >= 1 && h->valuedouble <= 4096) || !(w->valuedouble >= 1 && w->valuedouble <= 4096))
            return CFG_ERR(MACT_ERR_FORMAT, "vit_config.image_default_input_size must be [h, w], integers 1..4096");
        c->image_h = (int)h->valuedouble;
        c->image_w = (int)w->valuedouble;
    }
    if ((rc = get_choice(vit, "vit_config.", "hidden_act", act_gelu, &s, err, errlen))) return rc;
    if ((rc = get_choice(vit, "vit_config.", "attn_implementation", attn_any, &s, err, errlen))) return rc;
    if (vit_kv != c->vit_heads)
        return CFG_ERR(MACT_ERR_UNSUPPORTED, "vit_config.num_key_value_heads %d != num_attention_heads %d is not "
                       "supported", vit_kv, c->vit_heads);
    if (c->image_h % c->patch || c->image_w % c->patch)
        return CFG_ERR(MACT_ERR_FORMAT, "vit_config.image_default_input_size %dx%d is not a multiple of "
                       "image_patch_size %d", c->image_h, c->image_w, c->patch);
    c->grid_h = c->image_h / c->patch;
    c->grid_w = c->image_w / c->patch;
    if ((rc = small_product("vit_config: intermediate_size x hidden_size", c->vit_inter, c->vit_hidden, err, errlen)) ||
        (rc = small_product("vit_config: heads x head_dim x hidden_size", (int64_t)c->vit_heads * c->vit_head_dim,
                            c->vit_hidden, err, errlen)) ||
        (rc = small_product("vit_config: patches x hidden_size", (int64_t)c->grid_h * c->grid_w, c->vit_hidden, err,
                            errlen)))
        return rc;
    return 0;
}

/* adapter_config: the ViT taps, the 2x2 attention pooling and the projector */
static int parse_adapter(const cJSON *ad, mact_config *c, char *err, size_t errlen)
{
    int rc;
    const char *s = NULL;
    int ad_kv = 0;
    int_field af[] = {
        {"hidden_size", &c->pool_hidden, 1152, 1, 16384}, {"num_attention_heads", &c->pool_heads, 16, 1, 256},
        {"num_key_value_heads", &ad_kv, 16, 1, 256}, {"head_dim", &c->pool_head_dim, 72, 1, 1024},
        {"intermediate_size", &c->proj_inter, 18944, 1, 262144},
    };
    if ((rc = read_ints(ad, "adapter_config.", af, sizeof af / sizeof af[0], err, errlen))) return rc;
    if (ad_kv != c->pool_heads)
        return CFG_ERR(MACT_ERR_UNSUPPORTED, "adapter_config.num_key_value_heads %d != num_attention_heads %d is not "
                       "supported", ad_kv, c->pool_heads);
    if ((rc = get_choice(ad, "adapter_config.", "hidden_act", act_silu, &s, err, errlen))) return rc;
    if ((rc = get_choice(ad, "adapter_config.", "crop_mode", crop, &s, err, errlen))) return rc;
    const cJSON *vl = obj(ad, "vit_layers");
    int taps_def[2] = {-3, -9};
    int nt = vl ? cJSON_GetArraySize(vl) : 2;
    if ((vl && !cJSON_IsArray(vl)) || nt < 1 || nt > MACT_MAX_TAPS)
        return CFG_ERR(MACT_ERR_FORMAT, "adapter_config.vit_layers must list 1..%d layers", MACT_MAX_TAPS);
    c->n_taps = nt;
    for (int i = 0; i < nt; i++) {
        int t = taps_def[i < 2 ? i : 0];
        if (vl) {
            const cJSON *x = cJSON_GetArrayItem(vl, i);
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 1e6)
                return CFG_ERR(MACT_ERR_FORMAT, "adapter_config.vit_layers[%d] must be an integer", i);
            t = (int)x->valuedouble;
        }
        /* Negative taps count from vit_config.num_hidden_layers, as upstream does; the original checkpoint
         * stores fewer blocks (27 configured, 25 stored), so the loader checks them against what is stored. */
        int a = t < 0 ? c->vit_layers + t : t;
        if (a < 0 || a >= c->vit_layers)
            return mact_errf(err, errlen, MACT_ERR_MODEL, "config.json: adapter_config.vit_layers[%d] = %d is outside "
                             "the %d ViT layers", i, t, c->vit_layers);
        c->taps[i] = a;
    }
    c->pool_h = c->pool_w = 2;
    const cJSON *ps = obj(ad, "pooling_size");
    if (ps) {
        const cJSON *a0 = cJSON_GetArrayItem(ps, 0), *a1 = cJSON_GetArrayItem(ps, 1);
        if (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) != 2 || !cJSON_IsNumber(a0) || !cJSON_IsNumber(a1))
            return CFG_ERR(MACT_ERR_FORMAT, "adapter_config.pooling_size must be [h, w]");
        if (a0->valuedouble != 2 || a1->valuedouble != 2)
            return CFG_ERR(MACT_ERR_UNSUPPORTED, "adapter_config.pooling_size [%g, %g] is not supported (only [2, 2])",
                           a0->valuedouble, a1->valuedouble);
    }
    c->pooled_h = (c->grid_h + c->pool_h - 1) / c->pool_h;
    c->pooled_w = (c->grid_w + c->pool_w - 1) / c->pool_w;
    int pmask;
    if ((rc = get_bool(ad, "adapter_config.", "pooling_attention_mask", 0, &pmask, err, errlen))) return rc;
    if ((rc = get_choice(ad, "adapter_config.", "attn_implementation", pmask ? attn_pool : attn_any, &s, err, errlen)))
        return rc;
    c->pooling_mask = !pmask ? MACT_POOL_NONE : !strcmp(s, "eager") ? MACT_POOL_EAGER : MACT_POOL_SDPA;
    if ((rc = small_product("adapter_config: intermediate_size x hidden_size", c->proj_inter, c->pool_hidden, err,
                            errlen)) ||
        (rc = small_product("adapter_config: heads x head_dim x (taps x vit hidden_size)",
                            (int64_t)c->pool_heads * c->pool_head_dim, (int64_t)c->n_taps * c->vit_hidden, err, errlen)))
        return rc;
    return 0;
}

/* text_config: the LLM */
static int parse_text(const cJSON *tx, mact_config *c, char *err, size_t errlen)
{
    int rc;
    const char *s = NULL;
    double d;
    int_field tf[] = {
        {"hidden_size", &c->d_model, 3584, 1, 32768}, {"num_attention_heads", &c->n_heads, 28, 1, 1024},
        {"num_key_value_heads", &c->n_kv_heads, 4, 1, 1024}, {"head_dim", &c->head_dim, 128, 2, 1024},
        {"num_hidden_layers", &c->n_layers, 48, 1, 1024}, {"intermediate_size", &c->ff_inter, 18944, 1, 262144},
        {"max_position_embeddings", &c->max_position_embeddings, 4096, 1, 1 << 20},
    };
    if ((rc = read_ints(tx, "text_config.", tf, sizeof tf / sizeof tf[0], err, errlen))) return rc;
    int iv;
    if ((rc = get_int(tx, "text_config.", "vocab_size", 152064, 1, 1 << 26, &iv, err, errlen))) return rc;
    c->vocab_size = iv;
    if ((rc = get_int(tx, "text_config.", "additional_vocab_size", 128, 0, 1 << 20, &iv, err, errlen))) return rc;
    c->additional_vocab_size = iv;
    if ((rc = get_num(tx, "text_config.", "layer_norm_eps", 1e-6, 1e-30, 1, &d, err, errlen))) return rc;
    c->eps = (float)d;
    if ((rc = get_num(tx, "text_config.", "rope_theta", 1e6, 1, 1e12, &d, err, errlen))) return rc;
    c->rope_theta = (float)d;
    if ((rc = get_choice(tx, "text_config.", "hidden_act", act_silu, &s, err, errlen))) return rc;
    if ((rc = get_choice(tx, "text_config.", "attn_implementation", attn_any, &s, err, errlen))) return rc;
    if ((rc = get_bool(tx, "text_config.", "qkv_bias", 1, &c->qkv_bias, err, errlen))) return rc;
    int qkn;
    if ((rc = get_bool(tx, "text_config.", "use_qk_norm", 0, &qkn, err, errlen))) return rc;
    if ((rc = get_choice(tx, "text_config.", "qk_norm_type", qk_types, &s, err, errlen))) return rc;
    c->qk_norm = !qkn ? MACT_QKNORM_NONE : !strcmp(s, "qwen3") ? MACT_QKNORM_QWEN3 : MACT_QKNORM_OLMO;
    if ((rc = want_bool(tx, "text_config.", "norm_after", 0, err, errlen))) return rc;
    if (obj(tx, "rope_scaling"))
        return CFG_ERR(MACT_ERR_UNSUPPORTED, "text_config.rope_scaling is not supported (only null)");
    if (c->n_heads % c->n_kv_heads)
        return CFG_ERR(MACT_ERR_FORMAT, "text_config.num_attention_heads %d is not divisible by num_key_value_heads %d",
                       c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return CFG_ERR(MACT_ERR_FORMAT, "text_config.head_dim %d must be even for RoPE", c->head_dim);
    if ((rc = small_product("text_config: (vocab_size + additional_vocab_size) x hidden_size",
                            c->vocab_size + c->additional_vocab_size, c->d_model, err, errlen)) ||
        (rc = small_product("text_config: 2 x intermediate_size x hidden_size", 2 * (int64_t)c->ff_inter, c->d_model,
                            err, errlen)) ||
        (rc = small_product("text_config: (heads + 2 kv heads) x head_dim x hidden_size",
                            (int64_t)(c->n_heads + 2 * c->n_kv_heads) * c->head_dim, c->d_model, err, errlen)))
        return rc;
    return 0;
}

/* action_expert_config: the flow-matching action expert (one block per LLM layer) */
static int parse_expert(const cJSON *ae, mact_config *c, char *err, size_t errlen)
{
    int rc;
    double d;
    int ffn_mult = 256;
    int_field ef[] = {
        {"hidden_size", &c->ae_hidden, 1024, 1, 16384}, {"num_layers", &c->ae_layers, 32, 1, 1024},
        {"num_heads", &c->ae_heads, 16, 1, 256}, {"ffn_multiple_of", &ffn_mult, 256, 1, 65536},
        {"timestep_embed_dim", &c->ae_tdim, 256, 4, 16384},
    };
    if ((rc = read_ints(ae, "action_expert_config.", ef, sizeof ef / sizeof ef[0], err, errlen))) return rc;
    double mlp_ratio;
    if ((rc = get_num(ae, "action_expert_config.", "mlp_ratio", 8.0 / 3.0, 1e-3, 64, &mlp_ratio, err, errlen))) return rc;
    if ((rc = get_num(ae, "action_expert_config.", "qk_norm_eps", 1e-6, 1e-30, 1, &d, err, errlen))) return rc;
    c->ae_eps = (float)d;
    int64_t inner = (int64_t)(c->ae_hidden * mlp_ratio);
    inner = (inner + ffn_mult - 1) / ffn_mult * ffn_mult;
    if (inner < 1 || inner > 262144)
        return CFG_ERR(MACT_ERR_FORMAT, "action_expert_config: MLP width %lld (hidden_size x mlp_ratio rounded up to "
                       "ffn_multiple_of) is outside 1..262144", (long long)inner);
    c->ae_inter = (int)inner;
    if ((rc = get_bool(ae, "action_expert_config.", "context_layer_norm", 1, &c->ae_context_norm, err, errlen)) ||
        (rc = get_bool(ae, "action_expert_config.", "qk_norm", 1, &c->ae_qk_norm, err, errlen)) ||
        (rc = get_bool(ae, "action_expert_config.", "rope", 1, &c->ae_rope, err, errlen)) ||
        (rc = want_bool(ae, "action_expert_config.", "causal_attn", 0, err, errlen)))
        return rc;
    if (c->ae_hidden % c->ae_heads || (c->ae_hidden / c->ae_heads) % 2 || c->ae_tdim % 2)
        return CFG_ERR(MACT_ERR_FORMAT, "action_expert_config: hidden_size %d / num_heads %d / timestep_embed_dim %d "
                       "must give an even head_dim and an even timestep dim", c->ae_hidden, c->ae_heads, c->ae_tdim);
    c->ae_head_dim = c->ae_hidden / c->ae_heads;
    if (c->ae_layers != c->n_layers)
        return mact_errf(err, errlen, MACT_ERR_MODEL, "config.json: action_expert_config.num_layers %d must equal "
                         "text_config.num_hidden_layers %d (one expert block per LLM layer's KV)", c->ae_layers, c->n_layers);
    if ((rc = small_product("action_expert_config: 9 x hidden_size x hidden_size", 9 * (int64_t)c->ae_hidden,
                            c->ae_hidden, err, errlen)) ||
        (rc = small_product("action_expert_config: MLP width x hidden_size", c->ae_inter, c->ae_hidden, err, errlen)) ||
        (rc = small_product("action_expert_config: hidden_size x text kv dim", c->ae_hidden,
                            (int64_t)c->n_kv_heads * c->head_dim, err, errlen)))
        return rc;
    return 0;
}

/* the top level: the action sizes, the flow steps, the state tokens and the modes only one value of which is implemented */
static int parse_top(const cJSON *root, mact_config *c, char *err, size_t errlen)
{
    int rc;
    const char *s = NULL;
    int_field top[] = {
        {"max_action_dim", &c->max_action_dim, 32, 1, MACT_MAX_ACTION_DIM},
        {"max_action_horizon", &c->max_action_horizon, 30, 1, 1024},
        {"flow_matching_num_steps", &c->flow_steps, 10, 1, 1000},
        {"num_state_tokens", &c->num_state_tokens, 256, 2, 65536},
    };
    if ((rc = read_ints(root, "", top, sizeof top / sizeof top[0], err, errlen))) return rc;
    int one;
    if ((rc = get_int(root, "", "n_obs_steps", 1, 1, 1, &one, err, errlen))) return rc;
    if ((rc = get_choice(root, "", "action_mode", modes, &s, err, errlen))) return rc;
    c->encoder_mask = !strcmp(s, "both") ? MACT_ENC_DROP_EOS : MACT_ENC_ALL;
    if ((rc = get_choice(root, "", "state_format", state_fmt, &s, err, errlen)) ||
        (rc = get_choice(root, "", "norm_stats_filename", ns_file, &s, err, errlen)) ||
        (rc = want_bool(root, "", "mask_action_dim_padding", 1, err, errlen)) ||
        (rc = want_bool(root, "", "add_action_expert", 1, err, errlen)) ||
        (rc = want_bool(root, "", "action_expert_depth_gate", 0, err, errlen)) ||
        (rc = want_bool(root, "", "enable_depth_reasoning", 0, err, errlen)) ||
        (rc = want_bool(root, "", "add_setup_tokens", 1, err, errlen)) ||
        (rc = want_bool(root, "", "add_control_tokens", 1, err, errlen)) ||
        (rc = get_bool(root, "", "use_grid_token_sampler", 0, &c->use_sampler, err, errlen)))
        return rc;
    return 0;
}

/* the special token ids: the image ones default to vocab_size + index, eos_token_id is required (top level or text_config), the action / state ones are -1 when absent */
static int parse_token_ids(const cJSON *root, const cJSON *tx, mact_config *c, char *err, size_t errlen)
{
    int rc;
    const int64_t V = c->vocab_size + c->additional_vocab_size, v0 = c->vocab_size;
    /* docs/spec/molmoact2.md 4.2: image tokens sit at vocab_size + index */
    struct { const char *k; int64_t *dst; int64_t def; const cJSON *alt; } ids[] = {
        {"image_start_token_id", &c->image_start_id, v0 + 0, NULL},
        {"image_end_token_id", &c->image_end_id, v0 + 1, NULL},
        {"image_patch_id", &c->image_patch_id, v0 + 2, NULL},
        {"image_col_id", &c->image_col_id, v0 + 3, NULL},
        {"low_res_image_start_token_id", &c->low_res_image_start_id, v0 + 4, NULL},
        {"image_low_res_id", &c->image_low_res_id, v0 + 6, NULL},
        {"frame_start_token_id", &c->frame_start_id, v0 + 7, NULL},
        {"frame_end_token_id", &c->frame_end_id, v0 + 8, NULL},
        {"eos_token_id", &c->eos_id, -1, tx},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if ((rc = get_id(root, ids[i].alt, ids[i].k, ids[i].def, V, ids[i].dst, err, errlen)))
            return rc;
    /* defaulted ids may lie past a small additional vocabulary; only the ones the prompt uses must not */
    if (c->image_start_id >= V || c->image_end_id >= V || c->image_patch_id >= V)
        return CFG_ERR(MACT_ERR_FORMAT, "the image token ids (image_start_token_id %lld, image_end_token_id %lld, "
                       "image_patch_id %lld) must lie below vocab_size + additional_vocab_size = %lld",
                       (long long)c->image_start_id, (long long)c->image_end_id, (long long)c->image_patch_id,
                       (long long)V);
    /* optional ids: -1 when absent; the encoder mask reads action_start_token_id */
    struct { const char *k; int64_t *dst; } opt_ids[] = {
        {"action_start_token_id", &c->action_start_id}, {"action_end_token_id", &c->action_end_id},
        {"action_output_token_id", &c->action_output_id}, {"state_start_token_id", &c->state_start_id},
        {"state_end_token_id", &c->state_end_id}, {"state_token_start_id", &c->state_token_start_id},
    };
    for (size_t i = 0; i < sizeof opt_ids / sizeof opt_ids[0]; i++) {
        *opt_ids[i].dst = -1;
        if (obj(root, opt_ids[i].k) && (rc = get_id(root, NULL, opt_ids[i].k, 0, V, opt_ids[i].dst, err, errlen)))
            return rc;
    }
    return 0;
}

/* the four sections are required objects; *vit .. *ae point at them, else the error names what is missing */
static int find_sections(const cJSON *root, const cJSON **vit, const cJSON **ad, const cJSON **tx, const cJSON **ae,
                         char *err, size_t errlen)
{
    *vit = obj(root, "vit_config"), *ad = obj(root, "adapter_config");
    *tx = obj(root, "text_config"), *ae = obj(root, "action_expert_config");
    if (!*vit || !*ad || !*tx || !*ae)
        return CFG_ERR(MACT_ERR_FORMAT, "vit_config, adapter_config, text_config and action_expert_config are all "
                       "required (missing: %s%s%s%s)", *vit ? "" : "vit_config ", *ad ? "" : "adapter_config ",
                       *tx ? "" : "text_config ", *ae ? "" : "action_expert_config");
    const char *bad = !cJSON_IsObject(*vit) ? "vit_config" : !cJSON_IsObject(*ad) ? "adapter_config"
                      : !cJSON_IsObject(*tx) ? "text_config" : !cJSON_IsObject(*ae) ? "action_expert_config" : NULL;
    if (bad) return CFG_ERR(MACT_ERR_FORMAT, "%s must be an object", bad);
    return 0;
}

/* The sections in the order their fields depend on each other (the adapter's taps on the ViT's depth, the
 * expert's depth on the LLM's, the token ids on the vocabulary); the first error is returned. */
int mact_config_parse(const char *json_text, mact_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    cJSON *root = NULL;
    int rc = mact_json_parse(json_text, strlen(json_text), "config.json", &root, err, errlen);
    if (rc) return rc;
    const cJSON *vit, *ad, *tx, *ae;
    if (!cJSON_IsObject(root))
        rc = CFG_ERR(MACT_ERR_FORMAT, "the top level is not a JSON object");
    else if (!(rc = find_sections(root, &vit, &ad, &tx, &ae, err, errlen)) && !(rc = parse_vit(vit, c, err, errlen)) &&
             !(rc = parse_adapter(ad, c, err, errlen)) && !(rc = parse_text(tx, c, err, errlen)) &&
             !(rc = parse_expert(ae, c, err, errlen)) && !(rc = parse_top(root, c, err, errlen)))
        rc = parse_token_ids(root, tx, c, err, errlen);
    cJSON_Delete(root);
    return rc;
}
