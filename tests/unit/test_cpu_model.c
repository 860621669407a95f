// Tiny random models written with the GGUF writer, run through model_load and
// the CPU backend, on the exact path and on the fast (kernel) path: a whole
// prompt equals the same prompt in chunks of 1 and 3 tokens (KV cache path),
// two sequences in one batch equal each alone, copied KV blocks continue
// identically, the fast path stays close to the exact one (8-bit activations
// for quantized weights, f32 for float weights), and model_load names what is
// wrong.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "format/gguf.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/types.h"

#include "test_util.h"

enum { D = 64, H = 4, KVH = 2, HD = 16, F = 96, V = 100, BS = 4, NB = 16 };

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) * (1.0 / (1 << 23)) - 1.0);
}

typedef struct tiny_spec {
  const char *arch;
  int wtype;          // type of the matrices
  int n_layers;
  bool tied;          // no output.weight
  bool bias, qk_norm, post_norms;
  int window;         // gemma3 sliding window
  int threads;        // CPU threads (default 1)
  const char *drop;   // tensor left out (error tests)
  const char *bad;    // tensor written with a wrong shape (error tests)
} tiny_spec;

typedef struct builder {
  gguf_writer *w;
  const tiny_spec *s;
  void *bufs[512];
  int n;
} builder;

static void add(builder *b, const char *name, int type, int64_t ne0, int64_t ne1, float scale,
                float offset) {
  if (b->s->drop && !strcmp(name, b->s->drop)) return;
  if (b->s->bad && !strcmp(name, b->s->bad)) ne1 = ne1 ? ne1 / 2 : 0, ne0 = ne1 ? ne0 : ne0 / 2;
  int64_t rows = ne1 ? ne1 : 1;
  float *f = wk_malloc((size_t)(ne0 * rows) * sizeof *f);
  size_t row = wk_row_size(type, ne0);
  void *q = wk_malloc(row * (size_t)rows);
  WK_ASSERT(f && q && b->n < 512);
  for (int64_t i = 0; i < ne0 * rows; i++) f[i] = offset + scale * frand();
  for (int64_t r = 0; r < rows; r++)
    WK_ASSERT(wk_quantize_row(type, f + r * ne0, (char *)q + row * r, ne0) == WICK_OK);
  wk_free(f);
  b->bufs[b->n++] = q;
  int64_t ne[2] = {ne0, rows};
  WK_ASSERT(gguf_writer_add_tensor(b->w, name, type, ne1 ? 2 : 1, ne, q) == WICK_OK);
}

static void kv_u32(builder *b, const char *key, uint32_t v) {
  char k[96];
  snprintf(k, sizeof k, "%s.%s", b->s->arch, key);
  WK_ASSERT(gguf_writer_add_u32(b->w, k, v) == WICK_OK);
}

static void kv_f32(builder *b, const char *key, float v) {
  char k[96];
  snprintf(k, sizeof k, "%s.%s", b->s->arch, key);
  WK_ASSERT(gguf_writer_add_f32(b->w, k, v) == WICK_OK);
}

