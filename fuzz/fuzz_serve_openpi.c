/* mact serve, openpi protocol: one WebSocket message (msgpack-numpy observation, RTC keys included) through
 * the openpi protocol's handle with the model stubbed (serve_stub.h): bounded pre-scan, unpack, key mapping, arrays and
 * frames, options, then the reply encoded; every reply must unpack to a map. */
#include "serve_stub.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static srv_state S;
    static srv_worker w;
    static float acts[STUB_H * STUB_A];
    static int init;
    if (!init) { stub_init(&S, &w, acts); init = 1; }
    srv_conn cn = {0};
    stub_run(&S, &w, &cn, SRV_OPENPI, d, n, 0);
    return 0;
}
