// The engine through the public API (include/wick.h) on a tiny real-shaped
// model: scoring is the same whatever the chunking and across calls that
// continue the context (the KV cache holds what earlier calls evaluated),
// generation stops for each reason, errors are clear, and session creation
// survives every allocation failing in turn without leaking.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "wick.h"

#include "test_util.h"

#define MODEL "tests/fixtures/models/tiny_llama.gguf"
enum { N = 40 };

static wick_session *open_session(wick_model *m, int n_ctx, int n_batch, int n_logits) {
  wick_session_params sp = wick_session_default_params();
  sp.n_ctx = n_ctx;
  sp.n_batch = n_batch;
  sp.n_logits = n_logits;
  sp.n_threads = 1;
  sp.device = "cpu";
  wick_session *s = NULL;
  char err[512];
  if (wick_session_create(&s, m, &sp, err, sizeof err)) {
    fprintf(stderr, "session: %s\n", err);
    exit(1);
  }
  return s;
}

static void test_errors(void) {
  wick_model *m = (wick_model *)1;
  char err[512];
  CHECK(wick_model_load(&m, "tests/fixtures/models/none.gguf", NULL, err, sizeof err) ==
        WICK_ERR_IO);
  CHECK(m == NULL && strstr(err, "none.gguf"));
  wick_model_params mp = wick_model_default_params();
  mp.tokenizer_only = true;
  CHECK(wick_model_load(&m, MODEL, &mp, err, sizeof err) == WICK_OK);
  CHECK(wick_model_n_vocab(m) == 320);
  wick_session *s = NULL;
  CHECK(wick_session_create(&s, m, NULL, err, sizeof err) == WICK_ERR_INVALID && !s);
  wick_model_free(m);
  CHECK(!strcmp(wick_status_str(WICK_ERR_RANGE), "out of range"));
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1); }

static void test_score_chunking(wick_model *m) {
  int32_t t[N];
  for (int i = 0; i < N; i++) t[i] = (int32_t)((i * 37 + 11) % 300);
  double whole[N - 1], chunked[N - 1], a[N - 1], b[N - 1];
  char err[512];
  wick_session *s1 = open_session(m, 64, 64, 64), *s2 = open_session(m, 64, 5, 3);
  // The CPU backend's memory: the f32 KV cache (a float-weight model) of 3
  // layers x 64 positions x 2 kv heads x 16 dims, K and V; nothing in "host"
  // weights (a GPU notion).
  wick_memory mem;
  wick_session_memory(s1, &mem);
  CHECK(mem.kv_cache == 2 * 3 * 64 * 2 * 16 * 4 && mem.weights > 0 && mem.weights_host == 0);
  CHECK(wick_score(s1, t, N, whole, err, sizeof err) == WICK_OK);
  CHECK(wick_score(s2, t, N, chunked, err, sizeof err) == WICK_OK);
  double worst = 0;
  for (int i = 0; i < N - 1; i++) {
    CHECK(isfinite(whole[i]) && whole[i] > 0);
    double r = rel(chunked[i], whole[i]);
    if (r > worst) worst = r;
  }
  if (worst >= 1e-4) fprintf(stderr, "chunked scoring: worst relative difference %.3g\n", worst);
  CHECK(worst < 1e-4);
  // the same tokens over two calls: the second continues the first's context
  wick_session_reset(s2);
  CHECK(wick_score(s2, t, 17, a, err, sizeof err) == WICK_OK);
  CHECK(wick_session_n_past(s2) == 17);
  CHECK(wick_score(s2, t + 17, N - 17, b, err, sizeof err) == WICK_OK);
  worst = 0;
  for (int i = 0; i < 16; i++) worst = fmax(worst, rel(a[i], whole[i]));
  for (int i = 0; i < N - 18; i++) worst = fmax(worst, rel(b[i], whole[17 + i]));
  if (worst >= 1e-4) fprintf(stderr, "continued scoring: worst relative difference %.3g\n", worst);
  CHECK(worst < 1e-4);
  // overflow: 40 more tokens do not fit after 40
  CHECK(wick_score(s2, t, N, b, err, sizeof err) == WICK_ERR_RANGE);
  CHECK(strstr(err, "context is 64") != NULL);
  // n_batch 0: the device's default (the CPU's 512, here the whole context);
  // negative: a clear error
  wick_session *s0 = open_session(m, 64, 0, 64);
  CHECK(wick_score(s0, t, N, a, err, sizeof err) == WICK_OK);
  worst = 0;
  for (int i = 0; i < N - 1; i++) worst = fmax(worst, rel(a[i], whole[i]));
  CHECK(worst < 1e-6);
  wick_session_params sp = wick_session_default_params();
  CHECK(sp.n_batch == 0);
  sp.n_batch = -1, sp.device = "cpu";
  wick_session *bad = NULL;
  CHECK(wick_session_create(&bad, m, &sp, err, sizeof err) == WICK_ERR_INVALID && !bad);
  CHECK(strstr(err, "n_batch must be >= 0") != NULL);
  wick_session_free(s0);
  wick_session_free(s1);
  wick_session_free(s2);
}

typedef struct sink {
  char text[4096];
  size_t n;
  int calls, stop_after;
} sink;

static int collect(void *user, const char *text, size_t len) {
  sink *k = user;
  if (k->n + len < sizeof k->text) {
    memcpy(k->text + k->n, text, len);
    k->n += len;
    k->text[k->n] = 0;
  }
  return ++k->calls == k->stop_after;
}

