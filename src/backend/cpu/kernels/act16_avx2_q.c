// AVX2 16-bit-activation kernels for the 32-value block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL against WK_ACT_A16), their f32 decoders, and the
// AVX2 activation converters. Compiled for AVX2 + FMA + F16C function by
// function; act16.c calls these only when cpuid says the CPU has them.
//
// Several tokens (and Q8_0): a block's codes become two vectors of 16 int16
// (values 0..15 and 16..31), multiplied with the activations' int16 v by
// pmaddwd; Q4_0 and Q5_0's fixed offsets (8, 16) come off the codes, or off
// the block sum as offset x the activation sum. The integer sums of 8
// outputs (rows x tokens) then merge into the lanes of one vector (a16_red8)
// and the f32 work runs once per block for all of them. One token, 8 rows
// (decode): two rows a vector (qdec8, below). One token, one row: Q5_0 / Q5_1
// keep the codes as bytes against the lo and hi activation bytes (pmaddubsw,
// weighted 1 and 128 by pmaddwd). The block sums are the same integers every
// way, and the f32 operations the same, so gemm equals vec_dot bit for bit.
//
// Bounds: a pmaddubsw lane is two products, at most 2 x 31 x 127; a block's
// int32 sum is at most 32 x 241 x 16383 in magnitude.
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

// hi of wk_act16_split for int32 lanes: |v| / 128 with v's sign.
AT AI __m256i split_hi(__m256i v) {
  return _mm256_sign_epi32(_mm256_srli_epi32(_mm256_abs_epi32(v), 7), v);
}

// 16 values -> their lo bytes at q, hi bytes at q + n (x * id rounded to
// nearest even, as lrintf; when e is not NULL also |lo|, |hi| and the sign at
// e, e + n, e + 2 n), and 16 int16: in order at v0 (v1 NULL), or values 0 1
// 4 5 8 9 12 13 at v0 and the others at v1 (wk_act16k_pos); returns their
// sum.
AT AI int round16(const float *x, __m256 id, int8_t *q, int8_t *e, int n, int16_t *v0,
                  int16_t *v1) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  // packs works per 128-bit half: 32-bit units a0a1 a2a3 b0b1 b2b3 | a4a5
  // a6a7 b4b5 b6b7, then put in order
  const __m256i v = _mm256_packs_epi32(a, b);
  if (!v1) {
    _mm256_storeu_si256((__m256i *)v0, _mm256_permute4x64_epi64(v, 0xd8));
  } else {
    const __m256i u = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7));
    _mm_storeu_si128((__m128i *)v0, _mm256_castsi256_si128(u));
    _mm_storeu_si128((__m128i *)v1, _mm256_extracti128_si256(u, 1));
  }
  const __m256i ha = split_hi(a), hb = split_hi(b);
  const __m256i la = _mm256_sub_epi32(a, _mm256_slli_epi32(ha, 7));
  const __m256i lb = _mm256_sub_epi32(b, _mm256_slli_epi32(hb, 7));
  // 4-byte units la0-3 lb0-3 ha0-3 hb0-3 | la4-7 lb4-7 ha4-7 hb4-7, then in order
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(la, lb), _mm256_packs_epi32(ha, hb));
  const __m256i o = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  const __m128i lo = _mm256_castsi256_si128(o), hi = _mm256_extracti128_si256(o, 1);
  _mm_storeu_si128((__m128i *)q, lo);
  _mm_storeu_si128((__m128i *)(q + n), hi);
  if (e) {  // lo and hi share v's sign, and one is nonzero unless v is
    _mm_storeu_si128((__m128i *)e, _mm_abs_epi8(lo));
    _mm_storeu_si128((__m128i *)(e + n), _mm_abs_epi8(hi));
    _mm_storeu_si128((__m128i *)(e + 2 * n), _mm_sign_epi8(_mm_set1_epi8(1), _mm_or_si128(lo, hi)));
  }
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
    int8_t *q = (int8_t *)xq + wk_act16_bytes(WK_ACT_A16, n / 32, b);
    int s = round16(x, id, q, NULL, 32, a[b].v, NULL) +
            round16(x + 16, id, q + 16, NULL, 32, a[b].v + 16, NULL);
    a[b].d = d;
    a[b].sum = s;
    a[b].s = d * (float)s;
  }
}

