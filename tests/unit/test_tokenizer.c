// Tokenizer unit tests on two small hand-made vocabularies (SentencePiece
// with byte tokens, byte-level BPE) written as GGUF files. The expected ids
// were worked out by hand from the merge rules; the streaming detokenizer is
// checked on UTF-8 characters split across tokens, byte tokens, invalid
// bytes and the leading-space rule. With the default models present, it also
// checks that streaming equals whole decoding on real text.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

#include "test_util.h"

#define FFFD "\xEF\xBF\xBD"

// ---- counting allocator: every block carries its size ----
static size_t g_live;
static void *count_alloc(void *ud, void *ptr, size_t size) {
  (void)ud;
  size_t *p = ptr ? (size_t *)ptr - 2 : NULL;
  if (p) g_live -= p[0];
  if (size == 0) {
    free(p);
    return NULL;
  }
  size_t *q = realloc(p, size + 2 * sizeof(size_t));
  if (!q) return NULL;
  q[0] = size;
  g_live += size;
  return q + 2;
}

// ---- vocabularies ----

// GPT-2 byte alphabet, written out from its definition.
static void byte_char(int b, char *out) {
  int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  unsigned cp = (unsigned)b;
  if (!printable) {
    int k = 0;
    for (int c = 0; c < b; c++) k += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174);
    cp = 256u + (unsigned)k;
  }
  if (cp < 0x80) {
    out[0] = (char)cp, out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
  }
}

static wk_tokenizer *load_written(gguf_writer *w, const char *path) {
  wk_error err = {{0}};
  gguf_file *f = NULL;
  wk_tokenizer *t = NULL;
  int rc = gguf_writer_write(w, path, &err);
  if (!rc) rc = gguf_open(&f, path, &err);
  if (!rc) rc = tok_load(&t, f, &err);
  if (rc) fprintf(stderr, "load %s: %s\n", path, err.msg);
  gguf_close(f);
  gguf_writer_free(w);
  unlink(path);
  return t;
}

// SentencePiece vocabulary: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces.
enum { S_BAR = 259, S_H, S_E, S_L, S_O, S_W, S_R, S_D, S_LL, S_HE, S_HELL, S_HELLO, S_BHELLO, S_BW, S_OR, S_BWOR, S_EACUTE, S_EOT, S_USER, S_N };

static wk_tokenizer *make_spm(void) {
  static const char *pieces[] = {"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "ll", "he", "hell", "hello",
                                 "\xE2\x96\x81hello", "\xE2\x96\x81w", "or", "\xE2\x96\x81wor", "\xC3\xA9",
                                 "<end_of_turn>", "<user>"};
  static const float best[] = {-100, -100, -100, -100, -100, -100, -100, -100, -1, -2, -3, -4, -5, -6, -7, -8, -9, 0, 0};
  char names[256][8];
  const char *tok[S_N];
  float score[S_N];
  int32_t type[S_N];
  tok[0] = "<unk>", tok[1] = "<s>", tok[2] = "</s>";
  type[0] = 2, type[1] = type[2] = 3;
  score[0] = score[1] = score[2] = 0;
  for (int b = 0; b < 256; b++) {
    snprintf(names[b], sizeof names[b], "<0x%02X>", b);
    tok[3 + b] = names[b], type[3 + b] = 6, score[3 + b] = 0;
  }
  for (int i = S_BAR; i < S_N; i++) {
    tok[i] = pieces[i - S_BAR];
    score[i] = best[i - S_BAR];
    type[i] = i == S_EOT ? 3 : i == S_USER ? 4 : 1;
  }
  gguf_writer *w = gguf_writer_create();
  gguf_writer_add_str(w, "general.architecture", "llama");
  gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tok, S_N);
  gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, score, S_N);
  gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, type, S_N);
  gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
  gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
  gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", true);
  return load_written(w, "test_tokenizer_spm.gguf");
}

// Byte-level vocabulary: ids 0..255 are the byte alphabet in byte order, then merges.
enum { G_HE = 256, G_LL, G_HELL, G_HELLO, G_GW, G_EACUTE, G_IM_END, G_N };

static wk_tokenizer *make_gpt2(void) {
  char chars[256][4];
  const char *tok[G_N];
  int32_t type[G_N];
  for (int b = 0; b < 256; b++) byte_char(b, chars[b]), tok[b] = chars[b], type[b] = 1;
  tok[G_HE] = "he", tok[G_LL] = "ll", tok[G_HELL] = "hell", tok[G_HELLO] = "hello";
  tok[G_GW] = "\xC4\xA0w", tok[G_EACUTE] = "\xC3\x83\xC2\xA9", tok[G_IM_END] = "<|im_end|>";
  for (int i = G_HE; i < G_N; i++) type[i] = i == G_IM_END ? 3 : 1;
  static const char *merges[] = {"l l", "h e", "he ll", "hell o", "\xC4\xA0 w", "\xC3\x83 \xC2\xA9"};
  gguf_writer *w = gguf_writer_create();
  gguf_writer_add_str(w, "general.architecture", "llama");
  gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
  gguf_writer_add_str(w, "tokenizer.ggml.pre", "smollm");
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tok, G_N);
  gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, type, G_N);
  gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, 6);
  gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", G_IM_END);
  gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
  return load_written(w, "test_tokenizer_gpt2.gguf");
}

