// The model description: architecture, hyperparameters and the tensor map,
// read from GGUF metadata. Shared by every backend; holds no kernels.
#ifndef WICK_MODEL_MODEL_H
#define WICK_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"

typedef enum wk_arch {
  WK_ARCH_LLAMA = 0,  // SmolLM2, Llama 2/3, Mistral
  WK_ARCH_QWEN2,      // llama + QKV bias
  WK_ARCH_QWEN3,      // llama + per-head RMSNorm on Q and K before RoPE
  WK_ARCH_GEMMA3,     // see model.c
} wk_arch;

typedef enum wk_act {
  WK_ACT_SILU = 0,       // SwiGLU: silu(gate) * up
  WK_ACT_GELU_TANH = 1,  // GeGLU: gelu_tanh(gate) * up
} wk_act;

// A weight: data points into the mapped file (or is NULL when absent).
typedef struct wk_tensor {
  const char *name;  // as in the file
  const void *data;  // NULL = absent (optional tensors only)
  int type;          // wk_type id
  int n_dims;
  int64_t ne[4];     // ne[0] = row length (input features), ne[1] = rows
  uint64_t nbytes;
} wk_tensor;

typedef struct wk_layer {
  wk_tensor attn_norm;       // (dim)
  wk_tensor wq;              // (dim -> n_heads * head_dim): ne = {dim, n_heads*head_dim}
  wk_tensor wk;              // ne = {dim, n_kv_heads*head_dim}
  wk_tensor wv;              // ne = {dim, n_kv_heads*head_dim}
  wk_tensor wo;              // ne = {n_heads*head_dim, dim}
  wk_tensor bq, bk, bv;      // (qwen2) biases, else absent
  wk_tensor q_norm, k_norm;  // (qwen3, gemma3) per-head RMSNorm weights (head_dim)
  wk_tensor post_attn_norm;  // (gemma3) norm of the attention output (dim)
  wk_tensor ffn_norm;        // (dim)
  wk_tensor w_gate;          // ne = {dim, ffn_dim}
  wk_tensor w_up;            // ne = {dim, ffn_dim}
  wk_tensor w_down;          // ne = {ffn_dim, dim}
  wk_tensor post_ffn_norm;   // (gemma3) norm of the MLP output (dim)
  int sliding_window;        // 0 = global attention, else window in tokens
  float rope_base;           // RoPE theta used by this layer
  float rope_freq_scale;     // angles multiplied by this (1 / linear scaling factor), else 1
} wk_layer;

typedef struct wk_rope_scaling {
  int kind;               // 0 none, 1 llama3, 2 linear
  float factor;           // linear / llama3 factor
  float low_freq_factor;  // llama3
  float high_freq_factor; // llama3
  int orig_ctx;           // llama3 original_max_position_embeddings
} wk_rope_scaling;

typedef struct wk_model {
  wk_arch arch;
  char arch_name[32];
  int n_layers;
  int dim;           // hidden size
  int n_heads;       // query heads
  int n_kv_heads;    // key/value heads (GQA)
  int head_dim;      // per-head size of Q and K (and V)
  int ffn_dim;       // intermediate size
  int vocab;         // rows of the embedding
  int ctx_train;     // trained context length
  float norm_eps;
  int rope_dim;      // rotated dims per head (= head_dim unless declared)
  bool rope_neox;    // true: rotate halves (x[i], x[i+d/2]); false: adjacent pairs
  wk_rope_scaling rope_scaling;
  float attn_scale;      // scores = q.k * attn_scale
  float emb_scale;       // embeddings multiplied by this (gemma3: sqrt(dim)), else 1
  float final_softcap;   // 0 = none; logits = c * tanh(logits / c)
  float attn_softcap;    // 0 = none
  wk_act act;
  wk_tensor tok_embd;    // ne = {dim, vocab}
  wk_tensor out_norm;    // (dim)
  wk_tensor output;      // ne = {dim, vocab}; equals tok_embd when tied
  bool tied_output;
  bool weights_mapped;   // tensor data lies in a read-only private file mapping (gguf_is_mapped)
  wk_tensor rope_freqs;  // (rope_dim / 2) per-pair angle divisors (llama 3 scaling), or absent
  wk_layer *layers;      // [n_layers]
} wk_model;

// Fills m from a GGUF file (tensor data points into f's mapping, which must
// outlive m). Clear error for an unsupported architecture or a missing or
// misshapen tensor.
int model_load(wk_model *m, const gguf_file *f, wk_error *err);
void model_free(wk_model *m);
// Bytes of all weights (for reporting).
uint64_t model_weight_bytes(const wk_model *m);

#endif
