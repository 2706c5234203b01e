/* .npy / .npz reading for golden files and tensor dumps (writing, development code, is
 * src/export/npz_write.h).
 *
 * Supported element types (little-endian): f4 f8 f2 i8 i4 i2 i1 u1 u2 u4 u8 b1, mapped onto the
 * MACT_* dtype enum of safetensors.h. Big-endian, structured and object arrays are rejected.
 * fortran_order=True arrays are accepted and transposed to C order on read, so a mact_array is always
 * C-contiguous; writers always produce C order.
 *
 * npz: the zip layer is libzip. Members stored (method 0) or deflated (method 8), data descriptors, zip64
 * extra fields and the zip64 end record are accepted (numpy writes zip64 local headers), every member is
 * CRC-checked and the archive must pass libzip's consistency check (local headers agree with the central
 * directory). Sizes are bounded before anything is allocated: member count by the directory size, each
 * member's size by the archive (stored) or deflate's 1032:1 limit, the members' data together by the
 * archive, and a member's size must equal what its npy header needs.
 *
 * All functions returning int give 0 on success and -1 on error, with a message naming the file,
 * member and problem written into err (when err != NULL and errlen > 0). On error the output
 * argument is left empty (zeroed), so freeing it is always safe. */
#ifndef MACT_NPY_H
#define MACT_NPY_H
#include <stddef.h>
#include <stdint.h>
#include "io/safetensors.h"   /* the MACT_* dtype enum, mact_dtype_name / mact_dtype_size */

#define MACT_NPY_MAX_DIMS 8

typedef struct mact_array {
    char *name;                        /* owned (malloc); NULL for a plain .npy read */
    int dtype;                         /* MACT_F32, ... (MACT_BF16 cannot be written to npy) */
    int ndim;                          /* 0 for a 0-d array (one element) */
    int64_t shape[MACT_NPY_MAX_DIMS];  /* entries past ndim are 0 */
    void *data;                        /* owned (malloc), C order; NULL only when nbytes == 0 */
    size_t nbytes;                     /* == product(shape) * itemsize */
} mact_array;

typedef struct mact_npz {
    mact_array *arrays;                /* in archive order, names without ".npy" */
    size_t count;
} mact_npz;

/* Element count (1 for 0-d). */
size_t mact_array_numel(const mact_array *a);
/* Fills *a with a zero-initialised array of the given dtype/shape; name may be NULL. */
int mact_array_alloc(mact_array *a, const char *name, int dtype, int ndim, const int64_t *shape,
                     char *err, size_t errlen);
/* Frees name and data and zeroes *a (NULL-safe). */
void mact_array_free(mact_array *a);

/* Reads one .npy file (format 1.0, 2.0 or 3.0). */
int mact_npy_read(const char *path, mact_array *out, char *err, size_t errlen);
/* Parses a complete .npy image held in memory (copies the data out); `what` labels messages. */
int mact_npy_parse(const uint8_t *buf, size_t len, const char *what, mact_array *out,
                   char *err, size_t errlen);

/* Reads every member of an .npz archive. */
int mact_npz_read(const char *path, mact_npz *out, char *err, size_t errlen);
/* Same from an in-memory archive image; `what` labels messages. */
int mact_npz_parse(const uint8_t *buf, size_t len, const char *what, mact_npz *out,
                   char *err, size_t errlen);
/* Member by name (without ".npy"); NULL when absent. */
const mact_array *mact_npz_find(const mact_npz *z, const char *name);
/* Frees every member and zeroes *z (NULL-safe). */
void mact_npz_free(mact_npz *z);

/* Checks that a is self-consistent: a known dtype, 0..MACT_NPY_MAX_DIMS non-negative dims, nbytes equal to
 * product(shape) * itemsize, data non-NULL when nbytes > 0. Messages start with `what`. */
int mact_array_check(const mact_array *a, const char *what, char *err, size_t errlen);
/* numpy's descr of dtype ("<f4", "|u1", "|b1", ...) into out (at least 8 bytes); -1 for BF16, which
 * numpy lacks, and unknown values. One table serves the reader here and the writer in src/export/npz_write.c. */
int mact_npy_descr(int dtype, char *out, size_t cap);
/* A shape in Python's tuple syntax, as npy headers write it: "()", "(3,)", "(2, 3)". */
void mact_npy_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);

/* Converts count elements of any MACT_* dtype (incl. BF16/F16, bool -> 0/1) at src (any alignment)
 * to float32. Returns -1 only for an unknown dtype. */
int mact_dtype_to_f32(int dtype, const void *src, size_t count, float *dst);
/* Newly allocated float32 copy of a numeric array (free() it); at least one float is allocated so
 * *out is non-NULL even for an empty array. *count receives the element count. */
int mact_array_to_f32(const mact_array *a, float **out, size_t *count, char *err, size_t errlen);

#endif
