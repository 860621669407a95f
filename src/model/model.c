// The model description from GGUF metadata and tensor names.
//
// Per-architecture facts (as the GGUF files produced by llama.cpp's converter
// store them):
//   llama   Q/K rows are permuted by the converter so RoPE rotates adjacent
//           pairs (x[2i], x[2i+1]); optional rope_freqs tensor (Llama 3).
//   qwen2   llama + Q/K/V biases; RoPE rotates halves (x[i], x[i+d/2]).
//   qwen3   llama + per-head RMSNorm on Q and K before RoPE; halves RoPE.
//   gemma3  embeddings * sqrt(dim); every norm weight already holds the +1 of
//           Gemma's (1 + w) so norms are plain x * w; norms before and after
//           attention and MLP; GeGLU with tanh gelu; QK-norm; layer i is
//           global iff (i + 1) % 6 == 0, the others use a sliding window and
//           RoPE base 10000 without scaling; halves RoPE; tied output.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "model/model.h"
#include "quant/types.h"

typedef struct arch_info {
  const char *name;
  wk_arch arch;
  bool neox;  // RoPE over halves
} arch_info;

static const arch_info k_archs[] = {
    {"llama", WK_ARCH_LLAMA, false},
    {"qwen2", WK_ARCH_QWEN2, true},
    {"qwen3", WK_ARCH_QWEN3, true},
    {"gemma3", WK_ARCH_GEMMA3, true},
};

enum { GEMMA3_SWA_PATTERN = 6, GEMMA3_LOCAL_ROPE_BASE = 10000 };

// ---- metadata ----

static const gguf_kv *arch_kv(const gguf_file *f, const char *arch, const char *suffix) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  return gguf_get(f, key);
}

// Integer key: required (missing -> error) or with a default. Arrays (per-layer
// values) are accepted when all elements are equal.
static int key_int(const gguf_file *f, const char *arch, const char *suffix, bool required,
                   int64_t def, int64_t *out, wk_error *err) {
  const gguf_kv *kv = arch_kv(f, arch, suffix);
  if (!kv) {
    if (required)
      return wk_fail(err, WICK_ERR_FORMAT, "model: missing metadata key '%s.%s'", arch, suffix);
    *out = def;
    return WICK_OK;
  }
  if (gguf_kv_type(kv) == GGUF_ARRAY) {
    uint64_t n = gguf_arr_len(kv);
    int64_t v0 = 0, v = 0;
    if (n == 0 || !gguf_arr_int(kv, 0, &v0))
      return wk_fail(err, WICK_ERR_FORMAT, "model: key '%s.%s': expected an integer, found an "
                     "empty or non-numeric array", arch, suffix);
    for (uint64_t i = 1; i < n; i++)
      if (!gguf_arr_int(kv, i, &v) || v != v0)
        return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: key '%s.%s': per-layer values differ "
                       "(element %" PRIu64 " is %" PRId64 ", element 0 is %" PRId64 ")",
                       arch, suffix, i, v, v0);
    *out = v0;
    return WICK_OK;
  }
  if (!gguf_kv_int(kv, out))
    return wk_fail(err, WICK_ERR_FORMAT, "model: key '%s.%s': expected an integer", arch, suffix);
  return WICK_OK;
}

static double key_float(const gguf_file *f, const char *arch, const char *suffix, double def) {
  const gguf_kv *kv = arch_kv(f, arch, suffix);
  double v;
  return kv && gguf_kv_float(kv, &v) ? v : def;
}

static int check_positive(const char *what, int64_t v, int64_t max, wk_error *err) {
  if (v <= 0 || v > max)
    return wk_fail(err, WICK_ERR_FORMAT, "model: %s = %" PRId64 ", expected 1..%" PRId64, what,
                   v, max);
  return WICK_OK;
}

// ---- tensors ----

