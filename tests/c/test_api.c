/* tier: fast (tests/run.sh --fast, make check): needs neither PyTorch nor npm */
/* Public API on a generated tiny checkpoint (MACT_TEST_MODEL, made by tests/run.sh): bad input at every
 * stage is a clear MACT_ERR_INPUT naming the problem, never a crash; a session is reusable after one; the
 * header's stated defaults and contracts (version, precision names, session defaults, NULL arguments). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "th.h"
#include "mact.h"
#include "mact_stages.h"

static mact_session *S;

static void expect(const char *name, int rc, const char *frag)
{
    const char *e = mact_session_error(S);
    TH_CHECK(name, rc == MACT_ERR_INPUT && strstr(e, frag), "rc=%d err='%s' (wanted '%s')", rc, e, frag);
}

int main(void)
{
    const char *dir = getenv("MACT_TEST_MODEL");
    if (!dir) { TH_CHECK("api_model", 0, "MACT_TEST_MODEL is not set (tests/run.sh makes one)"); TH_EXIT(); }
    char err[1024];
    mact_model *m = NULL;
    int rc = mact_model_load(dir, NULL, &m, err, sizeof err);
    TH_CHECK("api_load", rc == 0, "%s", err);
    if (rc) TH_EXIT();
    rc = mact_model_load("/nonexistent-dir", NULL, &(mact_model *){0}, err, sizeof err);
    TH_CHECK("api_load_missing_dir", rc == MACT_ERR_IO && strstr(err, "/nonexistent-dir: no such folder"), "rc=%d %s", rc, err);
    mact_model_info mi;
    mact_model_get_info(m, &mi);

    TH_CHECK("api_version", !strcmp(mact_version(), MACT_VERSION_STRING), "library %s, header %s", mact_version(),
             MACT_VERSION_STRING);
    mact_precision pr = MACT_PRECISION_INT8;
    rc = mact_precision_parse("fp16", &pr);
    TH_CHECK("api_precision_parse_unknown", rc == MACT_ERR_INPUT && pr == MACT_PRECISION_INT8, "rc=%d p=%d", rc, pr);
    int names_ok = 1;
    for (mact_precision p = MACT_PRECISION_DEFAULT; p <= MACT_PRECISION_INT8; p++) {
        mact_precision q = (mact_precision)-7;
        if (mact_precision_parse(mact_precision_str(p), &q) != MACT_OK || q != p) names_ok = 0;
    }
    TH_CHECK("api_precision_roundtrip", names_ok && !strcmp(mact_precision_str((mact_precision)42), "?"),
             "parse(str(p)) != p");
    TH_CHECK("api_precision_parse_null", mact_precision_parse(NULL, &pr) == MACT_ERR_INPUT, "NULL name accepted");
    TH_CHECK("api_info_resolved", mi.precision == MACT_PRECISION_BF16 && mi.pooling_mask != MACT_POOL_FROM_CONFIG &&
             mi.encoder_mask != MACT_ENC_FROM_CONFIG, "precision %d pooling %d encoder %d", mi.precision,
             mi.pooling_mask, mi.encoder_mask);
    char small[16];
    rc = mact_model_describe(m, small, sizeof small);
    TH_CHECK("api_describe_truncated", rc == MACT_ERR_INPUT && strlen(small) == sizeof small - 1, "rc=%d", rc);
    static char big[1 << 16];
    rc = mact_model_describe(m, big, sizeof big);
    TH_CHECK("api_describe_ok", rc == MACT_OK && strstr(big, "action expert"), "rc=%d", rc);
    rc = mact_model_load(dir, NULL, NULL, err, sizeof err);
    TH_CHECK("api_load_null_out", rc == MACT_ERR_INPUT, "rc=%d", rc);
    rc = mact_session_new(m, NULL, NULL, err, sizeof err);
    TH_CHECK("api_session_null_out", rc == MACT_ERR_INPUT, "rc=%d", rc);
    /* tests/run.sh's checkpoint has a tokenizer.json when `mact synth` wrote it (the fast tier), none when
     * tests/reference/gen_checkpoint.py did */
    size_t nt = 99;
    rc = mact_tokenize(m, "hello world, pick up the cube", NULL, 0, &nt, err, sizeof err);
    const int has_tok = rc != MACT_ERR_IO;
    if (!has_tok) {
        TH_CHECK("api_tokenize_no_tokenizer", nt == 0 && strstr(err, "tokenizer"), "n=%zu %s", nt, err);
    } else {  /* the query form needs no buffer; a short buffer is an error that still says the count */
        TH_CHECK("api_tokenize_count", rc == MACT_OK && nt > 2, "rc=%d n=%zu %s", rc, nt, err);
        int64_t tid[64], tid2[64];
        size_t n1 = 0, n2 = 0;
        rc = mact_tokenize(m, "hello world, pick up the cube", tid, 64, &n1, err, sizeof err);
        int rc2 = mact_tokenize(m, "hello world, pick up the cube", tid2, 2, &n2, err, sizeof err);
        TH_CHECK("api_tokenize_fill", rc == MACT_OK && n1 == nt, "rc=%d n=%zu of %zu", rc, n1, nt);
        TH_CHECK("api_tokenize_short_buffer", rc2 == MACT_ERR_INPUT && n2 == nt && tid2[0] == tid[0] &&
                 tid2[1] == tid[1], "rc=%d n=%zu (wanted %zu)", rc2, n2, nt);
    }
    rc = mact_tokenize(m, "hello", NULL, 4, &nt, err, sizeof err);
    TH_CHECK("api_tokenize_null_ids", rc == MACT_ERR_INPUT, "rc=%d", rc);
    {   /* the default session: MACT_DEFAULT_MAX_TOKENS tokens and MACT_DEFAULT_MAX_IMAGES frames, no more */
        mact_session *d = NULL;
        rc = mact_session_new(m, NULL, &d, err, sizeof err);
        TH_CHECK("api_session_defaults_new", rc == 0, "%s", err);
        if (!rc) {
            const int N = MACT_DEFAULT_MAX_TOKENS;
            int64_t *did = calloc(N + 1, sizeof *did);
            float *db = malloc((size_t)(N + 1) * (N + 1) * sizeof *db);
            for (int i = 0; i <= N; i++) did[i] = 1 + i % 50;
            rc = mact_attention_bias(d, did, N, db);
            int rc2 = mact_attention_bias(d, did, N + 1, db);
            TH_CHECK("api_session_default_max_tokens", rc == 0 && rc2 == MACT_ERR_INPUT &&
                     strstr(mact_session_error(d), "1..512"), "rc=%d rc2=%d %s", rc, rc2, mact_session_error(d));
            size_t np = (size_t)mi.n_patches * mi.patch_dim;
            float *dp = calloc((MACT_DEFAULT_MAX_IMAGES + 1) * np, sizeof *dp);
            float *de = malloc((size_t)(MACT_DEFAULT_MAX_IMAGES + 1) * mi.tokens_per_image * mi.d_model * sizeof *de);
            rc = mact_vision(d, dp, MACT_DEFAULT_MAX_IMAGES + 1, de);
            TH_CHECK("api_session_default_max_images", rc == MACT_ERR_INPUT && strstr(mact_session_error(d), "1..4"),
                     "rc=%d %s", rc, mact_session_error(d));
            mact_frame fr[2] = {{.rgb = (const uint8_t *)dp, .height = 8, .width = 8},
                                {.rgb = (const uint8_t *)dp, .height = 8, .width = 8}};
            float act[4];
            /* two frames: the tiny tag names two cameras (one would be refused before the state is looked at) */
            mact_predict_input in = {.frames = fr, .n_frames = 2, .task = "x", .state = act, .state_dim = 1};
            mact_predict_output po = {.actions = act, .actions_cap = 4};
            TH_CHECK("api_predict_null_in", mact_predict(d, NULL, &po) == MACT_ERR_INPUT, "%s", mact_session_error(d));
            TH_CHECK("api_predict_null_out", mact_predict(d, &in, NULL) == MACT_ERR_INPUT, "%s", mact_session_error(d));
            rc = mact_predict(d, &in, &po);
            if (!has_tok)
                TH_CHECK("api_predict_no_tokenizer", rc == MACT_ERR_IO && strstr(mact_session_error(d), "tokenizer"),
                         "rc=%d %s", rc, mact_session_error(d));
            else
                TH_CHECK("api_predict_state_dim", rc == MACT_ERR_INPUT && strstr(mact_session_error(d), "state has 1 "),
                         "rc=%d %s", rc, mact_session_error(d));
            in.n_frames = MACT_DEFAULT_MAX_IMAGES + 1;
            rc = mact_predict(d, &in, &po);
            TH_CHECK("api_predict_too_many_frames", rc == MACT_ERR_INPUT && strstr(mact_session_error(d), "1..4"),
                     "rc=%d %s", rc, mact_session_error(d));
            mact_tensor_view tv = {0};
            TH_CHECK("api_tensor_before_predict", mact_session_tensor(d, "keys", &tv) == MACT_ERR_INPUT && !tv.data,
                     "a view before any predict");
            free(did); free(db); free(dp); free(de);
        }
        mact_session_free(d);
    }
    {
        mact_session *d = NULL;
        mact_session_options big_opt = {.max_images = 100000};
        rc = mact_session_new(m, &big_opt, &d, err, sizeof err);
        TH_CHECK("api_session_absurd_max_images", rc == MACT_ERR_INPUT && !d && strstr(err, "max_images"), "rc=%d %s",
                 rc, err);
    }

    mact_session_options so = {.max_tokens = 128, .max_images = 2};
    rc = mact_session_new(m, &so, &S, err, sizeof err);
    TH_CHECK("api_session", rc == 0, "%s", err);
    if (rc) { mact_model_free(m); TH_EXIT(); }

    size_t npix = (size_t)mi.n_patches * mi.patch_dim;
    float *pix = calloc(3 * npix, sizeof(float));
    float *emb = calloc((size_t)3 * mi.tokens_per_image * mi.d_model, sizeof(float));
    expect("api_vision_zero_images", mact_vision(S, pix, 0, emb), "images");
    expect("api_vision_too_many_images", mact_vision(S, pix, 3, emb), "1..2");
    pix[12345] = NAN;
    expect("api_vision_nan_pixels", mact_vision(S, pix, 1, emb), "non-finite");
    pix[12345] = 0;
    TH_CHECK("api_vision_ok_after_error", mact_vision(S, pix, 2, emb) == 0, "%s", mact_session_error(S));

    int n = 40;
    int64_t *ids = calloc(200, sizeof *ids);
    float *hidden = calloc((size_t)200 * mi.d_model, sizeof(float));
    float *bias = calloc(200 * 200, sizeof(float));
    for (int i = 0; i < n; i++) ids[i] = i + 1;
    ids[5] = mi.vocab_total;
    expect("api_embed_id_out_of_range", mact_embed(S, ids, n, emb, 0, hidden), "outside the embedding");
    ids[5] = -3;
    expect("api_embed_negative_id", mact_embed(S, ids, n, emb, 0, hidden), "outside the embedding");
    ids[5] = 6;
    expect("api_embed_feature_count", mact_embed(S, ids, n, emb, 16, hidden), "image features");
    expect("api_bias_too_long", mact_attention_bias(S, ids, 129, bias), "max_tokens");
    TH_CHECK("api_embed_ok", mact_embed(S, ids, n, emb, 0, hidden) == 0, "%s", mact_session_error(S));
    TH_CHECK("api_bias_ok", mact_attention_bias(S, ids, n, bias) == 0, "%s", mact_session_error(S));

    size_t kvn = (size_t)mi.n_layers * n * mi.kv_dim;
    float *keys = calloc(kvn, sizeof(float)), *vals = calloc(kvn, sizeof(float));
    expect("api_llm_too_long", mact_llm_layers(S, hidden, bias, 129, 0, 1, keys, vals), "max_tokens");
    expect("api_llm_bad_range", mact_llm_layers(S, hidden, bias, n, 0, mi.n_layers + 1, keys, vals), "layer range");
    hidden[7] = INFINITY;
    expect("api_llm_inf_hidden", mact_llm_layers(S, hidden, bias, n, 0, 1, keys, vals), "non-finite");
    TH_CHECK("api_embed_again", mact_embed(S, ids, n, emb, 0, hidden) == 0, "%s", mact_session_error(S));
    TH_CHECK("api_llm_ok", mact_llm_layers(S, hidden, bias, n, 0, mi.n_layers, keys, vals) == 0, "%s",
             mact_session_error(S));

    uint8_t enc[200];
    memset(enc, 1, sizeof enc);
    int A = mi.max_action_dim, H = 10;
    float *traj = calloc((size_t)(mi.max_action_horizon + 1) * A, sizeof(float));
    for (int i = 0; i < H * A; i++) traj[i] = (float)((i * 37 % 11) - 5) / 5.f;
    expect("api_action_zero_steps", mact_action_generate(S, traj, H, 7, 0, keys, vals, enc, n), "flow steps");
    expect("api_action_absurd_steps", mact_action_generate(S, traj, H, 7, 1000000, keys, vals, enc, n), "flow steps");
    expect("api_action_horizon", mact_action_generate(S, traj, mi.max_action_horizon + 1, 7, 2, keys, vals, enc, n),
           "max_action_horizon");
    expect("api_action_dim", mact_action_generate(S, traj, H, A + 1, 2, keys, vals, enc, n), "max_action_dim");
    memset(enc, 0, sizeof enc);
    expect("api_action_all_masked", mact_action_generate(S, traj, H, 7, 2, keys, vals, enc, n), "hides every");
    memset(enc, 1, sizeof enc);
    keys[100] = NAN;
    expect("api_action_nan_keys", mact_action_generate(S, traj, H, 7, 2, keys, vals, enc, n), "keys");
    keys[100] = 0;
    traj[3] = NAN;
    expect("api_action_nan_noise", mact_action_generate(S, traj, H, 7, 2, keys, vals, enc, n), "noise");
    traj[3] = 0.5f;
    rc = mact_action_generate(S, traj, H, 7, 2, keys, vals, enc, n);
    int pad_zero = 1, finite = 1;
    for (int i = 0; i < H; i++)
        for (int d = 0; d < A; d++) {
            if (d >= 7 && traj[i * A + d] != 0.f) pad_zero = 0;
            if (!isfinite(traj[i * A + d])) finite = 0;
        }
    TH_CHECK("api_action_ok", rc == 0 && finite, "%s", mact_session_error(S));
    TH_CHECK("api_action_padded_dims_zero", pad_zero, "a padded action dim is non-zero");
    float *k_ctx = calloc((size_t)mi.n_layers * n * mi.ae_hidden, sizeof(float));
    float *v_ctx = calloc((size_t)mi.n_layers * n * mi.ae_hidden, sizeof(float));
    uint8_t pad[256] = {0};
    TH_CHECK("api_context_ok", mact_action_context(S, keys, vals, n, k_ctx, v_ctx) == 0, "%s", mact_session_error(S));
    expect("api_step_bad_t", mact_action_step(S, traj, H, 1.5f, 2, k_ctx, v_ctx, enc, n, pad), "timestep");
    traj[0] = NAN;
    expect("api_step_nan_traj", mact_action_step(S, traj, H, 0.5f, 2, k_ctx, v_ctx, enc, n, pad), "trajectory");

    free(pix); free(emb); free(ids); free(hidden); free(bias); free(keys); free(vals); free(traj);
    free(k_ctx); free(v_ctx);
    mact_session_free(S);
    mact_model_free(m);
    TH_EXIT();
}
