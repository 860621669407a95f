// The one-token decode tile of the 32-value block formats in 512-bit
// vectors (dec8: 8 rows), shared by two levels that differ in how a vector
// of code bytes meets the activation bytes:
//   act16_avx512_q.c    VNNI + VBMI + GFNI + BITALG (vpdpbusd, vpermt2b,
//                       gf2p8affineqb, vpshufbitqmb): two blocks a step
//                       (ZQ_PAIRS 1, below)
//   act16_avx512bw_q.c  AVX-512 BW alone (vpmaddubsw + vpmaddwd, shifts): one
//                       block a step, 4 rows a vector (ZQ_PAIRS 0)
// The level file defines AT, then includes act16_x86.h, then defines
//   zq_dot4(c, x)  4 lanes' exact block sums (see dec8), 4 int32 lanes each
//   zq_high(x)     each byte's bits 4..7 moved to bits 0..3, the others 0
//   zq_lanes4(row, at)  (ZQ_PAIRS 0) the 16 bytes at row[j] + at in 128-bit
//                  lane j (j = 0..3)
//   ZQ_IQ4_NL      1 when the level has an IQ4_NL tile (its codes go in as
//                  table value + 128: up to 241, past pmaddubsw's pair range;
//                  with ZQ_PAIRS only)
//   ZQ_PAIRS       1 for the two-block tile (needs VBMI and BITALG)
// and includes this file once; it defines the gemm of each type and
// zq_gemm_of(type) (NULL for the types without a tile here).
//
// dec8 computes the same integer block sums as the AVX2 decode tile (exact,
// in another order) and then runs that tile's f32 operations in the same
// order, so every output is bit-identical to the AVX2 level's.
#ifndef WICK_BACKEND_CPU_KERNELS_ACT16_ZQ_H
#define WICK_BACKEND_CPU_KERNELS_ACT16_ZQ_H

#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// What comes off a block's integer sum, times the activation sum: Q4_0's and
// Q5_0's fixed offsets, and the 128 added to IQ4_NL's table values.
AT AI int offset_of(const int type) {
  switch (type) {
    case WK_Q4_0: return 8;
    case WK_Q5_0: return 16;
    case WK_IQ4_NL: return 128;
    default: return 0;
  }
}

// Bytes ahead of the current block that the decode tile prefetches in each
// of its rows (the AVX2 decode tile's distance): 512, on Zen 5 1536 (one
// thread from memory, % of the paired read passes at the four shapes, two
// rounds: Q4_0 62-73 -> 70-88, Q5_0 64-77 -> 73-91; session 25). kernels.c
// sets it (wk_kernel_best_level).
extern size_t wk_dec_ahead;
#define DEC_AHEAD wk_dec_ahead

