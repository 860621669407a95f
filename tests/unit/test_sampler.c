// Sampler: each step's distribution against hand-computed values on small
// vocabularies, seeded reproducibility, and draw frequencies.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/sampler.h"

static int g_fail;
#define CHECK(c)                                                        \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      g_fail = 1;                                                       \
    }                                                                   \
  } while (0)
#define NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))

static sampler_params plain(float temp) {
  return (sampler_params){.temperature = temp, .top_k = 0, .top_p = 1, .min_p = 0,
                          .repeat_penalty = 1, .penalty_last_n = 64, .seed = 1};
}

static wk_sampler *make(int n, const sampler_params *p) {
  wk_sampler *s = NULL;
  if (sampler_create(&s, n, NULL) != 0 || !s) {
    fprintf(stderr, "sampler_create failed\n");
    exit(1);
  }
  sampler_set(s, p);
  return s;
}

// Probability of token id in a result (0 if dropped).
static double prob_of(const int32_t *ids, const float *probs, int n, int32_t id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id) return probs[i];
  return 0;
}

static void test_greedy(void) {
  float l[4] = {1, 3, 2, 3};
  sampler_params p = plain(0);
  wk_sampler *s = make(4, &p);
  CHECK(sampler_sample(s, l, NULL, 0) == 1);  // tie: lowest id
  int32_t recent[1] = {1};
  p.repeat_penalty = 2;  // logit of 1 becomes 1.5: token 3 wins
  sampler_set(s, &p);
  CHECK(sampler_sample(s, l, recent, 1) == 3);
  CHECK(l[1] == 3);  // input untouched
  sampler_free(s);
}

static void test_softmax_temperature(void) {
  // probabilities 1:2:3:4 at temperature 1
  float l[4] = {0, logf(2), logf(3), logf(4)};
  sampler_params p = plain(1);
  wk_sampler *s = make(4, &p);
  const int32_t *ids;
  const float *pr;
  int n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 4);
  for (int t = 0; t < 4; t++) NEAR(prob_of(ids, pr, n, t), (t + 1) / 10.0, 1e-6);
  // temperature 2 on logits {0, 2 ln 2}: exp(l / 2) = {1, 2}
  float l2[2] = {0, 2 * logf(2)};
  p = plain(2);
  wk_sampler *s2 = make(2, &p);
  n = sampler_dist(s2, l2, NULL, 0, &ids, &pr);
  CHECK(n == 2);
  NEAR(prob_of(ids, pr, n, 0), 1 / 3.0, 1e-6);
  NEAR(prob_of(ids, pr, n, 1), 2 / 3.0, 1e-6);
  // temperature 0.5 on {0, ln 2}: exp(2 l) = {1, 4}
  float l3[2] = {0, logf(2)};
  p = plain(0.5f);
  sampler_set(s2, &p);
  n = sampler_dist(s2, l3, NULL, 0, &ids, &pr);
  NEAR(prob_of(ids, pr, n, 1), 0.8, 1e-6);
  sampler_free(s);
  sampler_free(s2);
}

static void test_filters(void) {
  float l[4] = {0, logf(2), logf(3), logf(4)};  // 0.1 0.2 0.3 0.4
  const int32_t *ids;
  const float *pr;
  // top-k 2: {3, 2} renormalized 4/7, 3/7, sorted
  sampler_params p = plain(1);
  p.top_k = 2;
  wk_sampler *s = make(4, &p);
  int n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 2 && ids[0] == 3 && ids[1] == 2);
  NEAR(pr[0], 4 / 7.0, 1e-6);
  NEAR(pr[1], 3 / 7.0, 1e-6);
  // top-p 0.65: 0.4 + 0.3 >= 0.65 -> two tokens
  p = plain(1);
  p.top_p = 0.65f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 2 && ids[0] == 3 && ids[1] == 2);
  NEAR(pr[0], 4 / 7.0, 1e-6);
  // top-p 0.75: needs 0.2 as well
  p.top_p = 0.75f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 3 && ids[2] == 1);
  NEAR(pr[2], 2 / 9.0, 1e-6);
  // top-p 0.3: the top token alone
  p.top_p = 0.3f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 1 && ids[0] == 3);
  NEAR(pr[0], 1.0, 1e-6);
  // min-p 0.5: cut at 0.2 keeps {0.2, 0.3, 0.4}
  p = plain(1);
  p.min_p = 0.5f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 3);
  CHECK(prob_of(ids, pr, n, 0) == 0);
  NEAR(prob_of(ids, pr, n, 1), 2 / 9.0, 1e-6);
  NEAR(prob_of(ids, pr, n, 3), 4 / 9.0, 1e-6);
  // min-p 0.8: cut at 0.32 keeps the top token only
  p.min_p = 0.8f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 1 && ids[0] == 3);
  // the chain: top-k 3 -> {.2,.3,.4}/.9, temperature 1 -> same; top-p 0.5:
  // 4/9 = .444 < .5, + 3/9 -> keep 2; min-p 0.8: 3/9 >= 0.8 * 4/9 = .356? no
  // (0.333 < 0.356) -> token 3 alone.
  p = plain(1);
  p.top_k = 3;
  p.top_p = 0.5f;
  p.min_p = 0.8f;
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 1 && ids[0] == 3);
  p.min_p = 0.7f;  // 0.7 * 4/9 = .311 < .333: both stay, 4/7 and 3/7
  sampler_set(s, &p);
  n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == 2);
  NEAR(prob_of(ids, pr, n, 2), 3 / 7.0, 1e-6);
  sampler_free(s);
}

