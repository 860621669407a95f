// AVX2 16-bit-activation kernels for the 32-value block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL against WK_ACT_A16), their f32 decoders, and the
// AVX2 activation converters. Compiled for AVX2 + FMA + F16C function by
// function; act16.c calls these only when cpuid says the CPU has them.
//
// A block's 32 codes become two vectors of 16 int16 (values 0..15 and
// 16..31), with the format's fixed offset already subtracted (Q4_0: 8, Q5_0:
// 16), so a block's integer sum is two pmaddwd and a reduction across lanes;
// the float work then runs for 8 outputs (rows x tokens) at once.
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// ---- activation converters (the same bytes as act16.c's) -------------------

AT static float amax8(const float *x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// 16 values -> 16 int16 at v (x * id rounded to nearest even, as lrintf);
// returns their sum.
AT AI int round16(const float *x, __m256 id, int16_t *v) {
  __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  // packs works per 128-bit lane: a0-3 b0-3 a4-7 b4-7, then put in order
  __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
  _mm256_storeu_si256((__m256i *)v, p);
  return a16_hsum_i32(_mm256_add_epi32(a, b));
}

AT static float scale_of(const float *x, int n, __m256 *id) {
  float d = amax8(x, n) / (float)WK_ACT16_QMAX, inv = d > 0 ? 1.0f / d : 0.0f;
  *id = _mm256_set1_ps(inv);
  return d;
}

AT void wk_act16_avx2_quantize(const float *x, void *xq, int64_t n) {
  wk_act16 *a = xq;
  for (int64_t b = 0; b < n / 32; b++, x += 32) {
    __m256 id;
    float d = scale_of(x, 32, &id);
    int s = round16(x, id, a[b].v) + round16(x + 16, id, a[b].v + 16);
    a[b].d = d;
    a[b].s = d * (float)s;
  }
}

AT void wk_act16k_avx2_quantize(const float *x, void *xq, int64_t n) {
  wk_act16k *a = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    __m256 id;
    float d = scale_of(x, 256, &id);
    a[b].d = d;
    for (int j = 0; j < 16; j++) a[b].s[j] = d * (float)round16(x + 16 * j, id, a[b].v + 16 * j);
  }
}

// ---- weight blocks -> int16 codes --------------------------------------------

// Low and high nibbles of 16 bytes at p: codes 0..15 in *c0, 16..31 in *c1.
AT AI void nibbles(const uint8_t *p, __m256i *c0, __m256i *c1) {
  __m256i x = a16_u8x16(p);
  *c0 = _mm256_and_si256(x, _mm256_set1_epi16(15));
  *c1 = _mm256_srli_epi16(x, 4);
}

// The fifth bits of a Q5 block: qh's bit j (j < 16) in int16 lane j of *h0
// and bit 16 + j in lane j of *h1, as masks (-1 set, 0 clear).
AT AI void high5_masks(const uint8_t *qh, __m256i *h0, __m256i *h1) {
  uint32_t h;
  memcpy(&h, qh, 4);
  const __m256i all = _mm256_set1_epi32((int)h);  // int16 lanes: low, high, low, ...
  const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                        8192, 16384, (short)0x8000);
  __m256i lo = _mm256_shuffle_epi8(all, _mm256_set1_epi16(0x0100));  // low 16 bits everywhere
  __m256i hi = _mm256_shuffle_epi8(all, _mm256_set1_epi16(0x0302));  // high 16 bits
  *h0 = _mm256_cmpeq_epi16(_mm256_and_si256(lo, bit), bit);
  *h1 = _mm256_cmpeq_epi16(_mm256_and_si256(hi, bit), bit);
}

// Q5_0 codes: nibble + 16 * bit - 16 = nibble - (16 where the bit is clear).
AT AI void unpack5_0(const uint8_t *b, __m256i *c0, __m256i *c1) {
  const __m256i sixteen = _mm256_set1_epi16(16);
  __m256i h0, h1;
  nibbles(b + 6, c0, c1);
  high5_masks(b + 2, &h0, &h1);
  *c0 = _mm256_sub_epi16(*c0, _mm256_andnot_si256(h0, sixteen));
  *c1 = _mm256_sub_epi16(*c1, _mm256_andnot_si256(h1, sixteen));
}

// Q5_1 codes: nibble + 16 * bit.
AT AI void unpack5_1(const uint8_t *b, __m256i *c0, __m256i *c1) {
  const __m256i sixteen = _mm256_set1_epi16(16);
  __m256i h0, h1;
  nibbles(b + 8, c0, c1);
  high5_masks(b + 4, &h0, &h1);
  *c0 = _mm256_or_si256(*c0, _mm256_and_si256(h0, sixteen));
  *c1 = _mm256_or_si256(*c1, _mm256_and_si256(h1, sixteen));
}

