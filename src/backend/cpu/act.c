// Gated activations of the MLP, and the fused pass that converts their
// result for the down projection. The pass computes 8 floats at a time with
// vec8.h's exp (AVX2 + FMA where the CPU has them); the scalar functions are
// the reference and handle the tails.
#include <math.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/vec8.h"

float cpu_silu(float x) { return x / (1.0f + expf(-x)); }

float cpu_gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

void cpu_swiglu(float *g, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) g[i] = cpu_silu(g[i]) * u[i];
}

void cpu_geglu_tanh(float *g, const float *u, size_t n) {
  for (size_t i = 0; i < n; i++) g[i] = cpu_gelu_tanh(g[i]) * u[i];
}

// sig = 1 / (1 + exp(-y)) of 8 floats, from e = exp(-|y|) <= 1 (no overflow).
#define SIGMOID8(y, sig)                                                        \
  do {                                                                          \
    float e_[8];                                                                \
    *(v8fu *)e_ = (v8f)((v8i)(y) | (v8i)SPL(-0.0f)); /* -|y| */                \
    vec8_exp_nonpos(e_);                                                        \
    const v8f ev_ = *(v8fu *)e_, inv_ = SPL(1.0f) / (SPL(1.0f) + ev_);          \
    const v8i pos_ = (y) >= SPL(0.0f);                                          \
    (sig) = (v8f)(((v8i)inv_ & pos_) | ((v8i)(ev_ * inv_) & ~pos_));            \
  } while (0)

// silu(g) * u = g * sigmoid(g) * u; gelu_tanh(g) * u = g * sigmoid(2 k (g +
// 0.044715 g^3)) * u (as 0.5 (1 + tanh(z)) = sigmoid(2 z)).
INL void glu_body(bool gelu, float *g, const float *u, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8f x = *(v8fu *)(g + i);
    v8f y = x, sig;
    if (gelu) y = SPL(2 * 0.7978845608028654f) * (x + SPL(0.044715f) * x * x * x);
    SIGMOID8(y, sig);
    *(v8fu *)(g + i) = x * sig * *(const v8fu *)(u + i);
  }
  for (; i < n; i++) g[i] = (gelu ? cpu_gelu_tanh(g[i]) : cpu_silu(g[i])) * u[i];
}

VEC8_AVX2 static void glu_avx2(bool gelu, float *g, const float *u, size_t n) {
  glu_body(gelu, g, u, n);
}

static void glu_base(bool gelu, float *g, const float *u, size_t n) { glu_body(gelu, g, u, n); }

typedef struct glu_job {
  bool avx2;
  bool gelu;
  float *g;
  const float *u;
  int n_tokens, d;
  cpu_act *act;
  unsigned need;
} glu_job;

static void glu_run(void *ctx, int ith, int nth) {
  const glu_job *j = ctx;
  long lo, hi;
  wk_split(j->n_tokens, ith, nth, 1, &lo, &hi);
  const size_t off = (size_t)lo * (size_t)j->d, n = (size_t)(hi - lo) * (size_t)j->d;
  if (j->avx2) glu_avx2(j->gelu, j->g + off, j->u + off, n);
  else glu_base(j->gelu, j->g + off, j->u + off, n);
  if (j->act && j->need) cpu_act_convert_rows(j->act, j->need, (int)lo, (int)hi);
}

void cpu_glu(wk_pool *pool, bool avx2, bool gelu, float *g, const float *u, int n_tokens, int d,
             cpu_act *act, unsigned need) {
  glu_job j = {avx2, gelu, g, u, n_tokens, d, act, need};
  if (act) cpu_act_set(act, g, n_tokens, d);
  if (n_tokens < 2) glu_run(&j, 0, 1);
  else wk_pool_run(pool, glu_run, &j);
  if (act) act->ready |= need;
}
