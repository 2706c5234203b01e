/* Random MolmoAct2 checkpoints from C: see synth.h for the contract, the presets and the token layout.
 * Layout sources: docs/design.md (names, dtypes, config.json), docs/spec/molmoact2.md sections 1-2
 * (shapes), 4.2 (token ids), 4.4 (norm_stats.json), and the tensor table of src/model/table.c. */
#include "synth/synth.h"

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
#include "model/table.h"
#include "base/clock.h"
#include "base/rng.h"
#include "synth/synth_internal.h"
#include "base/file.h"
#include "compress/st_write.h"
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

static token_ids layout_ids(const preset *p) { return mact_synth_layout_ids(p->vocab, p->num_state_tokens); }

/* ------------------------------------------------------------------------------------------------
 * random numbers: splitmix64 seeding, xoshiro256** streams, one stream per 64K-element block so the
 * values do not depend on the thread count */

#define mix64 mact_splitmix64
typedef mact_rng xoshiro;
#define xo_next mact_rng_next
#define xo_seed mact_rng_seed

static uint64_t fnv1a(const char *s) { return mact_fnv1a(MACT_FNV_BASIS, s, strlen(s)); }

/* approximately N(0,1): the sum of four 16-bit uniforms (Irwin-Hall, |z| < 3.47), one 64-bit draw.
 * Centred half a step off zero so no value is exactly 0 (mean bias 1.3e-5). */
static inline float approx_normal(uint64_t x)
{
    uint32_t s = (uint32_t)(x & 0xFFFF) + (uint32_t)((x >> 16) & 0xFFFF) + (uint32_t)((x >> 32) & 0xFFFF) +
                 (uint32_t)(x >> 48);
    return ((float)s - 131069.5f) * (1.0f / 37837.227f);
}

#define f32_to_bf16 mact_f32_to_bf16

/* simple seeded stream for the small JSON files */
typedef struct { xoshiro x; } rng;
static double rng_u(rng *r) { return mact_rng_uniform(&r->x); }
static double rng_range(rng *r, double lo, double hi) { return lo + (hi - lo) * rng_u(r); }

/* ------------------------------------------------------------------------------------------------
 * the tensor list: the model's tensor table (model/table.h) */

enum { K_NORMAL = 0, K_NORM1 };  /* scale * N(0,1); 1 + U(-0.3, 0.3) */

typedef struct {
    char name[120];
    int dtype;          /* MACT_F32 / MACT_BF16 */
    int nd;
    int64_t shape[2];
    int kind;
    float scale;
    int64_t nel, off;   /* element count, byte offset in the data section */
    /* planted outliers (mact_synth_options.outlier_*): values on the masked channels times oscale, the channel
     * being the row (oaxis 1; a 1-D tensor's entry) or the column (oaxis 2); mrow >= 0: the massive entry */
    int oaxis;
    const uint8_t *omask;
    float oscale;
    int64_t mrow, mcol;
} tspec;

typedef struct {
    tspec *t;
    size_t n, cap;
    int mode;
    int oom;
    const uint8_t *llm_mask, *vit_mask;  /* the outlier channels of the two residual streams (NULL: none) */
    float oscale;
    int64_t bos;                         /* the BOS token's row (the massive activation) */
    int massive_ch;
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
    t->mrow = -1;
    if (L->mode == MACT_SYNTH_F32) t->dtype = MACT_F32;
    else if (L->mode == MACT_SYNTH_BF16) t->dtype = nd == 2 ? MACT_BF16 : MACT_F32;
    else t->dtype = big && nd == 2 ? MACT_BF16 : MACT_F32;
}

#define BIAS_SCALE 0.02f

static cJSON *make_config(const preset *p, int mode);

