/* The tensor table: one list of every tensor a MolmoAct2 checkpoint must hold, with the shape its
 * config implies. The same walk binds, validates and describes the weights, so a tensor can't be bound
 * without being checked. Checkpoint names are first mapped to canonical HF names (LeRobot `model.`
 * prefix, PEFT `base_model.model.` / `.base_layer.`, any sampler prefix), LoRA pairs are merged, and
 * every checkpoint tensor must be claimed by the table. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include "base/file.h"
#include "base/json.h"
#include "model/model.h"
#include "model/table.h"
#include "model/lerobot.h"

/* Largest auxiliary JSON file read whole (config.json, norm_stats.json, adapter_config.json, ...). */
#define MACT_JSON_FILE_MAX ((size_t)64 << 20)
#include "io/npy.h"
#include "io/normstats.h"
#include "io/tokenizer.h"
#include "kernels/kernels.h"


void *mact_model_own(struct mact_model *m, size_t bytes)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **p = realloc(m->owned, cap * sizeof *p);
        if (!p) return NULL;
        m->owned = p;
        m->cap_owned = cap;
    }
    void *b = calloc(1, bytes ? bytes : 1);
    if (b) m->owned[m->n_owned++] = b;
    return b;
}

static char *own_str(struct mact_model *m, const char *s)
{
    char *d = mact_model_own(m, strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

/* ---- canonical names ---- */

typedef struct {
    char *name;                  /* canonical */
    const mact_st_tensor *t;
    int used;
} centry;

struct mact_ctable {
    centry *e;
    size_t n;
    float lora_scale;            /* alpha / r, 0 when no adapter */
    int lora_rank;               /* r, every adapter's */
    int has_lora;
};

static int cmp_centry(const void *a, const void *b)
{
    return strcmp(((const centry *)a)->name, ((const centry *)b)->name);
}

static centry *cfind(struct mact_ctable *ct, const char *name)
{
    centry key = {.name = (char *)name};
    return bsearch(&key, ct->e, ct->n, sizeof *ct->e, cmp_centry);
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static void replace_all(char *s, const char *from, const char *to)
{
    /* to is never longer than from here, so in-place is safe */
    size_t fl = strlen(from), tl = strlen(to);
    char *p;
    while ((p = strstr(s, from))) {
        memmove(p + tl, p + fl, strlen(p + fl) + 1);
        memcpy(p, to, tl);
    }
}

static int canon_names(struct mact_model *m, struct mact_ctable *ct, char *err, size_t errlen)
{
    size_t n = mact_st_count(m->st);
    int lerobot = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = mact_st_at(m->st, i)->name;
        if (starts(k, "model.model.") || starts(k, "model.base_model.") || starts(k, "model.lm_head."))
            lerobot = 1;
    }
    ct->e = mact_model_own(m, (n ? n : 1) * sizeof *ct->e);
    if (!ct->e) return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory");
    ct->n = n;
    for (size_t i = 0; i < n; i++) {
        const mact_st_tensor *t = mact_st_at(m->st, i);
        char buf[1024];
        const char *k = t->name;
        if (lerobot) {
            if (!starts(k, "model."))
                return mact_errf(err, errlen, MACT_ERR_MODEL, "unexpected tensor '%s' in %s: a LeRobot-format "
                                 "checkpoint keeps every key under 'model.'", k, t->file);
            k += 6;
        }
        if (starts(k, "base_model.model.")) k += strlen("base_model.model.");
        if (strlen(k) >= sizeof buf)
            return mact_errf(err, errlen, MACT_ERR_MODEL, "tensor name too long: '%.80s...'", k);
        strcpy(buf, k);
        replace_all(buf, ".base_layer.", ".");
        if (strstr(buf, ".lora_A.") || strstr(buf, ".lora_B.")) ct->has_lora = 1;
        /* The sampler's prefix is unconfirmed upstream (docs/spec/molmoact2.md 7.2): file it under one canonical prefix. */
        char *s = strstr(buf, "scout_mlp.");
        if (!s) s = strstr(buf, "coord_encoder.");
        if (s) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "model.vision_backbone.token_sampler.%s", s);
            strcpy(buf, tmp);
        }
        ct->e[i].name = own_str(m, buf);
        ct->e[i].t = t;
        if (!ct->e[i].name) return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory");
    }
    qsort(ct->e, n, sizeof *ct->e, cmp_centry);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(ct->e[i - 1].name, ct->e[i].name))
            return mact_errf(err, errlen, MACT_ERR_MODEL, "tensors '%s' and '%s' both map to '%s'",
                             ct->e[i - 1].t->name, ct->e[i].t->name, ct->e[i].name);
    return 0;
}

/* alpha / r (PEFT's scaling; alpha / sqrt(r) with use_rslora) from adapter_config.json beside the weights, else, for a
 * LeRobot policy trained with LoRA (which writes no adapter_config.json), from its config's lora_alpha / lora_rank
 * (LeRobot builds its PEFT LoraConfig from those two fields) */
