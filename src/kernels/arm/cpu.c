/* The ARM64 CPU probe: the kernel's HWCAP bits (getauxval), computed once and read-only afterwards. Linux
 * reports them per system, so qemu-user's -cpu model decides what an emulated run sees. */
#include <stdatomic.h>
#include <sys/auxv.h>
#include "kernels/arm/arm.h"

/* the arm64 bits of <asm/hwcap.h>, for a libc whose headers lack the newer ones */
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1UL << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif
#define F_PROBED 256

static _Atomic int g_features;

int mact_arm_features(void)
{
    int f = atomic_load_explicit(&g_features, memory_order_relaxed);
    if (f) return f & ~F_PROBED;
    const unsigned long h = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
    f = F_PROBED;
    if (h & HWCAP_ASIMD) f |= MACT_ARM_ASIMD;
    if ((h & HWCAP_FPHP) && (h & HWCAP_ASIMDHP)) f |= MACT_ARM_FP16;
    if (h & HWCAP_ASIMDDP) f |= MACT_ARM_DOTPROD;
    if (h2 & HWCAP2_I8MM) f |= MACT_ARM_I8MM;
    if (h2 & HWCAP2_BF16) f |= MACT_ARM_BF16;
    atomic_store_explicit(&g_features, f, memory_order_relaxed);
    return f & ~F_PROBED;
}
