// The packed decode kernels (pack16.h) with AVX-512 VNNI: a group of 16 rows
// x 1..4 tokens, one int32 lane and one f32 lane a row.
//
// Per block a 64-byte chunk c of code bytes becomes the unsigned codes of
// values 4 c .. 4 c + 3 of every row (4-bit formats: its low nibbles, and its
// high nibbles for values 16 + 4 c ..), code vector j holding values 4 j ..
// 4 j + 3 (j < 8). vpdpbusd multiplies code vector j with the activation's
// 4 bytes at 4 j broadcast from memory (lo bytes, then hi bytes), so each
// row's block sum lands in its own lane: the hi sums first, in two chains,
// then shifted left by 7 (x 128) they start one of the two chains of lo
// sums, and the block sum is lo + 128 hi. Unsigned codes: Q4 and Q5 as they
// are (Q4_0, Q5_0 then take 8 or 16 x the activation sum off), IQ4_NL's
// table values + 128 and Q8_0's codes + 128 (then 128 x the sum off); every
// block sum is the exact integer the other levels' kernels compute. Then
// each row runs a16_dec_acc's f32 steps in block order, so outputs equal
// the 16-bit-activation vec_dot's bit for bit.
//
// Bounds: a code is at most 255, an activation byte 127 in magnitude; a
// lane's hi sum adds 32 products (~1.0e6), x 128 ~1.3e8, and a block sum is
// at most 32 x 255 x 16383 < 1.4e8: inside int32.
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "backend/cpu/kernels/pack16_x512.h"

AT AI int p16_bytes(const int type) { return a16_q_bytes(type); }
AT AI int p16_has_m(const int type) { return type == WK_Q4_1 || type == WK_Q5_1; }
AT AI int p16_has_qh(const int type) { return type == WK_Q5_0 || type == WK_Q5_1; }

// What comes off a block sum, times the activation sum.
AT AI int p16_offset(const int type) {
  switch (type) {
    case WK_Q4_0: return 8;
    case WK_Q5_0: return 16;
    case WK_IQ4_NL:
    case WK_Q8_0: return 128;
    default: return 0;
  }
}

// One block's 8 code vectors from its chunks at qs (and fifth bits at qh).
AT AI void codes(const int type, const uint8_t *qs, const uint8_t *qh, __m512i *c) {
  if (type == WK_Q8_0) {
    A16_UNROLL for (int j = 0; j < 8; j++)
      c[j] = _mm512_xor_si512(_mm512_loadu_si512(qs + 64 * j), _mm512_set1_epi8((char)0x80));
    return;
  }
  const __m512i lo4 = _mm512_set1_epi8(15);
  A16_UNROLL for (int j = 0; j < 4; j++) {
    const __m512i raw = _mm512_loadu_si512(qs + 64 * j);
    c[j] = _mm512_and_si512(raw, lo4);
    c[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4);
  }
  if (type == WK_IQ4_NL) {
    const __m512i lut = iq4_lut128();
    A16_UNROLL for (int j = 0; j < 8; j++) c[j] = _mm512_shuffle_epi8(lut, c[j]);
  }
  if (p16_has_qh(type)) {  // byte i bit j of a row's qh: value 4 j + i's fifth bit, to bit 4
    const __m512i h = _mm512_loadu_si512(qh), b4 = _mm512_set1_epi8(16);
    A16_UNROLL for (int j = 0; j < 8; j++) {
      const __m512i s = j < 4 ? _mm512_slli_epi32(h, 4 - j) : _mm512_srli_epi32(h, j - 4);
      c[j] = _mm512_ternarylogic_epi32(c[j], s, b4, 0xf8);  // c | (s & 16)
    }
  }
}

// Block b of the group (its fields at d, m, qh, qs) x NT tokens into acc.
AT AI void block(const int type, const int NT, const uint8_t *d, const uint8_t *m,
                 const uint8_t *qh, const uint8_t *qs, int64_t nb, int64_t b, const uint8_t *xq,
                 size_t xs, __m512 *acc) {
  __m512i c[8];
  codes(type, qs, qh, c);
  const int off = p16_offset(type), has_m = p16_has_m(type);
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
  const __m512 mw = has_m ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)m))
                          : _mm512_setzero_ps();
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const uint8_t *x = xq + (size_t)t * xs;
    const wk_act16 *a = (const wk_act16 *)x + b;
    const int8_t *q = (const int8_t *)x + wk_act16_bytes(WK_ACT_A16, nb, b);
    __m512i s = block_sum(c, q, q + 32);
    if (off) s = _mm512_sub_epi32(s, _mm512_set1_epi32(a->sum * off));
    // a16_dec_acc's steps
    const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(a->d));
    __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(s), dd);
    if (has_m) p = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s), p);
    acc[t] = _mm512_add_ps(acc[t], p);
  }
}

// One group x NT tokens -> y[t * ys + r].
AT AI void group(const int type, const int NT, const uint8_t *g, int64_t nb, const uint8_t *xq,
                 size_t xs, float *y, size_t ys) {
  const size_t bytes = (size_t)p16_bytes(type), chunk = type == WK_Q8_0 ? 512 : 256;
  const size_t mb = p16_has_m(type) ? 32 : 0, qb = p16_has_qh(type) ? 64 : 0;
  __m512 acc[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {  // a pair: d d m m qh qh qs qs
    const uint8_t *d = g + 16 * (size_t)b * bytes, *m = d + 64, *qh = m + 2 * mb,
                  *qs = qh + 2 * qb;
    if (type == WK_Q8_0) ahead_pages(d, 32 * bytes);
    else ahead_n(d, 32 * bytes, 3);
    block(type, NT, d, m, qh, qs, nb, b, xq, xs, acc);
    block(type, NT, d + 32, m + 32, qh + 64, qs + chunk, nb, b + 1, xq, xs, acc);
  }
  if (b < nb) {  // the last block alone
    const uint8_t *d = g + 16 * (size_t)b * bytes, *m = d + 32, *qh = m + mb, *qs = qh + qb;
    block(type, NT, d, m, qh, qs, nb, b, xq, xs, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define P16_GEMM(T, TYPE) P16_GEMM_OF(T, TYPE, group, 32)

P16_GEMM(q4_0, WK_Q4_0)
P16_GEMM(q4_1, WK_Q4_1)
P16_GEMM(q5_0, WK_Q5_0)
P16_GEMM(q5_1, WK_Q5_1)
P16_GEMM(q8_0, WK_Q8_0)
P16_GEMM(iq4_nl, WK_IQ4_NL)

wk_gemm_fn wk_pack16_avx512_find(int type) {
  switch (type) {
    case WK_Q4_0: return q4_0_p16;
    case WK_Q4_1: return q4_1_p16;
    case WK_Q5_0: return q5_0_p16;
    case WK_Q5_1: return q5_1_p16;
    case WK_Q8_0: return q8_0_p16;
    case WK_IQ4_NL: return iq4_nl_p16;
    default: return NULL;
  }
}
