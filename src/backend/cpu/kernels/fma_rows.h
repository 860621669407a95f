// f32 products of dequantized weight rows with f32 activation rows in FMA
// register tiles, for the CPU exact path and for batches of many tokens on
// the fast path: each weight row is dequantized once per call and used for
// every token. Two levels, chosen at the first call:
//  - AVX2 + FMA: 4 rows x 3 tokens, 12 accumulators of 8 lanes (7 loads per
//    12 FMAs);
//  - AVX-512 F, only where wk_kernel_best_level() is WK_LEVEL_AVX512BW
//    (Skylake-SP class: two 512-bit FMA pipes, so a 512-bit FMA does twice
//    the work of a 256-bit one at the same rate): 8 rows x 3 tokens, 24
//    accumulators of 16 lanes (11 loads per 24 FMAs), the activations
//    prefetched. CPUs with AVX-512 VNNI keep the AVX2 tiles: on some of them
//    (Zen 4) a 512-bit FMA is two 256-bit halves, a gain not measured yet.
// Tokens go in blocks of ~128 KB of activations, each strip of w (4 or 8
// rows) over a whole block (the strip in L1, the block in L2: Gemma 3
// prefill +3-4% at the AVX2 level).
//
// Every output is the same sequence whatever tile it falls in, so results
// do not depend on the batch or on where the rows end:
//  - AVX2: 8 f32 lane sums over k in steps of 8 (FMA), added across lanes in
//    a fixed order, then the k % 8 tail in order;
//  - AVX-512: 16 lane sums over k in steps of 16 (FMA; the k % 16 tail one
//    more step of the same lanes, the others adding 0), added across lanes
//    in a fixed order (halves, quarters, pairs, the last two).
// The two levels round differently.
#ifndef WICK_BACKEND_CPU_KERNELS_FMA_ROWS_H
#define WICK_BACKEND_CPU_KERNELS_FMA_ROWS_H

#include <stddef.h>
#include <stdint.h>

// y[t * ys + r] = sum_i w[r * ws + i] * x[t * xs + i] for r < nr, t < nt
// (nr, nt, k >= 1; ws, xs >= k). Call only when wk_kernel_best_level() >= WK_LEVEL_AVX2.
void wk_fma_rows(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs, int nt,
                 float *y, size_t ys);

// The same with the tiles of one level (tests, benchmarks): level
// WK_LEVEL_AVX512BW the 512-bit ones, any other level the AVX2 ones; the CPU
// must run that level.
void wk_fma_rows_level(int level, const float *w, size_t ws, int64_t k, int nr, const float *x,
                       size_t xs, int nt, float *y, size_t ys);

// Internal to fma_rows*.c: the 512-bit level.
void wk_fma_rows_avx512(const float *w, size_t ws, int64_t k, int nr, const float *x, size_t xs,
                        int nt, float *y, size_t ys);

#endif
