// 16-bit activation kernels: the CPU fast path's integer dot products with
// activations rounded to 1/16383 of their block's largest magnitude (14 bits
// and a sign) instead of 1/127 (kernels.h's WK_ACT_Q8 / WK_ACT_Q8K).
//
// Why: 8-bit activations move logits by up to ~1.5% of their range on the
// default models (SmolLM2 Q4_1, Gemma 3 Q4_K_M; the error is spread over
// every matrix, not one), which breaks the fast path's accuracy rule (greedy
// steps leave the transformers reference only at near ties, perplexity
// within 0.5%); 16-bit activations bring it down ~100x. The CPU backend uses
// these kernels for batches of a few tokens (decode, where reading the
// weights dominates) and f32 FMA tiles for larger ones (backend/cpu/matmul.h).
//
// Formats (x[i] ~= d * v[i], v in [-16383, 16383], rounded to nearest even):
//   WK_ACT_A16   32-value blocks, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL;
//   WK_ACT_A16K  256-value blocks, for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
// A row also stores each v as two signed bytes, v = lo + 128 hi with lo and
// hi in [-127, 127], both of v's sign (wk_act16_split): after its blocks, per
// block its lo bytes in value order, then its hi bytes (wk_act16_bytes), so
// that either part streams alone; the super-block format then also stores,
// after all of those, per block |lo|, |hi| and v's sign (+-1, 0 for 0) in
// value order (wk_act16k_sign_bytes). Weight codes can then stay bytes:
// pmaddubsw multiplies 32 unsigned codes with 32 lo bytes and again with 32
// hi bytes, and pmaddwd weights the two; signed codes (IQ4_XS) take v's sign
// by one psignb and multiply |lo| and |hi| (no byte is -128). The one-token
// kernels of the super-blocks and of Q4_0, Q4_1, Q5_0, Q5_1 do that; the
// others, and all kernels for several tokens, widen the codes to int16 once
// per row and multiply them with v by pmaddwd, half the multiplies per token.
// Both formats carry d times the integer sums (of 32, or of each 16), which
// the formats with a block minimum or a fixed offset multiply. The ids
// continue kernels.h's wk_act_fmt; wk_act16_pick fills the same wk_kernel
// struct, so callers use these kernels exactly as the table's (see kernels.h
// "Usage").
//
// Integer range: the AVX2 kernels keep every int16 and int32 lane exact (the
// bounds are worked out next to each kernel); int32 lanes become f32 once per
// block (32 values) or super-block (256).
#ifndef WICK_BACKEND_CPU_KERNELS_ACT16_H
#define WICK_BACKEND_CPU_KERNELS_ACT16_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels/kernels.h"

enum {
  WK_ACT_A16 = 3,   // wk_act16[k / 32]
  WK_ACT_A16K = 4,  // wk_act16k[k / 256]
};

#define WK_ACT16_QMAX 16383

// Value i of a block of n activations' bytes (n lo bytes, n hi bytes, ..).
static inline int wk_act16_value(const int8_t *q, int n, int i) { return q[i] + 128 * q[n + i]; }

// v -> (lo, hi), v = lo + 128 hi, both of v's sign: |lo| = |v| % 128,
// |hi| = |v| / 128 (for |v| <= 16383: in [0, 127]).
static inline void wk_act16_split(int v, int8_t *lo, int8_t *hi) {
  const int h = v / 128;  // C division truncates: |h| = |v| / 128, of v's sign
  *hi = (int8_t)h;
  *lo = (int8_t)(v - 128 * h);
}

// 32 activations: x[i] ~= d * v[i].
typedef struct wk_act16 {
  float d;        // max |x| / WK_ACT16_QMAX
  float s;        // d * sum(v)
  int32_t sum;    // sum(v)
  int16_t v[32];  // (32)
} wk_act16;

// 256 activations: x[i] ~= d * v[i].
typedef struct wk_act16k {
  float d;          // max |x| / WK_ACT16_QMAX
  float s[16];      // s[j] = d * sum of v[16 j .. 16 j + 15]
  int16_t v[256];   // (8, 32) per 32 values, in wk_act16k_pos order
} wk_act16k;

// Byte offset, in a row of nb blocks of format act, of block b's 2 x 32
// (WK_ACT_A16) or 2 x 256 (WK_ACT_A16K) lo and hi bytes.
static inline size_t wk_act16_bytes(int act, int64_t nb, int64_t b) {
  return act == WK_ACT_A16 ? (size_t)nb * sizeof(wk_act16) + 64 * (size_t)b
                           : (size_t)nb * sizeof(wk_act16k) + 512 * (size_t)b;
}

