/* The usage example of include/mact.h as a program, built by tests/test_install.sh against an installed copy
 * (pkg-config mact): load a model, make a session, predict, print the actions (%.9g: exact floats).
 *
 *   install_example MODEL_DIR TASK STATE HEIGHT WIDTH CAM0.rgb [CAM1.rgb ...]
 *
 * STATE is comma-separated raw robot units; each CAM file holds HEIGHT x WIDTH x 3 RGB bytes. The options are
 * all defaults (seed 0, the config's flow steps, the only norm tag). Only <mact.h> is used. */
#include <mact.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_CAMS 8

int main(int argc, char **argv)
{
    if (argc < 7 || argc - 6 > MAX_CAMS) {
        fprintf(stderr, "usage: %s MODEL_DIR TASK STATE HEIGHT WIDTH CAM0.rgb [CAM1.rgb ...]\n", argv[0]);
        return 2;
    }
    const int height = atoi(argv[4]), width = atoi(argv[5]);
    const size_t n_cams = (size_t)argc - 6, frame_bytes = (size_t)height * width * 3;
    float state[64];
    size_t state_dim = 0;
    for (char *p = argv[3], *end; *p && state_dim < 64; p = *end ? end + 1 : end) {
        state[state_dim++] = strtof(p, &end);
        if (end == p) { fprintf(stderr, "bad STATE '%s'\n", argv[3]); return 2; }
    }
    uint8_t *rgb[MAX_CAMS] = {0};
    mact_frame cams[MAX_CAMS];
    for (size_t i = 0; i < n_cams; i++) {
        FILE *f = fopen(argv[6 + i], "rb");
        rgb[i] = malloc(frame_bytes);
        if (!f || !rgb[i] || fread(rgb[i], 1, frame_bytes, f) != frame_bytes) {
            fprintf(stderr, "%s: cannot read %zu bytes\n", argv[6 + i], frame_bytes);
            return 1;
        }
        fclose(f);
        cams[i] = (mact_frame){rgb[i], height, width};
    }

    char err[1024];
    mact_model *m;
    mact_session *s;
    if (mact_model_load(argv[1], NULL, &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    if (mact_session_new(m, NULL, &s, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    mact_model_info mi;
    mact_model_get_info(m, &mi);
    size_t cap = (size_t)mi.max_action_horizon * mi.max_action_dim;
    float *actions = malloc(cap * sizeof(float));
    mact_predict_input in = {.frames = cams, .n_frames = n_cams, .task = argv[2], .state = state,
                             .state_dim = state_dim};
    mact_predict_output out = {.actions = actions, .actions_cap = cap};
    int rc = 0;
    if (mact_predict(s, &in, &out)) {
        fprintf(stderr, "%s\n", mact_session_error(s));
        rc = 1;
    } else {
        printf("mact %s: actions [%zu x %zu]\n", mact_version(), out.n_steps, out.action_dim);
        for (size_t r = 0; r < out.n_steps; r++)
            for (size_t i = 0; i < out.action_dim; i++)
                printf("%.9g%c", actions[r * out.action_dim + i], i + 1 < out.action_dim ? ' ' : '\n');
    }
    free(actions);
    mact_session_free(s);
    mact_model_free(m);
    for (size_t i = 0; i < n_cams; i++) free(rgb[i]);
    return rc;
}
