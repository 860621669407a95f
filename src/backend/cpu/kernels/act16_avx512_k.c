// AVX-512 16-bit-activation kernels for the super-block formats Q2_K, Q3_K,
// Q6_K and IQ4_XS against WK_ACT_A16K (Q4_K and Q5_K: the AVX2 level's decode
// tile with vpdpwssd, act16_avx512_kd.c; this file's scheme for them
// measured 10-15% slower, see the end). act16.c
// calls these only when cpuid reports AVX-512 F, BW, VL and VNNI, and
// wk_act16_avx512_k_find only when it also reports VBMI (vpermb) and GFNI
// (gf2p8affineqb); otherwise the AVX2 level's kernels run.
//
// One token (the decode path), four tiles:
//
// Q6_K (zq6dec): a super-block's 8 chunks of 32 values go as 4 pairs,
// chunks 2 m and 2 m + 1 in one 512-bit vector (bytes 0-31, 32-63), against
// the activations' 64 lo and 64 hi bytes of the pair (contiguous in the row:
// one load each, shared by the tile's rows): pmaddubsw (codes x lo / hi) then
// vpdpwssd by the scales (the add folded into the multiply). Each int32 lane of a
// pair sums 4 consecutive values of one chunk (lanes 0-7: chunk 2 m, 8-15:
// chunk 2 m + 1), so the two 256-bit halves added give exactly the AVX2
// kernels' 8 lanes (act16_avx2_k.c: lane l = values 4 l .. 4 l + 3 of every
// chunk, scaled); the integers are exact, and the f32 operations after them
// are the AVX2 decode tiles', in the same order:
//   acc += float(lo + 128 hi) * (d_w * d_a)       (per half super-block)
//   acc -= m * s_a per 16 values
// summed across lanes at the end by a16_hsum, so the results are the AVX2
// level's bit for bit (see the Q6_K section).
//
// Q2_K (zq2dec): pshufb tables of code x scale, vpdpbusd, pairs of chunks p
// and p + 4, and one 16-lane f32 accumulator a row: the AVX2 level's kmins2
// order (see the Q2_K section).
//
// Q3_K (zq3dec): pshufb tables of 128 + value, vpdpbusd, the same pairs, the
// offset in the integers (see the Q3_K section).
//
// Q2_K and Q3_K's tiles take the activations of each super-block as their
// pairs, made once for the whole product (zprep; Q3_K: with its offset's
// byte sums), not once per tile; Q3_K's vpdpbusd read them from there as
// their memory operand (see the Q3_K section).
//
// IQ4_XS (yiq4y): 256-bit vectors, a chunk at a time: code x scale as int16
// words by vpermw from a table per scale, vpdpwssd against v as int16 (the
// product's zprep); the AVX2 decode tile's integers and f32 steps (see the
// IQ4_XS section).
// On AMD Zen 5 and Intel (wk_kern_cpu_kind) IQ4_XS takes ziq4w instead: the same in
// 512-bit vectors, a chunk a vector (its nibbles by one vpmultishiftqb, v
// in the product's zprep in that order): 3 vector operations a chunk and
// row against 6. bench_levels on Zen 5 (rows in L2, ratio to the AVX2 tile,
// medians of 4 rounds alternating with yiq4y through WICK_CPU_VENDOR, at
// 4096x512 / 2048x640 / 1024x2048): yiq4y 1.48 / 1.46 / 1.44 (1.41-1.49),
// ziq4w 1.87 / 1.86 / 1.82 (1.65-1.89; 24-26 -> 31-34 GB/s); tiles of 6 or
// 8 rows 4-8% slower than 4. On the device host's Xeon (Sapphire Rapids
// class; 3 rounds, the same shapes) ziq4w ran 1.48-1.58x the AVX2 tile
// against the VNNI build of the AVX2 tile's 1.20x (act16_avx512_kd.c), which
// Intel CPUs without VBMI keep. On Zen 4 the scheme lost (the IQ4_XS section).
//
// Bounds: pmaddubsw lanes stay below 2^15 as in the AVX2 kernels (same
// operands); vpdpwssd wraps like pmaddwd + paddd, and the combined lane is
// exact (the AVX2 file's bounds); Q2_K's vpdpbusd lanes below.
//
// Several tokens: four or more go to the AVX2 level's gemm (its tiles widen
// the codes to int16 once per row); one to three run this file's decode tile
// once per token, which is what the AVX2 gemm does for them too.
//
// Cost on Zen 4 (L2-resident rows, one thread): a 512-bit multiply or
// shuffle takes a 256-bit pipe two cycles, and the byte multiplies (vpdpbusd,
// pmaddubsw, vpdpwssd) share two pipes with the f32 FMAs (and, measured, with
// vpternlog, merge-masked byte ops, vptestmb and vpmovb2m), while broadcasts
// of 128 or 256 bits from memory, vinserti64x4 and vpermb/vpshufb take the
// shuffle pipes; a 32- or 16-bit broadcast from memory (vpbroadcastd/w) and
// a 128-bit one into a 256-bit register (VEX vbroadcasti128) take none. So
// what pays is fewer operations, not width. For Q4_K and Q5_K (one scale
// per 32 values, already cheap in AVX2's kdec, which broadcasts each chunk's
// scale from memory) the pair layout's scale shuffle and wider decode cost
// more than they save: 15.8-17.6 GB/s against AVX2's 17.6-19.9.
#define AT                                                                            \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni," \
                         "avx512vbmi,gfni")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/avx512_k.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// The 16-value groups' int16 scales of pair m, word w (values 2 w, 2 w + 1
// of the pair) taking group 4 m + w / 8, from the 16 scales as words in s.
AT AI __m512i zscales16(__m512i s, int m) {
  return _mm512_permutexvar_epi16(Z_WORDS(4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3), s);
}

// lanes of a pair's int32 sums -> the 8 lanes of one chunk (halves added).
AT AI __m256i zfold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// lo + 128 hi, folded.
AT AI __m256i zcombine(__m512i lo, __m512i hi) {
  return zfold(_mm512_add_epi32(lo, _mm512_slli_epi32(hi, 7)));
}

