// attn_dec.h's kernel: 16-float zmm vectors (AVX-512 F; 32 registers).
// cpu_attention calls it only where cpu_attn.avx512 says the CPU has it.
// Scores 8 / 4 / 2 rows a step for up to 2 / 4 / 8 queries (16 to 24
// registers of accumulators, rows and queries), P * V 8 / 4 / 2 chunks of 16
// floats for up to 2 / 5 / 8 queries. (The same source with 8-float ymm
// vectors and 16 registers, scores 8 / 4 / 2 / 1 rows and P * V 8 / 4 / 2 / 1
// chunks for up to 1 / 3 / 6 / 8 queries, ran slower than attention.c's
// three-query kernels, in L2 and from memory: AVX2 machines keep those.)
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/attn_dec.h"
#include "backend/cpu/vec8.h"
#include "base/error.h"

// The code below is written for W-float vectors vf (DEC_NV of them hold a
// query's 16 scores), DEC_R rows a scores step and DEC_C chunks a P * V step.
#define DEC_INL static inline __attribute__((always_inline, target("avx2,fma,f16c,avx512f")))
#define DEC_TGT __attribute__((target("avx2,fma,f16c,avx512f")))
#define W 16
typedef __m512 vf;
typedef __m512_u vfu;
typedef int vi __attribute__((vector_size(64)));
#define VSET1(x) _mm512_set1_ps(x)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define DEC_R(G) ((G) <= 2 ? 8 : (G) <= 4 ? 4 : 2)
#define DEC_C(G) ((G) <= 2 ? 8 : (G) <= 5 ? 4 : 2)

DEC_INL vf dec_ld16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

// Level 0: lanes (2i, 2i + 1) of each 128-bit quarter hold rows a, b's sums of
// lanes (i, i + 2); level 1: lane i of a quarter row i's sum of the quarter;
// levels 2 and 3: quarters added in pairs, the rows' quarters side by side.
DEC_INL vf dec_lvl(int lv, vf a, vf b) {
  if (lv == 0) return _mm512_unpacklo_ps(a, b) + _mm512_unpackhi_ps(a, b);
  if (lv == 1) return _mm512_shuffle_ps(a, b, 0x44) + _mm512_shuffle_ps(a, b, 0xee);
  return _mm512_shuffle_f32x4(a, b, 0x88) + _mm512_shuffle_f32x4(a, b, 0xdd);
}

// Halves, quarters, pairs, neighbours: the result in every lane.
DEC_INL vf dec_allmax(vf x) {
  x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0x4e));
  x = _mm512_max_ps(x, _mm512_shuffle_f32x4(x, x, 0xb1));
  x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4e));
  return _mm512_max_ps(x, _mm512_permute_ps(x, 0xb1));
}
DEC_INL vf dec_allsum(vf x) {
  x += _mm512_shuffle_f32x4(x, x, 0x4e);
  x += _mm512_shuffle_f32x4(x, x, 0xb1);
  x += _mm512_permute_ps(x, 0x4e);
  return x + _mm512_permute_ps(x, 0xb1);
}

// Per block, for the G queries at once:
//
// Scores: DEC_R rows at a time, each row read front to back once for all
// G queries: R * G accumulators of W lanes, q from L1. A row's score is the
// sum of its accumulator's lanes; instead of a horizontal sum per (row,
// query), a tree adds lane pairs of two rows' vectors at each level (dec_lvl,
// levels 0 .. log2 W - 1) until one vector holds W rows' sums, lane j row j:
// 16 rows take 15 two-shuffle-and-add steps a query and end in 16 / W
// vectors of scores. The levels pair rows (2i, 2i + 1), then (4i.., 4i + 2..)
// and so on, whatever DEC_R is: the sums are the same for every R.
//
// Softmax: the 16 scores of a query as one or two vectors: their max against
// the running m, exp (vec8.h's polynomial, W lanes at once) of score - max
// into P, the sum into l; corr = exp(m_old - m_new) rescales the
// accumulators. The reductions leave their result in every lane, so that no
// value goes to a scalar register and back.
//
// P * V: head_dim in chunks of DEC_C * W floats; per chunk the G * C output
// accumulators are loaded once (times corr: the rescale folded in), stay in
// registers across the visible rows, each V chunk is loaded and converted
// once for all G queries, and p[g][j] is broadcast per (query, row).
//
// Prefetch: the scores' and P * V's steps each ask for the same bytes of the
// next (block, head) (att_dec.pk, .pv) as they read of this one, so that
// the requests spread over the call as the loads do.