static void test_generate(wick_model *m) {
  char err[512];
  wick_session *s = open_session(m, 32, 8, 1);
  wick_sample_params gp = wick_sample_default_params();
  gp.temperature = 0;
  gp.max_tokens = 6;
  int32_t prompt[10] = {5, 17, 33, 60, 2, 90, 101, 7, 45, 200};
  sink k1 = {0}, k2 = {0};
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, collect, &k1, err, sizeof err) == WICK_OK);
  wick_stats st;
  wick_session_stats(s, &st);
  CHECK(st.prompt_tokens == 10 && st.gen_tokens >= 1 && st.gen_tokens <= 6);
  CHECK(st.stop == WICK_STOP_MAX_TOKENS || st.stop == WICK_STOP_EOG);
  CHECK(st.n_past == wick_session_n_past(s) && st.n_past >= 10 && st.n_past <= 16);
  wick_session_reset(s);
  CHECK(wick_session_n_past(s) == 0);
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, collect, &k2, err, sizeof err) == WICK_OK);
  CHECK(k1.n == k2.n && !memcmp(k1.text, k2.text, k1.n));  // greedy: same text
  // run to the end of the context
  wick_session_reset(s);
  gp.max_tokens = -1;
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, NULL, NULL, err, sizeof err) == WICK_OK);
  wick_session_stats(s, &st);
  CHECK(st.stop == WICK_STOP_CONTEXT || st.stop == WICK_STOP_EOG);
  CHECK(wick_session_n_past(s) <= 33);  // 32 evaluated + one sampled
  // a full context refuses more
  if (st.stop == WICK_STOP_CONTEXT) {
    CHECK(wick_generate_tokens(s, prompt, 1, &gp, NULL, NULL, err, sizeof err) == WICK_ERR_RANGE);
  }
  // the callback stops generation
  wick_session_reset(s);
  sink k3 = {.stop_after = 1};
  gp.max_tokens = 6;
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, collect, &k3, err, sizeof err) == WICK_OK);
  wick_session_stats(s, &st);
  CHECK(k3.calls <= 1 && (st.stop == WICK_STOP_CALLBACK || k3.calls == 0));
  // prompt too long; empty prompt; bad parameters
  wick_session_reset(s);
  int32_t big[40] = {0};
  CHECK(wick_generate_tokens(s, big, 40, &gp, NULL, NULL, err, sizeof err) == WICK_ERR_RANGE);
  CHECK(!strcmp(err, "prompt is 40 tokens, context is 32"));
  CHECK(wick_generate_tokens(s, big, 0, &gp, NULL, NULL, err, sizeof err) == WICK_ERR_INVALID);
  gp.top_p = 1.5f;
  CHECK(wick_generate_tokens(s, prompt, 3, &gp, NULL, NULL, err, sizeof err) == WICK_ERR_INVALID);
  CHECK(strstr(err, "top_p") != NULL);
  gp.top_p = 1;
  int32_t bad[2] = {1, 999};
  CHECK(wick_generate_tokens(s, bad, 2, &gp, NULL, NULL, err, sizeof err) == WICK_ERR_INVALID);
  // sampled text with a seed is reproducible
  gp = wick_sample_default_params();
  gp.max_tokens = 8;
  gp.seed = 77;
  sink k4 = {0}, k5 = {0};
  wick_session_reset(s);
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, collect, &k4, err, sizeof err) == WICK_OK);
  wick_session_reset(s);
  CHECK(wick_generate_tokens(s, prompt, 10, &gp, collect, &k5, err, sizeof err) == WICK_OK);
  CHECK(k4.n == k5.n && !memcmp(k4.text, k5.text, k4.n));
  wick_session_free(s);
}

// ---- allocation failures ----

typedef struct counter {
  long n_alloc, live, fail_at;
} counter;

static void *counting(void *ud, void *ptr, size_t size) {
  counter *c = ud;
  if (size == 0) {
    if (ptr) c->live--;
    free(ptr);
    return NULL;
  }
  if (!ptr) {
    if (c->n_alloc++ == c->fail_at) return NULL;
    void *p = malloc(size);
    if (p) c->live++;
    return p;
  }
  return realloc(ptr, size);
}

static void test_alloc_failures(wick_model *m) {
  wick_session_params sp = wick_session_default_params();
  sp.n_ctx = 32;
  sp.n_threads = 1;
  sp.device = "cpu";
  int failed = 0;
  for (long k = 0; k < 200; k++) {
    counter c = {.fail_at = k};
    wk_set_alloc(counting, &c);
    wick_session *s = NULL;
    char err[512];
    int st = wick_session_create(&s, m, &sp, err, sizeof err);
    wick_session_free(s);
    wk_set_alloc(NULL, NULL);
    if (c.live != 0) {
      fprintf(stderr, "allocation %ld failing: %ld blocks leaked (status %d: %s)\n", k, c.live,
              st, err);
      failed = 1;
    }
    if (st == WICK_OK) {  // k is past the last allocation
      printf("session creation: each of %ld allocations failed in turn, no leak\n", k);
      CHECK(k > 5);
      break;
    }
    if (st != WICK_ERR_NOMEM) fprintf(stderr, "allocation %ld failing: %s\n", k, err);
  }
  CHECK(!failed);
}

int main(void) {
  test_errors();
  wick_model *m = NULL;
  char err[512];
  if (wick_model_load(&m, MODEL, NULL, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  test_score_chunking(m);
  test_generate(m);
  test_alloc_failures(m);
  wick_model_free(m);
  if (g_failures) return 1;
  printf("test_engine_api: ok\n");
  return 0;
}
