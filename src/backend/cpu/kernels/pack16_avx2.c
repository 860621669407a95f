// The packed decode kernels (pack16.h) of Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL
// for CPUs whose best level is AVX2 (no AVX-512): a group of 16 rows x 1..4
// tokens as two halves of 8 rows, one int32 and one f32 lane a row.
//
// A 64-byte chunk of code bytes is two 256-bit halves (rows 0..7, 8..15),
// each row's 4 code bytes in its own dword: chunk j's low nibbles are values
// 4 j .. 4 j + 3, its high ones 16 + 4 j .. (as in pack16_avx512.c). Without
// VNNI a dword's 4-byte dot takes two steps, and each row's block sum still
// lands in its own lane, with no lane moves:
//   Q4_0, Q4_1, Q5_0, Q5_1: vpmaddubsw of the codes with the activation's 4
//   lo (or hi) bytes broadcast (two products a word), the words of several
//   chunks added, then vpmaddwd with 1 (lo) or 128 (hi): lo + 128 hi.
//   IQ4_NL: its table values + 128 (up to 241) times a byte can pass int16,
//   so each code vector is widened in place, a dword's bytes 0 and 2 as the
//   words of one vector, bytes 1 and 3 of another, and vpmaddwd multiplies
//   them with the activation's int16 values (4 j, 4 j + 2) and (4 j + 1, 4 j
//   + 3) (its v put in that order once a block and token).
// Q4_0, Q5_0 and IQ4_NL then take 8, 16 or 128 x the activation sum off:
// every block sum is the exact integer the AVX2 tiles compute, and each row
// runs a16_dec_acc's f32 steps in block order, so outputs equal the AVX2
// 16-bit-activation vec_dot's bit for bit. Each chunk's two halves go
// against the same broadcasts (1..4 tokens: faster than a half at a time,
// Q4_0 with rows in L2 1.2-1.4x, despite the registers it takes).
//
// Not Q8_0: widened the same way (signed), its kernel ran about the tile's
// speed with rows in L2 and 2-11 points slower from memory (one thread;
// bench/RESULTS.md), as on AVX-512 (matmul.c's cpu_mm_pack).
//
// Bounds: an activation byte is at most 127 in magnitude, a word of
// vpmaddubsw two products: 4-bit codes 2 x 15 x 127 = 3810, 4 chunks' words
// (8 products) added 30480; 5-bit codes 7874, 2 chunks' added 31496 (<
// 32768). A block sum is at most 32 x 241 x 16383 < 1.3e8.
//
// AT: act16_x86.h's AVX2 + FMA + F16C; pack16.c calls these only at that
// level or above.
#include "backend/cpu/kernels/pack16_x86.h"

AT AI int p2_has_m(const int type) { return type == WK_Q4_1 || type == WK_Q5_1; }
AT AI int p2_has_qh(const int type) { return type == WK_Q5_0 || type == WK_Q5_1; }
// Codes widened to int16 (else bytes against the lo and hi bytes).
AT AI int p2_wide(const int type) { return type == WK_IQ4_NL; }

// What comes off a block sum, times the activation sum.
AT AI int p2_offset(const int type) {
  switch (type) {
    case WK_Q4_0: return 8;
    case WK_Q5_0: return 16;
    case WK_IQ4_NL: return 128;
    default: return 0;
  }
}

// Chunk j's codes of one half (its 32 bytes at p): *lo values 4 j .. 4 j +
// 3, *hi values 16 + 4 j .. (Q5: fifth bits from the half's qh dwords at
// qh; IQ4_NL: table values + 128).
AT AI void chunk_codes(const int type, const uint8_t *p, const uint8_t *qh, const int j,
                       __m256i *lo, __m256i *hi) {
  const __m256i raw = a16_load(p), m4 = _mm256_set1_epi8(15);
  *lo = _mm256_and_si256(raw, m4);
  *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
  if (type == WK_IQ4_NL) {
    const __m256i lut =
        _mm256_add_epi8(a16_bcast16(wk_kern_iq4nl_values), _mm256_set1_epi8((char)128));
    *lo = _mm256_shuffle_epi8(lut, *lo);
    *hi = _mm256_shuffle_epi8(lut, *hi);
  }
  if (p2_has_qh(type)) {  // byte i bit j of a row's qh: value 4 j + i's fifth bit, to bit 4
    const __m256i h = a16_load(qh), b4 = _mm256_set1_epi8(16);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_slli_epi32(h, 4 - j), b4));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_srli_epi32(h, j), b4));
  }
}

