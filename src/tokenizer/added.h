// Added tokens (control and user-defined tokens matched whole in the text):
// a byte trie answering "longest added token starting here".
#ifndef WICK_TOKENIZER_ADDED_H
#define WICK_TOKENIZER_ADDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tok_added {
  int32_t *child;     // (n_nodes) first child node, -1 none
  int32_t *sibling;   // (n_nodes) next sibling node, -1 none
  int32_t *id;        // (n_nodes) token ending at this node, -1 none
  uint8_t *byte;      // (n_nodes) byte on the edge into this node
  int32_t n_nodes;    // node 0 is the root
  int32_t cap;        // allocated nodes
  int32_t n_tokens;   // tokens inserted
  uint8_t first[32];  // bitmap: bytes that start some token
} tok_added;

int added_init(tok_added *a);  // 0, or a negative wick_status
void added_free(tok_added *a);
// Adds s[0..n) (n > 0) for token id; a later insert of the same text wins.
int added_insert(tok_added *a, const char *s, size_t n, int32_t id);

static inline bool added_may_start(const tok_added *a, uint8_t b) {
  return (a->first[b >> 3] >> (b & 7)) & 1;
}

// Length of the longest added token that s[0..n) starts with (0 if none); *id its id.
size_t added_longest(const tok_added *a, const char *s, size_t n, int32_t *id);

#endif
