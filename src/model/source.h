/* Where a model's files come from (docs/spec/molmoact2.md 2): the caller names a folder or a Hugging Face hub repo
 * id (ORG/NAME[@REVISION], resolved offline in the hub cache: io/hfcache.h); the folder is an HF-layout checkpoint
 * or a LeRobot policy folder, whose base HF checkpoint (config, tokenizer, norm stats) is named by its
 * checkpoint_path, itself a folder or a repo id. */
#ifndef MACT_MODEL_SOURCE_H
#define MACT_MODEL_SOURCE_H
#include <stddef.h>
#include "model/lerobot.h"

typedef struct {
    char ref[4096];          /* what the caller named */
    char commit[41];         /* the hub commit when ref is a repo id ("" otherwise) */
    char dir[4096];          /* the folder of config.json and the weights */
    char base_dir[4096];     /* HF config.json, tokenizer.json, norm_stats.json: dir, or the LeRobot policy's base */
    char base_commit[41];    /* the base's hub commit, when checkpoint_path is a repo id */
    mact_lr_config *lr;      /* the LeRobot policy config (malloc'd), NULL for an HF folder */
} mact_source;

/* ref -> s (free with mact_source_free, also after an error) and the HF config.json's text (malloc'd) in *hf_config. */
int mact_source_open(const char *ref, mact_source *s, char **hf_config, char *err, size_t errlen);
void mact_source_free(mact_source *s);
/* a folder name or a repo id -> the folder (a hub snapshot for a repo id; a folder that exists wins over a repo id
 * of the same spelling); commit gets the hub commit or "". what names the reference in messages. */
int mact_source_folder(const char *ref, const char *revision, const char *what, char *dir, size_t cap, char commit[41],
                       char *err, size_t errlen);
#endif
