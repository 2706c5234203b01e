/* Internal structs shared by the loader and the stages. Field names follow the checkpoint's tensor
 * names (docs/design.md); shapes in comments use the config's symbols. */
#ifndef MACT_INTERNAL_H
#define MACT_INTERNAL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "mact.h"
#include "base/err.h"
#include "mact_stages.h"
#include "base/tensor.h"
#include "io/safetensors.h"
#include "io/normstats.h"
#include "model/source.h"
#include "kernels/kernels.h"

#define MACT_MAX_TAPS 8

enum { MACT_QKNORM_NONE = 0, MACT_QKNORM_QWEN3, MACT_QKNORM_OLMO };

typedef struct {
    /* vit_config */
    int vit_hidden, vit_heads, vit_head_dim, vit_inter, vit_layers;  /* vit_layers = stored blocks */
    int image_h, image_w, patch, image_num_pos;
    float vit_eps;
    /* adapter_config */
    int n_taps, taps[MACT_MAX_TAPS];  /* absolute block indices, config order */
    int pool_hidden, pool_heads, pool_head_dim, proj_inter;
    int pool_h, pool_w;               /* pooling window, 2x2 */
    int pooling_mask;                 /* resolved MACT_POOL_* */
    /* derived patch / pooled grids */
    int grid_h, grid_w;               /* patches: 27 x 27 */
    int pooled_h, pooled_w;           /* 14 x 14 */
    /* grid token sampler (present iff its tensors are) */
    int use_sampler, sampler_k, sampler_c, sampler_hidden, coord_hidden, sampler_after_projector;
    int tokens_per_image;
    /* text_config */
    int d_model, n_heads, n_kv_heads, head_dim, n_layers, ff_inter;
    int64_t vocab_size, additional_vocab_size;
    int qkv_bias, qk_norm;            /* MACT_QKNORM_* */
    int max_position_embeddings;
    float eps, rope_theta;
    /* action_expert_config */
    int ae_hidden, ae_heads, ae_head_dim, ae_layers, ae_inter, ae_tdim;
    int ae_context_norm, ae_qk_norm, ae_rope;
    float ae_eps;
    /* top level */
    int max_action_dim, max_action_horizon, flow_steps;
    int encoder_mask;                 /* resolved MACT_ENC_* */
    int64_t image_start_id, image_end_id, image_patch_id, image_col_id, low_res_image_start_id,
        image_low_res_id, frame_start_id, frame_end_id, eos_id, action_start_id, action_end_id,
        action_output_id, state_start_id, state_end_id, state_token_start_id;
    int num_state_tokens;
} mact_config;

typedef struct {                 /* model.vision_backbone.image_vit.transformer.resblocks.{j} */
    mact_tensor attention_norm_w, attention_norm_b;  /* [vit_hidden] */
    mact_tensor wq, bq, wk, bk, wv, bv;              /* [heads*hd, vit_hidden], [heads*hd] */
    mact_tensor wo, bo;                              /* [vit_hidden, heads*hd], [vit_hidden] */
    mact_tensor ffn_norm_w, ffn_norm_b;              /* [vit_hidden] */
    mact_tensor w1, b1;                              /* [vit_inter, vit_hidden], [vit_inter] */
    mact_tensor w2, b2;                              /* [vit_hidden, vit_inter], [vit_hidden] */
} mact_vit_block;

typedef struct {
    mact_tensor patch_w, patch_b;    /* [vit_hidden, patch_dim], [vit_hidden] */
    mact_tensor pos_emb;             /* [num_pos, vit_hidden] (F32 copy) */
    mact_vit_block *blocks;          /* [vit_layers] */
    /* image_pooling_2d: q/k/v take the concatenated taps [n_taps*vit_hidden] */
    mact_tensor pool_wq, pool_bq, pool_wk, pool_bk, pool_wv, pool_bv, pool_wo, pool_bo;
    /* image_projector: SwiGLU, no bias */
    mact_tensor proj_w1, proj_w3;    /* [proj_inter, pool_hidden] */
    mact_tensor proj_w2;             /* [d_model, proj_inter] */
    /* token sampler */
    mact_tensor scout0_w, scout0_b;  /* [sampler_hidden, C] */
    mact_tensor scout2_w, scout2_b;  /* [2K, sampler_hidden] */
    mact_tensor coord0_w, coord0_b;  /* [coord_hidden, 2] */
    mact_tensor coord2_w, coord2_b;  /* [C, coord_hidden] */
} mact_vision_weights;

typedef struct {                 /* model.transformer.blocks.{i} */
    mact_tensor attn_norm;           /* [d_model] */
    mact_tensor att_proj, att_proj_b;/* [(h + 2 kv) * hd, d_model]: rows Q | K | V */
    mact_tensor q_norm, k_norm;      /* qwen3: [hd]; olmo: [h*hd] / [kv*hd] */
    mact_tensor attn_out;            /* [d_model, h*hd] */
    mact_tensor ff_norm;             /* [d_model] */
    mact_tensor ff_proj;             /* [2*ff_inter, d_model]: rows value | gate */
    mact_tensor ff_out;              /* [d_model, ff_inter] */
} mact_llm_block;