static int read_lora_scale(struct mact_model *m, struct mact_ctable *ct, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_config.json", m->src.dir);
    const mact_lr_config *lr = m->src.lr;
    if (mact_file_absent(path)) {
        if (lr && !strcmp(lr->train_mode_vlm, "lora")) {
            ct->lora_rank = lr->lora_rank;
            ct->lora_scale = (float)(lr->lora_alpha / lr->lora_rank);
            return 0;
        }
        return mact_errf(err, errlen, MACT_ERR_MODEL, "checkpoint has LoRA tensors (lora_A/lora_B) but no %s to give "
                         "lora_alpha and r%s", path, lr ? ", and its LeRobot config's train_mode_vlm is not lora" : "");
    }
    char *txt = NULL, jerr[512];
    size_t len = 0;
    cJSON *j = NULL;
    if (mact_file_read_text(path, MACT_JSON_FILE_MAX, &txt, &len, jerr, sizeof jerr) ||
        mact_json_parse(txt, len, "adapter_config.json", &j, jerr, sizeof jerr)) {
        free(txt);
        return mact_errf(err, errlen, MACT_ERR_FORMAT, "%s", jerr);
    }
    free(txt);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "lora_alpha"), *r = cJSON_GetObjectItemCaseSensitive(j, "r");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "use_rslora"), *rp = cJSON_GetObjectItemCaseSensitive(j, "rank_pattern");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(j, "alpha_pattern");
    int ok = cJSON_IsNumber(a) && cJSON_IsNumber(r) && r->valuedouble > 0 && isfinite(a->valuedouble) &&
             r->valuedouble <= 65536 && r->valuedouble == floor(r->valuedouble) && fabs(a->valuedouble) <= 1e6;
    const int patterns = (cJSON_IsObject(rp) && cJSON_GetArraySize(rp)) || (cJSON_IsObject(ap) && cJSON_GetArraySize(ap));
    if (ok) {
        ct->lora_rank = (int)r->valuedouble;
        ct->lora_scale = (float)(a->valuedouble / (cJSON_IsTrue(rs) ? sqrt(r->valuedouble) : r->valuedouble));
    }
    cJSON_Delete(j);
    if (!ok) return mact_errf(err, errlen, MACT_ERR_FORMAT, "%s: needs a finite lora_alpha (|alpha| <= 1e6) and an "
                              "integer r in 1..65536", path);
    if (patterns) return mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "%s: rank_pattern / alpha_pattern (a rank or alpha "
                                   "per module) is not supported", path);
    return 0;
}

/* ---- dtype helpers ---- */

static void to_f32(float *dst, const void *src, int dtype, size_t n)
{
    mact_dtype_to_f32(dtype, src, n, dst);
}

/* ---- binding (the walk itself is model/table.c) ---- */

static void fmt_shape(char *b, size_t bl, int nd, const int64_t *s)
{
    size_t o = 0;
    o += snprintf(b + o, bl - o, "[");
    for (int i = 0; i < nd && o < bl; i++) o += snprintf(b + o, bl - o, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (o < bl) snprintf(b + o, bl - o, "]");
}

static int merge_lora(walk_ctx *w, const char *name, mact_tensor *t, int64_t out, int64_t in)
{
    /* name = <module>.weight; adapters live at <module>.lora_{A,B}.default.weight */
    char mod[1024], an[1100], bn[1100];
    size_t l = strlen(name);
    if (l < 8 || strcmp(name + l - 7, ".weight")) return 0;
    snprintf(mod, sizeof mod, "%.*s", (int)(l - 7), name);
    snprintf(an, sizeof an, "%s.lora_A.default.weight", mod);
    snprintf(bn, sizeof bn, "%s.lora_B.default.weight", mod);
    centry *a = cfind(w->ct, an), *b = cfind(w->ct, bn);
    if (!a && !b) return 0;
    if (!a || !b)
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "LoRA for '%s' has only %s", name, a ? "lora_A" : "lora_B");
    const mact_st_tensor *A = a->t, *B = b->t;
    if (A->ndim != 2 || B->ndim != 2 || A->shape[1] != in || B->shape[0] != out || A->shape[0] != B->shape[1])
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "LoRA shapes for '%s' do not fit W [%lld, %lld]", name,
                         (long long)out, (long long)in);
    if (A->shape[0] != w->ct->lora_rank)
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "LoRA for '%s' has rank %lld but the adapter's r (lora_rank) "
                         "is %d: its scale alpha / r would be wrong", name, (long long)A->shape[0], w->ct->lora_rank);
    if (A->dtype > MACT_F16 || B->dtype > MACT_F16)
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "LoRA tensors for '%s' must be F32/BF16/F16", name);
    a->used = b->used = 1;
    int64_t r = A->shape[0];
    float *W = mact_model_own(w->m, (size_t)(out * in) * sizeof(float));
    float *fa = malloc((size_t)(r * in) * sizeof(float)), *fb = malloc((size_t)(out * r) * sizeof(float));
    if (!W || !fa || !fb) { free(fa); free(fb); return mact_errf(w->err, w->errlen, MACT_ERR_NOMEM, "out of memory"); }
    to_f32(W, t->data, t->dtype, (size_t)(out * in));
    to_f32(fa, A->data, A->dtype, (size_t)(r * in));
    to_f32(fb, B->data, B->dtype, (size_t)(out * r));
    float s = w->ct->lora_scale;
    for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < r; k++) {
            float bk = s * fb[o * r + k];
            const float *ar = fa + k * in;
            float *wr = W + o * in;
            for (int64_t i = 0; i < in; i++) wr[i] += bk * ar[i];
        }
    free(fa);
    free(fb);
    t->data = W;
    t->dtype = MACT_F32;
    return 0;
}

