// `wick mkmodel`: writes a GGUF of a real model's shapes with random weights
// (for speed and parity tests of the backends). Weights are ~N(0, 0.02) (norm
// weights ~N(1, 0.05), biases ~N(0, 0.1)) from a counter-based generator, so
// the file depends only on the seed whatever the thread count; each matrix is
// quantized row by row with the project's reference quantizer on all cores.
//
// Q4_K_M is this mix (as llama.cpp's): output Q6_K; attn_v and ffn_down Q6_K
// in the first and last eighth of the layers and every third layer between
// (i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2); everything else Q4_K.
// A matrix whose rows are not a multiple of the type's block falls back:
// Q4_K/Q4_K_M parts -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, FP8 -> Q8_0.
// The tokenizer section is a byte-level vocabulary of the shape's size (256
// byte tokens then "<tN>"), no merges: tests feed token ids directly.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/pool.h"
#include "base/timer.h"
#include "commands.h"
#include "format/gguf.h"
#include "quant/quant.h"
#include "quant/types.h"

typedef struct shape {
  const char *name;
  int layers, dim, heads, kv_heads, head_dim, ffn, vocab, ctx;
  float rope_base, eps;
} shape;

static const shape k_shapes[] = {
    {"llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256, 8192, 500000.0f, 1e-5f},
    {"smollm2", 30, 576, 9, 3, 64, 1536, 49152, 8192, 100000.0f, 1e-5f},
    {"qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, 1e-6f},
    {"gemma3-270m", 18, 640, 4, 1, 256, 2048, 262144, 32768, 1000000.0f, 1e-6f},
    {"tiny", 2, 256, 4, 2, 64, 512, 1024, 2048, 10000.0f, 1e-5f},
};

typedef struct spec {
  char name[64];
  int64_t ne0, ne1;  // row length, rows (ne1 = 1 for vectors)
  int type;
  float mean, std;
  void *data;
} spec;

typedef struct job {
  spec *s;
  uint64_t seed;
  int failed;
} job;

static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Row r of the tensor: near-normal values (the sum of four uniform 16-bit
// draws, scaled to unit variance) from a counter-based generator keyed by
// (seed, row): cheap enough for billions of weights.
static void fill_row(float *x, int64_t n, uint64_t key, float mean, float std) {
  const float k = std * 1.7320508f / 65536.0f;  // sqrt(3): the sum's variance is 4/12
  for (int64_t i = 0; i < n; i++) {
    uint64_t z = mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
    uint32_t s = (uint32_t)(z & 0xffff) + (uint32_t)((z >> 16) & 0xffff) +
                 (uint32_t)((z >> 32) & 0xffff) + (uint32_t)(z >> 48);
    x[i] = mean + k * ((float)s - 131070.0f);
  }
}

static void gen_fn(void *ctx, int ith, int nth) {
  job *j = ctx;
  spec *s = j->s;
  long lo, hi;
  wk_split((long)s->ne1, ith, nth, 1, &lo, &hi);
  if (lo >= hi) return;
  float *row = wk_malloc((size_t)s->ne0 * sizeof(float));
  if (!row) {
    j->failed = 1;
    return;
  }
  size_t rb = wk_row_size(s->type, s->ne0);
  for (long r = lo; r < hi; r++) {
    fill_row(row, s->ne0, j->seed ^ mix64((uint64_t)r * 0x100000001b3ull), s->mean, s->std);
    if (wk_quantize_row(s->type, row, (uint8_t *)s->data + rb * r, s->ne0) != WICK_OK) j->failed = 1;
  }
  wk_free(row);
}

static int fallback_type(int type, int64_t ne0) {
  const wk_type_info *ti = wk_type_get(type);
  if (ti && ne0 % ti->block == 0) return type;
  switch (type) {
    case WK_Q4_K: return WK_Q5_0;
    case WK_Q5_K: return WK_Q5_1;
    case WK_Q6_K: return WK_Q8_0;
    case WK_Q2_K: case WK_Q3_K: return WK_Q4_0;
    default: return WK_Q8_0;
  }
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef struct plan {
  spec *v;
  int n, cap;
} plan;

static int add(plan *p, const char *name, int64_t ne0, int64_t ne1, int type, float mean, float std) {
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    spec *nv = wk_realloc(p->v, (size_t)cap * sizeof(spec));
    if (!nv) return -1;
    p->v = nv, p->cap = cap;
  }
  spec *s = &p->v[p->n++];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->ne0 = ne0, s->ne1 = ne1, s->type = ne1 > 1 ? fallback_type(type, ne0) : WK_F32;
  s->mean = mean, s->std = std;
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: wick mkmodel --arch llama|qwen2|qwen3|gemma3 --like SHAPE --type TYPE -o FILE\n"
          "                    [--layers N] [--vocab N] [--seed S] [--threads N]\n"
          "  SHAPE: llama3-8b, smollm2, qwen3-0.6b, gemma3-270m, tiny\n"
          "  TYPE:  any computable type name (q4_k, q8_0, f16, bf16, fp8_e4m3, ...) or q4_k_m\n");
}

int cmd_mkmodel(int argc, char **argv) {
  const char *arch = "llama", *like = "tiny", *type_name = "q8_0", *out = NULL;
  int layers = 0, vocab_override = 0, threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "wick mkmodel: option %s needs a value\n", a);
      return 2;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--arch")) arch = v;
    else if (!strcmp(a, "--like")) like = v;
    else if (!strcmp(a, "--type")) type_name = v;
    else if (!strcmp(a, "-o")) out = v;
    else if (!strcmp(a, "--layers")) layers = atoi(v);
    else if (!strcmp(a, "--vocab")) vocab_override = atoi(v);
    else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--threads")) threads = atoi(v);
    else {
      fprintf(stderr, "wick mkmodel: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!out) {
    usage(stderr);
    return 2;
  }
  const shape *sh = NULL;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
    if (!strcmp(like, k_shapes[i].name)) sh = &k_shapes[i];
  if (!sh) {
    fprintf(stderr, "wick mkmodel: unknown shape '%s' (expected llama3-8b, smollm2, qwen3-0.6b, gemma3-270m, tiny)\n", like);
    return 2;
  }
  int is_qwen2 = !strcmp(arch, "qwen2"), is_qwen3 = !strcmp(arch, "qwen3");
  int is_gemma = !strcmp(arch, "gemma3");
  if (!is_qwen2 && !is_qwen3 && !is_gemma && strcmp(arch, "llama")) {
    fprintf(stderr, "wick mkmodel: unknown arch '%s' (expected llama, qwen2, qwen3, gemma3)\n", arch);
    return 2;
  }
  int mix = !strcmp(type_name, "q4_k_m") || !strcmp(type_name, "Q4_K_M");
  int type = mix ? WK_Q4_K : wk_type_from_name(type_name);
  const wk_type_info *ti = wk_type_get(type);
  if (type < 0 || !ti || !ti->computable) {
    fprintf(stderr, "wick mkmodel: unknown or unsupported type '%s'\n", type_name);
    return 2;
  }
  int nl = layers > 0 ? layers : sh->layers;
  int vocab = vocab_override > 0 ? vocab_override : sh->vocab;
  int64_t dim = sh->dim, qd = (int64_t)sh->heads * sh->head_dim, kvd = (int64_t)sh->kv_heads * sh->head_dim;
  int tied = is_qwen3 || is_gemma;

  plan p = {0};
  int bad = 0;
  const float ws = 0.02f;
  bad |= add(&p, "token_embd.weight", dim, vocab, type, 0.0f, ws);
  bad |= add(&p, "output_norm.weight", dim, 1, WK_F32, 1.0f, 0.05f);
  if (!tied) bad |= add(&p, "output.weight", dim, vocab, mix ? WK_Q6_K : type, 0.0f, ws);
  for (int l = 0; l < nl && !bad; l++) {
    char nm[64];
    int more = mix && use_more_bits(l, nl);
#define T(suffix, ne0, ne1, ty, mean, sd) \
  (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), add(&p, nm, ne0, ne1, ty, mean, sd))
    bad |= T("attn_norm.weight", dim, 1, WK_F32, 1.0f, 0.05f);
    bad |= T("attn_q.weight", dim, qd, type, 0.0f, ws);
    bad |= T("attn_k.weight", dim, kvd, type, 0.0f, ws);
    bad |= T("attn_v.weight", dim, kvd, more ? WK_Q6_K : type, 0.0f, ws);
    bad |= T("attn_output.weight", qd, dim, type, 0.0f, ws);
    if (is_qwen2) {
      bad |= T("attn_q.bias", qd, 1, WK_F32, 0.0f, 0.1f);
      bad |= T("attn_k.bias", kvd, 1, WK_F32, 0.0f, 0.1f);
      bad |= T("attn_v.bias", kvd, 1, WK_F32, 0.0f, 0.1f);
    }
    if (is_qwen3 || is_gemma) {
      bad |= T("attn_q_norm.weight", sh->head_dim, 1, WK_F32, 1.0f, 0.05f);
      bad |= T("attn_k_norm.weight", sh->head_dim, 1, WK_F32, 1.0f, 0.05f);
    }
    if (is_gemma) {
      bad |= T("post_attention_norm.weight", dim, 1, WK_F32, 1.0f, 0.05f);
      bad |= T("post_ffw_norm.weight", dim, 1, WK_F32, 1.0f, 0.05f);
    }
    bad |= T("ffn_norm.weight", dim, 1, WK_F32, 1.0f, 0.05f);
    bad |= T("ffn_gate.weight", dim, sh->ffn, type, 0.0f, ws);
    bad |= T("ffn_up.weight", dim, sh->ffn, type, 0.0f, ws);
    bad |= T("ffn_down.weight", (int64_t)sh->ffn, dim, more ? WK_Q6_K : type, 0.0f, ws);
#undef T
  }
  if (bad) {
    fprintf(stderr, "wick mkmodel: out of memory\n");
    wk_free(p.v);
    return 1;
  }

  double t0 = wk_now();
  wk_pool *pool = wk_pool_create(threads > 0 ? threads : 1);
  int rc = 0;
  for (int i = 0; i < p.n && !rc; i++) {
    spec *s = &p.v[i];
    size_t bytes = wk_row_size(s->type, s->ne0) * (size_t)s->ne1;
    s->data = wk_malloc(bytes);
    if (!s->data) {
      fprintf(stderr, "wick mkmodel: out of memory for %s (%zu bytes)\n", s->name, bytes);
      rc = 1;
      break;
    }
    job j = {s, mix64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i), 0};
    wk_pool_run(pool, gen_fn, &j);
    if (j.failed) {
      fprintf(stderr, "wick mkmodel: quantizing %s to %s failed\n", s->name, wk_type_get(s->type)->name);
      rc = 1;
    }
  }
  wk_pool_destroy(pool);

  gguf_writer *w = rc ? NULL : gguf_writer_create();
  if (!rc && !w) rc = 1;
  if (!rc) {
    char key[96];
#define KEY(k) (snprintf(key, sizeof key, "%s.%s", arch, k), key)
    int e = 0;
    e |= gguf_writer_add_str(w, "general.architecture", arch);
    char name[96];
    snprintf(name, sizeof name, "random %s %s %s", arch, like, type_name);
    e |= gguf_writer_add_str(w, "general.name", name);
    e |= gguf_writer_add_u32(w, "general.quantization_version", 2);
    e |= gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)nl);
    e |= gguf_writer_add_u32(w, KEY("context_length"), (uint32_t)sh->ctx);
    e |= gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)dim);
    e |= gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)sh->ffn);
    e |= gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)sh->heads);
    e |= gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->kv_heads);
    e |= gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)sh->head_dim);
    e |= gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)sh->head_dim);
    e |= gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps);
    e |= gguf_writer_add_f32(w, KEY("rope.freq_base"), sh->rope_base);
    e |= gguf_writer_add_u32(w, KEY("rope.dimension_count"), (uint32_t)sh->head_dim);
    e |= gguf_writer_add_u32(w, KEY("vocab_size"), (uint32_t)vocab);
    if (is_gemma) e |= gguf_writer_add_u32(w, KEY("attention.sliding_window"), 512);
