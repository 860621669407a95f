// AVX-512 16-bit-activation kernels for the super-block formats Q2_K, Q3_K,
// Q6_K and IQ4_XS against WK_ACT_A16K (Q4_K and Q5_K keep the AVX2 level's:
// this file's scheme for them measured 10-15% slower, see the end). act16.c
// calls these only when cpuid reports AVX-512 F, BW, VL and VNNI (the file
// also uses VBMI's vpermb, which the AVX-512 VNNI CPUs this runs on have).
//
// One token (the decode path): a super-block's 8 chunks of 32 values go as 4
// pairs, chunks 2 m and 2 m + 1 in one 512-bit vector (bytes 0-31, 32-63),
// against the activations' 64 lo and 64 hi bytes of the pair (contiguous in
// the row: one load each, shared by the tile's rows). The products:
//   Q2_K   code x scale (<= 3 x 15) looked up by vpermb in a per-row table of
//          the 16 groups' 4 products, then vpdpbusd (unsigned byte x signed
//          byte, 4 a lane, into int32) on lo and on hi: no int16 step;
//   others pmaddubsw (codes x lo / hi) then vpdpwssd by the scales (the add
//          folded into the multiply); Q3_K's high code bit by a byte mask
//          (vptestmb, then one masked add); IQ4_XS's table by vpermb, v's
//          sign onto the codes by one masked subtract.
// Each int32 lane of a pair sums 4 consecutive values of one chunk (lanes
// 0-7: chunk 2 m, 8-15: chunk 2 m + 1), so the two 256-bit halves added give
// exactly the AVX2 kernels' 8 lanes (act16_avx2_k.c: lane l = values 4 l ..
// 4 l + 3 of every chunk, scaled); the integers are exact, and the f32
// operations after them are the AVX2 decode tiles', in the same order:
//   acc += float(lo + 128 hi) * (d_w * d_a)       (Q6_K: per half super-block)
//   acc -= m * s_a per 16 values                  (Q2_K, Q3_K, Q6_K)
// summed across lanes at the end by a16_hsum, so the results are the AVX2
// level's bit for bit. Bounds: Q2_K's vpdpbusd lanes sum 8 x 4 x 45 x 127 (lo
// or hi), < 2^18; pmaddubsw lanes stay below 2^15 as in the AVX2 kernels
// (same operands); vpdpwssd wraps like pmaddwd + paddd, and the combined lane
// is exact (the AVX2 file's bounds).
//
// Several tokens: four or more go to the AVX2 level's gemm (its tiles widen
// the codes to int16 once per row); one to three run this file's decode tile
// once per token, which is what the AVX2 gemm does for them too.
//
// Cost on Zen 4 (L2-resident rows, one thread): a 512-bit multiply or
// shuffle takes a 256-bit pipe two cycles, and the byte multiplies (vpdpbusd,
// pmaddubsw, vpdpwssd) share two pipes with the f32 FMAs, so what pays is
// fewer operations, not width: Q2_K's table saves the scale multiply (8
// vpdpbusd a super-block and row where AVX2 runs 32 multiplies), Q6_K's pair
// of chunks loads as one vector. For Q4_K and Q5_K (one scale per 32 values,
// already cheap in AVX2's kdec, which broadcasts each chunk's scale from
// memory) the pair layout's scale shuffle and wider decode cost more than
// they save: 15.8-17.6 GB/s against AVX2's 17.6-19.9.
#define AT                                                                            \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni," \
                         "avx512vbmi")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// Constants by 128-bit lane: byte (Z_B) or word (Z_W) value a in lane 0, b in
// lane 1, c in lane 2, d in lane 3.
#define Z_B4(v) ((int)(0x01010101u * (uint8_t)(v)))
#define Z_W2(v) ((int)(0x00010001u * (uint16_t)(v)))
#define Z_LANES(F, a, b, c, d)                                                            \
  _mm512_set_epi32(F(d), F(d), F(d), F(d), F(c), F(c), F(c), F(c), F(b), F(b), F(b), F(b), \
                   F(a), F(a), F(a), F(a))
#define Z_BYTES(a, b, c, d) Z_LANES(Z_B4, a, b, c, d)
#define Z_WORDS(a, b, c, d) Z_LANES(Z_W2, a, b, c, d)

