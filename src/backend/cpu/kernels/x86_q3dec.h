// The AVX2 level's Q3_K kernels against 8-bit activations (WK_ACT_Q8K, the
// decode path of Q3_K: backend/cpu/matmul.c plan_act8): x86_k.h's tiles for
// groups of KK_RN tokens, and a one-token tile of its own for the rest.
// Included by x86_k.h where the level defines KQ3_DEC (kernels_avx2.c),
// after kq3_k's pieces; the AVX-512 level keeps KGEMM's tiles.
//
// The one-token tile gives every output KTILE_SEQ's integers and f32 steps
// (kq3_k_load, kk16_mac, kk_fin_off4): per row and super-block 8 int32
// lanes, lane l the sum over the chunks j (32 values: code = 2 bits at
// 2 (j % 4) of qs[32 (j / 4) + i], + 4 where bit j of hmask[i] is set) of
// scale x the products of values 4 l .. 4 l + 3 of its 128-bit half, less
// 4 x sum(scale x bsum) of groups 2 l, 2 l + 1, then
//   acc += float(lanes) x (d_w x d_a)
// and the 8 lanes summed at the end (khsum). It reaches those integers by
// other operations:
//   - chunks 4 h + f's codes are built two to a byte (kq3_row): (qs & 0x33)
//     holds fields f = 0 and 2 at bits 0-1 and 4-5, (qs >> 2) & 0x33 fields
//     1 and 3; their hmask bits come from hmask's nibble h by a pshufb table
//     (KQ3_NIB) at bits 2 and 6. An and then takes a chunk's low nibble (its
//     code) or high nibble (16 x its code, at most 112);
//   - every product carries 256: a chunk's scales are words of 256 x scale
//     for the low nibbles (one pshufb from the scale bytes, the byte in the
//     high half of each word) and of 16 x scale for the high ones (a pick
//     from a vector of those words). A pmaddubsw word stays at most 2 x 7 x
//     127 = 1778 (2 x 112 x 127 = 28448 for the high nibbles, below 2^15), a
//     lane at most 8 chunks x 2 x 1778 x 8192 (< 2^28); the offset's term,
//     pmaddwd of 4 x bsum (at most 8128) with 256 x scale (< 2^28), comes
//     off in the integers and one arithmetic shift by 8 leaves the lanes
//     exactly;
//   - the scales are decoded once a row into bytes (kq3_scales8; x86_k.h's
//     kq3_k_prep sign-extended them twice and shuffled them to even / odd),
//     the rows' d convert together, and the f32 steps of all the tile's rows
//     follow their integers.
// The same integers and the same f32 operations: the same results bit for
// bit. Per row and super-block ~75 vector operations where KTILE_SEQ took
// ~90. L2-resident rows, one thread (bench_matvec's rows, this gemm and the
// former one alternating call by call, fastest of 3000 calls, 3 runs):
// 12.1-12.7 -> 13.8-14.5 GB/s (1.14-1.15x) at 4096x14336 and 14336x4096.
// What moved the rate was more the order than the count: each row's f32
// step right after its integers measured 1.07x the former tile, all rows'
// f32 steps after all rows' integers 1.13x, 8 rows a tile 1.18x (4: 1.16x).
// Rows from memory, two threads (bench_matvec --paired, % of the read rate,
// medians of 3 alternating runs on a busy host): 8 rows without a prefetch
// 52-81%, where the former tile read 69-79%; 4 rows with the prefetch
// 80-86% (3 rows 74-87%, 6 rows 72-83%, 8 rows 65-73%); the prefetch costs
// 1-3% in L2. Measured slower: the codes and scales decoded one super-block
// ahead through memory (kdec's way; 1.00x the former tile), the d
// conversion after the integers (1.09x), the f32 step one super-block later
// (1.09-1.12x), the rows' chunks interleaved (0.98-1.00x), shifts by
// multiplies (pmulhuw) to unload the shift ports (1.06x).
#ifndef WICK_BACKEND_CPU_KERNELS_X86_Q3DEC_H
#define WICK_BACKEND_CPU_KERNELS_X86_Q3DEC_H

