// Tokenizer load and encode. Encoding follows the Hugging Face pipeline for a
// tokenizer built from GGUF metadata: invalid UTF-8 is first replaced
// (U+FFFD per maximal subpart, as Python's errors="replace"), added tokens
// are cut out of the raw text (leftmost, then longest), and each remaining
// segment goes through the model's pre-tokenizer and merges.
#include <string.h>

#include "base/alloc.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wcache.h"

// Texts of tokens that end a turn or a document (when control / user-defined).
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>",  "<|end|>",   "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>",       "_<EOT>",    "<|end_of_text|>", "<|return|>",
    "<|call|>",   "<|end▁of▁sentence|>",
};

static bool is_gemma_arch(const char *arch) {
  return !strcmp(arch, "gemma") || !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3") ||
         !strcmp(arch, "gemma3n");
}

static bool get_bool(const gguf_file *f, const char *key, bool def) {
  const gguf_kv *kv = gguf_get(f, key);
  bool b;
  return kv && gguf_kv_bool(kv, &b) ? b : def;
}

static int32_t get_id(const gguf_file *f, const char *key, int32_t n) {
  int64_t v = gguf_get_int(f, key, -1);
  return v >= 0 && v < n ? (int32_t)v : -1;
}

// Registers the added tokens: control tokens as special, user-defined ones as
// plain added tokens (a byte-level control token spelled outside the byte
// alphabet is not one, as in Hugging Face's GGUF loader).
static int build_added(wk_tokenizer *t) {
  tok_vocab *v = &t->v;
  int rc = added_init(&t->added);
  if (rc) return rc;
  for (int pass = 0; pass < 2; pass++) {
    uint8_t want = pass == 0 ? TOK_CONTROL : TOK_USER;
    for (int32_t i = 0; i < v->n; i++) {
      if (v->type[i] != want) continue;
      size_t tl, kl;
      const char *tx = vocab_text(v, i, &tl);
      const char *k = vocab_key(v, i, &kl);
      if (tl == 0) continue;
      if (want == TOK_CONTROL && t->model == TOK_MODEL_BPE && (tl != kl || memcmp(tx, k, tl)))
        continue;
      int32_t id = vocab_find(v, tx, tl);
      if (id < 0) continue;
      if ((rc = added_insert(&t->added, tx, tl, id))) return rc;
      v->flags[id] |= TOKF_ADDED | (want == TOK_CONTROL ? TOKF_SPECIAL : 0);
    }
  }
  return 0;
}

static void mark_eog(wk_tokenizer *t) {
  tok_vocab *v = &t->v;
  int32_t ids[3] = {t->eos, t->eot, t->eom};
  for (int i = 0; i < 3; i++)
    if (ids[i] >= 0) v->flags[ids[i]] |= TOKF_EOG;
  for (int32_t i = 0; i < v->n; i++) {
    if (v->type[i] != TOK_CONTROL && v->type[i] != TOK_USER) continue;
    size_t tl;
    const char *tx = vocab_text(v, i, &tl);
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof k_eog_texts[0]; k++)
      if (strlen(k_eog_texts[k]) == tl && !memcmp(k_eog_texts[k], tx, tl)) v->flags[i] |= TOKF_EOG;
  }
}

int tok_load(wk_tokenizer **out, const gguf_file *f, wk_error *err) {
  *out = NULL;
  char model[32] = "", arch[64] = "", pre[64] = "";
  if (!gguf_get_str(f, "tokenizer.ggml.model", model, sizeof model))
    return wk_fail(err, WICK_ERR_FORMAT, "tokenizer: expected key tokenizer.ggml.model, found none");
  gguf_get_str(f, "general.architecture", arch, sizeof arch);
  gguf_get_str(f, "tokenizer.ggml.pre", pre, sizeof pre);
  tok_model m;
  if (!strcmp(model, "gpt2")) m = TOK_MODEL_BPE;
  else if (!strcmp(model, "llama")) m = TOK_MODEL_SPM;
  else
    return wk_fail(err, WICK_ERR_UNSUPPORTED,
                   "tokenizer: expected tokenizer.ggml.model \"gpt2\" or \"llama\", found \"%s\"", model);
  wk_tokenizer *t = wk_calloc(1, sizeof *t);
  if (!t) return wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory");
  t->model = m;
  bool gemma = m == TOK_MODEL_SPM && is_gemma_arch(arch);
  tok_spelling sp = m == TOK_MODEL_BPE ? TOK_SPELL_BYTELEVEL : gemma ? TOK_SPELL_SPM_GEMMA : TOK_SPELL_SPM;
  int rc = vocab_load(&t->v, f, sp, err);
  if (rc) {
    wk_free(t);
    return rc;
  }
  int32_t n = t->v.n;
  t->bos = get_id(f, "tokenizer.ggml.bos_token_id", n);
  t->eos = get_id(f, "tokenizer.ggml.eos_token_id", n);
  t->eot = get_id(f, "tokenizer.ggml.eot_token_id", n);
  t->eom = get_id(f, "tokenizer.ggml.eom_token_id", n);
  t->unk = get_id(f, "tokenizer.ggml.unknown_token_id", n);
  // SentencePiece files that say nothing get BOS (as llama.cpp and Hugging Face do).
  t->add_bos = get_bool(f, "tokenizer.ggml.add_bos_token", m == TOK_MODEL_SPM) && t->bos >= 0;
  t->add_eos = get_bool(f, "tokenizer.ggml.add_eos_token", false) && t->eos >= 0;
  // Gemma never prefixes a space; other SentencePiece models do unless told not to.
  t->spm_prefix = m == TOK_MODEL_SPM && !gemma && get_bool(f, "tokenizer.ggml.add_space_prefix", true);
  t->strip_space = t->spm_prefix;
  if (m == TOK_MODEL_BPE) {
    rc = pretok_init(&t->pre, pre, err);
    if (!rc) rc = bpe_init(&t->bpe, &t->v, f, err);
  } else {
    rc = spm_init(&t->spm, &t->v, gemma, t->unk);
    if (rc) wk_fail(err, -rc, "tokenizer: out of memory for merge priorities");
  }
  if (!rc && (rc = build_added(t))) wk_fail(err, -rc, "tokenizer: out of memory for added tokens");
  if (rc) {
    tok_free(t);
    return rc < 0 ? -rc : rc;
  }
  mark_eog(t);
  *out = t;
  return 0;
}

