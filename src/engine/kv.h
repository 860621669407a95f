// Paged KV cache bookkeeping: a pool of fixed-size blocks handed out from a
// free list, reference counted so that a prefix cache can share full blocks
// between sequences, and per-sequence block tables. The KV memory itself
// belongs to the backend; this module only decides which block ids a
// sequence uses.
#ifndef WICK_ENGINE_KV_H
#define WICK_ENGINE_KV_H

#include <stdint.h>

#include "base/error.h"

typedef struct kv_pool kv_pool;

// A pool of n_blocks blocks of block_size token slots each.
int kv_pool_create(kv_pool **out, int n_blocks, int block_size, wk_error *err);
void kv_pool_destroy(kv_pool *p);
int kv_pool_n_blocks(const kv_pool *p);
int kv_pool_block_size(const kv_pool *p);
int kv_pool_n_free(const kv_pool *p);

// Takes a free block (reference count 1); -1 when every block is in use.
int32_t kv_block_alloc(kv_pool *p);
void kv_block_ref(kv_pool *p, int32_t id);    // one more owner
void kv_block_unref(kv_pool *p, int32_t id);  // back on the free list at 0
int kv_block_refcount(const kv_pool *p, int32_t id);

// A sequence's block table: position t lives in blocks[t / block_size].
typedef struct kv_seq {
  int32_t *blocks;  // [cap] block ids, the first n_blocks in use
  int n_blocks;     // blocks held
  int cap;          // most blocks (the sequence's longest context / block_size)
} kv_seq;

// Sizes the table for sequences of up to max_tokens positions.
int kv_seq_init(kv_seq *s, const kv_pool *p, int max_tokens, wk_error *err);
void kv_seq_free(kv_pool *p, kv_seq *s);  // releases the blocks and the table
// Ensures blocks cover positions [0, n_tokens). WICK_ERR_RANGE when n_tokens
// exceeds the table or the pool runs out (blocks taken so far stay held).
int kv_seq_reserve(kv_pool *p, kv_seq *s, int n_tokens, wk_error *err);
// Releases all blocks (the table stays allocated).
void kv_seq_clear(kv_pool *p, kv_seq *s);
// Makes dst (empty) share the first n blocks of src: same ids, one more
// reference each.
int kv_seq_share(kv_pool *p, kv_seq *dst, const kv_seq *src, int n, wk_error *err);

#endif
