// Rotary position embedding. Angles are computed in double per token and
// pair, then applied in f32 to every head of Q and K; and the fused pass from
// the Q/K/V products to the KV cache (bias, QK-norm, RoPE, store).
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

void cpu_rope_freqs(double *freqs, int rope_dim, float base, float freq_scale,
                    const float *freq_div) {
  for (int i = 0; i < rope_dim / 2; i++) {
    freqs[i] = (double)freq_scale * pow((double)base, -2.0 * i / rope_dim);
    if (freq_div) freqs[i] /= (double)freq_div[i];
  }
}

static void rotate_heads(const cpu_rope *r, float *x, int n_heads, int i, float c, float s) {
  const int half = r->rope_dim / 2;
  const int i0 = r->neox ? i : 2 * i;
  const int i1 = r->neox ? i + half : 2 * i + 1;
  for (int h = 0; h < n_heads; h++) {
    float *xh = x + (size_t)h * (size_t)r->head_dim;
    float a = xh[i0], b = xh[i1];
    xh[i0] = a * c - b * s;
    xh[i1] = a * s + b * c;
  }
}

void cpu_rope_apply(const cpu_rope *r, float *q, int n_q_heads, float *k, int n_k_heads,
                    int n_tokens, const int32_t *pos) {
  const int half = r->rope_dim / 2;
  const size_t q_row = (size_t)n_q_heads * (size_t)r->head_dim;
  const size_t k_row = (size_t)n_k_heads * (size_t)r->head_dim;
  for (int t = 0; t < n_tokens; t++) {
    for (int i = 0; i < half; i++) {
      double theta = (double)pos[t] * r->freqs[i];
      float c = (float)cos(theta), s = (float)sin(theta);
      if (q) rotate_heads(r, q + (size_t)t * q_row, n_q_heads, i, c, s);
      if (k) rotate_heads(r, k + (size_t)t * k_row, n_k_heads, i, c, s);
    }
  }
}

// Rotates the n_heads heads of one token's row x by the angles of cs
// (cs[2i] = cos, cs[2i + 1] = sin of pair i).
static void rotate_token(const cpu_rope *r, float *x, int n_heads, const float *cs) {
  const int half = r->rope_dim / 2;
  for (int h = 0; h < n_heads; h++) {
    float *xh = x + (size_t)h * (size_t)r->head_dim;
    for (int i = 0; i < half; i++) {
      const int i0 = r->neox ? i : 2 * i, i1 = r->neox ? i + half : 2 * i + 1;
      const float c = cs[2 * i], s = cs[2 * i + 1];
      float a = xh[i0], b = xh[i1];
      xh[i0] = a * c - b * s;
      xh[i1] = a * s + b * c;
    }
  }
}

enum { QKV_MAX_HALF = 512 };  // most rotated pairs per head the pass handles

static void qkv_run(void *ctx, int ith, int nth) {
  const cpu_qkv *p = ctx;
  const int hd = p->rope.head_dim, half = p->rope.rope_dim / 2;
  const size_t q_row = (size_t)p->n_heads * (size_t)hd, kv_row = (size_t)p->n_kv_heads * hd;
  float cs[2 * QKV_MAX_HALF];
  long lo, hi;
  wk_split(p->n_tokens, ith, nth, 1, &lo, &hi);
  for (long t = lo; t < hi; t++) {
    float *q = p->q + (size_t)t * q_row, *k = p->k + (size_t)t * kv_row;
    float *v = p->v + (size_t)t * kv_row;
    if (p->bq) cpu_add_bias(q, p->bq, 1, (int)q_row);
    if (p->bk) cpu_add_bias(k, p->bk, 1, (int)kv_row);
    if (p->bv) cpu_add_bias(v, p->bv, 1, (int)kv_row);
    if (p->q_norm) cpu_rmsnorm(q, q, p->q_norm, p->n_heads, hd, p->eps);
    if (p->k_norm) cpu_rmsnorm(k, k, p->k_norm, p->n_kv_heads, hd, p->eps);
    const int pos = p->tok_pos[t];
    for (int i = 0; i < half; i++) {
      double theta = (double)pos * p->rope.freqs[i];
      cs[2 * i] = (float)cos(theta);
      cs[2 * i + 1] = (float)sin(theta);
    }
    rotate_token(&p->rope, q, p->n_heads, cs);
    rotate_token(&p->rope, k, p->n_kv_heads, cs);
    const wk_seq *s = &p->seqs[p->tok_seq[t]];
    // Head h's row of the position: row pos % bs of the block's rows of head
    // h (cpu_ctx.h's layout).
    const size_t bs = (size_t)p->block_size, blk = (size_t)s->blocks[pos / (int)bs];
    for (int h = 0; h < p->n_kv_heads; h++) {
      const size_t at = ((blk * (size_t)p->n_kv_heads + (size_t)h) * bs + (size_t)pos % bs) * hd;
      const float *kh = k + (size_t)h * hd, *vh = v + (size_t)h * hd;
      if (p->kv_f16) {
        cpu_f32_to_f16c((uint16_t *)p->k_cache + at, kh, (size_t)hd);
        cpu_f32_to_f16c((uint16_t *)p->v_cache + at, vh, (size_t)hd);
      } else {
        memcpy((float *)p->k_cache + at, kh, (size_t)hd * sizeof(float));
        memcpy((float *)p->v_cache + at, vh, (size_t)hd * sizeof(float));
      }
    }
  }
}

void cpu_qkv_post(wk_pool *pool, const cpu_qkv *p) {
  WK_ASSERT(p->rope.rope_dim / 2 <= QKV_MAX_HALF);
  if (p->n_tokens < 4) qkv_run((void *)p, 0, 1);
  else wk_pool_run(pool, qkv_run, (void *)p);
}