static int ends(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

typedef struct {
    tlist *L;
    int no_lm_head;
} table_ctx;

/* Which tensors carry the planted outliers: whatever writes into a residual stream scales the outlier channels
 * of what it writes (the stream's inputs and every block's output projection), so the channels stay S times
 * larger through the depth while the pre-norms see them as trained models' norms do. */
static void plant_outliers(tlist *L, tspec *t)
{
    static const char *const llm_rows[] = {".self_attn.attn_out.weight", ".mlp.ff_out.weight", NULL};
    static const char *const vit_rows[] = {".attention.wo.weight", ".attention.wo.bias", ".feed_forward.w2.weight",
                                           ".feed_forward.w2.bias", NULL};
    const char *n = t->name;
    const uint8_t *m = NULL;
    int axis = 0;
    if (L->llm_mask) {
        if (!strcmp(n, "model.transformer.wte.embedding") || !strcmp(n, "model.transformer.wte.new_embedding"))
            axis = 2;
        else if (!strncmp(n, "model.transformer.blocks.", 25))
            for (int i = 0; llm_rows[i]; i++) axis = ends(n, llm_rows[i]) ? 1 : axis;
        if (axis) m = L->llm_mask;
        if (!strcmp(n, "model.transformer.wte.embedding")) {
            t->mrow = L->bos;
            t->mcol = L->massive_ch;
        }
    }
    if (!axis && L->vit_mask) {
        const char *V = "model.vision_backbone.image_vit.";
        if (!strncmp(n, V, strlen(V))) {
            if (ends(n, "patch_embedding.weight") || ends(n, "patch_embedding.bias")) axis = 1;
            else if (ends(n, "positional_embedding")) axis = 2;
            else for (int i = 0; vit_rows[i]; i++) axis = ends(n, vit_rows[i]) ? 1 : axis;
        }
        if (axis) m = L->vit_mask;
    }
    t->oaxis = axis;
    t->omask = m;
    t->oscale = L->oscale;
}

#define MASSIVE_VALUE 1000.0f  /* the massive BOS activation (mact_compress.h) */

static inline float planted(const tspec *t, int64_t e, float v)
{
    if (!t->omask) return v;
    if (t->mrow >= 0 && e == t->mrow * t->shape[1] + t->mcol) return MASSIVE_VALUE;
    const int64_t ch = t->oaxis == 2 ? e % t->shape[1] : t->nd == 2 ? e / t->shape[1] : e;
    return t->omask[ch] ? v * t->oscale : v;
}

/* one entry of the model's tensor table (model/table.c): random values of the kind its role implies */
static int add_from_table(walk_ctx *w, const char *name, mact_tensor *t, int flags, int nd, const int64_t *shape)
{
    (void)t, (void)flags;
    table_ctx *c = w->wctx;
    if (c->no_lm_head && !strcmp(name, "lm_head.weight")) return 0;
    /* the VLM's matrices are the big ones LeRobot stores BF16; the sampler and the action expert stay F32 */
    const int big = !strncmp(name, "model.vision_backbone.image_", 28) || !strncmp(name, "model.transformer.", 18) ||
                    !strncmp(name, "lm_head.", 8);
    if (nd == 1) {
        if (ends(name, "norm.weight") || ends(name, "ln_f.weight")) add_t(c->L, name, 1, shape[0], 0, 0, K_NORM1, 0);
        /* a wide bias spreads the K sample points over the grid (borders included) */
        else add_t(c->L, name, 1, shape[0], 0, 0, K_NORMAL, ends(name, "scout_mlp.2.bias") ? 1.5f : BIAS_SCALE);
        if (!c->L->oom) plant_outliers(c->L, &c->L->t[c->L->n - 1]);
        return 0;
    }
    const float scale = ends(name, "positional_embedding") ? 0.5f
                        : strstr(name, ".wte.")            ? 1.0f
                                                           : 1.0f / sqrtf((float)shape[1]);
    add_t(c->L, name, 2, shape[0], shape[1], big, K_NORMAL, scale);
    if (!c->L->oom) plant_outliers(c->L, &c->L->t[c->L->n - 1]);
    return 0;
}

/* the checkpoint's tensors: the model's own table walked over the preset's config, so synth writes exactly
 * what the loader binds */
static int build_tensors(const preset *p, int mode, int no_lm_head, tlist *L, char *err, size_t errlen)
{
    cJSON *j = make_config(p, mode);
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!txt) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (config)");
    struct mact_model m;
    memset(&m, 0, sizeof m);
    int rc = mact_config_parse(txt, &m.cfg, err, errlen);
    free(txt);
    if (rc) return rc;
    mact_config *c = &m.cfg;
    /* the sampler's geometry comes from its tensors at load; here from the preset (after the projector) */
    c->use_sampler = 1;
    c->sampler_k = p->sampler_k;
    c->sampler_c = p->d_model;
    c->sampler_hidden = p->scout_hidden;
    c->coord_hidden = p->coord_hidden;
    c->sampler_after_projector = 1;
    m.vis.blocks = calloc((size_t)c->vit_layers, sizeof *m.vis.blocks);
    m.llm.blocks = calloc((size_t)c->n_layers, sizeof *m.llm.blocks);
    m.ae.blocks = calloc((size_t)c->ae_layers, sizeof *m.ae.blocks);
    if (m.vis.blocks && m.llm.blocks && m.ae.blocks) {
        table_ctx tc = {L, no_lm_head};
        walk_ctx w = {.m = &m, .wctx = &tc};
        rc = mact_table_walk(&w, add_from_table);
    } else rc = mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (tensor table)");
    free(m.vis.blocks);
    free(m.llm.blocks);
    free(m.ae.blocks);
    if (!rc && L->oom) rc = mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory");
    return rc;
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
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    if (!buf) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory writing %s", path);
    memcpy(buf, text, n);
    buf[n] = '\n';
    /* through a temporary name: a failure leaves no half-written file */
    int rc = mact_file_write_atomic(path, buf, n + 1, err, errlen);
    free(buf);
    if (rc) return rc;
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
    const int64_t e0 = blk * BLOCK_ELEMS;  /* the block's first element in the tensor */
    if (t->dtype == MACT_BF16) {
        uint16_t *o = out;
        if (t->kind == K_NORM1)
            for (int64_t i = 0; i < n; i++)
                o[i] = f32_to_bf16(1.0f + 0.3f * ((float)(int64_t)(xo_next(&r) >> 40) * (1.0f / 8388608.0f) - 1.0f));
        else
            for (int64_t i = 0; i < n; i++) o[i] = f32_to_bf16(planted(t, e0 + i, s * approx_normal(xo_next(&r))));
    } else {
        float *o = out;
        if (t->kind == K_NORM1)
            for (int64_t i = 0; i < n; i++)
                o[i] = 1.0f + 0.3f * ((float)(int64_t)(xo_next(&r) >> 40) * (1.0f / 8388608.0f) - 1.0f);
        else
            for (int64_t i = 0; i < n; i++) o[i] = planted(t, e0 + i, s * approx_normal(xo_next(&r)));
    }
}

