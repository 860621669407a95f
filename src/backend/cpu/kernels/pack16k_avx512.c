// The packed decode kernels of the super-block formats Q2_K, Q4_K, Q5_K, Q6_K
// and IQ4_XS (pack16.h) with AVX-512 VNNI: a group of 16 rows x 1..4
// tokens, one int32 and one f32 lane a row, against WK_ACT_A16K activations
// (Q2_K: WK_ACT_Q8B, its own section below).
//
// Codes as in pack16_avx512.c: a 64-byte chunk holds the same 4 code bytes of
// the 16 rows, vpdpbusd multiplies them with the activation's 4 lo or hi
// bytes broadcast from memory, and each row's sub-block sum lands in its own
// lane (hi sums first, then shifted left by 7 as the lo sums' start).
//   Q4_K: a 32-value sub-block is 8 chunks (a chunk's low nibbles in
//   sub-block 2 i, its high ones in 2 i + 1, as in the file).
//   Q5_K: 8 chunks a sub-block too; five of the eight sub-blocks are whole
//   5-bit codes (one and), the other three gathered from their spare bits.
//   Q6_K: a 16-value sub-block is 4 chunks; three of every four sub-blocks
//   are whole 6-bit codes (one and), the fourth gathered from the other
//   three's spare bits.
// Scales: the rows' 6-bit (Q4_K, Q5_K) or int8 (Q6_K) sub-block scales are
// taken out of their dwords a byte at a time (shifts and masks on 16 rows
// at once) and go to f32; each sub-block's integer sum goes to f32 and
// accumulates times its scale, and per super-block
//   Q4_K, Q5_K  y += d dx sum_j sc_j S_j - dmin sum_j m_j (dx sum_j v)
//   Q6_K  y += d (dx sum_j sc_j S_j - 32 sum_j sc_j (dx sum_j v))
// with the activation's d (dx) and its per-16 sums s (= dx sum v). Results
// are those of the 16-bit-activation vec_dot up to f32 rounding (other sums
// in another order), not bit for bit.
//
// Codes that sit high in their byte go in shifted, their scale divided by
// the same power of two (exact): Q4_K's high nibbles as 16 x the code (raw &
// 0xf0), Q5_K's gathered codes as 8 x, Q6_K's as 4 x. Q6_K's int8 scales go
// in as sc x 2^24 (one vpshufb puts the byte at the top of its dword), d as
// d x 2^-24.
//
// Bounds: a Q4_K (Q5_K) sub-block sum is at most 32 x 240 (248) x 16383
// (< 2^27), a Q6_K one 16 x 252 x 16383 (< 2^26); the hi sums x 128 stay
// inside int32. Sums past 2^24 round once in f32 (relative 2^-24).
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "backend/cpu/kernels/pack16_x512.h"
#include "backend/cpu/kernels/act8b.h"

// Byte k (0..3) of every dword of v moved to byte `to` of the dword, the
// other bytes 0 (one vpshufb).
AT AI __m512i byte_to(__m512i v, const int k, const int to) {
  const char z = (char)0x80, b = (char)k;
  const __m128i i =
      to == 0 ? _mm_setr_epi8(b, z, z, z, b + 4, z, z, z, b + 8, z, z, z, b + 12, z, z, z)
              : _mm_setr_epi8(z, z, z, b, z, z, z, b + 4, z, z, z, b + 8, z, z, z, b + 12);
  return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(i));
}
// Byte k of every dword as f32: unsigned, or signed times 2^24 (exact).
AT AI __m512 byte_u(__m512i v, const int k) { return _mm512_cvtepi32_ps(byte_to(v, k, 0)); }
AT AI __m512 byte_s24(__m512i v, const int k) { return _mm512_cvtepi32_ps(byte_to(v, k, 3)); }

