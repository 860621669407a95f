// The CPU backend: f32 activations, weights used in place from the mapping
// (a kernel picked per matrix, or the exact f32 path), a paged f32 KV cache,
// every buffer sized once in prepare. The forward itself is in forward.c.
#include <inttypes.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ctx.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels/kernels.h"
#include "base/alloc.h"
#include "quant/quant.h"
#include "quant/types.h"

// ---- prepare ----

// The matrices of layer il (il = n_layers: the output matrix alone) into
// mm[], their tensors into w[]; returns how many.
static int layer_matrices(cpu_ctx *c, int il, cpu_mm **mm, const wk_tensor **w) {
  if (il == c->m->n_layers) {
    mm[0] = &c->out_mm, w[0] = &c->m->output;
    return 1;
  }
  const wk_layer *l = &c->m->layers[il];
  layer_mm *lm = &c->lm[il];
  cpu_mm *ms[] = {&lm->wq, &lm->wk, &lm->wv, &lm->wo, &lm->gate, &lm->up, &lm->down};
  const wk_tensor *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
  for (int i = 0; i < 7; i++) mm[i] = ms[i], w[i] = ws[i];
  return 7;
}

// The packed copies of every matrix plan (cpu_mm_pack).
static void free_packed(cpu_ctx *c) {
  const int layers = c->m && c->lm ? c->m->n_layers : 0;
  for (int il = 0; il < layers; il++) {
    cpu_mm *mm[7];
    const wk_tensor *w[7];
    for (int i = 0, n = layer_matrices(c, il, mm, w); i < n; i++) cpu_mm_unpack(mm[i]);
  }
  cpu_mm_unpack(&c->out_mm);
  wk_free_huge(c->packed, c->packed_bytes);
  c->packed = NULL;
}

static void ctx_release(cpu_ctx *c) {
  free_packed(c);
  void *bufs[] = {c->lv, c->lm, c->vecs, c->freqs, c->k_alloc, c->v_alloc, c->x, c->xb, c->q, c->att,
                  c->k, c->v, c->gate, c->up, c->xl, c->tok_seq, c->tok_pos, c->mm_scratch,
                  c->att_scratch, c->att_part};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) wk_free(bufs[i]);
  cpu_act_free(&c->act);
  wk_pool_destroy(c->pool);
  memset(c, 0, sizeof *c);
}

// n * elt bytes (zeroed), counted into *acct; NULL on overflow or no memory.
static void *alloc_arr(size_t n, size_t elt, uint64_t *acct) {
  size_t bytes;
  if (!wk_mul_ok(n, elt, &bytes) || bytes == 0) return NULL;
  *acct += bytes;
  return wk_calloc(n, elt);
}

// n * elt zeroed bytes from a 64-byte boundary (a cache line: attention's rows
// then start on one whenever a row is a multiple of 64 bytes; f32 rows 16
// bytes off a line ran ~7% slower in a harness, RESULTS session 10), the
// allocation to *raw; NULL as alloc_arr.
static void *alloc_line(size_t n, size_t elt, uint64_t *acct, void **raw) {
  size_t bytes, padded;
  if (!wk_mul_ok(n, elt, &bytes) || bytes == 0 || !wk_add_ok(bytes, 64, &padded))
    return *raw = NULL;
  if (!(*raw = wk_calloc(padded, 1))) return NULL;
  *acct += bytes;  // the cache's bytes, as reported
  return (void *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63);
}

static size_t mul3(size_t a, size_t b, size_t c) {
  size_t ab, abc;
  return wk_mul_ok(a, b, &ab) && wk_mul_ok(ab, c, &abc) ? abc : 0;
}

// Dequantizes a 1-D tensor (if present) to cursor and points *dst at it
// (NULL if absent); returns the next free float.
static float *vec_take(const wk_tensor *t, float **dst, float *cursor) {
  *dst = NULL;
  if (!t->data) return cursor;
  int rc = wk_dequantize_row(t->type, t->data, cursor, t->ne[0]);
  WK_ASSERT(rc == WICK_OK);
  *dst = cursor;
  return cursor + t->ne[0];
}

