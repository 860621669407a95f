// Split regexes per tokenizer.ggml.pre. \s is spelled out as the Unicode
// White_Space set, as the Hugging Face tokenizers regex engine reads it
// (PCRE2's own \s leaves out U+0085).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretok.h"

#include <pcre2.h>
#include <string.h>

#include "base/alloc.h"

#define WS "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define S "[" WS "]"
#define NS "[^" WS "]"
#define PUNCT "[^" WS "\\p{L}\\p{N}]"

// GPT-2's byte-level split (also what Hugging Face uses for a pre name it
// does not list, e.g. "smollm" or "default").
static const char k_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" PUNCT "+|" S "+(?!" NS ")|" S "+";
// Llama 3: case-insensitive contractions, numbers in groups of up to three.
static const char k_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?" PUNCT
    "+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+";
// Qwen2 / Qwen3: as Llama 3 but one digit per piece.
static const char k_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?" PUNCT
    "+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+";

static const struct {
  const char *pre;     // tokenizer.ggml.pre
  const char *family;  // regex family
  const char *regex;
} k_table[] = {
    {"llama3", "llama3", k_llama3},     {"llama-v3", "llama3", k_llama3},
    {"llama-bpe", "llama3", k_llama3},  {"falcon3", "llama3", k_llama3},
    {"falcon-h1", "llama3", k_llama3},  {"pixtral", "llama3", k_llama3},
    {"dbrx", "llama3", k_llama3},       {"smaug-bpe", "llama3", k_llama3},
    {"qwen2", "qwen2", k_qwen2},        {"deepseek-r1-qwen", "qwen2", k_qwen2},
    {"megrez", "qwen2", k_qwen2},
};

static void *gctx_malloc(PCRE2_SIZE size, void *ud) {
  (void)ud;
  return wk_malloc(size);
}
static void gctx_free(void *p, void *ud) {
  (void)ud;
  wk_free(p);
}

int pretok_init(tok_pretok *p, const char *pre_name, wk_error *err) {
  memset(p, 0, sizeof *p);
  const char *regex = k_gpt2;
  p->regex = "gpt2";
  for (size_t i = 0; pre_name && i < sizeof k_table / sizeof k_table[0]; i++) {
    if (!strcmp(pre_name, k_table[i].pre)) {
      regex = k_table[i].regex;
      p->regex = k_table[i].family;
    }
  }
  p->gctx = pcre2_general_context_create(gctx_malloc, gctx_free, NULL);
  if (!p->gctx) return wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory for the regex context");
  pcre2_compile_context *cc = pcre2_compile_context_create(p->gctx);
  if (!cc) return pretok_free(p), wk_fail(err, WICK_ERR_NOMEM, "tokenizer: out of memory for the regex");
  int ecode;
  PCRE2_SIZE eoff;
  p->code = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ecode,
                          &eoff, cc);
  pcre2_compile_context_free(cc);
  if (!p->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(ecode, msg, sizeof msg);
    pretok_free(p);
    return wk_fail(err, WICK_ERR_UNSUPPORTED, "tokenizer: split regex does not compile at offset %zu: %s",
                   (size_t)eoff, (const char *)msg);
  }
  p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
  return 0;
}

void pretok_free(tok_pretok *p) {
  if (p->code) pcre2_code_free(p->code);
  if (p->gctx) pcre2_general_context_free(p->gctx);
  memset(p, 0, sizeof *p);
}

int pretok_split(const tok_pretok *p, const char *s, size_t n, pretok_fn fn, void *ud) {
  if (n == 0) return 0;
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, p->gctx);
  if (!md) return -WICK_ERR_NOMEM;
  size_t pos = 0, last = 0;
  int rc = 0;
  while (pos < n) {
    int m = pcre2_match(p->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (m == PCRE2_ERROR_NOMATCH) break;
    if (m < 0) {
      rc = -WICK_ERR_INVALID;
      break;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t a = ov[0], b = ov[1];
    if (a > last && (rc = fn(ud, s + last, a - last))) break;
    if (b == a) {  // empty match: step over one character
      pos = b + 1;
      while (pos < n && ((uint8_t)s[pos] & 0xC0) == 0x80) pos++;
      last = a;
      continue;
    }
    if ((rc = fn(ud, s + a, b - a))) break;
    last = pos = b;
  }
  if (!rc && last < n) rc = fn(ud, s + last, n - last);
  pcre2_match_data_free(md);
  return rc;
}
