// x86 kernels for the 256-element super-block formats against WK_ACT_Q8K
// activations: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS. Each of the 4 steps
// covers 64 weights as two 32-byte vectors of codes; sub-block scales are
// applied as 16-bit multipliers in the pairwise add (madd), so a block's sums
// stay integer until one float scale at the end. Offsets and mins are taken
// through the activation's 16-element sums. Included after x86_tile.h.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_K_H
#define WICK_BACKEND_CPU_KERNELS_X86_K_H

// Sub-block scales as int16 for the madd that applies them: sc16 holds 8
// int16 in each 128-bit half, and kpick16(sc16, k) puts element k of each
// half in all of that half's 16-bit lanes (one in-lane byte shuffle; vpermd
// would cost more than twice as much on Zen 3). Formats with 8 sub-blocks of
// 32 keep their scales in order in both halves (one scale per vector);
// those with 16 sub-blocks of 16 keep in element k the scales of the low and
// high 16 codes of a block's k-th vector (kscales16).
KT static inline __m256i kpick16(__m256i sc16, int k) {
  return _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(2 * k | (2 * k + 1) << 8)));
}
// 16 signed (or unsigned) byte scales -> sc16 with element k = scales
// order[k] (low half) and order[k + 8] (high half).
KT static inline __m256i kscales16(__m128i sc, __m128i order, int is_signed) {
  sc = _mm_shuffle_epi8(sc, order);
  return is_signed ? _mm256_cvtepi8_epi16(sc) : _mm256_cvtepu8_epi16(sc);
}
// Vector k covers scales 2k (low 16 codes) and 2k + 1 (Q2_K, Q3_K).
KT static inline __m128i kscales_evenodd(void) {
  return _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
}

// Bits [from, from + width) of every byte moved to [to, to + width), others 0.
KT static inline __m256i kbits(__m256i x, int from, int to, int width) {
  __m256i v = from >= to ? _mm256_srli_epi16(x, from - to) : _mm256_slli_epi16(x, to - from);
  return _mm256_and_si256(v, _mm256_set1_epi8((char)(((1 << width) - 1) << to)));
}

KT static inline __m256i klo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
KT static inline __m256i khi4(__m256i v) { return klo4(_mm256_srli_epi16(v, 4)); }

// isum += sum over pairs of (u * s) * scale16 (u unsigned, s signed bytes).
KT static inline __m256i kmacs(__m256i is, __m256i u, __m256i s, __m256i sc16) {
  return _mm256_add_epi32(is, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16));
}

// One step's weights: two 32-code vectors (unsigned, or |code| with signs in
// sg for IQ4_XS) and their 16-bit scales.
typedef struct {
  __m256i c0, c1, s0, s1, sg0, sg1;
} kkw;

// Per row and block: sub-block scales (sc16, see kpick16), what the
// activation sums are multiplied by (mins, or scales for a fixed offset),
// float scales.
typedef struct {
  __m256i sc16;
  __m256i m16;
  float d, dmin;
} kkrow;

#define KK_TYPE(T, B)                 \
  enum { T##_BYTES = B, T##_NSTEP = 4 }; \
  typedef wk_act_q8k T##_act;         \
  typedef kkrow T##_row;              \
  typedef kkw T##_wv;

// ---- Q4_K / Q5_K: 8 sub-blocks of 32, 6-bit scales and mins ----------------

// The 8 scales (bytes 0-7) then the 8 mins (bytes 8-15) of a Q4_K/Q5_K
// block, from its 12 packed bytes at s (the 16-byte load reads 4 bytes of
// codes past them, unused). With a0, a1, a2 the three little-endian words:
// scales 0-3 = a0 & 63, mins 0-3 = a1 & 63, scales 4-7 = low nibbles of a2
// with the top 2 bits of a0 above, mins 4-7 = high nibbles of a2 with the top
// 2 bits of a1 above.
KT static inline __m128i kunpack_k4(const uint8_t *s) {
  __m128i x = _mm_loadu_si128((const __m128i *)s);                   // a0 a1 a2 -
  __m128i lo = _mm_and_si128(x, _mm_set1_epi8(63));                  // sc0-3 m0-3
  __m128i a2 = _mm_srlv_epi32(_mm_shuffle_epi32(x, 0xaa), _mm_setr_epi32(0, 4, 0, 0));
  __m128i top = _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi8(0x30));  // bits 6-7 -> 4-5
  __m128i hi = _mm_or_si128(_mm_and_si128(a2, _mm_set1_epi8(15)), top);     // sc4-7 m4-7
  return _mm_unpacklo_epi32(lo, hi);  // sc0-3 sc4-7 m0-3 m4-7
}

