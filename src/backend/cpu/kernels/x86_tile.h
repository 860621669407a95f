// Register-tile drivers and lane reductions shared by the x86 kernel levels.
// Included by kernels_avx2.c and kernels_avx512.c, which define before it:
//   KT            the target attribute every function of the level carries;
//   KK_RM/RN, KF_RM/RN  the register tile (rows x tokens) of the super-block
//                 and float families;
//   kmac_u8s8(acc, u, s)  acc + int32x8 sums of 4 products of unsigned u and
//                 signed s bytes (maddubs+madd on AVX2, vpdpbusd with VNNI);
//                 no pair of products may pass 32767 (u <= 128 against
//                 activations in [-127, 127] keeps maddubs exact).
// A weight type T driven by KGEMM provides (see x86_k.h):
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
// The 32-block formats have their own lane tiles (x86_q8.h), built on the
// lane reductions below.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_TILE_H
#define WICK_BACKEND_CPU_KERNELS_X86_TILE_H

#include <immintrin.h>

#include "backend/cpu/kernels/kernels_internal.h"

#define KPRAGMA(x) _Pragma(#x)
#define KUNROLL KPRAGMA(GCC unroll 16)

KT static inline float khsum(__m256 x) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

KT static inline __m256i kload(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

KT static inline float kf16(const uint8_t *p) { return _cvtsh_ss(wk_kern_u16(p)); }

// 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles (the
// 16 bytes in both halves, the upper half shifted right by 4).
KT static inline __m256i knibbles16(const uint8_t *p) {
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
  v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

KT static inline int khsum_i32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

// ---- lane reductions: the integer sums of several (row, token) outputs,
// each spread over a vector, gathered into the lanes of one vector, so that
// the float work of a block (convert, scale, accumulate) runs once for all.
// Two vectors merge by two blends, one in-lane shuffle and an add (cheaper
// than phaddd on Zen 3), per 32-bit unit:
//   kmerge32: x0+x1 y0+y1 x2+x3 y2+y3 ..    kmerge64: x0+x2 x1+x3 y0+y2 y1+y3 ..
// and kmerge128 adds the 128-bit halves: x.lo+x.hi | y.lo+y.hi. Each 32-bit
// unit holds one output, as int32 or as two int16 partial sums; the first
// `levels16` merges add int16 lanes (while no sum can pass 32767) and
// kwiden16 then adds each unit's two halves into int32.
#define KMERGE(NAME, ADD, MASK, SHUF)                                                     \
  KT static inline __m256i NAME(__m256i x, __m256i y) {                                   \
    __m256i a = _mm256_blend_epi32(x, y, MASK), b = _mm256_blend_epi32(y, x, MASK);       \
    return ADD(a, _mm256_shuffle_epi32(b, SHUF));                                          \
  }
KMERGE(kmerge32_16, _mm256_add_epi16, 0xaa, 0xb1)
KMERGE(kmerge64_16, _mm256_add_epi16, 0xcc, 0x4e)
KMERGE(kmerge32_32, _mm256_add_epi32, 0xaa, 0xb1)
KMERGE(kmerge64_32, _mm256_add_epi32, 0xcc, 0x4e)
KT static inline __m256i kmerge128(__m256i x, __m256i y, int in16) {
  __m256i a = _mm256_blend_epi32(x, y, 0xf0), b = _mm256_permute2x128_si256(x, y, 0x21);
  return in16 ? _mm256_add_epi16(a, b) : _mm256_add_epi32(a, b);
}
KT static inline __m256i kwiden16(__m256i v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }

// v[0..3] -> unit i of each half = v[i]'s units of that half summed: int32,
// or still int16 pairs when levels16 >= 3. levels16 < 0: v holds int32.
KT static inline __m256i kred4(const __m256i v[4], int levels16) {
  __m256i x[4];
  KUNROLL for (int i = 0; i < 4; i++) x[i] = levels16 == 0 ? kwiden16(v[i]) : v[i];
  __m256i a = levels16 >= 1 ? kmerge32_16(x[0], x[1]) : kmerge32_32(x[0], x[1]);
  __m256i b = levels16 >= 1 ? kmerge32_16(x[2], x[3]) : kmerge32_32(x[2], x[3]);
  if (levels16 == 1) a = kwiden16(a), b = kwiden16(b);
  __m256i c = levels16 >= 2 ? kmerge64_16(a, b) : kmerge64_32(a, b);
  return levels16 == 2 ? kwiden16(c) : c;
}
// v[0..7] -> int32 lane i = sum of v[i].
KT static inline __m256i kred8(const __m256i v[8], int levels16) {
  __m256i c = kmerge128(kred4(v, levels16), kred4(v + 4, levels16), levels16 >= 3);
  return levels16 >= 3 ? kwiden16(c) : c;
}

// ---- f16 block scales of several rows (p, p + ws, p + 2 ws, ...) as f32
// lanes: d from the first two bytes of each, and with with_m the f16 m in
// the next two. 32-bit loads and unpacks build the f16 vector (cheaper than
// word inserts, or packing in general registers).
KT static inline __m128i kld32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return _mm_cvtsi32_si128((int)v);
}
KT static inline __m128i kdm4(const uint8_t *p, size_t ws) {  // d0 m0 d1 m1 d2 m2 d3 m3
  return _mm_unpacklo_epi64(_mm_unpacklo_epi32(kld32(p), kld32(p + ws)),
                            _mm_unpacklo_epi32(kld32(p + 2 * ws), kld32(p + 3 * ws)));
}
KT static inline __m128i kdm_split(__m128i dm) {  // -> d0 d1 d2 d3 m0 m1 m2 m3
  return _mm_shuffle_epi8(dm, _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
}
KT static inline void kf16dm8(const uint8_t *p, size_t ws, int with_m, __m256 *d, __m256 *m) {
  if (!with_m) {
    __m128i a = _mm_unpacklo_epi32(_mm_unpacklo_epi16(kld32(p), kld32(p + ws)),
                                   _mm_unpacklo_epi16(kld32(p + 2 * ws), kld32(p + 3 * ws)));
    __m128i b = _mm_unpacklo_epi32(_mm_unpacklo_epi16(kld32(p + 4 * ws), kld32(p + 5 * ws)),
                                   _mm_unpacklo_epi16(kld32(p + 6 * ws), kld32(p + 7 * ws)));
    *d = _mm256_cvtph_ps(_mm_unpacklo_epi64(a, b));
    return;
  }
  __m128i a = kdm_split(kdm4(p, ws)), b = kdm_split(kdm4(p + 4 * ws, ws));
  *d = _mm256_cvtph_ps(_mm_unpacklo_epi64(a, b));
  *m = _mm256_cvtph_ps(_mm_unpackhi_epi64(a, b));
}
KT static inline void kf16dm4(const uint8_t *p, size_t ws, int with_m, __m128 *d, __m128 *m) {
  __m128i a = kdm_split(kdm4(p, ws));
  *d = _mm_cvtph_ps(a);
  if (with_m) *m = _mm_cvtph_ps(_mm_unpackhi_epi64(a, a));
}


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

// The one-token tile of RM rows: each row's block runs start to finish
// (prep, steps, fin) before the next row's, which keeps few registers live;
// the rows' independent chains still overlap in the out-of-order core. Same
// operations per output as KTILE.
#define KTILE_SEQ(T, RM) KTILE_SEQ_(T, RM)
#define KTILE_SEQ_(T, RM)                                                                  \
  KT static void T##_tile_##RM##x1(const uint8_t *w, size_t ws, int64_t nb,                \
                                   const uint8_t *xq, size_t xs, float *y, size_t ys,      \
                                   size_t yr) {                                            \
    __m256 acc[RM];                                                                         \
    const T##_act *a = (const T##_act *)xq;                                                 \
    KUNROLL for (int r = 0; r < RM; r++) acc[r] = _mm256_setzero_ps();                      \
    for (int64_t b = 0; b < nb; b++) {                                                      \
      KUNROLL for (int r = 0; r < RM; r++) {                                                \
        const uint8_t *blk = w + r * ws + b * T##_BYTES;                                    \
        T##_row pr;                                                                         \
        T##_prep(blk, &pr);                                                                 \
        __m256i is = _mm256_setzero_si256();                                                \
        KUNROLL for (int s = 0; s < T##_NSTEP; s++) {                                       \
          T##_wv wv;                                                                        \
          T##_load(&pr, blk, s, &wv);                                                       \
          is = T##_mac(&wv, a + b, s, is);                                                  \
        }                                                                                   \
        acc[r] = T##_fin(&pr, a + b, is, acc[r]);                                           \
      }                                                                                     \
    }                                                                                       \
    KUNROLL for (int r = 0; r < RM; r++) y[r * yr] = khsum(acc[r]);                         \
  }

// Token chunk: the activations of this many tokens stay in L2 while every row
// tile of the matrix streams past them.
#define KTOK_CHUNK 32

// The tile walk of a gemm over rows x n_tokens (w, ws, nb, xq, xs, y, ys,
// rows, n_tokens in scope): tokens in chunks of KTOK_CHUNK; row tile j holds
// rows j, j + q, j + 2q, ... (KRM long sequential streams); leftover rows and
// tokens take the narrower tiles.
#define KGEMM_WALK(T, KRM, KRN)                                                             \
    for (int t0 = 0; t0 < n_tokens; t0 += KTOK_CHUNK) {                                     \
      int t1 = t0 + KTOK_CHUNK < n_tokens ? t0 + KTOK_CHUNK : n_tokens;                     \
      int q = rows / KRM;                                                                     \
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
    }

// vec_dot and gemm of type T from the four tile shapes (KRM x KRN tiles).
#define KGEMM(T, QK, KRM, KRN) KGEMM_(T, QK, KRM, KRN)
#define KGEMM_(T, QK, KRM, KRN)                                                                     \
  KTILE(T, KRM, KRN)                                                                        \
  KTILE(T, 1, KRN)                                                                          \
  KTILE_SEQ(T, KRM)                                                                         \
  KTILE_SEQ(T, 1)                                                                           \
  KT static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                  \
    float y;                                                                                \
    T##_tile_1x1(w, 0, n / (QK), xq, 0, &y, 0, 0);                                             \
    return y;                                                                               \
  }                                                                                         \
  KT static void T##_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv,  \
                          size_t xs, int n_tokens, float *y, size_t ys) {                   \
    const uint8_t *w = wv, *xq = xqv;                                                       \
    int64_t nb = k / (QK);                                                                  \
    KGEMM_WALK(T, KRM, KRN)                                                                 \
  }

#endif