// ---- Q6_K ---------------------------------------------------------------------
//
// Pair m = 2 n + t (n: half super-block, t = 0, 1) is chunks 2 m and 2 m + 1
// (bytes 0-31, 32-63 of a vector): nibble t of the 64 ql bytes at 64 n (low
// nibbles: chunks 4 n, 4 n + 1; high: 4 n + 2, 4 n + 3) with 2 bits of the 32
// qh bytes at 128 + 32 n on top (chunk 4 n + q's: bits 2 q, 2 q + 1). One
// gf2p8affineqb of qh (broadcast to both halves; each 64-bit lane its own
// bit matrix) moves a pair's two bits to bits 4-5 and clears the rest, and
// one vpternlog puts the nibble under them (before: two variable shifts and
// an and a pair). A half super-block's hi products go first, then x 128,
// then its lo products onto the same lanes (zq6_half), so that no lo + 128 hi
// combine is left; the f32 steps run in the super-block they belong to, from
// 4 rows' d in one vector. Per row and super-block ~46 operations (512-bit
// ones counted 1, 256-bit 1/2) against ~55, none spilled (the former tile
// kept the delayed f32 terms on the stack).
// Measured only on an AVX-512 Xeon (Sapphire Rapids class, the device host;
// no Zen 4 was at hand): bench_levels, one-token products of rows in L2,
// AVX-512 / AVX2 time ratio at 4096x512 / 2048x640 / 1024x2048 / 1536x576,
// medians of 3 rounds: 1.15 / 1.12 / 1.16 / 1.16 -> 1.33 / 1.32 / 1.38 /
// 1.34 (17.5 -> 20-21 GB/s); 3 rows a tile 1.28-1.34, 4 rows 1.32-1.38.
#define ZQ6_GM(q) ((long long)(ZGF(4, 2 * (q)) | ZGF(5, 2 * (q) + 1)))
AT AI __m512i zq6_codes(__m512i l, __m512i h, const int t) {
  const long long a = ZQ6_GM(2 * t), b = ZQ6_GM(2 * t + 1);
  h = _mm512_gf2p8affine_epi64_epi8(h, _mm512_set_epi64(b, b, b, b, a, a, a, a), 0);
  if (t) l = _mm512_srli_epi16(l, 4);
  return _mm512_ternarylogic_epi32(l, h, _mm512_set1_epi8(15), 0xec);  // (l & 15) | h
}

// Half n (chunks 4 n .. 4 n + 3: pairs 2 n, 2 n + 1) of the row at br
// against the super-block's activation bytes q (lo; hi at q + 256), s: the
// row's 16 scales as words. Per int32 lane, sc x code x (lo + 128 hi) over
// 4 values of chunks 4 n and 4 n + 2 (lanes 0-7) or 4 n + 1 and 4 n + 3
// (8-15): pmaddubsw, then vpdpwssd by the scales; the hi products first,
// times 128, then the lo ones added onto them (no second accumulator to
// combine). Exact: a pmaddubsw word is at most 2 x 63 x 127, and the lane
// below 2^31 (the AVX2 level's bound for the folded lane).
AT AI __m512i zq6_half(const uint8_t *br, const uint8_t *q, __m512i s, const int n) {
  const __m512i l = zload(br + 64 * n), h = zbcast32(br + 128 + 32 * n);
  const __m512i c0 = zq6_codes(l, h, 0), c1 = zq6_codes(l, h, 1);
  const __m512i s0 = zscales16(s, 2 * n), s1 = zscales16(s, 2 * n + 1);
  const uint8_t *x = q + 128 * n;
  __m512i v = _mm512_madd_epi16(_mm512_maddubs_epi16(c0, zload(x + 256)), s0);
  v = _mm512_dpwssd_epi32(v, _mm512_maddubs_epi16(c1, zload(x + 320)), s1);
  v = _mm512_slli_epi32(v, 7);
  v = _mm512_dpwssd_epi32(v, _mm512_maddubs_epi16(c0, zload(x)), s0);
  return _mm512_dpwssd_epi32(v, _mm512_maddubs_epi16(c1, zload(x + 64)), s1);
}

