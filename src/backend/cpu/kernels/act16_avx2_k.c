// AVX2 16-bit-activation kernels for the 256-value super-block formats (Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS against WK_ACT_A16K), and their f32
// decoders.
//
// A super-block is 8 chunks of 32 values. A chunk's codes become one byte
// vector in value order: unsigned, Q6_K's fixed offset (32) coming off in f32
// with the block minimums, or |code| with the sign moved onto the
// activations (IQ4_XS; Q3_K: code - 4, so that its offset is in the integers
// as in the AVX-512 tile, and no f32 term per group is left). One token: pmaddubsw against the chunk's 32
// lo and 32 hi activation bytes, then pmaddwd by the sub-block scales (one
// per 128-bit half: the 16-value groups' own, or the 32-value sub-block's in
// both), into lo and hi int32 accumulators, combined as lo + 128 hi. Several
// tokens: the codes times the scales as int16 once per row, then pmaddwd
// with each token's v (laid out so that a lane sums the same 4 values), the
// same integers. One token of Q4_K, Q5_K, IQ4_XS: kdec (below), the same
// integers again with cheaper scale handling; of Q3_K: kdec16, a row's
// chunks in turn; of Q2_K: kq2dec, the same with cheaper scale and minimum
// handling and the rows' f32 steps after all their integers; the one-token
// tiles prefetch their rows' super-blocks
// A16_K_AHEAD bytes ahead (a16_ahead). Per super-block:
//   acc += float(lanes) * (d_w * d_a)
//   acc -= m * s_a per 16 values     (not Q3_K, IQ4_XS; m: dmin * min, or d * offset * scale;
//                                     Q4_K, Q5_K: per 32, k4_min_term;
//                                     Q2_K: groups 8-15 into a second
//                                     accumulator, kmins2).
// Bounds: a pmaddubsw lane is at most 2 x 63 x 127 = 16002 (Q6_K; IQ4_XS:
// 2 x 127 x 127 = 32258); code x scale fits int16 (63 x 128); a combined
// lane sums 32 products of code x scale x v, at most 32 x 31 x 63 x 16383
// (Q5_K) or 32 x 127 x 32 x 16383 (IQ4_XS), < 2^31; Q6_K's (63 x 128) is
// made per 16 products.
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/act16_kdec.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// Per row and super-block: what the chunks and the final scaling need.
typedef struct kprep {
  __m256i sc;            // int16 scales: 16-value groups 0, 2, .., 14 in the
                         // low half and 1, 3, .., 15 in the high half; or the
                         // 8 sub-block scales in both halves
  float d;               // super-block scale
  __m256 m0, m1;         // per group, times its activation sum, comes off
                         // (formats with mins or fixed offsets)
  __m256 mf;             // Q4_K, Q5_K: the 8 mins as f32 (k4_chunk_sums' order)
  float dmin;            // Q4_K, Q5_K: the super-block's dmin
} kprep;


AT AI int khas_min(const int type) {
  return type == WK_Q2_K || type == WK_Q4_K || type == WK_Q5_K;
}

// Fixed offset of the codes that comes off in f32 (value = d * scale * (code
// - offset)); Q3_K's codes are made signed instead (ksigned).
AT AI int koffset(const int type) { return type == WK_Q6_K ? 32 : 0; }

// Formats whose codes are signed bytes (kcodes.sg; kcodes.c: their magnitudes):
// IQ4_XS's table values, Q3_K's code - 4.
AT AI int ksigned(const int type) { return type == WK_IQ4_XS || type == WK_Q3_K; }

// Formats with a term per group besides the codes' (mins, or Q6_K's offset).
AT AI int kwith_m(const int type) { return type != WK_IQ4_XS && type != WK_Q3_K; }

// Formats whose scales cover 32 values (the others: 16).
AT AI int kscale32(const int type) {
  return type == WK_Q4_K || type == WK_Q5_K || type == WK_IQ4_XS;
}

// 8 bytes (low half of b) -> 8 int16 in both halves; signed or not.
AT AI __m256i kbcast16(__m128i b, int is_signed) {
  return _mm256_broadcastsi128_si256(is_signed ? _mm_cvtepi8_epi16(b) : _mm_cvtepu8_epi16(b));
}

// 16 group scales (bytes of b) -> int16, even groups in the low half, odd
// groups in the high half; signed or not.
AT AI __m256i kscales16(__m128i b, int is_signed) {
  b = _mm_shuffle_epi8(b, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15));
  return is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
}

// 8 bytes (low half of b) -> 8 f32 times f; signed or not.
AT AI __m256 kmins(__m128i b, float f, int is_signed) {
  const __m256i v = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  return _mm256_mul_ps(_mm256_set1_ps(f), _mm256_cvtepi32_ps(v));
}

// The 8 scales (bytes 0-7) and 8 mins (bytes 8-15) of a Q4_K / Q5_K block
// from its 12 packed bytes at s (the 16-byte load reads 4 bytes past them).
// Words a0 a1 a2: scales 0-3 = bytes of a0 & 63, mins 0-3 = bytes of a1 & 63;
// scales 4-7 = low nibbles of a2's bytes | (a0's bytes >> 6) << 4, mins 4-7 =
// high nibbles of a2's bytes | (a1's bytes >> 6) << 4.
AT AI __m128i kscales_k4(const uint8_t *s) {
  const __m128i x = a16_load128(s);
  const __m128i low = _mm_and_si128(x, _mm_set1_epi8(63));  // sc0-3 m0-3
  const __m128i top = _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi8(0x30));
  __m128i a2 = _mm_shuffle_epi32(x, 0xaa);                  // a2 in every word
  a2 = _mm_and_si128(_mm_srlv_epi32(a2, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(15));
  return _mm_unpacklo_epi32(low, _mm_or_si128(a2, top));    // sc0-7 m0-7
}