// ---- Q4_K: d[16] dmin[16] | scales 3 chunks | qs 32 chunks (2304 bytes) -----
// ---- Q5_K: d[16] dmin[16] | scales 3 chunks | codes 40 (2816 bytes) ---------
// Sub-blocks 0..4 are chunks 8 t + u & 31; 5..7 gather their codes from
// those chunks' bits 5..7 (pack16.h) as 8 x the code (bits 3..7, the scale
// / 8): the top 3 bits in place, the low 2 by a shift and a mask.

// Sub-block j's 8 code vectors (Q5_K's layout).
AT AI void q5_codes(const uint8_t *qc, const int j, __m512i *c) {
  const __m512i m5 = _mm512_set1_epi8(31), top3 = _mm512_set1_epi8((char)0xe0);
  const __m512i low2 = _mm512_set1_epi8(0x18);
  A16_UNROLL for (int u = 0; u < 8; u++) {
    const uint8_t *p = qc + 64 * u;  // chunk 8 t + u at p + 512 t
    if (j < 5) {
      c[u] = _mm512_and_si512(_mm512_loadu_si512(p + 512 * j), m5);
      continue;
    }
    __m512i lo;  // the code's bits 0..1 at bits 3..4, zeros elsewhere
    if (j < 7) {  // bits 5..6 of chunk 3 (j = 5) or 4 (j = 6)
      lo = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(p + 512 * (j - 2)), 2), low2);
    } else {  // bit 7 of chunk 3 (bit 0) and of chunk 4 (bit 1)
      const __m512i a = _mm512_srli_epi16(_mm512_loadu_si512(p + 1536), 4);
      const __m512i b = _mm512_srli_epi16(_mm512_loadu_si512(p + 2048), 3);
      lo = _mm512_and_si512(_mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(8), 0xe4), low2);
    }
    // top 3 bits from chunk j - 5, in place: (chunk & top3) | lo
    c[u] = _mm512_ternarylogic_epi32(_mm512_loadu_si512(p + 512 * (j - 5)), lo, top3, 0xec);
  }
}

// qh's bit p (0..7) of each byte at bit 4 (other bits garbage).
AT AI __m512i bit_to4(__m512i q, const int p) {
  return p < 4 ? _mm512_slli_epi32(q, 4 - p) : p > 4 ? _mm512_srli_epi32(q, p - 4) : q;
}