/* the header text (dev/st_write.h) */
typedef struct { char *s; size_t n; } sbuf;

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
    /* header: __metadata__ first, then tensors in data order with contiguous offsets (dev/st_write.h) */
    char meta[512];
    snprintf(meta, sizeof meta, "{\"format\":\"pt\",\"mact_generator\":\"mact synth\",\"mact_preset\":\"%s\","
             "\"mact_seed\":\"%llu\",\"mact_dtype\":\"%s\"}", preset_name, (unsigned long long)seed,
             mact_synth_dtype_name(L->mode));
    mact_stw_entry *ents = malloc((L->n ? L->n : 1) * sizeof *ents);
    if (!ents) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (header)");
    int64_t off = 0;
    for (size_t i = 0; i < L->n; i++) {
        tspec *t = &L->t[i];
        int64_t nb = t->nel * (int64_t)mact_dtype_size(t->dtype);
        t->off = off;
        ents[i] = (mact_stw_entry){t->name, t->dtype, t->nd, t->shape, (uint64_t)nb};
        off += nb;
    }
    sbuf h = {0};
    h.s = mact_stw_header(ents, L->n, meta, 0, &h.n, NULL);
    free(ents);
    if (!h.s) return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory (header)");

    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(h.s);
        return mact_errf(err, errlen, MACT_ERR_IO, "synth: cannot create %s: %s", tmp, strerror(e));
    }
    setvbuf(f, NULL, _IONBF, 0);
    uint8_t len8[8];
    mact_stw_len8(h.n, len8);
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
 * config.json (HF MolmoAct2Config, docs/spec/molmoact2.md section 8) */

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
    /* token ids: image tokens at vocab_size + index (docs/spec/molmoact2.md 4.2), the rest per synth.h's layout */
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
 * norm_stats.json (docs/spec/molmoact2.md 4.4) */

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

