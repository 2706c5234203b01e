/* mact serve's codecs (src/server/wire.c) on their own. The first byte picks the entry point:
 *   0 bounded msgpack pre-scan (srv_mp_scan), then, when it passes, msgpack-c unpacks the same bytes and every
 *     value is read as an array (srv_mp_arr) and as a camera frame (srv_mp_frame)
 *   1 JSON with Python's NaN / Infinity (srv_json_parse), then every value as json_numpy (srv_js_arr) and as a
 *     frame (srv_js_frame)
 *   2 base64 decode, re-encoded: must give the same text back (canonical padding) or have been refused
 *   3 numpy dtype strings (srv_dtype_parse)
 * Accepted arrays must satisfy bytes = numel x itemsize and be fully readable; frames within the pixel cap. */
#include "serve_stub.h"

static srv_config C;

static void check_arr(srv_arr *a)
{
    if (a->ndim < 0 || a->ndim > 8) __builtin_trap();
    size_t numel = 1;
    for (int i = 0; i < a->ndim; i++) { if (a->shape[i] < 0) __builtin_trap(); numel *= (size_t)a->shape[i]; }
    if (numel != a->count) __builtin_trap();
    if (a->count && !a->data) __builtin_trap();
    for (size_t i = 0; i < a->count; i++) { volatile double v = srv_arr_get(a, i); (void)v; }
    srv_arr_free(a);
}

static void check_frame(int rc, mact_image *im, const char *err)
{
    fuzz_check_err(rc, err, 300);
    if (rc) return;
    if (!im->data || im->width < 1 || im->height < 1 || im->width * im->height > C.max_image_pixels) __builtin_trap();
    volatile uint8_t s = im->data[(size_t)im->width * im->height * 3 - 1];
    (void)s;
    free(im->data);
}

static void mp_walk(const msgpack_object *o, int depth)
{
    char err[300] = {0};
    srv_arr a = {0};
    int rc = srv_mp_arr(o, &a, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) check_arr(&a);
    mact_image im = {0};
    err[0] = 0;
    check_frame(srv_mp_frame(o, &C, &im, err, sizeof err), &im, err);
    if (depth > 20) return;
    if (o->type == MSGPACK_OBJECT_ARRAY)
        for (uint32_t i = 0; i < o->via.array.size; i++) mp_walk(&o->via.array.ptr[i], depth + 1);
    if (o->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            const char *k;
            size_t kn;
            if (!srv_mp_str(&kv->key, &k, &kn) && kn > 0 && kn < 64) {
                char key[64];
                memcpy(key, k, kn);
                key[kn] = 0;
                if (srv_mp_get(o, key) == NULL && !memchr(key, 0, kn) && !strchr(key, '.')) __builtin_trap();
            }
            mp_walk(&kv->val, depth + 1);
        }
}

static void js_walk(const cJSON *o, int depth)
{
    char err[300] = {0};
    srv_arr a = {0};
    int rc = srv_js_arr(o, &a, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (!rc) check_arr(&a);
    mact_image im = {0};
    err[0] = 0;
    check_frame(srv_js_frame(o, &C, &im, err, sizeof err), &im, err);
    if (depth > 20) return;
    for (const cJSON *c = o->child; c; c = c->next) js_walk(c, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static int init;
    if (!init) {
        srv_config_defaults(&C);
        C.max_image_pixels = 160 * 160;
        init = 1;
    }
    if (n < 1) return 0;
    int sel = d[0] & 3;
    d++, n--;
    char err[300] = {0};
    if (sel == 0) {
        int rc = srv_mp_scan(d, n, C.max_depth, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (rc) return 0;
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        if (msgpack_unpack_next(&u, (const char *)d, n, &off) == MSGPACK_UNPACK_SUCCESS) mp_walk(&u.data, 0);
        msgpack_unpacked_destroy(&u);
    } else if (sel == 1) {
        cJSON *j = srv_json_parse((const char *)d, n, C.max_depth, err, sizeof err);
        fuzz_check_err(j ? 0 : -1, err, sizeof err);
        if (j) js_walk(j, 0);
        cJSON_Delete(j);
    } else if (sel == 2) {
        uint8_t *out = NULL;
        size_t ol = 0;
        if (srv_b64_decode((const char *)d, n, &out, &ol) == 0) {
            if (ol > n) __builtin_trap();
            srv_buf b = {0};
            srv_b64_encode(&b, out, ol);
            if (b.oom) __builtin_trap();
            /* the encoding is canonical, so a decode that accepted the text must re-encode to a text that decodes
             * to the same bytes */
            uint8_t *o2 = NULL;
            size_t l2 = 0;
            if (srv_b64_decode((const char *)srv_buf_data(&b), b.len, &o2, &l2) || l2 != ol || (ol && memcmp(o2, out, ol)))
                __builtin_trap();
            free(o2);
            free(b.buf);
            free(out);
        }
    } else {
        char kind = 0;
        int isz = 0;
        int rc = srv_dtype_parse((const char *)d, n, &kind, &isz, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (!rc && (!strchr("fiub", kind) || isz < 1 || isz > 8)) __builtin_trap();
    }
    return 0;
}
