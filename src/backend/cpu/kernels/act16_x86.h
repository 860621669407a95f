// Shared by the AVX2 16-bit-activation kernels (act16_avx2_q.c: 32-value
// blocks and the converters; act16_avx2_k.c: 256-value super-blocks).
//
// Every kernel is a register tile of R weight rows x N tokens; per weight
// block each row's codes are decoded once and used for every token. The
// 32-value formats widen them to int16 and multiply with the activations' v
// by pmaddwd (one-token tiles: bytes against lo and hi, or two rows a
// vector, see act16_avx2_q.c), reduce each output's block sum to one lane
// (a16_red8) and scale 8 outputs at once. The super-blocks keep them as
// bytes, multiply with
// lo and hi by pmaddubsw and widen by pmaddwd with the sub-block scales, into
// two int32 accumulators per output combined as lo + 128 hi once per
// super-block, and keep one 8-lane f32 accumulator per output, summed across
// lanes at the end. Every output runs the same f32 operations on the same
// integers in the same order whatever the tile shape, so gemm equals vec_dot
// bit for bit. Decode tiles (one token) take rows j, j + q, j + 2 q, ... so
// that their rows are separate memory streams (see a16_gemm).
#ifndef WICK_BACKEND_CPU_KERNELS_ACT16_X86_H
#define WICK_BACKEND_CPU_KERNELS_ACT16_X86_H

#include <immintrin.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "quant/types.h"

// The target of every function here: AVX2 + FMA + F16C, or what a level
// file defines before including this header (act16_avx512_*.c).
#ifndef AT
#define AT __attribute__((target("avx2,fma,f16c")))
#endif
#define AI static inline __attribute__((always_inline))
#define A16_PRAGMA(x) _Pragma(#x)
#define A16_UNROLL A16_PRAGMA(GCC unroll 16)
// Largest tile dimensions any kernel instantiates (array bounds).
#define A16_MAXR 8
#define A16_MAXN 8
// Keeps v in a register at this point: stops GCC from reassociating a chain
// of integer adds into one tree of all the products (which spills).
#define A16_KEEP(v) __asm__("" : "+x"(v))
// Tokens whose activations stay in L2 while the rows stream past them.
#define A16_TOK_CHUNK 32

AT AI float a16_hsum(__m256 x) {
  __m128 v = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

AT AI int a16_hsum_i32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

AT AI uint16_t a16_u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

AT AI float a16_f16(const uint8_t *p) { return _cvtsh_ss(a16_u16(p)); }

// The f16 at p in all 8 lanes as f32.
AT AI __m256 a16_bf16(const uint8_t *p) {
  return _mm256_cvtph_ps(_mm_set1_epi16((short)a16_u16(p)));
}

// The 4 bytes at p in every dword (a broadcast load).
AT AI __m128i a16_bcast32(const uint8_t *p) {
  return _mm_castps_si128(_mm_broadcast_ss((const float *)p));
}

AT AI __m128i a16_ld32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return _mm_cvtsi32_si128((int)v);
}

// The f16 pairs (d, m) at p, p + ws, ..., p + (n - 1) ws (n <= 8; the rest
// 0) as 8 f32 d and 8 f32 m (when with_m). 32-bit loads and unpacks (cheaper
// than word inserts or packing in general registers).
AT AI void a16_f16_rows(const uint8_t *p, size_t ws, const int n, const int with_m, __m256 *d,
                        __m256 *m) {
  __m128i r[8];
  A16_UNROLL for (int i = 0; i < 8; i++)
      r[i] = i < n ? a16_ld32(p + (size_t)i * ws) : _mm_setzero_si128();
  if (!with_m) {  // d0 d1 .. d7 from the low words
    __m128i a = _mm_unpacklo_epi32(_mm_unpacklo_epi16(r[0], r[1]), _mm_unpacklo_epi16(r[2], r[3]));
    __m128i b = _mm_unpacklo_epi32(_mm_unpacklo_epi16(r[4], r[5]), _mm_unpacklo_epi16(r[6], r[7]));
    *d = _mm256_cvtph_ps(_mm_unpacklo_epi64(a, b));
    return;
  }
  const __m128i split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  __m128i a = _mm_unpacklo_epi64(_mm_unpacklo_epi32(r[0], r[1]), _mm_unpacklo_epi32(r[2], r[3]));
  __m128i b = _mm_unpacklo_epi64(_mm_unpacklo_epi32(r[4], r[5]), _mm_unpacklo_epi32(r[6], r[7]));
  a = _mm_shuffle_epi8(a, split), b = _mm_shuffle_epi8(b, split);  // d0-3 m0-3, d4-7 m4-7
  *d = _mm256_cvtph_ps(_mm_unpacklo_epi64(a, b));
  *m = _mm256_cvtph_ps(_mm_unpackhi_epi64(a, b));
}

