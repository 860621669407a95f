// Reference (scalar) quantize, dequantize and dot product for every
// computable type of the table in types.h. These are the ground truth the fast
// backend kernels are tested against: clear before fast, no SIMD.
//
// Supported types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, FP8_E4M3, FP8_E5M2. Any other id
// (including types the table knows but wick cannot compute) gives
// WICK_ERR_UNSUPPORTED. Block layouts are described at the top of
// float.c, legacy.c, kquants.c and iq4.c.
//
// Dequantization is bit-exact with the gguf Python package (same f32
// operations in the same order). Wherever a product is followed by an add
// (x = d * q + m, sc * q - mn) the product of an f16 scale and small integer
// levels is exact in f32, so contraction into FMA cannot change a result
// (checked with -march=haswell -ffp-contract=fast).
#ifndef WICK_QUANT_QUANT_H
#define WICK_QUANT_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/types.h"

// Decodes n values of `type` from src (wk_row_size(type, n) bytes) into dst.
// n must be a non-negative multiple of the type's block size. Returns WICK_OK,
// WICK_ERR_UNSUPPORTED (type not computable) or WICK_ERR_INVALID (bad n or a
// NULL pointer with n > 0). dst is not touched on error.
int wk_dequantize_row(int type, const void *src, float *dst, int64_t n);

// Encodes n values into dst (wk_row_size(type, n) bytes, every byte written).
// Byte-identical to gguf.quants.quantize for F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1 and Q8_0; the K-quant and IQ4 quantizers follow GGML's reference
// algorithm (no importance matrix). Same status codes as wk_dequantize_row;
// for block types, a NaN or infinite input gives WICK_ERR_INVALID (dst is
// then unspecified).
int wk_quantize_row(int type, const float *src, void *dst, int64_t n);

// sum_i dequant(row)[i] * x[i] over n values, accumulated in f64 and returned
// as f32. The sum is factored per block the way kernels do it (block scale
// times the sum of integer levels times x, minus the block minimum times the
// sum of x), so it can differ from summing dequantized values only by
// rounding. Returns NaN for an unsupported type or bad n.
float wk_dot_row(int type, const void *row, const float *x, int64_t n);

// True when the three functions above accept `type`.
bool wk_quant_supported(int type);

// FP8 element codes (sign in bit 7).
// E4M3: e = bits 3..6, m = bits 0..2; |x| = e == 0 ? m * 2^-9 : (8 + m) * 2^(e - 10).
// No code is NaN or inf: 0x7f reads as 480.
float wk_fp8_e4m3_to_f32(uint8_t v);
// E5M2: IEEE-like, bias 15: subnormals m * 2^-16, e == 31 is inf (m == 0) or NaN.
float wk_fp8_e5m2_to_f32(uint8_t v);
// Round to nearest, ties to even code; |f| >= 448 (and inf) saturates to
// +-448 (0x7e); NaN gives 0x7f with f's sign (OCP E4M3FN's NaN code).
uint8_t wk_f32_to_fp8_e4m3(float f);
// Round to nearest, ties to even code; overflow gives inf; NaN gives 0x7e.
uint8_t wk_f32_to_fp8_e5m2(float f);

#endif
