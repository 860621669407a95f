// Prints the timeline of the last decode attention launch of a measurement
// build (-DWICK_CUDA_STAMPS; the slots are in attn_decode_common.cuh): the
// spread of the blocks' start and end times, then each phase's cycles from
// the block's start, median (min-max) over the blocks that did not merge the
// splits and over those that did. Empty in other builds.
#ifndef WICK_BENCH_CUDA_STAMPS_H
#define WICK_BENCH_CUDA_STAMPS_H

#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_test.h"

#ifdef WICK_CUDA_STAMPS
static int stamps_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void stamps_row(const char *name, double *v, int n) {
  if (n == 0) return;
  qsort(v, n, sizeof(double), stamps_cmp);
  printf("  %-26s %8.0f (%.0f-%.0f)\n", name, v[n / 2], v[0], v[n - 1]);
}
static void print_stamps(const char *what) {
  enum { S = 16, MAXB = 4096 };
  unsigned long long *st = malloc(sizeof(*st) * S * MAXB);
  double *v = malloc(sizeof(double) * MAXB);
  if (!st || !v || cuda_attn_stamps(st, MAXB)) {
    printf("stamps %s: could not read\n", what);
    free(st), free(v);
    return;
  }
  int nblocks = (int)st[13];
  if (nblocks < 1 || nblocks > MAXB) {
    printf("stamps %s: no launch recorded\n", what);
    free(st), free(v);
    return;
  }
  unsigned long long t0 = st[0], e1 = st[10];
  for (int b = 0; b < nblocks; b++) {
    if (st[b * S] < t0) t0 = st[b * S];
    if (st[b * S + 10] > e1) e1 = st[b * S + 10];
  }
  printf("stamps %s: %d blocks, first start to last end %.2f us\n", what, nblocks, (e1 - t0) / 1e3);
  int n = 0;
  for (int b = 0; b < nblocks; b++) v[n++] = (double)(st[b * S] - t0);
  stamps_row("start, ns after the first", v, n);
  n = 0;
  for (int b = 0; b < nblocks; b++) v[n++] = (double)(st[b * S + 10] - t0);
  stamps_row("end, ns after the first", v, n);
  n = 0;
  for (int b = 0; b < nblocks; b++)
    if (st[b * S + 9] > st[b * S + 1])
      v[n++] = 1000.0 * (st[b * S + 9] - st[b * S + 1]) / (double)(st[b * S + 10] - st[b * S]);
  stamps_row("clock, cycles a ns (x1000)", v, n);
  static const int slot[] = {2, 3, 4, 5, 6, 7, 8, 14, 9};
  static const char *ph[] = {"keys known",    "first tiles asked", "q ready",
                             "first tile in", "key loop done",     "warps merged",
                             "split counted", "weights known",     "end"};
  for (int merged = 0; merged < 2; merged++) {
    printf(" %s blocks, cycles from the start:\n", merged ? "merging" : "other");
    for (int k = 0; k < 9; k++) {
      int p = slot[k];
      n = 0;
      for (int b = 0; b < nblocks; b++) {
        const unsigned long long *s = st + b * S;
        if ((int)s[11] != merged || s[p] < s[1] || s[p] > s[9]) continue;
        v[n++] = (double)(s[p] - s[1]);
      }
      stamps_row(ph[k], v, n);
    }
  }
  free(st), free(v);
}
#else
static void print_stamps(const char *what) { (void)what; }
#endif

#endif
