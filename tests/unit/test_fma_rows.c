// The f32 FMA register tiles (src/backend/cpu/kernels/fma_rows.h), at the
// AVX2 level and at the 512-bit one (CPUs with AVX-512 F/BW/VL):
//  - every output against a double-precision dot product, within the f32
//    rounding bound of the tiles' sums: |diff| <= (k / 8 + 12) 2^-24
//    sum |w x| (lane sums of at most k / 8 terms, 3 or 4 steps across lanes,
//    at most 7 tail terms);
//  - every output bit-identical to the same row and token computed alone (a
//    1 x 1 call), so results depend neither on the batch nor on the tile
//    an output falls in;
//  - shapes: rows 1..13 and tokens 1..13 (every tile shape and edge of both
//    levels) for k = 1, 7, 15, 16, 17, 64, 100, 576, 1100 (tails of k % 8 and
//    k % 16 alone, with whole steps, none); k = 4100 and 40000, where a block
//    of tokens holds 6 and 3 (several blocks); weight rows, activation rows and y rows
//    padded (ws, xs > k; ys > nr), y poisoned with NaN first, its padding
//    untouched;
//  - wk_fma_rows equal to the level wk_kernel_best_level() picks.
// Weights and activations are Gaussian with a spread that changes every 32
// values; activations with outliers 40x larger.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/fma_rows.h"
#include "backend/cpu/kernels/kernels.h"
#include "test_util.h"

enum { MAX_R = 13, MAX_T = 13, W_PAD = 5, X_PAD = 3, Y_PAD = 2 };

typedef struct problem {
  int64_t k;
  size_t ws, xs;
  float *w, *x;  // MAX_R rows of ws, MAX_T rows of xs
  double ref[MAX_T][MAX_R], mag[MAX_T][MAX_R];
  float one[MAX_T][MAX_R];  // each output computed alone (per level)
} problem;

static void problem_init(problem *p, int64_t k, uint64_t *seed) {
  p->k = k;
  p->ws = (size_t)k + W_PAD;
  p->xs = (size_t)k + X_PAD;
  p->w = malloc(sizeof(float) * MAX_R * p->ws);
  p->x = malloc(sizeof(float) * MAX_T * p->xs);
  fill_random(seed, p->w, MAX_R * (int64_t)p->ws, 0);
  fill_random(seed, p->x, MAX_T * (int64_t)p->xs, 1);
  for (int t = 0; t < MAX_T; t++)
    for (int r = 0; r < MAX_R; r++) {
      double d = 0, m = 0;
      for (int64_t i = 0; i < k; i++) {
        const double v = (double)p->w[r * p->ws + i] * p->x[t * p->xs + i];
        d += v, m += fabs(v);
      }
      p->ref[t][r] = d, p->mag[t][r] = m;
    }
}

// Each output alone, with the level's 1 x 1 tile.
static void problem_alone(problem *p, int level) {
  for (int t = 0; t < MAX_T; t++)
    for (int r = 0; r < MAX_R; r++)
      wk_fma_rows_level(level, p->w + r * p->ws, p->ws, p->k, 1, p->x + t * p->xs, p->xs, 1,
                        &p->one[t][r], 1);
}

// Rows [0, nr) x tokens [0, nt) in one call; returns the worst |diff| / tol.
static double check_shape(const problem *p, int level, int nr, int nt) {
  const size_t ys = (size_t)nr + Y_PAD;
  float y[MAX_T * (MAX_R + Y_PAD)];
  for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) y[i] = NAN;
  wk_fma_rows_level(level, p->w, p->ws, p->k, nr, p->x, p->xs, nt, y, ys);
  const double tol_k = ((double)p->k / 8 + 12) * 0x1p-24;
  double worst = 0;
  int close = 1, same = 1, pad = 1;
  for (int t = 0; t < nt; t++) {
    for (int r = 0; r < nr; r++) {
      const float v = y[t * ys + r];
      const double err = fabs(v - p->ref[t][r]) / (tol_k * p->mag[t][r]);
      close &= err <= 1;  // false for NaN
      if (err > worst) worst = err;
      same &= memcmp(&v, &p->one[t][r], sizeof v) == 0;
    }
    for (size_t r = (size_t)nr; r < ys; r++) pad &= isnan(y[t * ys + r]);
  }
  if (!close || !same || !pad)
    fprintf(stderr, "%s k=%lld rows=%d tokens=%d: close %d, same as alone %d, padding %d\n",
            wk_kernel_level_name(level), (long long)p->k, nr, nt, close, same, pad);
  CHECK(close);
  CHECK(same);
  CHECK(pad);
  return worst;
}

