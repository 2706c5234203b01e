/* libFuzzer target for norm_stats.json (mact_norm_stats_parse, or mact_norm_stats_parse_modes when byte 0 is odd, its
 * modes from byte 1). Accepted stats are exercised end to end: every tag is found by name, a state is normalised and
 * binned and actions un-normalised and normalised back, each twice: with the file's arithmetic and with LeRobot's
 * (float32, eps, a fixed joint frame). Every bin is in range; the file's arithmetic never makes a NaN action. */
#include <math.h>
#include "io/normstats.h"
#include "fuzz_common.h"

static void run_tag(const mact_norm_tag *g, int nan_free)
{
    float x[MACT_NORM_MAX_DIM], y[MACT_NORM_MAX_DIM], a[2 * MACT_NORM_MAX_DIM], o[2 * MACT_NORM_MAX_DIM];
    float back[2 * MACT_NORM_MAX_DIM];
    int bins[MACT_NORM_MAX_DIM];
    char err[512] = "";
    for (int i = 0; i < MACT_NORM_MAX_DIM; i++) x[i] = (float)(i - 20) * 0.037f;
    int rc = mact_tag_norm_state(g, x, y, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) {
        mact_state_bins(y, g->state.dim, 256, bins);
        for (int i = 0; i < g->state.dim; i++)
            if (bins[i] < 0 || bins[i] > 255) __builtin_trap();
    }
    for (int i = 0; i < 2 * MACT_NORM_MAX_DIM; i++) a[i] = (float)(i % 7) / 3.f - 1.f;
    mact_tag_unnorm_actions(g, a, 2, MACT_NORM_MAX_DIM, o);
    for (int i = 0; nan_free && i < 2 * g->action.dim; i++)
        if (isnan(o[i])) __builtin_trap();
    mact_tag_norm_actions(g, o, 2, MACT_NORM_MAX_DIM, back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    char *s = fuzz_cstr(data + 2, size - 2), err[512] = "";
    mact_norm_stats ns = {0};
    int rc = data[0] & 1 ? mact_norm_stats_parse_modes(s, data[1] % 5, (data[1] / 5) % 5, &ns, err, sizeof err)
                         : mact_norm_stats_parse(s, &ns, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        if (ns.n_tags < 1 || ns.n_tags > MACT_NORM_MAX_TAGS || ns.default_tag >= ns.n_tags) __builtin_trap();
        for (int t = 0; t < ns.n_tags; t++) {
            const mact_norm_tag *g = mact_norm_find_tag(&ns, ns.tags[t].name, err, sizeof err);
            if (!g) __builtin_trap();
            if (g->state.dim > MACT_NORM_MAX_DIM || g->action.dim > MACT_NORM_MAX_DIM) __builtin_trap();
            run_tag(g, 1);
            mact_norm_tag lr = *g;   /* the same statistics under a LeRobot policy's arithmetic */
            lr.lerobot = 1;
            lr.eps = 1e-8f;
            lr.clamp_state = data[0] & 2;
            lr.clamp_actions = data[0] & 4;
            lr.state_frame.n = g->state.dim;
            lr.action_frame.n = g->action.dim;
            for (int i = 0; i < MACT_NORM_MAX_DIM; i++) {
                lr.state_frame.signs[i] = lr.action_frame.signs[i] = i % 3 ? 1.f : -1.f;
                lr.state_frame.offsets[i] = lr.action_frame.offsets[i] = (float)(i % 5) * 0.25f;
            }
            run_tag(&lr, 0);
        }
        mact_norm_find_tag(&ns, "no such tag", err, sizeof err);
    }
    mact_norm_stats_free(&ns);
    free(s);
    return 0;
}