// Q6_K: R rows (w, w + ws, ...) x one token; y[r * yr]. Per super-block
// and row the two halves' folded lanes (the AVX2 kernels' 8 lanes), then
// the AVX2 decode tiles' f32 steps in their order:
//   acc += float(half) * (d_w * d_a); acc += float(rest) * (d_w * d_a)
//   acc -= m * s_a per 16 values (m = 32 d_w sc: the codes' offset)
// so every output is the AVX2 level's bit for bit.
AT AI void zq6dec(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                  float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 210;
    a16_ahead(R, blk, ws, b, 210, A16_K_AHEAD);
    const uint8_t *q = xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    // d_w d_a and 32 d_w of rows r .. r + 3 (f32 bits): the d of 4 rows in
    // one vector (16-bit broadcasts from memory, blended)
    int32_t dd[A16_MAXR / 4][2][4];
    A16_UNROLL for (int r = 0; r < R; r += 4) {
      __m128i h = _mm_set1_epi16((short)a16_u16(blk + (size_t)r * ws + 208));
      A16_UNROLL for (int i = 1; i < 4; i++) if (r + i < R) h = _mm_blend_epi16(
          h, _mm_set1_epi16((short)a16_u16(blk + (size_t)(r + i) * ws + 208)), 1 << i);
      const __m128 d = _mm_cvtph_ps(h);
      const __m128 da = _mm_set1_ps(act[b].d), d32 = _mm_set1_ps(32.0f);
      _mm_storeu_si128((__m128i *)dd[r / 4][0], _mm_castps_si128(_mm_mul_ps(d, da)));
      _mm_storeu_si128((__m128i *)dd[r / 4][1], _mm_castps_si128(_mm_mul_ps(d, d32)));
    }
    __m512i s[A16_MAXR];
    __m256i half[A16_MAXR], rest[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) s[r] = _mm512_cvtepi8_epi16(
        _mm256_castsi128_si256(a16_load128(blk + (size_t)r * ws + 192)));
    A16_UNROLL for (int r = 0; r < R; r++) half[r] =
        zfold(zq6_half(blk + (size_t)r * ws, q, s[r], 0));
    A16_UNROLL for (int r = 0; r < R; r++) rest[r] =
        zfold(zq6_half(blk + (size_t)r * ws, q, s[r], 1));
    A16_UNROLL for (int r = 0; r < R; r++) {
      const uint8_t *sc = blk + (size_t)r * ws + 192;
      const __m256 dd_r = _mm512_castps512_ps256(zbcast_f32(&dd[r / 4][0][r % 4]));
      const __m256 d32 = _mm512_castps512_ps256(zbcast_f32(&dd[r / 4][1][r % 4]));
      // m: (32 d_w) x sc, exact as the AVX2 level's
      const __m128i s0 = _mm_loadl_epi64((const __m128i *)sc);
      const __m128i s1 = _mm_loadl_epi64((const __m128i *)(sc + 8));
      const __m256 m0 = _mm256_mul_ps(d32, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s0)));
      const __m256 m1 = _mm256_mul_ps(d32, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s1)));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(half[r]), dd_r, acc[r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rest[r]), dd_r, acc[r]);
      acc[r] = _mm256_fnmadd_ps(m0, _mm256_loadu_ps(act[b].s), acc[r]);
      acc[r] = _mm256_fnmadd_ps(m1, _mm256_loadu_ps(act[b].s + 8), acc[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- Q2_K ---------------------------------------------------------------------
//
// Pair p (0-3) of a super-block is chunks p and p + 4 (bytes 0-31, 32-63):
// chunk p's 2-bit codes are bits 2 p of qs[l], chunk p + 4's bits 2 p of
// qs[32 + l], so the 64 qs bytes as they lie give every pair's codes by one
// and, and one shift for two pairs: pair 0: Q & 3, 1: Q & 12, 2: (Q >> 4) & 3,
// 3: (Q >> 4) & 12 (Q >> 4 in 16-bit lanes: the bits that come down from the
// next byte fall outside the masks). The activations of a pair are the
// chunks' 32 lo (hi) bytes put together by one vinserti64x4, once per
// super-block for the tile's rows. The codes index, by vpshufb, per row and
// super-block two tables of code x scale (4-bit scales: at most 45), each
// 128-bit lane L holding the products of the 16-value group that lane L of
// the pair covers: group ga = 2 p + L % 2 + 8 (L / 2) at entries 1, 2, 3 for
// pairs 0 and 2 (codes c at entry c), the group of pair 1 or 3 at entries 4,
// 8, 12 (code c at 4 c); entry 0 (code 0) is 0 for both. Then one vpdpbusd
// for the lo and one for the hi bytes: a lane sums 4 products of at most 45
// x 127, over 4 pairs at most 91440, so lo + 128 hi stays below 2^24.
//
// The f32 steps: the pair lanes folded to the AVX2 kernels' 8 (their lanes
// 0-7: chunks 0-3, 8-15: chunks 4-7, added), then one 16-lane accumulator a
// row, the 8 lanes in its lanes 0-7 (8-15 get 0) and the 16 groups' terms in
// lanes 0-15:
//   acc += float(lo + 128 hi) * (d_w * d_a);  acc -= (dmin * min_g) * s_a[g]
// the AVX2 level's kmins2 order (act16_avx2_k.c; there groups 8-15 go to a
// second accumulator), one 512-bit multiply and FMA for the groups where
// the former order took two halves (an extract and two more FMAs). Keeping
// all 16 lanes, unfolded, measured 20.0 cycles a row and super-block against
// this 21.2 (L2-resident rows, one thread), but the AVX2 level then has to
// convert and scale two 8-lane halves: its decode tile 5% and its
// multi-token tiles 6% slower. Against the pairs of chunks 2 m and 2 m + 1
// with a 64-entry vpermb table (index code | 4 g: a shift, a vpternlog and a
// vpermb a pair, and two broadcast loads a row) and the former f32 order,
// this runs 24.0 -> 21.2 cycles.
// Rows of a tile go pair by pair (their chains of 4 vpdpbusd side by side);
// 4 rows measured best (3: 4% slower; 6 no faster). The pairs' activations
// come from the product's zprep (joined per tile before: 13.2 -> 14.2 GB/s,
// L2-resident rows, one thread). Measured slower: pairs 2, 3's index by one
// gf2p8affineqb each instead of the shared shift and an and (5%), and the
// tables' vpermb unmasked (a zero byte above the scales; 2%). The groups'
// minimum terms take ~10% of the tile (removing them: 15.3 GB/s).

// The tables' vpermb index: words 0, 1 take the scale of group ga, words 2, 4,
// 6 that of gb (a byte each; the mask below zeroes the other bytes).
#define ZQ2_LANE(ga, gb) 0, 0, 0, gb, 0, 0, 0, gb, 0, 0, 0, gb, 0, ga, 0, ga
#define ZQ2_IDX(ga0, ga1, ga2, ga3, gb0, gb1, gb2, gb3) \
  _mm512_set_epi8(ZQ2_LANE(ga3, gb3), ZQ2_LANE(ga2, gb2), ZQ2_LANE(ga1, gb1), ZQ2_LANE(ga0, gb0))

// A pshufb table from the 16 scales (bytes of sc): per lane, word 0 = (0,
// s_a), word 1 = (2 s_a, 3 s_a), words 2, 4, 6 = (s_b, 2 s_b, 3 s_b) in
// their low bytes (the products fit a byte: no carry into the high one).
AT AI __m512i zq2_table(__m128i sc, const __m512i idx) {
  const __m512i s =
      _mm512_maskz_permutexvar_epi8(0x1115111511151115ull, idx, _mm512_castsi128_si512(sc));
  const __m512i mul = _mm512_set_epi16(0, 3, 0, 2, 0, 1, 770, 256, 0, 3, 0, 2, 0, 1, 770, 256,
                                       0, 3, 0, 2, 0, 1, 770, 256, 0, 3, 0, 2, 0, 1, 770, 256);
  return _mm512_mullo_epi16(s, mul);
}

// A super-block's activations as Q2_K's and Q3_K's pairs (xl, xh: pair p =
// chunks p and p + 4, lo and hi bytes), and, with starts, -128 times each
// pair lane's byte sums (l0, h0: where Q3_K's lanes start).
AT AI void zpairs(const uint8_t *q, const int starts, __m512i *xl, __m512i *xh, __m512i *l0,
                  __m512i *h0) {
  const __m512i b128 = _mm512_set1_epi8((char)0x80);
  *l0 = *h0 = _mm512_setzero_si512();
  A16_UNROLL for (int p = 0; p < 4; p++) {
    xl[p] = zjoin(q + 32 * p, q + 128 + 32 * p);
    xh[p] = zjoin(q + 256 + 32 * p, q + 384 + 32 * p);
    if (starts) {
      *l0 = _mm512_dpbusd_epi32(*l0, b128, xl[p]);
      *h0 = _mm512_dpbusd_epi32(*h0, b128, xh[p]);
    }
  }
  *l0 = _mm512_sub_epi32(_mm512_setzero_si512(), *l0);
  *h0 = _mm512_sub_epi32(_mm512_setzero_si512(), *h0);
}

// What the tiles of a product share, made once for all of them (the joins
// and sums cost each tile 1.5-2.5 operations a row and super-block): per
// super-block ZP_INTS int32, the pairs' xl (4 x 64 bytes), xh, then l0 and
// h0 (with starts = 1); starts = 2 (IQ4_XS): v = lo + 128 hi, 256 int16 in
// value order; 3: the same in ziq4w's order.
#define ZP_INTS 160
AT AI void zprep_at(const uint8_t *xq, int64_t nb, int64_t b, const int starts, int32_t *c) {
  if (starts >= 2) {  // IQ4_XS
    const uint8_t *q = xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    A16_UNROLL for (int i = 0; i < 8; i++) {
      const __m512i l = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + 32 * i)));
      const __m512i h =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + 256 + 32 * i)));
      __m512i v = _mm512_add_epi16(l, _mm512_slli_epi16(h, 7));
      // ziq4w's order: 64-bit lane q holds group 0, 2, 1, 3, 4, 6, 5, 7
      if (starts == 3) v = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 1, 3, 4, 6, 5, 7), v);
      _mm512_storeu_si512(c + 16 * i, v);
    }
    return;
  }
  __m512i xl[4], xh[4], l0, h0;
  zpairs(xq + wk_act16_bytes(WK_ACT_A16K, nb, b), starts, xl, xh, &l0, &h0);
  A16_UNROLL for (int p = 0; p < 4; p++) {
    _mm512_storeu_si512(c + 16 * p, xl[p]);
    _mm512_storeu_si512(c + 64 + 16 * p, xh[p]);
  }
  _mm512_storeu_si512(c + 128, l0);
  _mm512_storeu_si512(c + 144, h0);
}

