/* libFuzzer target for the PNG / JPEG front end (mact_image_load_memory). A decoded image must have
 * sides within the limits and a full pixel buffer; it is then resized to 28x28 and patchified (patch 14)
 * as a camera frame is, and every pixel value must land in [-1, 1]. */
#include <math.h>
#include "io/image.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    mact_image img = {0};
    int rc = mact_image_load_memory(data, size, &img, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        if (img.height < 1 || img.width < 1 || img.height > MACT_IMAGE_MAX_SIDE || img.width > MACT_IMAGE_MAX_SIDE ||
            img.height * img.width > MACT_IMAGE_MAX_PIXELS || !img.data)
            __builtin_trap();
        volatile uint8_t sink = img.data[img.height * img.width * 3 - 1];
        (void)sink;
        static float pv[4 * 14 * 14 * 3];
        if (mact_image_preprocess(img.data, img.height, img.width, 28, 28, 14, pv, sizeof pv / sizeof pv[0], err,
                                  sizeof err))
            __builtin_trap();
        for (size_t i = 0; i < sizeof pv / sizeof pv[0]; i++)
            if (!(pv[i] >= -1.f && pv[i] <= 1.f)) __builtin_trap();
    } else if (img.data) __builtin_trap();
    mact_image_free(&img);
    return 0;
}
