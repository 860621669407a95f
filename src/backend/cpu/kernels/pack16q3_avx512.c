// The packed decode kernel of Q3_K (pack16.h) with AVX-512 VNNI: a group of
// 16 rows x 1..4 tokens, one int32 and one f32 lane a row, against
// WK_ACT_Q8K activations (the 8-bit ones Q3_K's decode path takes).
//
// Codes: bit-plane i's three code chunks X0, X1, X2 (pack16.h) give its two
// 16-value sub-blocks 2 i (E: values 32 i + 4 u + k) and 2 i + 1 (O: 32 i +
// 16 + 4 u + k), 4 code vectors each, as unsigned bytes: E's u < 3 are
// Xu & 7, O's Xu & 0x38 (8 x the code); E's u = 3 and O's u = 3 gather the
// spare bits 6..7 (two shifts, an and and a vpternlog each). vpdpbusd
// multiplies them with the activation's 4 int8 broadcast from memory, so
// each row's sub-block sum S (codes 0..7 against x; |S| <= 16 x 7 x 128 <
// 2^15) lands in its own lane, E's as S_E, O's as 8 S_O.
//
// Scales: the packed words (pack16.h) with bit 5 of each 6-bit field
// flipped (value - 32 as 6-bit two's complement) go by 16-bit shifts to the
// pairs P_i = (s_2i - 32, s_2i+1 - 32) as int16 words; the sums pair up as
// (S_E, S_O) words (8 S_O << 13 into the high half: no product crosses),
// and per super-block
//   I = sum_i P_i . (S_E, S_O) - 4 sum_i P_i . (bsum_2i, bsum_2i+1)
//   y += d dx I
// by vpdpwssd, the 16-value sums of the activations (bsum) broadcast from
// memory as pairs: the offset of value = code - 4. I is the exact integer
// sum_j (s_j - 32) sum (code - 4) x (|I| <= 16 x 32 x 16 x 4 x 128 < 2^23,
// exact in f32), as in the 8-bit-activation vec_dot; only the f32 steps
// (d dx I, the sum over super-blocks) round, in another order.
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "backend/cpu/kernels/pack16_x512.h"
#include "backend/cpu/kernels/pack16q3.h"

// The 8 scale pairs of a super-block from its 3 chunks at S.
AT AI void q3_pairs(const uint8_t *S, __m512i *P) {
  // bit 5 of every field: bits 15 and 9 of each word, 1 and 3 of w4 and w5's
  const __m512i f01 = _mm512_set1_epi16((short)0x8200), f2 = _mm512_set1_epi16((short)0x820a);
  const __m512i w[3] = {_mm512_xor_si512(_mm512_loadu_si512(S), f01),
                        _mm512_xor_si512(_mm512_loadu_si512(S + 64), f01),
                        _mm512_xor_si512(_mm512_loadu_si512(S + 128), f2)};
  A16_UNROLL for (int c = 0; c < 3; c++) {
    P[c] = _mm512_srai_epi16(w[c], 10);
    P[3 + c] = _mm512_srai_epi16(_mm512_slli_epi16(w[c], 6), 10);
  }
  // s_12 .. s_15: the low 4 bits at 10..13 from w0 / w1, the high 2 at
  // 14..15 from w4 / w5 (word bits 0..1, then 2..3)
  const __m512i lo4 = _mm512_set1_epi16(0x3c00);
  P[6] = _mm512_srai_epi16(_mm512_ternarylogic_epi32(_mm512_slli_epi16(w[0], 10),
                                                     _mm512_slli_epi16(w[2], 14), lo4, 0xe4),
                           10);
  P[7] = _mm512_srai_epi16(_mm512_ternarylogic_epi32(_mm512_slli_epi16(w[1], 10),
                                                     _mm512_slli_epi16(w[2], 12), lo4, 0xe4),
                           10);
}

// Bit-plane i's code vectors: E[u] (x 1), O[u] (x 8) from its chunks at C.
AT AI void q3_codes(const uint8_t *C, __m512i *E, __m512i *O) {
  const __m512i x0 = _mm512_loadu_si512(C), x1 = _mm512_loadu_si512(C + 64),
                x2 = _mm512_loadu_si512(C + 128);
  const __m512i m7 = _mm512_set1_epi8(7), m38 = _mm512_set1_epi8(0x38);
  E[0] = _mm512_and_si512(x0, m7), O[0] = _mm512_and_si512(x0, m38);
  E[1] = _mm512_and_si512(x1, m7), O[1] = _mm512_and_si512(x1, m38);
  E[2] = _mm512_and_si512(x2, m7), O[2] = _mm512_and_si512(x2, m38);
  // low 2 bits from x0's 6..7 to 0..1, the high one from x2's 6 to 2
  E[3] = _mm512_ternarylogic_epi32(
      _mm512_and_si512(_mm512_srli_epi16(x0, 6), _mm512_set1_epi8(3)), _mm512_srli_epi16(x2, 4),
      _mm512_set1_epi8(4), 0xf8);
  // x1's 6..7 to 3..4, x2's 7 to 5
  O[3] = _mm512_ternarylogic_epi32(
      _mm512_and_si512(_mm512_srli_epi16(x1, 3), _mm512_set1_epi8(0x18)),
      _mm512_srli_epi16(x2, 2), _mm512_set1_epi8(0x20), 0xf8);
}