AT AI void k45_block(const int type, const int NT, const uint8_t *G, int64_t nb, int64_t b,
                     const uint8_t *xq, size_t xs, __m512 *y) {
  const __m512i d0 = _mm512_loadu_si512(G + 64), d1 = _mm512_loadu_si512(G + 128),
                d2 = _mm512_loadu_si512(G + 192);
  const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(15), t2 = _mm512_set1_epi8(48);
  // bytes of sc0..3, m0..3, sc4..7, m4..7 (the 6-bit fields of the file's 12 bytes)
  const __m512i sa = _mm512_and_si512(d0, m6), ma = _mm512_and_si512(d1, m6);
  const __m512i sb = _mm512_ternarylogic_epi32(_mm512_and_si512(d2, m4), _mm512_srli_epi32(d0, 2),
                                               t2, 0xf8);
  const __m512i mb = _mm512_ternarylogic_epi32(
      _mm512_and_si512(_mm512_srli_epi32(d2, 4), m4), _mm512_srli_epi32(d1, 2), t2, 0xf8);
  const uint8_t *qs = G + 256;
  __m512 acc[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  if (type == WK_Q5_K) {
    A16_UNROLL for (int j = 0; j < 8; j++) {
      __m512i c[8];
      q5_codes(qs, j, c);
      __m512 sc = j < 4 ? byte_u(sa, j) : byte_u(sb, j - 4);
      if (j >= 5) sc = _mm512_mul_ps(sc, _mm512_set1_ps(1.0f / 8));
      A16_UNROLL for (int t = 0; t < NT; t++) {
        const int8_t *xl = (const int8_t *)(xq + (size_t)t * xs) +
                           wk_act16_bytes(WK_ACT_A16K, nb, b) + 32 * j;
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(c, xl, xl + 256)), sc, acc[t]);
      }
    }
  } else A16_UNROLL for (int i = 0; i < 4; i++) {
    __m512i lo[8], hi[8];
    A16_UNROLL for (int c = 0; c < 8; c++) {
      const __m512i raw = _mm512_loadu_si512(qs + 64 * (8 * i + c));
      lo[c] = _mm512_and_si512(raw, m4);
      hi[c] = _mm512_andnot_si512(m4, raw);  // 16 x the code: the scale takes 1 / 16
    }
    const __m512 s0 = i < 2 ? byte_u(sa, 2 * i) : byte_u(sb, 2 * i - 4);
    const __m512 s1 = _mm512_mul_ps(i < 2 ? byte_u(sa, 2 * i + 1) : byte_u(sb, 2 * i - 3),
                                    _mm512_set1_ps(1.0f / 16));
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const int8_t *xl = (const int8_t *)(xq + (size_t)t * xs) +
                         wk_act16_bytes(WK_ACT_A16K, nb, b) + 64 * i;
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(lo, xl, xl + 256)), s0, acc[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(hi, xl + 32, xl + 288)), s1, acc[t]);
    }
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
  const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const wk_act16k *a = (const wk_act16k *)(xq + (size_t)t * xs) + b;
    __m512 mn = _mm512_setzero_ps();
    A16_UNROLL for (int j = 0; j < 8; j++)
      mn = _mm512_fmadd_ps(j < 4 ? byte_u(ma, j) : byte_u(mb, j - 4),
                           _mm512_set1_ps(a->s[2 * j] + a->s[2 * j + 1]), mn);
    y[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[t], y[t]);
    y[t] = _mm512_fnmadd_ps(dmw, mn, y[t]);
  }
}

// ---- Q6_K: d[16] | scales 4 chunks | codes 48 chunks (3360 bytes) ----------
// Sub-blocks 4 q .. 4 q + 2 are chunks 12 q + 4 t + u (t < 3) & 63; 4 q + 3
// gathers its code's bits 0..1, 2..3, 4..5 from bits 6..7 of chunks 12 q + u,
// + 4, + 8 (pack16.h) and goes in as 4 x the code (bits 2..7, its scale / 4):
// one shift and one select a piece, no shift for the top one.

// Sum of 16 values: code vectors c[0..3] against lo bytes xl and hi xh.
AT AI __m512i sum16(const __m512i *c, const int8_t *xl, const int8_t *xh) {
  __m512i h = _mm512_setzero_si512();
  A16_UNROLL for (int u = 0; u < 4; u++) h = dpb4(h, c[u], xh + 4 * u);
  __m512i l = _mm512_slli_epi32(h, 7);
  A16_UNROLL for (int u = 0; u < 4; u++) l = dpb4(l, c[u], xl + 4 * u);
  return l;
}

// Bits of a where m is set, of b elsewhere.
AT AI __m512i sel(__m512i m, __m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(a, b, m, 0xe4);
}

