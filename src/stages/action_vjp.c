/* The velocity's vector-Jacobian product for RTC's vjp guidance (mact.h MACT_RTC_VJP). Not built yet:
 * mact_rtc_check refuses MACT_RTC_VJP with MACT_ERR_UNSUPPORTED, so this is never reached. */
#include "model/session.h"

void mact_rtc_vjp(struct mact_session *s, const mact_rtc_vjp_ctx *c, const float *x, int h, float time, float *e)
{
    (void)s; (void)c; (void)x; (void)h; (void)time; (void)e;
}
