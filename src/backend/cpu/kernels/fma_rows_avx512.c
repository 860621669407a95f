// AVX-512 F register tiles for f32 rows (see fma_rows.h), for CPUs with two
// 512-bit FMA pipes (wk_kernel_best_level() == WK_LEVEL_AVX512BW).
//
// 8 rows x 3 tokens: 24 accumulators, 3 activation vectors and one weight
// vector of the 32 registers; a step loads 11 vectors for 24 FMAs, and only
// the 3 activation ones come from L2. Measured on Skylake-SP against 4 x 6,
// 6 x 4, 5 x 5, 4 x 4, 8 x 2 and 4 x 3 on the prefill shapes (k 576 to 2048,
// 512 tokens; before hsum16x8 and the prefetch below): 8 x 3 the fastest,
// the others 10-25% slower. Splitting k into chunks of 512 (so a strip's
// chunk stays in L1 when k is large; with or without packing it) did not
// pay.
#include <immintrin.h>

#include "backend/cpu/kernels/fma_rows.h"

#define ZT __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl")))
#define ZI static inline __attribute__((always_inline))
#define Z_PRAGMA(x) _Pragma(#x)
#define Z_UNROLL Z_PRAGMA(GCC unroll 8)

// Each step prefetches the activations this many floats ahead into L1: they
// stream from L2 (the strip of w stays in L1), and the hardware's L1
// prefetch does not keep up with three streams at this rate (prefill
// shapes 10-15% faster than without; 64 to 160 measured alike). Past the
// end of x it touches nothing: a prefetch does not fault.
#define Z_PREFETCH 96

// The 16 lanes in a fixed order: halves, then quarters, pairs, the last two.
// (The high half by the AVX-512 F extract: the level does not check DQ.)
ZT ZI float hsum16(__m512 x) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), hi);
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// hsum16 of 8 vectors at once (16 shuffles and 8 adds instead of 32 and 32:
// prefill shapes 5-12% faster): each step adds the same lane pairs in the
// same order as hsum16's, so the sums are bit-identical to it.
ZT ZI __m256 hsum16x8(const __m512 *a) {
  __m512 b[4], c[2];
  Z_UNROLL for (int i = 0; i < 4; i++)  // lane j + lane j + 8; halves of a[2i], a[2i+1]
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
  Z_UNROLL for (int i = 0; i < 2; i++)  // j + j + 4; quarter q of c[i]: a[4i + q]'s
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
  // j + j + 2: quarter q holds a[q]'s two sums, then a[q + 4]'s
  const __m512 d = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x44),
                                 _mm512_shuffle_ps(c[0], c[1], 0xee));
  const __m512 e = _mm512_add_ps(d, _mm512_movehdup_ps(d));  // j + j + 1
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, e));
}

// One step of 16 values of k at i: acc[r][t] += w row r * x token t, lane
// by lane. LOAD is a plain load, or a masked one for the k % 16 tail (zeros
// in the other lanes, which then add +0 and keep their sums).
#define ZSTEP(LOAD)                                                                       \
  do {                                                                                    \
    __m512 xv[3];                                                                         \
    Z_UNROLL for (int t = 0; t < N; t++) xv[t] = LOAD(x + (size_t)t * xs + i);            \
    Z_UNROLL for (int r = 0; r < R; r++) {                                                \
      __m512 wv = LOAD(w + (size_t)r * ws + i);                                    \
      __asm__("" : "+v"(wv)); /* one load for N FMAs, not N loads folded into them */     \
      Z_UNROLL for (int t = 0; t < N; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]); \
    }                                                                                     \
  } while (0)
#define ZLOAD(p) _mm512_loadu_ps(p)
#define ZLOAD_TAIL(p) _mm512_maskz_loadu_ps(m, p)

