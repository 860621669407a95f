// x86 kernels for the 32-element block formats against WK_ACT_Q8 activations:
// Q4_0, Q5_0 (unsigned codes; the fixed offset comes off the integer sum
// through the activation block sum), Q4_1, Q5_1 (unsigned codes; the min
// times the activation sum is added in float) and Q8_0, IQ4_NL (signed
// codes, sign transfer).
//
// Row pairs and lane tiles. Two rows share a vector: row A's codes in the
// low 128 bits, row B's in the high (codes 0..15 in `lo`, 16..31 in `hi`,
// against activations 0..15 and 16..31 in both halves), which is how the
// nibble formats store them. The integer sums of 8 (or 4) rows are then
// merged into the lanes of one vector, so the float work (convert, scale,
// accumulate) runs once per block for all of them. Every output keeps one
// float accumulator, updated per block b as
//   acc = fma(d_b * da_b, (float)isum_b, acc)        (then, with a min:)
//   acc = fma(m_b, da_b * (float)sum_b, acc)
// in every tile shape, so gemm equals vec_dot bit for bit.
// Included by the level files after x86_tile.h.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_Q8_H
#define WICK_BACKEND_CPU_KERNELS_X86_Q8_H

// Codes of a row pair: unsigned codes (|code| for the signed formats) and,
// for the signed formats, the signed codes.
typedef struct {
  __m256i lo, hi, slo, shi;
} kq8p;

// 16 bytes at a (low half) and b (high half).
KT static inline __m256i kload2(const uint8_t *a, const uint8_t *b) {
  return _mm256_loadu2_m128i((const __m128i *)b, (const __m128i *)a);
}

KT static inline void knib_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256i v = kload2(a, b);
  p->lo = _mm256_and_si256(v, m4);
  p->hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// Q5 high bits: 16 in byte j of lo where bit j of the 32-bit qh is set, in
// byte j of hi for bit 16 + j (row a's qh in the low half, b's in the high;
// the 16-byte loads stay inside the blocks, whose codes follow qh).
KT static inline void kq5_high_pair(const uint8_t *qa, const uint8_t *qb, kq8p *p) {
  const __m256i s_lo = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0, 0x0101010101010101LL);
  const __m256i s_hi = _mm256_setr_epi64x(0x0202020202020202LL, 0x0303030303030303LL,
                                          0x0202020202020202LL, 0x0303030303030303LL);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i sixteen = _mm256_set1_epi8(16);
  __m256i h = kload2(qa, qb);
  __m256i l = _mm256_and_si256(_mm256_shuffle_epi8(h, s_lo), bit);
  __m256i u = _mm256_and_si256(_mm256_shuffle_epi8(h, s_hi), bit);
  p->lo = _mm256_or_si256(p->lo, _mm256_and_si256(_mm256_cmpeq_epi8(l, bit), sixteen));
  p->hi = _mm256_or_si256(p->hi, _mm256_and_si256(_mm256_cmpeq_epi8(u, bit), sixteen));
}

KT static inline void kq4_0_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  knib_pair(a + 2, b + 2, p);
}
KT static inline void kq4_1_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  knib_pair(a + 4, b + 4, p);
}
KT static inline void kq5_0_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  knib_pair(a + 6, b + 6, p);
  kq5_high_pair(a + 2, b + 2, p);
}
KT static inline void kq5_1_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  knib_pair(a + 8, b + 8, p);
  kq5_high_pair(a + 4, b + 4, p);
}
KT static inline void kq8_0_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  p->slo = kload2(a + 2, b + 2);
  p->shi = kload2(a + 18, b + 18);
  p->lo = _mm256_abs_epi8(p->slo);
  p->hi = _mm256_abs_epi8(p->shi);
}
KT static inline void kiq4_nl_pair(const uint8_t *a, const uint8_t *b, kq8p *p) {
  const __m256i lut =
      _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values));
  knib_pair(a + 2, b + 2, p);
  p->slo = _mm256_shuffle_epi8(lut, p->lo);
  p->shi = _mm256_shuffle_epi8(lut, p->hi);
  p->lo = _mm256_abs_epi8(p->slo);
  p->hi = _mm256_abs_epi8(p->shi);
}