// Layouts (bytes; d, dmin: f16):
//   Q2_K   scales[16] (low nibble scale, high nibble min) qs[64] d dmin
//   Q3_K   hmask[32] qs[64] scales[12] d
//   Q4_K   d dmin scales[12] qs[128]
//   Q5_K   d dmin scales[12] qh[32] qs[128]
//   Q6_K   ql[128] qh[64] scales[16] (int8) d
//   IQ4_XS d scales_h[2] scales_l[4] qs[128]
AT AI void kprep_block(const int type, const uint8_t *b, kprep *p) {
  switch (type) {
    case WK_Q2_K: {
      const __m128i x = a16_load128(b);
      const __m128i sc = _mm_and_si128(x, _mm_set1_epi8(15));
      const __m128i m = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(15));
      const float dmin = a16_f16(b + 82);
      p->sc = kscales16(sc, 0);
      p->m0 = kmins(m, dmin, 0);
      p->m1 = kmins(_mm_srli_si128(m, 8), dmin, 0);
      p->d = a16_f16(b + 80);
      break;
    }
    case WK_Q3_K:
      p->d = a16_f16(b + 108);
      p->sc = kscales16(a16_scales_q3(b + 96), 1);
      break;
    case WK_Q6_K: {
      const __m128i sc = a16_load128(b + 192);
      p->d = a16_f16(b + 208);
      p->sc = kscales16(sc, 1);
      p->m0 = kmins(sc, p->d * (float)koffset(type), 1);
      p->m1 = kmins(_mm_srli_si128(sc, 8), p->d * (float)koffset(type), 1);
      break;
    }
    case WK_Q4_K:
    case WK_Q5_K: {
      const __m128i v = kscales_k4(b + 4);
      const __m128i twice =
          _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
      const __m128i m = _mm_shuffle_epi8(v, twice);  // m0 m0 m1 m1 .. (per 16 values)
      const float dmin = a16_f16(b + 2);
      p->sc = kbcast16(v, 0);
      p->m0 = kmins(m, dmin, 0);
      p->m1 = kmins(_mm_srli_si128(m, 8), dmin, 0);
      const __m128i mo = _mm_setr_epi8(K4_MINS_ORDER, 0, 0, 0, 0, 0, 0, 0, 0);
      p->mf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_shuffle_epi8(v, mo)));
      p->dmin = dmin;
      p->d = a16_f16(b);
      break;
    }
    default:  // WK_IQ4_XS
      p->sc = _mm256_broadcastsi128_si256(a16_scales_iq4xs(b));
      p->d = a16_f16(b);
      break;
  }
}

// Element i (0..7) of each half of v in all 16-bit lanes.
AT AI __m256i kpick(__m256i v, int i) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(2 * i | (2 * i + 1) << 8)));
}

// Low nibbles (hi = 0) or high nibbles (hi = 1) of every byte.
AT AI __m256i knib(__m256i x, int hi) {
  const __m256i m4 = _mm256_set1_epi8(15);
  return _mm256_and_si256(hi ? _mm256_srli_epi16(x, 4) : x, m4);
}

// Chunk j (values 32 j .. 32 j + 31) of a super-block: its codes in value
// order; unsigned, or |code| with the signed codes in sg (ksigned).
typedef struct kcodes {
  __m256i c, sg;
} kcodes;

AT AI void kchunk(const int type, const uint8_t *b, int j, kcodes *k) {
  switch (type) {
    case WK_Q2_K:  // 2 bits at 2 (j % 4) of qs[32 (j / 4) + l]
      k->c = a16_bits8(a16_load(b + 16 + 32 * (j >> 2)), 2 * (j & 3), 0, 2);
      break;
    case WK_Q3_K: {  // as Q2_K, - 4 where bit j of hmask[l] is clear
      const __m256i hm = a16_load(b);
      const __m256i h = j >= 2 ? _mm256_srli_epi16(hm, j - 2) : _mm256_slli_epi16(hm, 2 - j);
      k->sg = _mm256_sub_epi8(a16_bits8(a16_load(b + 32 + 32 * (j >> 2)), 2 * (j & 3), 0, 2),
                              _mm256_andnot_si256(h, _mm256_set1_epi8(4)));
      k->c = _mm256_abs_epi8(k->sg);
      break;
    }
    case WK_Q4_K:  // nibble (j % 2) of qs[32 (j / 2) + l]
      k->c = knib(a16_load(b + 16 + 32 * (j >> 1)), j & 1);
      break;
    case WK_Q5_K:  // as Q4_K, + 16 where bit j of qh[l] is set
      k->c = _mm256_or_si256(knib(a16_load(b + 48 + 32 * (j >> 1)), j & 1),
                             a16_bits8(a16_load(b + 16), j, 4, 1));
      break;
    case WK_Q6_K: {  // half n = j / 4, q = j % 4: nibble (q / 2) of ql[64 n + 32 (q % 2) + l]
                     // | 2 bits at 2 q of qh[32 n + l]
      const int n = j >> 2, q = j & 3;
      k->c = _mm256_or_si256(knib(a16_load(b + 64 * n + 32 * (q & 1)), q >> 1),
                             a16_bits8(a16_load(b + 128 + 32 * n), 2 * q, 4, 2));
      break;
    }
    default: {  // WK_IQ4_XS: table values of the low nibbles of qs[16 j + l], then the high
      const __m256i lut = a16_bcast16(wk_kern_iq4nl_values);
      const __m256i x = _mm256_srlv_epi32(a16_bcast16(b + 8 + 16 * j),
                                          _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
      k->sg = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, _mm256_set1_epi8(15)));
      k->c = _mm256_abs_epi8(k->sg);
      break;
    }
  }
}

