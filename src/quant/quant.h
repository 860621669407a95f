// Reference (scalar) quantize, dequantize and dot product for every
// computable type of the table in types.h. These are the ground truth the fast
// backend kernels are tested against.
#ifndef WICK_QUANT_QUANT_H
#define WICK_QUANT_QUANT_H

#include <stdint.h>

#include "quant/types.h"

// n must be a multiple of the type's block size; returns WICK_OK or
// WICK_ERR_UNSUPPORTED / WICK_ERR_INVALID.
int wk_dequantize_row(int type, const void *src, float *dst, int64_t n);
// Reference quantizer (byte-identical to the gguf package where it has one).
int wk_quantize_row(int type, const float *src, void *dst, int64_t n);
// sum_i dequant(row)[i] * x[i], accumulated in f32 block by block (in f64 for
// F32/F16/BF16 rows is not required); exact enough to test kernels against.
float wk_dot_row(int type, const void *row, const float *x, int64_t n);

// FP8 element decoders (sign in bit 7).
float wk_fp8_e4m3_to_f32(uint8_t v);  // e==0 ? m*2^-9 : (8+m)*2^(e-10)
float wk_fp8_e5m2_to_f32(uint8_t v);  // IEEE-like: subnormals, inf, NaN
uint8_t wk_f32_to_fp8_e4m3(float f);  // round to nearest even, saturating to +-448
uint8_t wk_f32_to_fp8_e5m2(float f);  // round to nearest even, overflow to inf

#endif