// A16_KEEP for any of the 32 vector registers (its "x" takes only the first
// 16, which cost a move in and out for each of the others).
#define Z_KEEP(v) __asm__("" : "+v"(v))

// 32 bytes at p in both 256-bit halves.
AT AI __m512i zbcast32(const uint8_t *p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

AT AI __m512i zload(const void *p) { return _mm512_loadu_si512(p); }

// The 16-value groups' int16 scales of pair m, word w (values 2 w, 2 w + 1
// of the pair) taking group 4 m + w / 8, from the 16 scales as words in s.
AT AI __m512i zscales16(__m512i s, int m) {
  return _mm512_permutexvar_epi16(Z_WORDS(4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3), s);
}

// The same for 32-value sub-blocks (8 scales as words): chunk 2 m + w / 16.
AT AI __m512i zscales32(__m512i s, int m) {
  return _mm512_permutexvar_epi16(Z_WORDS(2 * m, 2 * m, 2 * m + 1, 2 * m + 1), s);
}

// Bits [2 t, 2 t + 2) of every byte of the 32 bytes at p for chunk 2 m
// (t = 2 (m % 2)) and [2 t + 2, 2 t + 4) for chunk 2 m + 1: the 2-bit codes
// of Q2_K and Q3_K (chunk j: bits 2 (j % 4) of byte l of its 32 bytes).
AT AI __m512i zbits2(const uint8_t *p, int m) {
  const int t = 4 * (m & 1);
  return _mm512_srlv_epi16(zbcast32(p), Z_WORDS(t, t, t + 2, t + 2));
}

// Where bit j of the 32 bytes at p is set (chunk j = 2 m, 2 m + 1 in the
// halves): Q3_K's hmask.
AT AI __mmask64 zbit(__m512i x, int m) {
  return _mm512_test_epi8_mask(x, Z_BYTES(1 << 2 * m, 1 << 2 * m, 2 << 2 * m, 2 << 2 * m));
}

// ---- Q2_K ---------------------------------------------------------------------
//
// Per row and super-block, a 64-byte table: byte 4 g + c = c x scale_g (the
// 16 groups' 4-bit scales, codes 0..3: at most 45). vpermb by 4 g + c then
// gives a pair's code x scale bytes: the codes' index bytes take 4 g from a
// constant in the same ternary-logic op that masks them.
AT AI __m512i q2_table(const uint8_t *b) {
  const __m128i sc = _mm_and_si128(a16_load128(b), _mm_set1_epi8(15));
  // word w: scale w / 2 (low byte), 0 (high byte)
  const __m512i idx = _mm512_set_epi32(Z_B4(15), Z_B4(14), Z_B4(13), Z_B4(12), Z_B4(11),
                                       Z_B4(10), Z_B4(9), Z_B4(8), Z_B4(7), Z_B4(6), Z_B4(5),
                                       Z_B4(4), Z_B4(3), Z_B4(2), Z_B4(1), Z_B4(0));
  const __m512i s = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, idx,
                                                  _mm512_castsi128_si512(sc));
  // x (0, 1) in even words, x (2, 3) in odd words: one byte each, no carry
  return _mm512_mullo_epi16(s, _mm512_set1_epi32(256 | (2 + 3 * 256) << 16));
}

AT AI void q2_pair(const uint8_t *b, __m512i tab, int m, __m512i xl, __m512i xh, __m512i *lo,
                   __m512i *hi) {
  const __m512i g = Z_BYTES(16 * m, 16 * m + 4, 16 * m + 8, 16 * m + 12);
  // (bits & 3) | 4 g
  const __m512i idx =
      _mm512_ternarylogic_epi32(zbits2(b + 16 + 32 * (m >> 1), m), _mm512_set1_epi8(3), g, 0xea);
  const __m512i cs = _mm512_permutexvar_epi8(idx, tab);
  *lo = _mm512_dpbusd_epi32(*lo, cs, xl);
  *hi = _mm512_dpbusd_epi32(*hi, cs, xh);
}

// ---- scale decoders (the layouts: act16_avx2_k.c's kprep_block) --------------

// ---- the codes of pair m (chunks 2 m, 2 m + 1), unsigned bytes --------------

