// Token ids back to text, whole or streaming. Whole-sequence decoding follows
// Hugging Face's decoders for these tokenizers: byte-level BPE joins the
// bytes and replaces invalid UTF-8 per maximal subpart; SentencePiece maps
// U+2581 to a space, turns each run of <0xHH> tokens into its bytes (every
// byte becomes U+FFFD when the run is not valid UTF-8) and, for models that
// prefix a space when encoding, drops one leading space.
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

static bool skipped(const wk_tokenizer *t, int32_t id, bool render_special) {
  return !render_special && (t->v.flags[id] & TOKF_SPECIAL);
}

int tok_piece(const wk_tokenizer *t, int32_t id, bool render_special, char *buf, int cap) {
  if (!t || id < 0 || id >= t->v.n || cap < 0 || (cap && !buf)) return -WICK_ERR_INVALID;
  size_t n = 0;
  const char *p = skipped(t, id, render_special) ? "" : vocab_piece(&t->v, id, &n);
  memcpy(buf, p, n < (size_t)cap ? n : (size_t)cap);
  if (n < (size_t)cap) buf[n] = 0;
  return (int)n;
}

// ---- whole sequences ----

static void put_replacements(char *out, size_t *o, size_t count) {
  for (size_t i = 0; i < count; i++, *o += 3) memcpy(out + *o, UTF8_REPLACEMENT, 3);
}

// Decodes into a new buffer (3 bytes room per piece byte); returns its length or < 0.
static int64_t decode_alloc(const wk_tokenizer *t, const int32_t *ids, int64_t n, bool render,
                            char **res) {
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->v.n) return -WICK_ERR_INVALID;
    size_t pl;
    if (!skipped(t, ids[i], render)) vocab_piece(&t->v, ids[i], &pl), total += pl;
  }
  size_t cap;
  if (!wk_mul_ok(total, 6, &cap) || !wk_add_ok(cap, 4, &cap)) return -WICK_ERR_NOMEM;
  char *out = wk_malloc(cap);
  if (!out) return -WICK_ERR_NOMEM;
  char *raw = out + 3 * total + 2;  // the joined bytes, behind the output
  size_t o = 0, r = 0;
  if (t->model == TOK_MODEL_BPE) {
    for (int64_t i = 0; i < n; i++) {
      if (skipped(t, ids[i], render)) continue;
      size_t pl;
      const char *p = vocab_piece(&t->v, ids[i], &pl);
      memcpy(raw + r, p, pl);
      r += pl;
    }
    o = utf8_lossy((const uint8_t *)raw, r, out);
  } else {
    for (int64_t i = 0; i <= n; i++) {
      bool is_byte = i < n && (t->v.flags[ids[i]] & TOKF_BYTE);
      if (i < n && skipped(t, ids[i], render)) continue;
      size_t pl = 0;
      const char *p = i < n ? vocab_piece(&t->v, ids[i], &pl) : "";
      if (is_byte) {
        raw[r++] = p[0];
        continue;
      }
      if (r) {  // a run of byte tokens ends
        if (utf8_valid(raw, r)) memcpy(out + o, raw, r), o += r;
        else put_replacements(out, &o, r);
        r = 0;
      }
      memcpy(out + o, p, pl);
      o += pl;
    }
    if (t->strip_space && o > 0 && out[0] == ' ') memmove(out, out + 1, --o);
  }
  *res = out;
  return (int64_t)o;
}

int64_t tok_decode(const wk_tokenizer *t, const int32_t *ids, int64_t n, bool render_special,
                   char *buf, int64_t cap) {
  if (!t || n < 0 || (n && !ids) || cap < 0 || (cap && !buf)) return -WICK_ERR_INVALID;
  char *out = NULL;
  int64_t len = decode_alloc(t, ids, n, render_special, &out);
  if (len < 0) return len;
  if (cap > 0) {
    int64_t c = len < cap ? len : cap - 1;
    memcpy(buf, out, (size_t)c);
    buf[c] = 0;
  }
  wk_free(out);
  return len;
}

// ---- streaming ----

int tok_stream_min_cap(const wk_tokenizer *t) { return 3 * (t->v.max_piece + 8) + 1; }

void tok_stream_init(tok_stream *s, const wk_tokenizer *t, bool render_special) {
  memset(s, 0, sizeof *s);
  s->t = t;
  s->render_special = render_special;
}

// Writes n bytes of finished text, applying the leading-space rule once.
static void emit(tok_stream *s, const char *p, size_t n, char *out, int *o) {
  if (n == 0) return;
  if (!s->started) {
    s->started = true;
    if (s->t->strip_space && p[0] == ' ') p++, n--;
  }
  memcpy(out + *o, p, n);
  *o += (int)n;
}

// Feeds one byte through the pending buffer: finished characters are written,
// invalid ones become U+FFFD (per_byte: one per byte, else one per subpart).
static void feed(tok_stream *s, uint8_t b, bool per_byte, char *out, int *o) {
  if (s->n_pending == 0 && b < 0x80) {
    char c = (char)b;
    emit(s, &c, 1, out, o);
    return;
  }
  s->pending[s->n_pending++] = (char)b;
  while (s->n_pending > 0) {
    uint32_t cp;
    int k = utf8_next((const uint8_t *)s->pending, (size_t)s->n_pending, &cp);
    if (k == 0) return;  // unfinished: wait for more
    int used = k > 0 ? k : -k;
    if (k > 0) {
      emit(s, s->pending, (size_t)k, out, o);
    } else {
      for (int i = 0; i < (per_byte ? used : 1); i++) emit(s, UTF8_REPLACEMENT, 3, out, o);
    }
    memmove(s->pending, s->pending + used, (size_t)(s->n_pending - used));
    s->n_pending -= used;
  }
}

static void flush_pending(tok_stream *s, char *out, int *o) {
  if (s->n_pending == 0) return;
  bool per_byte = s->t->model == TOK_MODEL_SPM;
  for (int i = 0; i < (per_byte ? s->n_pending : 1); i++) emit(s, UTF8_REPLACEMENT, 3, out, o);
  s->n_pending = 0;
}

int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap) {
  const wk_tokenizer *t = s->t;
  if (!t || id < 0 || id >= t->v.n || cap < 0 || (cap && !out)) return -WICK_ERR_INVALID;
  size_t pl = 0;
  const char *p = skipped(t, id, s->render_special) ? "" : vocab_piece(&t->v, id, &pl);
  if ((size_t)cap < 3 * (pl + (size_t)s->n_pending) + 1) return -WICK_ERR_RANGE;
  int o = 0;
  s->n_tokens++;
  if (t->model == TOK_MODEL_SPM) {
    if (t->v.flags[id] & TOKF_BYTE) {
      feed(s, (uint8_t)p[0], true, out, &o);
    } else if (pl > 0 || !skipped(t, id, s->render_special)) {
      flush_pending(s, out, &o);  // a byte run cut short
      emit(s, p, pl, out, &o);
    }
  } else {
    for (size_t i = 0; i < pl; i++) feed(s, (uint8_t)p[i], false, out, &o);
  }
  if (o < cap) out[o] = 0;
  return o;
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
  if (!s->t || cap < 0 || (cap && !out)) return -WICK_ERR_INVALID;
  if ((size_t)cap < 3 * (size_t)s->n_pending + 1) return -WICK_ERR_RANGE;
  int o = 0;
  flush_pending(s, out, &o);
  if (o < cap) out[o] = 0;
  return o;
}
