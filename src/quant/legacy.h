// Reference routines for GGML's 32-element block formats Q4_0, Q4_1, Q5_0,
// Q5_1 and Q8_0. The quantizers are byte-identical to the gguf package's.
#ifndef WICK_QUANT_LEGACY_H
#define WICK_QUANT_LEGACY_H

#include <stdint.h>

void wk_q4_0_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_q4_0_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_q4_0_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_q4_1_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_q4_1_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_q4_1_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_q5_0_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_q5_0_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_q5_0_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_q5_1_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_q5_1_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_q5_1_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_q8_0_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_q8_0_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_q8_0_dot(const uint8_t *src, const float *x, int64_t nb);

#endif