static cJSON *make_norm_stats(int so101, uint64_t seed)
{
    rng r;
    xo_seed(&r.x, mix64(seed ^ fnv1a("norm_stats")));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "molmoact2_norm_stats.v1");
    cJSON_AddStringToObject(root, "norm_mode", "q01_q99");
    cJSON *by = cJSON_AddObjectToObject(root, "metadata_by_tag");
    cJSON *md;
    if (!so101) {
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

/* k distinct channels of dim marked in mask, drawn from seed; returns the first one drawn */
static int pick_channels(uint8_t *mask, int dim, int k, uint64_t seed)
{
    xoshiro r;
    xo_seed(&r, mix64(seed));
    int first = -1;
    for (int got = 0; got < k;) {
        const int c = (int)(xo_next(&r) % (uint64_t)dim);
        if (mask[c]) continue;
        mask[c] = 1;
        first = first < 0 ? c : first;
        got++;
    }
    return first;
}

/* ------------------------------------------------------------------------------------------------
 * entry points */

mact_status mact_synth(const char *preset_name, const char *out_dir, uint64_t seed, const mact_synth_options *opt,
                       mact_synth_result *res, char *err, size_t errlen)
{
    double t0 = mact_clock_s();
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
    if (o.robot < MACT_SYNTH_ROBOT_PRESET || o.robot > MACT_SYNTH_ROBOT_SO101)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: unknown robot %d (libero, so101)", o.robot);
    preset pp = *p;  /* the preset with the options' depths */
    p = &pp;
    int deepest_tap = 0;
    for (int i = 0; i < pp.n_taps; i++) deepest_tap = -pp.taps[i] > deepest_tap ? -pp.taps[i] : deepest_tap;
    if (o.llm_layers < 0 || o.llm_layers > 256)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: llm layers %d outside 1..256", o.llm_layers);
    if (o.vit_layers && (o.vit_layers < deepest_tap || o.vit_layers > 256))
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: vit layers %d outside %d..256 (the preset taps layer -%d)",
                         o.vit_layers, deepest_tap, deepest_tap);
    if (o.llm_layers) pp.n_layers = o.llm_layers;
    if (o.vit_layers) pp.vit_layers = o.vit_layers;
    const int max_k = (pp.d_model < pp.vit_hidden ? pp.d_model : pp.vit_hidden) / 4;
    if (o.outlier_channels < 0 || o.outlier_channels > max_k)
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: %d outlier channels outside 0..%d (a quarter of the "
                         "narrower residual stream)", o.outlier_channels, max_k);
    if (o.outlier_channels && !(isfinite(o.outlier_scale) && o.outlier_scale > 0.f && o.outlier_scale <= 1e4f))
        return mact_errf(err, errlen, MACT_ERR_INPUT, "synth: outlier scale %g outside (0, 1e4]", (double)o.outlier_scale);
    int rc = mkdir_p(out_dir, err, errlen);
    if (rc) return rc;

    int64_t total = 0;
    cJSON *j = make_config(p, o.dtype_mode);
    rc = write_json(out_dir, "config.json", j, 1, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;
    j = make_norm_stats(o.robot ? o.robot == MACT_SYNTH_ROBOT_SO101 : p->so101_stats, seed);
    rc = write_json(out_dir, "norm_stats.json", j, 1, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;
    int n_merges = 0;
    if ((rc = mact_synth_tokenizer(p->vocab, p->num_state_tokens, &j, &n_merges, err, errlen))) return rc;
    rc = write_json(out_dir, "tokenizer.json", j, 0, &total, err, errlen);
    cJSON_Delete(j);
    if (rc) return rc;

    tlist L = {.mode = o.dtype_mode};
    uint8_t *masks = NULL;
    if (o.outlier_channels) {
        if (!(masks = calloc((size_t)(pp.d_model + pp.vit_hidden), 1)))
            return mact_errf(err, errlen, MACT_ERR_NOMEM, "synth: out of memory");
        L.llm_mask = masks;
        L.vit_mask = masks + pp.d_model;
        L.oscale = o.outlier_scale;
        L.bos = layout_ids(p).im_end;
        L.massive_ch = pick_channels(masks, pp.d_model, o.outlier_channels, seed ^ fnv1a("outliers/llm"));
        pick_channels(masks + pp.d_model, pp.vit_hidden, o.outlier_channels, seed ^ fnv1a("outliers/vit"));
    }
    if ((rc = build_tensors(p, o.dtype_mode, o.no_lm_head, &L, err, errlen))) { free(L.t); free(masks); return rc; }
    qsort(L.t, L.n, sizeof *L.t, cmp_tspec);
    double tw = mact_clock_s();
    int64_t wbytes = 0;
    rc = write_safetensors(out_dir, &L, seed, p->name, o.n_threads, &wbytes, err, errlen);
    if (!rc && res) {
        res->n_tensors = (int64_t)L.n;
        for (size_t i = 0; i < L.n; i++) res->n_params += L.t[i].nel;
        res->weight_bytes = wbytes;
        res->total_bytes = total + wbytes;
        res->weight_seconds = mact_clock_s() - tw;
        res->seconds = mact_clock_s() - t0;
    }
    free(L.t);
    free(masks);
    return rc;
}
