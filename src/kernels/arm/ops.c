/* The ARM64 ops tables and the probe that picks one. Levels (MACT_ISA_NEON*, ops.h), each named by the
 * features it was chosen for, so `mact inspect` / `mact bench` report them and the pack cache keys on them:
 *   neon                        Armv8-A Advanced SIMD
 *   neon+fp16+dotprod           Armv8.2 + dotprod (Cortex-A78AE in the IQ-9075, Neoverse N1, Graviton 2)
 *   neon+fp16+dotprod+i8mm+bf16 Armv8.6 (Neoverse V1/V2, Graviton 3/4, Cortex-X2 on)
 * Every level runs the row-major NEON kernels (fp32 FMLA; BF16 / F16 weights widened in registers), which need
 * only Advanced SIMD. From the dotprod level on, INT8 precision packs the weights of the int8 components
 * (mact_load_options.int8_parts) as int8 (pack.c) and multiplies them with SDOT (gemm_i8.c), or SMMLA on i8mm
 * CPUs (gemm_i8mm.c); the other components stay row-major fp32.
 * On the ...+i8mm+bf16 level (HWCAP2_BF16) BF16 precision packs every weight as bf16 once at load (pack.c,
 * MACT_PACK_BF16Q) and multiplies with BFMMLA (gemm_bf16.c): x rounded to bf16, fp32 sums, as the x86 bf16
 * mode; INT8 there keeps the vision stack on those bf16 packs. Below it BF16 precision computes in fp32
 * (has_bf16 = 0: `mact inspect` says "bf16 computed as fp32"), as does INT8 on the plain neon level.
 * Attention is blocked NEON fp32 (attention.c: 8 query rows x 8 keys per step, the reference's masking and
 * NaN rules); on the bf16 level outside FP32 precision q k^T and p v are BFDOT bf16 products instead
 * (attention_bf16.c), as in x86's bf16 mode. RoPE runs the plain-C loop. */
#include "mact.h"
#include "kernels/arm/arm.h"

#define NEON_COMMON_ROWS                                                                                         \
    .mm_rows = mact_arm_mm_rows, .layernorm_row = mact_arm_layernorm_row, .rmsnorm_row = mact_arm_rmsnorm_row,   \
    .gelu = mact_arm_gelu, .silu_mul = mact_arm_silu_mul, .modulate_rows = mact_arm_modulate_rows,               \
    .gated_add_rows = mact_arm_gated_add_rows, .attention = mact_arm_attention
#define NEON_COMMON NEON_COMMON_ROWS, .peak_gflops = mact_arm_peak_gflops

static const mact_ops ops_neon = {
    .name = "neon", .kernels = MACT_KERNELS_ARM_NEON, .isa = MACT_ISA_NEON, NEON_COMMON};
/* dotprod: INT8 precision packs the int8 components' weights as int8 and multiplies them with SDOT */
#define INT8_PACKS                                                                                               \
    .pack_plan = mact_arm_pack_plan, .pack_describe = mact_arm_pack_describe, .pack_fill = mact_arm_pack_fill,   \
    .peak_gops_i8 = mact_arm_peak_gops_i8
static const mact_ops ops_dotprod = {.name = "neon+fp16+dotprod", .kernels = MACT_KERNELS_ARM_DOTPROD,
                                     .isa = MACT_ISA_NEON_DOTPROD, NEON_COMMON, INT8_PACKS,
                                     .gemm_i8 = mact_arm_gemm_i8, .dot_panel_i8 = mact_arm_dot_panel_i8};
/* i8mm + bf16: the same int8 packs multiplied with SMMLA (2 x 2 x 8 per instruction), bf16 packs of every
 * other weight outside FP32 precision multiplied with BFMMLA (2 x 2 x 4), and BFDOT attention there */
static const mact_ops ops_i8mm = {.name = "neon+fp16+dotprod+i8mm+bf16", .kernels = MACT_KERNELS_ARM_I8MM,
                                  .isa = MACT_ISA_NEON_I8MM, .has_bf16 = 1, NEON_COMMON_ROWS,
                                  .pack_plan = mact_arm_pack_plan_bf16, .pack_describe = mact_arm_pack_describe,
                                  .pack_fill = mact_arm_pack_fill, .peak_gops_i8 = mact_arm_peak_gops_i8mm,
                                  .gemm_packed = mact_arm_gemm_bf16, .gemm_i8 = mact_arm_gemm_i8mm,
                                  .dot_panel_i8 = mact_arm_dot_panel_i8,
                                  .attention_bf16 = mact_arm_attention_bf16, .kv_pack = mact_arm_kv_pack_bf16,
                                  .peak_gflops = mact_arm_peak_gflops_bf16};

const mact_ops *mact_ops_arm(int max_isa)
{
    const int f = mact_arm_features();
    const int v82 = MACT_ARM_ASIMD | MACT_ARM_FP16 | MACT_ARM_DOTPROD, v86 = v82 | MACT_ARM_I8MM | MACT_ARM_BF16;
    if (max_isa >= MACT_ISA_NEON_I8MM && (f & v86) == v86) return &ops_i8mm;
    if (max_isa >= MACT_ISA_NEON_DOTPROD && (f & v82) == v82) return &ops_dotprod;
    if (max_isa >= MACT_ISA_NEON && (f & MACT_ARM_ASIMD)) return &ops_neon;
    return NULL;
}