static int bind_one(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape)
{
    char want[128], got[128];
    centry *c = cfind(w->ct, name);
    memset(t, 0, sizeof *t);
    if (!c) {
        if (flags & T_OPTIONAL) return 0;
        fmt_shape(want, sizeof want, nd, shape);
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "checkpoint is missing tensor '%s' (config implies %s)",
                         name, want);
    }
    const mact_st_tensor *s = c->t;
    int ok = s->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = s->shape[i] == shape[i];
    if (!ok) {
        fmt_shape(want, sizeof want, nd, shape);
        fmt_shape(got, sizeof got, s->ndim, s->shape);
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "tensor '%s' (%s) has shape %s but the config implies %s",
                         name, s->name, got, want);
    }
    if (s->dtype != MACT_F32 && s->dtype != MACT_BF16 && s->dtype != MACT_F16)
        return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "tensor '%s' has dtype %s; weights must be F32, BF16 or F16",
                         name, mact_dtype_name(s->dtype));
    c->used = 1;
    t->name = c->name;
    t->dtype = t->stored_dtype = s->dtype;
    t->ndim = nd;
    for (int i = 0; i < nd; i++) t->shape[i] = shape[i];
    t->data = s->data;
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
    if (w->ct->has_lora && nd == 2) {
        int rc = merge_lora(w, name, t, shape[0], shape[1]);
        if (rc) return rc;
    }
    size_t es = t->dtype == MACT_F32 ? 4 : 2;
    /* Stage code reads vectors as float*, and kernels may assume natural alignment. */
    if ((flags & T_VEC && t->dtype != MACT_F32) || ((uintptr_t)t->data % es)) {
        float *f = mact_model_own(w->m, n * sizeof(float));
        if (!f) return mact_errf(w->err, w->errlen, MACT_ERR_NOMEM, "out of memory");
        to_f32(f, t->data, t->dtype, n);
        t->data = f;
        t->dtype = MACT_F32;
    }
    /* the vectors and small tables stages read directly (norms, biases, the positional table, the sampler's
     * coordinate layer): a non-finite value is refused here, by name; the big matrices' faults surface in the
     * stage outputs, which the pipeline checks */
    if (flags & T_VEC)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(((const float *)t->data)[i]))
                return mact_errf(w->err, w->errlen, MACT_ERR_MODEL, "tensor '%s' has a non-finite value (%g) at "
                                 "element %zu", name, (double)((const float *)t->data)[i], i);
    return 0;
}

/* Marks a table name as present without validating it (used to name unclaimed tensors). */
static int claim_one(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape)
{
    centry *c = cfind(w->ct, name);
    if (c) c->used = 1;
    return 0;
}

static const char *first_unclaimed(struct mact_ctable *ct)
{
    for (size_t i = 0; i < ct->n; i++)
        if (!ct->e[i].used && strcmp(ct->e[i].name, "model.transformer.rotary_emb.inv_freq")) return ct->e[i].name;
    return NULL;
}


/* The sampler's geometry is whatever its tensors say (K, C, hidden widths); the config only switches
 * it on, and both must agree (the SO101 card's silent-drop failure). */
static int resolve_sampler(struct mact_model *m, struct mact_ctable *ct, char *err, size_t errlen)
{
    mact_config *c = &m->cfg;
    const char *names[4] = {"scout_mlp.0.weight", "scout_mlp.2.weight", "coord_encoder.0.weight",
                            "coord_encoder.2.weight"};
    const mact_st_tensor *t[4];
    int present = 0;
    for (size_t i = 0; i < ct->n; i++)
        if (starts(ct->e[i].name, "model.vision_backbone.token_sampler.")) present++;
    if (!present) {
        if (c->use_sampler)
            return mact_errf(err, errlen, MACT_ERR_MODEL, "config.json sets use_grid_token_sampler but the checkpoint "
                             "has no grid token sampler tensors (scout_mlp.*, coord_encoder.*)");
        c->tokens_per_image = c->pooled_h * c->pooled_w;
        return 0;
    }
    if (!c->use_sampler)
        return mact_errf(err, errlen, MACT_ERR_MODEL, "checkpoint has %d grid token sampler tensors but config.json "
                         "does not set use_grid_token_sampler; refusing to drop them (a sampler-trained model would run "
                         "on the wrong token count)", present);
    for (int i = 0; i < 4; i++) {
        char nm[256];
        snprintf(nm, sizeof nm, "model.vision_backbone.token_sampler.%s", names[i]);
        centry *e = cfind(ct, nm);
        if (!e || e->t->ndim != 2)
            return mact_errf(err, errlen, MACT_ERR_MODEL, "grid token sampler tensor '%s' is missing or not 2-D", names[i]);
        t[i] = e->t;
        /* the sizes below are ints and 2 x K is formed from them: bounded here, from the file's shapes */
        for (int d = 0; d < 2; d++)
            if (t[i]->shape[d] < 1 || t[i]->shape[d] > (1 << 24))
                return mact_errf(err, errlen, MACT_ERR_MODEL, "grid token sampler tensor '%s' has dim %d of %lld; "
                                 "expected 1..%d", names[i], d, (long long)t[i]->shape[d], 1 << 24);
    }
    c->sampler_hidden = (int)t[0]->shape[0];
    c->sampler_c = (int)t[0]->shape[1];
    if (t[1]->shape[0] % 2 || t[1]->shape[0] < 2)
        return mact_errf(err, errlen, MACT_ERR_MODEL, "scout_mlp.2.weight has %lld rows; expected 2 x tokens per image",
                         (long long)t[1]->shape[0]);
    c->sampler_k = (int)(t[1]->shape[0] / 2);
    c->coord_hidden = (int)t[2]->shape[0];
    if (c->sampler_c == c->d_model) c->sampler_after_projector = 1;
    else if (c->sampler_c == c->pool_hidden) c->sampler_after_projector = 0;
    else
        return mact_errf(err, errlen, MACT_ERR_MODEL, "scout_mlp.0.weight has %d input features: neither the pooling "
                         "width %d nor the LLM width %d, so the sampler's place is unknown", c->sampler_c, c->pool_hidden,
                         c->d_model);
    c->tokens_per_image = c->sampler_k;
    return 0;
}

