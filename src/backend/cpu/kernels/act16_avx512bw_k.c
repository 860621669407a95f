// The AVX-512 BW level's 16-bit-activation decode tiles for Q4_K, Q5_K, Q6_K
// and IQ4_XS against WK_ACT_A16K: 512-bit vectors without VNNI, VBMI or
// GFNI, for CPUs with AVX-512 F/BW/VL alone (Skylake-SP and its kin; act16.c
// reaches them through wk_act16_avx512bw_find at wk_kernel_best_level's
// AVX512BW). One to three tokens run the tiles a token at a time; four and
// more take the AVX2 level's gemm, and vec_dot is the AVX2 level's. Q2_K
// keeps the AVX2 level's: the same scheme measured no faster (its 84-byte
// blocks spend most of their operations on the per-group f32 terms).
//
// Why: there a 512-bit vpmaddubsw or vpmaddwd does twice the bytes of a
// 256-bit one at the same rate, and the AVX2 decode tiles (act16_avx2_k.c)
// are bound by those pipes, not by memory (Skylake-SP at 2.0 GHz: 3.9-4.8
// GB/s a core with its rows in L2, against ~8 GB/s of read bandwidth).
//
// ---- Q4_K, Q5_K ----------------------------------------------------------------
//
// Layout: a super-block's 128 code bytes hold chunk 2 i in the low nibbles
// and chunk 2 i + 1 in the high nibbles of bytes 32 i .. 32 i + 31, so one
// 64-byte load (bytes 64 n ..) gives, by its low nibbles, chunks 4 n and 4 n
// + 2 (low and high 256-bit half) and, by its high nibbles, chunks 4 n + 1
// and 4 n + 3. Pair p = 2 n + h is chunks 4 n + h and 4 n + 2 + h; its
// activation bytes (lo and hi) are the two chunks' 32 bytes joined once per
// super-block for the tile's rows, and its scale vector is each chunk's scale
// in its half (two broadcast loads, the second merge-masked: no shuffle).
// Q5_K's fifth bits: qh's bit j of byte l is value 32 j + l's, so qh
// broadcast to both halves and shifted by a different count in each (64-bit
// lanes: the bit that lands at 4 comes from the same byte) gives a pair's.
//
// Exact and bit-identical to the AVX2 level: lane l of each half sums values
// 4 l .. 4 l + 3 of its chunk times the chunk's scale, as lane l of kdec's
// 256-bit vectors does, so the halves added are kdec's lanes (the same
// integers; the adds may wrap, the true values fit int32 by the AVX2 file's
// bounds), and then the f32 steps are kdec's, in its order. pmaddubsw lanes:
// at most 2 x 31 x 127 (Q5_K codes against bytes of magnitude <= 127).
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/act16_kdec.h"
#include "backend/cpu/kernels/avx512bw_k.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// Pair p's unsigned codes of one row's super-block (b: the block).
AT AI __m512i bcodes(const int type, const uint8_t *b, const int p) {
  const int n = p >> 1, h = p & 1;
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i v = _mm512_loadu_si512(b + (type == WK_Q5_K ? 48 : 16) + 64 * n);
  v = _mm512_and_si512(h ? _mm512_srli_epi16(v, 4) : v, m4);
  if (type == WK_Q5_K) {  // + 16 where bit j of qh[l] is set (j: the half's chunk)
    const __m512i q = _mm512_broadcast_i64x4(a16_load(b + 16));
    // chunks (j0, j1) = (0, 2), (1, 3): left by (4, 2), (3, 1); (4, 6), (5, 7): right by
    // (0, 2), (1, 3)
    const __m512i f = n == 0 ? _mm512_sllv_epi64(q, _mm512_set_epi64(2 - h, 2 - h, 2 - h, 2 - h,
                                                                      4 - h, 4 - h, 4 - h, 4 - h))
                             : _mm512_srlv_epi64(q, _mm512_set_epi64(2 + h, 2 + h, 2 + h, 2 + h,
                                                                     h, h, h, h));
    v = _mm512_or_si512(v, _mm512_and_si512(f, _mm512_set1_epi8(16)));
  }
  return v;
}

