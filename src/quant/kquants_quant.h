// Reference quantizers for the K-quant formats (layouts in kquants.h). They
// follow the algorithm of GGML's reference quantizers (weighted least-squares
// search over candidate scales, then 6- or 4-bit scales per sub-block), so
// their error is that of llama.cpp's files without an importance matrix.
#ifndef WICK_QUANT_KQUANTS_QUANT_H
#define WICK_QUANT_KQUANTS_QUANT_H

#include <stdint.h>

void wk_q2_k_quantize(const float *src, uint8_t *dst, int64_t nb);
void wk_q3_k_quantize(const float *src, uint8_t *dst, int64_t nb);
void wk_q4_k_quantize(const float *src, uint8_t *dst, int64_t nb);
void wk_q5_k_quantize(const float *src, uint8_t *dst, int64_t nb);
void wk_q6_k_quantize(const float *src, uint8_t *dst, int64_t nb);
void wk_q8_k_quantize(const float *src, uint8_t *dst, int64_t nb);

#endif
