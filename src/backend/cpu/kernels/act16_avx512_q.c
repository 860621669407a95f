// AVX-512 16-bit-activation kernels for the 32-value block formats Q4_0,
// Q4_1, Q5_0, Q5_1 and IQ4_NL against WK_ACT_A16 (Q8_0 stays with the AVX2
// level: its int16 pmaddwd tile measured faster than the byte tile below).
// act16.c calls these only when cpuid reports AVX-512 F, BW, VL and VNNI;
// wk_act16_avx512_find also asks for VBMI (vpermb, vpermt2b), GFNI and
// BITALG (vpshufbitqmb) and otherwise leaves these types to the AVX2 level.
//
// What is new here is the one-token decode tile (8 rows, dec8, in
// act16_zq.h, ZQ_PAIRS: two blocks a step); vec_dot and gemm with several
// tokens are the AVX2 level's own functions. dec8 computes the same integer
// block sums as the AVX2 decode tile (exact, in another order) and then runs
// that tile's f32 operations in the same order, so every output is
// bit-identical to the AVX2 level's.
//
// Decode layout: one 512-bit vector holds 16 code bytes of 4 (row, block)
// lanes; its low nibbles (values 0..15) and high nibbles (values 16..31)
// become two vectors of unsigned code bytes, and vpdpbusd multiplies them
// with the activations' lo and hi bytes (each lane's block's 16-byte piece)
// straight into int32 lanes: first the hi sums, then, shifted left by 7
// (x 128), they are the accumulator of the lo sums, so each lane ends as
// lo + 128 hi. IQ4_NL's signed table values go in as value + 128
// (unsigned), and 128 x the activation sum comes off the block sum, as
// Q4_0's 8 and Q5_0's 16 do. The high nibbles take one gf2p8affineqb (shift
// and mask in one op).
//
// Bounds: a vpdpbusd lane adds 4 products of at most 241 x 127 in
// magnitude; a lane's hi sum (8 products) x 128 and a block's sum (at most
// 32 x 241 x 16383) stay far inside int32.
#define AT                                                                        \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni," \
                        "avx512vbmi,avx512bitalg,gfni")))
#include "backend/cpu/kernels/act16_x86.h"

// 4 lanes' block sums, 4 int32 lanes each: the code bytes c[0] (values
// 0..15), c[1] (16..31) against the activations' lo bytes x[0], x[1] and hi
// bytes x[2], x[3] (each lane's block's).
AT AI __m512i zq_dot4(const __m512i *c, const __m512i *x) {
  __m512i h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], x[2]);
  h = _mm512_dpbusd_epi32(h, c[1], x[3]);
  const __m512i s = _mm512_dpbusd_epi32(_mm512_slli_epi32(h, 7), c[0], x[0]);
  return _mm512_dpbusd_epi32(s, c[1], x[1]);
}

// bits 4..7 of each byte to bits 0..3, the others 0 (GF(2) affine map)
AT AI __m512i zq_high(__m512i x) {
  return _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(0x1020408000000000LL), 0);
}

#define ZQ_IQ4_NL 1
#define ZQ_PAIRS 1
#include "backend/cpu/kernels/act16_zq.h"

int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  const wk_gemm_fn g = zq_gemm_of(type);
  __builtin_cpu_init();
  if (!g || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni") ||
      !__builtin_cpu_supports("avx512bitalg") ||
      !wk_act16_avx2_find(type, dot, gemm))
    return wk_act16_avx512_k_find(type, dot, gemm);
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