// R rows x one token (rows w, w + ws, ..; y[r * yr]).
AT AI void bdec(const int type, const int R, const uint8_t *w, size_t ws, int64_t nb,
                const uint8_t *xq, float *y, size_t yr) {
  const int bytes = a16_k_bytes(type);
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  // super-block b's terms in p4s[b % 2], made one super-block ahead (kdec's)
  k4dprep p4s[2];
  if (nb > 0) k4_dprep(R, w, ws, act[0].d, &p4s[0]);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    const k4dprep *pp = &p4s[b & 1];
    a16_ahead(R, blk, ws, b, (size_t)bytes, A16_K_AHEAD);
    if (b + 1 < nb) k4_dprep(R, blk + bytes, ws, act[b + 1].d, &p4s[(b + 1) & 1]);
    // each chunk's scale in both words of a dword, per row
    int32_t sc2[A16_MAXR][8];
    A16_UNROLL for (int r = 0; r < R; r++) {
      const __m128i s = a16_load128(pp->sc[r]);
      _mm_storeu_si128((__m128i *)sc2[r], _mm_unpacklo_epi16(s, s));
      _mm_storeu_si128((__m128i *)(sc2[r] + 4), _mm_unpackhi_epi16(s, s));
    }
    __m512i lo[A16_MAXR], hi[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm512_setzero_si512();
    A16_UNROLL for (int p = 0; p < 4; p++) {
      const int j0 = 4 * (p >> 1) + (p & 1), j1 = j0 + 2;
      __m512i xl = bjoin(q + 32 * j0, q + 32 * j1), xh = bjoin(q + 256 + 32 * j0, q + 256 + 32 * j1);
      B_KEEP(xl);
      B_KEEP(xh);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m512i c = bcodes(type, blk + (size_t)r * ws, p);
        const __m512i s = bscales(&sc2[r][j0], &sc2[r][j1]);
        lo[r] = _mm512_add_epi32(lo[r], _mm512_madd_epi16(_mm512_maddubs_epi16(c, xl), s));
        hi[r] = _mm512_add_epi32(hi[r], _mm512_madd_epi16(_mm512_maddubs_epi16(c, xh), s));
        B_KEEP(lo[r]);
        B_KEEP(hi[r]);
      }
    }
    const __m256 sums = k4_chunk_sums(&act[b]);
    A16_UNROLL for (int r = 0; r < R; r++) {
      const __m256i x = bfold(lo[r], hi[r]);
      const __m256 dd = _mm256_broadcast_ss(&pp->dm[2 * r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), dd, acc[r]);
      acc[r] = k4_min_term(acc[r], k4_mins(pp, r), sums, _mm256_broadcast_ss(&pp->dm[2 * r + 1]));
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- Q6_K ----------------------------------------------------------------------
//
// Pair m (0-3) is chunks 2 m and 2 m + 1, whose activation bytes lie side by
// side (one 64-byte load each for lo and hi). Their codes: nibble m % 2 of
// ql's 64 bytes at 64 (m / 2) (chunk 2 m in bytes 0-31, 2 m + 1 in 32-63) |
// 2 bits of qh's 32 bytes at 128 + 32 (m / 2): bits 4 (m % 2) (low half) and
// 4 (m % 2) + 2 (high half), moved to bits 4-5. Each 128-bit lane is one
// 16-value group, so the pair's scale vector is four dwords, one a lane (a
// broadcast load and three merge-masked ones). The integers are the AVX2
// level's lanes after the halves are added (as act16_avx512_k.c's VNNI tile
// makes them), exact per half super-block, and the f32 steps that tile's:
//   acc += float(first half) * (d * d_a);  acc += float(second half) * (d * d_a)
//   acc -= (d * 32 * scale_g) * s_a[g]     (groups 0-7, then 8-15)
// Bounds: a pmaddubsw lane is at most 2 x 63 x 127 = 16002.

// Pair m's unsigned codes of one row's super-block b.
AT AI __m512i bcodes6(const uint8_t *b, const int m) {
  const int n = m >> 1, t = m & 1;
  __m512i l = _mm512_loadu_si512(b + 64 * n);
  if (t) l = _mm512_srli_epi16(l, 4);
  const __m512i q = _mm512_broadcast_i64x4(a16_load(b + 128 + 32 * n));
  __m512i h = t ? _mm512_srlv_epi64(q, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0))
                : _mm512_sllv_epi64(q, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4));
  h = _mm512_and_si512(h, _mm512_set1_epi8(0x30));
  return _mm512_ternarylogic_epi32(l, h, _mm512_set1_epi8(15), 0xec);  // (l & 15) | h
}

