/* The names of real-time chunking's schedules and guidance modes (mact.h): parsed and printed by the CLI, the server's
 * protocols and LeRobot's rtc_config reader, none of which needs the session-bound arithmetic in rtc.c. */
#include <string.h>
#include "mact.h"

static const char *const sched_names[] = {"default", "linear", "zeros", "ones", "exp"};

const char *mact_rtc_schedule_str(mact_rtc_schedule s) { return (unsigned)s <= MACT_RTC_EXP ? sched_names[s] : "?"; }

const char *mact_rtc_guidance_str(mact_rtc_guidance g)
{
    return g == MACT_RTC_IDENTITY ? "identity" : g == MACT_RTC_VJP ? "vjp" : "?";
}

mact_status mact_rtc_schedule_parse(const char *name, mact_rtc_schedule *out)
{
    const char *const *names = sched_names;
    for (int i = 0; name && out && i < 5; i++)
        if (!strcmp(name, names[i])) { *out = (mact_rtc_schedule)i; return MACT_OK; }
    return MACT_ERR_INPUT;
}

mact_status mact_rtc_guidance_parse(const char *name, mact_rtc_guidance *out)
{
    if (!name || !out) return MACT_ERR_INPUT;
    if (!strcmp(name, "identity")) { *out = MACT_RTC_IDENTITY; return MACT_OK; }
    if (!strcmp(name, "vjp")) { *out = MACT_RTC_VJP; return MACT_OK; }
    return MACT_ERR_INPUT;
}
