/* Random MolmoAct2 checkpoints written from C (no Python): `mact synth`, `mact demo`, `mact bench` (the public
 * room of synthetic writers: the demo, the tests and the benchmarks use it; nothing the libraries ship depends on it).
 *
 * mact_synth writes OUT_DIR/{config.json, model.safetensors, norm_stats.json, tokenizer.json} in the
 * real HF layout of docs/design.md, which mact_model_load (and tests/reference/molmoact2_ref.py)
 * accept unchanged. Presets:
 *   tiny    the shapes of tests/reference/gen_checkpoint.py's tiny preset (ViT 64 wide, 3 stored
 *           layers, LLM 96 wide / 3 layers, action expert 64 wide) with vocab 1024 so the whole
 *           MolmoAct2 token layout fits; grid token sampler K=16 after the projector; 2 flow steps,
 *           norm tag "libero".
 *   wide    the real widths and head counts (ViT 1152, LLM 2560 / 32 / 8 x 128, expert 768 / 8 x 96) with
 *           2 layers per component and tiny's vocab: the real GEMM shapes in ~0.7 GB.
 *   libero  full MolmoAct2-LIBERO-LP-VTP-SD shapes (docs/spec/molmoact2.md section 1): ViT 1152 x 10 stored layers,
 *           taps [-1,-4], LLM 2560 x 36 layers, vocab 154624 + 128, action expert 768 x 36 layers,
 *           sampler K=16 / C=2560, 2 flow steps, norm tag "libero" (state 8, action 7, horizon 10).
 *   so101   libero's shapes with 10 flow steps and norm tag "so100_so101_molmoact2" (state and
 *           action 6, horizon 30).
 * Dtypes: MACT_SYNTH_MIXED (default) stores the big VLM matrices (ViT, pooling, projector, LLM
 * linears, embeddings, lm_head) as BF16 and everything else as F32, as LeRobot saves; BF16 stores
 * every matrix (action expert and sampler too) as BF16 and vectors as F32; F32 stores everything F32.
 *
 * Values depend only on (seed, tensor name): weights ~ N(0,1)/sqrt(fan_in) (an Irwin-Hall
 * approximation of the normal), biases ~ 0.02 N(0,1), norm weights 1 + U(-0.3, 0.3), embeddings
 * N(0,1), positional embedding 0.5 N(0,1); nothing is zero. Tensors are generated in parallel
 * blocks and streamed to disk, so memory stays at a few tens of MB for the 10+ GB full-size presets.
 *
 * Token layout (tokenizer.json and config.json agree; every id < vocab_size + additional_vocab_size):
 *   0..255            byte-level tokens (GPT-2 bytes_to_unicode order)
 *   256..             BPE merges learned from a built-in corpus of robot instructions, then
 *                     unreachable "<|mact_pad_ID|>" vocab entries up to P - 1
 *   P = vocab_size - 12 - num_state_tokens: <|endoftext|>, <|im_start|>, <|im_end|> (= eos = bos),
 *                     <setup_start> <setup_end> <control_start> <control_end> <state_start>
 *                     <state_end> <action_start> <action_end> <action_output>,
 *                     <state_0> .. <state_{num_state_tokens-1}>  (state_token_start_id = P + 12)
 *   vocab_size + 0..8 <im_start> <im_end> <im_patch> <im_col> <low_res_im_start> <|image|> <im_low>
 *                     <frame_start> <frame_end> (docs/spec/molmoact2.md 4.2; rows of new_embedding)
 * The vocab and the added tokens are contiguous, so HF `tokenizers` (which renumbers added tokens
 * consecutively after the model vocab) gives the same ids as the file states.
 *
 * Library code: never exits; returns MACT_OK or a negative MACT_ERR_* with a message in err. A failed
 * call leaves no model.safetensors behind (the data goes to a temporary name renamed at the end). */
#ifndef MACT_SYNTH_H
#define MACT_SYNTH_H
#include <stddef.h>
#include <stdint.h>
#include "mact.h"

/* ---- random checkpoints (`mact synth`) ---- */

enum { MACT_SYNTH_MIXED = 0, MACT_SYNTH_F32 = 1, MACT_SYNTH_BF16 = 2 };
/* the robot of the norm tag written: the preset's (so101's SO-100/101 tag, the others' LIBERO), or either */
enum { MACT_SYNTH_ROBOT_PRESET = 0, MACT_SYNTH_ROBOT_LIBERO = 1, MACT_SYNTH_ROBOT_SO101 = 2 };

typedef struct {
    int dtype_mode;   /* MACT_SYNTH_*: MIXED the big VLM matrices BF16 and the rest F32 (as LeRobot saves); BF16
                         every matrix; F32 everything */
    int no_lm_head;   /* skip lm_head.weight (the loader treats it as optional); ln_f is kept */
    int robot;        /* MACT_SYNTH_ROBOT_*: the norm tag's robot (LIBERO: 8 state dims, 7 actions, cameras image and
                         wrist_image; SO101: 6 joints, cameras top and wrist, horizon 30) */
    int n_threads;    /* 0: the default */
    int llm_layers;   /* 0: the preset's; else the LLM's (and the action expert's) layer count, 1..256 */
    int vit_layers;   /* 0: the preset's; else the ViT's stored layers, at least the deepest tap */
    /* Stress values (`--outliers K:S`, docs/parity.md "int8 at depth"): K outlier channels (0: none) of scale S
     * planted in the LLM's and the ViT's residual streams, as trained models carry them: the channels' rows of
     * every block's output projections (attn_out / ff_out, wo / w2), the channels'
     * columns of the token embeddings, the ViT's patch embedding rows and positional columns, all times S; and
     * a massive activation, 1e3 on the first channel of the BOS (= EOS) token's embedding row. Channels are
     * picked from the seed. */
    int outlier_channels;
    float outlier_scale;
} mact_synth_options;

typedef struct {
    int64_t n_tensors;
    int64_t n_params;
    int64_t weight_bytes;   /* size of model.safetensors */
    int64_t total_bytes;    /* all four files */
    double seconds;         /* wall time of the whole call */
    double weight_seconds;  /* wall time spent generating + writing model.safetensors */
} mact_synth_result;

/* A random checkpoint of preset ("tiny", "wide", "libero", "so101"; mact_synth_presets) in out_dir: config.json,
 * model.safetensors, norm_stats.json, tokenizer.json in the real HF layout; values depend only on (seed, tensor
 * name). Creates out_dir (and its parents) when missing and overwrites the four files; a failed call leaves no
 * model.safetensors. opt NULL: the defaults (MIXED dtypes); res (may be NULL): what was written. Errors: MACT_ERR_INPUT
 * (unknown preset or dtype), MACT_ERR_IO, MACT_ERR_NOMEM. */
mact_status mact_synth(const char *preset, const char *out_dir, uint64_t seed, const mact_synth_options *opt,
                       mact_synth_result *res, char *err, size_t errlen);
/* "mixed" / "f32" / "bf16" -> MACT_SYNTH_*, -1 when unknown; and back ("?" when out of range). */
int mact_synth_dtype_from_name(const char *name);
const char *mact_synth_dtype_name(int dtype_mode);
/* The preset names, comma-separated (static string). */
const char *mact_synth_presets(void);


#endif