typedef struct {
    mact_tensor wte, wte_new;        /* [vocab, d_model], [additional_vocab, d_model] */
    mact_llm_block *blocks;          /* [n_layers] */
    mact_tensor ln_f, lm_head;       /* bound for validation, unused by continuous actions */
} mact_llm_weights;

typedef struct {                 /* model.action_expert.blocks.{i} */
    mact_tensor qkv_w, qkv_b;        /* [3*ae_hidden, ae_hidden] */
    mact_tensor out_w, out_b;        /* self_attn.out_proj */
    mact_tensor xq_w, xq_b;          /* cross_attn.q_proj */
    mact_tensor xo_w, xo_b;          /* cross_attn.out_proj */
    mact_tensor gate_w, gate_b, up_w, up_b;  /* [ae_inter, ae_hidden] */
    mact_tensor down_w, down_b;      /* [ae_hidden, ae_inter] */
    mact_tensor mod_w, mod_b;        /* [9*ae_hidden, ae_hidden] */
} mact_ae_block;

typedef struct {
    mact_tensor time1_w, time1_b;    /* [ae_hidden, ae_tdim] */
    mact_tensor time3_w, time3_b;    /* [ae_hidden, ae_hidden] */
    mact_tensor action_embed_w, action_embed_b;  /* [ae_hidden, max_action_dim] */
    mact_tensor ctx_k, ctx_v;        /* [ae_hidden, kv_dim], no bias, shared by all layers */
    mact_ae_block *blocks;           /* [ae_layers] */
    mact_tensor fmod_w, fmod_b;      /* [2*ae_hidden, ae_hidden] */
    mact_tensor final_w, final_b;    /* [max_action_dim, ae_hidden] */
} mact_ae_weights;

struct mact_model {
    mact_config cfg;
    mact_st *st;                     /* mmapped safetensors, kept open for the model's lifetime */
    mact_vision_weights vis;
    mact_llm_weights llm;
    mact_ae_weights ae;
    /* buffers the model owns: F32 conversions, LoRA merges, canonical names */
    void **owned;
    size_t n_owned, cap_owned;
    mact_source src;                 /* where the files came from: dir (config, weights), base_dir, the LeRobot config */
    float lora_scale;                /* alpha / r of merged LoRA adapters, 0 without */
    /* optional files: the integrator's path (mact_predict) needs them, the stages do not */
    struct mact_tokenizer *tok;      /* the base's tokenizer.json */
    struct mact_norm_stats *ns;    /* the norm tags: norm_stats.json, or a LeRobot policy's processors */
    char tok_err[512], ns_err[1024]; /* why each is absent */
    char stats_src[4400];            /* where the tags' statistics came from (mact inspect) */
    int n_renames;                   /* a LeRobot policy's rename_map: observation key -> the policy's */
    char (*rename_from)[MACT_NORM_MAX_KEY], (*rename_to)[MACT_NORM_MAX_KEY];
    mact_precision precision;        /* resolved: FP32, BF16 or INT8 */
    const mact_ops *ops;             /* the kernels chosen at load; the packs are in their layout */
    mact_precision kprec;            /* what the kernels compute the precision as (mact_kernels_effective_precision) */
    unsigned int8_parts;             /* MACT_PART_* quantized when kprec is INT8 (0 otherwise) */
    int pack_cache;                  /* MACT_PACK_CACHE_* of the load */
    mact_packed *packs;              /* descriptors the tensors' pk point to */
    void *packs_map;                 /* the packs' bytes: an anonymous mapping or the mapped cache file */
    size_t packs_map_len, packed_bytes;
    int64_t max_k;                   /* the largest K (columns) of the weights the stages multiply by */
    int64_t max_n;                   /* ... and the largest N (rows) */
    /* mact_model_describe's component table, computed at load (describe itself only formats) */
    int64_t desc_params[6], desc_bytes[6], desc_dtype_bytes[3];
};

/* What happened to the pack cache at load (mact_model_info.pack_cache). */
enum { MACT_PACK_CACHE_NONE = 0, MACT_PACK_CACHE_LOADED = 1, MACT_PACK_CACHE_WRITTEN = 2, MACT_PACK_CACHE_FAILED = 3 };

/* model.c: f(tensor, lm, ctx) for every 2-D weight the stages multiply by (the tensor table's matrices, not
 * the embeddings); lm = 1 for the LLM's and the action expert's (the weights INT8 mode quantizes). */
void mact_model_for_each_weight(struct mact_model *m, void (*f)(mact_tensor *t, int part, void *ctx), void *ctx);
/* packs.c: pack every weight for m->ops / m->kprec (or map them from cache_dir's pack cache; cache problems
 * never fail the call, *cache_status says what happened, and the model records it: mact_model_info.pack_cache),
 * splitting the work over pool; 0 or an error. */
int mact_model_pack(struct mact_model *m, mact_pool *pool, const char *cache_dir, int *cache_status, char *err,
                    size_t errlen);
void mact_model_unpack(struct mact_model *m);

/* model.c */
void *mact_model_own(struct mact_model *m, size_t bytes);  /* zeroed, freed with the model */


/* config.c */
int mact_config_parse(const char *json_text, mact_config *cfg, char *err, size_t errlen);

int mact_session_fail(struct mact_session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
