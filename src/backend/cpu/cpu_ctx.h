// The CPU backend's private state, shared by cpu_backend.c (prepare, batch
// checks, KV copies, lifetime) and forward.c (the transformer forward).
//
// KV cache layout: for each layer, K is [n_blocks][n_kv_heads][block_size]
// [head_dim] elements (f16 or f32: kv_f16), V the same, layers one after
// another in two arrays (k_cache, v_cache). A block's rows of one head lie
// together, so that decode attention, which takes a block's heads in turn,
// reads each block front to back: with the heads side by side in each row
// (the layout before session 24) a head's pass read 1 / n_kv_heads of every
// row, and streaming such rows from L3 or memory ran at 9-16 GB/s against
// 21-31 in this order (a read-only probe, 3 and 8 heads of 64 f16), decode
// attention at 2000 keys 5.8 GB/s (SmolLM2's 3 KV heads, bench_attn_cpu).
#ifndef WICK_BACKEND_CPU_CTX_H
#define WICK_BACKEND_CPU_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "base/pool.h"

typedef struct layer_vecs {  // f32 copies of a layer's 1-D tensors (NULL if absent)
  float *attn_norm, *bq, *bk, *bv, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffn_norm;
  double *freqs;             // [rope_dim / 2] RoPE angle per position of each pair
} layer_vecs;

typedef struct layer_mm {    // the path of each of a layer's matrices
  cpu_mm wq, wk, wv, wo, gate, up, down;
} layer_mm;

typedef struct cpu_ctx {
  const wk_model *m;
  wk_backend_params p;
  wk_pool *pool;
  int n_threads;
  bool avx2;              // attention's vector code may use AVX2 + FMA
  bool avx512;            // and its decode kernel AVX-512 F
  layer_vecs *lv;         // [n_layers]
  layer_mm *lm;           // [n_layers]
  cpu_mm out_mm;          // the output (logits) matrix
  uint8_t *packed;        // every matrix's packed copy (cpu_mm_pack), one block of
  size_t packed_bytes;    // this many bytes (wk_alloc_huge)
  cpu_act act;            // converted inputs of the current matrix products
  float *vecs;            // storage of every layer_vecs float vector and out_norm
  double *freqs;          // [n_layers][rope_dim / 2]
  float *out_norm;        // (dim)
  void *k_cache, *v_cache;  // f16 (kv_f16) or f32 elements, 64-byte aligned
  void *k_alloc, *v_alloc;  // their allocations
  bool kv_f16;            // the fast path with AVX2 + F16C: K and V stored as f16
  size_t kv_esz;          // bytes of one K or V element: 2 (kv_f16) or 4
  size_t kv_dim;          // n_kv_heads * head_dim
  size_t kv_layer;        // elements of one layer in k_cache (and in v_cache)
  size_t max_pos;         // n_blocks * block_size: most positions a sequence can hold
  float *x, *xb;          // [T][dim] residual stream, normalized / projected
  float *q, *att;         // [T][n_heads * head_dim]
  float *k, *v;           // [T][kv_dim]
  float *gate, *up;       // [T][ffn_dim]
  float *xl;              // [max_logits][dim] rows whose logits are wanted
  int32_t *tok_seq;       // [T] sequence of each token
  int32_t *tok_pos;       // [T] position of each token
  float *mm_scratch;      // [n_threads][mm_per] (exact path)
  size_t mm_per;
  float *att_scratch;     // [n_threads][att_per]
  size_t att_per;
  float *att_part;        // [att_part_n] decode splits' softmax states
  size_t att_part_n;
  uint64_t ws_bytes, kv_bytes;
} cpu_ctx;

// Runs a checked batch (tok_seq / tok_pos filled) through every layer and
// writes the logits rows.
void cpu_forward_batch(cpu_ctx *c, const wk_batch *bt, float *logits);

#endif