AT static void zprep(const uint8_t *xq, int64_t nb, const int starts, int32_t *c) {
  for (int64_t b = 0; b < nb; b++, c += ZP_INTS) zprep_at(xq, nb, b, starts, c);
}

// vpdpbusd with the activations' operand read from memory (64 bytes at p):
// Q3_K's tile of 4 rows holds 6 vectors a row (two tables, the hmask, G, lo
// and hi), which with the 8 pair vectors and 2 starts in registers made GCC
// 12 spill 10 vectors a super-block (and reload them); 1 now. From memory (the
// product's zprep, in L1): AVX-512 / AVX2 time ratio at 4096x512 / 2048x640
// / 1024x2048 / 1536x576 on the Xeon above 2.13 / 2.06 / 2.02 / 2.06 ->
// 2.15 / 2.13 / 2.13 / 2.13 (medians of 3 rounds; a first set of rounds
// 2.06 / 2.08 / 2.08 -> 2.12 / 2.15 / 2.08). Q2_K's tile, which spilled only
// its f32 accumulators, measured 2-6% slower so (its loads stay in registers).
AT AI __m512i zdp_m(__m512i acc, __m512i u, const int32_t *p) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const __m512i *)p));
  return acc;
}

// Super-block b's pairs in memory: the product's zprep (c + ZP_INTS b), or
// made into one (c NULL).
AT AI const int32_t *zprep_cb(const uint8_t *xq, int64_t nb, int64_t b, const int32_t *c,
                              const int starts, int32_t *one) {
  if (c) return c + ZP_INTS * b;
  zprep_at(xq, nb, b, starts, one);
  return one;
}

// One row's f32 steps of a super-block (the AVX2 level's kmins2 order): sum,
// its lanes lo + 128 hi folded; dm: d_w * d_a, dmin / 16 (f32 bits); sc: the
// row's 16 scale bytes; s16: the activations' group sums. The tile runs them
// one super-block late, after the next one's tables (as zdec's zapply), so
// that they wait on nothing: 14.0-14.4 -> 14.4-14.7 GB/s (L2-resident rows,
// one thread, medians of 8 runs alternating with the former order).
AT AI void zq2_apply(__m256i sum, const int32_t *dm, const uint8_t *sc, const float *s16,
                     __m512 *acc) {
  // lanes 0-7: the AVX2 kernels' 8 lanes; 8-15: 0, so that they take
  // 0 * dd = +-0, which leaves them as they are (a lane that starts at +0
  // and only takes fnmadd never holds -0)
  const __m512 x = _mm512_zextps256_ps512(_mm256_cvtepi32_ps(sum));
  *acc = _mm512_fmadd_ps(x, zbcast_f32(&dm[0]), *acc);
  // dmin * min: (16 min) * (dmin / 16), both exact, so the same f32 as the
  // AVX2 level's dmin * min (the and keeps the min's nibble, times 16)
  const __m128i m16 = _mm_and_si128(a16_load128(sc), _mm_set1_epi8((char)0xf0));
  const __m512 mf =
      _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m16)), zbcast_f32(&dm[1]));
  *acc = _mm512_fnmadd_ps(mf, _mm512_loadu_ps(s16), *acc);
}

AT AI void zq2dec_loop(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                       const int32_t *c, float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m512 acc[A16_MAXR];
  __m256i pend[A16_MAXR];       // the previous super-block's sums, applied a block late
  int32_t dm[2][2 * A16_MAXR];  // by super-block parity (below)
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
  const __m512i i01 = ZQ2_IDX(0, 1, 8, 9, 2, 3, 10, 11), i23 = ZQ2_IDX(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i m3 = _mm512_set1_epi8(3), mc = _mm512_set1_epi8(12);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 84;
    a16_ahead(R, blk, ws, b, 84, A16_K_AHEAD);
    int32_t one[ZP_INTS] __attribute__((aligned(64)));
    const int32_t *cb = zprep_cb(xq, nb, b, c, 0, one);  // pair p: chunks p and p + 4
    // d_w * d_a at 2 r, dmin / 16 at 2 r + 1 (f32 bits), from the dwords
    // (d, dmin) of 4 rows at a time
    int32_t *dmb = dm[b & 1];
    const float da = act[b].d;
    const __m256 f = _mm256_setr_ps(da, 0.0625f, da, 0.0625f, da, 0.0625f, da, 0.0625f);
    A16_UNROLL for (int r = 0; r < R; r += 4) {
      __m128i h = a16_bcast32(blk + (size_t)r * ws + 80);
      A16_UNROLL for (int i = 1; i < 4; i++)
        if (r + i < R) h = _mm_blend_epi32(h, a16_bcast32(blk + (size_t)(r + i) * ws + 80), 1 << i);
      const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), f);
      _mm256_storeu_si256((__m256i *)(dmb + 2 * r), _mm256_castps_si256(v));
    }
    __m512i t01[A16_MAXR], t23[A16_MAXR], lo[A16_MAXR], hi[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) {
      const __m128i sc = _mm_and_si128(a16_load128(blk + (size_t)r * ws), _mm_set1_epi8(15));
      t01[r] = zq2_table(sc, i01);
      t23[r] = zq2_table(sc, i23);
      lo[r] = hi[r] = _mm512_setzero_si512();
    }
    if (b > 0) A16_UNROLL for (int r = 0; r < R; r++)
        zq2_apply(pend[r], &dm[(b - 1) & 1][2 * r], blk - 84 + (size_t)r * ws, act[b - 1].s,
                  &acc[r]);
    A16_UNROLL for (int p = 0; p < 4; p++) A16_UNROLL for (int r = 0; r < R; r++) {
      __m512i c = zload(blk + (size_t)r * ws + 16);
      if (p >= 2) c = _mm512_srli_epi16(c, 4);
      c = _mm512_shuffle_epi8(p < 2 ? t01[r] : t23[r], _mm512_and_si512(c, p & 1 ? mc : m3));
      lo[r] = _mm512_dpbusd_epi32(lo[r], c, zload(cb + 16 * p));
      hi[r] = _mm512_dpbusd_epi32(hi[r], c, zload(cb + 64 + 16 * p));
      Z_KEEP(lo[r]);
      Z_KEEP(hi[r]);
    }
    A16_UNROLL for (int r = 0; r < R; r++) pend[r] = zcombine(lo[r], hi[r]);
  }
  if (nb > 0) A16_UNROLL for (int r = 0; r < R; r++)
      zq2_apply(pend[r], &dm[(nb - 1) & 1][2 * r], w + (size_t)(nb - 1) * 84 + (size_t)r * ws,
                act[nb - 1].s, &acc[r]);
  A16_UNROLL for (int r = 0; r < R; r++)
      y[(size_t)r * yr] = a16_hsum(_mm256_add_ps(_mm512_castps512_ps256(acc[r]), zhigh(acc[r])));
}

