// Pre-tokenizer for byte-level BPE: the split regex named by
// tokenizer.ggml.pre, compiled with PCRE2 (UTF + Unicode properties, JIT when
// available).
#ifndef WICK_TOKENIZER_PRETOK_H
#define WICK_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct tok_pretok {
  void *gctx;         // pcre2_general_context (allocations through wk_malloc)
  void *code;         // pcre2_code
  const char *regex;  // family name of the regex in use ("gpt2", "llama3", "qwen2")
  bool jit;           // JIT-compiled
} tok_pretok;

int pretok_init(tok_pretok *p, const char *pre_name, wk_error *err);
void pretok_free(tok_pretok *p);

// Called for each piece, in order; a non-zero return stops the split and is returned.
typedef int (*pretok_fn)(void *ud, const char *s, size_t n);

// Splits valid UTF-8 s[0..n) into regex matches and the gaps between them.
// Returns 0, fn's non-zero value, or a negative wick_status.
int pretok_split(const tok_pretok *p, const char *s, size_t n, pretok_fn fn, void *ud);

#endif