/* A checkpoint may store fewer ViT blocks than vit_config.num_hidden_layers (upstream truncates the
 * tower after the deepest tap): bind the blocks that are stored, which must cover every tap. */
static int resolve_vit_depth(struct mact_model *m, struct mact_ctable *ct, char *err, size_t errlen)
{
    mact_config *c = &m->cfg;
    int stored = 0;
    char nm[256];
    for (;;) {
        snprintf(nm, sizeof nm, "model.vision_backbone.image_vit.transformer.resblocks.%d.attention.wq.weight", stored);
        if (!cfind(ct, nm)) break;
        stored++;
    }
    if (stored > c->vit_layers)
        return mact_errf(err, errlen, MACT_ERR_MODEL, "checkpoint stores %d ViT blocks but vit_config.num_hidden_layers "
                         "is %d", stored, c->vit_layers);
    for (int i = 0; i < c->n_taps; i++)
        if (c->taps[i] >= stored)
            return mact_errf(err, errlen, MACT_ERR_MODEL, "adapter tap %d (ViT block %d) is not stored: the checkpoint "
                             "has %d ViT blocks", i, c->taps[i], stored);
    c->vit_layers = stored;
    return 0;
}

/* The base's tokenizer.json: needed only by mact_predict and mact_tokenize, so its absence (or a malformed one) is
 * recorded and reported there. */
static void load_tokenizer(struct mact_model *m)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", m->src.base_dir);
    if (mact_tokenizer_load(path, &m->tok, m->tok_err, sizeof m->tok_err)) m->tok = NULL;
    /* every special token the robot prompt is built from must be one token of this tokenizer: a missing one
     * would be split into ordinary pieces and the model would read another prompt */
    static const char *const need[] = {"<|image|>", "<|im_start|>", "<|im_end|>", "<setup_start>", "<setup_end>",
                                       "<state_start>", "<state_end>", "<control_start>", "<control_end>",
                                       "<action_output>"};
    for (size_t i = 0; m->tok && i < sizeof need / sizeof need[0]; i++)
        if (mact_tokenizer_token_to_id(m->tok, need[i]) < 0) {
            snprintf(m->tok_err, sizeof m->tok_err, "tokenizer.json has no '%s' token (the robot prompt needs it)", need[i]);
            mact_tokenizer_free(m->tok);
            m->tok = NULL;
        }
    for (int k = 0; m->tok && k < m->cfg.num_state_tokens; k++) {
        char t[32];
        snprintf(t, sizeof t, "<state_%d>", k);
        if (mact_tokenizer_token_to_id(m->tok, t) < 0) {
            snprintf(m->tok_err, sizeof m->tok_err, "tokenizer.json has no '%s' token (num_state_tokens is %d)", t,
                     m->cfg.num_state_tokens);
            mact_tokenizer_free(m->tok);
            m->tok = NULL;
        }
    }
}

/* An HF folder's LeRobot processor files, when present, may carry the joint-frame steps (docs/spec/molmoact2.md
 * 4.3): their values, never constants; null values (LeRobot's default) mean no transform. The state's transform
 * without the actions' inverse (or the reverse) is refused rather than half applied. */
static int hf_joint_frames(const struct mact_model *m, mact_joint_frame fr[2], char *err, size_t el)
{
    static const char *const files[2] = {"policy_preprocessor.json", "policy_postprocessor.json"};
    int found[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char path[4200], *txt = NULL;
        size_t len = 0;
        memset(&fr[k], 0, sizeof fr[k]);
        snprintf(path, sizeof path, "%s/%s", m->src.dir, files[k]);
        if (mact_file_absent(path)) continue;
        int rc = mact_file_read_text(path, MACT_JSON_FILE_MAX, &txt, &len, err, el);
        if (!rc) rc = mact_lerobot_frame_parse(txt, len, files[k], k, &fr[k], &found[k], err, el);
        free(txt);
        if (rc) return rc;
    }
    if ((fr[0].n > 0) != (fr[1].n > 0))
        return mact_errf(err, el, MACT_ERR_MODEL, "%s sets a joint frame (%s) but %s %s: the actions would not be mapped "
                         "back to the robot's frame", files[fr[0].n ? 0 : 1], fr[0].n ? "joint_signs on the state" :
                         "joint_signs on the actions", files[fr[0].n ? 1 : 0], found[fr[0].n ? 1 : 0] ?
                         "has null values" : "is missing or has no such step");
    return 0;
}

/* The norm tags: a LeRobot policy's (its processors, else its base's norm stats under its config), else
 * norm_stats.json with the folder's joint frame. Absent or malformed: recorded (ns_err) for mact_predict, as the
 * tokenizer; a joint frame that is malformed or half given fails the load (a wrong frame moves the arm). */
