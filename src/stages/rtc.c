/* Real-time chunking (mact.h, mact_rtc_options): the prefix weights, the option checks and the guidance applied
 * to one flow step's velocity. The arithmetic follows LeRobot's RTCProcessor as MolmoAct2 calls it (time = 1 - t,
 * velocity u = -v, x1 = x - time * u, guided u - g * corr), written here in MolmoAct2's own direction (v points
 * toward the data): x1 = x + time * v and the guided velocity v + g * corr, the same floats since negation is
 * exact. docs/design.md "Real-time chunking" has the derivation and the choices where LeRobot has none. */
#include <math.h>
#include <string.h>
#include "model/session.h"

/* the guided prefix [d, e) of h rows: e = min(execution_horizon or its default, n_prev, h), d = min(delay, e) */
static void prefix_range(const mact_rtc_options *r, int h, int *d, int *e)
{
    int64_t eh = r->execution_horizon ? r->execution_horizon : MACT_RTC_DEFAULT_EXECUTION_HORIZON;
    if (eh > (int64_t)r->n_prev) eh = (int64_t)r->n_prev;
    if (eh > h) eh = h;
    *e = (int)eh;
    *d = r->inference_delay < *e ? r->inference_delay : *e;
}

/* w [h]: LeRobot's get_prefix_weights(d, e, h). Its linear ramp is torch.linspace(1, 0, e - d + 2)[1:-1], i.e.
 * 1 - (j + 1) / (e - d + 1) for j in [0, e - d); formed in double and rounded once (torch's float32 linspace can
 * differ in the last bit, well inside every gate). */
static void prefix_weights(const mact_rtc_options *r, int h, float *w)
{
    int d, e;
    prefix_range(r, h, &d, &e);
    for (int i = 0; i < h; i++) {
        double v;
        if (r->schedule == MACT_RTC_ZEROS) v = i < d;
        else if (r->schedule == MACT_RTC_ONES) v = i < e;
        else if (i < d) v = 1;
        else if (i >= e) v = 0;
        else {
            v = 1.0 - (double)(i - d + 1) / (double)(e - d + 1);
            if (r->schedule == MACT_RTC_EXP) v = v * expm1(v) / (M_E - 1.0);
        }
        w[i] = (float)v;
    }
}

int mact_rtc_check(struct mact_session *s, const mact_rtc_options *r, int h, int action_dim, int rows_finite, int *on,
                   const char *who)
{
    *on = 0;
    if (!r) return 0;
    if ((unsigned)r->schedule > MACT_RTC_EXP)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: unknown RTC schedule %d (linear, zeros, ones, exp)", who,
                                 (int)r->schedule);
    if ((unsigned)r->guidance > MACT_RTC_VJP)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: unknown RTC guidance %d (identity, vjp)", who, (int)r->guidance);
    if (!(r->max_guidance_weight >= 0.f) || !isfinite(r->max_guidance_weight))
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: max_guidance_weight %g must be finite and >= 0", who,
                                 (double)r->max_guidance_weight);
    if (r->execution_horizon < 0)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: execution_horizon %d must be >= 0 (0: the default %d)", who,
                                 r->execution_horizon, MACT_RTC_DEFAULT_EXECUTION_HORIZON);
    if (r->inference_delay < 0)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: inference_delay %d must be >= 0", who, r->inference_delay);
    if (!r->n_prev) {
        if (r->inference_delay)
            return mact_session_fail(s, MACT_ERR_INPUT, "%s: inference_delay %d but no previous chunk rows were given "
                                     "(n_prev 0)", who, r->inference_delay);
        return 0;
    }
    if (!r->prev_actions)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: n_prev %zu but prev_actions is NULL", who, r->n_prev);
    if (r->prev_dim != (size_t)action_dim)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: prev_actions rows have %zu values; the action dim is %d", who,
                                 r->prev_dim, action_dim);
    if (r->n_prev > (size_t)h)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: %zu previous chunk rows; the horizon is %d rows", who, r->n_prev,
                                 h);
    if ((size_t)r->inference_delay > r->n_prev)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: inference_delay %d is larger than the %zu previous chunk rows "
                                 "given", who, r->inference_delay, r->n_prev);
    if (r->inference_delay >= h)
        return mact_session_fail(s, MACT_ERR_INPUT, "%s: inference_delay %d leaves no row of the %d-row horizon", who,
                                 r->inference_delay, h);
    if (rows_finite) {
        const size_t n = r->n_prev * (size_t)action_dim;
        for (size_t i = 0; i < n; i++)
            if (!isfinite(r->prev_actions[i]))
                return mact_session_fail(s, MACT_ERR_INPUT, "%s: prev_actions[%zu][%zu] is %g: previous chunk rows must "
                                         "be finite", who, i / (size_t)action_dim, i % (size_t)action_dim,
                                         (double)r->prev_actions[i]);
    }
    *on = 1;
    return 0;
}