// Looks up a tensor and checks its shape: ne1 == 0 means a vector of ne0.
static int get_tensor(const gguf_file *f, wk_tensor *t, const char *name, int64_t ne0,
                      int64_t ne1, bool required, wk_error *err) {
  memset(t, 0, sizeof *t);
  const gguf_tensor *g = gguf_find_tensor(f, name);
  if (!g) {
    if (!required) return WICK_OK;
    if (ne1)
      return wk_fail(err, WICK_ERR_FORMAT, "model: missing tensor '%s' (expected shape [%" PRId64
                     ", %" PRId64 "])", name, ne0, ne1);
    return wk_fail(err, WICK_ERR_FORMAT, "model: missing tensor '%s' (expected shape [%" PRId64
                   "])", name, ne0);
  }
  int64_t want1 = ne1 ? ne1 : 1;
  if (g->ne[0] != ne0 || g->ne[1] != want1 || g->ne[2] != 1 || g->ne[3] != 1) {
    char found[128];
    int n = snprintf(found, sizeof found, "[%" PRId64, g->ne[0]);
    for (uint32_t d = 1; d < g->n_dims && n > 0 && (size_t)n < sizeof found; d++)
      n += snprintf(found + n, sizeof found - (size_t)n, ", %" PRId64, g->ne[d]);
    if (n > 0 && (size_t)n < sizeof found) snprintf(found + n, sizeof found - (size_t)n, "]");
    if (ne1)
      return wk_fail(err, WICK_ERR_FORMAT, "model: tensor '%s' has shape %s, expected [%" PRId64
                     ", %" PRId64 "]", name, found, ne0, ne1);
    return wk_fail(err, WICK_ERR_FORMAT, "model: tensor '%s' has shape %s, expected [%" PRId64
                   "]", name, found, ne0);
  }
  const wk_type_info *ti = wk_type_get(g->type);
  if (!ti || !ti->computable)
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: tensor '%s' has type %s (%d), which wick "
                   "cannot compute", name, ti ? ti->name : "unknown", g->type);
  if (ne0 % ti->block)
    return wk_fail(err, WICK_ERR_FORMAT, "model: tensor '%s': row length %" PRId64 " is not a "
                   "multiple of the %s block size %d", name, ne0, ti->name, ti->block);
  t->name = g->name;
  t->data = g->data;
  t->type = g->type;
  t->n_dims = (int)g->n_dims;
  for (int d = 0; d < 4; d++) t->ne[d] = g->ne[d];
  t->nbytes = g->nbytes;
  return WICK_OK;
}

static int get_layer_tensor(const gguf_file *f, wk_tensor *t, int il, const char *suffix,
                            int64_t ne0, int64_t ne1, bool required, wk_error *err) {
  char name[96];
  snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
  return get_tensor(f, t, name, ne0, ne1, required, err);
}

static int load_layer(wk_model *m, const gguf_file *f, int il, wk_error *err) {
  wk_layer *l = &m->layers[il];
  const int64_t dim = m->dim, q_dim = (int64_t)m->n_heads * m->head_dim;
  const int64_t kv_dim = (int64_t)m->n_kv_heads * m->head_dim, ffn = m->ffn_dim;
  const bool qkv_bias = m->arch == WK_ARCH_QWEN2;
  const bool qk_norm = m->arch == WK_ARCH_QWEN3 || m->arch == WK_ARCH_GEMMA3;
  const bool post_norms = m->arch == WK_ARCH_GEMMA3;
  int rc;
  const struct {
    wk_tensor *t;
    const char *suffix;
    int64_t ne0, ne1;
    bool required;
  } specs[] = {
      {&l->attn_norm, "attn_norm.weight", dim, 0, true},
      {&l->wq, "attn_q.weight", dim, q_dim, true},
      {&l->wk, "attn_k.weight", dim, kv_dim, true},
      {&l->wv, "attn_v.weight", dim, kv_dim, true},
      {&l->wo, "attn_output.weight", q_dim, dim, true},
      {&l->bq, "attn_q.bias", q_dim, 0, qkv_bias},
      {&l->bk, "attn_k.bias", kv_dim, 0, qkv_bias},
      {&l->bv, "attn_v.bias", kv_dim, 0, qkv_bias},
      {&l->q_norm, "attn_q_norm.weight", m->head_dim, 0, qk_norm},
      {&l->k_norm, "attn_k_norm.weight", m->head_dim, 0, qk_norm},
      {&l->post_attn_norm, "post_attention_norm.weight", dim, 0, post_norms},
      {&l->ffn_norm, "ffn_norm.weight", dim, 0, true},
      {&l->w_gate, "ffn_gate.weight", dim, ffn, true},
      {&l->w_up, "ffn_up.weight", dim, ffn, true},
      {&l->w_down, "ffn_down.weight", ffn, dim, true},
      {&l->post_ffn_norm, "post_ffw_norm.weight", dim, 0, post_norms},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
    if ((rc = get_layer_tensor(f, specs[i].t, il, specs[i].suffix, specs[i].ne0, specs[i].ne1,
                               specs[i].required, err)))
      return rc;
  // Optional tensors are used only when present: reject ones this
  // architecture's forward would silently ignore.
  if (!qk_norm && (l->q_norm.data || l->k_norm.data))
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: blk.%d has attn_q_norm/attn_k_norm, which "
                   "architecture '%s' does not use", il, m->arch_name);
  if (!post_norms && (l->post_attn_norm.data || l->post_ffn_norm.data))
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: blk.%d has post-norms, which architecture "
                   "'%s' does not use", il, m->arch_name);

  l->rope_base = (float)key_float(f, m->arch_name, "rope.freq_base", 10000.0);
  l->rope_freq_scale = m->rope_scaling.kind == 2 ? 1.0f / m->rope_scaling.factor : 1.0f;
  l->sliding_window = 0;
  if (m->arch == WK_ARCH_GEMMA3 && (il + 1) % GEMMA3_SWA_PATTERN != 0) {
    int64_t w;
    if ((rc = key_int(f, m->arch_name, "attention.sliding_window", true, 0, &w, err))) return rc;
    if ((rc = check_positive("attention.sliding_window", w, INT32_MAX, err))) return rc;
    l->sliding_window = (int)w;
    l->rope_base = GEMMA3_LOCAL_ROPE_BASE;
    l->rope_freq_scale = 1.0f;
  }
  return WICK_OK;
}

