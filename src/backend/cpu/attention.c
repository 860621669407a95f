// Causal attention over a paged KV cache.
//
// A work item is (query tile, KV head): up to `qt` consecutive new tokens of
// one sequence and the G = n_heads / n_kv_heads query heads that share the KV
// head. The item walks the KV blocks its tile can see once; per block it
// scores every K row against all G * qt queries, updates each query's online
// softmax (running max m, running sum l, accumulator acc rescaled when m
// grows) and adds the V rows. A token's queries go three at a time through
// kernels that load each K and V row once for the three and keep twelve
// independent accumulators (FMA chains), the rest one at a time; the sums are
// the same either way. The three's softmax steps run interleaved, and a whole
// block of 16 rows visible to all three (no softcap) goes through a copy of
// the kernels with those sizes as constants, which masks nothing.
//
// Decode over an f16 cache (one new token, rows read in place): as an item
// works on one (block, head) it prefetches the next one's K and V rows into
// L1, each step the lines of them that it reads of this one. The hardware's
// prefetchers stop at each 4 KB page, and at head size 128 a head's K (or
// V) rows of a block are one page: without this the decode items waited on
// memory most of the time (bench_attn_cpu 2000 1 32 8 128 30: 8.7 GB/s of
// K + V where a plain read of the same bytes runs ~30). Where the CPU has
// AVX-512 F (cpu_attn.avx512; WICK_CPU_LEVEL=avx2 turns it off), blocks of
// 16 rows, head sizes a multiple of 16 and G <= 8 (Llama 3's 128 / 4,
// Gemma 3's 256 / 4, SmolLM2's 64 / 3) take attn_dec.h's kernel instead of
// the three-query ones, a (block, head) a call: all G queries against each K
// row in one pass over the row, the rows' partial sums reduced in a tree to
// one vector of 16 scores a query (no horizontal sum per row and query), the
// online softmax on that vector, and P * V with the G outputs' accumulators
// in zmm registers across the block's rows, chunk by chunk of head_dim (each
// V chunk converted once for the G queries, the rescale folded into the
// accumulators' load). Prompt tokens take the same kernel where those
// conditions hold, a run of up to 8 / G consecutive tokens that see the same
// rows of the block a call (all but the diagonal block's and a window edge's
// tokens). Elsewhere the three-query pass prefetches (the queries after it
// read the block from L1). Figures: bench/RESULTS.md, session 25 (decode at
// head size 128, 1 thread: ~950 -> ~390 us a layer; Gemma 3's pp512 +2-7%).
//
// Threads claim items from a shared counter, the last
// tiles of each sequence (the longest) first. A decode batch with fewer items
// than two per thread splits each item's KV blocks into parts whose softmax
// states are merged at the end, so that all threads stream the cache.
//
// The inner loops use 8-float GCC vector types (vec8.h); the item function is
// compiled three times, for AVX2 + FMA, for AVX2 + FMA + F16C over an f16
// cache (twice: head size 64 as a constant, and any) and for the baseline,
// and chosen by cpu_attn.kv_f16 and .avx2. exp is
// vec8.h's polynomial on the max-subtracted scores, which are <= 0. An f16
// cache (kv_f16, the fast path: half the bytes streamed) has its rows
// converted to f32 as the vector kernels load them (F16C), or, for head sizes
// not a multiple of 8, each block's rows of the item's head converted in the
// thread's scratch first: the same arithmetic after.
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/attn_dec.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/vec8.h"
#include "base/fp.h"

#define F16C_FN __attribute__((target("avx2,fma,f16c"), noinline))

F16C_FN void cpu_f32_to_f16c(uint16_t *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = wk_f32_to_f16(src[i]);  // the same rounding
}

// nr rows of hd halves, rows rs halves apart, to nr rows of hd floats.
F16C_FN static void rows_f16_f32(float *dst, const uint16_t *src, int nr, int hd, size_t rs) {
  for (int r = 0; r < nr; r++, src += rs, dst += hd) {
    int i = 0;
    for (; i + 8 <= hd; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < hd; i++) dst[i] = wk_f16_to_f32(src[i]);
  }
}

enum {
  ATT_TILE_FLOATS = 8192,  // G * qt * head_dim: the accumulators of one item
  ATT_MAX_TILE = 32,       // most query tokens per item
  ATT_SPLIT_MIN = 64,      // fewest positions per split of a decode item
};

static int tile_tokens(int group, int head_dim) {
  int qt = ATT_TILE_FLOATS / (group * head_dim);
  return qt < 1 ? 1 : qt > ATT_MAX_TILE ? ATT_MAX_TILE : qt;
}

static int score_stride(int block_size) { return (block_size + 7) & ~7; }

// Floats of one split's partial state of a decode item: m, l, acc of G queries.
static size_t split_part(const cpu_attn *a) {
  return (size_t)(a->n_heads / a->n_kv_heads) * ((size_t)a->head_dim + 2);
}

