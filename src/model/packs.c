/* Bind once: the model's weights packed for its kernels and precision at load, each pack stored with its
 * weight (mact_tensor.pk), so a matmul reads its operand's layout from the tensor itself (no lookup, no
 * lock). The packs of a model lie in one allocation (an anonymous 2 MiB-aligned mapping marked for
 * transparent huge pages: few faults while packing, few TLB misses while streaming) or in one mapped pack
 * cache file; both are released with the model.
 *
 * On-disk cache of a model's packs: <dir>/mact-<precision>-<key>.pack: a header, one table row per distinct
 * packed weight in tensor-table order, then (at a page boundary) the packed bytes at the table's offsets.
 * The key hashes the format version, the kernels' pack layout, the precision, every regular file of the
 * model directory (name, size, mtime) and each weight's dtype, shape and first/last 64 bytes, so an edited
 * checkpoint (or adapter) never matches an old cache. Every size in a cache file is checked (overflow-safe)
 * before it is used; a file failing any check is ignored (and replaced). Files are written to a temporary
 * name and renamed, so readers never see a partial file. The packed bytes themselves are trusted (a checksum
 * would read what the cache saves reading). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/file.h"
#include "base/rng.h"
#include "kernels/kernels.h"
#include "model/model.h"

#define FP_BYTES 64
#define HUGE ((size_t)2 << 20)
#define PC_MAGIC "MACTPAK2"
#define PC_VERSION 2u

typedef struct {
    mact_tensor *t;
    int fmt;
    size_t bytes, off;
    int dup;           /* index of an earlier row with the same weight, or -1 */
    int part;          /* MACT_PART_* of the weight */
} prow;

typedef struct {
    prow *r;
    size_t n, cap;
    int bad;
    const mact_ops *ops;
    mact_precision prec;
    unsigned parts;     /* MACT_PART_* quantized in INT8 */
} plist;

static void add_row(plist *L, mact_tensor *t, int fmt, size_t bytes, int part)
{
    if (L->bad) return;
    if (L->n == L->cap) {
        size_t nc = L->cap ? 2 * L->cap : 256;
        prow *nr = realloc(L->r, nc * sizeof *nr);
        if (!nr) { L->bad = 1; return; }
        L->r = nr;
        L->cap = nc;
    }
    prow r = {t, fmt, bytes, 0, -1, part};
    for (size_t i = 0; i < L->n; i++)
        if (L->r[i].t->data == t->data && L->r[i].dup < 0 && L->r[i].fmt == fmt) r.dup = (int)i;
    L->r[L->n++] = r;
}

static void collect(mact_tensor *t, int part, void *arg)
{
    plist *L = arg;
    int fmt;
    size_t bytes;
    if (L->bad || !t->data || t->ndim != 2) return;
    const int quant = (L->parts & (unsigned)part) != 0;  /* INT8 quantizes this weight */
    if (!mact_pack_plan(L->ops, t->dtype, t->shape[0], t->shape[1], L->prec, quant, &fmt, &bytes)) return;
    add_row(L, t, fmt, bytes, part);
#if !defined(MACT_I8_NO_CENTRE) && !defined(MACT_I8_NO_TWIN)
    /* int8 vision carries a second, residual plane per weight, read by its centred GEMMs (bind_all) */
    if (fmt == MACT_PACK_I8 && part == MACT_PART_VISION) add_row(L, t, MACT_PACK_I8R, bytes, part);
#endif
}

static size_t src_bytes(const mact_tensor *t)
{
    return (size_t)t->shape[0] * (size_t)t->shape[1] * (t->dtype == MACT_F32 ? 4 : 2);
}

static uint64_t fingerprint(uint64_t h, const mact_tensor *t)
{
    const size_t n = src_bytes(t);
    if (n <= 2 * FP_BYTES) return mact_fnv1a(h, t->data, n);
    h = mact_fnv1a(h, t->data, FP_BYTES);
    return mact_fnv1a(h, (const uint8_t *)t->data + n - FP_BYTES, FP_BYTES);
}

/* ---- read-only file mappings (their pages can be dropped and re-read from the file) ---- */

typedef struct { uintptr_t lo, hi; } range;
typedef struct { range *r; size_t n; } ranges;

