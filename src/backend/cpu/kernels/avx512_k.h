// AVX-512 pieces shared by the super-block tiles of both activation formats
// (act16_avx512_k.c: 16-bit activations; kernels_avx512_k.c: 8-bit). Q3_K's
// tables of 128 + sc (4 - c) and their pshufb index are described in
// act16_avx512_k.c's Q3_K section. Included after act16_x86.h by files that
// define AT with AVX-512 F, BW, VL, VNNI, VBMI and GFNI.
#ifndef WICK_BACKEND_CPU_KERNELS_AVX512_K_H
#define WICK_BACKEND_CPU_KERNELS_AVX512_K_H

#include <immintrin.h>
#include <stdint.h>

// Constants by 128-bit lane: byte (Z_B) or word (Z_W) value a in lane 0, b in
// lane 1, c in lane 2, d in lane 3.
#define Z_B4(v) ((int)(0x01010101u * (uint8_t)(v)))
#define Z_W2(v) ((int)(0x00010001u * (uint16_t)(v)))
#define Z_LANES(F, a, b, c, d)                                                 \
  _mm512_set_epi32(F(d), F(d), F(d), F(d), F(c), F(c), F(c), F(c), F(b), F(b), \
                   F(b), F(b), F(a), F(a), F(a), F(a))
#define Z_BYTES(a, b, c, d) Z_LANES(Z_B4, a, b, c, d)
#define Z_WORDS(a, b, c, d) Z_LANES(Z_W2, a, b, c, d)

// A16_KEEP for any of the 32 vector registers (its "x" takes only the first
// 16, which cost a move in and out for each of the others).
#define Z_KEEP(v) __asm__("" : "+v"(v))

// gf2p8affineqb matrix bit: output bit o of a byte takes its input bit q.
#define ZGF(o, q) (1ull << (q) << 8 * (7 - (o)))

