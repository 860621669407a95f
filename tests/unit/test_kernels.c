// CPU matrix kernels (src/backend/cpu/kernels) against the reference quant
// routines (src/quant), for every weight type and every kernel level this CPU
// runs (scalar, AVX2, and AVX-512 where present), forced through the table:
//  - vec_dot vs wk_dot_row on the activations dequantized from xq (isolates
//    the weight math): |diff| <= 2e-6 * sum|w x| (float rounding only);
//  - vec_dot vs wk_dot_row on the original f32 activations: |diff| <= the
//    activation rounding bound sum_i |w_i| * d_a(i) / 2 (+ 2e-6 * sum|w x|),
//    since 8-bit rounding moves each activation by at most half a step;
//  - gemm vs a vec_dot loop: bit-identical, on 9 rows x 7 tokens with a
//    padded, NaN-poisoned y whose padding must stay untouched, and on 1 to 51
//    rows x 1 to 37 tokens (every tile shape and edge, rows split in two
//    calls as thread chunks are);
//  - quantize_act: written exactly wk_act_row_size bytes (poisoned tail), the
//    same bytes as the scalar converter, each activation within half a step
//    of the input, block sums right.
// Sizes include LLM row lengths (576 .. 14336) wherever the block divides, and
// 16640 (65 super-blocks: past the 64 whose activations the AVX-512 Q2_K /
// Q3_K products lay out once per call, kernels_avx512_k.c).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/kernels.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"
#include "test_util.h"

static const int k_types[] = {
    WK_F32,  WK_F16,  WK_BF16, WK_Q4_0, WK_Q4_1,   WK_Q5_0,   WK_Q5_1,     WK_Q8_0,     WK_Q2_K,
    WK_Q3_K, WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_IQ4_NL, WK_IQ4_XS, WK_FP8_E4M3, WK_FP8_E5M2,
};
static const int64_t k_sizes[] = {100, 256, 576, 640, 1536, 2048, 4096, 14336, 16640};

// The test's own reading of the activation formats (kernels.h layouts).
static void act_dequant(int act, const void *xq, float *x, int64_t n, float *half_step) {
  if (act == WK_ACT_F32 || act == WK_ACT_F32S) {
    memcpy(x, xq, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
      if (act == WK_ACT_F32S) x[i] /= WK_ACT_F32S_SCALE;  // a power of two: exact
      half_step[i] = 0;
    }
    return;
  }
  int blk = act == WK_ACT_Q8 ? 32 : 256;
  for (int64_t b = 0; b < n / blk; b++) {
    float d;
    const int8_t *q;
    if (act == WK_ACT_Q8) {
      const wk_act_q8 *a = (const wk_act_q8 *)xq + b;
      d = a->d, q = a->q;
      int s = 0;
      for (int i = 0; i < 32; i++) s += q[i];
      CHECK(a->sum == s);
    } else {
      const wk_act_q8k *a = (const wk_act_q8k *)xq + b;
      d = a->d, q = a->q;
      for (int j = 0; j < 16; j++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += q[16 * j + i];
        CHECK(a->bsum[j] == s);
      }
    }
    for (int i = 0; i < blk; i++) {
      x[b * blk + i] = d * (float)q[i];
      half_step[b * blk + i] = d / 2;
    }
  }
}

typedef struct {
  double worst_weight;  // max |diff| / tolerance, weight math only
  double worst_act;     // max |diff| / tolerance, vs f32 activations
  int checked;
} stats;

enum { ROWS = 9, TOKENS = 7, YPAD = 3 };