// (S_E, S_O) as int16 words of every row, x: the activations of value 32 i.
AT AI __m512i q3_sums(const __m512i *E, const __m512i *O, const int8_t *x) {
  __m512i se = _mm512_setzero_si512(), so = _mm512_setzero_si512();
  A16_UNROLL for (int u = 0; u < 4; u++) {
    se = dpb4(se, E[u], x + 4 * u);
    so = dpb4(so, O[u], x + 16 + 4 * u);
  }
  return _mm512_ternarylogic_epi32(se, _mm512_slli_epi32(so, 13), _mm512_set1_epi32(0xffff),
                                   0xe4);
}

AT AI void q3k_block(const int NT, const uint8_t *G, int64_t b, const uint8_t *xq, size_t xs,
                     __m512 *y) {
  const q3_at at = q3_at_of((int)(b & 1));
  const uint8_t *C = G + at.codes, *D = G + at.d;
  __m512i P[8];
  q3_pairs(G + at.scales, P);
  __m512i acc[WK_PACK16_MAX_TOKENS], off[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = off[t] = _mm512_setzero_si512();
  A16_UNROLL for (int i = 0; i < 8; i++) {
    __m512i E[4], O[4];
    q3_codes(C + 192 * i, E, O);
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const wk_act_q8k *a = (const wk_act_q8k *)(xq + (size_t)t * xs) + b;
      acc[t] = _mm512_dpwssd_epi32(acc[t], q3_sums(E, O, a->q + 32 * i), P[i]);
      off[t] = _mm512_dpwssd_epi32(off[t], P[i], bc4((const int8_t *)(a->bsum + 2 * i)));
    }
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)D));
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const wk_act_q8k *a = (const wk_act_q8k *)(xq + (size_t)t * xs) + b;
    const __m512i I = _mm512_sub_epi32(acc[t], _mm512_slli_epi32(off[t], 2));
    y[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), y[t]);
  }
}

