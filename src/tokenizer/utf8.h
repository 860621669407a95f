// UTF-8 helpers for the tokenizer: strict decoding with the Unicode
// "maximal subpart" rule for invalid input (the rule Python's
// bytes.decode(errors="replace") and Rust's String::from_utf8_lossy follow).
#ifndef WICK_TOKENIZER_UTF8_H
#define WICK_TOKENIZER_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The replacement character U+FFFD in UTF-8.
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

// Decodes one character at s[0..n), n > 0. Returns its length (1..4) and sets
// *cp when valid. Returns -k when the first k bytes are an invalid maximal
// subpart (to be replaced by one U+FFFD). Returns 0 when s[0..n) is a valid
// but unfinished prefix of a character (more bytes could complete it).
int utf8_next(const uint8_t *s, size_t n, uint32_t *cp);

// Number of code points in valid UTF-8 s[0..n) (counts non-continuation bytes).
size_t utf8_count(const char *s, size_t n);

// Encodes cp as UTF-8 into out (4 bytes room); returns the length.
int utf8_put(uint32_t cp, char *out);

// True when s[0..n) is valid UTF-8.
bool utf8_valid(const char *s, size_t n);

// Copies s[0..n) into a new wk_malloc'd buffer with each invalid maximal
// subpart (and an unfinished character at the end) replaced by U+FFFD.
// Returns NULL on allocation failure; *out_len receives the new length.
char *utf8_sanitize(const char *s, size_t n, size_t *out_len);

// Appends s[0..n) to out (which has room for at least 3 * n bytes),
// replacing invalid maximal subparts and an unfinished tail by U+FFFD.
// Returns the number of bytes written.
size_t utf8_lossy(const uint8_t *s, size_t n, char *out);

#endif
