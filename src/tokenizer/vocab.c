// Token table: reads tokenizer.ggml.tokens / token_type / scores and derives
// each token's lookup key and decoded bytes (see vocab.h).
#include "tokenizer/vocab.h"

#include <string.h>

#include "base/alloc.h"
#include "tokenizer/utf8.h"

// GPT-2 byte alphabet: printable Latin-1 bytes stand for themselves, the other
// 68 bytes (0-32, 127-160, 173) take code points 256.. in byte order.
static bool byte_is_printable(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
}

uint32_t vocab_byte_char(uint8_t b) {
  if (byte_is_printable(b)) return b;
  unsigned k = 0;
  for (unsigned c = 0; c < b; c++) k += !byte_is_printable(c);
  return 256 + k;
}

// Byte for an alphabet code point, -1 when cp is outside the alphabet.
static int alphabet_byte(uint32_t cp) {
  if (cp < 256) return byte_is_printable(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  unsigned k = 0;
  for (unsigned c = 0; c < 256; c++)
    if (!byte_is_printable(c) && k++ == cp - 256) return (int)c;
  return -1;
}

// Python's str.isspace(), which the Gemma respelling rule uses.
static bool py_space(uint32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// A growing byte buffer with offsets, for the key and piece arenas.
typedef struct arena {
  char *buf;
  size_t len, cap;
} arena;

static int arena_put(arena *a, const void *p, size_t n) {
  if (a->len + n > a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 4096;
    while (cap < a->len + n) cap *= 2;
    char *nb = wk_realloc(a->buf, cap);
    if (!nb) return -1;
    a->buf = nb;
    a->cap = cap;
  }
  memcpy(a->buf + a->len, p, n);
  a->len += n;
  return 0;
}

// Key of a token under spelling sp, appended to a.
static int make_key(arena *a, const char *s, size_t n, tok_spelling sp) {
  const uint8_t *u = (const uint8_t *)s;
  if (sp == TOK_SPELL_BYTELEVEL) {
    bool in_alphabet = true;
    for (size_t i = 0; i < n && in_alphabet;) {
      uint32_t cp;
      int k = utf8_next(u + i, n - i, &cp);
      if (k <= 0 || alphabet_byte(cp) < 0) in_alphabet = false;
      i += k > 0 ? (size_t)k : 1;
    }
    if (in_alphabet) return arena_put(a, s, n);
    for (size_t i = 0; i < n; i++) {
      char c[4];
      if (arena_put(a, c, (size_t)utf8_put(vocab_byte_char(u[i]), c))) return -1;
    }
    return 0;
  }
  if (sp == TOK_SPELL_SPM_GEMMA && memchr(s, ' ', n)) {
    bool all_space = true;
    size_t chars = 0;
    for (size_t i = 0; i < n && all_space; chars++) {
      uint32_t cp;
      int k = utf8_next(u + i, n - i, &cp);
      if (k <= 0 || !py_space(cp)) all_space = false;
      i += k > 0 ? (size_t)k : 1;
    }
    if (all_space) {
      for (size_t i = 0; i < chars; i++)
        if (arena_put(a, "\xE2\x96\x81", 3)) return -1;
      return 0;
    }
  }
  return arena_put(a, s, n);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decoded bytes of a token from its key, appended to a; sets *is_byte for
// SentencePiece byte tokens "<0xHH>".
static int make_piece(arena *a, const char *k, size_t n, tok_spelling sp, bool *is_byte) {
  *is_byte = false;
  if (sp == TOK_SPELL_BYTELEVEL) {
    const uint8_t *u = (const uint8_t *)k;
    for (size_t i = 0; i < n;) {
      uint32_t cp;
      int len = utf8_next(u + i, n - i, &cp);
      int b = len > 0 ? alphabet_byte(cp) : -1;
      if (b < 0) return arena_put(a, k, n);  // not all in the alphabet: raw bytes
      i += (size_t)len;
    }
    for (size_t i = 0; i < n;) {
      uint32_t cp;
      int len = utf8_next(u + i, n - i, &cp);
      uint8_t b = (uint8_t)alphabet_byte(cp);
      if (arena_put(a, &b, 1)) return -1;
      i += (size_t)len;
    }
    return 0;
  }
  if (n == 6 && !memcmp(k, "<0x", 3) && k[5] == '>' && hex_digit(k[3]) >= 0 &&
      hex_digit(k[4]) >= 0) {
    uint8_t b = (uint8_t)(hex_digit(k[3]) * 16 + hex_digit(k[4]));
    *is_byte = true;
    return arena_put(a, &b, 1);
  }
  for (size_t i = 0; i < n;) {
    if (i + 3 <= n && !memcmp(k + i, "\xE2\x96\x81", 3)) {
      if (arena_put(a, " ", 1)) return -1;
      i += 3;
    } else {
      if (arena_put(a, k + i, 1)) return -1;
      i++;
    }
  }
  return 0;
}

int32_t vocab_find(const tok_vocab *v, const char *s, size_t n) {
  uint64_t hv = vocab_hash(s, n);
  int32_t tag = (int32_t)(hv >> 32);
  for (uint64_t h = hv & v->mask;; h = (h + 1) & v->mask) {
    int32_t id = v->slots[2 * h];
    if (id < 0) return -1;
    if (v->slots[2 * h + 1] != tag) continue;
    size_t kl;
    const char *k = vocab_key(v, id, &kl);
    if (kl == n && !memcmp(k, s, n)) return id;
  }
}

static int build_hash(tok_vocab *v) {
  uint64_t cap = 1024;
  while (cap < (uint64_t)v->n * 2) cap *= 2;
  v->slots = wk_malloc(cap * 2 * sizeof(int32_t));
  if (!v->slots) return -1;
  memset(v->slots, 0xFF, cap * 2 * sizeof(int32_t));
  v->mask = cap - 1;
  for (int32_t id = 0; id < v->n; id++) {
    size_t n;
    const char *k = vocab_key(v, id, &n);
    uint64_t hv = vocab_hash(k, n);
    for (uint64_t h = hv & v->mask;; h = (h + 1) & v->mask) {
      int32_t o = v->slots[2 * h];
      size_t on = 0;
      const char *ok = o >= 0 ? vocab_key(v, o, &on) : NULL;
      if (o < 0 || (on == n && !memcmp(ok, k, n))) {  // spelled twice: the later id wins
        v->slots[2 * h] = id;
        v->slots[2 * h + 1] = (int32_t)(hv >> 32);
        break;
      }
    }
  }
  return 0;
}

static int load_arrays(tok_vocab *v, const gguf_file *f, wk_error *err) {
  const gguf_kv *tk = gguf_get(f, "tokenizer.ggml.tokens");
  if (!tk || gguf_kv_type(tk) != GGUF_ARRAY || gguf_arr_type(tk) != GGUF_STRING)
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: expected tokenizer.ggml.tokens (array of strings), found %s",
                   tk ? "another type" : "no such key");
  uint64_t n = gguf_arr_len(tk);
  if (n == 0 || n > INT32_MAX / 2)
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: expected 1..%d tokens, found %llu", INT32_MAX / 2,
                   (unsigned long long)n);
  v->n = (int32_t)n;
  const gguf_kv *ty = gguf_get(f, "tokenizer.ggml.token_type");
  const gguf_kv *sc = gguf_get(f, "tokenizer.ggml.scores");
  if (ty && gguf_arr_len(ty) != n)
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: expected %llu token types, found %llu",
                   (unsigned long long)n, (unsigned long long)gguf_arr_len(ty));
  if (sc && gguf_arr_len(sc) != n)
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: expected %llu scores, found %llu",
                   (unsigned long long)n, (unsigned long long)gguf_arr_len(sc));
  v->type = wk_calloc(n, 1);
  v->flags = wk_calloc(n, 1);
  v->score = wk_calloc(n, sizeof(float));
  v->text_off = wk_calloc(n + 1, sizeof(uint32_t));
  if (!v->type || !v->flags || !v->score || !v->text_off)
    return wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);
  arena a = {0};
  for (uint64_t i = 0; i < n; i++) {
    gguf_str s = gguf_arr_str(tk, i);
    int64_t t = TOK_NORMAL;
    double d = 0;
    if (ty && (!gguf_arr_int(ty, i, &t) || t < 1 || t > 6))
      return wk_free(a.buf), wk_fail(err, WICK_ERR_FORMAT, "tokenizer: token %llu: expected type 1..6, found %lld",
                                     (unsigned long long)i, (long long)t);
    if (sc && !gguf_arr_float(sc, i, &d))
      return wk_free(a.buf), wk_fail(err, WICK_ERR_FORMAT, "tokenizer: token %llu: score is not a number",
                                     (unsigned long long)i);
    if (!s.ptr || s.len > 65536 || a.len + s.len > UINT32_MAX / 4)
      return wk_free(a.buf), wk_fail(err, WICK_ERR_FORMAT, "tokenizer: token %llu: expected a string under 64 KiB",
                                     (unsigned long long)i);
    v->type[i] = (uint8_t)t;
    v->score[i] = (float)d;
    if (arena_put(&a, s.ptr, s.len)) return wk_free(a.buf), wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory");
    v->text_off[i + 1] = (uint32_t)a.len;
  }
  v->text = a.buf ? a.buf : wk_malloc(1);
  return v->text ? 0 : wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory");
}