AT AI void q6k_block(const int NT, const uint8_t *G, int64_t nb, int64_t b, const uint8_t *xq,
                     size_t xs, __m512 *y) {
  const uint8_t *qc = G + 288;
  const __m512i m6 = _mm512_set1_epi8(63), m12 = _mm512_set1_epi8(12);
  const __m512i top2 = _mm512_set1_epi8((char)0xc0), top4 = _mm512_set1_epi8((char)0xf0);
  __m512 acc[WK_PACK16_MAX_TOKENS], off[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = off[t] = _mm512_setzero_ps();
  A16_UNROLL for (int q = 0; q < 4; q++) {
    const __m512i S = _mm512_loadu_si512(G + 32 + 64 * q);  // scales of 4 q .. 4 q + 3
    A16_UNROLL for (int t = 0; t < 4; t++) {
      const int j = 4 * q + t;
      __m512i c[4];
      A16_UNROLL for (int u = 0; u < 4; u++) {
        const uint8_t *p = qc + 64 * (12 * q + u);
        if (t < 3) {
          c[u] = _mm512_and_si512(_mm512_loadu_si512(p + 256 * t), m6);
        } else {  // 4 x the code: bits 6..7 of chunk +8, 4..5 of +4 (>> 2), 2..3 of +0 (>> 4)
          const __m512i x = sel(top2, _mm512_loadu_si512(p + 512),
                                _mm512_srli_epi16(_mm512_loadu_si512(p + 256), 2));
          c[u] = sel(top4, x, _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(p), 4), m12));
        }
      }
      // the scale x 2^24 (d takes 2^-24); sub-block 4 q + 3's sum is 4 x its own
      const __m512 sl = byte_s24(S, t);
      const __m512 sa = t < 3 ? sl : _mm512_mul_ps(sl, _mm512_set1_ps(0.25f));
      A16_UNROLL for (int k = 0; k < NT; k++) {
        const wk_act16k *a = (const wk_act16k *)(xq + (size_t)k * xs) + b;
        const int8_t *xl = (const int8_t *)(xq + (size_t)k * xs) +
                           wk_act16_bytes(WK_ACT_A16K, nb, b) + 16 * j;
        acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum16(c, xl, xl + 256)), sa, acc[k]);
        off[k] = _mm512_fmadd_ps(sl, _mm512_set1_ps(a->s[j]), off[k]);
      }
    }
  }
  const __m512 dw = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G)),
                                  _mm512_set1_ps(0x1p-24f));
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const wk_act16k *a = (const wk_act16k *)(xq + (size_t)t * xs) + b;
    const __m512 p = _mm512_fmsub_ps(_mm512_set1_ps(a->d), acc[t],
                                     _mm512_mul_ps(_mm512_set1_ps(32.0f), off[t]));
    y[t] = _mm512_fmadd_ps(dw, p, y[t]);
  }
}

// ---- Q2_K: d[16] dmin[16] | scales 4 chunks | qs 16 chunks (1344 bytes) -----
// Against WK_ACT_Q8B activations (act8b.h: 8-bit, a scale per 32 values).
// Chunk c = 8 n + 4 q + u of qs (bytes 4 c ..): its bits 2 j .. 2 j + 1 are
// values 128 n + 32 j + 16 q + 4 u + k, so 32-value block i = 4 n + j is
// chunks 8 n + (0..3) (sub-block 2 i, E) and 8 n + 4 + (0..3) (2 i + 1, O)
// under the mask 3 << 2 j: codes go in as 4^j x the code (no shift), and
// each row's sums S_E, S_O (|S| <= 16 x 3 x 127 < 2^13 once divided by
// 4^j, exact) pair up as int16 words, S_E >> 2 j low and S_O << 16 - 2 j
// high. Their scales (scales chunk 2 n + j / 2, bytes 2 (j % 2) and + 1,
// low nibbles) pair up the same way, so one vpdpwssd gives the block's
// T_i = sc_E S_E + sc_O S_O (|T| < 2^18, exact in f32), times the block's
// d_i into an f32 sum. The mins are an integer dot product: scales chunk
// c's high nibbles are the mins of sub-blocks 4 c .. 4 c + 3, one vpdpbusd
// each against the same 4 sub-blocks' sums G_s in three base-128 digits
// (|sum_s m_s G_s| <= 16 x 15 x 2^21 < 2^29):
//   y += d sum_i d_i T_i - dmin dm sum_s m_s G_s

