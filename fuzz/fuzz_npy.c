/* libFuzzer target for the .npy / .npz readers (mact_npy_parse, mact_npz_parse; src/io/npy.h). The
 * first byte picks the reader. Accepted arrays are checked: nbytes == numel x itemsize, every byte
 * readable, names unique and findable, conversion to f32 consistent. */
#include "io/npy.h"
#include "fuzz_common.h"

static void walk(const mact_array *a)
{
    if (a->ndim < 0 || a->ndim > MACT_NPY_MAX_DIMS) __builtin_trap();
    size_t numel = mact_array_numel(a);
    if (numel * mact_dtype_size(a->dtype) != a->nbytes) __builtin_trap();
    volatile uint8_t sink = 0;
    if (a->nbytes) sink ^= ((const uint8_t *)a->data)[0] ^ ((const uint8_t *)a->data)[a->nbytes - 1];
    (void)sink;
    float *f = NULL;
    size_t cnt = 0;
    char err[256];
    if (numel <= (1u << 20) && mact_array_to_f32(a, &f, &cnt, err, sizeof err) == 0 && cnt != numel) __builtin_trap();
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char err[512] = "";
    if (data[0] & 1) {
        mact_array a = {0};
        int rc = mact_npy_parse(data + 1, size - 1, "fuzz.npy", &a, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (rc == 0) walk(&a);
        mact_array_free(&a);
    } else {
        mact_npz z = {0};
        int rc = mact_npz_parse(data + 1, size - 1, "fuzz.npz", &z, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (rc == 0)
            for (size_t i = 0; i < z.count; i++) {
                walk(&z.arrays[i]);
                if (!z.arrays[i].name || mact_npz_find(&z, z.arrays[i].name) != &z.arrays[i]) __builtin_trap();
            }
        mact_npz_free(&z);
    }
    return 0;
}