// Q6_K: R rows x one token (rows w, w + ws, ..; y[r * yr]).
AT AI void bdec6(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                 float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 210;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    a16_ahead(R, blk, ws, b, 210, A16_K_AHEAD);
    int32_t st[A16_MAXR][16];
    A16_UNROLL for (int r = 0; r < R; r++) bgroup_table(a16_load128(blk + (size_t)r * ws + 192), st[r]);
    __m512i lo[A16_MAXR], hi[A16_MAXR];
    __m256i half[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm512_setzero_si512();
    A16_UNROLL for (int m = 0; m < 4; m++) {
      __m512i xl = _mm512_loadu_si512(q + 64 * m), xh = _mm512_loadu_si512(q + 256 + 64 * m);
      B_KEEP(xl);
      B_KEEP(xh);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m512i c = bcodes6(blk + (size_t)r * ws, m);
        const __m512i s = bgroup_scales(st[r], m);
        lo[r] = _mm512_add_epi32(lo[r], _mm512_madd_epi16(_mm512_maddubs_epi16(c, xl), s));
        hi[r] = _mm512_add_epi32(hi[r], _mm512_madd_epi16(_mm512_maddubs_epi16(c, xh), s));
        B_KEEP(lo[r]);
        B_KEEP(hi[r]);
      }
      if (m == 1) A16_UNROLL for (int r = 0; r < R; r++) {  // exact per half super-block
          half[r] = bfold(lo[r], hi[r]);
          lo[r] = hi[r] = _mm512_setzero_si512();
        }
    }
    const float da = act[b].d;
    A16_UNROLL for (int r = 0; r < R; r++) {
      const uint8_t *br = blk + (size_t)r * ws;
      const float d = a16_f16(br + 208);
      const __m256 dd = _mm256_set1_ps(d * da);
      const __m512 mins = _mm512_mul_ps(
          _mm512_set1_ps(d * 32.0f), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(a16_load128(br + 192))));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(half[r]), dd, acc[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(bfold(lo[r], hi[r])), dd, acc[r]);
      acc[r] = _mm256_fnmadd_ps(_mm512_castps512_ps256(mins), _mm256_loadu_ps(act[b].s), acc[r]);
      acc[r] = _mm256_fnmadd_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(mins), 1)),
                                _mm256_loadu_ps(act[b].s + 8), acc[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- IQ4_XS --------------------------------------------------------------------
//
// Pair m (0-3) is chunks 2 m and 2 m + 1: their 32 code bytes (16 each, low
// nibbles values 0-15, high 16-31) go to 128-bit lanes as A, A, B, B (a
// broadcast load and a merge-masked one), a shift of 4 in lanes 1 and 3, and
// vpshufb through the table gives the signed values in value order. As in
// kdec, the codes take v's sign and multiply |lo| and |hi| (the sign bytes
// of WK_ACT_A16K; no vpsignb at this level: a mask of the negative signs and
// a masked negate, which where v is 0 leaves the code as it is, against |lo|
// = |hi| = 0). Scales one a chunk (kd_prep's, each in both words of a
// dword); the f32 step is kdec's: acc += float(lo + 128 hi) * (d_w * d_a).
// Bounds: a pmaddubsw lane is at most 2 x 127 x 127 = 32258.

// Pair m's signed codes of one row's IQ4_XS block b, with the signs of the
// activations' sign bytes sg.
AT AI __m512i biq4_codes(const uint8_t *b, const int m, const __m512i sg) {
  const uint8_t *p = b + 8 + 32 * m;
  __m512i v = _mm512_broadcast_i32x4(a16_load128(p));
  __asm__("vbroadcasti32x4 %1, %0%{%2%}" : "+v"(v) : "m"(*(const __m128i *)(p + 16)),
          "Yk"((__mmask16)0xff00));
  v = _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)),
                       _mm512_set1_epi8(15));
  const __m512i c = _mm512_shuffle_epi8(
      _mm512_broadcast_i32x4(a16_load128(wk_kern_iq4nl_values)), v);
  return _mm512_mask_sub_epi8(c, _mm512_movepi8_mask(sg), _mm512_setzero_si512(), c);
}