KT static inline void kk45_prep(const uint8_t *b, kkrow *o) {
  __m128i v = kunpack_k4(b + 4);
  o->sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
  const __m128i twice = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  o->m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, twice));  // m0 m0 m1 m1 .. (per 16)
  o->d = kf16(b);
  o->dmin = kf16(b + 2);
}

KT static inline __m256i kk45_mac(const kkw *w, const wk_act_q8k *a, int s, __m256i is) {
  is = kmacs(is, w->c0, kload(a->q + 64 * s), w->s0);
  return kmacs(is, w->c1, kload(a->q + 64 * s + 32), w->s1);
}

// d * sum - dmin * sum(mins * bsum), scaled by the activation scale.
KT static inline __m256 kk_fin_min(const kkrow *p, const wk_act_q8k *a, __m256i is,
                                   __m256 acc) {
  __m256i ms = _mm256_madd_epi16(kload(a->bsum), p->m16);
  acc = _mm256_fmadd_ps(_mm256_set1_ps(p->d * a->d), _mm256_cvtepi32_ps(is), acc);
  return _mm256_fmadd_ps(_mm256_set1_ps(-p->dmin * a->d), _mm256_cvtepi32_ps(ms), acc);
}

KK_TYPE(kq4_k, 144)
#define kq4_k_prep kk45_prep
#define kq4_k_mac kk45_mac
#define kq4_k_fin kk_fin_min
KT static inline void kq4_k_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  __m256i v = kload(b + 16 + 32 * s);
  w->c0 = klo4(v);
  w->c1 = khi4(v);
  w->s0 = kpick16(p->sc16, 2 * s);
  w->s1 = kpick16(p->sc16, 2 * s + 1);
}
KGEMM(kq4_k, 256, KK_RM, KK_RN)

KK_TYPE(kq5_k, 176)
#define kq5_k_prep kk45_prep
#define kq5_k_mac kk45_mac
#define kq5_k_fin kk_fin_min
KT static inline void kq5_k_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  __m256i v = kload(b + 48 + 32 * s), qh = kload(b + 16);
  w->c0 = _mm256_or_si256(klo4(v), kbits(qh, 2 * s, 4, 1));
  w->c1 = _mm256_or_si256(khi4(v), kbits(qh, 2 * s + 1, 4, 1));
  w->s0 = kpick16(p->sc16, 2 * s);
  w->s1 = kpick16(p->sc16, 2 * s + 1);
}
KGEMM(kq5_k, 256, KK_RM, KK_RN)

// ---- Q2_K / Q3_K / Q6_K: 16 sub-blocks of 16 ------------------------------

// Steps cover weights 64 s .. 64 s + 63 (Q2_K, Q3_K).
KT static inline __m256i kk16_mac(const kkw *w, const wk_act_q8k *a, int s, __m256i is) {
  is = kmacs(is, w->c0, kload(a->q + 64 * s), w->s0);
  return kmacs(is, w->c1, kload(a->q + 64 * s + 32), w->s1);
}

// Codes stored with a fixed offset `off` (value = code - off):
// d * (sum - off * sum(scale * bsum)), scaled by the activation scale.
#define KK_FIN_OFF(NAME, SHIFT)                                                           \
  KT static inline __m256 NAME(const kkrow *p, const wk_act_q8k *a, __m256i is, __m256 acc) { \
    __m256i ms = _mm256_madd_epi16(kload(a->bsum), p->m16);                               \
    is = _mm256_sub_epi32(is, _mm256_slli_epi32(ms, SHIFT));                              \
    return _mm256_fmadd_ps(_mm256_set1_ps(p->d * a->d), _mm256_cvtepi32_ps(is), acc);     \
  }