#undef KEY
    // Byte-level vocabulary: GPT-2's byte-to-character map, then fillers.
    char **toks = wk_calloc((size_t)vocab, sizeof(char *));
    int32_t *ttype = wk_calloc((size_t)vocab, sizeof(int32_t));
    if (!toks || !ttype) e = 1;
    for (int i = 0; i < vocab && !e; i++) {
      char buf[16];
      if (i < 256) {
        int c = i;
        if (!((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))) {
          int k = 0;  // rank among the unprintable bytes
          for (int b = 0; b < c; b++)
            if (!((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) k++;
          c = 256 + k;
        }
        if (c < 0x80) buf[0] = (char)c, buf[1] = 0;
        else buf[0] = (char)(0xc0 | (c >> 6)), buf[1] = (char)(0x80 | (c & 0x3f)), buf[2] = 0;
      } else {
        snprintf(buf, sizeof buf, "<t%d>", i);
      }
      toks[i] = wk_strndup(buf, strlen(buf));
      ttype[i] = 1;
      if (!toks[i]) e = 1;
    }
    if (!e) {
      e |= gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
      e |= gguf_writer_add_str(w, "tokenizer.ggml.pre", "default");
      e |= gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)vocab);
      e |= gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_INT32, ttype, (uint64_t)vocab);
      e |= gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
      e |= gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
      e |= gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    }
    for (int i = 0; i < p.n && !e; i++) {
      spec *s = &p.v[i];
      int64_t ne[2] = {s->ne0, s->ne1};
      e |= gguf_writer_add_tensor(w, s->name, s->type, s->ne1 > 1 ? 2 : 1, ne, s->data);
    }
    wk_error err = {{0}};
    if (!e && gguf_writer_write(w, out, &err) != WICK_OK) {
      fprintf(stderr, "wick mkmodel: %s\n", err.msg);
      rc = 1;
    } else if (e) {
      fprintf(stderr, "wick mkmodel: could not build the file's metadata\n");
      rc = 1;
    }
    if (toks)
      for (int i = 0; i < vocab; i++) wk_free(toks[i]);
    wk_free(toks);
    wk_free(ttype);
  }
  gguf_writer_free(w);
  if (!rc) {
    uint64_t total = 0;
    for (int i = 0; i < p.n; i++) total += wk_row_size(p.v[i].type, p.v[i].ne0) * (uint64_t)p.v[i].ne1;
    printf("wrote %s: %s, %d layers, %d tensors, %.1f MB of weights, %.1f s\n", out, like, nl,
           p.n, total / 1e6, wk_now() - t0);
  }
  for (int i = 0; i < p.n; i++) wk_free(p.v[i].data);
  wk_free(p.v);
  return rc;
}