AT void wk_act16k_avx2_quantize(const float *x, void *xq, int64_t n) {
  wk_act16k *a = xq;
  for (int64_t b = 0; b < n / 256; b++, x += 256) {
    __m256 id;
    float d = scale_of(x, 256, &id);
    a[b].d = d;
    int8_t *q = (int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, n / 256, b);
    int8_t *e = (int8_t *)xq + wk_act16k_sign_bytes(n / 256, b);
    for (int j = 0; j < 16; j++) {  // group j: half j % 2 of 32 values
      int16_t *v = a[b].v + 32 * (j >> 1) + 8 * (j & 1);
      const int S = round16(x + 16 * j, id, q + 16 * j, e + 16 * j, 256, v, v + 16);
      a[b].s[j] = d * (float)S;
    }
  }
}

// ---- weight blocks -> codes ---------------------------------------------------

// Q5 codes as bytes in value order: the nibbles of the 16 bytes at p (low:
// codes 0..15, high: 16..31) + 16 where bit i of the 32-bit qh is set (qh's
// byte i / 8 spread over 8 lanes and tested).
AT AI __m256i q5_bytes(const uint8_t *p, const uint8_t *qh) {
  const __m256i sel = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                         0x0303030303030303LL);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i h = _mm256_castps_si256(_mm256_broadcast_ss((const float *)qh));
  __m256i m = _mm256_and_si256(_mm256_shuffle_epi8(h, sel), bit);
  m = _mm256_and_si256(_mm256_cmpeq_epi8(m, bit), _mm256_set1_epi8(16));
  __m256i c = _mm256_srlv_epi32(a16_bcast16(p), _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi8(15)), m);
}

// Fixed offset of the codes (value = d * (code - offset)).
AT AI int offset_of(const int type) {
  return type == WK_Q4_0 ? 8 : type == WK_Q5_0 ? 16 : 0;
}

// 16 bytes at p widened to int16: low nibbles (codes 0..15) in *c0, high
// nibbles (16..31) in *c1.
AT AI void nibbles16(const uint8_t *p, __m256i *c0, __m256i *c1) {
  const __m256i x = _mm256_cvtepu8_epi16(a16_load128(p));
  *c0 = _mm256_and_si256(x, _mm256_set1_epi16(15));
  *c1 = _mm256_srli_epi16(x, 4);
}

// Q5's fifth bits as int16: 16 in lane j of *c0 where bit j of qh is set,
// in lane j of *c1 for bit 16 + j, added to the nibbles.
AT AI void high5_16(const uint8_t *qh, __m256i *c0, __m256i *c1) {
  const __m256i all = _mm256_castps_si256(_mm256_broadcast_ss((const float *)qh));
  const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                        8192, 16384, (short)0x8000);
  const __m256i sixteen = _mm256_set1_epi16(16);
  const __m256i lo = _mm256_shuffle_epi8(all, _mm256_set1_epi16(0x0100));  // bits 0..15
  const __m256i hi = _mm256_shuffle_epi8(all, _mm256_set1_epi16(0x0302));  // bits 16..31
  *c0 = _mm256_or_si256(*c0, _mm256_and_si256(_mm256_cmpeq_epi16(_mm256_and_si256(lo, bit), bit),
                                              sixteen));
  *c1 = _mm256_or_si256(*c1, _mm256_and_si256(_mm256_cmpeq_epi16(_mm256_and_si256(hi, bit), bit),
                                              sixteen));
}

// Codes 0..15 and 16..31 of a block as int16 values (code - offset, or the
// bare code when !with_off).
AT AI void unpack16(const int type, const uint8_t *b, int with_off, __m256i *c0, __m256i *c1) {
  switch (type) {
    case WK_Q4_0: nibbles16(b + 2, c0, c1); break;
    case WK_Q4_1: nibbles16(b + 4, c0, c1); break;
    case WK_Q5_0: nibbles16(b + 6, c0, c1), high5_16(b + 2, c0, c1); break;
    case WK_Q5_1: nibbles16(b + 8, c0, c1), high5_16(b + 4, c0, c1); break;
    case WK_Q8_0:
      *c0 = _mm256_cvtepi8_epi16(a16_load128(b + 2));
      *c1 = _mm256_cvtepi8_epi16(a16_load128(b + 18));
      break;
    default: {  // WK_IQ4_NL
      const __m128i lut = a16_load128(wk_kern_iq4nl_values), m4 = _mm_set1_epi8(15);
      const __m128i q = a16_load128(b + 2);
      *c0 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(q, m4)));
      *c1 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4)));
      break;
    }
  }
  const int off = with_off ? offset_of(type) : 0;
  if (off) {
    *c0 = _mm256_sub_epi16(*c0, _mm256_set1_epi16((short)off));
    *c1 = _mm256_sub_epi16(*c1, _mm256_set1_epi16((short)off));
  }
}