static int load_tags(struct mact_model *m, char *err, size_t el)
{
    char path[4200], *txt = NULL;
    mact_norm_stats *ns = calloc(1, sizeof *ns);
    if (!ns) return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/norm_stats.json", m->src.base_dir);
    if (m->src.lr) {
        mact_lr_pipeline *pre = calloc(1, sizeof *pre);
        char e2[1024];
        int rc = pre ? mact_lerobot_tags(m->src.dir, m->src.lr, path, ns, pre, m->stats_src, sizeof m->stats_src, e2,
                                         sizeof e2) : mact_errf(e2, sizeof e2, MACT_ERR_NOMEM, "out of memory");
        if (!rc && pre->has_pack && pre->num_state_tokens != m->cfg.num_state_tokens) m->cfg.num_state_tokens = pre->num_state_tokens;
        if (!rc && pre->n_renames) {
            m->n_renames = pre->n_renames;
            m->rename_from = mact_model_own(m, sizeof *m->rename_from * (size_t)pre->n_renames);
            m->rename_to = mact_model_own(m, sizeof *m->rename_to * (size_t)pre->n_renames);
            if (!m->rename_from || !m->rename_to) rc = mact_errf(e2, sizeof e2, MACT_ERR_NOMEM, "out of memory");
            else {
                memcpy(m->rename_from, pre->rename_from, sizeof *m->rename_from * (size_t)pre->n_renames);
                memcpy(m->rename_to, pre->rename_to, sizeof *m->rename_to * (size_t)pre->n_renames);
            }
        }
        free(pre);
        if (rc) { free(ns); return mact_errf(err, el, rc, "%s: %s", m->src.dir, e2); }
        m->ns = ns;
        return 0;
    }
    mact_joint_frame fr[2];
    int rc = hf_joint_frames(m, fr, err, el);
    if (rc) { free(ns); return rc; }
    snprintf(m->stats_src, sizeof m->stats_src, "%s", path);
    if (mact_file_read_text(path, MACT_JSON_FILE_MAX, &txt, NULL, m->ns_err, sizeof m->ns_err) ||
        mact_norm_stats_parse(txt, ns, m->ns_err, sizeof m->ns_err)) {
        free(txt);
        mact_norm_stats_free(ns);
        free(ns);
        return 0;
    }
    free(txt);
    for (int i = 0; i < ns->n_tags; i++) {
        ns->tags[i].state_frame = fr[0];
        ns->tags[i].action_frame = fr[1];
        if (fr[0].n > ns->tags[i].state.dim || fr[1].n > ns->tags[i].action.dim) {
            rc = mact_errf(err, el, MACT_ERR_MODEL, "the joint frame has %d joints but norm tag \"%s\" has %d state and "
                           "%d action dims", fr[0].n, ns->tags[i].name, ns->tags[i].state.dim, ns->tags[i].action.dim);
            mact_norm_stats_free(ns);
            free(ns);
            return rc;
        }
    }
    m->ns = ns;
    return 0;
}
static void describe_tables(struct mact_model *m, struct mact_ctable *ct);

/* A LeRobot policy's fields over the base's HF config, as LeRobot's MolmoAct2Policy applies them at load: the
 * generation horizon (chunk_size overrides max_action_horizon), the flow steps (num_inference_steps), the grid
 * sampler switch (the fork's use_grid_token_sampler), the state bins; its expected_max_action_dim is checked. */
static int apply_policy(struct mact_model *m, char *err, size_t el)
{
    const mact_lr_config *lr = m->src.lr;
    mact_config *c = &m->cfg;
    if (!lr) return 0;
    if (lr->expected_max_action_dim && lr->expected_max_action_dim != c->max_action_dim)
        return mact_errf(err, el, MACT_ERR_MODEL, "%s: the LeRobot config expects max_action_dim %d but the base's "
                         "config.json has %d", m->src.dir, lr->expected_max_action_dim, c->max_action_dim);
    c->max_action_horizon = lr->chunk_size;
    /* LeRobot's _encoder_attention_mask_for_action_expert: a policy saved by LeRobot attends to every prompt token
     * unless it was trained with action_mode both, whatever its HF base's action_mode says */
    c->encoder_mask = lr->action_mode_both ? MACT_ENC_DROP_EOS : MACT_ENC_ALL;
    if (lr->num_inference_steps) c->flow_steps = lr->num_inference_steps;
    if (lr->use_sampler >= 0) c->use_sampler = lr->use_sampler;
    c->num_state_tokens = lr->num_state_tokens;
    return 0;
}

/* The weights: every tensor canonicalised, LoRA merged, bound to the table with its shape checked, none left over. */
static int load_weights(struct mact_model *m, char *err, size_t errlen)
{
    mact_config *c = &m->cfg;
    int rc;
    if (mact_st_open(m->src.dir, &m->st, err, errlen)) return MACT_ERR_FORMAT;
    struct mact_ctable ct = {0};
    if ((rc = canon_names(m, &ct, err, errlen))) return rc;
    if (ct.has_lora && (rc = read_lora_scale(m, &ct, err, errlen))) return rc;
    m->lora_scale = ct.has_lora ? ct.lora_scale : 0;
    if ((rc = resolve_sampler(m, &ct, err, errlen)) || (rc = resolve_vit_depth(m, &ct, err, errlen))) return rc;
    if (m->src.lr && m->src.lr->sampler_k && c->use_sampler && m->src.lr->sampler_k != c->sampler_k)
        return mact_errf(err, errlen, MACT_ERR_MODEL, "the LeRobot config's grid_token_sampler_num_tokens is %d but the "
                         "sampler's tensors give %d tokens per image", m->src.lr->sampler_k, c->sampler_k);
    m->vis.blocks = mact_model_own(m, sizeof(mact_vit_block) * (size_t)c->vit_layers);
    m->llm.blocks = mact_model_own(m, sizeof(mact_llm_block) * (size_t)c->n_layers);
    m->ae.blocks = mact_model_own(m, sizeof(mact_ae_block) * (size_t)c->ae_layers);
    if (!m->vis.blocks || !m->llm.blocks || !m->ae.blocks) return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory");
    walk_ctx w = {.m = m, .ct = &ct, .err = err, .errlen = errlen};
    if ((rc = mact_table_walk(&w, bind_one))) {
        /* A missing tensor is often a renamed one: name what nothing in the table claims. */
        walk_ctx cw = {.m = m, .ct = &ct};
        mact_table_walk(&cw, claim_one);
        const char *extra = first_unclaimed(&ct);
        size_t l = strlen(err);
        if (extra && l + 1 < errlen)
            snprintf(err + l, errlen - l, "; the checkpoint has unexpected tensor '%s' (renamed?)", extra);
        return rc;
    }
    const char *extra = first_unclaimed(&ct);
    if (extra) {
        const centry *e = cfind(&ct, extra);
        return mact_errf(err, errlen, MACT_ERR_MODEL, "unexpected tensor '%s' in %s: not part of a MolmoAct2 model with "
                         "this config", e->t->name, e->t->file ? e->t->file : m->src.dir);
    }
    describe_tables(m, &ct);
    return 0;
}

