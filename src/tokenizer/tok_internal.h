// The tokenizer object, shared by tokenizer.c (load, encode) and decode.c.
#ifndef WICK_TOKENIZER_TOK_INTERNAL_H
#define WICK_TOKENIZER_TOK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "tokenizer/added.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretok.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

typedef enum tok_model { TOK_MODEL_BPE, TOK_MODEL_SPM } tok_model;

struct wk_tokenizer {
  tok_model model;    // byte-level BPE or SentencePiece-style
  tok_vocab v;        // tokens
  tok_added added;    // added tokens matched whole in the text
  tok_pretok pre;     // BPE: split regex
  tok_bpe bpe;        // BPE: merges
  tok_spm spm;        // SPM: merge priorities, byte fallback
  int32_t bos, eos, eot, eom, unk;  // -1 when absent
  bool add_bos, add_eos;  // added by tok_encode(add_special)
  bool spm_prefix;    // SPM: U+2581 before text that starts the input
  bool strip_space;   // decode: drop the one leading space that prefix made
};

#endif
