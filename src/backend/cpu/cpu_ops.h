// The CPU backend's element-wise, normalization, RoPE and attention ops
// (norm.c, rope.c, act.c, attention.c). All f32, row-major.
#ifndef WICK_BACKEND_CPU_OPS_H
#define WICK_BACKEND_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
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

// act.c: g[i] = act(g[i]) * u[i].
void cpu_swiglu(float *g, const float *u, size_t n);      // act = silu
void cpu_geglu_tanh(float *g, const float *u, size_t n);  // act = gelu, tanh approximation
float cpu_silu(float x);
float cpu_gelu_tanh(float x);

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

// attention.c: causal attention of new tokens over a paged KV cache.
// Cache layout (one layer): [n_blocks][block_size][n_kv_heads * head_dim] for
// K and the same for V; position p of a sequence lives in block
// blocks[p / block_size], slot p % block_size.
typedef struct cpu_attn {
  const float *q;          // [n_tokens][n_heads * head_dim], already rotated
  float *out;              // [n_tokens][n_heads * head_dim]
  const float *k_cache;    // this layer's K blocks
  const float *v_cache;    // this layer's V blocks
  const wk_seq *seqs;      // the batch's sequences
  const int32_t *tok_seq;  // [n_tokens] sequence index of each token
  const int32_t *tok_pos;  // [n_tokens] position of each token
  int n_tokens;
  int n_heads, n_kv_heads, head_dim;
  int block_size;
  int window;              // 0: attend to all earlier positions; else to (p - window, p]
  float scale;             // scores = q.k * scale
  float softcap;           // 0 = none; scores = c * tanh(scores / c)
  float *scratch;          // per thread: scratch_per_thread floats >= longest sequence
  size_t scratch_per_thread;
} cpu_attn;
void cpu_attention(wk_pool *pool, const cpu_attn *a);

#endif
