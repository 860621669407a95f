// Reference quant routines, checked from C:
//  - known-answer blocks built by hand from the layouts (Q4_0, Q4_1, Q5_0,
//    Q8_0, Q4_K, IQ4_NL, FP8);
//  - FP8 decoders against independent definitions (E5M2 as the top byte of an
//    IEEE half, E4M3 against the OCP formula) and encode(decode(c)) == c;
//  - per type: quantize/dequantize round-trip error bound on Gaussian rows,
//    dot == sum(dequant * x), poisoned output buffers fully overwritten and
//    nothing written past the row;
//  - status codes for unsupported types, bad sizes and non-finite input.
// The bit-exact comparison against the gguf package is tests/python/test_quant.py.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fp.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"
#include "test_util.h"



// ---- known answers ---------------------------------------------------------

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void check_row(int type, const uint8_t *blk, int n, const float *want) {
  float got[256];
  CHECK(wk_dequantize_row(type, blk, got, n) == WICK_OK);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += got[i] != want[i];
  if (bad) fprintf(stderr, "%s: %d of %d known values differ\n", wk_type_get(type)->name, bad, n);
  CHECK(bad == 0);
}

static void test_known_answers(void) {
  uint8_t b[256];
  float want[256];
  // q4_0: d = 0.5, byte j = j | (15 - j) << 4
  put16(b, 0x3800);
  for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
  for (int j = 0; j < 16; j++) want[j] = 0.5f * (j - 8), want[j + 16] = 0.5f * (7 - j);
  check_row(WK_Q4_0, b, 32, want);
  // q4_1: d = 0.25, m = -1, same nibbles
  put16(b, 0x3400);
  put16(b + 2, 0xbc00);
  for (int j = 0; j < 16; j++) b[4 + j] = (uint8_t)(j | (15 - j) << 4);
  for (int j = 0; j < 16; j++) want[j] = 0.25f * j - 1, want[j + 16] = 0.25f * (15 - j) - 1;
  check_row(WK_Q4_1, b, 32, want);
  // q5_0: d = 1, high bits set for values 16..31, byte j = j | j << 4
  put16(b, 0x3c00);
  b[2] = b[3] = 0, b[4] = b[5] = 0xff;
  for (int j = 0; j < 16; j++) b[6 + j] = (uint8_t)(j | j << 4);
  for (int j = 0; j < 16; j++) want[j] = (float)(j - 16), want[j + 16] = (float)j;
  check_row(WK_Q5_0, b, 32, want);
  // q8_0: d = 0.125, q = j - 16
  put16(b, 0x3000);
  for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j - 16), want[j] = 0.125f * (j - 16);
  check_row(WK_Q8_0, b, 32, want);
  // iq4_nl: d = 2, byte j = j | (15 - j) << 4
  static const int lv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  put16(b, 0x4000);
  for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
  for (int j = 0; j < 16; j++) want[j] = 2.0f * lv[j], want[j + 16] = 2.0f * lv[15 - j];
  check_row(WK_IQ4_NL, b, 32, want);
  // q4_k: d = 1, dmin = 0.5, sub-block scales 10 + 7j and minimums 60 - 5j
  // (6 bits each: j < 4 in bytes j / j + 4, j >= 4 split into a nibble of byte
  // j + 4 and the top two bits of bytes j - 4 / j), every code byte 0x21.
  int sc[8], mn[8];
  for (int j = 0; j < 8; j++) sc[j] = 10 + 7 * j, mn[j] = 60 - 5 * j;
  put16(b, 0x3c00);
  put16(b + 2, 0x3800);
  for (int j = 0; j < 4; j++) {
    b[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    b[4 + j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
    b[4 + j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
  memset(b + 16, 0x21, 128);
  for (int c = 0; c < 4; c++)
    for (int l = 0; l < 32; l++) {
      want[64 * c + l] = (float)sc[2 * c] * 1 - 0.5f * mn[2 * c];
      want[64 * c + 32 + l] = (float)sc[2 * c + 1] * 2 - 0.5f * mn[2 * c + 1];
    }
  check_row(WK_Q4_K, b, 256, want);
  // fp8: scale 0.5, codes 0x38 (1.0), 0xb8 (-1.0), 0x01 (2^-9), 0x7e (448)
  uint8_t f[132] = {0};
  memcpy(f, (uint8_t[]){0x00, 0x00, 0x00, 0x3f}, 4);  // 0.5f little-endian
  f[4] = 0x38, f[5] = 0xb8, f[6] = 0x01, f[7] = 0x7e;
  float fw[128] = {0.5f, -0.5f, 0x1p-10f, 224.0f};
  check_row(WK_FP8_E4M3, f, 128, fw);
  f[4] = 0x3c, f[5] = 0xbc, f[6] = 0x01, f[7] = 0x7b;  // 1, -1, 2^-16, 57344
  float fw5[128] = {0.5f, -0.5f, 0x1p-17f, 28672.0f};
  check_row(WK_FP8_E5M2, f, 128, fw5);
}

// ---- FP8 element codes -----------------------------------------------------

static void test_fp8_codes(void) {
  int bad4 = 0, bad5 = 0, trip = 0;
  for (int c = 0; c < 256; c++) {
    // E5M2 code c is the IEEE half c << 8.
    float h = wk_f16_to_f32((uint16_t)(c << 8)), v5 = wk_fp8_e5m2_to_f32((uint8_t)c);
    bad5 += !(isnan(h) ? isnan(v5) : h == v5 && signbit(h) == signbit(v5));
    // E4M3: (1 + m/8) * 2^(e-7) for e > 0, m/8 * 2^-6 for e = 0 (0x7f/0xff: 480).
    int e = (c >> 3) & 15, m = c & 7;
    double a = e ? (1 + m / 8.0) * pow(2, e - 7) : m / 8.0 * pow(2, -6);
    float v4 = wk_fp8_e4m3_to_f32((uint8_t)c);
    bad4 += v4 != (float)(c & 0x80 ? -a : a) || !!signbit(v4) != (c >= 0x80);
    // encode(decode(c)) == c for every finite code (E4M3 0x7f saturates to 0x7e)
    if ((c & 0x7f) != 0x7f) trip += wk_f32_to_fp8_e4m3(v4) != c;
    if ((c & 0x7c) != 0x7c) trip += wk_f32_to_fp8_e5m2(v5) != c;
  }
  CHECK(bad4 == 0);
  CHECK(bad5 == 0);
  CHECK(trip == 0);
  CHECK(wk_fp8_e4m3_to_f32(0x7f) == 480.0f);
  CHECK(wk_f32_to_fp8_e4m3(1000.0f) == 0x7e && wk_f32_to_fp8_e4m3(-INFINITY) == 0xfe);
  CHECK(wk_f32_to_fp8_e4m3(1.0625f) == 0x38);  // tie between 1 and 1.125 -> even
  CHECK(wk_f32_to_fp8_e4m3(1.1875f) == 0x3a);  // tie between 1.125 and 1.25 -> even
  CHECK(wk_f32_to_fp8_e5m2(1e6f) == 0x7c && isinf(wk_fp8_e5m2_to_f32(0x7c)));
  CHECK(isnan(wk_fp8_e5m2_to_f32(wk_f32_to_fp8_e5m2(NAN))));
}

// ---- per-type round trip, dot, buffers --------------------------------------

typedef struct {
  int type;
  double rmse;  // bound on RMS(error) / RMS(x) for Gaussian rows
} type_case;

// Bounds as in tests/python/test_quant.py (uniform-quantizer estimates + ~25%).
static const type_case k_cases[] = {
    {WK_F32, 0.0},     {WK_F16, 5e-4},     {WK_BF16, 4e-3},      {WK_Q4_0, 0.12},
    {WK_Q4_1, 0.11},   {WK_Q5_0, 0.06},    {WK_Q5_1, 0.055},     {WK_Q8_0, 0.008},
    {WK_Q2_K, 0.40},   {WK_Q3_K, 0.20},    {WK_Q4_K, 0.10},      {WK_Q5_K, 0.05},
    {WK_Q6_K, 0.025},  {WK_Q8_K, 0.01},    {WK_IQ4_NL, 0.11},    {WK_IQ4_XS, 0.11},
    {WK_FP8_E4M3, 0.04}, {WK_FP8_E5M2, 0.08},
};

enum { N = 2048, ROWS = 24, PAD = 64 };

static void test_type(const type_case *tc, uint64_t *rng) {
  const wk_type_info *ti = wk_type_get(tc->type);
  size_t bytes = wk_row_size(tc->type, N);
  uint8_t *q = malloc(bytes + PAD), *q2 = malloc(bytes + PAD);
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * (N + PAD));
  float *a = malloc(sizeof(float) * N);
  if (!q || !q2 || !x || !y || !a) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  CHECK(wk_quant_supported(tc->type));
  double worst = 0, worst_dot = 0;
  for (int r = 0; r < ROWS; r++) {
    double scale = pow(10, -3 + 6 * rng_uniform(rng));
    double sx2 = 0;
    for (int i = 0; i < N; i++) x[i] = (float)(rng_normal(rng) * scale), sx2 += (double)x[i] * x[i];
    for (int i = 0; i < N; i++) a[i] = (float)rng_normal(rng);
    CHECK(sx2 > 0);
    // quantize into two buffers poisoned differently: equal results mean
    // every byte was written; the tail must stay untouched
    memset(q, 0x00, bytes + PAD);
    memset(q2, 0xff, bytes + PAD);
    CHECK(wk_quantize_row(tc->type, x, q, N) == WICK_OK);
    CHECK(wk_quantize_row(tc->type, x, q2, N) == WICK_OK);
    CHECK(memcmp(q, q2, bytes) == 0);
    int tail = 0;
    for (int i = 0; i < PAD; i++) tail += q[bytes + i] != 0x00 || q2[bytes + i] != 0xff;
    CHECK(tail == 0);
    // dequantize into a NaN-poisoned buffer
    for (int i = 0; i < N + PAD; i++) y[i] = NAN;
    CHECK(wk_dequantize_row(tc->type, q, y, N) == WICK_OK);
    double se = 0, dot = 0, mag = 0;
    int nonfinite = 0;
    for (int i = 0; i < N; i++) {
      nonfinite += !isfinite(y[i]);
      se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
      dot += (double)y[i] * a[i];
      mag += fabs((double)y[i] * a[i]);
    }
    for (int i = N; i < N + PAD; i++) nonfinite += !isnan(y[i]) ? 1000 : 0;
    CHECK(nonfinite == 0);
    double rel = sqrt(se / sx2);
    worst = rel > worst ? rel : worst;
    double got = wk_dot_row(tc->type, q, a, N);
    double derr = fabs(got - dot) / (mag > 0 ? mag : 1);
    worst_dot = derr > worst_dot ? derr : worst_dot;
  }
  printf("%-9s block %3d  %3d B  rel RMSE worst %.5f (bound %.3f)  dot rel err %.1e\n",
         ti->name, ti->block, ti->bytes, worst, tc->rmse, worst_dot);
  if (worst > tc->rmse) fprintf(stderr, "%s: error %.5f above bound %.5f\n", ti->name, worst, tc->rmse);
  CHECK(worst <= tc->rmse);
  CHECK(worst_dot <= 1e-6);
  free(q), free(q2), free(x), free(y), free(a);
}

// The type table's "computable" flag and the dispatch table agree.
static void test_table_agrees(void) {
  int n = 0;
  for (int t = -2; t < 1100; t++) {
    const wk_type_info *ti = wk_type_get(t);
    bool computable = ti && ti->computable;
    CHECK(computable == wk_quant_supported(t));
    n += computable;
  }
  CHECK(n == (int)(sizeof k_cases / sizeof k_cases[0]));
}

static void test_statuses(void) {
  uint8_t buf[512] = {0};
  float x[256], y[256];
  for (int i = 0; i < 256; i++) x[i] = (float)i - 100.5f;
  static const int unsupported[] = {WK_Q8_1, WK_IQ2_XXS, WK_IQ1_M, WK_TQ2_0, WK_MXFP4, WK_I32, 4, 9999, -1};
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
    int t = unsupported[i];
    CHECK(!wk_quant_supported(t));
    CHECK(wk_dequantize_row(t, buf, y, 256) == WICK_ERR_UNSUPPORTED);
    CHECK(wk_quantize_row(t, x, buf, 256) == WICK_ERR_UNSUPPORTED);
    CHECK(isnan(wk_dot_row(t, buf, x, 256)));
  }
  CHECK(wk_dequantize_row(WK_Q4_K, buf, y, 128) == WICK_ERR_INVALID);
  CHECK(wk_quantize_row(WK_Q8_0, x, buf, 33) == WICK_ERR_INVALID);
  CHECK(wk_dequantize_row(WK_Q8_0, NULL, y, 32) == WICK_ERR_INVALID);
  CHECK(wk_dequantize_row(WK_Q8_0, NULL, NULL, 0) == WICK_OK);
  CHECK(isnan(wk_dot_row(WK_Q4_0, buf, x, -32)));
  x[7] = INFINITY;
  CHECK(wk_quantize_row(WK_Q4_K, x, buf, 256) == WICK_ERR_INVALID);
  CHECK(wk_quantize_row(WK_F16, x, buf, 256) == WICK_OK);  // float types carry inf
  x[7] = NAN;
  CHECK(wk_quantize_row(WK_FP8_E4M3, x, buf, 128) == WICK_ERR_INVALID);
}

int main(void) {
  uint64_t rng = 0x5eed0fa11ull;
  test_known_answers();
  test_fp8_codes();
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) test_type(&k_cases[i], &rng);
  test_table_agrees();
  test_statuses();
  if (g_failures) {
    fprintf(stderr, "test_quant: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("test_quant: all checks passed\n");
  return 0;
}