// One group x NT tokens -> y[t * ys + r].
AT AI void q3k_group(const int type, const int NT, const uint8_t *g, int64_t nb,
                     const uint8_t *xq, size_t xs, float *y, size_t ys) {
  (void)type;
  __m512 acc[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *G = g + (size_t)b * Q3_GROUP;
    ahead_n(G, Q3_GROUP, 3);
    q3k_block(NT, G, b, xq, xs, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

P16_GEMM_OF(q3_k, WK_Q3_K, q3k_group, 256)

wk_gemm_fn wk_pack16q3_avx512_find(int type) { return type == WK_Q3_K ? q3_k_p16 : NULL; }

// ---- packing and unpacking, 16 rows at once: a row's 27 dwords (the file's
// bytes 0..107) transposed into 27 vectors of a dword a row, then
// pack16q3.h's moves (scatters in place of the transposes unpacked 2.4x
// slower, Zen 4) ---------------------------------------------------------

AT AI __m512i q3_shift(__m512i v, const int s) {
  return s >= 0 ? _mm512_slli_epi32(v, (unsigned)s) : _mm512_srli_epi32(v, (unsigned)-s);
}

// The 16 x 16 dwords v[i] lane j transposed in place (its own inverse).
AT AI void q3_transpose(__m512i *v) {
  __m512i a[16], b[16];
  A16_UNROLL for (int k = 0; k < 8; k++) {
    a[2 * k] = _mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]);
  }
  // b[4 q + c], 128-bit lane L: element 4 L + c of v[4 q .. 4 q + 3]
  A16_UNROLL for (int q = 0; q < 4; q++) {
    b[4 * q] = _mm512_unpacklo_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 1] = _mm512_unpackhi_epi64(a[4 * q], a[4 * q + 2]);
    b[4 * q + 2] = _mm512_unpacklo_epi64(a[4 * q + 1], a[4 * q + 3]);
    b[4 * q + 3] = _mm512_unpackhi_epi64(a[4 * q + 1], a[4 * q + 3]);
  }
  // the 4 x 4 128-bit lanes of b[c], b[4 + c], b[8 + c], b[12 + c]
  A16_UNROLL for (int c = 0; c < 4; c++) {
    const __m512i u0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44),
                  u1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee),
                  u2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44),
                  u3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
    v[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    v[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    v[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    v[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
}

// Every move (pack16q3.h) on 16 rows: F -> P (to_packed) or P -> F.
AT AI void q3_moves(__m512i *F, __m512i *P, const int to_packed) {
  A16_UNROLL for (int i = 0; i < Q3_MOVES / 16; i++) {
    A16_UNROLL for (int n = 0; n < 16; n++) {
      const q3_move v = q3_move_of(16 * i + n);
      // the bits at their destination
      const uint32_t m = to_packed      ? v.mask
                         : v.shift >= 0 ? v.mask >> v.shift
                                        : v.mask << -v.shift;
      if (to_packed)
        P[v.packed] = _mm512_ternarylogic_epi32(P[v.packed], q3_shift(F[v.file], v.shift),
                                                _mm512_set1_epi32((int)m), 0xf8);
      else
        F[v.file] = _mm512_ternarylogic_epi32(F[v.file], q3_shift(P[v.packed], -v.shift),
                                              _mm512_set1_epi32((int)m), 0xf8);
    }
  }
}

// Offset in a packed super-block of the chunk of its dword 3 i + u (codes,
// then scales: i = 8).
AT AI size_t q3_chunk(const q3_at *at, const int i, const int u) {
  return i < 8 ? at->codes + 64 * (size_t)(3 * i + u) : at->scales + 64 * (size_t)u;
}

// Row r's dwords 0..26 of a block at s + r row_bytes -> F[f] lane r, and
// back (F[27 .. 31]: room for the second transpose).
AT AI void q3_rows_load(const uint8_t *s, size_t row_bytes, __m512i *F) {
  A16_UNROLL for (int r = 0; r < 16; r++) {
    F[r] = _mm512_loadu_si512(s + (size_t)r * row_bytes);
    F[16 + r] = _mm512_maskz_loadu_epi32(0x7ff, s + (size_t)r * row_bytes + 64);
  }
  q3_transpose(F);
  q3_transpose(F + 16);
}

AT AI void q3_rows_store(__m512i *F, uint8_t *d, size_t row_bytes) {
  q3_transpose(F);
  q3_transpose(F + 16);
  A16_UNROLL for (int r = 0; r < 16; r++) {
    _mm512_storeu_si512(d + (size_t)r * row_bytes, F[r]);
    _mm512_mask_storeu_epi32(d + (size_t)r * row_bytes + 64, 0x7ff, F[16 + r]);
  }
}

AT void wk_pack16q3_avx512_pack(int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst) {
  for (int64_t b = 0; b < k / 256; b++) {
    const uint8_t *s = src + (size_t)b * 110;
    uint8_t *G = dst + (size_t)b * Q3_GROUP;
    const q3_at at = q3_at_of((int)(b & 1));
    __m512i F[32], P[Q3_DWORDS];
    q3_rows_load(s, row_bytes, F);
    A16_UNROLL for (int i = 0; i < 9; i++) A16_UNROLL for (int u = 0; u < 3; u++)
      P[3 * i + u] = _mm512_setzero_si512();
    q3_moves(F, P, 1);
    A16_UNROLL for (int i = 0; i < 9; i++) A16_UNROLL for (int u = 0; u < 3; u++)
      _mm512_storeu_si512(G + q3_chunk(&at, i, u), P[3 * i + u]);
    for (int r = 0; r < WK_PACK16_ROWS; r++) memcpy(G + at.d + 2 * r, s + r * row_bytes + 108, 2);
  }
}

AT void wk_pack16q3_avx512_unpack(int64_t k, const uint8_t *group, uint8_t *dst,
                                  size_t row_bytes) {
  for (int64_t b = 0; b < k / 256; b++) {
    const uint8_t *G = group + (size_t)b * Q3_GROUP;
    uint8_t *d = dst + (size_t)b * 110;
    const q3_at at = q3_at_of((int)(b & 1));
    __m512i F[32], P[Q3_DWORDS];
    A16_UNROLL for (int i = 0; i < 9; i++) A16_UNROLL for (int u = 0; u < 3; u++)
      P[3 * i + u] = _mm512_loadu_si512(G + q3_chunk(&at, i, u));
    A16_UNROLL for (int f = 0; f < 16; f++) F[f] = F[16 + f] = _mm512_setzero_si512();
    q3_moves(F, P, 0);
    q3_rows_store(F, d, row_bytes);
    for (int r = 0; r < WK_PACK16_ROWS; r++) memcpy(d + r * row_bytes + 108, G + at.d + 2 * r, 2);
  }
}
