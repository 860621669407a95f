// The 16-bit-activation kernel table (which format each weight type reads,
// which level runs it), the scalar activation converters, and the scalar
// kernels: the fallback on CPUs without AVX2 and the baseline the AVX2 level
// is tested against. The scalar dot decodes each weight block with the
// reference dequantizer (src/quant) and sums products with the integer
// activations in double; it is slow and plainly right.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"

// ---- activation converters ------------------------------------------------

// Scale max|x| / QMAX, round to nearest even; returns d, writes the lo bytes
// of n values (n 32 or 256) to q[0..n), their hi bytes to q[n..2n), |lo|,
// |hi| and the sign to e[0..3n) when e is not NULL, the values to v16 (in
// order for n = 32, in wk_act16k_pos order for 256), and the sum of each 16
// to gs[n / 16].
static float quantize_block(const float *x, int8_t *q, int8_t *e, int16_t *v16, int n, int *gs) {
  float amax = 0;
  for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
  float d = amax / (float)WK_ACT16_QMAX, id = d > 0 ? 1.0f / d : 0.0f;
  for (int g = 0; g < n / 16; g++) {
    gs[g] = 0;
    for (int i = 0; i < 16; i++) {
      const int v = (int)lrintf(x[16 * g + i] * id), k = 16 * g + i;
      wk_act16_split(v, &q[k], &q[n + k]);
      if (e) {
        e[k] = (int8_t)abs(q[k]);
        e[n + k] = (int8_t)abs(q[n + k]);
        e[2 * n + k] = (int8_t)((v > 0) - (v < 0));
      }
      v16[n == 32 ? k : wk_act16k_pos(k)] = (int16_t)v;
      gs[g] += v;
    }
  }
  return d;
}

void wk_act16_quantize(const float *x, void *xq, int64_t n) {
  wk_act16 *a = xq;
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    int gs[2];
    int8_t *q = (int8_t *)xq + wk_act16_bytes(WK_ACT_A16, n / 32, b);
    a[b].d = quantize_block(x, q, NULL, a[b].v, 32, gs);
    a[b].sum = gs[0] + gs[1];
    a[b].s = a[b].d * (float)a[b].sum;
  }
}

void wk_act16k_quantize(const float *x, void *xq, int64_t n) {
  wk_act16k *a = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    int gs[16];
    int8_t *q = (int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, n / 256, b);
    int8_t *e = (int8_t *)xq + wk_act16k_sign_bytes(n / 256, b);
    a[b].d = quantize_block(x, q, e, a[b].v, 256, gs);
    for (int j = 0; j < 16; j++) a[b].s[j] = a[b].d * (float)gs[j];
  }
}

// ---- the table ----------------------------------------------------------------

static int act_of(int type) {
  switch (type) {
    case WK_Q4_0: case WK_Q4_1: case WK_Q5_0: case WK_Q5_1: case WK_Q8_0: case WK_IQ4_NL:
      return WK_ACT_A16;
    case WK_Q2_K: case WK_Q3_K: case WK_Q4_K: case WK_Q5_K: case WK_Q6_K: case WK_IQ4_XS:
      return WK_ACT_A16K;
    default:
      return -1;
  }
}

size_t wk_act16_row_size(int act, int64_t n) {
  if (act == WK_ACT_A16 && n >= 0 && n % 32 == 0) return (size_t)(n / 32) * (sizeof(wk_act16) + 64);
  if (act == WK_ACT_A16K && n >= 0 && n % 256 == 0)
    return wk_act16k_sign_bytes(n / 256, n / 256);
  return 0;
}

int wk_act16_pick(int type, int level, wk_kernel *out) {
  const int act = act_of(type);
  const wk_type_info *info = wk_type_get(type);
  if (act < 0 || !info) return WICK_ERR_UNSUPPORTED;
  const int best = wk_kernel_best_level();
  if (level == WK_LEVEL_AUTO) level = best;
  if (level < WK_LEVEL_SCALAR || level > best) return WICK_ERR_UNSUPPORTED;
  wk_kernel k = {.type = type, .act = act, .k_multiple = act == WK_ACT_A16 ? 32 : 256};
  if (level >= WK_LEVEL_AVX512 && wk_act16_avx512_find(type, &k.vec_dot, &k.gemm)) {
    k.level = WK_LEVEL_AVX512;
    k.quantize_act = act == WK_ACT_A16 ? wk_act16_avx2_quantize : wk_act16k_avx2_quantize;
  } else if (level == WK_LEVEL_AVX512BW && wk_act16_avx512bw_find(type, &k.vec_dot, &k.gemm)) {
    k.level = WK_LEVEL_AVX512BW;
    k.quantize_act = act == WK_ACT_A16 ? wk_act16_avx2_quantize : wk_act16k_avx2_quantize;
  } else if (level >= WK_LEVEL_AVX2 && wk_act16_avx2_find(type, &k.vec_dot, &k.gemm)) {
    k.level = WK_LEVEL_AVX2;
    k.quantize_act = act == WK_ACT_A16 ? wk_act16_avx2_quantize : wk_act16k_avx2_quantize;
  } else if (wk_act16_scalar_find(type, &k.vec_dot, &k.gemm)) {
    k.level = WK_LEVEL_SCALAR;
    k.quantize_act = act == WK_ACT_A16 ? wk_act16_quantize : wk_act16k_quantize;
  } else {
    return WICK_ERR_UNSUPPORTED;
  }
  if (info->block > k.k_multiple) k.k_multiple = info->block;
  *out = k;
  return WICK_OK;
}

