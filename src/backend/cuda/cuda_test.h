// Test and benchmark entry points of the CUDA kernels (extern "C"), used by
// tests/unit/test_cuda_kernels.c and the CUDA benchmark. Host buffers in,
// host buffers out; every output is poisoned (NaN) on the device first.
// Each returns WICK_OK or a status with err filled.
#ifndef WICK_BACKEND_CUDA_CUDA_TEST_H
#define WICK_BACKEND_CUDA_CUDA_TEST_H

#include <stdint.h>

#include "base/error.h"

#ifdef __cplusplus
extern "C" {
#endif

// y (n x rows) = x (n x cols) . W^T for W (rows x cols) of a weight type.
// path 0: matrix-vector kernel; 1: the GEMM path (dequantize + cuBLAS);
// 2: (n = 1) the rows as three matrices in one matrix-vector launch;
// 3: the matrix-vector kernel with x kept in f32 for every type (for the
// quantized types path 0 rounds x to int8 per 32 values).
int cuda_test_matmul(int type, const void *w, int rows, int cols, const float *x, int n, float *y,
                     int path, wk_error *err);
// y (n x rows) = act(x . Wg^T) * (x . Wu^T) through the fused gate/up
// matrix-vector kernel (act 0 SiLU, 1 GELU-tanh; quantized types only, n at
// most 4). Returns WICK_ERR_INVALID for a pair the kernel does not serve.
int cuda_test_matvec_glu(int type, const void *wg, const void *wu, int rows, int cols,
                         const float *x, int n, int act, float *y, wk_error *err);
// out (n x cols) = scale * row ids[i] of W.
int cuda_test_embed(int type, const void *w, int rows, int cols, const int32_t *ids, int n,
                    float scale, float *out, wk_error *err);

// Attention of n_new query tokens at positions [n_ctx - n_new, n_ctx) of one
// sequence whose keys/values k, v (n_ctx x n_kv x hd, f32; stored as f16)
// lie in the cache blocks `blocks` (pool of n_pool blocks of block_size).
typedef struct cuda_test_attn {
  int n_heads, n_kv, hd, n_ctx, n_new, window, block_size, n_pool, splits;
  float scale, softcap;
  const int32_t *blocks;  // ceil(n_ctx / block_size) block ids
} cuda_test_attn;
int cuda_test_attention(const cuda_test_attn *a, const float *q, const float *k, const float *v,
                        float *out, wk_error *err);

// Matrix-vector timing: median microseconds of one W (rows x cols) . x over
// `iters` launches replayed as a CUDA graph, rotating among copies of W so
// the L2 cannot hold it. f32x: 1 = x kept in f32 for every type (the
// kernels before int8 activations).
int cuda_bench_matvec(int type, const void *w, int rows, int cols, int iters, int f32x, double *us,
                      wk_error *err);
// The same for one (rows a block R, threads a block NT) shape of the kernel
// (types f16, q4_k, q6_k, q8_0, fp8_e4m3; R, NT from the sweep lists in
// cuda_test.cu); q8 = 1: the int8-activation kernel (quantized types only).
int cuda_bench_matvec_cfg(int type, const void *w, int rows, int cols, int iters, int R, int NT,
                          int q8, double *us, wk_error *err);
// Device-to-device copy bandwidth (bytes read + written per second) and
// cuBLAS bf16 GEMM rate (FLOP/s) on random data, m = n = k = size.
int cuda_bench_ceilings(double *copy_bps, double *gemm_flops, int size, wk_error *err);
// Device memory in use (by every process) and in total, in bytes.
int cuda_bench_mem_used(uint64_t *used, uint64_t *total);

#ifdef __cplusplus
}
#endif

#endif