static int copy_vectors(cpu_ctx *c, wk_error *err) {
  const wk_model *m = c->m;
  size_t n = (size_t)m->dim;
  for (int il = 0; il < m->n_layers; il++) {
    const wk_layer *l = &m->layers[il];
    const wk_tensor *ts[] = {&l->attn_norm, &l->bq, &l->bk, &l->bv, &l->q_norm, &l->k_norm,
                             &l->post_attn_norm, &l->ffn_norm, &l->post_ffn_norm};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
      if (ts[i]->data) n += (size_t)ts[i]->ne[0];
  }
  const size_t half = (size_t)m->rope_dim / 2;
  c->vecs = alloc_arr(n, sizeof(float), &c->ws_bytes);
  c->lv = alloc_arr((size_t)m->n_layers, sizeof *c->lv, &c->ws_bytes);
  c->freqs = alloc_arr(half * (size_t)m->n_layers, sizeof(double), &c->ws_bytes);
  float *div = m->rope_freqs.data ? wk_malloc(half * sizeof(float)) : NULL;
  if (!c->vecs || !c->lv || !c->freqs || (m->rope_freqs.data && !div)) {
    wk_free(div);
    return wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for norm weights");
  }
  if (div) WK_ASSERT(wk_dequantize_row(m->rope_freqs.type, m->rope_freqs.data, div,
                                       (int64_t)half) == WICK_OK);
  float *cur = c->vecs;
  cur = vec_take(&m->out_norm, &c->out_norm, cur);
  for (int il = 0; il < m->n_layers; il++) {
    const wk_layer *l = &m->layers[il];
    layer_vecs *v = &c->lv[il];
    cur = vec_take(&l->attn_norm, &v->attn_norm, cur);
    cur = vec_take(&l->bq, &v->bq, cur);
    cur = vec_take(&l->bk, &v->bk, cur);
    cur = vec_take(&l->bv, &v->bv, cur);
    cur = vec_take(&l->q_norm, &v->q_norm, cur);
    cur = vec_take(&l->k_norm, &v->k_norm, cur);
    cur = vec_take(&l->post_attn_norm, &v->post_attn_norm, cur);
    cur = vec_take(&l->ffn_norm, &v->ffn_norm, cur);
    cur = vec_take(&l->post_ffn_norm, &v->post_ffn_norm, cur);
    v->freqs = c->freqs + half * (size_t)il;
    cpu_rope_freqs(v->freqs, m->rope_dim, l->rope_base, l->rope_freq_scale, div);
  }
  wk_free(div);
  return WICK_OK;
}

// Picks each matrix's path and sizes the converted-activation buffers.
static int plan_matrices(cpu_ctx *c, wk_error *err) {
  const wk_model *m = c->m;
  const bool exact = c->p.exact != 0;
  c->lm = alloc_arr((size_t)m->n_layers, sizeof *c->lm, &c->ws_bytes);
  if (!c->lm) return wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for matrix plans");
  // every plan first, then one block on huge pages for all packed copies
  size_t total = 0;
  for (int il = 0; il <= m->n_layers; il++) {
    cpu_mm *mm[7];
    const wk_tensor *w[7];
    const int n = layer_matrices(c, il, mm, w);
    const int tokens = il < m->n_layers ? c->p.max_batch_tokens : c->p.max_logits;
    for (int i = 0; i < n; i++) {
      cpu_mm_plan(mm[i], w[i], exact);
      cpu_act_reserve(&c->act, mm[i], tokens);
      total += cpu_mm_pack_size(mm[i], m->weights_mapped);
    }
  }
  if (total && !(c->packed = wk_alloc_huge(total)))
    return wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for packed weight rows");
  c->packed_bytes = total;
  size_t at = 0;
  for (int il = 0; il <= m->n_layers; il++) {
    cpu_mm *mm[7];
    const wk_tensor *w[7];
    const int n = layer_matrices(c, il, mm, w);
    for (int i = 0; i < n; i++) {
      const size_t bytes = cpu_mm_pack_size(mm[i], m->weights_mapped);
      if (bytes) cpu_mm_pack(mm[i], c->pool, m->weights_mapped, &c->ws_bytes, c->packed + at);
      at += bytes;
    }
  }
  if (cpu_act_alloc(&c->act, &c->ws_bytes))
    return wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for converted activations "
                   "(%d tokens a batch)", c->p.max_batch_tokens);
  c->avx2 = wk_kernel_best_level() >= WK_LEVEL_AVX2;
  c->avx512 = wk_kernel_best_level() >= WK_LEVEL_AVX512BW;
  return WICK_OK;
}

