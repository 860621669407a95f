// x86 kernels for float weights against f32 activations: F32, F16, BF16 and
// wick's block-scaled FP8 (E4M3, E5M2). Weights are widened to f32 in
// registers and multiplied with fused multiply-adds. Each step widens 32
// weights into four vectors of 8 (weights 0-7, 8-15, 16-23, 24-31).
// Included after x86_tile.h.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_F_H
#define WICK_BACKEND_CPU_KERNELS_X86_F_H

// Same shape as KTILE, in float. A block's products per (row, token) go to
// a partial sum: with T_CHAIN as one chain of fused multiply-adds (fewest
// instructions: FP8, whose decode is the bottleneck), else each step's 32
// into a fresh vector (a multiply, then three fused multiply-adds) added to
// the partial, which keeps the chains short (faster multi-token tiles for the
// cheap-to-decode types). FP8 blocks scale the partial sum into acc with one
// fused multiply-add; unscaled types add it.
//
// One token of FP8: each row's block KF_AHEAD bytes ahead is prefetched (one
// thread from memory, 4096x14336 and 14336x4096: fp8_e4m3 15.2-15.9 ->
// 16.3-16.4 GB/s, three alternating runs; F16/BF16, already at the read
// bandwidth, lost ~3% with it and go without). The distance: 768, on Zen 5
// 2048 (one thread from memory, FP8 E4M3 61-65 -> 63-75% of the paired read
// passes, two rounds; session 25), set by kernels.c (wk_kernel_best_level).
extern size_t wk_kf_ahead;
#define KF_AHEAD wk_kf_ahead
#define KFTILE(T, RM, RN) KFTILE_(T, RM, RN)
#define KFTILE_(T, RM, RN)                                                                   \
  KT static void T##_tile_##RM##x##RN(const uint8_t *w, size_t ws, int64_t nb,                \
                                      const uint8_t *xq, size_t xs, float *y, size_t ys,      \
                                      size_t yr) {                                            \
    __m256 acc[RM][RN];                                                                       \
    KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++) acc[r][t] =     \
        _mm256_setzero_ps();                                                                  \
    for (int64_t b = 0; b < nb; b++) {                                                        \
      const float *x[RN];                                                                     \
      __m256 part[RM][RN];                                                                    \
      KUNROLL for (int t = 0; t < RN; t++) x[t] = (const float *)(xq + t * xs) + b * T##_QK;  \
      if (RN == 1 && T##_SCALED)                                                              \
        KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int o = 0; o < T##_BYTES; o += 64)  \
            _mm_prefetch((const char *)w + r * ws + b * T##_BYTES + KF_AHEAD + o, _MM_HINT_T0); \
      KUNROLL for (int s = 0; s < T##_QK / 32; s++) {                                         \
        KUNROLL for (int r = 0; r < RM; r++) {                                                \
          __m256 wv[4];                                                                       \
          T##_load(w + r * ws + b * T##_BYTES, s, wv);                                        \
          KUNROLL for (int t = 0; t < RN; t++) {                                              \
            const float *xs_ = x[t] + 32 * s;                                                 \
            __m256 p = T##_CHAIN && s ? part[r][t] : _mm256_setzero_ps();                     \
            p = T##_CHAIN && s ? _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xs_), p)              \
                               : _mm256_mul_ps(wv[0], _mm256_loadu_ps(xs_));                  \
            KUNROLL for (int i = 1; i < 4; i++)                                               \
              p = _mm256_fmadd_ps(wv[i], _mm256_loadu_ps(xs_ + 8 * i), p);                    \
            part[r][t] = T##_CHAIN || s == 0 ? p : _mm256_add_ps(part[r][t], p);              \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
      KUNROLL for (int r = 0; r < RM; r++) {                                                  \
        __m256 sc = _mm256_set1_ps(T##_scale(w + r * ws + b * T##_BYTES));                    \
        KUNROLL for (int t = 0; t < RN; t++) acc[r][t] =                                      \
            T##_SCALED ? _mm256_fmadd_ps(sc, part[r][t], acc[r][t])                           \
                       : _mm256_add_ps(acc[r][t], part[r][t]);                                \
      }                                                                                       \
    }                                                                                         \
    KUNROLL for (int r = 0; r < RM; r++) KUNROLL for (int t = 0; t < RN; t++)                 \
        y[t * ys + r * yr] = khsum(acc[r][t]);                                                \
  }

// vec_dot and gemm of float type T; k need not be a multiple of T_QK for
// the unscaled types: the tail is added element by element (T_tail).
#define KFGEMM(T) KFGEMM_(T, KF_RM, KF_RN)
#define KFGEMM_(T, KRM, KRN)                                                                        \
  KFTILE(T, KRM, KRN)                                                                       \
  KFTILE(T, 1, KRN)                                                                         \
  KFTILE(T, KRM, 1)                                                                         \
  KFTILE(T, 1, 1)                                                                           \
  KT static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                  \
    float y;                                                                                \
    int64_t nb = n / T##_QK, done = nb * T##_QK;                                            \
    T##_tile_1x1(w, 0, nb, xq, 0, &y, 0, 0);                                                   \
    if (done < n)                                                                           \
      y += T##_tail((const uint8_t *)w + nb * T##_BYTES, (const float *)xq + done, n - done); \
    return y;                                                                               \
  }                                                                                         \
  KT static void T##_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv,  \
                          size_t xs, int n_tokens, float *y, size_t ys) {                   \
    const uint8_t *w = wv, *xq = xqv;                                                       \
    int64_t nb = k / T##_QK, done = nb * T##_QK;                                            \
    KGEMM_WALK(T, KRM, KRN)                                                                 \
    if (done < k)                                                                           \
      for (int t = 0; t < n_tokens; t++)                                                    \
        for (int r = 0; r < rows; r++)                                                      \
          y[t * ys + r] += T##_tail(w + (size_t)r * ws + nb * T##_BYTES,                    \
                                    (const float *)(xq + t * xs) + done, k - done);         \
  }

// ---- F32, F16, BF16: blocks of 64 for the tiles, any tail ------------------

KT static inline float kf_one(float f) { return (void)f, 1.0f; }

enum { kf32_QK = 64, kf32_BYTES = 256, kf32_SCALED = 0, kf32_CHAIN = 0 };
KT static inline float kf32_scale(const uint8_t *b) { return kf_one(0); }
// Written out: as a loop GCC turns this into a 16-byte memory copy through the
// stack, and the 32-byte reloads then stall on store forwarding.
KT static inline void kf32_load(const uint8_t *b, int s, __m256 v[4]) {
  const float *p = (const float *)(b + 128 * s);
  v[0] = _mm256_loadu_ps(p);
  v[1] = _mm256_loadu_ps(p + 8);
  v[2] = _mm256_loadu_ps(p + 16);
  v[3] = _mm256_loadu_ps(p + 24);
}
KT static inline float kf32_tail(const uint8_t *b, const float *x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += wk_kern_f32(b + 4 * i) * x[i];
  return s;
}
KFGEMM(kf32)

enum { kf16_QK = 64, kf16_BYTES = 128, kf16_SCALED = 0, kf16_CHAIN = 0 };
KT static inline float kf16_scale(const uint8_t *b) { return kf_one(0); }
KT static inline void kf16_load(const uint8_t *b, int s, __m256 v[4]) {
  KUNROLL for (int i = 0; i < 4; i++)
    v[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 64 * s + 16 * i)));
}
KT static inline float kf16_tail(const uint8_t *b, const float *x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += kf16(b + 2 * i) * x[i];
  return s;
}
KFGEMM(kf16)

