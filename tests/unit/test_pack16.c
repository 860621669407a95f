// Packed 16-row groups (src/backend/cpu/kernels/pack16.h):
//  - packing then unpacking every row gives back the file's bytes, for every
//    type with a packed layout and row lengths with an odd block count;
//  - the packed layout is a permutation: every byte of the rows lands once
//    (Q5_0, Q5_1: their high bits move within qh; Q5_K, Q6_K, Q3_K: code
//    (and Q3_K's scale) bits move between bytes, so every set bit); ctest's test_pack16_avx2 runs
//    these on the packing of CPUs below AVX-512 (Q3_K: a row at a time,
//    where AVX-512 CPUs pack 16 rows at once), and the AVX2 level's packed
//    kernels (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: pack16_avx2.c; Q4_K, Q5_K,
//    Q6_K: pack16k_avx2.c) against that level's vec_dot;
//  - the packed kernel (where the CPU's level has one: AVX-512 VNNI, every
//    packed type; AVX2, those eight) bit-identical to the
//    16-bit-activation vec_dot on the original rows (K-quants: within
//    2e-6 of sum |w x|, f32 rounding in another order; Q3_K against the
//    8-bit-activation vec_dot, as it runs on WK_ACT_Q8K, and Q2_K against
//    act8b.h's vec_dot on WK_ACT_Q8B), for 1..9 tokens
//    (token chunks of WK_PACK16_MAX_TOKENS), 16 / 32 / 48 rows, y's padding
//    untouched;
//  - extreme blocks (largest codes times scale 1 against activations at full
//    range), where the block sums come closest to int32's range;
//  - F16, BF16, FP8 E4M3 / E5M2: the same layout checks, and the kernel
//    against sum w x in f64 within 1e-5 of sum |w x| on rows of random codes
//    (every finite F16 and FP8 code) and quantized random values.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/act8b.h"
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/pack16.h"
#include "base/fp.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"
#include "test_util.h"

static const int k_types[] = {WK_Q4_0, WK_Q4_1, WK_Q5_0, WK_Q5_1, WK_Q8_0, WK_IQ4_NL,
                              WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_IQ4_XS, WK_Q2_K, WK_Q3_K};
static const int64_t k_sizes[] = {32, 96, 576, 640, 4096};
static const int64_t k_sizes_k[] = {256, 768, 2048, 4096};

static int is_k(int type) {
  return type == WK_Q2_K || type == WK_Q3_K || type == WK_Q4_K || type == WK_Q5_K ||
         type == WK_Q6_K || type == WK_IQ4_XS;
}

// sum_i |w_i| |x_i| of row w against the activations xq (their values d v).
static double abs_dot(int type, int act, const uint8_t *w, const uint8_t *xq, int64_t n) {
  float *wd = malloc(sizeof(float) * n);
  CHECK(wk_dequantize_row(type, w, wd, n) == WICK_OK);
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    double x;
    if (act == WK_ACT_Q8B) {
      const wk_act_q8b *a = (const wk_act_q8b *)xq + i / 256;
      x = a->d[i % 256 / 32] * a->q[i % 256];
    } else if (type == WK_Q3_K) {
      const wk_act_q8k *a = (const wk_act_q8k *)xq + i / 256;
      x = a->d * a->q[i % 256];
    } else if (is_k(type)) {
      const wk_act16k *a = (const wk_act16k *)xq + i / 256;
      x = a->d * a->v[wk_act16k_pos((int)(i % 256))];
    } else {
      const wk_act16 *a = (const wk_act16 *)xq + i / 32;
      x = a->d * a->v[i % 32];
    }
    s += fabs(wd[i] * x);
  }
  free(wd);
  return s;
}

enum { MAXT = 9, MAXROWS = 48 };