// Rows of the one-token tile (at most 8), and the bytes ahead of the
// current super-block that it prefetches in each row (as the 16-bit tiles'
// a16_ahead: each 64 bytes of the block's span).
#define KQ3_DM 4
#define KQ3_AHEAD 768

// The 16 scales of a block (6 bits at s[0..11], minus 32) as signed bytes,
// the same in both 128-bit halves: scale i's low 4 bits are nibble i / 8 of
// byte i % 8 of s[0..7], its top 2 bits are bits 2 (i / 4) of byte i % 4 of
// s[8..11]. (Broadcast loads, then shifts within lanes.)
KT static inline __m256i kq3_scales8(const uint8_t *s) {
  const __m256i a01 = _mm256_castpd_si256(_mm256_broadcast_sd((const double *)s));
  const __m256i a2 = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(s + 8)));
  __m256i lo = _mm256_srlv_epi64(a01, _mm256_setr_epi64x(0, 4, 0, 4));
  lo = _mm256_and_si256(lo, _mm256_set1_epi8(15));
  __m256i hi = _mm256_srlv_epi32(a2, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  hi = _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi8(3)), 4);
  return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
}

// pshufb index bytes: a zero byte, then byte a (a word of 256 x byte a).
#define KQ3_Z (char)0x80
#define KQ3_HI(a) KQ3_Z, (char)(a)
#define KQ3_HI8(a) KQ3_HI(a), KQ3_HI(a), KQ3_HI(a), KQ3_HI(a), KQ3_HI(a), KQ3_HI(a), KQ3_HI(a), KQ3_HI(a)

// Words of 256 x scale 2 j (low half) and 2 j + 1 (high half), from the
// scale bytes sc.
KT static inline __m256i kq3_pick256(__m256i sc, int j) {
  return _mm256_shuffle_epi8(sc, _mm256_setr_epi8(KQ3_HI8(2 * j), KQ3_HI8(2 * j + 1)));
}

// f32 at p in all lanes by a broadcast load (GCC would otherwise keep a
// row's value in a register and broadcast it by shuffles).
KT static inline __m256 kq3_bcast(const float *p) {
  __m256 v;
  __asm__("vbroadcastss %1, %0" : "=x"(v) : "m"(*p));
  return v;
}

// For each value n of an hmask nibble (chunks 4 h .. 4 h + 3): the hmask bits
// of chunks 4 h + f and 4 h + f + 2 at bits 2 and 6.
#define KQ3_NIB1(n, f) (char)(((n) >> (f) & 1) << 2 | ((n) >> ((f) + 2) & 1) << 6)
#define KQ3_NIB(f)                                                                          \
  KQ3_NIB1(0, f), KQ3_NIB1(1, f), KQ3_NIB1(2, f), KQ3_NIB1(3, f), KQ3_NIB1(4, f),           \
      KQ3_NIB1(5, f), KQ3_NIB1(6, f), KQ3_NIB1(7, f), KQ3_NIB1(8, f), KQ3_NIB1(9, f),       \
      KQ3_NIB1(10, f), KQ3_NIB1(11, f), KQ3_NIB1(12, f), KQ3_NIB1(13, f), KQ3_NIB1(14, f), \
      KQ3_NIB1(15, f)

