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

// exp(x) lane by lane for x <= 0 (-inf and anything below -87 give 0), x
// of any float vector type T with TI its int vector type of as many lanes:
// 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2, e^r by its Taylor
// series to r^7 (truncation error < 1e-8 relative). (A GNU statement
// expression; scalars in vector operations stand for every lane.)
#define VEC_EXP_NONPOS(T, TI, x0)                                                        \
  ({                                                                                     \
    T x_ = (x0);                                                                         \
    const TI keep_ = x_ > -87.0f;                                                        \
    x_ = (T)(((TI)x_ & keep_) | ((TI)((T){0} + -87.0f) & ~keep_));                       \
    const T fx_ = x_ * 1.44269504088896341f;                                             \
    const TI n_ = __builtin_convertvector(fx_ - 0.5f, TI); /* round, as fx <= 0 */       \
    const T nf_ = __builtin_convertvector(n_, T);                                        \
    const T r_ = (x_ - nf_ * 0.693145751953125f) - nf_ * 1.428606765330187e-06f;         \
    T e_ = (T){0} + 1.0f / 5040;                                                         \
    e_ = e_ * r_ + 1.0f / 720;                                                           \
    e_ = e_ * r_ + 1.0f / 120;                                                           \
    e_ = e_ * r_ + 1.0f / 24;                                                            \
    e_ = e_ * r_ + 1.0f / 6;                                                             \
    e_ = e_ * r_ + 0.5f;                                                                 \
    e_ = e_ * r_ + 1.0f;                                                                 \
    e_ = e_ * r_ + 1.0f;                                                                 \
    const TI two_n_ = (n_ + 127) << 23;                                                  \
    (T)((TI)(e_ * (T)two_n_) & keep_);                                                   \
  })

// p[0..8) = exp(p[i]) for p[i] <= 0 (VEC_EXP_NONPOS).
INL void vec8_exp_nonpos(float *p) { *(v8fu *)p = VEC_EXP_NONPOS(v8f, v8i, *(v8fu *)p); }

#endif