// Packs groups of rows w (rb bytes a row) into p and checks the round trip
// and that the bytes are a permutation.
static void check_layout(int type, int64_t n, int rows, const uint8_t *w, uint8_t *p,
                         size_t rb) {
  for (int g = 0; g + 16 <= rows; g += 16) wk_pack16_group(type, n, w + g * rb, rb, p + g * rb);
  uint8_t *back = malloc(16 * rb);
  int same = 1;
  for (int g = 0; g + 16 <= rows; g += 16) {
    memset(back, 0xa5, 16 * rb);
    wk_pack16_unpack(type, n, p + g * rb, back, rb);
    same &= memcmp(back, w + g * rb, 16 * rb) == 0;
  }
  CHECK(same);
  // a permutation within each group: byte histograms equal (Q5_0, Q5_1,
  // Q5_K, Q6_K, Q3_K: their bits move within and between bytes, so the
  // count of set bits)
  const int q5 = type == WK_Q5_0 || type == WK_Q5_1 || type == WK_Q5_K || type == WK_Q6_K ||
                 type == WK_Q3_K;
  for (int g = 0; g + 16 <= rows; g += 16) {
    size_t ha[256] = {0}, hb[256] = {0}, bits_a = 0, bits_b = 0;
    for (size_t i = 0; i < 16 * rb; i++) {
      ha[w[g * rb + i]]++, hb[p[g * rb + i]]++;
      bits_a += (size_t)__builtin_popcount(w[g * rb + i]);
      bits_b += (size_t)__builtin_popcount(p[g * rb + i]);
    }
    CHECK(q5 ? bits_a == bits_b : memcmp(ha, hb, sizeof ha) == 0);
  }
  free(back);
}

// Runs the packed kernel for nt tokens into y (ys floats a token, MAXT
// tokens, NaN first); 1 when the padding (tokens past nt, rows past rows)
// stayed NaN.
static int run_packed(wk_gemm_fn pg, const uint8_t *p, size_t rb, int64_t n, int rows,
                      const uint8_t *xq, size_t xb, int nt, float *y, size_t ys) {
  for (size_t i = 0; i < ys * MAXT; i++) y[i] = NAN;
  pg(p, rb, n, rows, xq, xb, nt, y, ys);
  int pad = 1;
  for (int t = 0; t < MAXT; t++)
    for (size_t r = 0; r < ys; r++)
      if (t >= nt || r >= (size_t)rows) pad &= isnan(y[t * ys + r]);
  return pad;
}

// The packed kernel against vec_dot on the original rows, bit for bit.
static void check_kernel(const wk_kernel *kr, wk_gemm_fn pg, int64_t n, int rows,
                         const uint8_t *w, const uint8_t *p, size_t rb, const uint8_t *xq,
                         size_t xb) {
  const size_t ys = rows + 3;
  float *y = malloc(sizeof(float) * ys * MAXT);
  for (int nt = 1; nt <= MAXT; nt++) {
    CHECK(run_packed(pg, p, rb, n, rows, xq, xb, nt, y, ys));
    int same = 1;
    for (int t = 0; t < nt; t++)
      for (size_t r = 0; r < (size_t)rows; r++) {
        const float v = kr->vec_dot(n, w + r * rb, xq + t * xb);
        if (is_k(kr->type)) {
          const double tol = 2e-6 * abs_dot(kr->type, kr->act, w + r * rb, xq + t * xb, n) + 1e-30;
          same &= fabs((double)v - y[t * ys + r]) <= tol;
        } else {
          same &= memcmp(&v, &y[t * ys + r], 4) == 0;
        }
      }
    if (!same) fprintf(stderr, "type %d n %ld rows %d tokens %d\n", kr->type, (long)n, rows, nt);
    CHECK(same);
  }
  free(y);
}