// Writes the model to a temporary file; returns its path (caller unlinks).
static char *write_tiny(const tiny_spec *s) {
  builder b = {gguf_writer_create(), s, {0}, 0};
  WK_ASSERT(b.w);
  WK_ASSERT(gguf_writer_add_str(b.w, "general.architecture", s->arch) == WICK_OK);
  kv_u32(&b, "block_count", (uint32_t)s->n_layers);
  kv_u32(&b, "embedding_length", D);
  kv_u32(&b, "feed_forward_length", F);
  kv_u32(&b, "attention.head_count", H);
  kv_u32(&b, "attention.head_count_kv", KVH);
  kv_u32(&b, "attention.key_length", HD);
  kv_u32(&b, "context_length", 256);
  kv_f32(&b, "attention.layer_norm_rms_epsilon", 1e-6f);
  kv_f32(&b, "rope.freq_base", 1000.0f);
  if (s->window) kv_u32(&b, "attention.sliding_window", (uint32_t)s->window);
  const float ws = 1.0f / sqrtf(D);
  add(&b, "token_embd.weight", s->wtype, D, V, 1.0f, 0);
  add(&b, "output_norm.weight", WK_F32, D, 0, 0.2f, 1.0f);
  if (!s->tied) add(&b, "output.weight", s->wtype, D, V, ws, 0);
  for (int il = 0; il < s->n_layers; il++) {
    char n[64];
#define NAME(x) (snprintf(n, sizeof n, "blk.%d." x, il), n)
    add(&b, NAME("attn_norm.weight"), WK_F32, D, 0, 0.2f, 1.0f);
    add(&b, NAME("attn_q.weight"), s->wtype, D, H * HD, ws, 0);
    add(&b, NAME("attn_k.weight"), s->wtype, D, KVH * HD, ws, 0);
    add(&b, NAME("attn_v.weight"), s->wtype, D, KVH * HD, ws, 0);
    add(&b, NAME("attn_output.weight"), s->wtype, H * HD, D, ws, 0);
    if (s->bias) {
      add(&b, NAME("attn_q.bias"), WK_F32, H * HD, 0, 0.3f, 0);
      add(&b, NAME("attn_k.bias"), WK_F32, KVH * HD, 0, 0.3f, 0);
      add(&b, NAME("attn_v.bias"), WK_F32, KVH * HD, 0, 0.3f, 0);
    }
    if (s->qk_norm) {
      add(&b, NAME("attn_q_norm.weight"), WK_F32, HD, 0, 0.2f, 1.0f);
      add(&b, NAME("attn_k_norm.weight"), WK_F32, HD, 0, 0.2f, 1.0f);
    }
    add(&b, NAME("ffn_norm.weight"), WK_F32, D, 0, 0.2f, 1.0f);
    add(&b, NAME("ffn_gate.weight"), s->wtype, D, F, ws, 0);
    add(&b, NAME("ffn_up.weight"), s->wtype, D, F, ws, 0);
    add(&b, NAME("ffn_down.weight"), s->wtype, F, D, 1.0f / sqrtf(F), 0);
    if (s->post_norms) {
      add(&b, NAME("post_attention_norm.weight"), WK_F32, D, 0, 0.2f, 1.0f);
      add(&b, NAME("post_ffw_norm.weight"), WK_F32, D, 0, 0.2f, 1.0f);
    }
#undef NAME
  }
  char *path = wk_strndup("/tmp/wick_tiny_XXXXXX", 64);
  int fd = mkstemp(path);
  WK_ASSERT(fd >= 0);
  close(fd);
  wk_error err = {{0}};
  int rc = gguf_writer_write(b.w, path, &err);
  CHECKF(rc == WICK_OK, "write %s: %s", path, err.msg);
  gguf_writer_free(b.w);
  for (int i = 0; i < b.n; i++) wk_free(b.bufs[i]);
  return path;
}

typedef struct runner {
  gguf_file *f;
  wk_model m;
  wk_backend *be;
} runner;

static int runner_open(runner *r, const char *path, int threads, int max_tokens, int exact,
                       wk_error *err) {
  memset(r, 0, sizeof *r);
  int rc = gguf_open(&r->f, path, err);
  if (rc || (rc = model_load(&r->m, r->f, err))) return rc;
  r->be = backend_cpu_create();
  WK_ASSERT(r->be);
  wk_backend_params p = {.max_batch_tokens = max_tokens, .max_seqs = 4,
                         .max_logits = max_tokens, .n_threads = threads, .exact = exact,
                         .kv = {.block_size = BS, .n_blocks = NB}};
  return r->be->prepare(r->be, &r->m, &p, err);
}

static void runner_close(runner *r) {
  if (r->be) r->be->destroy(r->be);
  model_free(&r->m);
  gguf_close(r->f);
}

