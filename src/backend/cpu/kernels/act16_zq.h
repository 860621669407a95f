// The one-token decode tile of the 32-value block formats in 512-bit
// vectors (dec8: 8 rows, 4 a vector), shared by two levels that differ only
// in how a vector of code bytes meets the activation bytes:
//   act16_avx512_q.c    VNNI + VBMI + GFNI (vpdpbusd, vpermb, gf2p8affineqb)
//   act16_avx512bw_q.c  AVX-512 BW alone (vpmaddubsw + vpmaddwd, shifts)
// The level file defines AT, then includes act16_x86.h, then defines
//   zq_dot4(c, x)  4 rows' exact block sums (see dec8), 4 int32 lanes a row
//   zq_high(x)     each byte's bits 4..7 moved to bits 0..3, the others 0
//   zq_lanes4(row, at)  the 16 bytes at row[j] + at in 128-bit lane j (j = 0..3)
//   ZQ_IQ4_NL      1 when the level has an IQ4_NL tile (its codes go in as
//                  table value + 128: up to 241, past pmaddubsw's pair range)
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
#if ZQ_IQ4_NL
  if (type == WK_IQ4_NL) {  // table value + 128; vpermb reads index bits 0..5 only
    const __m512i lut =
        _mm512_add_epi8(_mm512_broadcast_i32x4(a16_load128(wk_kern_iq4nl_values)),
                        _mm512_set1_epi8((char)128));
    c[0] = _mm512_permutexvar_epi8(x, lut);
    c[1] = _mm512_permutexvar_epi8(xh, lut);
    return;
  }
#endif
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

// Bytes ahead of the current block that the decode tile prefetches in each
// of its rows (the AVX2 decode tile's distance).
#define DEC_AHEAD 512

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

// gemm: one token through the decode tile as a16_gemm runs it (tile j takes
// rows j, j + q, .., q = rows / 8; rows past 8 q one by one through the AVX2
// vec_dot); several tokens through the AVX2 level's gemm.
#define A512_TYPE(T, TYPE)                                                                  \
  AT static void T##_dec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,       \
                         float *y, size_t yr) {                                              \
    dec8(TYPE, w, ws, nb, xq, y, yr);                                                        \
  }                                                                                          \
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
    default: return NULL;  // Q8_0 and the super-blocks
  }
}

#endif
