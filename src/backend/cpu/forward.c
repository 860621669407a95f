// The CPU transformer forward: one pass of the pool per fused step.
//
// Per layer (T tokens of the batch; act = the converted input shared by the
// matrices that read it):
//   resid_norm  x += post_norm(previous block's output); xb = norm(x) * w;
//               xb converted once for wq, wk, wv (their formats)
//   mm          q, k, v = xb * (wq, wk, wv)  (one pass over the rows of all 3)
//   qkv_post    biases, QK-norm, RoPE, K and V into the paged cache
//   attention   att = softmax(q k^T) v per (query tile, KV head)
//   mm          xb = att * wo
//   resid_norm  x += post_norm(xb); xb = norm(x) * w; converted for gate, up
//   mm          gate, up = xb * (w_gate, w_up)
//   glu         gate = act(gate) * up, converted for w_down
//   mm          xb = gate * w_down
// and the last residual add, the final norm of the rows whose logits are
// wanted, and the output matrix. The exact and fast paths run the same steps;
// only the matrix products (and whether anything is converted) differ: a
// batch large enough for a matrix's f32 path (cpu_mm_need_n) converts nothing.
#include <string.h>

#include "backend/cpu/cpu_ctx.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/dequant.h"
#include "quant/types.h"

static void mm_run(cpu_ctx *c, const cpu_mm *m0, float *y0, const cpu_mm *m1, float *y1,
                   const cpu_mm *m2, float *y2) {
  const cpu_mm *mm[3] = {m0, m1, m2};
  float *y[3] = {y0, y1, y2};
  int n = m2 ? 3 : m1 ? 2 : 1;
  cpu_mm_run(c->pool, c->mm_scratch, c->mm_per, &c->act, mm, y, n);
}

// The residual step before a block: adds `add` (post-normed by add_w) to x
// when add is set, then xb = norm(x) * w converted for the matrices of `need`.
static void resid(cpu_ctx *c, int T, float *add, const float *add_w, const float *w,
                  unsigned need) {
  const wk_model *m = c->m;
  cpu_resid r = {.x = c->x, .add = add, .add_w = add_w, .out = w ? c->xb : NULL, .w = w,
                 .n_tokens = T, .d = m->dim, .eps = m->norm_eps, .act = w ? &c->act : NULL,
                 .need = need};
  cpu_resid_norm(c->pool, &r);
}

static void attention_block(cpu_ctx *c, const wk_batch *bt, int il) {
  const wk_model *m = c->m;
  const wk_layer *l = &m->layers[il];
  const layer_vecs *v = &c->lv[il];
  const layer_mm *lm = &c->lm[il];
  const int T = bt->n_tokens, hd = m->head_dim;
  mm_run(c, &lm->wq, c->q, &lm->wk, c->k, &lm->wv, c->v);
  const size_t lb = c->kv_layer * c->kv_esz * (size_t)il;
  void *kc = (char *)c->k_cache + lb, *vc = (char *)c->v_cache + lb;
  cpu_qkv qp = {
      .q = c->q, .k = c->k, .v = c->v, .bq = v->bq, .bk = v->bk, .bv = v->bv,
      .q_norm = v->q_norm, .k_norm = v->k_norm, .eps = m->norm_eps,
      .rope = {hd, m->rope_dim, m->rope_neox, v->freqs},
      .n_heads = m->n_heads, .n_kv_heads = m->n_kv_heads, .k_cache = kc, .v_cache = vc,
      .kv_f16 = c->kv_f16, .seqs = bt->seqs, .tok_seq = c->tok_seq, .tok_pos = c->tok_pos,
      .n_tokens = T, .block_size = c->p.kv.block_size,
  };
  cpu_qkv_post(c->pool, &qp);
  cpu_attn a = {
      .q = c->q, .out = c->att, .k_cache = kc, .v_cache = vc, .kv_f16 = c->kv_f16,
      .seqs = bt->seqs, .n_seqs = bt->n_seqs, .tok_seq = c->tok_seq, .tok_pos = c->tok_pos,
      .n_tokens = T, .n_heads = m->n_heads, .n_kv_heads = m->n_kv_heads, .head_dim = hd,
      .block_size = c->p.kv.block_size, .window = l->sliding_window,
      .scale = m->attn_scale, .softcap = m->attn_softcap,
      .scratch = c->att_scratch, .scratch_per_thread = c->att_per, .avx2 = c->avx2,
      .avx512 = c->avx512,
      .partial = c->att_part, .partial_floats = c->att_part_n,
  };
  cpu_attention(c->pool, &a);
  cpu_act_set(&c->act, c->att, T, (int64_t)m->n_heads * hd);
  mm_run(c, &lm->wo, c->xb, NULL, NULL, NULL, NULL);
}

