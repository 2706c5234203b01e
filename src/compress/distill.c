/* mact_distill_eval (include/mact_compress.h; `mact distill-eval`): the student's connector output against the
 * teacher's over held-out frames (docs/compression.md). */
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

#define SAY(...) do { if (rep) fprintf(rep, __VA_ARGS__); } while (0)

/* the two connector outputs' shapes must agree */
static int same_shape(const mact_model_info *it, const mact_model_info *is, char *err, size_t el)
{
    if (it->tokens_per_image == is->tokens_per_image && it->d_model == is->d_model && it->image_height == is->image_height &&
        it->image_width == is->image_width && it->patch_size == is->patch_size)
        return 0;
    return mact_errf(err, el, MACT_ERR_MODEL, "the teacher's connector output (%d x %d, %dx%d images) and the student's "
                     "(%d x %d, %dx%d) differ in shape", it->tokens_per_image, it->d_model, it->image_height,
                     it->image_width, is->tokens_per_image, is->d_model, is->image_height, is->image_width);
}

mact_status mact_distill_eval(const mact_distill_options *o, FILE *rep, mact_distill_result *res, char *err, size_t el)
{
    if (!o || !o->teacher || !o->student || (!o->n_images == !o->dataset) || (o->n_images && !o->images) || o->n_images < 0 ||
        o->n_frames < 0)
        return mact_errf(err, el, MACT_ERR_INPUT, "a teacher and a student session and held-out frames (images or a dataset) "
                         "are required");
    const char *teacher = o->teacher_name ? o->teacher_name : "teacher", *student = o->student_name ? o->student_name : "student";
    const char *json = o->json;
    mact_session *st = o->teacher, *ss = o->student;
    const mact_model *mt = mact_session_model(st);
    cmp_frames fr;
    int rc = mact_cmp_frames_open(&fr, o->images, o->n_images, o->dataset, o->n_frames, err, el);
    if (rc) return (mact_status)rc;
    const int n_img = mact_cmp_frames_count(&fr);
    float *pv = NULL, *et = NULL, *es = NULL;
    FILE *jf = NULL;
    mact_model_info it, is;
    mact_model_get_info(mt, &it);
    mact_model_get_info(mact_session_model(ss), &is);
    if ((rc = same_shape(&it, &is, err, el))) goto out;
    const int64_t K = it.tokens_per_image, D = it.d_model, N = K * D;
    pv = malloc((size_t)it.n_patches * it.patch_dim * sizeof(float));
    et = malloc((size_t)N * sizeof(float));
    es = malloc((size_t)N * sizeof(float));
    if (!pv || !et || !es) { rc = mact_errf(err, el, MACT_ERR_NOMEM, "out of memory"); goto out; }
    if (json && !(jf = fopen(json, "w"))) { rc = mact_errf(err, el, MACT_ERR_IO, "cannot write %s: %s", json, strerror(errno)); goto out; }
    SAY("teacher %s, student %s: connector output %lld tokens x %lld per image, precision %s\n", teacher, student,
           (long long)K, (long long)D, mact_precision_str(it.precision));
    SAY("cos_token: per-token cosine over the %lld features, averaged over tokens; cos_flat: cosine of the whole "
           "output; rel_mse = mean((s - t)^2) / mean(t^2)\n", (long long)D);
    SAY("%-40s %12s %12s %12s %12s %s\n", "image", "cos_token", "cos_flat", "rel_mse", "max_abs", "identical");
    if (jf) fprintf(jf, "{\n  \"images\": [\n");
    double sum_tok_cos = 0, sum_se = 0, sum_te = 0, sum_dot = 0, sum_ss = 0;
    int64_t n_tok = 0, n_ident = 0;
    double worst_abs = 0;
    for (int i = 0; i < n_img; i++) {
        const char *name = mact_cmp_frames_name(&fr, i);
        if ((rc = mact_cmp_frames_pixels(&fr, i, mt, pv, err, el))) goto out;
        if (mact_vision(st, pv, 1, et) || mact_vision(ss, pv, 1, es)) {
            rc = mact_errf(err, el, MACT_ERR_MODEL, "%s%s", mact_session_error(st), mact_session_error(ss));
            goto out;
        }
        double tc = 0, dot = 0, tt = 0, sq = 0, se = 0, mx = 0;
        for (int64_t k = 0; k < K; k++) {
            double d1 = 0, a1 = 0, b1 = 0;
            for (int64_t j = 0; j < D; j++) {
                double t = et[k * D + j], s = es[k * D + j], e = s - t;
                d1 += s * t;
                a1 += t * t;
                b1 += s * s;
                se += e * e;
                if (fabs(e) > mx) mx = fabs(e);
            }
            tc += (a1 > 0 && b1 > 0) ? d1 / sqrt(a1 * b1) : (a1 == b1 ? 1.0 : 0.0);
            dot += d1;
            tt += a1;
            sq += b1;
        }
        int ident = !memcmp(et, es, (size_t)N * sizeof(float));
        double cos_flat = (tt > 0 && sq > 0) ? dot / sqrt(tt * sq) : (tt == sq ? 1.0 : 0.0);
        double rel = tt > 0 ? se / tt : (se > 0 ? INFINITY : 0.0);
        SAY("%-40s %12.8f %12.8f %12.6g %12.6g %s\n", name, tc / K, cos_flat, rel, mx, ident ? "yes" : "no");
        if (jf)
            fprintf(jf, "    {\"image\": \"%s\", \"cos_token\": %.17g, \"cos_flat\": %.17g, \"rel_mse\": %.17g, \"max_abs\": "
                    "%.17g, \"identical\": %s}%s\n", name, tc / K, cos_flat, rel, mx, ident ? "true" : "false",
                    i + 1 < n_img ? "," : "");
        sum_tok_cos += tc;
        n_tok += K;
        sum_se += se;
        sum_te += tt;
        sum_dot += dot;
        sum_ss += sq;
        n_ident += ident;
        if (mx > worst_abs) worst_abs = mx;
    }
    double ocos = sum_tok_cos / (double)n_tok, orel = sum_te > 0 ? sum_se / sum_te : 0.0;
    double oflat = (sum_te > 0 && sum_ss > 0) ? sum_dot / sqrt(sum_te * sum_ss) : 1.0;
    SAY("%-40s %12.8f %12.8f %12.6g %12.6g %s\n", "overall", ocos, oflat, orel, worst_abs,
           n_ident == n_img ? "yes" : "no");
    if (jf) {
        fprintf(jf, "  ],\n  \"overall\": {\"cos_token\": %.17g, \"cos_flat\": %.17g, \"rel_mse\": %.17g, \"max_abs\": %.17g, "
                "\"identical\": %s, \"n_images\": %d}\n}\n", ocos, oflat, orel, worst_abs, n_ident == n_img ? "true" : "false",
                n_img);
        int bad = fclose(jf) != 0;
        jf = NULL;
        if (bad) { rc = mact_errf(err, el, MACT_ERR_IO, "cannot write %s", json); goto out; }
    }
    if (res) *res = (mact_distill_result){.cos_token = ocos, .cos_flat = oflat, .rel_mse = orel, .max_abs = worst_abs,
                                          .n_images = n_img, .identical = n_ident == n_img};
    rc = 0;
out:
    mact_cmp_frames_close(&fr);
    if (jf) fclose(jf);
    free(pv);
    free(et);
    free(es);
    return (mact_status)rc;
}