// The lane sums of R rows (k apart) x N tokens.
ZT ZI void zsums(const int R, const int N, const float *w, size_t ws, int64_t k, const float *x,
                 size_t xs, __m512 acc[8][3]) {
  Z_UNROLL for (int r = 0; r < R; r++) Z_UNROLL for (int t = 0; t < N; t++)
      acc[r][t] = _mm512_setzero_ps();
  const int64_t k16 = k & ~(int64_t)15;
  int64_t i = 0;
  for (; i < k16; i += 16) {
    Z_UNROLL for (int t = 0; t < N; t++)
      _mm_prefetch((const char *)(x + (size_t)t * xs + i + Z_PREFETCH), _MM_HINT_T0);
    ZSTEP(ZLOAD);
  }
  if (i < k) {
    const __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
    ZSTEP(ZLOAD_TAIL);
  }
}

// R rows x N tokens (R 8, 4, 2 or 1; N <= 3).
ZT ZI void ztile(const int R, const int N, const float *w, size_t ws, int64_t k, const float *x,
                 size_t xs, float *y, size_t ys) {
  __m512 acc[8][3];
  zsums(R, N, w, ws, k, x, xs, acc);
  Z_UNROLL for (int t = 0; t < N; t++) {
    float *yt = y + (size_t)t * ys;
    if (R == 8) {
      __m512 a[8];
      Z_UNROLL for (int r = 0; r < 8; r++) a[r] = acc[r][t];
      _mm256_storeu_ps(yt, hsum16x8(a));
    } else {
      Z_UNROLL for (int r = 0; r < R; r++) yt[r] = hsum16(acc[r][t]);
    }
  }
}

typedef void (*ztile_fn)(const float *w, size_t ws, int64_t k, const float *x, size_t xs, float *y,
                         size_t ys);
#define ZTILE_FN(R, N)                                                                      \
  ZT static void ztile_##R##x##N(const float *w, size_t ws, int64_t k, const float *x, size_t xs,  \
                                 float *y, size_t ys) {                                    \
    ztile(R, N, w, ws, k, x, xs, y, ys);                                                        \
  }
#define ZTILE_ROW(R) ZTILE_FN(R, 1) ZTILE_FN(R, 2) ZTILE_FN(R, 3)
ZTILE_ROW(1)
ZTILE_ROW(2)
ZTILE_ROW(4)
ZTILE_ROW(8)
#define ZTILE_ENTRY(R) {ztile_##R##x1, ztile_##R##x2, ztile_##R##x3}
static const ztile_fn k_tiles[4][3] = {ZTILE_ENTRY(1), ZTILE_ENTRY(2), ZTILE_ENTRY(4),
                                       ZTILE_ENTRY(8)};

// A strip of 8 >> s rows over tokens [0, nt) (the strip stays in L1 while
// the tokens' activations come from L2).
static void zstrip(int s, const float *w, size_t ws, int64_t k, const float *x, size_t xs, int nt,
                   float *y, size_t ys) {
  for (int t = 0; t < nt; t += 3) {
    const int n = nt - t < 3 ? nt - t : 3;
    k_tiles[3 - s][n - 1](w, ws, k, x + (size_t)t * xs, xs, y + (size_t)t * ys, ys);
  }
}

// Activation bytes of one block of tokens: they stay in L2 (with the rows)
// while every strip of w runs over them (64 to 384 KB measured alike).
#define Z_X_BLOCK (128u << 10)

void wk_fma_rows_avx512(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs,
                        int nt, float *y, size_t ys) {
  const int64_t per = (int64_t)(Z_X_BLOCK / ((size_t)k * sizeof(float)));
  const int tb = per < 3 ? 3 : per > 3 * 1024 ? 3 * 1024 : (int)(per / 3 * 3);
  for (int t0 = 0; t0 < nt; t0 += tb) {
    const int n = nt - t0 < tb ? nt - t0 : tb;
    const float *xb = x + (size_t)t0 * xs;
    float *yb = y + (size_t)t0 * ys;
    // strips of 8 rows, the last rows in strips of 4, 2, 1
    for (int r = 0, s = 0; r < nr; r += 8 >> s) {
      while (r + (8 >> s) > nr) s++;
      zstrip(s, w + (size_t)r * ws, ws, k, xb, xs, n, yb + r, ys);
    }
  }
}
