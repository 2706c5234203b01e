/* mact: MolmoAct2 robot policies in plain C. The integrator's API: load a model, make a session, predict.
 *
 *   #include <mact.h>
 *
 *   char err[1024];
 *   mact_model *m;
 *   mact_session *s;
 *   if (mact_model_load("/models/so101", NULL, &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
 *   if (mact_session_new(m, NULL, &s, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
 *   mact_model_info mi;
 *   mact_model_get_info(m, &mi);
 *   size_t cap = (size_t)mi.max_action_horizon * mi.max_action_dim;    // always enough
 *   float *actions = malloc(cap * sizeof(float));
 *   mact_frame cams[2] = {{top_rgb, 480, 640}, {wrist_rgb, 480, 640}};  // HxWx3 RGB bytes each
 *   float state[6] = {0, 90, 90, 0, 0, 10};                             // raw robot units
 *   mact_predict_input in = {.frames = cams, .n_frames = 2, .task = "pick up the cube",
 *                            .state = state, .state_dim = 6};           // options all zero: defaults
 *   mact_predict_output out = {.actions = actions, .actions_cap = cap};
 *   if (mact_predict(s, &in, &out)) fprintf(stderr, "%s\n", mact_session_error(s));
 *   else for (size_t r = 0; r < out.n_steps; r++, puts(""))           // out.n_steps rows, robot units
 *       for (size_t i = 0; i < out.action_dim; i++) printf(" %g", actions[r * out.action_dim + i]);
 *   free(actions);
 *   mact_session_free(s);
 *   mact_model_free(m);
 *
 * Link with `pkg-config --cflags --libs mact` (libmact.so), or statically with `pkg-config --static --libs mact`
 * and -lmact replaced by -l:libmact.a. The model's stages one at a time (vision, LLM layers, action expert: the
 * parity boundaries) are in mact_stages.h.
 *
 * A mact_model is read-only after load (mmapped weights, config); any number of mact_sessions may share one
 * model. A session owns every mutable byte of an inference (activation arena, KV, RNG) and is used by one
 * thread at a time.
 *
 * Status: every function that can fail returns a mact_status (MACT_OK = 0, negative on error). Load and
 * session-creation errors are written to the caller's err buffer (NUL-terminated, truncated to errlen; errlen
 * may be 0); errors of calls on a session are kept in the session (mact_session_error). The library never
 * exits or aborts on bad input. The toolkit headers (mact_data.h, mact_compress.h) and mact_stages.h follow the
 * same rules, their errors in the caller's err buffer or the session. Accessors that cannot fail return their value
 * directly: a count, an index (-1 when absent), a pointer (NULL when absent).
 *
 * Ownership: every buffer passed in is owned by the caller and only read during the call; every output buffer
 * is allocated by the caller with the size stated next to the function (query the sizes with
 * mact_model_get_info). Nothing returned by the library needs freeing except through the *_free pairs.
 *
 * Sizes: capacities and element counts of caller buffers are size_t; model dimensions are int. Enum-typed
 * struct fields are int-sized (ctypes: c_int). Every zero field of an options struct means "the default",
 * and each default is stated once, next to its field. */
#ifndef MACT_H
#define MACT_H
#include <stddef.h>
#include <stdint.h>

#ifndef MACT_API
#if defined(__GNUC__) || defined(__clang__)
#define MACT_API __attribute__((visibility("default")))
#else
#define MACT_API
#endif
#endif

/* The version of this header; mact_version() gives the library's (they differ when the two do not match). */
#define MACT_VERSION_MAJOR 0
#define MACT_VERSION_MINOR 3
#define MACT_VERSION_PATCH 0
#define MACT_VERSION_STRING "0.3.0"

/* Defaults of mact_session_options (0 in a field selects them). */
#define MACT_DEFAULT_MAX_IMAGES 4
#define MACT_DEFAULT_MAX_TOKENS 512

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MACT_OK = 0,
    MACT_ERR_IO = -1,          /* file missing or unreadable */
    MACT_ERR_FORMAT = -2,      /* malformed file (safetensors, json, npz) */
    MACT_ERR_MODEL = -3,       /* checkpoint inconsistent with its config: missing/extra tensor, shape */
    MACT_ERR_INPUT = -4,       /* caller input rejected: shape, NaN, range, NULL, unknown name */
    MACT_ERR_NOMEM = -5,
    MACT_ERR_UNSUPPORTED = -6, /* a valid choice this build does not implement */
} mact_status;