// ---- the tile ---------------------------------------------------------------------

// Whether a tile of N tokens multiplies bytes with lo and hi (else int16
// codes with v).
AT AI int bytes_path(const int type, const int N) {
  return N == 1 && (type == WK_Q5_0 || type == WK_Q5_1);
}

// One row's Q5 block (b) times one token's lo and hi bytes: int32 lanes,
// lo + 128 hi, of the bare codes.
AT AI __m256i q5_products(const int type, const uint8_t *b, __m256i lo, __m256i hi) {
  const __m256i c = type == WK_Q5_0 ? q5_bytes(b + 6, b + 2) : q5_bytes(b + 8, b + 4);
  const __m256i plo = _mm256_maddubs_epi16(c, lo), phi = _mm256_maddubs_epi16(c, hi);
  return _mm256_add_epi32(_mm256_madd_epi16(plo, _mm256_set1_epi16(1)),
                          _mm256_madd_epi16(phi, _mm256_set1_epi16(128)));
}

// ---- the decode tile: 8 rows x one token, two rows a vector ------------------
//
// Pair p = rows p and p + 4: row p's 16 bytes of a block in the low half of
// a vector, row p + 4's in the high half, against activations broadcast to
// both halves. Only a block's total counts, so the halves' products add in
// int16 before widening, and the pairs' lanes reduce to lanes 0..7 = rows
// 0..7 in three merges. Q4_0, Q4_1, Q5_0, Q5_1: code bytes by pmaddubsw with
// the lo and hi bytes, weighted 1 and 128 by pmaddwd. IQ4_NL: table value
// + 128, unpacked to int16 with zeros (within halves: values 0..7 and 8..15
// of the low nibbles, then of the high), by pmaddwd with v; the + 128 comes
// off as 128 x the activation sum, so no |code| and sign moves are needed.
// Q5_0 and Q5_1 take each pair's 16-byte windows by two plain 32-byte loads
// and a blend (load_pair), the others by two broadcasts and a blend
// (a16_load2): each the faster for its types.
// Bounds: two pmaddubsw lanes added <= 2 x 2 x 31 x 127; IQ4_NL's block sum
// <= 32 x 241 x 16383.

// 16 bytes at a in the low half, 16 at b in the high half: two plain 32-byte
// loads (the second from b - 16) and a blend, no broadcast. Reads the 16
// bytes after a + 16 and the 16 before b: in the decode tile a is a block of
// rows 0..3 and b of rows 4..7, so both lie inside the tile's rows.
AT AI __m256i load_pair(const uint8_t *a, const uint8_t *b) {
  return _mm256_blend_epi32(a16_load(a), a16_load(b - 16), 0xf0);
}

// One block of rows a (low halves) and b (high halves) as bytes, Q4_0, Q4_1
// and IQ4_NL: *c1 values 0..15, *c2 values 16..31; codes, or IQ4_NL's table
// values + 128.
AT AI void qcodes2(const int type, const uint8_t *a, const uint8_t *b, __m256i *c1, __m256i *c2) {
  const __m256i x = a16_load2(a + a16_qs_at(type), b + a16_qs_at(type)), m4 = _mm256_set1_epi8(15);
  *c1 = _mm256_and_si256(x, m4);
  *c2 = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
  if (type == WK_IQ4_NL) {
    const __m256i lut = _mm256_add_epi8(a16_bcast16(wk_kern_iq4nl_values),
                                        _mm256_set1_epi8((char)128));
    *c1 = _mm256_shuffle_epi8(lut, *c1);
    *c2 = _mm256_shuffle_epi8(lut, *c2);
  }
}

