/* Packed weights: the layout the AVX-512 GEMMs read, built once per model by mact_kernels_prepare and
 * found again by the weight's data pointer.
 *
 * Layout (kernels.h, mact_packed): the N output rows of W[N, K] are cut into panels of 64; a panel holds,
 * for each pair of k (kp = k / 2), the 64 columns' (W[n, 2kp], W[n, 2kp + 1]) as bf16 pairs: 256 bytes,
 * four zmm registers, the operand order of vdpbf16ps. Rows past N and the k past an odd K are zero.
 * The fp32 kernels widen the same bytes exactly (bf16 -> fp32 is a shift), so one copy of a BF16 weight
 * serves both precisions. F32 weights get fp32 panels (64 columns per k row) for FP32 mode and rounded
 * bf16 panels for BF16 mode; F16 weights only the latter. In INT8 mode the LLM's and the action expert's
 * weights (any stored dtype) are quantized to int8 per output channel (symmetric: scale = max|W[n, :]| / 127)
 * into panels of k quads (64 columns x 4 bytes per row: vpdpbusd's operand order), followed by the
 * per-column scales and sums of the int8 values; the vision stack keeps its BF16 mode packs. An entry holds
 * up to one panel set per format.
 *
 * The table is process-wide, guarded by a rwlock; entries record their owner (the model) and a
 * fingerprint (the first and last 64 bytes of the source), checked on every lookup, so a freed model's
 * entries can never be mistaken for a new model's weights that happen to reuse an address. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kernels/kernels.h"
#include "io/npy.h"

#define FP_BYTES 64

typedef struct {
    const void *key;
    int dtype;
    int64_t N, K;
    const void *owner;
    size_t src_bytes;
    uint8_t fp[2 * FP_BYTES];
    int fp_len;
    mact_packed pk[MACT_PACK_NFMT]; /* indexed by MACT_PACK_*; data NULL when absent */
    size_t alloc_bytes[MACT_PACK_NFMT];
    struct region *rg[MACT_PACK_NFMT]; /* the arena a pack was carved from, or NULL (own allocation) */
} entry;

/* One allocation for all the packs of a mact_kernels_prepare call: a 2 MiB-aligned anonymous mapping
 * marked for transparent huge pages (few page faults while packing, few TLB misses while streaming) with
 * no per-tensor rounding; freed when its last pack is released. refs is changed under g_lock. */
typedef struct region {
    uint8_t *base;
    size_t len, used;
    int refs;
} region;

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static entry *g_tab;    /* open addressing on key; key NULL = empty, (void *)1 = tombstone */
static size_t g_cap, g_used, g_live;
static size_t g_bytes;

#define TOMB ((const void *)1)

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void fingerprint(const void *src, size_t bytes, uint8_t *fp, int *len)
{
    if (bytes <= 2 * FP_BYTES) {
        memcpy(fp, src, bytes);
        *len = (int)bytes;
        return;
    }
    memcpy(fp, src, FP_BYTES);
    memcpy(fp + FP_BYTES, (const uint8_t *)src + bytes - FP_BYTES, FP_BYTES);
    *len = 2 * FP_BYTES;
}

static int fp_matches(const entry *e)
{
    uint8_t fp[2 * FP_BYTES];
    int len;
    fingerprint(e->key, e->src_bytes, fp, &len);
    return len == e->fp_len && !memcmp(fp, e->fp, (size_t)len);
}

/* caller holds the write lock */
static int tab_grow(void)
{
    size_t ncap = g_cap ? g_cap * 2 : 1024;
    entry *nt = calloc(ncap, sizeof *nt);
    if (!nt) return -1;
    for (size_t i = 0; i < g_cap; i++) {
        if (!g_tab[i].key || g_tab[i].key == TOMB) continue;
        size_t h = hash_ptr(g_tab[i].key) & (ncap - 1);
        while (nt[h].key) h = (h + 1) & (ncap - 1);
        nt[h] = g_tab[i];
    }
    free(g_tab);
    g_tab = nt;
    g_cap = ncap;
    g_used = g_live;
    return 0;
}

static entry *tab_find(const void *key)
{
    if (!g_cap) return NULL;
    size_t h = hash_ptr(key) & (g_cap - 1);
    for (size_t n = 0; n < g_cap && g_tab[h].key; n++, h = (h + 1) & (g_cap - 1))
        if (g_tab[h].key == key) return &g_tab[h];
    return NULL;
}

static void pack_free(void *p, size_t bytes);
static void region_unref(region *rg);

