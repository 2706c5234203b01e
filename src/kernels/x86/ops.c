/* The x86 ops tables and the CPU probe that picks one. Levels: AVX2 (row-major matmul only), AVX-512
 * (packed fp32/bf16-pair GEMMs, vector norms and activations, blocked fp32 attention), AVX-512 BF16 (bf16
 * dot products in the GEMMs and attention); each AVX-512 level with AVX512-VNNI also gets the int8 GEMM
 * (without it INT8 precision runs as BF16: the plain-C int8 kernel would be far slower than bf16). */
#include "mact.h"
#include "kernels/x86/x86.h"

static double peak_i8(int threads) { return mact_x86_peak_gops_i8(threads); }

static const mact_ops ops_avx2 = {
    .name = "avx2",
    .kernels = MACT_KERNELS_X86_AVX2,
    .isa = MACT_ISA_AVX2,
    .mm_rows = mact_x86_mm_rows_avx2,  /* every other op: the reference (NULL) */
};

#define AVX512_COMMON                                                                                            \
    .mm_rows = mact_x86_mm_rows_avx512, .layernorm_row = mact_layernorm_row_avx512,                            \
    .rmsnorm_row = mact_rmsnorm_row_avx512, .gelu = mact_gelu_tanh_avx512, .silu_mul = mact_silu_mul_avx512,   \
    .modulate_rows = mact_modulate_rows_avx512, .gated_add_rows = mact_gated_add_rows_avx512,                  \
    .attention = mact_x86_attention_avx512, .pack_plan = mact_x86_pack_plan,                                   \
    .pack_describe = mact_x86_pack_describe, .pack_fill = mact_x86_pack_fill,                                  \
    .gemm_packed = mact_x86_gemm_packed, .peak_gflops = mact_x86_peak_gflops

static const mact_ops ops_avx512 = {
    .name = "avx512", .kernels = MACT_KERNELS_X86_AVX512, .isa = MACT_ISA_AVX512, AVX512_COMMON};
static const mact_ops ops_avx512_vnni = {.name = "avx512+vnni", .kernels = MACT_KERNELS_X86_AVX512,
                                         .isa = MACT_ISA_AVX512, AVX512_COMMON, .gemm_i8 = mact_x86_gemm_i8,
                                         .dot_panel_i8 = mact_x86_dot_panel_i8, .peak_gops_i8 = peak_i8};
#define BF16_EXTRA .has_bf16 = 1, .kv_pack = mact_x86_kv_pack_bf16, .attention_bf16 = mact_x86_attention_bf16
static const mact_ops ops_avx512bf16 = {.name = "avx512bf16", .kernels = MACT_KERNELS_X86_AVX512_BF16,
                                        .isa = MACT_ISA_AVX512BF16, AVX512_COMMON, BF16_EXTRA};
static const mact_ops ops_avx512bf16_vnni = {.name = "avx512bf16+vnni", .kernels = MACT_KERNELS_X86_AVX512_BF16,
                                             .isa = MACT_ISA_AVX512BF16, AVX512_COMMON, BF16_EXTRA,
                                             .gemm_i8 = mact_x86_gemm_i8, .dot_panel_i8 = mact_x86_dot_panel_i8,
                                             .peak_gops_i8 = peak_i8};

const mact_ops *mact_ops_x86(int max_isa)
{
    const int vnni = mact_x86_has_vnni();
    if (max_isa >= MACT_ISA_AVX512BF16 && mact_x86_has_avx512bf16()) return vnni ? &ops_avx512bf16_vnni : &ops_avx512bf16;
    if (max_isa >= MACT_ISA_AVX512 && mact_x86_has_avx512()) return vnni ? &ops_avx512_vnni : &ops_avx512;
    if (max_isa >= MACT_ISA_AVX2 && mact_x86_has_avx2()) return &ops_avx2;
    return NULL;
}
