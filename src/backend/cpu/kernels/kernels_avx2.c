// The AVX2 level (AVX2 + FMA + F16C): every weight type, 256-bit vectors,
// 16 registers. Compiled for these instructions function by function, so the
// library as a whole still runs on any x86-64-v2 CPU; kernels.c calls these
// only when cpuid says the CPU has them.
#include <immintrin.h>

#define KT __attribute__((target("avx2,fma,f16c")))
// Register tiles (rows x tokens) of the super-block and float families (the
// 32-block family's lane tiles are fixed: x86_q8.h).
#define KK_RM 3
#define KK_RN 4
#define KF_RM 4
#define KF_RN 3

// int32 lanes += sums of 4 products of unsigned u and signed s bytes.
KT static inline __m256i kmac_u8s8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

// Q3_K's one-token tile of this level (x86_q3dec.h), in place of KGEMM's.
#define KQ3_DEC 1

#include "backend/cpu/kernels/x86_tile.h"
#include "backend/cpu/kernels/x86_q8.h"
#include "backend/cpu/kernels/x86_k.h"
#include "backend/cpu/kernels/x86_f.h"
#include "backend/cpu/kernels/x86_list.h"

KX86_FIND(wk_kern_avx2_find)

// ---- activation converters, bit-identical to the scalar ones -----------------
// (same max, the same scale and reciprocal computed in scalar code, the same
// x * id product rounded to nearest even by cvtps2dq as lrintf does).

KT static inline float kamax(const float *x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// 32 values -> 32 int8 at q; returns the int32 sums of each group of 8.
KT static inline __m256i kquant32(const float *x, float id, int8_t *q) {
  __m256 s = _mm256_set1_ps(id);
  __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), s));
  __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), s));
  __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), s));
  __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), s));
  // packs work per 128-bit lane; the final permute restores element order
  __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  __m256i v = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                          _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i *)q, v);
  return _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d));
}

KT static inline int khsum_i32x4(__m128i h) {
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

KT void wk_kern_avx2_quantize_q8(const float *x, void *xq, int64_t n) {
  wk_act_q8 *a = xq;
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    float d = kamax(x, 32) / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    a[b].d = d;
    a[b].sum = khsum_i32(kquant32(x, id, a[b].q));
  }
}

KT void wk_kern_avx2_quantize_q8k(const float *x, void *xq, int64_t n) {
  wk_act_q8k *a = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    float d = kamax(x, 256) / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    a[b].d = d;
    for (int j = 0; j < 8; j++) {
      kquant32(x + 32 * j, id, a[b].q + 32 * j);
      // sums of 16 from the stored bytes (maddubs with ones, then pairs)
      __m256i q = _mm256_loadu_si256((const __m256i *)(a[b].q + 32 * j));
      __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
      __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
      a[b].bsum[2 * j] = (int16_t)khsum_i32x4(_mm256_castsi256_si128(s32));
      a[b].bsum[2 * j + 1] = (int16_t)khsum_i32x4(_mm256_extracti128_si256(s32, 1));
    }
  }
}