// ---- helpers ----

static int encode_eq(const wk_tokenizer *t, const char *s, bool add, bool special, const int32_t *want, int n) {
  int32_t ids[64];
  int64_t k = tok_encode(t, s, strlen(s), add, special, ids, 64);
  int ok = k == n && !memcmp(ids, want, (size_t)n * sizeof(int32_t));
  if (!ok) {
    fprintf(stderr, "encode '%s': got", s);
    for (int64_t i = 0; i < k && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  return ok;
}

// Streams ids; checks each push's output and that the total equals tok_decode.
static int stream_eq(const wk_tokenizer *t, const int32_t *ids, int n, const char *const *want_each,
                     const char *want_flush) {
  tok_stream s;
  tok_stream_init(&s, t, false);
  char out[256], all[1024] = "", full[1024];
  int ok = 1;
  for (int i = 0; i < n; i++) {
    int k = tok_stream_push(&s, ids[i], out, sizeof out);
    ok &= k >= 0 && (size_t)k == strlen(want_each[i]) && !memcmp(out, want_each[i], (size_t)k);
    if (k >= 0) strncat(all, out, (size_t)k);
  }
  int k = tok_stream_flush(&s, out, sizeof out);
  ok &= k >= 0 && (size_t)k == strlen(want_flush) && !memcmp(out, want_flush, (size_t)k);
  if (k >= 0) strncat(all, out, (size_t)k);
  int64_t d = tok_decode(t, ids, n, false, full, sizeof full);
  ok &= d >= 0 && !strcmp(full, all);
  if (!ok) fprintf(stderr, "stream: got '%s', decode '%s'\n", all, full);
  return ok;
}

// ---- tests ----

static void test_spm(void) {
  wk_tokenizer *t = make_spm();
  CHECK(t != NULL);
  if (!t) return;
  CHECK(!strcmp(tok_kind(t), "llama"));
  CHECK(tok_bos(t) == 1 && tok_eos(t) == 2 && tok_is_eog(t, 2) && tok_is_eog(t, S_EOT));
  CHECK(!tok_is_eog(t, S_HELLO));
  CHECK(tok_find_special(t, "<end_of_turn>") == S_EOT && tok_find_special(t, "<nope>") == -1);
  // "hello world" -> "▁hello▁world": ll, he, hell, hello, ▁hello, ▁w, or, ▁wor.
  CHECK(encode_eq(t, "hello world", true, true, (int32_t[]){1, S_BHELLO, S_BWOR, S_L, S_D}, 5));
  CHECK(encode_eq(t, "hello world", false, true, (int32_t[]){S_BHELLO, S_BWOR, S_L, S_D}, 4));
  // Leading space: no second prefix. Byte fallback for 'i' and the euro sign.
  CHECK(encode_eq(t, " hello", false, true, (int32_t[]){S_BHELLO}, 1));
  CHECK(encode_eq(t, "hi\xE2\x82\xAC\xC3\xA9", false, true,
                  (int32_t[]){S_BAR, S_H, 3 + 'i', 3 + 0xE2, 3 + 0x82, 3 + 0xAC, S_EACUTE}, 7));
  // Special text: parsed or not; user-defined tokens always; no prefix after an added token.
  CHECK(encode_eq(t, "hello<end_of_turn>", false, true, (int32_t[]){S_BHELLO, S_EOT}, 2));
  CHECK(encode_eq(t, "<user>hello", false, false, (int32_t[]){S_USER, S_HELLO}, 2));
  int32_t ids[64];
  int64_t k = tok_encode(t, "hello<end_of_turn>", 18, false, false, ids, 64);
  CHECK(k > 2);
  for (int64_t i = 0; i < k && i < 64; i++) CHECK(ids[i] != S_EOT);
  // Invalid UTF-8 is replaced by U+FFFD (EF BF BD as byte tokens).
  CHECK(encode_eq(t, "\xFF", false, true, (int32_t[]){S_BAR, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD}, 4));
  CHECK(encode_eq(t, "", true, true, (int32_t[]){1}, 1));
  // The count is returned even when the buffer is short.
  CHECK(tok_encode(t, "hello world", 11, true, true, ids, 2) == 5 && ids[0] == 1 && ids[1] == S_BHELLO);

  // Decode: the prefix space goes; control tokens only when rendered.
  char buf[128];
  int32_t seq[] = {1, S_BHELLO, S_BWOR, S_L, S_D, 2};
  CHECK(tok_decode(t, seq, 6, false, buf, sizeof buf) == 11 && !strcmp(buf, "hello world"));
  CHECK(tok_decode(t, seq, 6, true, buf, sizeof buf) == 19 && !strcmp(buf, "<s> hello world</s>"));
  CHECK(tok_decode(t, seq, 6, false, buf, 4) == 11 && !strcmp(buf, "hel"));
  CHECK(tok_piece(t, S_BHELLO, false, buf, sizeof buf) == 6 && !strcmp(buf, " hello"));
  CHECK(tok_piece(t, 3 + 0x41, false, buf, sizeof buf) == 1 && buf[0] == 'A');
  CHECK(tok_piece(t, 1, false, buf, sizeof buf) == 0 && tok_piece(t, 1, true, buf, sizeof buf) == 3);
  CHECK(tok_piece(t, S_N, false, buf, sizeof buf) < 0 && tok_piece(t, -1, false, buf, sizeof buf) < 0);
  // A byte run that is not valid UTF-8: every byte becomes U+FFFD.
  int32_t bad[] = {3 + 0xC3, 3 + 0xA9, 3 + 0xFF, S_H};
  CHECK(tok_decode(t, bad, 4, false, buf, sizeof buf) == 10 && !strcmp(buf, FFFD FFFD FFFD "h"));

  // Streaming: a character in three byte tokens comes out whole at the end.
  CHECK(stream_eq(t, (int32_t[]){S_BHELLO, 3 + 0xE2, 3 + 0x82, 3 + 0xAC, S_BW},
                  5, (const char *[]){"hello", "", "", "\xE2\x82\xAC", " w"}, ""));
  // A 4-byte emoji over four byte tokens, after the BOS (skipped).
  CHECK(stream_eq(t, (int32_t[]){1, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80},
                  5, (const char *[]){"", "", "", "", "\xF0\x9F\x98\x80"}, ""));
  // An unfinished character cut by a normal token, an invalid byte, and a flush.
  CHECK(stream_eq(t, (int32_t[]){3 + 0xE2, S_H}, 2, (const char *[]){"", FFFD "h"}, ""));
  CHECK(stream_eq(t, (int32_t[]){3 + 0xFF, S_O}, 2, (const char *[]){FFFD, "o"}, ""));
  CHECK(stream_eq(t, (int32_t[]){S_H, 3 + 0xE2, 3 + 0x82}, 3, (const char *[]){"h", "", ""}, FFFD FFFD));
  // The leading-space rule applies once, to the first text.
  CHECK(stream_eq(t, (int32_t[]){S_BAR, S_BAR, S_H}, 3, (const char *[]){"", " ", "h"}, ""));
  // A too-small buffer is refused without losing state.
  tok_stream s;
  tok_stream_init(&s, t, false);
  char small[2];
  CHECK(tok_stream_push(&s, S_BHELLO, small, 2) < 0);
  CHECK(tok_stream_min_cap(t) > 6 && tok_stream_push(&s, S_BHELLO, buf, sizeof buf) == 5);
  tok_free(t);
}

static void test_gpt2(void) {
  wk_tokenizer *t = make_gpt2();
  CHECK(t != NULL);
  if (!t) return;
  CHECK(!strcmp(tok_kind(t), "gpt2") && tok_bos(t) == -1 && tok_n_vocab(t) == G_N);
  CHECK(tok_is_eog(t, G_IM_END) && tok_find_special(t, "<|im_end|>") == G_IM_END);
  // "hello" merges ll, he, hell, hello; " world" keeps its space in "Ġw".
  CHECK(encode_eq(t, "hello world", true, true, (int32_t[]){G_HELLO, G_GW, 'o', 'r', 'l', 'd'}, 6));
  CHECK(encode_eq(t, "caf\xC3\xA9!", true, true, (int32_t[]){'c', 'a', 'f', G_EACUTE, '!'}, 5));
  CHECK(encode_eq(t, "hello<|im_end|>", true, true, (int32_t[]){G_HELLO, G_IM_END}, 2));
  CHECK(encode_eq(t, "<|im_end|>", true, false,
                  (int32_t[]){'<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>'}, 10));
  // Split regex: contractions, digits, space runs.
  CHECK(encode_eq(t, "it's 42", true, true, (int32_t[]){'i', 't', '\'', 's', 0x20, '4', '2'}, 7));
  CHECK(encode_eq(t, "\xC3", true, true, (int32_t[]){0xEF, 0xBF, 0xBD}, 3));  // U+FFFD

  char buf[128];
  int32_t seq[] = {G_HELLO, G_GW, 'o', G_IM_END};
  CHECK(tok_decode(t, seq, 4, false, buf, sizeof buf) == 8 && !strcmp(buf, "hello wo"));
  CHECK(tok_decode(t, seq, 4, true, buf, sizeof buf) == 18 && !strcmp(buf, "hello wo<|im_end|>"));
  // Bytes joined across tokens; invalid ones become one U+FFFD per maximal subpart.
  int32_t split[] = {0xE2, 0x82, 0xAC, 0xC3, 'a', 0xE2, 0x82};
  CHECK(tok_decode(t, split, 7, false, buf, sizeof buf) == 10 && !strcmp(buf, "\xE2\x82\xAC" FFFD "a" FFFD));

  CHECK(stream_eq(t, (int32_t[]){G_HELLO, 0xC3, 0xA9, G_EACUTE}, 4,
                  (const char *[]){"hello", "", "\xC3\xA9", "\xC3\xA9"}, ""));
  CHECK(stream_eq(t, (int32_t[]){0xF0, 0x9F, 0x98, 0x80, ' '}, 5, (const char *[]){"", "", "", "\xF0\x9F\x98\x80", " "}, ""));
  CHECK(stream_eq(t, (int32_t[]){0xC3, 'a'}, 2, (const char *[]){"", FFFD "a"}, ""));
  CHECK(stream_eq(t, (int32_t[]){'x', 0xE2, 0x82}, 3, (const char *[]){"x", "", ""}, FFFD));
  // Leading spaces stay for byte-level BPE.
  CHECK(stream_eq(t, (int32_t[]){G_GW}, 1, (const char *[]){" w"}, ""));
  tok_free(t);
}

static void test_bad_files(void) {
  gguf_writer *w = gguf_writer_create();
  gguf_writer_add_str(w, "general.architecture", "llama");
  gguf_writer_add_str(w, "tokenizer.ggml.model", "bert");
  CHECK(load_written(w, "test_tokenizer_bad.gguf") == NULL);
  w = gguf_writer_create();
  gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
  const char *tok[] = {"a", "b"};
  gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tok, 2);  // no merges
  CHECK(load_written(w, "test_tokenizer_bad2.gguf") == NULL);
}

// Real models: streaming output equals whole decoding, and the text comes back.
static void test_model(const char *path) {
  if (access(path, R_OK)) {
    fprintf(stderr, "note: %s not found, real-model stream check not run\n", path);
    return;
  }
  wk_error err = {{0}};
  gguf_file *f = NULL;
  wk_tokenizer *t = NULL;
  CHECK(gguf_open(&f, path, &err) == 0 && tok_load(&t, f, &err) == 0);
  gguf_close(f);
  if (!t) return;
  // Turn and document ends of both default models end generation.
  static const char *eog[] = {"<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<eos>"};
  int n_eog = 0;
  for (int i = 0; i < 4; i++) {
    int32_t id = tok_find_special(t, eog[i]);
    if (id < 0) continue;
    CHECK(tok_is_eog(t, id));
    n_eog++;
  }
  CHECK(n_eog == 2 && tok_is_eog(t, tok_eos(t)) && !tok_is_eog(t, tok_bos(t) >= 0 ? tok_bos(t) : 1));
  static const char *texts[] = {
      "Hello, world! 你好，世界 😀👍🏽 🇯🇵 \xD5\x80 caf\xC3\xA9\n\tcode() { return 0; }",
      "  leading spaces and trailing  ", "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5 \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    int32_t ids[512];
    int64_t n = tok_encode(t, texts[i], strlen(texts[i]), false, true, ids, 512);
    CHECK(n > 0 && n <= 512);
    if (n <= 0 || n > 512) continue;
    tok_stream s;
    tok_stream_init(&s, t, false);
    int cap = tok_stream_min_cap(t);
    char *out = malloc((size_t)cap), all[2048] = "", full[2048];
    for (int64_t j = 0; j <= n; j++) {
      int k = j < n ? tok_stream_push(&s, ids[j], out, cap) : tok_stream_flush(&s, out, cap);
      CHECK(k >= 0);
      if (k > 0) strncat(all, out, (size_t)k);
    }
    free(out);
    CHECK(tok_decode(t, ids, n, false, full, sizeof full) == (int64_t)strlen(texts[i]));
    CHECK(!strcmp(full, texts[i]) && !strcmp(all, full));
  }
  tok_free(t);
}

int main(void) {
  wk_set_alloc(count_alloc, NULL);
  test_spm();
  test_gpt2();
  test_bad_files();
  test_model("models/smollm2-135m-instruct-q4_1.gguf");
  test_model("models/gemma3-270m-q4_k_m.gguf");
  CHECK(g_live == 0);  // everything allocated was freed
  wk_set_alloc(NULL, NULL);
  if (g_failures) {
    fprintf(stderr, "test_tokenizer: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("test_tokenizer: all checks passed\n");
  return 0;
}
