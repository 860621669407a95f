// Integer prompt GEMM on AVX-512 VNNI: quantized weights times 16-bit
// activations (act16.h's WK_ACT_A16, 32-value blocks, for every weight type
// here, the super-block formats included) with vpdpwssd, 32 int16
// multiply-adds into 16 int32 lanes per instruction: on Zen 4 it issues like
// an f32 FMA of the same width, so it does twice the multiply-adds of the f32
// tiles (fma_rows.h) that large batches ran on before. The CPU backend takes
// it for batches of many tokens (backend/cpu/matmul.h).
//
// Weights: every 32-value block b of a row is integer codes c[32] (int16), a
// scale sw and a minimum term mw with w[i] = sw * c[i] + mw, the value the
// reference dequantizer (src/quant) gives, bit for bit (the products of an
// f16 scale and small integers are exact in f32):
//   Q4_0, Q5_0     c = q - 8, q - 16     sw = d              mw = 0
//   Q4_1, Q5_1     c = q                 sw = d              mw = m
//   Q8_0           c = q                 sw = d              mw = 0
//   IQ4_NL         c = table[q]          sw = d              mw = 0
//   Q4_K, Q5_K     c = q                 sw = d * sc         mw = -(dmin * m)
//   Q6_K           c = sc16 * (q - 32)   sw = d              mw = 0
//   Q3_K           c = sc16 * q3         sw = d              mw = 0
//   IQ4_XS         c = table[q]          sw = d * (ls - 32)  mw = 0
// where the K-quants' sub-block scales sc (and min m) are per 32 values and
// Q6_K's and Q3_K's scales sc16 per 16 values are folded into the codes
// (|c| <= 128 * 32 = 4096 for Q6_K, the largest). Q2_K (a minimum per 16
// values) and the float types are not here.
//
// Product, per output (token t, row r):
//   y = sum_b ( sw[r,b] * d_x[t,b] * sum_i c[r,b,i] v[t,b,i] + mw[r,b] * s_x[t,b] )
// with the activations' d, s = d * sum(v) and v of WK_ACT_A16. The integer
// sums are exact: |v| <= 16383 and |c| <= 4096, so a 32-value sum stays
// within 16383 * 4096 * 32 = 2147352576 < 2^31 (and each int32 lane sums
// exactly 32 products, 2 per vpdpwssd over the block's 16 pairs). Results are
// those of the 16-bit-activation kernels up to f32 rounding (the same integer
// sums, scaled in another order).
//
// Layout: a strip of G16_ROWS rows is decoded into the thread's scratch, up
// to 2048 values of each row at a time (a k-chunk: 147 KB, in L2): per block,
// per column pair p (0..15) and group of 16 rows, one 512-bit vector of the 16
// rows' (c[2p], c[2p + 1]) int16 pairs (lanes are rows), then the groups' 16
// sw and 16 mw. Every token of the call then runs over the chunk: per pair,
// the token's (v[2p], v[2p + 1]) broadcast as one int32 and one vpdpwssd per
// row group; per block the int32 lanes go to f32 and add sw * d_x times them
// (and mw * s_x) to f32 accumulators (register tile: 2 row groups x 6
// tokens); longer rows add each chunk's products to y. The decode (a
// transpose of 16 rows a block) is paid once per strip and chunk, whatever
// the number of tokens.
//
// Cost on Zen 4 (one core, 3.67 GHz): vpdpwssd issues one 512-bit vector a
// cycle, 117 GMAC/s; each block adds a multiply and an FMA per row group and
// token (and an FMA for mw) on the same pipes, so 16 of 18 (19) issue slots
// do multiply-adds. Measured with 512 tokens (the default models' shapes and
// k = 4096): 97-100 GMAC/s (83-85%) without a minimum, 93-95 with one, where
// the f32 tiles ran 41-53 GFMA/s (of 58.7).
#ifndef WICK_BACKEND_CPU_KERNELS_GEMM16_H
#define WICK_BACKEND_CPU_KERNELS_GEMM16_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels/kernels.h"

// Rows decoded at once (callers split rows in multiples of this).
#define G16_ROWS 32

// Decodes nb 32-value blocks of one weight row from src: codes[32 nb]
// (int16), and sw[b * ss], mw[b * ss] for each block b (ss: float stride).
typedef void (*wk_g16_decode_fn)(const uint8_t *src, int64_t nb, int16_t *codes, float *sw,
                                 float *mw, size_t ss);

typedef struct wk_gemm16 {
  int type;                         // wk_type of the weights
  int has_min;                      // mw can be nonzero
  int k_multiple;                   // k must be a multiple of this (32 or 256)
  wk_g16_decode_fn decode;          // one row's blocks (also for tests)
  wk_quantize_act_fn quantize_act;  // the WK_ACT_A16 converter the product reads
} wk_gemm16;

// Fills *out for weight type `type` when this CPU has AVX-512 F/BW/VL/VNNI
// (wk_kernel_best_level() == WK_LEVEL_AVX512; cpuid: call at prepare time)
// and the type has a decoder. Returns WICK_OK, else WICK_ERR_UNSUPPORTED.
int wk_gemm16_pick(int type, wk_gemm16 *out);

// Bytes of scratch one call needs for rows of k values (a strip and the
// decoder's staging rows; any alignment, the call aligns it to 64).
size_t wk_gemm16_scratch(int64_t k);

// y[t * ys + r] = W x_t for r < rows, t < n_tokens: W's rows at w (row_stride
// bytes apart, k values each, k a multiple of g->k_multiple), x_t the
// WK_ACT_A16 row at xq + t * xs. Writes only those outputs.
void wk_gemm16_run(const wk_gemm16 *g, const void *w, size_t row_stride, int64_t k, int rows,
                   const void *xq, size_t xs, int n_tokens, float *y, size_t ys, void *scratch);

#endif