#if ZQ_PAIRS
// ---- two blocks a step ------------------------------------------------------
// Each row's blocks b and b + 1 (36..48 bytes) come in by one 64-byte load;
// per pair of rows (2p, 2p + 1) one vpermt2b gathers their 4 x 16 nibble
// bytes into one vector, 128-bit lane l = row 2p + (l & 1), block b + (l >> 1),
// whose low and high nibbles are the code vectors c[0] (values 0..15) and
// c[1] (16..31); the activations' 16-byte pieces go to the lanes of their
// block (x[i] = piece i of block b, b, b + 1, b + 1). Q5's fifth bits: a
// second vpermt2b puts each lane's 32-bit qh in both of its qwords, and
// vpshufbitqmb picks bit i of it for byte i (c[0]) or 16 + i (c[1]), a mask
// for the byte add of 16. The same gather carries the lanes' f16 d and m
// (scales5); the Q4 formats and IQ4_NL take theirs from the rows' loads by
// dword unpacks (scales4). The 4 pairs' lane sums reduce to the 16 (row,
// block) sums in the order rows 0 2 4 6 1 3 5 7 a block (the order of their
// reduction; the scales are gathered in it too), and the accumulator's
// lanes go to their rows at the end.
//
// Against the one-block tile (3 inserts a code vector, 8 scalar 16-bit qh
// loads with shifts and ors per 4 rows, 8 scalar loads and an unpack tree
// for the scales), a step of 2 blocks x 8 rows has 10 vector loads and 4
// (Q5: 8) byte permutes before its 16 vpdpbusd. On this Zen 4 (3.6 GHz, one
// core, 4096x512, 2048x640 and 640x2048, both tiles in one process call by
// call, medians of 6 rounds): Q4_0 +23-27%, Q4_1 +28-30%, Q5_0 +32-36%,
// Q5_1 +49-52%, IQ4_NL +28-30%; in the rounds where the host let both run
// faster (the one-block tile at ~20 GB/s) +11-28%. A Q4_1 step then takes
// ~44 cycles, of which the 16 vpdpbusd alone would take 16: the rest is
// spread over the codes, the sums' reduction (~8%), the scales (~7%) and
// the f32 steps (~15%). Tried and slower: the next step's codes before this
// step's sums (a two-stage loop: spills, -14..-24%); the qs gather as vpermb
// and a masked vpermb (-3..-9%); the high nibbles by shift and mask
// (-2..-4%), or as 16 x code (t & 0xf0, Q4_0 and Q4_1) with the sum taken
// 16 times over by shifts between the vpdpbusd (-7..-10%); the activations
// by broadcast and masked broadcast loads instead of shuffles (-1..-8%); the
// lo and hi sums as two chains (-1..-3%); the offsets off both blocks in
// one 512-bit step (0..-3%); d and m by four 256-bit vcvtph2ps (+-3%).
// DEC_AHEAD: 0, 512 and 1024 the same in L2; from memory with two threads
// 512 (bench_matvec product / read 71-89% on q4_1 and q5_0 at
// 4096x14336 and 14336x4096) against 49-73% (0) and 62-79% (1024).

// pat in every 128-bit lane plus o_l in each byte (w = 1) or word (w = 2) of
// lane l.
AT AI __m512i lane_add(__m128i pat, const int w, int o0, int o1, int o2, int o3) {
  const int m = w == 1 ? 0x01010101 : 0x00010001;
  const int a = o0 * m, b = o1 * m, c = o2 * m, d = o3 * m;
  const __m512i o = _mm512_setr_epi32(a, a, a, a, b, b, b, b, c, c, c, c, d, d, d, d);
  const __m512i p = _mm512_broadcast_i32x4(pat);
  return w == 1 ? _mm512_add_epi8(p, o) : _mm512_add_epi16(p, o);
}
#define ZQ_IOTA _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

// The word index vector whose word 8 L + w is F(L, w), for F constant once
// inlined (the scales' gathers: L = block (L & 1) and field (L >> 1: d, m),
// w = the output lane, row 2 (w & 3) + (w >> 2)).
#define ZQ_W8(F, L) F(L, 0), F(L, 1), F(L, 2), F(L, 3), F(L, 4), F(L, 5), F(L, 6), F(L, 7)
#define ZQ_WORDS(F) ((__m512i)(__v32hi){ZQ_W8(F, 0), ZQ_W8(F, 1), ZQ_W8(F, 2), ZQ_W8(F, 3)})

// The word at byte o (in dword 0 or 1 of its 128-bit lane) of row r in the
// merged vectors of scales4: dword d of lane j of rows 2q, 2q + 1 sits at
// dwords 2d, 2d + 1 of lane j of the unpack u[q] (q = r / 2), and rows 4..7
// (q = 2, 3) then move to the other qword of their lane in m[q & 1].
AT AI short scale_word(const int r, const int o) {
  const int dw = o / 4 % 4, pos = (2 * dw + r % 2) ^ (r >= 4 ? 2 : 0);
  return (short)(32 * (r / 2 % 2) + 8 * (o / 16) + 2 * pos + o / 2 % 2);
}