static void test_penalties(void) {
  float l[4] = {2, -1, 0.5f, 1};
  int32_t recent[4] = {0, 1, 0, 3};
  sampler_params p = plain(1);
  p.repeat_penalty = 2;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  wk_sampler *s = make(4, &p);
  const int32_t *ids;
  const float *pr;
  // token 0 (twice): 2/2 - 2*.25 - .5 = 0; token 1: -1*2 - .25 - .5 = -2.75;
  // token 3: 1/2 - .75 = -.25; token 2 untouched: .5
  double want[4] = {0, -2.75, 0.5, -0.25}, z = 0;
  for (int i = 0; i < 4; i++) z += exp(want[i]);
  int n = sampler_dist(s, l, recent, 4, &ids, &pr);
  CHECK(n == 4);
  for (int t = 0; t < 4; t++) NEAR(prob_of(ids, pr, n, t), exp(want[t]) / z, 1e-6);
  // window of the last 2 tokens {0, 3}: token 0 once -> 2/2 - .75 = .25, token 1 untouched
  p.penalty_last_n = 2;
  sampler_set(s, &p);
  double want2[4] = {0.25, -1, 0.5, -0.25};
  z = 0;
  for (int i = 0; i < 4; i++) z += exp(want2[i]);
  n = sampler_dist(s, l, recent, 4, &ids, &pr);
  for (int t = 0; t < 4; t++) NEAR(prob_of(ids, pr, n, t), exp(want2[t]) / z, 1e-6);
  // window 0: no penalty; repeat call gives the same (counts reset between calls)
  p.penalty_last_n = 0;
  sampler_set(s, &p);
  z = 0;
  for (int i = 0; i < 4; i++) z += exp(l[i]);
  n = sampler_dist(s, l, recent, 4, &ids, &pr);
  for (int t = 0; t < 4; t++) NEAR(prob_of(ids, pr, n, t), exp(l[t]) / z, 1e-6);
  p.penalty_last_n = -1;
  sampler_set(s, &p);
  n = sampler_dist(s, l, recent, 4, &ids, &pr);
  z = 0;
  for (int i = 0; i < 4; i++) z += exp(want[i]);
  for (int t = 0; t < 4; t++) NEAR(prob_of(ids, pr, n, t), exp(want[t]) / z, 1e-6);
  sampler_free(s);
}

// top-k over a larger vocabulary against a plain selection.
static void test_top_k_large(void) {
  enum { V = 5000, K = 37 };
  static float l[V];
  uint64_t x = 12345;
  for (int i = 0; i < V; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    l[i] = (float)((x >> 40) % 1000) / 100.0f;  // ties on purpose
  }
  sampler_params p = plain(1);
  p.top_k = K;
  wk_sampler *s = make(V, &p);
  const int32_t *ids;
  const float *pr;
  int n = sampler_dist(s, l, NULL, 0, &ids, &pr);
  CHECK(n == K);
  // reference: repeatedly pick the best unused (higher logit, then lower id)
  static char used[V];
  for (int k = 0; k < K; k++) {
    int best = -1;
    for (int i = 0; i < V; i++)
      if (!used[i] && (best < 0 || l[i] > l[best])) best = i;
    used[best] = 1;
    CHECK(ids[k] == best);
  }
  sampler_free(s);
}

static void test_seeds_and_frequencies(void) {
  float l[4] = {0, logf(2), logf(3), logf(4)};
  sampler_params p = plain(1);
  p.seed = 42;
  wk_sampler *a = make(4, &p), *b = make(4, &p);
  int same = 1;
  for (int i = 0; i < 200; i++) same &= sampler_sample(a, l, NULL, 0) == sampler_sample(b, l, NULL, 0);
  CHECK(same);
  p.seed = 43;
  sampler_set(b, &p);
  p.seed = 42;
  sampler_set(a, &p);  // reseeding restarts the sequence
  int differ = 0;
  for (int i = 0; i < 200; i++) differ |= sampler_sample(a, l, NULL, 0) != sampler_sample(b, l, NULL, 0);
  CHECK(differ);
  // frequencies of 40000 draws within 4 standard deviations of 0.1 .. 0.4
  enum { N = 40000 };
  int cnt[4] = {0};
  for (int i = 0; i < N; i++) cnt[sampler_sample(a, l, NULL, 0)]++;
  for (int t = 0; t < 4; t++) {
    double q = (t + 1) / 10.0, sd = sqrt(q * (1 - q) / N);
    NEAR((double)cnt[t] / N, q, 4 * sd);
  }
  // uniform draws: mean 0.5, all in [0, 1)
  double sum = 0;
  int ok = 1;
  for (int i = 0; i < N; i++) {
    double u = sampler_uniform(a);
    ok &= u >= 0 && u < 1;
    sum += u;
  }
  CHECK(ok);
  NEAR(sum / N, 0.5, 4 * sqrt(1.0 / 12 / N));
  sampler_free(a);
  sampler_free(b);
}

int main(void) {
  test_greedy();
  test_softmax_temperature();
  test_filters();
  test_penalties();
  test_top_k_large();
  test_seeds_and_frequencies();
  if (g_fail) return 1;
  printf("test_sampler: ok\n");
  return 0;
}
