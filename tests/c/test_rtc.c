/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* RTC prefix weights (mact_rtc_prefix_weights, mact.h): LeRobot's get_prefix_weights test vectors for LINEAR and
 * EXP, ZEROS / ONES, the clamps (delay past the execution horizon, execution horizon past the rows given, the
 * default horizon), the parsers, and every error case. Expected values are formed here from the formula in
 * double (1 before d; 1 - (j + 1) / (e - d + 1) on [d, e); EXP w * expm1(w) / (e - 1); 0 from e) besides the
 * rounded vectors of docs/design.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "mact.h"
#include "th.h"

static mact_rtc_options opt(int sched, size_t n_prev, int d, int E)
{
    static float rows[4096];
    mact_rtc_options r = {.prev_actions = rows, .n_prev = n_prev, .prev_dim = 1, .inference_delay = d,
                          .execution_horizon = E, .schedule = (mact_rtc_schedule)sched};
    return r;
}

/* the formula in double: e = min(E or 10, n_prev, h), d = min(delay, e) */
static void formula(const mact_rtc_options *r, int h, double *w)
{
    int e = r->execution_horizon ? r->execution_horizon : 10;
    if (e > (int)r->n_prev) e = (int)r->n_prev;
    if (e > h) e = h;
    int d = r->inference_delay < e ? r->inference_delay : e;
    for (int i = 0; i < h; i++) {
        if (r->schedule == MACT_RTC_ZEROS) w[i] = i < d;
        else if (r->schedule == MACT_RTC_ONES) w[i] = i < e;
        else if (i < d) w[i] = 1;
        else if (i >= e) w[i] = 0;
        else {
            double v = 1.0 - (double)(i - d + 1) / (double)(e - d + 1);
            w[i] = r->schedule == MACT_RTC_EXP ? v * expm1(v) / (M_E - 1.0) : v;
        }
    }
}

static void check_vec(const char *name, mact_rtc_options r, int h, const double *want, double tol)
{
    float w[64];
    double f[64], mx = 0, mf = 0;
    for (int i = 0; i < 64; i++) w[i] = -7.f;
    int rc = mact_rtc_prefix_weights(&r, h, w);
    formula(&r, h, f);
    char got[1024] = "";
    for (int i = 0; i < h; i++) {
        if (want) mx = fmax(mx, fabs(w[i] - want[i]));
        mf = fmax(mf, fabs(w[i] - f[i]));
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.4f", i ? "," : "", (double)w[i]);
    }
    printf("INFO %s: %s (max |w - vector| %.2e <= %.0e, max |w - formula| %.2e <= 1e-7)\n", name, got, mx, tol, mf);
    TH_CHECK(name, rc == MACT_OK && mx <= tol && mf <= 1e-7 && w[h] == -7.f,
             "rc %d, weights %s, max err vs vector %.3g, vs formula %.3g", rc, got, mx, mf);
}

static void check_err(const char *name, const mact_rtc_options *r, int h, float *w)
{
    int rc = mact_rtc_prefix_weights(r, h, w);
    TH_CHECK(name, rc == MACT_ERR_INPUT, "returned %d, want MACT_ERR_INPUT (%d)", rc, MACT_ERR_INPUT);
}