// Q4_0, Q4_1, IQ4_NL: the f16 d (and m) of blocks b, b + 1 of the 8 rows
// (v[r]: row r's bytes from block b) as words [b d | b + 1 d | b m | b + 1 m],
// 8 each, rows 0 2 4 6 1 3 5 7. Each block's d and m sit in dword 0 or 1 of
// a 128-bit lane (lane 0 for b; lane 1 for b + 1, at byte 18 or 20), so
// dword unpacks of row pairs and qword swaps merge the 8 rows' into two
// vectors (light shuffles) and one vpermt2w gathers them; 4 masked vpermt2w
// and an or cost 2-5% more.
AT AI __m512i scales4(const int type, const __m512i *v) {
  const int bytes = a16_q_bytes(type);
  __m512i u[4];
  A16_UNROLL for (int q = 0; q < 4; q++) u[q] = _mm512_unpacklo_epi32(v[2 * q], v[2 * q + 1]);
  // rows 4..7 into the qwords rows 0..3 leave free: lane 0's high qword, and
  // lane 1's low (b + 1 in dword 1) or high qword (in dword 0)
  const __mmask16 k = bytes / 4 % 4 ? 0x3c : 0xcc;
  const __m512i m0 = _mm512_mask_shuffle_epi32(u[0], k, u[2], _MM_PERM_BADC);
  const __m512i m1 = _mm512_mask_shuffle_epi32(u[1], k, u[3], _MM_PERM_BADC);
#define ZQ_S4(L, w) scale_word(2 * ((w) & 3) + (w) / 4, ((L) & 1) * bytes + 2 * ((L) >> 1))
  return _mm512_permutex2var_epi16(m0, ZQ_WORDS(ZQ_S4), m1);
#undef ZQ_S4
}

// Q5_0, Q5_1: the same from meta[p] (rows 2p, 2p + 1; lane l: qh, d m, qh,
// d m of row 2p + (l & 1), block b + (l >> 1)). Rows 4..7's d m go to the
// dwords 0 and 2 of rows 0..3's (qh there is done with), one vpermt2w
// gathers the 32 words.
AT AI __m512i scales5(const __m512i *meta) {
  const __m512i m02 = _mm512_mask_shuffle_epi32(meta[0], 0x5555, meta[2], _MM_PERM_DDBB);
  const __m512i m13 = _mm512_mask_shuffle_epi32(meta[1], 0x5555, meta[3], _MM_PERM_DDBB);
  // row 2 q + par, block j, field f: in m02 (q even) or m13 (+32), lane
  // par + 2 j, dword 1 (q < 2) or 0
#define ZQ_S5(L, w) \
  (short)(32 * ((w) & 1) + 8 * ((w) / 4 + 2 * ((L) & 1)) + 2 * (((w) & 3) < 2) + ((L) >> 1))
  return _mm512_permutex2var_epi16(m02, ZQ_WORDS(ZQ_S5), m13);
#undef ZQ_S5
}

// Rows 2p, 2p + 1 (v0, v1: their bytes from block b): the code bytes of
// values 0..15 (c[0]) and 16..31 (c[1]) in lanes l = row 2p + (l & 1), block
// b + (l >> 1); Q5: also *meta (see scales5), whose qh bits add the 16s.
AT AI void codes2(const int type, __m512i v0, __m512i v1, __m512i *c, __m512i *meta) {
  const int bytes = a16_q_bytes(type), at = a16_qs_at(type);
  const __m512i iqs = lane_add(ZQ_IOTA, 1, at, 64 + at, bytes + at, 64 + bytes + at);
  const __m512i t = _mm512_permutex2var_epi8(v0, iqs, v1);
#if ZQ_IQ4_NL
  if (type == WK_IQ4_NL) {  // table value + 128; vpermb reads index bits 0..5 only
    const __m512i lut =
        _mm512_add_epi8(_mm512_broadcast_i32x4(a16_load128(wk_kern_iq4nl_values)),
                        _mm512_set1_epi8((char)128));
    c[0] = _mm512_permutexvar_epi8(t, lut);
    c[1] = _mm512_permutexvar_epi8(zq_high(t), lut);
    return;
  }
#endif
  c[0] = _mm512_and_si512(t, _mm512_set1_epi8(15));
  c[1] = zq_high(t);
  if (type == WK_Q5_0 || type == WK_Q5_1) {  // + 16 where the fifth bit is set
    const int h = type == WK_Q5_0 ? 2 : 4;  // qh's offset
    const __m128i pat = _mm_setr_epi8(h, h + 1, h + 2, h + 3, 0, 1, 2, 3, h, h + 1, h + 2,
                                      h + 3, 0, 1, 2, 3);  // qh, d m, qh, d m
    *meta = _mm512_permutex2var_epi8(v0, lane_add(pat, 1, 0, 64, bytes, 64 + bytes), v1);
    const __m512i sel = _mm512_broadcast_i32x4(ZQ_IOTA), sixteen = _mm512_set1_epi8(16);
    const __mmask64 k0 = _mm512_bitshuffle_epi64_mask(*meta, sel);
    const __mmask64 k1 = _mm512_bitshuffle_epi64_mask(*meta, _mm512_add_epi8(sel, sixteen));
    c[0] = _mm512_mask_add_epi8(c[0], k0, c[0], sixteen);
    c[1] = _mm512_mask_add_epi8(c[1], k1, c[1], sixteen);
  }
}

