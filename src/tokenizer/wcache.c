// Open-addressing word cache; entries are never removed within one call.
#include "tokenizer/wcache.h"

#include <string.h>

#include "base/alloc.h"
#include "tokenizer/vocab.h"

static uint64_t word_hash(const char *w, size_t n) { return vocab_hash(w, n) | 1; }

bool wcache_get(const tok_wcache *c, const char *w, size_t n, tok_ids *out, int *rc) {
  *rc = 0;
  if (!c->slots || n > WCACHE_MAX_WORD) return false;
  uint64_t h = word_hash(w, n);
  for (uint32_t i = (uint32_t)h & c->mask;; i = (i + 1) & c->mask) {
    const wcache_slot *s = &c->slots[i];
    if (s->hash == 0) return false;
    if (s->hash == h && s->key_len == n && !memcmp(c->keys + s->key_off, w, n)) {
      for (uint16_t j = 0; j < s->n_ids; j++)
        if ((*rc = ids_push(out, c->ids[s->ids_off + j]))) return true;
      return true;
    }
  }
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : 4096;
  while (nc < need) nc *= 2;
  void *q = wk_realloc(*p, nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

void wcache_put(tok_wcache *c, const char *w, size_t n, const int32_t *ids, int64_t k) {
  if (n > WCACHE_MAX_WORD || k > 0xFFFF || c->used >= WCACHE_MAX_ENTRIES) return;
  if (!c->slots) {
    c->slots = wk_calloc(2 * WCACHE_MAX_ENTRIES, sizeof(wcache_slot));
    if (!c->slots) return;
    c->mask = 2 * WCACHE_MAX_ENTRIES - 1;
  }
  if (!grow((void **)&c->keys, &c->keys_cap, c->keys_len + n, 1) ||
      !grow((void **)&c->ids, &c->ids_cap, c->ids_len + (size_t)k, sizeof(int32_t)))
    return;
  uint64_t h = word_hash(w, n);
  uint32_t i = (uint32_t)h & c->mask;
  while (c->slots[i].hash) i = (i + 1) & c->mask;
  c->slots[i] = (wcache_slot){h, (uint32_t)c->keys_len, (uint32_t)c->ids_len, (uint16_t)n, (uint16_t)k};
  memcpy(c->keys + c->keys_len, w, n);
  memcpy(c->ids + c->ids_len, ids, (size_t)k * sizeof(int32_t));
  c->keys_len += n;
  c->ids_len += (size_t)k;
  c->used++;
}

void wcache_free(tok_wcache *c) {
  wk_free(c->slots);
  wk_free(c->keys);
  wk_free(c->ids);
  memset(c, 0, sizeof *c);
}
