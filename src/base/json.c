#include "base/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"

size_t mact_utf8_check(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return i;
        if (i + need >= len) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return len;
}

typedef struct {
    const char *file;
    char *err;
    size_t el;
    char path[256];
} walk;

static int fail(walk *w, const char *fmt, const char *a)
{
    if (w->err && w->el) {
        char msg[384];
        snprintf(msg, sizeof msg, fmt, a);
        snprintf(w->err, w->el, "%s: %s%s%s", w->file, msg, w->path[0] ? " at " : "", w->path[0] ? w->path : "");
    }
    return MACT_ERR_FORMAT;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int check(walk *w, const cJSON *it, int depth)
{
    if (depth > MACT_JSON_MAX_DEPTH) return fail(w, "nesting deeper than %s levels", "64");
    if (cJSON_IsString(it) && it->valuestring) {
        size_t n = strlen(it->valuestring);
        if (mact_utf8_check((const unsigned char *)it->valuestring, n) != n)
            return fail(w, "%sa string is not valid UTF-8", "");
    }
    if (!cJSON_IsObject(it) && !cJSON_IsArray(it)) return 0;
    size_t n = 0;
    for (const cJSON *c = it->child; c; c = c->next) n++;
    const char **keys = NULL;
    if (cJSON_IsObject(it) && n > 1) {
        keys = malloc(n * sizeof *keys);
        if (!keys) return fail(w, "%sout of memory", "");
    }
    size_t k = 0, plen = strlen(w->path);
    int rc = 0, idx = 0;
    for (const cJSON *c = it->child; c && !rc; c = c->next, idx++) {
        if (cJSON_IsObject(it)) {
            const char *key = c->string ? c->string : "";
            size_t kl = strlen(key);
            if (mact_utf8_check((const unsigned char *)key, kl) != kl) { rc = fail(w, "%sa key is not valid UTF-8", ""); break; }
            if (keys) keys[k++] = key;
            snprintf(w->path + plen, sizeof w->path - plen, "%s%.64s", plen ? "." : "", key);
        } else
            snprintf(w->path + plen, sizeof w->path - plen, "[%d]", idx);
        rc = check(w, c, depth + 1);
        w->path[plen] = 0;
    }
    if (!rc && keys) {
        qsort(keys, k, sizeof *keys, cmp_str);
        for (size_t i = 1; i < k; i++)
            if (!strcmp(keys[i - 1], keys[i])) { rc = fail(w, "duplicated key \"%.64s\"", keys[i]); break; }
    }
    free(keys);
    return rc;
}

int mact_json_check(const cJSON *root, const char *file, char *err, size_t el)
{
    walk w = {.file = file, .err = err, .el = el};
    return check(&w, root, 0);
}

int mact_json_parse(const char *text, size_t len, const char *file, cJSON **out, char *err, size_t el)
{
    *out = NULL;
    walk w = {.file = file, .err = err, .el = el};
    /* "\u0000" inside a string: cJSON would end the C string there and drop the rest silently. */
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == 0) return fail(&w, "contains a NUL byte at offset %s", "(binary data)");
        if (!in_str) { if (c == '"') in_str = 1; continue; }
        if (c == '"') { in_str = 0; continue; }
        if (c == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && !strncmp(text + i + 2, "0000", 4))
                return fail(&w, "a string contains the escape \\u0000 (NUL)%s", "");
            i++;
        }
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        char where[64];
        snprintf(where, sizeof where, "%zu", end && end >= text ? (size_t)(end - text) : (size_t)0);
        return fail(&w, "invalid JSON near byte %s (a syntax error, or nesting deeper than 1000 levels)", where);
    }
    /* trailing garbage after the document */
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
            cJSON_Delete(root);
            return fail(&w, "%sjunk after the JSON document", "");
        }
    int rc = check(&w, root, 0);
    if (rc) { cJSON_Delete(root); return rc; }
    *out = root;
    return 0;
}