/* "MAJOR.MINOR.PATCH" of the library (static string). */
MACT_API const char *mact_version(void);

typedef struct mact_model mact_model;
typedef struct mact_session mact_session;

/* How the 2x2 attention pooling treats the padded row/column (docs/spec/molmoact2.md 7.3). */
typedef enum {
    MACT_POOL_FROM_CONFIG = 0, /* adapter_config.pooling_attention_mask / attn_implementation */
    MACT_POOL_SDPA,
    MACT_POOL_EAGER,
    MACT_POOL_NONE,
} mact_pool_mask;

/* Which prompt tokens the action expert's cross-attention may see (docs/spec/molmoact2.md 4.6). */
typedef enum {
    MACT_ENC_FROM_CONFIG = 0,  /* follows action_mode */
    MACT_ENC_ALL,
    MACT_ENC_DROP_EOS,
} mact_encoder_mask_mode;

/* Arithmetic of the weight matmuls. FP32 is the exact parity mode (weights widened to fp32, fp32
 * accumulation); BF16 rounds activations to bf16 and uses the CPU's bf16 dot products (AVX512-BF16, ARM
 * BFMMLA) with fp32 accumulation; INT8 is BF16 with the weights of the components in
 * mact_load_options.int8_parts (default: the LLM) quantized at load to int8 per output channel and their GEMM
 * inputs to u8 per row, multiplied in int32 (AVX512-VNNI, ARM SDOT / SMMLA; elsewhere INT8 runs as BF16), with
 * the activation columns that stand out (outlier channels) multiplied in fp32 beside them. Norms, softmax, RoPE
 * and the Euler update stay fp32 in all. The accuracy cost of each choice is measured in docs/parity.md. */
typedef enum {
    MACT_PRECISION_DEFAULT = 0, /* BF16 */
    MACT_PRECISION_FP32,
    MACT_PRECISION_BF16,
    MACT_PRECISION_INT8,
} mact_precision;

/* The components an INT8 model quantizes (mact_load_options.int8_parts, a set of these bits). The action expert
 * stays BF16 by default: its int8 GEMMs run on 10-30 rows, where they are no faster, and they multiplied the
 * actions' error by ~4 (docs/parity.md); the vision stack's int8 error reaches the actions through the grid
 * sampler's positions, so it is opt-in until its accuracy cost is within 2x BF16's. */
typedef enum {
    MACT_PART_VISION = 1,   /* "vision": ViT, pooling, projector, the grid sampler's MLPs */
    MACT_PART_LLM = 2,      /* "llm" */
    MACT_PART_EXPERT = 4,   /* "expert": the action expert */
} mact_part;
#define MACT_INT8_PARTS_ALL (MACT_PART_VISION | MACT_PART_LLM | MACT_PART_EXPERT)
#define MACT_INT8_PARTS_DEFAULT MACT_PART_LLM
/* "llm,vision,expert" (any non-empty comma-separated subset, or "all") -> *out; MACT_ERR_INPUT otherwise. */
MACT_API mact_status mact_int8_parts_parse(const char *s, unsigned *out);
/* "llm,vision" for a set of MACT_PART_* bits into buf (at most buflen bytes, NUL-terminated); returns buf */
MACT_API const char *mact_int8_parts_str(unsigned parts, char *buf, size_t buflen);

/* "fp32", "bf16", "int8" or "default" -> *out; MACT_ERR_INPUT (and *out untouched) for anything else. */
MACT_API mact_status mact_precision_parse(const char *name, mact_precision *out);
/* The name of a precision (static string; "default" for DEFAULT, "?" when unknown). */
MACT_API const char *mact_precision_str(mact_precision precision);