// One row's int32 lanes of a block (b: the block, a: its activations, bsum4:
// 4 x a's bsum), before the offset's term and the shift: 256 x the products.
KT static inline __attribute__((always_inline)) __m256i kq3_row(const uint8_t *b,
                                                               const wk_act_q8k *a,
                                                               __m256i bsum4) {
  const __m256i m15 = _mm256_set1_epi8(15), m51 = _mm256_set1_epi8(0x33);
  const __m256i nib_a = _mm256_setr_epi8(KQ3_NIB(0), KQ3_NIB(0));
  const __m256i nib_b = _mm256_setr_epi8(KQ3_NIB(1), KQ3_NIB(1));
  const __m256i sc = kq3_scales8(b + 96);
  // words of 16 x scale 2 k (low half) and 2 k + 1 (high half), word k of each half
  const __m256i s16 = _mm256_srai_epi16(
      _mm256_shuffle_epi8(sc, _mm256_setr_epi8(KQ3_HI(0), KQ3_HI(2), KQ3_HI(4), KQ3_HI(6), KQ3_HI(8),
                                               KQ3_HI(10), KQ3_HI(12), KQ3_HI(14), KQ3_HI(1),
                                               KQ3_HI(3), KQ3_HI(5), KQ3_HI(7), KQ3_HI(9),
                                               KQ3_HI(11), KQ3_HI(13), KQ3_HI(15))),
      4);
  const __m256i hm = kload(b);
  const __m256i hn[2] = {_mm256_and_si256(hm, m15),
                         _mm256_and_si256(_mm256_srli_epi16(hm, 4), m15)};
  __m256i is = _mm256_setzero_si256();
  KUNROLL for (int h = 0; h < 2; h++) {
    const __m256i qs = kload(b + 32 + 32 * h);
    const __m256i c02 = _mm256_or_si256(_mm256_and_si256(qs, m51), _mm256_shuffle_epi8(nib_a, hn[h]));
    const __m256i c13 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 2), m51),
                                        _mm256_shuffle_epi8(nib_b, hn[h]));
    const int8_t *q = a->q + 128 * h;
    is = kmacs(is, _mm256_and_si256(c02, m15), kload(q), kq3_pick256(sc, 4 * h));
    is = kmacs(is, _mm256_and_si256(c13, m15), kload(q + 32), kq3_pick256(sc, 4 * h + 1));
    is = kmacs(is, _mm256_andnot_si256(m15, c02), kload(q + 64), kpick16(s16, 4 * h + 2));
    is = kmacs(is, _mm256_andnot_si256(m15, c13), kload(q + 96), kpick16(s16, 4 * h + 3));
  }
  // the offset: 1024 x sum(scale x bsum) per pair of groups (natural order)
  const __m256i ms = _mm256_madd_epi16(
      bsum4, _mm256_shuffle_epi8(sc, _mm256_setr_epi8(KQ3_HI(0), KQ3_HI(1), KQ3_HI(2), KQ3_HI(3),
                                                      KQ3_HI(4), KQ3_HI(5), KQ3_HI(6), KQ3_HI(7),
                                                      KQ3_HI(8), KQ3_HI(9), KQ3_HI(10), KQ3_HI(11),
                                                      KQ3_HI(12), KQ3_HI(13), KQ3_HI(14),
                                                      KQ3_HI(15))));
  return _mm256_srai_epi32(_mm256_sub_epi32(is, ms), 8);
}