static void file_ranges(ranges *out)
{
    out->r = NULL;
    out->n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[4096];
    size_t cap = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off, inode;
        char perms[8], dev[32];
        if (sscanf(line, "%lx-%lx %7s %lx %31s %lu", &lo, &hi, perms, &off, dev, &inode) != 6) continue;
        /* file-backed, private, not writable: madvise(DONTNEED) re-reads such pages from the file */
        if (!inode || perms[1] != '-' || perms[3] != 'p') continue;
        if (out->n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            range *nr = realloc(out->r, nc * sizeof *nr);
            if (!nr) break;
            out->r = nr;
            cap = nc;
        }
        out->r[out->n++] = (range){lo, hi};
    }
    fclose(f);
}

/* After packing a weight that lies in a read-only file mapping, its pages are handed back to the kernel (they
 * re-fault from the file if read again), so resident memory holds one copy of each weight. */
static void drop_source(const ranges *rs, const void *p, size_t bytes)
{
    uintptr_t a = (uintptr_t)p, b = a + bytes;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1), hi = b & ~((uintptr_t)pg - 1);
    if (hi <= lo) return;
    for (size_t i = 0; i < rs->n; i++)
        if (lo >= rs->r[i].lo && hi <= rs->r[i].hi) {
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
            return;
        }
}

/* ---- the cache file ---- */

typedef struct {
    char magic[8];
    uint32_t version, precision;
    uint64_t key, n, data_off, data_len, table_crc;
    char layout[32];
} pc_header;

typedef struct {
    int32_t dtype, fmt;
    int64_t N, K;
    uint64_t off, bytes;
} pc_row;

/* The precision as the cache file names it (header field and key): fp32 0, bf16 1, int8 2, fixed by the format
 * (cache files written before the kernels took mact.h's mact_precision keep their keys and still load) */
static uint32_t pc_precision(mact_precision prec)
{
    return prec == MACT_PRECISION_INT8 ? 2u : prec == MACT_PRECISION_BF16 ? 1u : 0u;
}

