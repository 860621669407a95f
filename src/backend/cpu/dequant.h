// Row dequantization for the CPU kernels: straight-line loops for the types
// common in GGUF files, bit-identical to the reference routines (the same f32
// operations in the same order); other types go through wk_dequantize_row.
#ifndef WICK_BACKEND_CPU_DEQUANT_H
#define WICK_BACKEND_CPU_DEQUANT_H

#include <stdint.h>

// n must be a multiple of the type's block size; returns a wick_status.
int cpu_dequant_row(int type, const void *src, float *dst, int64_t n);

#endif
