// IQ4_NL and IQ4_XS: each 4-bit code indexes a fixed table of 16 non-uniform
// levels (denser near zero, for bell-shaped weights); value = scale * level.
//
//   iq4_nl (18 B):  d (f16), qs[16]                           x = d * T[q]
//   iq4_xs (136 B): d (f16), scales_h (u16), scales_l[4], qs[128]
//                   sub-block s of 32: ls = low nibble s of scales_l |
//                   bits 2s..2s+1 of scales_h << 4; x = (d * (ls - 32)) * T[q]
//
// In a 32-value group, byte j holds value j (low nibble) and j + 16 (high).
// The quantizer fits each 32-value group's scale by weighted (x^2) least
// squares over 16 candidate scales, as GGML does without an importance matrix;
// levels are then re-chosen against the scale actually stored.
#include "quant/iq4.h"

#include "quant/block.h"

enum { QK_NL = 32, QK_XS = 256 };

static const int8_t k_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

// ---- decoding ------------------------------------------------------------

static void unpack_group(const uint8_t *qs, int t[32]) {
  for (int j = 0; j < 16; j++) {
    t[j] = k_levels[qs[j] & 15];
    t[j + 16] = k_levels[qs[j] >> 4];
  }
}

static float xs_scale(const uint8_t *b, float d, int s) {
  int lo = (b[4 + s / 2] >> (4 * (s % 2))) & 15;
  int hi = (wk_ld_u16(b + 2) >> (2 * s)) & 3;
  return d * (float)((lo | hi << 4) - 32);
}

void wk_iq4_nl_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  int t[32];
  for (int64_t i = 0; i < nb; i++, src += 18, dst += QK_NL) {
    float d = wk_ld_f16(src);
    unpack_group(src + 2, t);
    for (int j = 0; j < 32; j++) dst[j] = d * (float)t[j];
  }
}

double wk_iq4_nl_dot(const uint8_t *src, const float *x, int64_t nb) {
  int t[32];
  double s = 0;
  for (int64_t i = 0; i < nb; i++, src += 18, x += QK_NL) {
    unpack_group(src + 2, t);
    double b = 0;
    for (int j = 0; j < 32; j++) b += (double)t[j] * x[j];
    s += wk_ld_f16(src) * b;
  }
  return s;
}

void wk_iq4_xs_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  int t[32];
  for (int64_t i = 0; i < nb; i++, src += 136) {
    float d = wk_ld_f16(src);
    for (int s = 0; s < 8; s++, dst += 32) {
      float dl = xs_scale(src, d, s);
      unpack_group(src + 8 + 16 * s, t);
      for (int j = 0; j < 32; j++) dst[j] = dl * (float)t[j];
    }
  }
}

double wk_iq4_xs_dot(const uint8_t *src, const float *x, int64_t nb) {
  int t[32];
  double s = 0;
  for (int64_t i = 0; i < nb; i++, src += 136) {
    float d = wk_ld_f16(src);
    for (int g = 0; g < 8; g++, x += 32) {
      unpack_group(src + 8 + 16 * g, t);
      double b = 0;
      for (int j = 0; j < 32; j++) b += (double)t[j] * x[j];
      s += xs_scale(src, d, g) * b;
    }
  }
  return s;
}

// ---- quantizing ----------------------------------------------------------

// Index of the table level nearest to v (the lower one on a tie).
static int nearest_level(float v) {
  if (v <= k_levels[0]) return 0;
  if (v >= k_levels[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (v < k_levels[mid])
      hi = mid;
    else
      lo = mid;
  }
  return v - k_levels[lo] <= k_levels[hi] - v ? lo : hi;
}

// Weighted sums for the levels nearest to x * id.
static void level_sums(const float *x, float id, float *sqx, float *sq2) {
  *sqx = *sq2 = 0;
  for (int j = 0; j < 32; j++) {
    float q = k_levels[nearest_level(x[j] * id)], w = x[j] * x[j];
    *sqx += w * q * x[j];
    *sq2 += w * q * q;
  }
}

// Least-squares scale of one 32-value group: tries the inverse scales that map
// the largest-magnitude value v to +127 and to -127 + k (k = -7..7), keeping
// the one whose fitted scale explains the most weighted energy.
static float fit_group(const float *x) {
  float v = 0, amax = 0;
  for (int j = 0; j < 32; j++)
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      v = x[j];
    }
  if (amax < 1e-15f) return 0;
  float sqx, sq2;
  level_sums(x, -k_levels[0] / v, &sqx, &sq2);
  float d = sq2 > 0 ? sqx / sq2 : 0, best = d * sqx;
  for (int k = -7; k <= 7; k++) {
    level_sums(x, (k + k_levels[0]) / v, &sqx, &sq2);
    if (sq2 > 0 && sqx * sqx > best * sq2) {
      d = sqx / sq2;
      best = d * sqx;
    }
  }
  return d;
}

// Codes of one 32-value group for a stored scale d.
static void pack_group(const float *x, float d, uint8_t *qs) {
  float id = d != 0 ? 1 / d : 0;
  for (int j = 0; j < 16; j++)
    qs[j] = (uint8_t)(nearest_level(x[j] * id) | nearest_level(x[j + 16] * id) << 4);
}

void wk_iq4_nl_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, src += QK_NL, dst += 18) {
    wk_st_f16(dst, fit_group(src));
    pack_group(src, wk_ld_f16(dst), dst + 2);
  }
}

// Group scales are stored as d * (ls - 32) with ls in 0..63 and d = -v / 32
// for the signed group scale v of largest magnitude.
void wk_iq4_xs_quantize(const float *src, uint8_t *dst, int64_t nb) {
  float scales[8];
  for (int64_t i = 0; i < nb; i++, src += QK_XS, dst += 136) {
    float v = 0, amax = 0;
    for (int g = 0; g < 8; g++) {
      scales[g] = fit_group(src + 32 * g);
      if (fabsf(scales[g]) > amax) {
        amax = fabsf(scales[g]);
        v = scales[g];
      }
    }
    wk_st_f16(dst, -v / 32);
    float d = wk_ld_f16(dst), id = d != 0 ? 1 / d : 0;
    uint16_t sh = 0;
    memset(dst + 4, 0, 4);
    for (int g = 0; g < 8; g++) {
      int ls = wk_clampi(wk_nearest_int(id * scales[g]), -32, 31) + 32;
      dst[4 + g / 2] |= (uint8_t)((ls & 15) << (4 * (g % 2)));
      sh |= (uint16_t)((ls >> 4) << (2 * g));
      pack_group(src + 32 * g, d * (float)(ls - 32), dst + 8 + 16 * g);
    }
    wk_st_u16(dst + 2, sh);
  }
}