// Q5_0 / Q5_1 pair: rows a and b's block sums, lo + 128 hi, against the lo
// and hi bytes x[0..3] (values 0..15 and 16..31 of each); *head: the blocks'
// first 16 bytes (d, m, qh; row a's in the low half). The codes are the
// nibbles + 16 where bit i of qh is set: qh's byte i / 8 spread over lanes
// by pshufb, bit i % 8 tested, and psignb of 16 by the tested bit (16 where
// set, 0 where not: one op for cmpeq + and; the bit-7 lanes hold -16, which
// the negative byte negates). Per 64 codes (two rows): 2 blends (head, qs),
// 3 ops of nibbles, 8 of fifth bits (pshufb, pand, psignb, por, twice), 9 of
// products; values 0..15 done before 16..31, so that few vectors are live.
AT AI __m256i q5_pair(const int type, const uint8_t *a, const uint8_t *b, const __m256i *x,
                      __m256i *head) {
  const long long at = type == WK_Q5_0 ? 2 : 4;  // qh: bytes at .. at + 3 of each half
  const long long ones = 0x0101010101010101LL;
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  const __m256i sixteen = _mm256_set1_epi64x((long long)0xf010101010101010ULL);
  const __m256i s1 = _mm256_setr_epi64x(at * ones, (at + 1) * ones, at * ones, (at + 1) * ones);
  const __m256i s2 = _mm256_setr_epi64x((at + 2) * ones, (at + 3) * ones, (at + 2) * ones,
                                        (at + 3) * ones);
  const __m256i h = *head = load_pair(a, b);
  const __m256i xs = load_pair(a + a16_qs_at(type), b + a16_qs_at(type));
  const __m256i f1 = _mm256_and_si256(_mm256_shuffle_epi8(h, s1), bit);
  __m256i c = _mm256_or_si256(_mm256_and_si256(xs, m4), _mm256_sign_epi8(sixteen, f1));
  __m256i pl = _mm256_maddubs_epi16(c, x[0]), ph = _mm256_maddubs_epi16(c, x[2]);
  const __m256i f2 = _mm256_and_si256(_mm256_shuffle_epi8(h, s2), bit);
  c = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(xs, 4), m4),
                      _mm256_sign_epi8(sixteen, f2));
  pl = _mm256_add_epi16(pl, _mm256_maddubs_epi16(c, x[1]));
  ph = _mm256_add_epi16(ph, _mm256_maddubs_epi16(c, x[3]));
  return _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16(1)),
                          _mm256_madd_epi16(ph, _mm256_set1_epi16(128)));
}

// One pair's integer block sums (rows a and b, see qcodes2) against the
// activations: IQ4_NL by pmaddwd with the int16 values x[0..3] (values 0..7,
// 8..15, 16..23, 24..31 in both halves), the others by pmaddubsw with the lo
// and hi bytes x[0..3] (values 0..15 and 16..31 of each), weighted 1 and 128.
AT AI __m256i pair_sums(const int type, const uint8_t *a, const uint8_t *b, const __m256i *x,
                        __m256i *head) {
  if (type == WK_Q5_0 || type == WK_Q5_1) return q5_pair(type, a, b, x, head);
  __m256i c1, c2;
  qcodes2(type, a, b, &c1, &c2);
  if (type == WK_IQ4_NL) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi8(c1, z), x[0]),
                                        _mm256_madd_epi16(_mm256_unpackhi_epi8(c1, z), x[1]));
    const __m256i s2 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_unpacklo_epi8(c2, z), x[2]),
                                        _mm256_madd_epi16(_mm256_unpackhi_epi8(c2, z), x[3]));
    return _mm256_add_epi32(s1, s2);
  }
  const __m256i pl =
      _mm256_add_epi16(_mm256_maddubs_epi16(c1, x[0]), _mm256_maddubs_epi16(c2, x[1]));
  const __m256i ph =
      _mm256_add_epi16(_mm256_maddubs_epi16(c1, x[2]), _mm256_maddubs_epi16(c2, x[3]));
  return _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16(1)),
                          _mm256_madd_epi16(ph, _mm256_set1_epi16(128)));
}