static void entry_free(entry *e)
{
    for (int f = 0; f < MACT_PACK_NFMT; f++) {
        if (e->rg[f]) region_unref(e->rg[f]);
        else pack_free((void *)e->pk[f].data, e->alloc_bytes[f]);
        g_bytes -= e->alloc_bytes[f];
    }
    memset(e, 0, sizeof *e);
    e->key = TOMB;
    g_live--;
}

const mact_packed *mact_packed_find(const void *w, int dtype, int64_t N, int64_t K, int precision)
{
    const mact_packed *r = NULL;
    pthread_rwlock_rdlock(&g_lock);
    entry *e = tab_find(w);
    if (e && e->dtype == dtype && e->N == N && e->K == K && fp_matches(e)) {
        const mact_packed *b = e->pk[MACT_PACK_BF16].data ? &e->pk[MACT_PACK_BF16] : NULL;
        const mact_packed *f = e->pk[MACT_PACK_F32].data ? &e->pk[MACT_PACK_F32] : NULL;
        const mact_packed *q = e->pk[MACT_PACK_I8].data ? &e->pk[MACT_PACK_I8] : NULL;
        if (precision == MACT_PREC_INT8) r = q ? q : b ? b : f;  /* weights left out of int8 run as in BF16 */
        else if (precision == MACT_PREC_BF16) r = b ? b : f;  /* an fp32 pack computes BF16 mode in fp32 */
        else r = b && b->exact ? b : f;
    }
    pthread_rwlock_unlock(&g_lock);
    return r;
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline uint16_t src_bf16(const void *w, int dtype, int64_t i)
{
    if (dtype == MACT_BF16) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)w + 2 * i, 2);
        return h;
    }
    float f;
    if (dtype == MACT_F32) memcpy(&f, (const uint8_t *)w + 4 * i, 4);
    else {
        uint16_t h;
        memcpy(&h, (const uint8_t *)w + 2 * i, 2);
        mact_dtype_to_f32(MACT_F16, &h, 1, &f);
    }
    return f32_to_bf16(f);
}

/* Packing walks each panel in blocks of 32 k rows: the destination block (32 x 256 bytes) stays in L1
 * while the 64 source rows are read a block at a time, the next block prefetched (64 read streams are
 * more than the hardware prefetchers follow). */
#define PACK_KB 32

static void pack_into(uint16_t *dst, const void *w, int dtype, int64_t N, int64_t K, int64_t Kp, int64_t npanel)
{
#pragma omp parallel for schedule(dynamic, 1) if (N * K > (1 << 18))
    for (int64_t p = 0; p < npanel; p++) {
        uint16_t *pd = dst + p * Kp * 2 * MACT_PANEL;
        for (int64_t kp0 = 0; kp0 < Kp; kp0 += PACK_KB) {
            const int64_t kn = Kp - kp0 < PACK_KB ? Kp - kp0 : PACK_KB;
            for (int c = 0; c < MACT_PANEL; c++) {
                const int64_t n = p * MACT_PANEL + c;
                uint16_t *col = pd + kp0 * 2 * MACT_PANEL + 2 * c;
                if (n >= N) {
                    for (int64_t t = 0; t < kn; t++) col[t * 2 * MACT_PANEL] = col[t * 2 * MACT_PANEL + 1] = 0;
                    continue;
                }
                const int64_t base = n * K + 2 * kp0;
                if (2 * (kp0 + PACK_KB) < K) {
                    const uint8_t *nx = (const uint8_t *)w + (dtype == MACT_F32 ? 4 : 2) * (base + 2 * PACK_KB);
                    for (int l = 0; l < (dtype == MACT_F32 ? 4 : 2); l++) __builtin_prefetch(nx + 64 * l);
                }
                /* pairs fully inside K; the last pair of an odd K gets a zero partner */
                const int64_t full = (K - 2 * kp0) / 2 < kn ? (K - 2 * kp0) / 2 : kn;
                if (dtype == MACT_BF16) {
                    const uint8_t *src = (const uint8_t *)w + 2 * base;
                    for (int64_t t = 0; t < full; t++) memcpy(col + t * 2 * MACT_PANEL, src + 4 * t, 4);
                } else
                    for (int64_t t = 0; t < full; t++) {
                        col[t * 2 * MACT_PANEL] = src_bf16(w, dtype, base + 2 * t);
                        col[t * 2 * MACT_PANEL + 1] = src_bf16(w, dtype, base + 2 * t + 1);
                    }
                if (full < kn) {
                    col[full * 2 * MACT_PANEL] = src_bf16(w, dtype, base + 2 * full);
                    col[full * 2 * MACT_PANEL + 1] = 0;
                }
            }
        }
    }
}

