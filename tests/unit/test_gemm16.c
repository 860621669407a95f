// The integer prompt GEMM (src/backend/cpu/kernels/gemm16.h) on CPUs with
// AVX-512 VNNI, for every weight type it decodes:
//  - the decoder: sw * c + mw equals the reference dequantizer (src/quant)
//    value for value (a zero's sign aside), codes within the bound of the
//    exactness proof (|c| <= 4096);
//  - the product against a double-precision reference of the same math (the
//    A16 activations' d, s and v, the reference weights): f32 rounding only,
//    |diff| <= (k / 32 + 8) 2^-23 sum |terms|;
//  - against the f32 product with the original activations: within the
//    16-bit rounding bound sum_i |w_i| d(i) / 2 (+ the f32 noise above);
//  - shapes: rows 1..70 (strips of 32 with every tail, a second row group
//    empty or partial), tokens 1..13 (every register-tile width and tail), k
//    from 256 to 4096 (2304, 4096: more than one k-chunk, whose products add
//    up in y; 32-value formats also k = 96, 800, 2080: rows not a whole
//    number of super-blocks, a last chunk of one block); y poisoned with NaN
//    before each call and the padding column untouched;
//  - extreme blocks: every weight the format's largest |code| against
//    activations of one sign at full range (the int32 sums' worst case).
// Weights are random values quantized by the reference quantizer (fresh data
// each shape); activations Gaussian with a spread changing every 32 values
// and outliers 40x larger.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/gemm16.h"
#include "base/fp.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"
#include "test_util.h"


static const int k_types[] = {WK_Q4_0, WK_Q4_1, WK_Q5_0, WK_Q5_1, WK_Q8_0,  WK_IQ4_NL,
                              WK_Q3_K, WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_IQ4_XS};

// The decoder of g on `rows` rows against the reference dequantizer.
static void check_decode(const wk_gemm16 *g, const uint8_t *w, size_t rb, int64_t k, int rows) {
  const int64_t nb = k / 32;
  int16_t *c = malloc(sizeof(int16_t) * k);
  float *sw = malloc(sizeof(float) * 2 * nb), *mw = malloc(sizeof(float) * 2 * nb);
  float *ref = malloc(sizeof(float) * k);
  int same = 1, bounded = 1, min_ok = 1;
  for (int r = 0; r < rows; r++) {
    CHECK(wk_dequantize_row(g->type, w + r * rb, ref, k) == WICK_OK);
    g->decode(w + r * rb, nb, c, sw, mw, 2);  // stride 2: every other float
    for (int64_t i = 0; i < k; i++) {
      const int64_t b = i / 32;
      const float v = sw[2 * b] * (float)c[i] + mw[2 * b];
      same &= v == ref[i];
      bounded &= abs(c[i]) <= 4096;
    }
    for (int64_t b = 0; b < nb; b++) min_ok &= g->has_min || mw[2 * b] == 0.0f;
  }
  if (!same)
    fprintf(stderr, "%s: decoder differs from the reference\n", wk_type_get(g->type)->name);
  CHECK(same);
  CHECK(bounded);
  CHECK(min_ok);
  free(c), free(sw), free(mw), free(ref);
}

typedef struct stats {
  double worst_m, worst_x;  // max |diff| / tolerance: same math, f32 product
} stats;

