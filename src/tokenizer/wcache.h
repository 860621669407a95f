// Per-call cache of word -> ids for long inputs: words repeat, and a hit
// skips the merge loop. Bounded: short words only, a fixed number of entries.
#ifndef WICK_TOKENIZER_WCACHE_H
#define WICK_TOKENIZER_WCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/ids.h"

#define WCACHE_MAX_WORD 48         // longest word cached, bytes
#define WCACHE_MAX_ENTRIES 32768   // entries before the cache stops growing

typedef struct wcache_slot {
  uint64_t hash;     // 0 = empty
  uint32_t key_off;  // into keys
  uint32_t ids_off;  // into ids
  uint16_t key_len;
  uint16_t n_ids;
} wcache_slot;

typedef struct tok_wcache {
  wcache_slot *slots;  // (mask + 1)
  uint32_t mask;
  uint32_t used;
  char *keys;          // word bytes
  size_t keys_len, keys_cap;
  int32_t *ids;        // cached ids
  size_t ids_len, ids_cap;
} tok_wcache;

// Appends the cached ids of w[0..n) to out; false on a miss.
bool wcache_get(const tok_wcache *c, const char *w, size_t n, tok_ids *out, int *rc);
// Remembers ids for w[0..n) (silently skipped when full or out of memory).
void wcache_put(tok_wcache *c, const char *w, size_t n, const int32_t *ids, int64_t k);
void wcache_free(tok_wcache *c);

#endif
