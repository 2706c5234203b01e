/* Strict JSON for files mact reads (config.json, norm_stats.json, tokenizer.json, adapter_config.json,
 * golden trace.json): on top of cJSON's syntax check, every key and string must be valid UTF-8 without
 * NUL (no "\u0000" escape, which cJSON would silently cut the string at), no object may repeat a key,
 * and nesting is limited to MACT_JSON_MAX_DEPTH. Errors name the file and the JSON path. */
#ifndef MACT_JSON_H
#define MACT_JSON_H
#include <stddef.h>
#include <cjson/cJSON.h>

#define MACT_JSON_MAX_DEPTH 64

/* Parses len bytes (need not be NUL-terminated). Returns 0 and *out (cJSON_Delete it), or
 * MACT_ERR_FORMAT with err = "<file>: ...". */
int mact_json_parse(const char *text, size_t len, const char *file, cJSON **out, char *err, size_t errlen);

/* The same checks (UTF-8, duplicated keys, depth) on a tree cJSON already parsed. */
int mact_json_check(const cJSON *root, const char *file, char *err, size_t errlen);

/* Strict UTF-8 (no overlongs, surrogates, > U+10FFFF, truncated sequences): offset of the first bad
 * byte, or len when the whole text is valid. */
size_t mact_utf8_check(const unsigned char *s, size_t len);
#endif
