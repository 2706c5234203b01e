/* The model loader: one thread srv_run starts once every port listens (the probes answer meanwhile) and joins at
 * exit. It loads the model, fills srv_state (here, before `ready`; read-only after), makes and warms one session
 * per worker, starts the workers (queue.c), and then sets `ready`, or `load_failed` for srv_run to exit on,
 * waking the event loop either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "server/loop.h"

void *srv_loader_main(void *arg)
{
    srv *SV = arg;
    srv_state *S = &SV->st;   /* written here, before `ready`; read-only after */
    int nw = SV->nw;
    char err[1024];
    mact_load_options lo = {.precision = S->c.precision, .pack_cache_dir = S->c.pack_cache,
                            .int8_parts = S->c.int8_parts};
    if (mact_model_load(S->c.model_dir, &lo, &S->m, err, sizeof err)) goto fail;
    mact_model_get_info(S->m, &S->mi);
    /* the default tag as mact_predict reads it: --norm-tag, else the checkpoint's default */
    const mact_tag *tg = mact_model_tag(S->m, S->c.norm_tag, err, sizeof err);
    if (!tg) goto fail;
    mact_tag_get_info(tg, &S->tag);
    size_t tj = 0;
    mact_model_tags_json(S->m, NULL, 0, &tj);
    if (!(S->tags_json = malloc(tj + 1)) || mact_model_tags_json(S->m, S->tags_json, tj + 1, NULL)) {
        snprintf(err, sizeof err, "the norm tags' contract: out of memory");
        goto fail;
    }
    S->state_dim = S->tag.state_dim;
    S->n_cameras = S->tag.n_cameras;
    S->workers = nw;
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int tpw = S->c.threads_per_worker > 0 ? S->c.threads_per_worker : (ncpu / nw > 0 ? ncpu / nw : 1);
    int ncam = 1;
    for (int p = 0; p < SRV_NPROTO; p++)
        if (S->c.port[p] && S->c.keys[p].n_cams > ncam) ncam = S->c.keys[p].n_cams;
    if (S->n_cameras > 0 && S->n_cameras <= SRV_MAX_CAMS) ncam = S->n_cameras;
    int hh = S->mi.image_height, ww = S->mi.image_width;
    uint8_t *gray = malloc((size_t)hh * ww * 3);
    float *st = calloc(MACT_NORM_MAX_DIM, sizeof(float));
    if (!gray || !st) { free(gray); free(st); snprintf(err, sizeof err, "out of memory"); goto fail; }
    memset(gray, 128, (size_t)hh * ww * 3);
    for (int i = 0; i < nw; i++) {
        srv_worker *w = &SV->w[i];
        mact_session_options so = {.n_threads = tpw, .max_images = (size_t)S->c.max_images};
        if (mact_session_new(S->m, &so, &w->s, err, sizeof err)) { free(gray); free(st); goto fail; }
        w->cap = (size_t)S->mi.max_action_horizon * S->mi.max_action_dim;
        w->actions = malloc(w->cap * sizeof(float));
        w->index = i;
        mact_frame fr[SRV_MAX_CAMS];
        for (int k = 0; k < ncam; k++) fr[k] = (mact_frame){gray, hh, ww};
        mact_predict_input in = {.frames = fr, .n_frames = (size_t)ncam, .task = "warm up", .state = st,
                                 .state_dim = (size_t)S->state_dim};
        in.options.norm_tag = S->tag.name;
        mact_predict_output out = {.actions = w->actions, .actions_cap = w->cap};
        if (!w->actions || mact_predict(w->s, &in, &out)) {
            snprintf(err, sizeof err, "warm-up inference: %s",
                     w->actions ? mact_session_error(w->s) : "out of memory");
            free(gray);
            free(st);
            goto fail;
        }
    }
    free(gray);
    free(st);
    if (srv_workers_start(SV, err, sizeof err)) goto fail;
    SV->cold_start_ms = srv_now_ms() - SV->t0;
    atomic_store(&SV->ready, 1);
    /* the ports listened from the start (the probes answer "loading" meanwhile), but a client is told where to
     * connect only once the model is served: a server that cannot load announces nothing */
    for (int p = 0; p < SRV_NPROTO; p++)
        if (S->c.port[p]) fprintf(stderr, "mact serve: %s on %s:%d\n", PROTO_NAME(p), S->c.host, S->c.port[p]);
    fprintf(stderr, "mact serve: ready in %.0f ms (%d worker%s x %d threads, tag %s, %s)\n", SV->cold_start_ms, nw,
            nw > 1 ? "s" : "", tpw, S->tag.name, mact_precision_str(S->mi.precision));
    lws_cancel_service(SV->ctx);
    return NULL;
fail:
    fprintf(stderr, "mact serve: %s\n", err);
    atomic_store(&SV->load_failed, 1);
    lws_cancel_service(SV->ctx);
    return NULL;
}
