// Scalar kernels for every weight type: the fallback on CPUs without AVX2 and
// the baseline the SIMD levels are tested against. Integer formats multiply
// integer weights with the int8 activations exactly and scale once per block.
#include <math.h>

#include "backend/cpu/kernels/kernels_internal.h"
#include "base/fp.h"
#include "quant/quant.h"
#include "quant/types.h"

static float ld_f16(const uint8_t *p) { return wk_f16_to_f32(wk_kern_u16(p)); }

// ---- activation converters ----------------------------------------------

void wk_kern_quantize_f32(const float *x, void *xq, int64_t n) {
  memcpy(xq, x, (size_t)n * sizeof(float));
}

void wk_kern_quantize_f32s(const float *x, void *xq, int64_t n) {
  float *o = xq;
  for (int64_t i = 0; i < n; i++) o[i] = x[i] * WK_ACT_F32S_SCALE;
}

// Scale max|x|/127 and round to nearest: q in [-127, 127].
static float quantize_block(const float *x, int8_t *q, int n) {
  float amax = 0;
  for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
  float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; i++) q[i] = (int8_t)lrintf(x[i] * id);
  return d;
}

void wk_kern_quantize_q8(const float *x, void *xq, int64_t n) {
  wk_act_q8 *a = xq;
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    a[b].d = quantize_block(x, a[b].q, 32);
    int s = 0;
    for (int i = 0; i < 32; i++) s += a[b].q[i];
    a[b].sum = s;
  }
}

void wk_kern_quantize_q8k(const float *x, void *xq, int64_t n) {
  wk_act_q8k *a = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    a[b].d = quantize_block(x, a[b].q, 256);
    for (int j = 0; j < 16; j++) {
      int s = 0;
      for (int i = 0; i < 16; i++) s += a[b].q[16 * j + i];
      a[b].bsum[j] = (int16_t)s;
    }
  }
}

// ---- 32-element blocks against WK_ACT_Q8 ---------------------------------

// Unpacks one 32-weight block into integers w[32] (value = d * w + m) and
// returns d; *m is the offset (0 for the symmetric formats).
typedef float (*unpack32_fn)(const uint8_t *b, int w[32], float *m);

static float unpack_q4_0(const uint8_t *b, int w[32], float *m) {
  for (int j = 0; j < 16; j++) {
    w[j] = (b[2 + j] & 15) - 8;
    w[j + 16] = (b[2 + j] >> 4) - 8;
  }
  *m = 0;
  return ld_f16(b);
}

static float unpack_q4_1(const uint8_t *b, int w[32], float *m) {
  for (int j = 0; j < 16; j++) {
    w[j] = b[4 + j] & 15;
    w[j + 16] = b[4 + j] >> 4;
  }
  *m = ld_f16(b + 2);
  return ld_f16(b);
}

