// AVX-512 16-bit-activation kernels for the 32-value block formats Q4_0,
// Q4_1, Q5_0, Q5_1 and IQ4_NL against WK_ACT_A16 (Q8_0 stays with the AVX2
// level: its int16 pmaddwd tile measured faster than the byte tile below).
// act16.c calls these only when cpuid reports AVX-512 F, BW, VL and VNNI;
// wk_act16_avx512_find also asks for VBMI (vpermb) and GFNI and otherwise
// leaves these types to the AVX2 level.
//
// What is new here is the one-token decode tile (8 rows, dec8, in
// act16_zq.h, which act16_avx512bw_q.c shares); vec_dot and gemm with
// several tokens are the AVX2 level's own functions. dec8 computes the same
// integer block sums as the AVX2 decode tile (exact, in another order) and
// then runs that tile's f32 operations in the same order, so every output is
// bit-identical to the AVX2 level's.
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

// 4 rows' block sums, 4 int32 lanes a row (lane j of the vector = row j):
// the code bytes c[0] (values 0..15), c[1] (16..31) against the activations'
// lo bytes x[0], x[1] and hi bytes x[2], x[3] (each in all 4 lanes).
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

// The 16 bytes at row[j] + at in 128-bit lane j (j = 0..3).
AT AI __m512i zq_lanes4(const uint8_t *const *row, const int at) {
  const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(a16_load128(row[0] + at)),
                                            a16_load128(row[1] + at), 1);
  const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(a16_load128(row[2] + at)),
                                            a16_load128(row[3] + at), 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

#define ZQ_IQ4_NL 1
#include "backend/cpu/kernels/act16_zq.h"

int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  const wk_gemm_fn g = zq_gemm_of(type);
  __builtin_cpu_init();
  if (!g || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni") ||
      !wk_act16_avx2_find(type, dot, gemm))
    return wk_act16_avx512_k_find(type, dot, gemm);
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
