// AVX-512 kernels for Q2_K and Q3_K against 8-bit activations (WK_ACT_Q8K),
// in 512-bit vectors. kernels_avx512.c takes them when cpuid also reports
// VBMI (vpermb) and GFNI (gf2p8affineqb); otherwise the level keeps x86_k.h's
// 256-bit ones. Each weight code becomes, by one byte lookup, its code times
// its 16-value group's scale (Q2_K) or 128 + scale x (4 - code) (Q3_K), an
// unsigned byte, and one vpdpbusd multiplies 64 of them with 64 activation
// bytes: one multiply a code byte, where the 16-bit activations
// (act16_avx512_k.c) need two (lo and hi bytes) and a combine.
//
// Pairs: pair p (0-3) of a super-block is chunks p and p + 4 of 32 values
// (bytes 0-31, 32-63 of a vector), because the 64 code bytes as they lie
// hold chunk p's codes in bytes 0-31 and chunk p + 4's in bytes 32-63 (Q2_K:
// bits 2 p of qs; Q3_K: the same, and hmask bits p and p + 4). 128-bit lane
// L of pair p covers group ga = 2 p + L % 2 + 8 (L / 2). The activations of
// a pair (values 32 p .., then 128 + 32 p ..) are joined once per product
// for the one-token tiles (zk_prep), or per tile and super-block (several
// tokens, and vec_dot).
//
// Q2_K: one pshufb table a row and super-block, in each 128-bit lane L the
// 4 groups that lane covers in pairs 0-3 x 4 codes: entry 4 p + c = scale x
// c (at most 15 x 3 = 45). Pair p's index is one gf2p8affineqb of the row's
// 64 qs bytes (bits 2 p, 2 p + 1 to bits 0-1, 4 p from its imm8). The table
// is one vpermb of the 16 scales (entries 2 i and 2 i + 1 share a group:
// even bytes, the odd ones zeroed by the mask) and one vpmullw by (c0 + 256
// c1); no product passes a byte, so each byte is exact. The minimum: dmin x
// sum over groups of min x (the activations' 16-value sums, bsum), by one
// pmaddwd a row and token. A vpdpbusd lane sums 16 products of at most 45 x
// 127 over a super-block (< 2^17). Measured against a 64-entry vpermb table
// indexed by (qs & mask) | lane constant (one vpternlog a pair, a shift for
// pairs 2, 3): 2% faster; against an and and an or for that vpternlog: 10%.
//
// Q3_K: act16_avx512_k.c's two pshufb tables of u = 128 + sc (4 - c) (0..252)
// and their index (avx512_k.h), one vpdpbusd a pair. The accumulators start
// at -128 x bsum (lane j: group j's sum), which takes the 128 off: a super-
// block's lanes sum to -sum of sc (c - 4) x, exact (|lane| < 2^20), and
//   acc -= float(lanes) x (d_w x d_a).
//
// Every output runs the same integer and f32 operations in the same order
// in every tile shape (lane sums in int32, then per super-block the f32
// steps above; one 16-lane accumulator, Q2_K's minimum terms an 8-lane one,
// summed at the end), so gemm agrees with vec_dot bit for bit. They are not
// the AVX2 level's results bit for bit (another lane order, other f32
// steps); both are exact integer sums rounded per super-block.
#define AT                                                                     \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,"  \
                        "avx512vbmi,gfni")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/avx512_k.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// Largest tile dimensions (array bounds).
#define ZK_MAXR 4
#define ZK_MAXN 4

// ---- activations ----------------------------------------------------------

// Per super-block, what the one-token tiles read: the 4 pairs (16 int32
// each), then -128 x bsum (Q3_K's accumulator start, lane j: group j).
#define ZK_INTS 80
// Super-blocks up to which a product joins the pairs once (on the stack,
// 320 bytes each: 20 KB; rows of up to 16384 values).
#define ZK_NB 64

// The start lanes: -128 x the 16 group sums.
AT AI __m512i zk_start(const wk_act_q8k *a) {
  const __m512i s =
      _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)a->bsum));
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, 7));
}

