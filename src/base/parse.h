/* Strict number parsing for command-line flags and text fields: the whole string must be one number
 * (no leading/trailing space or junk, no empty string), integers are decimal without exponent, doubles
 * are finite, and the value must lie in [min, max]. "1e3" is not an integer; "abc" is not 0. */
#ifndef MACT_PARSE_H
#define MACT_PARSE_H
#include <stddef.h>
#include <stdint.h>

/* 0 on success; -1 not a number of that kind; -2 out of [min, max]. */
int mact_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int mact_parse_u64(const char *s, uint64_t max, uint64_t *out);
int mact_parse_f64(const char *s, double min, double max, double *out);

/* The same with a message naming the flag, the value and the accepted range; returns 0 or -1. */
int mact_parse_int_arg(const char *flag, const char *s, int min, int max, int *out, char *err, size_t errlen);
int mact_parse_u64_arg(const char *flag, const char *s, uint64_t *out, char *err, size_t errlen);
int mact_parse_f64_arg(const char *flag, const char *s, double min, double max, double *out, char *err,
                       size_t errlen);

/* The most threads a thread-count flag accepts: the online CPUs (at least 1, at most MACT_MAX_THREADS). */
#define MACT_MAX_THREADS 1024
int mact_max_threads(void);
#endif
