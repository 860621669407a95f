// Matrix products of a weight (in its file format) with f32 activations: the
// one kernel interface that faster (SIMD, repacked) kernels replace.
#ifndef WICK_BACKEND_CPU_MATMUL_H
#define WICK_BACKEND_CPU_MATMUL_H

#include <stddef.h>

#include "base/pool.h"
#include "model/model.h"

// Weight rows dequantized at once per thread (each used for every token).
#define CPU_MATMUL_TILE 8

// Floats of scratch one thread needs for rows of length k.
size_t cpu_matmul_scratch(int64_t k);

// y[t][r] = sum_k W[r][k] * x[t][k] for t < n_tokens, r < w->ne[1];
// x is [n_tokens][w->ne[0]], y is [n_tokens][w->ne[1]] (row-major, f32).
// scratch holds wk_pool_size(pool) (1 for a NULL pool) slices of
// scratch_per_thread >= cpu_matmul_scratch(w->ne[0]) floats. Work is split by
// output rows; each weight row is dequantized once and reused for all tokens.
void cpu_matmul(wk_pool *pool, float *scratch, size_t scratch_per_thread, const wk_tensor *w,
                const float *x, int n_tokens, float *y);

// sum_i a[i] * b[i] in f32 with 8 partial sums (the dot product every op uses).
float cpu_dot(const float *a, const float *b, int64_t n);

#endif