// Block b of rows blk + r ws (r = 0..7): the exact integer sums, lane r = row
// r, before the offsets come off. q: the block's lo and hi bytes; v: its
// int16 values. Q5_0, Q5_1: also the rows' d in words 0..7 of *dm and m in
// words 8..15 (from the pairs' heads: row p's words 0 and 1 in the low half
// of pair p's, row p + 4's in the high half). The pairs merge as they come,
// so that few of their vectors are live at once.
AT AI __m256i qsums8(const int type, const uint8_t *const *row, const int8_t *q,
                     const int16_t *v, __m256i *dm) {
  __m256i x[4], t[4], head[4];
  A16_UNROLL for (int i = 0; i < 4; i++)
      x[i] = type == WK_IQ4_NL ? a16_bcast16(v + 8 * i) : a16_bcast16(q + 16 * i);
  if (type == WK_Q4_0 || type == WK_Q4_1) {  // all pairs, then the merges: faster for these
    A16_UNROLL for (int p = 0; p < 4; p++)
        t[p] = pair_sums(type, row[p], row[p + 4], x, &head[p]);
    return a16_merge64(a16_merge32(t[0], t[1]), a16_merge32(t[2], t[3]));
  }
  const int q5 = type == WK_Q5_0 || type == WK_Q5_1;
  t[0] = pair_sums(type, row[0], row[4], x, &head[0]);
  t[1] = pair_sums(type, row[1], row[5], x, &head[1]);
  const __m256i m01 = a16_merge32(t[0], t[1]);
  __m256i u01 = _mm256_setzero_si256();  // d0 d1 w0 w1 .. | d4 d5 .. (w: word 1, Q5_1's m)
  if (q5) u01 = _mm256_unpacklo_epi16(head[0], head[1]);
  t[2] = pair_sums(type, row[2], row[6], x, &head[2]);
  t[3] = pair_sums(type, row[3], row[7], x, &head[3]);
  const __m256i m23 = a16_merge32(t[2], t[3]);
  if (q5) {  // d0-3 m0-3 | d4-7 m4-7, then d0-7 | m0-7
    const __m256i u23 = _mm256_unpacklo_epi16(head[2], head[3]);
    *dm = _mm256_permute4x64_epi64(_mm256_unpacklo_epi32(u01, u23), 0xd8);
  }
  return a16_merge64(m01, m23);
}

// Bytes ahead of the current block that the decode tile prefetches in each
// of its 8 rows (within the row): with two threads streaming 8 rows each from
// memory the hardware prefetchers fell behind on long rows (k = 14336, Q4_0
// and Q4_1: 26.5 -> 28 GB/s with two threads). 256 and 384 against 512 (here
// and DEC_AHEAD, act16_avx512_q.c; Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, 11 runs):
// 384 0-4 points better with one thread in one batch, the same in the next,
// 2 threads the same; 256 no better. (The super-block tiles: A16_K_AHEAD.)
#define QDEC_AHEAD 512
// The same for Q8_0's decode tile (tile(), R = 8, N = 1). bench_matvec
// --act16, product / read passes, medians of ~30 runs: 2 threads at
// 4096x14336 89 -> 94% (read passes ~35 GB/s) and 71 -> 81% (~55 GB/s), the
// other shapes up to 15 points up; 1 thread 67-79 -> 72-92%. 384 and 512
// bytes: 2 threads at 4096x14336 the same or up to 3 points better, the other
// shapes and 1 thread worse; 1024 lost.
#define Q8DEC_AHEAD 256

// 8 rows x one token, the same f32 operations as tile().
AT AI void qdec8(const int type, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                 float *y, size_t yr) {
  const size_t bytes = (size_t)a16_q_bytes(type);
  const int off = type == WK_IQ4_NL ? 128 : offset_of(type);
  const int has_min = type == WK_Q4_1 || type == WK_Q5_1;
  const wk_act16 *act = (const wk_act16 *)xq;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * bytes;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16, nb, b);
    a16_ahead(8, blk, ws, b, bytes, QDEC_AHEAD);
    const uint8_t *row[8];
    A16_UNROLL for (int r = 0; r < 8; r++) row[r] = blk + (size_t)r * ws;
    __m256i dm = _mm256_setzero_si256();
    __m256i isum = qsums8(type, row, q, act[b].v, &dm);
    if (off) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(act[b].sum * off));
    __m256 dwv, mwv = _mm256_setzero_ps();
    if (type == WK_Q5_0 || type == WK_Q5_1)
      dwv = _mm256_cvtph_ps(_mm256_castsi256_si128(dm)),
      mwv = _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1));
    else
      a16_f16_rows(blk, ws, 8, has_min, &dwv, &mwv);
    acc = a16_dec_acc(acc, isum, dwv, mwv, act[b].d, act[b].s, has_min);
  }
  a16_store_rows8(acc, y, yr);
}

