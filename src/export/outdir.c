/* The all-or-nothing output folder of mact export: everything is written into a fresh sibling folder
 * DST.tmp.XXXXXX and renamed onto DST at the end (DST absent or an empty folder: rename(2) replaces an empty
 * directory atomically), so a failed export leaves no partial folder. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "export/export.h"

static int dir_is_empty(const char *p)
{
    DIR *d = opendir(p);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) { empty = 0; break; }
    closedir(d);
    return empty;
}

int mact_export_begin(const char *dst, char *tmp, size_t cap, char *err, size_t el)
{
    if (!dst || !*dst) { snprintf(err, el, "--out: no folder given"); return MACT_ERR_INPUT; }
    size_t l = strlen(dst);
    while (l > 1 && dst[l - 1] == '/') l--;
    if (l > 3900 || cap < l + 16) { snprintf(err, el, "--out: the folder's path is too long"); return MACT_ERR_INPUT; }
    struct stat st;
    if (lstat(dst, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) { snprintf(err, el, "%.900s exists and is not a folder: nothing written", dst); return MACT_ERR_IO; }
        if (!dir_is_empty(dst)) { snprintf(err, el, "%.900s exists and is not empty: nothing written", dst); return MACT_ERR_IO; }
    } else if (errno != ENOENT) {
        snprintf(err, el, "%.900s: %s", dst, strerror(errno));
        return MACT_ERR_IO;
    }
    snprintf(tmp, cap, "%.*s.tmp.XXXXXX", (int)l, dst);
    if (!mkdtemp(tmp)) {
        snprintf(err, el, "cannot create a folder beside %.900s: %s", dst, strerror(errno));
        return MACT_ERR_IO;
    }
    chmod(tmp, 0755);
    return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

void mact_export_abort(const char *tmp)
{
    if (tmp && *tmp) nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int mact_export_commit(const char *tmp, const char *dst, char *err, size_t el)
{
    if (rename(tmp, dst) == 0) return 0;
    snprintf(err, el, "cannot move %.400s to %.400s: %s", tmp, dst, strerror(errno));
    mact_export_abort(tmp);
    return MACT_ERR_IO;
}

int mact_export_split_ranges(int L, int S, int (*r)[2])
{
    if (S < 1) S = 1;
    if (S > L) S = L;
    for (int i = 0; i < S; i++) {
        /* Python's round() of i*L/S: half to even */
        for (int k = 0; k < 2; k++) {
            long num = (long)(i + k) * L, q = num / S, rem = num % S;
            long v = 2 * rem > S ? q + 1 : 2 * rem < S ? q : (q % 2 ? q + 1 : q);
            r[i][k] = (int)v;
        }
    }
    return S;
}

int mact_export_fault(const char *what, char *err, size_t el)
{
    const char *f = getenv("MACT_EXPORT_FAIL_AT");
    if (!f || strcmp(f, what)) return 0;
    snprintf(err, el, "%s: failure injected by MACT_EXPORT_FAIL_AT (a test of the all-or-nothing folder)", what);
    return 1;
}

#ifdef MACT_NO_ONNX
/* a build without protobuf-c (ONNX= , the cross builds' default) */
int mact_export_onnx(const mact_export_onnx_options *o, const char *out_dir, FILE *log, char *err, size_t errlen)
{
    (void)o; (void)out_dir; (void)log;
    snprintf(err, errlen, "this build has no ONNX export (built with ONNX= : no protobuf-c for the target)");
    return MACT_ERR_UNSUPPORTED;
}
#endif
