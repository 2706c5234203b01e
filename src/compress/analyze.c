/* mact_snr_analyze (include/mact_compress.h; `mact prune-analyze`): per ViT block SNR from the runtime's block
 * energies (mact_stages.h mact_vit_block_energy) over calibration frames, and the keep-set it proposes
 * (docs/compression.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "mact_compress.h"
#include "mact_stages.h"
#include "base/err.h"
#include "compress/pixels.h"
#include "compress/prune.h"

struct mact_snr_result {
    int nb, cfg_layers, n_images, n_taps, nk;
    long long tokens;                       /* per image */
    mact_precision precision;
    double *snr, *in_e, *d_e;               /* [nb]: dB; the energies averaged over tokens and images */
    int *tapped, *kept;                     /* [nb] */
    int taps_abs[MACT_PRUNE_MAX_TAPS], keep[MACT_PRUNE_MAX_BLOCKS], raw[MACT_PRUNE_MAX_TAPS], lands[MACT_PRUNE_MAX_TAPS];
};

#define SAY(...) do { if (rep) fprintf(rep, __VA_ARGS__); } while (0)

void mact_snr_free(mact_snr_result *r)
{
    if (!r) return;
    free(r->snr); free(r->in_e); free(r->d_e); free(r->tapped); free(r->kept);
    free(r);
}

/* the energies of every frame through the ViT: 0, or a status with err set */
static int probe_frames(const mact_snr_options *o, const mact_model *m, float *pv, double *in_sq, double *d_sq,
                        int *n_images, char *err, size_t el)
{
    cmp_frames fr;
    int rc = mact_cmp_frames_open(&fr, o->images, o->n_images, o->dataset, o->n_frames, err, el);
    const int n = rc ? 0 : mact_cmp_frames_count(&fr);
    for (int i = 0; i < n && !rc; i++)
        if (!(rc = mact_cmp_frames_pixels(&fr, i, m, pv, err, el)) &&
            (rc = mact_vit_block_energy(o->session, pv, in_sq, d_sq)))
            mact_errf(err, el, rc, "%s", mact_session_error(o->session));
    mact_cmp_frames_close(&fr);
    *n_images = n;
    return rc;
}