AT AI __m512i zcodes(const int type, const uint8_t *b, int m, __m512i hbits) {
  const __m512i m15 = _mm512_set1_epi8(15);
  switch (type) {
    case WK_Q3_K: {  // 2 bits of qs, + 4 where bit j of hmask (hbits) is set
      const __m512i c = _mm512_and_si512(zbits2(b + 32 + 32 * (m >> 1), m), _mm512_set1_epi8(3));
      return _mm512_mask_add_epi8(c, zbit(hbits, m), c, _mm512_set1_epi8(4));
    }
    default: {  // WK_Q6_K: nibble t of ql[64 n + l] (64 bytes: both chunks) | 2 bits at
                // 4 t (chunk 2 m), 4 t + 2 (2 m + 1) of qh[32 n + l] << 4 (n = m / 2, t = m % 2)
      const int n = m >> 1, t = m & 1;
      __m512i l = zload(b + 64 * n);
      if (t) l = _mm512_srli_epi16(l, 4);
      __m512i h = zbcast32(b + 128 + 32 * n);
      h = t ? _mm512_srlv_epi16(h, Z_WORDS(0, 0, 2, 2)) : _mm512_sllv_epi16(h, Z_WORDS(4, 4, 2, 2));
      h = _mm512_and_si512(h, _mm512_set1_epi8(0x30));
      return _mm512_ternarylogic_epi32(l, h, m15, 0xec);  // (l & 15) | h
    }
  }
}

// IQ4_XS pair m: the table values (signed) of the low nibbles of qs[16 j + l]
// then the high ones, for j = 2 m, 2 m + 1; tab: the 16 values in every
// 128-bit lane (vpermb reads 6 index bits: the 2 above the nibble pick a
// copy).
AT AI __m512i zcodes_iq4(const uint8_t *b, int m, __m512i tab) {
  const __m512i x = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b + 8 + 32 * m)));
  const __m512i y = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), x);
  return _mm512_permutexvar_epi8(_mm512_srlv_epi16(y, Z_WORDS(0, 4, 0, 4)), tab);
}

// The high 8 f32 of v (AVX-512 F alone: no DQ).
AT AI __m256 zhigh(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// lanes of a pair's int32 sums -> the 8 lanes of one chunk (halves added).
AT AI __m256i zfold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// lo + 128 hi, folded.
AT AI __m256i zcombine(__m512i lo, __m512i hi) {
  return zfold(_mm512_add_epi32(lo, _mm512_slli_epi32(hi, 7)));
}

// A super-block's activations for the tile's rows: per pair the 64 lo and 64
// hi bytes (IQ4_XS: |lo| and |hi|, and where v < 0).
typedef struct zact {
  __m512i xl[4], xh[4];
  __mmask64 neg[4];
  const wk_act16k *a;
} zact;

// One row's super-block in the decode tile: what its pairs need, and their
// int32 sums (the tile runs every row's pair m before pair m + 1, so that
// independent work sits side by side in the instruction stream: one row's
// chain of dependent operations alone left the core waiting).
typedef struct zrowst {
  __m512i s;      // Q2_K: the product table; others: the scales as words
  __m512i hbits;  // Q3_K: hmask (both halves)
  __m512i lo, hi, half;
} zrowst;

AT AI void zstart(const int type, const uint8_t *b, zrowst *st) {
  st->lo = st->hi = st->half = st->hbits = _mm512_setzero_si512();
  switch (type) {
    case WK_Q2_K: st->s = q2_table(b); break;
    case WK_Q3_K:
      st->s = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(a16_scales_q3(b + 96)));
      st->hbits = zbcast32(b);
      break;
    case WK_Q6_K: st->s = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(a16_load128(b + 192))); break;
    default: st->s = _mm512_castsi128_si512(a16_scales_iq4xs(b)); break;  // WK_IQ4_XS
  }
}