// A token's 32 int16 values v in pairs at e: dword 2 j = values 4 j, 4 j + 2;
// dword 2 j + 1 = values 4 j + 1, 4 j + 3.
AT AI void pairs(const int16_t *v, int16_t *e) {
  const __m256i k = _mm256_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15, 0, 1,
                                     4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  _mm256_storeu_si256((__m256i *)e, _mm256_shuffle_epi8(a16_load(v), k));
  _mm256_storeu_si256((__m256i *)(e + 16), _mm256_shuffle_epi8(a16_load(v + 16), k));
}

// Block sums s[2 t + h] of both halves (the half at qs + 32 h, qh + 32 h)
// for NT tokens (lo bytes at q[t], hi bytes 32 on; pairs at e[t]), chunk by
// chunk: each chunk's codes against every token, each broadcast against both
// halves. Byte codes: the words of `per` chunks add before vpmaddwd (see
// Bounds); wide codes: a dword's bytes 0, 2 and 1, 3 as words. A16_KEEP
// holds the sums in order (else GCC builds a tree of all the products,
// which spills).
AT AI void sums(const int type, const int NT, const uint8_t *qs, const uint8_t *qh,
                const int8_t *const *q, int16_t (*e)[32], __m256i *s) {
  const int per = p2_has_qh(type) ? 2 : 4;
  const __m256i one = _mm256_set1_epi16(1), w128 = _mm256_set1_epi16(128);
  __m256i lo[2 * WK_PACK16_MAX_TOKENS], hi[2 * WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int i = 0; i < 2 * NT; i++) s[i] = _mm256_setzero_si256();
  A16_UNROLL for (int j = 0; j < 4; j++) {
    __m256i c[2][2];  // half h: values 4 j .., then 16 + 4 j ..
    A16_UNROLL for (int h = 0; h < 2; h++)
        chunk_codes(type, qs + 64 * j + 32 * h, qh + 32 * h, j, &c[h][0], &c[h][1]);
    if (p2_wide(type)) {
      A16_UNROLL for (int v = 0; v < 2; v++) {
        __m256i ev[2], od[2];
        A16_UNROLL for (int h = 0; h < 2; h++) {
          ev[h] = _mm256_and_si256(c[h][v], _mm256_set1_epi16(0xff));
          od[h] = _mm256_srli_epi16(c[h][v], 8);
        }
        const int at = 4 * (j + 4 * v);  // code vector j + 4 v's pairs
        A16_UNROLL for (int t = 0; t < NT; t++) {
          const __m256i xe = a16_bcast4(e[t] + at), xo = a16_bcast4(e[t] + at + 2);
          A16_UNROLL for (int h = 0; h < 2; h++) {
            __m256i *sv = &s[2 * t + h];
            *sv = _mm256_add_epi32(*sv, _mm256_madd_epi16(ev[h], xe));
            *sv = _mm256_add_epi32(*sv, _mm256_madd_epi16(od[h], xo));
            A16_KEEP(*sv);
          }
        }
      }
      continue;
    }
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const int8_t *xl = q[t], *xh = q[t] + 32;
      const __m256i l0 = a16_bcast4(xl + 4 * j), l1 = a16_bcast4(xl + 16 + 4 * j);
      const __m256i h0 = a16_bcast4(xh + 4 * j), h1 = a16_bcast4(xh + 16 + 4 * j);
      A16_UNROLL for (int h = 0; h < 2; h++) {
        const int i = 2 * t + h;
        const __m256i pl = _mm256_add_epi16(_mm256_maddubs_epi16(c[h][0], l0),
                                            _mm256_maddubs_epi16(c[h][1], l1));
        const __m256i ph = _mm256_add_epi16(_mm256_maddubs_epi16(c[h][0], h0),
                                            _mm256_maddubs_epi16(c[h][1], h1));
        lo[i] = j % per ? _mm256_add_epi16(lo[i], pl) : pl;
        hi[i] = j % per ? _mm256_add_epi16(hi[i], ph) : ph;
        A16_KEEP(lo[i]);
        A16_KEEP(hi[i]);
        if (j % per == per - 1)
          s[i] = _mm256_add_epi32(s[i], _mm256_add_epi32(_mm256_madd_epi16(lo[i], one),
                                                         _mm256_madd_epi16(hi[i], w128)));
      }
    }
  }
}