AT static void zk_prep(const uint8_t *xq, int64_t nb, int32_t *c) {
  const wk_act_q8k *a = (const wk_act_q8k *)xq;
  for (int64_t b = 0; b < nb; b++, c += ZK_INTS) {
    A16_UNROLL for (int p = 0; p < 4; p++) _mm512_storeu_si512(
        c + 16 * p, zjoin((const uint8_t *)a[b].q + 32 * p,
                          (const uint8_t *)a[b].q + 128 + 32 * p));
    _mm512_storeu_si512(c + 64, zk_start(&a[b]));
  }
}

// Super-block b's pairs of one token (and, with start, its start lanes):
// from the product's zk_prep (c), or joined here (c NULL).
AT AI void zk_pairs(const wk_act_q8k *a, const int32_t *c, int64_t b,
                    const int start, __m512i *x, __m512i *s0) {
  if (c) {
    const int32_t *cb = c + ZK_INTS * b;
    A16_UNROLL for (int p = 0; p < 4; p++) x[p] = zload(cb + 16 * p);
    if (start)
      *s0 = zload(cb + 64);
    return;
  }
  const uint8_t *q = (const uint8_t *)a[b].q;
  A16_UNROLL for (int p = 0; p < 4; p++) x[p] =
      zjoin(q + 32 * p, q + 128 + 32 * p);
  if (start)
    *s0 = zk_start(&a[b]);
}

// f32 x f32 products of the tile's rows and tokens, stored as bits for
// zbcast_f32: out[t][j] = v[j] x da[t] (v: a row group's 8 f32).
AT AI void zk_scale_rows(__m256 v, const float *da, const int N,
                         int32_t (*out)[8]) {
  A16_UNROLL for (int t = 0; t < N; t++) _mm256_storeu_si256(
      (__m256i *)out[t],
      _mm256_castps_si256(_mm256_mul_ps(v, _mm256_set1_ps(da[t]))));
}

// ---- Q2_K -------------------------------------------------------------------

// The table, per 128-bit lane L: entry 4 p + c = scale(2 p + L % 2 + 8 (L /
// 2)) x c, made by a vpermb of the 16 scales (even bytes; the odd entry
// shares the even one's group) and a vpmullw by (c0 + 256 c1).
#define ZQ2_IDX(e) (2 * (((e)&15) >> 2) + (((e) >> 4) & 1) + 8 * ((e) >> 5))
#define ZQ2_MUL(i) ((uint16_t)((2 * (i)) % 4 + 256 * ((2 * (i)) % 4 + 1)))
#define ZR4(F, b) F(b), F((b) + 1), F((b) + 2), F((b) + 3)
#define ZR16(F, b) ZR4(F, b), ZR4(F, (b) + 4), ZR4(F, (b) + 8), ZR4(F, (b) + 12)
#define ZR32(F, b) ZR16(F, b), ZR16(F, (b) + 16)
#define ZR64(F) ZR32(F, 0), ZR32(F, 32)
static const uint8_t zq2_idx[64] __attribute__((aligned(64))) = {ZR64(ZQ2_IDX)};
static const uint16_t zq2_mul[32]
    __attribute__((aligned(64))) = {ZR32(ZQ2_MUL, 0)};

// A row's table from its 16 scale bytes at b (low nibbles).
AT AI __m512i zq2_table(const uint8_t *b) {
  const __m128i sc = _mm_and_si128(a16_load128(b), _mm_set1_epi8(15));
  const __m512i s = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull,
                                                  _mm512_load_si512(zq2_idx),
                                                  _mm512_castsi128_si512(sc));
  return _mm512_mullo_epi16(s, _mm512_load_si512(zq2_mul));
}

// Pair p's table index from the row's 64 qs bytes q: bits 2 p, 2 p + 1 of
// each byte to bits 0-1, 4 p in bits 2-3 (gf2p8affineqb's imm8), bit 7 clear.
#define ZQ2_M(p) ((long long)(ZGF(0, 2 * (p)) | ZGF(1, 2 * (p) + 1)))
AT AI __m512i zq2_index(__m512i q, const int p) {
  const __m512i m = _mm512_set1_epi64(ZQ2_M(p));
  return p == 0   ? _mm512_gf2p8affine_epi64_epi8(q, m, 0)
         : p == 1 ? _mm512_gf2p8affine_epi64_epi8(q, m, 4)
         : p == 2 ? _mm512_gf2p8affine_epi64_epi8(q, m, 8)
                  : _mm512_gf2p8affine_epi64_epi8(q, m, 12);
}

