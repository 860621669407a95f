// Gated activations of the MLP.
#include <math.h>

#include "backend/cpu/cpu_ops.h"

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
