/* Parquet writer for test data (development code, not in libmact): pyarrow's layout by default (OPTIONAL
 * columns, 3-level LIST, one PLAIN dictionary page then RLE_DICTIONARY V1 data pages, SNAPPY), with the
 * variants the reader must handle: PLAIN pages, a dictionary->PLAIN fallback mid-chunk, several pages and
 * row groups, V2 pages, UNCOMPRESSED/GZIP/ZSTD. */
#ifndef MACT_DEV_PQ_WRITE_H
#define MACT_DEV_PQ_WRITE_H
#include <stddef.h>
#include <stdint.h>

enum { PQW_F32 = 0, PQW_F64, PQW_I32, PQW_I64, PQW_BOOL, PQW_STRING,
       PQW_F32_LIST,    /* fixed-width float lists: data = float[n_rows * width] */
       PQW_F64_LIST,    /* double[n_rows * width] */
       PQW_STRING_LIST, /* data = const char *[sum counts], counts = int[n_rows] */
       PQW_IMAGE };     /* {bytes, path} struct: data = const uint8_t *[n_rows], lens = size_t[n_rows],
                           paths = const char *[n_rows] */

typedef struct {
    const char *name;
    int kind;
    int width;
    const void *data;
    const int *counts;
    const size_t *lens;
    const char *const *paths;
} pqw_column;

typedef struct {
    int codec;               /* 0 none, 1 SNAPPY (default when zeroed? no: set it), 2 GZIP, 6 ZSTD */
    int plain;               /* 1: no dictionary, PLAIN pages */
    int64_t dict_max;        /* > 0: after this many dictionary entries the chunk falls back to PLAIN pages */
    int64_t page_rows;       /* rows per data page; 0: the whole chunk in one page */
    int page_v2;             /* DataPageHeaderV2 pages */
    const int64_t *rg_rows;  /* rows of each row group (sum = n_rows); NULL: one row group */
    int n_rg;
    const char *const *kv;   /* key, value, key, value, ... (n_kv pairs) */
    int n_kv;
    int corrupt;             /* tests: PQW_BAD_* */
} pqw_options;

/* Deliberate defects for the reader's error tests */
enum { PQW_OK = 0, PQW_BAD_DICT_SHORT, /* the dictionary page declares one entry fewer than indexed */
       PQW_BAD_PAGE_PAST_CHUNK,       /* the first data page's compressed size runs past the chunk */
       PQW_BAD_DELTA,                 /* data pages labelled DELTA_BINARY_PACKED */
       PQW_BAD_BSS,                   /* data pages labelled BYTE_STREAM_SPLIT */
       PQW_BAD_BROTLI };              /* chunks labelled BROTLI */

int mact_pqw_write(const char *path, const pqw_column *cols, int n_cols, int64_t n_rows, const pqw_options *o,
                   char *err, size_t errlen);
#endif
