// f32 products of dequantized weight rows with f32 activation rows, AVX2 + FMA
// register tiles (4 rows x 3 tokens: 12 accumulators of 8 lanes, 7 loads per
// 12 FMAs), for the CPU exact path and for batches of many tokens on the fast
// path: each weight row is dequantized once per call and used for every token.
// Tokens go in blocks of ~128 KB of activations, each 4-row strip of w over a
// whole block (the strip in L1, the block in L2: Gemma 3 prefill +3-4%).
//
// Every output is the same sequence whatever tile it falls in: 8 f32 lane
// sums over k in steps of 8 (FMA), added across lanes in a fixed order, then
// the k % 8 tail in order.
#ifndef WICK_BACKEND_CPU_KERNELS_FMA_ROWS_H
#define WICK_BACKEND_CPU_KERNELS_FMA_ROWS_H

#include <stddef.h>
#include <stdint.h>

// y[t * ys + r] = sum_i w[r * k + i] * x[t * xs + i] for r < nr, t < nt.
// Call only when wk_kernel_best_level() >= WK_LEVEL_AVX2.
void wk_fma_rows(const float *w, int64_t k, int nr, const float *x, size_t xs, int nt, float *y,
                 size_t ys);

#endif
