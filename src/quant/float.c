// F32, F16, BF16 and block-scaled FP8.
//
// FP8 block (132 bytes): f32 scale (little-endian), then 128 codes; value =
// scale * decode(code). The quantizer takes scale = amax / FMAX (FMAX = 448 for
// E4M3, 57344 for E5M2), divides each value by the scale and rounds to the
// nearest code, ties to an even code. E4M3 is decoded with the plain formula
// (no NaN or inf: code 0x7f reads as 480), but the encoder saturates at 448 so
// every block it writes is also valid OCP E4M3FN, whose 0x7f is NaN.
#include "quant/float.h"

#include "quant/block.h"
#include "quant/quant.h"

enum { FP8_BLOCK = 128 };

// ---- element conversions ------------------------------------------------

float wk_fp8_e4m3_to_f32(uint8_t v) {
  int e = (v >> 3) & 15, m = v & 7;
  float a = e == 0 ? (float)m * wk_pow2i(-9) : (float)(8 + m) * wk_pow2i(e - 10);
  return v & 0x80 ? -a : a;
}

float wk_fp8_e5m2_to_f32(uint8_t v) {
  int e = (v >> 2) & 31, m = v & 3;
  float a;
  if (e == 0)
    a = (float)m * wk_pow2i(-16);
  else if (e == 31)
    a = m ? NAN : INFINITY;
  else
    a = (float)(4 + m) * wk_pow2i(e - 17);
  return v & 0x80 ? -a : a;
}

// Rounds |f| (finite, at least the smallest normal 2^emin) to `mbits` mantissa
// bits, ties to even; returns the biased exponent and mantissa as one code
// (exponent field above the mantissa field), which may carry into the next
// exponent.
static uint32_t fp8_round_normal(float a, int mbits, int bias) {
  uint32_t x = wk_f32_bits(a);
  int drop = 23 - mbits;
  x += ((1u << (drop - 1)) - 1) + ((x >> drop) & 1);
  int e = (int)(x >> 23) - 127 + bias;
  uint32_t m = (x >> drop) & ((1u << mbits) - 1);
  return ((uint32_t)e << mbits) | m;
}

uint8_t wk_f32_to_fp8_e4m3(float f) {
  uint8_t sign = signbit(f) ? 0x80 : 0;
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7f;
  if (a >= 448.0f) return sign | 0x7e;                     // saturate
  if (a < 0x1p-6f) return sign | (uint8_t)nearbyintf(a * 0x1p9f);  // subnormal (8 = 2^-6)
  uint32_t c = fp8_round_normal(a, 3, 7);
  return sign | (uint8_t)(c > 0x7e ? 0x7e : c);
}

uint8_t wk_f32_to_fp8_e5m2(float f) {
  uint8_t sign = signbit(f) ? 0x80 : 0;
  float a = fabsf(f);
  if (isnan(f)) return sign | 0x7e;
  if (a < 0x1p-14f) return sign | (uint8_t)nearbyintf(a * 0x1p16f);  // subnormal (4 = 2^-14)
  if (isinf(a)) return sign | 0x7c;
  uint32_t c = fp8_round_normal(a, 2, 15);
  return sign | (uint8_t)(c >= 0x7c ? 0x7c : c);  // overflow -> inf
}

// ---- F32 / F16 / BF16 (block = 1 element) -------------------------------

void wk_f32_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) dst[i] = wk_ld_f32(src + 4 * i);
}
void wk_f32_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) wk_st_f32(dst + 4 * i, src[i]);
}
double wk_f32_dot(const uint8_t *src, const float *x, int64_t nb) {
  double s = 0;
  for (int64_t i = 0; i < nb; i++) s += (double)wk_ld_f32(src + 4 * i) * x[i];
  return s;
}

void wk_f16_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) dst[i] = wk_ld_f16(src + 2 * i);
}
void wk_f16_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) wk_st_f16(dst + 2 * i, src[i]);
}
double wk_f16_dot(const uint8_t *src, const float *x, int64_t nb) {
  double s = 0;
  for (int64_t i = 0; i < nb; i++) s += (double)wk_ld_f16(src + 2 * i) * x[i];
  return s;
}

void wk_bf16_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) dst[i] = wk_bf16_to_f32(wk_ld_u16(src + 2 * i));
}
void wk_bf16_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t i = 0; i < nb; i++) wk_st_u16(dst + 2 * i, wk_f32_to_bf16(src[i]));
}
double wk_bf16_dot(const uint8_t *src, const float *x, int64_t nb) {
  double s = 0;
  for (int64_t i = 0; i < nb; i++) s += (double)wk_bf16_to_f32(wk_ld_u16(src + 2 * i)) * x[i];
  return s;
}

// ---- FP8 with one f32 scale per 128 values ------------------------------

typedef float (*fp8_dec_fn)(uint8_t);
typedef uint8_t (*fp8_enc_fn)(float);

static void fp8_dequantize(const uint8_t *src, float *dst, int64_t nb, fp8_dec_fn dec) {
  for (int64_t i = 0; i < nb; i++, src += 4 + FP8_BLOCK, dst += FP8_BLOCK) {
    float d = wk_ld_f32(src);
    for (int j = 0; j < FP8_BLOCK; j++) dst[j] = d * dec(src[4 + j]);
  }
}

static void fp8_quantize(const float *src, uint8_t *dst, int64_t nb, fp8_enc_fn enc,
                         float fmax) {
  for (int64_t i = 0; i < nb; i++, src += FP8_BLOCK, dst += 4 + FP8_BLOCK) {
    float amax = 0;
    for (int j = 0; j < FP8_BLOCK; j++) amax = fmaxf(amax, fabsf(src[j]));
    float d = amax / fmax;
    wk_st_f32(dst, d);
    for (int j = 0; j < FP8_BLOCK; j++) dst[4 + j] = d > 0 ? enc(src[j] / d) : 0;
  }
}

static double fp8_dot(const uint8_t *src, const float *x, int64_t nb, fp8_dec_fn dec) {
  double s = 0;
  for (int64_t i = 0; i < nb; i++, src += 4 + FP8_BLOCK, x += FP8_BLOCK) {
    double b = 0;  // sum of code values times x, scaled once per block
    for (int j = 0; j < FP8_BLOCK; j++) b += (double)dec(src[4 + j]) * x[j];
    s += (double)wk_ld_f32(src) * b;
  }
  return s;
}

void wk_fp8e4_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  fp8_dequantize(src, dst, nb, wk_fp8_e4m3_to_f32);
}
void wk_fp8e4_quantize(const float *src, uint8_t *dst, int64_t nb) {
  fp8_quantize(src, dst, nb, wk_f32_to_fp8_e4m3, 448.0f);
}
double wk_fp8e4_dot(const uint8_t *src, const float *x, int64_t nb) {
  return fp8_dot(src, x, nb, wk_fp8_e4m3_to_f32);
}

void wk_fp8e5_dequantize(const uint8_t *src, float *dst, int64_t nb) {
  fp8_dequantize(src, dst, nb, wk_fp8_e5m2_to_f32);
}
void wk_fp8e5_quantize(const float *src, uint8_t *dst, int64_t nb) {
  fp8_quantize(src, dst, nb, wk_f32_to_fp8_e5m2, 57344.0f);
}
double wk_fp8e5_dot(const uint8_t *src, const float *x, int64_t nb) {
  return fp8_dot(src, x, nb, wk_fp8_e5m2_to_f32);
}