/* Which kernels run the ops. AUTO picks the best the CPU has (once, from its features); REF forces the
 * plain-C reference kernels for every op (any CPU; for tests and bug reports); the x86 levels (x86-64
 * builds) and the ARM64 NEON levels (aarch64 builds) cap the choice (clamped to what the CPU has).
 * $MACT_KERNELS, set to one of the names beside the values, overrides AUTO. Chosen at load: the packed weight
 * layout belongs to the kernels that read it. */
typedef enum {
    MACT_KERNELS_AUTO = 0,          /* "auto" */
    MACT_KERNELS_REF,               /* "ref" */
    MACT_KERNELS_X86_AVX2,          /* "avx2" */
    MACT_KERNELS_X86_AVX512,        /* "avx512" */
    MACT_KERNELS_X86_AVX512_BF16,   /* "avx512bf16" */
    MACT_KERNELS_ARM_NEON,          /* "neon": Advanced SIMD */
    MACT_KERNELS_ARM_DOTPROD,       /* "neon-dotprod": + fp16 arithmetic + dotprod (Armv8.2) */
    MACT_KERNELS_ARM_I8MM,          /* "neon-i8mm": + i8mm + bf16 (Armv8.6) */
} mact_kernels;

/* The name beside a MACT_KERNELS_* value (static string; what $MACT_KERNELS takes); NULL past the last value, so
 * a binding lists them from 0 up. */
MACT_API const char *mact_kernels_str(mact_kernels kernels);

/* What the load did with the pack cache (mact_load_options.pack_cache_dir). */
typedef enum {
    MACT_CACHE_NONE = 0,       /* no cache directory, or nothing was packed (no_pack; kernels without packs) */
    MACT_CACHE_LOADED,         /* a valid cache file was mapped instead of repacking */
    MACT_CACHE_WRITTEN,        /* the weights were packed and the cache file written */
    MACT_CACHE_UNUSABLE,       /* the cache could be neither read nor written; the weights were packed */
} mact_pack_cache_status;

/* A pool of worker threads. A session makes its own by default; several sessions may share one (their
 * jobs then take turns on it, each still using all its threads). Free it after every session using it. */
typedef struct mact_threadpool mact_threadpool;
/* A pool of n_threads threads (the caller's among them), at most 256; n_threads <= 0: one per CPU this process
 * may run on (its affinity mask). */
MACT_API mact_status mact_threadpool_new(int n_threads, mact_threadpool **out, char *err, size_t errlen);
MACT_API void mact_threadpool_free(mact_threadpool *p);
MACT_API int mact_threadpool_size(const mact_threadpool *p);

/* mact_model_load's options; NULL or all zero: the defaults. */
typedef struct {
    mact_pool_mask pooling_mask;          /* FROM_CONFIG (0): read from adapter_config */
    mact_encoder_mask_mode encoder_mask;  /* FROM_CONFIG (0): follows action_mode */
    mact_precision precision;             /* DEFAULT (0): BF16. The weights are repacked once at load for it. */
    int no_pack;       /* 1: keep weights in place (zero-copy, slower matmuls; for inspect-only use) */
    /* Directory for a cache of the repacked weights (NULL: $MACT_PACK_CACHE if set, else no cache). A valid
     * cache file for this checkpoint and precision is mapped read-only instead of repacking (cold start in
     * about the time to read it); otherwise the weights are packed and the file is written there (as large as
     * the packed weights: ~8.4 GB bf16, ~4.4 GB int8 for the full-size models). The key covers every file of
     * the model directory (name, size, mtime), so a changed checkpoint gets a new file; old files are not
     * deleted. Cache problems never fail the load: mact_model_info.pack_cache says what happened. */
    const char *pack_cache_dir;
    mact_kernels kernels;                 /* AUTO (0): $MACT_KERNELS, else the best the CPU has */
    unsigned int8_parts;                  /* INT8: MACT_PART_* bits to quantize; 0: MACT_INT8_PARTS_DEFAULT */
} mact_load_options;

