/* .npy / .npz writing (development code, libmact_export.a). See npz_write.h for the contract.
 *
 * The npy header is built here by hand, in numpy's own layout; the zip container is libzip's. */
#include "export/npz_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>
#include "model/model.h"

#define set_err(err, errlen, ...) ((void)mact_errf((err), (errlen), -1, __VA_ARGS__))

/* Holds any header this file builds: the dict of an 8-d shape is under 300 bytes. */
#define NPY_HDR_CAP 512

static int validate_for_write(const mact_array *a, const char *what, char *err, size_t errlen)
{
    char descr[8];
    if (mact_npy_descr(a->dtype, descr, sizeof descr) != 0) {
        set_err(err, errlen, "%s: dtype %s cannot be stored in npy%s", what, mact_dtype_name(a->dtype),
                a->dtype == MACT_BF16 ? " (numpy has no bfloat16; convert to float32 first)" : "");
        return -1;
    }
    return mact_array_check(a, what, err, errlen);
}

/* numpy's own layout: format 1.0, the dict literal padded with spaces so the data starts on a 64-byte
 * boundary (lets readers mmap aligned arrays), terminated by '\n'. `a` is validated. */
static size_t npy_build_header(const mact_array *a, uint8_t *out)
{
    char dict[NPY_HDR_CAP], sh[300], descr[8];
    mact_npy_descr(a->dtype, descr, sizeof descr);
    mact_npy_shape_str(sh, sizeof sh, a->ndim, a->shape);
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh);
    size_t total = 10 + (size_t)dl + 1; /* +1 for the newline */
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, (size_t)dl);
    memset(out + 10 + dl, ' ', padded - 10 - (size_t)dl - 1);
    out[padded - 1] = '\n';
    return padded;
}

/* ---------------------------------------------------------------- temporary file, renamed into place */

/* "<path>.tmp<pid>.<n>" next to path, so the rename stays on one file system. O_EXCL with mode 0666
 * (less the umask, as for a plain fopen of the final name; mkstemp would leave 0600). */