// (a decode item holds every KV head's queries: n_heads of them)
size_t cpu_attn_partial(int n_heads, int head_dim, int n_threads) {
  return (size_t)(4 * n_threads) * (size_t)n_heads * ((size_t)head_dim + 2);
}

// Per thread: the accumulators, m, l and scores of an item's queries, then a
// block's K and V rows of one head in f32 (f16 caches).
size_t cpu_attn_scratch(int n_heads, int n_kv_heads, int head_dim, int block_size) {
  const int g = n_heads / n_kv_heads;
  const size_t nq = (size_t)g * (size_t)tile_tokens(g, head_dim);
  return nq * ((size_t)head_dim + 2 + (size_t)score_stride(block_size)) +
         2 * (size_t)block_size * (size_t)head_dim;
}

INL float dot_n(const float *a, const float *b, int n) {
  v8f s0 = SPL(0.0f), s1 = SPL(0.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 += *(const v8fu *)(a + i) * *(const v8fu *)(b + i);
    s1 += *(const v8fu *)(a + i + 8) * *(const v8fu *)(b + i + 8);
  }
  for (; i + 8 <= n; i += 8) s0 += *(const v8fu *)(a + i) * *(const v8fu *)(b + i);
  float s = vec8_hsum(s0 + s1);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

// y += c * x
INL void axpy_n(float *y, float c, const float *x, int n) {
  const v8f cv = SPL(c);
  int i = 0;
  for (; i + 8 <= n; i += 8) *(v8fu *)(y + i) = *(v8fu *)(y + i) + cv * *(const v8fu *)(x + i);
  for (; i < n; i++) y[i] += c * x[i];
}

INL void scale_n(float *y, float c, int n) {
  const v8f cv = SPL(c);
  int i = 0;
  for (; i + 8 <= n; i += 8) *(v8fu *)(y + i) = *(v8fu *)(y + i) * cv;
  for (; i < n; i++) y[i] *= c;
}

// Lane j of *r: the sum of the 8 lanes of a[j] (a transpose-and-add).
INL void hsum8x8(const v8f *a, v8f *r) {
  const v8i lo = {0, 2, 8, 10, 4, 6, 12, 14}, hi = {1, 3, 9, 11, 5, 7, 13, 15};
  v8f t[4];
  _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
    t[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], lo) +
           __builtin_shuffle(a[2 * i], a[2 * i + 1], hi);
  // t[i] lanes: (2i, 2i, 2i+1, 2i+1 | same for the upper half) partial sums.
  const v8f u0 = __builtin_shuffle(t[0], t[1], lo) + __builtin_shuffle(t[0], t[1], hi);
  const v8f u1 = __builtin_shuffle(t[2], t[3], lo) + __builtin_shuffle(t[2], t[3], hi);
  // u0: rows 0..3 in lanes 0..3 (low half) and 4..7 (high half) of the sums; same for u1.
  const v8i lanes_lo = {0, 1, 2, 3, 8, 9, 10, 11}, lanes_hi = {4, 5, 6, 7, 12, 13, 14, 15};
  *r = __builtin_shuffle(u0, u1, lanes_lo) + __builtin_shuffle(u0, u1, lanes_hi);
}

typedef short v8h __attribute__((vector_size(16), aligned(2), may_alias));  // 8 halves

// *x = 8 floats at element i of rows p: f32, or f16 converted (F16C; only in
// the item compiled for it, h16 a constant everywhere, so that the other
// items never hold the 32-byte builtin whose ABI -Wpsabi warns about).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
INL void load8(v8f *x, const void *p, size_t i, bool h16) {
  if (h16) *x = __builtin_ia32_vcvtph2ps256(*(const v8h *)((const uint16_t *)p + i));
  else *x = *(const v8fu *)((const float *)p + i);
}
#pragma GCC diagnostic pop

// A query's scores of a block's K rows j < nj (rows ks apart), hd a multiple
// of 8: S[j] = dot(q, k row j) * scale, softcapped, -inf outside the visible
// rows [vlo, vhi] and up to the next multiple of 8. Returns their largest.
INL float scores8(const float *q, const void *k, size_t ks, bool h16, int nj, int hd,
                  float scale, float softcap, int vlo, int vhi, float *S) {
  const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
  v8f mx = SPL(-INFINITY);
  for (int j0 = 0; j0 < nj; j0 += 8) {
    size_t kr[8];  // elements of k
    UNROLL8 for (int j = 0; j < 8; j++) kr[j] = (size_t)(j0 + j < nj ? j0 + j : j0) * ks;
    v8f a[8];
    UNROLL8 for (int j = 0; j < 8; j++) a[j] = SPL(0.0f);
    for (int d = 0; d < hd; d += 8) {
      const v8f qv = *(const v8fu *)(q + d);
      UNROLL8 for (int j = 0; j < 8; j++) {
        v8f kv;
        load8(&kv, k, kr[j] + d, h16);
        a[j] += qv * kv;
      }
    }
    v8f r;
    hsum8x8(a, &r);
    r *= SPL(scale);
    if (softcap > 0)
      for (int j = 0; j < 8; j++) r[j] = softcap * tanhf(r[j] / softcap);
    const v8i jj = lane + j0, vis = (jj >= vlo) & (jj <= vhi);
    r = (v8f)(((v8i)r & vis) | ((v8i)SPL(-INFINITY) & ~vis));
    *(v8fu *)(S + j0) = r;
    vec8_max(&mx, &r);
  }
  return vec8_hmax(&mx);
}

