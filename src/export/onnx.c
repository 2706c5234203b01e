#include <stdio.h>
#include "export/export.h"
int mact_export_onnx(const mact_export_onnx_options *o, const char *out_dir, FILE *log, char *err, size_t errlen)
{
    (void)o; (void)out_dir; (void)log;
    snprintf(err, errlen, "not built yet");
    return MACT_ERR_UNSUPPORTED;
}
