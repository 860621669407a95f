// attn_dec.h's kernel with 8-float ymm vectors (AVX2 + FMA + F16C; 16
// registers): scores 4 / 2 / 1 rows a step for up to 2 / 4 / 8 queries,
// P * V 4 / 2 / 1 chunks of 8 floats for up to 2 / 6 / 8 queries.
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/attn_dec.h"
#include "backend/cpu/vec8.h"
#include "base/error.h"

#define DEC_INL static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#define DEC_TGT __attribute__((target("avx2,fma,f16c")))
#define W 8
typedef __m256 vf;
typedef __m256_u vfu;
typedef int vi __attribute__((vector_size(32)));
#define VSET1(x) _mm256_set1_ps(x)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define DEC_R(G) ((G) <= 2 ? 4 : (G) <= 4 ? 2 : 1)
#define DEC_C(G) ((G) <= 2 ? 4 : (G) <= 6 ? 2 : 1)
#define DEC_ENTRY att_dec_avx2

DEC_INL vf dec_ld16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

// Levels 0 and 1 as in attn_dec_avx512.c (within each 128-bit half); level 2:
// the halves added, rows 0-3 of the pair's first vector, then the second's.
DEC_INL vf dec_lvl(int lv, vf a, vf b) {
  if (lv == 0) return _mm256_unpacklo_ps(a, b) + _mm256_unpackhi_ps(a, b);
  if (lv == 1) return _mm256_shuffle_ps(a, b, 0x44) + _mm256_shuffle_ps(a, b, 0xee);
  return _mm256_permute2f128_ps(a, b, 0x20) + _mm256_permute2f128_ps(a, b, 0x31);
}

// Halves, pairs, neighbours: the result in every lane.
DEC_INL vf dec_allmax(vf x) {
  x = _mm256_max_ps(x, _mm256_permute2f128_ps(x, x, 1));
  x = _mm256_max_ps(x, _mm256_permute_ps(x, 0x4e));
  return _mm256_max_ps(x, _mm256_permute_ps(x, 0xb1));
}
DEC_INL vf dec_allsum(vf x) {
  x += _mm256_permute2f128_ps(x, x, 1);
  x += _mm256_permute_ps(x, 0x4e);
  return x + _mm256_permute_ps(x, 0xb1);
}

#include "backend/cpu/attn_dec_tmpl.h"
