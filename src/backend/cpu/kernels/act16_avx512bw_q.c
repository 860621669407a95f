// The AVX-512 BW level's 16-bit-activation decode tile for Q4_0, Q4_1, Q5_0
// and Q5_1 against WK_ACT_A16: act16_zq.h's dec8 (8 rows, 4 a 512-bit
// vector) without VNNI, VBMI or GFNI, for CPUs with AVX-512 F/BW/VL alone
// (Skylake-SP and its kin; act16.c calls wk_act16_avx512bw_find at
// wk_kernel_best_level's AVX512BW). Bit-identical to the AVX2 level's
// outputs, as act16_zq.h explains; vec_dot and gemm with several tokens are
// the AVX2 level's.
//
// Why: on such a CPU a 512-bit vpmaddubsw, vpmaddwd or vpshufb does twice
// the bytes of a 256-bit one at the same rate (two 512-bit pipes), and the
// AVX2 decode tiles there are bound by those pipes, not by memory (Skylake-SP
// at 2.0 GHz: 3.6-5.8 GB/s a core in L2 against ~8 GB/s of read bandwidth;
// bench/RESULTS.md).
//
// zq_dot4 without vpdpbusd: pmaddubsw multiplies the unsigned codes with
// the signed activation bytes into int16 pair sums; the two code vectors'
// pair sums add in int16, once for the lo bytes and once for the hi bytes,
// and pmaddwd widens them into int32 lanes weighted 1 (lo) and 128 (hi).
// Every lane is exact: codes are at most 31 (Q5) and bytes at most 127 in
// magnitude, so a pmaddubsw lane is at most 2 x 31 x 127 = 7874 and the sum
// of two 15748 < 2^15; the pmaddwd lanes, at most 2 x 128 x 15748, and a
// block's sum (at most 32 x 31 x 16383) stay far inside int32. IQ4_NL's
// table values + 128 (up to 241) would saturate pmaddubsw: it keeps the
// AVX2 level's tiles.
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#include "backend/cpu/kernels/act16_x86.h"

// 4 rows' block sums, 4 int32 lanes a row (lane j of the vector = row j):
// the code bytes c[0] (values 0..15), c[1] (16..31) against the activations'
// lo bytes x[0], x[1] and hi bytes x[2], x[3] (each in all 4 lanes).
AT AI __m512i zq_dot4(const __m512i *c, const __m512i *x) {
  const __m512i lo = _mm512_add_epi16(_mm512_maddubs_epi16(c[0], x[0]),
                                      _mm512_maddubs_epi16(c[1], x[1]));
  const __m512i hi = _mm512_add_epi16(_mm512_maddubs_epi16(c[0], x[2]),
                                      _mm512_maddubs_epi16(c[1], x[3]));
  return _mm512_add_epi32(_mm512_madd_epi16(lo, _mm512_set1_epi16(1)),
                          _mm512_madd_epi16(hi, _mm512_set1_epi16(128)));
}

// bits 4..7 of each byte to bits 0..3, the others 0
AT AI __m512i zq_high(__m512i x) {
  return _mm512_and_si512(_mm512_srli_epi16(x, 4), _mm512_set1_epi8(15));
}

// The 16 bytes at row[j] + at in 128-bit lane j (j = 0..3): a broadcast
// load, then three merge-masked ones (a load and a blend each, off the
// shuffle port, which the reductions and the scales' unpacks keep busy).
AT AI __m512i zq_lanes4(const uint8_t *const *row, const int at) {
  __m512i v = _mm512_broadcast_i32x4(a16_load128(row[0] + at));
  v = _mm512_mask_broadcast_i32x4(v, 0x00f0, a16_load128(row[1] + at));
  v = _mm512_mask_broadcast_i32x4(v, 0x0f00, a16_load128(row[2] + at));
  return _mm512_mask_broadcast_i32x4(v, 0xf000, a16_load128(row[3] + at));
}

#define ZQ_IQ4_NL 0
#define ZQ_PAIRS 0
#include "backend/cpu/kernels/act16_zq.h"

int wk_act16_avx512bw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  const wk_gemm_fn g = zq_gemm_of(type);
  if (!g) return wk_act16_avx512bw_k_find(type, dot, gemm);
  if (!wk_act16_avx2_find(type, dot, gemm)) return 0;
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
