// SentencePiece-style BPE ("llama" tokenizers): spaces become U+2581, the
// characters of a segment are merged pairwise, best merged token first
// (its score, or its position in the file for Gemma), and characters the
// vocabulary lacks fall back to <0xHH> byte tokens (else <unk>).
#ifndef WICK_TOKENIZER_SPM_H
#define WICK_TOKENIZER_SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/ids.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wcache.h"

typedef struct tok_spm {
  const tok_vocab *v;    // borrowed
  float *prio;           // (n) merge priority of each token as a merge result (higher first)
  int32_t byte_id[256];  // "<0xHH>" token per byte, -1 none
  int32_t ascii_id[128]; // token of each ASCII character, -1 none
  int32_t *pair_id;      // (128 * 128) token of each two-ASCII-character string, -1 none
  int32_t bar_id[128];   // token of U+2581 followed by each ASCII character, -1 none
  int32_t unk;           // <unk> id, -1 none
  uint8_t glue[16];      // ASCII chars c such that some token contains "c" U+2581
  bool glue_other;       // some token has a non-ASCII, non-U+2581 char before U+2581
} tok_spm;

typedef struct spm_scratch {
  char *text;        // normalized segment
  size_t text_cap;
  void *sym;         // symbols
  void *heap;        // merge candidates
  size_t cap;        // symbols room (the heap has 3 * cap)
  tok_wcache *cache; // borrowed word cache, NULL for none
} spm_scratch;

// by_position: rank merges by token position (Gemma) instead of by score.
int spm_init(tok_spm *s, const tok_vocab *v, bool by_position, int32_t unk);
void spm_free(tok_spm *s);
void spm_scratch_free(spm_scratch *s);

// Appends the ids of text[0..n) (valid UTF-8). add_prefix: prepend U+2581
// unless the normalized text already starts with one.
int spm_encode(const tok_spm *s, spm_scratch *w, const char *text, size_t n, bool add_prefix,
               tok_ids *out);

#endif
