/* Kernels. The matmul keeps weights in their stored dtype and widens BF16/F16 to F32 in registers, so
 * nothing is repacked or copied at load. Each output element is one dot product whose summation order
 * depends only on K and the ISA, never on the thread count: results are reproducible run to run. */
#include <math.h>
#include <float.h>
#include <string.h>
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels.h"
#include "npy.h"

static int g_isa = -1;

int mact_isa_detect(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return MACT_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return MACT_ISA_AVX2;
    return MACT_ISA_SCALAR;
}

int mact_isa_get(void)
{
    if (g_isa < 0) g_isa = mact_isa_detect();
    return g_isa;
}

void mact_isa_set(int isa) { g_isa = isa > mact_isa_detect() ? mact_isa_detect() : isa; }

const char *mact_isa_name(int isa)
{
    return isa == MACT_ISA_AVX512 ? "avx512" : isa == MACT_ISA_AVX2 ? "avx2" : "scalar";
}

int mact_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline float bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float f16f(uint16_t h)
{
    float f;
    mact_dtype_to_f32(MACT_F16, &h, 1, &f);
    return f;
}

static inline float wload(const void *w, int dtype, int64_t i)
{
    if (dtype == MACT_F32) return ((const float *)w)[i];
    if (dtype == MACT_BF16) return bf16f(((const uint16_t *)w)[i]);
    return f16f(((const uint16_t *)w)[i]);
}

void mact_row_f32(float *dst, const mact_tensor *W, int64_t row)
{
    int64_t K = W->shape[W->ndim - 1];
    for (int64_t k = 0; k < K; k++) dst[k] = wload(W->data, W->dtype, row * K + k);
}

/* ---- scalar path: 4 accumulators per dot product to give the compiler independent chains ---- */
static void mm_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K)
{
    for (int64_t n = n0; n < n1; n++)
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * ldx;
            float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            int64_t k = 0, base = n * K;
            for (; k + 4 <= K; k += 4) {
                a0 += xr[k] * wload(w, dt, base + k);
                a1 += xr[k + 1] * wload(w, dt, base + k + 1);
                a2 += xr[k + 2] * wload(w, dt, base + k + 2);
                a3 += xr[k + 3] * wload(w, dt, base + k + 3);
            }
            for (; k < K; k++) a0 += xr[k] * wload(w, dt, base + k);
            y[m * ldy + n] = (a0 + a1) + (a2 + a3) + (bias ? bias[n] : 0.f);
        }
}

