#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mact.h"
#include "base/err.h"
#include "base/file.h"
#include "io/hfcache.h"

/* one part of a repo id: huggingface_hub's [\w\-.]+ without a leading or trailing '-' or '.' */
static int repo_part(const char *s, size_t n)
{
    if (!n || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return 0;
    return 1;
}

/* a revision: a branch, tag or commit; may hold '/' (refs/pr/1) but no empty, "." or ".." component */
static int revision_ok(const char *r)
{
    size_t n = strlen(r);
    if (!n || n > MACT_HF_MAX_REVISION || r[0] == '/' || r[n - 1] == '/') return 0;
    for (const char *p = r; *p;) {
        size_t l = strcspn(p, "/");
        if (!l || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.')) return 0;
        for (size_t i = 0; i < l; i++)
            if ((unsigned char)p[i] < 0x21 || p[i] == '\\' || p[i] == 0x7f) return 0;
        p += l + (p[l] == '/');
    }
    return 1;
}

int mact_hf_split_ref(const char *s, char *repo, size_t rcap, char *rev, size_t vcap, char *err, size_t el)
{
    const char *at = strchr(s, '@'), *slash = strchr(s, '/');
    size_t rl = at ? (size_t)(at - s) : strlen(s);
    if (!slash || slash > s + rl || memchr(slash + 1, '/', rl - (size_t)(slash + 1 - s)))
        return mact_errf(err, el, MACT_ERR_INPUT, "'%s' is not a repo id of the form ORG/NAME[@REVISION]", s);
    if (rl > MACT_HF_MAX_REPO || rl >= rcap)
        return mact_errf(err, el, MACT_ERR_INPUT, "repo id '%.*s' is longer than %d characters", (int)rl, s,
                         MACT_HF_MAX_REPO);
    if (!repo_part(s, (size_t)(slash - s)) || !repo_part(slash + 1, rl - (size_t)(slash + 1 - s)) ||
        memmem(s, rl, "--", 2) || memmem(s, rl, "..", 2))
        return mact_errf(err, el, MACT_ERR_INPUT, "'%.*s' is not a valid repo id (letters, digits, '-', '_' and "
                         "'.', no '--' or '..', as Hugging Face names repos)", (int)rl, s);
    memcpy(repo, s, rl);
    repo[rl] = 0;
    rev[0] = 0;
    if (at) {
        if (!revision_ok(at + 1) || strlen(at + 1) >= vcap)
            return mact_errf(err, el, MACT_ERR_INPUT, "revision '%s' of repo id '%s' is not a branch, tag or commit "
                             "name", at + 1, repo);
        strcpy(rev, at + 1);
    }
    return 0;
}

int mact_hf_is_repo_ref(const char *s)
{
    char repo[MACT_HF_MAX_REPO + 1], rev[MACT_HF_MAX_REVISION + 1];
    return s && !mact_hf_split_ref(s, repo, sizeof repo, rev, sizeof rev, NULL, 0);
}

int mact_hf_cache_root(char *out, size_t cap, const char **how)
{
    const char *v;
    int n;
    if ((v = getenv("HF_HUB_CACHE")) && *v) { *how = "HF_HUB_CACHE"; n = snprintf(out, cap, "%s", v); }
    else if ((v = getenv("HF_HOME")) && *v) { *how = "HF_HOME"; n = snprintf(out, cap, "%s/hub", v); }
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) { *how = "XDG_CACHE_HOME"; n = snprintf(out, cap, "%s/huggingface/hub", v); }
    else {
        *how = "HOME";
        v = getenv("HOME");
        n = snprintf(out, cap, "%s/.cache/huggingface/hub", v && *v ? v : ".");
    }
    return n < 0 || (size_t)n >= cap ? MACT_ERR_INPUT : 0;
}

int mact_hf_parse_ref(const char *buf, size_t len, char commit[41], char *err, size_t el)
{
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) len--;
    int ok = len == 40;
    for (size_t i = 0; ok && i < 40; i++) ok = isxdigit((unsigned char)buf[i]) && !isupper((unsigned char)buf[i]);
    if (!ok) return mact_errf(err, el, MACT_ERR_FORMAT, "not a commit hash (40 lowercase hex digits)");
    memcpy(commit, buf, 40);
    commit[40] = 0;
    return 0;
}

/* "a/b/../c" -> "a/c" in place (lexical: no file system access); a ".." with nothing left to drop stays */
static void clean_path(char *p)
{
    char *const start = p + (p[0] == '/');
    char *out = start, *seg = start;
    size_t kept = 0;  /* components in out other than ".." */
    while (*seg) {
        const size_t l = strcspn(seg, "/");
        const int last = !seg[l], dotdot = l == 2 && seg[0] == '.' && seg[1] == '.';
        char *next = seg + l + !last;
        if (l == 0 || (l == 1 && seg[0] == '.')) {
        } else if (dotdot && kept) {
            out--;
            while (out > start && out[-1] != '/') out--;
            kept--;
        } else {
            memmove(out, seg, l);
            out += l;
            *out++ = '/';
            kept += !dotdot;
        }
        if (last) break;
        seg = next;
    }
    if (out > start) out--;
    *out = 0;
}

