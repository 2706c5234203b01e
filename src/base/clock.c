#include "base/clock.h"

double mact_clock_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double mact_wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

struct timespec mact_wall_after(double secs)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    const long long ns = (long long)(secs * 1e9) + t.tv_nsec;
    t.tv_sec += (time_t)(ns / 1000000000LL);
    t.tv_nsec = (long)(ns % 1000000000LL);
    return t;
}
