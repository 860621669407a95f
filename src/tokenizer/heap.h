// A binary min-heap over an array of plain structs, generated per element
// type so the comparison inlines into the merge loops of bpe.c and spm.c.
//   TOK_HEAP_DEFINE(T, before) defines
//     static void heap_push(T *h, size_t *n, T c);  // h has room for *n + 1
//     static T heap_pop(T *h, size_t *n);           // *n > 0; returns the first
//   where before(a, b) is true when *a must come out before *b.
#ifndef WICK_TOKENIZER_HEAP_H
#define WICK_TOKENIZER_HEAP_H

#include <stddef.h>

#define TOK_HEAP_DEFINE(T, before)                                        \
  static void heap_push(T *h, size_t *n, T c) {                           \
    size_t i = (*n)++;                                                    \
    while (i > 0) {                                                       \
      size_t p = (i - 1) / 2;                                             \
      if (!before(&c, &h[p])) break;                                      \
      h[i] = h[p];                                                        \
      i = p;                                                              \
    }                                                                     \
    h[i] = c;                                                             \
  }                                                                       \
  static T heap_pop(T *h, size_t *n) {                                    \
    T top = h[0], last = h[--*n];                                         \
    size_t i = 0;                                                         \
    for (;;) {                                                            \
      size_t l = 2 * i + 1;                                               \
      if (l >= *n) break;                                                 \
      size_t m = (l + 1 < *n && before(&h[l + 1], &h[l])) ? l + 1 : l;    \
      if (!before(&h[m], &last)) break;                                   \
      h[i] = h[m];                                                        \
      i = m;                                                              \
    }                                                                     \
    if (*n) h[i] = last;                                                  \
    return top;                                                           \
  }

#endif
