/* Files from outside: regular-file checks before opening, bounded whole-file reads, and outputs written
 * to a temporary name in the same directory and renamed into place, so a failure leaves nothing
 * half-written. Every function returns 0 or a negative MACT_ERR_* code with a message naming the path. */
#ifndef MACT_FILE_H
#define MACT_FILE_H
#include <stddef.h>
#include <stdio.h>

/* Refuses (MACT_ERR_IO) a path that is missing or not a regular file (FIFO, device, directory, socket),
 * without opening it. */
int mact_file_check_regular(const char *path, char *err, size_t errlen);
/* 1 when nothing is at path (an optional file's absence); a FIFO, directory or unreadable entry there is present, so
 * its reader names the problem instead of the file being skipped. */
int mact_file_absent(const char *path);

/* Opens a regular file for reading: checked before the open (so a FIFO never blocks), opened
 * O_NONBLOCK and checked again on the descriptor. Returns the descriptor (>= 0) or a negative code. */
int mact_file_open_regular(const char *path, char *err, size_t errlen);

/* Reads a whole regular file of at most max_bytes into a malloc'd NUL-terminated buffer (free() it).
 * A larger file is refused with the limit named, never truncated. */
int mact_file_read_all(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen);

/* mact_file_read_all for a text file: a NUL byte anywhere is refused (MACT_ERR_FORMAT, offset named). */
int mact_file_read_text(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen);

/* Atomic output: mact_file_tmp_name creates an empty, uniquely named "<dir>/.<name>.tmp.XXXXXX" next to
 * path (0, or -1 with errno when it cannot: name too long for cap, directory missing or read-only);
 * write it, then mact_file_commit renames it onto path (or removes it when ok == 0 or the rename fails). */
int mact_file_tmp_name(const char *path, char *tmp, size_t cap);
int mact_file_commit(const char *tmp, const char *path, int ok, char *err, size_t errlen);
/* Writes len bytes to path through a temporary name. */
int mact_file_write_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* mkdir -p path (mode 0777 before the umask): 0, or MACT_ERR_IO naming the folder that could not be made. */
int mact_file_mkdirs(const char *path, char *err, size_t errlen);
#endif
