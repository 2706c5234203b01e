/* mact serve, /act: one HTTP POST body (json_numpy arrays, images_jpeg, DROID and YAM keys, RTC keys) through
 * the act protocol's handle with the model stubbed (serve_stub.h); every reply body must parse as JSON. */
#include "serve_stub.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static srv_state S;
    static srv_worker w;
    static float acts[STUB_H * STUB_A];
    static int init;
    if (!init) { stub_init(&S, &w, acts); init = 1; }
    srv_conn cn = {0};
    stub_run(&S, &w, &cn, SRV_ACT, d, n, 1);
    return 0;
}