// y (n_tokens x rows, stride ys) against the references, for weights w
// (reference-dequantized: wd) and activations x (converted: xq, stride xs).
static void check_product(const wk_gemm16 *g, int64_t k, int rows, const float *wd,
                          const float *x, const uint8_t *xq, size_t xs, int n_tokens,
                          const float *y, size_t ys, stats *st) {
  const int64_t nb = k / 32;
  int bad = 0, pad_ok = 1;
  for (int t = 0; t < n_tokens; t++) {
    const wk_act16 *a = (const wk_act16 *)(xq + (size_t)t * xs);
    const float *xt = x + (size_t)t * k;
    for (int r = 0; r < rows; r++) {
      const float *wr = wd + (size_t)r * k;
      double m = 0, mag_m = 0, f = 0, mag_f = 0, bound = 0;
      for (int64_t b = 0; b < nb; b++) {
        double s = 0, sa = 0;
        for (int i = 0; i < 32; i++) {
          const double p = (double)wr[32 * b + i] * a[b].v[i];
          s += p, sa += fabs(p);
          f += (double)wr[32 * b + i] * xt[32 * b + i];
          mag_f += fabs((double)wr[32 * b + i] * xt[32 * b + i]);
          bound += fabs((double)wr[32 * b + i]) * a[b].d / 2;
        }
        m += s * a[b].d;
        mag_m += sa * a[b].d;
      }
      const double got = y[(size_t)t * ys + r];
      const double tol_m = (double)(nb + 8) * 0x1p-23 * mag_m + 1e-30;
      const double tol_x = bound * 1.0001 + tol_m + 1e-6 * mag_f + 1e-30;
      const double em = fabs(got - m), ex = fabs(got - f);
      if (!(em <= tol_m) || !(ex <= tol_x)) {
        if (!bad)
          fprintf(stderr, "%s k=%lld rows=%d tokens=%d: y[%d][%d] = %.9g, same math %.9g "
                  "(tol %.3g), f32 %.9g (tol %.3g)\n", wk_type_get(g->type)->name,
                  (long long)k, rows, n_tokens, t, r, got, m, tol_m, f, tol_x);
        bad = 1;
      }
      if (isfinite(em / tol_m)) st->worst_m = fmax(st->worst_m, em / tol_m);
      if (isfinite(ex / tol_x)) st->worst_x = fmax(st->worst_x, ex / tol_x);
    }
    pad_ok &= isnan(y[(size_t)t * ys + rows]);
  }
  CHECK(!bad);
  CHECK(pad_ok);
}

// rows x n_tokens with fresh random weights and activations.
static void check_shape(const wk_gemm16 *g, int64_t k, int rows, int n_tokens, uint64_t *seed,
                        stats *st) {
  const size_t rb = wk_row_size(g->type, k), xs = wk_act16_row_size(WK_ACT_A16, k);
  const size_t ys = (size_t)rows + 1;
  uint8_t *w = malloc(rb * rows), *xq = malloc(xs * n_tokens);
  float *wd = malloc(sizeof(float) * k * rows), *x = malloc(sizeof(float) * k * n_tokens);
  float *y = malloc(sizeof(float) * ys * n_tokens);
  void *scratch = malloc(wk_gemm16_scratch(k));
  for (int r = 0; r < rows; r++) {
    fill_random(seed, wd + (size_t)r * k, k, 0);
    CHECK(wk_quantize_row(g->type, wd + (size_t)r * k, w + r * rb, k) == WICK_OK);
    CHECK(wk_dequantize_row(g->type, w + r * rb, wd + (size_t)r * k, k) == WICK_OK);
  }
  fill_random(seed, x, k * n_tokens, 1);
  for (int t = 0; t < n_tokens; t++) g->quantize_act(x + (size_t)t * k, xq + t * xs, k);
  for (size_t i = 0; i < ys * n_tokens; i++) y[i] = NAN;
  wk_gemm16_run(g, w, rb, k, rows, xq, xs, n_tokens, y, ys, scratch);
  check_product(g, k, rows, wd, x, xq, xs, n_tokens, y, ys, st);
  check_decode(g, w, rb, k, rows);
  free(w), free(xq), free(wd), free(x), free(y), free(scratch);
}