// Chunk j of one row times one token's lo and hi bytes of the chunk, scaled,
// added to *lo and *hi.
AT AI void kproducts(const int type, const kprep *p, const kcodes *k, int j, __m256i xlo,
                     __m256i xhi, __m256i *lo, __m256i *hi) {
  const __m256i s = kpick(p->sc, j);
  if (ksigned(type)) xlo = _mm256_sign_epi8(xlo, k->sg), xhi = _mm256_sign_epi8(xhi, k->sg);
  *lo = _mm256_add_epi32(*lo, _mm256_madd_epi16(_mm256_maddubs_epi16(k->c, xlo), s));
  *hi = _mm256_add_epi32(*hi, _mm256_madd_epi16(_mm256_maddubs_epi16(k->c, xhi), s));
}

// Chunk j's codes times their scales as int16, in the activations' v order
// (wk_act16k_pos): values 0 1 4 5 8 9 12 13 (16 ..) in *c0, the others in *c1.
AT AI void kcodes16(const int type, const kprep *p, const kcodes *k, int j, __m256i *c0,
                    __m256i *c1) {
  const __m256i s = kpick(p->sc, j);
  const char z = (char)0x80;  // pshufb: 0
  if (ksigned(type)) {  // the byte in each high half, then sign-extended
    const __m256i i0 = _mm256_setr_epi8(z, 0, z, 1, z, 4, z, 5, z, 8, z, 9, z, 12, z, 13, z, 0, z,
                                        1, z, 4, z, 5, z, 8, z, 9, z, 12, z, 13);
    const __m256i i1 = _mm256_setr_epi8(z, 2, z, 3, z, 6, z, 7, z, 10, z, 11, z, 14, z, 15, z, 2,
                                        z, 3, z, 6, z, 7, z, 10, z, 11, z, 14, z, 15);
    *c0 = _mm256_srai_epi16(_mm256_shuffle_epi8(k->sg, i0), 8);
    *c1 = _mm256_srai_epi16(_mm256_shuffle_epi8(k->sg, i1), 8);
  } else {
    const __m256i i0 = _mm256_setr_epi8(0, z, 1, z, 4, z, 5, z, 8, z, 9, z, 12, z, 13, z, 0, z, 1,
                                        z, 4, z, 5, z, 8, z, 9, z, 12, z, 13, z);
    const __m256i i1 = _mm256_setr_epi8(2, z, 3, z, 6, z, 7, z, 10, z, 11, z, 14, z, 15, z, 2, z,
                                        3, z, 6, z, 7, z, 10, z, 11, z, 14, z, 15, z);
    *c0 = _mm256_shuffle_epi8(k->c, i0);
    *c1 = _mm256_shuffle_epi8(k->c, i1);
  }
  *c0 = _mm256_mullo_epi16(*c0, s);
  *c1 = _mm256_mullo_epi16(*c1, s);
}

// Q6_K's lanes are made exact per half super-block (chunks 0-3, 4-7): its
// bare codes (up to 63) x scales (up to 128) over 8 chunks could pass 2^31.
AT AI int ksplit(const int type) { return type == WK_Q6_K; }

// Q2_K: the terms of groups 8-15 (m * s_a) go to an accumulator of their
// own, added to the other at the end: the AVX-512 tile keeps one 16-lane
// accumulator a row, this one in lanes 0-7 and those in lanes 8-15 (which
// the f32 step of the integer lanes leaves as they are, adding 0).
AT AI int kmins2(const int type) { return type == WK_Q2_K; }

// lo + 128 hi (exact: the true lane value fits in int32; the adds may wrap).
AT AI __m256i kcombine(__m256i lo, __m256i hi) {
  return _mm256_add_epi32(lo, _mm256_slli_epi32(hi, 7));
}

// ---- the decode tile: R rows x one token (Q4_K, Q5_K, IQ4_XS) ---------------
//
// The formats with one scale per 32 values: per super-block the scales are
// decoded once into memory and each chunk's is broadcast from there (a load,
// where a pick from a register costs a shuffle), and a chunk's activation
// bytes are loaded once for all rows (Q5_K: each row's 8 chunks in turn,
// the activation bytes loaded for each: L2-resident rows, one thread, 0-3%
// faster; Q4_K 0-9% slower that way). Q4_K, Q5_K: two rows' scales and mins
// decode in one vector (a row a 128-bit half), the d and dmin of 4 rows
// convert in one, the mins come off per 32 values (k4_min_term), and all of
// it is made one super-block ahead: about half the operations per
// super-block and row besides the chunks' products that one row at a time
// took (L2-resident rows, one thread: Q4_K 14.4 -> 16.5 GB/s, Q5_K 14.5 ->
// 16). IQ4_XS's signed codes take each value's sign (one psignb) and
// multiply |lo| and |hi|, where ktile moves the codes' signs onto lo and hi
// (two psignb and a pabsb). The chunks' integers and the f32 operations are
// ktile's.