/* Sizes an integrator needs to allocate buffers, read from the checkpoint, and what the load resolved. */
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
    mact_pool_mask pooling_mask;          /* resolved: never FROM_CONFIG */
    mact_encoder_mask_mode encoder_mask;  /* resolved: never FROM_CONFIG */
    mact_precision precision;             /* resolved: never DEFAULT */
    mact_pack_cache_status pack_cache;
    mact_kernels kernels;                 /* resolved: never AUTO */
    unsigned int8_parts;                  /* the MACT_PART_* bits quantized (0 unless the kernels run INT8) */
    int vit_layers;                       /* ViT blocks stored (the tower runs up to the deepest tap) */
} mact_model_info;

/* Loads model_dir (config.json, model.safetensors or shards; tokenizer.json and norm_stats.json are optional
 * and needed only by mact_predict / mact_tokenize). opt may be NULL. */
MACT_API mact_status mact_model_load(const char *model_dir, const mact_load_options *opt, mact_model **out,
                                     char *err, size_t errlen);
MACT_API void mact_model_free(mact_model *m);
MACT_API void mact_model_get_info(const mact_model *m, mact_model_info *info);
/* Writes a human-readable summary (config, parameters and bytes per component, dtype mix) into buf,
 * NUL-terminated; MACT_ERR_INPUT when it did not fit in buflen (the text is then truncated). */
MACT_API mact_status mact_model_describe(const mact_model *m, char *buf, size_t buflen);

/* A norm tag: the statistics, prompt fields and joint frame a prediction is made with (norm_stats.json's
 * metadata_by_tag, or a LeRobot policy's processors). Owned by its model (or norm-stats file): valid as long as it. */
typedef struct mact_tag mact_tag;

/* What a caller must send with a tag and what it gets back. The strings belong to the tag's owner. */
#define MACT_MAX_TAG_CAMERAS 8
typedef struct {
    const char *name;
    int state_dim, action_dim;   /* of the tag's state_stats / action_stats */
    int action_horizon;          /* 0: the file gives none (the model's max_action_horizon is used) */
    int n_action_steps;          /* 0: the file gives none (the horizon is used) */
    int n_cameras;               /* entries of camera_keys; 0: the tag lists none */
    const char *camera_keys[MACT_MAX_TAG_CAMERAS]; /* the model's camera order: the first min(n_cameras, 8) */
    const char *setup_type, *control_mode;         /* "" when absent */
    int joint_frame;             /* joints of the tag's joint frame (state'[:n] = signs * state[:n] + offsets before
                                  * normalisation, undone on the actions); 0: none */
    int lerobot;                 /* 1: a LeRobot policy's processors' arithmetic; 0: norm_stats.json's (HF) */
    const char *state_names;     /* the state's dims named in order, joined by '\n' (NULL: the checkpoint names none) */
    const char *action_names;    /* the same for the actions */
} mact_norm_tag_info;

/* Tags in their file's order (a LeRobot policy with processors: one, "policy"); 0 when the checkpoint has none. */
MACT_API size_t mact_model_num_norm_tags(const mact_model *m);
/* Tag i (0 <= i < mact_model_num_norm_tags); MACT_ERR_INPUT when i is out of range (*out zeroed). */
MACT_API mact_status mact_model_norm_tag(const mact_model *m, size_t i, mact_norm_tag_info *out);
/* The tag mact_predict uses for norm_tag `name` (NULL: the default: a LeRobot config's norm_tag, else the only
 * tag); NULL, with the valid tags in err, when there is none. */
MACT_API const mact_tag *mact_model_tag(const mact_model *m, const char *name, char *err, size_t errlen);
MACT_API void mact_tag_get_info(const mact_tag *t, mact_norm_tag_info *out);
/* The action statistics the tag normalises with, [action_dim] each: the mode's pair (q01/q99 for quantiles) and
 * 1 where a dim is normalised (0: passed through). */
MACT_API void mact_tag_action_stats(const mact_tag *t, double *lo, double *hi, unsigned char *mask);
/* Actions [n_rows, action_dim] in robot units -> the model's normalised units [n_rows, action_dim]: the inverse of
 * what mact_predict applies to its output (the joint frame, then the normalisation, clipped to [-1, 1] in the
 * quantile and min-max modes). */
MACT_API void mact_tag_normalize_actions(const mact_tag *t, const float *actions, size_t n_rows, float *out);

