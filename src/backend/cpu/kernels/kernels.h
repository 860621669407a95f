// CPU matrix kernels: one entry per weight type and instruction-set level.
//
// A weight row is multiplied with an activation row that was first converted
// by the entry's quantize_act into its activation format:
//   WK_ACT_F32  plain floats (F32, F16, BF16 weights): exact f32 math;
//   WK_ACT_F32S floats times 2^64 (FP8 weights, whose AVX2 kernels read the
//               codes as f32 of value * 2^-120 (E4M3) or 2^-112 (E5M2),
//               subnormal for the smallest exponent; the scaled x keeps the
//               products normal): exact but for products under 2^-70 or
//               2^-78, whose error stays below 2^-149 of the scaled sum;
//   WK_ACT_Q8   blocks of 32 int8 with an f32 scale and the block's sum
//               (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): integer dot products;
//   WK_ACT_Q8K  blocks of 256 int8 with one f32 scale and 16 sums of 16
//               (Q2_K .. Q6_K, IQ4_XS): integer dot products.
// The 8-bit formats round each activation to 1/254 of its block's largest
// magnitude; that is the fast path. An exact f32 path stays with the caller.
//
// Usage (prepare time, once per weight matrix):
//   wk_kernel kr;
//   if (wk_kernel_pick(type, WK_LEVEL_AUTO, &kr) != WICK_OK) ... unsupported
//   size_t xq_row = wk_act_row_size(kr.act, k);   // bytes per token
// Forward (x: n_tokens rows of k floats; y: n_tokens rows of `rows` floats):
//   for t: kr.quantize_act(x + t * k, xq + t * xq_row, k);
//   kr.gemm(w, row_bytes, k, rows, xq, xq_row, n_tokens, y, rows);
// Threads split `rows` (pass w + r0 * row_bytes, y + r0, rows = r1 - r0);
// any row count works, multiples of 24 fill every register tile (8 rows for
// the 32-value blocks with one token, else 3 or 4; within a call, tile j of
// height h takes rows j, j + rows/h, ... so each row of the tile is a long
// sequential stream). n_tokens == 1 is the matrix-vector case.
// All functions are thread-safe (no state); xq and y must be 4-byte aligned
// (any malloc'd buffer with the strides above), weights need no alignment.
// The 8-bit paths compute integer sums exactly and round once per block, so
// gemm returns bit for bit what vec_dot returns for each (row, token).
#ifndef WICK_BACKEND_CPU_KERNELS_KERNELS_H
#define WICK_BACKEND_CPU_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef enum wk_act_fmt {
  WK_ACT_F32 = 0,  // float[k]
  WK_ACT_Q8 = 1,   // wk_act_q8[k / 32]
  WK_ACT_Q8K = 2,  // wk_act_q8k[k / 256]
  WK_ACT_F32S = 5,  // float[k], x * 2^64 (3 and 4: act16.h; 6: act8b.h)
} wk_act_fmt;

// WK_ACT_F32S's factor.
#define WK_ACT_F32S_SCALE 0x1p64f

typedef enum wk_kernel_level {
  WK_LEVEL_AUTO = -1,    // the best level this CPU supports
  WK_LEVEL_SCALAR = 0,   // plain C, any x86-64 (and any other CPU)
  WK_LEVEL_AVX2 = 1,     // AVX2 + FMA + F16C
  WK_LEVEL_AVX512BW = 2, // AVX-512 F/BW/VL without VNNI (Skylake-SP class): 512-bit byte
                         // products by vpmaddubsw where that level has kernels, else AVX2's
  WK_LEVEL_AVX512 = 3,   // AVX-512 F/BW/VL + VNNI (256-bit vectors, 32 registers)
} wk_kernel_level;

// One block of WK_ACT_Q8: x[i] ~= d * q[i].
typedef struct wk_act_q8 {
  float d;        // scale: max |x| / 127
  int32_t sum;    // sum(q), for weight formats with an offset or a min
  int8_t q[32];   // (32)
} wk_act_q8;

// One block of WK_ACT_Q8K: x[i] ~= d * q[i].
typedef struct wk_act_q8k {
  int8_t q[256];      // (256)
  int16_t bsum[16];   // bsum[j] = sum of q[16 j .. 16 j + 15]
  float d;            // scale: max |x| / 127
} wk_act_q8k;

// x (n floats) -> xq in the entry's activation format.
typedef void (*wk_quantize_act_fn)(const float *x, void *xq, int64_t n);
// Dot product of one weight row (n elements) with one converted activation row.
typedef float (*wk_vec_dot_fn)(int64_t n, const void *w_row, const void *xq);
// y[t * y_stride + r] = dot(row r of w, token t of xq) for r < rows, t < n_tokens.
// row_stride and xq_stride are in bytes, y_stride in floats; k is the row length.
typedef void (*wk_gemm_fn)(const void *w, size_t row_stride, int64_t k, int rows,
                           const void *xq, size_t xq_stride, int n_tokens, float *y,
                           size_t y_stride);

typedef struct wk_kernel {
  int type;        // wk_type of the weights
  int act;         // wk_act_fmt the activations must be converted to
  int level;       // wk_kernel_level that vec_dot and gemm use
  int k_multiple;  // k must be a multiple of this (weight and activation blocks)
  wk_quantize_act_fn quantize_act;
  wk_vec_dot_fn vec_dot;
  wk_gemm_fn gemm;
} wk_kernel;

// Fills *out with the kernels for weight type `type` at `level` (or the best
// level this CPU has for WK_LEVEL_AUTO). Returns WICK_OK, or
// WICK_ERR_UNSUPPORTED when the type has no kernels or this CPU lacks `level`.
int wk_kernel_pick(int type, int level, wk_kernel *out);

// The best level this CPU supports, capped by WICK_CPU_LEVEL in the
// environment when set to a level name (cpuid and the variable are read at
// the first call of the process; later calls return that level).
int wk_kernel_best_level(void);
const char *wk_kernel_level_name(int level);  // "scalar", "avx2", "avx512bw", "avx512"

// Bytes of one activation row of n elements in format act; 0 when n is not a
// multiple of the format's block.
size_t wk_act_row_size(int act, int64_t n);

#endif