// IQ4_XS: R rows x one token (rows w, w + ws, ..; y[r * yr]).
AT AI void bdeciq4(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                   float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 136;
    const int8_t *e = (const int8_t *)xq + wk_act16k_sign_bytes(nb, b);  // |lo|, |hi|, sign
    a16_ahead(R, blk, ws, b, 136, A16_K_AHEAD);
    kdprep p[A16_MAXR];
    int32_t sc2[A16_MAXR][8];
    const __m256 da = _mm256_set1_ps(act[b].d);
    A16_UNROLL for (int r = 0; r < R; r++) {
      kd_prep(blk + (size_t)r * ws, da, &p[r]);
      const __m256i s = _mm256_loadu_si256((const __m256i *)p[r].s32);
      _mm256_storeu_si256((__m256i *)sc2[r],
                          _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xffff)),
                                          _mm256_slli_epi32(s, 16)));
    }
    __m512i lo[A16_MAXR], hi[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm512_setzero_si512();
    A16_UNROLL for (int m = 0; m < 4; m++) {
      __m512i xl = _mm512_loadu_si512(e + 64 * m), xh = _mm512_loadu_si512(e + 256 + 64 * m);
      const __m512i sg = _mm512_loadu_si512(e + 512 + 64 * m);
      B_KEEP(xl);
      B_KEEP(xh);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m512i c = biq4_codes(blk + (size_t)r * ws, m, sg);
        const __m512i s = bscales(&sc2[r][2 * m], &sc2[r][2 * m + 1]);
        lo[r] = _mm512_add_epi32(lo[r], _mm512_madd_epi16(_mm512_maddubs_epi16(xl, c), s));
        hi[r] = _mm512_add_epi32(hi[r], _mm512_madd_epi16(_mm512_maddubs_epi16(xh, c), s));
        B_KEEP(lo[r]);
        B_KEEP(hi[r]);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(bfold(lo[r], hi[r])), p[r].dd, acc[r]);
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// Rows of the decode tiles (Q4_K: 4 measured faster than 3, 6 and 8).
#define B_DM 4

// T_gemm: A16_DEC_TYPE (act16_x86.h) with decode tiles of B_DM rows.
#define B_TYPE(T, TYPE, DEC) A16_DEC_TYPE(T, TYPE, DEC, B_DM)

// Q6_K's and IQ4_XS's tiles in bdec's form (one type each).
#define bdec6_of(TYPE, R, w, ws, nb, xq, y, yr) bdec6(R, w, ws, nb, xq, y, yr)
#define bdeciq4_of(TYPE, R, w, ws, nb, xq, y, yr) bdeciq4(R, w, ws, nb, xq, y, yr)

B_TYPE(q4_k, WK_Q4_K, bdec)
B_TYPE(q5_k, WK_Q5_K, bdec)
B_TYPE(q6_k, WK_Q6_K, bdec6_of)
B_TYPE(iq4_xs, WK_IQ4_XS, bdeciq4_of)

int wk_act16_avx512bw_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  wk_gemm_fn g = type == WK_Q4_K   ? q4_k_gemm
                 : type == WK_Q5_K ? q5_k_gemm
                 : type == WK_Q6_K ? q6_k_gemm
                 : type == WK_IQ4_XS ? iq4_xs_gemm
                                   : NULL;
  if (!g || !wk_act16_avx2_find(type, dot, gemm)) return 0;
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
