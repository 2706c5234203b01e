/* mact: MolmoAct2 robot policies in plain C.
 *
 * A mact_model is read-only after load (mmapped weights, config); any number of mact_sessions may
 * share one model. A session owns every mutable byte of an inference (activation arena, KV, RNG) and
 * is used by one thread at a time.
 *
 * Every function that can fail returns an int status (MACT_OK = 0, negative on error). Load errors are
 * written to the caller's err buffer; session errors are kept in the session (mact_session_error).
 * The library never exits or aborts on bad input.
 *
 * Ownership: every buffer passed in is owned by the caller and only read during the call; every output
 * buffer is allocated by the caller with the size stated next to the function (query the sizes with
 * mact_model_info). Nothing returned by the library needs freeing except through the *_free pairs. */
#ifndef MACT_H
#define MACT_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the library's public functions: the only symbols libmact.so exports (it is built with
 * -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define MACT_API __attribute__((visibility("default")))
#else
#define MACT_API
#endif

enum {
    MACT_OK = 0,
    MACT_ERR_IO = -1,          /* file missing or unreadable */
    MACT_ERR_FORMAT = -2,      /* malformed file (safetensors, json, npz) */
    MACT_ERR_MODEL = -3,       /* checkpoint inconsistent with its config: missing/extra tensor, shape */
    MACT_ERR_INPUT = -4,       /* caller input rejected: shape, NaN, range */
    MACT_ERR_NOMEM = -5,
    MACT_ERR_UNSUPPORTED = -6, /* a valid choice this build does not implement */
};

typedef struct mact_model mact_model;
typedef struct mact_session mact_session;

/* How the 2x2 attention pooling treats the padded row/column (spec 7.3). */
enum { MACT_POOL_FROM_CONFIG = 0, MACT_POOL_SDPA, MACT_POOL_EAGER, MACT_POOL_NONE };
/* Which prompt tokens the action expert's cross-attention may see (spec 4.6). */
enum { MACT_ENC_FROM_CONFIG = 0, MACT_ENC_ALL, MACT_ENC_DROP_EOS };

/* Arithmetic of the weight matmuls. FP32 is the exact parity mode (weights widened to fp32, fp32
 * accumulation); BF16 rounds activations to bf16 and uses the CPU's bf16 dot products (AVX512-BF16)
 * with fp32 accumulation; INT8 is BF16 with the LLM's and the action expert's weights quantized at load
 * to int8 per output channel and their GEMM inputs to u8 per row, multiplied in int32 (AVX512-VNNI; the
 * vision stack stays BF16; on a CPU without AVX512-VNNI, INT8 runs as BF16). Norms, softmax, RoPE and the
 * Euler update stay fp32 in all. Its accuracy cost is measured in docs/benchmarks.md. */
enum { MACT_PRECISION_DEFAULT = 0, MACT_PRECISION_FP32, MACT_PRECISION_BF16, MACT_PRECISION_INT8 };
/* "fp32", "bf16", "int8" -> MACT_PRECISION_*; -1 for anything else. */
int mact_precision_parse(const char *name);
/* The name of a MACT_PRECISION_* (static string; "default" for DEFAULT, "?" when unknown). */
const char *mact_precision_str(int precision);

/* Which kernels run the ops. AUTO picks the best the CPU has (once, from its features); REF forces the
 * plain-C reference kernels for every op (any CPU; for tests and bug reports); the x86 levels cap the
 * choice (clamped to what the CPU has). $MACT_KERNELS ("auto", "ref", "avx2", "avx512", "avx512bf16")
 * overrides AUTO. Chosen at load: the packed weight layout belongs to the kernels that read it. */
typedef enum {
    MACT_KERNELS_AUTO = 0,
    MACT_KERNELS_REF,
    MACT_KERNELS_X86_AVX2,
    MACT_KERNELS_X86_AVX512,
    MACT_KERNELS_X86_AVX512_BF16,
} mact_kernels;

/* A pool of worker threads. A session makes its own by default; several sessions may share one (their
 * jobs then take turns on it, each still using all its threads). Free it after every session using it. */
