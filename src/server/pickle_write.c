/* The TimedAction reply, as a protocol-4 pickle or in LeRobot PR #3048's format (pickle.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/pickle_internal.h"

void pk_buf_free(pk_buf *b)
{
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put(pk_buf *b, const void *p, size_t n)
{
    if (b->oom) return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        uint8_t *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put1(pk_buf *b, int c)
{
    uint8_t ch = (uint8_t)c;
    put(b, &ch, 1);
}

static void put_str(pk_buf *b, const char *s)  /* SHORT_BINUNICODE (< 256 bytes) */
{
    size_t n = strlen(s);
    put1(b, 0x8c);
    put1(b, (int)n);
    put(b, s, n);
}

static void put_float(pk_buf *b, double d)  /* BINFLOAT: big-endian IEEE double */
{
    uint64_t u;
    memcpy(&u, &d, 8);
    uint8_t o[9] = {'G'};
    for (int i = 0; i < 8; i++) o[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    put(b, o, 9);
}

static void put_int(pk_buf *b, int64_t v)
{
    uint8_t o[10];
    if (v >= 0 && v < 256) { o[0] = 'K'; o[1] = (uint8_t)v; put(b, o, 2); return; }
    if (v >= 0 && v < 65536) { o[0] = 'M'; o[1] = (uint8_t)v; o[2] = (uint8_t)(v >> 8); put(b, o, 3); return; }
    if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)(int32_t)v;
        o[0] = 'J';
        for (int i = 0; i < 4; i++) o[1 + i] = (uint8_t)(u >> (8 * i));
        put(b, o, 5);
        return;
    }
    uint64_t u = (uint64_t)v;  /* LONG1 of 8 bytes, two's complement */
    o[0] = 0x8a;
    o[1] = 8;
    for (int i = 0; i < 8; i++) o[2 + i] = (uint8_t)(u >> (8 * i));
    put(b, o, 10);
}

static void put_memo_get(pk_buf *b, int idx) { put1(b, 'h'); put1(b, idx); }

static int check_actions(const float *actions, int rows, int dim, int64_t i0, char *err, size_t el)
{
    if (rows < 0 || dim < 1 || (int64_t)rows * dim > (1 << 24) || (rows && !actions)) {
        if (el) snprintf(err, el, "timed actions: need rows >= 0, dim >= 1, rows x dim <= 2^24 (got %d x %d)", rows, dim);
        return -1;
    }
    if (rows && i0 > INT64_MAX - rows) {
        if (el) snprintf(err, el, "timed actions: timestep %lld + %d overflows", (long long)i0, rows);
        return -1;
    }
    return 0;
}

int pk_write_timed_actions(pk_buf *b, const float *actions, int rows, int dim, double t0, double dt, int64_t i0,
                           char *err, size_t errlen)
{
    if (!b || check_actions(actions, rows, dim, i0, err, errlen)) return -1;
    size_t start = b->len;
    static const uint8_t head[] = {0x80, 4, ']'};
    put(b, head, sizeof head);
    if (rows) put1(b, '(');
    /* memo (MEMOIZE numbers in order): 0 TimedAction, 1 'timestamp', 2 'timestep', 3 'action', 4 torch.Tensor.float,
     * 5 torch.tensor */
    for (int i = 0; i < rows; i++) {
        if (i == 0) {
            put_str(b, HELPERS);
            put_str(b, "TimedAction");
            put1(b, 0x93);
            put1(b, 0x94);
        } else put_memo_get(b, 0);
        put1(b, ')');
        put1(b, 0x81);           /* NEWOBJ: TimedAction.__new__(TimedAction) */
        put1(b, '}');
        put1(b, '(');
        if (i == 0) { put_str(b, "timestamp"); put1(b, 0x94); } else put_memo_get(b, 1);
        /* the same double arithmetic as LeRobot's server: t_0 + i * environment_dt */
        double prod = (double)i * dt;
        put_float(b, t0 + prod);
        if (i == 0) { put_str(b, "timestep"); put1(b, 0x94); } else put_memo_get(b, 2);
        put_int(b, i0 + i);
        if (i == 0) {
            put_str(b, "action");
            put1(b, 0x94);
            put_str(b, "torch");
            put_str(b, "Tensor.float");
            put1(b, 0x93);
            put1(b, 0x94);
            put_str(b, "torch");
            put_str(b, "tensor");
            put1(b, 0x93);
            put1(b, 0x94);
        } else {
            put_memo_get(b, 3);
            put_memo_get(b, 4);
            put_memo_get(b, 5);
        }
        put1(b, ']');
        put1(b, '(');
        for (int k = 0; k < dim; k++) put_float(b, (double)actions[(size_t)i * (size_t)dim + (size_t)k]);
        put1(b, 'e');
        put1(b, 0x85);
        put1(b, 'R');            /* torch.tensor([...]) */
        put1(b, 0x85);
        put1(b, 'R');            /* torch.Tensor.float(that) */
        put1(b, 'u');
        put1(b, 'b');            /* BUILD: the dataclass's fields */
    }
    if (rows) put1(b, 'e');
    put1(b, '.');
    if (b->oom) {
        b->len = start;
        b->oom = 0;
        if (errlen) snprintf(err, errlen, "timed actions: out of memory");
        return -1;
    }
    return 0;
}