// scores8 for three queries at once (q0 and the two after it, hd apart; S0
// and the two rows after it, ss apart; their largest to bm[3]), four K rows a
// step: each K row is loaded (h16: and converted) once for the three, and the
// twelve accumulators give the FMAs independent chains.
INL void scores8x3(const float *q0, const void *k, size_t ks, bool h16, int nj, int hd,
                   float scale, float softcap, int vlo, int vhi, float *S0, int ss, float *bm,
                   const char *pf) {
  const v8i lane = {0, 1, 2, 3, 0, 1, 2, 3};
  const float *q1 = q0 + hd, *q2 = q1 + hd;
  float *S1 = S0 + ss, *S2 = S1 + ss;
  v8f mx01 = SPL(-INFINITY), mx2 = SPL(-INFINITY);
  const bool all = vlo <= 0 && vhi >= nj - 1 && nj % 4 == 0;  // no row to mask
  int j0 = 0;
  for (; j0 < nj; j0 += 4) {
    size_t kr[4];  // elements of k
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
      kr[j] = (size_t)(j0 + j < nj ? j0 + j : j0) * ks;
    v8f a[12];
    _Pragma("GCC unroll 12") for (int c = 0; c < 12; c++) a[c] = SPL(0.0f);
    for (int d = 0; d < hd; d += 8) {
      if (pf && d % 32 == 0)  // f16 rows: the lines this step starts, of pf's
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
          __builtin_prefetch(pf + (kr[j] + d) * 2, 0, 3);
      const v8f x0 = *(const v8fu *)(q0 + d), x1 = *(const v8fu *)(q1 + d);
      const v8f x2 = *(const v8fu *)(q2 + d);
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        v8f kv;
        load8(&kv, k, kr[j] + d, h16);
        a[j] += x0 * kv, a[4 + j] += x1 * kv, a[8 + j] += x2 * kv;
      }
    }
    // r01: the four scores of q0, then of q1; r2: those of q2, twice.
    v8f r01, r2, a2[8] = {a[8], a[9], a[10], a[11], a[8], a[9], a[10], a[11]};
    hsum8x8(a, &r01);
    hsum8x8(a2, &r2);
    r01 *= SPL(scale), r2 *= SPL(scale);
    if (softcap > 0)
      for (int j = 0; j < 8; j++)
        r01[j] = softcap * tanhf(r01[j] / softcap), r2[j] = softcap * tanhf(r2[j] / softcap);
    if (!all) {
      const v8i jj = lane + j0, vis = (jj >= vlo) & (jj <= vhi);
      r01 = (v8f)(((v8i)r01 & vis) | ((v8i)SPL(-INFINITY) & ~vis));
      r2 = (v8f)(((v8i)r2 & vis) | ((v8i)SPL(-INFINITY) & ~vis));
    }
    memcpy(S0 + j0, &r01, 4 * sizeof(float));
    memcpy(S1 + j0, (const float *)&r01 + 4, 4 * sizeof(float));
    memcpy(S2 + j0, &r2, 4 * sizeof(float));
    vec8_max(&mx01, &r01);
    vec8_max(&mx2, &r2);
  }
  if (j0 & 4)  // -inf up to the next multiple of 8
    for (int j = 0; j < 4; j++) S0[j0 + j] = S1[j0 + j] = S2[j0 + j] = -INFINITY;
  // The largest of lanes 0..3 and of lanes 4..7 (q0's and q1's; q2's twice).
  _Pragma("GCC unroll 2") for (int step = 0; step < 2; step++) {
    const v8i sw = step ? (v8i){1, 0, 3, 2, 5, 4, 7, 6} : (v8i){2, 3, 0, 1, 6, 7, 4, 5};
    v8f t = __builtin_shuffle(mx01, sw);
    vec8_max(&mx01, &t);
    t = __builtin_shuffle(mx2, sw);
    vec8_max(&mx2, &t);
  }
  bm[0] = mx01[0], bm[1] = mx01[4], bm[2] = mx2[0];
}

