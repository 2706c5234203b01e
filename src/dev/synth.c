/* Random MolmoAct2 checkpoints from C: see synth.h for the contract, the presets and the token layout.
 * Layout sources: docs/design.md (names, dtypes, config.json), shared/spec/molmoact2.md sections 1-2
 * (shapes), 4.2 (token ids), 4.4 (norm_stats.json), and the tensor table of src/model.c. */
#include "dev/synth.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#endif
#include "model/model.h"
#include "kernels/threadpool.h"

/* ------------------------------------------------------------------------------------------------
 * presets */

typedef struct {
    const char *name;
    int vit_hidden, vit_heads, vit_head_dim, vit_inter, vit_layers, n_taps, taps[2];
    int pool_hidden, pool_heads, pool_head_dim, proj_inter;
    int d_model, n_heads, n_kv, head_dim, n_layers, ff_inter, max_pos;
    int64_t vocab, add_vocab;
    double rope_theta;
    int ae_hidden, ae_heads, ffn_multiple_of, t_dim;
    double mlp_ratio;
    int sampler_k, scout_hidden, coord_hidden;
    int flow_steps, num_state_tokens;
    int so101_stats;   /* 0: "libero" norm tag, 1: "so100_so101_molmoact2" */
} preset;

static const preset PRESETS[] = {
    {.name = "tiny", .vit_hidden = 64, .vit_heads = 4, .vit_head_dim = 16, .vit_inter = 96, .vit_layers = 3,
     .n_taps = 2, .taps = {-1, -2}, .pool_hidden = 64, .pool_heads = 4, .pool_head_dim = 16, .proj_inter = 128,
     .d_model = 96, .n_heads = 4, .n_kv = 2, .head_dim = 24, .n_layers = 3, .ff_inter = 160, .max_pos = 4096,
     .vocab = 1024, .add_vocab = 128, .rope_theta = 5e6, .ae_hidden = 64, .ae_heads = 4, .ffn_multiple_of = 64,
     .t_dim = 32, .mlp_ratio = 4.0, .sampler_k = 16, .scout_hidden = 512, .coord_hidden = 256, .flow_steps = 2,
     .num_state_tokens = 256, .so101_stats = 0},
    /* the real widths and head counts with 2 layers per component and tiny's vocab: parity tests at the
     * real shapes without a 10 GB file */
    {.name = "wide", .vit_hidden = 1152, .vit_heads = 16, .vit_head_dim = 72, .vit_inter = 4304, .vit_layers = 2,
     .n_taps = 2, .taps = {-1, -2}, .pool_hidden = 1152, .pool_heads = 16, .pool_head_dim = 72, .proj_inter = 9728,
     .d_model = 2560, .n_heads = 32, .n_kv = 8, .head_dim = 128, .n_layers = 2, .ff_inter = 9728, .max_pos = 16384,
     .vocab = 1024, .add_vocab = 128, .rope_theta = 5e6, .ae_hidden = 768, .ae_heads = 8, .ffn_multiple_of = 256,
     .t_dim = 256, .mlp_ratio = 4.0, .sampler_k = 16, .scout_hidden = 512, .coord_hidden = 256, .flow_steps = 2,
     .num_state_tokens = 256, .so101_stats = 0},
    {.name = "libero", .vit_hidden = 1152, .vit_heads = 16, .vit_head_dim = 72, .vit_inter = 4304, .vit_layers = 10,
     .n_taps = 2, .taps = {-1, -4}, .pool_hidden = 1152, .pool_heads = 16, .pool_head_dim = 72, .proj_inter = 9728,
     .d_model = 2560, .n_heads = 32, .n_kv = 8, .head_dim = 128, .n_layers = 36, .ff_inter = 9728, .max_pos = 16384,
     .vocab = 154624, .add_vocab = 128, .rope_theta = 5e6, .ae_hidden = 768, .ae_heads = 8, .ffn_multiple_of = 256,
     .t_dim = 256, .mlp_ratio = 4.0, .sampler_k = 16, .scout_hidden = 512, .coord_hidden = 256, .flow_steps = 2,
     .num_state_tokens = 256, .so101_stats = 0},
    {.name = "so101", .vit_hidden = 1152, .vit_heads = 16, .vit_head_dim = 72, .vit_inter = 4304, .vit_layers = 10,
     .n_taps = 2, .taps = {-1, -4}, .pool_hidden = 1152, .pool_heads = 16, .pool_head_dim = 72, .proj_inter = 9728,
     .d_model = 2560, .n_heads = 32, .n_kv = 8, .head_dim = 128, .n_layers = 36, .ff_inter = 9728, .max_pos = 16384,
     .vocab = 154624, .add_vocab = 128, .rope_theta = 5e6, .ae_hidden = 768, .ae_heads = 8, .ffn_multiple_of = 256,
     .t_dim = 256, .mlp_ratio = 4.0, .sampler_k = 16, .scout_hidden = 512, .coord_hidden = 256, .flow_steps = 10,
     .num_state_tokens = 256, .so101_stats = 1},
};
#define N_PRESETS (sizeof PRESETS / sizeof PRESETS[0])

const char *mact_synth_presets(void) { return "tiny, wide, libero, so101"; }

int mact_synth_dtype_from_name(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "mixed")) return MACT_SYNTH_MIXED;
    if (!strcmp(name, "f32")) return MACT_SYNTH_F32;
    if (!strcmp(name, "bf16")) return MACT_SYNTH_BF16;
    return -1;
}

const char *mact_synth_dtype_name(int m)
{
    return m == MACT_SYNTH_MIXED ? "mixed" : m == MACT_SYNTH_F32 ? "f32" : m == MACT_SYNTH_BF16 ? "bf16" : "?";
}

/* Special ids of the token layout in synth.h. */
typedef struct {
    int64_t V, P;   /* vocab_size; first added token */
    int64_t endoftext, im_start, im_end, setup_start, setup_end, control_start, control_end, state_start,
        state_end, action_start, action_end, action_output, state0;
} token_ids;

static const char *ROBOT_TOKENS[9] = {"<setup_start>", "<setup_end>", "<control_start>", "<control_end>",
                                      "<state_start>", "<state_end>", "<action_start>", "<action_end>",
                                      "<action_output>"};
static const char *IMAGE_TOKENS[9] = {"<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<low_res_im_start>",
                                      "<|image|>", "<im_low>", "<frame_start>", "<frame_end>"};

static token_ids layout_ids(const preset *p)
{
    token_ids t;
    t.V = p->vocab;
    t.P = p->vocab - 12 - p->num_state_tokens;
    t.endoftext = t.P;
    t.im_start = t.P + 1;
    t.im_end = t.P + 2;
    t.setup_start = t.P + 3;
    t.setup_end = t.P + 4;
    t.control_start = t.P + 5;
    t.control_end = t.P + 6;
    t.state_start = t.P + 7;
    t.state_end = t.P + 8;
    t.action_start = t.P + 9;
    t.action_end = t.P + 10;
    t.action_output = t.P + 11;
    t.state0 = t.P + 12;
    return t;
}

/* ------------------------------------------------------------------------------------------------
 * random numbers: splitmix64 seeding, xoshiro256** streams, one stream per 64K-element block so the
 * values do not depend on the thread count */

static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct { uint64_t s[4]; } xoshiro;

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t xo_next(xoshiro *r)
{
    uint64_t *s = r->s;
    const uint64_t res = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return res;
}

