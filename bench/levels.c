// Kernel levels side by side: one-token products (decode) of one weight
// type at one shape, through the AVX2 level's kernels and through another
// level's (default: the best this CPU has), alternating call by call in one
// process and keeping each one's fastest call. On a shared, noisy machine the
// fastest of many alternating calls compares two kernels' own speed where
// means over seconds drift with the machine (rows chosen to stay in L2).
//
//   bench_levels TYPE K N [REPS] [LEVEL] [--act8]
//
// TYPE: a weight type name (q4_k, ...); K x N: row length and rows; REPS
// (default 500) calls of each; LEVEL: avx512bw, avx512, ... (default the
// best); --act8: the 8-bit-activation kernel table (kernels.h) instead of
// the 16-bit kernels the decode steps take (act16.h; Q3_K takes the table by
// default). Weights: rows of random values quantized by the project's
// quantizer. Prints GB/s of weights for both levels and their ratio.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "base/timer.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"

static int level_by_name(const char *name) {
  for (int l = WK_LEVEL_SCALAR; l <= WK_LEVEL_AVX512; l++)
    if (!strcmp(name, wk_kernel_level_name(l))) return l;
  return -2;
}

int main(int argc, char **argv) {
  int act8 = argc > 1 && !strcmp(argv[argc - 1], "--act8");
  if (act8) argc--;
  if (argc < 4 || argc > 6) {
    fprintf(stderr, "usage: %s TYPE K N [REPS] [LEVEL] [--act8]\n", argv[0]);
    return 1;
  }
  const int type = wk_type_from_name(argv[1]);
  const long k = atol(argv[2]), n = atol(argv[3]);
  const int reps = argc > 4 ? atoi(argv[4]) : 500;
  const int other = argc > 5 ? level_by_name(argv[5]) : wk_kernel_best_level();
  const size_t rb = type >= 0 && k > 0 ? wk_row_size(type, k) : 0;
  if (!rb || n < 1 || reps < 1 || other < WK_LEVEL_SCALAR) {
    fprintf(stderr, "bad type, shape, reps or level\n");
    return 1;
  }
  const int levels[2] = {WK_LEVEL_AVX2, other};
  wk_kernel kr[2];
  for (int l = 0; l < 2; l++)
    if ((act8 ? wk_kernel_pick(type, levels[l], &kr[l]) : wk_act16_pick(type, levels[l], &kr[l])) !=
        WICK_OK) {
      fprintf(stderr, "%s: no kernels at level %s on this CPU\n", argv[1],
              wk_kernel_level_name(levels[l]));
      return 1;
    }
  uint8_t *w = malloc(rb * (size_t)n);
  float *x = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)n);
  uint64_t s = 88172645463325252ull;
  for (long r = 0; r < n; r++) {
    for (long i = 0; i < k; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    if (wk_quantize_row(type, x, w + (size_t)r * rb, k) != WICK_OK) return 1;
  }
  void *xq[2];
  for (int l = 0; l < 2; l++) {
    const size_t xb = act8 ? wk_act_row_size(kr[l].act, k) : wk_act16_row_size(kr[l].act, k);
    xq[l] = malloc(xb);
    kr[l].quantize_act(x, xq[l], k);
  }
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < reps; r++)
    for (int l = 0; l < 2; l++) {
      const double t0 = wk_now();
      kr[l].gemm(w, rb, k, (int)n, xq[l], 0, 1, y, (size_t)n);
      const double t = wk_now() - t0;
      if (t < best[l]) best[l] = t;
    }
  const double bytes = (double)rb * (double)n;
  printf("%-7s %6ldx%-6ld %-8s %6.2f GB/s  %-8s %6.2f GB/s  ratio %.3f\n", argv[1], k, n,
         wk_kernel_level_name(kr[0].level), bytes / best[0] / 1e9,
         wk_kernel_level_name(kr[1].level), bytes / best[1] / 1e9, best[0] / best[1]);
  free(w), free(x), free(y), free(xq[0]), free(xq[1]);
  return 0;
}
