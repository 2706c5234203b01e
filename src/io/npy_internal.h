/* What the npy layer (npy.c) and the npz reader (npz.c) share; not part of npy.h's contract. */
#ifndef MACT_IO_NPY_INTERNAL_H
#define MACT_IO_NPY_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "io/npy.h"

/* one formatter for every module's errors; these modules report -1 */
#define set_err(err, errlen, ...) ((void)mact_errf((err), (errlen), -1, __VA_ARGS__))

typedef struct {
    const uint8_t *buf;
    size_t len;
    void *map; /* NULL when the file is empty */
} mapped;

typedef struct {
    int dtype, ndim, fortran;
    int64_t shape[MACT_NPY_MAX_DIMS];
    size_t data_off, nbytes;
} npy_info;

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }


size_t mact_npyi_elem_size(int dtype);
int mact_npyi_map_file(const char *path, mapped *m, char *err, size_t errlen);
void mact_npyi_unmap_file(mapped *m);
int mact_npyi_npy_preamble(const uint8_t *buf, size_t total, const char *what, size_t *pre, size_t *hlen,
                        char *err, size_t errlen);
int mact_npyi_npy_dict(const uint8_t *h, size_t pre, size_t hlen, size_t total, const char *what,
                    npy_info *info, char *err, size_t errlen);
void mact_npyi_fortran_to_c(const uint8_t *src, uint8_t *dst, int ndim, const int64_t *shape,
                         size_t isz, size_t numel);
void mact_npyi_fill_array(mact_array *out, const npy_info *info);
int mact_npyi_needs_transpose(const npy_info *info);

#endif