// The 32-value block formats (act16_avx2_q.c, act16_avx512_q.c): bytes of
// a block, and the offset of its 16 nibble bytes (Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL).
AT AI int a16_q_bytes(const int type) {
  switch (type) {
    case WK_Q4_0: return 18;
    case WK_Q4_1: return 20;
    case WK_Q5_0: return 22;
    case WK_Q5_1: return 24;
    case WK_Q8_0: return 34;
    default: return 18;  // WK_IQ4_NL
  }
}
AT AI int a16_qs_at(const int type) {
  switch (type) {
    case WK_Q4_1: return 4;
    case WK_Q5_0: return 6;
    case WK_Q5_1: return 8;
    default: return 2;  // Q4_0, IQ4_NL
  }
}

// The super-block formats (act16_avx2_k.c, act16_avx512_k.c): bytes of a
// block.
AT AI int a16_k_bytes(const int type) {
  switch (type) {
    case WK_Q2_K: return 84;
    case WK_Q3_K: return 110;
    case WK_Q4_K: return 144;
    case WK_Q5_K: return 176;
    case WK_Q6_K: return 210;
    default: return 136;  // WK_IQ4_XS
  }
}

// Bytes ahead of the current super-block that the one-token tiles prefetch
// in each of their rows (a16_ahead; the AVX-512 products also prefetch the
// first A16_K_AHEAD bytes of each stream, zgemm1). Rows from memory at
// 4096x14336 and 14336x4096, GB/s without -> with: one thread Q6_K 14.6-14.9
// -> 16.0-16.3, Q4_K 15.1-15.3 -> 16.2-16.5; two threads (best of 5) Q6_K
// 28.6-29.4 -> 31.1-31.8, Q4_K 29.8-30.5 -> 31.5-32.5 (the 576- and 640-row
// shapes gained nothing). bench_matvec --act16, product / read passes,
// medians of 5-6 runs alternating with 768, all six types: 512 and 1024 the
// same at 2 threads (within +-5 points, the spread between two copies of
// one build), 512 2-6 points worse with one thread at 14336x4096 (Q3_K, Q6_K,
// IQ4_XS); 0 to 256 3-15 points worse with one thread there.
//
// On Zen 5 (wk_kern_cpu_kind) the distance is 2048: bench_matvec --act16,
// one build per distance (768, 1536, 2048, 3072), the one-thread % of the
// paired read passes at the four shapes, 768 -> 2048: Q6_K 73-79 -> 89-102,
// Q5_K 69-75 -> 75-86, Q3_K 58-65 -> 61-79, Q2_K 56-69 -> 62-74, and the
// two-thread % mostly 90-104 where the read passes ran under ~45 GB/s
// (bench/RESULTS.md, session 25). kernels.c sets it when it first detects
// the CPU (wk_kernel_best_level).
extern size_t wk_a16_k_ahead;
#define A16_K_AHEAD wk_a16_k_ahead

// The prefetch, in R rows ws apart, of each row's stream ahead bytes on from
// block b (at blk, bytes long); past a row's end it runs into the next row,
// which the next tile reads. Blocks shorter than a cache line: one prefetch
// per line the stream moves on (a block that starts one). Super-blocks: one
// every 64 bytes of the block's span ahead bytes on, up to one more a block
// than the lines the stream enters (a loop over just the lines entered, a
// trip count that varies by block, measured 2-6 points slower with one
// thread at 768-1024 bytes).
AT AI void a16_ahead(const int R, const uint8_t *blk, size_t ws, int64_t b, size_t bytes,
                     size_t ahead) {
  if (!ahead) return;
  if (bytes < 64) {
    if (((size_t)b * bytes & 63) < bytes)
      A16_UNROLL for (int r = 0; r < R; r++)
          _mm_prefetch((const char *)(blk + (size_t)r * ws + ahead), _MM_HINT_T0);
    return;
  }
  A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (size_t o = 0; o < bytes; o += 64)
      _mm_prefetch((const char *)(blk + (size_t)r * ws + ahead + o), _MM_HINT_T0);
}