static void put_cstr(pk_buf *b, const char *s) { put(b, s, strlen(s)); }

/* a double as JSON that Python's json reads back as the same float (always with a '.' or an exponent) */
static void put_json_double(pk_buf *b, double d)
{
    char s[40];
    int n = snprintf(s, sizeof s, "%.17g", d);
    if (!strpbrk(s, ".eE")) n += snprintf(s + n, sizeof s - (size_t)n, ".0");
    put(b, s, (size_t)n);
}

int pk_write_timed_actions_safe(pk_buf *b, const float *actions, int rows, int dim, double t0, double dt, int64_t i0,
                                char *err, size_t errlen)
{
    if (!b || check_actions(actions, rows, dim, i0, err, errlen)) return -1;
    for (int i = 0; i < rows; i++) {
        double prod = (double)i * dt;
        if (!isfinite(t0 + prod)) {
            if (errlen) snprintf(err, errlen, "timed actions: timestamp of row %d is not finite (JSON has no NaN)", i);
            return -1;
        }
    }
    size_t start = b->len;
    pk_buf j = {0}, h = {0};
    char s[96];
    put_cstr(&j, "{\"type\": \"TimedActions\", \"actions\": [");
    for (int i = 0; i < rows; i++) {
        double prod = (double)i * dt;
        put_cstr(&j, i ? ", {\"timestamp\": " : "{\"timestamp\": ");
        put_json_double(&j, t0 + prod);
        int n = snprintf(s, sizeof s, ", \"timestep\": %lld}", (long long)(i0 + i));
        put(&j, s, (size_t)n);
    }
    put_cstr(&j, "]}");
    /* safetensors: u64 LE header length, the header (padded with spaces to 8 bytes), then the data */
    put1(&h, '{');
    size_t row_bytes = (size_t)dim * 4;
    for (int i = 0; i < rows; i++) {
        int n = snprintf(s, sizeof s, "%s\"action_%d\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                         i ? "," : "", i, dim, (size_t)i * row_bytes, (size_t)(i + 1) * row_bytes);
        put(&h, s, (size_t)n);
    }
    put1(&h, '}');
    while (h.len % 8) put1(&h, ' ');
    int oom = j.oom || h.oom || j.len > UINT32_MAX;
    if (!oom) {
        uint8_t l4[4] = {(uint8_t)(j.len >> 24), (uint8_t)(j.len >> 16), (uint8_t)(j.len >> 8), (uint8_t)j.len};
        put(b, l4, 4);
        put(b, j.p, j.len);
        if (rows) {
            uint8_t l8[8];
            for (int i = 0; i < 8; i++) l8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
            put(b, l8, 8);
            put(b, h.p, h.len);
            for (size_t i = 0; i < (size_t)rows * (size_t)dim; i++) {
                uint32_t u;
                memcpy(&u, &actions[i], 4);
                uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
                put(b, le, 4);
            }
        }
        oom = b->oom;
    }
    pk_buf_free(&j);
    pk_buf_free(&h);
    if (oom) {
        b->len = start;
        b->oom = 0;
        if (errlen) snprintf(err, errlen, "timed actions: out of memory");
        return -1;
    }
    return 0;
}