static int inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && path[n] == '/';
}

/* every symlink below dir (depth-limited) must point inside repo (lexically, and where it resolves, for real) */
static int check_links(const char *dir, const char *repo, const char *repo_real, int depth, char *err, size_t el)
{
    if (depth > 16) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: folders nested too deeply", dir);
    DIR *d = opendir(dir);
    if (!d) return mact_errf(err, el, MACT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[PATH_MAX], t[PATH_MAX], full[2 * PATH_MAX + 2], real[PATH_MAX];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || lstat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) { rc = check_links(p, repo, repo_real, depth + 1, err, el); continue; }
        if (!S_ISLNK(st.st_mode)) continue;
        ssize_t n = readlink(p, t, sizeof t - 1);
        if (n < 0) continue;
        t[n] = 0;
        if (t[0] == '/') snprintf(full, sizeof full, "%s", t);
        else snprintf(full, sizeof full, "%s/%s", dir, t);
        clean_path(full);
        if (!inside(full, repo) || (realpath(p, real) && !inside(real, repo_real)))
            rc = mact_errf(err, el, MACT_ERR_FORMAT, "%s is a symlink to %s, outside the repo's cache folder %s: "
                           "refusing to read it", p, t, repo);
    }
    closedir(d);
    return rc;
}

int mact_hf_resolve(const char *repo, const char *revision, char *out, size_t cap, char commit[41], char *err,
                    size_t el)
{
    char root[PATH_MAX], rdir[PATH_MAX], p[PATH_MAX + 512], rev[MACT_HF_MAX_REVISION + 1];
    const char *how;
    if (mact_hf_cache_root(root, sizeof root, &how))
        return mact_errf(err, el, MACT_ERR_INPUT, "the Hugging Face cache path ($%s) is too long", how);
    snprintf(rev, sizeof rev, "%s", revision && *revision ? revision : "main");
    if (!revision_ok(rev)) return mact_errf(err, el, MACT_ERR_INPUT, "revision '%s' is not a branch, tag or commit", rev);
    char folder[2 * MACT_HF_MAX_REPO];
    snprintf(folder, sizeof folder, "models--%s", repo);
    for (char *c = folder; *c; c++)
        if (*c == '/') { memmove(c + 2, c + 1, strlen(c + 1) + 1); c[0] = c[1] = '-'; }
    if (snprintf(rdir, sizeof rdir, "%s/%s", root, folder) >= (int)sizeof rdir)
        return mact_errf(err, el, MACT_ERR_INPUT, "the Hugging Face cache path is too long");
    char dl[512];
    snprintf(dl, sizeof dl, "download it with `huggingface-cli download %s%s%s` (mact never downloads)", repo,
             revision && *revision ? " --revision " : "", revision && *revision ? revision : "");
    struct stat st;
    if (stat(rdir, &st) || !S_ISDIR(st.st_mode))
        return mact_errf(err, el, MACT_ERR_IO, "%s is not in the Hugging Face cache: no %s (the cache is $%s%s); %s",
                         repo, rdir, how, !strcmp(how, "HOME") ? "/.cache/huggingface/hub: set HF_HUB_CACHE or "
                         "HF_HOME to use another" : "", dl);
    /* a ref names the commit; a full commit hash names itself */
    char *txt = NULL, e2[512];
    size_t len = 0;
    snprintf(p, sizeof p, "%s/refs/%s", rdir, rev);
    if (!mact_file_read_all(p, 4096, &txt, &len, e2, sizeof e2)) {
        int rc = mact_hf_parse_ref(txt, len, commit, e2, sizeof e2);
        free(txt);
        if (rc) return mact_errf(err, el, MACT_ERR_FORMAT, "%s: %s", p, e2);
    } else if (strlen(rev) == 40 && !mact_hf_parse_ref(rev, 40, commit, NULL, 0)) {
    } else
        return mact_errf(err, el, MACT_ERR_IO, "%s has no revision '%s' in the cache (no %s, and it is not a full "
                         "commit hash); %s", repo, rev, p, dl);
    if (snprintf(out, cap, "%s/snapshots/%s", rdir, commit) >= (int)cap)
        return mact_errf(err, el, MACT_ERR_INPUT, "the Hugging Face cache path is too long");
    if (stat(out, &st) || !S_ISDIR(st.st_mode))
        return mact_errf(err, el, MACT_ERR_IO, "%s@%s: the cache has no snapshot %s (revision '%s' names commit %s); "
                         "%s", repo, rev, out, rev, commit, dl);
    char real[PATH_MAX];
    if (!realpath(rdir, real)) return mact_errf(err, el, MACT_ERR_IO, "%s: %s", rdir, strerror(errno));
    return check_links(out, rdir, real, 0, err, el);
}