static inline float src_f32(const void *w, int dtype, int64_t i)
{
    float f;
    if (dtype == MACT_F32) memcpy(&f, (const uint8_t *)w + 4 * i, 4);
    else {
        uint16_t h;
        memcpy(&h, (const uint8_t *)w + 2 * i, 2);
        if (dtype == MACT_BF16) {
            uint32_t u = (uint32_t)h << 16;
            memcpy(&f, &u, 4);
        } else
            mact_dtype_to_f32(MACT_F16, &h, 1, &f);
    }
    return f;
}

/* int8 panels: a panel (64 x K bytes, L2-resident) is filled one source row at a time */
static void pack_into_i8(int8_t *dst, float *scale, int32_t *colsum, const void *w, int dtype, int64_t N, int64_t K,
                         int64_t Kq, int64_t npanel)
{
#pragma omp parallel for schedule(dynamic, 1) if (N * K > (1 << 18))
    for (int64_t p = 0; p < npanel; p++) {
        int8_t *pd = dst + p * Kq * 256;
        for (int c = 0; c < MACT_PANEL; c++) {
            const int64_t n = p * MACT_PANEL + c;
            float amax = 0.f;
            if (n < N)
                for (int64_t k = 0; k < K; k++) {
                    float a = fabsf(src_f32(w, dtype, n * K + k));
                    amax = a > amax ? a : amax;
                }
            const float inv = amax > 0.f ? 127.f / amax : 0.f;
            int32_t sum = 0;
            for (int64_t k = 0; k < 4 * Kq; k++) {
                int8_t q = 0;
                if (n < N && k < K) {
                    float r = nearbyintf(src_f32(w, dtype, n * K + k) * inv);
                    q = (int8_t)(r > 127.f ? 127 : r < -127.f ? -127 : r);
                }
                pd[(k / 4) * 256 + 4 * c + (k % 4)] = q;
                sum += q;
            }
            scale[n] = amax / 127.f;
            colsum[n] = sum;
        }
    }
}

static void pack_into_f32(float *dst, const float *w, int64_t N, int64_t K, int64_t npanel)
{
#pragma omp parallel for schedule(dynamic, 1) if (N * K > (1 << 18))
    for (int64_t p = 0; p < npanel; p++) {
        float *pd = dst + p * K * MACT_PANEL;
        for (int64_t k0 = 0; k0 < K; k0 += PACK_KB) {
            const int64_t kn = K - k0 < PACK_KB ? K - k0 : PACK_KB;
            for (int c = 0; c < MACT_PANEL; c++) {
                const int64_t n = p * MACT_PANEL + c;
                float *col = pd + k0 * MACT_PANEL + c;
                if (n < N && k0 + PACK_KB < K) {
                    const uint8_t *nx = (const uint8_t *)w + 4 * (n * K + k0 + PACK_KB);
                    __builtin_prefetch(nx);
                    __builtin_prefetch(nx + 64);
                }
                if (n >= N)
                    for (int64_t t = 0; t < kn; t++) col[t * MACT_PANEL] = 0.f;
                else
                    for (int64_t t = 0; t < kn; t++)
                        memcpy(&col[t * MACT_PANEL], (const uint8_t *)w + 4 * (n * K + k0 + t), 4);
            }
        }
    }
}

/* Large packs go to 2 MiB-aligned anonymous mappings marked for transparent huge pages (512x fewer page
 * faults while packing, fewer TLB misses while streaming); small ones to the heap. */
#define BIG_ALLOC ((size_t)4 << 20)

static void *pack_alloc(size_t bytes)
{
    if (bytes >= BIG_ALLOC) {
        size_t len = (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        mact_advise_huge(p, len);
        return p;
    }
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) ? NULL : p;
}

static void pack_free(void *p, size_t bytes)
{
    if (!p) return;
    if (bytes >= BIG_ALLOC) munmap(p, (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1));
    else free(p);
}

#define HUGE ((size_t)2 << 20)