// Scale i (0..15) of a Q3_K block as stored, 6 bits (the scale is it minus
// 32): low 4 bits in nibble (i / 8) of byte (i % 8) of s[0..7], top 2 bits at
// 2 (i / 4) of byte (i % 4) of s[8..11].
AT AI __m128i a16_scales_q3_raw(const uint8_t *s) {
  const __m128i x = _mm_loadl_epi64((const __m128i *)s);
  const __m128i m4 = _mm_set1_epi8(15);
  __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
  uint32_t a2;
  memcpy(&a2, s + 8, 4);
  __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)a2), _mm_setr_epi32(0, 2, 4, 6));
  hi = _mm_slli_epi16(_mm_and_si128(hi, _mm_set1_epi8(3)), 4);
  return _mm_or_si128(lo, hi);
}

// The same minus 32: the scales.
AT AI __m128i a16_scales_q3(const uint8_t *s) {
  return _mm_sub_epi8(a16_scales_q3_raw(s), _mm_set1_epi8(32));
}

// Scale ib (0..7) of an IQ4_XS block minus 32: nibble ib of scales_l (bytes
// 4-7) | 2 bits at 2 ib of scales_h (bytes 2-3) << 4; as 8 int16.
AT AI __m128i a16_scales_iq4xs(const uint8_t *b) {
  uint32_t l;
  memcpy(&l, b + 4, 4);
  const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)l), _mm256_add_epi32(sh, sh));
  __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32((int)a16_u16(b + 2)), sh);
  __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)),
                               _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
  sc = _mm256_sub_epi32(sc, _mm256_set1_epi32(32));
  return _mm_packs_epi32(_mm256_castsi256_si128(sc), _mm256_extracti128_si256(sc, 1));
}

// A decode tile's f32 step for one block (the same operations at every
// level, so the levels agree bit for bit): acc + float(isum) * (dw * da)
// (+ mw * sa with a minimum), lane r = row r.
AT AI __m256 a16_dec_acc(__m256 acc, __m256i isum, __m256 dwv, __m256 mwv, float da, float sa,
                         const int has_min) {
  const __m256 dd = _mm256_mul_ps(dwv, _mm256_set1_ps(da));
  __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), dd);
  if (has_min) p = _mm256_fmadd_ps(mwv, _mm256_set1_ps(sa), p);
  return _mm256_add_ps(acc, p);
}

// The 8 lanes of acc to y[0], y[yr], .., y[7 yr].
AT AI void a16_store_rows8(__m256 acc, float *y, size_t yr) {
  float out[8];
  _mm256_storeu_ps(out, acc);
  A16_UNROLL for (int r = 0; r < 8; r++) y[(size_t)r * yr] = out[r];
}

// Lane o of the result: v[f(o)], f(o) = o / div % mod (o < n; other lanes 0),
// from values already in registers (no store and reload).
#define A16_LANE(v, o, n, div, mod) ((o) < (n) ? (v)[(o) / (div) % (mod)] : 0.0f)
#define A16_LANES(v, n, div, mod)                                                      \
  _mm256_setr_ps(A16_LANE(v, 0, n, div, mod), A16_LANE(v, 1, n, div, mod),             \
                 A16_LANE(v, 2, n, div, mod), A16_LANE(v, 3, n, div, mod),             \
                 A16_LANE(v, 4, n, div, mod), A16_LANE(v, 5, n, div, mod),             \
                 A16_LANE(v, 6, n, div, mod), A16_LANE(v, 7, n, div, mod))

AT AI __m256i a16_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
AT AI __m128i a16_load128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }

// The 4 bytes at p in every dword (a broadcast load).
AT AI __m256i a16_bcast4(const void *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 16 bytes at p in both 128-bit halves.
AT AI __m256i a16_bcast16(const void *p) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}

// 16 bytes at a in the low half, 16 at b in the high half (two broadcast
// loads and a blend: no lane-crossing insert).
AT AI __m256i a16_load2(const uint8_t *a, const uint8_t *b) {
  return _mm256_blend_epi32(a16_bcast16(a), a16_bcast16(b), 0xf0);
}

// Bits [from, from + width) of every byte moved to [to, to + width), other
// bits 0 (16-bit shifts: the bits kept never cross a byte).
AT AI __m256i a16_bits8(__m256i x, int from, int to, int width) {
  __m256i v = from >= to ? _mm256_srli_epi16(x, from - to) : _mm256_slli_epi16(x, to - from);
  return _mm256_and_si256(v, _mm256_set1_epi8((char)(((1 << width) - 1) << to)));
}

