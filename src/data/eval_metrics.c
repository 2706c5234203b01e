/* What the open-loop evaluation measures (docs/datasets.md): per frame, |error| per chunk step of the policy and of
 * the hold-still baseline, raw and in the tag's normalised units (2(x - lo)/(hi - lo) - 1 on the mask's dims, not
 * clipped, raw elsewhere); per replanned episode, the joins' jumps and the executed rows' errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/eval_internal.h"

int mact_eval_hold_map(const mact_ld_feature *fa, const mact_ld_feature *fs, const char *akey, const char *skey, int D,
                       FILE *progress, int *hmap, char *note, size_t nl, int delta)
{
    const int sd = fs && fs->ndim == 1 ? fs->shape[0] : 0;
    for (int j = 0; j < D; j++) hmap[j] = j < sd ? j : -1;
    note[0] = 0;
    if (delta || !fs) return 0;
    const int named = fa->n_names == D && fs->n_names == sd;
    int same = sd == D;
    for (int j = 0; same && named && j < D; j++) same = !strcmp(fa->names[j], fs->names[j]);
    if (same) return 0;
    char matched[256] = "", unmatched[256] = "";
    size_t ml = 0, ul = 0;
    for (int j = 0; j < D; j++) {
        int k = -1;
        for (int i = 0; named && i < sd && k < 0; i++) if (!strcmp(fa->names[j], fs->names[i])) k = i;
        if (k >= 0) {
            hmap[j] = k;
            if (ml < sizeof matched) ml += (size_t)snprintf(matched + ml, sizeof matched - ml, "%s%d<-%d", ml ? ", " : "", j, k);
        } else if (ul < sizeof unmatched) ul += (size_t)snprintf(unmatched + ul, sizeof unmatched - ul, "%s%d", ul ? ", " : "", j);
    }
    snprintf(note, nl, "the state '%s' (%d dims) and the action '%s' (%d dims) %s: the hold-still baseline takes, per action "
             "dim, the state dim of the same name (action<-state: %s) and state[t][j] elsewhere (%s)", skey, sd, akey, D,
             named ? "name their dims differently" : "differ in dims", ml ? matched : "none", ul ? unmatched : "none");
    if (progress) fprintf(progress, "mact eval: warning: %s\n", note);
    return 1;
}

int mact_eval_episode_selected(const char *eps, int64_t ix)
{
    if (!eps) return 1;
    long a0, b0;
    if (strchr(eps, ':') && sscanf(eps, "%ld:%ld", &a0, &b0) == 2) return ix >= a0 && ix < b0;
    for (const char *q = eps; *q;) {
        char *e;
        long v = strtol(q, &e, 10);
        if (e == q) return 0;
        if (v == ix) return 1;
        q = *e == ',' ? e + 1 : e + strlen(e);
    }
    return 0;
}

/* the evaluation's normalised units: 2(x - lo)/(hi - lo) - 1 on the mask's dims, not clipped, raw elsewhere */
static double norm_unit(const ev_run *R, int j, double x)
{
    const double sc = fmax(R->hi[j] - R->lo[j], 1e-6);
    return R->mask[j] ? 2 * (x - R->lo[j]) / sc - 1 : x;
}

void mact_eval_add_frame(ep_sums *S, ev_run *R, int64_t t)
{
    const int H = R->H, D = R->D, pm = R->o->policy;
    const double *gt = R->act + t * D, *st = R->st + t * R->dsd;
    S->frames++;
    R->frames_run++;
    for (int k = 0; k < H; k++)
        for (int j = 0; j < D; j++) {
            const double g = gt[k * D + j];
            const double hv = R->delta || R->hmap[j] < 0 || R->hmap[j] >= R->dsd ? 0 : st[R->hmap[j]];
            const double pv = pm == MACT_EVAL_MODEL ? R->pred[k * D + j] : pm == MACT_EVAL_HOLD ? hv : g;
            const double gn = norm_unit(R, j, g), pn = norm_unit(R, j, pv), hn = norm_unit(R, j, hv);
            S->m_raw[k] += fabs(pv - g);
            S->h_raw[k] += fabs(hv - g);
            S->m_norm[k] += fabs(pn - gn);
            S->h_norm[k] += fabs(hn - gn);
            S->gt_values++;
            S->outside += g < R->lo[j] || g > R->hi[j];
            if (j == R->grip) { S->m_grip += fabs(pv - g); S->h_grip += fabs(hv - g); S->grip_values++; }
        }
}

/* one action row (dataset units) in the model's normalised units: the options' joint frame, then the tag's own
 * normalisation (mact_tag_normalize_actions: as RTC's rows, clipped to [-1, 1] in quantile and min-max modes) */
static void norm_row(const mact_eval_options *o, const float *x, int D, float *out)
{
    float m[MACT_EVAL_MAX_JOINTS];
    for (int j = 0; j < D && j < MACT_EVAL_MAX_JOINTS; j++)
        m[j] = j < o->n_joints ? (float)(o->joint_signs[j] * x[j] + o->joint_offsets[j]) : x[j];
    mact_tag_normalize_actions(o->tag, m, 1, out);
}

/* mean over dims of |b - a| between two normalised rows */
static double row_jump(const mact_eval_options *o, const float *a_row, const float *b_row, int D)
{
    float a[MACT_EVAL_MAX_JOINTS], b[MACT_EVAL_MAX_JOINTS];
    norm_row(o, a_row, D, a);
    norm_row(o, b_row, D, b);
    double sum = 0;
    for (int j = 0; j < D; j++) sum += fabs((double)b[j] - (double)a[j]);
    return sum / D;
}

void mact_eval_replan_measure(ep_replan *r, const mact_eval_options *o, const double *lo, const double *hi,
                              const unsigned char *mask, const double *act, int H, int D)
{
    r->ex_values = (double)r->n_chunks * r->K * D;
    for (int ch = 0; ch < 2; ch++) {
        if (!(r->chains >> ch & 1)) continue;
        free(r->jump[ch]);
        free(r->step[ch]);
        r->jump[ch] = malloc(sizeof(double) * (size_t)(r->n_chunks + 1));
        r->step[ch] = malloc(sizeof(double) * (size_t)(r->n_chunks + 1));
        const float *c0 = r->chunk[ch];
        for (int c = 1; c < r->n_chunks && r->jump[ch] && r->step[ch]; c++) {
            const float *last = c0 + ((size_t)(c - 1) * H + r->K + r->delay - 1) * D;  /* the old chunk's last executed row */
            r->jump[ch][c - 1] = row_jump(o, last, c0 + ((size_t)c * H + r->delay) * D, D);  /* the new chunk's first */
            if (r->K + r->delay < H)  /* the step the old chunk itself takes there: what "continuing it" costs */
                r->step[ch][c - 1] = row_jump(o, last, last + D, D);
        }
        r->ex_raw[ch] = r->ex_norm[ch] = 0;
        for (int c = 0; c < r->n_chunks; c++)
            for (int i = 0; i < r->K; i++) {
                const float *x = mact_eval_exec_row(r, ch, H, D, c, i);
                const double *g = act + ((size_t)c * r->K + i) * D;
                for (int j = 0; j < D; j++) {
                    const double sc = fmax(hi[j] - lo[j], 1e-6), pv = x[j];
                    const double gn = mask[j] ? 2 * (g[j] - lo[j]) / sc - 1 : g[j], pn = mask[j] ? 2 * (pv - lo[j]) / sc - 1 : pv;
                    r->ex_raw[ch] += fabs(pv - g[j]);
                    r->ex_norm[ch] += fabs(pn - gn);
                }
            }
    }
}