// R rows x N tokens of Q2_K; y[t ys + r yr]. xq: token 0's row, xs apart;
// c: token 0's zk_prep (N = 1) or NULL.
AT AI void zq2_tile(const int R, const int N, const uint8_t *w, size_t ws,
                    int64_t nb, const uint8_t *xq, size_t xs, const int32_t *c,
                    float *y, size_t ys, size_t yr) {
  const wk_act_q8k *a[ZK_MAXN];
  A16_UNROLL for (int t = 0; t < N; t++) a[t] =
      (const wk_act_q8k *)(xq + (size_t)t * xs);
  __m512 acc[ZK_MAXR][ZK_MAXN];
  __m256 accm[ZK_MAXR][ZK_MAXN];
  A16_UNROLL for (int r = 0; r < R; r++)
      A16_UNROLL for (int t = 0; t < N; t++) {
    acc[r][t] = _mm512_setzero_ps();
    accm[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 84;
    a16_ahead(R, blk, ws, b, 84, A16_K_AHEAD);
    __m512i x[ZK_MAXN][4];
    float da[ZK_MAXN];
    A16_UNROLL for (int t = 0; t < N; t++) {
      zk_pairs(a[t], c, b, 0, x[t], NULL);
      da[t] = a[t][b].d;
    }
    // (d, dmin) x d_a of 4 rows at a time: dm[t][2 r], dm[t][2 r + 1] (f32
    // bits)
    int32_t dm[ZK_MAXR / 4][ZK_MAXN][8];
    A16_UNROLL for (int r = 0; r < R; r += 4) {
      __m128i h = a16_bcast32(blk + (size_t)r * ws + 80);
      A16_UNROLL for (int i = 1; i < 4; i++) if (r + i < R) h = _mm_blend_epi32(
          h, a16_bcast32(blk + (size_t)(r + i) * ws + 80), 1 << i);
      zk_scale_rows(_mm256_cvtph_ps(h), da, N, dm[r / 4]);
    }
    __m512i tab[ZK_MAXR], is[ZK_MAXR][ZK_MAXN], q[ZK_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) {
      tab[r] = zq2_table(blk + (size_t)r * ws);
      q[r] = zload(blk + (size_t)r * ws + 16);
      A16_UNROLL for (int t = 0; t < N; t++) is[r][t] = _mm512_setzero_si512();
    }
    A16_UNROLL for (int p = 0; p < 4; p++)
        A16_UNROLL for (int r = 0; r < R; r++) {
      const __m512i u = _mm512_shuffle_epi8(tab[r], zq2_index(q[r], p));
      A16_UNROLL for (int t = 0; t < N; t++) {
        is[r][t] = _mm512_dpbusd_epi32(is[r][t], u, x[t][p]);
        Z_KEEP(is[r][t]);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++) {
      // the 16 mins as words (each scale byte zero-extended, shifted by 4)
      const __m256i mins = _mm256_srli_epi16(
          _mm256_cvtepu8_epi16(a16_load128(blk + (size_t)r * ws)), 4);
      A16_UNROLL for (int t = 0; t < N; t++) {
        const int32_t *f = &dm[r / 4][t][2 * (r % 4)];
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r][t]), zbcast_f32(f),
                                    acc[r][t]);
        const __m256i ms = _mm256_madd_epi16(
            mins, _mm256_loadu_si256((const __m256i *)a[t][b].bsum));
        accm[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms),
                                      _mm512_castps512_ps256(zbcast_f32(f + 1)),
                                      accm[r][t]);
      }
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++)
      A16_UNROLL for (int t = 0; t < N; t++) {
    const __m256 s =
        _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]), zhigh(acc[r][t]));
    y[(size_t)t * ys + (size_t)r * yr] = a16_hsum(_mm256_add_ps(s, accm[r][t]));
  }
}

// ---- Q3_K -------------------------------------------------------------------

