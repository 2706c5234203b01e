/* The one clock: monotonic seconds for durations (timings, rates, deadlines within a process), and the wall clock
 * for what is compared with other processes' times (protocol timestamps, absolute deadlines). */
#ifndef MACT_BASE_CLOCK_H
#define MACT_BASE_CLOCK_H
#include <time.h>
/* seconds on the monotonic clock (any origin: take differences) */
double mact_clock_s(void);
/* the same clock in milliseconds (stage timings, request latencies) */
static inline double mact_clock_ms(void) { return mact_clock_s() * 1e3; }
/* seconds since the Unix epoch (the wall clock) */
double mact_wall_s(void);
/* the wall clock secs seconds from now, as a timespec (pthread_cond_timedwait's) */
struct timespec mact_wall_after(double secs);
#endif
