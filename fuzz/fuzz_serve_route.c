/* mact serve's reading of an HTTP request head (src/server/route.c): the route (probes, the protocol's path,
 * 404), the method, the API key, Content-Length against the body limit, and the WebSocket upgrade decision.
 *
 * Input: byte 0 is the server's configuration: bits 0-1 the port's protocol (openpi, act, vla-eval; 3: act),
 * bit 2 an API key ("sekret") configured, bit 3 the port's protocol requires it, bit 4 ready, bit 5 draining,
 * bit 6 a 64 MiB body limit (else 4 MiB, the suites' --max-message-mb 4). The rest is a raw request head
 * (request line, header lines, "\r\n" or "\n"), split here as libwebsockets splits it: the method and target
 * from the request line, header names case-insensitive, leading blanks of a value dropped, a repeated
 * Authorization or Content-Length joined with ','. (lws also normalises the path; route.c must take any string.)
 *
 * Checked against an independent model of the rules in docs/serving.md "Endpoints on every port" and
 * docs/limits.md: the kind and status of the answer, which refusals close the connection and are counted,
 * that a body is run as a request only after an accepted POST on the protocol's route with a decimal
 * Content-Length within the limit (and that length exactly), that the key is needed exactly where
 * configured, that every JSON answer parses; the upgrade taken exactly when the port speaks WebSocket, the key
 * matches and the server is not draining. */
#include <strings.h>
#include "serve_stub.h"

#define RT_TRAP() do { fprintf(stderr, "fuzz_serve_route.c:%d: property violated\n", __LINE__); __builtin_trap(); } while (0)

static const char KEY[] = "sekret";

typedef struct { char *method, *target, *auth, *clen; } head;

static void join(char **dst, const char *v, size_t n)
{
    size_t o = *dst ? strlen(*dst) : 0;
    char *s = realloc(*dst, o + (o ? 1 : 0) + n + 1);
    if (!s) __builtin_trap();
    if (o) s[o++] = ',';
    memcpy(s + o, v, n);
    s[o + n] = 0;
    *dst = s;
}

static void split(const char *p, size_t n, head *h)
{
    memset(h, 0, sizeof *h);
    size_t i, e;
    for (e = 0; e < n && p[e] != '\n'; e++) {}
    size_t le = e > 0 && p[e - 1] == '\r' ? e - 1 : e;   /* the request line: METHOD SP TARGET SP VERSION */
    const char *sp = memchr(p, ' ', le);
    if (sp) {
        join(&h->method, p, (size_t)(sp - p));
        const char *t = sp + 1, *sp2 = memchr(t, ' ', le - (size_t)(t - p));
        join(&h->target, t, sp2 ? (size_t)(sp2 - t) : le - (size_t)(t - p));
    }
    for (i = e + 1; i < n; i = e + 1) {
        for (e = i; e < n && p[e] != '\n'; e++) {}
        le = e > i && p[e - 1] == '\r' ? e - 1 : e;
        const char *c = memchr(p + i, ':', le - i);
        if (!c) continue;
        size_t nl = (size_t)(c - (p + i));
        const char *v = c + 1;
        while (v < p + le && (*v == ' ' || *v == '\t')) v++;
        size_t vl = (size_t)(p + le - v);
        if (nl == 13 && !strncasecmp(p + i, "authorization", 13)) join(&h->auth, v, vl);
        else if (nl == 14 && !strncasecmp(p + i, "content-length", 14)) join(&h->clen, v, vl);
    }
}

/* the model: the key check, and Content-Length (-1 not a number, 1 past 2^64, 0 a number in *v) */
static int m_auth(int need, const char *a)
{
    if (!need) return 1;
    if (!a) return 0;
    const char *k;
    if (!strncasecmp(a, "api-key ", 8)) k = a + 8;
    else if (!strncasecmp(a, "bearer ", 7)) k = a + 7;
    else return 0;
    k += strspn(k, " ");
    return !strcmp(k, KEY);
}

static int m_len(const char *s, unsigned long long *v)
{
    size_t a = strspn(s, " \t"), d = strspn(s + a, "0123456789");
    if (!d || s[a + d + strspn(s + a + d, " \t")]) return -1;
    unsigned long long x = 0;
    for (size_t i = a; i < a + d; i++)
        if (__builtin_mul_overflow(x, 10ULL, &x) || __builtin_add_overflow(x, (unsigned long long)(s[i] - '0'), &x)) return 1;
    *v = x;
    return 0;
}

