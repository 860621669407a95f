// WK_ACT_Q8B (act8b.h): the converter and Q2_K's plain-C kernels.
#include "backend/cpu/kernels/act8b.h"

#include <immintrin.h>
#include <math.h>

#include "base/fp.h"
#include "quant/types.h"
#include "wick.h"

// AVX-512 (the one level wk_act8b_pick serves): 32 values at a time, the
// rounding by vcvtps2dq (to nearest even, as nearbyintf), 8.5x faster than
// the same steps in scalar C (75 -> 8 us for 14336 values, Zen 4), which
// had cost a decode step ~6% of its products.
#define AT __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl")))

AT void wk_act8b_quantize(const float *x, void *xq, int64_t n) {
  wk_act_q8b *out = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    wk_act_q8b *a = &out[b];
    float F[16], fmax = 0;
    for (int i = 0; i < 8; i++) {
      const __m512 x0 = _mm512_loadu_ps(x + 32 * i), x1 = _mm512_loadu_ps(x + 32 * i + 16);
      const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      const float d = m / 127, id = d > 0 ? 127 / m : 0;
      a->d[i] = d;
      const __m512 vid = _mm512_set1_ps(id);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid));  // |q| <= 127
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
      _mm_storeu_si128((__m128i *)(a->q + 32 * i), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128((__m128i *)(a->q + 32 * i + 16), _mm512_cvtsepi32_epi8(q1));
      F[2 * i] = d * (float)_mm512_reduce_add_epi32(q0);
      F[2 * i + 1] = d * (float)_mm512_reduce_add_epi32(q1);
      fmax = fmaxf(fmax, fmaxf(fabsf(F[2 * i]), fabsf(F[2 * i + 1])));
    }
    a->dm = fmax / WK_ACT8B_GMAX;
    const float idm = a->dm > 0 && isfinite(a->dm) ? 1 / a->dm : 0;
    for (int s = 0; s < 16; s++) {
      const int G = _mm_cvtss_si32(_mm_set_ss(F[s] * idm));  // |G| <= 2^21 - 1, but for
      int m = G < 0 ? -G : G;                                // the quotient's rounding
      if (m > WK_ACT8B_GMAX) m = WK_ACT8B_GMAX;
      const int sg = G < 0 ? -1 : 1;
      a->g[0][s] = (int8_t)(sg * (m & 127));
      a->g[1][s] = (int8_t)(sg * ((m >> 7) & 127));
      a->g[2][s] = (int8_t)(sg * (m >> 14));
    }
  }
}

// Q2_K (the file's block: scales[16] (scale | min << 4), qs[64], d, dmin)
// times WK_ACT_Q8B: per 32-value block an exact integer sum of scale x code
// x q, scaled by its d; the mins against dm G:
//   d sum_b d_b sum_{s in b} sc_s S_s - dmin dm sum_s m_s G_s
static float q2k_dot(int64_t n, const void *w_row, const void *xq) {
  const uint8_t *w = w_row;
  const wk_act_q8b *a = xq;
  float y = 0;
  for (int64_t b = 0; b < n / 256; b++, w += 84, a++) {
    const uint8_t *sc = w, *qs = w + 16;
    float acc = 0;
    int64_t mn = 0;
    for (int i = 0; i < 8; i++) {  // values 32 i ..: qs[32 (i / 4) + l] bits 2 (i % 4)
      int32_t T = 0;
      for (int h = 0; h < 2; h++) {
        const int s = 2 * i + h;
        int32_t S = 0;
        for (int l = 16 * h; l < 16 * h + 16; l++)
          S += ((qs[32 * (i / 4) + l] >> (2 * (i % 4))) & 3) * a->q[32 * i + l];
        T += (sc[s] & 15) * S;
      }
      acc += a->d[i] * (float)T;
    }
    for (int s = 0; s < 16; s++)
      mn += (int64_t)(sc[s] >> 4) * (a->g[0][s] + 128 * a->g[1][s] + 16384 * a->g[2][s]);
    y += wk_f16_to_f32((uint16_t)(w[80] | w[81] << 8)) * acc -
         wk_f16_to_f32((uint16_t)(w[82] | w[83] << 8)) * a->dm * (float)mn;
  }
  return y;
}

static void q2k_gemm(const void *w, size_t row_stride, int64_t k, int rows, const void *xq,
                     size_t xq_stride, int n_tokens, float *y, size_t y_stride) {
  for (int t = 0; t < n_tokens; t++)
    for (int r = 0; r < rows; r++)
      y[(size_t)t * y_stride + r] = q2k_dot(k, (const uint8_t *)w + (size_t)r * row_stride,
                                            (const uint8_t *)xq + (size_t)t * xq_stride);
}

int wk_act8b_pick(int type, int level, wk_kernel *out) {
  const int best = wk_kernel_best_level();
  if (level == WK_LEVEL_AUTO) level = best;
  if (type != WK_Q2_K || level != WK_LEVEL_AVX512 || level > best) return WICK_ERR_UNSUPPORTED;
  *out = (wk_kernel){.type = type,
                     .act = WK_ACT_Q8B,
                     .level = level,
                     .k_multiple = 256,
                     .quantize_act = wk_act8b_quantize,
                     .vec_dot = q2k_dot,
                     .gemm = q2k_gemm};
  return WICK_OK;
}