static void xo_seed(xoshiro *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = seed = mix64(seed);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* approximately N(0,1): the sum of four 16-bit uniforms (Irwin-Hall, |z| < 3.47), one 64-bit draw.
 * Centred half a step off zero so no value is exactly 0 (mean bias 1.3e-5). */
static inline float approx_normal(uint64_t x)
{
    uint32_t s = (uint32_t)(x & 0xFFFF) + (uint32_t)((x >> 16) & 0xFFFF) + (uint32_t)((x >> 32) & 0xFFFF) +
                 (uint32_t)(x >> 48);
    return ((float)s - 131069.5f) * (1.0f / 37837.227f);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7FFFu + ((b >> 16) & 1u);  /* round to nearest even; values here are finite */
    return (uint16_t)(b >> 16);
}

/* simple seeded stream for the small JSON files */
typedef struct { xoshiro x; } rng;
static double rng_u(rng *r) { return (double)(xo_next(&r->x) >> 11) * (1.0 / 9007199254740992.0); }
static double rng_range(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_u(r); }

/* ------------------------------------------------------------------------------------------------
 * the tensor list (same names and shapes as walk_tensors in model.c) */

enum { K_NORMAL = 0, K_NORM1 };  /* scale * N(0,1); 1 + U(-0.3, 0.3) */

typedef struct {
    char name[120];
    int dtype;          /* MACT_F32 / MACT_BF16 */
    int nd;
    int64_t shape[2];
    int kind;
    float scale;
    int64_t nel, off;   /* element count, byte offset in the data section */
} tspec;

typedef struct {
    tspec *t;
    size_t n, cap;
    int mode;
    int oom;
} tlist;

/* big: a VLM matrix stored BF16 under "mixed"; under "bf16" every 2-D tensor is BF16 */
static void add_t(tlist *L, const char *name, int nd, int64_t a, int64_t b, int big, int kind, float scale)
{
    if (L->oom) return;
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 512;
        tspec *p = realloc(L->t, cap * sizeof *p);
        if (!p) { L->oom = 1; return; }
        L->t = p;
        L->cap = cap;
    }
    tspec *t = &L->t[L->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->nd = nd;
    t->shape[0] = a;
    t->shape[1] = nd == 2 ? b : 0;
    t->nel = nd == 2 ? a * b : a;
    t->kind = kind;
    t->scale = scale;
    if (L->mode == MACT_SYNTH_F32) t->dtype = MACT_F32;
    else if (L->mode == MACT_SYNTH_BF16) t->dtype = nd == 2 ? MACT_BF16 : MACT_F32;
    else t->dtype = big && nd == 2 ? MACT_BF16 : MACT_F32;
}

#define BIAS_SCALE 0.02f

static void add_lin(tlist *L, const char *prefix, int64_t out, int64_t in, int bias, int big)
{
    char n[160];
    snprintf(n, sizeof n, "%s.weight", prefix);
    add_t(L, n, 2, out, in, big, K_NORMAL, 1.0f / sqrtf((float)in));
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", prefix);
        add_t(L, n, 1, out, 0, 0, K_NORMAL, BIAS_SCALE);
    }
}

static void add_vec(tlist *L, const char *name, int64_t n, int kind, float scale)
{
    add_t(L, name, 1, n, 0, 0, kind, scale);
}

static void build_tensors(const preset *p, int no_lm_head, tlist *L)
{
    char n[160];
    const char *V = "model.vision_backbone.";
    int64_t vh = p->vit_hidden, vqd = (int64_t)p->vit_heads * p->vit_head_dim;
#define NM(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
    add_lin(L, NM("%simage_vit.patch_embedding", V), vh, 14 * 14 * 3, 1, 1);
    add_t(L, NM("%simage_vit.positional_embedding", V), 2, 27 * 27, vh, 1, K_NORMAL, 0.5f);
    for (int j = 0; j < p->vit_layers; j++) {
        char B[128];
        snprintf(B, sizeof B, "%simage_vit.transformer.resblocks.%d.", V, j);
        add_vec(L, NM("%sattention_norm.weight", B), vh, K_NORM1, 0);
        add_vec(L, NM("%sattention_norm.bias", B), vh, K_NORMAL, BIAS_SCALE);
        add_lin(L, NM("%sattention.wq", B), vqd, vh, 1, 1);
        add_lin(L, NM("%sattention.wk", B), vqd, vh, 1, 1);
        add_lin(L, NM("%sattention.wv", B), vqd, vh, 1, 1);
        add_lin(L, NM("%sattention.wo", B), vh, vqd, 1, 1);
        add_vec(L, NM("%sffn_norm.weight", B), vh, K_NORM1, 0);
        add_vec(L, NM("%sffn_norm.bias", B), vh, K_NORMAL, BIAS_SCALE);
        add_lin(L, NM("%sfeed_forward.w1", B), p->vit_inter, vh, 1, 1);
        add_lin(L, NM("%sfeed_forward.w2", B), vh, p->vit_inter, 1, 1);
    }
    int64_t pin = (int64_t)p->n_taps * vh, pq = (int64_t)p->pool_heads * p->pool_head_dim;
    add_lin(L, NM("%simage_pooling_2d.wq", V), pq, pin, 1, 1);
    add_lin(L, NM("%simage_pooling_2d.wk", V), pq, pin, 1, 1);
    add_lin(L, NM("%simage_pooling_2d.wv", V), pq, pin, 1, 1);
    add_lin(L, NM("%simage_pooling_2d.wo", V), p->pool_hidden, pq, 1, 1);
    add_lin(L, NM("%simage_projector.w1", V), p->proj_inter, p->pool_hidden, 0, 1);
    add_lin(L, NM("%simage_projector.w3", V), p->proj_inter, p->pool_hidden, 0, 1);
    add_lin(L, NM("%simage_projector.w2", V), p->d_model, p->proj_inter, 0, 1);
    /* grid token sampler after the projector: C = LLM width (spec 7.1) */
    int64_t C = p->d_model;
    add_lin(L, NM("%stoken_sampler.scout_mlp.0", V), p->scout_hidden, C, 1, 0);
    add_t(L, NM("%stoken_sampler.scout_mlp.2.weight", V), 2, 2 * p->sampler_k, p->scout_hidden, 0, K_NORMAL,
          1.0f / sqrtf((float)p->scout_hidden));
    /* a wide bias spreads the K sample points over the grid (borders included) */
    add_vec(L, NM("%stoken_sampler.scout_mlp.2.bias", V), 2 * p->sampler_k, K_NORMAL, 1.5f);
    add_lin(L, NM("%stoken_sampler.coord_encoder.0", V), p->coord_hidden, 2, 1, 0);
    add_lin(L, NM("%stoken_sampler.coord_encoder.2", V), C, p->coord_hidden, 1, 0);
    /* LLM */
    const char *T = "model.transformer.";
    int64_t D = p->d_model, hd = p->head_dim, qd = (int64_t)p->n_heads * hd, kvd = (int64_t)p->n_kv * hd;
    add_t(L, NM("%swte.embedding", T), 2, p->vocab, D, 1, K_NORMAL, 1.0f);
    add_t(L, NM("%swte.new_embedding", T), 2, p->add_vocab, D, 1, K_NORMAL, 1.0f);
    for (int i = 0; i < p->n_layers; i++) {
        char B[128];
        snprintf(B, sizeof B, "%sblocks.%d.", T, i);
        add_vec(L, NM("%sattn_norm.weight", B), D, K_NORM1, 0);
        add_lin(L, NM("%sself_attn.att_proj", B), qd + 2 * kvd, D, 0, 1);
        add_vec(L, NM("%sself_attn.q_norm.weight", B), hd, K_NORM1, 0);   /* qk_norm_type qwen3 */
        add_vec(L, NM("%sself_attn.k_norm.weight", B), hd, K_NORM1, 0);
        add_lin(L, NM("%sself_attn.attn_out", B), D, qd, 0, 1);
        add_vec(L, NM("%sff_norm.weight", B), D, K_NORM1, 0);
        add_lin(L, NM("%smlp.ff_proj", B), 2 * (int64_t)p->ff_inter, D, 0, 1);
        add_lin(L, NM("%smlp.ff_out", B), D, p->ff_inter, 0, 1);
    }
    add_vec(L, NM("%sln_f.weight", T), D, K_NORM1, 0);
    if (!no_lm_head) add_lin(L, "lm_head", p->vocab, D, 0, 1);
    /* action expert: every Linear has a bias except context_k/v_proj (docs/design.md) */
    const char *A = "model.action_expert.";
    int64_t E = p->ae_hidden, AD = 32;
    int inner = (int)(p->ae_hidden * p->mlp_ratio);
    int64_t ae_inter = (inner + p->ffn_multiple_of - 1) / p->ffn_multiple_of * p->ffn_multiple_of;
    add_lin(L, NM("%stime_embed.1", A), E, p->t_dim, 1, 0);
    add_lin(L, NM("%stime_embed.3", A), E, E, 1, 0);
    add_lin(L, NM("%saction_embed", A), E, AD, 1, 0);
    add_lin(L, NM("%scontext_k_proj", A), E, kvd, 0, 0);
    add_lin(L, NM("%scontext_v_proj", A), E, kvd, 0, 0);
    for (int i = 0; i < p->n_layers; i++) {
        char B[128];
        snprintf(B, sizeof B, "%sblocks.%d.", A, i);
        add_lin(L, NM("%sself_attn.qkv", B), 3 * E, E, 1, 0);
        add_lin(L, NM("%sself_attn.out_proj", B), E, E, 1, 0);
        add_lin(L, NM("%scross_attn.q_proj", B), E, E, 1, 0);
        add_lin(L, NM("%scross_attn.out_proj", B), E, E, 1, 0);
        add_lin(L, NM("%smlp.gate_proj", B), ae_inter, E, 1, 0);
        add_lin(L, NM("%smlp.up_proj", B), ae_inter, E, 1, 0);
        add_lin(L, NM("%smlp.down_proj", B), E, ae_inter, 1, 0);
        add_lin(L, NM("%smodulation.linear", B), 9 * E, E, 1, 0);
    }
    add_lin(L, NM("%sfinal_layer.modulation.linear", A), 2 * E, E, 1, 0);
    add_lin(L, NM("%sfinal_layer.linear", A), AD, E, 1, 0);
#undef NM
}