mact_status mact_snr_analyze(const mact_snr_options *o, FILE *rep, mact_snr_result **out, char *err, size_t el)
{
    if (out) *out = NULL;
    if (!o || !o->session || !o->model || (!o->n_images == !o->dataset) || (o->n_images && !o->images) || o->n_images < 0)
        return mact_errf(err, el, MACT_ERR_INPUT, "a teacher session, its folder and calibration frames (images or a "
                         "dataset) are required");
    if (o->target_depth < 0 || o->target_depth > MACT_PRUNE_MAX_BLOCKS || o->n_frames < 0)
        return mact_errf(err, el, MACT_ERR_INPUT, "target depth or frame count out of range");
    mact_vit_geometry g;
    int rc = mact_prune_geometry(o->model, &g, err, el);
    if (rc) return (mact_status)rc;
    const mact_model *m = mact_session_model(o->session);
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    const int nb = mi.vit_layers;
    const int64_t P = mi.n_patches;
    float *pv = malloc((size_t)P * mi.patch_dim * sizeof(float));
    double *in_sq = calloc((size_t)nb, sizeof(double)), *d_sq = calloc((size_t)nb, sizeof(double));
    mact_snr_result *r = calloc(1, sizeof *r);
    if (r) {
        r->snr = calloc((size_t)nb, sizeof(double)); r->in_e = calloc((size_t)nb, sizeof(double)); r->d_e = calloc((size_t)nb, sizeof(double));
        r->tapped = calloc((size_t)nb, sizeof(int)); r->kept = calloc((size_t)nb, sizeof(int));
    }
    if (!pv || !in_sq || !d_sq || !r || !r->snr || !r->in_e || !r->d_e || !r->tapped || !r->kept) {
        rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory");
        goto done;
    }
    double *snr = r->snr;
    int *tapped = r->tapped, *kept = r->kept;
    int n_images = 0;
    if ((rc = probe_frames(o, m, pv, in_sq, d_sq, &n_images, err, el))) goto done;
    int deepest = 0;
    for (int t = 0; t < g.n_taps; t++) {
        tapped[g.taps_abs[t]] = 1;
        if (g.taps_abs[t] > deepest) deepest = g.taps_abs[t];
    }
    const double count = (double)n_images * (double)P;  /* tokens averaged over */
    SAY("model: %s\n", o->model);
    SAY("ViT: %d blocks stored, vit_config.num_hidden_layers %d, taps", nb, g.cfg_layers);
    for (int t = 0; t < g.n_taps; t++) SAY(" %d (layer %d)", g.taps_raw[t], g.taps_abs[t]);
    SAY("\ncalibration: %d image%s x %lld tokens, precision %s\n", n_images, n_images == 1 ? "" : "s",
        (long long)P, mact_precision_str(mi.precision));
    SAY("SNR_j = 10 log10(E||in_j||^2 / E||out_j - in_j||^2), E = the mean over tokens and images of the per-token\n"
        "squared L2 norm of block j's input residual stream (in) and of its update (out - in); high = the block\n"
        "barely changes its input\n");
    SAY("%5s %16s %16s %10s\n", "block", "E||in||^2", "E||out-in||^2", "SNR_dB");
    for (int j = 0; j < nb; j++) {
        snr[j] = d_sq[j] > 0 ? 10.0 * log10(in_sq[j] / d_sq[j]) : INFINITY;
        r->in_e[j] = in_sq[j] / count;
        r->d_e[j] = d_sq[j] / count;
        SAY("%5d %16.6g %16.6g %10.4f%s%s\n", j, in_sq[j] / count, d_sq[j] / count, snr[j], tapped[j] ? "  tap" : "",
            j > deepest ? "  (after the deepest tap: feeds nothing)" : "");
    }
    r->nb = nb; r->cfg_layers = g.cfg_layers; r->n_images = n_images; r->tokens = (long long)P; r->precision = mi.precision;
    r->n_taps = g.n_taps;
    memcpy(r->taps_abs, g.taps_abs, sizeof r->taps_abs);
    /* the proposal */
    int *keep = r->keep, *raw = r->raw, *lands = r->lands, nk = 0;
    if (o->target_depth) {
        if (o->target_depth > deepest + 1) {
            rc = mact_errf(err, el, MACT_ERR_INPUT, "--target-depth %d: only %d blocks (0..%d, the deepest tap) feed the connector",
                           o->target_depth, deepest + 1, deepest);
            goto done;
        }
        kept[deepest] = 1;
        for (int k = 1; k < o->target_depth; k++) {  /* the lowest SNR first; ties: the shallower block */
            int best = -1;
            for (int j = 0; j < deepest; j++)
                if (!kept[j] && (best < 0 || snr[j] < snr[best])) best = j;
            kept[best] = 1;
        }
        for (int j = 0; j < nb; j++) if (kept[j]) keep[nk++] = j;
        /* taps: the deep one on its teacher layer; any other on the student block whose teacher layer is the
         * deepest kept layer at or below its own (the stream the tap reads once the dropped blocks are gone) */
        SAY("proposed keep-set (%d blocks: teacher layer %d pinned, the rest the lowest SNR):", nk, deepest);
        for (int j = 0; j < nk; j++) SAY("%s%d", j ? "," : " ", keep[j]);
        SAY("\n");
        for (int t = 0; t < g.n_taps; t++) {
            int sj = 0;
            for (int j = 0; j < nk; j++) if (keep[j] <= g.taps_abs[t]) sj = j;
            lands[t] = keep[sj];
            raw[t] = g.taps_raw[t] < 0 ? sj - nk : sj;
            SAY("tap %d: teacher vit_layers[%d] = %d (layer %d) -> student vit_layers[%d] = %d = student block %d = "
                "teacher layer %d%s\n", t, t, g.taps_raw[t], g.taps_abs[t], t, raw[t], sj, lands[t],
                lands[t] == g.taps_abs[t] ? "" : " (a different layer: distillation re-learns it)");
        }
        SAY("next: mact prune --model %s --keep ", o->model);
        for (int j = 0; j < nk; j++) SAY("%s%d", j ? "," : "", keep[j]);
        SAY(" --taps ");
        for (int t = 0; t < g.n_taps; t++) SAY("%s%d", t ? "," : "", raw[t]);
        SAY(" --out OUT_DIR\n");
    }
    r->nk = nk;
done:
    free(pv);
    free(in_sq);
    free(d_sq);
    if (rc || !out) mact_snr_free(r);
    else *out = r;
    return (mact_status)rc;
}

