/* The x86 CPU probe: the only process-wide state of the library, computed once and read-only afterwards. */
#include <stdatomic.h>
#include "kernels/x86/x86.h"

/* the probe: computed once, read-only afterwards (racing first calls compute the same bits) */
enum { F_AVX2 = 1, F_AVX512 = 2, F_BF16 = 4, F_VNNI = 8, F_PROBED = 16 };
static _Atomic int g_features;

static int features(void)
{
    int f = atomic_load_explicit(&g_features, memory_order_relaxed);
    if (f) return f;
    __builtin_cpu_init();
    f = F_PROBED;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) f |= F_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        f |= F_AVX512;
        /* GCC 12's __builtin_cpu_supports has no "avx512bf16": CPUID leaf 7 subleaf 1, EAX bit 5 */
        unsigned a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        if ((a >> 5) & 1) f |= F_BF16;
        if (__builtin_cpu_supports("avx512vnni")) f |= F_VNNI;
    }
    atomic_store_explicit(&g_features, f, memory_order_relaxed);
    return f;
}

int mact_x86_has_avx2(void) { return !!(features() & F_AVX2); }
int mact_x86_has_avx512(void) { return !!(features() & F_AVX512); }
int mact_x86_has_avx512bf16(void) { return !!(features() & F_BF16); }
int mact_x86_has_vnni(void) { return !!(features() & F_VNNI); }

