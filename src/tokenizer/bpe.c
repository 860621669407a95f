// Byte-level BPE merge loop: symbols in a linked list, candidate pairs in a
// binary heap ordered by (rank, position); stale candidates are skipped when
// popped. O(n log n) per word.
#include "tokenizer/bpe.h"

#include <string.h>

#include "base/alloc.h"
#include "tokenizer/heap.h"
#include "tokenizer/utf8.h"

typedef struct sym {
  int32_t id;    // token id, -1 once merged into its left neighbour
  int32_t prev;  // index of the previous live symbol, -1 none
  int32_t next;  // index of the next live symbol, -1 none
} sym;

typedef struct cand {
  int32_t rank;    // merge rank (lower first)
  int32_t pos;     // left symbol (lower first among equal ranks)
  int32_t left;    // ids when pushed: a mismatch later means stale
  int32_t right;
  int32_t merged;  // resulting token
} cand;

static inline uint64_t pair_key(int32_t a, int32_t b) {
  return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

static inline uint64_t pair_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

static int pair_slot(const tok_bpe *b, int32_t l, int32_t r) {
  uint64_t k = pair_key(l, r);
  uint64_t h = pair_hash(k) & b->mask;
  for (;;) {
    if (b->pair[h] == k) return (int)h;
    if (b->pair[h] == UINT64_MAX) return -1;
    h = (h + 1) & b->mask;
  }
}

int bpe_init(tok_bpe *b, const tok_vocab *v, const gguf_file *f, wk_error *err) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < 256; i++) {
    char c[4];
    int n = utf8_put(vocab_byte_char((uint8_t)i), c);
    b->byte_id[i] = vocab_find(v, c, (size_t)n);
  }
  const gguf_kv *mk = gguf_get(f, "tokenizer.ggml.merges");
  if (!mk || gguf_kv_type(mk) != GGUF_ARRAY || gguf_arr_type(mk) != GGUF_STRING)
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: gpt2 model: expected tokenizer.ggml.merges (array of strings), found %s",
                   mk ? "another type" : "no such key");
  uint64_t n = gguf_arr_len(mk);
  if (n > INT32_MAX / 4) return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: %llu merges is too many", (unsigned long long)n);
  uint64_t cap = 1024;
  while (cap < n * 2) cap *= 2;
  b->pair = wk_malloc(cap * sizeof(uint64_t));
  b->rank = wk_malloc(cap * sizeof(int32_t));
  b->merged = wk_malloc(cap * sizeof(int32_t));
  if (!b->pair || !b->rank || !b->merged) {
    bpe_free(b);
    return wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
  }
  memset(b->pair, 0xFF, cap * sizeof(uint64_t));
  b->mask = cap - 1;
  char buf[1024];
  for (uint64_t i = 0; i < n; i++) {
    gguf_str s = gguf_arr_str(mk, i);
    const char *sp = s.ptr ? memchr(s.ptr, ' ', s.len) : NULL;
    if (!sp || s.len >= sizeof buf) continue;  // not "left right": unusable
    size_t ln = (size_t)(sp - s.ptr), rn = s.len - ln - 1;
    int32_t l = vocab_find(v, s.ptr, ln), r = vocab_find(v, sp + 1, rn);
    memcpy(buf, s.ptr, ln);
    memcpy(buf + ln, sp + 1, rn);
    int32_t m = vocab_find(v, buf, ln + rn);
    if (l < 0 || r < 0 || m < 0) continue;  // names a token the vocabulary lacks
    uint64_t k = pair_key(l, r);
    uint64_t h = pair_hash(k) & b->mask;
    while (b->pair[h] != UINT64_MAX && b->pair[h] != k) h = (h + 1) & b->mask;
    if (b->pair[h] == UINT64_MAX) b->n_merges++;
    b->pair[h] = k;  // a merge listed twice keeps its later rank
    b->rank[h] = (int32_t)i;
    b->merged[h] = m;
  }
  return 0;
}

void bpe_free(tok_bpe *b) {
  wk_free(b->pair);
  wk_free(b->rank);
  wk_free(b->merged);
  memset(b, 0, sizeof *b);
}

void bpe_scratch_free(bpe_scratch *s) {
  wk_free(s->sym);
  wk_free(s->heap);
  memset(s, 0, sizeof *s);
}

static int scratch_reserve(bpe_scratch *s, size_t n) {
  if (n <= s->cap) return 0;
  size_t cap = s->cap ? s->cap : 64;
  while (cap < n) cap *= 2;
  size_t hb;
  if (!wk_mul_ok(cap, 3 * sizeof(cand), &hb)) return -WICK_ERR_NOMEM;
  void *sy = wk_realloc(s->sym, cap * sizeof(sym));
  if (!sy) return -WICK_ERR_NOMEM;
  s->sym = sy;
  void *he = wk_realloc(s->heap, hb);
  if (!he) return -WICK_ERR_NOMEM;
  s->heap = he;
  s->cap = cap;
  return 0;
}

static inline bool cand_less(const cand *a, const cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

TOK_HEAP_DEFINE(cand, cand_less)

static void try_push(const tok_bpe *b, const sym *sy, cand *h, size_t *nh, int32_t pos) {
  int32_t nx = sy[pos].next;
  if (nx < 0) return;
  int slot = pair_slot(b, sy[pos].id, sy[nx].id);
  if (slot < 0) return;
  cand c = {b->rank[slot], pos, sy[pos].id, sy[nx].id, b->merged[slot]};
  heap_push(h, nh, c);
}

int bpe_encode_word(const tok_bpe *b, bpe_scratch *s, const char *w, size_t n, tok_ids *out) {
  if (n == 1) return b->byte_id[(uint8_t)w[0]] >= 0 ? ids_push(out, b->byte_id[(uint8_t)w[0]]) : 0;
  if (n > INT32_MAX / 4) return -WICK_ERR_RANGE;
  int rc = scratch_reserve(s, n);
  if (rc) return rc;
  sym *sy = s->sym;
  cand *h = s->heap;
  int32_t ns = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = b->byte_id[(uint8_t)w[i]];
    if (id < 0) continue;  // a byte the vocabulary cannot spell is dropped
    sy[ns] = (sym){id, ns - 1, ns + 1};
    ns++;
  }
  if (ns == 0) return 0;
  sy[ns - 1].next = -1;
  size_t nh = 0;
  for (int32_t i = 0; i + 1 < ns; i++) try_push(b, sy, h, &nh, i);
  while (nh) {
    cand c = heap_pop(h, &nh);
    sym *l = &sy[c.pos];
    if (l->id != c.left || l->next < 0 || sy[l->next].id != c.right) continue;  // stale
    int32_t r = l->next;
    l->id = c.merged;
    l->next = sy[r].next;
    if (l->next >= 0) sy[l->next].prev = c.pos;
    sy[r].id = -1;
    if (l->prev >= 0) try_push(b, sy, h, &nh, l->prev);
    try_push(b, sy, h, &nh, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sy[i].next)
    if ((rc = ids_push(out, sy[i].id))) return rc;
  return 0;
}