KK_FIN_OFF(kk_fin_off4, 2)
KK_FIN_OFF(kk_fin_off32, 5)

KK_TYPE(kq2_k, 84)
KT static inline void kq2_k_prep(const uint8_t *b, kkrow *o) {
  __m128i v = _mm_loadu_si128((const __m128i *)b);
  __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
  o->sc16 = kscales16(lo, kscales_evenodd(), 0);
  o->m16 = _mm256_cvtepu8_epi16(hi);
  o->d = kf16(b + 80);
  o->dmin = kf16(b + 82);
}
KT static inline void kq2_k_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  int h = s >> 1, g = 2 * (s & 1);
  __m256i v = kload(b + 16 + 32 * h);
  w->c0 = kbits(v, 2 * g, 0, 2);
  w->c1 = kbits(v, 2 * g + 2, 0, 2);
  w->s0 = kpick16(p->sc16, 2 * s);
  w->s1 = kpick16(p->sc16, 2 * s + 1);
}
#define kq2_k_mac kk16_mac
#define kq2_k_fin kk_fin_min
KGEMM(kq2_k, 256, KK_RM, KK_RN)

KK_TYPE(kq3_k, 110)
// Scales: with a0, a1, a2 the three words of the 12 packed bytes, scale i has
// its low 4 bits in nibble (i / 8) of byte i % 8 of a0 a1, its top 2 bits at
// bit 2 (i / 4) of byte i % 4 of a2. Built in vector registers (a scalar
// build stored in halves and reloaded whole stalls on store forwarding).
KT static inline void kq3_k_prep(const uint8_t *b, kkrow *o) {
  uint32_t a2;
  memcpy(&a2, b + 104, 4);
  __m128i a01 = _mm_loadl_epi64((const __m128i *)(b + 96));             // a0 a1 - -
  __m128i lo = _mm_srlv_epi32(_mm_shuffle_epi32(a01, 0x44), _mm_setr_epi32(0, 0, 4, 4));
  __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)a2), _mm_setr_epi32(0, 2, 4, 6));
  __m128i sc = _mm_or_si128(_mm_and_si128(lo, _mm_set1_epi8(15)),
                            _mm_slli_epi32(_mm_and_si128(hi, _mm_set1_epi8(3)), 4));
  sc = _mm_sub_epi8(sc, _mm_set1_epi8(32));
  o->sc16 = kscales16(sc, kscales_evenodd(), 1);
  o->m16 = _mm256_cvtepi8_epi16(sc);
  o->d = kf16(b + 108);
}
KT static inline void kq3_k_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  int h = s >> 1, g = 2 * (s & 1);
  __m256i v = kload(b + 32 + 32 * h), hm = kload(b);
  // code = 2 low bits + 4 when the hmask bit is set; value = code - 4
  w->c0 = _mm256_or_si256(kbits(v, 2 * g, 0, 2), kbits(hm, 4 * h + g, 2, 1));
  w->c1 = _mm256_or_si256(kbits(v, 2 * g + 2, 0, 2), kbits(hm, 4 * h + g + 1, 2, 1));
  w->s0 = kpick16(p->sc16, 2 * s);
  w->s1 = kpick16(p->sc16, 2 * s + 1);
}
#define kq3_k_mac kk16_mac
#define kq3_k_fin kk_fin_off4
#ifdef KQ3_DEC
#include "backend/cpu/kernels/x86_q3dec.h"
#else
KGEMM(kq3_k, 256, KK_RM, KK_RN)
#endif