int main(void)
{
    const double lin[10] = {1, 1, 1, 5. / 6, 4. / 6, 3. / 6, 2. / 6, 1. / 6, 0, 0};
    const double ex[10] = {1, 1, 1, .631, .368, .189, .077, .018, 0, 0};
    check_vec("rtc_weights_linear_d3_e8_h10", opt(MACT_RTC_LINEAR, 10, 3, 8), 10, lin, 1e-6);
    check_vec("rtc_weights_exp_d3_e8_h10", opt(MACT_RTC_EXP, 10, 3, 8), 10, ex, 1e-3);
    const double zer[10] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, one[10] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    check_vec("rtc_weights_zeros_d3_e8_h10", opt(MACT_RTC_ZEROS, 10, 3, 8), 10, zer, 0);
    check_vec("rtc_weights_ones_d3_e8_h10", opt(MACT_RTC_ONES, 10, 3, 8), 10, one, 0);
    /* d > e: delay 5 rows, execution horizon 3 -> d clamped to 3, no ramp */
    const double dc[10] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    check_vec("rtc_weights_clamp_delay_past_horizon", opt(MACT_RTC_LINEAR, 6, 5, 3), 10, dc, 0);
    check_vec("rtc_weights_clamp_delay_past_horizon_ones", opt(MACT_RTC_ONES, 6, 5, 3), 10, dc, 0);
    /* E > n_prev: execution horizon 8, 5 rows -> e = 5: ramp 0.75, 0.5, 0.25 after d = 2 */
    const double ec[10] = {1, 1, .75, .5, .25, 0, 0, 0, 0, 0};
    check_vec("rtc_weights_clamp_horizon_past_rows", opt(MACT_RTC_LINEAR, 5, 2, 8), 10, ec, 1e-7);
    const double eo[10] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    check_vec("rtc_weights_clamp_horizon_past_rows_ones", opt(MACT_RTC_ONES, 5, 2, 8), 10, eo, 0);
    /* execution_horizon 0 = 10, capped at h = 30 rows given 30: e = 10 */
    check_vec("rtc_weights_default_horizon_h30", opt(MACT_RTC_LINEAR, 30, 4, 0), 30, NULL, 0);
    /* default horizon capped at h = 6 */
    check_vec("rtc_weights_default_horizon_capped_h6", opt(MACT_RTC_EXP, 6, 1, 0), 6, NULL, 0);
    /* delay 0: the ramp starts at row 0 */
    const double d0[4] = {.75, .5, .25, 0};
    check_vec("rtc_weights_delay0_e3", opt(MACT_RTC_LINEAR, 3, 0, 3), 4, d0, 1e-7);
    /* no rows: all zero */
    const double z0[5] = {0, 0, 0, 0, 0};
    check_vec("rtc_weights_no_rows", opt(MACT_RTC_LINEAR, 0, 0, 0), 5, z0, 0);
    check_vec("rtc_weights_h1", opt(MACT_RTC_ONES, 1, 0, 1), 1, (const double[]){1}, 0);

    float w[8192];
    mact_rtc_options r = opt(MACT_RTC_LINEAR, 8, 2, 5);
    TH_CHECK("rtc_weights_valid_base", mact_rtc_prefix_weights(&r, 10, w) == MACT_OK, "the base case is refused");
    check_err("rtc_weights_err_null_options", NULL, 10, w);
    check_err("rtc_weights_err_null_out", &r, 10, NULL);
    check_err("rtc_weights_err_h0", &r, 0, w);
    check_err("rtc_weights_err_h_negative", &r, -3, w);
    check_err("rtc_weights_err_h_4097", &r, 4097, w);
    mact_rtc_options b = r;
    b.schedule = (mact_rtc_schedule)(MACT_RTC_EXP + 1);
    check_err("rtc_weights_err_schedule_past_exp", &b, 10, w);
    b = r;
    b.schedule = (mact_rtc_schedule)-1;
    check_err("rtc_weights_err_schedule_negative", &b, 10, w);
    b = r;
    b.inference_delay = -1;
    check_err("rtc_weights_err_delay_negative", &b, 10, w);
    b = r;
    b.execution_horizon = -1;
    check_err("rtc_weights_err_horizon_negative", &b, 10, w);
    b = r;
    b.inference_delay = 9;  /* > n_prev 8 */
    check_err("rtc_weights_err_delay_past_rows", &b, 10, w);
    b = r;
    b.n_prev = 11;          /* > h 10 */
    check_err("rtc_weights_err_rows_past_horizon", &b, 10, w);
    b = opt(MACT_RTC_LINEAR, 10, 10, 5);  /* delay == h: no row left */
    check_err("rtc_weights_err_delay_eq_h", &b, 10, w);
    b = opt(MACT_RTC_LINEAR, 0, 1, 0);    /* a delay without rows */
    check_err("rtc_weights_err_delay_without_rows", &b, 10, w);

    mact_rtc_schedule s = MACT_RTC_LINEAR;
    mact_rtc_guidance g = MACT_RTC_IDENTITY;
    int ok = !mact_rtc_schedule_parse("exp", &s) && s == MACT_RTC_EXP && !mact_rtc_schedule_parse("zeros", &s) &&
             s == MACT_RTC_ZEROS && !mact_rtc_schedule_parse("ones", &s) && s == MACT_RTC_ONES &&
             !mact_rtc_schedule_parse("linear", &s) && s == MACT_RTC_LINEAR &&
             mact_rtc_schedule_parse("Linear", &s) == MACT_ERR_INPUT && mact_rtc_schedule_parse(NULL, &s) == MACT_ERR_INPUT &&
             mact_rtc_schedule_parse("exp", NULL) == MACT_ERR_INPUT;
    TH_CHECK("rtc_schedule_parse", ok, "a name parses wrongly");
    ok = !mact_rtc_guidance_parse("vjp", &g) && g == MACT_RTC_VJP && !mact_rtc_guidance_parse("identity", &g) &&
         g == MACT_RTC_IDENTITY && mact_rtc_guidance_parse("VJP", &g) == MACT_ERR_INPUT &&
         mact_rtc_guidance_parse(NULL, &g) == MACT_ERR_INPUT && mact_rtc_guidance_parse("vjp", NULL) == MACT_ERR_INPUT;
    TH_CHECK("rtc_guidance_parse", ok, "a name parses wrongly");
    TH_EXIT();
}