AT AI void q2k_block(const int NT, const uint8_t *G, int64_t b, const uint8_t *xq, size_t xs,
                     __m512 *y) {
  const __m512i m4 = _mm512_set1_epi8(15), w4 = _mm512_set1_epi32(0x000f000f);
  const __m512i lo16 = _mm512_set1_epi32(0xffff);
  const uint8_t *qs = G + 320;
  __m512 acc[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  A16_UNROLL for (int n = 0; n < 2; n++) {
    __m512i raw[8];
    A16_UNROLL for (int u = 0; u < 8; u++) raw[u] = _mm512_loadu_si512(qs + 64 * (8 * n + u));
    A16_UNROLL for (int j = 0; j < 4; j++) {
      const int i = 4 * n + j;
      const __m512i mask = _mm512_set1_epi8((char)(3 << (2 * j)));
      __m512i c[8];
      A16_UNROLL for (int u = 0; u < 8; u++) c[u] = _mm512_and_si512(raw[u], mask);
      // (sc_E, sc_O) as int16 words: bytes 2 (j % 2), + 1 of each dword to bytes 0, 2
      const char k = (char)(2 * (j % 2)), z = (char)0x80;
      const __m128i pat = _mm_setr_epi8(k, z, k + 1, z, k + 4, z, k + 5, z, k + 8, z, k + 9, z,
                                        k + 12, z, k + 13, z);
      const __m512i P = _mm512_and_si512(
          _mm512_shuffle_epi8(_mm512_loadu_si512(G + 64 + 64 * (2 * n + j / 2)),
                              _mm512_broadcast_i32x4(pat)),
          w4);
      A16_UNROLL for (int t = 0; t < NT; t++) {
        const wk_act_q8b *a = (const wk_act_q8b *)(xq + (size_t)t * xs) + b;
        const int8_t *x = a->q + 32 * i;
        __m512i se = _mm512_setzero_si512(), so = _mm512_setzero_si512();
        A16_UNROLL for (int u = 0; u < 4; u++) {
          se = dpb4(se, c[u], x + 4 * u);
          so = dpb4(so, c[u + 4], x + 16 + 4 * u);
        }
        if (j) se = _mm512_srai_epi32(se, 2 * j);
        const __m512i pr =
            _mm512_ternarylogic_epi32(se, _mm512_slli_epi32(so, 16 - 2 * j), lo16, 0xe4);
        const __m512i T = _mm512_dpwssd_epi32(_mm512_setzero_si512(), pr, P);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(T), _mm512_set1_ps(a->d[i]), acc[t]);
      }
    }
  }
  __m512i m[4];  // the mins of sub-blocks 4 c .. 4 c + 3, a byte each
  A16_UNROLL for (int c = 0; c < 4; c++)
    m[c] = _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512(G + 64 + 64 * c), 4), m4);
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
  const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const wk_act_q8b *a = (const wk_act_q8b *)(xq + (size_t)t * xs) + b;
    __m512i mn = _mm512_setzero_si512();
    A16_UNROLL for (int p = 2; p >= 0; p--) {
      if (p < 2) mn = _mm512_slli_epi32(mn, 7);
      A16_UNROLL for (int c = 0; c < 4; c++) mn = dpb4(mn, m[c], a->g[p] + 4 * c);
    }
    y[t] = _mm512_fmadd_ps(dw, acc[t], y[t]);
    y[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, _mm512_set1_ps(a->dm)), _mm512_cvtepi32_ps(mn),
                            y[t]);
  }
}

// ---- IQ4_XS: d[16] scales_h[16] | scales_l 1 chunk | qs 32 chunks (2176) ----
// Chunk 4 j + u of qs: sub-block j's values 4 u + k (low nibbles) and 16 +
// 4 u + k (high), as in the file; codes go in as table value + 128 (128 x the
// activation sum comes off); ls_j = its scales_l nibble | 2 bits of
// scales_h << 4, the scale (ls_j - 32):
//   y += d sum_j (ls_j - 32) (dx S_j - 128 (dx sum_j v))