// One type, one level, one size: vec_dot against the references, gemm
// against vec_dot.
static void check_size(const wk_kernel *kr, int64_t n, uint64_t *seed, stats *st) {
  int type = kr->type;
  size_t rb = wk_row_size(type, n), xb = wk_act_row_size(kr->act, n);
  uint8_t *w = malloc(rb * ROWS);
  uint8_t *xq = malloc((xb + 64) * TOKENS);
  float *x = malloc(sizeof(float) * n * TOKENS), *xd = malloc(sizeof(float) * n);
  float *hs = malloc(sizeof(float) * n), *wd = malloc(sizeof(float) * n);
  float *tmp = malloc(sizeof(float) * n);
  float dots[TOKENS][ROWS];
  for (int r = 0; r < ROWS; r++) {
    fill_random(seed, tmp, n, 0);
    CHECK(wk_quantize_row(type, tmp, w + r * rb, n) == WICK_OK);
  }
  memset(xq, 0xa5, (xb + 64) * TOKENS);
  wk_kernel ks;  // the scalar converter must write the same bytes
  CHECK(wk_kernel_pick(type, WK_LEVEL_SCALAR, &ks) == WICK_OK);
  uint8_t *xs = malloc(xb + 1);
  for (int t = 0; t < TOKENS; t++) {
    fill_random(seed, x + t * n, n, 0);
    kr->quantize_act(x + t * n, xq + t * (xb + 64), n);
    int intact = 1;
    for (int i = 0; i < 64; i++) intact &= xq[t * (xb + 64) + xb + i] == 0xa5;
    CHECK(intact);
    ks.quantize_act(x + t * n, xs, n);
    CHECK(memcmp(xs, xq + t * (xb + 64), xb) == 0);
  }
  free(xs);
  for (int t = 0; t < TOKENS; t++) {
    const uint8_t *xt = xq + t * (xb + 64);
    act_dequant(kr->act, xt, xd, n, hs);
    for (int i = 0; i < n; i++) CHECK(fabsf(xd[i] - x[t * n + i]) <= hs[i] * 1.0001f + 1e-30f);
    for (int r = 0; r < ROWS; r++) {
      const uint8_t *wr = w + r * rb;
      CHECK(wk_dequantize_row(type, wr, wd, n) == WICK_OK);
      double mag = 0, act_bound = 0;
      for (int64_t i = 0; i < n; i++) {
        mag += fabs((double)wd[i] * xd[i]) + fabs((double)wd[i] * x[t * n + i]);
        act_bound += fabs((double)wd[i]) * hs[i];
      }
      float v = kr->vec_dot(n, wr, xt);
      dots[t][r] = v;
      double tol_w = 2e-6 * mag + 1e-30, tol_a = act_bound * 1.0001 + 2e-6 * mag + 1e-30;
      double ew = fabs((double)v - wk_dot_row(type, wr, xd, n));
      double ea = fabs((double)v - wk_dot_row(type, wr, x + t * n, n));
      if (!(ew <= tol_w) || !(ea <= tol_a))
        fprintf(stderr, "%s %s n=%lld r=%d t=%d: dot %.9g, weight err %.3g (tol %.3g), "
                "act err %.3g (tol %.3g)\n", wk_type_get(type)->name,
                wk_kernel_level_name(kr->level), (long long)n, r, t, v, ew, tol_w, ea, tol_a);
      CHECK(ew <= tol_w);
      CHECK(ea <= tol_a);
      st->worst_weight = fmax(st->worst_weight, ew / tol_w);
      st->worst_act = fmax(st->worst_act, ea / tol_a);
      st->checked++;
    }
  }
  // gemm on all rows and tokens, then on a 5-row slice with many tokens.
  size_t ys = ROWS + YPAD;
  float *y = malloc(sizeof(float) * ys * TOKENS);
  for (size_t i = 0; i < ys * TOKENS; i++) y[i] = NAN;
  kr->gemm(w, rb, n, ROWS, xq, xb + 64, TOKENS, y, ys);
  int same = 1, pad_ok = 1;
  for (int t = 0; t < TOKENS; t++) {
    for (int r = 0; r < ROWS; r++) same &= memcmp(&y[t * ys + r], &dots[t][r], 4) == 0;
    for (int r = ROWS; r < (int)ys; r++) pad_ok &= isnan(y[t * ys + r]);
  }
  if (!same) fprintf(stderr, "%s %s n=%lld: gemm differs from vec_dot\n",
                     wk_type_get(type)->name, wk_kernel_level_name(kr->level), (long long)n);
  CHECK(same);
  CHECK(pad_ok);
  free(y);
  free(w);
  free(xq);
  free(x);
  free(xd);
  free(hs);
  free(wd);
  free(tmp);
}