/* safetensors (Rust) writes tensors sorted by dtype, widest first, then by name: F32 before BF16
 * keeps every tensor naturally aligned. */
static int cmp_tspec(const void *a, const void *b)
{
    const tspec *x = a, *y = b;
    size_t sx = mact_dtype_size(x->dtype), sy = mact_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ------------------------------------------------------------------------------------------------
 * small helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int mkdir_p(const char *dir, char *err, size_t errlen)
{
    char buf[4096];
    size_t l = strlen(dir);
    if (l == 0 || l >= sizeof buf)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: bad output directory '%s'", dir);
    memcpy(buf, dir, l + 1);
    for (size_t i = 1; i <= l; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot create directory %s: %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: %s is not a directory", dir);
    return 0;
}

/* writes text to dir/name; adds the bytes to *total */
static int write_text(const char *dir, const char *name, const char *text, int64_t *total, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot create %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        int e = errno;
        unlink(path);
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot write %s: %s", path, strerror(e));
    }
    *total += (int64_t)n + 1;
    return 0;
}

static int write_json(const char *dir, const char *name, cJSON *j, int formatted, int64_t *total, char *err,
                      size_t errlen)
{
    if (!j) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory building %s", name);
    char *s = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!s) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory printing %s", name);
    int rc = write_text(dir, name, s, total, err, errlen);
    cJSON_free(s);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * model.safetensors */

#define BLOCK_ELEMS ((int64_t)1 << 16)
#define BUF_BYTES ((size_t)32 << 20)

static void gen_block(const tspec *t, uint64_t tseed, int64_t blk, int64_t n, void *out)
{
    xoshiro r;
    xo_seed(&r, tseed ^ mix64((uint64_t)blk * 0xD1B54A32D192ED03ull));
    float s = t->scale;
    if (t->dtype == MACT_BF16) {
        uint16_t *o = out;
        if (t->kind == K_NORM1)
            for (int64_t i = 0; i < n; i++)
                o[i] = f32_to_bf16(1.0f + 0.3f * ((float)(int64_t)(xo_next(&r) >> 40) * (1.0f / 8388608.0f) - 1.0f));
        else
            for (int64_t i = 0; i < n; i++) o[i] = f32_to_bf16(s * approx_normal(xo_next(&r)));
    } else {
        float *o = out;
        if (t->kind == K_NORM1)
            for (int64_t i = 0; i < n; i++)
                o[i] = 1.0f + 0.3f * ((float)(int64_t)(xo_next(&r) >> 40) * (1.0f / 8388608.0f) - 1.0f);
        else
            for (int64_t i = 0; i < n; i++) o[i] = s * approx_normal(xo_next(&r));
    }
}

/* growable string for the header */
typedef struct { char *s; size_t n, cap; int oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->s && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t cap = (b->cap ? b->cap * 2 : 1 << 16) + (size_t)k;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p;
        b->cap = cap;
    }
}

/* Double buffering: the calling thread fills one buffer (blocks generated in parallel) while a writer
 * thread writes the other, so generation overlaps the write. Tensors are packed back to back into
 * the buffers in data order; a tensor is cut only at block boundaries, so its values never depend on
 * where the buffers fall. Returns 0, MACT_ERR_IO (errno in *err_no) or MACT_ERR_NOMEM. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf[2];
    size_t len[2];
    int full[2];
    int done, failed, err_no;
    FILE *f;
} write_queue;

static void *writer_main(void *arg)
{
    write_queue *q = arg;
    for (int k = 0;; k ^= 1) {
        pthread_mutex_lock(&q->mu);
        while (!q->full[k] && !q->done) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->full[k]) {
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        int failed = q->failed;
        pthread_mutex_unlock(&q->mu);
        int bad = !failed && fwrite(q->buf[k], 1, q->len[k], q->f) != q->len[k];
        int e = errno;
        pthread_mutex_lock(&q->mu);
        if (bad) { q->failed = 1; q->err_no = e; }
        q->full[k] = 0;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
}

/* hands buffer k (len bytes) to the writer and waits until buffer k^1 is free; 0 or -1 (write failed) */
static int queue_swap(write_queue *q, int k, size_t len)
{
    pthread_mutex_lock(&q->mu);
    q->len[k] = len;
    q->full[k] = 1;
    pthread_cond_broadcast(&q->cv);
    while (q->full[k ^ 1]) pthread_cond_wait(&q->cv, &q->mu);
    int failed = q->failed;
    pthread_mutex_unlock(&q->mu);
    return failed ? -1 : 0;
}

typedef struct {
    const tspec *t;
    uint64_t tseed;
    int64_t blk0, n;
    uint8_t *dst;
    size_t es;
} gen_job;

/* block b of a run of blocks: each block has its own random stream, so the values do not depend on which
 * thread makes them */
static void gen_task(void *arg, int64_t b, int tid)
{
    (void)tid;
    const gen_job *j = arg;
    int64_t bn = j->n - b * BLOCK_ELEMS < BLOCK_ELEMS ? j->n - b * BLOCK_ELEMS : BLOCK_ELEMS;
    gen_block(j->t, j->tseed, j->blk0 + b, bn, j->dst + (size_t)(b * BLOCK_ELEMS) * j->es);
}