// R rows x N tokens of Q3_K (as zq2_tile).
AT AI void zq3_tile(const int R, const int N, const uint8_t *w, size_t ws,
                    int64_t nb, const uint8_t *xq, size_t xs, const int32_t *c,
                    float *y, size_t ys, size_t yr) {
  const wk_act_q8k *a[ZK_MAXN];
  A16_UNROLL for (int t = 0; t < N; t++) a[t] =
      (const wk_act_q8k *)(xq + (size_t)t * xs);
  __m512 acc[ZK_MAXR][ZK_MAXN];
  A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++)
      acc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 110;
    a16_ahead(R, blk, ws, b, 110, A16_K_AHEAD);
    __m512i x[ZK_MAXN][4], s0[ZK_MAXN];
    float da[ZK_MAXN];
    A16_UNROLL for (int t = 0; t < N; t++) {
      zk_pairs(a[t], c, b, 1, x[t], &s0[t]);
      da[t] = a[t][b].d;
    }
    // d_w x d_a: dd[t][r] (f32 bits)
    int32_t dd[ZK_MAXN][ZK_MAXR + 4];
    __m512i ta[ZK_MAXR], tb[ZK_MAXR], h[ZK_MAXR], is[ZK_MAXR][ZK_MAXN];
    A16_UNROLL for (int r = 0; r < R; r += 4) {
      __m128 d;
      const __m512i s4 = zq3_scales4(blk, ws, r, R, &d);
      A16_UNROLL for (int t = 0; t < N; t++)
          _mm_storeu_si128((__m128i *)(dd[t] + r),
                           _mm_castps_si128(_mm_mul_ps(d, _mm_set1_ps(da[t]))));
      A16_UNROLL for (int i = 0; i < 4; i++) {
        if (r + i >= R)
          break;
        ta[r + i] = zq3_table(s4, i, 0);
        tb[r + i] = zq3_table(s4, i, 1);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++) {
      h[r] = zbcast32(blk + (size_t)r * ws);
      A16_UNROLL for (int t = 0; t < N; t++) is[r][t] = s0[t];
    }
    __m512i g[ZK_MAXR];
    A16_UNROLL for (int p = 0; p < 4; p++)
        A16_UNROLL for (int r = 0; r < R; r++) {
      if (p == 0)
        g[r] = zq3_g(h[r], 0);
      if (p == 2)
        g[r] = zq3_g(h[r], 1);
      const __m512i u = _mm512_shuffle_epi8(
          p & 1 ? tb[r] : ta[r], zq3_index(blk + (size_t)r * ws + 32, g[r], p));
      A16_UNROLL for (int t = 0; t < N; t++) {
        is[r][t] = _mm512_dpbusd_epi32(is[r][t], u, x[t][p]);
        Z_KEEP(is[r][t]);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++)
        A16_UNROLL for (int t = 0; t < N; t++) acc[r][t] = _mm512_fnmadd_ps(
            _mm512_cvtepi32_ps(is[r][t]), zbcast_f32(&dd[t][r]), acc[r][t]);
  }
  A16_UNROLL for (int r = 0; r < R; r++)
      A16_UNROLL for (int t = 0; t < N; t++) {
    const __m256 s =
        _mm256_add_ps(_mm512_castps512_ps256(acc[r][t]), zhigh(acc[r][t]));
    y[(size_t)t * ys + (size_t)r * yr] = a16_hsum(s);
  }
}

// ---- vec_dot and gemm
// ---------------------------------------------------------

typedef void (*zk_tile_fn)(const uint8_t *w, size_t ws, int64_t nb,
                           const uint8_t *xq, size_t xs, const int32_t *c,
                           float *y, size_t ys, size_t yr);

// A type's tiles: dec (DM rows x 1 token, decode), one (1 x 1), main (RM x
// RN), toks (1 x RN).
typedef struct zk_tiles {
  zk_tile_fn dec, one, main, toks;
  int dm, rm, rn;
} zk_tiles;

// One token: zk_prep once, then tiles of dm rows taking rows j, j + q, j + 2 q,
// ... (q = rows / dm: separate memory streams), the rest one by one. The
// first A16_K_AHEAD bytes of each stream are prefetched here (the tiles'
// prefetches run that far ahead).
AT static void zk_gemm1(const zk_tiles *tl, const uint8_t *w, size_t ws,
                        int64_t nb, int rows, const uint8_t *xq, float *y) {
  int32_t prep[ZK_INTS * ZK_NB] __attribute__((aligned(64)));
  const int32_t *c = NULL;
  if (nb <= ZK_NB)
    zk_prep(xq, nb, prep), c = prep;
  const int q = rows / tl->dm;
  A16_UNROLL for (int r = 0; r < 4;
                  r++) if (r < tl->dm && q > 0) for (size_t o = 0; o < A16_K_AHEAD;
                                                     o += 64)
      _mm_prefetch((const char *)w + (size_t)r * (size_t)q * ws + o,
                   _MM_HINT_T0);
  for (int j = 0; j < q; j++)
    tl->dec(w + (size_t)j * ws, ws * (size_t)q, nb, xq, 0, c, y + j, 0,
            (size_t)q);
  for (int r = q * tl->dm; r < rows; r++)
    tl->one(w + (size_t)r * ws, ws, nb, xq, 0, c, y + r, 0, 1);
}