/* The kernels and the precision they compute, then every weight packed for them (model/packs.c). */
static int load_kernels(struct mact_model *m, const mact_load_options *opt, char *err, size_t errlen)
{
    int rc;
    m->precision = opt && opt->precision ? opt->precision
                   : m->src.lr && m->src.lr->precision ? (mact_precision)m->src.lr->precision : MACT_PRECISION_BF16;
    if (m->precision != MACT_PRECISION_FP32 && m->precision != MACT_PRECISION_BF16 &&
        m->precision != MACT_PRECISION_INT8)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "unknown precision %d", m->precision);
    m->ops = mact_ops_select(opt ? opt->kernels : MACT_KERNELS_AUTO, err, errlen);
    if (!m->ops) return MACT_ERR_UNSUPPORTED;
    m->kprec = mact_kernels_effective_precision(m->ops, m->precision);
    const unsigned parts = opt && opt->int8_parts ? opt->int8_parts : MACT_INT8_PARTS_DEFAULT;
    if (parts & ~(unsigned)MACT_INT8_PARTS_ALL)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "int8_parts 0x%x: unknown component bits (MACT_PART_*)", parts);
    m->int8_parts = m->kprec == MACT_PRECISION_INT8 ? parts : 0;
    if (opt && opt->no_pack) return 0;
    /* weights packed once into the kernels' layout for this precision and bound to each tensor (model/packs.c),
     * the work split over a pool that lives for the load */
    const char *cache = opt && opt->pack_cache_dir ? opt->pack_cache_dir : getenv("MACT_PACK_CACHE");
    mact_threadpool *pool = NULL;
    mact_threadpool_new(0, &pool, NULL, 0);  /* NULL (out of memory): packed by this thread alone */
    rc = mact_model_pack(m, pool, cache, &m->pack_cache, err, errlen);
    mact_threadpool_free(pool);
    return rc;
}

mact_status mact_model_load(const char *ref, const mact_load_options *opt, mact_model **out, char *err, size_t errlen)
{
    if (!out) return mact_errf(err, errlen, MACT_ERR_INPUT, "mact_model_load: out is NULL");
    *out = NULL;
    if (!ref) return mact_errf(err, errlen, MACT_ERR_INPUT, "mact_model_load: model_dir is NULL");
    struct mact_model *m = calloc(1, sizeof *m);
    if (!m) return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory");
    char *txt = NULL;
    int rc = mact_source_open(ref, &m->src, &txt, err, errlen);
    if (!rc) {
        char e2[1024];
        if ((rc = mact_config_parse(txt, &m->cfg, e2, sizeof e2)))
            mact_errf(err, errlen, rc, "%s: %s%s", m->src.base_dir, e2, strstr(e2, "are all required") ? " (this is "
                      "neither a MolmoAct2 HF config nor a LeRobot policy config, which has \"type\": \"molmoact2\")" : "");
    }
    free(txt);
    if (rc || (rc = apply_policy(m, err, errlen))) goto fail;
    mact_config *c = &m->cfg;
    if (opt && opt->pooling_mask) c->pooling_mask = opt->pooling_mask;
    if (opt && opt->encoder_mask) c->encoder_mask = opt->encoder_mask;
    if (c->image_num_pos != c->grid_h * c->grid_w) {
        rc = mact_errf(err, errlen, MACT_ERR_UNSUPPORTED, "config.json: vit_config.image_num_pos %d != %dx%d patches "
                       "(positional-embedding interpolation is not supported)", c->image_num_pos, c->grid_h, c->grid_w);
        goto fail;
    }
    if ((rc = load_weights(m, err, errlen)) || (rc = load_tags(m, err, errlen))) goto fail;
    load_tokenizer(m);
    if ((rc = load_kernels(m, opt, err, errlen))) goto fail;
    *out = m;
    return 0;
fail:
    mact_model_free(m);
    return rc;
}

void mact_model_free(mact_model *m)
{
    if (!m) return;
    mact_model_unpack(m);
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    if (m->st) mact_st_close(m->st);
    mact_tokenizer_free(m->tok);
    mact_norm_stats_free(m->ns);
    free(m->ns);
    mact_source_free(&m->src);
    free(m);
}

const char *mact_version(void) { return MACT_VERSION_STRING; }

