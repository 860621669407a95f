// The packed decode kernels (pack16.h) of Q4_K, Q5_K and Q6_K for CPUs
// whose best level is AVX2 (no AVX-512): a group of 16 rows x 1..4 tokens as
// two halves of 8 rows, one int32 and one f32 lane a row, against
// WK_ACT_A16K activations.
//
// The super-blocks are pack16k_avx512.c's; a 64-byte chunk is two 256-bit
// halves (rows 0..7, 8..15), each row's 4 code bytes in its own dword, and
// every dword field below is read per half the same way. As in
// pack16_avx2.c, vpmaddubsw multiplies a chunk's codes with the
// activation's 4 lo (or hi) bytes broadcast, the words of a few chunks add,
// and vpmaddwd sums each row's words into its own lane: no lane moves.
//   Q4_K: a chunk's low nibbles belong to sub-block 2 i, its high ones to
//   2 i + 1 (8 chunks a sub-block pair i), both shifted to 0..15. A
//   sub-block's 8 chunks of words add, then vpmaddwd takes the row's 6-bit
//   scale in both words of its dword (lo words) or 128 x it (hi words), so
//   the scaled sums stay integers; they go to f32 twice a super-block.
//   Q5_K: the same with 5-bit codes 0..31 (five sub-blocks one mask, three
//   gathered from bits 5..7 by shifts and masks); the words of 4 chunks add
//   before vpmaddwd, and the scaled sums go to f32 every 2 sub-blocks.
//   Q6_K: a chunk's 6-bit codes (one mask; every fourth sub-block gathered
//   from three chunks' top 2 bits by shifts and masks) make 16-value
//   sub-blocks of 4 chunks; the words of 2 chunks add, vpmaddwd with 1 (lo)
//   or 128 (hi); each sub-block's sum goes to f32 as dx S_j - 32 s_j and
//   accumulates times its int8 scale.
// One sub-block at a time (Q4_K: a chunk's low nibbles, then its high ones
// from the same bytes again): both at once keep twice the word sums live,
// which spilled and ran about the tile's speed. 4 tokens: two passes of 2
// (kgroup2).
// Per super-block (dx, s: the activation's d and per-16 sums d sum v):
//   Q4_K, Q5_K  y += d dx sum_j sc_j S_j - dmin sum_j m_j (s_2j + s_2j+1)
//   Q6_K  y += d (dx sum_j sc_j S_j - 32 sum_j sc_j s_j)
// Results are the AVX2 16-bit-activation vec_dot's up to f32 rounding
// (other sums in another order), not bit for bit.
//
// Bounds (vpmaddubsw saturates at int16, so every word sum must stay below
// 32768; an activation byte is at most 127 in magnitude): a word is two
// products, Q4_K 2 x 15 x 127 = 3810 (the shifted nibble: raw & 0xf0, as the
// AVX-512 kernel takes it, would give 2 x 240 x 127 = 60960), 8 chunks'
// added 30480; Q5_K 2 x 31 x 127 = 7874, 4 chunks' added 31496 (8 would
// be 62992); Q6_K 2 x 63 x 127 = 16002, 2 chunks' added 32004. Q4_K's
// scaled sub-block sum is at most 32 x 15 x 63 x 16383 < 4.96e8, so 4 of
// them (half a super-block) stay in int32 (< 1.99e9) before going to f32;
// Q5_K's 32 x 31 x 63 x 16383 < 1.03e9, 2 of them (< 2.05e9);
// a Q6_K sub-block sum at most 16 x 63 x 16383 < 2^24 (exact in f32).
// Q6_K's int8 scales go to f32 as sc x 2^24 (the byte at the top of its
// dword: one vpshufb), d as d x 2^-24: both exact.
//
// Q5_K on its old layout (the fifth bit or-ed in per chunk) ran 0.83-0.85x
// the tile at one token; on this one 1.1x, 1.15-1.35x at 2-3 tokens, 0.75x
// at 4 (the tile's 4-token path). The gathered codes' shifts cost nothing
// measurable (every sub-block as one mask ran as fast): the extra vpmaddwd
// of 4-chunk word sums bounds it (8-chunk sums, wrong, ran ~10% faster).
// Codes widened to words once and vpmaddwd on 16-bit v ran 0.75-0.85x this
// (bench/RESULTS.md).
//
// AT: act16_x86.h's AVX2 + FMA + F16C; pack16.c calls these only at that
// level or above.
#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/pack16_x86.h"