// The int16 at p (a chunk's scale) in all lanes: a broadcast load (GCC would
// move the value through a general register and shuffle it instead).
AT AI __m256i kd_bcastw(const void *p) {
  __m256i v;
  __asm__("vpbroadcastw %1, %0" : "=x"(v) : "m"(*(const int16_t *)p));
  return v;
}

// *lo += pmaddwd(pmaddubsw(a, b), s), *hi += pmaddwd(pmaddubsw(c, d), s)
// (a, c: the unsigned operands). A16_KD_VNNI (act16_avx512_kd.c, which
// compiles this file's decode tile again for AVX-512 VL + VNNI): the add
// folded into the multiply, vpdpwssd, the same int32 lanes (it wraps as
// pmaddwd + paddd) in one op.
AT AI void kd_products(__m256i a, __m256i b, __m256i c, __m256i d, __m256i s, __m256i *lo,
                       __m256i *hi) {
#ifdef A16_KD_VNNI
  *lo = _mm256_dpwssd_epi32(*lo, _mm256_maddubs_epi16(a, b), s);
  *hi = _mm256_dpwssd_epi32(*hi, _mm256_maddubs_epi16(c, d), s);
#else
  *lo = _mm256_add_epi32(*lo, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), s));
  *hi = _mm256_add_epi32(*hi, _mm256_madd_epi16(_mm256_maddubs_epi16(c, d), s));
#endif
  A16_KEEP(*lo);
  A16_KEEP(*hi);
}

// Whether a type's one-token tiles are kdec's (the others keep ktile's loop,
// which measured as fast: their scales cover 16 values, picked from a
// register either way).
AT AI int kdec_type(const int type) {
  return type == WK_Q4_K || type == WK_Q5_K || type == WK_IQ4_XS;
}

// R rows x one token.
AT AI void kdec(const int type, const int R, const uint8_t *w, size_t ws, int64_t nb,
                const uint8_t *xq, float *y, size_t yr) {
  const int bytes = a16_k_bytes(type);
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  // Q4_K, Q5_K: super-block b's terms in p4s[b % 2], made one super-block
  // ahead (its scales go through memory: their loads then wait on nothing)
  k4dprep p4s[2];
  if (type != WK_IQ4_XS && nb > 0) k4_dprep(R, w, ws, act[0].d, &p4s[0]);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    // unsigned codes: the lo and hi bytes; IQ4_XS: |lo|, |hi| and the sign
    const int8_t *q = (const int8_t *)xq + (type == WK_IQ4_XS ? wk_act16k_sign_bytes(nb, b)
                                                              : wk_act16_bytes(WK_ACT_A16K, nb, b));
    kdprep p[A16_MAXR];  // IQ4_XS
    k4dprep *pp = &p4s[b & 1];
    a16_ahead(R, blk, ws, b, (size_t)bytes, A16_K_AHEAD);
    if (type == WK_IQ4_XS) {
      const __m256 da = _mm256_set1_ps(act[b].d);
      A16_UNROLL for (int r = 0; r < R; r++) kd_prep(blk + (size_t)r * ws, da, &p[r]);
    } else {
      if (b + 1 < nb) k4_dprep(R, blk + bytes, ws, act[b + 1].d, &p4s[(b + 1) & 1]);
    }
    __m256i lo[A16_MAXR], hi[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_si256();
    if (type != WK_Q5_K) {  // the chunk's activation vectors in registers for all rows
      A16_UNROLL for (int j = 0; j < 8; j++) {
        const int8_t *qj = q + 32 * j;
        __m256i xl = a16_load(qj), xh = a16_load(qj + 256), sg = _mm256_setzero_si256();
        A16_KEEP(xl);  // (not a load folded into each multiply)
        A16_KEEP(xh);
        if (type == WK_IQ4_XS) sg = a16_load(qj + 512);
        A16_UNROLL for (int r = 0; r < R; r++) {
          kcodes k;
          kchunk(type, blk + (size_t)r * ws, j, &k);
          if (type == WK_IQ4_XS) {  // the signed codes take v's sign, against |lo| and |hi|
            const __m256i c = _mm256_sign_epi8(k.sg, sg);
            kd_products(xl, c, xh, c, kd_bcastw(&p[r].s32[j]), &lo[r], &hi[r]);
          } else {
            kd_products(k.c, xl, k.c, xh, kd_bcastw(&pp->sc[r][j]), &lo[r], &hi[r]);
          }
        }
      }
    } else {  // Q5_K: a row's chunks in turn (its code decoding overlaps)
      A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int j = 0; j < 8; j++) {
        const int8_t *qj = q + 32 * j;
        kcodes k;
        kchunk(type, blk + (size_t)r * ws, j, &k);
        kd_products(k.c, a16_load(qj), k.c, a16_load(qj + 256), kd_bcastw(&pp->sc[r][j]), &lo[r],
                    &hi[r]);
      }
    }
    if (type == WK_IQ4_XS) {
      A16_UNROLL for (int r = 0; r < R; r++)
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kcombine(lo[r], hi[r])), p[r].dd, acc[r]);
    } else {
      const __m256 sums = k4_chunk_sums(&act[b]);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m256 dd = _mm256_broadcast_ss(&pp->dm[2 * r]);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kcombine(lo[r], hi[r])), dd, acc[r]);
        acc[r] = k4_min_term(acc[r], k4_mins(pp, r), sums, _mm256_broadcast_ss(&pp->dm[2 * r + 1]));
      }
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- the decode tile of Q3_K: R rows x one token ------------------------------
//
// Per super-block the d of 4 rows convert in one vector from one dword a row,
// and each row's 8 chunks run in turn (its chunks' code decoding overlaps,
// where ktile's loop interleaved the rows chunk by chunk): L2-resident rows,
// one thread, 3 rows: Q3_K 7.9-8.6 -> 8.6-9.0 GB/s (Q2_K, which took this
// tile too, 7.8-8.6 -> 8.6-9.2; it has its own now, kq2dec). The integers
// and the f32 operations are ktile's. Q6_K keeps ktile's loop: this one
// measured as fast, and it with the per-row terms made one super-block
// ahead, or with each chunk's two scales broadcast from memory and blended,
// 3-7% slower. What bounds these: per chunk and row the 4 multiplies and 2
// adds of every format, a scale pick (16-value scales), and the code
// decoding (Q6_K: 4.25 operations, Q3_K: 4.6).