// One row's 32 codes in one vector (the multi-token tiles): u unsigned (or
// |code|), sg signed (signed formats).
typedef struct {
  __m256i u, sg;
} kq8r;

// 0x10 in byte i where bit i of the 32-bit qh is set.
KT static inline __m256i kq5_high(const uint8_t *qh4) {
  const __m256i sel = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                         0x0303030303030303LL);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qh4));
  v = _mm256_shuffle_epi8(v, sel);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, _mm256_set1_epi8(16));
}
KT static inline void kq4_0_row(const uint8_t *b, kq8r *c) { c->u = knibbles16(b + 2); }
KT static inline void kq4_1_row(const uint8_t *b, kq8r *c) { c->u = knibbles16(b + 4); }
KT static inline void kq5_0_row(const uint8_t *b, kq8r *c) {
  c->u = _mm256_or_si256(knibbles16(b + 6), kq5_high(b + 2));
}
KT static inline void kq5_1_row(const uint8_t *b, kq8r *c) {
  c->u = _mm256_or_si256(knibbles16(b + 8), kq5_high(b + 4));
}
KT static inline void kq8_0_row(const uint8_t *b, kq8r *c) {
  c->sg = kload(b + 2);
  c->u = _mm256_abs_epi8(c->sg);
}
KT static inline void kiq4_nl_row(const uint8_t *b, kq8r *c) {
  const __m256i lut =
      _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values));
  c->sg = _mm256_shuffle_epi8(lut, knibbles16(b + 2));
  c->u = _mm256_abs_epi8(c->sg);
}
// Products of one row with one token's 32 activations: int16 pair sums
// (unsigned codes) or int32 (signed).
KT static inline __m256i kq8_rdot_u(const kq8r *c, __m256i q) {
  return _mm256_maddubs_epi16(c->u, q);
}
KT static inline __m256i kq8_rdot_s(const kq8r *c, __m256i q) {
  return kmac_u8s8(_mm256_setzero_si256(), c->u, _mm256_sign_epi8(q, c->sg));
}

// Products of a row pair with the activations (qlo: activations 0..15 in
// both halves, qhi: 16..31): int16 lanes for unsigned codes (pairs of
// products, small enough to add lo and hi), int32 lanes for signed ones.
KT static inline __m256i kq8_dot_u(const kq8p *p, __m256i qlo, __m256i qhi) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(p->lo, qlo), _mm256_maddubs_epi16(p->hi, qhi));
}
KT static inline __m256i kq8_dot_s(const kq8p *p, __m256i qlo, __m256i qhi) {
  __m256i is = kmac_u8s8(_mm256_setzero_si256(), p->lo, _mm256_sign_epi8(qlo, p->slo));
  return kmac_u8s8(is, p->hi, _mm256_sign_epi8(qhi, p->shi));
}

// Row-pair sums p[i] of rows (i, i + 4) -> int32 lanes of rows 0..7; pair
// sums already hold the first level (lo + hi), so the 16-bit merges left are
// one fewer than for single rows.
KT static inline __m256i kq8_red8(const __m256i p[4], int levels16) { return kred4(p, levels16); }
// Row-pair sums of rows (0, 2) and (1, 3) -> int32 lanes of rows 0..3.
KT static inline __m128i kq8_red4(const __m256i p[2], int levels16) {
  __m256i x = levels16 >= 1 ? kmerge32_16(p[0], p[1]) : kmerge32_32(p[0], p[1]);
  if (levels16 >= 2) {
    x = kwiden16(_mm256_add_epi16(x, _mm256_shuffle_epi32(x, 0x4e)));
  } else {
    if (levels16 == 1) x = kwiden16(x);
    x = _mm256_add_epi32(x, _mm256_shuffle_epi32(x, 0x4e));
  }
  // lanes r0 r1 r0 r1 | r2 r3 r2 r3
  return _mm_unpacklo_epi64(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}
// One row (the pair holds it twice; the low half is summed).
KT static inline int kq8_red1(__m256i p, int levels16) {
  __m128i h = _mm256_castsi256_si128(levels16 >= 0 ? kwiden16(p) : p);
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

// Kinds of block scaling: plain (value = d * code), offset (value =
// d * (code - OFF)), min (value = d * code + m, the f16 m after d).
enum { KQ8_PLAIN = 0, KQ8_OFFSET = 1, KQ8_MIN = 2 };

// Activations 0..15 and 16..31 of a block, each in both halves.
KT static inline void kq8_act(const wk_act_q8 *a, __m256i *qlo, __m256i *qhi) {
  *qlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)a->q));
  *qhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(a->q + 16)));
}

