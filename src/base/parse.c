#include "base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mact_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s) return -1;
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    if (!isdigit((unsigned char)*p)) return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end) return -1;
    if (errno == ERANGE) return -2;
    if (v < min || v > max) return -2;
    *out = v;
    return 0;
}

int mact_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s) return -1;
    for (const char *q = s; *q; q++)
        if (!isdigit((unsigned char)*q)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) return -1;
    if (errno == ERANGE || v > max) return -2;
    *out = v;
    return 0;
}

int mact_parse_f64(const char *s, double min, double max, double *out)
{
    if (!s || !*s || isspace((unsigned char)s[0])) return -1;
    /* digits, sign, point and exponent only: no "inf", "nan", hex floats */
    for (const char *q = s; *q; q++)
        if (!isdigit((unsigned char)*q) && !strchr("+-.eE", *q)) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end) return -1;
    /* ERANGE with a finite result is an underflow (1e-310 reads as a subnormal or 0): a valid number */
    if (!isfinite(v)) return -2;
    if (v < min || v > max) return -2;
    *out = v;
    return 0;
}

int mact_parse_int_arg(const char *flag, const char *s, int min, int max, int *out, char *err, size_t el)
{
    int64_t v;
    int rc = mact_parse_i64(s, min, max, &v);
    if (rc == -1) {
        if (err && el) snprintf(err, el, "%s: '%s' is not an integer (expected %d..%d)", flag, s ? s : "", min, max);
        return -1;
    }
    if (rc == -2) {
        if (err && el) snprintf(err, el, "%s: %s is out of range (expected %d..%d)", flag, s, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int mact_parse_u64_arg(const char *flag, const char *s, uint64_t *out, char *err, size_t el)
{
    int rc = mact_parse_u64(s, UINT64_MAX, out);
    if (rc) {
        if (err && el)
            snprintf(err, el, "%s: '%s' is not a non-negative integer (expected 0..%llu)", flag, s ? s : "",
                     (unsigned long long)UINT64_MAX);
        return -1;
    }
    return 0;
}

int mact_parse_f64_arg(const char *flag, const char *s, double min, double max, double *out, char *err, size_t el)
{
    int rc = mact_parse_f64(s, min, max, out);
    if (rc == -1) {
        if (err && el) snprintf(err, el, "%s: '%s' is not a number (expected %g..%g)", flag, s ? s : "", min, max);
        return -1;
    }
    if (rc == -2) {
        if (err && el) snprintf(err, el, "%s: %s is out of range (expected %g..%g)", flag, s, min, max);
        return -1;
    }
    return 0;
}

int mact_max_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > MACT_MAX_THREADS) n = MACT_MAX_THREADS;
    return (int)n;
}