// R rows (w, w + ws, ..) x one token; y[r * yr].
KT static inline __attribute__((always_inline)) void kq3_dec(const int R, const uint8_t *w,
                                                             size_t ws, int64_t nb,
                                                             const uint8_t *xq, float *y,
                                                             size_t yr) {
  const wk_act_q8k *act = (const wk_act_q8k *)xq;
  __m256 acc[KQ3_DM];
  KUNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 110;
    const wk_act_q8k *a = &act[b];
    KUNROLL for (int r = 0; r < R; r++) KUNROLL for (int o = 0; o < 110; o += 64)
        _mm_prefetch((const char *)(blk + (size_t)r * ws + KQ3_AHEAD + o), _MM_HINT_T0);
    // rows r .. r + 3's d (the high f16 of the dword at 106) x d_a at dd[2 r + 1]
    float dd[8 * ((KQ3_DM + 3) / 4)] __attribute__((aligned(32)));
    KUNROLL for (int r = 0; r < R; r += 4) {
      __m128i h = _mm_castps_si128(_mm_broadcast_ss((const float *)(blk + (size_t)r * ws + 106)));
      KUNROLL for (int i = 1; i < 4; i++) if (r + i < R) h = _mm_blend_epi32(
          h, _mm_castps_si128(_mm_broadcast_ss((const float *)(blk + (size_t)(r + i) * ws + 106))),
          1 << i);
      _mm256_store_ps(dd + 2 * r, _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(a->d)));
    }
    const __m256i bsum4 = _mm256_slli_epi16(kload(a->bsum), 2);
    __m256i is[KQ3_DM];
    KUNROLL for (int r = 0; r < R; r++) is[r] = kq3_row(blk + (size_t)r * ws, a, bsum4);
    KUNROLL for (int r = 0; r < R; r++)
        acc[r] = _mm256_fmadd_ps(kq3_bcast(&dd[2 * r + 1]), _mm256_cvtepi32_ps(is[r]), acc[r]);
  }
  KUNROLL for (int r = 0; r < R; r++) y[r * yr] = khsum(acc[r]);
}

KTILE(kq3_k, KK_RM, KK_RN)
KTILE(kq3_k, 1, KK_RN)
KT static void kq3_k_tile_1x1(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, size_t xs,
                              float *y, size_t ys, size_t yr) {
  (void)xs, (void)ys;
  kq3_dec(1, w, ws, nb, xq, y, yr);
}
KT static float kq3_k_vec_dot(int64_t n, const void *w, const void *xq) {
  float y;
  kq3_k_tile_1x1(w, 0, n / 256, xq, 0, &y, 0, 0);
  return y;
}
// KGEMM_WALK's tiles for each group of KK_RN tokens; the tokens left over
// through the one-token tile, KQ3_DM rows at a time (tile j: rows j, j + q,
// j + 2 q, .., q = rows / KQ3_DM: separate streams, as KGEMM_WALK's), the
// last rows one by one.
KT static void kq3_k_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv, size_t xs,
                          int n_tokens, float *y, size_t ys) {
  const uint8_t *w = wv, *xq = xqv;
  const int64_t nb = k / 256;
  for (int t0 = 0; t0 < n_tokens; t0 += KTOK_CHUNK) {
    const int t1 = t0 + KTOK_CHUNK < n_tokens ? t0 + KTOK_CHUNK : n_tokens;
    const int tn = t0 + (t1 - t0) / KK_RN * KK_RN;
    if (tn > t0) {
      const int q = rows / KK_RM;
      for (int j = 0; j < q; j++)
        for (int t = t0; t < tn; t += KK_RN)
          KTNAME(kq3_k, KK_RM, KK_RN)(w + (size_t)j * ws, ws * (size_t)q, nb, xq + (size_t)t * xs,
                                      xs, y + (size_t)t * ys + j, ys, (size_t)q);
      for (int r = q * KK_RM; r < rows; r++)
        for (int t = t0; t < tn; t += KK_RN)
          KTNAME(kq3_k, 1, KK_RN)(w + (size_t)r * ws, ws, nb, xq + (size_t)t * xs, xs,
                                  y + (size_t)t * ys + r, ys, 0);
    }
    const int q = rows / KQ3_DM;
    for (int t = tn; t < t1; t++) {
      for (int j = 0; j < q; j++)
        kq3_dec(KQ3_DM, w + (size_t)j * ws, ws * (size_t)q, nb, xq + (size_t)t * xs,
                y + (size_t)t * ys + j, (size_t)q);
      for (int r = q * KQ3_DM; r < rows; r++)
        kq3_dec(1, w + (size_t)r * ws, ws, nb, xq + (size_t)t * xs, y + (size_t)t * ys + r, 0);
    }
  }
}

#endif
