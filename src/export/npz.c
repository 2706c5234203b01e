/* .npz reader: numpy's zip archives of .npy members through libzip, over the in-memory image of the file;
 * this file keeps only the size bounds and the wording of errors (npy.h has the contract). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>
#include <zlib.h>
#include "mact.h"
#include "base/err.h"
#include "io/npy_internal.h"

/* ---------------------------------------------------------------- npz: zip through libzip */

/* Deflate cannot beat ~1032:1, so a larger claimed expansion is corruption (or a bomb) and we
 * refuse before allocating the claimed size. */
#define MAX_DEFLATE_RATIO 1032u
/* The fixed part of a central directory entry: bounds the member count by the archive size. */
#define CD_ENTRY_MIN 46u

#define SIG_EOCD   0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64  0x07064b50u

/* libzip's message for a (zip, system) error pair. */
static void zip_msg(int zcode, int scode, char *buf, size_t cap)
{
    zip_error_t ze;
    zip_error_init(&ze);
    zip_error_set(&ze, zcode, scode);
    snprintf(buf, cap, "%s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
}

/* Wording for an archive libzip refused. libzip 1.7 (Debian 12's) says only "not a zip archive" or
 * "inconsistent" (detailed codes came with 1.8), so to name the problem this looks at the end records,
 * the few bytes that say where the central directory is. It only words errors: libzip alone decides
 * whether an archive is accepted. `strict` adds the layout rules of libzip's consistency check (the end
 * record closes the file, the directory ends where the end records start). Returns 1 with err set
 * when it found the problem, 0 when the end records look sound. */
static int describe_end_records(const uint8_t *buf, size_t len, const char *what, int strict,
                                char *err, size_t errlen)
{
    size_t eocd = SIZE_MAX;
    size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0; /* the comment is at most 64 KiB */
    for (size_t i = len - 22 + 1; i-- > lo;)
        if (rd32(buf + i) == SIG_EOCD) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX) {
        set_err(err, errlen, "%s: no zip end-of-central-directory record (not a zip archive, or truncated)",
                what);
        return 1;
    }
    const uint8_t *e = buf + eocd;
    uint64_t n_disk = rd16(e + 8), n_total = rd16(e + 10), cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    unsigned disk = rd16(e + 4), cd_disk = rd16(e + 6);
    size_t comment = rd16(e + 20), limit = eocd;
    if (comment > len - eocd - 22) {
        set_err(err, errlen, "%s: the zip end record's comment runs past the end of the file (truncated?)",
                what);
        return 1;
    }
    if (eocd >= 20 && rd32(buf + eocd - 20) == SIG_LOC64) {
        const uint8_t *l = buf + eocd - 20;
        uint64_t z64 = rd64(l + 8);
        if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || rd32(buf + z64) != SIG_EOCD64) {
            set_err(err, errlen, "%s: zip64 end record missing or out of place (offset %llu)", what,
                    (unsigned long long)z64);
            return 1;
        }
        const uint8_t *z = buf + z64;
        disk = rd32(z + 16);
        cd_disk = rd32(z + 20);
        n_disk = rd64(z + 24);
        n_total = rd64(z + 32);
        cd_size = rd64(z + 40);
        cd_off = rd64(z + 48);
        limit = (size_t)z64;
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n_total) {
        set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
        return 1;
    }
    if (cd_off > limit || cd_size > limit - cd_off) {
        set_err(err, errlen,
                "%s: central directory (offset %llu, %llu bytes) lies outside the archive (%zu bytes before "
                "the end record)", what, (unsigned long long)cd_off, (unsigned long long)cd_size, limit);
        return 1;
    }
    if (n_total > cd_size / CD_ENTRY_MIN) {
        set_err(err, errlen, "%s: %llu entries cannot fit in a %llu-byte central directory", what,
                (unsigned long long)n_total, (unsigned long long)cd_size);
        return 1;
    }
    if (strict && eocd + 22 + comment != len) {
        set_err(err, errlen, "%s: %zu bytes of trailing data after the zip end record", what,
                len - eocd - 22 - comment);
        return 1;
    }
    if (strict && cd_off + cd_size != limit) {
        set_err(err, errlen, "%s: %llu stray bytes between the central directory and the end record", what,
                (unsigned long long)(limit - cd_off - cd_size));
        return 1;
    }
    return 0;
}