// Pairs p = 0..3's lane sums (4 int32 lanes a 128-bit lane) -> the 16
// (row, block) sums: dword 4 l + p = row 2 p + (l & 1), block b + (l >> 1),
// i.e. per 256-bit half one block, rows 0 2 4 6 1 3 5 7.
AT AI __m512i red16(const __m512i *s) {
  const __m512i m01 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
  const __m512i m23 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(m01, m23), _mm512_unpackhi_epi64(m01, m23));
}

AT AI __m256 hi256(__m512 v) {  // (AVX-512 F has no vextractf32x8)
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Blocks b, b + 1 (n = 2) or b alone (n = 1) of the 8 rows at blk, blk + ws,
// ..; q: block b's activation bytes (then b + 1's); tail: masked loads, for
// blocks whose 64 bytes would run past the row (the last row of a matrix may
// end its mapping). acc lane w: row 2 (w & 3) + (w >> 2).
AT AI __m256 pair8(const int type, const uint8_t *blk, size_t ws, const int8_t *q,
                   const wk_act16 *act, const int n, const int tail, __m256 acc) {
  const int off = offset_of(type);
  const int has_min = type == WK_Q4_1 || type == WK_Q5_1;
  const __mmask64 lm = (__mmask64)(~0ull >> (64 - n * a16_q_bytes(type)));
  __m512i v[8];
  A16_UNROLL for (int r = 0; r < 8; r++) {
    const uint8_t *p = blk + (size_t)r * ws;
    v[r] = tail ? _mm512_maskz_loadu_epi8(lm, p) : _mm512_loadu_si512(p);
    // one load a row: left to itself GCC loads each row again into the
    // scales' permutes (8 more 64-byte loads a step: 5-10% slower)
    __asm__("" : "+v"(v[r]));
  }
  __m512i x[4];
  const __m512i xa = _mm512_loadu_si512(q), xb = n == 2 ? _mm512_loadu_si512(q + 64) : xa;
  x[0] = _mm512_shuffle_i64x2(xa, xb, 0x00);  // lo bytes 0..15 of b, b, b + 1, b + 1
  x[1] = _mm512_shuffle_i64x2(xa, xb, 0x55);  // lo 16..31
  x[2] = _mm512_shuffle_i64x2(xa, xb, 0xaa);  // hi 0..15
  x[3] = _mm512_shuffle_i64x2(xa, xb, 0xff);  // hi 16..31
  __m512i s[4], meta[4];
  A16_UNROLL for (int p = 0; p < 4; p++) {
    __m512i c[2];
    codes2(type, v[2 * p], v[2 * p + 1], c, &meta[p]);
    s[p] = zq_dot4(c, x);
  }
  const __m512i isum = red16(s);
  const __m512i dm = type == WK_Q5_0 || type == WK_Q5_1 ? scales5(meta) : scales4(type, v);
  const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
  const __m512 mw =
      has_min ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1)) : _mm512_setzero_ps();
  A16_UNROLL for (int j = 0; j < 2; j++) {
    if (j >= n) break;
    __m256i is = j ? _mm512_extracti64x4_epi64(isum, 1) : _mm512_castsi512_si256(isum);
    if (off) is = _mm256_sub_epi32(is, _mm256_set1_epi32(act[j].sum * off));
    const __m256 dwv = j ? hi256(dw) : _mm512_castps512_ps256(dw);
    const __m256 mwv = j ? hi256(mw) : _mm512_castps512_ps256(mw);
    acc = a16_dec_acc(acc, is, dwv, mwv, act[j].d, act[j].s, has_min);
  }
  return acc;
}