KK_TYPE(kq6_k, 210)
KT static inline void kq6_k_prep(const uint8_t *b, kkrow *o) {
  __m128i sc = _mm_loadu_si128((const __m128i *)(b + 192));
  // vector i (0, 1) of step s = 2 h + g takes scales 8 h + 2 g + 4 i (its
  // low 16 codes) and 8 h + 2 g + 4 i + 1 (high 16): element k = 2 s + i
  const __m128i order = _mm_setr_epi8(0, 4, 2, 6, 8, 12, 10, 14, 1, 5, 3, 7, 9, 13, 11, 15);
  o->sc16 = kscales16(sc, order, 1);
  o->m16 = _mm256_cvtepi8_epi16(sc);
  o->d = kf16(b + 208);
}
// Step s: half h = s / 2 of the block, groups g and g + 2 (g = s % 2) of 32.
KT static inline void kq6_k_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  int h = s >> 1, g = s & 1;
  __m256i v = kload(b + 64 * h + 32 * g), qh = kload(b + 128 + 32 * h);
  w->c0 = _mm256_or_si256(klo4(v), kbits(qh, 2 * g, 4, 2));
  w->c1 = _mm256_or_si256(khi4(v), kbits(qh, 2 * g + 4, 4, 2));
  w->s0 = kpick16(p->sc16, 2 * s);
  w->s1 = kpick16(p->sc16, 2 * s + 1);
}
KT static inline __m256i kq6_k_mac(const kkw *w, const wk_act_q8k *a, int s, __m256i is) {
  const int8_t *q = a->q + 128 * (s >> 1) + 32 * (s & 1);
  is = kmacs(is, w->c0, kload(q), w->s0);
  return kmacs(is, w->c1, kload(q + 64), w->s1);
}
#define kq6_k_fin kk_fin_off32
KGEMM(kq6_k, 256, KK_RM, KK_RN)

// ---- IQ4_XS: 8 sub-blocks of 32, non-linear 4-bit codes, 6-bit scales -------

KK_TYPE(kiq4_xs, 136)
// Scales: ib-th nibble of scales_l (bits 4 ib) and 2-bit field of scales_h
// (bits 2 ib), minus 32, in the even/odd layout of kpick16: step s takes
// sub-block 2 s in the low half of its vectors and 2 s + 1 in the high half.
KT static inline void kiq4_xs_prep(const uint8_t *b, kkrow *o) {
  uint32_t l;
  memcpy(&l, b + 4, 4);
  const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)l), _mm256_add_epi32(sh, sh));
  __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(wk_kern_u16(b + 2)), sh);
  __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(15)),
                               _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
  sc = _mm256_sub_epi32(sc, _mm256_set1_epi32(32));
  sc = _mm256_permutevar8x32_epi32(sc, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  o->sc16 = _mm256_packs_epi32(sc, sc);
  o->d = kf16(b);
}
// Step s: 32 code bytes, low nibbles = codes 0..15 of sub-blocks 2 s (low
// half) and 2 s + 1 (high half), high nibbles = codes 16..31; the
// activations are loaded in the same order (kiq4_xs_mac).
KT static inline void kiq4_xs_load(const kkrow *p, const uint8_t *b, int s, kkw *w) {
  const __m256i lut =
      _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values));
  __m256i v = kload(b + 8 + 32 * s);
  w->sg0 = _mm256_shuffle_epi8(lut, klo4(v));
  w->sg1 = _mm256_shuffle_epi8(lut, khi4(v));
  w->c0 = _mm256_abs_epi8(w->sg0);
  w->c1 = _mm256_abs_epi8(w->sg1);
  w->s0 = kpick16(p->sc16, s);
}
KT static inline __m256i kiq4_xs_mac(const kkw *w, const wk_act_q8k *a, int s, __m256i is) {
  const int8_t *q = a->q + 64 * s;
  __m256i q0 = _mm256_sign_epi8(_mm256_loadu2_m128i((const __m128i *)(q + 32), (const __m128i *)q),
                                w->sg0);
  __m256i q1 = _mm256_sign_epi8(
      _mm256_loadu2_m128i((const __m128i *)(q + 48), (const __m128i *)(q + 16)), w->sg1);
  is = kmacs(is, w->c0, q0, w->s0);
  return kmacs(is, w->c1, q1, w->s0);
}
KT static inline __m256 kiq4_xs_fin(const kkrow *p, const wk_act_q8k *a, __m256i is,
                                    __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(p->d * a->d), _mm256_cvtepi32_ps(is), acc);
}
KGEMM(kiq4_xs, 256, KK_RM, KK_RN)

#endif