static region *region_new(size_t bytes)
{
    region *rg = calloc(1, sizeof *rg);
    if (!rg) return NULL;
    rg->len = (bytes + HUGE - 1) & ~(HUGE - 1);
    void *p = mmap(NULL, rg->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { free(rg); return NULL; }
    mact_advise_huge(p, rg->len);
    rg->base = p;
    rg->refs = 1;  /* the preparing call's own reference */
    return rg;
}

/* caller holds g_lock (or owns rg exclusively) */
static void region_unref(region *rg)
{
    if (--rg->refs) return;
    munmap(rg->base, rg->len);
    free(rg);
}

static void *region_take(region *rg, size_t bytes)
{
    if (!rg || rg->used + bytes > rg->len) return NULL;
    void *p = rg->base + rg->used;
    rg->used += (bytes + 63) & ~(size_t)63;
    return p;  /* the entry that keeps it takes a reference when registered */
}

/* map the source's pages in one call before reading them (fewer faults); a no-op where unsupported */
static void populate_source(const void *p, size_t bytes)
{
#ifdef MADV_POPULATE_READ
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~((uintptr_t)pg - 1), hi = (uintptr_t)p + bytes;
    if (bytes >= BIG_ALLOC) madvise((void *)lo, hi - lo, MADV_POPULATE_READ);
#else
    (void)p;
    (void)bytes;
#endif
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

/* The format a weight is packed into for a precision, and its bytes; 0 when it is not packable. */
static int pack_plan(const void *w, int dtype, int64_t N, int64_t K, int precision, int *fmt, size_t *bytes)
{
    if (!w || N <= 0 || K <= 0) return 0;
    if (dtype != MACT_BF16 && dtype != MACT_F32 && dtype != MACT_F16) return 0;
    if (dtype == MACT_F16 && precision == MACT_PREC_FP32) return 0;  /* fp32 mode reads F16 weights as stored */
    const int64_t np = (N + MACT_PANEL - 1) / MACT_PANEL;
    if (precision == MACT_PREC_INT8) {
        *fmt = MACT_PACK_I8;
        /* panels of 256-byte quad rows, then scale and colsum, 64 per panel each */
        *bytes = (size_t)np * (size_t)((K + 3) / 4) * 256 + (size_t)np * MACT_PANEL * 8;
        return 1;
    }
    *fmt = dtype == MACT_F32 && precision == MACT_PREC_FP32 ? MACT_PACK_F32 : MACT_PACK_BF16;
    const int64_t Kp = *fmt == MACT_PACK_F32 ? K : (K + 1) / 2;
    *bytes = (size_t)np * (size_t)Kp * MACT_PANEL * 4;  /* a row is 64 fp32 or 64 bf16 pairs */
    return 1;
}

static int have_pack(const void *w, int dtype, int64_t N, int64_t K, int fmt)
{
    pthread_rwlock_rdlock(&g_lock);
    entry *e = tab_find(w);
    int have = e && e->dtype == dtype && e->N == N && e->K == K && fp_matches(e) && e->pk[fmt].data;
    pthread_rwlock_unlock(&g_lock);
    return have;
}

/* The packed layout of a weight at buf (panels, then for MACT_PACK_I8 the scales and column sums). */
static mact_packed describe_pack(const void *buf, int dtype, int64_t N, int64_t K, int fmt)
{
    const int64_t Kp = fmt == MACT_PACK_F32 ? K : fmt == MACT_PACK_I8 ? (K + 3) / 4 : (K + 1) / 2;
    const int64_t np = (N + MACT_PANEL - 1) / MACT_PANEL;
    mact_packed pk = {.N = N, .K = K, .Kp = Kp, .npanel = np, .fmt = fmt,
                      .exact = fmt != MACT_PACK_I8 && (dtype == MACT_BF16 || fmt == MACT_PACK_F32), .data = buf};
    if (fmt == MACT_PACK_I8) {
        pk.scale = (const float *)((const uint8_t *)buf + (size_t)np * (size_t)Kp * 256);
        pk.colsum = (const int32_t *)(pk.scale + np * MACT_PANEL);
    }
    return pk;
}

static int register_pack(const void *owner, const void *w, int dtype, int64_t N, int64_t K, const mact_packed *pk,
                         size_t bytes, region *from, const ranges *rs);

/* rg: carve the pack from this arena when it has room (else a separate allocation) */
static int pack_one(const void *owner, const void *w, int dtype, int64_t N, int64_t K, int precision,
                    const ranges *rs, region *rg)
{
    int fmt;
    size_t bytes;
    if (!pack_plan(w, dtype, N, K, precision, &fmt, &bytes)) return 1;
    size_t esz = dtype == MACT_F32 ? 4 : 2, src_bytes = (size_t)N * (size_t)K * esz;
    if (have_pack(w, dtype, N, K, fmt)) return 0;
    void *buf = region_take(rg, bytes);
    region *from = buf ? rg : NULL;
    if (!buf) buf = pack_alloc(bytes);
    if (!buf) return MACT_ERR_NOMEM;
    populate_source(w, src_bytes);
    mact_packed pk = describe_pack(buf, dtype, N, K, fmt);
    const int64_t Kp = pk.Kp, np = pk.npanel;
    if (fmt == MACT_PACK_F32) pack_into_f32(buf, w, N, K, np);
    else if (fmt == MACT_PACK_I8) pack_into_i8(buf, (float *)pk.scale, (int32_t *)pk.colsum, w, dtype, N, K, Kp, np);
    else pack_into(buf, w, dtype, N, K, Kp, np);
    return register_pack(owner, w, dtype, N, K, &pk, bytes, from, rs);
}

/* Enters pk (bytes long, carved from region `from` or an own allocation when NULL) into the table for w and
 * drops w's file pages when rs is given. When w already has a pack of that format, pk is discarded. */
static int register_pack(const void *owner, const void *w, int dtype, int64_t N, int64_t K, const mact_packed *pkp,
                         size_t bytes, region *from, const ranges *rs)
{
    const mact_packed pk = *pkp;
    const int fmt = pk.fmt;
    void *buf = (void *)pk.data;
    const size_t src_bytes = (size_t)N * (size_t)K * (dtype == MACT_F32 ? 4 : 2);
    pthread_rwlock_wrlock(&g_lock);
    entry *e = tab_find(w);
    if (e && !(e->dtype == dtype && e->N == N && e->K == K && fp_matches(e))) {
        entry_free(e);  /* a stale entry (freed model at the same address) or a different shape */
        e = NULL;
    }
    if (!e && (g_used + 1) * 2 > g_cap && tab_grow()) e = (entry *)-1;
    if (e == (entry *)-1 || (e && e->pk[fmt].data)) {  /* out of memory, or packed concurrently by another caller */
        if (!from) pack_free(buf, bytes);  /* a slice of the arena is simply left unused */
        pthread_rwlock_unlock(&g_lock);
        return e == (entry *)-1 ? MACT_ERR_NOMEM : 0;
    }
    if (!e) {
        size_t h = hash_ptr(w) & (g_cap - 1);
        while (g_tab[h].key && g_tab[h].key != TOMB) h = (h + 1) & (g_cap - 1);
        if (!g_tab[h].key) g_used++;
        e = &g_tab[h];
        memset(e, 0, sizeof *e);
        e->key = w;
        e->dtype = dtype;
        e->N = N;
        e->K = K;
        e->owner = owner;
        e->src_bytes = src_bytes;
        fingerprint(w, src_bytes, e->fp, &e->fp_len);
        g_live++;
    }
    e->pk[fmt] = pk;
    e->alloc_bytes[fmt] = bytes;
    e->rg[fmt] = from;
    if (from) from->refs++;
    g_bytes += bytes;
    pthread_rwlock_unlock(&g_lock);
    if (rs) drop_source(rs, w, src_bytes);
    return 0;
}

int mact_pack_weight(const void *owner, const void *w, int dtype, int64_t N, int64_t K, int precision, int drop)
{
    if (mact_isa_get() < MACT_ISA_AVX512) return 1;
    ranges rs = {0};
    if (drop) file_ranges(&rs);
    int rc = pack_one(owner, w, dtype, N, K, precision, drop ? &rs : NULL, NULL);
    free(rs.r);
    return rc;
}

void mact_kernels_release_owner(const void *owner)
{
    pthread_rwlock_wrlock(&g_lock);
    for (size_t i = 0; i < g_cap; i++)
        if (g_tab[i].key && g_tab[i].key != TOMB && g_tab[i].owner == owner) entry_free(&g_tab[i]);
    pthread_rwlock_unlock(&g_lock);
}

void mact_kernels_release(const struct mact_model *m) { mact_kernels_release_owner(m); }

size_t mact_packed_bytes(void)
{
    pthread_rwlock_rdlock(&g_lock);
    size_t b = g_bytes;
    pthread_rwlock_unlock(&g_lock);
    return b;
}

/* Calls f(tensor, ctx, lm) for every 2-D weight mact_matmul reads; lm = 1 for the LLM's and the action
 * expert's (the weights INT8 mode quantizes), 0 for the vision stack's. */
static void for_each_weight(struct mact_model *m, void (*f)(const mact_tensor *, void *, int), void *ctx)
{
    const mact_config *c = &m->cfg;
#define PK(t) f((t), ctx, 0)
    const mact_vision_weights *v = &m->vis;
    PK(&v->patch_w);
    for (int j = 0; v->blocks && j < c->vit_layers; j++) {
        const mact_vit_block *b = &v->blocks[j];
        PK(&b->wq); PK(&b->wk); PK(&b->wv); PK(&b->wo); PK(&b->w1); PK(&b->w2);
    }
    PK(&v->pool_wq); PK(&v->pool_wk); PK(&v->pool_wv); PK(&v->pool_wo);
    PK(&v->proj_w1); PK(&v->proj_w3); PK(&v->proj_w2);
    PK(&v->scout0_w); PK(&v->scout2_w); PK(&v->coord2_w);
#undef PK
#define PK(t) f((t), ctx, 1)
    for (int l = 0; m->llm.blocks && l < c->n_layers; l++) {
        const mact_llm_block *b = &m->llm.blocks[l];
        PK(&b->att_proj); PK(&b->attn_out); PK(&b->ff_proj); PK(&b->ff_out);
    }
    const mact_ae_weights *a = &m->ae;
    PK(&a->time1_w); PK(&a->time3_w); PK(&a->action_embed_w); PK(&a->ctx_k); PK(&a->ctx_v);
    for (int l = 0; a->blocks && l < c->ae_layers; l++) {
        const mact_ae_block *b = &a->blocks[l];
        PK(&b->qkv_w); PK(&b->out_w); PK(&b->xq_w); PK(&b->xo_w); PK(&b->gate_w); PK(&b->up_w); PK(&b->down_w);
        PK(&b->mod_w);
    }
    PK(&a->fmod_w); PK(&a->final_w);
#undef PK
}

typedef struct {
    struct mact_model *m;
    int precision, rc;
    size_t total;
    const ranges *rs;
    region *rg;
} prep_ctx;

/* the precision a weight is packed for: INT8 mode quantizes only the LLM and the action expert, and only
 * where the CPU has AVX512-VNNI (the plain-C int8 kernel would be tens of times slower than bf16: without
 * VNNI, INT8 mode runs as BF16) */
static int weight_precision(int precision, int lm)
{
    return precision == MACT_PREC_INT8 && (!lm || !mact_has_vnni()) ? MACT_PREC_BF16 : precision;
}

static void count_one(const mact_tensor *t, void *arg, int lm)
{
    prep_ctx *p = arg;
    int fmt;
    size_t bytes;
    if (!t->data || t->ndim != 2) return;
    if (!pack_plan(t->data, t->dtype, t->shape[0], t->shape[1], weight_precision(p->precision, lm), &fmt, &bytes))
        return;
    if (!have_pack(t->data, t->dtype, t->shape[0], t->shape[1], fmt)) p->total += (bytes + 63) & ~(size_t)63;
}

static void prep_one(const mact_tensor *t, void *arg, int lm)
{
    prep_ctx *p = arg;
    if (p->rc || !t->data || t->ndim != 2) return;
    int r = pack_one(p->m, t->data, t->dtype, t->shape[0], t->shape[1], weight_precision(p->precision, lm), p->rs,
                     p->rg);
    if (r < 0) p->rc = r;
}

/* ---- on-disk cache of a model's packs ----
 * File <dir>/mact-<precision>-<key>.pack: a header, one table row per distinct packed weight in the order
 * for_each_weight visits them, then (at a page boundary) the bytes of the preparing call's arena, which hold
 * every pack at the table's offsets. The key hashes the pack format version, the precision, every regular
 * file of the model directory (name, size, mtime) and each weight's dtype, shape and fingerprint, so an edited
 * checkpoint (or adapter) never matches an old cache. A file that fails any check is ignored (and replaced);
 * it is written to a temporary name and renamed, so readers never see a partial file. */
#define PC_MAGIC "MACTPAK1"
#define PC_VERSION 1u

typedef struct {
    char magic[8];
    uint32_t version, precision;
    uint64_t key, n, data_off, data_len, table_crc;
} pc_header;

typedef struct {
    int32_t dtype, fmt;
    int64_t N, K;
    uint64_t off, bytes;
} pc_row;

typedef struct {
    struct mact_model *m;
    int precision;
    uint64_t key;
    pc_row *rows;
    const void **keys;  /* the weight of each row, to skip a weight visited twice */
    size_t n, cap;
    int bad;
    region *rg;         /* writing: the arena the packs must lie in */
} pc_ctx;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int seen_key(const pc_ctx *c, const void *w)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->keys[i] == w) return 1;
    return 0;
}

