// The device top-k (src/backend/cuda/topk.cu) against a full sort of the
// row on the host, with ties, negative values, -inf and rows shorter than a
// chunk; and through a real model: forward_topk's candidates must be the
// best of forward's whole row. Without a CUDA device it prints "skipped: no
// CUDA device" and passes.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/error.h"
#include "format/gguf.h"
#include "model/model.h"
#include "test_cuda_skip.h"

#ifdef WICK_HAVE_CUDA
int cuda_test_topk(const float *x, int rows, int vocab, int k, int32_t *ids, float *vals,
                   wk_error *err);

typedef struct cand {
  int32_t id;
  float v;
} cand;

// The sampler's order: a higher value first, then a lower id.
static int cmp(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static uint64_t g_rng = 0x6a09e667f3bcc908ull;
static uint64_t next(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return g_rng;
}

static int check(int rows, int vocab, int k, int mode) {
  float *x = malloc(sizeof(float) * rows * vocab);
  int32_t *ids = malloc(sizeof(int32_t) * rows * k);
  float *vals = malloc(sizeof(float) * rows * k);
  cand *c = malloc(sizeof(cand) * vocab);
  for (long i = 0; i < (long)rows * vocab; i++) {
    double u = (double)(next() >> 11) / 9007199254740992.0;
    // mode 0: spread values; 1: few distinct values (many ties); 2: some -inf
    x[i] = mode == 1 ? (float)(next() % 7) - 3.0f : (float)(40.0 * u - 20.0);
    if (mode == 2 && next() % 5 == 0) x[i] = -INFINITY;
  }
  wk_error err = {{0}};
  int fails = 0;
  if (cuda_test_topk(x, rows, vocab, k, ids, vals, &err) != WICK_OK) {
    printf("FAIL: top-%d of %d x %d: %s\n", k, rows, vocab, err.msg);
    fails = 1;
  }
  for (int r = 0; r < rows && !fails; r++) {
    for (int i = 0; i < vocab; i++) c[i] = (cand){i, x[(size_t)r * vocab + i]};
    qsort(c, (size_t)vocab, sizeof *c, cmp);
    for (int i = 0; i < k; i++) {
      int32_t gi = ids[(size_t)r * k + i];
      float gv = vals[(size_t)r * k + i];
      if (gi != c[i].id || memcmp(&gv, &c[i].v, sizeof gv) != 0) {
        printf("FAIL: top-%d of %d x %d (mode %d): row %d rank %d: got (%d, %g), want (%d, %g)\n",
               k, rows, vocab, mode, r, i, gi, gv, c[i].id, c[i].v);
        fails = 1;
        break;
      }
    }
  }
  free(x), free(ids), free(vals), free(c);
  return fails;
}

// forward_topk on a real model: the same 6-token batch through forward (whole
// row) and then forward_topk (the KV slots are rewritten with the same
// values); the candidates must be the head of the host-sorted row.
static int check_model(const char *path) {
  gguf_file *f = NULL;
  wk_model m;
  wk_error err = {{0}};
  memset(&m, 0, sizeof m);
  if (gguf_open(&f, path, &err) != WICK_OK || model_load(&m, f, &err) != WICK_OK) {
    printf("FAIL: %s: %s\n", path, err.msg);
    if (f) gguf_close(f);
    return 1;
  }
  enum { N = 6, K = 40 };
  wk_backend_params bp = {N, 1, N, 1, 0, 0, {16, 4}};
  wk_backend *b = backend_cuda_create();
  float *lg = malloc(sizeof(float) * N * m.vocab);
  cand *c = malloc(sizeof(cand) * m.vocab);
  int32_t ids[N * K], blocks[1] = {2}, toks[N], at[N];
  float vals[N * K];
  int fails = 1;
  for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 7919 + 17) % m.vocab), at[i] = i;
  wk_seq sq = {blocks, 1, 0, N, 0};
  wk_batch bt = {toks, N, &sq, 1, at, N};
  if (!b || !lg || !c || b->prepare(b, &m, &bp, &err) != WICK_OK ||
      b->forward(b, &bt, lg, &err) != WICK_OK || !b->forward_topk ||
      b->forward_topk(b, &bt, K, ids, vals, &err) != WICK_OK) {
    printf("FAIL: %s: %s\n", path, err.msg);
  } else {
    fails = 0;
    for (int r = 0; r < N && !fails; r++) {
      for (int i = 0; i < m.vocab; i++) c[i] = (cand){i, lg[(size_t)r * m.vocab + i]};
      qsort(c, (size_t)m.vocab, sizeof *c, cmp);
      for (int i = 0; i < K; i++)
        if (ids[r * K + i] != c[i].id || vals[r * K + i] != c[i].v) {
          printf("FAIL: %s row %d rank %d: forward_topk (%d, %g), forward's row (%d, %g)\n", path,
                 r, i, ids[r * K + i], vals[r * K + i], c[i].id, c[i].v);
          fails = 1;
          break;
        }
    }
    if (!fails) printf("%s: forward_topk matches the whole rows (%d rows, top-%d)\n", path, N, K);
  }
  if (b) b->destroy(b);
  free(lg), free(c);
  model_free(&m);
  gguf_close(f);
  return fails;
}
#endif

int main(void) {
  if (cuda_absent()) return 0;
#ifdef WICK_HAVE_CUDA
  int fails = 0, runs = 0;
  const int vocabs[] = {1000, 4096, 4097, 49152, 128256, 262144};
  const int ks[] = {1, 2, 40, 104, WK_TOPK_MAX};
  for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++)
    for (size_t j = 0; j < sizeof ks / sizeof *ks; j++)
      for (int mode = 0; mode < 3; mode++, runs++)
        fails += check(mode == 0 ? 3 : 1, vocabs[v], ks[j], mode);
  printf("%d of %d top-k cases match the host sort\n", runs - fails, runs);
  const char *models[] = {"models/smollm2-135m-instruct-q4_1.gguf",
                          "models-trim/smollm2-3l.gguf", "models/gemma3-270m-q4_k_m.gguf",
                          "models-trim/gemma3-6l.gguf"};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    FILE *fp = fopen(models[i], "rb");
    if (!fp) continue;
    fclose(fp);
    fails += check_model(models[i]);
  }
  return fails != 0;
#else
  return 0;
#endif
}
