/* The choice of kernels: the ops table for a MACT_KERNELS_* choice on this CPU (kernels.h). The x86 tables
 * exist only in x86-64 builds, the ARM NEON tables only in aarch64 builds; every build has the plain-C
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "kernels/ops.h"

static const mact_ops *best_ops(int max_isa)
{
#if MACT_X86
    const mact_ops *o = mact_ops_x86(max_isa);
    if (o) return o;
#else
    (void)max_isa;
#endif
    return &mact_ops_ref;
}

/* the ARM hook: the best NEON table up to a level (aarch64 builds), else the reference */
static const mact_ops *best_ops_arm(int max_isa)
{
#if MACT_ARM
    const mact_ops *o = mact_ops_arm(max_isa);
    if (o) return o;
#else
    (void)max_isa;
#endif
    return &mact_ops_ref;
}

const mact_ops *mact_ops_select(int kernels, char *err, size_t errlen)
{
    if (kernels == MACT_KERNELS_AUTO) {
        const char *e = getenv("MACT_KERNELS");
        if (e && *e && strcmp(e, "auto")) {
            static const char *const names[] = {"auto", "ref", "avx2", "avx512", "avx512bf16", "neon",
                                                "neon-dotprod", "neon-i8mm"};
            kernels = -1;
            for (int i = 1; i < 8; i++)
                if (!strcmp(e, names[i])) kernels = i;
            if (kernels < 0) {
                if (err && errlen)
                    snprintf(err, errlen,
                             "MACT_KERNELS=%s: expected auto, ref, avx2, avx512, avx512bf16, neon, neon-dotprod or "
                             "neon-i8mm", e);
                return NULL;
            }
        }
    }
    switch (kernels) {
    case MACT_KERNELS_AUTO: return MACT_ARM ? best_ops_arm(MACT_ISA_NEON_I8MM) : best_ops(MACT_ISA_AVX512BF16);
    case MACT_KERNELS_REF: return &mact_ops_ref;
    case MACT_KERNELS_X86_AVX2:
    case MACT_KERNELS_X86_AVX512:
    case MACT_KERNELS_X86_AVX512_BF16: {
        const int want = kernels == MACT_KERNELS_X86_AVX2     ? MACT_ISA_AVX2
                         : kernels == MACT_KERNELS_X86_AVX512 ? MACT_ISA_AVX512
                                                              : MACT_ISA_AVX512BF16;
        const mact_ops *o = best_ops(want);
        /* a cap, clamped to what the CPU has; only a build without x86 kernels refuses it */
        if (o == &mact_ops_ref && want > MACT_ISA_SCALAR) {
#if !MACT_X86
            if (err && errlen) snprintf(err, errlen, "x86 kernels were asked for; this build has none");
            return NULL;
#endif
        }
        return o;
    }
    case MACT_KERNELS_ARM_NEON:
    case MACT_KERNELS_ARM_DOTPROD:
    case MACT_KERNELS_ARM_I8MM: {
        const int want = kernels == MACT_KERNELS_ARM_NEON      ? MACT_ISA_NEON
                         : kernels == MACT_KERNELS_ARM_DOTPROD ? MACT_ISA_NEON_DOTPROD
                                                               : MACT_ISA_NEON_I8MM;
        /* a cap, clamped to what the CPU has; only a build without ARM kernels refuses it */
        if (!MACT_ARM) {
            if (err && errlen) snprintf(err, errlen, "ARM NEON kernels were asked for; this build has none");
            return NULL;
        }
        return best_ops_arm(want);
    }
    default:
        if (err && errlen) snprintf(err, errlen, "unknown kernels choice %d", kernels);
        return NULL;
    }
}

int mact_ops_kernels(const mact_ops *ops) { return ops->kernels; }
int mact_ops_isa(const mact_ops *ops) { return ops->isa; }
const char *mact_ops_name(const mact_ops *ops) { return ops->name; }

