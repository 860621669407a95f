// Shared by the CUDA kernel tests: the failure count and CHECK with a
// message, and the inputs' generator (xorshift; the file sets its seed with
// CUDA_TEST_SEED before including this).
#ifndef WICK_TEST_CUDA_CHECK_H
#define WICK_TEST_CUDA_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int g_fail;

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
      g_fail++;                     \
    }                               \
  } while (0)

static uint64_t g_rng = CUDA_TEST_SEED;
static inline double urand(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}
// Gaussian, never exactly zero.
static inline float nrand(void) {
  for (;;) {
    double u1 = urand() + 1e-300, u2 = urand();
    float r = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    if (r != 0.0f) return r;
  }
}

#endif
