// Reference routines for the float formats: F32, F16, BF16 (one element a
// block) and wick's FP8 types (128 fp8 codes after one f32 scale a block).
#ifndef WICK_QUANT_FLOAT_H
#define WICK_QUANT_FLOAT_H

#include <stdint.h>

void wk_f32_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_f32_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_f32_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_f16_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_f16_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_f16_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_bf16_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_bf16_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_bf16_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_fp8e4_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_fp8e4_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_fp8e4_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_fp8e5_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_fp8e5_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_fp8e5_dot(const uint8_t *src, const float *x, int64_t nb);

#endif
