// The AVX-512 BW level's kernels of the 8-bit-activation table (kernels.h,
// WK_ACT_Q8K): Q3_K's one-token tile in 512-bit vectors without VNNI, VBMI
// or GFNI (Q3_K takes 8-bit activations by default: backend/cpu/matmul.c
// plan_act8). Two tokens and more, and vec_dot: the AVX2 level's.
//
// Pair m (0-3) is chunks 2 m and 2 m + 1 (values 64 m .. 64 m + 63, whose
// activation bytes are one 64-byte load). A chunk j's code is 2 bits at 2
// (j % 4) of qs[32 (j / 4) + l] plus 4 where bit j of hmask[l] is set
// (value = code - 4): both pieces come from 32 bytes broadcast to the two
// halves and shifted by a count for each half (64-bit lanes: the bits kept
// come from the same byte). Each 128-bit lane is one 16-value group, so its
// scale is one word (avx512bw_k.h's group table). pmaddubsw (code x byte,
// at most 2 x 7 x 127) and pmaddwd by the scales give int32 lanes whose
// halves added are the AVX2 kernel's lanes (x86_k.h: kq3_k; the same
// integers), then kk_fin_off4's steps in its order: the offset's
// 4 x sum(scale x bsum) off each lane, and one FMA by d_w * d_a.
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/avx512bw_k.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"

// Pair m's unsigned codes (0..7) of one row's Q3_K block b.
AT AI __m512i bq3_codes(const uint8_t *b, const int m) {
  const int j = 2 * m;  // chunks j (low half), j + 1 (high half)
  const __m512i q = _mm512_broadcast_i64x4(a16_load(b + 32 + 32 * (j >> 2)));
  const __m512i h = _mm512_broadcast_i64x4(a16_load(b));
  const long long s = 2 * (j & 3);
  const __m512i lo2 =
      _mm512_srlv_epi64(q, _mm512_set_epi64(s + 2, s + 2, s + 2, s + 2, s, s, s, s));
  // hmask bit j (j + 1) to bit 2: left by 2, 1 for pair 0; right by j - 2, j - 1 after
  const __m512i hb =
      j == 0 ? _mm512_sllv_epi64(h, _mm512_set_epi64(1, 1, 1, 1, 2, 2, 2, 2))
             : _mm512_srlv_epi64(h, _mm512_set_epi64(j - 1, j - 1, j - 1, j - 1, j - 2, j - 2,
                                                     j - 2, j - 2));
  return _mm512_ternarylogic_epi32(_mm512_and_si512(lo2, _mm512_set1_epi8(3)), hb,
                                   _mm512_set1_epi8(4), 0xf8);  // lo2 | (hb & 4)
}

// R rows x one token (rows w, w + ws, ..; y[r * yr]).
AT AI void bq3_dec(const int R, const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,
                   float *y, size_t yr) {
  const wk_act_q8k *act = (const wk_act_q8k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * 110;
    const wk_act_q8k *a = &act[b];
    a16_ahead(R, blk, ws, b, 110, A16_K_AHEAD);
    int32_t st[A16_MAXR][16];
    __m128i sc[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) {
      sc[r] = a16_scales_q3(blk + (size_t)r * ws + 96);
      bgroup_table(sc[r], st[r]);
    }
    __m512i is[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) is[r] = _mm512_setzero_si512();
    A16_UNROLL for (int m = 0; m < 4; m++) {
      __m512i x = _mm512_loadu_si512(a->q + 64 * m);
      B_KEEP(x);
      A16_UNROLL for (int r = 0; r < R; r++) {
        const __m512i c = bq3_codes(blk + (size_t)r * ws, m);
        is[r] = _mm512_add_epi32(
            is[r], _mm512_madd_epi16(_mm512_maddubs_epi16(c, x), bgroup_scales(st[r], m)));
        B_KEEP(is[r]);
      }
    }
    const __m256i bsum = _mm256_loadu_si256((const __m256i *)a->bsum);
    A16_UNROLL for (int r = 0; r < R; r++) {
      const __m256i ms = _mm256_madd_epi16(bsum, _mm256_cvtepi8_epi16(sc[r]));
      const __m256i v = _mm256_sub_epi32(bhalves(is[r]), _mm256_slli_epi32(ms, 2));
      const float d = a16_f16(blk + (size_t)r * ws + 108);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a->d), _mm256_cvtepi32_ps(v), acc[r]);
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// Rows of the decode tile.
#define BQ3_DM 4

AT static void bq3_dec4(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, float *y,
                        size_t yr) {
  bq3_dec(BQ3_DM, w, ws, nb, xq, y, yr);
}
AT static void bq3_dec1(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq, float *y,
                        size_t yr) {
  bq3_dec(1, w, ws, nb, xq, y, yr);
}

// One to three tokens: a token at a time through the decode tiles, tile j
// taking rows j, j + q, .. (q = rows / BQ3_DM: separate memory streams), the
// rows left one by one; four and more: the AVX2 gemm.
static void q3_k_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xqv, size_t xs,
                      int n_tokens, float *y, size_t ys) {
  wk_vec_dot_fn dot;
  wk_gemm_fn gemm;
  if (n_tokens >= 4 && wk_kern_avx2_find(WK_Q3_K, &dot, &gemm)) {
    gemm(wv, ws, k, rows, xqv, xs, n_tokens, y, ys);
    return;
  }
  const uint8_t *w = wv, *xq = xqv;
  const int64_t nb = k / 256;
  const int q = rows / BQ3_DM;
  for (int t = 0; t < n_tokens; t++) {
    const uint8_t *xt = xq + (size_t)t * xs;
    float *yt = y + (size_t)t * ys;
    for (int j = 0; j < q; j++) bq3_dec4(w + (size_t)j * ws, ws * (size_t)q, nb, xt, yt + j, q);
    for (int r = q * BQ3_DM; r < rows; r++) bq3_dec1(w + (size_t)r * ws, ws, nb, xt, yt + r, 1);
  }
}

int wk_kern_avx512bw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  if (type != WK_Q3_K || !wk_kern_avx2_find(type, dot, gemm)) return 0;
  *gemm = q3_k_gemm;  // *dot: the AVX2 level's
  return 1;
}