// Whether any layer matrix is in a quantized format (not F32, F16 or BF16).
static bool quantized_layers(const wk_model *m) {
  for (int il = 0; il < m->n_layers; il++) {
    const wk_layer *l = &m->layers[il];
    const wk_tensor *ts[7] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->w_gate, &l->w_up, &l->w_down};
    for (int i = 0; i < 7; i++)
      if (ts[i]->type != WK_F32 && ts[i]->type != WK_F16 && ts[i]->type != WK_BF16) return true;
  }
  return false;
}

static int check_params(const wk_backend_params *p, wk_error *err) {
  const struct {
    const char *name;
    int v;
  } f[] = {{"max_batch_tokens", p->max_batch_tokens}, {"max_seqs", p->max_seqs},
           {"max_logits", p->max_logits},             {"kv.block_size", p->kv.block_size},
           {"kv.n_blocks", p->kv.n_blocks}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].v < 1)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: %s = %d, expected >= 1", f[i].name, f[i].v);
  if (p->n_threads < 0 || p->n_threads > 1024)
    return wk_fail(err, WICK_ERR_INVALID, "cpu: n_threads = %d, expected 0..1024", p->n_threads);
  return WICK_OK;
}

static int cpu_prepare(wk_backend *b, const wk_model *m, const wk_backend_params *p,
                       wk_error *err) {
  cpu_ctx *c = b->ctx;
  int rc = check_params(p, err);
  if (rc) return rc;
  ctx_release(c);
  c->m = m;
  c->p = *p;
  c->n_threads = p->n_threads > 0 ? p->n_threads : 1;
  c->pool = wk_pool_create(c->n_threads);
  if (!c->pool) return wk_fail(err, WICK_ERR_NOMEM, "cpu: cannot start %d threads", c->n_threads);
  if ((rc = copy_vectors(c, err))) goto fail;
  if ((rc = plan_matrices(c, err))) goto fail;

  const size_t T = (size_t)p->max_batch_tokens, dim = (size_t)m->dim;
  const size_t q_dim = (size_t)m->n_heads * (size_t)m->head_dim, ffn = (size_t)m->ffn_dim;
  c->kv_dim = (size_t)m->n_kv_heads * (size_t)m->head_dim;
  c->max_pos = (size_t)p->kv.n_blocks * (size_t)p->kv.block_size;
  c->kv_layer = mul3(c->max_pos, c->kv_dim, 1);
  size_t kv_all = mul3(c->kv_layer, (size_t)m->n_layers, 1);
  uint64_t kv_bytes = 0;
  // f16 K and V on the fast path of quantized models (half the bytes each
  // decode step streams; their products already round activations to 16
  // bits). Float-weight models keep f32 K and V so that their fast path stays
  // within 1e-4 of the reference, as do the exact path and machines without
  // AVX2 (F16C).
  c->kv_f16 = c->avx2 && !p->exact && quantized_layers(m);
  c->kv_esz = c->kv_f16 ? sizeof(uint16_t) : sizeof(float);
  c->k_cache = alloc_line(kv_all, c->kv_esz, &kv_bytes, &c->k_alloc);
  c->v_cache = alloc_line(kv_all, c->kv_esz, &kv_bytes, &c->v_alloc);
  c->kv_bytes = kv_bytes;
  if (!c->k_cache || !c->v_cache) {
    rc = wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for the KV cache (%d blocks of %d "
                 "tokens, %d layers, %zu floats per token)", p->kv.n_blocks, p->kv.block_size,
                 m->n_layers, c->kv_dim * 2);
    goto fail;
  }
  size_t max_k = dim > q_dim ? dim : q_dim;
  if (ffn > max_k) max_k = ffn;
  c->mm_per = cpu_matmul_scratch((int64_t)max_k);
  c->x = alloc_arr(T * dim, sizeof(float), &c->ws_bytes);
  c->xb = alloc_arr(T * dim, sizeof(float), &c->ws_bytes);
  c->q = alloc_arr(T * q_dim, sizeof(float), &c->ws_bytes);
  c->att = alloc_arr(T * q_dim, sizeof(float), &c->ws_bytes);
  c->k = alloc_arr(T * c->kv_dim, sizeof(float), &c->ws_bytes);
  c->v = alloc_arr(T * c->kv_dim, sizeof(float), &c->ws_bytes);
  c->gate = alloc_arr(T * ffn, sizeof(float), &c->ws_bytes);
  c->up = alloc_arr(T * ffn, sizeof(float), &c->ws_bytes);
  c->xl = alloc_arr((size_t)p->max_logits * dim, sizeof(float), &c->ws_bytes);
  c->tok_seq = alloc_arr(T, sizeof(int32_t), &c->ws_bytes);
  c->tok_pos = alloc_arr(T, sizeof(int32_t), &c->ws_bytes);
  c->mm_scratch = alloc_arr(mul3((size_t)c->n_threads, c->mm_per, 1), sizeof(float),
                            &c->ws_bytes);
  c->att_per = cpu_attn_scratch(m->n_heads, m->n_kv_heads, m->head_dim, p->kv.block_size);
  c->att_scratch = alloc_arr(mul3((size_t)c->n_threads, c->att_per, 1), sizeof(float),
                             &c->ws_bytes);
  c->att_part_n = cpu_attn_partial(m->n_heads, m->head_dim, c->n_threads);
  c->att_part = alloc_arr(c->att_part_n, sizeof(float), &c->ws_bytes);
  if (!c->x || !c->xb || !c->q || !c->att || !c->k || !c->v || !c->gate || !c->up || !c->xl ||
      !c->tok_seq || !c->tok_pos || !c->mm_scratch || !c->att_scratch || !c->att_part) {
    rc = wk_fail(err, WICK_ERR_NOMEM, "cpu: out of memory for activations (%d tokens a batch)",
                 p->max_batch_tokens);
    goto fail;
  }
  return WICK_OK;
fail:
  ctx_release(c);
  return rc;
}