/* One member being read. Reads stop at the first error, which is kept for the verdict. */
typedef struct {
    zip_file_t *f;
    const char *label;   /* "<archive>: member '<name>'" */
    int deflated;
    uint64_t usize;      /* declared uncompressed size */
    uint32_t crc;        /* declared CRC */
    uint64_t got;        /* bytes read so far */
    int eof, zerr, serr; /* end of data seen; libzip's error pair of the failed read (0: none) */
} mstream;

static size_t mread(mstream *s, void *dst, size_t n)
{
    size_t done = 0;
    while (done < n && !s->eof && !s->zerr) {
        zip_int64_t r = zip_fread(s->f, (uint8_t *)dst + done, n - done);
        if (r < 0) {
            zip_error_t *ze = zip_file_get_error(s->f);
            s->zerr = zip_error_code_zip(ze);
            s->serr = zip_error_code_system(ze);
            if (s->zerr == 0) s->zerr = ZIP_ER_INTERNAL;
        } else if (r == 0) {
            s->eof = 1;
        } else {
            done += (size_t)r;
        }
    }
    s->got += done;
    return done;
}

/* Reads whatever is left of the member into a scratch buffer, then once more past its declared end:
 * libzip checks the CRC (and, for stored data, the size) when the data runs out, and a byte beyond the
 * declared size means the directory lies. *crc continues the CRC of what the caller read, for the
 * message. Bounded: at most the declared size plus one byte. */
static void mdrain(mstream *s, uLong *crc)
{
    uint8_t scratch[1 << 14];
    while (!s->eof && !s->zerr && s->got <= s->usize) {
        uint64_t left = s->usize - s->got;
        size_t want = left == 0 ? 1 : left < sizeof scratch ? (size_t)left : sizeof scratch;
        size_t r = mread(s, scratch, want);
        *crc = crc32_z(*crc, scratch, r);
    }
}

/* The zip-level verdict once the member's data has been read through: 0 when it is exactly the declared
 * size and libzip found nothing wrong. `crc` is ours, for a CRC message. */
static int mverdict(const mstream *s, uint32_t crc, char *err, size_t errlen)
{
    const char *what = s->label, *kind = s->deflated ? "deflate data" : "data";
    unsigned long long got = s->got, usize = s->usize;
    char msg[256];
    if (s->got > s->usize) {
        set_err(err, errlen, "%s: %s longer than the declared %llu bytes", what, kind, usize);
        return -1;
    }
    switch (s->zerr) {
    case 0:
        if (s->got == s->usize) return 0;
        set_err(err, errlen, "%s: %s ends after %llu bytes, declared %llu", what, kind, got, usize);
        return -1;
    case ZIP_ER_CRC:
        /* libzip's inflater stops without an error when the compressed data runs out mid-stream; the
         * CRC check at the end is what catches it. */
        if (s->got < s->usize)
            set_err(err, errlen, "%s: deflate data truncated (%llu of %llu bytes produced, CRC mismatch)",
                    what, got, usize);
        else
            set_err(err, errlen, "%s: CRC mismatch (stored %08x, computed %08x)", what, (unsigned)s->crc,
                    (unsigned)crc);
        return -1;
    case ZIP_ER_INCONS: /* libzip's size check at the end of the data */
        set_err(err, errlen, "%s: %s ends after %llu bytes, declared %llu", what, kind, got, usize);
        return -1;
    case ZIP_ER_EOF:
        set_err(err, errlen, "%s: %s overruns the archive (the archive ends after %llu of %llu bytes)",
                what, s->deflated ? "compressed data" : "data", got, usize);
        return -1;
    case ZIP_ER_ZLIB:
    case ZIP_ER_COMPRESSED_DATA:
        zip_msg(s->zerr, s->serr, msg, sizeof msg);
        set_err(err, errlen, "%s: corrupt deflate data: %s (after %llu of %llu bytes)", what, msg, got,
                usize);
        return -1;
    case ZIP_ER_MEMORY:
        set_err(err, errlen, "%s: out of memory reading the member", what);
        return -1;
    default:
        zip_msg(s->zerr, s->serr, msg, sizeof msg);
        set_err(err, errlen, "%s: cannot read the member's data: %s", what, msg);
        return -1;
    }
}

/* Reads member idx into out: the npy header first, so the data buffer is allocated only once the
 * header's size and the directory's agree; then the data, straight into that buffer. When the npy
 * layer objects, the member is still read through (into a scratch buffer) so that zip-level damage,
 * the likelier cause, is what the message names. */