// wk_fma_rows against the level it should pick on this CPU.
static void check_dispatch(const problem *p) {
  const int level = wk_kernel_best_level() == WK_LEVEL_AVX512BW ? WK_LEVEL_AVX512BW
                                                                : WK_LEVEL_AVX2;
  float a[MAX_T * MAX_R], b[MAX_T * MAX_R];
  wk_fma_rows(p->w, p->ws, p->k, MAX_R, p->x, p->xs, MAX_T, a, MAX_R);
  wk_fma_rows_level(level, p->w, p->ws, p->k, MAX_R, p->x, p->xs, MAX_T, b, MAX_R);
  CHECK(memcmp(a, b, sizeof a) == 0);
}

static void check_level(int level, problem *ps, int np, problem *big, int nbig) {
  double worst = 0;
  for (int i = 0; i < np; i++) {
    problem_alone(&ps[i], level);
    for (int nr = 1; nr <= MAX_R; nr++)
      for (int nt = 1; nt <= MAX_T; nt++) {
        const double e = check_shape(&ps[i], level, nr, nt);
        if (e > worst) worst = e;
      }
  }
  // large k: every row tail with token counts across block edges
  const int rows[] = {1, 3, 8, 9, 13};
  for (int i = 0; i < nbig; i++) {
    problem_alone(&big[i], level);
    for (size_t j = 0; j < sizeof rows / sizeof rows[0]; j++)
      for (int nt = 1; nt <= MAX_T; nt++) {
        const double e = check_shape(&big[i], level, rows[j], nt);
        if (e > worst) worst = e;
      }
  }
  printf("%-8s worst err / tol %.3f\n", wk_kernel_level_name(level), worst);
}

int main(void) {
  uint64_t seed = 0x5eed0f3a;
  const int best = wk_kernel_best_level();
  if (best < WK_LEVEL_AVX2) {
    printf("skipped: the FMA tiles (this CPU lacks AVX2 + FMA + F16C)\n");
    return 0;
  }
  static const int64_t ks[] = {1, 7, 15, 16, 17, 64, 100, 576, 1100};
  static const int64_t big_ks[] = {4100, 40000};
  enum { NP = sizeof ks / sizeof ks[0], NB = sizeof big_ks / sizeof big_ks[0] };
  static problem ps[NP], big[NB];
  for (int i = 0; i < NP; i++) problem_init(&ps[i], ks[i], &seed);
  for (int i = 0; i < NB; i++) problem_init(&big[i], big_ks[i], &seed);

  check_level(WK_LEVEL_AVX2, ps, NP, big, NB);
  if (best >= WK_LEVEL_AVX512BW)
    check_level(WK_LEVEL_AVX512BW, ps, NP, big, NB);
  else
    printf("skipped: the AVX-512 BW tiles (this CPU lacks AVX-512 F/BW/VL)\n");
  for (int i = 0; i < NP; i++) check_dispatch(&ps[i]);

  for (int i = 0; i < NP; i++) free(ps[i].w), free(ps[i].x);
  for (int i = 0; i < NB; i++) free(big[i].w), free(big[i].x);
  if (g_failures) {
    fprintf(stderr, "%d checks failed\n", g_failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
