/* libFuzzer target for the parquet reader (src/data/parquet.c): the input is a whole file image. Accepted
 * files have every leaf column decoded in every row group, with small caps on values and page sizes so a
 * tiny input cannot demand a large allocation; decoded columns are walked end to end (row offsets
 * monotonic and inside the values, byte offsets inside the bytes). Failures must leave a message.
 * Build/run: see fuzz/README.md. */
#include "data/parquet.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    mact_pq_file *f = NULL;
    mact_pq_options o = {.max_values = 1 << 16, .max_page_bytes = 1 << 20, .max_bytes = 1 << 24};
    err[0] = 0;
    if (mact_pq_open_mem(data, size, "fuzz", &o, &f, err, sizeof err) != 0) {
        if (f != NULL || err[0] == 0 || memchr(err, 0, sizeof err) == NULL) __builtin_trap();
        return 0;
    }
    volatile uint64_t sink = 0;
    for (int li = 0; li < mact_pq_num_leaves(f); li++) {
        for (int rg = -1; rg < mact_pq_num_row_groups(f) && rg < 4; rg++) {
            mact_pq_column c;
            err[0] = 0;
            if (mact_pq_read(f, li, rg, &c, err, sizeof err)) {
                if (err[0] == 0) __builtin_trap();
                mact_pq_column_free(&c);
                continue;
            }
            if (c.row_start[0] != 0 || c.row_start[c.n_rows] != c.n_values) __builtin_trap();
            for (int64_t r = 0; r < c.n_rows; r++)
                if (c.row_start[r + 1] < c.row_start[r]) __builtin_trap();
            if (c.bytes || c.boff) {
                for (int64_t i = 0; i < c.n_values; i++) {
                    if (c.boff[i + 1] < c.boff[i]) __builtin_trap();
                    if (c.boff[i + 1] > c.boff[i]) sink ^= c.bytes[c.boff[i + 1] - 1];
                }
            } else
                for (int64_t i = 0; i < c.n_values; i++) {
                    double v = mact_pq_value_f64(&c, i);
                    uint64_t b;
                    memcpy(&b, &v, sizeof b);
                    sink += b;
                }
            mact_pq_column_free(&c);
        }
    }
    (void)sink;
    mact_pq_close(f);
    return 0;
}
