// x86 kernels for the 32-element block formats against WK_ACT_Q8 activations:
// Q4_0, Q5_0 (unsigned codes; the fixed offset comes off the integer sum
// through the activation block sum), Q4_1, Q5_1 (unsigned codes; the min
// times the activation sum is added in float) and Q8_0, IQ4_NL (signed
// codes, sign transfer).
// Included by the level files after x86_tile.h.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_Q8_H
#define WICK_BACKEND_CPU_KERNELS_X86_Q8_H

// One decoded weight block: value = d * w + m, with w the codes.
typedef struct {
  __m256i u;   // unsigned codes, or |codes| for the signed formats
  __m256i sg;  // the signed codes (signed formats only)
  __m256 d;    // scale, broadcast
  __m256 m;    // min, broadcast (Q4_1, Q5_1)
} kq8w;

// 0x10 in byte i where bit i of the 32-bit qh is set.
KT static inline __m256i kq5_high(const uint8_t *qh4) {
  uint32_t qh;
  memcpy(&qh, qh4, 4);
  const __m256i sel = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                         0x0303030303030303LL);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), sel);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

KT static inline void kq4_0_prep(const uint8_t *b, kq8w *o) {
  o->u = knibbles16(b + 2);
  o->d = kbf16(b);
}
KT static inline void kq4_1_prep(const uint8_t *b, kq8w *o) {
  o->u = knibbles16(b + 4);
  o->d = kbf16(b);
  o->m = kbf16(b + 2);
}
KT static inline void kq5_0_prep(const uint8_t *b, kq8w *o) {
  o->u = _mm256_or_si256(knibbles16(b + 6), kq5_high(b + 2));
  o->d = kbf16(b);
}
KT static inline void kq5_1_prep(const uint8_t *b, kq8w *o) {
  o->u = _mm256_or_si256(knibbles16(b + 8), kq5_high(b + 4));
  o->d = kbf16(b);
  o->m = kbf16(b + 2);
}
KT static inline void kq8_0_prep(const uint8_t *b, kq8w *o) {
  o->sg = _mm256_loadu_si256((const __m256i *)(b + 2));
  o->u = _mm256_abs_epi8(o->sg);
  o->d = kbf16(b);
}
KT static inline void kiq4_nl_prep(const uint8_t *b, kq8w *o) {
  const __m256i lut =
      _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values));
  __m256i q = knibbles16(b + 2);
  o->sg = _mm256_shuffle_epi8(lut, q);
  o->u = _mm256_shuffle_epi8(_mm256_abs_epi8(lut), q);
  o->d = kbf16(b);
}

KT static inline void kq8w_load(const kq8w *p, const uint8_t *b, int s, kq8w *wv) { *wv = *p; }

KT static inline __m256i kq8u_mac(const kq8w *w, const wk_act_q8 *a, int s, __m256i is) {
  return kmac_u8s8(is, w->u, kload(a->q));
}
KT static inline __m256i kq8s_mac(const kq8w *w, const wk_act_q8 *a, int s, __m256i is) {
  return kmac_u8s8(is, w->u, _mm256_sign_epi8(kload(a->q), w->sg));
}
KT static inline __m256 kq8_scale(const kq8w *p, const wk_act_q8 *a, __m256i is, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_mul_ps(p->d, _mm256_set1_ps(a->d)), _mm256_cvtepi32_ps(is), acc);
}
// value = d * (code - OFF): subtract OFF * sum(q) from the integer sum.
#define KQ8_FIN_OFF(NAME, OFF)                                                             \
  KT static inline __m256 NAME(const kq8w *p, const wk_act_q8 *a, __m256i is, __m256 acc) { \
    return kq8_scale(p, a, _mm256_sub_epi32(is, klane0i((OFF) * a->sum)), acc);           \
  }
KQ8_FIN_OFF(kq8o8_fin, 8)
KQ8_FIN_OFF(kq8o16_fin, 16)
// value = d * code + m: add m * d_a * sum(q).
KT static inline __m256 kq8m_fin(const kq8w *p, const wk_act_q8 *a, __m256i is, __m256 acc) {
  acc = kq8_scale(p, a, is, acc);
  return _mm256_fmadd_ps(p->m, klane0(a->d * (float)a->sum), acc);
}
#define kq8s_fin kq8_scale

// The names KTILE expects, for type T with block bytes B, codes unsigned (u)
// or signed (s), and FIN the block's scaling (offset, min or plain).
#define KQ8_TYPE(T, B, KIND, FIN)                                                              \
  enum { T##_BYTES = B, T##_NSTEP = 1 };                                                    \
  typedef wk_act_q8 T##_act;                                                                \
  typedef kq8w T##_row;                                                                     \
  typedef kq8w T##_wv;                                                                      \
  KT static inline void T##_load(const kq8w *p, const uint8_t *b, int s, kq8w *wv) {        \
    kq8w_load(p, b, s, wv);                                                                 \
  }                                                                                         \
  KT static inline __m256i T##_mac(const kq8w *w, const wk_act_q8 *a, int s, __m256i is) {  \
    return kq8##KIND##_mac(w, a, s, is);                                                    \
  }                                                                                         \
  KT static inline __m256 T##_fin(const kq8w *p, const wk_act_q8 *a, __m256i is, __m256 c) { \
    return FIN(p, a, is, c);                                                    \
  }                                                                                         \
  KGEMM(T, 32, KQ8_RM, KQ8_RN)

KQ8_TYPE(kq4_0, 18, u, kq8o8_fin)
KQ8_TYPE(kq4_1, 20, u, kq8m_fin)
KQ8_TYPE(kq5_0, 22, u, kq8o16_fin)
KQ8_TYPE(kq5_1, 24, u, kq8m_fin)
KQ8_TYPE(kq8_0, 34, s, kq8s_fin)
KQ8_TYPE(kiq4_nl, 18, s, kq8s_fin)

#endif
