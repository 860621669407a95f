// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: blocks of 32 values with an f16 scale d (and
// an f16 minimum m for the _1 kinds).
//
//   q4_0 (18 B): d, 16 B nibbles               x = d * (q - 8)
//   q4_1 (20 B): d, m, 16 B nibbles            x = d * q + m
//   q5_0 (22 B): d, 4 B high bits, 16 B nibbles x = d * (q - 16)
//   q5_1 (24 B): d, m, 4 B high bits, 16 B      x = d * q + m
//   q8_0 (34 B): d, 32 signed bytes            x = d * q
//
// Nibble byte j holds element j (low 4 bits) and element j + 16 (high 4
// bits); bit j of the little-endian 32-bit high-bit word is bit 4 of element
// j. Every product is an f32 product in the order written above, so results
// match numpy's float32 arithmetic bit for bit.
#include "quant/legacy.h"

#include "quant/block.h"

enum { QK = 32 };

// ---- unpacking: integer levels of one block ------------------------------

static void unpack_nibbles(const uint8_t *qs, int q[QK]) {
  for (int j = 0; j < QK / 2; j++) {
    q[j] = qs[j] & 15;
    q[j + QK / 2] = qs[j] >> 4;
  }
}

static void unpack_5bit(const uint8_t *qh, const uint8_t *qs, int q[QK]) {
  uint32_t h = wk_ld_u32(qh);
  unpack_nibbles(qs, q);
  for (int j = 0; j < QK; j++) q[j] |= (int)((h >> j) & 1) << 4;
}

static void pack_nibbles(const int q[QK], uint8_t *qs) {
  for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + QK / 2] << 4));
}

static void pack_5bit(const int q[QK], uint8_t *qh, uint8_t *qs) {
  uint32_t h = 0;
  for (int j = 0; j < QK; j++) h |= (uint32_t)((q[j] >> 4) & 1) << j;
  wk_st_u32(qh, h);
  pack_nibbles(q, qs);
}

// Decodes one block into levels q, scale d, minimum m and offset o so that
// x[j] = d * (q[j] - o) + m (m = 0 or o = 0 depending on the kind).
typedef struct {
  int bytes;    // block size in bytes
  int offset;   // subtracted from the level (8, 16 or 0)
  int has_min;  // an f16 minimum follows d
  int high;     // 5-bit levels (a 4-byte high-bit word follows)
  int is_q8;    // signed bytes instead of nibbles
} legacy_kind;

static const legacy_kind K_Q4_0 = {18, 8, 0, 0, 0};
static const legacy_kind K_Q4_1 = {20, 0, 1, 0, 0};
static const legacy_kind K_Q5_0 = {22, 16, 0, 1, 0};
static const legacy_kind K_Q5_1 = {24, 0, 1, 1, 0};
static const legacy_kind K_Q8_0 = {34, 0, 0, 0, 1};

static void legacy_unpack(const legacy_kind *k, const uint8_t *b, int q[QK], float *d,
                          float *m) {
  *d = wk_ld_f16(b);
  *m = k->has_min ? wk_ld_f16(b + 2) : 0.0f;
  const uint8_t *p = b + (k->has_min ? 4 : 2);
  if (k->is_q8) {
    for (int j = 0; j < QK; j++) q[j] = (int8_t)p[j];
  } else if (k->high) {
    unpack_5bit(p, p + 4, q);
  } else {
    unpack_nibbles(p, q);
  }
  for (int j = 0; j < QK; j++) q[j] -= k->offset;
}

static void legacy_dequantize(const legacy_kind *k, const uint8_t *src, float *dst, int64_t nb) {
  int q[QK];
  float d, m;
  for (int64_t i = 0; i < nb; i++, src += k->bytes, dst += QK) {
    legacy_unpack(k, src, q, &d, &m);
    if (k->has_min)
      for (int j = 0; j < QK; j++) dst[j] = d * (float)q[j] + m;
    else
      for (int j = 0; j < QK; j++) dst[j] = d * (float)q[j];
  }
}

// sum_j (d q_j + m) x_j = d * sum_j q_j x_j + m * sum_j x_j, per block.
static double legacy_dot(const legacy_kind *k, const uint8_t *src, const float *x, int64_t nb) {
  int q[QK];
  float d, m;
  double s = 0;
  for (int64_t i = 0; i < nb; i++, src += k->bytes, x += QK) {
    legacy_unpack(k, src, q, &d, &m);
    double sqx = 0, sx = 0;
    for (int j = 0; j < QK; j++) {
      sqx += (double)q[j] * x[j];
      sx += x[j];
    }
    s += d * sqx + m * sx;
  }
  return s;
}

// ---- quantizers ---------------------------------------------------------

