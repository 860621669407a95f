// Helpers shared by the GGUF unit tests: checks, a seeded PRNG, a counting
// allocator hook, a byte builder for hand-made files, and two file builders.
#ifndef WICK_TEST_GGUF_UTIL_H
#define WICK_TEST_GGUF_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "format/gguf.h"
#include "quant/types.h"
#include "test_util.h"

static inline void rng_fill(uint64_t *s, void *p, size_t n) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(rng_next(s) >> 24);
}

// ---- allocation hook: every block carries its size in a 16-byte header ----

typedef struct alloc_stats {
  size_t live;        // bytes allocated and not freed
  size_t max_single;  // largest single request
  size_t limit;       // requests above this fail (and are counted)
  size_t over_limit;  // how many did
} alloc_stats;

static inline void *stats_alloc(void *ud, void *ptr, size_t size) {
  alloc_stats *st = ud;
  size_t old = 0;
  unsigned char *base = ptr ? (unsigned char *)ptr - 16 : NULL;
  if (base) memcpy(&old, base, sizeof old);
  if (size == 0) {
    st->live -= old;
    free(base);
    return NULL;
  }
  if (size > st->max_single) st->max_single = size;
  if (size > st->limit) {
    st->over_limit++;
    return NULL;
  }
  unsigned char *nb = realloc(base, size + 16);
  if (!nb) return NULL;
  memcpy(nb, &size, sizeof size);
  st->live = st->live - old + size;
  return nb + 16;
}

// ---- byte builder ----

typedef struct bb {
  uint8_t *p;
  size_t n, cap;
} bb;

static inline void bb_put(bb *b, const void *v, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, v, n);
  b->n += n;
}
static inline void bb_u32(bb *b, uint32_t v) { bb_put(b, &v, 4); }
static inline void bb_u64(bb *b, uint64_t v) { bb_put(b, &v, 8); }
static inline void bb_str(bb *b, const char *s) {
  bb_u64(b, strlen(s));
  bb_put(b, s, strlen(s));
}
static inline void bb_pad(bb *b, size_t a) {
  while (b->n % a) bb_put(b, "", 1);
}

// An encoded i32 array (after the outer type tag): type, length, values.
static inline void bb_arr_i32(bb *b, const int32_t *v, uint64_t n) {
  bb_u32(b, GGUF_INT32);
  bb_u64(b, n);
  bb_put(b, v, n * 4);
}

static inline uint8_t *read_whole(const char *path, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
  if (p && fread(p, 1, (size_t)n, fp) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(fp);
  *size = (size_t)n;
  return p;
}

// Adds a tensor with seeded random bytes; the data buffer is kept in *keep.
static inline int add_random_tensor(gguf_writer *w, const char *name, int type, uint32_t n_dims,
                             const int64_t *ne, uint64_t *seed, void **keep) {
  int64_t rows = 1;
  for (uint32_t d = 1; d < n_dims; d++) rows *= ne[d];
  size_t nb = wk_row_size(type, ne[0]) * (size_t)rows;
  *keep = malloc(nb ? nb : 1);
  rng_fill(seed, *keep, nb);
  return gguf_writer_add_tensor(w, name, type, n_dims, ne, *keep);
}

// A small file shaped like a real model (llama keys, a vocab, merges, a few
// layers of quantized weights); about 120 KB. The last tensor's size is a
// multiple of the alignment, so only the full length is a valid file.
static inline int build_model_like(const char *path, wk_error *err) {
  enum { VOCAB = 800, MERGES = 300, DIM = 64, FF = 256, LAYERS = 2, MAXT = 32 };
  gguf_writer *w = gguf_writer_create();
  uint64_t seed = 1234;
  void *keep[MAXT] = {0};
  int nt = 0, st = 0;
  st |= gguf_writer_add_str(w, "general.architecture", "llama");
  st |= gguf_writer_add_str(w, "general.name", "synthetic");
  st |= gguf_writer_add_u32(w, "llama.context_length", 2048);
  st |= gguf_writer_add_u32(w, "llama.embedding_length", DIM);
  st |= gguf_writer_add_u32(w, "llama.block_count", LAYERS);
  st |= gguf_writer_add_u32(w, "llama.feed_forward_length", FF);
  st |= gguf_writer_add_u32(w, "llama.attention.head_count", 4);
  st |= gguf_writer_add_u32(w, "llama.attention.head_count_kv", 2);
  st |= gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f);
  st |= gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
  st |= gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
  char **toks = malloc(VOCAB * sizeof *toks);
  int32_t *ttype = malloc(VOCAB * sizeof *ttype);
  float *scores = malloc(VOCAB * sizeof *scores);
  for (int i = 0; i < VOCAB; i++) {
    int len = 1 + (int)(rng_next(&seed) % 8);
    toks[i] = malloc((size_t)len + 1);
    for (int j = 0; j < len; j++) toks[i][j] = (char)('a' + rng_next(&seed) % 26);
    toks[i][len - 1] = (char)('0' + i % 10);
    toks[i][len] = 0;
    ttype[i] = i < 3 ? 3 : 1;
    scores[i] = -(float)i * 0.5f;
  }
  st |= gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, VOCAB);
  st |= gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, ttype, VOCAB);
  st |= gguf_writer_add_arr(w, "tokenizer.ggml.scores", GGUF_FLOAT32, scores, VOCAB);
  st |= gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)toks, MERGES);
  st |= gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
  st |= gguf_writer_add_str(w, "tokenizer.chat_template",
                            "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}");
  for (int i = 0; i < VOCAB; i++) free(toks[i]);
  free(toks);
  free(ttype);
  free(scores);
  int64_t emb[2] = {DIM, VOCAB / 4};
  st |= add_random_tensor(w, "token_embd.weight", WK_Q8_0, 2, emb, &seed, &keep[nt++]);
  for (int l = 0; l < LAYERS; l++) {
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    char name[64];
    int64_t norm[1] = {DIM}, sq[2] = {FF, DIM / 2}, up[2] = {FF, 8}, down[2] = {FF / 4, 16};
    snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
    st |= add_random_tensor(w, name, WK_F32, 1, norm, &seed, &keep[nt++]);
    for (int k = 0; k < 4; k++) {
      snprintf(name, sizeof name, "blk.%d.%s.weight", l, names[k]);
      st |= add_random_tensor(w, name, k == 1 ? WK_Q4_K : WK_Q4_1, 2, sq, &seed, &keep[nt++]);
    }
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
    st |= add_random_tensor(w, name, WK_Q6_K, 2, up, &seed, &keep[nt++]);
    snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
    st |= add_random_tensor(w, name, WK_F16, 2, down, &seed, &keep[nt++]);
  }
  int64_t onorm[1] = {DIM};
  st |= add_random_tensor(w, "output_norm.weight", WK_F32, 1, onorm, &seed, &keep[nt++]);
  if (st) {
    fprintf(stderr, "build_model_like: writer rejected an entry\n");
  } else {
    st = gguf_writer_write(w, path, err);
  }
  gguf_writer_free(w);
  for (int i = 0; i < nt; i++) free(keep[i]);
  return st;
}

#endif
