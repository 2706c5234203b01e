/* The Hugging Face hub cache, read offline (docs/spec/molmoact2.md 2): a repo id ORG/NAME[@REVISION] -> the
 * snapshot folder `huggingface-cli download` filled. The layout is huggingface_hub's:
 *   ROOT/models--ORG--NAME/refs/REVISION        a file holding the commit (40 hex digits)
 *   ROOT/models--ORG--NAME/snapshots/COMMIT/... the repo's files, symlinks into ../../blobs/
 *   ROOT/models--ORG--NAME/blobs/SHA             the bytes
 * with ROOT = $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub (huggingface_hub's order). Nothing here touches the network. */
#ifndef MACT_IO_HFCACHE_H
#define MACT_IO_HFCACHE_H
#include <stddef.h>

#define MACT_HF_MAX_REPO 96      /* huggingface_hub's limit on a repo id */
#define MACT_HF_MAX_REVISION 255

/* 1 when s has a repo id's form: ORG/NAME with optional @REVISION (letters, digits, '-', '_', '.'; no "--" or
 * ".."; a revision without ".." components). It says nothing about the cache or about local folders. */
int mact_hf_is_repo_ref(const char *s);

/* "ORG/NAME[@REV]" -> repo and revision ("" when none given): 0, or MACT_ERR_INPUT naming what is wrong. */
int mact_hf_split_ref(const char *s, char *repo, size_t repo_cap, char *rev, size_t rev_cap, char *err,
                      size_t errlen);

/* The cache root and which variable chose it ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME" or "HOME"). */
int mact_hf_cache_root(char *out, size_t cap, const char **how);

/* A refs/ file's bytes -> the commit it names (40 lowercase hex digits, an optional trailing newline):
 * 0, or MACT_ERR_FORMAT. */
int mact_hf_parse_ref(const char *buf, size_t len, char commit[41], char *err, size_t errlen);

/* repo ("ORG/NAME") at revision (NULL or "": "main"; a branch or tag named in refs/, or a full commit) -> the
 * snapshot folder in out and its commit. Every symlink in the snapshot must stay inside the repo's cache folder
 * (a link that leaves it is refused by name). A repo or revision absent from the cache is MACT_ERR_IO with
 * where mact looked and the command that downloads it. */
int mact_hf_resolve(const char *repo, const char *revision, char *out, size_t cap, char commit[41], char *err,
                    size_t errlen);
#endif