// ---- Q3_K ----------------------------------------------------------------------
//
// The value of code c (0-7: 2 bits of qs, + 4 where the hmask bit is set) in
// a group of scale sc (-32..31) is sc (c - 4). Per row and super-block two
// pshufb tables hold u = 128 + sc (4 - c) (0..252: a byte) for every group
// and code, so that a pair's 64 codes become their u by one pshufb, and one
// vpdpbusd each multiplies them with the activations' lo and hi bytes: the
// scales and the fixed offset both in the integers, no f32 term per group.
// The 128 u v over-count 128 v; the tile's accumulators start at -128 times
// the activations' byte sums (a vpdpbusd of 128 against each pair's bytes,
// once per super-block for the whole product: zprep), so that lo + 128 hi
// of a lane ends at the sum of sc (4 - c) v over its values: minus the AVX2 kernels'
// lane (act16_avx2_k.c, sc (c - 4) v summed the same way), exactly. Then
//   acc -= float(lanes) * (d_w * d_a)
// the AVX2 level's acc += float(their lanes) * (d_w * d_a), bit for bit.
//
// Pair p (0-3) is chunks p and p + 4 (bytes 0-31, 32-63) as in Q2_K above:
// chunk p's 2-bit codes are bits 2 p of qs[l], chunk p + 4's bits 2 p of
// qs[32 + l], their hmask bits bits p and p + 4 of hmask[l]. Pair p's pshufb
// index is one vpternlog: the 2 bits from qs (Q, or Q >> 4 for pairs 2, 3),
// the rest from a vector G (p / 2) made by one gf2p8affineqb of the hmask (in
// both halves; per 64-bit lane its own bit matrix: the low half takes bit
// p, the high half bit p + 4), whose bits 0-3 are exact and bit 7 clear:
//   pairs 0, 2 (table A): bits 0-1 the 2 bits, bit 2 the hmask bit, bit 3 =
//     p / 2; entry e: code e & 7, pair 2 (e / 8)
//   pairs 1, 3 (table B): bits 2-3 the 2 bits, bit 1 the hmask bit, bit 0 =
//     p / 2; entry e: code e / 4 + 4 (e / 2 % 2), pair 1 + 2 (e % 2)
// so that pairs 2 m and 2 m + 1 share G (m): bit 2 the first's hmask bit, bit
// 1 the second's, bits 0 and 3 m.
// 128-bit lane L of a pair covers group 2 chunk + L % 2 (chunk p for L < 2,
// p + 4 above). A table is made from the 16 stored scales s = sc + 32 by a
// vpermb (s of each entry's group at its even byte; table A: 0 at the odd,
// where entries 2 i and 2 i + 1 share the group, table B: the odd entry's
// group, where they share the code), a vpmullw and a vpaddw: a word is
// u0 + 256 u1, a whole number below 2^16 that is s (k0 + 256 k1) + 32 (c0 +
// 256 c1) (table A) or k (s0 + 256 s1) + 257 (32 c) (table B), k = 4 - c,
// so the 16-bit products and sums taken mod 2^16 give every byte exactly.
// The stored scales of 4 rows decode in one 512-bit vector (a row a lane).
// Bounds: a vpdpbusd lane adds 4 products of at most 252 x 127, the lo and
// hi lanes end below 2^20 in magnitude, lo + 128 hi below 2^27.
// L2-resident rows, one thread: 12.3 -> 15.8 GB/s against the former
// version (one vpermb, vpmullw, xor and add a table; four hmask vectors of
// 1-2 shifts and ands a row; the pairs' activations joined and summed per
// tile; the scales decoded per row in 128 bits), the per-product pairs
// (zprep) the largest step (~8%), then the shared G (~7%).

// zq3_scales4, with d_w * d_a (f32 bits) stored at dd[r + i].
AT AI __m512i zq3_rows4(const uint8_t *blk, size_t ws, int r, const int R, float da,
                        int32_t *dd) {
  __m128 d;
  const __m512i s4 = zq3_scales4(blk, ws, r, R, &d);
  _mm_storeu_si128((__m128i *)(dd + r), _mm_castps_si128(_mm_mul_ps(d, _mm_set1_ps(da))));
  return s4;
}

// A row's super-block: the tables, the hmask in both halves (h), G and the
// two accumulators.
typedef struct zq3row {
  __m512i ta, tb, h, g, lo, hi;
} zq3row;

// One row's f32 step of a super-block: its folded lanes sum, d_w * d_a at dd
// (run a super-block late, as Q2_K's zq2_apply: 15.2-16.4 -> 16.0-16.5 GB/s,
// L2-resident rows, one thread; the same at 4096 and 14336 values a row).
AT AI void zq3_apply(__m256i sum, const int32_t *dd, __m256 *acc) {
  *acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(sum), _mm512_castps512_ps256(zbcast_f32(dd)), *acc);
}