// Row r's d_w * d_a at dd[r] from the high f16 of the dword at 106 of 4 rows
// at a time (the same f32 values as kprep_block and ktile's d_w * d_a).
AT AI void k16_dprep(const int R, const uint8_t *blk, size_t ws, float da, float *dd) {
  A16_UNROLL for (int r = 0; r < R; r += 4) {  // rows r .. r + 3
    __m128i h = a16_bcast32(blk + (size_t)r * ws + 106);
    A16_UNROLL for (int i = 1; i < 4; i++)
        if (r + i < R)
          h = _mm_blend_epi32(h, a16_bcast32(blk + (size_t)(r + i) * ws + 106), 1 << i);
    float t[8];  // row r + i: lane 2 i + 1
    _mm256_storeu_ps(t, _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(da)));
    A16_UNROLL for (int i = 0; i < 4; i++) {
      if (r + i >= R) break;
      dd[r + i] = t[2 * i + 1];
    }
  }
}

AT AI void kdec16(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                  float *y, size_t yr) {
  const int bytes = a16_k_bytes(WK_Q3_K);
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    const int8_t *e = (const int8_t *)xq + wk_act16k_sign_bytes(nb, b);  // |lo|, |hi|, sign
    float dd[A16_MAXR];
    k16_dprep(R, blk, ws, act[b].d, dd);
    a16_ahead(R, blk, ws, b, (size_t)bytes, A16_K_AHEAD);
    __m256i sc[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++)
        sc[r] = kscales16(a16_scales_q3(blk + (size_t)r * ws + 96), 1);
    __m256i lo[A16_MAXR], hi[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_si256();
    A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int j = 0; j < 8; j++) {
      kcodes k;
      kchunk(WK_Q3_K, blk + (size_t)r * ws, j, &k);
      // the signed codes take v's sign, against |lo| and |hi|
      const __m256i c = _mm256_sign_epi8(k.sg, a16_load(e + 512 + 32 * j));
      kd_products(a16_load(e + 32 * j), c, a16_load(e + 256 + 32 * j), c, kpick(sc[r], j), &lo[r],
                  &hi[r]);
    }
    A16_UNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kcombine(lo[r], hi[r])), _mm256_set1_ps(dd[r]),
                                 acc[r]);
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// ---- Q2_K's decode tile: R rows x one token ---------------------------------
//
// ktile's integers and f32 steps, in another order: per super-block the
// rows' d_w * d_a and dmin convert together (kq2_dprep), every row's int32
// lanes are made first (its 8 chunks in turn, as kdec16 did), then each
// row's f32 steps. A chunk's two scales are picked from the scale bytes as
// words (pshufb: the byte, a zero above), the groups' minimums as 16 x min
// in int32 lanes by a pshufb and an and (times dmin / 16: dmin x min, exact
// either way), d_w * d_a and dmin / 16 broadcast from memory. kdec16, which
// Q2_K took before, widened the scales by pmovzxbw and the minimums by two
// pmovzxbd (each at half a pshufb's rate on Zen 3, measured), broadcast
// d_w * d_a and dmin by two shuffles each, and ran each row's f32 steps
// right after its integers. L2-resident rows, one thread (bench_matvec's
// rows, this gemm and the former one alternating call by call, fastest of
// 3000 calls, 3 runs): 8.7-9.2 -> 9.6-10.4 GB/s (1.08-1.15x) at 4096x14336
// and 14336x4096, 4 rows a tile (3 rows 0-1% slower, 8 rows 3%). Still far
// from the ~15 GB/s that two threads would need for 90% of the read rate:
// per row and super-block the 32 multiplies of 16-bit activations (two
// pmaddubsw and two pmaddwd a chunk) and ~50 other operations; without the
// minimums' terms (10 of them) the tile ran 1.15-1.18x faster.
// Measured slower (the same integers): the codes times their scales as
// bytes from per-row pshufb tables, as the AVX-512 tile (24 multiplies a row
// and super-block where this takes 32, and no scale pick, but a table is a
// pshufb and a pmullw for two chunks, and two chunks' pmaddubsw words add in
// int16 before one pmaddwd widens them: ~80 operations where this takes
// ~85): 1-2% slower; the minimums' terms made before the rows' integers:
// 4-7% slower.

