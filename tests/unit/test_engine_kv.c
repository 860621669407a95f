// KV block allocator: allocation, free list, reference counts, exhaustion,
// block tables and prefix sharing.
#include <stdio.h>
#include <string.h>

#include "engine/kv.h"

#include "test_util.h"

static void test_blocks(void) {
  kv_pool *p = NULL;
  CHECK(kv_pool_create(&p, 0, 16, NULL) == WICK_ERR_INVALID && !p);
  CHECK(kv_pool_create(&p, 4, 16, NULL) == WICK_OK && p);
  CHECK(kv_pool_n_free(p) == 4 && kv_pool_block_size(p) == 16 && kv_pool_n_blocks(p) == 4);
  int32_t got[4];
  int seen[4] = {0};
  for (int i = 0; i < 4; i++) {
    got[i] = kv_block_alloc(p);
    CHECK(got[i] >= 0 && got[i] < 4);
    if (got[i] >= 0 && got[i] < 4) seen[got[i]]++;
    CHECK(kv_block_refcount(p, got[i]) == 1);
  }
  for (int i = 0; i < 4; i++) CHECK(seen[i] == 1);  // distinct
  CHECK(kv_pool_n_free(p) == 0);
  CHECK(kv_block_alloc(p) == -1);  // exhausted
  kv_block_ref(p, got[2]);
  CHECK(kv_block_refcount(p, got[2]) == 2);
  kv_block_unref(p, got[2]);
  CHECK(kv_pool_n_free(p) == 0);  // still owned once
  kv_block_unref(p, got[2]);
  CHECK(kv_pool_n_free(p) == 1 && kv_block_refcount(p, got[2]) == 0);
  CHECK(kv_block_alloc(p) == got[2]);  // the freed block comes back
  for (int i = 0; i < 4; i++) kv_block_unref(p, got[i]);
  CHECK(kv_pool_n_free(p) == 4);
  kv_pool_destroy(p);
}

static void test_seqs(void) {
  kv_pool *p = NULL;
  wk_error e;
  CHECK(kv_pool_create(&p, 5, 16, NULL) == WICK_OK);
  kv_seq a, b;
  CHECK(kv_seq_init(&a, p, 64, NULL) == WICK_OK && a.cap == 4);
  CHECK(kv_seq_init(&b, p, 50, NULL) == WICK_OK && b.cap == 4);  // ceil(50 / 16)
  CHECK(kv_seq_reserve(p, &a, 1, NULL) == WICK_OK && a.n_blocks == 1);
  CHECK(kv_seq_reserve(p, &a, 16, NULL) == WICK_OK && a.n_blocks == 1);
  CHECK(kv_seq_reserve(p, &a, 17, NULL) == WICK_OK && a.n_blocks == 2);
  CHECK(kv_seq_reserve(p, &a, 40, NULL) == WICK_OK && a.n_blocks == 3);
  CHECK(kv_seq_reserve(p, &a, 65, &e) == WICK_ERR_RANGE);  // past the table
  CHECK(strstr(e.msg, "65 tokens") != NULL);
  CHECK(kv_pool_n_free(p) == 2);
  // b shares a's first two blocks (a prefix), then grows on its own
  CHECK(kv_seq_share(p, &b, &a, 2, NULL) == WICK_OK && b.n_blocks == 2);
  CHECK(b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1]);
  CHECK(kv_block_refcount(p, a.blocks[0]) == 2 && kv_block_refcount(p, a.blocks[2]) == 1);
  CHECK(kv_seq_reserve(p, &b, 48, NULL) == WICK_OK && b.n_blocks == 3);
  CHECK(b.blocks[2] != a.blocks[2]);
  CHECK(kv_pool_n_free(p) == 1);
  // pool exhaustion: a needs a 4th block, b too; only one is left
  CHECK(kv_seq_reserve(p, &a, 64, NULL) == WICK_OK);
  CHECK(kv_seq_reserve(p, &b, 64, &e) == WICK_ERR_RANGE);
  CHECK(strstr(e.msg, "no free block") != NULL);
  // freeing a keeps the shared blocks alive for b
  int32_t shared0 = a.blocks[0];
  kv_seq_clear(p, &a);
  CHECK(a.n_blocks == 0 && kv_block_refcount(p, shared0) == 1);
  CHECK(kv_pool_n_free(p) == 2);  // a's own blocks 3 and 4
  kv_seq_free(p, &b);
  CHECK(kv_pool_n_free(p) == 5);
  kv_seq_free(p, &a);
  kv_pool_destroy(p);
}

int main(void) {
  test_blocks();
  test_seqs();
  if (g_failures) return 1;
  printf("test_engine_kv: ok\n");
  return 0;
}