#define DEC_NV (16 / W)  // vectors of 16 scores

// part[0..n) (vectors of consecutive rows, at tree level lv) reduced by the
// levels lv .. to n >> (top - lv) vectors, in place; returns the level reached
// (top: log2 W, where a vector holds W rows).
DEC_INL int dec_tree(vf *part, int n, int lv, int top) {
  _Pragma("GCC unroll 4") for (; n > 1 && lv < top; n /= 2, lv++)
    _Pragma("GCC unroll 8") for (int i = 0; i < n / 2; i++) part[i] = dec_lvl(lv, part[2 * i], part[2 * i + 1]);
  return lv;
}

// sc[g * DEC_NV + v]: query g's scores of rows v W .. v W + W - 1, unscaled.
DEC_INL void dec_scores(const float *const *q, const uint16_t *kb, int hd, const int G, vf *sc,
                    const char *pk) {
  const int R = DEC_R(G), top = W == 16 ? 4 : 3;
  vf part[ATT_DEC_MAX_G][16];  // per query: each step's R rows reduced to one vector
  _Pragma("GCC unroll 16") for (int r0 = 0; r0 < 16; r0 += R) {
    vf a[8][ATT_DEC_MAX_G];  // [R][G]: constant indices once unrolled, registers
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
      _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) a[r][g] = VSET1(0.0f);
    const uint16_t *k = kb + (size_t)r0 * hd;
    for (int d = 0; d < hd; d += W) {
      if (pk && d % 32 == 0)  // the lines this step starts, of the next block's K rows
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
          __builtin_prefetch(pk + ((size_t)(r0 + r) * hd + d) * 2, 0, 3);
      vf x[8];
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) x[r] = dec_ld16(k + (size_t)r * hd + d);
      _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
        const vf qg = *(const vfu *)(q[g] + d);
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) a[r][g] += qg * x[r];
      }
    }
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
      vf t[8];
      _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) t[r] = a[r][g];
      dec_tree(t, R, 0, top);  // R <= W: one vector
      part[g][r0 / R] = t[0];
    }
  }
  int lr = 0;
  while ((1 << lr) < R) lr++;
  _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
    dec_tree(part[g], 16 / R, lr, top);
    _Pragma("GCC unroll 2") for (int v = 0; v < DEC_NV; v++) sc[g * DEC_NV + v] = part[g][v];
  }
}

// acc[g][d0 ..) of the G queries += sum over rows j in [j0, j1] of
// P[g][j] * v row j, C W-float chunks, after scaling by corr[g].
DEC_INL void dec_pv(float *acc, int hd, int d0, const uint16_t *vb, const float (*P)[16],
                const float *corr, int j0, int j1, const int G, const int C, const char *pv) {
  vf a[ATT_DEC_MAX_G][8];  // [G][C]
  _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
    const vf cg = VSET1(corr[g]);
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)
      a[g][c] = *(const vfu *)(acc + (size_t)g * hd + d0 + c * W) * cg;
  }
  const uint16_t *v = vb + (size_t)j0 * hd + d0;
  for (int j = j0; j <= j1; j++, v += hd) {
    if (pv && d0 % 32 == 0)  // the lines this step starts, of the next block's V rows
      _Pragma("GCC unroll 4") for (int o = 0; o < C * W * 2; o += 64)
        __builtin_prefetch(pv + ((size_t)j * hd + d0) * 2 + o, 0, 3);
    vf x[8];
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) x[c] = dec_ld16(v + c * W);
    _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
      const vf pg = VSET1(P[g][j]);
      _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) a[g][c] += pg * x[c];
    }
  }
  _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)
      *(vfu *)(acc + (size_t)g * hd + d0 + c * W) = a[g][c];
}