// ---- forward ----

static int check_batch(cpu_ctx *c, const wk_batch *bt, wk_error *err) {
  const wk_backend_params *p = &c->p;
  if (!c->m) return wk_fail(err, WICK_ERR_INVALID, "cpu: forward before prepare");
  if (bt->n_tokens < 1 || bt->n_tokens > p->max_batch_tokens)
    return wk_fail(err, WICK_ERR_RANGE, "cpu: batch of %d tokens, expected 1..%d", bt->n_tokens,
                   p->max_batch_tokens);
  if (bt->n_seqs < 1 || bt->n_seqs > p->max_seqs)
    return wk_fail(err, WICK_ERR_RANGE, "cpu: batch of %d sequences, expected 1..%d", bt->n_seqs,
                   p->max_seqs);
  if (bt->n_logits < 0 || bt->n_logits > p->max_logits)
    return wk_fail(err, WICK_ERR_RANGE, "cpu: %d logit rows wanted, expected 0..%d", bt->n_logits,
                   p->max_logits);
  for (int t = 0; t < bt->n_tokens; t++) {
    if (bt->tokens[t] < 0 || bt->tokens[t] >= c->m->vocab)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: token %d is %" PRId32 ", expected 0..%d", t,
                     bt->tokens[t], c->m->vocab - 1);
    c->tok_seq[t] = -1;
  }
  for (int i = 0; i < bt->n_seqs; i++) {
    const wk_seq *s = &bt->seqs[i];
    if (s->n_new < 0 || s->n_past < 0 || s->first < 0 || s->first > bt->n_tokens - s->n_new)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: sequence %d: tokens [%d, %d+%d) outside the "
                     "batch of %d (n_past %d)", i, s->first, s->first, s->n_new, bt->n_tokens,
                     s->n_past);
    int64_t end = (int64_t)s->n_past + s->n_new;
    int64_t need = (end + p->kv.block_size - 1) / p->kv.block_size;
    if (need > s->n_blocks || end > (int64_t)c->max_pos)
      return wk_fail(err, WICK_ERR_RANGE, "cpu: sequence %d: %" PRId64 " positions need %" PRId64
                     " blocks, its table has %d (pool %d)", i, end, need, s->n_blocks,
                     p->kv.n_blocks);
    for (int64_t b = 0; b < need; b++)
      if (s->blocks[b] < 0 || s->blocks[b] >= p->kv.n_blocks)
        return wk_fail(err, WICK_ERR_INVALID, "cpu: sequence %d: block table entry %" PRId64
                       " is %" PRId32 ", expected 0..%d", i, b, s->blocks[b], p->kv.n_blocks - 1);
    for (int j = 0; j < s->n_new; j++) {
      int t = s->first + j;
      if (c->tok_seq[t] >= 0)
        return wk_fail(err, WICK_ERR_INVALID, "cpu: token %d belongs to sequences %d and %d", t,
                       c->tok_seq[t], i);
      c->tok_seq[t] = i;
      c->tok_pos[t] = s->n_past + j;
    }
  }
  for (int t = 0; t < bt->n_tokens; t++)
    if (c->tok_seq[t] < 0)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: token %d belongs to no sequence", t);
  for (int i = 0; i < bt->n_logits; i++)
    if (bt->logits_at[i] < 0 || bt->logits_at[i] >= bt->n_tokens)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: logits_at[%d] = %" PRId32 ", expected 0..%d", i,
                     bt->logits_at[i], bt->n_tokens - 1);
  return WICK_OK;
}

