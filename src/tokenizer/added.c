// Byte trie over the added tokens, children kept as sibling lists.
#include "tokenizer/added.h"

#include <string.h>

#include "base/alloc.h"
#include "wick.h"

static int grow(tok_added *a) {
  if (a->n_nodes < a->cap) return 0;
  int32_t cap = a->cap ? a->cap * 2 : 256;
  int32_t *c = wk_realloc(a->child, (size_t)cap * sizeof(int32_t));
  if (!c) return -WICK_ERR_NOMEM;
  a->child = c;
  int32_t *s = wk_realloc(a->sibling, (size_t)cap * sizeof(int32_t));
  if (!s) return -WICK_ERR_NOMEM;
  a->sibling = s;
  int32_t *i = wk_realloc(a->id, (size_t)cap * sizeof(int32_t));
  if (!i) return -WICK_ERR_NOMEM;
  a->id = i;
  uint8_t *b = wk_realloc(a->byte, (size_t)cap);
  if (!b) return -WICK_ERR_NOMEM;
  a->byte = b;
  a->cap = cap;
  return 0;
}

static int32_t new_node(tok_added *a, uint8_t b) {
  if (grow(a)) return -1;
  int32_t k = a->n_nodes++;
  a->child[k] = a->sibling[k] = a->id[k] = -1;
  a->byte[k] = b;
  return k;
}

int added_init(tok_added *a) {
  memset(a, 0, sizeof *a);
  return new_node(a, 0) < 0 ? -WICK_ERR_NOMEM : 0;
}

void added_free(tok_added *a) {
  wk_free(a->child);
  wk_free(a->sibling);
  wk_free(a->id);
  wk_free(a->byte);
  memset(a, 0, sizeof *a);
}

static int32_t find_child(const tok_added *a, int32_t node, uint8_t b) {
  for (int32_t c = a->child[node]; c >= 0; c = a->sibling[c])
    if (a->byte[c] == b) return c;
  return -1;
}

int added_insert(tok_added *a, const char *s, size_t n, int32_t id) {
  if (n == 0) return -WICK_ERR_INVALID;
  int32_t node = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t b = (uint8_t)s[i];
    int32_t c = find_child(a, node, b);
    if (c < 0) {
      c = new_node(a, b);
      if (c < 0) return -WICK_ERR_NOMEM;
      a->sibling[c] = a->child[node];
      a->child[node] = c;
    }
    node = c;
  }
  if (a->id[node] < 0) a->n_tokens++;
  a->id[node] = id;
  a->first[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
  return 0;
}

size_t added_longest(const tok_added *a, const char *s, size_t n, int32_t *id) {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = 0; i < n; i++) {
    node = find_child(a, node, (uint8_t)s[i]);
    if (node < 0) break;
    if (a->id[node] >= 0) {
      best = i + 1;
      *id = a->id[node];
    }
  }
  return best;
}
