// Rotary position embedding. Angles are computed in double per token and
// pair, then applied in f32 to every head of Q and K.
#include <math.h>

#include "backend/cpu/cpu_ops.h"

void cpu_rope_freqs(double *freqs, int rope_dim, float base, float freq_scale,
                    const float *freq_div) {
  for (int i = 0; i < rope_dim / 2; i++) {
    freqs[i] = (double)freq_scale * pow((double)base, -2.0 * i / rope_dim);
    if (freq_div) freqs[i] /= (double)freq_div[i];
  }
}

static void rotate_heads(const cpu_rope *r, float *x, int n_heads, int i, float c, float s) {
  const int half = r->rope_dim / 2;
  const int i0 = r->neox ? i : 2 * i;
  const int i1 = r->neox ? i + half : 2 * i + 1;
  for (int h = 0; h < n_heads; h++) {
    float *xh = x + (size_t)h * (size_t)r->head_dim;
    float a = xh[i0], b = xh[i1];
    xh[i0] = a * c - b * s;
    xh[i1] = a * s + b * c;
  }
}

void cpu_rope_apply(const cpu_rope *r, float *q, int n_q_heads, float *k, int n_k_heads,
                    int n_tokens, const int32_t *pos) {
  const int half = r->rope_dim / 2;
  const size_t q_row = (size_t)n_q_heads * (size_t)r->head_dim;
  const size_t k_row = (size_t)n_k_heads * (size_t)r->head_dim;
  for (int t = 0; t < n_tokens; t++) {
    for (int i = 0; i < half; i++) {
      double theta = (double)pos[t] * r->freqs[i];
      float c = (float)cos(theta), s = (float)sin(theta);
      if (q) rotate_heads(r, q + (size_t)t * q_row, n_q_heads, i, c, s);
      if (k) rotate_heads(r, k + (size_t)t * k_row, n_k_heads, i, c, s);
    }
  }
}