/* the table this model and precision need (offsets filled in by the writer) and the key */
static void pc_plan_one(const mact_tensor *t, void *arg, int lm)
{
    pc_ctx *c = arg;
    int fmt;
    size_t bytes;
    if (c->bad || !t->data || t->ndim != 2) return;
    if (!pack_plan(t->data, t->dtype, t->shape[0], t->shape[1], weight_precision(c->precision, lm), &fmt, &bytes)) return;
    if (seen_key(c, t->data)) return;
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 256;
        pc_row *nr = realloc(c->rows, nc * sizeof *nr);
        const void **nk = nr ? realloc(c->keys, nc * sizeof *nk) : NULL;
        if (nr) c->rows = nr;
        if (!nr || !nk) { c->bad = 1; return; }
        c->keys = nk;
        c->cap = nc;
    }
    pc_row r = {.dtype = t->dtype, .fmt = fmt, .N = t->shape[0], .K = t->shape[1], .bytes = bytes};
    c->rows[c->n] = r;
    c->keys[c->n++] = t->data;
    uint8_t fp[2 * FP_BYTES];
    int len;
    fingerprint(t->data, (size_t)r.N * (size_t)r.K * (t->dtype == MACT_F32 ? 4 : 2), fp, &len);
    c->key = fnv(c->key, &r.dtype, sizeof r.dtype);
    c->key = fnv(c->key, &r.fmt, sizeof r.fmt);
    c->key = fnv(c->key, &r.N, sizeof r.N);
    c->key = fnv(c->key, &r.K, sizeof r.K);
    c->key = fnv(c->key, fp, (size_t)len);
}

