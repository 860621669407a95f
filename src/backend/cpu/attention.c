// Causal attention over a paged KV cache. Work items are (token, head) pairs
// split evenly across threads; each item computes its scores into a
// per-thread buffer, takes a max-subtracted softmax and sums V rows.
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/matmul.h"

// Address of position p's row (kv_dim floats) in one layer's cache.
static const float *kv_row(const float *cache, const wk_seq *s, int p, int block_size,
                           size_t kv_dim) {
  size_t block = (size_t)s->blocks[p / block_size];
  size_t slot = block * (size_t)block_size + (size_t)(p % block_size);
  return cache + slot * kv_dim;
}

static void attend_one(const cpu_attn *a, int t, int h, float *scores) {
  const size_t hd = (size_t)a->head_dim, kv_dim = (size_t)a->n_kv_heads * hd;
  const wk_seq *s = &a->seqs[a->tok_seq[t]];
  const int p = a->tok_pos[t];
  const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
  const size_t kv_off = (size_t)(h / (a->n_heads / a->n_kv_heads)) * hd;
  const float *q = a->q + ((size_t)t * (size_t)a->n_heads + (size_t)h) * hd;
  float *out = a->out + ((size_t)t * (size_t)a->n_heads + (size_t)h) * hd;

  float mx = -INFINITY;
  for (int j = lo; j <= p; j++) {
    const float *k = kv_row(a->k_cache, s, j, a->block_size, kv_dim) + kv_off;
    float sc = cpu_dot(q, k, (int64_t)hd) * a->scale;
    if (a->softcap > 0) sc = a->softcap * tanhf(sc / a->softcap);
    scores[j - lo] = sc;
    if (sc > mx) mx = sc;
  }
  double sum = 0;
  for (int j = lo; j <= p; j++) {
    float e = expf(scores[j - lo] - mx);
    scores[j - lo] = e;
    sum += e;
  }
  const float inv = (float)(1.0 / sum);
  memset(out, 0, hd * sizeof *out);
  for (int j = lo; j <= p; j++) {
    const float *v = kv_row(a->v_cache, s, j, a->block_size, kv_dim) + kv_off;
    const float w = scores[j - lo] * inv;
    for (size_t i = 0; i < hd; i++) out[i] += w * v[i];
  }
}

static void attn_run(void *ctx, int ith, int nth) {
  const cpu_attn *a = ctx;
  float *scores = a->scratch + (size_t)ith * a->scratch_per_thread;
  long lo, hi;
  wk_split((long)a->n_tokens * a->n_heads, ith, nth, 1, &lo, &hi);
  for (long it = lo; it < hi; it++) attend_one(a, (int)(it / a->n_heads), (int)(it % a->n_heads),
                                               scores);
}

void cpu_attention(wk_pool *pool, const cpu_attn *a) {
  WK_ASSERT(a->n_heads % a->n_kv_heads == 0);
  wk_pool_run(pool, attn_run, (void *)a);
}