/* What a caller must send and gets back, per norm tag, as JSON (what `mact inspect` prints): a list in the file's order
 * of {"name", "default": bool, "state": {"dim", "names": [...] | null}, "cameras": [keys in the model's order],
 * "actions": {"dim", "names", "horizon", "n_action_steps"}, "flow_steps", "setup_type", "control_mode",
 * "arithmetic": "lerobot" | "hf", "joint_frame": {"state": {"signs", "offsets"} | null, "actions": ... }}. Writes it
 * NUL-terminated into buf (cap bytes); *len (may be NULL) gets its length; MACT_ERR_INPUT when it did not fit (call
 * with cap 0 for the length), MACT_ERR_IO when the checkpoint has no tags. */
MACT_API mact_status mact_model_tags_json(const mact_model *m, char *buf, size_t cap, size_t *len);

/* An observation key as the model's rename_map maps it (a LeRobot policy's rename_observations_processor): its new
 * name, or key itself when the map does not name it (and for every key of a model without one). */
MACT_API const char *mact_model_renamed(const mact_model *m, const char *key);

/* A hash of everything the tag maps numbers with (statistics, masks, modes, joint frame, prompt fields, horizon):
 * equal tags give equal fingerprints (an evaluation's episode files record it). */
MACT_API uint64_t mact_tag_fingerprint(const mact_tag *t);

/* A norm_stats.json on its own (the tags of a checkpoint's statistics without loading its weights). */
typedef struct mact_norm_stats mact_norm_stats;
MACT_API mact_status mact_norm_stats_open(const char *path, mact_norm_stats **out, char *err, size_t errlen);
MACT_API void mact_norm_stats_close(mact_norm_stats *ns);
/* Its tag `name` (NULL: the only one); NULL, with the valid tags in err, when there is none. */
MACT_API const mact_tag *mact_norm_stats_tag(const mact_norm_stats *ns, const char *name, char *err, size_t errlen);

/* mact_session_new's options; NULL or all zero: the defaults. */
typedef struct {
    size_t max_images;   /* camera frames per call, at most 256; 0: MACT_DEFAULT_MAX_IMAGES */
    size_t max_tokens;   /* longest prompt this session accepts; 0: MACT_DEFAULT_MAX_TOKENS. Either way capped
                          * at the model's max_position_embeddings. */
    int n_threads;       /* threads of the session's own pool, capped at the CPUs this process may run on;
                          * <= 0: all of them. Ignored when threadpool is set. */
    mact_threadpool *threadpool; /* NULL: the session makes its own pool of n_threads */
} mact_session_options;

MACT_API mact_status mact_session_new(const mact_model *m, const mact_session_options *opt, mact_session **out,
                                      char *err, size_t errlen);
MACT_API void mact_session_free(mact_session *s);
/* The model the session was made on. */
MACT_API const mact_model *mact_session_model(const mact_session *s);
/* Threads this session's kernels run on (the size of its pool). */
MACT_API int mact_session_threads(const mact_session *s);
/* The message of the last call on this session that failed; valid until the next call on it. */
MACT_API const char *mact_session_error(const mact_session *s);

/* ---- camera frames from files ---- */

/* The largest image accepted anywhere (decoded, raw or a resize target): sides up to 16384 pixels and at most 64
 * Mpixel (the RGB buffer is then 192 MiB), checked on a file's header before any pixel buffer is allocated. */
#define MACT_IMAGE_MAX_SIDE 16384
#define MACT_IMAGE_MAX_PIXELS ((int64_t)8192 * 8192)

/* A decoded image: RGB uint8, row-major HxWx3 (pixel (y, x) channel c at data[(y * width + x) * 3 + c]). data is
 * malloc'd by the function that fills it; mact_image_free releases it (and is safe on a zeroed or failed image). */
typedef struct {
    int64_t height, width;
    uint8_t *data;
} mact_image;
/* A PNG or JPEG in memory -> RGB. */
MACT_API mact_status mact_image_load_memory(const void *data, size_t size, mact_image *out, char *err, size_t errlen);
/* A PNG, JPEG or HxWx3 .npy (uint8, or float32 in [0, 1]) file -> RGB. */
MACT_API mact_status mact_image_load_path(const char *path, mact_image *out, char *err, size_t errlen);
MACT_API void mact_image_free(mact_image *img);

