// Reference routines for GGML's non-linear 4-bit formats IQ4_NL (32-value
// blocks) and IQ4_XS (256-value super-blocks with 6-bit sub-block scales).
#ifndef WICK_QUANT_IQ4_H
#define WICK_QUANT_IQ4_H

#include <stdint.h>

void wk_iq4_nl_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_iq4_nl_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_iq4_nl_dot(const uint8_t *src, const float *x, int64_t nb);

void wk_iq4_xs_dequantize(const uint8_t *src, float *dst, int64_t nb);
void wk_iq4_xs_quantize(const float *src, uint8_t *dst, int64_t nb);
double wk_iq4_xs_dot(const uint8_t *src, const float *x, int64_t nb);

#endif
