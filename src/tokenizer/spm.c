// SentencePiece-style merge loop over characters. The candidate order is
// that of a merge table listing, for every token, each split into two
// vocabulary tokens: merged token priority (higher first), then longer left
// part, longer right part, lower merged id, and leftmost position.
#include "tokenizer/spm.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/heap.h"
#include "tokenizer/utf8.h"

#define BAR "\xE2\x96\x81"  // U+2581, SentencePiece's space

typedef struct sym {
  int32_t start;   // byte offset in the normalized text
  int32_t len;     // bytes
  int32_t chars;   // code points
  int32_t id;      // token id
  int32_t prev;    // previous live symbol, -1 none
  int32_t next;    // next live symbol, -1 none
  bool mergeable;  // false for byte-fallback and unknown symbols
  bool alive;
} sym;

typedef struct cand {
  float prio;      // priority of the merged token
  int32_t lchars;  // left part length in code points
  int32_t rchars;
  int32_t merged;  // merged token id
  int32_t pos;     // left symbol
  int32_t right;   // right symbol when pushed
  int32_t lbytes;  // byte lengths when pushed: a change means stale
  int32_t rbytes;
} cand;

int spm_init(tok_spm *s, const tok_vocab *v, bool by_position, int32_t unk) {
  memset(s, 0, sizeof *s);
  s->v = v;
  s->unk = unk;
  s->prio = wk_malloc((size_t)v->n * sizeof(float));
  if (!s->prio) return -WICK_ERR_NOMEM;
  for (int32_t i = 0; i < v->n; i++) s->prio[i] = by_position ? -(float)i : v->score[i];
  // Where tokens join a character to a following U+2581: elsewhere no token
  // can span a word start, so the text is merged one word at a time.
  for (int32_t i = 0; i < v->n; i++) {
    size_t n;
    const char *k = vocab_key(v, i, &n);
    for (size_t j = 1; j + 3 <= n; j++) {
      if (memcmp(k + j, BAR, 3)) continue;
      size_t c = j - 1;
      while (c > 0 && ((uint8_t)k[c] & 0xC0) == 0x80) c--;
      if (j - c == 3 && !memcmp(k + c, BAR, 3)) continue;
      if ((uint8_t)k[c] < 0x80) s->glue[(uint8_t)k[c] >> 3] |= (uint8_t)(1u << (k[c] & 7));
      else s->glue_other = true;
    }
  }
  s->pair_id = wk_malloc(128 * 128 * sizeof(int32_t));
  if (!s->pair_id) return spm_free(s), -WICK_ERR_NOMEM;
  for (int c = 0; c < 128; c++) {
    char ch[4] = {(char)c, 0, 0, 0};
    s->ascii_id[c] = vocab_find(v, ch, 1);
    for (int d = 0; d < 128; d++) {
      ch[1] = (char)d;
      s->pair_id[c * 128 + d] = vocab_find(v, ch, 2);
    }
    memcpy(ch, BAR, 3);
    ch[3] = (char)c;
    s->bar_id[c] = vocab_find(v, ch, 4);
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    s->byte_id[b] = vocab_find(v, name, 6);
  }
  return 0;
}

void spm_free(tok_spm *s) {
  wk_free(s->prio);
  wk_free(s->pair_id);
  memset(s, 0, sizeof *s);
}

void spm_scratch_free(spm_scratch *s) {
  wk_free(s->text);
  wk_free(s->sym);
  wk_free(s->heap);
  memset(s, 0, sizeof *s);
}

static int reserve(spm_scratch *w, size_t text_len, size_t nsym) {
  if (text_len > w->text_cap) {
    char *t = wk_realloc(w->text, text_len);
    if (!t) return -WICK_ERR_NOMEM;
    w->text = t;
    w->text_cap = text_len;
  }
  if (nsym > w->cap) {
    size_t cap = w->cap ? w->cap : 64;
    while (cap < nsym) cap *= 2;
    size_t hb;
    if (!wk_mul_ok(cap, 3 * sizeof(cand), &hb)) return -WICK_ERR_NOMEM;
    void *sy = wk_realloc(w->sym, cap * sizeof(sym));
    if (!sy) return -WICK_ERR_NOMEM;
    w->sym = sy;
    void *he = wk_realloc(w->heap, hb);
    if (!he) return -WICK_ERR_NOMEM;
    w->heap = he;
    w->cap = cap;
  }
  return 0;
}

static inline bool cand_before(const cand *a, const cand *b) {
  if (a->prio != b->prio) return a->prio > b->prio;
  if (a->lchars != b->lchars) return a->lchars > b->lchars;
  if (a->rchars != b->rchars) return a->rchars > b->rchars;
  if (a->merged != b->merged) return a->merged < b->merged;
  return a->pos < b->pos;
}

TOK_HEAP_DEFINE(cand, cand_before)

static void try_push(const tok_spm *s, const char *text, const sym *sy, cand *h, size_t *nh,
                     int32_t pos) {
  const sym *l = &sy[pos];
  if (l->next < 0) return;
  const sym *r = &sy[l->next];
  if (!l->mergeable || !r->mergeable || l->start + l->len != r->start) return;
  const uint8_t *a = (const uint8_t *)text + l->start, *b = (const uint8_t *)text + r->start;
  int32_t m;
  if (r->len == 1 && b[0] < 0x80 && l->len == 1 && a[0] < 0x80) m = s->pair_id[a[0] * 128 + b[0]];
  else if (r->len == 1 && b[0] < 0x80 && l->len == 3 && !memcmp(a, BAR, 3)) m = s->bar_id[b[0]];
  else m = vocab_find(s->v, text + l->start, (size_t)(l->len + r->len));
  if (m < 0) return;
  cand c = {s->prio[m], l->chars, r->chars, m, pos, l->next, l->len, r->len};
  heap_push(h, nh, c);
}

