/* Connection limits for the event loop: every accepted socket is tracked (by its lws handle) with its peer's
 * address until lws destroys it. Over --max-connections-per-ip or --max-connections a socket is still accepted
 * but marked, so its first request is answered with the protocol's own refusal naming the limit (and a socket
 * that sends nothing is closed by the header timeout); past the global limit plus a small grace it is closed at
 * once (the grace: as many again as the limit, at least SRV_CONN_GRACE). The table is a fixed array: fd use is
 * bounded by construction. Event-loop thread only. */
#include <stdlib.h>
#include <string.h>
#include "server/internal.h"

struct srv_connlim {
    int max_total, max_per_ip, cap, n;
    struct { const void *key; char ip[64]; int over, done, killed; double t0; } *e;
};

srv_connlim *srv_connlim_new(int max_total, int max_per_ip)
{
    srv_connlim *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    L->max_total = max_total;
    L->max_per_ip = max_per_ip;
    L->cap = max_total + (max_total > SRV_CONN_GRACE ? max_total : SRV_CONN_GRACE);
    L->e = calloc((size_t)L->cap, sizeof *L->e);
    if (!L->e) { free(L); return NULL; }
    return L;
}

void srv_connlim_free(srv_connlim *L)
{
    if (!L) return;
    free(L->e);
    free(L);
}

int srv_connlim_open(srv_connlim *L, const void *key, const char *ip, double now)
{
    if (L->n >= L->cap) return SRV_CONN_CLOSE;
    /* the limits count the sockets let in: one refused (marked, closed within 2 s) holds only a grace slot */
    int same = 0, in = 0;
    for (int i = 0; i < L->n; i++)
        if (!L->e[i].over) { in++; same += !strcmp(L->e[i].ip, ip); }
    int r = same >= L->max_per_ip ? SRV_CONN_OVER_IP : in >= L->max_total ? SRV_CONN_OVER_TOTAL : SRV_CONN_OK;
    L->e[L->n].key = key;
    snprintf(L->e[L->n].ip, sizeof L->e[L->n].ip, "%s", ip);
    L->e[L->n].over = r;
    L->e[L->n].done = L->e[L->n].killed = 0;
    L->e[L->n].t0 = now;
    L->n++;
    return r;
}

static int find(const srv_connlim *L, const void *key)
{
    for (int i = L->n - 1; i >= 0; i--)
        if (L->e[i].key == key) return i;
    return -1;
}

int srv_connlim_over(const srv_connlim *L, const void *key)
{
    int i = find(L, key);
    return i < 0 ? 0 : L->e[i].over;
}

int srv_connlim_close(srv_connlim *L, const void *key)
{
    int i = find(L, key);
    if (i < 0) return 0;
    L->e[i] = L->e[--L->n];
    return 1;
}

int srv_connlim_count(const srv_connlim *L) { return L->n; }
int srv_connlim_admit(const srv_connlim *L, const char *ip)
{
    if (L->n >= L->cap) return 0;
    int in = 0, over = 0;
    for (int i = 0; i < L->n; i++)
        if (!strcmp(L->e[i].ip, ip)) { if (L->e[i].over) over++; else in++; }
    /* an address at its limit gets a few sockets refused in words; more are closed at once, so one address
     * cannot fill the grace the others' refusals need */
    return !(in >= L->max_per_ip && over >= SRV_CONN_OVER_PER_IP);
}

void srv_connlim_done(srv_connlim *L, const void *key)
{
    int i = find(L, key);
    if (i >= 0) L->e[i].done = 1;
}

int srv_connlim_expired(srv_connlim *L, double now, double header_ms, double over_ms, const void **keys, int max)
{
    int k = 0;
    for (int i = 0; i < L->n && k < max; i++) {
        if (L->e[i].killed || (L->e[i].done && !L->e[i].over)) continue;
        if (now - L->e[i].t0 >= (L->e[i].over ? over_ms : header_ms)) {
            L->e[i].killed = 1;
            keys[k++] = L->e[i].key;
        }
    }
    return k;
}
