/* The frame producer of `mact eval` (eval_frames.h). Videos are decoded with one decoder thread each: the
 * producer runs beside the inference's pool, and a sequential forward decode needs no more. The queue holds a few frames: enough to cover the jitter
 * of one decode, small enough that the images waiting in it stay a few megabytes at full camera size. */
#include "data/eval_frames.h"
#include <math.h>
#include "data/ds_camera.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QN 4

struct evf {
    evf_options o;
    ds_camera cam[EVF_MAX_CAMS];       /* each camera's reader: its video kept open while episodes share the file */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t can_pop, can_push;
    evf_item q[QN];
    int head, count, stop, finished;
};

void evf_item_free(evf_item *it)
{
    if (!it) return;
    for (int c = 0; c < EVF_MAX_CAMS; c++) mact_image_free(&it->im[c]);
    /* act / st belong to the consumer from EVF_EPISODE to EVF_EPISODE_END: freed by it there */
}

int evf_static(const double *act, int64_t t, int H, int D, double threshold)
{
    const double *gt = act + t * D;
    double mv = 0;
    for (int k = 0; k < H; k++)
        for (int j = 0; j < D; j++) mv = fmax(mv, fabs(gt[k * D + j] - gt[j]));
    return mv <= threshold;
}

/* 0, or -1 when the consumer stopped (the item is freed) */
static int push(evf *f, evf_item *it)
{
    pthread_mutex_lock(&f->mu);
    while (f->count == QN && !f->stop) pthread_cond_wait(&f->can_push, &f->mu);
    if (f->stop) {
        pthread_mutex_unlock(&f->mu);
        evf_item_free(it);
        if (it->kind == EVF_EPISODE) { free(it->act); free(it->st); }
        return -1;
    }
    f->q[(f->head + f->count) % QN] = *it;
    f->count++;
    pthread_cond_signal(&f->can_pop);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

static void push_error(evf *f, const char *msg)
{
    evf_item it;
    memset(&it, 0, sizeof it);
    it.kind = EVF_ERROR;
    snprintf(it.err, sizeof it.err, "%s", msg);
    push(f, &it);
}

static void *run(void *arg)
{
    evf *f = arg;
    const evf_options *o = &f->o;
    char err[1536], msg[2048];
    for (int q = 0; q < o->n_sel; q++) {
        if (q % o->nshard != o->shard) continue;
        const mact_ld_episode *e = mact_ld_episode_at(o->d, o->sel[q]);
        evf_item it;
        memset(&it, 0, sizeof it);
        it.q = q;
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/ep_%06lld.json", o->episode_dir, (long long)e->index);
        if (access(fp, F_OK) == 0) {  /* finished by an earlier run */
            it.kind = EVF_SKIPPED;
            if (push(f, &it)) return NULL;
            continue;
        }
        double *act = NULL, *st = NULL;
        int64_t n = 0, n2 = 0;
        int da = 0, dsd = 0;
        if (mact_ld_read(o->d, o->sel[q], o->akey, &act, &n, &da, err, sizeof err) ||
            mact_ld_read(o->d, o->sel[q], o->skey, &st, &n2, &dsd, err, sizeof err)) {
            free(act);
            push_error(f, err);
            return NULL;
        }
        int bad = 0;
        for (int c = 0; o->decode && c < o->ncam && !bad; c++)
            bad = ds_camera_episode(o->d, o->sel[q], &f->cam[c], err, sizeof err) != 0;
        if (bad) {
            free(act); free(st);
            push_error(f, err);
            return NULL;
        }
        it.kind = EVF_EPISODE;
        it.act = act; it.st = st; it.n = n; it.da = da; it.dsd = dsd;
        /* act stays readable here until EVF_EPISODE_END is pushed: the consumer frees it only after that */
        int stopped = push(f, &it) != 0;
        for (int64_t t = 0; !stopped && !bad && t + o->H <= n; t += o->stride > 1 ? o->stride : 1) {
            memset(&it, 0, sizeof it);
            it.kind = EVF_FRAME;
            it.q = q;
            it.t = t;
            it.excluded = evf_static(act, t, o->H, da, o->static_threshold);
            for (int c = 0; o->decode && !it.excluded && c < o->ncam; c++)
                if (ds_camera_frame(o->d, &f->cam[c], t, &it.im[c], NULL, err, sizeof err)) {
                    snprintf(msg, sizeof msg, "%s: episode %lld frame %lld camera %s: %s", o->dsdir, (long long)e->index,
                             (long long)t, o->cams[c], err);
                    evf_item_free(&it);
                    bad = 1;
                    break;
                }
            if (!bad) stopped = push(f, &it) != 0;
        }
        if (stopped) return NULL;
        if (bad) { push_error(f, msg); return NULL; }
        memset(&it, 0, sizeof it);
        it.kind = EVF_EPISODE_END;
        it.q = q;
        if (push(f, &it)) return NULL;
    }
    evf_item it;
    memset(&it, 0, sizeof it);
    it.kind = EVF_DONE;
    push(f, &it);
    return NULL;
}

int evf_start(const evf_options *o, evf **out, char *err, size_t errlen)
{
    *out = NULL;
    if (o->ncam > EVF_MAX_CAMS) { snprintf(err, errlen, "at most %d cameras", EVF_MAX_CAMS); return -1; }
    evf *f = calloc(1, sizeof *f);
    if (!f) { snprintf(err, errlen, "out of memory"); return -1; }
    f->o = *o;
    if (f->o.tolerance_s <= 0) f->o.tolerance_s = 1e-4;
    for (int c = 0; c < o->ncam; c++) {
        const mact_ld_feature *ft = mact_ld_find_feature(o->d, o->cams[c]);
        if (!ft || (strcmp(ft->dtype, "image") && strcmp(ft->dtype, "video"))) {
            snprintf(err, errlen, "%s: camera '%s' is %s", o->dsdir, o->cams[c], ft ? "neither an image nor a video feature" : "not a feature");
            free(f);
            return -1;
        }
        if (ds_camera_open(o->d, o->cams[c], 1, f->o.tolerance_s, &f->cam[c], err, errlen)) {
            free(f);
            return -1;
        }
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->can_pop, NULL);
    pthread_cond_init(&f->can_push, NULL);
    if (pthread_create(&f->th, NULL, run, f)) {
        snprintf(err, errlen, "cannot start the frame reader thread");
        pthread_mutex_destroy(&f->mu); pthread_cond_destroy(&f->can_pop); pthread_cond_destroy(&f->can_push);
        free(f);
        return -1;
    }
    *out = f;
    return 0;
}

void evf_next(evf *f, evf_item *it)
{
    pthread_mutex_lock(&f->mu);
    if (f->finished) {  /* after EVF_ERROR / EVF_DONE the producer has returned */
        pthread_mutex_unlock(&f->mu);
        memset(it, 0, sizeof *it);
        it->kind = EVF_DONE;
        return;
    }
    while (f->count == 0) pthread_cond_wait(&f->can_pop, &f->mu);
    *it = f->q[f->head];
    f->head = (f->head + 1) % QN;
    f->count--;
    if (it->kind == EVF_ERROR || it->kind == EVF_DONE) f->finished = 1;
    pthread_cond_signal(&f->can_push);
    pthread_mutex_unlock(&f->mu);
}

void evf_stop(evf *f)
{
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->can_push);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    while (f->count) {  /* what the consumer never took */
        evf_item *it = &f->q[f->head];
        evf_item_free(it);
        if (it->kind == EVF_EPISODE) { free(it->act); free(it->st); }
        f->head = (f->head + 1) % QN;
        f->count--;
    }
    for (int c = 0; c < EVF_MAX_CAMS; c++) ds_camera_close(&f->cam[c]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->can_pop);
    pthread_cond_destroy(&f->can_push);
    free(f);
}
