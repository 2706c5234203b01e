/* The one error formatter: every module writes its messages through it into the caller's buffer. */
#ifndef MACT_BASE_ERR_H
#define MACT_BASE_ERR_H
#include <stddef.h>

/* Formats into err (errlen may be 0). Returns code, so callers can `return mact_errf(...)`. */
int mact_errf(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