// Row r's d_w * d_a, or dmin / 16, in all lanes from memory (a broadcast
// load: GCC would keep the array in registers and broadcast by shuffles).
AT AI __m256 kd_bcastss(const float *p) {
  __m256 v;
  __asm__("vbroadcastss %1, %0" : "=x"(v) : "m"(*p));
  return v;
}

// Rows r .. r + 3's d_w * d_a at dm[2 r] and dmin / 16 at dm[2 r + 1]
// (exact: a power of two), from their f16 pairs (the dword at 80 of each
// row) converted together.
AT AI void kq2_dprep(const int R, const uint8_t *blk, size_t ws, float da, float *dm) {
  A16_UNROLL for (int r = 0; r < R; r += 4) {
    __m128i h = a16_bcast32(blk + (size_t)r * ws + 80);
    A16_UNROLL for (int i = 1; i < 4; i++)
        if (r + i < R) h = _mm_blend_epi32(h, a16_bcast32(blk + (size_t)(r + i) * ws + 80), 1 << i);
    const __m256 f = _mm256_setr_ps(da, 0.0625f, da, 0.0625f, da, 0.0625f, da, 0.0625f);
    _mm256_store_ps(dm + 2 * r, _mm256_mul_ps(_mm256_cvtph_ps(h), f));
  }
}

// The bytes of b (16, the same in both halves) at lane k of the result
// (bytes k0 + k of the low half, k1 + k of the high half; 4-byte lanes
// with w = 4: the byte zero-extended; 2-byte lanes: w = 2), for a pick by
// pshufb.
#define KQ2_Z (char)0x80
#define KQ2_W2(a) (char)(a), KQ2_Z
#define KQ2_W4(a) (char)(a), KQ2_Z, KQ2_Z, KQ2_Z

AT AI void kq2dec(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                  float *y, size_t yr) {
  const int bytes = a16_k_bytes(WK_Q2_K);
  const wk_act16k *act = (const wk_act16k *)xq;
  const __m256i m15 = _mm256_set1_epi8(15);
  __m256 acc[A16_MAXR], acc2[A16_MAXR];  // acc2: kmins2's
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = acc2[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    float dm[2 * A16_MAXR] __attribute__((aligned(32)));
    kq2_dprep(R, blk, ws, act[b].d, dm);
    a16_ahead(R, blk, ws, b, (size_t)bytes, A16_K_AHEAD);
    __m256i sum[A16_MAXR];  // lo + 128 hi
    A16_UNROLL for (int r = 0; r < R; r++) {
      const uint8_t *br = blk + (size_t)r * ws;
      const __m256i sc = _mm256_and_si256(a16_bcast16(br), m15);
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
      A16_UNROLL for (int j = 0; j < 8; j++) {  // scales 2 j, 2 j + 1 as words
        const int e = 2 * j, o = 2 * j + 1;
        const __m256i s = _mm256_shuffle_epi8(
            sc, _mm256_setr_epi8(KQ2_W2(e), KQ2_W2(e), KQ2_W2(e), KQ2_W2(e), KQ2_W2(e), KQ2_W2(e),
                                 KQ2_W2(e), KQ2_W2(e), KQ2_W2(o), KQ2_W2(o), KQ2_W2(o), KQ2_W2(o),
                                 KQ2_W2(o), KQ2_W2(o), KQ2_W2(o), KQ2_W2(o)));
        kcodes k;
        kchunk(WK_Q2_K, br, j, &k);
        kd_products(k.c, a16_load(q + 32 * j), k.c, a16_load(q + 32 * j + 256), s, &lo, &hi);
      }
      sum[r] = kcombine(lo, hi);
    }
    const __m256 s0 = _mm256_loadu_ps(act[b].s), s1 = _mm256_loadu_ps(act[b].s + 8);
    A16_UNROLL for (int r = 0; r < R; r++) {
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), kd_bcastss(&dm[2 * r]), acc[r]);
      const __m256i raw = a16_bcast16(blk + (size_t)r * ws);  // 16 x min in the high nibbles
      const __m256i hn = _mm256_set1_epi32(0xf0);
      const __m256i m0 = _mm256_and_si256(
          _mm256_shuffle_epi8(raw, _mm256_setr_epi8(KQ2_W4(0), KQ2_W4(1), KQ2_W4(2), KQ2_W4(3),
                                                    KQ2_W4(4), KQ2_W4(5), KQ2_W4(6), KQ2_W4(7))),
          hn);
      const __m256i m1 = _mm256_and_si256(
          _mm256_shuffle_epi8(raw, _mm256_setr_epi8(KQ2_W4(8), KQ2_W4(9), KQ2_W4(10), KQ2_W4(11),
                                                    KQ2_W4(12), KQ2_W4(13), KQ2_W4(14), KQ2_W4(15))),
          hn);
      const __m256 dmin = kd_bcastss(&dm[2 * r + 1]);
      acc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m0)), s0, acc[r]);
      acc2[r] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m1)), s1, acc2[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++)
      y[(size_t)r * yr] = a16_hsum(_mm256_add_ps(acc[r], acc2[r]));
}

