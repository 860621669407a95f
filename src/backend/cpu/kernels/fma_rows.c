// AVX2 + FMA register tiles for f32 rows, and the choice of level (see
// fma_rows.h; the 512-bit tiles are in fma_rows_avx512.c).
#include "backend/cpu/kernels/fma_rows.h"

#include <immintrin.h>

#include "backend/cpu/kernels/kernels.h"

#define FT __attribute__((target("avx2,fma")))
#define FI static inline __attribute__((always_inline))
#define F_PRAGMA(x) _Pragma(#x)
#define F_UNROLL F_PRAGMA(GCC unroll 4)

FT FI float hsum8(__m256 x) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// R rows x N tokens (R <= 4, N <= 3); gemm runs 4 x 3 tiles, then 4 x 2 or
// 4 x 1 for the last tokens, and 1 x N for the last rows.
FT FI void tile(const int R, const int N, const float *w, size_t ws, int64_t k, const float *x,
                size_t xs, float *y, size_t ys) {
  __m256 acc[4][3];
  F_UNROLL for (int r = 0; r < R; r++) F_UNROLL for (int t = 0; t < N; t++)
      acc[r][t] = _mm256_setzero_ps();
  const int64_t k8 = k & ~(int64_t)7;
  for (int64_t i = 0; i < k8; i += 8) {
    __m256 xv[3];
    F_UNROLL for (int t = 0; t < N; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * xs + i);
    F_UNROLL for (int r = 0; r < R; r++) {
      const __m256 wv = _mm256_loadu_ps(w + (size_t)r * ws + i);
      F_UNROLL for (int t = 0; t < N; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  F_UNROLL for (int r = 0; r < R; r++) F_UNROLL for (int t = 0; t < N; t++) {
      const float *wr = w + (size_t)r * ws, *xt = x + (size_t)t * xs;
      float s = hsum8(acc[r][t]);
      for (int64_t i = k8; i < k; i++) s += wr[i] * xt[i];
      y[(size_t)t * ys + r] = s;
    }
}

#define TILE_FN(R, N)                                                                      \
  FT static void tile_##R##x##N(const float *w, size_t ws, int64_t k, const float *x, size_t xs,   \
                                float *y, size_t ys) {                                    \
    tile(R, N, w, ws, k, x, xs, y, ys);                                                        \
  }
TILE_FN(4, 3)
TILE_FN(4, 2)
TILE_FN(4, 1)
TILE_FN(1, 3)
TILE_FN(1, 2)
TILE_FN(1, 1)

// Rows [0, nr) x tokens [0, nt): each 4-row strip of w over every token
// (the strip stays in L1 while the tokens' activations come from L2).
static void rows_block(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs,
                       int nt, float *y, size_t ys) {
  int r = 0;
  for (; r + 4 <= nr; r += 4) {
    const float *wr = w + (size_t)r * ws;
    int t = 0;
    for (; t + 3 <= nt; t += 3)
      tile_4x3(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
    if (nt - t == 2) tile_4x2(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
    else if (nt - t == 1) tile_4x1(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
  }
  for (; r < nr; r++) {
    const float *wr = w + (size_t)r * ws;
    int t = 0;
    for (; t + 3 <= nt; t += 3)
      tile_1x3(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
    if (nt - t == 2) tile_1x2(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
    else if (nt - t == 1) tile_1x1(wr, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys);
  }
}

// Activation bytes of one block of tokens: they stay in L2 (with the rows)
// while every strip of w runs over them.
#define FMA_X_BLOCK (128u << 10)

static void fma_rows_avx2(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs,
                          int nt, float *y, size_t ys) {
  const int64_t per = (int64_t)(FMA_X_BLOCK / ((size_t)k * sizeof(float)));
  const int tb = per < 3 ? 3 : per > 3 * 1024 ? 3 * 1024 : (int)(per / 3 * 3);
  for (int t0 = 0; t0 < nt; t0 += tb)
    rows_block(w, ws, k, nr, x + (size_t)t0 * xs, xs, nt - t0 < tb ? nt - t0 : tb,
               y + (size_t)t0 * ys, ys);
}

typedef void (*rows_fn)(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs,
                        int nt, float *y, size_t ys);

static rows_fn level_fn(int level) {
  return level == WK_LEVEL_AVX512BW ? wk_fma_rows_avx512 : fma_rows_avx2;
}

void wk_fma_rows_level(int level, const float *w, size_t ws, int64_t k, int nr, const float *x,
                       size_t xs, int nt, float *y, size_t ys) {
  level_fn(level)(w, ws, k, nr, x, xs, nt, y, ys);
}

void wk_fma_rows(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs, int nt,
                 float *y, size_t ys) {
  // (wk_kernel_best_level runs cpuid once a process)
  level_fn(wk_kernel_best_level())(w, ws, k, nr, x, xs, nt, y, ys);
}