void mact_model_get_info(const mact_model *m, mact_model_info *i)
{
    const mact_config *c = &m->cfg;
    memset(i, 0, sizeof *i);
    i->image_height = c->image_h;
    i->image_width = c->image_w;
    i->patch_size = c->patch;
    i->n_patches = c->grid_h * c->grid_w;
    i->patch_dim = c->patch * c->patch * 3;
    i->tokens_per_image = c->tokens_per_image;
    i->d_model = c->d_model;
    i->n_layers = c->n_layers;
    i->kv_dim = c->n_kv_heads * c->head_dim;
    i->ae_hidden = c->ae_hidden;
    i->max_action_dim = c->max_action_dim;
    i->max_action_horizon = c->max_action_horizon;
    i->flow_steps = c->flow_steps;
    i->vocab_total = (int)(c->vocab_size + c->additional_vocab_size);
    i->has_sampler = c->use_sampler;
    i->pooling_mask = (mact_pool_mask)c->pooling_mask;
    i->encoder_mask = (mact_encoder_mask_mode)c->encoder_mask;
    i->precision = (mact_precision)m->precision;
    i->pack_cache = (mact_pack_cache_status)m->pack_cache;
    i->kernels = m->ops ? mact_ops_kernels(m->ops) : MACT_KERNELS_REF;
    i->int8_parts = m->int8_parts;
    i->vit_layers = c->vit_layers;
}

/* ---- describe (mact inspect) ---- */

static const char *const desc_names[6] = {"vision", "pooling+projector", "grid sampler", "llm", "lm_head",
                                          "action expert"};

typedef struct {
    walk_ctx w;
    struct mact_model *m;
} desc_ctx;

/* the component of a canonical name (desc_names order), -1 for none */
static int component(const char *name)
{
    if (starts(name, "model.vision_backbone.image_vit.")) return 0;
    if (starts(name, "model.vision_backbone.image_")) return 1;
    if (starts(name, "model.vision_backbone.token_sampler.")) return 2;
    if (starts(name, "model.transformer.")) return 3;
    if (starts(name, "lm_head.")) return 4;
    if (starts(name, "model.action_expert.")) return 5;
    return -1;
}

