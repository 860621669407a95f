// 8-bit activations with a scale per 32 values (WK_ACT_Q8B), for Q2_K's
// decode products on AVX-512 VNNI.
//
// Why: Q2_K's 16-bit-activation kernel spends two vpdpbusd a code vector (lo
// and hi bytes) and reads ~22 GB/s a core from L2, under the ~28 GB/s two
// cores need to read at the memory's rate; 8-bit activations halve those
// products, but with one scale a 256-value block (WK_ACT_Q8K) they moved
// SmolLM2's perplexity with Q2_K ffn_down by +1.5% against the exact path,
// over the 0.5% the fast path is held to. A scale per 32 values moved it
// +0.11% (bench/RESULTS.md, session 32).
//
// Format, per 256 values (x[i] ~= d[i / 32] * q[i], d = max |x| / 127 over
// the 32 values, q rounded to nearest even, in [-127, 127]):
//   d[8]     the 32-value blocks' scales
//   dm, g    the 16-value sums F_s = d[s / 2] * sum q[16 s ..] as dm * G_s,
//            G_s = round(F_s / dm) with dm = max |F_s| / (2^21 - 1), in three
//            base-128 digits (g[0] + 128 g[1] + 16384 g[2], each of G_s's
//            sign): the operand of an integer dot product with per-16
//            weights (Q2_K's mins); |F_s - dm G_s| <= dm / 2 = 2^-22 of the
//            largest |F_s|, far under the activations' own rounding.
//   q[256]
#ifndef WICK_BACKEND_CPU_KERNELS_ACT8B_H
#define WICK_BACKEND_CPU_KERNELS_ACT8B_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels/kernels.h"

enum { WK_ACT_Q8B = 6 };  // wk_act_q8b[k / 256] (kernels.h's ids continue here)

#define WK_ACT8B_GMAX ((1 << 21) - 1)

typedef struct wk_act_q8b {
  float d[8];
  float dm;
  int8_t g[3][16];
  int8_t q[256];
} wk_act_q8b;

// x (n floats, n a multiple of 256) -> n / 256 blocks at xq.
void wk_act8b_quantize(const float *x, void *xq, int64_t n);

// Fills *out with the WK_ACT_Q8B kernels of `type` at `level` (WK_LEVEL_AUTO:
// the best): Q2_K at the AVX-512 (VNNI) level, whose packed kernel
// (pack16k_avx512.c) takes these activations; vec_dot and gemm (the rows
// outside whole packed groups) are plain C. WICK_ERR_UNSUPPORTED otherwise.
int wk_act8b_pick(int type, int level, wk_kernel *out);

#endif