static int stream_data(FILE *f, const tlist *L, uint64_t seed, int n_threads, int *err_no)
{
    mact_threadpool *pool = NULL;
    mact_threadpool_new(n_threads, &pool, NULL, 0);  /* NULL (out of memory): this thread makes every block */
    write_queue q = {.f = f};
    q.buf[0] = malloc(BUF_BYTES);
    q.buf[1] = malloc(BUF_BYTES);
    if (!q.buf[0] || !q.buf[1]) { free(q.buf[0]); free(q.buf[1]); mact_threadpool_free(pool); return MACT_ERR_NOMEM; }
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, writer_main, &q) != 0) {
        pthread_mutex_destroy(&q.mu);
        pthread_cond_destroy(&q.cv);
        free(q.buf[0]);
        free(q.buf[1]);
        mact_threadpool_free(pool);
        return MACT_ERR_NOMEM;
    }
    int k = 0, failed = 0;
    size_t pos = 0;  /* fill level of buffer k */
    const int nt = 0;  /* every thread of the pool */
    for (size_t i = 0; !failed && i < L->n; i++) {
        const tspec *t = &L->t[i];
        size_t es = mact_dtype_size(t->dtype);
        uint64_t tseed = mix64(seed ^ mix64(fnv1a(t->name)));
        for (int64_t start = 0; !failed && start < t->nel;) {
            int64_t left = t->nel - start;
            int64_t room = (int64_t)((BUF_BYTES - pos) / es);
            if (room < left && room < BLOCK_ELEMS) {  /* flush: not even one block fits */
                failed = queue_swap(&q, k, pos);
                k ^= 1;
                pos = 0;
                continue;
            }
            int64_t n = left <= room ? left : room / BLOCK_ELEMS * BLOCK_ELEMS;
            int64_t nblk = (n + BLOCK_ELEMS - 1) / BLOCK_ELEMS, blk0 = start / BLOCK_ELEMS;
            uint8_t *dst = q.buf[k] + pos;  /* F32 tensors come first, so F32 data stays 4-byte aligned */
            gen_job gj = {t, tseed, blk0, n, dst, es};
            if (nblk > 1) mact_pool_run(pool, nblk, nt, gen_task, &gj);
            else gen_task(&gj, 0, 0);
            pos += (size_t)n * es;
            start += n;
        }
    }
    if (!failed && pos) failed = queue_swap(&q, k, pos);
    pthread_mutex_lock(&q.mu);
    while (q.full[0] || q.full[1]) pthread_cond_wait(&q.cv, &q.mu);
    q.done = 1;
    pthread_cond_broadcast(&q.cv);
    failed = q.failed;
    *err_no = q.err_no;
    pthread_mutex_unlock(&q.mu);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&q.mu);
    pthread_cond_destroy(&q.cv);
    free(q.buf[0]);
    free(q.buf[1]);
    mact_threadpool_free(pool);
    return failed ? MACT_ERR_IO : 0;
}

static int write_safetensors(const char *dir, const tlist *L, uint64_t seed, const char *preset_name, int n_threads,
                             int64_t *bytes_out, char *err, size_t errlen)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s/model.safetensors.partial", dir);
    /* header: __metadata__ first, then tensors in data order with contiguous offsets */
    sbuf h = {0};
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"mact_generator\":\"mact synth\",\"mact_preset\":\"%s\","
              "\"mact_seed\":\"%llu\",\"mact_dtype\":\"%s\"}", preset_name, (unsigned long long)seed,
              mact_synth_dtype_name(L->mode));
    int64_t off = 0;
    for (size_t i = 0; i < L->n; i++) {
        tspec *t = &L->t[i];
        int64_t nb = t->nel * (int64_t)mact_dtype_size(t->dtype);
        t->off = off;
        if (t->nd == 2)
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}", t->name,
                      mact_dtype_name(t->dtype), (long long)t->shape[0], (long long)t->shape[1], (long long)off,
                      (long long)(off + nb));
        else
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}", t->name,
                      mact_dtype_name(t->dtype), (long long)t->shape[0], (long long)off, (long long)(off + nb));
        off += nb;
    }
    sb_printf(&h, "}");
    while (!h.oom && h.n % 8) sb_printf(&h, " ");
    if (h.oom) { free(h.s); return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (header)"); }

    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(h.s);
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot create %s: %s", tmp, strerror(e));
    }
    setvbuf(f, NULL, _IONBF, 0);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(h.s, 1, h.n, f) == h.n;
    int e = errno;
    free(h.s);
    if (ok) {
        int rc = stream_data(f, L, seed, n_threads, &e);
        if (rc == MACT_ERR_NOMEM) {
            fclose(f);
            unlink(tmp);
            return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory");
        }
        ok = rc == 0;
    }
    if (fclose(f) != 0 && ok) { ok = 0; e = errno; }
    if (!ok) {
        unlink(tmp);
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    /* a stale shard index would make readers that prefer it (the Python reference) ignore this file */
    char idx[4300];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    unlink(idx);
    *bytes_out = 8 + (int64_t)h.n + off;
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * config.json (HF MolmoAct2Config, spec section 8) */

static cJSON *ints_array(const int *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *make_config(const preset *p, int mode)
{
    token_ids id = layout_ids(p);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "model_type", "molmoact2");
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("MolmoAct2ForConditionalGeneration"));
    cJSON_AddStringToObject(c, "torch_dtype", mode == MACT_SYNTH_F32 ? "float32" : "bfloat16");

    cJSON *v = cJSON_AddObjectToObject(c, "vit_config");
    cJSON_AddNumberToObject(v, "hidden_size", p->vit_hidden);
    cJSON_AddNumberToObject(v, "intermediate_size", p->vit_inter);
    cJSON_AddNumberToObject(v, "num_hidden_layers", p->vit_layers);
    cJSON_AddNumberToObject(v, "num_attention_heads", p->vit_heads);
    cJSON_AddNumberToObject(v, "num_key_value_heads", p->vit_heads);
    cJSON_AddNumberToObject(v, "head_dim", p->vit_head_dim);
    cJSON_AddStringToObject(v, "hidden_act", "gelu_pytorch_tanh");
    cJSON_AddNumberToObject(v, "layer_norm_eps", 1e-6);
    int isz[2] = {378, 378};
    cJSON_AddItemToObject(v, "image_default_input_size", ints_array(isz, 2));
    cJSON_AddNumberToObject(v, "image_patch_size", 14);
    cJSON_AddNumberToObject(v, "image_num_pos", 729);
    cJSON_AddBoolToObject(v, "float32_attention", 1);
    cJSON_AddStringToObject(v, "attn_implementation", "sdpa");

    cJSON *a = cJSON_AddObjectToObject(c, "adapter_config");
    cJSON_AddItemToObject(a, "vit_layers", ints_array(p->taps, p->n_taps));
    cJSON_AddBoolToObject(a, "pooling_attention_mask", 1);
    cJSON_AddNumberToObject(a, "hidden_size", p->pool_hidden);
    cJSON_AddNumberToObject(a, "num_attention_heads", p->pool_heads);
    cJSON_AddNumberToObject(a, "num_key_value_heads", p->pool_heads);
    cJSON_AddNumberToObject(a, "head_dim", p->pool_head_dim);
    cJSON_AddBoolToObject(a, "float32_attention", 1);
    cJSON_AddStringToObject(a, "hidden_act", "silu");
    cJSON_AddNumberToObject(a, "intermediate_size", p->proj_inter);
    cJSON_AddNumberToObject(a, "text_hidden_size", p->d_model);
    int pool[2] = {2, 2};
    cJSON_AddItemToObject(a, "pooling_size", ints_array(pool, 2));
    cJSON_AddStringToObject(a, "attn_implementation", "sdpa");

    cJSON *t = cJSON_AddObjectToObject(c, "text_config");
    cJSON_AddNumberToObject(t, "hidden_size", p->d_model);
    cJSON_AddNumberToObject(t, "num_attention_heads", p->n_heads);
    cJSON_AddNumberToObject(t, "num_key_value_heads", p->n_kv);
    cJSON_AddNumberToObject(t, "head_dim", p->head_dim);
    cJSON_AddNumberToObject(t, "vocab_size", (double)p->vocab);
    cJSON_AddNumberToObject(t, "additional_vocab_size", (double)p->add_vocab);
    cJSON_AddBoolToObject(t, "qkv_bias", 0);
    cJSON_AddNumberToObject(t, "num_hidden_layers", p->n_layers);
    cJSON_AddNumberToObject(t, "intermediate_size", p->ff_inter);
    cJSON_AddStringToObject(t, "hidden_act", "silu");
    cJSON_AddNumberToObject(t, "max_position_embeddings", p->max_pos);
    cJSON_AddNumberToObject(t, "rope_theta", p->rope_theta);
    cJSON_AddNullToObject(t, "rope_scaling");
    cJSON_AddBoolToObject(t, "use_qk_norm", 1);
    cJSON_AddStringToObject(t, "qk_norm_type", "qwen3");
    cJSON_AddNumberToObject(t, "layer_norm_eps", 1e-6);
    cJSON_AddBoolToObject(t, "norm_after", 0);
    cJSON_AddBoolToObject(t, "tie_word_embeddings", 0);

    cJSON *e = cJSON_AddObjectToObject(c, "action_expert_config");
    cJSON_AddNumberToObject(e, "hidden_size", p->ae_hidden);
    cJSON_AddNumberToObject(e, "num_layers", p->n_layers);
    cJSON_AddNumberToObject(e, "num_heads", p->ae_heads);
    cJSON_AddNumberToObject(e, "mlp_ratio", p->mlp_ratio);
    cJSON_AddNumberToObject(e, "ffn_multiple_of", p->ffn_multiple_of);
    cJSON_AddNumberToObject(e, "timestep_embed_dim", p->t_dim);
    cJSON_AddNumberToObject(e, "dropout", 0);
    cJSON_AddNumberToObject(e, "attn_dropout", 0);
    cJSON_AddBoolToObject(e, "context_layer_norm", 1);
    cJSON_AddBoolToObject(e, "qk_norm", 1);
    cJSON_AddNumberToObject(e, "qk_norm_eps", 1e-6);
    cJSON_AddBoolToObject(e, "rope", 1);
    cJSON_AddBoolToObject(e, "causal_attn", 0);

    cJSON_AddBoolToObject(c, "use_frame_special_tokens", 1);
    cJSON_AddBoolToObject(c, "add_action_expert", 1);
    cJSON_AddNumberToObject(c, "max_action_dim", 32);
    cJSON_AddNumberToObject(c, "max_action_horizon", 30);
    cJSON_AddNumberToObject(c, "n_obs_steps", 1);
    cJSON_AddStringToObject(c, "action_mode", "continuous");
    cJSON_AddStringToObject(c, "state_format", "discrete");
    cJSON_AddNumberToObject(c, "flow_matching_num_steps", p->flow_steps);
    cJSON_AddBoolToObject(c, "mask_action_dim_padding", 1);
    cJSON_AddBoolToObject(c, "enable_depth_reasoning", 0);
    cJSON_AddBoolToObject(c, "action_expert_depth_gate", 0);
    cJSON_AddBoolToObject(c, "add_setup_tokens", 1);
    cJSON_AddBoolToObject(c, "add_control_tokens", 1);
    cJSON_AddStringToObject(c, "norm_stats_filename", "norm_stats.json");
    cJSON_AddBoolToObject(c, "tie_word_embeddings", 0);
    cJSON_AddBoolToObject(c, "use_grid_token_sampler", 1);
    cJSON_AddNumberToObject(c, "grid_token_sampler_num_tokens", p->sampler_k);
    /* token ids: image tokens at vocab_size + index (spec 4.2), the rest per synth.h's layout */
    int64_t V = id.V;
    struct { const char *k; int64_t v; } ids[] = {
        {"image_start_token_id", V + 0}, {"image_end_token_id", V + 1}, {"image_patch_id", V + 2},
        {"image_high_res_id", V + 2}, {"image_col_id", V + 3}, {"low_res_image_start_token_id", V + 4},
        {"image_low_res_id", V + 6}, {"frame_start_token_id", V + 7}, {"frame_end_token_id", V + 8},
        {"pad_token_id", id.endoftext}, {"eos_token_id", id.im_end}, {"bos_token_id", id.im_end},
        {"action_output_token_id", id.action_output}, {"action_start_token_id", id.action_start},
        {"action_end_token_id", id.action_end}, {"state_start_token_id", id.state_start},
        {"state_end_token_id", id.state_end}, {"state_token_start_id", id.state0},
        {"num_state_tokens", p->num_state_tokens},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) cJSON_AddNumberToObject(c, ids[i].k, (double)ids[i].v);
    return c;
}