static int count_one(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape)
{
    struct mact_model *m = ((desc_ctx *)w)->m;
    const int k = component(name);
    if (!t->data || k < 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    /* the stored dtype, not the load-time F32 copy */
    const int dt = t->stored_dtype;
    if (nd == 2 && !(flags & (T_VEC | T_NOPACK)) && shape[1] > m->max_k) m->max_k = shape[1];
    if (nd == 2 && !(flags & (T_VEC | T_NOPACK)) && shape[0] > m->max_n) m->max_n = shape[0];
    const int64_t b = n * (int64_t)mact_dtype_size(dt);
    m->desc_params[k] += n;
    m->desc_bytes[k] += b;
    if (dt <= MACT_F16) m->desc_dtype_bytes[dt] += b;
    return 0;
}

/* at load, while the model is still being built: describe then only reads */
static void describe_tables(struct mact_model *m, struct mact_ctable *ct)
{
    desc_ctx d = {.w = {.m = m, .ct = ct, .mode = 1}, .m = m};
    mact_table_walk(&d.w, count_one);
}

#define P(...) do { if (*o < bl) *o += snprintf(buf + *o, bl - *o, __VA_ARGS__); } while (0)

/* where each part came from: the folder (or hub snapshot), a LeRobot policy's base, the weights, the statistics */
static void describe_source(const struct mact_model *m, char *buf, size_t bl, size_t *o)
{
    const mact_source *s = &m->src;
    P("model: %s\n", s->ref);
    if (*s->commit) P("hub snapshot: %s (commit %s)\n", s->dir, s->commit);
    if (s->lr) {
        P("layout: LeRobot policy folder (type molmoact2)\n");
        P("base: checkpoint_path %s%s%s -> %s%s%s%s\n", s->lr->checkpoint_path, *s->lr->checkpoint_revision ?
          " revision " : "", s->lr->checkpoint_revision, s->base_dir, *s->base_commit ? " (commit " : "", s->base_commit,
          *s->base_commit ? ")" : "");
        P("base files: config.json, tokenizer.json%s from the base\n", strstr(m->stats_src, "processors") ? "" :
          ", norm stats");
    } else P("layout: Hugging Face (config.json with the model's sections)\n");
    P("weights: %s/%s", s->dir, mact_st_count(m->st) && mact_st_at(m->st, 0)->file && strrchr(mact_st_at(m->st, 0)->file, '/')
      ? strrchr(mact_st_at(m->st, 0)->file, '/') + 1 : "model.safetensors");
    if (m->lora_scale != 0) P(" (LoRA adapters merged at load, scale %g)", (double)m->lora_scale);
    P("\n");
    P("norm stats: %s\n", m->ns ? m->stats_src : m->ns_err);
}

static void describe_frame(const mact_joint_frame *j, const char *what, char *buf, size_t bl, size_t *o)
{
    if (!j->n) { P("%s none", what); return; }
    P("%s signs [", what);
    for (int i = 0; i < j->n; i++) P("%s%g", i ? ", " : "", (double)j->signs[i]);
    P("] offsets [");
    for (int i = 0; i < j->n; i++) P("%s%g", i ? ", " : "", (double)j->offsets[i]);
    P("]");
}

/* a '\n'-joined name list as "a, b, c" */
static void describe_names(const char *names, char *buf, size_t bl, size_t *o)
{
    for (const char *p = names; p && *p;) {
        const size_t l = strcspn(p, "\n");
        P("%s%.*s", p == names ? " " : ", ", (int)l, p);
        p += l + (p[l] == '\n');
    }
}

/* per tag: what a caller sends and gets, and how the numbers are mapped (mact_model_tags_json is the same as JSON) */
static void describe_tags(const struct mact_model *m, char *buf, size_t bl, size_t *o)
{
    if (!m->ns) return;
    const mact_norm_stats *ns = m->ns;
    const mact_norm_tag *def = mact_norm_find_tag(ns, NULL, NULL, 0);
    P("norm tags: %d%s%s%s\n", ns->n_tags, def ? " (default \"" : " (no default: name one)", def ? def->name : "",
      def ? "\")" : "");
    for (int i = 0; i < ns->n_tags && i < 64; i++) {
        const mact_norm_tag *t = &ns->tags[i];
        const int H = t->action_horizon ? t->action_horizon : m->cfg.max_action_horizon;
        P("  %s%s:\n    send: state [%d]", t->name, t == def ? " (default)" : "", t->state.dim);
        describe_names(t->state.names, buf, bl, o);
        P("\n          cameras %d%s", t->n_cameras, t->n_cameras ? ", in this order:" : " (the tag names none)");
        for (int c = 0; c < t->n_cameras && c < MACT_NORM_MAX_CAMERAS; c++) P("%s%s", c ? ", " : " ", t->camera_keys[c]);
        P("\n    get:  actions [%d x %d]", t->n_action_steps ? t->n_action_steps : H, t->action.dim);
        describe_names(t->action.names, buf, bl, o);
        P("\n          the first %d rows of a horizon of %d; flow steps %d\n    maps: %s; ",
          t->n_action_steps ? t->n_action_steps : H, H, m->cfg.flow_steps,
          t->lerobot ? "LeRobot's processors (float32)" : "HF norm_stats arithmetic");
        describe_frame(&t->state_frame, "joint frame: state", buf, bl, o);
        describe_frame(&t->action_frame, ", actions", buf, bl, o);
        P("\n");
    }
    if (ns->n_tags > 64) P("  ... %d more\n", ns->n_tags - 64);
}
#undef P

mact_status mact_model_describe(const mact_model *m, char *buf, size_t bl)
{
    if (!m || !buf || !bl) return MACT_ERR_INPUT;
    const mact_config *c = &m->cfg;
    size_t o = 0;
#define P(...) do { if (o < bl) o += snprintf(buf + o, bl - o, __VA_ARGS__); } while (0)
    static const char *const pool_names[] = {"config", "sdpa", "eager", "none"};
    describe_source(m, buf, bl, &o);
    P("kernels: %s (%s computed as %s)\n", mact_ops_name(m->ops), mact_precision_str(m->precision),
      mact_precision_str(m->kprec));
    if (m->int8_parts) {
        char parts[64];
        P("int8 components: %s (the rest bf16)\n", mact_int8_parts_str(m->int8_parts, parts, sizeof parts));
    }
    P("vision: %d stored ViT layers, hidden %d, %d heads x %d, mlp %d, image %dx%d, patch %d (%d patches)\n",
      c->vit_layers, c->vit_hidden, c->vit_heads, c->vit_head_dim, c->vit_inter, c->image_h, c->image_w, c->patch,
      c->grid_h * c->grid_w);
    P("adapter: taps");
    for (int i = 0; i < c->n_taps; i++) P(" %d", c->taps[i]);
    P(", pooling %dx%d -> %dx%d (mask: %s), projector %d -> %d -> %d\n", c->pool_h, c->pool_w, c->pooled_h,
      c->pooled_w, pool_names[c->pooling_mask], c->pool_hidden, c->proj_inter, c->d_model);
    if (c->use_sampler)
        P("grid token sampler: K=%d tokens/image, C=%d (%s the projector), scout %d, coord %d\n", c->sampler_k,
          c->sampler_c, c->sampler_after_projector ? "after" : "before", c->sampler_hidden, c->coord_hidden);
    else
        P("grid token sampler: none (%d tokens/image)\n", c->tokens_per_image);
    P("llm: %d layers, hidden %d, %d q heads / %d kv heads x %d, mlp %d, vocab %lld + %lld, rope_theta %g, "
      "qk_norm %s, qkv_bias %d\n", c->n_layers, c->d_model, c->n_heads, c->n_kv_heads, c->head_dim, c->ff_inter,
      (long long)c->vocab_size, (long long)c->additional_vocab_size, c->rope_theta,
      c->qk_norm == MACT_QKNORM_QWEN3 ? "qwen3" : c->qk_norm == MACT_QKNORM_OLMO ? "olmo" : "none", c->qkv_bias);
    P("action expert: %d layers, hidden %d, %d heads x %d, mlp %d, timestep dim %d, max action %d x %d, "
      "%d flow steps, encoder mask %s\n", c->ae_layers, c->ae_hidden, c->ae_heads, c->ae_head_dim, c->ae_inter,
      c->ae_tdim, c->max_action_horizon, c->max_action_dim, c->flow_steps,
      c->encoder_mask == MACT_ENC_ALL ? "all" : "drop_eos");
    int64_t tot = 0, totb = 0;
    P("%-18s %14s %14s\n", "component", "parameters", "bytes");
    for (int k = 0; k < 6; k++) {
        tot += m->desc_params[k];
        totb += m->desc_bytes[k];
        P("%-18s %14lld %14lld\n", desc_names[k], (long long)m->desc_params[k], (long long)m->desc_bytes[k]);
    }
    const int64_t *dtb = m->desc_dtype_bytes;
    P("%-18s %14lld %14lld\n", "total", (long long)tot, (long long)totb);
    P("dtype mix (bytes): F32 %lld, BF16 %lld, F16 %lld\n", (long long)dtb[MACT_F32], (long long)dtb[MACT_BF16],
      (long long)dtb[MACT_F16]);
    describe_tags(m, buf, bl, &o);
#undef P
    return o < bl ? MACT_OK : MACT_ERR_INPUT;  /* o >= bl: snprintf truncated a line */
}
