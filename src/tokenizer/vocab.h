// Token table read from tokenizer.ggml.*: each token's file text, the
// spelling the encoder looks up ("key"), the bytes it decodes to ("piece"),
// its type and score, and a string -> id hash table over the keys.
#ifndef WICK_TOKENIZER_VOCAB_H
#define WICK_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "format/gguf.h"

// tokenizer.ggml.token_type values.
enum {
  TOK_NORMAL = 1,
  TOK_UNKNOWN = 2,
  TOK_CONTROL = 3,
  TOK_USER = 4,
  TOK_UNUSED = 5,
  TOK_BYTE = 6,
};

// Per-token flags.
enum {
  TOKF_SPECIAL = 1,  // an added special token: left out of decode unless rendered
  TOKF_ADDED = 2,    // matched whole in the input text (added token)
  TOKF_BYTE = 4,     // "<0xHH>": decodes to one raw byte
  TOKF_EOG = 8,      // ends generation
};

typedef enum tok_spelling {
  TOK_SPELL_BYTELEVEL,  // gpt2: keys in the GPT-2 byte alphabet
  TOK_SPELL_SPM,        // SentencePiece: keys as in the file
  TOK_SPELL_SPM_GEMMA,  // SentencePiece, runs of real spaces respelled as U+2581
} tok_spelling;

typedef struct tok_vocab {
  int32_t n;            // number of tokens
  char *text;           // file spellings, concatenated
  uint32_t *text_off;   // (n + 1) offsets into text
  char *key;            // lookup spellings, concatenated
  uint32_t *key_off;    // (n + 1)
  char *piece;          // decoded bytes, concatenated
  uint32_t *piece_off;  // (n + 1)
  uint8_t *type;        // (n) TOK_* (1 when the file has no types)
  uint8_t *flags;       // (n) TOKF_*
  float *score;         // (n) 0 when the file has no scores
  int32_t *slots;       // hash table over keys: [2 * i] id (-1 empty), [2 * i + 1] hash tag
  uint64_t mask;        // slots - 1 (power of two)
  int max_piece;        // longest piece in bytes
} tok_vocab;

// Hash of a byte string (8 bytes per step; any length).
static inline uint64_t vocab_hash(const char *s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  while (n >= 8) {
    uint64_t x;
    memcpy(&x, s, 8);
    h = (h ^ x) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    s += 8;
    n -= 8;
  }
  uint64_t x = 0;
  memcpy(&x, s, n);
  h = (h ^ x) * 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

// Reads tokens, types and scores; builds keys, pieces and the hash table.
int vocab_load(tok_vocab *v, const gguf_file *f, tok_spelling sp, wk_error *err);
void vocab_free(tok_vocab *v);

// Id of the token whose key is s[0..n) (the last one if spelled twice), -1 if none.
int32_t vocab_find(const tok_vocab *v, const char *s, size_t n);

static inline const char *vocab_text(const tok_vocab *v, int32_t id, size_t *len) {
  *len = v->text_off[id + 1] - v->text_off[id];
  return v->text + v->text_off[id];
}
static inline const char *vocab_key(const tok_vocab *v, int32_t id, size_t *len) {
  *len = v->key_off[id + 1] - v->key_off[id];
  return v->key + v->key_off[id];
}
static inline const char *vocab_piece(const tok_vocab *v, int32_t id, size_t *len) {
  *len = v->piece_off[id + 1] - v->piece_off[id];
  return v->piece + v->piece_off[id];
}

// GPT-2 byte alphabet: the code point standing for byte b.
uint32_t vocab_byte_char(uint8_t b);

#endif
