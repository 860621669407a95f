// Fast scalar dequantizers. Formulas (as the reference in src/quant/):
//   q4_0  d * (float)(q - 8)        q4_1  d * (float)q + m
//   q5_0  d * (float)(q - 16)       q8_0  d * (float)q
//   q4_k, q5_k  (d * sc) * (float)q - (dmin * mn) per 32-value sub-block
//   q6_k  (d * sc) * (float)(q - 32) per 16-value sub-block
// Loops are written so the compiler vectorizes them.
#include <string.h>

#include "backend/cpu/dequant.h"
#include "base/fp.h"
#include "wick.h"
#include "quant/quant.h"
#include "quant/types.h"

static inline float ld_f16(const uint8_t *p) { return wk_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void deq_q4_0(const uint8_t *restrict b, float *restrict y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 18, y += 32) {
    const float d = ld_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
      y[j] = d * (float)((qs[j] & 15) - 8);
      y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
  }
}

static void deq_q4_1(const uint8_t *restrict b, float *restrict y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 20, y += 32) {
    const float d = ld_f16(b), m = ld_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
      y[j] = d * (float)(qs[j] & 15) + m;
      y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
  }
}

static void deq_q5_0(const uint8_t *restrict b, float *restrict y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 22, y += 32) {
    const float d = ld_f16(b);
    const uint32_t h = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 |
                       (uint32_t)b[5] << 24;
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
      int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
      int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
      y[j] = d * (float)(lo - 16);
      y[j + 16] = d * (float)(hi - 16);
    }
  }
}

static void deq_q8_0(const uint8_t *restrict b, float *restrict y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 34, y += 32) {
    const float d = ld_f16(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)qs[j];
  }
}

static void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// q4_k (144 B) and q5_k (176 B, qh != NULL offsets).
static void deq_q45_k(const uint8_t *restrict b, float *restrict y, int64_t nb, int five) {
  const int bytes = five ? 176 : 144;
  for (int64_t i = 0; i < nb; i++, b += bytes, y += 256) {
    const float d = ld_f16(b), dmin = ld_f16(b + 2);
    const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int c = 0; c < 4; c++) {
      int sc0, mn0, sc1, mn1;
      k4_scale_min(b + 4, 2 * c, &sc0, &mn0);
      k4_scale_min(b + 4, 2 * c + 1, &sc1, &mn1);
      const float d0 = d * (float)sc0, m0 = dmin * (float)mn0;
      const float d1 = d * (float)sc1, m1 = dmin * (float)mn1;
      const uint8_t *q = qs + 32 * c;
      float *y0 = y + 64 * c, *y1 = y0 + 32;
      if (five) {
        for (int l = 0; l < 32; l++) {
          int lo = (q[l] & 15) | ((qh[l] >> (2 * c)) & 1) << 4;
          int hi = (q[l] >> 4) | ((qh[l] >> (2 * c + 1)) & 1) << 4;
          y0[l] = d0 * (float)lo - m0;
          y1[l] = d1 * (float)hi - m1;
        }
      } else {
        for (int l = 0; l < 32; l++) {
          y0[l] = d0 * (float)(q[l] & 15) - m0;
          y1[l] = d1 * (float)(q[l] >> 4) - m1;
        }
      }
    }
  }
}

static void deq_q6_k(const uint8_t *restrict b, float *restrict y, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, b += 210, y += 256) {
    const float d = ld_f16(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int h = 0; h < 2; h++) {
      const uint8_t *L = b + 64 * h, *H = b + 128 + 32 * h;
      float *yh = y + 128 * h;
      const int8_t *s = sc + 8 * h;
      // value 32 * j + l of this half belongs to sub-block 2 * j + l / 16
      for (int j = 0; j < 4; j++) {
        const float da = d * (float)s[2 * j], db = d * (float)s[2 * j + 1];
        const uint8_t *Lj = L + 32 * (j & 1);
        const int shift_l = (j >> 1) * 4, shift_h = 2 * j;
        for (int l = 0; l < 32; l++) {
          int q = ((Lj[l] >> shift_l) & 15) | ((H[l] >> shift_h) & 3) << 4;
          yh[32 * j + l] = (l < 16 ? da : db) * (float)(q - 32);
        }
      }
    }
  }
}

static void deq_f16(const uint8_t *restrict b, float *restrict y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = ld_f16(b + 2 * i);
}

int cpu_dequant_row(int type, const void *src, float *dst, int64_t n) {
  const uint8_t *b = src;
  switch (type) {
    case WK_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return WICK_OK;
    case WK_F16: deq_f16(b, dst, n); return WICK_OK;
    case WK_Q4_0: if (n % 32) break; deq_q4_0(b, dst, n / 32); return WICK_OK;
    case WK_Q4_1: if (n % 32) break; deq_q4_1(b, dst, n / 32); return WICK_OK;
    case WK_Q5_0: if (n % 32) break; deq_q5_0(b, dst, n / 32); return WICK_OK;
    case WK_Q8_0: if (n % 32) break; deq_q8_0(b, dst, n / 32); return WICK_OK;
    case WK_Q4_K: if (n % 256) break; deq_q45_k(b, dst, n / 256, 0); return WICK_OK;
    case WK_Q5_K: if (n % 256) break; deq_q45_k(b, dst, n / 256, 1); return WICK_OK;
    case WK_Q6_K: if (n % 256) break; deq_q6_k(b, dst, n / 256); return WICK_OK;
    default: break;
  }
  return wk_dequantize_row(type, src, dst, n);
}
