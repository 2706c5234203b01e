/* libFuzzer target for config.json (mact_config_parse): any input must either fail with a message or
 * give a config whose sizes are inside the documented limits (docs/limits.md) and consistent. */
#include "model/model.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size), err[512] = "";
    mact_config c;
    int rc = mact_config_parse(s, &c, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        /* what the loader and the stages rely on */
        if (c.patch < 1 || c.image_h % c.patch || c.image_w % c.patch || c.grid_h * c.patch != c.image_h) __builtin_trap();
        if (c.n_heads % c.n_kv_heads || c.head_dim % 2 || c.ae_hidden % c.ae_heads || c.ae_layers != c.n_layers)
            __builtin_trap();
        if (c.n_taps < 1 || c.n_taps > MACT_MAX_TAPS) __builtin_trap();
        for (int i = 0; i < c.n_taps; i++)
            if (c.taps[i] < 0 || c.taps[i] >= c.vit_layers) __builtin_trap();
        if ((int64_t)c.d_model * (c.vocab_size + c.additional_vocab_size) > INT32_MAX) __builtin_trap();
        if (c.max_action_dim < 1 || c.max_action_dim > 256 || c.num_state_tokens < 2) __builtin_trap();
        if (c.eos_id < 0 || c.eos_id >= c.vocab_size + c.additional_vocab_size) __builtin_trap();
    }
    free(s);
    return 0;
}