// Several tokens: tokens in chunks of A16_TOK_CHUNK (their activations stay
// in L2), per chunk row tiles of rm rows (rows j, j + q, ...) over groups of
// rn tokens; leftover tokens through the one-token walk, leftover rows
// through toks.
AT static void zk_gemm(const zk_tiles *tl, const void *wv, size_t ws, int64_t k,
                       int rows, const void *xqv, size_t xs, int n_tokens,
                       float *y, size_t ys) {
  const uint8_t *w = wv, *xq = xqv;
  const int64_t nb = k / 256;
  for (int t0 = 0; t0 < n_tokens; t0 += A16_TOK_CHUNK) {
    const int t1 =
        t0 + A16_TOK_CHUNK < n_tokens ? t0 + A16_TOK_CHUNK : n_tokens;
    const int tn = t0 + (t1 - t0) / tl->rn * tl->rn, q = rows / tl->rm;
    if (tn > t0) {
      for (int j = 0; j < q; j++)
        for (int t = t0; t < tn; t += tl->rn)
          tl->main(w + (size_t)j * ws, ws * (size_t)q, nb, xq + (size_t)t * xs,
                   xs, NULL, y + (size_t)t * ys + j, ys, (size_t)q);
      for (int r = q * tl->rm; r < rows; r++)
        for (int t = t0; t < tn; t += tl->rn)
          tl->toks(w + (size_t)r * ws, ws, nb, xq + (size_t)t * xs, xs, NULL,
                   y + (size_t)t * ys + r, ys, 1);
    }
    for (int t = tn; t < t1; t++)
      zk_gemm1(tl, w, ws, nb, rows, xq + (size_t)t * xs, y + (size_t)t * ys);
  }
}

#define ZK_TILE(NAME, FN, R, N)                                                \
  AT static void NAME(const uint8_t *w, size_t ws, int64_t nb,                 \
                      const uint8_t *xq, size_t xs, const int32_t *c,          \
                      float *y, size_t ys, size_t yr) {                        \
    FN(R, N, w, ws, nb, xq, xs, c, y, ys, yr);                                 \
  }
// T_vec_dot and T_gemm from tile function FN: decode tiles DM x 1, main
// tiles RM x RN.
#define ZK_TYPE(T, FN, DM, RM, RN)                                             \
  ZK_TILE(T##_dec, FN, DM, 1)                                                  \
  ZK_TILE(T##_one, FN, 1, 1)                                                   \
  ZK_TILE(T##_main, FN, RM, RN)                                                \
  ZK_TILE(T##_toks, FN, 1, RN)                                                 \
  static const zk_tiles T##_tiles = {T##_dec, T##_one, T##_main, T##_toks,     \
                                     DM,      RM,      RN};                    \
  static float T##_vec_dot(int64_t n, const void *w, const void *xq) {         \
    float y;                                                                   \
    T##_one(w, 0, n / 256, xq, 0, NULL, &y, 0, 0);                             \
    return y;                                                                  \
  }                                                                            \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows,          \
                       const void *xq, size_t xs, int n_tokens, float *y,      \
                       size_t ys) {                                            \
    zk_gemm(&T##_tiles, w, ws, k, rows, xq, xs, n_tokens, y, ys);              \
  }

// Decode tiles of 4 rows (L2-resident rows, one thread, GB/s at the four
// shapes: Q2_K 19.7-20.5, Q3_K 19.0-19.7; 3 rows within noise, 5 and 6 rows
// 3-10% slower).
ZK_TYPE(zq2, zq2_tile, 4, 4, 2)
ZK_TYPE(zq3, zq3_tile, 4, 2, 2)

int wk_kern_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni"))
    return 0;
  if (type == WK_Q2_K)
    *dot = zq2_vec_dot, *gemm = zq2_gemm;
  else if (type == WK_Q3_K)
    *dot = zq3_vec_dot, *gemm = zq3_gemm;
  else
    return 0;
  return 1;
}
