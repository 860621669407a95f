// Helpers shared by the reference quant files: little-endian field access,
// rounding to the nearest integer, and the per-type function shapes that the
// dispatch table in quant.c holds. Header-only (static inline).
#ifndef WICK_QUANT_BLOCK_H
#define WICK_QUANT_BLOCK_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/fp.h"

// One format's reference routines; nb counts blocks, not elements.
typedef void (*wk_dequant_fn)(const uint8_t *src, float *dst, int64_t nb);
typedef void (*wk_quant_fn)(const float *src, uint8_t *dst, int64_t nb);
typedef double (*wk_dot_fn)(const uint8_t *src, const float *x, int64_t nb);

// Block fields are little-endian whatever the host.
static inline uint16_t wk_ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline void wk_st_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline uint32_t wk_ld_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void wk_st_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline float wk_ld_f16(const uint8_t *p) { return wk_f16_to_f32(wk_ld_u16(p)); }
static inline void wk_st_f16(uint8_t *p, float f) { wk_st_u16(p, wk_f32_to_f16(f)); }
static inline float wk_ld_f32(const uint8_t *p) { return wk_bits_f32(wk_ld_u32(p)); }
static inline void wk_st_f32(uint8_t *p, float f) { wk_st_u32(p, wk_f32_bits(f)); }

// Nearest integer, ties to even. Adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits (exact for |f| < 2^22); larger magnitudes and NaN
// give +-2^22, which every caller clamps to its level range.
static inline int wk_nearest_int(float f) {
  if (!(fabsf(f) < 4194304.0f)) return f > 0 ? 4194304 : -4194304;
  float v = f + 12582912.0f;
  uint32_t u;
  memcpy(&u, &v, 4);
  return (int)(u & 0x7fffff) - 0x400000;
}

// 2^k for -126 <= k <= 127, exactly.
static inline float wk_pow2i(int k) { return wk_bits_f32((uint32_t)(k + 127) << 23); }

static inline int wk_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

#endif
