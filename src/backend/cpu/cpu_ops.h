// The CPU backend's element-wise, normalization, RoPE and attention ops
// (norm.c, rope.c, act.c, attention.c). All f32, row-major. The fused passes
// (cpu_resid_norm, cpu_qkv_post, cpu_glu) split tokens across the pool and
// write the next matrix product's converted activations as they go.
#ifndef WICK_BACKEND_CPU_OPS_H
#define WICK_BACKEND_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "base/pool.h"

// norm.c: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for n_rows rows of d
// (y may equal x; w NULL means no weight).
void cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n_rows, int d, float eps);
// y[i] += x[i]
void cpu_add(float *y, const float *x, size_t n);
// x[r][i] += b[i] for n_rows rows of d.
void cpu_add_bias(float *x, const float *b, int64_t n_rows, int d);
// x[i] = c * tanh(x[i] / c)
void cpu_softcap(float *x, size_t n, float c);

// The residual step between blocks, per token (fused, threads over tokens):
//   if add:   add = rmsnorm(add) * add_w (when add_w), x += add;
//   if out:   out = rmsnorm(x) * w, converted into act for the formats `need`.
// out may equal add. With act, act is set to out ([n_tokens][d]) and marked
// ready for `need`.
typedef struct cpu_resid {
  float *x;             // [n_tokens][d] residual stream
  float *add;           // [n_tokens][d] block output, or NULL
  const float *add_w;   // (d) post-norm weight of add, or NULL
  float *out;           // [n_tokens][d] normalized x, or NULL
  const float *w;       // (d) norm weight of out (NULL: none)
  int n_tokens, d;
  float eps;
  cpu_act *act;         // NULL: no conversion
  unsigned need;        // formats to convert out into (cpu_mm_need bits)
} cpu_resid;
void cpu_resid_norm(wk_pool *pool, const cpu_resid *r);

// act.c: g[i] = act(g[i]) * u[i].
void cpu_swiglu(float *g, const float *u, size_t n);      // act = silu
void cpu_geglu_tanh(float *g, const float *u, size_t n);  // act = gelu, tanh approximation
float cpu_silu(float x);
float cpu_gelu_tanh(float x);
// g = act(g) * u for n_tokens rows of d (gelu: gelu_tanh, else silu; relative
// error ~1e-7; avx2: the CPU has AVX2 + FMA), then rows converted into act for
// `need` (act NULL: none) and act marked ready.
void cpu_glu(wk_pool *pool, bool avx2, bool gelu, float *g, const float *u, int n_tokens, int d,
             cpu_act *act, unsigned need);

// rope.c: rotates the first rope_dim dims of every head; the angle of pair i
// at position p is p * freqs[i].
typedef struct cpu_rope {
  int head_dim;
  int rope_dim;         // even, <= head_dim
  bool neox;            // true: pairs (i, i + rope_dim/2); false: (2i, 2i+1)
  const double *freqs;  // [rope_dim / 2], from cpu_rope_freqs
} cpu_rope;
// freqs[i] = freq_scale * base^(-2i / rope_dim) / freq_div[i] (freq_div may be NULL).
void cpu_rope_freqs(double *freqs, int rope_dim, float base, float freq_scale,
                    const float *freq_div);
// q is [n_tokens][n_q_heads * head_dim], k likewise; pos[t] is token t's
// position. q and k (either may be NULL) are rotated with the same angles.
void cpu_rope_apply(const cpu_rope *r, float *q, int n_q_heads, float *k, int n_k_heads,
                    int n_tokens, const int32_t *pos);

// Everything between the Q/K/V products and attention, one pass per token
// (threads over tokens): biases, per-head RMSNorm of Q and K, RoPE, and K, V
// stored into the paged cache (layout as for cpu_attn).
typedef struct cpu_qkv {
  float *q;                       // [n_tokens][n_heads * head_dim]
  float *k, *v;                   // [n_tokens][n_kv_heads * head_dim]
  const float *bq, *bk, *bv;      // biases, or NULL
  const float *q_norm, *k_norm;   // (head_dim) per-head RMSNorm weights, or NULL
  float eps;
  cpu_rope rope;
  int n_heads, n_kv_heads;
  void *k_cache, *v_cache;        // this layer's K and V blocks (f16 with kv_f16, else f32)
  bool kv_f16;                    // f16 elements (set only where AVX2 + F16C run)
  const wk_seq *seqs;
  const int32_t *tok_seq, *tok_pos;
  int n_tokens, block_size;
} cpu_qkv;
void cpu_qkv_post(wk_pool *pool, const cpu_qkv *p);
// n floats to f16 (round to nearest even), with F16C; callers
// check the AVX2 level (wk_kernel_best_level: AVX2, FMA and F16C).
void cpu_f32_to_f16c(uint16_t *dst, const float *src, size_t n);

// attention.c: causal attention of new tokens over a paged KV cache.
// Cache layout (one layer): [n_blocks][block_size][n_kv_heads * head_dim] for
// K and the same for V; position p of a sequence lives in block
// blocks[p / block_size], slot p % block_size. Work items are (query tile of
// one sequence, KV head): each streams the K and V rows its tile can see once
// for all the query heads sharing that KV head (GQA), with an online softmax.
typedef struct cpu_attn {
  const float *q;          // [n_tokens][n_heads * head_dim], already rotated
  float *out;              // [n_tokens][n_heads * head_dim]
  const void *k_cache;     // this layer's K blocks (f16 with kv_f16, else f32)
  const void *v_cache;     // this layer's V blocks
  bool kv_f16;             // f16 elements: each block's rows of the item's head go to f32
                           // in the scratch first (AVX2 + F16C; only with avx2)
  const wk_seq *seqs;      // the batch's sequences (new tokens contiguous per sequence)
  int n_seqs;
  const int32_t *tok_seq;  // [n_tokens] sequence index of each token
  const int32_t *tok_pos;  // [n_tokens] position of each token
  int n_tokens;
  int n_heads, n_kv_heads, head_dim;
  int block_size;
  int window;              // 0: attend to all earlier positions; else to (p - window, p]
  float scale;             // scores = q.k * scale
  float softcap;           // 0 = none; scores = c * tanh(scores / c)
  float *scratch;          // per thread: scratch_per_thread floats
  size_t scratch_per_thread;  // >= cpu_attn_scratch(n_heads, n_kv_heads, head_dim, block_size)
  bool avx2;               // the CPU has AVX2 + FMA (wk_kernel_best_level)
  bool avx512;             // and AVX-512 F (wk_kernel_best_level >= WK_LEVEL_AVX512BW)
  float *partial;          // decode splits' states (NULL: no splitting)
  size_t partial_floats;   // cpu_attn_partial(...)
} cpu_attn;
size_t cpu_attn_scratch(int n_heads, int n_kv_heads, int head_dim, int block_size);
size_t cpu_attn_partial(int n_heads, int head_dim, int n_threads);
void cpu_attention(wk_pool *pool, const cpu_attn *a);

#endif