static void check_json(const char *body, size_t cap)
{
    if (!memchr(body, 0, cap)) RT_TRAP();
    cJSON *j = cJSON_Parse(body);
    if (!j) RT_TRAP();
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static srv_config C;
    static int init;
    if (!init) { srv_config_defaults(&C); init = 1; }
    if (n < 1) return 0;
    const int protos[4] = {SRV_OPENPI, SRV_ACT, SRV_VLA, SRV_ACT};
    int proto = protos[d[0] & 3], has_key = d[0] >> 2 & 1, req = d[0] >> 3 & 1, ready = d[0] >> 4 & 1,
        draining = d[0] >> 5 & 1;
    C.max_message = d[0] & 64 ? (size_t)64 << 20 : (size_t)4 << 20;
    for (int p = 0; p < SRV_NPROTO; p++) C.key_required[p] = p == proto ? req : !req;
    char *text = fuzz_cstr(d + 1, n - 1);   /* C strings end at a NUL, as lws's header copies do */
    head h;
    split(text, strlen(text), &h);
    srv_route_ctx x = {.c = &C, .proto = proto, .key = has_key ? KEY : NULL, .keylen = has_key ? strlen(KEY) : 0,
                       .ready = ready, .draining = draining};
    srv_http_head hh = {.method = h.method, .uri = h.target, .authorization = h.auth, .content_length = h.clen};
    srv_route r;
    srv_route_http(&x, &hh, &r);

    /* the model */
    const char *uri = h.target ? h.target : "/";
    size_t pl = strcspn(uri, "?");
    char *path = fuzz_cstr((const uint8_t *)uri, pl);
    int get = h.method && !strcmp(h.method, "GET"), post = h.method && !strcmp(h.method, "POST");
    int up = ready && !draining, need = has_key && req;
    const srv_protocol *pr = srv_protocols[proto];
    int probe = get && (!strcmp(path, "/livez") || !strcmp(path, "/readyz") || !strcmp(path, "/healthz") ||
                        !strcmp(path, "/health"));
    int mine = pr->transport == SRV_HTTP && !strcmp(path, pr->route) && (get || post);
    if (probe) {
        if (r.kind != SRV_RT_PROBE || r.outcome != SRV_OC_N) RT_TRAP();
        int want = !strcmp(path, "/livez") || up ? 200 : 503;
        if (r.status != want || !r.body[0] || !memchr(r.body, 0, sizeof r.body)) RT_TRAP();
        if (!strcmp(path, "/health")) check_json(r.body, sizeof r.body);
    } else if (get && !strcmp(path, "/metrics")) {
        if (r.kind != SRV_RT_METRICS || r.status != 200) RT_TRAP();
    } else if (get && !strcmp(path, "/config")) {
        if (r.kind != SRV_RT_CONFIG || r.status != 200) RT_TRAP();
    } else if (!mine) {
        if (r.kind != SRV_RT_REFUSE || r.status != 404 || r.outcome != SRV_OC_N) RT_TRAP();
    } else if (!m_auth(need, h.auth)) {
        if (r.kind != SRV_RT_REFUSE || r.status != 401 || r.outcome != SRV_OC_UNAUTH || !r.log) RT_TRAP();
    } else if (get) {
        if (r.kind != SRV_RT_IDENTITY || r.status != 200) RT_TRAP();
    } else if (!h.clen) {
        if (r.kind != SRV_RT_REFUSE || r.status != 411) RT_TRAP();
    } else {
        unsigned long long v = 0;
        int rc = m_len(h.clen, &v);
        if (rc < 0) {
            if (r.kind != SRV_RT_REFUSE || r.status != 400 || r.outcome != SRV_OC_BAD) RT_TRAP();
        } else if (rc > 0 || v > C.max_message) {
            if (r.kind != SRV_RT_REFUSE || r.status != 413 || r.outcome != SRV_OC_BAD) RT_TRAP();
            char lim[32];
            snprintf(lim, sizeof lim, "%zu", C.max_message);
            if (!strstr(r.body, lim)) RT_TRAP();   /* the answer names the limit */
        } else if (r.kind != SRV_RT_BODY || r.content_length != v || r.content_length > C.max_message) RT_TRAP();
    }
    /* a body is run only after an accepted POST; a refused POST closes its connection */
    if (r.discard_body != (r.kind != SRV_RT_BODY) || (r.kind == SRV_RT_BODY && !post)) RT_TRAP();
    if (r.close_after != (post && r.kind == SRV_RT_REFUSE)) RT_TRAP();
    if (r.kind == SRV_RT_REFUSE) check_json(r.body, sizeof r.body);
    if (r.outcome != SRV_OC_N && (!r.log || !r.log[0])) RT_TRAP();
    if (r.kind != SRV_RT_BODY && !r.ctype) RT_TRAP();

    srv_upgrade u;
    int taken = !srv_route_upgrade(&x, h.auth, &u);
    int want = pr->transport == SRV_WS && m_auth(need, h.auth) && !draining;
    if (taken != want) RT_TRAP();
    if (!taken) {
        if (!u.status || !u.text[0] || !memchr(u.text, 0, sizeof u.text)) RT_TRAP();
        int unauth = pr->transport == SRV_WS && !m_auth(need, h.auth);
        if (unauth != (u.outcome == SRV_OC_UNAUTH) || (unauth && strncmp(u.status, "401", 3))) RT_TRAP();
    }
    free(path);
    free(text);
    free(h.method);
    free(h.target);
    free(h.auth);
    free(h.clen);
    return 0;
}