// 8 rows (w, w + ws, ..) x one token over nb blocks -> y[r * yr]; the AVX2
// decode tile's f32 operations, in its order.
AT AI void dec8(const int type, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                float *y, size_t yr) {
  const int64_t bytes = a16_q_bytes(type);
  const wk_act16 *act = (const wk_act16 *)xq;
  const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16, nb, 0);
  // steps whose 64-byte loads stay in the row (b bytes + 64 <= nb bytes)
  const int64_t full = nb * bytes < 64 ? 0 : (nb * bytes - 64) / (2 * bytes) + 1;
  const int64_t np = full < nb / 2 ? full : nb / 2;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < np; i++) {
    const uint8_t *blk = w + (size_t)(2 * i * bytes);
    a16_ahead(8, blk, ws, i, (size_t)(2 * bytes), DEC_AHEAD);  // a step as one block
    acc = pair8(type, blk, ws, q + 128 * i, act + 2 * i, 2, 0, acc);
  }
  for (int64_t b = 2 * np; b < nb; b += 2) {
    const int n = nb - b >= 2 ? 2 : 1;
    acc = pair8(type, w + (size_t)(b * bytes), ws, q + 64 * b, act + b, n, 1, acc);
  }
  float out[8];
  _mm256_storeu_ps(out, acc);
  A16_UNROLL for (int o = 0; o < 8; o++) y[(size_t)(2 * (o & 3) + o / 4) * yr] = out[o];
}

#else
// ---- one block a step -------------------------------------------------------
// Rows 0..3 (a, lane j = row j) and 4..7 (b, lane j = row j + 4), 4 int32
// lanes a row -> lane r = row r's sum: the qword unpacks add a row's lanes
// 0, 1 to its lanes 2, 3 (per 128-bit lane j: row j, then row j + 4, two
// dwords each), the shift adds each qword's high dword to its low one, and
// vpermd gathers the low dwords.
AT AI __m256i red8(__m512i a, __m512i b) {
  __m512i x = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  x = _mm512_add_epi32(x, _mm512_srli_epi64(x, 32));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, x));
}

// 4 rows' codes of one block as unsigned bytes (see zq_dot4): c[0] values
// 0..15, c[1] 16..31.
AT AI void codes4(const int type, const uint8_t *const *row, __m512i *c) {
  const __m512i x = zq_lanes4(row, a16_qs_at(type));
  const __m512i xh = zq_high(x);  // bits 4..7 of each byte to bits 0..3, the others 0
  c[0] = _mm512_and_si512(x, _mm512_set1_epi8(15));
  c[1] = xh;
  if (type == WK_Q5_0 || type == WK_Q5_1) {  // + 16 where the fifth bit is set
    const int at = type == WK_Q5_0 ? 2 : 4;  // qh's offset
    uint64_t m0 = 0, m1 = 0;                 // bits 0..15 / 16..31 of row j's qh at 16 j
    A16_UNROLL for (int j = 0; j < 4; j++) {
      m0 |= (uint64_t)a16_u16(row[j] + at) << (16 * j);
      m1 |= (uint64_t)a16_u16(row[j] + at + 2) << (16 * j);
    }
    const __m512i sixteen = _mm512_set1_epi8(16);
    c[0] = _mm512_mask_add_epi8(c[0], _cvtu64_mask64(m0), c[0], sixteen);
    c[1] = _mm512_mask_add_epi8(c[1], _cvtu64_mask64(m1), c[1], sixteen);
  }
}