// Byte k (0..3) of every dword of v at byte `to` (0..3) of the dword, and
// also at byte 2 when both (the two words' low bytes); the other bytes 0.
AT AI __m256i kbyte(__m256i v, const int k, const int to, const int both) {
  const char z = (char)0x80;
#define KB(n) ((n) % 4 == to || (both && (n) % 4 == 2) ? (char)((n) - (n) % 4 + k) : z)
  const __m128i i = _mm_setr_epi8(KB(0), KB(1), KB(2), KB(3), KB(4), KB(5), KB(6), KB(7), KB(8),
                                  KB(9), KB(10), KB(11), KB(12), KB(13), KB(14), KB(15));
#undef KB
  return _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(i));
}

// *w (int16 words) + vpmaddubsw(c, b), or the product alone when first.
AT AI void kadd(__m256i *w, __m256i c, __m256i b, const int first) {
  const __m256i p = _mm256_maddubs_epi16(c, b);
  *w = first ? p : _mm256_add_epi16(*w, p);
  A16_KEEP(*w);
}

// ---- Q4_K: d[16] dmin[16] | scales 3 chunks | qs 32 chunks (2304 bytes) -----

// Half h's bytes of scale j (mins: m = 1) of sub-block j (0..7), from the
// three scale chunks (the file's 12 bytes: sc0..3, m0..3 in the low 6 bits
// of dwords 0, 1; sc4..7, m4..7 in the nibbles of dword 2 | the top 2 bits
// of dwords 0, 1 at bits 4..5), each in byte j % 4 of its dword.
AT AI __m256i q4k_scale(const uint8_t *G, const int h, const int j, const int m) {
  const __m256i d01 = a16_load(G + 64 + 64 * m + 32 * h);
  if (j < 4) return _mm256_and_si256(d01, _mm256_set1_epi8(63));
  const __m256i d2 = a16_load(G + 192 + 32 * h);
  return _mm256_or_si256(_mm256_and_si256(m ? _mm256_srli_epi32(d2, 4) : d2, _mm256_set1_epi8(15)),
                         _mm256_and_si256(_mm256_srli_epi32(d01, 2), _mm256_set1_epi8(48)));
}

// ---- Q5_K: d[16] dmin[16] | scales 3 chunks | codes 40 chunks (2816 bytes) --
// Q4_K's d, dmin and scales (q4k_scale). Sub-blocks 0..4 are chunks 8 t + u
// & 31; 5..7 gather their codes from those chunks' bits 5..7 (pack16.h) as
// plain 0..31: the AVX-512 kernel's 8 x the code would make a word 2 x 248
// x 127 and saturate vpmaddubsw.

// Half h of chunk u (0..7) of sub-block j's codes (0..31).
AT AI __m256i q5_codes(const uint8_t *qc, const int j, const int u, const int h) {
  const uint8_t *p = qc + 64 * u + 32 * h;  // chunk 8 t + u at p + 512 t
  if (j < 5) return _mm256_and_si256(a16_load(p + 512 * j), _mm256_set1_epi8(31));
  // the code's top 3 bits: bits 5..7 of chunk j - 5, at bits 2..4
  const __m256i top = _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 512 * (j - 5)), 3),
                                       _mm256_set1_epi8(28));
  __m256i lo;  // its low 2 bits
  if (j < 7) {  // bits 5..6 of chunk 3 (j = 5) or 4 (j = 6)
    lo = _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 512 * (j - 2)), 5), _mm256_set1_epi8(3));
  } else {  // bit 7 of chunk 3 (bit 0) and of chunk 4 (bit 1)
    lo = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 1536), 7), _mm256_set1_epi8(1)),
        _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 2048), 6), _mm256_set1_epi8(2)));
  }
  return _mm256_or_si256(top, lo);
}