// A block of the format whose every code is the largest in magnitude and
// whose scales are largest (d = 1); 0 when the type has none here.
static int extreme_block(int type, uint8_t *b) {
  const uint16_t one = wk_f32_to_f16(1.0f);
  switch (type) {
    case WK_Q8_0:  // 32 x -128
      memset(b, 0x80, 34);
      memcpy(b, &one, 2);
      return 34;
    case WK_Q6_K:  // codes 0 (-32), scales -128: c = 4096
      memset(b, 0, 210);
      memset(b + 192, 0x80, 16);
      memcpy(b + 208, &one, 2);
      return 210;
    case WK_Q3_K:  // low bits 0, high bits clear (-4), scales 0 (-32): c = 128
      memset(b, 0, 110);
      memcpy(b + 108, &one, 2);
      return 110;
    case WK_IQ4_XS:  // nibble 0 (-127), scales 0 (-32)
      memset(b, 0, 136);
      memcpy(b, &one, 2);
      return 136;
    case WK_IQ4_NL:
      memset(b, 0, 18);
      memcpy(b, &one, 2);
      return 18;
    default:
      return 0;
  }
}

// Every weight at its extreme against activations of one sign at full range.
static void check_extreme(const wk_gemm16 *g, stats *st) {
  uint8_t blk[256];
  const int bytes = extreme_block(g->type, blk);
  if (!bytes) return;
  const int64_t k = 512;
  const int rows = 33, n_tokens = 7;
  const size_t rb = wk_row_size(g->type, k), xs = wk_act16_row_size(WK_ACT_A16, k);
  const size_t ys = (size_t)rows + 1;
  const int per = wk_type_get(g->type)->block;
  uint8_t *w = malloc(rb * rows), *xq = malloc(xs * n_tokens);
  float *wd = malloc(sizeof(float) * k * rows), *x = malloc(sizeof(float) * k * n_tokens);
  float *y = malloc(sizeof(float) * ys * n_tokens);
  void *scratch = malloc(wk_gemm16_scratch(k));
  for (int r = 0; r < rows; r++) {
    for (int64_t b = 0; b < k / per; b++) memcpy(w + r * rb + b * bytes, blk, (size_t)bytes);
    CHECK(wk_dequantize_row(g->type, w + r * rb, wd + (size_t)r * k, k) == WICK_OK);
  }
  for (int64_t i = 0; i < k * n_tokens; i++) x[i] = wd[i % k] < 0 ? -3.0f : 3.0f;
  for (int t = 0; t < n_tokens; t++) g->quantize_act(x + (size_t)t * k, xq + t * xs, k);
  for (size_t i = 0; i < ys * n_tokens; i++) y[i] = NAN;
  wk_gemm16_run(g, w, rb, k, rows, xq, xs, n_tokens, y, ys, scratch);
  check_product(g, k, rows, wd, x, xq, xs, n_tokens, y, ys, st);
  free(w), free(xq), free(wd), free(x), free(y), free(scratch);
}

int main(void) {
  if (wk_kernel_best_level() < WK_LEVEL_AVX512) {
    printf("test_gemm16: skipped: no AVX-512 VNNI\n");
    return 0;
  }
  uint64_t seed = 0x6e6d6d3136ull;
  wk_gemm16 g;
  CHECK(wk_gemm16_pick(WK_Q2_K, &g) == WICK_ERR_UNSUPPORTED);
  CHECK(wk_gemm16_pick(WK_F16, &g) == WICK_ERR_UNSUPPORTED);
  for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
    const int type = k_types[ti];
    CHECK(wk_gemm16_pick(type, &g) == WICK_OK);
    if (g.type != type) continue;
    stats st = {0, 0};
    const int64_t ks[] = {96, 256, 800, 1024, 2048, 2080, 2304, 4096};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
      if (ks[i] % g.k_multiple) continue;
      check_shape(&g, ks[i], 37, 13, &seed, &st);
    }
    for (int rows = 1; rows <= 70; rows += rows < 34 ? 1 : 12)
      check_shape(&g, 256, rows, 1 + rows % 13, &seed, &st);
    for (int tokens = 1; tokens <= 13; tokens++) check_shape(&g, 512, 17, tokens, &seed, &st);
    check_extreme(&g, &st);
    printf("%-7s worst error / tolerance: same math %.3f, f32 product %.3f\n",
           wk_type_get(type)->name, st.worst_m, st.worst_x);
  }
  if (g_failures) fprintf(stderr, "test_gemm16: %d check(s) failed\n", g_failures);
  return g_failures ? 1 : 0;
}
