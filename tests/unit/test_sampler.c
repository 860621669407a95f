// Sampler: each step's distribution against hand-computed values on small
// vocabularies, seeded reproducibility, and draw frequencies.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/sampler.h"

#include "test_util.h"
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

typedef struct cand_t {
  int32_t id;
  float v;
} cand_t;

static int cand_order(const void *a, const void *b) {  // higher value, then lower id
  const cand_t *x = a, *y = b;
  if (x->v != y->v) return x->v > y->v ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

// The candidate path (the best m logits, as a device top-k returns them) must
// give exactly the distribution and the draws of the whole-row path, for
// greedy and top-k with penalties that only lower logits; and must ask for
// the whole row when it cannot be exact.
static void test_candidates(void) {
  enum { V = 600, RECENT = 90 };
  static float l[V];
  static cand_t c[V];
  int32_t cid[V], recent[RECENT];
  float cv[V];
  uint64_t r = 12345;
  const float temps[] = {0.0f, 0.7f, 1.3f};
  const int topks[] = {1, 5, 40};
  const float rps[] = {1.0f, 1.3f};
  const float pres[] = {0.0f, 0.5f};
  const int lastn[] = {0, 16, -1};
  int checked = 0;
  for (int trial = 0; trial < 6; trial++) {
    for (int i = 0; i < V; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      // trial 0..2: spread values, 3..5: few distinct values (ties)
      l[i] = trial < 3 ? (float)((double)(r >> 11) / 9007199254740992.0 * 16 - 8)
                       : (float)(r % 9) - 4.0f;
    }
    for (int i = 0; i < RECENT; i++) {  // recent tokens, many among the best
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      recent[i] = (int32_t)(r % 60) * (trial % 2 ? 1 : 10) % V;
    }
    for (int i = 0; i < V; i++) c[i] = (cand_t){i, l[i]};
    qsort(c, V, sizeof *c, cand_order);
    for (int i = 0; i < V; i++) cid[i] = c[i].id, cv[i] = c[i].v;
    for (size_t a = 0; a < 3; a++)
      for (size_t b = 0; b < 3; b++)
        for (size_t d = 0; d < 2; d++)
          for (size_t e = 0; e < 2; e++)
            for (size_t f = 0; f < 3; f++) {
              sampler_params p = plain(temps[a]);
              p.top_k = topks[b], p.repeat_penalty = rps[d], p.presence_penalty = pres[e];
              p.frequency_penalty = pres[e] / 2, p.penalty_last_n = lastn[f];
              p.top_p = trial % 3 == 1 ? 0.8f : 1.0f, p.min_p = trial % 3 == 2 ? 0.05f : 0.0f;
              p.seed = (uint64_t)trial * 977 + a;
              wk_sampler *s1 = make(V, &p), *s2 = make(V, &p);
              int m = sampler_cands_needed(s1, RECENT);
              CHECK(m > 0 && m < V);
              // the permuted head: the candidate path takes them in any order
              int32_t pid[V];
              float pv[V];
              for (int i = 0; i < m; i++) pid[i] = cid[m - 1 - i], pv[i] = cv[m - 1 - i];
              const int32_t *i1, *i2;
              const float *p1, *p2;
              int n1 = sampler_dist(s1, l, recent, RECENT, &i1, &p1);
              int n2 = sampler_dist_cands(s2, pid, pv, m, recent, RECENT, &i2, &p2);
              int same = n1 == n2;
              for (int i = 0; same && i < n1; i++) same = i1[i] == i2[i] && p1[i] == p2[i];
              CHECK(same);
              for (int i = 0; i < 20; i++)
                CHECK(sampler_sample(s1, l, recent, RECENT) ==
                      sampler_sample_cands(s2, pid, pv, m, recent, RECENT));
              sampler_free(s1);
              sampler_free(s2);
              checked++;
            }
  }
  CHECK(checked == 6 * 3 * 3 * 2 * 2 * 3);
  // whole row needed: top-k off with sampling, or a penalty that can raise
  sampler_params p = plain(0.8f);
  wk_sampler *s = make(V, &p);
  CHECK(sampler_cands_needed(s, RECENT) == 0);
  p.top_k = 40, p.repeat_penalty = 0.9f;
  sampler_set(s, &p);
  CHECK(sampler_cands_needed(s, RECENT) == 0);
  p.repeat_penalty = 1.1f, p.presence_penalty = -0.5f;
  sampler_set(s, &p);
  CHECK(sampler_cands_needed(s, RECENT) == 0);
  p.presence_penalty = 0.5f, p.penalty_last_n = 64;
  sampler_set(s, &p);
  CHECK(sampler_cands_needed(s, RECENT) == 40 + 64);
  CHECK(sampler_cands_needed(s, 10) == 40 + 10);
  p = plain(0.0f);
  sampler_set(s, &p);
  CHECK(sampler_cands_needed(s, RECENT) == 1);
  sampler_free(s);
}

int main(void) {
  test_candidates();
  test_greedy();
  test_softmax_temperature();
  test_filters();
  test_penalties();
  test_top_k_large();
  test_seeds_and_frequencies();
  if (g_failures) return 1;
  printf("test_sampler: ok\n");
  return 0;
}