static int read_member(zip_t *za, zip_uint64_t idx, const zip_stat_t *st, const char *label,
                       mact_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mstream s = {.label = label, .deflated = st->comp_method == ZIP_CM_DEFLATE, .usize = st->size,
                 .crc = st->crc};
    if (!(s.f = zip_fopen_index(za, idx, 0))) {
        zip_error_t *ze = zip_get_error(za);
        char msg[256];
        zip_msg(zip_error_code_zip(ze), zip_error_code_system(ze), msg, sizeof msg);
        if (zip_error_code_zip(ze) == ZIP_ER_MEMORY)
            set_err(err, errlen, "%s: out of memory opening the member", label);
        else /* what is left to fail here is finding the data behind the local header */
            set_err(err, errlen, "%s: bad local header offset: libzip cannot read the local header (%s)",
                    label, msg);
        return -1;
    }
    const size_t total = (size_t)st->size; /* the caller checked it fits */
    uint8_t pb[12], *hbuf = NULL, *raw = NULL;
    size_t pre = 0, hlen = 0, pn = total < 10 ? total : 10;
    npy_info info;
    uLong crc = crc32_z(0L, Z_NULL, 0);
    int rc = -1;

    if (mread(&s, pb, pn) != pn) goto zip_fail;
    if (total >= 12 && memcmp(pb, "\x93NUMPY", 6) == 0 && (pb[6] == 2 || pb[6] == 3)) {
        if (mread(&s, pb + 10, 2) != 2) goto zip_fail;
        pn = 12;
    }
    if (mact_npyi_npy_preamble(pb, total, label, &pre, &hlen, err, errlen) != 0) {
        crc = crc32_z(crc, pb, pn);
        goto npy_fail;
    }
    if (!(hbuf = malloc(pre + hlen))) {
        set_err(err, errlen, "%s: out of memory for a %zu-byte npy header", label, hlen);
        goto done;
    }
    memcpy(hbuf, pb, pre);
    if (mread(&s, hbuf + pre, hlen) != hlen) goto zip_fail;
    crc = crc32_z(crc, hbuf, pre + hlen);
    if (mact_npyi_npy_dict(hbuf + pre, pre, hlen, total, label, &info, err, errlen) != 0) goto npy_fail;
    if (info.nbytes) {
        if (!(raw = malloc(info.nbytes))) {
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", label, info.nbytes);
            goto done;
        }
        if (mread(&s, raw, info.nbytes) != info.nbytes) goto zip_fail;
    }
    mdrain(&s, &crc); /* nothing is left: this reaches the end, where libzip checks the CRC */
    if (s.zerr == ZIP_ER_CRC && s.got == s.usize && info.nbytes) crc = crc32_z(crc, raw, info.nbytes);
    if (mverdict(&s, (uint32_t)crc, err, errlen) != 0) goto done;
    void *data = raw;
    if (info.nbytes && mact_npyi_needs_transpose(&info)) {
        if (!(data = malloc(info.nbytes))) {
            set_err(err, errlen, "%s: out of memory allocating %zu bytes", label, info.nbytes);
            goto done;
        }
        size_t isz = mact_npyi_elem_size(info.dtype);
        mact_npyi_fortran_to_c(raw, data, info.ndim, info.shape, isz, info.nbytes / isz);
        free(raw);
    }
    raw = NULL;
    mact_npyi_fill_array(out, &info);
    out->data = data;
    rc = 0;
    goto done;

npy_fail: { /* err holds the npy message; a zip-level problem, if there is one, replaces it */
    char zmsg[1024] = "";
    mdrain(&s, &crc);
    if (mverdict(&s, (uint32_t)crc, zmsg, sizeof zmsg) != 0) set_err(err, errlen, "%s", zmsg);
    goto done;
}
zip_fail: /* a read came up short: the verdict names why */
    if (mverdict(&s, (uint32_t)crc, err, errlen) == 0)
        set_err(err, errlen, "%s: data ends after %llu bytes, declared %llu", label,
                (unsigned long long)s.got, (unsigned long long)s.usize);
done:
    free(hbuf);
    free(raw);
    zip_fclose(s.f);
    return rc;
}

static int cmp_stat_name(const void *a, const void *b)
{
    const zip_stat_t *x = *(const zip_stat_t *const *)a, *y = *(const zip_stat_t *const *)b;
    return strcmp(x->name, y->name);
}