static int open_temp(const char *path, char **tmp)
{
    static atomic_uint counter;
    size_t cap = strlen(path) + 48;
    char *t = malloc(cap);
    if (!t) return -1;
    for (int attempt = 0; attempt < 64; attempt++) {
        snprintf(t, cap, "%s.tmp%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1u));
        int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            *tmp = t;
            return fd;
        }
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(t);
    errno = e;
    return -1;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the concatenation of two byte ranges to path through a temporary file. */
static int write_file(const char *path, const void *a, size_t na, const void *b, size_t nb, char *err,
                      size_t errlen)
{
    char *tmp = NULL;
    int fd = open_temp(path, &tmp);
    if (fd < 0) {
        set_err(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    int ok = write_all(fd, a, na) == 0 && (nb == 0 || write_all(fd, b, nb) == 0);
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        set_err(err, errlen, "%s: write failed: %s", path, strerror(saved));
    } else if (rename(tmp, path) != 0) {
        set_err(err, errlen, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        ok = 0;
    }
    if (!ok) unlink(tmp);
    free(tmp);
    return ok ? 0 : -1;
}

int mact_npy_write(const char *path, const mact_array *arr, char *err, size_t errlen)
{
    if (validate_for_write(arr, path, err, errlen) != 0) return -1;
    uint8_t hdr[NPY_HDR_CAP];
    size_t hl = npy_build_header(arr, hdr);
    return write_file(path, hdr, hl, arr->data, arr->nbytes, err, errlen);
}

/* ---------------------------------------------------------------- npz through libzip */

/* The MACT_NPZ_ZIP64 source: the inner source with its size hidden. libzip writes a zip64 extra field
 * into the local header of a member whose size it cannot know before reading it (the layout numpy gets
 * from Python's force_zip64), and offers no other way to ask for one. */
static zip_int64_t hidden_size_cb(void *ud, void *data, zip_uint64_t len, zip_source_cmd_t cmd)
{
    zip_source_t *in = ud;
    switch (cmd) {
    case ZIP_SOURCE_OPEN:
        return zip_source_open(in) < 0 ? -1 : 0;
    case ZIP_SOURCE_READ:
        return zip_source_read(in, data, len);
    case ZIP_SOURCE_CLOSE:
        return zip_source_close(in) < 0 ? -1 : 0;
    case ZIP_SOURCE_STAT: {
        zip_stat_t *st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, zip_source_error(in));
        if (!st || zip_source_stat(in, st) < 0) return -1;
        st->valid &= ~(zip_uint64_t)(ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC);
        return 0;
    }
    case ZIP_SOURCE_ERROR:
        return zip_error_to_data(zip_source_error(in), data, len);
    case ZIP_SOURCE_FREE:
        zip_source_free(in);
        return 0;
    case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                              ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
    default:
        zip_error_set(zip_source_error(in), ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
}

/* 1980-01-01 00:00 local time, the earliest DOS timestamp: a fixed mtime makes identical arrays give
 * identical files (libzip stores local time, as the zip format does). */
static time_t dos_epoch(void)
{
    struct tm t = {.tm_year = 80, .tm_mon = 0, .tm_mday = 1, .tm_isdst = -1};
    return mktime(&t);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const mact_array *const *)a)->name, (*(const mact_array *const *)b)->name);
}

/* Sorted, so 65536 members (numpy's zip64 end-record case) take milliseconds, not a quadratic scan. */
static int check_distinct(const char *path, const mact_array *arrays, size_t n, char *err, size_t errlen)
{
    if (n < 2) return 0;
    const mact_array **s = malloc(n * sizeof *s);
    if (!s) {
        set_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (size_t i = 0; i < n; i++) s[i] = &arrays[i];
    qsort(s, n, sizeof *s, cmp_name);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++)
        if (strcmp(s[i - 1]->name, s[i]->name) == 0) {
            set_err(err, errlen, "%s: duplicate array name '%s'", path, s[i]->name);
            rc = -1;
        }
    free(s);
    return rc;
}

int mact_npz_write(const char *path, const mact_array *arrays, size_t n, int flags, char *err,
                   size_t errlen)
{
    const int deflate_it = (flags & 0xff) != 0, force64 = (flags & MACT_NPZ_ZIP64) != 0;
    if (n && !arrays) {
        set_err(err, errlen, "%s: arrays is NULL", path);
        return -1;
    }
    char what[512];
    for (size_t i = 0; i < n; i++) {
        const char *nm = arrays[i].name;
        if (!nm || !*nm) {
            set_err(err, errlen, "%s: array %zu has no name", path, i);
            return -1;
        }
        if (strlen(nm) > 65535 - 4) {
            set_err(err, errlen, "%s: array %zu: name too long for zip", path, i);
            return -1;
        }
        snprintf(what, sizeof what, "%.250s: array '%.250s'", path, nm);
        if (validate_for_write(&arrays[i], what, err, errlen) != 0) return -1;
    }
    if (check_distinct(path, arrays, n, err, errlen) != 0) return -1;
    if (n == 0) {
        /* libzip writes no file for an archive without members (it removes one at path); numpy's
         * empty npz is the bare 22-byte end record, so write that. */
        static const uint8_t empty_zip[22] = {0x50, 0x4b, 0x05, 0x06};
        return write_file(path, empty_zip, sizeof empty_zip, NULL, 0, err, errlen);
    }

    /* libzip reads the members' bytes only in zip_close, so the headers (and the caller's data, which
     * the sources point at without copying) live until then. zip_close writes "<path>.XXXXXX" in the
     * same directory and renames it into place; on failure it removes it. */
    uint8_t(*hdrs)[NPY_HDR_CAP] = malloc(n * sizeof *hdrs);
    char *mname = malloc(65536);
    int zcode = 0, rc = -1;
    zip_t *za = NULL;
    if (!hdrs || !mname) {
        set_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    if (!(za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zcode))) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zcode);
        set_err(err, errlen, "%s: cannot create: %s", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        goto done;
    }
    const time_t mtime = dos_epoch();
    for (size_t i = 0; i < n; i++) {
        const mact_array *a = &arrays[i];
        size_t hl = npy_build_header(a, hdrs[i]);
        zip_buffer_fragment_t frag[2] = {{hdrs[i], hl}, {a->data, a->nbytes}};
        zip_error_t ze;
        zip_error_init(&ze);
        zip_source_t *src = zip_source_buffer_fragment_create(frag, a->nbytes ? 2 : 1, 0, &ze);
        if (src && force64) {
            zip_source_t *hid = zip_source_function_create(hidden_size_cb, src, &ze);
            if (!hid) zip_source_free(src);
            src = hid;
        }
        if (!src) {
            set_err(err, errlen, "%s: array '%s': %s", path, a->name, zip_error_strerror(&ze));
            zip_error_fini(&ze);
            goto done;
        }
        zip_error_fini(&ze);
        snprintf(mname, 65536, "%s.npy", a->name);
        /* Declared UTF-8 so the name gets the zip UTF-8 flag numpy reads; bytes that are not UTF-8 go
         * in unflagged, as zip's CP437 names. */
        zip_int64_t idx = zip_file_add(za, mname, src, ZIP_FL_ENC_UTF_8);
        if (idx < 0 && zip_error_code_zip(zip_get_error(za)) == ZIP_ER_INVAL) {
            zip_error_clear(za);
            idx = zip_file_add(za, mname, src, ZIP_FL_ENC_RAW);
        }
        if (idx < 0) {
            zip_source_free(src);
            set_err(err, errlen, "%s: array '%s': %s", path, a->name, zip_strerror(za));
            goto done;
        }
        /* level 6, zlib's default and so numpy's (libzip's own default is 9: slower, barely smaller) */
        if (zip_set_file_compression(za, (zip_uint64_t)idx, deflate_it ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                     deflate_it ? 6 : 0) ||
            zip_file_set_mtime(za, (zip_uint64_t)idx, mtime, 0) ||
            /* made by Unix with mode 0644, so unzip gives ordinary files */
            zip_file_set_external_attributes(za, (zip_uint64_t)idx, 0, ZIP_OPSYS_UNIX, 0100644u << 16)) {
            set_err(err, errlen, "%s: array '%s': %s", path, a->name, zip_strerror(za));
            goto done;
        }
    }
    if (zip_close(za) != 0) {
        int code = zip_error_code_zip(zip_get_error(za));
        set_err(err, errlen, "%s: %s: %s", path,
                code == ZIP_ER_TMPOPEN || code == ZIP_ER_OPEN ? "cannot create" : "write failed",
                zip_strerror(za));
        goto done; /* za still open: discarded below */
    }
    za = NULL;
    rc = 0;
done:
    if (za) zip_discard(za);
    free(hdrs);
    free(mname);
    return rc;
}