// Feeds ids[0..n) of one sequence in chunks; logits of every token to out.
static void run_chunks(runner *r, const int32_t *ids, int n, int chunk, const int32_t *blocks,
                       float *out) {
  int32_t at[64];
  for (int i = 0; i < 64; i++) at[i] = i;
  for (int i = 0; i < n; i += chunk) {
    int k = n - i < chunk ? n - i : chunk;
    wk_seq s = {blocks, NB, i, k, 0};
    wk_batch b = {ids + i, k, &s, 1, at, k};
    wk_error err = {{0}};
    int rc = r->be->forward(r->be, &b, out + (size_t)i * V, &err);
    CHECKF(rc == WICK_OK, "forward: %s", err.msg);
  }
}

static double max_diff(const float *a, const float *b, size_t n, double *scale) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    if (!(e <= d)) d = e;  // NaN propagates
    if (fabs(b[i]) > s) s = fabs(b[i]);
  }
  *scale = s;
  return d;
}

static void expect_close(const char *what, const char *arch, const float *got, const float *want,
                         size_t n, double tol) {
  double scale, d = max_diff(got, want, n, &scale);
  CHECKF(d <= tol * (1 + scale), "%s %s: max diff %.3g (scale %.3g)", arch, what, d, scale);
}

static void test_model(const tiny_spec *s, const char *path, int exact) {
  enum { N = 13 };
  // The fast path multiplies batches of a few tokens with activations
  // rounded to 1/16383 of their block maximum and larger batches in f32
  // (matmul.h, CPU_F32_MIN_TOKENS_*), and an ulp of difference in a matrix
  // input (attention sums in another order in chunks) can move a rounded
  // activation a whole step: a prompt fed whole and in chunks differ by up to
  // ~1e-4 of the logit scale there (exact path and float weights: 1e-5).
  const bool is_float = s->wtype == WK_F32 || s->wtype == WK_F16 || s->wtype == WK_BF16;
  const double tol = exact || is_float ? 1e-5 : 2e-4;
  int32_t ids[N], blocks[NB];
  for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
  for (int i = 0; i < NB; i++) blocks[i] = (i * 5 + 3) % NB;  // scrambled table
  runner r;
  wk_error err = {{0}};
  int rc = runner_open(&r, path, s->threads ? s->threads : 1, 32, exact, &err);
  CHECKF(rc == WICK_OK, "%s: %s", s->arch, err.msg);
  if (rc) goto done;
  float full[N * V], part[N * V];
  for (int i = 0; i < N * V; i++) full[i] = NAN;
  run_chunks(&r, ids, N, N, blocks, full);
  double scale;
  max_diff(full, full, N * V, &scale);
  CHECKF(scale > 0.1 && isfinite(scale), "%s: logits scale %g", s->arch, scale);
  const int chunks[] = {1, 3};
  for (int c = 0; c < 2; c++) {
    for (int i = 0; i < N * V; i++) part[i] = NAN;
    run_chunks(&r, ids, N, chunks[c], blocks, part);
    char what[32];
    snprintf(what, sizeof what, "chunks of %d", chunks[c]);
    expect_close(what, s->arch, part, full, N * V, tol);
  }

  // Two sequences in one batch (each in two steps) vs each alone.
  enum { NA = 9, NBQ = 6 };
  const int32_t ta[NA] = {5, 17, 42, 99, 0, 63, 8, 21, 77}, tb[NBQ] = {31, 2, 64, 90, 11, 48};
  const int32_t ba[4] = {3, 0, 7, 12}, bb[4] = {1, 5, 9, 14};
  float alone_a[NA * V], alone_b[NBQ * V], both[(NA + NBQ) * V];
  run_chunks(&r, ta, NA, NA, blocks, alone_a);
  run_chunks(&r, tb, NBQ, NBQ, blocks, alone_b);
  const int split_a = 5, split_b = 4;
  int32_t toks[NA + NBQ], at[NA + NBQ];
  for (int i = 0; i < NA + NBQ; i++) at[i] = i;
  for (int step = 0; step < 2; step++) {
    int a0 = step ? split_a : 0, na = step ? NA - split_a : split_a;
    int b0 = step ? split_b : 0, nb = step ? NBQ - split_b : split_b;
    memcpy(toks, tb + b0, (size_t)nb * 4);  // B first, then A
    memcpy(toks + nb, ta + a0, (size_t)na * 4);
    wk_seq seqs[2] = {{bb, 4, b0, nb, 0}, {ba, 4, a0, na, nb}};
    wk_batch b = {toks, na + nb, seqs, 2, at, na + nb};
    float lg[(NA + NBQ) * V];
    rc = r.be->forward(r.be, &b, lg, &err);
    CHECKF(rc == WICK_OK, "%s two sequences: %s", s->arch, err.msg);
    memcpy(both + (size_t)b0 * V, lg, (size_t)nb * V * 4);
    memcpy(both + (size_t)(NBQ + a0) * V, lg + (size_t)nb * V, (size_t)na * V * 4);
  }
  expect_close("batched seq A", s->arch, both + NBQ * V, alone_a, NA * V, tol);
  expect_close("batched seq B", s->arch, both, alone_b, NBQ * V, tol);

  // Copy A's blocks (positions 0..8 in ba[0..3)) and continue from both tables.
  const int32_t src[3] = {3, 0, 7}, dst[3] = {2, 4, 6};
  rc = r.be->kv_copy_blocks(r.be, src, dst, 3, &err);
  CHECKF(rc == WICK_OK, "%s kv_copy_blocks: %s", s->arch, err.msg);
  const int32_t bc[4] = {2, 4, 6, 13}, next = 55;
  float l1[V], l2[V], ref[(NA + 1) * V];
  int32_t ext[NA + 1];
  memcpy(ext, ta, sizeof ta);
  ext[NA] = next;
  wk_seq s1 = {ba, 4, NA, 1, 0}, s2 = {bc, 4, NA, 1, 0};
  wk_batch b1 = {&next, 1, &s1, 1, at, 1}, b2 = {&next, 1, &s2, 1, at, 1};
  CHECKF(r.be->forward(r.be, &b2, l2, &err) == WICK_OK, "%s: %s", s->arch, err.msg);
  CHECKF(r.be->forward(r.be, &b1, l1, &err) == WICK_OK, "%s: %s", s->arch, err.msg);
  run_chunks(&r, ext, NA + 1, NA + 1, blocks, ref);
  expect_close("copied blocks", s->arch, l2, l1, V, tol);
  expect_close("continued sequence", s->arch, l1, ref + NA * V, V, tol);

  // Bad batches are refused with a message.
  wk_seq bad = {ba, 1, 3, 2, 0};  // needs 2 blocks, table has 1
  wk_batch bb1 = {ids, 2, &bad, 1, at, 2};
  CHECKF(r.be->forward(r.be, &bb1, l1, &err) == WICK_ERR_RANGE && strstr(err.msg, "blocks"),
        "short block table: %s", err.msg);
  int32_t badtok = V;
  wk_seq one = {ba, 4, 0, 1, 0};
  wk_batch bb2 = {&badtok, 1, &one, 1, at, 1};
  CHECKF(r.be->forward(r.be, &bb2, l1, &err) == WICK_ERR_INVALID, "token out of range");
done:
  runner_close(&r);
}

