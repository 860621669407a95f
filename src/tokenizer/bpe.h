// Byte-level BPE ("gpt2" tokenizers): a pre-token's bytes are mapped to the
// GPT-2 byte alphabet and merged pairwise by merge rank
// (tokenizer.ggml.merges), lowest rank first, leftmost first among equals.
#ifndef WICK_TOKENIZER_BPE_H
#define WICK_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"
#include "tokenizer/ids.h"
#include "tokenizer/vocab.h"

typedef struct tok_bpe {
  int32_t byte_id[256];  // token of the alphabet character for each byte, -1 none
  uint64_t *pair;        // hash keys: left id << 32 | right id; UINT64_MAX empty
  int32_t *rank;         // (slots) merge rank
  int32_t *merged;       // (slots) id of the merged token
  uint64_t mask;         // slots - 1
  int64_t n_merges;      // merges in use
} tok_bpe;

// Scratch for the merge loop, grown on demand and reused across words.
typedef struct bpe_scratch {
  void *sym;    // symbols
  void *heap;   // merge candidates
  size_t cap;   // symbols room (the heap has 3 * cap)
} bpe_scratch;

int bpe_init(tok_bpe *b, const tok_vocab *v, const gguf_file *f, wk_error *err);
void bpe_free(tok_bpe *b);
void bpe_scratch_free(bpe_scratch *s);

// Appends the ids of one pre-token s[0..n) to out. Returns 0 or a negative wick_status.
int bpe_encode_word(const tok_bpe *b, bpe_scratch *s, const char *w, size_t n, tok_ids *out);

#endif