// Half h of chunk c (0..7) of sub-block j's codes, Q4_K (0..15) or Q5_K.
AT AI __m256i k45_codes(const int type, const uint8_t *qs, const int j, const int c,
                        const int h) {
  if (type == WK_Q5_K) return q5_codes(qs, j, c, h);
  const __m256i raw = a16_load(qs + 64 * (8 * (j / 2) + c) + 32 * h);
  return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(15));
}

// y += d dx acc - dmin sum_j m_j (s_2j + s_2j+1), acc[2 t + h] = sum_j sc_j S_j.
AT AI void k45_mins(const int NT, const uint8_t *G, int64_t b, const uint8_t *xq, size_t xs,
                    const __m256 *acc, __m256 *y) {
  A16_UNROLL for (int h = 0; h < 2; h++) {
    const __m256 dw = _mm256_cvtph_ps(a16_load128(G + 16 * h));
    const __m256 dmw = _mm256_cvtph_ps(a16_load128(G + 32 + 16 * h));
    __m256 mf[8];  // the mins as f32
    A16_UNROLL for (int j = 0; j < 8; j++)
        mf[j] = _mm256_cvtepi32_ps(kbyte(q4k_scale(G, h, j, 1), j % 4, 0, 0));
    A16_UNROLL for (int t = 0; t < NT; t++) {
      const wk_act16k *a = (const wk_act16k *)(xq + (size_t)t * xs) + b;
      __m256 mn = _mm256_setzero_ps();
      A16_UNROLL for (int j = 0; j < 8; j++)
          mn = _mm256_fmadd_ps(mf[j], _mm256_set1_ps(a->s[2 * j] + a->s[2 * j + 1]), mn);
      __m256 *yv = &y[2 * t + h];
      *yv = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a->d)), acc[2 * t + h], *yv);
      *yv = _mm256_fnmadd_ps(dmw, mn, *yv);
    }
  }
}

// Q4_K or Q5_K: the words of CW chunks add before vpmaddwd (Q4_K 8, Q5_K 4)
// and the scaled sums of SI sub-blocks in int32 before f32 (4, 2: Bounds).
AT AI void k45_block(const int type, const int NT, const uint8_t *G, int64_t nb, int64_t b,
                     const uint8_t *xq, size_t xs, __m256 *y) {
  const int CW = type == WK_Q5_K ? 4 : 8, SI = type == WK_Q5_K ? 2 : 4;
  const uint8_t *qs = G + 256;
  const int8_t *x[WK_PACK16_MAX_TOKENS];  // the lo bytes (hi: 256 on)
  A16_UNROLL for (int t = 0; t < NT; t++)
      x[t] = (const int8_t *)(xq + (size_t)t * xs) + wk_act16_bytes(WK_ACT_A16K, nb, b);
  __m256 acc[2 * WK_PACK16_MAX_TOKENS];  // acc[2 t + h]: sum_j sc_j S_j in f32
  A16_UNROLL for (int i = 0; i < 2 * NT; i++) acc[i] = _mm256_setzero_ps();
  A16_UNROLL for (int q = 0; q < 8 / SI; q++) {  // sub-blocks SI q ..
    __m256i is[2 * WK_PACK16_MAX_TOKENS];
    A16_UNROLL for (int j = SI * q; j < SI * q + SI; j++) {
      A16_UNROLL for (int c0 = 0; c0 < 8; c0 += CW) {
        __m256i w[WK_PACK16_MAX_TOKENS][2][2];  // [t][h][lo / hi bytes]
        A16_UNROLL for (int c = c0; c < c0 + CW; c++) {
          __m256i k[2];
          A16_UNROLL for (int h = 0; h < 2; h++) k[h] = k45_codes(type, qs, j, c, h);
          A16_UNROLL for (int t = 0; t < NT; t++) {
            const int8_t *xl = x[t] + 32 * j + 4 * c;
            const __m256i l = a16_bcast4(xl), hb = a16_bcast4(xl + 256);
            A16_UNROLL for (int h = 0; h < 2; h++) {
              kadd(&w[t][h][0], k[h], l, c == c0);
              kadd(&w[t][h][1], k[h], hb, c == c0);
            }
          }
        }
        A16_UNROLL for (int h = 0; h < 2; h++) {
          // the scale in both words of each dword, and x 128
          const __m256i s0 = kbyte(q4k_scale(G, h, j, 0), j % 4, 0, 1);
          const __m256i s1 = _mm256_slli_epi16(s0, 7);
          A16_UNROLL for (int t = 0; t < NT; t++) {
            const __m256i v = _mm256_add_epi32(_mm256_madd_epi16(w[t][h][0], s0),
                                               _mm256_madd_epi16(w[t][h][1], s1));
            const int i = 2 * t + h;
            is[i] = j % SI || c0 ? _mm256_add_epi32(is[i], v) : v;
          }
        }
      }
    }
    A16_UNROLL for (int i = 0; i < 2 * NT; i++)
        acc[i] = _mm256_add_ps(acc[i], _mm256_cvtepi32_ps(is[i]));
  }
  k45_mins(NT, G, b, xq, xs, acc, y);
}