/* ---- the integrator's call: camera frames + task + raw state -> actions in robot units ---- */

/* One camera frame: height x width x 3 RGB bytes, row-major, owned by the caller. */
typedef struct {
    const uint8_t *rgb;
    int height, width;
} mact_frame;

typedef struct {
    const char *norm_tag;     /* NULL: the checkpoint's only tag (an error lists the tags when several) */
    int num_steps;            /* flow-matching Euler steps; 0: config flow_matching_num_steps */
    int n_action_steps;       /* rows returned, 1..horizon; 0: the tag's n_action_steps, else the horizon */
    /* initial noise [horizon, max_action_dim], where the horizon is the tag's action_horizon, else the model's
     * max_action_horizon; NULL: a Gaussian drawn from seed */
    const float *noise;
    size_t noise_len;         /* floats in noise; must equal horizon * max_action_dim */
    uint64_t seed;            /* used when noise is NULL; 0 is a seed like any other */
} mact_predict_options;

/* Real-time chunking (RTC; Black, Galliker, Levine 2025, as LeRobot's RTCProcessor runs it for MolmoAct2): the
 * flow loop is guided toward the rows of the previous chunk the robot has not executed yet, so the new chunk
 * continues the one being executed instead of jumping where they join. With Y those rows (normalised, zero past
 * them) and W the prefix weights below, at flow step k of S (t = k/S, time = 1 - t) every step's velocity v becomes
 *   v + g * corr,  corr = (d x1 / d x)^T (W * (Y - x1)),  x1 = x + time * v,
 *   g = min(max_guidance_weight, ((1-t)/t) * ((1-t)^2 + t^2) / (1-t)^2)   (max_guidance_weight at t = 0).
 * Prefix weights over the horizon's rows, with d = inference_delay and e = min(execution_horizon, n_prev), d
 * clamped to e: */
typedef enum {
    MACT_RTC_SCHEDULE_DEFAULT = 0, /* the checkpoint's (a LeRobot policy's rtc_config), else LINEAR */
    MACT_RTC_LINEAR,      /* 1 before d, then linspace(1, 0, e - d + 2)[1:-1], then 0 (LeRobot's default) */
    MACT_RTC_ZEROS,       /* 1 before d, then 0 */
    MACT_RTC_ONES,        /* 1 before e, then 0 */
    MACT_RTC_EXP,         /* LINEAR with each ramp weight w as w * expm1(w) / (e - 1) */
} mact_rtc_schedule;

typedef enum {
    MACT_RTC_IDENTITY = 0, /* corr = W * (Y - x1): the Jacobian taken as the identity (LeRobot's guidance) */
    MACT_RTC_VJP,          /* the paper's vector-Jacobian product: one reverse pass through the action expert per
                            * flow step (measured ~6.5x a plain flow step at the real action-expert widths;
                            * docs/benchmarks-log.md, "RTC guidance in the action stage") */
} mact_rtc_guidance;

#define MACT_RTC_DEFAULT_EXECUTION_HORIZON 10
#define MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT 10.0f

/* RTC inputs. All zero (prev_actions NULL, n_prev 0): off, the plain flow loop, bit for bit. */
typedef struct {
    /* [n_prev, action_dim] row-major: the previous chunk's rows the robot has not executed yet, first the next
     * one it executes, in robot units exactly as mact_predict returned them; mact normalises them with the norm
     * tag (the inverse of its own unnormalisation). Finite values only. */
    const float *prev_actions;
    size_t n_prev;            /* rows of prev_actions, 1..horizon; 0: RTC off */
    size_t prev_dim;          /* floats per row of prev_actions: must equal the norm tag's action dim */
    int inference_delay;      /* d: rows the robot executes while this inference runs, 0..n_prev (and < horizon);
                               * the new chunk's rows [0, d) are then already in the past: the caller starts at row d */
    int execution_horizon;    /* rows guided; 0: the checkpoint's (a LeRobot policy's rtc_config), else
                               * MACT_RTC_DEFAULT_EXECUTION_HORIZON; capped at n_prev (the guided prefix never extends
                               * past the rows given: zero is the dataset's mean) */
    mact_rtc_schedule schedule;    /* SCHEDULE_DEFAULT (0) */
    float max_guidance_weight;     /* cap of g; 0: the checkpoint's, else MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT; must be
                                    * finite, >= 0 */
    mact_rtc_guidance guidance;    /* IDENTITY (0) */
} mact_rtc_options;

