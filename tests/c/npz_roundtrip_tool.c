/* Helper for tests/test_npz_numpy.sh, built by the Makefile as $(BUILD)/tests/npz_roundtrip_tool
 * (linked like the tests: libmact_export.a for the writers, libmact.a). Modes:
 *   npy IN.npy OUT.npy                 read, write back
 *   npz IN.npz OUT.npz FLAGS           read every member, write back with mact_npz_write flags
 *                                      (0 stored, 1 deflate, 256/257 the same with forced zip64)
 *   f32 IN.npz OUT.npz                 every member through mact_array_to_f32, stored npz
 *   gen OUT.(npz|npy) FLAGS SPEC...    arrays made in C, SPEC = name:DTYPE:d0,d1,... (DTYPE as in
 *                                      safetensors, e.g. F32, BOOL; no dims = 0-d); array j's byte k
 *                                      is (31k + 17j + 5) & 255, bool bytes are ((7k + j) % 3 == 0)
 * Exit status 0 on success; errors go to stderr. */
#include "io/npy.h"
#include "export/npz_write.h"
#include "io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int gen(const char *out, int flags, int n, char **specs)
{
    char err[512];
    mact_array *arr = calloc((size_t)n + 1, sizeof *arr);
    int rc = 1;
    for (int j = 0; j < n; j++) {
        char *spec = specs[j], *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            fprintf(stderr, "bad spec '%s'\n", spec);
            goto out;
        }
        *c1 = *c2 = 0;
        int dtype = mact_dtype_from_name(c1 + 1);
        int64_t shape[MACT_NPY_MAX_DIMS];
        int ndim = 0;
        for (char *p = c2 + 1; *p && ndim < MACT_NPY_MAX_DIMS;) {
            shape[ndim++] = strtoll(p, &p, 10);
            if (*p == ',') p++;
        }
        if (mact_array_alloc(&arr[j], spec, dtype, ndim, shape, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        uint8_t *d = arr[j].data;
        for (size_t k = 0; k < arr[j].nbytes; k++)
            d[k] = dtype == MACT_BOOL ? (uint8_t)((7 * k + (size_t)j) % 3 == 0)
                                      : (uint8_t)((31 * k + 17 * (size_t)j + 5) & 255);
    }
    size_t ol = strlen(out);
    int r = (ol > 4 && strcmp(out + ol - 4, ".npy") == 0 && n == 1)
                ? mact_npy_write(out, &arr[0], err, sizeof err)
                : mact_npz_write(out, arr, (size_t)n, flags, err, sizeof err);
    if (r != 0) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    rc = 0;
out:
    for (int j = 0; j < n; j++) mact_array_free(&arr[j]);
    free(arr);
    return rc;
}

static int to_f32(const char *in, const char *out)
{
    char err[512];
    mact_npz z;
    if (mact_npz_read(in, &z, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    mact_array *conv = calloc(z.count + 1, sizeof *conv);
    int rc = 1;
    for (size_t i = 0; i < z.count; i++) {
        float *f;
        size_t n;
        if (mact_array_to_f32(&z.arrays[i], &f, &n, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
        conv[i] = z.arrays[i];
        conv[i].dtype = MACT_F32;
        conv[i].data = f;
        conv[i].nbytes = n * sizeof(float);
        conv[i].name = strdup(z.arrays[i].name);
    }
    if (mact_npz_write(out, conv, z.count, 0, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; i < z.count; i++) mact_array_free(&conv[i]);
    free(conv);
    mact_npz_free(&z);
    return rc;
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc >= 4 && strcmp(argv[1], "npy") == 0) {
        mact_array a;
        if (mact_npy_read(argv[2], &a, err, sizeof err) != 0 ||
            mact_npy_write(argv[3], &a, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            mact_array_free(&a);
            return 1;
        }
        mact_array_free(&a);
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "npz") == 0) {
        mact_npz z;
        if (mact_npz_read(argv[2], &z, err, sizeof err) != 0 ||
            mact_npz_write(argv[3], z.arrays, z.count, atoi(argv[4]), err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            mact_npz_free(&z);
            return 1;
        }
        mact_npz_free(&z);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "f32") == 0) return to_f32(argv[2], argv[3]);
    if (argc >= 4 && strcmp(argv[1], "gen") == 0) return gen(argv[2], atoi(argv[3]), argc - 4, argv + 4);
    fprintf(stderr, "usage: %s npy IN OUT | npz IN OUT FLAGS | f32 IN OUT | gen OUT FLAGS SPEC...\n", argv[0]);
    return 2;
}