// 32 bytes at p in both 256-bit halves.
AT AI __m512i zbcast32(const uint8_t *p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

AT AI __m512i zload(const void *p) { return _mm512_loadu_si512(p); }

// The high 8 f32 of v (AVX-512 F alone: no DQ).
AT AI __m256 zhigh(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// 32 bytes at a, then 32 at b.
AT AI __m512i zjoin(const uint8_t *a, const uint8_t *b) {
  return _mm512_inserti64x4(zload(a), _mm256_loadu_si256((const __m256i *)b),
                            1);
}

// The f32 whose bits are at p, in all 16 lanes (vpbroadcastd from memory
// takes no vector pipe; GCC keeps such values in a register and broadcasts
// by a shuffle).
AT AI __m512 zbcast_f32(const int32_t *p) {
  __m512i v;
  __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(*p));
  return _mm512_castsi512_ps(v);
}

#define ZQ3_CA(e) ((e)&7)
#define ZQ3_CB(e) ((((e) >> 2) & 3) + 4 * (((e) >> 1) & 1))
// Byte e of lane L: the group's scale index (table A: odd bytes 0, by a
// mask), tables A, B; in the scales of 4 rows (zq3_scales4), row i's.
#define ZQ3_IA(i, L, e)                                                        \
  (16 * (i) + ((e)&1 ? 0 : 4 * ((e) >> 3) + 8 * ((L) >> 1) + ((L)&1)))
#define ZQ3_IB(i, L, e) (16 * (i) + 2 + 4 * ((e)&1) + 8 * ((L) >> 1) + ((L)&1))
#define ZQ3_MASK_A 0x5555555555555555ull
// Word i of a lane (entries 2 i, 2 i + 1, i < 8): multiplier and addend,
// mod 2^16. Table A: one scale s a word, u0 + 256 u1 = s (k0 + 256 k1) +
// 32 c0 + 256 (32 c1), k = 4 - c; table B: two scales, one code, u0 + 256
// u1 = k (s0 + 256 s1) + 257 (32 c).
#define ZQ3_MA(i)                                                              \
  ((uint16_t)(4 - ZQ3_CA(2 * (i)) + 256 * (4 - ZQ3_CA(2 * (i) + 1))))
#define ZQ3_AA(i)                                                              \
  ((uint16_t)(32 * ZQ3_CA(2 * (i)) + 8192 * ZQ3_CA(2 * (i) + 1)))
#define ZQ3_MB(i) ((uint16_t)(4 - ZQ3_CB(2 * (i))))
#define ZQ3_AB(i) ((uint16_t)(8224 * ZQ3_CB(2 * (i))))
#define ZQ3_16(F, i, L)                                                        \
  F(i, L, 0), F(i, L, 1), F(i, L, 2), F(i, L, 3), F(i, L, 4), F(i, L, 5),      \
      F(i, L, 6), F(i, L, 7), F(i, L, 8), F(i, L, 9), F(i, L, 10),             \
      F(i, L, 11), F(i, L, 12), F(i, L, 13), F(i, L, 14), F(i, L, 15)
#define ZQ3_64(F, i)                                                           \
  { ZQ3_16(F, i, 0), ZQ3_16(F, i, 1), ZQ3_16(F, i, 2), ZQ3_16(F, i, 3) }
#define ZQ3_AB4(i)                                                             \
  { ZQ3_64(ZQ3_IA, i), ZQ3_64(ZQ3_IB, i) }
#define ZQ3_8(F) F(0), F(1), F(2), F(3), F(4), F(5), F(6), F(7)
#define ZQ3_32(F)                                                              \
  { ZQ3_8(F), ZQ3_8(F), ZQ3_8(F), ZQ3_8(F) }

static const uint8_t zq3_idx[4][2][64] __attribute__((aligned(64))) = {
    ZQ3_AB4(0), ZQ3_AB4(1), ZQ3_AB4(2), ZQ3_AB4(3)};
static const uint16_t zq3_mul[4][32] __attribute__((aligned(64))) = {
    ZQ3_32(ZQ3_MA), ZQ3_32(ZQ3_AA), ZQ3_32(ZQ3_MB), ZQ3_32(ZQ3_AB)};

// Table A (t = 0) or B (t = 1) of row i of 4 from their stored scales s4
// (zq3_scales4): the products exact mod 2^16, so each byte is its u (0..252).
AT AI __m512i zq3_table(__m512i s4, int i, int t) {
  const __m512i idx = _mm512_load_si512(zq3_idx[i][t]);
  const __m512i s = t ? _mm512_permutexvar_epi8(idx, s4)
                      : _mm512_maskz_permutexvar_epi8(ZQ3_MASK_A, idx, s4);
  const __m512i p = _mm512_mullo_epi16(s, _mm512_load_si512(zq3_mul[2 * t]));
  return _mm512_add_epi16(p, _mm512_load_si512(zq3_mul[2 * t + 1]));
}

// Rows r .. r + 3 (those below R) of a super-block at blk: their stored
// scales s = sc + 32 (lane i: row r + i's 16, in order) and their d (f32,
// lane i), from the 16 bytes at 94 of each row (qs[62..63], scales[12], d):
// low 4 bits of scale j: nibble j / 8 of scales[j % 8]; top 2: bits 2 (j /
// 4) of scales[8 + j % 4].
AT AI __m512i zq3_scales4(const uint8_t *blk, size_t ws, int r, const int R,
                          __m128 *d) {
  __m512i z = _mm512_zextsi128_si512(a16_load128(blk + (size_t)r * ws + 94));
  A16_UNROLL for (int i = 1; i < 4; i++) if (r + i < R) z =
      _mm512_inserti32x4(z, a16_load128(blk + (size_t)(r + i) * ws + 94), i);
  // byte j: scales[j % 8], its nibble j / 8 to bits 0-3 (the bit matrix of
  // each 64-bit lane: bytes 0-7 the low nibble, 8-15 the high)
  const __m512i il =
      _mm512_set4_epi32(0x09080706, 0x05040302, 0x09080706, 0x05040302);
  const long long ml =
      (long long)(ZGF(0, 0) | ZGF(1, 1) | ZGF(2, 2) | ZGF(3, 3));
  const long long mh =
      (long long)(ZGF(0, 4) | ZGF(1, 5) | ZGF(2, 6) | ZGF(3, 7));
  const __m512i lo = _mm512_gf2p8affine_epi64_epi8(
      _mm512_shuffle_epi8(z, il),
      _mm512_set_epi64(mh, ml, mh, ml, mh, ml, mh, ml), 0);
  // byte j: scales[8 + j % 4] >> 2 (j / 4) (a shift per dword), bits 0-1 to 4-5
  const __m512i ih = _mm512_set1_epi32(0x0d0c0b0a);
  __m512i hi = _mm512_srlv_epi32(_mm512_shuffle_epi8(z, ih),
                                 _mm512_set4_epi32(6, 4, 2, 0));
  hi = _mm512_gf2p8affine_epi64_epi8(
      hi, _mm512_set1_epi64((long long)(ZGF(4, 0) | ZGF(5, 1))), 0);
  // d: word 7 of each lane
  const __m128i d4 = _mm512_castsi512_si128(_mm512_permutexvar_epi16(
      _mm512_castsi128_si512(_mm_setr_epi16(7, 15, 23, 31, 7, 15, 23, 31)), z));
  *d = _mm_cvtph_ps(d4);
  return _mm512_or_si512(lo, hi);
}

// G (m) from h: the bit matrix of half f (0: low, 1: high) takes bit 2 m + 4 f
// to bit 2 and bit 2 m + 1 + 4 f to bit 1; the constant sets bits 0 and 3 to m.
#define ZQ3_GM(m, f)                                                           \
  ((long long)(ZGF(2, 2 * (m) + 4 * (f)) | ZGF(1, 2 * (m) + 1 + 4 * (f))))
AT AI __m512i zq3_g(__m512i h, int m) {
  const __m512i a =
      _mm512_set_epi64(ZQ3_GM(m, 1), ZQ3_GM(m, 1), ZQ3_GM(m, 1), ZQ3_GM(m, 1),
                       ZQ3_GM(m, 0), ZQ3_GM(m, 0), ZQ3_GM(m, 0), ZQ3_GM(m, 0));
  return m ? _mm512_gf2p8affine_epi64_epi8(h, a, 9)
           : _mm512_gf2p8affine_epi64_epi8(h, a, 0);
}

// Pair p's pshufb index, from the 64 qs bytes at q and G (p / 2).
AT AI __m512i zq3_index(const uint8_t *q, __m512i g, int p) {
  __m512i x = zload(q);
  if (p >= 2)
    x = _mm512_srli_epi16(x, 4);
  // (c ? x : g) bitwise, c = the bits of the 2-bit codes
  return _mm512_ternarylogic_epi32(x, g, _mm512_set1_epi8(p & 1 ? 12 : 3),
                                   0xe4);
}

#endif
