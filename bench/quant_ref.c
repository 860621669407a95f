// Throughput of the scalar reference quant routines, one line per type:
// dequantize and dot (GB/s of quantized bytes read, and Gvalues/s), and
// quantize (Mvalues/s). These are the baseline the SIMD kernels must beat;
// they are not meant to be fast.
//   usage: bench_quant_ref [n_values (default 1M)]
#include <stdio.h>
#include <stdlib.h>

#include "base/timer.h"
#include "quant/quant.h"
#include "quant/types.h"

static const int k_types[] = {WK_F32,  WK_F16,    WK_BF16,    WK_Q4_0,     WK_Q4_1,    WK_Q5_0,
                              WK_Q5_1, WK_Q8_0,   WK_Q2_K,    WK_Q3_K,     WK_Q4_K,    WK_Q5_K,
                              WK_Q6_K, WK_Q8_K,   WK_IQ4_NL,  WK_IQ4_XS,   WK_FP8_E4M3, WK_FP8_E5M2};

// Runs fn until at least 0.2 s have passed; returns seconds per call.
#define TIME_IT(expr)                                        \
  ({                                                         \
    int reps_ = 0;                                           \
    double t0_ = wk_now(), dt_;                              \
    do {                                                     \
      expr;                                                  \
      reps_++;                                               \
    } while ((dt_ = wk_now() - t0_) < 0.2);                  \
    dt_ / reps_;                                             \
  })

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1 << 20;
  n -= n % 256;
  if (n <= 0) {
    fprintf(stderr, "bench_quant_ref: expected a positive value count, found '%s'\n", argv[1]);
    return 1;
  }
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  void *q = malloc(wk_row_size(WK_F32, n));  // the largest row
  if (!x || !y || !q) return 1;
  unsigned s = 12345;
  for (long i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    x[i] = (float)((int)(s >> 8) % 2001 - 1000) / 250.0f;
  }
  printf("%-9s %12s %12s %12s %14s\n", "type", "deq GB/s", "dot GB/s", "dot Gval/s", "quant Mval/s");
  volatile float sink = 0;
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    int t = k_types[i];
    double bytes = (double)wk_row_size(t, n);
    double tq = TIME_IT(wk_quantize_row(t, x, q, n));
    double td = TIME_IT(wk_dequantize_row(t, q, y, n));
    double tdot = TIME_IT(sink += wk_dot_row(t, q, x, n));
    printf("%-9s %12.2f %12.2f %12.3f %14.1f\n", wk_type_get(t)->name, bytes / td * 1e-9,
           bytes / tdot * 1e-9, n / tdot * 1e-9, n / tq * 1e-6);
  }
  (void)sink;
  free(x), free(y), free(q);
  return 0;
}
