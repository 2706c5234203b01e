/* mact serve, vla-eval: envelopes (hello, episode_start/end, observation with __image__ maps and RTC keys)
 * through the vla protocol's handle with the model stubbed (serve_stub.h). The same message is sent three times on one
 * connection with --replan-steps 2, so the served-from-chunk and the guided-replan paths run as well as the
 * fresh inference; every reply must unpack to a map. */
#include "serve_stub.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static srv_state S;
    static srv_worker w;
    static float acts[STUB_H * STUB_A];
    static int init;
    if (!init) {
        stub_init(&S, &w, acts);
        S.c.replan_steps = 2;
        init = 1;
    }
    srv_conn cn = {0};
    for (int k = 0; k < 3; k++) stub_run(&S, &w, &cn, SRV_VLA, d, n, 0);
    srv_protocols[SRV_VLA]->conn_free(cn.pstate);
    return 0;
}