// R rows x N tokens. Per super-block each output gets exact int32 lanes, a
// lane the scaled products of 4 consecutive values of each chunk (lanes 0-3:
// its first 16 values, 4-7: the next 16), summed over the chunks (over each
// half super-block for ksplit formats); one token by pmaddubsw on the lo and
// hi bytes (then lo + 128 hi), several by pmaddwd of int16 codes x scales
// with v, the same integers. Then, the same f32 operations either way:
//   acc += float(lanes) * (d_w * d_a);  acc -= m * s_a per 16 values
// (Q4_K, Q5_K: k4_min_term, per 32; Q2_K: kmins2).
AT AI void ktile(const int type, const int R, const int N, const uint8_t *w, size_t ws,
                 int64_t nb, const uint8_t *xq, size_t xs, float *y, size_t ys,
                 size_t yr) {
  if (N == 1 && kdec_type(type)) {
    kdec(type, R, w, ws, nb, xq, y, yr);
    return;
  }
  if (N == 1 && type == WK_Q2_K) {
    kq2dec(R, w, ws, nb, xq, y, yr);
    return;
  }
  if (N == 1 && R > 1 && type == WK_Q3_K) {  // (not ksplit)
    kdec16(R, w, ws, nb, xq, y, yr);
    return;
  }
  const int bytes = a16_k_bytes(type), with_m = kwith_m(type);
  __m256 acc[A16_MAXR][A16_MAXN], acc2[A16_MAXR][A16_MAXN];  // acc2: kmins2's
  A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++)
      acc[r][t] = acc2[r][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    kprep p[A16_MAXR];
    const wk_act16k *a[A16_MAXN];
    if (N == 1) a16_ahead(R, w + (size_t)b * (size_t)bytes, ws, b, (size_t)bytes, A16_K_AHEAD);
    A16_UNROLL for (int r = 0; r < R; r++)
        kprep_block(type, w + (size_t)r * ws + (size_t)b * (size_t)bytes, &p[r]);
    A16_UNROLL for (int t = 0; t < N; t++) a[t] = (const wk_act16k *)(xq + (size_t)t * xs) + b;
    // lo, hi: one token's byte sums; lo alone: several tokens' int16 sums
    __m256i lo[A16_MAXR][A16_MAXN], hi[A16_MAXR][A16_MAXN], half[A16_MAXR][A16_MAXN];
    A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++)
        lo[r][t] = hi[r][t] = half[r][t] = _mm256_setzero_si256();
    A16_UNROLL for (int j = 0; j < 8; j++) {
      A16_UNROLL for (int r = 0; r < R; r++) {
        kcodes k;
        kchunk(type, w + (size_t)r * ws + (size_t)b * (size_t)bytes, j, &k);
        if (N == 1) {
          const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, nb, b) + 32 * j;
          kproducts(type, &p[r], &k, j, a16_load(q), a16_load(q + 256), &lo[r][0], &hi[r][0]);
          A16_KEEP(lo[r][0]);
          A16_KEEP(hi[r][0]);
          continue;
        }
        __m256i c0, c1;
        kcodes16(type, &p[r], &k, j, &c0, &c1);
        A16_UNROLL for (int t = 0; t < N; t++) {
          const int16_t *v = a[t]->v + 32 * j;
          const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(c0, a16_load(v)),
                                             _mm256_madd_epi16(c1, a16_load(v + 16)));
          lo[r][t] = _mm256_add_epi32(lo[r][t], s);
          A16_KEEP(lo[r][t]);
        }
      }
      if (ksplit(type) && j == 3) {
        A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++) {
          half[r][t] = N == 1 ? kcombine(lo[r][t], hi[r][t]) : lo[r][t];
          lo[r][t] = hi[r][t] = _mm256_setzero_si256();
        }
      }
    }
    A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++) {
      const __m256 dd = _mm256_set1_ps(p[r].d * a[t]->d);
      const __m256i sum = N == 1 ? kcombine(lo[r][t], hi[r][t]) : lo[r][t];
      if (ksplit(type)) acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(half[r][t]), dd, acc[r][t]);
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, acc[r][t]);
      if (with_m && kscale32(type)) {  // Q4_K, Q5_K: as the decode tile
        acc[r][t] = k4_min_term(acc[r][t], p[r].mf, k4_chunk_sums(a[t]), _mm256_set1_ps(p[r].dmin));
      } else if (with_m) {
        acc[r][t] = _mm256_fnmadd_ps(p[r].m0, _mm256_loadu_ps(a[t]->s), acc[r][t]);
        __m256 *a2 = kmins2(type) ? &acc2[r][t] : &acc[r][t];
        *a2 = _mm256_fnmadd_ps(p[r].m1, _mm256_loadu_ps(a[t]->s + 8), *a2);
      }
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++)
      y[(size_t)t * ys + (size_t)r * yr] =
          a16_hsum(kmins2(type) ? _mm256_add_ps(acc[r][t], acc2[r][t]) : acc[r][t]);
}

