/* mact serve, /act: one HTTP POST body (json_numpy arrays, images_jpeg, DROID and YAM keys, RTC keys) through
 * srv_handle_act with the model stubbed (serve_stub.h); every reply body must parse as JSON. */
#include "serve_stub.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static srv S;
    static srv_worker w;
    static float acts[STUB_H * STUB_A];
    static int init;
    if (!init) { stub_init(&S, &w, acts); init = 1; }
    srv_conn cn = {0};
    stub_run(&S, &w, &cn, srv_handle_act, d, n, 1);
    return 0;
}