/* "default", "linear", "zeros", "ones", "exp" -> *out; "identity", "vjp" -> *out; MACT_ERR_INPUT for anything else. */
MACT_API mact_status mact_rtc_schedule_parse(const char *name, mact_rtc_schedule *out);
MACT_API mact_status mact_rtc_guidance_parse(const char *name, mact_rtc_guidance *out);
/* The names those parse (static strings; "?" for a value out of range). */
MACT_API const char *mact_rtc_schedule_str(mact_rtc_schedule s);
MACT_API const char *mact_rtc_guidance_str(mact_rtc_guidance g);
/* The prefix weights mact uses for these options over h rows (n_prev rows given) -> w [h]. MACT_ERR_INPUT on
 * options the flow loop would refuse. For tests, plots and clients that want to show what is guided. */
MACT_API mact_status mact_rtc_prefix_weights(const mact_rtc_options *rtc, int h, float *w);

typedef struct {
    const mact_frame *frames; /* [n_frames], in the checkpoint's camera order */
    size_t n_frames;          /* 1..the session's max_images */
    const char *task;         /* UTF-8, NUL-terminated */
    const float *state;       /* [state_dim], raw robot units */
    size_t state_dim;         /* must equal the norm tag's state dim */
    mact_predict_options options; /* all zero: the defaults */
    mact_rtc_options rtc;     /* all zero: off (every chunk from fresh noise alone) */
} mact_predict_input;

typedef struct {
    double preprocess_ms, vision_ms, llm_ms, action_ms, total_ms;
    int n_tokens;             /* prompt length */
    int horizon;              /* action rows generated (the horizon, mact_predict_options.noise) */
} mact_timings;

typedef struct {
    float *actions;           /* the caller's buffer: [n_steps, action_dim] row-major on return */
    size_t actions_cap;       /* floats in actions; max_action_horizon * max_action_dim always suffices */
    size_t n_steps;           /* written: rows of actions */
    size_t action_dim;        /* written: floats per row (the norm tag's action dim) */
    mact_timings timings;     /* written */
} mact_predict_output;

/* in -> out->actions. Needs tokenizer.json and norm_stats.json in the model directory. Inputs are checked
 * before anything runs: on an error nothing in out has been written. */
MACT_API mact_status mact_predict(mact_session *s, const mact_predict_input *in, mact_predict_output *out);

/* A view of a tensor the session owns: data[shape[0]] ... [shape[ndim-1]], row-major float32. */
typedef struct {
    const float *data;
    int ndim;
    int64_t shape[4];         /* unused dims are 0 */
} mact_tensor_view;

/* After mact_predict: an intermediate tensor for dumps ("pixel_values", "image_embeds", "keys", "values",
 * "noise", "actions_norm", "input_ids" as float; "prev_actions_norm" [n_prev, action_dim] when the call had RTC rows).
 * Valid until the next call on s. MACT_ERR_INPUT (the message in mact_session_error) for an unknown name or before
 * the first successful mact_predict. */
MACT_API mact_status mact_session_tensor(mact_session *s, const char *name, mact_tensor_view *view);

/* Token ids of UTF-8 text with the model's tokenizer (no BOS, specials matched). Writes up to cap ids and sets
 * *n to the full count; ids may be NULL with cap 0 to query the count. MACT_ERR_INPUT when they do not fit
 * (*n still says how many are needed) or the text is not valid UTF-8; MACT_ERR_IO without tokenizer.json. */
MACT_API mact_status mact_tokenize(const mact_model *m, const char *text, int64_t *ids, size_t cap, size_t *n,
                                   char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