// Block b of the group (its fields at d, m, qh, qs) x NT tokens into acc
// (acc[2 t + h]: token t, half h).
AT AI void block(const int type, const int NT, const uint8_t *d, const uint8_t *m,
                 const uint8_t *qh, const uint8_t *qs, int64_t nb, int64_t b, const uint8_t *xq,
                 size_t xs, __m256 *acc) {
  const int off = p2_offset(type), has_m = p2_has_m(type);
  int16_t e[WK_PACK16_MAX_TOKENS][32] __attribute__((aligned(32)));
  if (p2_wide(type))
    A16_UNROLL for (int t = 0; t < NT; t++)
        pairs(((const wk_act16 *)(xq + (size_t)t * xs) + b)->v, e[t]);
  __m256i s[2 * WK_PACK16_MAX_TOKENS];  // s[2 t + h]
  const int8_t *q[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++)
      q[t] = (const int8_t *)(xq + (size_t)t * xs) + wk_act16_bytes(WK_ACT_A16, nb, b);
  sums(type, NT, qs, qh, q, e, s);
  A16_UNROLL for (int h = 0; h < 2; h++) {
    const __m256 dw = _mm256_cvtph_ps(a16_load128(d + 16 * h));
    const __m256 mw = has_m ? _mm256_cvtph_ps(a16_load128(m + 16 * h)) : _mm256_setzero_ps();
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const wk_act16 *a = (const wk_act16 *)(xq + (size_t)t * xs) + b;
      __m256i v = s[2 * t + h];
      if (off) v = _mm256_sub_epi32(v, _mm256_set1_epi32(a->sum * off));
      acc[2 * t + h] = a16_dec_acc(acc[2 * t + h], v, dw, mw, a->d, a->s, has_m);
    }
  }
}

// One group x NT tokens -> y[t * ys + r].
AT AI void group(const int type, const int NT, const uint8_t *g, int64_t nb, const uint8_t *xq,
                 size_t xs, float *y, size_t ys) {
  const size_t bytes = (size_t)a16_q_bytes(type), chunk = 256;  // chunk: a block's qs
  const size_t mb = p2_has_m(type) ? 32 : 0, qb = p2_has_qh(type) ? 64 : 0;
  __m256 acc[2 * WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int i = 0; i < 2 * NT; i++) acc[i] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {  // a pair: d d m m qh qh qs qs
    const uint8_t *d = g + 16 * (size_t)b * bytes, *m = d + 64, *qh = m + 2 * mb,
                  *qs = qh + 2 * qb;
    ahead(d, 32 * bytes);
    block(type, NT, d, m, qh, qs, nb, b, xq, xs, acc);
    block(type, NT, d + 32, m + 32, qh + 64, qs + chunk, nb, b + 1, xq, xs, acc);
  }
  if (b < nb) {  // the last block alone
    const uint8_t *d = g + 16 * (size_t)b * bytes, *m = d + 32, *qh = m + mb, *qs = qh + qb;
    block(type, NT, d, m, qh, qs, nb, b, xq, xs, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) {
    _mm256_storeu_ps(y + (size_t)t * ys, acc[2 * t]);
    _mm256_storeu_ps(y + (size_t)t * ys + 8, acc[2 * t + 1]);
  }
}

#define P16_GEMM(T, TYPE) P16_GEMM_OF(T, TYPE, group, 32)

P16_GEMM(q4_0, WK_Q4_0)
P16_GEMM(q4_1, WK_Q4_1)
P16_GEMM(q5_0, WK_Q5_0)
P16_GEMM(q5_1, WK_Q5_1)
P16_GEMM(iq4_nl, WK_IQ4_NL)

wk_gemm_fn wk_pack16_avx2_find(int type) {
  switch (type) {
    case WK_Q4_0: return q4_0_p16;
    case WK_Q4_1: return q4_1_p16;
    case WK_Q5_0: return q5_0_p16;
    case WK_Q5_1: return q5_1_p16;
    case WK_IQ4_NL: return iq4_nl_p16;
    default: return NULL;
  }
}
