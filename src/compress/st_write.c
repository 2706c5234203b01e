/* safetensors header writer (st_write.h). */
#include "compress/st_write.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/safetensors.h"

typedef struct { char *s; size_t n, cap; int oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->s && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t cap = (b->cap ? b->cap * 2 : 1 << 16) + (size_t)k;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p;
        b->cap = cap;
    }
}

/* a JSON string body: names are printable ASCII in practice; escape what JSON requires */
static void sb_jstr(sbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(b, "\\%c", *p);
        else if (*p < 0x20) sb_printf(b, "\\u%04x", *p);
        else sb_printf(b, "%c", *p);
    }
    sb_printf(b, "\"");
}

char *mact_stw_header(const mact_stw_entry *e, size_t n, const char *meta_json, int meta_last, size_t *len,
                      uint64_t *data_bytes)
{
    sbuf h = {0};
    sb_printf(&h, "{");
    int first = 1;
    if (meta_json && !meta_last) {
        sb_printf(&h, "\"__metadata__\":%s", meta_json);
        first = 0;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (!first) sb_printf(&h, ",");
        first = 0;
        sb_jstr(&h, e[i].name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", mact_dtype_name(e[i].dtype));
        for (int d = 0; d < e[i].ndim; d++) sb_printf(&h, "%s%lld", d ? "," : "", (long long)e[i].shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                  (unsigned long long)(off + e[i].nbytes));
        off += e[i].nbytes;
    }
    if (meta_json && meta_last) sb_printf(&h, "%s\"__metadata__\":%s", first ? "" : ",", meta_json);
    sb_printf(&h, "}");
    while (!h.oom && h.n % 8) sb_printf(&h, " ");
    if (h.oom) { free(h.s); return NULL; }
    *len = h.n;
    if (data_bytes) *data_bytes = off;
    return h.s;
}

void mact_stw_len8(size_t len, uint8_t out[8])
{
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)len >> (8 * i));
}