/* Printable copy of a member name for messages, so a corrupt name cannot garble them. */
static void printable(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (; name[n] && n + 1 < cap; n++)
        out[n] = ((unsigned char)name[n] >= 32 && (unsigned char)name[n] < 127) ? name[n] : '?';
    out[n] = 0;
}

/* Every check that needs only the central directory, for every member, before any data is read or
 * any array allocated; then each member in archive order. */
static int read_archive(zip_t *za, size_t len, const char *what, mact_npz *out, char *err, size_t errlen)
{
    zip_int64_t ne = zip_get_num_entries(za, 0);
    if (ne < 0 || (uint64_t)ne > len / CD_ENTRY_MIN) {
        set_err(err, errlen, "%s: %lld entries cannot fit in a %zu-byte archive", what, (long long)ne, len);
        return -1;
    }
    if (ne == 0) return 0;
    size_t n = (size_t)ne;
    zip_stat_t *st = calloc(n, sizeof *st);
    const zip_stat_t **sorted = calloc(n, sizeof *sorted);
    int rc = -1;
    char member[320], label[1024];
    if (!st || !sorted || !(out->arrays = calloc(n, sizeof *out->arrays))) {
        set_err(err, errlen, "%s: out of memory for %zu members", what, n);
        goto done;
    }
    const zip_uint64_t need = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC |
                              ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    uint64_t data_sum = 0;
    for (size_t i = 0; i < n; i++) {
        zip_stat_t *s = &st[i];
        /* raw names: the bytes numpy wrote (UTF-8), never a libzip CP437 conversion */
        if (zip_stat_index(za, i, ZIP_FL_ENC_RAW, s) != 0 || (s->valid & need) != need || !s->name) {
            set_err(err, errlen, "%s: central directory entry %zu is unreadable", what, i);
            goto done;
        }
        sorted[i] = s;
        printable(s->name, member, sizeof member);
        size_t nlen = strlen(s->name);
        unsigned long long usize = s->size, csize = s->comp_size;
        if (s->encryption_method != ZIP_EM_NONE) {
            set_err(err, errlen, "%s: member '%s' is encrypted", what, member);
            goto done;
        }
        if (s->comp_method != ZIP_CM_STORE && s->comp_method != ZIP_CM_DEFLATE) {
            set_err(err, errlen, "%s: member '%s' uses unsupported compression method %u", what, member,
                    (unsigned)s->comp_method);
            goto done;
        }
        if (nlen < 5 || strcmp(s->name + nlen - 4, ".npy") != 0) {
            set_err(err, errlen, "%s: member '%s' is not a .npy file", what, member);
            goto done;
        }
        if (s->comp_method == ZIP_CM_STORE && csize != usize) {
            set_err(err, errlen, "%s: member '%s': stored sizes differ (%llu vs %llu)", what, member,
                    csize, usize);
            goto done;
        }
        if (csize > len) {
            set_err(err, errlen, "%s: member '%s': data (%llu bytes) overruns the archive (%zu bytes)",
                    what, member, csize, len);
            goto done;
        }
        if (s->comp_method == ZIP_CM_DEFLATE && usize / MAX_DEFLATE_RATIO > csize + 1) {
            set_err(err, errlen,
                    "%s: member '%s': declares %llu bytes from %llu compressed (impossible ratio)", what,
                    member, usize, csize);
            goto done;
        }
        if (usize > SIZE_MAX) {
            set_err(err, errlen, "%s: member '%s': %llu bytes do not fit in memory here", what, member,
                    usize);
            goto done;
        }
        /* Members may not share data: together they fit in the archive (which, with the ratio above,
         * bounds everything that will be allocated). Overlapping members are a known zip bomb. */
        data_sum += csize;
        if (data_sum > len) {
            set_err(err, errlen,
                    "%s: members' data adds up to more than the archive's %zu bytes (overlapping members)",
                    what, len);
            goto done;
        }
    }
    qsort(sorted, n, sizeof *sorted, cmp_stat_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            printable(sorted[i]->name, member, sizeof member);
            set_err(err, errlen, "%s: duplicate member '%s'", what, member);
            goto done;
        }
    for (size_t i = 0; i < n; i++) {
        printable(st[i].name, member, sizeof member);
        snprintf(label, sizeof label, "%s: member '%s'", what, member);
        mact_array *arr = &out->arrays[out->count];
        if (read_member(za, i, &st[i], label, arr, err, errlen) != 0) goto done;
        out->count++;
        size_t nlen = strlen(st[i].name) - 4;
        if (!(arr->name = malloc(nlen + 1))) {
            set_err(err, errlen, "%s: out of memory", what);
            goto done;
        }
        memcpy(arr->name, st[i].name, nlen);
        arr->name[nlen] = 0;
    }
    rc = 0;
done:
    free(st);
    free(sorted);
    if (rc != 0) mact_npz_free(out);
    return rc;
}

