/* A LeRobot MolmoAct2 policy folder (docs/spec/molmoact2.md 2, 4.3), what `lerobot-train` writes and the seed's
 * LIBERO checkpoint is: config.json is LeRobot's policy config (a draccus dump, "type": "molmoact2") naming the
 * base HF checkpoint in checkpoint_path; model.safetensors holds the policy's weights; policy_preprocessor.json and
 * policy_postprocessor.json list the processor steps LeRobot applies, their state files the statistics it
 * normalises with. This module reads those files (parsers of bytes, fuzzed: fuzz/fuzz_lerobot.c) and turns them
 * into norm tags with LeRobot's arithmetic (io/normstats.h). */
#ifndef MACT_MODEL_LEROBOT_H
#define MACT_MODEL_LEROBOT_H
#include <stddef.h>
#include "io/normstats.h"
#include "io/safetensors.h"

#define MACT_LR_MAX_CAMERAS 16
#define MACT_LR_MAX_RENAMES 32
#define MACT_LR_POLICY_TAG "policy"   /* the name of the tag a policy's own processors define */

/* The fields of LeRobot's MolmoAct2Config that inference reads (training-only fields are ignored). */
typedef struct {
    char checkpoint_path[4096], checkpoint_revision[256];   /* the base; revision "" when null */
    char norm_tag[MACT_NORM_MAX_NAME], norm_stats_path[4096];
    int chunk_size, n_action_steps, num_inference_steps;    /* 0: absent or null */
    int n_image_keys;
    char image_keys[MACT_LR_MAX_CAMERAS][MACT_NORM_MAX_KEY];
    int n_visual;                                           /* input_features of type VISUAL, in the file's order */
    char visual_keys[MACT_LR_MAX_CAMERAS][MACT_NORM_MAX_KEY];
    int state_dim, action_dim;                              /* input/output_features shapes; 0: absent */
    char setup_type[512], control_mode[256];
    int normalize_gripper;
    int state_mode, action_mode;                            /* normalization_mapping STATE / ACTION: MACT_NORM_* */
    int n_state_names, n_action_names;                      /* dataset_feature_names (0: absent) */
    char state_names[MACT_NORM_MAX_DIM][128], action_names[MACT_NORM_MAX_DIM][128];
    int use_sampler;                                        /* -1: absent; the fork's use_grid_token_sampler */
    int sampler_k;                                          /* 0: absent; grid_token_sampler_num_tokens */
    char train_mode_vlm[16];
    int lora_rank;
    double lora_alpha;
    mact_joint_frame joints;                                /* joint_signs / joint_offsets; n 0: null */
    int num_state_tokens;                                   /* 0: absent */
    int precision;                                          /* dtype / model_dtype: MACT_PRECISION_*, 0 absent */
    int action_mode_both;                                   /* action_mode "both" (else continuous): the encoder mask */
    int expected_max_action_dim;                            /* 0: absent */
    int rtc;                                                /* rtc_config given */
    int rtc_execution_horizon, rtc_schedule, rtc_trained;   /* rtc_schedule: MACT_RTC_* */
    float rtc_max_guidance_weight;
} mact_lr_config;

/* One processor pipeline (policy_preprocessor.json or policy_postprocessor.json), as MolmoAct2's factory orders
 * its steps; any other step or order is refused by name. */
typedef struct {
    int post;                                 /* 0: preprocessor, 1: postprocessor */
    int has_frame;                            /* the frame step is present (its values may be null: n 0) */
    mact_joint_frame frame;
    int has_norm;                             /* the (masked) normalizer / unnormalizer */
    char state_file[256];                     /* its state file, a plain name in the folder */
    float eps;
    int state_mode, action_mode;              /* its norm_map for STATE and ACTION */
    int has_clamp;                            /* pre: molmoact2_clamp_normalized; post: molmoact2_clamp_action */
    int clamp_n_state;                        /* pre: the clamp step's state mask (0: none, all dims clamp) */
    uint8_t clamp_state_mask[MACT_NORM_MAX_DIM];
    int has_pack;                             /* pre: molmoact2_pack_inputs */
    int n_image_keys;
    char image_keys[MACT_LR_MAX_CAMERAS][MACT_NORM_MAX_KEY];
    char setup_type[512], control_mode[256];
    char checkpoint_path[4096];
    int num_state_tokens, chunk_size, env_action_dim;
    int n_renames;                            /* rename_observations_processor's rename_map */
    char rename_from[MACT_LR_MAX_RENAMES][MACT_NORM_MAX_KEY], rename_to[MACT_LR_MAX_RENAMES][MACT_NORM_MAX_KEY];
} mact_lr_pipeline;

/* config.json's text: 1 when it is a LeRobot policy config (a "type" field), 0 when it is not (an HF config). */
int mact_lerobot_is_policy_config(const char *json, size_t len);
/* LeRobot's MolmoAct2Config -> c (zeroed first): 0, or an error naming the field; a type other than molmoact2,
 * discrete inference, joint values of unequal length or only one of them are refused. */
int mact_lerobot_config_parse(const char *json, size_t len, mact_lr_config *c, char *err, size_t errlen);
/* A processor pipeline's JSON (file names it in messages) -> p. */
int mact_lerobot_pipeline_parse(const char *json, size_t len, const char *file, int post, mact_lr_pipeline *p,
                                char *err, size_t errlen);
/* A normalizer state file (FEATURE.STAT tensors) -> the state and action statistics for the modes given (MACT_NORM_*;
 * a statistic the mode needs and the file lacks is an error naming both); masks from FEATURE.mask (BOOL, or any
 * numeric type: non-zero is true), all true when absent. */
int mact_lerobot_stats_read(const mact_st *st, const char *file, int state_mode, int action_mode,
                            mact_feature_stats *state, mact_feature_stats *action, char *err, size_t errlen);

/* An HF-layout folder's policy_preprocessor.json (post 0) or policy_postprocessor.json (post 1): the values of its
 * joint-frame step (*found 0 without one; j->n 0 when its values are null, LeRobot's default: no transform). */
int mact_lerobot_frame_parse(const char *json, size_t len, const char *file, int post, mact_joint_frame *j, int *found,
                             char *err, size_t errlen);
/* The policy's norm tags into ns: with processors, one tag named MACT_LR_POLICY_TAG from them (their statistics,
 * masks, joint frames, cameras, prompt fields and horizon); without, the base's norm stats (stats_path: the file)
 * with the config's fields over each tag, as LeRobot's make_molmoact2_pre_post_processors builds them. dir holds the
 * processors; *pre receives the preprocessor (has_pack 0 without one: its rename_map, num_state_tokens); src_out
 * names where the statistics came from (for mact inspect). */
int mact_lerobot_tags(const char *dir, const mact_lr_config *c, const char *stats_path, mact_norm_stats *ns,
                      mact_lr_pipeline *pre, char *src_out, size_t src_cap, char *err, size_t errlen);
#endif
