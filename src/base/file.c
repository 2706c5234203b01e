#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mact.h"
#include "base/err.h"

static int ferr(char *err, size_t el, int code, const char *path, const char *what)
{
    if (err && el) snprintf(err, el, "%s: %s", path, what);
    return code;
}

static const char *kind(mode_t m)
{
    return S_ISDIR(m) ? "is a directory, not a regular file" : S_ISFIFO(m) ? "is a FIFO, not a regular file"
           : S_ISCHR(m) || S_ISBLK(m) ? "is a device, not a regular file" : S_ISSOCK(m) ? "is a socket, not a regular file"
           : "is not a regular file";
}

int mact_file_check_regular(const char *path, char *err, size_t el)
{
    struct stat st;
    if (!path) return ferr(err, el, MACT_ERR_IO, "(null)", "no path");
    if (stat(path, &st) != 0) {
        char what[160];
        snprintf(what, sizeof what, "cannot open: %s", strerror(errno));
        return ferr(err, el, MACT_ERR_IO, path, what);
    }
    if (!S_ISREG(st.st_mode)) return ferr(err, el, MACT_ERR_IO, path, kind(st.st_mode));
    return 0;
}

int mact_file_absent(const char *path)
{
    struct stat st;
    return lstat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

int mact_file_open_regular(const char *path, char *err, size_t el)
{
    int rc = mact_file_check_regular(path, err, el);
    if (rc) return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        char what[160];
        snprintf(what, sizeof what, "cannot open: %s", strerror(errno));
        return ferr(err, el, MACT_ERR_IO, path, what);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ferr(err, el, MACT_ERR_IO, path, "is not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int mact_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t el)
{
    *out = NULL;
    if (len) *len = 0;
    int fd = mact_file_open_regular(path, err, el);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); return ferr(err, el, MACT_ERR_IO, path, strerror(errno)); }
    if ((unsigned long long)st.st_size > max_bytes) {
        close(fd);
        if (err && el)
            snprintf(err, el, "%s: %lld bytes exceed the limit of %zu bytes for this file", path, (long long)st.st_size,
                     max_bytes);
        return MACT_ERR_INPUT;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *b = malloc(n + 1);
    if (!b) { close(fd); return ferr(err, el, MACT_ERR_NOMEM, path, "out of memory"); }
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            free(b);
            close(fd);
            return ferr(err, el, MACT_ERR_IO, path, k < 0 ? strerror(errno) : "file shrank while being read");
        }
        got += (size_t)k;
    }
    close(fd);
    b[n] = 0;
    *out = b;
    if (len) *len = n;
    return 0;
}

int mact_file_read_text(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t el)
{
    size_t n = 0;
    int rc = mact_file_read_all(path, max_bytes, out, &n, err, el);
    if (rc) return rc;
    const char *z = memchr(*out, 0, n);
    if (z) {
        if (err && el) snprintf(err, el, "%s: contains a NUL byte at offset %zu (not a text file)", path, (size_t)(z - *out));
        free(*out);
        *out = NULL;
        return MACT_ERR_FORMAT;
    }
    if (len) *len = n;
    return 0;
}

int mact_file_tmp_name(const char *path, char *tmp, size_t cap)
{
    /* created here (mkstemp: a unique name, mode 0600 widened to 0644), so concurrent writers never share one */
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    int k = snprintf(tmp, cap, "%.*s.%s.tmp.XXXXXX", dl, path, slash ? slash + 1 : path);
    if (k < 0 || (size_t)k >= cap) return -1;
    int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    (void)fchmod(fd, 0644);
    close(fd);
    return 0;
}

int mact_file_commit(const char *tmp, const char *path, int ok, char *err, size_t el)
{
    if (!ok) { unlink(tmp); return 0; }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ferr(err, el, MACT_ERR_IO, path, strerror(e));
    }
    return 0;
}

int mact_file_write_atomic(const char *path, const void *data, size_t len, char *err, size_t el)
{
    char tmp[4352];
    if (mact_file_tmp_name(path, tmp, sizeof tmp)) return ferr(err, el, MACT_ERR_IO, path, strerror(errno ? errno : ENAMETOOLONG));
    int fd = open(tmp, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) { int e = errno; unlink(tmp); return ferr(err, el, MACT_ERR_IO, path, strerror(e)); }
    const char *p = data;
    size_t done = 0;
    int ok = 1;
    while (done < len) {
        ssize_t k = write(fd, p + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { ok = 0; break; }
        done += (size_t)k;
    }
    int e = errno;
    if (close(fd) != 0) ok = 0;
    if (!ok) { unlink(tmp); return ferr(err, el, MACT_ERR_IO, path, strerror(e ? e : EIO)); }
    return mact_file_commit(tmp, path, 1, err, el);
}

int mact_file_mkdirs(const char *path, char *err, size_t el)
{
    char b[4096];
    if (!path || !path[0] || snprintf(b, sizeof b, "%s", path) >= (int)sizeof b)
        return mact_errf(err, el, MACT_ERR_IO, "cannot create '%s': no path, or too long", path ? path : "");
    for (char *q = b + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            if (mkdir(b, 0777) && errno != EEXIST) return mact_errf(err, el, MACT_ERR_IO, "cannot create %s: %s", b, strerror(errno));
            *q = '/';
        }
    if (mkdir(b, 0777) && errno != EEXIST) return mact_errf(err, el, MACT_ERR_IO, "cannot create %s: %s", b, strerror(errno));
    return 0;
}