/* ---- AVX-512 path: register block of 4 x-rows by 4 w-rows, 16 K-lanes per step ---- */
__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static inline __m512 w16(const void *w, int dt, int64_t off, __mmask16 mk)
{
    if (dt == MACT_F32) return _mm512_maskz_loadu_ps(mk, (const float *)w + off);
    __m256i h = _mm256_maskz_loadu_epi16(mk, (const uint16_t *)w + off);
    if (dt == MACT_BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

__attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
static void mm_avx512(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                      int64_t M, int64_t n0, int64_t n1, int64_t K)
{
    const int64_t K16 = K & ~(int64_t)15;
    const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);
    for (int64_t n = n0; n < n1; n += 4) {
        int nn = (int)(n1 - n < 4 ? n1 - n : 4);
        for (int64_t m = 0; m < M; m += 4) {
            int mm = (int)(M - m < 4 ? M - m : 4);
            __m512 acc[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
            for (int64_t k = 0; k < K; k += 16) {
                __mmask16 mk = k < K16 ? (__mmask16)0xffff : tail;
                __m512 wv[4], xv[4];
                for (int j = 0; j < 4; j++)
                    wv[j] = j < nn ? w16(w, dt, (n + j) * K + k, mk) : _mm512_setzero_ps();
                for (int i = 0; i < 4; i++)
                    xv[i] = i < mm ? _mm512_maskz_loadu_ps(mk, x + (m + i) * ldx + k) : _mm512_setzero_ps();
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(xv[i], wv[j], acc[i][j]);
            }
            for (int i = 0; i < mm; i++)
                for (int j = 0; j < nn; j++)
                    y[(m + i) * ldy + n + j] = _mm512_reduce_add_ps(acc[i][j]) + (bias ? bias[n + j] : 0.f);
        }
    }
}

/* ---- AVX2 path: 4 x 2 block, 8 K-lanes per step ---- */
__attribute__((target("avx2,fma,f16c")))
static inline __m256 w8(const void *w, int dt, int64_t off)
{
    if (dt == MACT_F32) return _mm256_loadu_ps((const float *)w + off);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + off));
    if (dt == MACT_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

__attribute__((target("avx2,fma,f16c")))
static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c")))
static void mm_avx2(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                    int64_t M, int64_t n0, int64_t n1, int64_t K)
{
    const int64_t K8 = K & ~(int64_t)7;
    for (int64_t n = n0; n < n1; n += 2) {
        int nn = (int)(n1 - n < 2 ? n1 - n : 2);
        for (int64_t m = 0; m < M; m += 4) {
            int mm = (int)(M - m < 4 ? M - m : 4);
            __m256 acc[4][2];
            for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
            for (int64_t k = 0; k < K8; k += 8) {
                __m256 w0 = w8(w, dt, n * K + k), w1 = nn > 1 ? w8(w, dt, (n + 1) * K + k) : _mm256_setzero_ps();
                for (int i = 0; i < mm; i++) {
                    __m256 xv = _mm256_loadu_ps(x + (m + i) * ldx + k);
                    acc[i][0] = _mm256_fmadd_ps(xv, w0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(xv, w1, acc[i][1]);
                }
            }
            for (int i = 0; i < mm; i++)
                for (int j = 0; j < nn; j++) {
                    float s = hsum8(acc[i][j]);
                    const float *xr = x + (m + i) * ldx;
                    for (int64_t k = K8; k < K; k++) s += xr[k] * wload(w, dt, (n + j) * K + k);
                    y[(m + i) * ldy + n + j] = s + (bias ? bias[n + j] : 0.f);
                }
        }
    }
}

void mact_matmul_raw(float *y, int64_t ldy, const float *x, int64_t ldx, const void *w, int dt, const float *bias,
                     int64_t M, int64_t N, int64_t K)
{
    int isa = mact_isa_get();
    /* Column blocks of 16 weight rows keep a block's weights hot in L1/L2 across all M rows. */
    const int64_t NB = 16, nblk = (N + NB - 1) / NB;
#pragma omp parallel for schedule(static) if (M * N * K > 200000)
    for (int64_t b = 0; b < nblk; b++) {
        int64_t n0 = b * NB, n1 = n0 + NB < N ? n0 + NB : N;
        if (isa == MACT_ISA_AVX512) mm_avx512(y, ldy, x, ldx, w, dt, bias, M, n0, n1, K);
        else if (isa == MACT_ISA_AVX2) mm_avx2(y, ldy, x, ldx, w, dt, bias, M, n0, n1, K);
        else mm_scalar(y, ldy, x, ldx, w, dt, bias, M, n0, n1, K);
    }
}

void mact_matmul_ex(float *y, int64_t ldy, const float *x, int64_t ldx, const mact_tensor *W, const float *bias,
                    int64_t M, int64_t N, int64_t K)
{
    mact_matmul_raw(y, ldy, x, ldx, W->data, W->dtype, bias, M, N, K);
}

/* ---- norms and activations (double accumulation for the statistics: rows reach 1e4 in magnitude) ---- */

void mact_layernorm(float *y, const float *x, const float *w, const float *b, float eps, int64_t rows, int64_t dim)
{
#pragma omp parallel for schedule(static) if (rows * dim > 65536)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < dim; i++) s += xr[i];
        double mean = s / dim;
        for (int64_t i = 0; i < dim; i++) { double d = xr[i] - mean; s2 += d * d; }
        float inv = (float)(1.0 / sqrt(s2 / dim + eps));
        float mf = (float)mean;
        for (int64_t i = 0; i < dim; i++) yr[i] = (xr[i] - mf) * inv * w[i] + b[i];
    }
}

void mact_rmsnorm(float *y, const float *x, const float *w, float eps, int64_t rows, int64_t dim, int64_t ldx)
{
#pragma omp parallel for schedule(static) if (rows * dim > 65536)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldx;
        double s2 = 0;
        for (int64_t i = 0; i < dim; i++) s2 += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(s2 / dim + eps));
        if (w) for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv * w[i];
        else for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * inv;
    }
}