AT AI void zq3dec_loop(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                       const int32_t *c, float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  __m256i pend[A16_MAXR];        // the previous super-block's sums, applied a block late
  int32_t ddb[2][A16_MAXR + 3];  // row r: d_w * d_a (f32 bits), by super-block parity
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 110;
    a16_ahead(R, blk, ws, b, 110, A16_K_AHEAD);
    int32_t one[ZP_INTS] __attribute__((aligned(64)));
    const int32_t *cb = zprep_cb(xq, nb, b, c, 1, one);  // pair p: chunks p and p + 4
    int32_t *dd = ddb[b & 1];
    zq3row st[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r += 4) {
      const __m512i s4 = zq3_rows4(blk, ws, r, R, act[b].d, dd);
      A16_UNROLL for (int i = 0; i < 4; i++) {
        if (r + i >= R) break;
        st[r + i].ta = zq3_table(s4, i, 0);
        st[r + i].tb = zq3_table(s4, i, 1);
        st[r + i].h = zbcast32(blk + (size_t)(r + i) * ws);
        st[r + i].lo = zload(cb + 128);
        st[r + i].hi = zload(cb + 144);
      }
    }
    if (b > 0)
      A16_UNROLL for (int r = 0; r < R; r++) zq3_apply(pend[r], &ddb[(b - 1) & 1][r], &acc[r]);
    A16_UNROLL for (int p = 0; p < 4; p++) A16_UNROLL for (int r = 0; r < R; r++) {
      const uint8_t *br = blk + (size_t)r * ws;
      if (p == 0) st[r].g = zq3_g(st[r].h, 0);
      if (p == 2) st[r].g = zq3_g(st[r].h, 1);
      const __m512i u =
          _mm512_shuffle_epi8(p & 1 ? st[r].tb : st[r].ta, zq3_index(br + 32, st[r].g, p));
      st[r].lo = zdp_m(st[r].lo, u, cb + 16 * p);
      st[r].hi = zdp_m(st[r].hi, u, cb + 64 + 16 * p);
      Z_KEEP(st[r].lo);
      Z_KEEP(st[r].hi);
    }
    A16_UNROLL for (int r = 0; r < R; r++) pend[r] = zcombine(st[r].lo, st[r].hi);
  }
  if (nb > 0)
    A16_UNROLL for (int r = 0; r < R; r++) zq3_apply(pend[r], &ddb[(nb - 1) & 1][r], &acc[r]);
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- IQ4_XS ---------------------------------------------------------------------
//
// yiq4y: 256-bit vectors, a chunk (32 values) of a row at a time: its 16 qs
// bytes widened to words by vpmovzxbw are the indices of its low nibbles
// (vpermw on 256 bits takes bits 0-3 of each word), and shifted right by 4
// those of its high nibbles; vpermw looks them up in the table of the
// chunk's scale (yi4_tab: the 16 table values times scale - 32, as words;
// 2 KB, read as vpermw's operand), which gives code x scale as int16 (at
// most 127 x 32), and vpdpwssd multiplies those with v = lo + 128 hi as
// int16 (the product's zprep: each super-block's v in value order, made
// once for all tiles). Per row two accumulators: values 0-15 and 16-31 of
// each chunk, whose int32 lanes sum a pair of values; per super-block
// vphaddd and a vpermq make of them the AVX2 kernels' 8 lanes (values 4 l
// .. 4 l + 3 of every chunk, times its scale), the same integers as the AVX2
// tile's lo + 128 hi (exact: a lane is at most 32 x 127 x 32 x 16383 <
// 2^31, and vpdpwssd wraps as pmaddwd + paddd anyway), and the f32 steps are
// kdec's, in its order:
//   acc += float(lanes) * (d_w * d_a)
// so every output is the AVX2 level's bit for bit. 6 vector operations a
// chunk and row, where the former tile (a chunk's codes by vpermb, v's sign
// by psignb, pmaddubsw against |lo| and |hi|, vpdpwssd by the scale
// broadcast from memory) took 7, and its scales come from general registers
// (a load of 32 x scale a chunk and row, the table's offset).
//
// The scale offsets and d of a super-block are made one super-block ahead
// (vector stores, then loads into general registers): made in the same
// super-block, the loads waited for the stores (18.4 GB/s; ahead 21; the
// vector decode of the 4 rows' scales takes ~9% of the tile).
// Measured on Zen 4 (bench_levels, rows in L2, one thread, alternating call
// by call with the former tile): 1.11-1.18x it (AVX2 tile 1.21x -> 1.37-1.44x).
// Tried: the same in 512-bit vectors (a chunk's codes broadcast to the 4
// lanes, put in v's pos order by vpmultishiftqb, vpermw from a 32-word
// table, one 512-bit vpdpwssd): 0.93-0.98x the former tile (vpmultishiftqb
// takes the multiply pipes on Zen 4, and 512-bit vpermw and the broadcast
// cost as much as two 256-bit ones); 3, 5 or 6 rows a tile: no faster.
#define YI4_V16(s)                                                                          \
  (s) * (-127), (s) * (-104), (s) * (-83), (s) * (-65), (s) * (-49), (s) * (-35), (s) * (-22), \
      (s) * (-10), (s) * 1, (s) * 13, (s) * 25, (s) * 38, (s) * 53, (s) * 69, (s) * 89, (s) * 113
#define YI4_ROW(ls) {YI4_V16((ls)-32)}
#define YI4_8(a)                                                                          \
  YI4_ROW(a), YI4_ROW(a + 1), YI4_ROW(a + 2), YI4_ROW(a + 3), YI4_ROW(a + 4), YI4_ROW(a + 5), \
      YI4_ROW(a + 6), YI4_ROW(a + 7)
// yi4_tab[ls][e] = wk_kern_iq4nl_values[e] * (ls - 32)
static const int16_t yi4_tab[64][16] __attribute__((aligned(64))) = {
    YI4_8(0), YI4_8(8), YI4_8(16), YI4_8(24), YI4_8(32), YI4_8(40), YI4_8(48), YI4_8(56)};

// The 8 bytes at p in every 64-bit lane.
AT AI __m512i zbcast64(const uint8_t *p) {
  long long v;
  memcpy(&v, p, 8);
  return _mm512_set1_epi64(v);
}

// Rows blk .. blk + (R - 1) ws of one super-block: so[r][j] = 2^sh x the
// 6-bit scale of chunk j (the table's row offset: sh 5 for yi4_tab, 6 for
// zi4_tab), dd[r] = d_w * d_a (f32 bits); 4
// rows a 512-bit vector (a row a 128-bit lane: d, scales_h, scales_l).
AT AI void yi4_scales(const int R, const uint8_t *blk, size_t ws, float da, uint16_t (*so)[8],
                      int32_t *dd, const int sh) {
  A16_UNROLL for (int r = 0; r < R; r += 4) {  // rows r .. r + 3 (lane i: row r + i)
    __m512i z = zbcast64(blk + (size_t)r * ws);
    A16_UNROLL for (int i = 1; i < 4; i++) {
      if (r + i >= R) break;
      const __m512i zi = zbcast64(blk + (size_t)(r + i) * ws);
      z = _mm512_mask_blend_epi64((__mmask8)(3 << 2 * i), z, zi);
    }
    // word k of a lane: nibble k of scales_l (bytes 4-7) | 2 bits at 2 k of
    // scales_h (bytes 2-3) << 4 (a16_scales_iq4xs, before its - 32)
    const __m512i la = _mm512_set4_epi32(0x07060706, 0x07060706, 0x05040504, 0x05040504);
    const __m512i ls = _mm512_set4_epi32(0x000c0008, 0x00040000, 0x000c0008, 0x00040000);
    const __m512i hs = _mm512_set4_epi32(0x000e000c, 0x000a0008, 0x00060004, 0x00020000);
    __m512i l4 = _mm512_srlv_epi16(_mm512_shuffle_epi8(z, la), ls);
    __m512i h2 = _mm512_srlv_epi16(_mm512_shuffle_epi8(z, _mm512_set1_epi32(0x03020302)), hs);
    l4 = _mm512_and_si512(l4, _mm512_set1_epi16(15));
    h2 = _mm512_slli_epi16(_mm512_and_si512(h2, _mm512_set1_epi16(3)), 4);
    _mm512_storeu_si512(so[r], _mm512_slli_epi16(_mm512_or_si512(l4, h2), sh));
    const __m128i d4 = _mm512_castsi512_si128(_mm512_permutexvar_epi16(
        _mm512_zextsi128_si512(_mm_setr_epi16(0, 8, 16, 24, 0, 0, 0, 0)), z));
    const __m128 d = _mm_mul_ps(_mm_cvtph_ps(d4), _mm_set1_ps(da));
    _mm_storeu_si128((__m128i *)(dd + r), _mm_castps_si128(d));
  }
}

