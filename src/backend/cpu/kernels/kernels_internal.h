// Shared between the kernel table (kernels.c) and the per-level kernel files.
#ifndef WICK_BACKEND_CPU_KERNELS_INTERNAL_H
#define WICK_BACKEND_CPU_KERNELS_INTERNAL_H

#include <string.h>

#include "backend/cpu/kernels/kernels.h"

// The 16 values an IQ4_NL / IQ4_XS nibble stands for.
extern const int8_t wk_kern_iq4nl_values[16];

// The CPU's kind, for the AVX-512 one-token tiles chosen by it (tuned per
// kind: Zen 4 runs 512-bit operations in two 256-bit halves, Zen 5 and
// Intel at full width): Intel, AMD Zen 4 and older (and any other maker), or
// AMD Zen 5 and later (family 26 on). WICK_CPU_VENDOR=intel, zen4 or zen5 in
// the environment (amd: zen4) overrides cpuid, so that one CPU's tests cover
// every kind's tiles.
enum { WK_CPU_INTEL, WK_CPU_ZEN4, WK_CPU_ZEN5 };
int wk_kern_cpu_kind(void);

// Per-level lookups: fill *dot and *gemm and return 1 when the level has
// kernels for weight type `type`, else return 0.
int wk_kern_scalar_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
int wk_kern_avx2_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
int wk_kern_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// The AVX-512 level's 512-bit Q2_K and Q3_K kernels (kernels_avx512_k.c):
// 0 for other types, or when the CPU lacks AVX-512 VBMI or GFNI.
int wk_kern_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);
// The AVX-512 BW level's kernels (kernels_avx512bw_k.c: Q3_K's one-token
// tile, bit-identical to the AVX2 level's): 0 for the other types.
int wk_kern_avx512bw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);

// Activation converters; every level produces the same bytes.
void wk_kern_quantize_f32(const float *x, void *xq, int64_t n);
void wk_kern_quantize_f32s(const float *x, void *xq, int64_t n);
void wk_kern_quantize_q8(const float *x, void *xq, int64_t n);
void wk_kern_quantize_q8k(const float *x, void *xq, int64_t n);
// The same results with AVX2 (for the AVX2 and AVX-512 levels).
void wk_kern_avx2_quantize_q8(const float *x, void *xq, int64_t n);
void wk_kern_avx2_quantize_q8k(const float *x, void *xq, int64_t n);

// Little-endian block fields.
static inline uint16_t wk_kern_u16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}
static inline float wk_kern_f32(const uint8_t *p) {
  float v;
  memcpy(&v, p, 4);
  return v;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block, from
// its 12 packed scale bytes.
static inline void wk_kern_scale_min_k4(const uint8_t *s, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 6-bit scale (0..63, before subtracting 32) of sub-block i (0..15) of a
// Q3_K block, from its 12 packed scale bytes.
static inline int wk_kern_scale_q3k(const uint8_t *s, int i) {
  int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
  int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
  return lo | (hi << 4);
}

// The 6-bit scale (0..63, before subtracting 32) of sub-block ib (0..7) of an
// IQ4_XS block: scales_h at byte 2, scales_l at bytes 4..7.
static inline int wk_kern_scale_iq4xs(const uint8_t *b, int ib) {
  int lo = (b[4 + ib / 2] >> (4 * (ib & 1))) & 15;
  int hi = (wk_kern_u16(b + 2) >> (2 * ib)) & 3;
  return lo | (hi << 4);
}

#endif
