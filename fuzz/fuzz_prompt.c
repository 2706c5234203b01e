/* libFuzzer target for the prompt builder: task normalisation (mact_normalize_task), the special-token
 * check (mact_prompt_check_inputs) and the prompt text (mact_build_prompt_text), then tokenization with a
 * fixed tokenizer carrying the prompt's special tokens. A task that passes the check must give a prompt
 * whose special tokens are exactly the template's: one <|image|> per camera and none from the task. */
#include "stages/prompt.h"
#include "io/tokenizer.h"
#include "model/model.h"
#include "fuzz_common.h"

static mact_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024] = "";
    if (!tok) {
        char *j = fuzz_tokenizer_text();
        if (mact_tokenizer_load_json(j, strlen(j), &tok, err, sizeof err)) __builtin_trap();
        free(j);
    }
    char *task = fuzz_cstr(data, size);
    static char norm[MACT_MAX_TASK], text[MACT_MAX_TASK + 8192];
    int rc = mact_normalize_task(task, norm, sizeof norm, err, sizeof err);
    fuzz_check_err(rc, err, sizeof err);
    if (rc == 0) {
        if (memchr(norm, 0, sizeof norm) == NULL || !norm[0]) __builtin_trap();
        rc = mact_prompt_check_inputs(tok, norm, "a table", "joint", err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
    }
    if (rc == 0) {
        int bins[2] = {0, 1};
        rc = mact_build_prompt_text(2, norm, "a table", "joint", bins, 2, text, sizeof text, err, sizeof err);
        fuzz_check_err(rc, err, sizeof err);
        if (rc == 0) {
            size_t cap = 4 * strlen(text) + 16, n = 0;
            int64_t *ids = malloc(cap * sizeof *ids);
            if (mact_tokenizer_encode(tok, text, strlen(text), ids, cap, &n, err, sizeof err) == 0) {
                int images = 0, im_start = 0, patch = 0;
                for (size_t i = 0; i < n; i++) {
                    images += ids[i] == 302;
                    im_start += ids[i] == 300;
                    patch += ids[i] == 303;
                }
                if (images != 2 || im_start != 2 || patch != 0) __builtin_trap();
            }
            free(ids);
        }
    }
    free(task);
    return 0;
}