// The fast path against the exact one on the same prompt (24 tokens, over
// several KV blocks): float weights keep f32 activations and an f32 KV cache
// (close to 1e-5);
// quantized weights see 8-bit activations: cosine >= 0.999 per position and
// the top-1 id the same wherever the exact top-2 gap is over 2% of the range.
static void test_fast_vs_exact(const tiny_spec *s, const char *path) {
  enum { N = 24 };
  int32_t ids[N], blocks[NB];
  for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 53 + 7) % V);
  for (int i = 0; i < NB; i++) blocks[i] = i;
  static float lg[2][N * V];
  for (int exact = 0; exact < 2; exact++) {
    runner r;
    wk_error err = {{0}};
    int rc = runner_open(&r, path, s->threads ? s->threads : 1, 32, exact, &err);
    CHECKF(rc == WICK_OK, "%s: %s", s->arch, err.msg);
    if (!rc) run_chunks(&r, ids, N, 10, blocks, lg[exact]);
    runner_close(&r);
    if (rc) return;
  }
  const bool is_float = s->wtype == WK_F32 || s->wtype == WK_F16 || s->wtype == WK_BF16;
  if (is_float) {
    expect_close("fast vs exact", s->arch, lg[0], lg[1], N * V, 1e-5);
    return;
  }
  double worst = 1;
  for (int p = 0; p < N; p++) {
    const float *f = lg[0] + (size_t)p * V, *e = lg[1] + (size_t)p * V;
    double fe = 0, ff = 0, ee = 0, lo = e[0], hi = e[0];
    int tf = 0, te = 0, te2 = -1;
    for (int j = 0; j < V; j++) {
      fe += (double)f[j] * e[j], ff += (double)f[j] * f[j], ee += (double)e[j] * e[j];
      if (f[j] > f[tf]) tf = j;
      if (e[j] > e[te]) te2 = te, te = j;
      else if (te2 < 0 || e[j] > e[te2]) te2 = j;
      lo = e[j] < lo ? e[j] : lo, hi = e[j] > hi ? e[j] : hi;
    }
    double cos = fe / sqrt(ff * ee);
    if (!(cos >= worst)) worst = cos;
    CHECKF(tf == te || e[te] - e[te2] < 0.02 * (hi - lo),
          "%s fast vs exact position %d: top-1 %d vs %d, exact gap %.4g of range %.4g", s->arch,
          p, tf, te, e[te] - e[te2], hi - lo);
  }
  CHECKF(worst >= 0.999, "%s fast vs exact: min cosine %.6f", s->arch, worst);
}