static int pc_plan(pc_ctx *c, struct mact_model *m, int precision)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->precision = precision;
    c->key = 0xcbf29ce484222325ULL;
    const uint32_t v = PC_VERSION;
    c->key = fnv(c->key, &v, sizeof v);
    c->key = fnv(c->key, &precision, sizeof precision);
    /* the model directory's files, sorted by name (readdir order is not stable) */
    struct dirent **list = NULL;
    int nf = scandir(m->dir, &list, NULL, alphasort);
    for (int i = 0; i < nf; i++) {
        char path[8192];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", m->dir, list[i]->d_name);
        if (!stat(path, &st) && S_ISREG(st.st_mode)) {
            int64_t meta[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
            c->key = fnv(c->key, list[i]->d_name, strlen(list[i]->d_name) + 1);
            c->key = fnv(c->key, meta, sizeof meta);
        }
        free(list[i]);
    }
    free(list);
    if (nf < 0) return -1;
    for_each_weight(m, pc_plan_one, c);
    return c->bad ? -1 : 0;
}

static void pc_free(pc_ctx *c)
{
    free(c->rows);
    free(c->keys);
}

static void pc_path(char *out, size_t len, const char *dir, int precision, uint64_t key)
{
    snprintf(out, len, "%s/mact-%s-%016llx.pack", dir, mact_precision_name(precision), (unsigned long long)key);
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

/* after a prepare that packed every weight into rg: write the cache file (0, or -1 when it could not) */
static int pc_write(pc_ctx *c, const char *dir, region *rg)
{
    if (!rg) return -1;
    for (size_t i = 0; i < c->n; i++) {
        const mact_packed *pk = mact_packed_find(c->keys[i], c->rows[i].dtype, c->rows[i].N, c->rows[i].K,
                                                 c->rows[i].fmt == MACT_PACK_I8    ? MACT_PREC_INT8
                                                 : c->rows[i].fmt == MACT_PACK_F32 ? MACT_PREC_FP32
                                                                                   : MACT_PREC_BF16);
        const uint8_t *d = pk ? pk->data : NULL;
        if (!pk || pk->fmt != c->rows[i].fmt || d < rg->base || d + c->rows[i].bytes > rg->base + rg->used) return -1;
        c->rows[i].off = (uint64_t)(d - rg->base);
    }
    pc_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PC_MAGIC, 8);
    h.version = PC_VERSION;
    h.precision = (uint32_t)c->precision;
    h.key = c->key;
    h.n = c->n;
    h.data_off = (sizeof h + c->n * sizeof(pc_row) + 4095) & ~(uint64_t)4095;
    h.data_len = rg->used;
    h.table_crc = fnv(0xcbf29ce484222325ULL, c->rows, c->n * sizeof(pc_row));
    char path[8192], tmp[8300];
    pc_path(path, sizeof path, dir, c->precision, c->key);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    static const uint8_t zeros[4096];
    size_t head = sizeof h + c->n * sizeof(pc_row);
    int bad = write_all(fd, &h, sizeof h) || write_all(fd, c->rows, c->n * sizeof(pc_row)) ||
              write_all(fd, zeros, (size_t)h.data_off - head) || write_all(fd, rg->base, rg->used);
    if (close(fd)) bad = 1;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* map a valid cache file and register its packs: 1 when used, 0 when absent or invalid (nothing registered) */
static int pc_load(pc_ctx *c, const char *dir, const ranges *rs)
{
    char path[8192];
    pc_path(path, sizeof path, dir, c->precision, c->key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    pc_header h;
    pc_row *rows = NULL;
    int ok = !fstat(fd, &st) && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && !memcmp(h.magic, PC_MAGIC, 8) &&
             h.version == PC_VERSION && h.precision == (uint32_t)c->precision && h.key == c->key && h.n == c->n &&
             h.data_off % 4096 == 0 && h.data_off >= sizeof h + h.n * sizeof(pc_row) &&
             (uint64_t)st.st_size == h.data_off + h.data_len;
    if (ok) {
        rows = malloc(c->n * sizeof *rows + 1);
        ok = rows && pread(fd, rows, c->n * sizeof *rows, sizeof h) == (ssize_t)(c->n * sizeof *rows) &&
             fnv(0xcbf29ce484222325ULL, rows, c->n * sizeof *rows) == h.table_crc;
    }
    for (size_t i = 0; ok && i < c->n; i++)
        ok = rows[i].dtype == c->rows[i].dtype && rows[i].fmt == c->rows[i].fmt && rows[i].N == c->rows[i].N &&
             rows[i].K == c->rows[i].K && rows[i].bytes == c->rows[i].bytes && rows[i].off % 64 == 0 &&
             rows[i].off <= h.data_len && rows[i].bytes <= h.data_len - rows[i].off;
    void *map = MAP_FAILED;
    if (ok) map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (!ok || map == MAP_FAILED) {
        free(rows);
        return 0;
    }
    region *rg = calloc(1, sizeof *rg);
    if (!rg) {
        munmap(map, (size_t)st.st_size);
        free(rows);
        return 0;
    }
    rg->base = map;
    rg->len = rg->used = (size_t)st.st_size;
    rg->refs = 1;
    const uint8_t *data = (const uint8_t *)map + h.data_off;
    for (size_t i = 0; i < c->n; i++) {
        mact_packed pk = describe_pack(data + rows[i].off, rows[i].dtype, rows[i].N, rows[i].K, rows[i].fmt);
        /* a weight packed already (by an earlier prepare) keeps its pack; the mapping then just goes unused */
        if (register_pack(c->m, c->keys[i], rows[i].dtype, rows[i].N, rows[i].K, &pk, rows[i].bytes, rg, rs) < 0) break;
    }
    pthread_rwlock_wrlock(&g_lock);
    region_unref(rg);  /* the registered packs hold the remaining references */
    pthread_rwlock_unlock(&g_lock);
    free(rows);
    return 1;
}

int mact_kernels_prepare_cached(struct mact_model *m, int precision, const char *cache_dir, int *cache_status, char *err,
                                size_t errlen)
{
    if (cache_status) *cache_status = MACT_PACK_CACHE_NONE;
    if (mact_isa_get() < MACT_ISA_AVX512) return 0;  /* only the AVX-512 kernels read packed weights */
    ranges rs;
    file_ranges(&rs);
    pc_ctx pc;
    int use_cache = cache_dir && *cache_dir && !pc_plan(&pc, m, precision);
    if (cache_dir && *cache_dir && !use_cache) {
        pc_free(&pc);
        if (cache_status) *cache_status = MACT_PACK_CACHE_FAILED;
    }
    if (use_cache && pc_load(&pc, cache_dir, &rs)) {
        if (cache_status) *cache_status = MACT_PACK_CACHE_LOADED;
        use_cache = 0;  /* anything the cache did not hold (nothing, normally) is packed below */
        pc_free(&pc);
    }
    prep_ctx p = {.m = m, .precision = precision, .rs = &rs};
    for_each_weight(m, count_one, &p);
    if (p.total) p.rg = region_new(p.total);  /* NULL: every pack gets its own allocation */
    for_each_weight(m, prep_one, &p);
    if (use_cache) {
        int w = p.rc ? -1 : pc_write(&pc, cache_dir, p.rg);
        if (cache_status) *cache_status = w ? MACT_PACK_CACHE_FAILED : MACT_PACK_CACHE_WRITTEN;
        pc_free(&pc);
    }
    if (p.rg) {
        pthread_rwlock_wrlock(&g_lock);
        region_unref(p.rg);  /* the packs hold the remaining references */
        pthread_rwlock_unlock(&g_lock);
    }
    free(rs.r);
    if (p.rc) {
        if (err && errlen) snprintf(err, errlen, "out of memory packing the weights (%zu MiB packed so far)",
                                    mact_packed_bytes() >> 20);
        return p.rc;
    }
    return 0;
}

int mact_kernels_prepare(struct mact_model *m, int precision, char *err, size_t errlen)
{
    return mact_kernels_prepare_cached(m, precision, NULL, NULL, err, errlen);
}
