/* .npy / .npz writing: development code (tensor dumps, golden files, tests), built into libmact_export.a
 * and kept out of libmact.so; reading is io/npy.h.
 *
 * Both writers build the file under a temporary name in the target's directory and rename it into
 * place, so a failed write leaves neither a partial file nor a damaged previous one. npz goes through
 * libzip. Return 0 on success, -1 with a message naming the file, array and problem in err. */
#ifndef MACT_NPZ_WRITE_H
#define MACT_NPZ_WRITE_H
#include <stddef.h>
#include "io/npy.h"

/* Writes arr as a .npy file (format 1.0, numpy's layout); arr->name is ignored. */
int mact_npy_write(const char *path, const mact_array *arr, char *err, size_t errlen);

/* `flags` for mact_npz_write: 0 stores members; MACT_NPZ_DEFLATE (or any other non-zero value in
 * the low byte, so a plain boolean `compress` works) deflates them like numpy.savez_compressed.
 * MACT_NPZ_ZIP64 writes every member's local header with a zip64 extra field, as numpy does
 * (force_zip64), to exercise readers on small files. libzip (1.7) has no switch to force zip64: the
 * flag hands libzip each member through a source that does not report its size, which makes libzip
 * write the zip64 local header itself. The central directory and the zip64 end record still appear
 * only where a size, offset or count needs them (libzip offers no way to force those). */
#define MACT_NPZ_DEFLATE 0x001
#define MACT_NPZ_ZIP64   0x100
/* Writes arrays[0..n) as members "<name>.npy"; names must be non-empty and distinct. */
int mact_npz_write(const char *path, const mact_array *arrays, size_t n, int flags,
                   char *err, size_t errlen);

#endif