AT AI void sub16(__m256i *c0, __m256i *c1, int off) {
  *c0 = _mm256_sub_epi16(*c0, _mm256_set1_epi16((short)off));
  *c1 = _mm256_sub_epi16(*c1, _mm256_set1_epi16((short)off));
}

// Block layouts (bytes): Q4_0 d qs[16]; Q4_1 d m qs[16]; Q5_0 d qh[4] qs[16];
// Q5_1 d m qh[4] qs[16]; Q8_0 d qs[32]; IQ4_NL d qs[16] (d, m: f16).
AT AI void unpack(const int type, const uint8_t *b, __m256i *c0, __m256i *c1) {
  switch (type) {
    case WK_Q4_0:
      nibbles(b + 2, c0, c1);
      sub16(c0, c1, 8);
      break;
    case WK_Q4_1:
      nibbles(b + 4, c0, c1);
      break;
    case WK_Q5_0:
      unpack5_0(b, c0, c1);
      break;
    case WK_Q5_1:
      unpack5_1(b, c0, c1);
      break;
    case WK_Q8_0:
      *c0 = a16_s8x16(b + 2);
      *c1 = a16_s8x16(b + 18);
      break;
    default: {  // WK_IQ4_NL
      const __m128i lut = _mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values);
      const __m128i m4 = _mm_set1_epi8(15);
      __m128i q = a16_load128(b + 2);
      *c0 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(q, m4)));
      *c1 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)));
      break;
    }
  }
}

AT AI int block_bytes(const int type) {
  switch (type) {
    case WK_Q4_0: return 18;
    case WK_Q4_1: return 20;
    case WK_Q5_0: return 22;
    case WK_Q5_1: return 24;
    case WK_Q8_0: return 34;
    default: return 18;  // WK_IQ4_NL
  }
}

// ---- the tile ---------------------------------------------------------------------

// Sums of the 8 int32 lanes of v[0..n) (n = 1, 2, 4 or 8) in lanes 0..n-1
// (integer adds: exact in any order).
AT AI __m256i red_lanes(const __m256i *v, const int n) {
  if (n == 1) return _mm256_castsi128_si256(_mm_cvtsi32_si128(a16_hsum_i32(v[0])));
  __m256i u;
  if (n == 2) {
    u = _mm256_hadd_epi32(v[0], v[1]);
    u = _mm256_hadd_epi32(u, u);
  } else {
    u = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    if (n == 8) {
      __m256i w = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
      return _mm256_add_epi32(_mm256_permute2x128_si256(u, w, 0x20),
                              _mm256_permute2x128_si256(u, w, 0x31));
    }
  }
  // lanes 0..n-1 of each half hold partial sums of outputs 0..n-1
  return _mm256_castsi128_si256(
      _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1)));
}

// R rows x N tokens (R * N <= 8), outputs o = r * N + t in the lanes of one
// vector. Per block each row's codes are decoded once and used for every
// token; each output's integer block sum is reduced to one lane, then
//   acc[o] += float(isum) * (d_w * d_a)   (+ m_w * s_a with a minimum)
// (the same f32 operations for every tile shape, so gemm equals vec_dot).
AT AI void tile(const int type, const int R, const int N, const uint8_t *w, size_t ws,
                int64_t nb, const uint8_t *xq, size_t xs, float *y, size_t ys, size_t yr) {
  const int bytes = block_bytes(type);
  const int has_min = type == WK_Q4_1 || type == WK_Q5_1;
  // lane o -> row o / N, token o % N
  const __m256i row_of = _mm256_setr_epi32(0 / N % 8, 1 / N % 8, 2 / N % 8, 3 / N % 8, 4 / N % 8,
                                           5 / N % 8, 6 / N % 8, 7 / N % 8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    __m256i c0[A16_MAXR], c1[A16_MAXR], is[8];
    A16_UNROLL for (int r = 0; r < R; r++) unpack(type, blk + (size_t)r * ws, &c0[r], &c1[r]);
    float da[8] = {0}, sa[8] = {0};
    A16_UNROLL for (int t = 0; t < N; t++) {
      const wk_act16 *a = (const wk_act16 *)(xq + (size_t)t * xs) + b;
      const __m256i v0 = a16_load(a->v), v1 = a16_load(a->v + 16);
      da[t] = a->d, sa[t] = a->s;
      A16_UNROLL for (int r = 0; r < R; r++)
          is[r * N + t] =
              _mm256_add_epi32(_mm256_madd_epi16(c0[r], v0), _mm256_madd_epi16(c1[r], v1));
    }
    __m256 dav, sav = _mm256_setzero_ps();
    if (N == 1) {
      dav = _mm256_set1_ps(da[0]);
      if (has_min) sav = _mm256_set1_ps(sa[0]);
    } else {
      dav = A16_LANES(da, R * N, 1, N);
      if (has_min) sav = A16_LANES(sa, R * N, 1, N);
    }
    __m256 dwv = a16_f16x8(blk, ws, R), mwv = _mm256_setzero_ps();
    if (has_min) mwv = a16_f16x8(blk + 2, ws, R);
    if (N > 1) {
      dwv = _mm256_permutevar8x32_ps(dwv, row_of);
      if (has_min) mwv = _mm256_permutevar8x32_ps(mwv, row_of);
    }
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(red_lanes(is, R * N)), _mm256_mul_ps(dwv, dav));
    if (has_min) p = _mm256_fmadd_ps(mwv, sav, p);
    acc = _mm256_add_ps(acc, p);
  }
  float out[8];
  _mm256_storeu_ps(out, acc);
  A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int t = 0; t < N; t++)
      y[(size_t)t * ys + (size_t)r * yr] = out[r * N + t];
}