static zip_t *open_buffer(const uint8_t *buf, size_t len, int flags, zip_error_t *ze)
{
    zip_source_t *src = zip_source_buffer_create(buf, len, 0, ze);
    if (!src) return NULL;
    zip_t *za = zip_open_from_source(src, flags, ze);
    if (!za) zip_source_free(src);
    return za;
}

int mact_npz_parse(const uint8_t *buf, size_t len, const char *what, mact_npz *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < 22) {
        set_err(err, errlen, "%s: %zu bytes is too small to be a zip archive", what, len);
        return -1;
    }
    /* The normal path: libzip with its consistency check (every local header read and compared with
     * the central directory, no stray bytes around the end records). */
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = open_buffer(buf, len, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (za) {
        zip_error_fini(&ze);
        int rc = read_archive(za, len, what, out, err, errlen);
        zip_discard(za);
        return rc;
    }
    int strict = zip_error_code_zip(&ze), strict_sys = zip_error_code_system(&ze);
    zip_error_fini(&ze);
    if (strict == ZIP_ER_MEMORY) {
        set_err(err, errlen, "%s: out of memory reading the zip directory", what);
        return -1;
    }
    /* Refused. Find the most specific reason: open without the consistency check and read every
     * member, whose checks name a member and what is wrong with it; the consistency failure itself is
     * reported only when nothing more specific turns up. */
    char msg[256];
    zip_error_init(&ze);
    za = open_buffer(buf, len, ZIP_RDONLY, &ze);
    if (!za) {
        int code = zip_error_code_zip(&ze);
        zip_msg(code, zip_error_code_system(&ze), msg, sizeof msg);
        zip_error_fini(&ze);
        if (code == ZIP_ER_MEMORY)
            set_err(err, errlen, "%s: out of memory reading the zip directory", what);
        else if (describe_end_records(buf, len, what, 0, err, errlen))
            ;
        else if (code == ZIP_ER_MULTIDISK)
            set_err(err, errlen, "%s: multi-disk zip archives are not supported", what);
        else if (code == ZIP_ER_NOENT) /* libzip's lookup of the extra field the entry needs */
            set_err(err, errlen,
                    "%s: corrupt central directory: an entry's sizes or offset say zip64 but it has no zip64 "
                    "extra field (libzip: %s)", what, msg);
        else
            set_err(err, errlen, "%s: corrupt central directory (libzip: %s)", what, msg);
        return -1;
    }
    zip_error_fini(&ze);
    int rc = read_archive(za, len, what, out, err, errlen);
    zip_discard(za);
    if (rc != 0) return -1;
    mact_npz_free(out);
    zip_msg(strict, strict_sys, msg, sizeof msg);
    if (describe_end_records(buf, len, what, 1, err, errlen))
        ;
    else if (strict == ZIP_ER_NOZIP) /* what libzip's check reports for a local header out of place */
        set_err(err, errlen,
                "%s: bad local header offset: a member's local header is missing, or its data runs into "
                "the central directory (libzip: %s)", what, msg);
    else if (strict == ZIP_ER_INCONS)
        set_err(err, errlen,
                "%s: a local header disagrees with the central directory (name, method, time, CRC or "
                "sizes; libzip: %s)", what, msg);
    else
        set_err(err, errlen, "%s: fails libzip's consistency check: %s", what, msg);
    return -1;
}

int mact_npz_read(const char *path, mact_npz *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    mapped m;
    if (mact_npyi_map_file(path, &m, err, errlen) != 0) return -1;
    int rc = mact_npz_parse(m.buf, m.len, path, out, err, errlen);
    mact_npyi_unmap_file(&m);
    return rc;
}

const mact_array *mact_npz_find(const mact_npz *z, const char *name)
{
    if (!z || !name) return NULL;
    for (size_t i = 0; i < z->count; i++)
        if (z->arrays[i].name && strcmp(z->arrays[i].name, name) == 0) return &z->arrays[i];
    return NULL;
}

void mact_npz_free(mact_npz *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->count; i++) mact_array_free(&z->arrays[i]);
    free(z->arrays);
    memset(z, 0, sizeof *z);
}

