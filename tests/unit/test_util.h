// Shared by the unit tests: the failure counter, CHECK and CHECKF, and a seeded
// PRNG (splitmix64) with uniform doubles in (0, 1), Gaussian ones, and
// rows of Gaussian values whose spread changes every 32.
#ifndef WICK_TEST_UTIL_H
#define WICK_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int g_failures;  // test-file state only; the library has none

#define CHECK(x)                                                            \
  do {                                                                      \
    if (!(x)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x); \
      g_failures++;                                                         \
    }                                                                       \
  } while (0)
// CHECK with a printf-style message instead of the expression.
#define CHECKF(x, ...)                                      \
  do {                                                      \
    if (!(x)) {                                             \
      fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      g_failures++;                                         \
    }                                                       \
  } while (0)

static inline uint64_t rng_next(uint64_t *s) {  // splitmix64
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Never exactly 0 or 1 (log-safe).
static inline double rng_uniform(uint64_t *s) {
  return ((double)(rng_next(s) >> 11) + 0.5) * 0x1p-53;
}

// Box-Muller; never exactly zero.
static inline double rng_normal(uint64_t *s) {
  double u = rng_uniform(s), v = rng_uniform(s);
  double g = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
  return g == 0 ? 1e-3 : g;
}

// Gaussian values whose spread changes every 32 (so block scales differ);
// outliers: 1 in 64 values 40 times larger.
static inline void fill_random(uint64_t *s, float *x, int64_t n, int outliers) {
  double spread = 1;
  for (int64_t i = 0; i < n; i++) {
    if (i % 32 == 0) spread = 0.25 + 3 * rng_uniform(s);
    x[i] = (float)(spread * rng_normal(s));
    if (outliers && rng_uniform(s) < 1.0 / 64) x[i] *= 40;
  }
}

#endif