// Register tiles: main rows x tokens, decode rows.
#ifndef Q_RM
#define Q_RM 2
#define Q_RN 4
#define Q_DM 8
#endif

A16_TYPE(q4_0, WK_Q4_0, tile, 32, Q_RM, Q_RN, Q_DM)
A16_TYPE(q4_1, WK_Q4_1, tile, 32, Q_RM, Q_RN, Q_DM)
A16_TYPE(q5_0, WK_Q5_0, tile, 32, Q_RM, Q_RN, Q_DM)
A16_TYPE(q5_1, WK_Q5_1, tile, 32, Q_RM, Q_RN, Q_DM)
A16_TYPE(q8_0, WK_Q8_0, tile, 32, Q_RM, Q_RN, Q_DM)
A16_TYPE(iq4_nl, WK_IQ4_NL, tile, 32, Q_RM, Q_RN, Q_DM)

// ---- f32 decoding (reference formulas: d * code, + m for Q4_1 / Q5_1) ----------

#define DEQ_Q(T, TYPE)                                                                       \
  AT static void T##_deq(const uint8_t *b, float *y, int64_t nb) {                            \
    for (int64_t i = 0; i < nb; i++, b += block_bytes(TYPE), y += 32) {                      \
      __m256i c0, c1;                                                                        \
      unpack(TYPE, b, &c0, &c1);                                                             \
      const __m256 d = a16_bf16(b);                                                          \
      __m256 m = _mm256_setzero_ps();                                                        \
      if (TYPE == WK_Q4_1 || TYPE == WK_Q5_1) m = a16_bf16(b + 2);                           \
      const __m256 *add = TYPE == WK_Q4_1 || TYPE == WK_Q5_1 ? &m : NULL;                     \
      a16_store16(y, c0, d, add);                                                            \
      a16_store16(y + 16, c1, d, add);                                                       \
    }                                                                                        \
  }
DEQ_Q(q4_0, WK_Q4_0)
DEQ_Q(q4_1, WK_Q4_1)
DEQ_Q(q5_0, WK_Q5_0)
DEQ_Q(q5_1, WK_Q5_1)
DEQ_Q(q8_0, WK_Q8_0)
DEQ_Q(iq4_nl, WK_IQ4_NL)

int wk_act16_avx2_dequant_q(int type, const uint8_t *src, float *dst, int64_t nb) {
  switch (type) {
    case WK_Q4_0: q4_0_deq(src, dst, nb); return 1;
    case WK_Q4_1: q4_1_deq(src, dst, nb); return 1;
    case WK_Q5_0: q5_0_deq(src, dst, nb); return 1;
    case WK_Q5_1: q5_1_deq(src, dst, nb); return 1;
    case WK_Q8_0: q8_0_deq(src, dst, nb); return 1;
    case WK_IQ4_NL: iq4_nl_deq(src, dst, nb); return 1;
    default: return 0;
  }
}

int wk_act16_avx2_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  static const struct {
    int type;
    wk_vec_dot_fn dot;
    wk_gemm_fn gemm;
  } rows[] = {
      A16_ROW(WK_Q4_0, q4_0), A16_ROW(WK_Q4_1, q4_1), A16_ROW(WK_Q5_0, q5_0),
      A16_ROW(WK_Q5_1, q5_1), A16_ROW(WK_Q8_0, q8_0), A16_ROW(WK_IQ4_NL, iq4_nl),
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].type == type) {
      *dot = rows[i].dot;
      *gemm = rows[i].gemm;
      return 1;
    }
  return wk_act16_avx2_k_find(type, dot, gemm);
}