static int cpu_forward(wk_backend *b, const wk_batch *bt, float *logits, wk_error *err) {
  cpu_ctx *c = b->ctx;
  int rc = check_batch(c, bt, err);
  if (rc) return rc;
  cpu_forward_batch(c, bt, logits);
  return WICK_OK;
}

// ---- KV copy, memory, lifetime ----

static int cpu_kv_copy_blocks(wk_backend *b, const int32_t *src, const int32_t *dst, int n,
                              wk_error *err) {
  cpu_ctx *c = b->ctx;
  if (!c->m) return wk_fail(err, WICK_ERR_INVALID, "cpu: kv_copy_blocks before prepare");
  const int nb = c->p.kv.n_blocks;
  for (int i = 0; i < n; i++)
    if (src[i] < 0 || src[i] >= nb || dst[i] < 0 || dst[i] >= nb)
      return wk_fail(err, WICK_ERR_INVALID, "cpu: kv copy %d: blocks %" PRId32 " -> %" PRId32
                     ", expected 0..%d", i, src[i], dst[i], nb - 1);
  const size_t esz = c->kv_esz;
  const size_t blk = (size_t)c->p.kv.block_size * c->kv_dim * esz;  // bytes
  for (int il = 0; il < c->m->n_layers; il++) {
    char *kc = (char *)c->k_cache + c->kv_layer * esz * (size_t)il;
    char *vc = (char *)c->v_cache + c->kv_layer * esz * (size_t)il;
    for (int i = 0; i < n; i++) {
      if (src[i] == dst[i]) continue;
      memcpy(kc + (size_t)dst[i] * blk, kc + (size_t)src[i] * blk, blk);
      memcpy(vc + (size_t)dst[i] * blk, vc + (size_t)src[i] * blk, blk);
    }
  }
  return WICK_OK;
}

static void cpu_memory(wk_backend *b, wk_backend_mem *out) {
  cpu_ctx *c = b->ctx;
  *out = (wk_backend_mem){.weights = c->m ? model_weight_bytes(c->m) : 0, .kv = c->kv_bytes,
                          .workspace = c->ws_bytes};
}

static void cpu_destroy(wk_backend *b) {
  if (!b) return;
  ctx_release(b->ctx);
  wk_free(b->ctx);
  wk_free(b);
}

wk_backend *backend_cpu_create(void) {
  wk_backend *b = wk_calloc(1, sizeof *b);
  cpu_ctx *c = wk_calloc(1, sizeof *c);
  if (!b || !c) {
    wk_free(b);
    wk_free(c);
    return NULL;
  }
  b->name = "cpu";
  b->ctx = c;
  b->prepare = cpu_prepare;
  b->forward = cpu_forward;
  b->kv_copy_blocks = cpu_kv_copy_blocks;
  b->memory = cpu_memory;
  b->destroy = cpu_destroy;
  return b;
}