// Byte offset, in a WK_ACT_A16K row of nb blocks, of block b's 3 x 256
// bytes |lo|, |hi| and sign (kept apart, so that the lo and hi bytes of
// consecutive blocks stay adjacent for the kernels that read only those).
static inline size_t wk_act16k_sign_bytes(int64_t nb, int64_t b) {
  return (size_t)nb * (sizeof(wk_act16k) + 512) + 768 * (size_t)b;
}

// Where value i (0..255) of a wk_act16k sits in v: per 32 values, first
// values 0 1 4 5 8 9 12 13 16 17 20 21 24 25 28 29, then the others (so that
// pmaddwd on each half, added, sums 4 consecutive values a lane, as the
// byte kernels' lanes do).
static inline int wk_act16k_pos(int i) {
  const int k = i & 31;
  return (i & ~31) + 16 * ((k >> 1) & 1) + 8 * (k >> 4) + 2 * ((k >> 2) & 3) + (k & 1);
}

// Fills *out with the 16-bit-activation kernels of weight type `type` at
// `level` (WK_LEVEL_AUTO: the best this CPU has; AVX-512 CPUs get the AVX2
// kernels for the types their level does not implement). Returns WICK_OK, or WICK_ERR_UNSUPPORTED when the type has none
// (float weights: use wk_kernel_pick) or this CPU lacks `level`.
int wk_act16_pick(int type, int level, wk_kernel *out);

// Bytes of one activation row of n elements in format act (WK_ACT_A16 or
// WK_ACT_A16K); 0 for another format or n not a multiple of its block.
size_t wk_act16_row_size(int act, int64_t n);

// Decodes n weights of `type` (one of the types above) from src into f32 dst
// with AVX2, the same values as wk_dequantize_row (every product of a scale
// and integer levels is exact in f32; only a zero's sign may differ). Call
// only when wk_kernel_best_level() >= WK_LEVEL_AVX2 (checked once by the
// caller: cpuid is slow). Returns WICK_OK, or WICK_ERR_UNSUPPORTED for
// another type or n not a multiple of the block.
int wk_act16_dequant_row(int type, const void *src, float *dst, int64_t n);

// ---- shared by act16*.c only ----
void wk_act16_quantize(const float *x, void *xq, int64_t n);    // WK_ACT_A16
void wk_act16k_quantize(const float *x, void *xq, int64_t n);   // WK_ACT_A16K
void wk_act16_avx2_quantize(const float *x, void *xq, int64_t n);   // same bytes
void wk_act16k_avx2_quantize(const float *x, void *xq, int64_t n);  // same bytes
// One type's kernels in a level's table, and the lookup over such a table:
// fills *dot and *gemm and returns 1 when the table has `type`.
typedef struct wk_act16_row {
  int type;
  wk_vec_dot_fn dot;
  wk_gemm_fn gemm;
} wk_act16_row;
int wk_act16_lookup(const wk_act16_row *rows, size_t n, int type, wk_vec_dot_fn *dot,
                    wk_gemm_fn *gemm);
// Per-level lookups: fill *dot and *gemm, return 1 when the level has `type`.
int wk_act16_scalar_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
int wk_act16_avx2_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// The AVX-512 level (F, BW, VL, VNNI: wk_kernel_best_level's AVX512): its
// own kernels where it has them (act16_avx512_q.c, act16_avx512_k.c), the
// same activation bytes as the AVX2 converters.
int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
int wk_act16_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// Its Q4_K and Q5_K (act16_avx512_kd.c: the AVX2 decode tile with vpdpwssd;
// VNNI alone).
int wk_act16_avx512_kd_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// The AVX-512 BW level (no VNNI: wk_kernel_best_level's AVX512BW): 512-bit
// decode tiles by vpmaddubsw + vpmaddwd (act16_avx512bw_q.c, the 32-value
// formats; act16_avx512bw_k.c, the super-blocks), bit-identical
// to the AVX2 level's, for the types it has; 0 for the others, which then
// take the AVX2 level's.
int wk_act16_avx512bw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
int wk_act16_avx512bw_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// AVX2 decoders of the 32-value and the super-block formats (1: done).
int wk_act16_avx2_dequant_q(int type, const uint8_t *src, float *dst, int64_t nb);
int wk_act16_avx2_dequant_k(int type, const uint8_t *src, float *dst, int64_t nb);

#endif
