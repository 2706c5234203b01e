/* The choice of kernels: the ops table for a MACT_KERNELS_* choice on this CPU (kernels.h). The x86 tables
 * exist only in x86-64 builds, the ARM NEON tables only in aarch64 builds; every build has the plain-C
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mact.h"
#include "kernels/ops.h"

/* The name of every MACT_KERNELS_* choice (mact.h), by value: what $MACT_KERNELS says and what its error lists; the
 * bindings read it through mact_kernels_str */
static const char *const kernel_names[] = {
    [MACT_KERNELS_AUTO] = "auto",
    [MACT_KERNELS_REF] = "ref",
    [MACT_KERNELS_X86_AVX2] = "avx2",
    [MACT_KERNELS_X86_AVX512] = "avx512",
    [MACT_KERNELS_X86_AVX512_BF16] = "avx512bf16",
    [MACT_KERNELS_ARM_NEON] = "neon",
    [MACT_KERNELS_ARM_DOTPROD] = "neon-dotprod",
    [MACT_KERNELS_ARM_I8MM] = "neon-i8mm",
};
#define N_KERNEL_NAMES (int)(sizeof kernel_names / sizeof kernel_names[0])

const char *mact_kernels_str(mact_kernels k) { return (unsigned)k < (unsigned)N_KERNEL_NAMES ? kernel_names[k] : NULL; }

/* $MACT_KERNELS -> the choice, or -1 with err naming the choices ("a, b or c") */
static int kernels_from_env(const char *e, char *err, size_t errlen)
{
    for (int i = 0; i < N_KERNEL_NAMES; i++)
        if (!strcmp(e, kernel_names[i])) return i;
    char list[256];
    size_t l = 0;
    for (int i = 0; i < N_KERNEL_NAMES && l < sizeof list; i++)
        l += (size_t)snprintf(list + l, sizeof list - l, "%s%s", i == 0 ? "" : i == N_KERNEL_NAMES - 1 ? " or " : ", ",
                              kernel_names[i]);
    if (err && errlen) snprintf(err, errlen, "MACT_KERNELS=%s: expected %s", e, list);
    return -1;
}

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
        if (e && *e && (kernels = kernels_from_env(e, err, errlen)) < 0) return NULL;
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