/* ------------------------------------------------------------------------------------------------
 * norm_stats.json (spec 4.4) */

typedef struct { const char *name; double lo, hi; int kind; } dim_range;  /* typical q01 / q99 */
enum { DIM_PLAIN = 0, DIM_BINARY, DIM_NONNEG };  /* BINARY: exactly lo/hi (gripper -1/+1); NONNEG: >= 0 */

/* LIBERO (LeRobot libero datasets): delta end-effector actions in [-1, 1], gripper -1/+1; state is
 * eef position (m), axis-angle (rad) and the two gripper finger positions. */
static const dim_range LIBERO_ACTION[7] = {
    {"x", -0.75, 0.94, DIM_PLAIN},      {"y", -0.80, 0.86, DIM_PLAIN},   {"z", -0.94, 0.94, DIM_PLAIN},
    {"roll", -0.11, 0.13, DIM_PLAIN},   {"pitch", -0.16, 0.18, DIM_PLAIN}, {"yaw", -0.21, 0.25, DIM_PLAIN},
    {"gripper", -1.0, 1.0, DIM_BINARY}};
static const dim_range LIBERO_STATE[8] = {
    {"eef_x", -0.20, 0.14, DIM_PLAIN},        {"eef_y", -0.29, 0.30, DIM_PLAIN},
    {"eef_z", 0.88, 1.29, DIM_PLAIN},         {"axis_angle_0", 2.85, 3.35, DIM_PLAIN},
    {"axis_angle_1", -0.52, 0.48, DIM_PLAIN}, {"axis_angle_2", -0.86, 0.31, DIM_PLAIN},
    {"gripper_left", 0.002, 0.040, DIM_PLAIN}, {"gripper_right", -0.040, -0.002, DIM_PLAIN}};
/* SO-100/101 follower: joint positions in degrees, gripper 0..100 */
static const dim_range SO101_ACTION[6] = {
    {"shoulder_pan.pos", -42.0, 38.0, DIM_PLAIN}, {"shoulder_lift.pos", -98.0, 12.0, DIM_PLAIN},
    {"elbow_flex.pos", -12.0, 97.0, DIM_PLAIN},   {"wrist_flex.pos", -58.0, 82.0, DIM_PLAIN},
    {"wrist_roll.pos", -88.0, 64.0, DIM_PLAIN},   {"gripper.pos", 0.6, 36.0, DIM_NONNEG}};

static double round4(double x) { return round(x * 1e4) / 1e4; }