// ---- Q6_K: d[16] | scales 4 chunks | codes 48 chunks (3360 bytes) ----------

// Half h of chunk u of sub-block j's codes (0..63; layout: pack16.h).
AT AI __m256i q6_codes(const uint8_t *qc, const int j, const int u, const int h) {
  const int q = j / 4, t = j % 4;
  const uint8_t *p = qc + 64 * (12 * q + u) + 32 * h;
  const __m256i m6 = _mm256_set1_epi8(63);
  if (t < 3) return _mm256_and_si256(a16_load(p + 256 * t), m6);
  // bits 6..7 of chunks +0, +4, +8 at bits 0..1, 2..3, 4..5
  const __m256i a = _mm256_and_si256(_mm256_srli_epi16(a16_load(p), 6), _mm256_set1_epi8(3));
  const __m256i b = _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 256), 4),
                                     _mm256_set1_epi8(12));
  const __m256i c = _mm256_and_si256(_mm256_srli_epi16(a16_load(p + 512), 2),
                                     _mm256_set1_epi8(48));
  return _mm256_or_si256(_mm256_or_si256(a, b), c);
}

AT AI void q6k_block(const int NT, const uint8_t *G, int64_t nb, int64_t b, const uint8_t *xq,
                     size_t xs, __m256 *y) {
  const uint8_t *qc = G + 288;
  const __m256i one = _mm256_set1_epi16(1), w128 = _mm256_set1_epi16(128);
  const int8_t *x[WK_PACK16_MAX_TOKENS];
  const wk_act16k *a[WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int t = 0; t < NT; t++) {
    x[t] = (const int8_t *)(xq + (size_t)t * xs) + wk_act16_bytes(WK_ACT_A16K, nb, b);
    a[t] = (const wk_act16k *)(xq + (size_t)t * xs) + b;
  }
  __m256 acc[2 * WK_PACK16_MAX_TOKENS];  // acc[2 t + h]: sum_j sc_j (dx S_j - 32 s_j)
  A16_UNROLL for (int i = 0; i < 2 * NT; i++) acc[i] = _mm256_setzero_ps();
  A16_UNROLL for (int hh = 0; hh < 2; hh++) {
    A16_UNROLL for (int j4 = 0; j4 < 8; j4++) {
      const int j = 8 * hh + j4;  // the sub-block
      __m256i S[2 * WK_PACK16_MAX_TOKENS];  // [2 t + h]
      A16_UNROLL for (int p = 0; p < 2; p++) {  // chunks u = 2 p, 2 p + 1
        __m256i k[2][2];                         // [h][u]
        A16_UNROLL for (int h = 0; h < 2; h++)
          A16_UNROLL for (int u = 0; u < 2; u++) k[h][u] = q6_codes(qc, j, 2 * p + u, h);
        A16_UNROLL for (int t = 0; t < NT; t++) {
          const int8_t *xl = x[t] + 16 * j + 8 * p;  // chunk 2 p's values
          const __m256i l0 = a16_bcast4(xl), l1 = a16_bcast4(xl + 4);
          const __m256i h0 = a16_bcast4(xl + 256), h1 = a16_bcast4(xl + 260);
          A16_UNROLL for (int h = 0; h < 2; h++) {
            __m256i wl, wh;
            kadd(&wl, k[h][0], l0, 1);
            kadd(&wl, k[h][1], l1, 0);
            kadd(&wh, k[h][0], h0, 1);
            kadd(&wh, k[h][1], h1, 0);
            const __m256i v =
                _mm256_add_epi32(_mm256_madd_epi16(wl, one), _mm256_madd_epi16(wh, w128));
            S[2 * t + h] = p ? _mm256_add_epi32(S[2 * t + h], v) : v;
          }
        }
      }
      A16_UNROLL for (int h = 0; h < 2; h++) {
        // the scale x 2^24 (d takes 2^-24)
        const __m256 sc = _mm256_cvtepi32_ps(kbyte(a16_load(G + 32 + 64 * (j / 4) + 32 * h),
                                                   j % 4, 3, 0));
        A16_UNROLL for (int t = 0; t < NT; t++) {
          const int i = 2 * t + h;
          const __m256 v = _mm256_fmsub_ps(_mm256_set1_ps(a[t]->d), _mm256_cvtepi32_ps(S[i]),
                                           _mm256_set1_ps(32.0f * a[t]->s[j]));
          acc[i] = _mm256_fmadd_ps(v, sc, acc[i]);
        }
      }
    }
  }
  A16_UNROLL for (int h = 0; h < 2; h++) {
    const __m256 dw =
        _mm256_mul_ps(_mm256_cvtph_ps(a16_load128(G + 16 * h)), _mm256_set1_ps(0x1p-24f));
    A16_UNROLL for (int t = 0; t < NT; t++)
        y[2 * t + h] = _mm256_fmadd_ps(dw, acc[2 * t + h], y[2 * t + h]);
  }
}

