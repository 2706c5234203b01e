/* Parquet reader for what LeRobot's writers (pyarrow / parquet-cpp-arrow) produce, docs/spec/datasets.md 3.2-3.3:
 * the Thrift compact footer and page headers, V1 and V2 data pages, PLAIN and RLE_DICTIONARY values (with
 * the writer's fallback to PLAIN pages mid-chunk), RLE/bit-packed levels, flat columns and one level of
 * LIST (3-level or legacy 2-level), structs of leaves (the {bytes, path} image struct), UNCOMPRESSED,
 * SNAPPY, GZIP and ZSTD. Anything else (DELTA_*, BYTE_STREAM_SPLIT, nested lists, LZ4, INT96, ...) is an
 * error naming the file, the column and what is unsupported.
 *
 * The input is untrusted: every offset and length is checked against the file, the chunk and the page;
 * decoded sizes are capped (mact_pq_options) and buffers grow only with values actually decoded. The reader
 * never exits or aborts; every error names the file and, past the footer, the column. */
#ifndef MACT_IO_PARQUET_H
#define MACT_IO_PARQUET_H
#include <stddef.h>
#include <stdint.h>

/* Physical types (parquet.thrift Type). */
enum { MACT_PQ_BOOLEAN = 0, MACT_PQ_INT32, MACT_PQ_INT64, MACT_PQ_INT96, MACT_PQ_FLOAT, MACT_PQ_DOUBLE,
       MACT_PQ_BYTE_ARRAY, MACT_PQ_FIXED_LEN_BYTE_ARRAY };

typedef struct {
    int64_t max_values;     /* values (levels) decoded per column chunk; 0: 1<<28 */
    int64_t max_page_bytes; /* one page, uncompressed; 0: 1<<30 */
    int64_t max_bytes;      /* BYTE_ARRAY value bytes per decoded column; 0: 1<<32 */
} mact_pq_options;

typedef struct mact_pq_file mact_pq_file;

/* One leaf column of the schema. */
typedef struct {
    char path[512];     /* dotted, from the top-level field: "action.list.element", "image.bytes" */
    char top[256];      /* the top-level field's whole name (may hold '.' and '/') */
    char sub[256];      /* the path below it ("list.element", "bytes"; "" for a flat column) */
    int type;           /* MACT_PQ_* */
    int type_length;    /* FIXED_LEN_BYTE_ARRAY */
    int max_def, max_rep;
    int converted_type; /* -1 when absent; 0 UTF8, 3 LIST, ... */
    int is_string;      /* BYTE_ARRAY annotated UTF8 / STRING */
    int list_def;       /* max_rep 1: definition level at which the list has an element */
} mact_pq_leaf;

/* A decoded column: n_rows rows; row r holds values [row_start[r], row_start[r+1]) (0 or 1 for flat
 * columns); row_null[r] when the row (scalar, list or struct) is null. Fixed-width values are in `vals`
 * (BOOLEAN as uint8_t, INT32 int32_t, INT64 int64_t, FLOAT float, DOUBLE double); BYTE_ARRAY and
 * FIXED_LEN_BYTE_ARRAY values are bytes[boff[i] .. boff[i+1]). */
typedef struct {
    int type;
    int64_t n_rows, n_values;
    int64_t *row_start;
    uint8_t *row_null;
    void *vals;
    uint8_t *bytes;
    int64_t *boff;
} mact_pq_column;

/* Opens a file (mmapped, read-only). name in errors: the path. */
int mact_pq_open(const char *path, const mact_pq_options *o, mact_pq_file **out, char *err, size_t errlen);
/* Parses an in-memory image (not copied: it must outlive the handle); name is used in errors. */
int mact_pq_open_mem(const uint8_t *data, size_t size, const char *name, const mact_pq_options *o,
                     mact_pq_file **out, char *err, size_t errlen);
void mact_pq_close(mact_pq_file *f);

int64_t mact_pq_num_rows(const mact_pq_file *f);
int mact_pq_num_row_groups(const mact_pq_file *f);
int64_t mact_pq_row_group_rows(const mact_pq_file *f, int rg);
int mact_pq_num_leaves(const mact_pq_file *f);
const mact_pq_leaf *mact_pq_leaf_at(const mact_pq_file *f, int i);
const char *mact_pq_created_by(const mact_pq_file *f);  /* "" when absent */
/* Key-value metadata value for key, or NULL; *len its length. */
const char *mact_pq_kv(const mact_pq_file *f, const char *key, size_t *len);
/* The leaf of top-level field `name` (whole-string match); sub selects a struct member ("bytes") or NULL
 * for a field with exactly one leaf. -1 when absent or ambiguous. */
int mact_pq_find(const mact_pq_file *f, const char *name, const char *sub);

/* Decodes leaf `leaf` of row group rg (rg < 0: every row group, concatenated) into *col (zeroed first;
 * free with mact_pq_column_free, also after a failure). */
int mact_pq_read(mact_pq_file *f, int leaf, int rg, mact_pq_column *col, char *err, size_t errlen);
void mact_pq_column_free(mact_pq_column *col);

/* Value i of a numeric column (BOOLEAN, INT32, INT64, FLOAT, DOUBLE) as a double. */
double mact_pq_value_f64(const mact_pq_column *c, int64_t i);

/* Reads a numeric column whose every row holds exactly `width` values (width 1: a scalar or a 1-element
 * list) into out[n_rows * width] (malloc'd); a null row, a row of another length or a non-numeric type is
 * an error naming the column and the row. */
int mact_pq_read_f64(mact_pq_file *f, const char *name, int rg, int width, double **out, int64_t *n_rows,
                     char *err, size_t errlen);
#endif
