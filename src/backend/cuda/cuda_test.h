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
// path 0: the default matrix-vector kernels (x rounded to int8 per 32
// values for the quantized types, v5; f32 x for the others, v4); 1: the GEMM
// path (dequantize + cuBLAS); 2: (n = 1) the rows as three matrices in one
// launch of path 0; 3: f32 x for every type (v4); 4: the streamed kernel
// (int8 x for the quantized types); 5: (rows == cols) y = W (W x), two
// launches of path 4 with programmatic dependent launch, the second reading
// the first's output.
int cuda_test_matmul(int type, const void *w, int rows, int cols, const float *x, int n, float *y,
                     int path, wk_error *err);
// y (n x rows) = (rmsnorm(x) * nw) . W^T, the norm (eps) folded into the
// matrix-vector kernel of path 0, 3 or 4 of cuda_test_matmul (only the
// streamed kernel takes it: WICK_ERR_UNSUPPORTED from v4). x is written
// on the device first by the embedding kernel (an F32 table of the n rows),
// and the product launched after it by programmatic dependent launch.
// graph: both launches captured in a CUDA graph, replayed twice (the output
// poisoned in between); *prog_edges gets the graph's programmatic edges (0
// without graph).
int cuda_test_matmul_norm(int type, const void *w, int rows, int cols, const float *x, int n,
                          const float *nw, float eps, int path, int graph, float *y,
                          int *prog_edges, wk_error *err);
// y (n x rows) = act(x' . Wg^T) * (x' . Wu^T) through the fused gate/up
// matrix-vector kernel of path 0 (quantized types) or 4 (every type) of
// cuda_test_matmul (act 0 SiLU, 1 GELU-tanh; n at most 4), x' = x, or with
// nw != NULL rmsnorm(x) * nw folded into the kernel. Returns
// WICK_ERR_INVALID for a pair the kernel does not serve.
int cuda_test_matvec_glu(int type, const void *wg, const void *wu, int rows, int cols,
                         const float *x, int n, const float *nw, float eps, int act, int path,
                         float *y, wk_error *err);
// out (n x cols) = scale * row ids[i] of W.
int cuda_test_embed(int type, const void *w, int rows, int cols, const int32_t *ids, int n,
                    float scale, float *out, wk_error *err);

// Attention of n_new query tokens at positions [n_ctx - n_new, n_ctx) of each
// of n_seqs sequences (0 counts as 1), the tokens of sequence i at batch rows
// [i * n_new, (i + 1) * n_new). Sequence i's keys/values k, v (rows
// [i * n_ctx, (i + 1) * n_ctx) of n_kv x hd, f32; stored as f16) lie in the
// cache blocks blocks[i * nb ..], nb = ceil(n_ctx / block_size), of a pool of
// n_pool blocks. kernel 0: the split kernels (splits parts; the group
// kernel of attn_decode.cu where it serves the shape, merging its splits
// itself); 1: the flash kernel (variant -1 its default configuration); 2: the
// split warp-per-key kernel; 3: the group kernel with the combine launch.
typedef struct cuda_test_attn {
  int n_heads, n_kv, hd, n_ctx, n_new, window, block_size, n_pool, splits;
  float scale, softcap;
  const int32_t *blocks;  // n_seqs * nb block ids
  int n_seqs, kernel, variant;
} cuda_test_attn;
int cuda_test_attention(const cuda_test_attn *a, const float *q, const float *k, const float *v,
                        float *out, wk_error *err);
// Attention timing: median microseconds of one launch of the kernel that
// cuda_test_attention would run for a (one sequence, blocks in order; K, V
// and q random on the device).
int cuda_bench_attention(const cuda_test_attn *a, int iters, double *us, wk_error *err);

// One configuration of the matrix-vector benchmark.
typedef struct cuda_mv_cfg {
  int mode;    // 0: the default kernels (v5 int8 x / v4); 1: v4 (f32 x); 2: streamed kernel,
               // int8 x for the quantized types; 3: streamed, f32 x
  int pdl;     // 1: programmatic dependent launch between the timed launches
  int shape;   // streamed (threads, rows a warp): 0 the type's; 1 (256, 1), 2 (128, 4),
               // 3 (512, 2) for f16, q4_k, q6_k, q8_0, fp8_e4m3
  int chunk;   // target bytes of a row's chunk; 0: the type's
  int stages;  // copy pipeline depth; 0: the type's
} cuda_mv_cfg;
// Matrix-vector timing: median microseconds of one W (rows x cols) . x
// (one token) over `iters` launches replayed as a CUDA graph, rotating among
// copies of W so the L2 cannot hold it; us[i] for cfg[i] (0 where the type
// has no such kernel or its block does not fit on an SM).
int cuda_bench_matvec(int type, const void *w, int rows, int cols, int iters,
                      const cuda_mv_cfg *cfg, int ncfg, double *us, wk_error *err);
// Device-to-device copy bandwidth (bytes read + written per second) and
// cuBLAS bf16 GEMM rate (FLOP/s) on random data, m = n = k = size.
int cuda_bench_ceilings(double *copy_bps, double *gemm_flops, int size, wk_error *err);
// Device memory in use (by every process) and in total, in bytes.
int cuda_bench_mem_used(uint64_t *used, uint64_t *total);

#ifdef __cplusplus
}
#endif

#endif
