// Token sampler: repetition / presence / frequency penalties over a window
// of recent tokens, then top-k, softmax with temperature, top-p, min-p and a
// draw from a seeded PRNG owned by the sampler (no global state: the same
// seed and inputs give the same tokens). Temperature 0 is greedy argmax.
// Buffers are sized at creation; sampling allocates nothing.
#ifndef WICK_ENGINE_SAMPLER_H
#define WICK_ENGINE_SAMPLER_H

#include <stdint.h>

#include "base/error.h"

typedef struct sampler_params {
  float temperature;        // <= 0: greedy
  int top_k;                // <= 0 or >= vocab: off
  float top_p;              // >= 1: off
  float min_p;              // <= 0: off
  float repeat_penalty;     // 1: off
  float presence_penalty;   // 0: off
  float frequency_penalty;  // 0: off
  int penalty_last_n;       // recent tokens looked at; 0 = none, < 0 = all given
  uint64_t seed;            // PRNG seed
} sampler_params;

typedef struct wk_sampler wk_sampler;

int sampler_create(wk_sampler **out, int n_vocab, wk_error *err);
void sampler_free(wk_sampler *s);
// Sets the parameters and reseeds the PRNG.
void sampler_set(wk_sampler *s, const sampler_params *p);

// The distribution the next draw uses, given logits [n_vocab] and the tokens
// so far (recent[n_recent - 1] is the latest). Returns the number of
// candidates; *ids and *probs (valid until the next call) hold them with
// probabilities summing to 1, in descending order whenever top-k or top-p is
// active (and always for greedy, which gives one candidate).
int sampler_dist(wk_sampler *s, const float *logits, const int32_t *recent, int n_recent,
                 const int32_t **ids, const float **probs);
// Draws the next token.
int32_t sampler_sample(wk_sampler *s, const float *logits, const int32_t *recent, int n_recent);

// Candidates instead of a whole row (a backend that selects on the device):
// how many of the row's best logits (higher logit, then lower id) a draw
// needs so that it is exactly the draw on the whole row: 1 for greedy or
// top_k with top-k on, plus the penalty window (a penalty only lowers a
// logit, so at most that many can leave the set). 0 when the whole row is
// needed: top-k off, or a penalty that can raise a logit (repeat_penalty < 1,
// presence or frequency penalty < 0).
int sampler_cands_needed(const wk_sampler *s, int n_recent);
// sampler_dist and sampler_sample given the m best logits of the row (ids,
// logits; any order), m >= sampler_cands_needed(s, n_recent) > 0.
int sampler_dist_cands(wk_sampler *s, const int32_t *ids, const float *logits, int m,
                       const int32_t *recent, int n_recent, const int32_t **out_ids,
                       const float **probs);
int32_t sampler_sample_cands(wk_sampler *s, const int32_t *ids, const float *logits, int m,
                             const int32_t *recent, int n_recent);

// The PRNG (xoshiro256**): next uniform double in [0, 1).
double sampler_uniform(wk_sampler *s);

#endif