// Appends the initial symbols for one character at text[i..i+k).
static void add_char(const tok_spm *s, const char *text, int32_t i, int32_t k, sym *sy, int32_t *ns) {
  uint8_t c0 = (uint8_t)text[i];
  int32_t id = c0 < 0x80 ? s->ascii_id[c0] : vocab_find(s->v, text + i, (size_t)k);
  if (id >= 0) {
    sy[*ns] = (sym){i, k, 1, id, *ns - 1, *ns + 1, true, true};
    (*ns)++;
    return;
  }
  bool bytes_ok = true;
  for (int32_t j = 0; j < k; j++) bytes_ok &= s->byte_id[(uint8_t)text[i + j]] >= 0;
  if (bytes_ok) {
    for (int32_t j = 0; j < k; j++) {
      sy[*ns] = (sym){i + j, 1, 1, s->byte_id[(uint8_t)text[i + j]], *ns - 1, *ns + 1, false, true};
      (*ns)++;
    }
    return;
  }
  if (s->unk < 0) return;  // no way to spell it: dropped
  if (*ns > 0 && sy[*ns - 1].id == s->unk && !sy[*ns - 1].mergeable &&
      sy[*ns - 1].start + sy[*ns - 1].len == i) {  // consecutive unknowns fuse
    sy[*ns - 1].len += k;
    return;
  }
  sy[*ns] = (sym){i, k, 1, s->unk, *ns - 1, *ns + 1, false, true};
  (*ns)++;
}

// True when no token can span the word start at t[i] (a U+2581).
static bool word_break(const tok_spm *s, const char *t, size_t i) {
  size_t c = i - 1;
  while (c > 0 && ((uint8_t)t[c] & 0xC0) == 0x80) c--;
  if (i - c == 3 && !memcmp(t + c, BAR, 3)) return false;  // inside a run of U+2581
  uint8_t b = (uint8_t)t[c];
  return b < 0x80 ? !((s->glue[b >> 3] >> (b & 7)) & 1) : !s->glue_other;
}

// Merges the characters of t[a..b) and appends the ids.
static int merge_word(const tok_spm *s, spm_scratch *w, const char *t, size_t a, size_t b, tok_ids *out) {
  int rc;
  if (w->cache && wcache_get(w->cache, t + a, b - a, out, &rc)) return rc;
  int64_t first = out->n;
  sym *sy = w->sym;
  cand *h = w->heap;
  int32_t ns = 0;
  for (size_t i = a; i < b;) {
    uint32_t cp;
    int k = utf8_next((const uint8_t *)t + i, b - i, &cp);
    if (k <= 0) k = 1;  // input is sanitized; this is only a guard
    add_char(s, t, (int32_t)i, k, sy, &ns);
    i += (size_t)k;
  }
  if (ns == 0) return 0;
  sy[0].prev = -1;
  sy[ns - 1].next = -1;
  size_t nh = 0;
  for (int32_t i = 0; i + 1 < ns; i++) try_push(s, t, sy, h, &nh, i);
  while (nh) {
    cand c = heap_pop(h, &nh);
    sym *l = &sy[c.pos];
    if (!l->alive || l->next != c.right || l->len != c.lbytes || sy[c.right].len != c.rbytes)
      continue;  // stale
    sym *r = &sy[c.right];
    l->len += r->len;
    l->chars += r->chars;
    l->id = c.merged;
    l->next = r->next;
    if (r->next >= 0) sy[r->next].prev = c.pos;
    r->alive = false;
    if (l->prev >= 0) try_push(s, t, sy, h, &nh, l->prev);
    try_push(s, t, sy, h, &nh, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sy[i].next)
    if ((rc = ids_push(out, sy[i].id))) return rc;
  if (w->cache) wcache_put(w->cache, t + a, b - a, out->v + first, out->n - first);
  return 0;
}

int spm_encode(const tok_spm *s, spm_scratch *w, const char *text, size_t n, bool add_prefix,
               tok_ids *out) {
  if (n == 0) return 0;
  size_t cap;  // a space (1 byte) becomes U+2581 (3 bytes), plus the prefix
  if (n > INT32_MAX / 8 || !wk_mul_ok(n, 3, &cap)) return -WICK_ERR_RANGE;
  int rc = reserve(w, cap + 3, cap + 3);
  if (rc) return rc;
  char *t = w->text;
  size_t tn = 0;
  bool starts_bar = n >= 3 && !memcmp(text, "\xE2\x96\x81", 3);
  if (add_prefix && text[0] != ' ' && !starts_bar) {
    memcpy(t, "\xE2\x96\x81", 3);
    tn = 3;
  }
  for (size_t i = 0; i < n; i++) {
    if (text[i] == ' ') {
      memcpy(t + tn, "\xE2\x96\x81", 3);
      tn += 3;
    } else {
      t[tn++] = text[i];
    }
  }
  size_t a = 0;  // start of the current word
  for (size_t i = 3; i + 3 <= tn; i++) {
    if (memcmp(t + i, BAR, 3) || !word_break(s, t, i)) continue;
    if ((rc = merge_word(s, w, t, a, i, out))) return rc;
    a = i;
  }
  return merge_word(s, w, t, a, tn, out);
}
