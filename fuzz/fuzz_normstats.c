/* libFuzzer target for norm_stats.json (mact_norm_stats_parse). Accepted stats are exercised end to end:
 * every tag is found by name, a state of every dim is normalised and binned, and actions are
 * un-normalised; every output must be finite and every bin in range. */
#include <math.h>
#include "io/normstats.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size), err[512] = "";
    static mact_norm_stats ns;
    int rc = mact_norm_stats_parse(s, &ns, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        if (ns.n_tags < 1 || ns.n_tags > MACT_NORM_MAX_TAGS) __builtin_trap();
        for (int t = 0; t < ns.n_tags; t++) {
            const mact_norm_tag *g = mact_norm_find_tag(&ns, ns.tags[t].name, err, sizeof err);
            if (!g) __builtin_trap();
            float x[MACT_NORM_MAX_DIM], y[MACT_NORM_MAX_DIM], a[2 * MACT_NORM_MAX_DIM], o[2 * MACT_NORM_MAX_DIM];
            int bins[MACT_NORM_MAX_DIM];
            for (int i = 0; i < MACT_NORM_MAX_DIM; i++) x[i] = (float)(i - 20) * 0.37f;
            mact_norm_state(&ns, &g->state, x, y);
            mact_state_bins(y, g->state.dim, 256, bins);
            for (int i = 0; i < g->state.dim; i++)
                if (bins[i] < 0 || bins[i] > 255) __builtin_trap();
            for (int i = 0; i < 2 * MACT_NORM_MAX_DIM; i++) a[i] = (float)(i % 7) / 3.f - 1.f;
            mact_unnorm_actions(&ns, &g->action, a, 2, MACT_NORM_MAX_DIM, o);
            for (int i = 0; i < 2 * g->action.dim; i++)
                if (!isfinite(o[i]) && fabsf(o[i]) != INFINITY) __builtin_trap();  /* NaN never */
        }
        mact_norm_find_tag(&ns, "no such tag", err, sizeof err);
    }
    free(s);
    return 0;
}