// Symmetric kinds: d = v / -half where v is the signed value of largest
// magnitude (first one on ties), so v maps to level 0; levels are
// trunc(x / d + half + 0.5) clamped to 2 * half - 1.
static void quantize_sym(const float *x, int half, int q[QK], float *d_out) {
  float v = 0, amax = 0;
  for (int j = 0; j < QK; j++)
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      v = x[j];
    }
  float d = v / (float)-half;
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  float bias = (float)half + 0.5f;
  for (int j = 0; j < QK; j++) {
    int l = (int)(x[j] * id + bias);
    q[j] = l > 2 * half - 1 ? 2 * half - 1 : l;
  }
  *d_out = d;
}

// Asymmetric kinds: d = (max - min) / (levels - 1), level = trunc((x - min) / d + 0.5).
static void quantize_asym(const float *x, int levels, int q[QK], float *d_out, float *m_out) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < QK; j++) {
    mn = x[j] < mn ? x[j] : mn;
    mx = x[j] > mx ? x[j] : mx;
  }
  float d = (mx - mn) / (float)(levels - 1);
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < QK; j++) {
    int l = (int)((x[j] - mn) * id + 0.5f);
    q[j] = l > levels - 1 ? levels - 1 : l;
  }
  *d_out = d;
  *m_out = mn;
}

void wk_q4_0_quantize(const float *src, uint8_t *dst, int64_t nb) {
  int q[QK];
  float d;
  for (int64_t i = 0; i < nb; i++, src += QK, dst += K_Q4_0.bytes) {
    quantize_sym(src, 8, q, &d);
    wk_st_f16(dst, d);
    pack_nibbles(q, dst + 2);
  }
}

void wk_q4_1_quantize(const float *src, uint8_t *dst, int64_t nb) {
  int q[QK];
  float d, m;
  for (int64_t i = 0; i < nb; i++, src += QK, dst += K_Q4_1.bytes) {
    quantize_asym(src, 16, q, &d, &m);
    wk_st_f16(dst, d);
    wk_st_f16(dst + 2, m);
    pack_nibbles(q, dst + 4);
  }
}

void wk_q5_0_quantize(const float *src, uint8_t *dst, int64_t nb) {
  int q[QK];
  float d;
  for (int64_t i = 0; i < nb; i++, src += QK, dst += K_Q5_0.bytes) {
    quantize_sym(src, 16, q, &d);
    wk_st_f16(dst, d);
    pack_5bit(q, dst + 2, dst + 6);
  }
}

void wk_q5_1_quantize(const float *src, uint8_t *dst, int64_t nb) {
  int q[QK];
  float d, m;
  for (int64_t i = 0; i < nb; i++, src += QK, dst += K_Q5_1.bytes) {
    quantize_asym(src, 32, q, &d, &m);
    wk_st_f16(dst, d);
    wk_st_f16(dst + 2, m);
    pack_5bit(q, dst + 4, dst + 8);
  }
}

// d = amax / 127, level = round-half-away(x / d).
void wk_q8_0_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++, src += QK, dst += K_Q8_0.bytes) {
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(src[j]));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    wk_st_f16(dst, d);
    for (int j = 0; j < QK; j++) dst[2 + j] = (uint8_t)(int8_t)roundf(src[j] * id);
  }
}

// ---- entry points -------------------------------------------------------

void wk_q4_0_dequantize(const uint8_t *s, float *d, int64_t nb) { legacy_dequantize(&K_Q4_0, s, d, nb); }
void wk_q4_1_dequantize(const uint8_t *s, float *d, int64_t nb) { legacy_dequantize(&K_Q4_1, s, d, nb); }
void wk_q5_0_dequantize(const uint8_t *s, float *d, int64_t nb) { legacy_dequantize(&K_Q5_0, s, d, nb); }
void wk_q5_1_dequantize(const uint8_t *s, float *d, int64_t nb) { legacy_dequantize(&K_Q5_1, s, d, nb); }
void wk_q8_0_dequantize(const uint8_t *s, float *d, int64_t nb) { legacy_dequantize(&K_Q8_0, s, d, nb); }

double wk_q4_0_dot(const uint8_t *s, const float *x, int64_t nb) { return legacy_dot(&K_Q4_0, s, x, nb); }
double wk_q4_1_dot(const uint8_t *s, const float *x, int64_t nb) { return legacy_dot(&K_Q4_1, s, x, nb); }
double wk_q5_0_dot(const uint8_t *s, const float *x, int64_t nb) { return legacy_dot(&K_Q5_0, s, x, nb); }
double wk_q5_1_dot(const uint8_t *s, const float *x, int64_t nb) { return legacy_dot(&K_Q5_1, s, x, nb); }
double wk_q8_0_dot(const uint8_t *s, const float *x, int64_t nb) { return legacy_dot(&K_Q8_0, s, x, nb); }