// vec_dot, gemm and the tiles of type T (B bytes a block; KIND and OFF its
// scaling; DOT/LEVELS16 the row-pair products and their 16-bit merge levels,
// RDOT/RLEVELS16 the single-row ones): one token on 8 rows (pairs i, i + 4),
// 4 rows (pairs 0-2, 1-3) or one row; several tokens on 4 rows x 4 (or 2).
#define KQ8_TYPE(T, B, KIND, OFF, DOT, LEVELS16, RDOT, RLEVELS16)                                \
  enum { T##_BYTES = B };                                                                        \
  KT static void T##_tile8(const uint8_t *w, size_t ws, int64_t nb, const wk_act_q8 *a,          \
                           float *y, size_t yr) {                                                \
    __m256 acc = _mm256_setzero_ps(), d, m = acc;                                                \
    for (int64_t b = 0; b < nb; b++, w += B) {                                                   \
      __m256i qlo, qhi, p[4];                                                                    \
      kq8_act(&a[b], &qlo, &qhi);                                                                \
      KUNROLL for (int i = 0; i < 4; i++) {                                                      \
        kq8p c;                                                                                  \
        T##_pair(w + i * ws, w + (i + 4) * ws, &c);                                              \
        p[i] = DOT(&c, qlo, qhi);                                                                \
      }                                                                                          \
      __m256i isum = kq8_red8(p, LEVELS16);                                                      \
      if (KIND == KQ8_OFFSET) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(OFF * a[b].sum));  \
      kf16dm8(w, ws, KIND == KQ8_MIN, &d, &m);                                                   \
      acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[b].d)), _mm256_cvtepi32_ps(isum), \
                            acc);                                                                \
      if (KIND == KQ8_MIN)                                                                       \
        acc = _mm256_fmadd_ps(m, _mm256_set1_ps(a[b].d * (float)a[b].sum), acc);                 \
    }                                                                                            \
    float out[8];                                                                                \
    _mm256_storeu_ps(out, acc);                                                                  \
    KUNROLL for (int r = 0; r < 8; r++) y[r * yr] = out[r];                                      \
  }                                                                                              \
  KT static void T##_tile4(const uint8_t *w, size_t ws, int64_t nb, const wk_act_q8 *a,          \
                           float *y) {                                                           \
    __m128 acc = _mm_setzero_ps(), d, m = acc;                                                   \
    for (int64_t b = 0; b < nb; b++, w += B) {                                                   \
      __m256i qlo, qhi, p[2];                                                                    \
      kq8_act(&a[b], &qlo, &qhi);                                                                \
      KUNROLL for (int i = 0; i < 2; i++) {                                                      \
        kq8p c;                                                                                  \
        T##_pair(w + i * ws, w + (i + 2) * ws, &c);                                              \
        p[i] = DOT(&c, qlo, qhi);                                                                \
      }                                                                                          \
      __m128i isum = kq8_red4(p, LEVELS16);                                                      \
      if (KIND == KQ8_OFFSET) isum = _mm_sub_epi32(isum, _mm_set1_epi32(OFF * a[b].sum));        \
      kf16dm4(w, ws, KIND == KQ8_MIN, &d, &m);                                                   \
      acc = _mm_fmadd_ps(_mm_mul_ps(d, _mm_set1_ps(a[b].d)), _mm_cvtepi32_ps(isum), acc);        \
      if (KIND == KQ8_MIN) acc = _mm_fmadd_ps(m, _mm_set1_ps(a[b].d * (float)a[b].sum), acc);    \
    }                                                                                            \
    _mm_storeu_ps(y, acc);                                                                       \
  }                                                                                              \
  /* 4 adjacent rows x N (2 or 4) tokens: each row decoded once per block; */                  \
  /* per token pair, lanes r0..r3 of the first token | r0..r3 of the second */                   \
  KT static void T##_tile4xN(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,         \
                             size_t xs, int n, float *y, size_t ys) {                            \
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                  \
    for (int64_t b = 0; b < nb; b++, w += B) {                                                   \
      kq8r c[4];                                                                                 \
      KUNROLL for (int r = 0; r < 4; r++) T##_row(w + r * ws, &c[r]);                            \
      __m128 d4, m4;                                                                             \
      kf16dm4(w, ws, KIND == KQ8_MIN, &d4, &m4);                                                 \
      __m256 d8 = _mm256_set_m128(d4, d4), m8 = _mm256_set_m128(m4, m4);                         \
      KUNROLL for (int tp = 0; tp < 2; tp++) {                                                   \
        if (2 * tp >= n) break;                                                                  \
        const wk_act_q8 *a0 = (const wk_act_q8 *)(xq + 2 * tp * xs) + b;                         \
        const wk_act_q8 *a1 = (const wk_act_q8 *)(xq + (2 * tp + 1) * xs) + b;                   \
        __m256i v[4], x[2];                                                                      \
        KUNROLL for (int t = 0; t < 2; t++) {                                                    \
          const __m256i q = kload((t ? a1 : a0)->q);                                             \
          KUNROLL for (int r = 0; r < 4; r++) v[r] = RDOT(&c[r], q);                             \
          x[t] = kred4(v, RLEVELS16);                                                            \
        }                                                                                        \
        __m256i isum = kmerge128(x[0], x[1], RLEVELS16 >= 3);                                    \
        if (RLEVELS16 >= 3) isum = kwiden16(isum);                                               \
        if (KIND == KQ8_OFFSET)                                                                  \
          isum = _mm256_sub_epi32(isum, _mm256_set_m128i(_mm_set1_epi32(OFF * a1->sum),          \
                                                         _mm_set1_epi32(OFF * a0->sum)));        \
        __m256 da = _mm256_set_m128(_mm_set1_ps(a1->d), _mm_set1_ps(a0->d));                     \
        acc[tp] = _mm256_fmadd_ps(_mm256_mul_ps(d8, da), _mm256_cvtepi32_ps(isum), acc[tp]);     \
        if (KIND == KQ8_MIN)                                                                     \
          acc[tp] = _mm256_fmadd_ps(m8, _mm256_set_m128(_mm_set1_ps(a1->d * (float)a1->sum),     \
                                                        _mm_set1_ps(a0->d * (float)a0->sum)),    \
                                    acc[tp]);                                                    \
      }                                                                                          \
    }                                                                                            \
    KUNROLL for (int tp = 0; tp < 2; tp++) {                                                     \
      if (2 * tp >= n) break;                                                                    \
      float out[8];                                                                              \
      _mm256_storeu_ps(out, acc[tp]);                                                            \
      KUNROLL for (int r = 0; r < 4; r++) {                                                      \
        y[2 * tp * ys + r] = out[r];                                                             \
        y[(2 * tp + 1) * ys + r] = out[r + 4];                                                   \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  KT static void T##_tile1(const uint8_t *w, int64_t nb, const wk_act_q8 *a, float *y) {         \
    __m128 acc = _mm_setzero_ps();                                                               \
    for (int64_t b = 0; b < nb; b++, w += B) {                                                   \
      __m256i qlo, qhi;                                                                          \
      kq8p c;                                                                                    \
      kq8_act(&a[b], &qlo, &qhi);                                                                \
      T##_pair(w, w, &c);                                                                        \
      int isum = kq8_red1(DOT(&c, qlo, qhi), LEVELS16);                                          \
      if (KIND == KQ8_OFFSET) isum -= OFF * a[b].sum;                                            \
      acc = _mm_fmadd_ss(_mm_set_ss(kf16(w) * a[b].d), _mm_set_ss((float)isum), acc);            \
      if (KIND == KQ8_MIN)                                                                       \
        acc = _mm_fmadd_ss(_mm_set_ss(kf16(w + 2)), _mm_set_ss(a[b].d * (float)a[b].sum), acc);  \
    }                                                                                            \
    *y = _mm_cvtss_f32(acc);                                                                     \
  }                                                                                              \
  KT static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                        \
    float y;                                                                                     \
    T##_tile1(w, n / 32, xq, &y);                                                                \
    return y;                                                                                    \
  }                                                                                              \
  KT static void T##_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv,       \
                          size_t xs, int n_tokens, float *y, size_t ys) {                        \
    const uint8_t *w = wv, *xq = xqv;                                                            \
    int64_t nb = k / 32;                                                                         \
    if (n_tokens == 1) {                                                                         \
      /* tile j holds rows j, j + q, ..., j + 7q: 8 long sequential streams */                   \
      int q = rows / 8, r = q * 8;                                                               \
      for (int j = 0; j < q; j++)                                                                \
        T##_tile8(w + (size_t)j * ws, ws * (size_t)q, nb, (const wk_act_q8 *)xq, y + j,          \
                  (size_t)q);                                                                    \
      if (rows - r >= 4) {                                                                       \
        T##_tile4(w + (size_t)r * ws, ws, nb, (const wk_act_q8 *)xq, y + r);                     \
        r += 4;                                                                                  \
      }                                                                                          \
      for (; r < rows; r++) T##_tile1(w + (size_t)r * ws, nb, (const wk_act_q8 *)xq, y + r);     \
      return;                                                                                    \
    }                                                                                            \
    /* several tokens: 4 adjacent rows x 4 (2) tokens; a chunk's activations stay in L2 */       \
    for (int t0 = 0; t0 < n_tokens; t0 += KTOK_CHUNK) {                                          \
      int t1 = t0 + KTOK_CHUNK < n_tokens ? t0 + KTOK_CHUNK : n_tokens, r = 0;                   \
      for (; r + 4 <= rows; r += 4) {                                                            \
        const uint8_t *wr = w + (size_t)r * ws;                                                  \
        int t = t0;                                                                              \
        for (; t + 4 <= t1; t += 4)                                                              \
          T##_tile4xN(wr, ws, nb, xq + t * xs, xs, 4, y + t * ys + r, ys);                       \
        if (t + 2 <= t1) {                                                                       \
          T##_tile4xN(wr, ws, nb, xq + t * xs, xs, 2, y + t * ys + r, ys);                       \
          t += 2;                                                                                \
        }                                                                                        \
        if (t < t1) T##_tile4(wr, ws, nb, (const wk_act_q8 *)(xq + t * xs), y + t * ys + r);     \
      }                                                                                          \
      for (; r < rows; r++)                                                                      \
        for (int t = t0; t < t1; t++)                                                            \
          T##_tile1(w + (size_t)r * ws, nb, (const wk_act_q8 *)(xq + t * xs), y + t * ys + r);   \
    }                                                                                            \
  }

KQ8_TYPE(kq4_0, 18, KQ8_OFFSET, 8, kq8_dot_u, 2, kq8_rdot_u, 3)
KQ8_TYPE(kq4_1, 20, KQ8_MIN, 0, kq8_dot_u, 2, kq8_rdot_u, 3)
KQ8_TYPE(kq5_0, 22, KQ8_OFFSET, 16, kq8_dot_u, 1, kq8_rdot_u, 2)
KQ8_TYPE(kq5_1, 24, KQ8_MIN, 0, kq8_dot_u, 1, kq8_rdot_u, 2)
KQ8_TYPE(kq8_0, 34, KQ8_PLAIN, 0, kq8_dot_s, -1, kq8_rdot_s, -1)
KQ8_TYPE(kiq4_nl, 18, KQ8_PLAIN, 0, kq8_dot_s, -1, kq8_rdot_s, -1)

#endif