int wk_act16_dequant_row(int type, const void *src, float *dst, int64_t n) {
  const int act = act_of(type);
  const int blk = act == WK_ACT_A16 ? 32 : 256;
  if (act < 0 || n < 0 || n % blk) return WICK_ERR_UNSUPPORTED;
  const int ok = act == WK_ACT_A16 ? wk_act16_avx2_dequant_q(type, src, dst, n / blk)
                                   : wk_act16_avx2_dequant_k(type, src, dst, n / blk);
  return ok ? WICK_OK : WICK_ERR_UNSUPPORTED;
}

// ---- scalar kernels -------------------------------------------------------------

// One weight block (blk values, 32 or 256) times one activation block.
static double block_dot(int type, const uint8_t *w, int blk, const int8_t *q, float d) {
  float wd[256];
  int rc = wk_dequantize_row(type, w, wd, blk);
  (void)rc;  // the table lists only types the reference decodes
  double s = 0;
  for (int i = 0; i < blk; i++) s += (double)wd[i] * wk_act16_value(q, blk, i);
  return s * d;
}

static float scalar_dot(int type, int64_t n, const void *w_row, const void *xq) {
  const wk_type_info *info = wk_type_get(type);
  const uint8_t *w = w_row;
  double s = 0;
  if (act_of(type) == WK_ACT_A16) {
    const wk_act16 *a = xq;
    for (int64_t b = 0; b < n / 32; b++)
      s += block_dot(type, w + b * info->bytes, 32,
                     (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16, n / 32, b), a[b].d);
  } else {
    const wk_act16k *a = xq;
    for (int64_t b = 0; b < n / 256; b++)
      s += block_dot(type, w + b * info->bytes, 256,
                     (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, n / 256, b), a[b].d);
  }
  return (float)s;
}

static void scalar_gemm(int type, const void *w, size_t ws, int64_t k, int rows, const void *xq,
                        size_t xs, int n_tokens, float *y, size_t ys) {
  for (int t = 0; t < n_tokens; t++)
    for (int r = 0; r < rows; r++)
      y[(size_t)t * ys + r] = scalar_dot(type, k, (const uint8_t *)w + (size_t)r * ws,
                                         (const uint8_t *)xq + (size_t)t * xs);
}

#define SCALAR_TYPE(T, TYPE)                                                               \
  static float T##_dot(int64_t n, const void *w, const void *xq) {                        \
    return scalar_dot(TYPE, n, w, xq);                                                     \
  }                                                                                        \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,     \
                       size_t xs, int n_tokens, float *y, size_t ys) {                    \
    scalar_gemm(TYPE, w, ws, k, rows, xq, xs, n_tokens, y, ys);                            \
  }

SCALAR_TYPE(q4_0, WK_Q4_0)
SCALAR_TYPE(q4_1, WK_Q4_1)
SCALAR_TYPE(q5_0, WK_Q5_0)
SCALAR_TYPE(q5_1, WK_Q5_1)
SCALAR_TYPE(q8_0, WK_Q8_0)
SCALAR_TYPE(iq4_nl, WK_IQ4_NL)
SCALAR_TYPE(q2_k, WK_Q2_K)
SCALAR_TYPE(q3_k, WK_Q3_K)
SCALAR_TYPE(q4_k, WK_Q4_K)
SCALAR_TYPE(q5_k, WK_Q5_K)
SCALAR_TYPE(q6_k, WK_Q6_K)
SCALAR_TYPE(iq4_xs, WK_IQ4_XS)

int wk_act16_scalar_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  static const wk_act16_row rows[] = {
      {WK_Q4_0, q4_0_dot, q4_0_gemm}, {WK_Q4_1, q4_1_dot, q4_1_gemm},
      {WK_Q5_0, q5_0_dot, q5_0_gemm}, {WK_Q5_1, q5_1_dot, q5_1_gemm},
      {WK_Q8_0, q8_0_dot, q8_0_gemm}, {WK_IQ4_NL, iq4_nl_dot, iq4_nl_gemm},
      {WK_Q2_K, q2_k_dot, q2_k_gemm}, {WK_Q3_K, q3_k_dot, q3_k_gemm},
      {WK_Q4_K, q4_k_dot, q4_k_gemm}, {WK_Q5_K, q5_k_dot, q5_k_gemm},
      {WK_Q6_K, q6_k_dot, q6_k_gemm}, {WK_IQ4_XS, iq4_xs_dot, iq4_xs_gemm},
  };
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm);
}

int wk_act16_lookup(const wk_act16_row *rows, size_t n, int type, wk_vec_dot_fn *dot,
                    wk_gemm_fn *gemm) {
  for (size_t i = 0; i < n; i++)
    if (rows[i].type == type) {
      *dot = rows[i].dot;
      *gemm = rows[i].gemm;
      return 1;
    }
  return 0;
}