// acc += sum_j w[j] * (v row j) for j < nj (rows vs apart), hd a multiple of 8;
// 64 dims at a time stay in registers.
INL void pv8(float *acc, const float *w, const void *v, size_t vs, bool h16, int nj, int hd) {
  int d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) {
    v8f a[8];
    UNROLL8 for (int c = 0; c < 8; c++) a[c] = *(v8fu *)(acc + d0 + 8 * c);
    for (int j = 0; j < nj; j++) {
      if (w[j] == 0) continue;
      const v8f wv = SPL(w[j]);
      const size_t vr = (size_t)j * vs + d0;  // elements of v
      UNROLL8 for (int c = 0; c < 8; c++) {
        v8f x;
        load8(&x, v, vr + 8 * c, h16);
        a[c] += wv * x;
      }
    }
    UNROLL8 for (int c = 0; c < 8; c++) *(v8fu *)(acc + d0 + 8 * c) = a[c];
  }
  for (; d0 < hd; d0 += 8) {  // the last hd % 64 dims
    v8f a = *(v8fu *)(acc + d0);
    for (int j = 0; j < nj; j++) {
      if (w[j] == 0) continue;
      v8f x;
      load8(&x, v, (size_t)j * vs + d0, h16);
      a += SPL(w[j]) * x;
    }
    *(v8fu *)(acc + d0) = a;
  }
}

// pv8 for three queries at once (accumulators ac[g], weights w[g]) over the
// rows j in [j0, j1]: each V row is loaded once for the three, and the twelve
// accumulators of 32 dims give the FMAs independent chains.
INL void pv8x3(float *const *ac, const float *const *w, const void *v, size_t vs, bool h16,
               int j0, int j1, int hd, const char *pf) {
  int d0 = 0;
  for (; d0 + 32 <= hd; d0 += 32) {
    v8f a[12];
    _Pragma("GCC unroll 12") for (int c = 0; c < 12; c++)
      a[c] = *(v8fu *)(ac[c / 4] + d0 + 8 * (c % 4));
    size_t vr = (size_t)j0 * vs + d0;  // elements of v
    for (int j = j0; j <= j1; j++, vr += vs) {
      if (pf) __builtin_prefetch(pf + vr * 2, 0, 3);  // f16 rows: the line this step reads
      const v8f w0 = SPL(w[0][j]), w1 = SPL(w[1][j]), w2 = SPL(w[2][j]);
      _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        v8f x;
        load8(&x, v, vr + 8 * c, h16);
        a[c] += w0 * x, a[4 + c] += w1 * x, a[8 + c] += w2 * x;
      }
    }
    _Pragma("GCC unroll 12") for (int c = 0; c < 12; c++)
      *(v8fu *)(ac[c / 4] + d0 + 8 * (c % 4)) = a[c];
  }
  for (; d0 < hd; d0 += 8) {  // the last hd % 32 dims
    v8f a0 = *(v8fu *)(ac[0] + d0), a1 = *(v8fu *)(ac[1] + d0), a2 = *(v8fu *)(ac[2] + d0);
    for (int j = j0; j <= j1; j++) {
      v8f x;
      load8(&x, v, (size_t)j * vs + d0, h16);
      a0 += SPL(w[0][j]) * x, a1 += SPL(w[1][j]) * x, a2 += SPL(w[2][j]) * x;
    }
    *(v8fu *)(ac[0] + d0) = a0, *(v8fu *)(ac[1] + d0) = a1, *(v8fu *)(ac[2] + d0) = a2;
  }
}

// Folds one block's scores S[0..n8) of a query, n8 a multiple of 8, masked
// and padded with -inf, their largest bm, into its softmax state; S becomes
// the weights.
INL void softmax_step(float *S, int n8, float bm, float *m, float *l, float *acc, int hd) {
  if (bm == -INFINITY) {  // nothing visible in this block
    memset(S, 0, (size_t)n8 * sizeof *S);
    return;
  }
  const float mn = *m > bm ? *m : bm;
  if (mn > *m) {
    const float corr = expf(*m - mn);  // 0 when *m is -inf
    *l *= corr;
    scale_n(acc, corr, hd);
    *m = mn;
  }
  const v8f mv = SPL(mn);
  v8f sum = SPL(0.0f);
  for (int j = 0; j < n8; j += 8) {
    *(v8fu *)(S + j) = *(v8fu *)(S + j) - mv;
    vec8_exp_nonpos(S + j);
    sum += *(v8fu *)(S + j);
  }
  *l += vec8_hsum(sum);
}

// softmax_step for three queries at once (S0 and the two score rows after it,
// ss apart; m[0..3), l[0..3); acc rows hd apart), their exps interleaved so
// that the polynomial's latency overlaps; the same arithmetic. A query with
// nothing visible (bm -inf) keeps its state and gets weights 0 all the same:
// the exp of -inf, or of the NaN of -inf - -inf, is 0 here.
INL void softmax_step3(float *S0, int ss, int n8, const float *bm, float *m, float *l,
                       float *acc, int hd) {
  v8f mv[3], sum[3];
  for (int u = 0; u < 3; u++) {
    if (bm[u] > m[u]) {
      const float corr = expf(m[u] - bm[u]);  // 0 when m is -inf
      l[u] *= corr;
      scale_n(acc + (size_t)u * hd, corr, hd);
      m[u] = bm[u];
    }
    mv[u] = SPL(m[u]), sum[u] = SPL(0.0f);
  }
  for (int j = 0; j < n8; j += 8)
    _Pragma("GCC unroll 3") for (int u = 0; u < 3; u++) {
      float *p = S0 + (size_t)u * ss + j;
      *(v8fu *)p = *(v8fu *)p - mv[u];
      vec8_exp_nonpos(p);
      sum[u] += *(v8fu *)p;
    }
  for (int u = 0; u < 3; u++) l[u] += vec8_hsum(sum[u]);
}

