// Reading GGML's K-quant formats (256-value super-blocks): Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K and Q8_K. Their quantizers are in kquants_quant.h.
#ifndef WICK_QUANT_KQUANTS_H
#define WICK_QUANT_KQUANTS_H

#include <stdint.h>

enum { WK_QK_K = 256 };

void wk_q2_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q2_k_dot(const uint8_t *src, const float *x, int64_t nb);
void wk_q3_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q3_k_dot(const uint8_t *src, const float *x, int64_t nb);
void wk_q4_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q4_k_dot(const uint8_t *src, const float *x, int64_t nb);
void wk_q5_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q5_k_dot(const uint8_t *src, const float *x, int64_t nb);
void wk_q6_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q6_k_dot(const uint8_t *src, const float *x, int64_t nb);
void wk_q8_k_dequantize(const uint8_t *src, float *dst, int64_t nb);
double wk_q8_k_dot(const uint8_t *src, const float *x, int64_t nb);

// The 6-bit scale and minimum of sub-block j (0..7) from the 12 packed scale
// bytes of a Q4_K/Q5_K block; also used by their quantizers.
void wk_k4_scale_min(const uint8_t s[12], int j, int *sc, int *mn);

#endif
