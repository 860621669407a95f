// Tokenizers built from GGUF metadata (tokenizer.ggml.*): byte-level BPE
// ("gpt2") with pre-tokenizer regexes, and SentencePiece-style BPE ("llama")
// with scores and byte fallback.
#ifndef WICK_TOKENIZER_TOKENIZER_H
#define WICK_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "format/gguf.h"

typedef struct wk_tokenizer wk_tokenizer;

// Builds the tokenizer; copies what it needs (the gguf file may be closed after).
int tok_load(wk_tokenizer **out, const gguf_file *f, wk_error *err);
void tok_free(wk_tokenizer *t);

int32_t tok_n_vocab(const wk_tokenizer *t);
int32_t tok_bos(const wk_tokenizer *t);  // -1 if none
int32_t tok_eos(const wk_tokenizer *t);  // -1 if none
// True for tokens that end generation (EOS, EOT, <end_of_turn>, <|im_end|>, ...).
bool tok_is_eog(const wk_tokenizer *t, int32_t id);
// Token id of an exact special-token text ("<|im_end|>"), -1 if none.
int32_t tok_find_special(const wk_tokenizer *t, const char *text);
const char *tok_kind(const wk_tokenizer *t);  // "gpt2" / "llama"

// Encodes len bytes of text. add_special: add BOS/EOS as the model declares
// (add_bos_token / add_eos_token). parse_special: text of special/control
// tokens becomes those tokens. Writes up to cap ids; returns the total count
// (which may exceed cap: call again with a bigger buffer) or a negative
// wick_status. Invalid UTF-8 in text is first replaced by U+FFFD, one per
// maximal invalid subpart (what Python's bytes.decode(errors="replace") gives,
// i.e. the string Hugging Face would be handed). Thread-safe: t is not modified.
int64_t tok_encode(const wk_tokenizer *t, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *ids, int64_t cap);

// The bytes of one token as they appear in text (byte tokens become their
// byte, SentencePiece's U+2581 a space). Returns the byte count (may exceed
// cap), or a negative wick_status for an invalid id. Control tokens give ""
// unless render_special.
int tok_piece(const wk_tokenizer *t, int32_t id, bool render_special, char *buf, int cap);

// Streaming detokenizer: holds back bytes of a UTF-8 character split across
// tokens and applies the first-token rules (e.g. SentencePiece's leading
// space) so that concatenated output equals the full decode.
typedef struct tok_stream {
  const wk_tokenizer *t;
  char pending[8];  // bytes of an unfinished UTF-8 character
  int n_pending;
  int n_tokens;     // tokens seen so far
  bool render_special;
  bool started;     // some text has been written (the leading-space rule is spent)
} tok_stream;

// The smallest out buffer tok_stream_push / tok_stream_flush accept for any token.
int tok_stream_min_cap(const wk_tokenizer *t);

void tok_stream_init(tok_stream *s, const wk_tokenizer *t, bool render_special);
// Appends the text completed by token id to out (cap bytes); returns bytes
// written (>= 0) or a negative wick_status.
int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap);
// Returns -WICK_ERR_RANGE (state unchanged) when cap < tok_stream_min_cap(t).
// Invalid UTF-8 comes out as U+FFFD at once (one per byte for SentencePiece
// byte tokens, one per maximal subpart for byte-level BPE), as in tok_decode
// except that tok_decode judges a SentencePiece byte run as a whole.
// Flushes held-back bytes (invalid UTF-8 at the end comes out as U+FFFD).
int tok_stream_flush(tok_stream *s, char *out, int cap);

// Whole-sequence decode into a NUL-terminated buffer; same return rule as
// tok_piece. Matches Hugging Face decode(ids, skip_special_tokens=!render_special).
int64_t tok_decode(const wk_tokenizer *t, const int32_t *ids, int64_t n, bool render_special,
                   char *buf, int64_t cap);

#endif