mact_status mact_rtc_prefix_weights(const mact_rtc_options *r, int h, float *w)
{
    if (!r || !w || h < 1 || h > 4096 || (unsigned)r->schedule > MACT_RTC_EXP || r->inference_delay < 0 ||
        r->execution_horizon < 0 || (size_t)r->inference_delay > r->n_prev || r->n_prev > (size_t)h ||
        (r->n_prev && r->inference_delay >= h))
        return MACT_ERR_INPUT;
    prefix_weights(r, h, w);
    return MACT_OK;
}

/* Y (the normalised rows, zero past them and in the padded dims) and W for this call, once before the steps. */
void mact_rtc_prepare(struct mact_session *s, const mact_rtc_options *r, int h, int action_dim)
{
    const int64_t A = s->m->cfg.max_action_dim;
    memset(s->a_rtc_y, 0, (size_t)h * A * sizeof(float));
    for (size_t i = 0; i < r->n_prev; i++)
        memcpy(s->a_rtc_y + i * A, r->prev_actions + i * (size_t)action_dim, (size_t)action_dim * sizeof(float));
    prefix_weights(r, h, s->a_rtc_w);
}

/* g(t): LeRobot's guidance weight with tau = t, float32 as its tensors; max_guidance_weight where t = 0 (its
 * nan_to_num of the infinite c) */
static float guidance_weight(float t, float beta)
{
    if (t == 0.f) return beta;
    float om = 1.f - t, sq = om * om, inv_r2 = (sq + t * t) / sq, c = om / t, g = c * inv_r2;
    return isfinite(g) && g < beta ? g : beta;
}

/* One flow step's guidance on s->a_vel [h, A] (the unguided velocity at x, padded dims left as they are: the Euler
 * update zeroes them): err = W * (Y - x1) over the real dims, corr = err (IDENTITY) or its product with the
 * Jacobian (VJP: corr = err + time * (dv/dx)^T err), v += g * corr. */
void mact_rtc_guide(struct mact_session *s, const mact_rtc_options *r, const float *x, int h, int action_dim, float t,
                    const mact_rtc_vjp_ctx *vjp)
{
    const int64_t A = s->m->cfg.max_action_dim;
    const float time = 1.f - t,
                beta = r->max_guidance_weight != 0.f ? r->max_guidance_weight : MACT_RTC_DEFAULT_MAX_GUIDANCE_WEIGHT;
    const float g = guidance_weight(t, beta);
    float *v = s->a_vel, *e = s->a_rtc_e;
    for (int i = 0; i < h; i++) {
        const float w = s->a_rtc_w[i];
        for (int64_t d = 0; d < A; d++) {
            const int64_t j = (int64_t)i * A + d;
            e[j] = d < action_dim ? w * (s->a_rtc_y[j] - (x[j] + time * v[j])) : 0.f;
        }
    }
    if (r->guidance == MACT_RTC_VJP) mact_rtc_vjp(s, vjp, x, h, time, e);
    for (int i = 0; i < h; i++)
        for (int64_t d = 0; d < action_dim; d++) v[(int64_t)i * A + d] += g * e[(int64_t)i * A + d];
}