// 8 rows (w, w + ws, ..) x one token over nb blocks -> y[r * yr]; the AVX2
// decode tile's f32 operations, in its order.
AT AI void dec8(const int type, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                float *y, size_t yr) {
  const size_t bytes = (size_t)a16_q_bytes(type);
  const int off = offset_of(type);
  const int has_min = type == WK_Q4_1 || type == WK_Q5_1;
  const wk_act16 *act = (const wk_act16 *)xq;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * bytes;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16, nb, b);
    a16_ahead(8, blk, ws, b, bytes, DEC_AHEAD);
    const uint8_t *row[8];
    A16_UNROLL for (int r = 0; r < 8; r++) row[r] = blk + (size_t)r * ws;
    __m512i x[4], c[2];
    A16_UNROLL for (int i = 0; i < 4; i++) x[i] = _mm512_broadcast_i32x4(a16_load128(q + 16 * i));
    codes4(type, row, c);
    const __m512i s0 = zq_dot4(c, x);
    codes4(type, row + 4, c);
    const __m512i s1 = zq_dot4(c, x);
    __m256i isum = red8(s0, s1);
    if (off) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(act[b].sum * off));
    __m256 dwv, mwv = _mm256_setzero_ps();
    a16_f16_rows(blk, ws, 8, has_min, &dwv, &mwv);
    acc = a16_dec_acc(acc, isum, dwv, mwv, act[b].d, act[b].s, has_min);
  }
  a16_store_rows8(acc, y, yr);
}

#endif  // ZQ_PAIRS

// gemm from T_dec (8 rows x one token, dec8's contract): one token through
// it as a16_gemm runs it (tile j takes rows j, j + q, .., q = rows / 8; rows
// past 8 q one by one through the AVX2 vec_dot); several tokens through the
// AVX2 level's gemm. A512_TYPE: T_dec is dec8.
#define A512_TYPE(T, TYPE)                                                                  \
  AT static void T##_dec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,       \
                         float *y, size_t yr) {                                              \
    dec8(TYPE, w, ws, nb, xq, y, yr);                                                        \
  }                                                                                          \
  A512_GEMM(T, TYPE)
#define A512_GEMM(T, TYPE)                                                                  \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,      \
                       size_t xs, int n_tokens, float *y, size_t ys) {                      \
    wk_vec_dot_fn dot;                                                                       \
    wk_gemm_fn gemm;                                                                         \
    wk_act16_avx2_find(TYPE, &dot, &gemm);                                                   \
    if (n_tokens != 1) {                                                                     \
      gemm(w, ws, k, rows, xq, xs, n_tokens, y, ys);                                         \
      return;                                                                                \
    }                                                                                        \
    const uint8_t *wb = w;                                                                   \
    const int q = rows / 8;                                                                  \
    for (int j = 0; j < q; j++)                                                              \
      T##_dec(wb + (size_t)j * ws, ws * (size_t)q, k / 32, xq, y + j, (size_t)q);           \
    for (int r = 8 * q; r < rows; r++) y[r] = dot(k, wb + (size_t)r * ws, xq);              \
  }

A512_TYPE(q4_0, WK_Q4_0)
A512_TYPE(q4_1, WK_Q4_1)
A512_TYPE(q5_0, WK_Q5_0)
A512_TYPE(q5_1, WK_Q5_1)
#if ZQ_IQ4_NL
A512_TYPE(iq4_nl, WK_IQ4_NL)
#endif

static wk_gemm_fn zq_gemm_of(const int type) {
  switch (type) {
    case WK_Q4_0: return q4_0_gemm;
    case WK_Q4_1: return q4_1_gemm;
    case WK_Q5_0: return q5_0_gemm;
    case WK_Q5_1: return q5_1_gemm;
#if ZQ_IQ4_NL
    case WK_IQ4_NL: return iq4_nl_gemm;
#endif
    default: return NULL;  // the super-blocks (Q8_0: act16_avx512_q.c's q8_0_gemm)
  }
}

#endif
