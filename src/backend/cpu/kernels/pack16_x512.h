// The 512-bit helpers of the AVX-512 VNNI packed kernels (pack16_avx512.c,
// pack16k_avx512.c, pack16f_avx512.c, pack16q3_avx512.c), on top of
// pack16_x86.h. The including file defines AT (with AVX-512) first.
#ifndef WICK_BACKEND_CPU_KERNELS_PACK16_X512_H
#define WICK_BACKEND_CPU_KERNELS_PACK16_X512_H

#include "backend/cpu/kernels/pack16_x86.h"

// The 4 bytes at p in every dword.
AT AI __m512i bc4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc + vpdpbusd(c, the 4 bytes at p in every dword), the bytes taken by the
// instruction's own broadcast operand ({1to16}). GCC 12 does not fold
// bc4 into vpdpbusd: it issues a separate vpbroadcastd for each.
AT AI __m512i dpb4(__m512i acc, __m512i c, const int8_t *p) {
#ifdef WICK_P16_NOFOLD
  return _mm512_dpbusd_epi32(acc, c, bc4(p));
#else
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(c), "m"(*(const int32_t *)p));
  return acc;
#endif
}

// The 16 IQ4_NL / IQ4_XS table values + 128 (unsigned codes) in every
// 128-bit lane, for vpshufb.
AT AI __m512i iq4_lut128(void) {
  const __m128i t = _mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values);
  return _mm512_add_epi8(_mm512_broadcast_i32x4(t), _mm512_set1_epi8((char)128));
}

// Every row's block sum: code vectors c[0..7] against lo bytes xl and hi
// bytes xh (32 each).
AT AI __m512i block_sum(const __m512i *c, const int8_t *xl, const int8_t *xh) {
  const __m512i z = _mm512_setzero_si512();
  __m512i ha = z, hb = z;
  A16_UNROLL for (int j = 0; j < 4; j++) {
    ha = dpb4(ha, c[j], xh + 4 * j);
    hb = dpb4(hb, c[j + 4], xh + 16 + 4 * j);
  }
  __m512i la = _mm512_slli_epi32(_mm512_add_epi32(ha, hb), 7), lb = z;
  A16_UNROLL for (int j = 0; j < 4; j++) {
    la = dpb4(la, c[j], xl + 4 * j);
    lb = dpb4(lb, c[j + 4], xl + 16 + 4 * j);
  }
  return _mm512_add_epi32(la, lb);
}

#endif