#ifndef A16_KD_VNNI  // (act16_avx512_kd.c takes the tiles above, not the rest)

// Register tiles: main rows x tokens, decode rows (3 for Q6_K's ktile loop
// (L2-resident rows, one thread: 15.9 -> 16.5 GB/s against 2; 4: 6% slower),
// 3 for kdec16's (Q3_K: 2 and 4 measured 1-3% slower), 4 for kq2dec's (Q2_K:
// see there), 4 for kdec's (Q4_K, Q5_K: 2, 3, 6 and 8 measured 2-10%
// slower): measured best).
#define K_RM 1
#define K_RN 4

A16_TYPE(q2_k, WK_Q2_K, ktile, 256, K_RM, K_RN, 4)
A16_TYPE(q3_k, WK_Q3_K, ktile, 256, K_RM, K_RN, 3)
A16_TYPE(q4_k, WK_Q4_K, ktile, 256, K_RM, K_RN, 4)
A16_TYPE(q5_k, WK_Q5_K, ktile, 256, K_RM, K_RN, 4)
A16_TYPE(q6_k, WK_Q6_K, ktile, 256, K_RM, K_RN, 3)
A16_TYPE(iq4_xs, WK_IQ4_XS, ktile, 256, K_RM, K_RN, 4)

// ---- f32 decoding: (d * scale) * code - dmin * min, per sub-block ---------------

// Values 16 i .. 16 i + 15 (i = 0, 1) of chunk j as int16 (code - offset) x scale.
AT AI __m256i kvalues16(const int type, const kprep *p, const kcodes *k, int j, int i) {
  const __m256i v = ksigned(type) ? k->sg : k->c;
  const __m128i h = i ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v);
  __m256i c = ksigned(type) ? _mm256_cvtepi8_epi16(h) : _mm256_cvtepu8_epi16(h);
  c = _mm256_sub_epi16(c, _mm256_set1_epi16((short)koffset(type)));
  const __m256i s = kpick(p->sc, j);  // this half's scale in both halves:
  return _mm256_mullo_epi16(c, _mm256_permute2x128_si256(s, s, i ? 0x11 : 0x00));
}

#define DEQ_K(T, TYPE)                                                                       \
  AT static void T##_deq(const uint8_t *b, float *y, int64_t nb) {                            \
    for (int64_t i = 0; i < nb; i++, b += a16_k_bytes(TYPE), y += 256) {                          \
      kprep p;                                                                               \
      kprep_block(TYPE, b, &p);                                                              \
      const __m256 d = _mm256_set1_ps(p.d);                                                  \
      A16_UNROLL for (int j = 0; j < 8; j++) {                                               \
        kcodes k;                                                                            \
        kchunk(TYPE, b, j, &k);                                                              \
        const __m256i c0 = kvalues16(TYPE, &p, &k, j, 0), c1 = kvalues16(TYPE, &p, &k, j, 1); \
        if (khas_min(TYPE)) {                                                                \
          const __m256 mv = j < 4 ? p.m0 : p.m1;  /* dmin * min of each 16 */                \
          __m256 m0 = _mm256_permutevar8x32_ps(mv, _mm256_set1_epi32((2 * j) & 7));          \
          __m256 m1 = _mm256_permutevar8x32_ps(mv, _mm256_set1_epi32((2 * j + 1) & 7));      \
          m0 = _mm256_sub_ps(_mm256_setzero_ps(), m0);                                       \
          m1 = _mm256_sub_ps(_mm256_setzero_ps(), m1);                                       \
          a16_store16(y + 32 * j, c0, d, &m0);                                               \
          a16_store16(y + 32 * j + 16, c1, d, &m1);                                          \
        } else {                                                                             \
          a16_store16(y + 32 * j, c0, d, NULL);                                              \
          a16_store16(y + 32 * j + 16, c1, d, NULL);                                         \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }
DEQ_K(q2_k, WK_Q2_K)
DEQ_K(q3_k, WK_Q3_K)
DEQ_K(q4_k, WK_Q4_K)
DEQ_K(q5_k, WK_Q5_K)
DEQ_K(q6_k, WK_Q6_K)
DEQ_K(iq4_xs, WK_IQ4_XS)

int wk_act16_avx2_dequant_k(int type, const uint8_t *src, float *dst, int64_t nb) {
  switch (type) {
    case WK_Q2_K: q2_k_deq(src, dst, nb); return 1;
    case WK_Q3_K: q3_k_deq(src, dst, nb); return 1;
    case WK_Q4_K: q4_k_deq(src, dst, nb); return 1;
    case WK_Q5_K: q5_k_deq(src, dst, nb); return 1;
    case WK_Q6_K: q6_k_deq(src, dst, nb); return 1;
    case WK_IQ4_XS: iq4_xs_deq(src, dst, nb); return 1;
    default: return 0;
  }
}

int wk_act16_avx2_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  static const wk_act16_row rows[] = {
      A16_ROW(WK_Q2_K, q2_k), A16_ROW(WK_Q3_K, q3_k), A16_ROW(WK_Q4_K, q4_k),
      A16_ROW(WK_Q5_K, q5_k), A16_ROW(WK_Q6_K, q6_k), A16_ROW(WK_IQ4_XS, iq4_xs),
  };
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm);
}

#endif  // A16_KD_VNNI