mact_status mact_snr_write_json(const mact_snr_result *r, const char *path, char *err, size_t el)
{
    if (!r || !path) return mact_errf(err, el, MACT_ERR_INPUT, "mact_snr_write_json: a NULL argument");
    FILE *f = fopen(path, "w");
    if (!f) return mact_errf(err, el, MACT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    const int nb = r->nb;
#define ARR(name, v) do { fprintf(f, "  \"%s\": [", name); \
        for (int j = 0; j < nb; j++) { double v_ = (v)[j]; \
            if (isfinite(v_)) fprintf(f, "%s%.17g", j ? ", " : "", v_); else fprintf(f, "%snull", j ? ", " : ""); } \
        fprintf(f, "],\n"); } while (0)
    fprintf(f, "{\n");
    ARR("snr_db", r->snr);
    ARR("in_energy", r->in_e);
    ARR("delta_energy", r->d_e);
#undef ARR
    fprintf(f, "  \"blocks\": %d,\n  \"config_layers\": %d,\n  \"images\": %d,\n  \"tokens_per_image\": %lld,\n",
            nb, r->cfg_layers, r->n_images, r->tokens);
    fprintf(f, "  \"precision\": \"%s\",\n  \"taps\": [", mact_precision_str(r->precision));
    for (int t = 0; t < r->n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", r->taps_abs[t]);
    fprintf(f, "]");
    if (r->nk) {
        fprintf(f, ",\n  \"keep\": [");
        for (int j = 0; j < r->nk; j++) fprintf(f, "%s%d", j ? ", " : "", r->keep[j]);
        fprintf(f, "],\n  \"student_taps\": [");
        for (int t = 0; t < r->n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", r->raw[t]);
        fprintf(f, "],\n  \"student_taps_teacher_layers\": [");
        for (int t = 0; t < r->n_taps; t++) fprintf(f, "%s%d", t ? ", " : "", r->lands[t]);
        fprintf(f, "]");
    }
    fprintf(f, "\n}\n");
    if (fclose(f) != 0) return mact_errf(err, el, MACT_ERR_IO, "cannot write %s", path);
    return MACT_OK;
}

int mact_snr_blocks(const mact_snr_result *r) { return r ? r->nb : 0; }
int mact_snr_images(const mact_snr_result *r) { return r ? r->n_images : 0; }

void mact_snr_values(const mact_snr_result *r, double *snr_db, int *tapped, int *kept)
{
    if (!r) return;
    if (snr_db) memcpy(snr_db, r->snr, sizeof(double) * (size_t)r->nb);
    if (tapped) memcpy(tapped, r->tapped, sizeof(int) * (size_t)r->nb);
    if (kept) memcpy(kept, r->kept, sizeof(int) * (size_t)r->nb);
}

int mact_snr_keep(const mact_snr_result *r, int *keep, int *student_taps, int *n_taps)
{
    if (!r) return 0;
    if (keep) memcpy(keep, r->keep, sizeof(int) * (size_t)r->nk);
    if (student_taps && r->nk) memcpy(student_taps, r->raw, sizeof(int) * (size_t)r->n_taps);
    if (n_taps) *n_taps = r->nk ? r->n_taps : 0;
    return r->nk;
}