// 16 int16 lanes -> 16 f32 at dst: f * v (+ add when add is not NULL; the
// products are exact, so the one rounding is that of the add).
AT AI void a16_store16(float *dst, __m256i v, __m256 f, const __m256 *add) {
  const __m256i v0 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(v));
  const __m256i v1 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(v, 1));
  __m256 lo = _mm256_mul_ps(f, _mm256_cvtepi32_ps(v0));
  __m256 hi = _mm256_mul_ps(f, _mm256_cvtepi32_ps(v1));
  if (add) lo = _mm256_add_ps(lo, *add), hi = _mm256_add_ps(hi, *add);
  _mm256_storeu_ps(dst, lo);
  _mm256_storeu_ps(dst + 8, hi);
}

// ---- lane reductions: the int32 sums of up to 8 outputs, each spread over a
// vector, gathered into the lanes of one. Two vectors merge by two unpacks
// and an add, per 32-bit lane (x, y: two outputs; each half on its own):
//   a16_merge32: x0+x2 y0+y2 x1+x3 y1+y3
//   a16_merge64 (of a = x y x y, b = z w z w): x y z w
AT AI __m256i a16_merge32(__m256i x, __m256i y) {
  return _mm256_add_epi32(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y));
}
AT AI __m256i a16_merge64(__m256i x, __m256i y) {
  return _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
}

// Outputs v[0..n) (n = 1, 2, 4 or 8) -> lane o = output o's sum (lanes
// o >= n: repeats).
AT AI __m256i a16_red8(const __m256i *v, const int n) {
  const __m256i x = a16_merge64(a16_merge32(v[0], v[1 % n]), a16_merge32(v[2 % n], v[3 % n]));
  const __m256i y = n > 4 ? a16_merge64(a16_merge32(v[4], v[5]), a16_merge32(v[6], v[7])) : x;
  // lanes 0..3 of each half: x's outputs 0..3 (low) / y's 4..7 (high) halves
  const __m256i a = _mm256_blend_epi32(x, y, 0xf0), b = _mm256_permute2x128_si256(x, y, 0x21);
  return _mm256_add_epi32(a, b);
}

// One tile: R rows (w, w + ws, ...) x N tokens (xq, xq + xs, ...) over nb
// weight blocks; y[t * ys + r * yr].
typedef void (*a16_tile_fn)(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                            size_t xs, float *y, size_t ys, size_t yr);

// A type's tiles: main (rm rows x rn tokens), toks (1 x rn: row tails), dec
// (dm x 1: decode and token tails), one (1 x 1).
typedef struct a16_tiles {
  a16_tile_fn main, toks, dec, one;
  int rm, rn, dm;
  int qk;  // weights per block (32 or 256)
} a16_tiles;

// gemm from a type's tiles, in token chunks of A16_TOK_CHUNK: groups of rn
// tokens through the main tile (rows in tiles of rm), the tokens left over
// one by one through the decode tile. Decode tile j takes rows j, j + q,
// j + 2 q, ... (q = rows / dm): dm sequential streams far apart in memory,
// which the hardware prefetchers follow better than one stream.
static inline void a16_gemm(const a16_tiles *tl, const void *wv, size_t ws, int64_t k, int rows,
                            const void *xqv, size_t xs, int n_tokens, float *y, size_t ys) {
  const uint8_t *w = wv, *xq = xqv;
  const int64_t nb = k / tl->qk;
  for (int t0 = 0; t0 < n_tokens; t0 += A16_TOK_CHUNK) {
    const int t1 = t0 + A16_TOK_CHUNK < n_tokens ? t0 + A16_TOK_CHUNK : n_tokens;
    int t = t0;
    if (t1 - t0 >= tl->rn) {
      const int tn = t0 + (t1 - t0) / tl->rn * tl->rn;
      int r = 0;
      for (; r + tl->rm <= rows; r += tl->rm)
        for (t = t0; t < tn; t += tl->rn)
          tl->main(w + (size_t)r * ws, ws, nb, xq + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys,
                   1);
      for (; r < rows; r++)
        for (t = t0; t < tn; t += tl->rn)
          tl->toks(w + (size_t)r * ws, ws, nb, xq + (size_t)t * xs, xs, y + (size_t)t * ys + r, ys,
                   1);
      t = tn;
    }
    const int q = rows / tl->dm;
    for (; t < t1; t++) {
      const uint8_t *xt = xq + (size_t)t * xs;
      float *yt = y + (size_t)t * ys;
      for (int j = 0; j < q; j++)
        tl->dec(w + (size_t)j * ws, ws * (size_t)q, nb, xt, xs, yt + j, ys, (size_t)q);
      for (int r = q * tl->dm; r < rows; r++)
        tl->one(w + (size_t)r * ws, ws, nb, xt, xs, yt + r, ys, 1);
    }
  }
}