typedef struct mact_threadpool mact_threadpool;
/* n_threads <= 0: all cores. */
MACT_API int mact_threadpool_new(int n_threads, mact_threadpool **out, char *err, size_t errlen);
MACT_API void mact_threadpool_free(mact_threadpool *p);
MACT_API int mact_threadpool_size(const mact_threadpool *p);

typedef struct {
    int pooling_mask;  /* MACT_POOL_*; FROM_CONFIG reads adapter_config */
    int encoder_mask;  /* MACT_ENC_*; FROM_CONFIG follows action_mode */
    int precision;     /* MACT_PRECISION_*; DEFAULT = BF16. Weights are repacked once at load for it. */
    int no_pack;       /* 1: keep weights in place (zero-copy, slower matmuls; for inspect-only use) */
    /* Directory for a cache of the repacked weights (NULL: $MACT_PACK_CACHE if set, else no cache). A valid
     * cache file for this checkpoint and precision is mapped read-only instead of repacking (cold start in
     * about the time to read it); otherwise the weights are packed and the file is written there (as large as
     * the packed weights: ~8.4 GB bf16, ~4.4 GB int8 for the full-size models). The key covers every file of
     * the model directory (name, size, mtime), so a changed checkpoint gets a new file; old files are not
     * deleted. Cache problems never fail the load: mact_model_info.pack_cache says what happened. */
    const char *pack_cache_dir;
    mact_kernels kernels; /* AUTO (0): $MACT_KERNELS, else the best the CPU has */
} mact_load_options;

/* Sizes an integrator needs to allocate buffers; all read from the checkpoint. */
typedef struct {
    int image_height, image_width, patch_size;
    int n_patches;           /* per image, e.g. 729 */
    int patch_dim;           /* e.g. 588 */
    int tokens_per_image;    /* K: 16 with the grid token sampler, 196 without */
    int d_model;             /* LLM hidden */
    int n_layers;            /* LLM layers = action expert layers */
    int kv_dim;              /* n_kv_heads * head_dim */
    int ae_hidden;           /* action expert width */
    int max_action_dim, max_action_horizon, flow_steps;
    int vocab_total;         /* vocab_size + additional_vocab_size */
    int has_sampler;
    int pooling_mask;        /* resolved MACT_POOL_* */
    int encoder_mask;        /* resolved MACT_ENC_* */
    int precision;           /* resolved MACT_PRECISION_* */
    int pack_cache;          /* 0 no cache, 1 loaded from it, 2 packed and written to it, 3 cache not usable */
    mact_kernels kernels;    /* resolved: never AUTO */
} mact_model_info;

int mact_model_load(const char *model_dir, const mact_load_options *opt, mact_model **out,
                    char *err, size_t errlen);
void mact_model_free(mact_model *m);
void mact_model_get_info(const mact_model *m, mact_model_info *info);
/* Writes a human-readable summary (config, parameters and bytes per component, dtype mix). */
int mact_model_describe(const mact_model *m, char *buf, size_t buflen);

typedef struct {
    int max_images;   /* 0 -> 4 */
    int max_tokens;   /* 0 -> 1024: longest prompt this session accepts */
    int n_threads;    /* 0 -> all cores; ignored when threadpool is set */
    mact_threadpool *threadpool; /* NULL: the session makes its own pool of n_threads */
} mact_session_options;

int mact_session_new(const mact_model *m, const mact_session_options *opt, mact_session **out,
                     char *err, size_t errlen);
void mact_session_free(mact_session *s);
/* Threads this session's kernels run on (the size of its pool). */
MACT_API int mact_session_threads(const mact_session *s);
/* The last error of this session; valid until the next call on it. */
const char *mact_session_error(const mact_session *s);

/* ---- stages at the seed's boundaries ---- */

/* pixel_values [n_img, n_patches, patch_dim] -> image_embeds [n_img * K, d_model]. */
int mact_vision(mact_session *s, const float *pixel_values, int n_img, float *image_embeds);

/* Token ids [n] -> attention bias [n, n] (0 or -FLT_MAX) per spec 3.6 and the encoder mask [n]. */
int mact_attention_bias(mact_session *s, const int64_t *ids, int n, float *bias);
int mact_encoder_mask(mact_session *s, const int64_t *ids, int n, uint8_t *mask);
/* ids [n] + image_embeds [n_image_tokens, d_model] -> hidden [n, d_model]. */
int mact_embed(mact_session *s, const int64_t *ids, int n, const float *image_embeds,
               int n_image_embeds, float *hidden);
