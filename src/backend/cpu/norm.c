// RMSNorm and small element-wise ops (sums of squares in double).
#include <math.h>

#include "backend/cpu/cpu_ops.h"

void cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n_rows, int d, float eps) {
  for (int64_t r = 0; r < n_rows; r++) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    double ss = 0;
    for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
    float inv = (float)(1.0 / sqrt(ss / d + (double)eps));
    if (w)
      for (int i = 0; i < d; i++) yr[i] = xr[i] * inv * w[i];
    else
      for (int i = 0; i < d; i++) yr[i] = xr[i] * inv;
  }
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