AT AI void zpair(const int type, const uint8_t *b, int m, const zact *x, zrowst *st) {
  if (type == WK_Q2_K) {
    q2_pair(b, st->s, m, x->xl[m], x->xh[m], &st->lo, &st->hi);
  } else if (type == WK_IQ4_XS) {
    const __m512i tab = _mm512_broadcast_i32x4(a16_load128(wk_kern_iq4nl_values));
    __m512i c = zcodes_iq4(b, m, tab);
    c = _mm512_mask_sub_epi8(c, x->neg[m], _mm512_setzero_si512(), c);  // v's sign
    const __m512i sm = zscales32(st->s, m);
    st->lo = _mm512_dpwssd_epi32(st->lo, _mm512_maddubs_epi16(x->xl[m], c), sm);
    st->hi = _mm512_dpwssd_epi32(st->hi, _mm512_maddubs_epi16(x->xh[m], c), sm);
  } else {
    const __m512i c = zcodes(type, b, m, st->hbits);
    const __m512i sm = zscales16(st->s, m);
    st->lo = _mm512_dpwssd_epi32(st->lo, _mm512_maddubs_epi16(c, x->xl[m]), sm);
    st->hi = _mm512_dpwssd_epi32(st->hi, _mm512_maddubs_epi16(c, x->xh[m]), sm);
    if (type == WK_Q6_K && m == 1) {  // exact per half super-block
      st->half = _mm512_add_epi32(st->lo, _mm512_slli_epi32(st->hi, 7));
      st->lo = st->hi = _mm512_setzero_si512();
    }
  }
  Z_KEEP(st->lo);
  Z_KEEP(st->hi);
}

// A row's f32 terms of one super-block, made from its integers and scales;
// zapply adds them to the row's accumulator one super-block later (so that
// the chain of dependent f32 operations, 12 cycles a super-block, waits on
// nothing of the current one).
typedef struct zterms {
  __m256i sum, half;  // lanes lo + 128 hi (Q6_K: second half; half: first)
  __m256 dd;          // d_w * d_a
  __m256 m0, m1;      // Q2_K, Q3_K, Q6_K: the groups' m (groups 0-7, 8-15)
  const float *s;     // the activations' 16 group sums (d_a * sum v)
} zterms;

AT AI void zterms_make(const int type, const uint8_t *b, const zact *x, const zrowst *st,
                       zterms *t) {
  const float da = x->a->d;
  t->sum = zcombine(st->lo, st->hi);
  t->s = x->a->s;
  switch (type) {
    case WK_Q2_K:
    case WK_Q3_K:
    case WK_Q6_K: {
      const int dof = type == WK_Q2_K ? 80 : type == WK_Q3_K ? 108 : 208;
      const float d = a16_f16(b + dof);
      t->dd = _mm256_set1_ps(d * da);
      __m512 mins;  // per group: dmin * min, or d * offset * scale
      if (type == WK_Q2_K) {
        const __m128i m = _mm_and_si128(_mm_srli_epi16(a16_load128(b), 4), _mm_set1_epi8(15));
        mins = _mm512_mul_ps(_mm512_set1_ps(a16_f16(b + 82)),
                             _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
      } else {
        const __m128i sc = type == WK_Q3_K ? a16_scales_q3(b + 96) : a16_load128(b + 192);
        mins = _mm512_mul_ps(_mm512_set1_ps(d * (type == WK_Q3_K ? 4.0f : 32.0f)),
                             _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
      }
      t->m0 = _mm512_castps512_ps256(mins);
      t->m1 = zhigh(mins);
      if (type == WK_Q6_K) t->half = zfold(st->half);
      break;
    }
    default:  // WK_IQ4_XS
      t->dd = _mm256_set1_ps(a16_f16(b) * da);
      break;
  }
}

// The AVX2 decode tiles' f32 operations, in their order.
AT AI void zapply(const int type, const zterms *t, __m256 *acc) {
  if (type == WK_Q6_K) *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t->half), t->dd, *acc);
  *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t->sum), t->dd, *acc);
  if (type != WK_IQ4_XS) {
    *acc = _mm256_fnmadd_ps(t->m0, _mm256_loadu_ps(t->s), *acc);
    *acc = _mm256_fnmadd_ps(t->m1, _mm256_loadu_ps(t->s + 8), *acc);
  }
}

// As the AVX2 decode tiles: each row's super-block KPF bytes ahead is
// prefetched (each cache line) when its current one starts.
#define ZPF 768