AT AI void yiq4y(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                 const int32_t *c, float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  const char *tab = (const char *)yi4_tab;
  // super-block b's scale offsets and d at [b % 2], made one super-block
  // ahead: their loads into general registers then find the vector stores
  // done (a load from a store still in flight waited on it)
  uint16_t so[2][A16_MAXR + 3][8];
  int32_t dd[2][A16_MAXR + 3];
  if (nb > 0) yi4_scales(R, w, ws, act[0].d, so[0], dd[0], 5);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 136;
    a16_ahead(R, blk, ws, b, 136, A16_K_AHEAD);
    int32_t one[ZP_INTS] __attribute__((aligned(64)));
    const int16_t *v = (const int16_t *)zprep_cb(xq, nb, b, c, 2, one);
    if (b + 1 < nb)
      yi4_scales(R, blk + 136, ws, act[b + 1].d, so[(b + 1) & 1], dd[(b + 1) & 1], 5);
    uint16_t (*sob)[8] = so[b & 1];
    __m256i sa[A16_MAXR], sb[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) sa[r] = sb[r] = _mm256_setzero_si256();
    A16_UNROLL for (int j = 0; j < 8; j++) {
      __m256i va = a16_load(v + 32 * j), vb = a16_load(v + 32 * j + 16);
      Z_KEEP(va);
      Z_KEEP(vb);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m256i x = _mm256_cvtepu8_epi16(a16_load128(blk + (size_t)r * ws + 8 + 16 * j));
        unsigned o;  // a load (GCC would take it out of a vector by vpextrw)
        __asm__("movzwl %1, %0" : "=r"(o) : "m"(sob[r][j]));
        const __m256i t = a16_load(tab + o);
        sa[r] = _mm256_dpwssd_epi32(sa[r], _mm256_permutexvar_epi16(x, t), va);
        sb[r] = _mm256_dpwssd_epi32(sb[r], _mm256_permutexvar_epi16(_mm256_srli_epi16(x, 4), t), vb);
        Z_KEEP(sa[r]);
        Z_KEEP(sb[r]);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++) {
      __m256i d;
      __asm__("vpbroadcastd %1, %0" : "=v"(d) : "m"(dd[b & 1][r]));
      const __m256i x = _mm256_permute4x64_epi64(_mm256_hadd_epi32(sa[r], sb[r]), 0xd8);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), _mm256_castsi256_ps(d), acc[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ziq4w (AMD Zen 5 and Intel, wk_kern_cpu_kind): yiq4y in 512-bit vectors, a
// chunk of a row a vector. The chunk's 16 qs bytes broadcast to the four
// 128-bit lanes (bytes 0-7 in the even 64-bit lanes, 8-15 in the odd ones)
// and one vpmultishiftqb takes each word's nibble into its low bits: 64-bit
// lane q gets group (4 values) zi4_grp[q] = 0, 2, 1, 3, 4, 6, 5, 7 of the
// chunk (the low nibbles of bytes 0-3 or 4-7 of its half, or their high
// nibbles), and the product's zprep holds v in that order (zprep mode 3).
// vpermw then looks the nibbles up in the chunk's scale's table (zi4_tab:
// yi4_tab's 16 words twice, since bit 4 of an index is the next nibble's
// bit), and one vpdpwssd multiplies them with v: 3 vector operations a chunk
// and row against yiq4y's 6. Per super-block, the two int32 lanes of each
// 64-bit lane added and put in group order by one vpermd give the AVX2
// kernels' 8 lanes (the same integers as yiq4y's), then kdec's f32 step
//   acc += float(lanes) * (d_w * d_a)
// so every output is the AVX2 level's bit for bit.
// On Zen 4 (512-bit operations in two 256-bit halves, vpmultishiftqb on the
// multiply pipes) this scheme ran 0.93-0.98x the tile before yiq4y (see
// above); Zen 5 runs them at full width (bench/RESULTS.md, session 25).
#define ZI4_ROW(ls) {YI4_V16((ls)-32), YI4_V16((ls)-32)}
#define ZI4_8(a)                                                                          \
  ZI4_ROW(a), ZI4_ROW(a + 1), ZI4_ROW(a + 2), ZI4_ROW(a + 3), ZI4_ROW(a + 4), ZI4_ROW(a + 5), \
      ZI4_ROW(a + 6), ZI4_ROW(a + 7)
// zi4_tab[ls][e] = wk_kern_iq4nl_values[e % 16] * (ls - 32)
static const int16_t zi4_tab[64][32] __attribute__((aligned(64))) = {
    ZI4_8(0), ZI4_8(8), ZI4_8(16), ZI4_8(24), ZI4_8(32), ZI4_8(40), ZI4_8(48), ZI4_8(56)};

// vpmultishiftqb's bit offsets: word k of 64-bit lane q takes the nibble at
// bit 8 k (q = 0, 1), 32 + 8 k (2, 3), 4 + 8 k (4, 5), 36 + 8 k (6, 7).
#define ZI4_OFF(o) (long long)(0x0101010101010101ull * (o) + 0x1818101008080000ull)
#define ZI4_SHIFTS                                                                 \
  _mm512_set_epi64(ZI4_OFF(36), ZI4_OFF(36), ZI4_OFF(4), ZI4_OFF(4), ZI4_OFF(32), \
                   ZI4_OFF(32), ZI4_OFF(0), ZI4_OFF(0))

AT AI void ziq4w(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                 const int32_t *c, float *y, size_t yr) {
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  const char *tab = (const char *)zi4_tab;
  const __m512i shifts = ZI4_SHIFTS;
  // lane 2 g of a super-block's sums: group g (64-bit lane q holds zi4_grp[q])
  const __m512i fold = _mm512_setr_epi32(0, 4, 2, 6, 8, 12, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  uint16_t so[2][A16_MAXR + 3][8];
  int32_t dd[2][A16_MAXR + 3];
  if (nb > 0) yi4_scales(R, w, ws, act[0].d, so[0], dd[0], 6);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 136;
    a16_ahead(R, blk, ws, b, 136, A16_K_AHEAD);
    int32_t one[ZP_INTS] __attribute__((aligned(64)));
    const int16_t *v = (const int16_t *)zprep_cb(xq, nb, b, c, 3, one);
    if (b + 1 < nb)
      yi4_scales(R, blk + 136, ws, act[b + 1].d, so[(b + 1) & 1], dd[(b + 1) & 1], 6);
    uint16_t (*sob)[8] = so[b & 1];
    __m512i s[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) s[r] = _mm512_setzero_si512();
    A16_UNROLL for (int j = 0; j < 8; j++) {
      __m512i vj = zload(v + 32 * j);
      Z_KEEP(vj);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m512i x = _mm512_broadcast_i32x4(a16_load128(blk + (size_t)r * ws + 8 + 16 * j));
        unsigned o;  // a load (GCC would take it out of a vector by vpextrw)
        __asm__("movzwl %1, %0" : "=r"(o) : "m"(sob[r][j]));
        const __m512i i = _mm512_multishift_epi64_epi8(shifts, x);
        s[r] = _mm512_dpwssd_epi32(s[r], _mm512_permutexvar_epi16(i, zload(tab + o)), vj);
        Z_KEEP(s[r]);
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++) {
      __m256i d;
      __asm__("vpbroadcastd %1, %0" : "=v"(d) : "m"(dd[b & 1][r]));
      const __m512i t = _mm512_add_epi32(s[r], _mm512_srli_epi64(s[r], 32));
      const __m256i x = _mm512_castsi512_si256(_mm512_permutexvar_epi32(fold, t));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x), _mm256_castsi256_ps(d), acc[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// The tiles' ids: a type's (its tile), or ZT_IQ4W (IQ4_XS's ziq4w).
#define ZT_IQ4W (-2)

// Tiles that take a product's zprep (Q2_K, Q3_K, IQ4_XS; zprep_mode).
AT AI int zhas_prep(const int type) {
  return type == WK_Q2_K || type == WK_Q3_K || type == WK_IQ4_XS || type == ZT_IQ4W;
}

// zprep's starts for a tile.
AT AI int zprep_mode(const int type) {
  return type == ZT_IQ4W ? 3 : type == WK_IQ4_XS ? 2 : type == WK_Q3_K;
}

// One type's one-token tile; c: the product's zprep, or NULL (made in the
// tile). Two copies of the pair tiles' loops, each without a branch in it.
AT AI void ztile(const int type, const int R, const uint8_t *w, size_t ws, int64_t nb,
                 const uint8_t *xq, const int32_t *c, float *y, size_t yr) {
  if (type == WK_Q2_K) {
    if (c) zq2dec_loop(R, w, ws, nb, xq, c, y, yr);
    else zq2dec_loop(R, w, ws, nb, xq, NULL, y, yr);
  } else if (type == WK_Q3_K) {
    if (c) zq3dec_loop(R, w, ws, nb, xq, c, y, yr);
    else zq3dec_loop(R, w, ws, nb, xq, NULL, y, yr);
  } else if (type == WK_IQ4_XS) {
    if (c) yiq4y(R, w, ws, nb, xq, c, y, yr);
    else yiq4y(R, w, ws, nb, xq, NULL, y, yr);
  } else if (type == ZT_IQ4W) {
    if (c) ziq4w(R, w, ws, nb, xq, c, y, yr);
    else ziq4w(R, w, ws, nb, xq, NULL, y, yr);
  } else {
    zq6dec(R, w, ws, nb, xq, y, yr);
  }
}

typedef void (*zdec_fn)(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                        const int32_t *c, float *y, size_t yr);

// Super-blocks of a product up to which zprep is made once for it (on the
// stack, 640 bytes each: 40 KB, so that threads with small stacks can call
// the product; rows of up to 16384 values); longer rows make it in each tile.
#define ZP_NB 64

// One token through tiles of dm rows taking rows j, j + q, j + 2 q, ... (q =
// rows / dm: separate memory streams, as a16_gemm), the rest one by one.
AT static void zgemm1(const int type, zdec_fn dec, zdec_fn one, int dm, const uint8_t *w,
                      size_t ws, int64_t nb, int rows, const uint8_t *xq, float *y) {
  int32_t prep[zhas_prep(type) ? ZP_INTS * ZP_NB : 1] __attribute__((aligned(64)));
  const int32_t *c = NULL;
  if (zhas_prep(type) && nb <= ZP_NB) zprep(xq, nb, zprep_mode(type), prep), c = prep;
  const int q = rows / dm;
  // The first A16_K_AHEAD bytes of each stream, which the tiles' prefetches
  // leave out; small products (a few hundred rows of 6-8
  // super-blocks, a thread's share a few tiles' worth) start their streams
  // often: one thread from memory at 1536x576 / 2048x640, Q2_K 12.0 / 13.0
  // -> 12.6 / 13.3 GB/s, Q3_K 13.4 / 13.0 -> 14.1 / 14.8, Q6_K 17.6 / 19.0 ->
  // 19.1 / 20.0 (medians of 5-6 runs alternating with the build before).
  A16_UNROLL for (int r = 0; r < 4; r++) if (r < dm && q > 0)
      for (size_t o = 0; o < A16_K_AHEAD; o += 64)
        _mm_prefetch((const char *)w + (size_t)r * (size_t)q * ws + o, _MM_HINT_T0);
  for (int j = 0; j < q; j++) dec(w + (size_t)j * ws, ws * (size_t)q, nb, xq, c, y + j, (size_t)q);
  for (int r = q * dm; r < rows; r++) one(w + (size_t)r * ws, ws, nb, xq, c, y + r, 1);
}

// T_vec_dot and T_gemm with decode tiles of DM rows (tile id TILE).
#define Z_TILE(T, TYPE, TILE, DM)                                                            \
  AT static void T##_zdec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,        \
                          const int32_t *c, float *y, size_t yr) {                           \
    ztile(TILE, DM, w, ws, nb, xq, c, y, yr);                                                \
  }                                                                                          \
  AT static void T##_zone(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,        \
                          const int32_t *c, float *y, size_t yr) {                           \
    ztile(TILE, 1, w, ws, nb, xq, c, y, yr);                                                 \
  }                                                                                          \
  static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                      \
    float y;                                                                                 \
    T##_zone(w, 0, n / 256, xq, NULL, &y, 0);                                                \
    return y;                                                                                \
  }                                                                                          \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,       \
                       size_t xs, int n_tokens, float *y, size_t ys) {                      \
    /* the AVX2 gemm's main tiles take 4 tokens */                                          \
    if (n_tokens >= 4 && a16_avx2_gemm(TYPE, w, ws, k, rows, xq, xs, n_tokens, y, ys))      \
      return;                                                                                \
    for (int t = 0; t < n_tokens; t++)                                                       \
      zgemm1(TILE, T##_zdec, T##_zone, DM, w, ws, k / 256, rows,                             \
             (const uint8_t *)xq + (size_t)t * xs, y + (size_t)t * ys);                      \
  }

#define Z_TYPE(T, TYPE, DM) Z_TILE(T, TYPE, TYPE, DM)

Z_TYPE(q2_k, WK_Q2_K, 4)
Z_TYPE(q3_k, WK_Q3_K, 4)
Z_TYPE(q6_k, WK_Q6_K, 4)
Z_TYPE(iq4_xs, WK_IQ4_XS, 4)
Z_TILE(iq4_xs_w, WK_IQ4_XS, ZT_IQ4W, 4)

// (Q4_K and Q5_K first: act16_avx512_kd.c's tile needs VNNI alone.)
int wk_act16_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  __builtin_cpu_init();
  const bool vbmi = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("gfni");
  if (type == WK_IQ4_XS && vbmi && wk_kern_cpu_kind() != WK_CPU_ZEN4) {  // ziq4w
    *dot = iq4_xs_w_vec_dot;
    *gemm = iq4_xs_w_gemm;
    return 1;
  }
  if (wk_act16_avx512_kd_find(type, dot, gemm)) return 1;
  if (!vbmi) return 0;
  static const wk_act16_row rows[] = {
      A16_ROW(WK_Q2_K, q2_k), A16_ROW(WK_Q3_K, q3_k), A16_ROW(WK_Q6_K, q6_k),
      A16_ROW(WK_IQ4_XS, iq4_xs),
  };
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm);
}
