// 8-float vector helpers for the CPU ops (GCC vector extensions). Everything
// here is always inlined into its caller, so one source compiles to AVX2 + FMA
// code inside functions marked VEC8_AVX2 and to baseline code elsewhere; no
// vector is passed by value across a call.
#ifndef WICK_BACKEND_CPU_VEC8_H
#define WICK_BACKEND_CPU_VEC8_H

typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef float v8fu __attribute__((vector_size(32), aligned(4), may_alias));  // unaligned
#define SPL(x) ((v8f){x, x, x, x, x, x, x, x})
#define INL static inline __attribute__((always_inline))
#define VEC8_AVX2 __attribute__((target("avx2,fma")))
#define UNROLL8 _Pragma("GCC unroll 8")

INL float vec8_hsum(v8f s) {
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// *a = the lane-wise larger of *a and b
INL void vec8_max(v8f *a, const v8f *b) {
  const v8i gt = *b > *a;
  *a = (v8f)(((v8i)*b & gt) | ((v8i)*a & ~gt));
}

// The largest lane of *p, in registers (no trip through memory).
INL float vec8_hmax(const v8f *p) {
  v8f a = *p, t = __builtin_shuffle(a, (v8i){4, 5, 6, 7, 0, 1, 2, 3});
  vec8_max(&a, &t);
  t = __builtin_shuffle(a, (v8i){2, 3, 0, 1, 6, 7, 4, 5});
  vec8_max(&a, &t);
  t = __builtin_shuffle(a, (v8i){1, 0, 3, 2, 5, 4, 7, 6});
  vec8_max(&a, &t);
  return a[0];
}

// p[0..8) = exp(p[i]) for p[i] <= 0 (-inf and anything below -87 give 0):
// 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2, e^r by its Taylor
// series to r^7 (truncation error < 1e-8 relative).
INL void vec8_exp_nonpos(float *p) {
  v8f x = *(v8fu *)p;
  const v8i keep = x > SPL(-87.0f);
  x = (v8f)(((v8i)x & keep) | ((v8i)SPL(-87.0f) & ~keep));
  const v8f fx = x * SPL(1.44269504088896341f);
  const v8i n = __builtin_convertvector(fx - SPL(0.5f), v8i);  // round, as fx <= 0
  const v8f nf = __builtin_convertvector(n, v8f);
  const v8f r = (x - nf * SPL(0.693145751953125f)) - nf * SPL(1.428606765330187e-06f);
  v8f e = SPL(1.0f / 5040);
  e = e * r + SPL(1.0f / 720);
  e = e * r + SPL(1.0f / 120);
  e = e * r + SPL(1.0f / 24);
  e = e * r + SPL(1.0f / 6);
  e = e * r + SPL(0.5f);
  e = e * r + SPL(1.0f);
  e = e * r + SPL(1.0f);
  const v8i two_n = (n + 127) << 23;
  *(v8fu *)p = (v8f)((v8i)(e * (v8f)two_n) & keep);
}

#endif