void mact_gelu_tanh(float *x, int64_t n)
{
    const float c = 0.7978845608028654f;  /* sqrt(2/pi) */
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}

float mact_silu(float x) { return x / (1.f + expf(-x)); }

/* ---- attention ---- */

int64_t mact_attention_scratch(int64_t nk) { return nk + 16; }

void mact_attention(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *k, const float *v,
                    int64_t kv_ld, int64_t nq, int64_t nk, int n_heads, int n_kv, int hd, float scale,
                    const float *bias, const uint8_t *key_ok, float *scratch)
{
    const int group = n_heads / n_kv;
    const int64_t per = mact_attention_scratch(nk);
#pragma omp parallel for schedule(static) collapse(2) if (nq * nk * n_heads > 4096)
    for (int h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < nq; i++) {
            float *s = scratch + thread_id() * per;
            const float *qi = q + i * q_ld + (int64_t)h * hd;
            const int64_t koff = (int64_t)(h / group) * hd;
            float mx = -INFINITY;
            for (int64_t j = 0; j < nk; j++) {
                if (key_ok && !key_ok[j]) { s[j] = -INFINITY; continue; }
                const float *kj = k + j * kv_ld + koff;
                float d = 0;
                for (int t = 0; t < hd; t++) d += qi[t] * kj[t];
                d = d * scale + (bias ? bias[i * nk + j] : 0.f);
                s[j] = d;
                if (d > mx) mx = d;
            }
            float *o = out + i * out_ld + (int64_t)h * hd;
            for (int t = 0; t < hd; t++) o[t] = 0;
            if (mx == -INFINITY) continue;  /* no visible key: zero output, as a fully masked row must not NaN */
            double sum = 0;
            for (int64_t j = 0; j < nk; j++) {
                float e = s[j] == -INFINITY ? 0.f : expf(s[j] - mx);
                s[j] = e;
                sum += e;
            }
            float inv = (float)(1.0 / sum);
            for (int64_t j = 0; j < nk; j++) {
                if (s[j] == 0.f) continue;
                const float *vj = v + j * kv_ld + koff;
                float p = s[j] * inv;
                for (int t = 0; t < hd; t++) o[t] += p * vj[t];
            }
        }
}

/* ---- RoPE ---- */

void mact_rope_table(float *cos_t, float *sin_t, int64_t n, int hd, double theta)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        /* HF computes inv_freq = 1 / theta^(2i/hd) and the angle pos * inv_freq in fp32; mirror it so
         * the rounding of large angles matches the reference. */
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
        for (int64_t p = 0; p < n; p++) {
            float a = (float)p * inv;
            cos_t[p * half + i] = cosf(a);
            sin_t[p * half + i] = sinf(a);
        }
    }
}

void mact_rope(float *x, int64_t ld, int64_t n, int n_heads, int hd, const float *cos_t, const float *sin_t)
{
    int half = hd / 2;
    for (int64_t p = 0; p < n; p++)
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + p * ld + (int64_t)h * hd;
            const float *c = cos_t + p * half, *s = sin_t + p * half;
            for (int i = 0; i < half; i++) {
                float a = xh[i], b = xh[i + half];
                xh[i] = a * c[i] - b * s[i];
                xh[i + half] = b * c[i] + a * s[i];
            }
        }
}
