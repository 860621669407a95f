// Scalar conversions between f32 and the 16- and 8-bit float formats.
#ifndef WICK_BASE_FP_H
#define WICK_BASE_FP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t wk_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float wk_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// IEEE half -> float, exact (subnormals, inf, NaN).
static inline float wk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    float f = ldexpf((float)man, -24);  // zero or subnormal
    return sign ? -f : f;
  }
  if (exp == 31) return wk_bits_f32(sign | 0x7f800000u | (man << 13));
  return wk_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

// float -> IEEE half, round to nearest even (as numpy's astype(float16)).
static inline uint16_t wk_f32_to_f16(float f) {
  uint32_t x = wk_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0);
  if (ax >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520 -> inf
  if (ax < 0x38800000u) {                        // below 2^-14: subnormal half
    float a = wk_bits_f32(ax);
    // a * 2^24 rounded to nearest even integer
    float r = nearbyintf(a * 16777216.0f);
    return sign | (uint16_t)r;
  }
  uint32_t mant_odd = (ax >> 13) & 1;
  ax += 0xfffu + mant_odd;  // round to nearest even at bit 13
  return sign | (uint16_t)((ax - (112u << 23)) >> 13);
}

static inline float wk_bf16_to_f32(uint16_t b) { return wk_bits_f32((uint32_t)b << 16); }

// float -> bf16, round to nearest even; NaN stays NaN (quiet).
static inline uint16_t wk_f32_to_bf16(float f) {
  uint32_t x = wk_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

#endif