// R rows x N tokens (R * N <= 8), outputs o = r * N + t in the lanes of one
// vector. Per block each row's codes are decoded once and used for every
// token; each output's integer block sum is reduced to one lane, then
//   acc[o] += float(isum) * (d_w * d_a)   (+ m_w * s_a with a minimum)
// (the same f32 operations for every tile shape, so gemm equals vec_dot).
AT AI void tile(const int type, const int R, const int N, const uint8_t *w, size_t ws,
                int64_t nb, const uint8_t *xq, size_t xs, float *y, size_t ys, size_t yr) {
  if (N == 1 && R == 8 && type != WK_Q8_0) {  // decode: two rows a vector
    qdec8(type, w, ws, nb, xq, y, yr);
    return;
  }
  const int bytes = a16_q_bytes(type), off = offset_of(type);
  const int has_min = type == WK_Q4_1 || type == WK_Q5_1;
  // lane o -> row o / N, token o % N
  const __m256i row_of = _mm256_setr_epi32(0 / N % 8, 1 / N % 8, 2 / N % 8, 3 / N % 8, 4 / N % 8,
                                           5 / N % 8, 6 / N % 8, 7 / N % 8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    if (N == 1 && R == 8) a16_ahead(8, blk, ws, b, (size_t)bytes, Q8DEC_AHEAD);  // Q8_0
    __m256i is[8];
    float da[8] = {0}, sa[8] = {0};
    int sum[8] = {0};
    // one token: the offset comes off the block sum below
    const int off_sum = N == 1 ? off : 0;
    A16_UNROLL for (int r = 0; r < R; r++) {
      const uint8_t *rb = blk + (size_t)r * ws;
      if (bytes_path(type, N)) {
        const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16, nb, b);
        is[r] = q5_products(type, rb, a16_load(q), a16_load(q + 32));
        continue;
      }
      __m256i c0, c1;
      unpack16(type, rb, !off_sum, &c0, &c1);
      A16_UNROLL for (int t = 0; t < N; t++) {
        const wk_act16 *a = (const wk_act16 *)(xq + (size_t)t * xs) + b;
        is[r * N + t] = _mm256_add_epi32(_mm256_madd_epi16(c0, a16_load(a->v)),
                                         _mm256_madd_epi16(c1, a16_load(a->v + 16)));
      }
    }
    A16_UNROLL for (int t = 0; t < N; t++) {
      const wk_act16 *a = (const wk_act16 *)(xq + (size_t)t * xs) + b;
      da[t] = a->d, sa[t] = a->s, sum[t] = a->sum;
    }
    __m256i isum = a16_red8(is, R * N);
    __m256 dav, sav = _mm256_setzero_ps();
    if (N == 1) {
      dav = _mm256_set1_ps(da[0]);
      if (has_min) sav = _mm256_set1_ps(sa[0]);
    } else {
      dav = A16_LANES(da, R * N, 1, N);
      if (has_min) sav = A16_LANES(sa, R * N, 1, N);
    }
    if (off_sum)  // offset (8 or 16) x activation sum
      isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(sum[0] * off));
    __m256 dwv, mwv = _mm256_setzero_ps();
    a16_f16_rows(blk, ws, R, has_min, &dwv, &mwv);
    if (N > 1) {
      dwv = _mm256_permutevar8x32_ps(dwv, row_of);
      if (has_min) mwv = _mm256_permutevar8x32_ps(mwv, row_of);
    }
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dwv, dav));
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
    for (int64_t i = 0; i < nb; i++, b += a16_q_bytes(TYPE), y += 32) {                      \
      __m256i c0, c1;                                                                        \
      unpack16(TYPE, b, 1, &c0, &c1);                                                        \
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
  static const wk_act16_row rows[] = {
      A16_ROW(WK_Q4_0, q4_0), A16_ROW(WK_Q4_1, q4_1), A16_ROW(WK_Q5_0, q5_0),
      A16_ROW(WK_Q5_1, q5_1), A16_ROW(WK_Q8_0, q8_0), A16_ROW(WK_IQ4_NL, iq4_nl),
  };
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm) ||
         wk_act16_avx2_k_find(type, dot, gemm);
}