// One group x NT tokens -> y[t * ys + r].
AT AI void kgroup_n(const int type, const int NT, const uint8_t *g, int64_t nb,
                   const uint8_t *xq, size_t xs, float *y, size_t ys) {
  // a super-block of 16 rows
  const size_t sb = 16 * (size_t)(type == WK_Q4_K ? 144 : type == WK_Q5_K ? 176 : 210);
  __m256 acc[2 * WK_PACK16_MAX_TOKENS];
  A16_UNROLL for (int i = 0; i < 2 * NT; i++) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *G = g + (size_t)b * sb;
    ahead(G, sb);
    if (type == WK_Q6_K) q6k_block(NT, G, nb, b, xq, xs, acc);
    else k45_block(type, NT, G, nb, b, xq, xs, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) {
    _mm256_storeu_ps(y + (size_t)t * ys, acc[2 * t]);
    _mm256_storeu_ps(y + (size_t)t * ys + 8, acc[2 * t + 1]);
  }
}

// The same, 4 tokens as two passes of 2 (the group's second pass from L2):
// at once the 4 tokens' word sums spill (scratch harness, rows in L2, GB/s x
// tokens: Q6_K 4 tokens at once 16-19 against the tile's 26-32, 2 tokens
// 26-28).
AT AI void kgroup2(const int type, const int NT, const uint8_t *g, int64_t nb,
                   const uint8_t *xq, size_t xs, float *y, size_t ys) {
  if (NT == 4) {
    kgroup_n(type, 2, g, nb, xq, xs, y, ys);
    kgroup_n(type, 2, g, nb, xq + 2 * xs, xs, y + 2 * ys, ys);
  } else {
    kgroup_n(type, NT, g, nb, xq, xs, y, ys);
  }
}

#define P16K_GEMM(T, TYPE) P16_GEMM_OF(T, TYPE, kgroup2, 256)

P16K_GEMM(q4_k, WK_Q4_K)
P16K_GEMM(q5_k, WK_Q5_K)
P16K_GEMM(q6_k, WK_Q6_K)

wk_gemm_fn wk_pack16k_avx2_find(int type) {
  switch (type) {
    case WK_Q4_K: return q4_k_p16;
    case WK_Q5_K: return q5_k_p16;
    case WK_Q6_K: return q6_k_p16;
    default: return NULL;
  }
}