static cJSON *stats_obj(rng *r, const dim_range *d, int n, int gripper_unnormalised)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *q01 = cJSON_AddArrayToObject(o, "q01"), *q99 = cJSON_AddArrayToObject(o, "q99");
    cJSON *mn = cJSON_AddArrayToObject(o, "min"), *mx = cJSON_AddArrayToObject(o, "max");
    cJSON *mean = cJSON_AddArrayToObject(o, "mean"), *sd = cJSON_AddArrayToObject(o, "std");
    cJSON *mask = cJSON_AddArrayToObject(o, "mask"), *names = cJSON_AddArrayToObject(o, "names");
    for (int i = 0; i < n; i++) {
        double w = d[i].hi - d[i].lo;
        double lo = d[i].lo + rng_range(r, -0.08, 0.08) * w, hi = d[i].hi + rng_range(r, -0.08, 0.08) * w;
        double lo_x = lo - rng_range(r, 0.01, 0.15) * (hi - lo), hi_x = hi + rng_range(r, 0.01, 0.15) * (hi - lo);
        if (d[i].kind == DIM_BINARY) lo = lo_x = d[i].lo, hi = hi_x = d[i].hi;
        if (d[i].kind == DIM_NONNEG) lo = fabs(lo), lo_x = lo * rng_range(r, 0.0, 1.0);
        double m = lo + (hi - lo) * rng_range(r, 0.35, 0.65);
        cJSON_AddItemToArray(q01, cJSON_CreateNumber(round4(lo)));
        cJSON_AddItemToArray(q99, cJSON_CreateNumber(round4(hi)));
        cJSON_AddItemToArray(mn, cJSON_CreateNumber(round4(lo_x)));
        cJSON_AddItemToArray(mx, cJSON_CreateNumber(round4(hi_x)));
        cJSON_AddItemToArray(mean, cJSON_CreateNumber(round4(m)));
        cJSON_AddItemToArray(sd, cJSON_CreateNumber(round4((hi - lo) * rng_range(r, 0.18, 0.3))));
        int masked = !(gripper_unnormalised && strstr(d[i].name, "gripper"));
        cJSON_AddItemToArray(mask, cJSON_CreateBool(masked));
        cJSON_AddItemToArray(names, cJSON_CreateString(d[i].name));
    }
    return o;
}

static cJSON *make_norm_stats(const preset *p, uint64_t seed)
{
    rng r;
    xo_seed(&r.x, mix64(seed ^ fnv1a("norm_stats")));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "molmoact2_norm_stats.v1");
    cJSON_AddStringToObject(root, "norm_mode", "q01_q99");
    cJSON *by = cJSON_AddObjectToObject(root, "metadata_by_tag");
    cJSON *md;
    if (!p->so101_stats) {
        md = cJSON_AddObjectToObject(by, "libero");
        cJSON_AddItemToObject(md, "action_stats", stats_obj(&r, LIBERO_ACTION, 7, 1));
        cJSON_AddItemToObject(md, "state_stats", stats_obj(&r, LIBERO_STATE, 8, 0));
        cJSON_AddStringToObject(md, "setup_type", "single franka robotic arm in libero");
        cJSON_AddStringToObject(md, "control_mode", "delta end-effector pose");
        cJSON_AddNumberToObject(md, "action_horizon", 10);
        cJSON_AddNumberToObject(md, "n_action_steps", 10);
        cJSON *cams = cJSON_AddArrayToObject(md, "camera_keys");
        cJSON_AddItemToArray(cams, cJSON_CreateString("observation.images.image"));
        cJSON_AddItemToArray(cams, cJSON_CreateString("observation.images.wrist_image"));
        cJSON_AddBoolToObject(md, "normalize_gripper", 0);
    } else {
        md = cJSON_AddObjectToObject(by, "so100_so101_molmoact2");
        cJSON_AddItemToObject(md, "action_stats", stats_obj(&r, SO101_ACTION, 6, 0));
        cJSON_AddItemToObject(md, "state_stats", stats_obj(&r, SO101_ACTION, 6, 0));
        cJSON_AddStringToObject(md, "setup_type", "single so101 robotic arm");
        cJSON_AddStringToObject(md, "control_mode", "absolute joint position");
        cJSON_AddNumberToObject(md, "action_horizon", 30);
        cJSON_AddNumberToObject(md, "n_action_steps", 30);
        cJSON *cams = cJSON_AddArrayToObject(md, "camera_keys");
        cJSON_AddItemToArray(cams, cJSON_CreateString("observation.images.top"));
        cJSON_AddItemToArray(cams, cJSON_CreateString("observation.images.wrist"));
        cJSON_AddBoolToObject(md, "normalize_gripper", 1);
    }
    return root;
}

/* ------------------------------------------------------------------------------------------------
 * tokenizer.json: byte-level BPE (Qwen2 pre-tokenizer) with merges learned from a small corpus */

static const char CORPUS[] =
    "Image 1 Image 2 The task is to put both the alphabet soup and the tomato sauce in the basket. "
    "The setup is single franka robotic arm in libero. The current state of the robot is . "
    "The expected control mode is delta end-effector pose. "
    "Given these, what action should the robot take to complete the task?\n"
    "user\nassistant\n"
    "The task is to pick up the red cube and place it in the box. The setup is single so101 robotic arm. "
    "The expected control mode is absolute joint position. "
    "Given these, what action should the robot take to complete the task?\n"
    "put both the cream cheese box and the butter in the basket\n"
    "turn on the stove and put the moka pot on it\n"
    "put the black bowl in the bottom drawer of the cabinet and close it\n"
    "put the white mug on the left plate and put the yellow and white mug on the right plate\n"
    "pick up the book and place it in the back compartment of the caddy\n"
    "put the white mug on the plate and put the chocolate pudding to the right of the plate\n"
    "put both the alphabet soup and the cream cheese box in the basket\n"
    "put both moka pots on the stove\n"
    "put the yellow and white mug in the microwave and close it\n"
    "pick up the black bowl between the plate and the ramekin and place it on the plate\n"
    "pick up the black bowl next to the ramekin and place it on the plate\n"
    "pick up the black bowl from table center and place it on the plate\n"
    "pick up the black bowl on the cookie box and place it on the plate\n"
    "pick up the black bowl in the top drawer of the wooden cabinet and place it on the plate\n"
    "pick up the black bowl on the ramekin and place it on the plate\n"
    "pick up the black bowl next to the cookie box and place it on the plate\n"
    "pick up the black bowl on the stove and place it on the plate\n"
    "pick up the black bowl next to the plate and place it on the plate\n"
    "pick up the black bowl on the wooden cabinet and place it on the plate\n"
    "open the middle drawer of the cabinet\n"
    "put the bowl on the stove\n"
    "put the wine bottle on top of the cabinet\n"
    "open the top drawer and put the bowl inside\n"
    "put the bowl on top of the cabinet\n"
    "push the plate to the front of the stove\n"
    "put the cream cheese in the bowl\n"
    "turn on the stove\n"
    "put the bowl on the plate\n"
    "put the wine bottle on the rack\n"
    "pick up the alphabet soup and place it in the basket\n"
    "pick up the cream cheese and place it in the basket\n"
    "pick up the salad dressing and place it in the basket\n"
    "pick up the bbq sauce and place it in the basket\n"
    "pick up the ketchup and place it in the basket\n"
    "pick up the tomato sauce and place it in the basket\n"
    "pick up the butter and place it in the basket\n"
    "pick up the milk and place it in the basket\n"
    "pick up the chocolate pudding and place it in the basket\n"
    "pick up the orange juice and place it in the basket\n"
    "grab the green lego block and drop it into the bowl\n"
    "pick the sponge from the table and put it in the bin\n"
    "stack the blue cube on top of the yellow cube\n"
    "move the pen to the left side of the table\n"
    "fold the towel in half\n"
    "pick up the screwdriver and hand it over\n"
    "close the laptop lid slowly\n"
    "pour the water from the cup into the glass\n"
    "place the apple next to the banana on the tray\n"
    "sort the blocks by color: red, green, blue.\n"
    "Task: pick up 3 markers; put them in the cup!\n"
    "The robot's gripper is open, it's holding nothing and we'll close it 2 times.\n"
    "wrist camera, top camera, front camera, shoulder pan, shoulder lift, elbow flex, wrist flex, wrist roll\n";

