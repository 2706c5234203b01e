/* The ViT's per-block probe (src/stages/vision.c), for `mact prune-analyze`: not part of the inference path. */
#ifndef MACT_STAGES_VISION_PROBE_H
#define MACT_STAGES_VISION_PROBE_H
struct mact_session;

typedef struct {
    double *in_sq;     /* [vit_layers]: += sum over the image's tokens of ||x_in||^2 (the block's input stream) */
    double *delta_sq;  /* [vit_layers]: += sum over the tokens of ||x_out - x_in||^2 (the block's update) */
    float *x_in;       /* scratch [n_patches * vit_hidden] */
} mact_vit_probe;

/* One image's pixel_values [n_patches, patch_dim] (checked by the caller) through every stored ViT block, not
 * only up to the deepest tap; overwrites the session's vision buffers. */
void mact_vit_probe_run(struct mact_session *s, const float *pixel_values, const mact_vit_probe *probe);
#endif
