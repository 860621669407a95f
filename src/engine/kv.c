#include "engine/kv.h"

#include "base/alloc.h"

struct kv_pool {
  int n_blocks;    // blocks in the pool
  int block_size;  // token slots per block
  int32_t *free;   // [n_blocks] stack of free block ids
  int n_free;      // entries on the stack
  int32_t *refs;   // [n_blocks] owners of each block (0 = free)
};

int kv_pool_create(kv_pool **out, int n_blocks, int block_size, wk_error *err) {
  *out = NULL;
  if (n_blocks <= 0 || block_size <= 0)
    return wk_fail(err, WICK_ERR_INVALID, "kv: need n_blocks > 0 and block_size > 0, got %d and %d",
                   n_blocks, block_size);
  kv_pool *p = wk_calloc(1, sizeof *p);
  if (!p) return wk_fail(err, WICK_ERR_NOMEM, "kv: out of memory");
  p->free = wk_calloc((size_t)n_blocks, sizeof *p->free);
  p->refs = wk_calloc((size_t)n_blocks, sizeof *p->refs);
  if (!p->free || !p->refs) {
    kv_pool_destroy(p);
    return wk_fail(err, WICK_ERR_NOMEM, "kv: out of memory for %d blocks", n_blocks);
  }
  p->n_blocks = n_blocks;
  p->block_size = block_size;
  // Lowest ids on top of the stack: a fresh pool hands out 0, 1, 2, ...
  for (int i = 0; i < n_blocks; i++) p->free[i] = n_blocks - 1 - i;
  p->n_free = n_blocks;
  *out = p;
  return WICK_OK;
}

void kv_pool_destroy(kv_pool *p) {
  if (!p) return;
  wk_free(p->free);
  wk_free(p->refs);
  wk_free(p);
}

int kv_pool_n_blocks(const kv_pool *p) { return p->n_blocks; }
int kv_pool_block_size(const kv_pool *p) { return p->block_size; }
int kv_pool_n_free(const kv_pool *p) { return p->n_free; }

int32_t kv_block_alloc(kv_pool *p) {
  if (p->n_free == 0) return -1;
  int32_t id = p->free[--p->n_free];
  WK_ASSERT(p->refs[id] == 0);
  p->refs[id] = 1;
  return id;
}

void kv_block_ref(kv_pool *p, int32_t id) {
  WK_ASSERT(id >= 0 && id < p->n_blocks && p->refs[id] > 0);
  p->refs[id]++;
}

void kv_block_unref(kv_pool *p, int32_t id) {
  WK_ASSERT(id >= 0 && id < p->n_blocks && p->refs[id] > 0);
  if (--p->refs[id] == 0) {
    WK_ASSERT(p->n_free < p->n_blocks);
    p->free[p->n_free++] = id;
  }
}

int kv_block_refcount(const kv_pool *p, int32_t id) {
  WK_ASSERT(id >= 0 && id < p->n_blocks);
  return p->refs[id];
}

int kv_seq_init(kv_seq *s, const kv_pool *p, int max_tokens, wk_error *err) {
  s->blocks = NULL;
  s->n_blocks = 0;
  s->cap = 0;
  if (max_tokens <= 0)
    return wk_fail(err, WICK_ERR_INVALID, "kv: need max_tokens > 0, got %d", max_tokens);
  int cap = (int)(((int64_t)max_tokens + p->block_size - 1) / p->block_size);
  s->blocks = wk_calloc((size_t)cap, sizeof *s->blocks);
  if (!s->blocks) return wk_fail(err, WICK_ERR_NOMEM, "kv: out of memory for a block table");
  s->cap = cap;
  return WICK_OK;
}

void kv_seq_clear(kv_pool *p, kv_seq *s) {
  for (int i = 0; i < s->n_blocks; i++) kv_block_unref(p, s->blocks[i]);
  s->n_blocks = 0;
}

void kv_seq_free(kv_pool *p, kv_seq *s) {
  if (p) kv_seq_clear(p, s);
  wk_free(s->blocks);
  s->blocks = NULL;
  s->cap = 0;
}

int kv_seq_reserve(kv_pool *p, kv_seq *s, int n_tokens, wk_error *err) {
  int need = (int)(((int64_t)n_tokens + p->block_size - 1) / p->block_size);
  if (need > s->cap)
    return wk_fail(err, WICK_ERR_RANGE, "kv: %d tokens need %d blocks, the table holds %d",
                   n_tokens, need, s->cap);
  while (s->n_blocks < need) {
    int32_t id = kv_block_alloc(p);
    if (id < 0)
      return wk_fail(err, WICK_ERR_RANGE, "kv: no free block (all %d blocks of %d tokens in use)",
                     p->n_blocks, p->block_size);
    s->blocks[s->n_blocks++] = id;
  }
  return WICK_OK;
}

int kv_seq_share(kv_pool *p, kv_seq *dst, const kv_seq *src, int n, wk_error *err) {
  if (dst->n_blocks != 0)
    return wk_fail(err, WICK_ERR_INVALID, "kv: share into a sequence holding %d blocks",
                   dst->n_blocks);
  if (n < 0 || n > src->n_blocks || n > dst->cap)
    return wk_fail(err, WICK_ERR_RANGE, "kv: cannot share %d blocks (source holds %d, table %d)",
                   n, src->n_blocks, dst->cap);
  for (int i = 0; i < n; i++) {
    kv_block_ref(p, src->blocks[i]);
    dst->blocks[i] = src->blocks[i];
  }
  dst->n_blocks = n;
  return WICK_OK;
}