// Defines T_vec_dot and T_gemm from T's tile function TILEFN(type, R, N, ...)
// with main tile RM x RN and decode tile DM x 1.
#define A16_TYPE(T, TYPE, TILEFN, QK, RM, RN, DM)                                            \
  A16_TILE(T##_main, TILEFN, TYPE, RM, RN)                                                   \
  A16_TILE(T##_toks, TILEFN, TYPE, 1, RN)                                                    \
  A16_TILE(T##_dec, TILEFN, TYPE, DM, 1)                                                     \
  A16_TILE(T##_one, TILEFN, TYPE, 1, 1)                                                      \
  static const a16_tiles T##_tiles = {T##_main, T##_toks, T##_dec, T##_one, RM, RN, DM, QK}; \
  static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                      \
    float y;                                                                                 \
    T##_one(w, 0, n / (QK), xq, 0, &y, 0, 0);                                                   \
    return y;                                                                                \
  }                                                                                          \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,       \
                       size_t xs, int n_tokens, float *y, size_t ys) {                      \
    a16_gemm(&T##_tiles, w, ws, k, rows, xq, xs, n_tokens, y, ys);                           \
  }
#define A16_TILE(NAME, TILEFN, TYPE, R, N)                                                   \
  AT static void NAME(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, size_t xs, \
                      float *y, size_t ys, size_t yr) {                                      \
    TILEFN(TYPE, R, N, w, ws, nb, xq, xs, y, ys, yr);                                        \
  }

#define A16_ROW(TYPE, T) {TYPE, T##_vec_dot, T##_gemm}

// The product through the AVX2 level's gemm of `type` (the other levels'
// one-token tiles hand it batches): 1 when it ran.
static inline int a16_avx2_gemm(int type, const void *w, size_t ws, int64_t k, int rows,
                                const void *xq, size_t xs, int n_tokens, float *y, size_t ys) {
  wk_vec_dot_fn dot;
  wk_gemm_fn gemm;
  if (!wk_act16_avx2_find(type, &dot, &gemm)) return 0;
  gemm(w, ws, k, rows, xq, xs, n_tokens, y, ys);
  return 1;
}

// T_gemm for a level that has only one-token tiles DEC(TYPE, R, w, ws, nb,
// xq, y, yr) of DM rows (and 1): one to three tokens through them as
// a16_gemm runs its decode tiles (tile j takes rows j, j + q, ..), four and
// more through the AVX2 level's gemm (whose main tiles take 4 tokens). The
// level's vec_dot is the AVX2 level's.
#define A16_DEC_TYPE(T, TYPE, DEC, DM)                                                     \
  AT static void T##_dec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,       \
                         size_t xs, float *y, size_t ys, size_t yr) {                      \
    (void)xs, (void)ys;                                                                    \
    DEC(TYPE, DM, w, ws, nb, xq, y, yr);                                                   \
  }                                                                                        \
  AT static void T##_one(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,       \
                         size_t xs, float *y, size_t ys, size_t yr) {                      \
    (void)xs, (void)ys;                                                                    \
    DEC(TYPE, 1, w, ws, nb, xq, y, yr);                                                    \
  }                                                                                        \
  static const a16_tiles T##_tiles = {NULL, NULL, T##_dec, T##_one, 1, 4, DM, 256};       \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,     \
                       size_t xs, int n_tokens, float *y, size_t ys) {                    \
    if (n_tokens >= T##_tiles.rn &&                                                        \
        a16_avx2_gemm(TYPE, w, ws, k, rows, xq, xs, n_tokens, y, ys))                      \
      return;                                                                              \
    a16_gemm(&T##_tiles, w, ws, k, rows, xq, xs, n_tokens, y, ys);                         \
  }


// The lookup of the super-block file (act16_avx2_k.c), used by the other's.
int wk_act16_avx2_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);

#endif