// Every block: the largest codes (Q8_0: -128, IQ4_NL: nibble 0, -127; Q4_K,
// Q5_K: 15, 31 with scales and mins 63; Q2_K: 3 with scales and mins 15;
// Q6_K: 63 with scales -128; IQ4_XS:
// nibble 0, -127, with scales -32; Q3_K: scales -32 with codes 0 (value -4)
// in even super-blocks, 7 (value 3) in odd ones) with d = m = 1,
// so every product has the same sign as the activations below.
static void extreme_rows(int type, int64_t n, int rows, uint8_t *w, size_t rb) {
  const uint16_t one = wk_f32_to_f16(1.0f);
  const int blk = is_k(type) ? 256 : 32;
  const size_t bytes = wk_row_size(type, blk);
  for (int r = 0; r < rows; r++)
    for (int64_t b = 0; b < n / blk; b++) {
      uint8_t *blk_p = w + r * rb + b * bytes;
      if (type == WK_Q4_K || type == WK_Q5_K) {  // codes 15 / 31, scales and mins 63, d = dmin = 1
        memset(blk_p, 0xff, type == WK_Q4_K ? 144 : 176);
        memcpy(blk_p, &one, 2);
        memcpy(blk_p + 2, &one, 2);
        continue;
      }
      if (type == WK_Q2_K) {  // scales and mins 15, codes 3, d = dmin = 1
        memset(blk_p, 0xff, 80);
        memcpy(blk_p + 80, &one, 2);
        memcpy(blk_p + 82, &one, 2);
        continue;
      }
      if (type == WK_IQ4_XS) {  // nibble 0 (value -127), scales 0 (-32), d = 1
        memset(blk_p, 0, 136);
        memcpy(blk_p, &one, 2);
        continue;
      }
      if (type == WK_Q3_K) {  // codes 0 / 7, scales 0 (-32), d = 1
        memset(blk_p, b % 2 ? 0xff : 0x00, 96);
        memset(blk_p + 96, 0, 12);
        memcpy(blk_p + 108, &one, 2);
        continue;
      }
      if (type == WK_Q6_K) {  // codes 63 (value 31), scales -128, d = 1
        memset(blk_p, 0xff, 192);
        memset(blk_p + 192, 0x80, 16);
        memcpy(blk_p + 208, &one, 2);
        continue;
      }
      uint8_t *blk = blk_p;
      memset(blk, type == WK_Q8_0 ? 0x80 : type == WK_IQ4_NL ? 0x00 : 0xff, bytes);
      memcpy(blk, &one, 2);
      if (type == WK_Q4_1 || type == WK_Q5_1) memcpy(blk + 2, &one, 2);
    }
}

static void check_type(int type, uint64_t *seed) {
  wk_kernel kr;  // the decode kernels of the packed kernel's activations
  const wk_gemm_fn pg = wk_pack16_gemm(type);
  // (no packed kernel at this level, as Q2_K's below AVX-512 VNNI: the layout
  // alone, on the 16-bit activations)
  if (wk_pack16_pick(type, WK_LEVEL_AUTO, &kr) != WICK_OK)
    CHECK(!pg && wk_act16_pick(type, WK_LEVEL_AUTO, &kr) == WICK_OK);
  const int64_t *sizes = is_k(type) ? k_sizes_k : k_sizes;
  const size_t n_sizes = is_k(type) ? sizeof k_sizes_k / sizeof k_sizes_k[0]
                                    : sizeof k_sizes / sizeof k_sizes[0];
  for (size_t si = 0; si < n_sizes; si++) {
    const int64_t n = sizes[si];
    const size_t rb = wk_row_size(type, n);
    const size_t xb = kr.act == WK_ACT_A16 || kr.act == WK_ACT_A16K
                          ? wk_act16_row_size(kr.act, n)
                          : wk_act_row_size(kr.act, n);
    uint8_t *w = malloc(rb * MAXROWS), *p = malloc(rb * MAXROWS), *xq = malloc(xb * MAXT);
    float *x = malloc(sizeof(float) * n);
    for (int r = 0; r < MAXROWS; r++) {
      fill_random(seed, x, n, 0);
      CHECK(wk_quantize_row(type, x, w + r * rb, n) == WICK_OK);
    }
    for (int t = 0; t < MAXT; t++) {
      fill_random(seed, x, n, 1);
      kr.quantize_act(x, xq + t * xb, n);
    }
    check_layout(type, n, MAXROWS, w, p, rb);
    if (pg)
      for (int rows = 16; rows <= MAXROWS; rows += 16)
        check_kernel(&kr, pg, n, rows, w, p, rb, xq, xb);
    // extreme blocks against activations of the weights' sign at full range
    extreme_rows(type, n, 16, w, rb);
    const int blk = is_k(type) ? 256 : 32;
    for (int64_t i = 0; i < n; i++) {
      float wv[256];
      CHECK(wk_dequantize_row(type, w + (i / blk) * wk_row_size(type, blk), wv, blk) == WICK_OK);
      x[i] = wv[i % blk] > 0 ? 1.0f : -1.0f;
    }
    kr.quantize_act(x, xq, n);
    check_layout(type, n, 16, w, p, rb);
    if (pg) check_kernel(&kr, pg, n, 16, w, p, rb, xq, xb);
    free(w), free(p), free(xq), free(x);
  }
}