static void expect_load_error(const tiny_spec *s, const char *want) {
  char *path = write_tiny(s);
  runner r;
  wk_error err = {{0}};
  int rc = runner_open(&r, path, 1, 4, 1, &err);
  CHECKF(rc != WICK_OK && strstr(err.msg, want), "expected error containing \"%s\", got %d \"%s\"",
        want, rc, err.msg);
  runner_close(&r);
  unlink(path);
  wk_free(path);
}

int main(void) {
  const tiny_spec models[] = {
      {.arch = "llama", .wtype = WK_F32, .n_layers = 2},
      {.arch = "llama", .wtype = WK_Q8_0, .n_layers = 2, .tied = true},
      {.arch = "qwen2", .wtype = WK_F32, .n_layers = 2, .tied = true, .bias = true, .threads = 2},
      {.arch = "qwen3", .wtype = WK_Q4_0, .n_layers = 2, .qk_norm = true},
      {.arch = "llama", .wtype = WK_Q4_1, .n_layers = 2, .threads = 3},
      {.arch = "qwen2", .wtype = WK_F16, .n_layers = 1, .bias = true},
      {.arch = "gemma3", .wtype = WK_Q8_0, .n_layers = 6, .tied = true, .qk_norm = true,
       .post_norms = true, .window = 4, .threads = 2},
  };
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char *path = write_tiny(&models[i]);
    test_model(&models[i], path, 1);
    test_model(&models[i], path, 0);
    test_fast_vs_exact(&models[i], path);
    unlink(path);
    wk_free(path);
  }

  tiny_spec s = {.arch = "gpt2", .wtype = WK_F32, .n_layers = 1};
  expect_load_error(&s, "architecture 'gpt2' is not supported (llama, qwen2, qwen3, gemma3)");
  s.arch = "llama";
  s.drop = "blk.0.ffn_up.weight";
  expect_load_error(&s, "missing tensor 'blk.0.ffn_up.weight' (expected shape [64, 96])");
  s.drop = NULL;
  s.bad = "blk.0.attn_k.weight";
  expect_load_error(&s, "tensor 'blk.0.attn_k.weight' has shape [64, 16], expected [64, 32]");
  s.bad = NULL;
  s.arch = "qwen2";  // qwen2 needs biases
  expect_load_error(&s, "missing tensor 'blk.0.attn_q.bias'");

  if (g_failures) {
    fprintf(stderr, "test_cpu_model: %d failures\n", g_failures);
    return 1;
  }
  printf("test_cpu_model: ok\n");
  return 0;
}