static void ffn_block(cpu_ctx *c, int T, int il) {
  const wk_model *m = c->m;
  const layer_mm *lm = &c->lm[il];
  mm_run(c, &lm->gate, c->gate, &lm->up, c->up, NULL, NULL);
  cpu_glu(c->pool, c->avx2, m->act == WK_ACT_GELU_TANH, c->gate, c->up, T, m->ffn_dim, &c->act,
          cpu_mm_need_n(&lm->down, T));
  mm_run(c, &lm->down, c->xb, NULL, NULL, NULL, NULL);
}

static void embed(cpu_ctx *c, const wk_batch *bt) {
  const wk_model *m = c->m;
  const size_t dim = (size_t)m->dim, row = wk_row_size(m->tok_embd.type, m->dim);
  const unsigned char *base = m->tok_embd.data;
  for (int t = 0; t < bt->n_tokens; t++) {
    float *xt = c->x + (size_t)t * dim;
    int rc = cpu_dequant_row(m->tok_embd.type, base + (size_t)bt->tokens[t] * row, xt, m->dim);
    WK_ASSERT(rc == WICK_OK);
    if (m->emb_scale != 1.0f)
      for (size_t i = 0; i < dim; i++) xt[i] *= m->emb_scale;
  }
}

void cpu_forward_batch(cpu_ctx *c, const wk_batch *bt, float *logits) {
  const wk_model *m = c->m;
  const int T = bt->n_tokens;
  embed(c, bt);
  for (int il = 0; il < m->n_layers; il++) {
    const layer_vecs *v = &c->lv[il];
    const layer_mm *lm = &c->lm[il];
    // Before attention: the previous layer's MLP output (none for layer 0).
    const layer_vecs *pv = il ? &c->lv[il - 1] : NULL;
    resid(c, T, il ? c->xb : NULL, pv ? pv->post_ffn_norm : NULL, v->attn_norm,
          cpu_mm_need_n(&lm->wq, T) | cpu_mm_need_n(&lm->wk, T) | cpu_mm_need_n(&lm->wv, T));
    attention_block(c, bt, il);
    resid(c, T, c->xb, v->post_attn_norm, v->ffn_norm,
          cpu_mm_need_n(&lm->gate, T) | cpu_mm_need_n(&lm->up, T));
    ffn_block(c, T, il);
  }
  resid(c, T, c->xb, m->n_layers ? c->lv[m->n_layers - 1].post_ffn_norm : NULL, NULL, 0);
  if (bt->n_logits == 0) return;
  const size_t dim = (size_t)m->dim;
  for (int i = 0; i < bt->n_logits; i++)
    memcpy(c->xl + (size_t)i * dim, c->x + (size_t)bt->logits_at[i] * dim, dim * sizeof(float));
  cpu_resid r = {.x = c->xl, .out = c->xl, .w = c->out_norm, .n_tokens = bt->n_logits,
                 .d = m->dim, .eps = m->norm_eps, .act = &c->act,
                 .need = cpu_mm_need_n(&c->out_mm, bt->n_logits)};
  cpu_resid_norm(c->pool, &r);
  mm_run(c, &c->out_mm, logits, NULL, NULL, NULL, NULL);
  if (m->final_softcap > 0)
    cpu_softcap(logits, (size_t)bt->n_logits * (size_t)m->vocab, m->final_softcap);
}
