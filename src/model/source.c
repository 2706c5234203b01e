#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "io/hfcache.h"
#include "model/source.h"

#define CONFIG_MAX ((size_t)64 << 20)

int mact_source_folder(const char *ref, const char *revision, const char *what, char *dir, size_t cap,
                       char commit[41], char *err, size_t el)
{
    struct stat st;
    commit[0] = 0;
    if (!*ref) return mact_errf(err, el, MACT_ERR_INPUT, "%s is empty", what);
    if (!stat(ref, &st)) {
        if (!S_ISDIR(st.st_mode))
            return mact_errf(err, el, MACT_ERR_IO, "%s %s is not a folder (a checkpoint is a folder, or a Hugging Face "
                             "repo id ORG/NAME)", what, ref);
        if (revision && *revision)
            return mact_errf(err, el, MACT_ERR_INPUT, "%s %s is a local folder but a revision '%s' is given: a revision "
                             "selects a hub snapshot", what, ref, revision);
        if (snprintf(dir, cap, "%s", ref) >= (int)cap) return mact_errf(err, el, MACT_ERR_INPUT, "%s: path too long", what);
        return 0;
    }
    if (!mact_hf_is_repo_ref(ref))
        return mact_errf(err, el, MACT_ERR_IO, "%s %s: no such folder (and not a Hugging Face repo id ORG/NAME[@REVISION])",
                         what, ref);
    char repo[MACT_HF_MAX_REPO + 1], rev[MACT_HF_MAX_REVISION + 1];
    int rc = mact_hf_split_ref(ref, repo, sizeof repo, rev, sizeof rev, err, el);
    if (rc) return rc;
    if (*rev && revision && *revision && strcmp(rev, revision))
        return mact_errf(err, el, MACT_ERR_INPUT, "%s %s names revision %s but checkpoint_revision is %s", what, ref, rev,
                         revision);
    return mact_hf_resolve(repo, *rev ? rev : revision, dir, cap, commit, err, el);
}

/* "config.json is missing": say what a checkpoint folder holds and list what this one holds */
static int not_a_checkpoint(const char *dir, const char *what, char *err, size_t el)
{
    char list[512] = "";
    size_t o = 0;
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n++ < 8 && o < sizeof list) o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", e->d_name);
    }
    if (d) closedir(d);
    if (n > 8 && o < sizeof list) snprintf(list + o, sizeof list - o, ", ... (%d entries)", n);
    return mact_errf(err, el, MACT_ERR_IO, "%s %s has no config.json (no such file), so it is not a MolmoAct2 checkpoint: mact reads an "
                     "HF-layout folder (config.json with vit_config, text_config, ...; model.safetensors; tokenizer.json; "
                     "norm_stats.json) or a LeRobot policy folder (config.json with \"type\": \"molmoact2\" and "
                     "checkpoint_path; model.safetensors; policy_preprocessor.json). It holds: %s", what, dir,
                     n ? list : "nothing");
}

static int read_config(const char *dir, const char *what, char **txt, char *err, size_t el)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (mact_file_absent(p)) return not_a_checkpoint(dir, what, err, el);
    return mact_file_read_text(p, CONFIG_MAX, txt, NULL, err, el);
}

int mact_source_open(const char *ref, mact_source *s, char **hf_config, char *err, size_t el)
{
    memset(s, 0, sizeof *s);
    *hf_config = NULL;
    if (snprintf(s->ref, sizeof s->ref, "%s", ref) >= (int)sizeof s->ref)
        return mact_errf(err, el, MACT_ERR_INPUT, "model path too long");
    int rc = mact_source_folder(ref, NULL, "model", s->dir, sizeof s->dir, s->commit, err, el);
    char *txt = NULL;
    if (rc || (rc = read_config(s->dir, "model", &txt, err, el))) return rc;
    if (!mact_lerobot_is_policy_config(txt, strlen(txt))) {
        snprintf(s->base_dir, sizeof s->base_dir, "%s", s->dir);
        *hf_config = txt;
        return 0;
    }
    /* a LeRobot policy: the HF config, tokenizer and norm stats are its base's */
    if (!(s->lr = malloc(sizeof *s->lr))) { free(txt); return mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); }
    char e2[2048];
    rc = mact_lerobot_config_parse(txt, strlen(txt), s->lr, e2, sizeof e2);
    free(txt);
    if (rc) return mact_errf(err, el, rc, "%s: %s", s->dir, e2);
    const mact_lr_config *c = s->lr;
    if ((rc = mact_source_folder(c->checkpoint_path, c->checkpoint_revision, "the LeRobot policy's base (checkpoint_path)",
                                 s->base_dir, sizeof s->base_dir, s->base_commit, e2, sizeof e2)))
        return mact_errf(err, el, rc, "%s is a LeRobot policy folder whose base checkpoint is not here: %s", s->dir, e2);
    if ((rc = read_config(s->base_dir, "the LeRobot policy's base (checkpoint_path)", &txt, err, el))) return rc;
    if (mact_lerobot_is_policy_config(txt, strlen(txt))) {
        free(txt);
        return mact_errf(err, el, MACT_ERR_MODEL, "%s: checkpoint_path %s is itself a LeRobot policy folder; it must name "
                         "the base HF checkpoint", s->dir, c->checkpoint_path);
    }
    *hf_config = txt;
    return 0;
}

void mact_source_free(mact_source *s)
{
    if (!s) return;
    free(s->lr);
    s->lr = NULL;
}
