/* Minimal test harness: each check prints one `PASS name` or `FAIL name: why` line; tests/run.sh
 * counts them across every test program. A program's exit code is non-zero when any check failed. */
#ifndef MACT_TH_H
#define MACT_TH_H
#include <stdio.h>
#include <stdarg.h>

static int th_failed_ = 0, th_passed_ = 0;

static void th_result(int ok, const char *name, const char *fmt, ...)
{
    if (ok) { printf("PASS %s\n", name); th_passed_++; }
    else {
        va_list ap; va_start(ap, fmt);
        printf("FAIL %s: ", name); vprintf(fmt, ap); printf("\n");
        va_end(ap); th_failed_++;
    }
    fflush(stdout);
}
#define TH_CHECK(name, cond, ...) th_result((cond) ? 1 : 0, (name), __VA_ARGS__)
#define TH_EXIT() return th_failed_ ? 1 : 0
#endif