// R rows (w, w + ws, ...) x one token; y[r * yr].
AT AI void zdec(const int type, const int R, const uint8_t *w, size_t ws, int64_t nb,
                const uint8_t *xq, float *y, size_t yr) {
  const int bytes = a16_k_bytes(type);
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  zterms t[A16_MAXR];  // the previous super-block's, not yet added
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    A16_UNROLL for (int r = 0; r < R; r++) A16_UNROLL for (int o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)blk + (size_t)r * ws + ZPF + o, _MM_HINT_T0);
    zact x;
    x.a = &act[b];
    if (type == WK_IQ4_XS) {  // |lo| at 0, |hi| at 256, sign at 512
      const uint8_t *e = xq + wk_act16k_sign_bytes(nb, b);
      A16_UNROLL for (int m = 0; m < 4; m++) {
        x.xl[m] = zload(e + 64 * m);
        x.xh[m] = zload(e + 256 + 64 * m);
        x.neg[m] = _mm512_movepi8_mask(zload(e + 512 + 64 * m));
      }
    } else {
      const uint8_t *q = xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
      A16_UNROLL for (int m = 0; m < 4; m++) {
        x.xl[m] = zload(q + 64 * m);
        x.xh[m] = zload(q + 256 + 64 * m);
      }
    }
    zrowst st[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) zstart(type, blk + (size_t)r * ws, &st[r]);
    A16_UNROLL for (int m = 0; m < 4; m++) A16_UNROLL for (int r = 0; r < R; r++)
        zpair(type, blk + (size_t)r * ws, m, &x, &st[r]);
    if (b > 0) A16_UNROLL for (int r = 0; r < R; r++) zapply(type, &t[r], &acc[r]);
    A16_UNROLL for (int r = 0; r < R; r++) zterms_make(type, blk + (size_t)r * ws, &x, &st[r], &t[r]);
  }
  if (nb > 0) A16_UNROLL for (int r = 0; r < R; r++) zapply(type, &t[r], &acc[r]);
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

typedef void (*zdec_fn)(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, float *y,
                        size_t yr);

// One token through tiles of dm rows taking rows j, j + q, j + 2 q, ... (q =
// rows / dm: separate memory streams, as a16_gemm), the rest one by one.
static void zgemm1(zdec_fn dec, zdec_fn one, int dm, const uint8_t *w, size_t ws, int64_t nb,
                   int rows, const uint8_t *xq, float *y) {
  const int q = rows / dm;
  for (int j = 0; j < q; j++) dec(w + (size_t)j * ws, ws * (size_t)q, nb, xq, y + j, (size_t)q);
  for (int r = q * dm; r < rows; r++) one(w + (size_t)r * ws, ws, nb, xq, y + r, 1);
}

// T_vec_dot and T_gemm with decode tiles of DM rows.
#define Z_TYPE(T, TYPE, DM)                                                                  \
  AT static void T##_zdec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,        \
                          float *y, size_t yr) {                                             \
    zdec(TYPE, DM, w, ws, nb, xq, y, yr);                                                    \
  }                                                                                          \
  AT static void T##_zone(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,        \
                          float *y, size_t yr) {                                             \
    zdec(TYPE, 1, w, ws, nb, xq, y, yr);                                                     \
  }                                                                                          \
  static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                      \
    float y;                                                                                 \
    T##_zone(w, 0, n / 256, xq, &y, 0);                                                      \
    return y;                                                                                \
  }                                                                                          \
  static void T##_gemm(const void *w, size_t ws, int64_t k, int rows, const void *xq,       \
                       size_t xs, int n_tokens, float *y, size_t ys) {                      \
    if (n_tokens >= 4) { /* the AVX2 gemm's main tiles take 4 tokens */                    \
      wk_vec_dot_fn dot;                                                                     \
      wk_gemm_fn gemm;                                                                       \
      if (wk_act16_avx2_find(TYPE, &dot, &gemm)) {                                           \
        gemm(w, ws, k, rows, xq, xs, n_tokens, y, ys);                                       \
        return;                                                                              \
      }                                                                                      \
    }                                                                                        \
    for (int t = 0; t < n_tokens; t++)                                                       \
      zgemm1(T##_zdec, T##_zone, DM, w, ws, k / 256, rows, (const uint8_t *)xq + (size_t)t * xs, \
             y + (size_t)t * ys);                                                            \
  }

Z_TYPE(q2_k, WK_Q2_K, 3)
Z_TYPE(q3_k, WK_Q3_K, 3)
Z_TYPE(q6_k, WK_Q6_K, 3)
Z_TYPE(iq4_xs, WK_IQ4_XS, 4)

int wk_act16_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  static const wk_act16_row rows[] = {
      A16_ROW(WK_Q2_K, q2_k), A16_ROW(WK_Q3_K, q3_k), A16_ROW(WK_Q6_K, q6_k),
      A16_ROW(WK_IQ4_XS, iq4_xs),
  };
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm);
}
