// RMSNorm and small element-wise ops (sums of squares in double), and the
// fused residual step between blocks.
#include <math.h>

#include "backend/cpu/cpu_ops.h"

// Sum of squares in four independent double chains (one chain waits an add
// latency per element: the decode step's norms ran on one thread while the
// others waited), added pairwise at the end.
static double sum_sq(const float *x, int d) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= d; i += 4) {
    s0 += (double)x[i] * x[i];
    s1 += (double)x[i + 1] * x[i + 1];
    s2 += (double)x[i + 2] * x[i + 2];
    s3 += (double)x[i + 3] * x[i + 3];
  }
  for (; i < d; i++) s0 += (double)x[i] * x[i];
  return (s0 + s1) + (s2 + s3);
}

static void norm_row(float *y, const float *x, const float *w, int d, float eps) {
  const double ss = sum_sq(x, d);
  float inv = (float)(1.0 / sqrt(ss / d + (double)eps));
  if (w)
    for (int i = 0; i < d; i++) y[i] = x[i] * inv * w[i];
  else
    for (int i = 0; i < d; i++) y[i] = x[i] * inv;
}

void cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n_rows, int d, float eps) {
  for (int64_t r = 0; r < n_rows; r++) norm_row(y + r * d, x + r * d, w, d, eps);
}

void cpu_add(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void cpu_add_bias(float *x, const float *b, int64_t n_rows, int d) {
  for (int64_t r = 0; r < n_rows; r++)
    for (int i = 0; i < d; i++) x[r * d + i] += b[i];
}

void cpu_softcap(float *x, size_t n, float c) {
  for (size_t i = 0; i < n; i++) x[i] = c * tanhf(x[i] / c);
}

static void resid_run(void *ctx, int ith, int nth) {
  const cpu_resid *r = ctx;
  long lo, hi;
  wk_split(r->n_tokens, ith, nth, 1, &lo, &hi);
  const size_t d = (size_t)r->d;
  for (long t = lo; t < hi; t++) {
    float *x = r->x + (size_t)t * d;
    if (r->add) {
      float *add = r->add + (size_t)t * d;
      if (r->add_w) norm_row(add, add, r->add_w, r->d, r->eps);
      cpu_add(x, add, d);
    }
    if (r->out) norm_row(r->out + (size_t)t * d, x, r->w, r->d, r->eps);
  }
  if (r->out && r->act && r->need) cpu_act_convert_rows(r->act, r->need, (int)lo, (int)hi);
}

void cpu_resid_norm(wk_pool *pool, const cpu_resid *r) {
  if (r->out && r->act) cpu_act_set(r->act, r->out, r->n_tokens, r->d);
  if (r->n_tokens < 4) resid_run((void *)r, 0, 1);  // not worth waking the pool
  else wk_pool_run(pool, resid_run, (void *)r);
  if (r->out && r->act) r->act->ready |= r->need;
}
