#include "engine/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct cand {
  int32_t id;
  float logit;
} cand;

struct wk_sampler {
  int n_vocab;
  sampler_params p;
  uint64_t rng[4];  // xoshiro256** state
  float *work;      // [n_vocab] logits after penalties
  int32_t *count;   // [n_vocab] occurrences in the penalty window (zero between calls)
  cand *cands;      // [n_vocab] candidates
  int32_t *ids;     // [n_vocab] result ids
  float *probs;     // [n_vocab] result probabilities
};

// ---- PRNG: xoshiro256**, seeded through splitmix64 ----

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t *s) {
  uint64_t r = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

double sampler_uniform(wk_sampler *s) { return (double)(rng_next(s->rng) >> 11) * 0x1p-53; }

// ---- life cycle ----

int sampler_create(wk_sampler **out, int n_vocab, wk_error *err) {
  *out = NULL;
  if (n_vocab <= 0) return wk_fail(err, WICK_ERR_INVALID, "sampler: vocab of %d tokens", n_vocab);
  wk_sampler *s = wk_calloc(1, sizeof *s);
  if (!s) return wk_fail(err, WICK_ERR_NOMEM, "sampler: out of memory");
  size_t n = (size_t)n_vocab;
  s->n_vocab = n_vocab;
  s->work = wk_malloc(n * sizeof *s->work);
  s->count = wk_calloc(n, sizeof *s->count);
  s->cands = wk_malloc(n * sizeof *s->cands);
  s->ids = wk_malloc(n * sizeof *s->ids);
  s->probs = wk_malloc(n * sizeof *s->probs);
  if (!s->work || !s->count || !s->cands || !s->ids || !s->probs) {
    sampler_free(s);
    return wk_fail(err, WICK_ERR_NOMEM, "sampler: out of memory for a vocab of %d", n_vocab);
  }
  sampler_params d = {.temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0,
                      .repeat_penalty = 1, .penalty_last_n = 64, .seed = 0};
  sampler_set(s, &d);
  *out = s;
  return WICK_OK;
}

void sampler_free(wk_sampler *s) {
  if (!s) return;
  wk_free(s->work);
  wk_free(s->count);
  wk_free(s->cands);
  wk_free(s->ids);
  wk_free(s->probs);
  wk_free(s);
}

void sampler_set(wk_sampler *s, const sampler_params *p) {
  s->p = *p;
  uint64_t x = p->seed;
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

// ---- steps ----

static bool penalties_on(const sampler_params *p, int n_recent) {
  return p->penalty_last_n != 0 && n_recent > 0 &&
         !(p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f &&
           p->frequency_penalty == 0.0f);
}

static int penalty_window(const sampler_params *p, int n_recent) {
  return p->penalty_last_n < 0 || p->penalty_last_n > n_recent ? n_recent : p->penalty_last_n;
}

static float penalized(const sampler_params *p, float l, int32_t count) {
  l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
  return l - ((float)count * p->frequency_penalty + p->presence_penalty);
}

// Penalizes the logits (in s->work) of tokens in the window.
static void apply_penalties(wk_sampler *s, const int32_t *recent, int n_recent) {
  const sampler_params *p = &s->p;
  if (!penalties_on(p, n_recent)) return;
  int n = penalty_window(p, n_recent);
  const int32_t *w = recent + (n_recent - n);
  for (int i = 0; i < n; i++)
    if (w[i] >= 0 && w[i] < s->n_vocab) s->count[w[i]]++;
  for (int i = 0; i < n; i++) {
    int32_t t = w[i];
    if (t < 0 || t >= s->n_vocab || s->count[t] == 0) continue;  // out of range or done
    s->work[t] = penalized(p, s->work[t], s->count[t]);
    s->count[t] = 0;  // applied once per distinct token; leaves count zeroed
  }
}

// Order: higher logit first, then lower id (a total order: reproducible).
static int cand_before(const cand *a, const cand *b) {
  return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *x, const void *y) {
  const cand *a = x, *b = y;
  return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

// Min-heap on cand_before (the root is the worst kept candidate).
static void heap_down(cand *h, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && cand_before(&h[m], &h[l])) m = l;
    if (r < n && cand_before(&h[m], &h[r])) m = r;
    if (m == i) return;
    cand t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

// Keeps the k best of s->work in s->cands[0, k), sorted. O(V log k).
static void select_top_k(wk_sampler *s, int k) {
  cand *h = s->cands;
  for (int i = 0; i < k; i++) h[i] = (cand){i, s->work[i]};
  for (int i = k / 2 - 1; i >= 0; i--) heap_down(h, k, i);
  for (int i = k; i < s->n_vocab; i++) {
    cand c = {i, s->work[i]};
    if (cand_before(&c, &h[0])) {
      h[0] = c;
      heap_down(h, k, 0);
    }
  }
  qsort(h, (size_t)k, sizeof *h, cand_cmp);
}

static int greedy(wk_sampler *s) {
  int32_t best = 0;
  for (int32_t i = 1; i < s->n_vocab; i++)
    if (s->work[i] > s->work[best]) best = i;
  s->ids[0] = best;
  s->probs[0] = 1.0f;
  return 1;
}

// Softmax with temperature, top-p, min-p and renormalization over the n
// candidates in s->cands (sorted when top-k or top-p is on); the result goes
// to s->ids / s->probs.
static int finish(wk_sampler *s, int n) {
  const sampler_params *p = &s->p;
  // softmax with temperature (double accumulation)
  float lmax = s->cands[0].logit;
  for (int i = 1; i < n; i++)
    if (s->cands[i].logit > lmax) lmax = s->cands[i].logit;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    double e = exp(((double)s->cands[i].logit - lmax) / p->temperature);
    s->probs[i] = (float)e;
    s->ids[i] = s->cands[i].id;
    sum += e;
  }
  for (int i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);

  // top-p: the shortest (sorted) prefix whose mass reaches top_p
  if (p->top_p < 1.0f) {
    double cum = 0;
    int keep = n;
    for (int i = 0; i < n; i++) {
      cum += s->probs[i];
      if (cum >= p->top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }

  // min-p: drop tokens below min_p * p_max
  if (p->min_p > 0.0f) {
    float pmax = 0;
    for (int i = 0; i < n; i++)
      if (s->probs[i] > pmax) pmax = s->probs[i];
    float cut = p->min_p * pmax;
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (s->probs[i] < cut) continue;
      s->ids[m] = s->ids[i];
      s->probs[m] = s->probs[i];
      m++;
    }
    n = m;  // >= 1: the most likely token always passes
  }

  // renormalize
  sum = 0;
  for (int i = 0; i < n; i++) sum += s->probs[i];
  for (int i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);
  return n;
}

int sampler_dist(wk_sampler *s, const float *logits, const int32_t *recent, int n_recent,
                 const int32_t **ids, const float **probs) {
  const sampler_params *p = &s->p;
  *ids = s->ids;
  *probs = s->probs;
  memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
  apply_penalties(s, recent, n_recent);
  if (!(p->temperature > 0)) return greedy(s);

  // top-k
  int n = s->n_vocab;
  if (p->top_k > 0 && p->top_k < n) {
    n = p->top_k;
    select_top_k(s, n);
  } else {
    for (int i = 0; i < n; i++) s->cands[i] = (cand){i, s->work[i]};
    if (p->top_p < 1.0f) qsort(s->cands, (size_t)n, sizeof *s->cands, cand_cmp);
  }
  return finish(s, n);
}

int sampler_cands_needed(const wk_sampler *s, int n_recent) {
  const sampler_params *p = &s->p;
  long pen = 0;
  if (penalties_on(p, n_recent)) {
    if (!(p->repeat_penalty >= 1.0f && p->presence_penalty >= 0.0f &&
          p->frequency_penalty >= 0.0f))
      return 0;
    pen = penalty_window(p, n_recent);
  }
  long k = !(p->temperature > 0) ? 1 : p->top_k > 0 && p->top_k < s->n_vocab ? p->top_k : 0;
  if (!k || k + pen >= s->n_vocab) return 0;
  return (int)(k + pen);
}

int sampler_dist_cands(wk_sampler *s, const int32_t *ids, const float *logits, int m,
                       const int32_t *recent, int n_recent, const int32_t **out_ids,
                       const float **probs) {
  const sampler_params *p = &s->p;
  *out_ids = s->ids;
  *probs = s->probs;
  if (m > s->n_vocab) m = s->n_vocab;
  for (int i = 0; i < m; i++) s->cands[i] = (cand){ids[i], logits[i]};
  if (penalties_on(p, n_recent)) {  // the same values apply_penalties gives
    int n = penalty_window(p, n_recent);
    const int32_t *w = recent + (n_recent - n);
    for (int i = 0; i < n; i++)
      if (w[i] >= 0 && w[i] < s->n_vocab) s->count[w[i]]++;
    for (int i = 0; i < m; i++) {
      int32_t t = s->cands[i].id;
      if (t >= 0 && t < s->n_vocab && s->count[t] > 0)
        s->cands[i].logit = penalized(p, s->cands[i].logit, s->count[t]);
    }
    for (int i = 0; i < n; i++)
      if (w[i] >= 0 && w[i] < s->n_vocab) s->count[w[i]] = 0;
  }
  qsort(s->cands, (size_t)m, sizeof *s->cands, cand_cmp);
  if (!(p->temperature > 0)) {
    s->ids[0] = s->cands[0].id;
    s->probs[0] = 1.0f;
    return 1;
  }
  return finish(s, p->top_k < m ? p->top_k : m);
}

static int32_t draw(wk_sampler *s, int n) {
  if (n == 1) return s->ids[0];
  double u = sampler_uniform(s), cum = 0;
  for (int i = 0; i < n; i++) {
    cum += s->probs[i];
    if (u < cum) return s->ids[i];
  }
  return s->ids[n - 1];  // rounding left u just above the total
}

int32_t sampler_sample_cands(wk_sampler *s, const int32_t *ids, const float *logits, int m,
                             const int32_t *recent, int n_recent) {
  const int32_t *oi;
  const float *op;
  return draw(s, sampler_dist_cands(s, ids, logits, m, recent, n_recent, &oi, &op));
}

int32_t sampler_sample(wk_sampler *s, const float *logits, const int32_t *recent, int n_recent) {
  const int32_t *ids;
  const float *probs;
  return draw(s, sampler_dist(s, logits, recent, n_recent, &ids, &probs));
}