// Three queries of a token (q0 and the two after it, hd apart) over a block's
// rows j < nj, rows [vlo, vhi] of them visible (vlo >= 0): scores, softmax
// steps and the V rows.
INL void block3(const float *q0, const void *kb, const void *vb, size_t rs, bool h16, int nj,
                int hd, float scale, float softcap, int vlo, int vhi, float *S0, int ss,
                float *m, float *l, float *acc, const char *pk, const char *pv) {
  float bm[3];
  scores8x3(q0, kb, rs, h16, nj, hd, scale, softcap, vlo, vhi, S0, ss, bm, pk);
  softmax_step3(S0, ss, (nj + 7) & ~7, bm, m, l, acc, hd);
  float *const ac3[3] = {acc, acc + hd, acc + 2 * hd};
  const float *const w3[3] = {S0, S0 + ss, S0 + 2 * ss};
  // Outside [vlo, vhi] the weights are 0 (and the rows skipped).
  pv8x3(ac3, w3, vb, rs, h16, vlo, vhi, hd, pv);
}

// One work item: tokens [t0, t0 + nt) of sequence si, KV heads [h0, h0 +
// nh), over the KV blocks [bf, bl] of the ones visible to the tile (bf < 0:
// all of them), each block taken by every head of the item in turn. With
// part, the unnormalized state (m[nq], l[nq], acc[nq][hd]) goes there for
// merge_parts instead of the result to a->out.
INL void attend_item(const cpu_attn *a, int si, int t0, int nt, int h0, int nh, int bf, int bl,
                     float *scratch, float *part, bool h16, int hd) {
  const int G = a->n_heads / a->n_kv_heads, bs = a->block_size;
  const int nqh = G * nt, nq = nqh * nh, ss = score_stride(bs);
  const bool vec = hd % 8 == 0;
  // A decode token over an f16 cache in blocks of 16 rows: attn_dec.h's kernel.
  const bool dec = a->avx512 && h16 && bs == ATT_DEC_ROWS && hd % 16 == 0 && G <= ATT_DEC_MAX_G;
  const bool pre = h16 && vec && nt == 1;  // decode, f16 rows in place: prefetch
  const size_t nkv = (size_t)a->n_kv_heads;
  float *acc = scratch, *m = acc + (size_t)nq * hd, *l = m + nq, *S = l + nq;
  float *kbuf = scratch + a->scratch_per_thread - 2 * (size_t)bs * hd, *vbuf = kbuf + (size_t)bs * hd;
  const wk_seq *s = &a->seqs[si];
  const int p0 = a->tok_pos[t0], p1 = p0 + nt - 1;
  int lo = a->window > 0 ? p0 - a->window + 1 : 0;
  if (lo < 0) lo = 0;
  // Query i is head (h0 + i / nqh) * G + i % G of token t0 + (i % nqh) / G.
#define QROW(i)                                                                              \
  (a->q + ((size_t)(t0 + (i) % nqh / G) * (size_t)a->n_heads + (size_t)(h0 + (i) / nqh) * G + \
           (i) % G) * hd)
  memset(acc, 0, (size_t)nq * hd * sizeof *acc);
  for (int i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0;
  if (bf < 0) bf = lo / bs, bl = p1 / bs;
  for (int b = bf; b <= bl; b++) {
    const int j0 = b * bs > lo ? b * bs : lo;
    const int j1 = b * bs + bs - 1 < p1 ? b * bs + bs - 1 : p1;
    const int nj = j1 - j0 + 1, n8 = (nj + 7) & ~7;
    for (int u = 0; u < nh; u++) {  // the item's heads: queries [u nqh, (u + 1) nqh)
      const int h = h0 + u;
      // Head h's rows of the block (cpu_ctx.h: a block's rows of one head lie
      // together, hd elements apart).
      const size_t base =
          (((size_t)s->blocks[b] * nkv + (size_t)h) * bs + (size_t)(j0 - b * bs)) * hd;
      // The item's next (block, head), prefetched into L1 by the kernels
      // (top comment) as they work on this one. Further ahead (2 or 3), into
      // the L2, or all of it at the block's start did not pay.
      const char *pk = NULL, *pv = NULL;
      if (pre && (u + 1 < nh || b < bl)) {
        const size_t nb =
            ((size_t)s->blocks[u + 1 < nh ? b : b + 1] * nkv + (size_t)(h0 + (u + 1) % nh)) * bs * hd;
        pk = (const char *)((const uint16_t *)a->k_cache + nb);
        pv = (const char *)((const uint16_t *)a->v_cache + nb);
      }
      if (!pre && a->kv_f16 && hd >= 256 && b < bl) {
        // (Prompts; decode tokens prefetch the next (block, head), above.)
        // Rows of 512 bytes and more (Gemma 3's head size 256): the next
        // block's K and V rows of head h asked of the L2 (prefetcht2), ahead
        // of their use. bench_attn_cpu 2000 1 4 1 256 30, 5 alternating rounds:
        // 362 -> 265 us a layer (1 thread), 206 -> 147 (2 threads); at head
        // size 64 and 128 no gain, and into L1 slower everywhere (session 24).
        const size_t nb = ((size_t)s->blocks[b + 1] * nkv + h) * bs * hd;
        const char *kn = (const char *)((const uint16_t *)a->k_cache + nb);
        const char *vn = (const char *)((const uint16_t *)a->v_cache + nb);
        for (int o = 0; o < bs * hd * 2; o += 64)
          __builtin_prefetch(kn + o, 0, 1), __builtin_prefetch(vn + o, 0, 1);
      }
      if (!a->kv_f16 && b < bl) {
        // The next block's f32 K rows of head h, ahead of their use: from
        // memory the three-query scores (four rows a step) wait on them
        // otherwise. (f16 rows: at head size 256 only, into the L2, above.)
        const float *kn =
            (const float *)a->k_cache + ((size_t)s->blocks[b + 1] * nkv + h) * bs * hd;
        for (int o = 0; o < bs * hd; o += 16) __builtin_prefetch(kn + o);
      }
      // The block's K and V rows of head h, rs elements apart: f16 ones read in
      // place by the vector kernels of the f16 item (h16), else f32 ones.
      const void *kb = (const float *)a->k_cache + base, *vb = (const float *)a->v_cache + base;
      size_t rs = (size_t)hd;
      const bool in_place = h16 && vec;
      if (in_place) {
        kb = (const uint16_t *)a->k_cache + base, vb = (const uint16_t *)a->v_cache + base;
      } else if (a->kv_f16) {
        rows_f16_f32(kbuf, (const uint16_t *)a->k_cache + base, nj, hd, (size_t)hd);
        rows_f16_f32(vbuf, (const uint16_t *)a->v_cache + base, nj, hd, (size_t)hd);
        kb = kbuf, vb = vbuf, rs = (size_t)hd;
      }
      if (dec) {  // the G queries of head h through attn_dec.h, token runs at once
        // Token t sees rows [vlo, vhi] of the block (relative to j0); a run
        // of up to 8 / G consecutive tokens that see the same rows (every
        // prompt token but near the diagonal or a window's edge) goes as
        // one call of run x G queries.
        const int rb = j0 - b * bs, run_max = ATT_DEC_MAX_G / G;
        for (int t = 0; t < nt;) {
          const int p = p0 + t, qlo = a->window > 0 ? p - a->window + 1 : 0;
          const int vlo = qlo - j0 > 0 ? qlo - j0 : 0, vhi = p - j0 < nj - 1 ? p - j0 : nj - 1;
          int run = 1;
          for (; run < run_max && t + run < nt; run++) {
            const int pr = p + run, qr = a->window > 0 ? pr - a->window + 1 : 0;
            if ((qr - j0 > 0 ? qr - j0 : 0) != vlo || (pr - j0 < nj - 1 ? pr - j0 : nj - 1) != vhi)
              break;
          }
          if (vlo <= vhi) {  // (else nothing visible to these tokens)
            const size_t i = (size_t)u * nqh + (size_t)t * G;
            const att_dec d = {
                .q = a->q + ((size_t)(t0 + t) * (size_t)a->n_heads + (size_t)h * G) * hd,
                .qs = (size_t)a->n_heads * hd,
                .kb = (const uint16_t *)kb - (size_t)rb * hd,
                .vb = (const uint16_t *)vb - (size_t)rb * hd, .g = run * G, .gt = G, .hd = hd,
                .scale = a->scale, .softcap = a->softcap, .vlo = rb + vlo, .vhi = rb + vhi,
                .m = m + i, .l = l + i, .acc = acc + i * hd, .pk = pk, .pv = pv};
            att_dec_avx512(&d);
          }
          t += run;
        }
        continue;
      }
      for (int i = u * nqh, t = 0; t < nt; t++) {
        const int p = p0 + t, qlo = a->window > 0 ? p - a->window + 1 : 0;
        // Rows [vlo, vhi] of the block are visible to token t0 + t.
        const int vlo = qlo - j0, vhi = p - j0 < nj - 1 ? p - j0 : nj - 1;
        if (vhi < 0 || vlo > vhi) {  // nothing visible to the token's queries
          i += G;
          continue;
        }
        const float *qt = a->q + ((size_t)(t0 + t) * (size_t)a->n_heads + (size_t)h * G) * hd;
        // The first three queries' pass prefetches the next (block, head),
        // at the rows this block's pass reads (decode tokens, f16 in place).
        const size_t ro = (size_t)(j0 - b * bs) * hd * 2;
        const char *pk3 = pk ? pk + ro : NULL, *pv3 = pv ? pv + ro : NULL;
        for (int g = 0; g < G; g++, i++) {
          if (g == 3) pk3 = pv3 = NULL;
          float *Si = S + (size_t)i * ss, *ai = acc + (size_t)i * hd;
          const float *qi = qt + (size_t)g * hd;
          if (vec && g + 3 <= G) {  // three queries of the token at once
            // A whole block of 16 rows, all visible, no softcap (decode's
            // usual case) with these as constants: no masking code.
            if (nj == 16 && vlo <= 0 && vhi == 15 && !(a->softcap > 0))
              block3(qi, kb, vb, rs, in_place, 16, hd, a->scale, 0.0f, 0, 15, Si, ss, &m[i], &l[i],
                     ai, pk3, pv3);
            else
              block3(qi, kb, vb, rs, in_place, nj, hd, a->scale, a->softcap, vlo > 0 ? vlo : 0,
                     vhi, Si, ss, &m[i], &l[i], ai, pk3, pv3);
            g += 2, i += 2;
          } else if (vec) {
            const float bm =
                scores8(qi, kb, rs, in_place, nj, hd, a->scale, a->softcap, vlo, vhi, Si);
            softmax_step(Si, n8, bm, &m[i], &l[i], ai, hd);
            pv8(ai, Si, vb, rs, in_place, nj, hd);
          } else {
            float bm = -INFINITY;
            for (int j = 0; j < ss; j++) {
              float sc = -INFINITY;
              if (j >= vlo && j <= vhi) {
                sc = dot_n(qi, (const float *)kb + (size_t)j * rs, hd) * a->scale;
                if (a->softcap > 0) sc = a->softcap * tanhf(sc / a->softcap);
              }
              Si[j] = sc, bm = sc > bm ? sc : bm;
            }
            softmax_step(Si, ss, bm, &m[i], &l[i], ai, hd);
            for (int j = 0; j < nj; j++)
              if (Si[j] != 0) axpy_n(ai, Si[j], (const float *)vb + (size_t)j * rs, hd);
          }
        }
      }
    }
  }
  if (part) {
    memcpy(part, m, 2 * (size_t)nq * sizeof *part);  // m, l
    memcpy(part + 2 * nq, acc, (size_t)nq * hd * sizeof *part);
    return;
  }
  for (int i = 0; i < nq; i++) {
    float *out = a->out + (QROW(i) - a->q);
    const float inv = 1.0f / l[i];  // l >= 1: the query's own position is visible
    const float *ai = acc + (size_t)i * hd;
    int d = 0;
    for (; d + 8 <= hd; d += 8) *(v8fu *)(out + d) = *(const v8fu *)(ai + d) * SPL(inv);
    for (; d < hd; d++) out[d] = ai[d] * inv;
  }
#undef QROW
}

VEC8_AVX2 static void item_avx2(const cpu_attn *a, int si, int t0, int nt, int h, int nh,
                                int bf, int bl, float *scratch, float *part) {
  attend_item(a, si, t0, nt, h, nh, bf, bl, scratch, part, false, a->head_dim);
}

// f16 K and V (AVX2 machines only), converted as the vector kernels load them.
__attribute__((target("avx2,fma,f16c"))) static void item_f16(const cpu_attn *a, int si,
                                                              int t0, int nt, int h, int nh,
                                                              int bf, int bl, float *scratch,
                                                              float *part) {
  if (a->head_dim == 64) attend_item(a, si, t0, nt, h, nh, bf, bl, scratch, part, true, 64);
  else attend_item(a, si, t0, nt, h, nh, bf, bl, scratch, part, true, a->head_dim);
}

static void item_base(const cpu_attn *a, int si, int t0, int nt, int h, int nh, int bf, int bl,
                      float *scratch, float *part) {
  attend_item(a, si, t0, nt, h, nh, bf, bl, scratch, part, false, a->head_dim);
}

typedef struct att_job {
  const cpu_attn *a;
  int qt;              // query tokens per tile
  int ns;              // splits of each item's KV blocks (decode batches only)
  int nh;              // KV heads an item: all of them for decode batches, else 1
  long total;          // items * ns
  atomic_long next;    // next unclaimed item
} att_job;

static long seq_tiles(const wk_seq *s, int qt) { return (s->n_new + qt - 1) / qt; }

static void att_run(void *ctx, int ith, int nth) {
  (void)nth;
  att_job *j = ctx;
  const cpu_attn *a = j->a;
  float *scratch = a->scratch + (size_t)ith * a->scratch_per_thread;
  for (;;) {
    const long cs = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (cs >= j->total) return;
    const long c = cs / j->ns, per_tile = a->n_kv_heads / j->nh;  // items a tile
    const int h = (int)(c % per_tile) * j->nh;
    long tile = c / per_tile;
    int si = 0;
    while (tile >= seq_tiles(&a->seqs[si], j->qt)) tile -= seq_tiles(&a->seqs[si++], j->qt);
    const wk_seq *s = &a->seqs[si];
    const long ti = seq_tiles(s, j->qt) - 1 - tile;  // the longest tiles first
    const int t0 = s->first + (int)ti * j->qt;
    const int nt = s->first + s->n_new - t0 < j->qt ? s->first + s->n_new - t0 : j->qt;
    int bf = -1, bl = -1;
    float *part = NULL;
    if (j->ns > 1) {  // a decode token: its split of the visible blocks
      const int p = a->tok_pos[t0], bs = a->block_size, sp = (int)(cs % j->ns);
      const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
      const int b0 = lo / bs, nb = p / bs - b0 + 1;
      bf = b0 + (int)((long)nb * sp / j->ns);
      bl = b0 + (int)((long)nb * (sp + 1) / j->ns) - 1;
      part = a->partial + (size_t)cs * split_part(a) * (size_t)j->nh;
    }
    if (a->kv_f16) item_f16(a, si, t0, nt, h, j->nh, bf, bl, scratch, part);
    else if (a->avx2) item_avx2(a, si, t0, nt, h, j->nh, bf, bl, scratch, part);
    else item_base(a, si, t0, nt, h, j->nh, bf, bl, scratch, part);
  }
}

// Combines the ns partial states of every decode item into a->out.
// An item's state holds Q = nh G queries (its nh KV heads' G each).
static void merge_parts(const cpu_attn *a, long items, int ns, int nh) {
  const int G = a->n_heads / a->n_kv_heads, hd = a->head_dim, Q = nh * G;
  const long per_tok = a->n_kv_heads / nh;  // items a token
  const size_t sp_floats = split_part(a) * (size_t)nh;
  for (long c = 0; c < items; c++) {
    const int h0 = (int)(c % per_tok) * nh;
    long t = c / per_tok, si = 0;
    while (t >= a->seqs[si].n_new) t -= a->seqs[si++].n_new;
    const int tok = a->seqs[si].first + (int)t;
    for (int i = 0; i < Q; i++) {
      float mx = -INFINITY, l = 0;
      for (int sp = 0; sp < ns; sp++) {
        const float m = a->partial[(size_t)(c * ns + sp) * sp_floats + i];
        mx = m > mx ? m : mx;
      }
      float *out = a->out + ((size_t)tok * a->n_heads + (size_t)h0 * G + i) * hd;
      memset(out, 0, (size_t)hd * sizeof *out);
      for (int sp = 0; sp < ns; sp++) {
        const float *pp = a->partial + (size_t)(c * ns + sp) * sp_floats;
        if (pp[i] == -INFINITY) continue;  // nothing visible in this split
        const float w = expf(pp[i] - mx), *acc = pp + 2 * Q + (size_t)i * hd;
        l += pp[Q + i] * w;
        for (int d = 0; d < hd; d++) out[d] += acc[d] * w;
      }
      for (int d = 0; d < hd; d++) out[d] /= l;
    }
  }
}

void cpu_attention(wk_pool *pool, const cpu_attn *a) {
  WK_ASSERT(a->n_heads % a->n_kv_heads == 0);
  const int g = a->n_heads / a->n_kv_heads;
  WK_ASSERT(a->scratch_per_thread >=
            cpu_attn_scratch(a->n_heads, a->n_kv_heads, a->head_dim, a->block_size));
  att_job j = {.a = a, .qt = tile_tokens(g, a->head_dim), .ns = 1, .nh = 1};
  long tiles = 0;
  for (int i = 0; i < a->n_seqs; i++) tiles += seq_tiles(&a->seqs[i], j.qt);
  // A decode batch (a token a tile): an item takes every KV head of its
  // token, so that it reads each block's rows front to back, one stream
  // (cpu_ctx.h's layout). Prompts keep an item a head (their tiles read the
  // same blocks again, from cache).
  const bool dec = a->n_tokens == tiles;
  if (dec && a->n_heads <= g * j.qt) j.nh = a->n_kv_heads;  // the scratch holds its queries
  const long items = tiles * (a->n_kv_heads / j.nh);
  const int nth = wk_pool_size(pool);
  // Decode with fewer items than 2 per thread: split the KV blocks of each
  // (at least ATT_SPLIT_MIN positions of one head a split).
  if (nth > 1 && dec && items < 2L * nth) {
    int longest = 0;
    for (int i = 0; i < a->n_tokens; i++) longest = a->tok_pos[i] > longest ? a->tok_pos[i] : longest;
    int ns = (int)((2L * nth + items - 1) / items);
    while (ns > 1 && ((size_t)(items * ns) * split_part(a) * (size_t)j.nh > a->partial_floats ||
                      (long)longest * j.nh < (long)ATT_SPLIT_MIN * ns))
      ns--;
    j.ns = ns;
  }
  j.total = items * j.ns;
  atomic_init(&j.next, 0);
  if (j.total <= 1 || nth == 1) att_run(&j, 0, 1);
  else wk_pool_run(pool, att_run, &j);
  if (j.ns > 1) merge_parts(a, items, j.ns, j.nh);
}