// ---- the float types: F16, BF16, FP8 against f32 activations ---------------

static const int k_float_types[] = {WK_F16, WK_BF16, WK_FP8_E4M3, WK_FP8_E5M2};
static const int64_t k_sizes_f[] = {128, 640, 4096};

static int is_fp8(int type) { return type == WK_FP8_E4M3 || type == WK_FP8_E5M2; }

// Row r: random values through the quantizer (even r), or random codes
// (odd r: every finite F16 code, every FP8 code but the non-finite ones;
// BF16 exponents 100..140, so that products stay finite).
static void float_row(int type, uint64_t *seed, int r, int64_t n, float *x, uint8_t *w) {
  if (r % 2 == 0) {
    fill_random(seed, x, n, 1);
    CHECK(wk_quantize_row(type, x, w, n) == WICK_OK);
    return;
  }
  if (is_fp8(type)) {
    for (int64_t b = 0; b < n / 128; b++) {
      uint8_t *blk = w + 132 * b;
      const float sc = (float)(0.001 + rng_uniform(seed));
      memcpy(blk, &sc, 4);
      for (int i = 0; i < 128; i++) {
        uint8_t c;
        do c = (uint8_t)(rng_next(seed) >> 24);
        while (type == WK_FP8_E4M3 ? (c & 0x7f) == 0x7f : (c & 0x7c) == 0x7c);
        blk[4 + i] = c;
      }
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    if (type == WK_F16) {
      do h = (uint16_t)(rng_next(seed) >> 16);
      while ((h & 0x7c00) == 0x7c00);
    } else {
      const uint16_t e = (uint16_t)(100 + rng_next(seed) % 41);
      h = (uint16_t)((rng_next(seed) >> 48 & 0x807f) | e << 7);
    }
    memcpy(w + 2 * i, &h, 2);
  }
}

// The packed kernel against sum w x in f64 (the weights by the dequantizer),
// within 1e-5 of sum |w x|, for 1..9 tokens; y's padding untouched.
static void check_float_kernel(int type, wk_gemm_fn pg, int64_t n, int rows, const uint8_t *w,
                               const uint8_t *p, size_t rb, const float *x, const uint8_t *xq,
                               size_t xb) {
  const size_t ys = rows + 3;
  float *y = malloc(sizeof(float) * ys * MAXT), *wd = malloc(sizeof(float) * n);
  for (int nt = 1; nt <= MAXT; nt++) {
    CHECK(run_packed(pg, p, rb, n, rows, xq, xb, nt, y, ys));
    int same = 1;
    for (int t = 0; t < nt; t++)
      for (size_t r = 0; r < (size_t)rows; r++) {
        CHECK(wk_dequantize_row(type, w + r * rb, wd, n) == WICK_OK);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) {
          ref += (double)wd[i] * x[t * n + i];
          mag += fabs((double)wd[i] * x[t * n + i]);
        }
        same &= fabs(ref - y[t * ys + r]) <= 1e-5 * mag + 1e-30;
      }
    if (!same) fprintf(stderr, "type %d n %ld rows %d tokens %d\n", type, (long)n, rows, nt);
    CHECK(same);
  }
  free(y), free(wd);
}