/* GPT-2 bytes_to_unicode: the id order of the 256 byte tokens (printable bytes first) and each byte's
 * code point. */
static void byte_table(int order[256], int cp[256])
{
    int n = 0, extra = 0, in_bs[256] = {0};
    for (int b = '!'; b <= '~'; b++) in_bs[b] = 1;
    for (int b = 0xA1; b <= 0xAC; b++) in_bs[b] = 1;
    for (int b = 0xAE; b <= 0xFF; b++) in_bs[b] = 1;
    for (int b = 0; b < 256; b++)
        if (in_bs[b]) { order[n++] = b; cp[b] = b; }
    for (int b = 0; b < 256; b++)
        if (!in_bs[b]) { order[n++] = b; cp[b] = 256 + extra++; }
}

static size_t utf8_put(char *o, int c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2;  /* byte-level code points are < 0x800 */
}

/* byte-level (GPT-2 unicode) form of raw bytes; out must hold 2*n+1 */
static void byte_level(const uint8_t *s, size_t n, const int cp[256], char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += utf8_put(out + o, cp[s[i]]);
    out[o] = 0;
}

/* ASCII approximation of the Qwen2 pre-tokenizer, only used to cut the corpus into words for merge
 * learning (any merge list whose parts are in the vocab is a valid tokenizer). */
static size_t next_piece(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c == '\'' && i + 1 < n) {
        static const char *suf[] = {"ll", "re", "ve", "s", "t", "m", "d"};
        for (int k = 0; k < 7; k++) {
            size_t l = strlen(suf[k]);
            if (i + 1 + l <= n && !strncasecmp(s + i + 1, suf[k], l)) return i + 1 + l;
        }
    }
    if (isalpha(c) || (c != '\r' && c != '\n' && !isalnum(c) && i + 1 < n && isalpha((unsigned char)s[i + 1]))) {
        size_t j = isalpha(c) ? i : i + 1;
        while (j < n && isalpha((unsigned char)s[j])) j++;
        return j;
    }
    if (isdigit(c)) return i + 1;
    size_t j = i;
    if (c == ' ' && i + 1 < n && !isspace((unsigned char)s[i + 1]) && !isalnum((unsigned char)s[i + 1])) j++;
    if (j < n && !isspace((unsigned char)s[j]) && !isalnum((unsigned char)s[j])) {
        while (j < n && !isspace((unsigned char)s[j]) && !isalnum((unsigned char)s[j])) j++;
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    j = i;
    while (j < n && isspace((unsigned char)s[j])) j++;
    return j > i ? j : i + 1;
}

typedef struct { int *sym; int len, count; } bpe_word;
typedef struct { uint8_t *bytes; int len; } bpe_sym;

typedef struct {
    bpe_sym *sym;        /* [n_sym] raw bytes of each token id */
    int n_sym;
    int (*merges)[2];    /* [n_merges] (left id, right id) in rank order */
    int n_merges;
} bpe_model;

static void bpe_free(bpe_model *m)
{
    if (m->sym)
        for (int i = 0; i < m->n_sym; i++) free(m->sym[i].bytes);
    free(m->sym);
    free(m->merges);
}

static int cmp_piece(const void *a, const void *b)
{
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* Learns up to max_new new tokens from CORPUS. Deterministic. 0 or MACT_ERR_NOMEM. */
static int bpe_learn(int max_new, const int order[256], bpe_model *m)
{
    memset(m, 0, sizeof *m);
    size_t n = strlen(CORPUS);
    int cap_sym = 256 + max_new;
    m->sym = calloc((size_t)cap_sym, sizeof *m->sym);
    m->merges = malloc((size_t)(max_new > 0 ? max_new : 1) * 4 * sizeof *m->merges);
    char **pieces = malloc(n * sizeof *pieces);
    bpe_word *words = calloc(n, sizeof *words);
    int byte_id[256];
    int rc = MACT_ERR_NOMEM, n_pieces = 0, n_words = 0, max_merges = max_new * 4;
    size_t tsize = 1 << 15;
    uint64_t *tkey = malloc(tsize * sizeof *tkey);
    int *tcnt = malloc(tsize * sizeof *tcnt);
    if (!m->sym || !m->merges || !pieces || !words || !tkey || !tcnt) goto out;
    for (int i = 0; i < 256; i++) {
        byte_id[order[i]] = i;
        m->sym[i].bytes = malloc(1);
        if (!m->sym[i].bytes) goto out;
        m->sym[i].bytes[0] = (uint8_t)order[i];
        m->sym[i].len = 1;
        m->n_sym++;
    }
    for (size_t i = 0; i < n;) {
        size_t j = next_piece(CORPUS, n, i);
        pieces[n_pieces] = strndup(CORPUS + i, j - i);
        if (!pieces[n_pieces]) goto out;
        n_pieces++;
        i = j;
    }
    qsort(pieces, (size_t)n_pieces, sizeof *pieces, cmp_piece);
    for (int i = 0; i < n_pieces;) {
        int j = i;
        while (j < n_pieces && !strcmp(pieces[i], pieces[j])) j++;
        bpe_word *w = &words[n_words++];
        w->len = (int)strlen(pieces[i]);
        w->count = j - i;
        w->sym = malloc((size_t)w->len * sizeof *w->sym);
        if (!w->sym) goto out;
        for (int k = 0; k < w->len; k++) w->sym[k] = byte_id[(uint8_t)pieces[i][k]];
        i = j;
    }
    while (m->n_sym < cap_sym && m->n_merges < max_merges) {
        /* count adjacent pairs */
        for (size_t i = 0; i < tsize; i++) tkey[i] = UINT64_MAX;
        uint64_t best = UINT64_MAX;
        int best_c = 0;
        for (int wi = 0; wi < n_words; wi++) {
            bpe_word *w = &words[wi];
            for (int k = 0; k + 1 < w->len; k++) {
                uint64_t key = ((uint64_t)(uint32_t)w->sym[k] << 32) | (uint32_t)w->sym[k + 1];
                size_t h = mix64(key) & (tsize - 1);
                while (tkey[h] != UINT64_MAX && tkey[h] != key) h = (h + 1) & (tsize - 1);
                if (tkey[h] == UINT64_MAX) { tkey[h] = key; tcnt[h] = 0; }
                tcnt[h] += w->count;
                if (tcnt[h] > best_c || (tcnt[h] == best_c && key < best)) { best_c = tcnt[h]; best = key; }
            }
        }
        if (!best_c) break;
        int a = (int)(best >> 32), b = (int)(best & 0xFFFFFFFFu);
        /* the merged token (an existing id when another merge path already built the same string) */
        int la = m->sym[a].len, lb = m->sym[b].len, id = -1;
        for (int s = 256; s < m->n_sym && id < 0; s++)
            if (m->sym[s].len == la + lb && !memcmp(m->sym[s].bytes, m->sym[a].bytes, (size_t)la) &&
                !memcmp(m->sym[s].bytes + la, m->sym[b].bytes, (size_t)lb))
                id = s;
        if (id < 0) {
            uint8_t *nb = malloc((size_t)(la + lb));
            if (!nb) goto out;
            memcpy(nb, m->sym[a].bytes, (size_t)la);
            memcpy(nb + la, m->sym[b].bytes, (size_t)lb);
            id = m->n_sym++;
            m->sym[id].bytes = nb;
            m->sym[id].len = la + lb;
        }
        m->merges[m->n_merges][0] = a;
        m->merges[m->n_merges][1] = b;
        m->n_merges++;
        for (int wi = 0; wi < n_words; wi++) {
            bpe_word *w = &words[wi];
            int o = 0;
            for (int k = 0; k < w->len; k++) {
                if (k + 1 < w->len && w->sym[k] == a && w->sym[k + 1] == b) { w->sym[o++] = id; k++; }
                else w->sym[o++] = w->sym[k];
            }
            w->len = o;
        }
    }
    rc = 0;
out:
    for (int i = 0; i < n_pieces; i++) free(pieces[i]);
    for (int i = 0; i < n_words; i++) free(words[i].sym);
    free(pieces);
    free(words);
    free(tkey);
    free(tcnt);
    if (rc) bpe_free(m);
    return rc;
}

static cJSON *added_token(int64_t id, const char *content)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddBoolToObject(o, "single_word", 0);
    cJSON_AddBoolToObject(o, "lstrip", 0);
    cJSON_AddBoolToObject(o, "rstrip", 0);
    cJSON_AddBoolToObject(o, "normalized", 0);
    cJSON_AddBoolToObject(o, "special", 1);
    return o;
}

