// AVX-512 16-bit-activation kernels for the 32-value block formats Q4_0,
// Q4_1, Q5_0, Q5_1 and IQ4_NL against WK_ACT_A16 (Q8_0 stays with the AVX2
// level: its int16 pmaddwd tile measured faster than the byte tile below).
// act16.c calls these only when cpuid reports AVX-512 F, BW, VL and VNNI;
// wk_act16_avx512_find also asks for VBMI (vpermb) and GFNI and otherwise
// leaves these types to the AVX2 level.
//
// What is new here is the one-token decode tile (8 rows, dec8); vec_dot and
// gemm with several tokens are the AVX2 level's own functions. dec8
// computes the same integer block sums as the AVX2 decode tile (exact, in
// another order) and then runs that tile's f32 operations in the same order,
// so every output is bit-identical to the AVX2 level's.
//
// Decode layout: one 512-bit vector holds 4 rows' 16 code bytes of a block,
// row j in 128-bit lane j; its low nibbles (values 0..15) and high nibbles
// (values 16..31) become two vectors of unsigned code bytes, and vpdpbusd
// multiplies them with the activations' lo and hi bytes (each 16-byte half
// broadcast to the 4 lanes) straight into int32 lanes: first the hi sums,
// then, shifted left by 7 (x 128), they are the accumulator of the lo sums,
// so each lane ends as lo + 128 hi. IQ4_NL's signed table values go in as
// value + 128 (unsigned), and 128 x the activation sum comes off the block
// sum, as Q4_0's 8 and Q5_0's 16 do. Q5's fifth bits: each row's 32-bit qh
// has bit i for value i, so 16-bit pieces of 4 rows' qh, put side by side
// in a general register, are a 64-bit mask over a code vector's bytes, and
// one masked byte add puts the 16 in (scalar work, where the vector pipes
// are the busy ones: faster than spreading the bits with vector ops).
//
// What limits this tile on Zen 4 is the vector pipes and the length of each
// block's dependency chain, so the loads are built as a tree (two 256-bit
// pairs, then one 512-bit insert), the high nibbles take one gf2p8affineqb
// (shift and mask in one op), and the rows' d and m come in by
// a16_f16_rows (masked loads and scalar packing of them measured slower).
//
// Bounds: a vpdpbusd lane adds 4 products of at most 241 x 127 in
// magnitude; a lane's hi sum (8 products) x 128 and a block's sum (at most
// 32 x 241 x 16383) stay far inside int32.
#define AT                                                                        \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni," \
                        "avx512vbmi,gfni")))
#include "backend/cpu/kernels/act16_x86.h"
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

// The 16 bytes at row[j] + at in 128-bit lane j (j = 0..3).
AT AI __m512i lanes4(const uint8_t *const *row, const int at) {
  const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(a16_load128(row[0] + at)),
                                            a16_load128(row[1] + at), 1);
  const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(a16_load128(row[2] + at)),
                                            a16_load128(row[3] + at), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

// 4 rows' block sums, 4 int32 lanes a row (lane j of the vector = row j):
// the code bytes c[0] (values 0..15), c[1] (16..31) against the activations'
// lo bytes x[0], x[1] and hi bytes x[2], x[3] (each in all 4 lanes).
AT AI __m512i dot4(const __m512i *c, const __m512i *x) {
  __m512i h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], x[2]);
  h = _mm512_dpbusd_epi32(h, c[1], x[3]);
  const __m512i s = _mm512_dpbusd_epi32(_mm512_slli_epi32(h, 7), c[0], x[0]);
  return _mm512_dpbusd_epi32(s, c[1], x[1]);
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

// 4 rows' codes of one block as unsigned bytes (see dot4): c[0] values
// 0..15, c[1] 16..31.
AT AI void codes4(const int type, const uint8_t *const *row, __m512i *c) {
  const __m512i x = lanes4(row, a16_qs_at(type));
  // bits 4..7 of each byte to bits 0..3, the others 0 (GF(2) affine map)
  const __m512i xh = _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(0x1020408000000000LL), 0);
  if (type == WK_IQ4_NL) {  // table value + 128; vpermb reads index bits 0..5 only
    const __m512i lut =
        _mm512_add_epi8(_mm512_broadcast_i32x4(a16_load128(wk_kern_iq4nl_values)),
                        _mm512_set1_epi8((char)128));
    c[0] = _mm512_permutexvar_epi8(x, lut);
    c[1] = _mm512_permutexvar_epi8(xh, lut);
    return;
  }
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
    const __m512i s0 = dot4(c, x);
    codes4(type, row + 4, c);
    const __m512i s1 = dot4(c, x);
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
A512_TYPE(iq4_nl, WK_IQ4_NL)

int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  wk_gemm_fn g;
  switch (type) {
    case WK_Q4_0: g = q4_0_gemm; break;
    case WK_Q4_1: g = q4_1_gemm; break;
    case WK_Q5_0: g = q5_0_gemm; break;
    case WK_Q5_1: g = q5_1_gemm; break;
    case WK_IQ4_NL: g = iq4_nl_gemm; break;
    default: g = NULL;  // Q8_0 and the super-blocks
  }
  __builtin_cpu_init();
  if (!g || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni") ||
      !wk_act16_avx2_find(type, dot, gemm))
    return wk_act16_avx512_k_find(type, dot, gemm);
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
