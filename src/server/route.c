/* What the server makes of an HTTP request's head: the route (probes, the protocol's path, 404), the method,
 * the API key header, Content-Length against the body limit, and whether a WebSocket upgrade is taken. Pure
 * functions of strings: libwebsockets parses the request line and headers (and normalises the path: %XX,
 * "//", "/./", "/../", the query moved aside), server.c hands the parts here and acts on the answer, and
 * fuzz/fuzz_serve_route.c calls them on raw request heads. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "server/internal.h"

int srv_key_equal(const char *key, size_t keylen, const char *cand, size_t cl)
{
    /* constant time in the key: every byte of the configured key is compared whatever the candidate */
    volatile unsigned char d = (unsigned char)(cl != keylen);
    for (size_t i = 0; i < keylen; i++) d |= (unsigned char)(key[i] ^ (i < cl ? cand[i] : 0));
    return d == 0;
}

int srv_route_auth_ok(const srv_route_ctx *x, const char *authorization)
{
    if (!x->keylen || !x->c->key_required[x->proto]) return 1;
    if (!authorization) return 0;
    const char *k = NULL;
    if (!strncasecmp(authorization, "Api-Key ", 8)) k = authorization + 8;
    else if (!strncasecmp(authorization, "Bearer ", 7)) k = authorization + 7;
    if (!k) return 0;
    while (*k == ' ') k++;
    return srv_key_equal(x->key, x->keylen, k, strlen(k));
}

/* Content-Length: decimal digits only (spaces and tabs around them allowed; a repeated header arrives joined by
 * commas and is refused), so the number checked is the number of bytes lws reads. 0 with *n set; 1 for digits
 * past 2^64 (over any limit); -1 when it is not a number. */
static int parse_length(const char *s, unsigned long long *n)
{
    while (*s == ' ' || *s == '\t') s++;
    const char *e = s;
    unsigned long long v = 0;
    int over = 0;
    for (; *e >= '0' && *e <= '9'; e++) {
        unsigned d = (unsigned)(*e - '0');
        if (v > (~0ULL - d) / 10) over = 1;
        else v = v * 10 + d;
    }
    if (e == s) return -1;
    while (*e == ' ' || *e == '\t') e++;
    if (*e) return -1;
    *n = v;
    return over;
}

static void answer(srv_route *r, srv_route_kind kind, int status, const char *ctype, const char *body)
{
    r->kind = kind;
    r->status = status;
    r->ctype = ctype;
    snprintf(r->body, sizeof r->body, "%s", body);
}

static const char UNAUTH[] = "unauthorized: send Authorization: Api-Key <key> or Bearer <key>";

void srv_route_http(const srv_route_ctx *x, const srv_http_head *h, srv_route *r)
{
    memset(r, 0, sizeof *r);
    r->outcome = SRV_OC_N;
    const char *uri = h->uri ? h->uri : "/";
    size_t pl = strcspn(uri, "?");   /* the path: lws moves the query aside already; nothing reads it */
    int get = h->method && !strcmp(h->method, "GET"), post = h->method && !strcmp(h->method, "POST");
    int ready = x->ready && !x->draining;
#define IS(p) (pl == sizeof(p) - 1 && !memcmp(uri, p, pl))
    /* the probes: GET on every port, never behind the key */
    if (get && IS("/livez")) answer(r, SRV_RT_PROBE, 200, "text/plain", "ok\n");
    else if (get && IS("/readyz"))
        answer(r, SRV_RT_PROBE, ready ? 200 : 503, "text/plain", ready ? "ready\n" : x->draining ? "draining\n" : "loading\n");
    else if (get && IS("/healthz")) answer(r, SRV_RT_PROBE, ready ? 200 : 503, "text/plain", ready ? "OK\n" : "loading\n");
    else if (get && IS("/health"))
        answer(r, SRV_RT_PROBE, ready ? 200 : 503, "application/json",
               ready ? "{\"status\": \"ok\"}\n" : "{\"status\": \"loading\"}\n");
    else if (get && IS("/metrics")) answer(r, SRV_RT_METRICS, 200, "text/plain; version=0.0.4", "");
    else if (get && IS("/config")) answer(r, SRV_RT_CONFIG, 200, "application/json", "");
    else {
        const srv_protocol *pr = srv_protocols[x->proto];
        size_t rl = pr->route ? strlen(pr->route) : 0;
        if (pr->transport != SRV_HTTP || !pr->route || pl != rl || memcmp(uri, pr->route, rl) || !(get || post)) {
            answer(r, SRV_RT_REFUSE, 404, "application/json", "{\"error\": \"not found\"}\n");
        } else if (!srv_route_auth_ok(x, h->authorization)) {
            answer(r, SRV_RT_REFUSE, 401, "application/json", "");
            snprintf(r->body, sizeof r->body, "{\"error\": \"%s\"}\n", UNAUTH);
            r->outcome = SRV_OC_UNAUTH;
            r->log = "missing or wrong API key";
        } else if (get) {
            answer(r, SRV_RT_IDENTITY, 200, "application/json", "");
        } else if (!h->content_length) {
            answer(r, SRV_RT_REFUSE, 411, "application/json", "{\"error\": \"Content-Length required\"}\n");
        } else {
            unsigned long long n = 0;
            int rc = parse_length(h->content_length, &n);
            if (rc < 0) {
                answer(r, SRV_RT_REFUSE, 400, "application/json",
                       "{\"error\": \"Content-Length is not a decimal number of bytes\"}\n");
                r->outcome = SRV_OC_BAD;
                r->log = "Content-Length is not a decimal number";
            } else if (rc > 0 || n > x->c->max_message) {
                answer(r, SRV_RT_REFUSE, 413, "application/json", "");
                if (rc > 0) snprintf(r->body, sizeof r->body, "{\"error\": \"body of more than 2^64 bytes exceeds the limit of %zu\"}\n", x->c->max_message);
                else snprintf(r->body, sizeof r->body, "{\"error\": \"body of %llu bytes exceeds the limit of %zu\"}\n", n, x->c->max_message);
                r->outcome = SRV_OC_BAD;
                r->log = "body over the size limit";
                r->content_length = rc > 0 ? ~0ULL : n;
            } else {
                r->kind = SRV_RT_BODY;
                r->content_length = n;
            }
        }
    }
#undef IS
    /* a body sent with anything but an accepted POST is never run as a request; a refused POST's connection is
     * closed after the answer (its body is not read to find the next request) */
    r->discard_body = r->kind != SRV_RT_BODY;
    if (post && r->kind == SRV_RT_REFUSE) r->close_after = 1;
}

int srv_route_upgrade(const srv_route_ctx *x, const char *authorization, srv_upgrade *u)
{
    memset(u, 0, sizeof *u);
    u->outcome = SRV_OC_N;
    const srv_protocol *pr = srv_protocols[x->proto];
    if (pr->transport != SRV_WS) {
        u->status = "400 Bad Request";
        snprintf(u->text, sizeof u->text, "the %s port speaks HTTP only", pr->name);
    } else if (!srv_route_auth_ok(x, authorization)) {
        u->status = "401 Unauthorized";
        snprintf(u->text, sizeof u->text, "%s", UNAUTH);
        u->outcome = SRV_OC_UNAUTH;
        u->log = "missing or wrong API key";
    } else if (x->draining) {
        u->status = "503 Service Unavailable";
        snprintf(u->text, sizeof u->text, "shutting down");
    } else return 0;
    return -1;
}