// gemm against vec_dot, bit for bit, over row and token counts that reach
// every tile shape and edge (8-, 4- and 3-row tiles, leftover rows, token
// pairs and quads, one token, more tokens than one chunk of 32), with the
// rows split at an odd offset as the thread chunks of the caller do.
static void check_gemm_shapes(const wk_kernel *kr, uint64_t *seed) {
  static const int k_rows[] = {1, 5, 15, 27, 51};
  static const int k_tokens[] = {1, 2, 3, 7, 37};
  const int max_rows = 51, max_tokens = 37;
  int64_t n = 512;
  size_t rb = wk_row_size(kr->type, n), xb = wk_act_row_size(kr->act, n);
  uint8_t *w = malloc(rb * max_rows), *xq = malloc(xb * max_tokens);
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * max_rows * max_tokens);
  for (int r = 0; r < max_rows; r++) {
    fill_random(seed, x, n, 0);
    CHECK(wk_quantize_row(kr->type, x, w + r * rb, n) == WICK_OK);
  }
  for (int t = 0; t < max_tokens; t++) {
    fill_random(seed, x, n, 0);
    kr->quantize_act(x, xq + t * xb, n);
  }
  int same = 1;
  for (size_t ri = 0; ri < sizeof k_rows / sizeof k_rows[0] && same; ri++)
    for (size_t ti = 0; ti < sizeof k_tokens / sizeof k_tokens[0] && same; ti++) {
      int rows = k_rows[ri], tokens = k_tokens[ti], r0 = rows > 3 ? 3 : 0;
      for (int i = 0; i < max_rows * max_tokens; i++) y[i] = NAN;
      // rows [0, r0) and [r0, rows) in two calls, y stride max_rows
      kr->gemm(w, rb, n, r0, xq, xb, tokens, y, max_rows);
      kr->gemm(w + r0 * rb, rb, n, rows - r0, xq, xb, tokens, y + r0, max_rows);
      for (int t = 0; t < tokens; t++)
        for (int r = 0; r < max_rows; r++) {
          float want = kr->vec_dot(n, w + r * rb, xq + t * xb);
          float got = y[t * max_rows + r];
          same &= r < rows ? memcmp(&want, &got, 4) == 0 : isnan(got);
        }
      if (!same)
        fprintf(stderr, "%s %s: gemm differs from vec_dot (rows %d, tokens %d)\n",
                wk_type_get(kr->type)->name, wk_kernel_level_name(kr->level), rows, tokens);
    }
  CHECK(same);
  free(w);
  free(xq);
  free(x);
  free(y);
}

int main(void) {
  int best = wk_kernel_best_level();
  printf("kernel levels on this CPU: scalar..%s\n", wk_kernel_level_name(best));
  if (best < WK_LEVEL_AVX512)
    printf("skipped: the AVX-512 level's kernels (this CPU lacks AVX-512 F/BW/VL + VNNI)\n");
  else if (!__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni"))
    printf("skipped: the AVX-512 level's 512-bit Q2_K / Q3_K kernels (no VBMI or GFNI; the "
           "level's 256-bit ones are tested)\n");
  CHECK(wk_act_row_size(WK_ACT_Q8, 64) == 2 * sizeof(wk_act_q8));
  CHECK(wk_act_row_size(WK_ACT_Q8, 48) == 0);
  CHECK(wk_act_row_size(WK_ACT_Q8K, 512) == 2 * sizeof(wk_act_q8k));
  CHECK(wk_act_row_size(WK_ACT_F32, 7) == 28);
  CHECK(wk_act_row_size(WK_ACT_F32S, 7) == 28);
  wk_kernel kr;
  CHECK(wk_kernel_pick(WK_Q8_K, WK_LEVEL_AUTO, &kr) == WICK_ERR_UNSUPPORTED);
  CHECK(wk_kernel_pick(WK_Q4_0, best + 1, &kr) == WICK_ERR_UNSUPPORTED);

  uint64_t seed = 12345;
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    for (int level = WK_LEVEL_SCALAR; level <= best; level++) {
      CHECK(wk_kernel_pick(k_types[i], level, &kr) == WICK_OK);
      if (level == WK_LEVEL_AVX512BW && kr.level < level) continue;  // the AVX2 level's (tested)
      CHECK(kr.level == level);
      stats st = {0};
      for (size_t j = 0; j < sizeof k_sizes / sizeof k_sizes[0]; j++)
        if (k_sizes[j] % kr.k_multiple == 0 && wk_row_size(kr.type, k_sizes[j]))
          check_size(&kr, k_sizes[j], &seed, &st);
      check_gemm_shapes(&kr, &seed);
      printf("%-9s %-6s %4d dots, worst err/tol: weight math %.3f, vs f32 activations %.3f\n",
             wk_type_get(kr.type)->name, wk_kernel_level_name(level), st.checked,
             st.worst_weight, st.worst_act);
      CHECK(st.checked > 0);
    }
  }
  if (g_failures) fprintf(stderr, "%d checks failed\n", g_failures);
  else printf("all kernel checks passed\n");
  return g_failures ? 1 : 0;
}