static void check_float_type(int type, uint64_t *seed) {
  wk_kernel kr;
  CHECK(wk_kernel_pick(type, WK_LEVEL_AUTO, &kr) == WICK_OK);
  const wk_gemm_fn pg = wk_pack16_gemm(type);
  for (size_t si = 0; si < sizeof k_sizes_f / sizeof k_sizes_f[0]; si++) {
    const int64_t n = k_sizes_f[si];
    CHECK(wk_pack16_fits(type, n));
    const size_t rb = wk_row_size(type, n), xb = wk_act_row_size(kr.act, n);
    uint8_t *w = malloc(rb * MAXROWS), *p = malloc(rb * MAXROWS), *xq = malloc(xb * MAXT);
    float *x = malloc(sizeof(float) * n * MAXT);
    for (int r = 0; r < MAXROWS; r++) float_row(type, seed, r, n, x, w + r * rb);
    fill_random(seed, x, n * MAXT, 1);
    for (int t = 0; t < MAXT; t++) kr.quantize_act(x + t * n, xq + t * xb, n);
    check_layout(type, n, MAXROWS, w, p, rb);
    if (pg)
      for (int rows = 16; rows <= MAXROWS; rows += 16)
        check_float_kernel(type, pg, n, rows, w, p, rb, x, xq, xb);
    free(w), free(p), free(xq), free(x);
  }
  CHECK(!wk_pack16_fits(type, is_fp8(type) ? 192 : 48));  // not a whole block
}

// Which types have a packed kernel at the CPU's level (pack16.c's pick).
static void check_pick(void) {
  const int level = wk_kernel_best_level();
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    const int t = k_types[i];
    const int avx2 = t == WK_Q4_0 || t == WK_Q4_1 || t == WK_Q5_0 || t == WK_Q5_1 ||
                     t == WK_IQ4_NL || t == WK_Q4_K || t == WK_Q5_K || t == WK_Q6_K;
    if (level == WK_LEVEL_AVX2) CHECK(!wk_pack16_gemm(t) == !avx2);
    if (level == WK_LEVEL_AVX512) CHECK(wk_pack16_gemm(t) != NULL);
    if (level < WK_LEVEL_AVX2 || level == WK_LEVEL_AVX512BW) CHECK(!wk_pack16_gemm(t));
    // another level than the CPU's: that level's kernel, none above the CPU's
    CHECK(wk_pack16_gemm_at(t, level) == wk_pack16_gemm(t));
    if (level > WK_LEVEL_AVX2) CHECK(!wk_pack16_gemm_at(t, WK_LEVEL_AVX2) == !avx2);
    if (level < WK_LEVEL_AVX512) CHECK(!wk_pack16_gemm_at(t, WK_LEVEL_AVX512));
  }
}

int main(void) {
  uint64_t seed = 0x9ac16;
  check_pick();
  if (!wk_pack16_gemm(WK_Q4_0))
    printf("skipped: packed kernels (none at level %s); layout checks run\n",
           wk_kernel_level_name(wk_kernel_best_level()));
  else if (!wk_pack16_gemm(WK_Q4_K))
    printf("skipped: packed kernels of the K-quants, Q8_0 and the float types (none at level "
           "%s)\n", wk_kernel_level_name(wk_kernel_best_level()));
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) check_type(k_types[i], &seed);
  for (size_t i = 0; i < sizeof k_float_types / sizeof k_float_types[0]; i++)
    check_float_type(k_float_types[i], &seed);
  if (g_failures) {
    fprintf(stderr, "%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("test_pack16: ok\n");
  return 0;
}
