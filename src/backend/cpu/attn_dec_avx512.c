// attn_dec.h's kernel with 16-float zmm vectors (AVX-512 F; 32 registers):
// cpu_attention calls it only where cpu_attn.avx512 says the CPU has it.
// Scores 8 / 4 / 2 rows a step for up to 2 / 4 / 8 queries (16 to 24
// registers of accumulators, rows and queries), P * V 8 / 4 / 2 chunks of 16
// floats for up to 2 / 5 / 8 queries.
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/attn_dec.h"
#include "backend/cpu/vec8.h"
#include "base/error.h"

#define DEC_INL static inline __attribute__((always_inline, target("avx2,fma,f16c,avx512f")))
#define DEC_TGT __attribute__((target("avx2,fma,f16c,avx512f")))
#define W 16
typedef __m512 vf;
typedef __m512_u vfu;
typedef int vi __attribute__((vector_size(64)));
#define VSET1(x) _mm512_set1_ps(x)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define DEC_R(G) ((G) <= 2 ? 8 : (G) <= 4 ? 4 : 2)
#define DEC_C(G) ((G) <= 2 ? 8 : (G) <= 5 ? 4 : 2)
#define DEC_ENTRY att_dec_avx512

DEC_INL vf dec_ld16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

// Level 0: lanes (2i, 2i + 1) of each 128-bit quarter hold rows a, b's sums of
// lanes (i, i + 2); level 1: lane i of a quarter row i's sum of the quarter;
// levels 2 and 3: quarters added in pairs, the rows' quarters side by side.
DEC_INL vf dec_lvl(int lv, vf a, vf b) {
  if (lv == 0) return _mm512_unpacklo_ps(a, b) + _mm512_unpackhi_ps(a, b);
  if (lv == 1) return _mm512_shuffle_ps(a, b, 0x44) + _mm512_shuffle_ps(a, b, 0xee);
  return _mm512_shuffle_f32x4(a, b, 0x88) + _mm512_shuffle_f32x4(a, b, 0xdd);
}

// Halves, quarters, pairs, neighbours: the result in every lane.
DEC_INL vf dec_allmax(vf x) {
  x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0x4e));
  x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0xb1));
  x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4e));
  return _mm512_max_ps(x, _mm512_permute_ps(x, 0xb1));
}
DEC_INL vf dec_allsum(vf x) {
  x += _mm512_shuffle_f32x4(x, x, 0x4e);
  x += _mm512_shuffle_f32x4(x, x, 0xb1);
  x += _mm512_permute_ps(x, 0x4e);
  return x + _mm512_permute_ps(x, 0xb1);
}

#include "backend/cpu/attn_dec_tmpl.h"
