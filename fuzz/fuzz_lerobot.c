/* libFuzzer target for what mact reads of a LeRobot policy folder and the hub cache (model/lerobot.c, io/hfcache.c).
 * Byte 0 picks the parser, the rest is its input:
 *   0: config.json (mact_lerobot_is_policy_config, mact_lerobot_config_parse)
 *   1, 2: policy_preprocessor.json / policy_postprocessor.json (mact_lerobot_pipeline_parse)
 *   3: an HF folder's processor file, pre or post by byte 1 (mact_lerobot_frame_parse)
 *   4: a normalizer state file, a whole safetensors image (mact_st_parse_header + mact_lerobot_stats_read; byte 1
 *      picks the state and action modes)
 *   5: a repo id (mact_hf_split_ref, mact_hf_is_repo_ref) and a refs/ file (mact_hf_parse_ref)
 * Accepted inputs must be inside the structs' bounds, strings terminated, masks 0 or 1; an accepted repo id
 * splits back to itself and holds no path escape; an accepted ref is 40 lowercase hex digits. */
#include <ctype.h>
#include "io/hfcache.h"
#include "model/lerobot.h"
#include "fuzz_common.h"

static void check_str(const char *s, size_t cap)
{
    if (!memchr(s, 0, cap)) __builtin_trap();
}

/* the values are the checkpoint's, any float; only the count is bounded */
static void check_frame(const mact_joint_frame *j)
{
    if (j->n < 0 || j->n > MACT_NORM_MAX_DIM) __builtin_trap();
}

static void check_stats(const mact_feature_stats *f)
{
    if (f->dim < 0 || f->dim > MACT_NORM_MAX_DIM || f->mode < 0 || f->mode > MACT_NORM_NONE) __builtin_trap();
    for (int i = 0; i < f->dim; i++)
        if (f->mask[i] > 1) __builtin_trap();
}

static void fuzz_config(const char *s, size_t n)
{
    static mact_lr_config c;
    char err[512] = "";
    (void)mact_lerobot_is_policy_config(s, n);
    int rc = mact_lerobot_config_parse(s, n, &c, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc) return;
    check_str(c.checkpoint_path, sizeof c.checkpoint_path);
    check_str(c.norm_tag, sizeof c.norm_tag);
    check_str(c.setup_type, sizeof c.setup_type);
    check_str(c.control_mode, sizeof c.control_mode);
    if (c.n_image_keys < 0 || c.n_image_keys > MACT_LR_MAX_CAMERAS || c.n_visual < 0 ||
        c.n_visual > MACT_LR_MAX_CAMERAS || c.n_state_names > MACT_NORM_MAX_DIM ||
        c.n_action_names > MACT_NORM_MAX_DIM || c.chunk_size < 0 || c.n_action_steps < 0 ||
        c.num_inference_steps < 0 || c.state_mode < 0 || c.state_mode > MACT_NORM_NONE || c.action_mode < 0 ||
        c.action_mode > MACT_NORM_NONE)
        __builtin_trap();
    for (int i = 0; i < c.n_image_keys; i++) check_str(c.image_keys[i], MACT_NORM_MAX_KEY);
    for (int i = 0; i < c.n_visual; i++) check_str(c.visual_keys[i], MACT_NORM_MAX_KEY);
    check_frame(&c.joints);
}

static void fuzz_pipeline(const char *s, size_t n, int post)
{
    static mact_lr_pipeline p;
    char err[512] = "";
    int rc = mact_lerobot_pipeline_parse(s, n, post ? "policy_postprocessor.json" : "policy_preprocessor.json", post,
                                         &p, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc) return;
    if (p.post != post || p.n_image_keys < 0 || p.n_image_keys > MACT_LR_MAX_CAMERAS || p.n_renames < 0 ||
        p.n_renames > MACT_LR_MAX_RENAMES || p.clamp_n_state < 0 || p.clamp_n_state > MACT_NORM_MAX_DIM)
        __builtin_trap();
    check_frame(&p.frame);
    check_str(p.state_file, sizeof p.state_file);
    if (p.has_norm && (!p.state_file[0] || strchr(p.state_file, '/'))) __builtin_trap();  /* a plain name in the folder */
    for (int i = 0; i < p.n_renames; i++) {
        check_str(p.rename_from[i], MACT_NORM_MAX_KEY);
        check_str(p.rename_to[i], MACT_NORM_MAX_KEY);
    }
    for (int i = 0; i < p.clamp_n_state; i++)
        if (p.clamp_state_mask[i] > 1) __builtin_trap();
}

static void fuzz_frame(const char *s, size_t n, int post)
{
    mact_joint_frame j;
    int found = -1;
    char err[512] = "";
    int rc = mact_lerobot_frame_parse(s, n, "processor.json", post, &j, &found, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc && (found < 0 || found > 1 || (!found && j.n))) __builtin_trap();
    if (!rc) check_frame(&j);
}

static void fuzz_stats(const uint8_t *d, size_t n, int modes)
{
    mact_st *st = NULL;
    char err[512] = "";
    if (mact_st_parse_header(d, n, "fuzz", &st, err, sizeof err)) return;
    mact_feature_stats s, a;
    int rc = mact_lerobot_stats_read(st, "stats.safetensors", modes % 5, (modes / 5) % 5, &s, &a, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) {
        check_stats(&s);
        check_stats(&a);
    }
    mact_st_close(st);
}

static void fuzz_hf(const char *s, size_t n)
{
    char repo[MACT_HF_MAX_REPO + 1], rev[MACT_HF_MAX_REVISION + 1], err[512] = "", commit[41];
    int rc = mact_hf_split_ref(s, repo, sizeof repo, rev, sizeof rev, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if ((rc == 0) != (mact_hf_is_repo_ref(s) == 1)) __builtin_trap();
    if (!rc) {
        char back[sizeof repo + sizeof rev + 1];
        snprintf(back, sizeof back, "%s%s%s", repo, rev[0] ? "@" : "", rev);
        if (strcmp(back, s) || strstr(repo, "..") || strstr(repo, "--") || repo[0] == '/' || strstr(rev, "/../") ||
            !strcmp(rev, "..") || !strncmp(rev, "../", 3))
            __builtin_trap();
    }
    rc = mact_hf_parse_ref(s, n, commit, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) {
        if (strlen(commit) != 40) __builtin_trap();
        for (int i = 0; i < 40; i++)
            if (!isxdigit((unsigned char)commit[i]) || isupper((unsigned char)commit[i])) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    int sel = data[0] % 6, arg = data[1];
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    if (sel == 3 || sel == 4) d++, n--;
    char *s = fuzz_cstr(d, n);
    switch (sel) {
    case 0: fuzz_config(s, n); break;
    case 1: case 2: fuzz_pipeline(s, n, sel - 1); break;
    case 3: fuzz_frame(s, n, arg & 1); break;
    case 4: fuzz_stats(d, n, arg); break;
    default: fuzz_hf(s, n); break;
    }
    free(s);
    return 0;
}
