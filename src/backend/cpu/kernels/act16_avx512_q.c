// AVX-512 16-bit-activation kernels for the 32-value block formats Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL and Q8_0 against WK_ACT_A16. act16.c calls these
// only when cpuid reports AVX-512 F, BW, VL and VNNI; wk_act16_avx512_find
// also asks for VBMI (vpermb, vpermt2b), GFNI and BITALG (vpshufbitqmb) for
// the first five and otherwise leaves them to the AVX2 level (Q8_0's tile,
// at the end, needs VNNI alone).
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

// ---- Q8_0 -------------------------------------------------------------------
// The one-token tile is the AVX2 level's (tile(), R = 8, N = 1) with each
// row's pmaddwd + pmaddwd + paddd as pmaddwd + vpdpwssd: codes 0..15 and
// 16..31 widened to int16 by vpmovsxbw against the activations' v, a16_red8,
// then a16_dec_acc (the AVX2 tile's f32 steps in its order), so the integer
// sums and every output are the AVX2 level's, bit for bit. Bounds: a
// vpdpwssd lane adds 2 products of at most 128 x 16383 to a pmaddwd lane of
// 2 such; a block's sum is at most 32 x 128 x 16383 in magnitude.
//
// On this Zen 4 (bench_levels: the AVX2 tile and this one call by call, best
// of 400, 3 rounds) 1.09-1.12x the AVX2 tile at 640x2048, 576x1536, 4096x512
// and 2048x640 (rows in L2 or L3, 31-42 against 28-38 GB/s). From memory
// (bench_matvec --act16 --shape 640x262144, Gemma 3's output, one thread,
// product / read passes, 4 rounds alternating the levels) 63-81% (median
// 75%) against the AVX2 tile's 56-65% (63%), mostly from Q8_AHEAD below; at
// the AVX2 tile's distance the two were the same within the noise (64-73%,
// 6 rounds, 4 shapes). wick bench (Gemma 3, SmolLM2; 1 and 2 threads) moved
// within its noise on this shared host.
//
// Tried, same rounds and shapes, ratio to the AVX2 tile: the codes as bytes
// c + 128 (one xor; 128 x the activation sum off the block sum, exact)
// against the lo and hi bytes by vpdpbusd, the hi sums shifted left by 7 as
// the lo sums' accumulator (zq_dot4's way): a 256-bit vector a row and block
// 0.99-1.11 where this tile ran 1.08-1.15, two blocks a 512-bit vector (a
// 256-bit load and insert) 1.01-1.09, two rows a 256-bit vector (broadcast
// loads and blends, so that each row's 16-byte halves accumulate in one lane
// and a16_red8 becomes 3 merges) 0.89-1.01, 4 (row, block) lanes a 512-bit
// vector by masked loads 0.67-0.69 or by broadcast loads and masked moves
// 0.65-0.79. For this tile: two blocks a step (the scales of both by one
// unpack tree, broadcast loads and blends) the same; the scales by broadcast
// loads, blends and vpmovdw, or by one vpgatherdd for two blocks
// (0.82-0.96 in the byte tile), no better; vphaddd for a16_red8's merges
// 2-4% slower. Without the scales' loads and unpacks the byte tile ran ~25%
// faster, without a16_red8 ~30%, without the shift ~15%: a block's lane work,
// not its 16 multiplies, is most of its time.

// Bytes ahead of the current block that the tile prefetches in each row
// (a16_ahead). bench_matvec --act16, one thread, product / read passes,
// medians of 4-5 rounds alternating the distances: 384 against the AVX2
// tile's 256 (Q8DEC_AHEAD) 640x262144 70 -> 76%, 640x2048 69 -> 75%,
// 576x1536 69 -> 75%, 4096x14336 66 -> 65%, 14336x4096 78 -> 80%; two
// threads the same within the noise (75-83% either way); 0, 512 and 768
// worse (62-75% at 640x262144 and 14336x4096).
#define Q8_AHEAD 384

// 8 rows (w, w + ws, ..) x one token over nb blocks -> y[r * yr].
AT static void q8_0_dec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, float *y,
                        size_t yr) {
  const wk_act16 *act = (const wk_act16 *)xq;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 34;
    a16_ahead(8, blk, ws, b, 34, Q8_AHEAD);
    const __m256i v0 = a16_load(act[b].v), v1 = a16_load(act[b].v + 16);
    __m256i s[8];
    A16_UNROLL for (int r = 0; r < 8; r++) {
      const uint8_t *p = blk + (size_t)r * ws + 2;
      const __m256i lo = _mm256_madd_epi16(_mm256_cvtepi8_epi16(a16_load128(p)), v0);
      s[r] = _mm256_dpwssd_epi32(lo, _mm256_cvtepi8_epi16(a16_load128(p + 16)), v1);
    }
    __m256 dwv;
    a16_f16_rows(blk, ws, 8, 0, &dwv, NULL);
    acc = a16_dec_acc(acc, a16_red8(s, 8), dwv, _mm256_setzero_ps(), act[b].d, 0, 0);
  }
  a16_store_rows8(acc, y, yr);
}
A512_GEMM(q8_0, WK_Q8_0)

int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  if (type == WK_Q8_0 && wk_act16_avx2_find(type, dot, gemm)) {
    *gemm = q8_0_gemm;  // *dot: the AVX2 level's
    return 1;
  }
  const wk_gemm_fn g = zq_gemm_of(type);
  __builtin_cpu_init();
  if (!g || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("gfni") ||
      !__builtin_cpu_supports("avx512bitalg") ||
      !wk_act16_avx2_find(type, dot, gemm))
    return wk_act16_avx512_k_find(type, dot, gemm);
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