enum { kbf16_QK = 64, kbf16_BYTES = 128, kbf16_SCALED = 0, kbf16_CHAIN = 0 };
KT static inline float kbf16_scale(const uint8_t *b) { return kf_one(0); }
KT static inline void kbf16_load(const uint8_t *b, int s, __m256 v[4]) {
  KUNROLL for (int i = 0; i < 4; i++) {
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 64 * s + 16 * i)));
    v[i] = _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
}
KT static inline float kbf16_tail(const uint8_t *b, const float *x, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)wk_kern_u16(b + 2 * i) << 16;
    float f;
    memcpy(&f, &u, 4);
    s += f * x[i];
  }
  return s;
}
KFGEMM(kbf16)

// ---- FP8: 128 codes after an f32 scale -------------------------------------

// FP8 codes become f32 without a half conversion (which takes the shuffle
// and shift ports the unpacking also needs), against WK_ACT_F32S (x * 2^64).
// E5M2: a code sign-extended to 32 bits and shifted left by 21 has its sign
// at bit 31 (and 28..30), its 5 exponent bits at 23..27 and its 2 mantissa
// bits at 21..22; without bits 28..30 that reads as value * 2^-112 exactly
// (subnormal for exponent 0; the codes of exponent 31, infinities and NaNs,
// read as finite values: wick's quantizer never writes them). The products
// are value * x * 2^-48, and the block scale takes the 2^48 back.
enum { kfp8_e5m2_QK = 128, kfp8_e5m2_BYTES = 132, kfp8_e5m2_SCALED = 1, kfp8_e5m2_CHAIN = 1 };
KT static inline float kfp8_e5m2_scale(const uint8_t *b) { return wk_kern_f32(b) * 0x1p48f; }
KT static inline void kfp8_e5m2_load(const uint8_t *b, int s, __m256 v[4]) {
  KUNROLL for (int i = 0; i < 4; i++) {
    __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 4 + 32 * s + 8 * i)));
    c = _mm256_and_si256(_mm256_slli_epi32(c, 21), _mm256_set1_epi32((int)0x8fe00000u));
    v[i] = _mm256_castsi256_ps(c);
  }
}
KT static inline float kfp8_e5m2_tail(const uint8_t *b, const float *x, int64_t n) {
  return (void)b, (void)x, (void)n, 0.0f;
}
KFGEMM(kfp8_e5m2)

// E4M3: shifted left by 20, the sign at bit 31 (and 27..30), 4 exponent bits
// at 23..26, 3 mantissa bits at 20..22; without bits 27..30, value * 2^-120
// exactly (subnormal for exponent 0). The products are value * x * 2^-56.
enum { kfp8_e4m3_QK = 128, kfp8_e4m3_BYTES = 132, kfp8_e4m3_SCALED = 1, kfp8_e4m3_CHAIN = 1 };
KT static inline float kfp8_e4m3_scale(const uint8_t *b) { return wk_kern_f32(b) * 0x1p56f; }
KT static inline __m256 kfp8_e4m3_cvt(const uint8_t *p) {
  __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
  v = _mm256_and_si256(_mm256_slli_epi32(v, 20), _mm256_set1_epi32((int)0x87f00000u));
  return _mm256_castsi256_ps(v);
}
KT static inline void kfp8_e4m3_load(const uint8_t *b, int s, __m256 v[4]) {
  KUNROLL for (int i = 0; i < 4; i++) v[i] = kfp8_e4m3_cvt(b + 4 + 32 * s + 8 * i);
}
KT static inline float kfp8_e4m3_tail(const uint8_t *b, const float *x, int64_t n) {
  return (void)b, (void)x, (void)n, 0.0f;
}
KFGEMM(kfp8_e4m3)

#endif
