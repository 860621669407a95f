// K-quant layouts. Each block is decoded into integer levels q[256] and, per
// sub-block k of `sub` values, an f32 scale sc[k] and minimum mn[k] so that
// x[i] = sc[k] * q[i] - mn[k] (mn = 0 for the symmetric kinds; subtracting
// +0 leaves the product unchanged). sc and mn are f32 products of the f16
// super-block scale and the small integer sub-block scale, as numpy does.
//
//   q2_k ( 84 B): scales[16] (lo 4 bits scale, hi 4 bits min), qs[64] 2-bit,
//                 d, dmin                       16 sub-blocks of 16
//   q3_k (110 B): hmask[32], qs[64] 2-bit, scales[12] 6-bit signed (-32), d
//                 level = low 2 bits - (high bit clear ? 4 : 0)
//   q4_k (144 B): d, dmin, scales[12] (8 x 6-bit scale + 8 x 6-bit min), qs[128]
//   q5_k (176 B): d, dmin, scales[12], qh[32], qs[128]
//   q6_k (210 B): ql[128], qh[64], scales[16] int8, d; level - 32
//   q8_k (292 B): d (f32), qs[256] int8, bsums[16] int16 (sums of 16 levels)
//
// Bit planes: in each 128-value half (q2_k, q3_k, q6_k) value 32*j + l reads
// its low bits from byte l of that half shifted by 2*j; in q4_k/q5_k each
// 64-value chunk c takes byte 32*c + l's low nibble for value l and its high
// nibble for value 32 + l; high bits of q3_k/q5_k value 32*b + l are bit b of
// hmask[l] / qh[l].
#include "quant/kquants.h"

#include "quant/block.h"

typedef struct {
  int q[WK_QK_K];        // integer levels
  float sc[WK_QK_K / 16];  // per sub-block scale
  float mn[WK_QK_K / 16];  // per sub-block minimum (subtracted)
  int sub;               // values per sub-block
} kblock;

typedef void (*kunpack_fn)(const uint8_t *b, kblock *k);

void wk_k4_scale_min(const uint8_t s[12], int j, int *sc, int *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

static void q2k_unpack(const uint8_t *b, kblock *k) {
  const uint8_t *scales = b, *qs = b + 16;
  float d = wk_ld_f16(b + 80), dmin = wk_ld_f16(b + 82);
  k->sub = 16;
  for (int s = 0; s < 16; s++) {
    k->sc[s] = d * (float)(scales[s] & 15);
    k->mn[s] = dmin * (float)(scales[s] >> 4);
  }
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int l = 0; l < 32; l++) k->q[128 * h + 32 * j + l] = (qs[32 * h + l] >> (2 * j)) & 3;
}

static void q3k_unpack(const uint8_t *b, kblock *k) {
  const uint8_t *hmask = b, *qs = b + 32, *s = b + 96;
  float d = wk_ld_f16(b + 108);
  k->sub = 16;
  for (int j = 0; j < 16; j++) {
    int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    k->sc[j] = d * (float)((lo | (hi << 4)) - 32);
    k->mn[j] = 0.0f;
  }
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int l = 0; l < 32; l++) {
        int low = (qs[32 * h + l] >> (2 * j)) & 3;
        int high = (hmask[l] >> (4 * h + j)) & 1;
        k->q[128 * h + 32 * j + l] = low - (high ? 0 : 4);
      }
}

static void q45k_scales(const uint8_t *b, kblock *k) {
  float d = wk_ld_f16(b), dmin = wk_ld_f16(b + 2);
  k->sub = 32;
  for (int j = 0; j < 8; j++) {
    int sc, mn;
    wk_k4_scale_min(b + 4, j, &sc, &mn);
    k->sc[j] = d * (float)sc;
    k->mn[j] = dmin * (float)mn;
  }
}

static void q4k_unpack(const uint8_t *b, kblock *k) {
  const uint8_t *qs = b + 16;
  q45k_scales(b, k);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) {
      k->q[64 * c + l] = qs[32 * c + l] & 15;
      k->q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
    }
}

static void q5k_unpack(const uint8_t *b, kblock *k) {
  const uint8_t *qh = b + 16, *qs = b + 48;
  q45k_scales(b, k);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) {
      k->q[64 * c + l] = (qs[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4);
      k->q[64 * c + 32 + l] = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
    }
}

static void q6k_unpack(const uint8_t *b, kblock *k) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *scales = (const int8_t *)(b + 192);
  float d = wk_ld_f16(b + 208);
  k->sub = 16;
  for (int s = 0; s < 16; s++) {
    k->sc[s] = d * (float)scales[s];
    k->mn[s] = 0.0f;
  }
  for (int h = 0; h < 2; h++)
    for (int l = 0; l < 32; l++) {
      const uint8_t *L = ql + 64 * h, *H = qh + 32 * h;
      int *q = k->q + 128 * h;
      q[l] = ((L[l] & 15) | (((H[l] >> 0) & 3) << 4)) - 32;
      q[l + 32] = ((L[l + 32] & 15) | (((H[l] >> 2) & 3) << 4)) - 32;
      q[l + 64] = ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
      q[l + 96] = ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
    }
}

static void q8k_unpack(const uint8_t *b, kblock *k) {
  k->sub = WK_QK_K;
  k->sc[0] = wk_ld_f32(b);
  k->mn[0] = 0.0f;
  for (int i = 0; i < WK_QK_K; i++) k->q[i] = (int8_t)b[4 + i];
}

// ---- shared dequantize and dot -------------------------------------------

static void k_dequantize(kunpack_fn unpack, int bytes, const uint8_t *src, float *dst,
                         int64_t nb) {
  kblock k;
  for (int64_t i = 0; i < nb; i++, src += bytes, dst += WK_QK_K) {
    unpack(src, &k);
    for (int j0 = 0; j0 < WK_QK_K; j0 += k.sub) {
      float sc = k.sc[j0 / k.sub], mn = k.mn[j0 / k.sub];
      for (int j = j0; j < j0 + k.sub; j++) dst[j] = sc * (float)k.q[j] - mn;
    }
  }
}

// Per sub-block: sc * sum(q x) - mn * sum(x).
static double k_dot(kunpack_fn unpack, int bytes, const uint8_t *src, const float *x, int64_t nb) {
  kblock k;
  double s = 0;
  for (int64_t i = 0; i < nb; i++, src += bytes, x += WK_QK_K) {
    unpack(src, &k);
    for (int j0 = 0; j0 < WK_QK_K; j0 += k.sub) {
      double sqx = 0, sx = 0;
      for (int j = j0; j < j0 + k.sub; j++) {
        sqx += (double)k.q[j] * x[j];
        sx += x[j];
      }
      s += k.sc[j0 / k.sub] * sqx - k.mn[j0 / k.sub] * sx;
    }
  }
  return s;
}

#define K_ENTRY(name, unpack, bytes)                                        \
  void wk_##name##_dequantize(const uint8_t *src, float *dst, int64_t nb) {  \
    k_dequantize(unpack, bytes, src, dst, nb);                               \
  }                                                                          \
  double wk_##name##_dot(const uint8_t *src, const float *x, int64_t nb) {   \
    return k_dot(unpack, bytes, src, x, nb);                                 \
  }

K_ENTRY(q2_k, q2k_unpack, 84)
K_ENTRY(q3_k, q3k_unpack, 110)
K_ENTRY(q4_k, q4k_unpack, 144)
K_ENTRY(q5_k, q5k_unpack, 176)
K_ENTRY(q6_k, q6k_unpack, 210)
K_ENTRY(q8_k, q8k_unpack, 292)
