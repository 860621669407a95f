// A growable list of token ids (the encoder's output buffer).
#ifndef WICK_TOKENIZER_IDS_H
#define WICK_TOKENIZER_IDS_H

#include <stdint.h>

#include "base/alloc.h"
#include "wick.h"

typedef struct tok_ids {
  int32_t *v;   // (cap) ids
  int64_t n;    // ids held
  int64_t cap;  // room
} tok_ids;

static inline int ids_push(tok_ids *ids, int32_t id) {
  if (ids->n == ids->cap) {
    int64_t cap = ids->cap ? ids->cap * 2 : 256;
    int32_t *v = wk_realloc(ids->v, (size_t)cap * sizeof(int32_t));
    if (!v) return -WICK_ERR_NOMEM;
    ids->v = v;
    ids->cap = cap;
  }
  ids->v[ids->n++] = id;
  return 0;
}

#endif