void tok_free(wk_tokenizer *t) {
  if (!t) return;
  vocab_free(&t->v);
  added_free(&t->added);
  pretok_free(&t->pre);
  bpe_free(&t->bpe);
  spm_free(&t->spm);
  wk_free(t);
}

int32_t tok_n_vocab(const wk_tokenizer *t) { return t->v.n; }
int32_t tok_bos(const wk_tokenizer *t) { return t->bos; }
int32_t tok_eos(const wk_tokenizer *t) { return t->eos; }
const char *tok_kind(const wk_tokenizer *t) { return t->model == TOK_MODEL_BPE ? "gpt2" : "llama"; }

bool tok_is_eog(const wk_tokenizer *t, int32_t id) {
  return id >= 0 && id < t->v.n && (t->v.flags[id] & TOKF_EOG);
}

int32_t tok_find_special(const wk_tokenizer *t, const char *text) {
  size_t n = strlen(text);
  int32_t id = -1;
  if (n && added_longest(&t->added, text, n, &id) == n) return id;
  for (int32_t i = 0; i < t->v.n; i++) {
    if (t->v.type[i] != TOK_CONTROL && t->v.type[i] != TOK_USER) continue;
    size_t tl;
    const char *tx = vocab_text(&t->v, i, &tl);
    if (tl == n && !memcmp(tx, text, n)) return i;
  }
  return -1;
}

// Per-call working state of the encoder.
typedef struct enc {
  const wk_tokenizer *t;
  tok_ids ids;
  bpe_scratch bs;
  spm_scratch ss;
  tok_wcache cache;  // word -> ids, for long inputs
  bool use_cache;
} enc;

#define CACHE_MIN_INPUT 4096  // inputs shorter than this skip the word cache

static int on_piece(void *ud, const char *s, size_t n) {
  enc *e = ud;
  if (!e->use_cache) return bpe_encode_word(&e->t->bpe, &e->bs, s, n, &e->ids);
  int rc;
  if (wcache_get(&e->cache, s, n, &e->ids, &rc)) return rc;
  int64_t first = e->ids.n;
  if ((rc = bpe_encode_word(&e->t->bpe, &e->bs, s, n, &e->ids))) return rc;
  wcache_put(&e->cache, s, n, e->ids.v + first, e->ids.n - first);
  return 0;
}

static int encode_segment(enc *e, const char *s, size_t n, bool at_start) {
  if (n == 0) return 0;
  if (e->t->model == TOK_MODEL_BPE) return pretok_split(&e->t->pre, s, n, on_piece, e);
  return spm_encode(&e->t->spm, &e->ss, s, n, e->t->spm_prefix && at_start, &e->ids);
}

static int encode_text(enc *e, const char *s, size_t n, bool parse_special) {
  const wk_tokenizer *t = e->t;
  size_t seg = 0, i = 0;
  int rc;
  while (i < n) {
    if (!added_may_start(&t->added, (uint8_t)s[i])) {
      i++;
      continue;
    }
    int32_t id;
    size_t len = added_longest(&t->added, s + i, n - i, &id);
    if (len == 0) {
      i++;
      continue;
    }
    if ((t->v.flags[id] & TOKF_SPECIAL) && !parse_special) {  // stays text, span consumed
      i += len;
      continue;
    }
    if ((rc = encode_segment(e, s + seg, i - seg, seg == 0))) return rc;
    if ((rc = ids_push(&e->ids, id))) return rc;
    i += len;
    seg = i;
  }
  return encode_segment(e, s + seg, n - seg, seg == 0);
}

int64_t tok_encode(const wk_tokenizer *t, const char *text, size_t len, bool add_special,
                   bool parse_special, int32_t *ids, int64_t cap) {
  if (!t || (!text && len) || cap < 0 || (cap > 0 && !ids)) return -WICK_ERR_INVALID;
  char *clean = NULL;
  if (len && !utf8_valid(text, len)) {
    clean = utf8_sanitize(text, len, &len);
    if (!clean) return -WICK_ERR_NOMEM;
    text = clean;
  }
  enc e = {.t = t, .use_cache = len >= CACHE_MIN_INPUT};
  if (e.use_cache) e.ss.cache = &e.cache;
  int rc = 0;
  if (add_special && t->add_bos) rc = ids_push(&e.ids, t->bos);
  if (!rc) rc = encode_text(&e, text, len, parse_special);
  if (!rc && add_special && t->add_eos) rc = ids_push(&e.ids, t->eos);
  int64_t n = e.ids.n;
  if (!rc && cap > 0) memcpy(ids, e.ids.v, (size_t)(n < cap ? n : cap) * sizeof(int32_t));
  wk_free(e.ids.v);
  bpe_scratch_free(&e.bs);
  spm_scratch_free(&e.ss);
  wcache_free(&e.cache);
  wk_free(clean);
  return rc ? (rc < 0 ? rc : -rc) : n;
}