static void unpack_5bit(const uint8_t *qh4, const uint8_t *qs, int w[32], int off) {
  uint32_t qh;
  memcpy(&qh, qh4, 4);
  for (int j = 0; j < 16; j++) {
    w[j] = ((qs[j] & 15) | (int)((qh >> j) & 1) << 4) - off;
    w[j + 16] = ((qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - off;
  }
}

static float unpack_q5_0(const uint8_t *b, int w[32], float *m) {
  unpack_5bit(b + 2, b + 6, w, 16);
  *m = 0;
  return ld_f16(b);
}

static float unpack_q5_1(const uint8_t *b, int w[32], float *m) {
  unpack_5bit(b + 4, b + 8, w, 0);
  *m = ld_f16(b + 2);
  return ld_f16(b);
}

static float unpack_q8_0(const uint8_t *b, int w[32], float *m) {
  for (int j = 0; j < 32; j++) w[j] = (int8_t)b[2 + j];
  *m = 0;
  return ld_f16(b);
}

static float unpack_iq4_nl(const uint8_t *b, int w[32], float *m) {
  for (int j = 0; j < 16; j++) {
    w[j] = wk_kern_iq4nl_values[b[2 + j] & 15];
    w[j + 16] = wk_kern_iq4nl_values[b[2 + j] >> 4];
  }
  *m = 0;
  return ld_f16(b);
}

static float dot32(int64_t n, const uint8_t *b, int bytes, const wk_act_q8 *a, unpack32_fn un) {
  float acc = 0;
  int w[32];
  for (int64_t i = 0; i < n / 32; i++, b += bytes, a++) {
    float m, d = un(b, w, &m);
    int s = 0;
    for (int j = 0; j < 32; j++) s += w[j] * a->q[j];
    acc += a->d * (d * (float)s + m * (float)a->sum);
  }
  return acc;
}

#define DOT32(NAME, BYTES)                                                   \
  static float dot_##NAME(int64_t n, const void *w, const void *xq) {        \
    return dot32(n, w, BYTES, xq, unpack_##NAME);                            \
  }
DOT32(q4_0, 18)
DOT32(q4_1, 20)
DOT32(q5_0, 22)
DOT32(q5_1, 24)
DOT32(q8_0, 34)
DOT32(iq4_nl, 18)

// ---- 256-element blocks against WK_ACT_Q8K -------------------------------

// Integer sum of w[i] * q[i] over 16 elements.
static int isum16(const int *w, const int8_t *q) {
  int s = 0;
  for (int i = 0; i < 16; i++) s += w[i] * q[i];
  return s;
}

static float dot_q2_k(int64_t n, const void *wv, const void *xq) {
  const uint8_t *b = wv;
  const wk_act_q8k *a = xq;
  float acc = 0;
  int w[256];
  for (int64_t i = 0; i < n / 256; i++, b += 84, a++) {
    for (int e = 0; e < 256; e++)
      w[e] = (b[16 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    int s = 0, smin = 0;
    for (int j = 0; j < 16; j++) {
      s += (b[j] & 15) * isum16(w + 16 * j, a->q + 16 * j);
      smin += (b[j] >> 4) * a->bsum[j];
    }
    acc += a->d * (ld_f16(b + 80) * (float)s - ld_f16(b + 82) * (float)smin);
  }
  return acc;
}

static float dot_q3_k(int64_t n, const void *wv, const void *xq) {
  const uint8_t *b = wv;
  const wk_act_q8k *a = xq;
  float acc = 0;
  int w[256];
  for (int64_t i = 0; i < n / 256; i++, b += 110, a++) {
    for (int e = 0; e < 256; e++) {
      int half = e / 128, g = (e % 128) / 32, l = e % 32;
      int q = (b[32 + half * 32 + l] >> (2 * g)) & 3;
      w[e] = q - (((b[l] >> (half * 4 + g)) & 1) ? 0 : 4);
    }
    int s = 0;
    for (int j = 0; j < 16; j++)
      s += (wk_kern_scale_q3k(b + 96, j) - 32) * isum16(w + 16 * j, a->q + 16 * j);
    acc += a->d * ld_f16(b + 108) * (float)s;
  }
  return acc;
}

// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; qh is NULL
// for Q4_K.
static float dot_q45_k(int64_t n, const uint8_t *b, int bytes, int qs_off, int qh_off,
                       const wk_act_q8k *a) {
  float acc = 0;
  int w[256];
  for (int64_t i = 0; i < n / 256; i++, b += bytes, a++) {
    for (int e = 0; e < 256; e++) {
      int c = e / 64, l = e % 32, j = e / 32;
      int q = b[qs_off + c * 32 + l];
      q = (e % 64) < 32 ? q & 15 : q >> 4;
      if (qh_off) q |= ((b[qh_off + l] >> j) & 1) << 4;
      w[e] = q;
    }
    int s = 0, smin = 0;
    for (int j = 0; j < 8; j++) {
      int sc, m;
      wk_kern_scale_min_k4(b + 4, j, &sc, &m);
      s += sc * (isum16(w + 32 * j, a->q + 32 * j) + isum16(w + 32 * j + 16, a->q + 32 * j + 16));
      smin += m * (a->bsum[2 * j] + a->bsum[2 * j + 1]);
    }
    acc += a->d * (ld_f16(b) * (float)s - ld_f16(b + 2) * (float)smin);
  }
  return acc;
}

static float dot_q4_k(int64_t n, const void *w, const void *xq) {
  return dot_q45_k(n, w, 144, 16, 0, xq);
}
static float dot_q5_k(int64_t n, const void *w, const void *xq) {
  return dot_q45_k(n, w, 176, 48, 16, xq);
}

static float dot_q6_k(int64_t n, const void *wv, const void *xq) {
  const uint8_t *b = wv;
  const wk_act_q8k *a = xq;
  float acc = 0;
  int w[256];
  for (int64_t i = 0; i < n / 256; i++, b += 210, a++) {
    for (int e = 0; e < 256; e++) {
      int half = e / 128, g = (e % 128) / 32, l = e % 32;
      int lo = b[half * 64 + l + (g & 1) * 32];
      lo = g < 2 ? lo & 15 : lo >> 4;
      int hi = (b[128 + half * 32 + l] >> (2 * g)) & 3;
      w[e] = (lo | hi << 4) - 32;
    }
    int s = 0;
    for (int j = 0; j < 16; j++) s += (int8_t)b[192 + j] * isum16(w + 16 * j, a->q + 16 * j);
    acc += a->d * ld_f16(b + 208) * (float)s;
  }
  return acc;
}

static float dot_iq4_xs(int64_t n, const void *wv, const void *xq) {
  const uint8_t *b = wv;
  const wk_act_q8k *a = xq;
  float acc = 0;
  int w[256];
  for (int64_t i = 0; i < n / 256; i++, b += 136, a++) {
    for (int e = 0; e < 256; e++) {
      int q = b[8 + (e / 32) * 16 + e % 16];
      w[e] = wk_kern_iq4nl_values[(e % 32) < 16 ? q & 15 : q >> 4];
    }
    int s = 0;
    for (int j = 0; j < 8; j++)
      s += (wk_kern_scale_iq4xs(b, j) - 32) *
           (isum16(w + 32 * j, a->q + 32 * j) + isum16(w + 32 * j + 16, a->q + 32 * j + 16));
    acc += a->d * ld_f16(b) * (float)s;
  }
  return acc;
}

// ---- float weights against WK_ACT_F32 ------------------------------------

static float dot_f32(int64_t n, const void *w, const void *xq) {
  const uint8_t *b = w;
  const float *x = xq;
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += wk_kern_f32(b + 4 * i) * x[i];
  return acc;
}

static float dot_f16(int64_t n, const void *w, const void *xq) {
  const uint8_t *b = w;
  const float *x = xq;
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += ld_f16(b + 2 * i) * x[i];
  return acc;
}

static float dot_bf16(int64_t n, const void *w, const void *xq) {
  const uint8_t *b = w;
  const float *x = xq;
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += wk_bf16_to_f32(wk_kern_u16(b + 2 * i)) * x[i];
  return acc;
}

// xs: what undoes the activation format's factor (E4M3: WK_ACT_F32S).
static float dot_fp8(int64_t n, const uint8_t *b, const float *x, float (*dec)(uint8_t),
                     float xs) {
  float acc = 0;
  for (int64_t i = 0; i < n / 128; i++, b += 132, x += 128) {
    float s = 0;
    for (int j = 0; j < 128; j++) s += dec(b[4 + j]) * x[j];
    acc += wk_kern_f32(b) * xs * s;
  }
  return acc;
}
static float dot_fp8_e4m3(int64_t n, const void *w, const void *xq) {
  return dot_fp8(n, w, xq, wk_fp8_e4m3_to_f32, 1.0f / WK_ACT_F32S_SCALE);
}
static float dot_fp8_e5m2(int64_t n, const void *w, const void *xq) {
  return dot_fp8(n, w, xq, wk_fp8_e5m2_to_f32, 1.0f / WK_ACT_F32S_SCALE);
}

// ---- the scalar table ----------------------------------------------------

// The generic matrix kernel: one vec_dot per output (slow but obviously right).
#define GEMM_LOOP(NAME)                                                                   \
  static void gemm_##NAME(const void *w, size_t row_stride, int64_t k, int rows,         \
                          const void *xq, size_t xq_stride, int n_tokens, float *y,      \
                          size_t y_stride) {                                              \
    for (int t = 0; t < n_tokens; t++)                                                    \
      for (int r = 0; r < rows; r++)                                                      \
        y[(size_t)t * y_stride + r] = dot_##NAME(k, (const uint8_t *)w + r * row_stride, \
                                                 (const uint8_t *)xq + t * xq_stride);    \
  }
GEMM_LOOP(f32)
GEMM_LOOP(f16)
GEMM_LOOP(bf16)
GEMM_LOOP(q4_0)
GEMM_LOOP(q4_1)
GEMM_LOOP(q5_0)
GEMM_LOOP(q5_1)
GEMM_LOOP(q8_0)
GEMM_LOOP(iq4_nl)
GEMM_LOOP(q2_k)
GEMM_LOOP(q3_k)
GEMM_LOOP(q4_k)
GEMM_LOOP(q5_k)
GEMM_LOOP(q6_k)
GEMM_LOOP(iq4_xs)
GEMM_LOOP(fp8_e4m3)
GEMM_LOOP(fp8_e5m2)

typedef struct {
  int type;
  wk_vec_dot_fn dot;
  wk_gemm_fn gemm;
} scalar_row;

#define ROW(TYPE, NAME) {TYPE, dot_##NAME, gemm_##NAME}
static const scalar_row k_scalar[] = {
    ROW(WK_F32, f32),        ROW(WK_F16, f16),        ROW(WK_BF16, bf16),
    ROW(WK_Q4_0, q4_0),      ROW(WK_Q4_1, q4_1),      ROW(WK_Q5_0, q5_0),
    ROW(WK_Q5_1, q5_1),      ROW(WK_Q8_0, q8_0),      ROW(WK_IQ4_NL, iq4_nl),
    ROW(WK_Q2_K, q2_k),      ROW(WK_Q3_K, q3_k),      ROW(WK_Q4_K, q4_k),
    ROW(WK_Q5_K, q5_k),      ROW(WK_Q6_K, q6_k),      ROW(WK_IQ4_XS, iq4_xs),
    ROW(WK_FP8_E4M3, fp8_e4m3), ROW(WK_FP8_E5M2, fp8_e5m2),
};

int wk_kern_scalar_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  for (size_t i = 0; i < sizeof k_scalar / sizeof k_scalar[0]; i++)
    if (k_scalar[i].type == type) {
      *dot = k_scalar[i].dot;
      *gemm = k_scalar[i].gemm;
      return 1;
    }
  return 0;
}
