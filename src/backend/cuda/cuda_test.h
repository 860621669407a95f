// Test and benchmark entry points of the CUDA kernels (extern "C"), used by
// tests/unit/test_cuda_kernels.c, test_cuda_attn_post.c and the CUDA
// benchmark. Host buffers in, host buffers out; every output is poisoned
// (NaN) on the device first.
// Each returns WICK_OK or a status with err filled.
#ifndef WICK_BACKEND_CUDA_CUDA_TEST_H
#define WICK_BACKEND_CUDA_CUDA_TEST_H

#include <stdint.h>
#include <string.h>

#include "base/error.h"

// Whether name is one of the comma-separated names of list (a device run's
// type filter: WICK_TEST_TYPES, bench_cuda's type lists).
static inline int cuda_test_name_listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

#ifdef __cplusplus
extern "C" {
#endif

// y (n x rows) = x (n x cols) . W^T for W (rows x cols) of a weight type.
// path 0: the default matrix-vector kernels (x rounded to int8 per 32
// values for the quantized types, v5; f32 x for the others, v4); 1: the GEMM
// path (dequantize + cuBLAS; Q4_K and Q6_K batches of up to 32 tokens take
// the fused kernel, mmq.cuh, since sessions 16-17); 14: path 1 with a scratch of 8
// rows (the fused kernel in several pieces of rows); 15: path 1 without
// the fused kernel; 16: path 1 with the fused kernel's grid at 4 blocks
// (each split's block walking all its row tiles); 2: (n = 1) the rows as three matrices in one
// launch of path 0; 3: f32 x for every type (v4); 4: the streamed kernel
// (int8 x for the quantized types); 5: (rows == cols) y = W (W x), two
// launches of path 4 with programmatic dependent launch, the second reading
// the first's output; 6: the register-streamed kernel (MV_REG: mvr.cuh for
// Q4_K, Q5_K, Q6_K, Q8_0 with int8 x, FP8 E4M3/E5M2 with f32 x; path 0's
// kernels for the other types; since session 15 Q4_0, Q8_0, Q4_K, Q5_K,
// Q6_K batches of n >= 4 on the tensor-core kernel, mvt.cuh); 12: path 6 without the
// tensor-core kernel; 13: path 6 with it at every n, up to 8 tokens a
// block; 7: (n = 1) the rows as
// three matrices in
// one launch of path 6; 8: y = W x, then y = W x + 1 y through path 6 with
// dependent launch (2 W x: beta); 9: one launch of the register-streamed
// kernel at the type's shape for every type it has a format for (path 6's
// types plus F16 and BF16, f32 x), no dependent launch; 10: (Q4_K, Q5_K)
// one launch of the register-streamed kernel with its wide format
// (mvr_w4.cuh: 4 lanes a super-block, 32 qs bytes a lane), no dependent
// launch; 11: (FP8 E4M3, cols a multiple of 512) the same with the FP8
// format in 16-byte pieces (mvr_fp8w.cuh: f16 x, packed f16 FMAs).
int cuda_test_matmul(int type, const void *w, int rows, int cols, const float *x, int n, float *y,
                     int path, wk_error *err);
// y (n x rows) = (rmsnorm(x) * nw) . W^T, the norm (eps) folded into the
// matrix-vector kernel of path 0, 3, 4, 6, 10, 11 (no graph), 12 or 13 of cuda_test_matmul (only the
// streamed and register-streamed kernels take it: WICK_ERR_UNSUPPORTED from v4). x is written
// on the device first by the embedding kernel (an F32 table of the n rows),
// and the product launched after it by programmatic dependent launch.
// graph: both launches captured in a CUDA graph, replayed twice (the output
// poisoned in between); *prog_edges gets the graph's programmatic edges (0
// without graph).
int cuda_test_matmul_norm(int type, const void *w, int rows, int cols, const float *x, int n,
                          const float *nw, float eps, int path, int graph, float *y,
                          int *prog_edges, wk_error *err);
// y (n x rows) = act(x' . Wg^T) * (x' . Wu^T) through the fused gate/up
// matrix-vector kernel of path 0 (quantized types), 4 (every type), 6
// (its types), 10 (Q4_K, Q5_K) or 11 (FP8 E4M3) of cuda_test_matmul (act 0 SiLU, 1 GELU-tanh; n at most
// 4), x' = x, or with nw != NULL rmsnorm(x) * nw folded into the kernel. Returns
// WICK_ERR_INVALID for a pair the kernel does not serve.
int cuda_test_matvec_glu(int type, const void *wg, const void *wu, int rows, int cols,
                         const float *x, int n, const float *nw, float eps, int act, int path,
                         float *y, wk_error *err);
// y = (W x, W' x, W6 x) for one token through the default context's
// kernels (path 6, dependent launch): W ra rows and W' rb rows of `type`
// (contiguous in w), W6 r6 rows of Q6_K, as a layer's Q, K and V; with nw,
// rmsnorm(x) * nw folded in. split: the two types as separate launches
// (WICK_CUDA_PAIR=0). *paired: whether one launch (cu_matvec_pair) took them.
int cuda_test_matvec_pair(int type, const void *w, int ra, int rb, const void *w6, int r6,
                          int cols, const float *x, const float *nw, float eps, int split,
                          float *y, int *paired, wk_error *err);
// out (n x cols) = scale * row ids[i] of W.
int cuda_test_embed(int type, const void *w, int rows, int cols, const int32_t *ids, int n,
                    float scale, float *out, wk_error *err);
// out ((r1 - r0) x cols, f16 bits) = rows [r0, r1) of W dequantized to f16
// by the GEMM path (cu_dequant_f16) at deq_f16.cuh's shape (0 the default
// tiled kernel, 1 to 5 its other shapes, -1 the row kernel); the output and
// 64 values after it poisoned first (WICK_ERR_RANGE if those are written).
int cuda_test_dequant_f16(int type, const void *w, int rows, int cols, int r0, int r1, int shape,
                          uint16_t *out, wk_error *err);

// Attention of n_new query tokens at positions [n_ctx - n_new, n_ctx) of each
// of n_seqs sequences (0 counts as 1), the tokens of sequence i at batch rows
// [i * n_new, (i + 1) * n_new). Sequence i's keys/values k, v (rows
// [i * n_ctx, (i + 1) * n_ctx) of n_kv x hd, f32; stored as f16) lie in the
// cache blocks blocks[i * nb ..], nb = ceil(n_ctx / block_size), of a pool of
// n_pool blocks. kernel 0: the split kernels (splits parts; the group
// kernel of attn_decode.cu where it serves the shape, merging its splits
// itself, in clusters where they fit); 1: the flash kernel (variant -1 its
// default configuration); 2: the split warp-per-key kernel; 3: the group
// kernel with the combine launch; 4: kernel 0 merging through its counters
// only (never in a cluster).
typedef struct cuda_test_attn {
  int n_heads, n_kv, hd, n_ctx, n_new, window, block_size, n_pool, splits;
  float scale, softcap;
  const int32_t *blocks;  // n_seqs * nb block ids
  int n_seqs, kernel, variant;
  int cold;  // cuda_bench_attention: 4 copies of the K/V pool, launch i reading copy i % 4
             // (K/V not left in L2 by the launch before, as in a decode across layers)
} cuda_test_attn;
int cuda_test_attention(const cuda_test_attn *a, const float *q, const float *k, const float *v,
                        float *out, wk_error *err);
// 1 if kernel 0 runs a's shape (one token a sequence) with its splits merged
// in thread-block clusters on this GPU, else 0.
int cuda_test_attn_clusters(const cuda_test_attn *a);
// Decode attention from the raw Q/K/V products (before bias, QK-norm and
// RoPE) through cu_attention as run_layers calls it in decode: n_seqs
// sequences, one new token each, sequence i's at position n_ctx[i] - 1 and
// at batch row i. q: n_seqs rows of n_heads x hd; k, v: n_seqs rows of
// n_kv x hd (the new tokens'). k_past, v_past: each sequence's n_ctx[i] - 1
// earlier rows of n_kv x hd in turn, already finished (f32; stored as f16 in
// the paged cache, unused slots and the new tokens' slots NaN). The raw
// rows reach q/k/v through a kernel launched just before, as the products do.
// The whole step runs twice (outputs, partials and new slots poisoned with
// NaN before each; the split counters must come back to zero); the second
// run's results come back: out (n_seqs x n_heads x hd), and k_new, v_new
// (n_seqs x n_kv x hd) the f16 rows the step wrote into the cache. *splits
// gets the key splits used. WICK_ERR_UNSUPPORTED for a shape the decode
// kernel does not serve (the epilogue would not be in it).
typedef struct cuda_test_attn_post {
  int n_heads, n_kv, hd;
  int rope_dim;               // rotated dims a head (even, <= hd)
  int rope_neox;              // 1: pairs (i, i + rope_dim / 2); 0: (2i, 2i + 1)
  const double *inv_freq;     // [rope_dim / 2] angle per position of each pair
  const float *bq, *bk, *bv;  // [n_heads * hd], [n_kv * hd], [n_kv * hd]; NULL: none
  const float *q_norm;        // [hd] per-head RMSNorm weight of Q; NULL: none
  const float *k_norm;        // [hd] of K; NULL: none
  float eps;                  // of both norms
  float scale, softcap;       // q.k scale; score soft-cap (0: none)
  int window;                 // keys a query sees, itself included (0: all)
  int block_size, n_pool;     // KV slots a block; blocks in the pool
  int n_seqs;
  const int32_t *n_ctx;       // [n_seqs] keys of each sequence, the new one included (>= 1)
  const int32_t *blocks;      // block tables: ceil(n_ctx[i] / block_size) ids a sequence, in turn
  int splits;                 // key splits; 0: as the backend picks them for this batch
  int path;                   // 0: the epilogue in the decode kernel, which merges its splits
                              // (the default); 1: as its own launch first
                              // (WICK_CUDA_ATTN=postapart); 2: in the kernel, splits merged by
                              // the combine launch (=nomerge)
  int graph;                  // 1: the step captured in a CUDA graph and replayed
} cuda_test_attn_post;
int cuda_test_attention_post(const cuda_test_attn_post *a, const float *q, const float *k,
                             const float *v, const float *k_past, const float *v_past,
                             float *out, float *k_new, float *v_new, int *splits,
                             wk_error *err);
// Attention timing: median microseconds of one launch of the kernel that
// cuda_test_attention would run for a (one sequence, blocks in order; K, V
// and q random on the device).
int cuda_bench_attention(const cuda_test_attn *a, int iters, double *us, wk_error *err);
#ifdef WICK_CUDA_STAMPS
// A measurement build's timeline stamps of the last decode attention launch
// (attn_decode_common.cuh says the slots): n blocks of 16 each.
int cuda_attn_stamps(unsigned long long *out, int n);
#endif

// One configuration of the matrix-vector benchmark.
typedef struct cuda_mv_cfg {
  int mode;    // 0: the default kernels (v5 int8 x / v4); 1: v4 (f32 x); 2: streamed kernel,
               // int8 x for the quantized types; 3: streamed, f32 x; 4: the
               // register-streamed kernel (its types only; shape 0 the type's
               // (threads, rows a step, steps in flight), 1 (1024, 1, 1), 2
               // (512, 2, 1), 3 (768, 1, 2), 4 the wide format of Q4_K and Q5_K
               // (mvr_w4.cuh), 5 the same at its ALT shape, 6 FP8 E4M3 in 16-byte
               // pieces (mvr_fp8w.cuh), 7-9 FP8 at 2, 3, 5 items in flight; 10
               // the tensor-core kernel (mvt.cuh), 11 the same at 256
               // threads; chunk and stages
               // unused); 5: the
               // GEMM path's dequantization of all of W to f16 (cu_dequant_f16;
               // shape 1 to 5 deq_f16.cuh's other tiled shapes); 6: the same
               // by the row kernel it replaced (one thread a group)
  int pdl;     // 1: programmatic dependent launch between the timed launches
  int shape;   // streamed (threads, rows a warp): 0 the type's; 1 (256, 1), 2 (128, 4),
               // 3 (512, 2) for f16, q4_k, q6_k, q8_0, fp8_e4m3; mode 5: see there
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