// ---- hyperparameters ----

static int load_rope_scaling(wk_model *m, const gguf_file *f, wk_error *err) {
  char key[128], type[32] = "";
  snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name);
  gguf_get_str(f, key, type, sizeof type);
  memset(&m->rope_scaling, 0, sizeof m->rope_scaling);
  m->rope_scaling.factor = 1.0f;
  if (!type[0] || !strcmp(type, "none")) return WICK_OK;
  if (strcmp(type, "linear"))
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: rope scaling '%s' is not supported "
                   "(none, linear; llama 3 scaling comes from the rope_freqs tensor)", type);
  double factor = key_float(f, m->arch_name, "rope.scaling.factor", 1.0);
  if (!(factor > 0) || !isfinite(factor))
    return wk_fail(err, WICK_ERR_FORMAT, "model: rope.scaling.factor = %g, expected > 0", factor);
  m->rope_scaling.kind = 2;
  m->rope_scaling.factor = (float)factor;
  int64_t orig;
  int rc = key_int(f, m->arch_name, "rope.scaling.original_context_length", false, 0, &orig, err);
  if (rc) return rc;
  m->rope_scaling.orig_ctx = (int)orig;
  return WICK_OK;
}

static int load_hparams(wk_model *m, const gguf_file *f, wk_error *err) {
  const char *a = m->arch_name;
  int64_t v;
  int rc;
  const struct {
    const char *suffix;
    int *dst;
    bool required;
    int64_t def;  // -1: computed below
  } ints[] = {
      {"block_count", &m->n_layers, true, 0},
      {"embedding_length", &m->dim, true, 0},
      {"feed_forward_length", &m->ffn_dim, true, 0},
      {"attention.head_count", &m->n_heads, true, 0},
      {"context_length", &m->ctx_train, false, 2048},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    if ((rc = key_int(f, a, ints[i].suffix, ints[i].required, ints[i].def, &v, err))) return rc;
    if ((rc = check_positive(ints[i].suffix, v, 1 << 24, err))) return rc;
    *ints[i].dst = (int)v;
  }
  if ((rc = key_int(f, a, "attention.head_count_kv", false, m->n_heads, &v, err))) return rc;
  if ((rc = check_positive("attention.head_count_kv", v, m->n_heads, err))) return rc;
  m->n_kv_heads = (int)v;
  if (m->n_heads % m->n_kv_heads)
    return wk_fail(err, WICK_ERR_FORMAT, "model: head_count %d is not a multiple of "
                   "head_count_kv %d", m->n_heads, m->n_kv_heads);
  if ((rc = key_int(f, a, "attention.key_length", false, m->dim / m->n_heads, &v, err)))
    return rc;
  if ((rc = check_positive("attention.key_length", v, 1 << 16, err))) return rc;
  m->head_dim = (int)v;
  if ((rc = key_int(f, a, "attention.value_length", false, m->head_dim, &v, err))) return rc;
  if (v != m->head_dim)
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: attention.value_length %" PRId64 " differs "
                   "from key_length %d", v, m->head_dim);
  if ((rc = key_int(f, a, "rope.dimension_count", false, m->head_dim, &v, err))) return rc;
  if (v <= 0 || v > m->head_dim || v % 2)
    return wk_fail(err, WICK_ERR_FORMAT, "model: rope.dimension_count = %" PRId64 ", expected "
                   "an even number in 2..%d", v, m->head_dim);
  m->rope_dim = (int)v;
  m->norm_eps = (float)key_float(f, a, "attention.layer_norm_rms_epsilon", 1e-5);
  m->final_softcap = (float)key_float(f, a, "final_logit_softcapping", 0.0);
  m->attn_softcap = (float)key_float(f, a, "attn_logit_softcapping", 0.0);
  if (m->norm_eps < 0 || m->final_softcap < 0 || m->attn_softcap < 0)
    return wk_fail(err, WICK_ERR_FORMAT, "model: negative norm epsilon or soft-cap");
  if ((rc = load_rope_scaling(m, f, err))) return rc;

  m->emb_scale = 1.0f;
  m->act = WK_ACT_SILU;
  m->attn_scale = (float)(1.0 / sqrt((double)m->head_dim));
  if (m->arch == WK_ARCH_GEMMA3) {
    m->emb_scale = sqrtf((float)m->dim);
    m->act = WK_ACT_GELU_TANH;
    // Gemma 3 27B scales by the query_pre_attn_scalar dim / n_heads.
    if (m->n_layers == 62) m->attn_scale = (float)(1.0 / sqrt((double)(m->dim / m->n_heads)));
  }
  return WICK_OK;
}