// One block for G queries; full: rows 0..15 visible and no softcap (the
// constants let the compiler drop the masking and unroll the rows).
DEC_INL void dec_block(const att_dec *d, const int G, const bool full) {
  const int hd = d->hd, vlo = full ? 0 : d->vlo, vhi = full ? 15 : d->vhi;
  vf sc[ATT_DEC_MAX_G * DEC_NV];
  const float *q[ATT_DEC_MAX_G];  // query g: token g / gt, query g % gt of it
  _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)
    q[g] = d->q + (size_t)(g / d->gt) * d->qs + (size_t)(g % d->gt) * hd;
  dec_scores(q, d->kb, hd, G, sc, d->pk);
  float P[ATT_DEC_MAX_G][16] __attribute__((aligned(64))), corr[ATT_DEC_MAX_G];
  _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {
    vf s[DEC_NV];
    _Pragma("GCC unroll 2") for (int v = 0; v < DEC_NV; v++)
      s[v] = sc[g * DEC_NV + v] * VSET1(d->scale);
    if (!full) {  // softcap, and -inf outside [vlo, vhi]
      _Pragma("GCC unroll 2") for (int v = 0; v < DEC_NV; v++) *(vfu *)&P[g][v * W] = s[v];
      if (d->softcap > 0)
        for (int j = 0; j < 16; j++) P[g][j] = d->softcap * tanhf(P[g][j] / d->softcap);
      for (int j = 0; j < 16; j++)
        if (j < vlo || j > vhi) P[g][j] = -INFINITY;
      _Pragma("GCC unroll 2") for (int v = 0; v < DEC_NV; v++) s[v] = *(const vfu *)&P[g][v * W];
    }
    // Every lane: the block's max, the new running max mn, the rescale of the
    // old state (0 when m was -inf: -inf - mn, or the NaN of -inf - -inf
    // where nothing is visible yet, gives 0), then the weights and their sum.
    vf mx = s[0];
    if (DEC_NV == 2) mx = VMAX(mx, s[1]);
    mx = dec_allmax(mx);
    const vf mo = VSET1(d->m[g]), mn = VMAX(mo, mx);
    const vf cv = VEC_EXP_NONPOS(vf, vi, mo - mn);
    vf sum = VSET1(0.0f);
    _Pragma("GCC unroll 2") for (int v = 0; v < DEC_NV; v++) {
      const vf p = VEC_EXP_NONPOS(vf, vi, s[v] - mn);
      *(vfu *)&P[g][v * W] = p;
      sum += p;
    }
    sum = dec_allsum(sum);
    d->l[g] = d->l[g] * cv[0] + sum[0];
    d->m[g] = mn[0];
    corr[g] = cv[0];
  }
  // DEC_C(G) chunks a step, the rest of head_dim by halves of that.
  const int C = DEC_C(G);
  int d0 = 0;
  _Pragma("GCC unroll 4") for (int c = C; c >= 1; c /= 2)
    for (; d0 + c * W <= hd; d0 += c * W)
      dec_pv(d->acc, hd, d0, d->vb, P, corr, vlo, vhi, G, c, d->pv);
}

// One function a group size (each with its rows-visible-and-no-softcap copy).
#define DEC_G(G)                                                            \
  static DEC_TGT __attribute__((noinline)) void dec_g##G(const att_dec *d) {        \
    if (d->vlo == 0 && d->vhi == 15 && !(d->softcap > 0)) dec_block(d, G, true); \
    else dec_block(d, G, false);                                            \
  }
DEC_G(1)
DEC_G(2)
DEC_G(3)
DEC_G(4)
DEC_G(5)
DEC_G(6)
DEC_G(7)
DEC_G(8)
#undef DEC_G

void att_dec_avx512(const att_dec *d) {
  static void (*const fn[ATT_DEC_MAX_G])(const att_dec *) = {dec_g1, dec_g2, dec_g3, dec_g4,
                                                             dec_g5, dec_g6, dec_g7, dec_g8};
  WK_ASSERT(d->g >= 1 && d->g <= ATT_DEC_MAX_G && d->gt >= 1 && d->g % d->gt == 0);
  fn[d->g - 1](d);
}
