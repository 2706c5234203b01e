/* ViT depth pruning of a MolmoAct2 checkpoint (`mact prune`, `mact prune-analyze`; docs/compression.md).
 *
 * Teacher geometry: vit_config.num_hidden_layers (the configured depth, default 27), the ViT blocks the
 * checkpoint stores (upstream truncates the tower after the deepest tap: 27 configured, 25 stored) and the
 * adapter taps adapter_config.vit_layers (default [-3, -9]); negative taps count from the configured depth,
 * as upstream's MolmoAct2VisionBackbone does.
 *
 * Surgery: student block j = teacher block keep[j]; vit_config.num_hidden_layers = len(keep); the taps move
 * to the student blocks holding the same teacher layers (or are given); every other tensor and file is copied
 * byte for byte. Library code: returns 0 or a negative MACT_ERR_* with the reason in err. */
#ifndef MACT_DEV_PRUNE_H
#define MACT_DEV_PRUNE_H
#include <stddef.h>
#include <stdio.h>

#include "mact_compress.h"

typedef struct {
    int cfg_layers;                     /* vit_config.num_hidden_layers (27 when absent) */
    int stored;                         /* ViT blocks the checkpoint stores (0..stored-1) */
    int n_taps;
    int taps_raw[MACT_PRUNE_MAX_TAPS];  /* adapter_config.vit_layers as written ([-3, -9] when absent) */
    int taps_abs[MACT_PRUNE_MAX_TAPS];  /* resolved against cfg_layers */
} mact_vit_geometry;

/* Reads model_dir's config.json and its safetensors names (any prefix: HF, LeRobot, PEFT). */
int mact_prune_geometry(const char *model_dir, mact_vit_geometry *g, char *err, size_t errlen);

/* keep: each in 0..stored-1, no repeat, strictly increasing, 1..MACT_PRUNE_MAX_BLOCKS entries. */
int mact_prune_check_keep(const mact_vit_geometry *g, const int *keep, int n_keep, char *err, size_t errlen);

/* The student's taps for keep. user (n_user entries, NULL = default) are the student's vit_layers as they go
 * into config.json (negative: from len(keep)); by default each teacher tap moves to the student block that
 * holds its teacher layer, keeping its sign convention, and a keep-set without that layer is refused.
 * The deepest tap must read the last kept block (upstream builds the tower only up to its deepest tap).
 * Out: raw[] (config.json values), sblock[] (student blocks), lands[] (the teacher layer each lands on). */
int mact_prune_taps(const mact_vit_geometry *g, const int *keep, int n_keep, const int *user, int n_user, int *raw,
                    int *sblock, int *lands, char *err, size_t errlen);

/* mact_prune: include/mact_compress.h */

/* config.json text with vit_config.num_hidden_layers = layers and adapter_config.vit_layers = taps[n_taps],
 * every other byte unchanged (a number is rewritten only when its value changes). malloc'd; NULL + err. */
char *mact_prune_edit_config(const char *json, int layers, const int *taps, int n_taps, char *err, size_t errlen);

/* A ViT block tensor's name with its block renumbered: 1 (renamed into out), 0 (not a ViT block tensor: out =
 * name), -1 (its block is dropped). student_of[teacher block] = student block or -1, over n blocks. */
int mact_prune_map_name(const char *name, const int *student_of, int n, char *out, size_t outlen);
#endif
