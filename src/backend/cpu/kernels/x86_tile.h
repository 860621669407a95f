// Register-tile drivers shared by the x86 kernel levels. Included by
// kernels_avx2.c and kernels_avx512.c, which define before including it:
//   KT            the target attribute every function of the level carries;
//   KQ8_RM/RN, KK_RM/RN, KF_RM/RN  the register tile (rows x tokens) of the
//                 32-block, super-block and float families;
//   kmac_u8s8(acc, u, s)  acc + int32x8 sums of 4 products of unsigned u and
//                 signed s bytes (maddubs+madd on AVX2, vpdpbusd with VNNI);
//                 no pair of products may pass 32767 (u <= 128 against
//                 activations in [-127, 127] keeps maddubs exact).
// A weight type T provides (see x86_q8.h, x86_k.h):
//   T_BYTES, T_NSTEP, typedef T_act (activation block), T_row (one weight
//   block's per-row data), T_wv (one step's decoded weights), and
//   T_prep(block, &row)            per row and block, before the steps;
//   T_load(&row, block, s, &wv)    per row and step s;
//   T_mac(&wv, act, s, isum)       per row, token and step: integer sums;
//   T_fin(&row, act, isum, acc)    per row, token and block: scaled into acc.
// Every output (row, token) runs the same operations in the same order in
// every tile shape, so gemm agrees bit for bit with vec_dot. gemm's tile j
// takes rows j, j + q, j + 2q, ... (q = rows / tile height), so each tile row
// continues the previous tile's row in memory: a few long sequential streams
// that the hardware prefetchers follow, rather than short ones restarting.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_TILE_H
#define WICK_BACKEND_CPU_KERNELS_X86_TILE_H

#include <immintrin.h>

#include "backend/cpu/kernels/kernels_internal.h"

KT static inline float khsum(__m256 x) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

KT static inline __m256i kload(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

KT static inline float kf16(const uint8_t *p) { return _cvtsh_ss(wk_kern_u16(p)); }

// Broadcast f16 -> f32x8 (converted as a vector, so that products with it
// stay vector multiplies).
KT static inline __m256 kbf16(const uint8_t *p) {
  return _mm256_cvtph_ps(_mm_set1_epi16((short)wk_kern_u16(p)));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles (the
// 16 bytes in both halves, the upper half shifted right by 4).
KT static inline __m256i knibbles16(const uint8_t *p) {
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
  v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

// A float in lane 0 and zeros elsewhere (adds a per-block term once to a
// lane-summed accumulator).
KT static inline __m256 klane0(float f) { return _mm256_zextps128_ps256(_mm_set_ss(f)); }
KT static inline __m256i klane0i(int v) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(v)); }

#define KPRAGMA(x) _Pragma(#x)
#define KUNROLL KPRAGMA(GCC unroll 16)

// Tile function names; the extra level lets KRM/KRN expand first.
#define KTNAME_(T, RM, RN) T##_tile_##RM##x##RN
#define KTNAME(T, RM, RN) KTNAME_(T, RM, RN)

// One tile function: RM rows x RN tokens of type T.
#define KTILE(T, RM, RN) KTILE_(T, RM, RN)
#define KTILE_(T, RM, RN)                                                                 \
  KT static void T##_tile_##RM##x##RN(const uint8_t *w, size_t ws, int64_t nb,             \
                                      const uint8_t *xq, size_t xs, float *y, size_t ys, size_t yr) { \
    __m256 acc[RM][RN];                                                                    \
    KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++) acc[r][t] =  \
        _mm256_setzero_ps();                                                               \
    for (int64_t b = 0; b < nb; b++) {                                                     \
      T##_row pr[RM];                                                                      \
      const T##_act *a[RN];                                                                \
      KUNROLL for (int r = 0; r < RM; r++) T##_prep(w + r * ws + b * T##_BYTES, &pr[r]);   \
      KUNROLL for (int t = 0; t < RN; t++) a[t] = (const T##_act *)(xq + t * xs) + b;      \
      __m256i is[RM][RN];                                                                  \
      KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++) is[r][t] = \
          _mm256_setzero_si256();                                                          \
      KUNROLL for (int s = 0; s < T##_NSTEP; s++) {                                        \
        KUNROLL for (int r = 0; r < RM; r++) {                                             \
          T##_wv wv;                                                                       \
          T##_load(&pr[r], w + r * ws + b * T##_BYTES, s, &wv);                            \
          KUNROLL for (int t = 0; t < RN; t++) is[r][t] = T##_mac(&wv, a[t], s, is[r][t]); \
        }                                                                                  \
      }                                                                                    \
      KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++) acc[r][t] = \
          T##_fin(&pr[r], a[t], is[r][t], acc[r][t]);                                      \
    }                                                                                      \
    KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++)              \
        y[t * ys + r * yr] = khsum(acc[r][t]);                                                  \
  }

// Token chunk: the activations of this many tokens stay in L2 while every row
// tile of the matrix streams past them.
#define KTOK_CHUNK 32

// vec_dot and gemm of type T from the four tile shapes (KRM x KRN tiles).
#define KGEMM(T, QK, KRM, KRN) KGEMM_(T, QK, KRM, KRN)
#define KGEMM_(T, QK, KRM, KRN)                                                                     \
  KTILE(T, KRM, KRN)                                                                        \
  KTILE(T, 1, KRN)                                                                          \
  KTILE(T, KRM, 1)                                                                          \
  KTILE(T, 1, 1)                                                                            \
  KT static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                  \
    float y;                                                                                \
    T##_tile_1x1(w, 0, n / (QK), xq, 0, &y, 0, 0);                                             \
    return y;                                                                               \
  }                                                                                         \
  KT static void T##_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv,  \
                          size_t xs, int n_tokens, float *y, size_t ys) {                   \
    const uint8_t *w = wv, *xq = xqv;                                                       \
    int64_t nb = k / (QK);                                                                  \
    for (int t0 = 0; t0 < n_tokens; t0 += KTOK_CHUNK) {                                     \
      int t1 = t0 + KTOK_CHUNK < n_tokens ? t0 + KTOK_CHUNK : n_tokens;                     \
      /* row tile j holds rows j, j + q, j + 2q, ...: KRM long sequential streams */ \
      int q = rows / KRM;                                                                   \
      for (int j = 0; j < q; j++) {                                                         \
        const uint8_t *wr = w + (size_t)j * ws;                                             \
        size_t wq = ws * (size_t)q;                                                         \
        int t = t0;                                                                         \
        for (; t + KRN <= t1; t += KRN)                                                     \
          KTNAME(T, KRM, KRN)(wr, wq, nb, xq + t * xs, xs, y + t * ys + j, ys, q);          \
        for (; t < t1; t++) KTNAME(T, KRM, 1)(wr, wq, nb, xq + t * xs, xs, y + t * ys + j, ys, q); \
      }                                                                                     \
      for (int r = q * KRM; r < rows; r++) {                                                \
        const uint8_t *wr = w + (size_t)r * ws;                                             \
        int t = t0;                                                                         \
        for (; t + KRN <= t1; t += KRN)                                                     \
          KTNAME(T, 1, KRN)(wr, ws, nb, xq + t * xs, xs, y + t * ys + r, ys, 0);            \
        for (; t < t1; t++) T##_tile_1x1(wr, ws, nb, xq + t * xs, xs, y + t * ys + r, ys, 0); \
      }                                                                                     \
    }                                                                                       \
  }

#endif