static uint64_t cache_key(const struct mact_model *m, const plist *L, int *ok)
{
    uint64_t key = MACT_FNV_BASIS;
    const uint32_t v = PC_VERSION;
    const char *layout = mact_ops_name(L->ops);
    key = mact_fnv1a(key, &v, sizeof v);
    key = mact_fnv1a(key, layout, strlen(layout) + 1);
    const uint32_t prec = pc_precision(L->prec);
    key = mact_fnv1a(key, &prec, sizeof prec);
    /* the files of the weights' folder and, for a LeRobot policy, of its base, sorted by name (readdir order is not
     * stable); the LoRA scale (a LeRobot config's lora_alpha / lora_rank is not in a file hashed by content) */
    *ok = 1;
    for (int d = 0; d < 2; d++) {
        const char *dir = d ? m->src.base_dir : m->src.dir;
        if (d && !strcmp(m->src.base_dir, m->src.dir)) break;
        struct dirent **list = NULL;
        int nf = scandir(dir, &list, NULL, alphasort);
        for (int i = 0; i < nf; i++) {
            char path[8192];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            if (!stat(path, &st) && S_ISREG(st.st_mode)) {
                int64_t meta[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
                key = mact_fnv1a(key, list[i]->d_name, strlen(list[i]->d_name) + 1);
                key = mact_fnv1a(key, meta, sizeof meta);
            }
            free(list[i]);
        }
        free(list);
        *ok &= nf >= 0;
    }
    if (m->lora_scale != 0) key = mact_fnv1a(key, &m->lora_scale, sizeof m->lora_scale);
    for (size_t i = 0; i < L->n; i++) {
        const prow *r = &L->r[i];
        if (r->dup >= 0) continue;
        int32_t hdr[2] = {r->t->dtype, r->fmt};
        key = mact_fnv1a(key, hdr, sizeof hdr);
        key = mact_fnv1a(key, r->t->shape, 2 * sizeof(int64_t));
        key = fingerprint(key, r->t);
    }
    return key;
}

static void cache_path(char *out, size_t len, const char *dir, mact_precision prec, uint64_t key)
{
    snprintf(out, len, "%s/mact-%s-%016llx.pack", dir, mact_precision_str(prec), (unsigned long long)key);
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void fill_rows(const plist *L, pc_row *rows, size_t *nrows)
{
    size_t k = 0;
    for (size_t i = 0; i < L->n; i++) {
        const prow *r = &L->r[i];
        if (r->dup >= 0) continue;
        rows[k++] = (pc_row){r->t->dtype, r->fmt, r->t->shape[0], r->t->shape[1], r->off, r->bytes};
    }
    *nrows = k;
}

static int cache_write(const struct mact_model *m, const plist *L, const char *dir, uint64_t key, const void *data,
                       size_t data_len)
{
    pc_row *rows = malloc((L->n + 1) * sizeof *rows);
    if (!rows) return -1;
    size_t n;
    fill_rows(L, rows, &n);
    pc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PC_MAGIC, 8);
    h.version = PC_VERSION;
    h.precision = pc_precision(L->prec);
    h.key = key;
    h.n = n;
    snprintf(h.layout, sizeof h.layout, "%s", mact_ops_name(L->ops));
    h.data_off = (sizeof h + n * sizeof(pc_row) + 4095) & ~(uint64_t)4095;
    h.data_len = data_len;
    h.table_crc = mact_fnv1a(MACT_FNV_BASIS, rows, n * sizeof(pc_row));
    char path[8192], tmp[8300];
    cache_path(path, sizeof path, dir, L->prec, key);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(rows);
        return -1;
    }
    static const uint8_t zeros[4096];
    size_t head = sizeof h + n * sizeof(pc_row);
    int bad = write_all(fd, &h, sizeof h) || write_all(fd, rows, n * sizeof(pc_row)) ||
              write_all(fd, zeros, (size_t)h.data_off - head) || write_all(fd, data, data_len);
    if (close(fd)) bad = 1;
    free(rows);
    (void)m;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* a valid cache file mapped, with every row's offset checked: the data base, or NULL (absent or invalid) */
static const uint8_t *cache_load(const plist *L, const char *dir, uint64_t key, void **map_out, size_t *map_len)
{
    char path[8192];
    cache_path(path, sizeof path, dir, L->prec, key);
    int fd = mact_file_open_regular(path, NULL, 0);  /* a FIFO named like the cache never blocks the load */
    if (fd < 0) return NULL;
    pc_row *want = malloc((L->n + 1) * sizeof *want), *rows = NULL;
    size_t n = 0;
    if (want) fill_rows(L, want, &n);
    struct stat st;
    pc_header h;
    int ok = want && !fstat(fd, &st) && S_ISREG(st.st_mode) && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
             !memcmp(h.magic, PC_MAGIC, 8) && h.version == PC_VERSION && h.precision == pc_precision(L->prec) &&
             h.key == key && h.n == n && memchr(h.layout, 0, sizeof h.layout) &&
             !strcmp(h.layout, mact_ops_name(L->ops)) && h.data_off % 4096 == 0 &&
             h.data_off >= sizeof h + n * sizeof(pc_row) && h.data_off <= (uint64_t)st.st_size &&
             h.data_len == (uint64_t)st.st_size - h.data_off;
    if (ok) {
        rows = malloc(n * sizeof *rows + 1);
        ok = rows && pread(fd, rows, n * sizeof *rows, sizeof h) == (ssize_t)(n * sizeof *rows) &&
             mact_fnv1a(MACT_FNV_BASIS, rows, n * sizeof *rows) == h.table_crc;
    }
    for (size_t i = 0; ok && i < n; i++)
        ok = rows[i].dtype == want[i].dtype && rows[i].fmt == want[i].fmt && rows[i].N == want[i].N &&
             rows[i].K == want[i].K && rows[i].bytes == want[i].bytes && rows[i].off % 64 == 0 &&
             rows[i].off <= h.data_len && rows[i].bytes <= h.data_len - rows[i].off;
    void *map = MAP_FAILED;
    if (ok) map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (ok && map != MAP_FAILED) {
        /* the rows' offsets become the packs' offsets */
        size_t k = 0;
        for (size_t i = 0; i < L->n; i++)
            if (L->r[i].dup < 0) L->r[i].off = rows[k++].off;
    }
    free(rows);
    free(want);
    if (!ok || map == MAP_FAILED) return NULL;
    *map_out = map;
    *map_len = (size_t)st.st_size;
    return (const uint8_t *)map + h.data_off;
}

static void bind_all(struct mact_model *m, const plist *L, const uint8_t *base, mact_packed *pks)
{
    for (size_t i = 0; i < L->n; i++) {
        const prow *r = &L->r[i];
        if (r->dup >= 0) {
            if (r->fmt != MACT_PACK_I8R) r->t->pk = L->r[r->dup].t->pk;  /* a residual plane came with its first */
            continue;
        }
        pks[i] = mact_pack_describe(L->ops, base + r->off, r->t->dtype, r->t->shape[0], r->t->shape[1], r->fmt);
        if (r->fmt == MACT_PACK_I8R) {  /* right after its first plane's row (collect) */
            pks[i - 1].lo = &pks[i];
            continue;
        }
#ifndef MACT_I8_NO_CENTRE  /* a build for measuring the centring's effect (docs/parity.md), never the default */
        /* int8 vision runs centred: its GEMMs' rows are one image's patches, and the grid sampler's coordinates
         * come from their mean (kernels/i8_split.c) */
        pks[i].centre = r->fmt == MACT_PACK_I8 && r->part == MACT_PART_VISION;
#endif
        r->t->pk = &pks[i];
    }
    (void)m;
}

int mact_model_pack(struct mact_model *m, mact_pool *pool, const char *cache_dir, int *cache_status, char *err,
                    size_t errlen)
{
    *cache_status = MACT_PACK_CACHE_NONE;
    plist L = {.ops = m->ops, .prec = m->kprec, .parts = m->int8_parts};
    mact_model_for_each_weight(m, collect, &L);
    if (L.bad) {
        free(L.r);
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory planning the packed weights");
    }
    if (!L.n) {
        free(L.r);
        m->pack_cache = MACT_PACK_CACHE_NONE;
        return 0;
    }
    size_t total = 0;
    for (size_t i = 0; i < L.n; i++) {
        if (L.r[i].dup >= 0) continue;
        L.r[i].off = total;
        const size_t b = (L.r[i].bytes + 63) & ~(size_t)63;
        if (b < L.r[i].bytes || total + b < total) {
            free(L.r);
            return mact_errf(err, errlen, MACT_ERR_MODEL, "packed weights overflow the address space");
        }
        total += b;
    }
    mact_packed *pks = calloc(L.n, sizeof *pks);
    if (!pks) {
        free(L.r);
        return mact_errf(err, errlen, MACT_ERR_NOMEM, "out of memory for the packed weights' table");
    }
    int key_ok = 0;
    uint64_t key = 0;
    const int use_cache = cache_dir && *cache_dir;
    if (use_cache) key = cache_key(m, &L, &key_ok);
    if (use_cache && !key_ok) *cache_status = MACT_PACK_CACHE_FAILED;
    ranges rs;
    file_ranges(&rs);
    void *map = NULL;
    size_t map_len = 0;
    const uint8_t *base = use_cache && key_ok ? cache_load(&L, cache_dir, key, &map, &map_len) : NULL;
    if (base) {
        *cache_status = MACT_PACK_CACHE_LOADED;
    } else {
        map_len = (total + HUGE - 1) & ~(HUGE - 1);
        map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) {
            free(rs.r);
            free(pks);
            free(L.r);
            return mact_errf(err, errlen, MACT_ERR_NOMEM, "cannot map %zu MiB for the packed weights", total >> 20);
        }
        mact_advise_huge(map, map_len);
        base = map;
        for (size_t i = 0; i < L.n; i++) {
            const prow *r = &L.r[i];
            if (r->dup >= 0) continue;
            mact_pack_fill(L.ops, pool, (uint8_t *)map + r->off, r->t->data, r->t->dtype, r->t->shape[0],
                           r->t->shape[1], r->fmt);
            /* right away, not after the last pack: resident memory then peaks at the packs plus one source
             * weight, not at the packs plus the whole checkpoint */
            drop_source(&rs, r->t->data, src_bytes(r->t));
        }
        if (use_cache && key_ok)
            *cache_status = cache_write(m, &L, cache_dir, key, map, total) ? MACT_PACK_CACHE_FAILED
                                                                           : MACT_PACK_CACHE_WRITTEN;
    }
    bind_all(m, &L, base, pks);
    free(rs.r);
    m->packs = pks;
    m->packs_map = map;
    m->packs_map_len = map_len;
    m->packed_bytes = total;
    m->pack_cache = *cache_status;  /* what mact_model_info reports, for a caller that packs after load (mact bench) */
    free(L.r);
    return 0;
}

void mact_model_unpack(struct mact_model *m)
{
    if (m->packs_map) munmap(m->packs_map, m->packs_map_len);
    free(m->packs);
    m->packs = NULL;
    m->packs_map = NULL;
}