int vocab_load(tok_vocab *v, const gguf_file *f, tok_spelling sp, wk_error *err) {
  memset(v, 0, sizeof *v);
  int rc = load_arrays(v, f, err);
  if (rc) return vocab_free(v), rc;
  size_t n = (size_t)v->n;
  arena keys = {0}, pieces = {0};
  v->key_off = wk_calloc(n + 1, sizeof(uint32_t));
  v->piece_off = wk_calloc(n + 1, sizeof(uint32_t));
  if (!v->key_off || !v->piece_off) goto nomem;
  for (int32_t i = 0; i < v->n; i++) {
    size_t tl;
    const char *t = vocab_text(v, i, &tl);
    if (make_key(&keys, t, tl, sp)) goto nomem_arenas;
    v->key_off[i + 1] = (uint32_t)keys.len;
    bool is_byte;
    if (make_piece(&pieces, keys.buf + v->key_off[i], keys.len - v->key_off[i], sp, &is_byte))
      goto nomem_arenas;
    v->piece_off[i + 1] = (uint32_t)pieces.len;
    if (is_byte) v->flags[i] |= TOKF_BYTE;
    int pl = (int)(v->piece_off[i + 1] - v->piece_off[i]);
    if (pl > v->max_piece) v->max_piece = pl;
  }
  v->key = keys.buf ? keys.buf : wk_malloc(1);
  v->piece = pieces.buf ? pieces.buf : wk_malloc(1);
  if (!v->key || !v->piece || build_hash(v)) goto nomem;
  return 0;
nomem_arenas:
  wk_free(keys.buf);
  wk_free(pieces.buf);
nomem:
  vocab_free(v);
  return wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory building the token table");
}

void vocab_free(tok_vocab *v) {
  wk_free(v->text);
  wk_free(v->text_off);
  wk_free(v->key);
  wk_free(v->key_off);
  wk_free(v->piece);
  wk_free(v->piece_off);
  wk_free(v->type);
  wk_free(v->flags);
  wk_free(v->score);
  wk_free(v->slots);
  memset(v, 0, sizeof *v);
}