static int load_globals(wk_model *m, const gguf_file *f, wk_error *err) {
  int rc;
  const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
  if (!emb)
    return wk_fail(err, WICK_ERR_FORMAT, "model: missing tensor 'token_embd.weight' (expected "
                   "shape [%d, vocab])", m->dim);
  if (emb->ne[1] <= 0 || emb->ne[1] > INT32_MAX)
    return wk_fail(err, WICK_ERR_FORMAT, "model: token_embd.weight has %" PRId64 " rows",
                   emb->ne[1]);
  m->vocab = (int)emb->ne[1];
  if ((rc = get_tensor(f, &m->tok_embd, "token_embd.weight", m->dim, m->vocab, true, err)))
    return rc;
  if ((rc = get_tensor(f, &m->out_norm, "output_norm.weight", m->dim, 0, true, err))) return rc;
  if ((rc = get_tensor(f, &m->output, "output.weight", m->dim, m->vocab, false, err))) return rc;
  m->tied_output = m->output.data == NULL;
  if (m->tied_output) m->output = m->tok_embd;
  m->weights_mapped = gguf_is_mapped(f) != 0;
  if ((rc = get_tensor(f, &m->rope_freqs, "rope_freqs.weight", m->rope_dim / 2, 0, false, err)))
    return rc;
  return WICK_OK;
}

int model_load(wk_model *m, const gguf_file *f, wk_error *err) {
  memset(m, 0, sizeof *m);
  int rc;
  if (!gguf_get_str(f, "general.architecture", m->arch_name, sizeof m->arch_name))
    return wk_fail(err, WICK_ERR_FORMAT, "model: missing metadata key 'general.architecture'");
  const arch_info *ai = NULL;
  for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
    if (!strcmp(k_archs[i].name, m->arch_name)) ai = &k_archs[i];
  if (!ai)
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "model: architecture '%s' is not supported "
                   "(llama, qwen2, qwen3, gemma3)", m->arch_name);
  m->arch = ai->arch;
  m->rope_neox = ai->neox;
  if ((rc = load_hparams(m, f, err)) || (rc = load_globals(m, f, err))) return rc;
  m->layers = wk_calloc((size_t)m->n_layers, sizeof *m->layers);
  if (!m->layers) return wk_fail(err, WICK_ERR_NOMEM, "model: out of memory for %d layers",
                                 m->n_layers);
  for (int il = 0; il < m->n_layers; il++)
    if ((rc = load_layer(m, f, il, err))) {
      model_free(m);
      return rc;
    }
  return WICK_OK;
}

void model_free(wk_model *m) {
  if (!m) return;
  wk_free(m->layers);
  m->layers = NULL;
}

uint64_t model_weight_bytes(const wk_model *m) {
  uint64_t n = m->tok_embd.nbytes + m->out_norm.nbytes + m->rope_freqs.nbytes;
  if (!m->tied_output) n += m->output.nbytes;
  for (int il = 0; il < m->n_layers && m->layers; il++) {
    const wk_layer *l = &m->layers[il];
    const wk_tensor *ts[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->bq, &l->bk,
                             &l->bv, &l->q_norm, &l->k_norm, &l->post_attn_norm, &l->ffn_norm,
                             &l->w_gate, &l->w_up, &l->w_down, &l->post_ffn_norm};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) n += ts[i]->nbytes;
  }
  return n;
}