static cJSON *byte_level_obj(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 0);
    cJSON_AddBoolToObject(o, "use_regex", 0);
    return o;
}

static const char QWEN2_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

#define MAX_LEARNED_TOKENS 4096

static int make_tokenizer(const preset *p, cJSON **out, int *n_merges_out, char *err, size_t errlen)
{
    *out = NULL;
    token_ids id = layout_ids(p);
    if (id.P < 256)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: vocab %lld too small for the token layout",
                         (long long)p->vocab);
    int order[256], cp[256];
    byte_table(order, cp);
    int64_t budget = id.P - 256;
    bpe_model bm;
    if (bpe_learn((int)(budget < MAX_LEARNED_TOKENS ? budget : MAX_LEARNED_TOKENS), order, &bm))
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (BPE)");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON_AddItemToArray(added, added_token(id.endoftext, "<|endoftext|>"));
    cJSON_AddItemToArray(added, added_token(id.im_start, "<|im_start|>"));
    cJSON_AddItemToArray(added, added_token(id.im_end, "<|im_end|>"));
    for (int i = 0; i < 9; i++) cJSON_AddItemToArray(added, added_token(id.setup_start + i, ROBOT_TOKENS[i]));
    char nm[64];
    for (int k = 0; k < p->num_state_tokens; k++) {
        snprintf(nm, sizeof nm, "<state_%d>", k);
        cJSON_AddItemToArray(added, added_token(id.state0 + k, nm));
    }
    for (int i = 0; i < 9; i++) cJSON_AddItemToArray(added, added_token(id.V + i, IMAGE_TOKENS[i]));
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pres = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON *pat = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(pat, "Regex", QWEN2_REGEX);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON_AddItemToArray(pres, split);
    cJSON_AddItemToArray(pres, byte_level_obj("ByteLevel"));
    cJSON_AddItemToObject(root, "post_processor", byte_level_obj("ByteLevel"));
    cJSON_AddItemToObject(root, "decoder", byte_level_obj("ByteLevel"));
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    int maxlen = 0;
    for (int s = 0; s < bm.n_sym; s++) maxlen = bm.sym[s].len > maxlen ? bm.sym[s].len : maxlen;
    char *a = malloc((size_t)maxlen * 4 + 64), *b = malloc((size_t)maxlen * 2 + 2);
    int rc = 0;
    if (!root || !vocab || !a || !b) rc = MACT_ERR_NOMEM;
    for (int s = 0; !rc && s < bm.n_sym; s++) {
        byte_level(bm.sym[s].bytes, (size_t)bm.sym[s].len, cp, a);
        if (!cJSON_AddNumberToObject(vocab, a, s)) rc = MACT_ERR_NOMEM;
    }
    /* unreachable entries (no merge builds them) keep the ids contiguous up to the first added token */
    for (int64_t s = bm.n_sym; !rc && s < id.P; s++) {
        snprintf(a, (size_t)maxlen * 4 + 64, "<|mact_pad_%lld|>", (long long)s);
        if (!cJSON_AddNumberToObject(vocab, a, (double)s)) rc = MACT_ERR_NOMEM;
    }
    cJSON *merges = rc ? NULL : cJSON_AddArrayToObject(model, "merges");
    for (int k = 0; !rc && k < bm.n_merges; k++) {
        const bpe_sym *l = &bm.sym[bm.merges[k][0]], *r = &bm.sym[bm.merges[k][1]];
        byte_level(l->bytes, (size_t)l->len, cp, a);
        byte_level(r->bytes, (size_t)r->len, cp, b);
        strcat(a, " ");
        strcat(a, b);
        cJSON *str = cJSON_CreateString(a);
        if (!str || !merges) rc = MACT_ERR_NOMEM;
        else cJSON_AddItemToArray(merges, str);
    }
    *n_merges_out = bm.n_merges;
    free(a);
    free(b);
    bpe_free(&bm);
    if (rc) {
        cJSON_Delete(root);
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (tokenizer.json)");
    }
    *out = root;
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * entry points */

int mact_synth_ex(const char *preset_name, const char *out_dir, uint64_t seed, const mact_synth_options *opt,
                  mact_synth_result *res, char *err, size_t errlen)
{
    double t0 = now_s();
    mact_synth_options o = {0};
    if (opt) o = *opt;
    if (res) memset(res, 0, sizeof *res);
    const preset *p = NULL;
    for (size_t i = 0; preset_name && i < N_PRESETS; i++)
        if (!strcmp(PRESETS[i].name, preset_name)) p = &PRESETS[i];
    if (!p)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: unknown preset '%s' (presets: %s)",
                         preset_name ? preset_name : "(null)", mact_synth_presets());
    if (o.dtype_mode != MACT_SYNTH_MIXED && o.dtype_mode != MACT_SYNTH_F32 && o.dtype_mode != MACT_SYNTH_BF16)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: unknown dtype mode %d (mixed, f32, bf16)", o.dtype_mode);
    if (!out_dir) return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: no output directory");
    int rc = mkdir_p(out_dir, err, errlen);
    if (rc) return rc;

    int64_t total = 0;
    cJSON *j = make_config(p, o.dtype_mode);
    rc = write_json(out_dir, "config.json", j, 1, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;
    j = make_norm_stats(p, seed);
    rc = write_json(out_dir, "norm_stats.json", j, 1, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;
    int n_merges = 0;
    if ((rc = make_tokenizer(p, &j, &n_merges, err, errlen))) return rc;
    rc = write_json(out_dir, "tokenizer.json", j, 0, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;

    tlist L = {.mode = o.dtype_mode};
    build_tensors(p, o.no_lm_head, &L);
    if (L.oom) { free(L.t); return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory"); }
    qsort(L.t, L.n, sizeof *L.t, cmp_tspec);
    double tw = now_s();
    int64_t wbytes = 0;
    rc = write_safetensors(out_dir, &L, seed, p->name, o.n_threads, &wbytes, err, errlen);
    if (!rc && res) {
        res->n_tensors = (int64_t)L.n;
        for (size_t i = 0; i < L.n; i++) res->n_params += L.t[i].nel;
        res->weight_bytes = wbytes;
        res->total_bytes = total + wbytes;
        res->weight_seconds = now_s() - tw;
        res->seconds = now_s() - t0;
    }
    free(L.t);
    return rc;
}

int mact_synth(const char *preset, const char *out_dir, uint64_t seed, int dtype_mode, char *err, size_t errlen)
{
    mact_synth_options o = {.dtype_mode = dtype_mode};
    return mact_synth_ex(preset, out_dir, seed, &o, NULL, err, errlen);
}