AT AI void iq4xs_block(const int NT, const uint8_t *G, int64_t nb, int64_t b,
                       const uint8_t *xq, size_t xs, __m512 *y) {
  const __m512i m4 = _mm512_set1_epi8(15), t2 = _mm512_set1_epi32(48);
  const __m512i lut = iq4_lut128();
  const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(G + 32)));
  const __m512i sl = _mm512_loadu_si512(G + 64);
  const uint8_t *qs = G + 128;
  __m512 acc[WK_PACK16_MAX_TOKENS], off[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = off[t] = _mm512_setzero_ps();
  A16_UNROLL for (int j = 0; j < 8; j++) {
    __m512i c[8];
    A16_UNROLL for (int u = 0; u < 4; u++) {
      const __m512i raw = _mm512_loadu_si512(qs + 64 * (4 * j + u));
      c[u] = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
      c[u + 4] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
    }
    const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * j), _mm512_set1_epi32(15));
    const __m512i hi = bit_to4(sh, 2 * j);  // its 2 bits at 4..5
    const __m512 sc = _mm512_cvtepi32_ps(
        _mm512_sub_epi32(_mm512_ternarylogic_epi32(lo, hi, t2, 0xf8), _mm512_set1_epi32(32)));
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const wk_act16k *a = (const wk_act16k *)(xq + (size_t)t * xs) + b;
      const int8_t *xl = (const int8_t *)(xq + (size_t)t * xs) +
                         wk_act16_bytes(WK_ACT_A16K, nb, b) + 32 * j;
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sum(c, xl, xl + 256)), sc, acc[t]);
      off[t] = _mm512_fmadd_ps(sc, _mm512_set1_ps(a->s[2 * j] + a->s[2 * j + 1]), off[t]);
    }
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
  A16_UNROLL for (int t = 0; t < NT; t++) {
    const wk_act16k *a = (const wk_act16k *)(xq + (size_t)t * xs) + b;
    const __m512 p = _mm512_fmsub_ps(_mm512_set1_ps(a->d), acc[t],
                                     _mm512_mul_ps(_mm512_set1_ps(128.0f), off[t]));
    y[t] = _mm512_fmadd_ps(dw, p, y[t]);
  }
}

// One group x NT tokens -> y[t * ys + r].
AT AI void kgroup(const int type, const int NT, const uint8_t *g, int64_t nb, const uint8_t *xq,
                  size_t xs, float *y, size_t ys) {
  const size_t sb = 16 * (size_t)(type == WK_Q4_K   ? 144
                                  : type == WK_Q5_K ? 176
                                  : type == WK_Q6_K ? 210
                                  : type == WK_Q2_K ? 84
                                                    : 136);  // a super-block of 16 rows
  __m512 acc[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *G = g + (size_t)b * sb;
    ahead_n(G, sb, type == WK_Q5_K ? 3 : 2);
    if (type == WK_Q4_K || type == WK_Q5_K) k45_block(type, NT, G, nb, b, xq, xs, acc);
    else if (type == WK_Q6_K) q6k_block(NT, G, nb, b, xq, xs, acc);
    else if (type == WK_Q2_K) q2k_block(NT, G, b, xq, xs, acc);
    else iq4xs_block(NT, G, nb, b, xq, xs, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, acc[t]);
}

#define P16K_GEMM(T, TYPE) P16_GEMM_OF(T, TYPE, kgroup, 256)

P16K_GEMM(q4_k, WK_Q4_K)
P16K_GEMM(q5_k, WK_Q5_K)
P16K_GEMM(iq4_xs, WK_IQ4_XS)
P16K_GEMM(q2_k, WK_Q2_K)
P16K_GEMM(q6_k, WK_Q6_K)

wk_gemm_fn wk_pack16k_avx512_find(int type) {
  switch (type) {
    case WK_Q4_K: return q4_k_p16;
    case WK_Q5_K: return q5_k_p16;
    case WK_IQ4_XS: return iq4_xs_p16;
    case WK_Q2_K: return q2_k_p16;
    case WK_Q6_K: return q6_k_p16;
    default: return NULL;
  }
}