/* Runs LLM layers [a, b) in place on hidden [n, d_model] under bias [n, n]; writes K (post-norm,
 * post-RoPE) and V of each layer to keys/values [(b - a), n, kv_dim]. */
int mact_llm_layers(mact_session *s, float *hidden, const float *bias, int n, int a, int b,
                    float *keys, float *values);

/* keys/values [n_layers, n, kv_dim] -> k_ctx/v_ctx [n_layers, n, ae_hidden]. */
int mact_action_context(mact_session *s, const float *keys, const float *values, int n,
                        float *k_ctx, float *v_ctx);
/* One Euler step in place on traj [h, max_action_dim] at time t with dt = 1/num_steps.
 * enc_mask [n] (nonzero = visible), is_pad [max_action_dim] (nonzero = padded dim). */
int mact_action_step(mact_session *s, float *traj, int h, float t, int num_steps,
                     const float *k_ctx, const float *v_ctx, const uint8_t *enc_mask, int n,
                     const uint8_t *is_pad);
/* The whole loop: noise [h, max_action_dim] -> actions_norm [h, max_action_dim] in place, from the
 * raw per-layer keys/values; action_dim says which dims are real (the rest are padding). */
int mact_action_generate(mact_session *s, float *traj, int h, int action_dim, int num_steps,
                         const float *keys, const float *values, const uint8_t *enc_mask, int n);

/* The whole path from preprocessed inputs: pixel_values [n_img, n_patches, patch_dim] and prompt ids [n]
 * (with n_img * K <im_patch> tokens) -> traj [h, max_action_dim], noise in, normalised actions out. */
int mact_generate_from_ids(mact_session *s, const float *pixel_values, int n_img, const int64_t *ids, int n,
                           float *traj, int h, int action_dim, int num_steps);

/* ---- the integrator's call: camera frames + task + raw state -> actions in robot units ---- */

/* One camera frame: height x width x 3 RGB bytes, row-major, owned by the caller. */
typedef struct {
    const uint8_t *rgb;
    int height, width;
} mact_frame;

typedef struct {
    const char *norm_tag;     /* NULL: the checkpoint's only tag (an error lists the tags when several) */
    int num_steps;            /* flow-matching Euler steps; 0: config flow_matching_num_steps */
    const float *noise;       /* initial noise [horizon, max_action_dim], or NULL for a Gaussian from seed */
    int noise_len;            /* floats in noise; must equal horizon * max_action_dim */
    uint64_t seed;
    int n_action_steps;       /* rows returned; 0: the tag's n_action_steps (or its horizon) */
} mact_predict_options;

typedef struct {
    double preprocess_ms, vision_ms, llm_ms, action_ms, total_ms;
    int n_tokens;             /* prompt length */
    int horizon;              /* action rows generated (the tag's action_horizon) */
} mact_timings;

/* frames [n_frames] in the checkpoint's camera order, task as UTF-8, state [state_dim] raw robot units
 * -> actions [n_steps, action_dim] (row-major, in the caller's buffer of actions_cap floats).
 * Needs tokenizer.json and norm_stats.json in the model directory. timings may be NULL. */
int mact_predict(mact_session *s, const mact_frame *frames, int n_frames, const char *task, const float *state,
                 int state_dim, const mact_predict_options *opt, float *actions, int actions_cap, int *n_steps,
                 int *action_dim, mact_timings *timings);

/* After mact_predict: a view of an intermediate tensor for dumps ("pixel_values", "image_embeds",
 * "keys", "values", "noise", "actions_norm", "input_ids" as float). Valid until the next call on s;
 * owned by the session. Returns MACT_ERR_INPUT for an unknown name. */
int mact_session_tensor(const mact_session *s, const char *name, const float **data, int64_t shape[4], int *ndim);

/* Token ids of UTF-8 text with the model's tokenizer (no BOS, specials matched). */
int mact_tokenize(const mact_model *m, const char *text, int64_t *ids, int cap, int *n, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
