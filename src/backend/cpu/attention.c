// Causal attention over a paged KV cache.
//
// A work item is (query tile, KV head): up to `qt` consecutive new tokens of
// one sequence and the G = n_heads / n_kv_heads query heads that share the KV
// head. The item walks the KV blocks its tile can see once; per block it
// scores every K row against all G * qt queries, updates each query's online
// softmax (running max m, running sum l, accumulator acc rescaled when m
// grows) and adds the V rows. Threads claim items from a shared counter, the
// last tiles of each sequence (the longest) first. A decode batch with fewer
// items than two per thread splits each item's KV blocks into parts whose
// softmax states are merged at the end, so that all threads stream the cache.
//
// The inner loops use 8-float GCC vector types (vec8.h); the item function is
// compiled twice, for AVX2 + FMA and for the baseline, and chosen by
// cpu_attn.avx2. exp is vec8.h's polynomial on the max-subtracted scores,
// which are <= 0. An f16 cache (kv_f16, the fast path) has each block's rows
// of the item's head converted to f32 in the thread's scratch (F16C) before
// they are used: half the bytes streamed, the same arithmetic after.
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

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

size_t cpu_attn_partial(int n_heads, int n_kv_heads, int head_dim, int n_threads) {
  return (size_t)(4 * n_threads) * (size_t)(n_heads / n_kv_heads) * ((size_t)head_dim + 2);
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

// r[j] = sum of the 8 lanes of a[j], for 8 vectors (a transpose-and-add).
INL void hsum8x8(v8f *a, float *r) {
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
  *(v8fu *)r = __builtin_shuffle(u0, u1, lanes_lo) + __builtin_shuffle(u0, u1, lanes_hi);
}

// S[j] = dot(q, k row j) * scale for j < nj (rows ks apart), hd a multiple of 8.
INL void scores8(const float *q, const float *k, size_t ks, int nj, int hd, float scale,
                 float *S) {
  for (int j0 = 0; j0 < nj; j0 += 8) {
    const float *kr[8];
    UNROLL8 for (int j = 0; j < 8; j++) kr[j] = k + (size_t)(j0 + j < nj ? j0 + j : j0) * ks;
    v8f a[8];
    UNROLL8 for (int j = 0; j < 8; j++) a[j] = SPL(0.0f);
    for (int d = 0; d < hd; d += 8) {
      const v8f qv = *(const v8fu *)(q + d);
      UNROLL8 for (int j = 0; j < 8; j++) a[j] += qv * *(const v8fu *)(kr[j] + d);
    }
    float r[8];
    hsum8x8(a, r);
    for (int j = 0; j < 8 && j0 + j < nj; j++) S[j0 + j] = r[j] * scale;
  }
}

// acc += sum_j w[j] * (v row j) for j < nj (rows vs apart), hd a multiple of 8;
// 64 dims at a time stay in registers.
INL void pv8(float *acc, const float *w, const float *v, size_t vs, int nj, int hd) {
  int d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) {
    v8f a[8];
    UNROLL8 for (int c = 0; c < 8; c++) a[c] = *(v8fu *)(acc + d0 + 8 * c);
    for (int j = 0; j < nj; j++) {
      if (w[j] == 0) continue;
      const v8f wv = SPL(w[j]);
      const float *vr = v + (size_t)j * vs + d0;
      UNROLL8 for (int c = 0; c < 8; c++) a[c] += wv * *(const v8fu *)(vr + 8 * c);
    }
    UNROLL8 for (int c = 0; c < 8; c++) *(v8fu *)(acc + d0 + 8 * c) = a[c];
  }
  for (; d0 < hd; d0 += 64) {  // the last hd % 64 dims
    const int nd = (hd - d0) / 8;
    v8f a[8];
    for (int c = 0; c < nd; c++) a[c] = *(v8fu *)(acc + d0 + 8 * c);
    for (int j = 0; j < nj; j++) {
      if (w[j] == 0) continue;
      const v8f wv = SPL(w[j]);
      const float *vr = v + (size_t)j * vs + d0;
      for (int c = 0; c < nd; c++) a[c] += wv * *(const v8fu *)(vr + 8 * c);
    }
    for (int c = 0; c < nd; c++) *(v8fu *)(acc + d0 + 8 * c) = a[c];
  }
}

// Folds one block's scores S[0..nj) of a query (already masked with -inf and
// padded to `ss` with -inf) into its softmax state; S becomes the weights.
INL void softmax_step(float *S, int nj, int ss, float *m, float *l, float *acc, int hd) {
  float bm = -INFINITY;
  for (int j = 0; j < nj; j++) bm = S[j] > bm ? S[j] : bm;
  if (bm == -INFINITY) {  // nothing visible in this block
    memset(S, 0, (size_t)nj * sizeof *S);
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
  for (int j = 0; j < ss; j += 8) {
    *(v8fu *)(S + j) = *(v8fu *)(S + j) - mv;
    vec8_exp_nonpos(S + j);
    sum += *(v8fu *)(S + j);
  }
  *l += vec8_hsum(sum);
}

// One work item: tokens [t0, t0 + nt) of sequence si, KV head h, over the KV
// blocks [bf, bl] of the ones visible to the tile (bf < 0: all of them). With
// part, the unnormalized state (m[nq], l[nq], acc[nq][hd]) goes there for
// merge_parts instead of the result to a->out.
INL void attend_item(const cpu_attn *a, int si, int t0, int nt, int h, int bf, int bl,
                     float *scratch, float *part) {
  const int G = a->n_heads / a->n_kv_heads, hd = a->head_dim, bs = a->block_size;
  const int nq = G * nt, ss = score_stride(bs);
  const bool vec = hd % 8 == 0;
  const size_t kv_dim = (size_t)a->n_kv_heads * (size_t)hd;
  float *acc = scratch, *m = acc + (size_t)nq * hd, *l = m + nq, *S = l + nq;
  float *kbuf = scratch + a->scratch_per_thread - 2 * (size_t)bs * hd, *vbuf = kbuf + (size_t)bs * hd;
  const wk_seq *s = &a->seqs[si];
  const int p0 = a->tok_pos[t0], p1 = p0 + nt - 1;
  int lo = a->window > 0 ? p0 - a->window + 1 : 0;
  if (lo < 0) lo = 0;
  // Query i is head h * G + i % G of token t0 + i / G.
#define QROW(i) (a->q + ((size_t)(t0 + (i) / G) * (size_t)a->n_heads + (size_t)h * G + (i) % G) * hd)
  memset(acc, 0, (size_t)nq * hd * sizeof *acc);
  for (int i = 0; i < nq; i++) m[i] = -INFINITY, l[i] = 0;
  if (bf < 0) bf = lo / bs, bl = p1 / bs;
  for (int b = bf; b <= bl; b++) {
    const int j0 = b * bs > lo ? b * bs : lo;
    const int j1 = b * bs + bs - 1 < p1 ? b * bs + bs - 1 : p1;
    const int nj = j1 - j0 + 1;
    const size_t base = ((size_t)s->blocks[b] * bs + (size_t)(j0 - b * bs)) * kv_dim +
                        (size_t)h * hd;
    const float *kb, *vb;
    size_t rs = kv_dim;  // floats from one row to the next
    if (a->kv_f16) {
      rows_f16_f32(kbuf, (const uint16_t *)a->k_cache + base, nj, hd, kv_dim);
      rows_f16_f32(vbuf, (const uint16_t *)a->v_cache + base, nj, hd, kv_dim);
      kb = kbuf, vb = vbuf, rs = (size_t)hd;
    } else {
      kb = (const float *)a->k_cache + base, vb = (const float *)a->v_cache + base;
    }
    for (int i = 0; i < nq; i++) {
      float *Si = S + (size_t)i * ss;
      const int p = p0 + i / G, qlo = a->window > 0 ? p - a->window + 1 : 0;
      if (j0 > p || j1 < qlo) {  // nothing visible to this query
        memset(Si, 0, (size_t)nj * sizeof *Si);
        continue;
      }
      if (vec) {
        scores8(QROW(i), kb, rs, nj, hd, a->scale, Si);
      } else {
        for (int j = 0; j < nj; j++)
          Si[j] = dot_n(QROW(i), kb + (size_t)j * rs, hd) * a->scale;
      }
      if (a->softcap > 0)
        for (int j = 0; j < nj; j++) Si[j] = a->softcap * tanhf(Si[j] / a->softcap);
      for (int j = 0; j < nj; j++)
        if (j0 + j > p || j0 + j < qlo) Si[j] = -INFINITY;
      for (int j = nj; j < ss; j++) Si[j] = -INFINITY;
      softmax_step(Si, nj, ss, &m[i], &l[i], acc + (size_t)i * hd, hd);
      if (vec) {
        pv8(acc + (size_t)i * hd, Si, vb, rs, nj, hd);
      } else {
        for (int j = 0; j < nj; j++)
          if (Si[j] != 0) axpy_n(acc + (size_t)i * hd, Si[j], vb + (size_t)j * rs, hd);
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

VEC8_AVX2 static void item_avx2(const cpu_attn *a, int si, int t0, int nt, int h, int bf,
                                int bl, float *scratch, float *part) {
  attend_item(a, si, t0, nt, h, bf, bl, scratch, part);
}

static void item_base(const cpu_attn *a, int si, int t0, int nt, int h, int bf, int bl,
                      float *scratch, float *part) {
  attend_item(a, si, t0, nt, h, bf, bl, scratch, part);
}

typedef struct att_job {
  const cpu_attn *a;
  int qt;              // query tokens per tile
  int ns;              // splits of each item's KV blocks (decode batches only)
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
    const long c = cs / j->ns;
    const int h = (int)(c % a->n_kv_heads);
    long tile = c / a->n_kv_heads;
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
      part = a->partial + (size_t)cs * split_part(a);
    }
    if (a->avx2) item_avx2(a, si, t0, nt, h, bf, bl, scratch, part);
    else item_base(a, si, t0, nt, h, bf, bl, scratch, part);
  }
}

// Combines the ns partial states of every decode item into a->out.
static void merge_parts(const cpu_attn *a, long items, int ns) {
  const int G = a->n_heads / a->n_kv_heads, hd = a->head_dim;
  for (long c = 0; c < items; c++) {
    const int h = (int)(c % a->n_kv_heads);
    long t = c / a->n_kv_heads, si = 0;
    while (t >= a->seqs[si].n_new) t -= a->seqs[si++].n_new;
    const int tok = a->seqs[si].first + (int)t;
    for (int i = 0; i < G; i++) {
      float mx = -INFINITY, l = 0;
      for (int sp = 0; sp < ns; sp++) {
        const float m = a->partial[(size_t)(c * ns + sp) * split_part(a) + i];
        mx = m > mx ? m : mx;
      }
      float *out = a->out + ((size_t)tok * a->n_heads + (size_t)h * G + i) * hd;
      memset(out, 0, (size_t)hd * sizeof *out);
      for (int sp = 0; sp < ns; sp++) {
        const float *pp = a->partial + (size_t)(c * ns + sp) * split_part(a);
        if (pp[i] == -INFINITY) continue;  // nothing visible in this split
        const float w = expf(pp[i] - mx), *acc = pp + 2 * G + (size_t)i * hd;
        l += pp[G + i] * w;
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
  att_job j = {.a = a, .qt = tile_tokens(g, a->head_dim), .ns = 1};
  for (int i = 0; i < a->n_seqs; i++) j.total += seq_tiles(&a->seqs[i], j.qt) * a->n_kv_heads;
  const int nth = wk_pool_size(pool);
  const long items = j.total;
  // Decode with fewer items than 2 per thread: split the KV blocks of each.
  if (nth > 1 && a->n_tokens == items / a->n_kv_heads && items < 2L * nth) {
    int longest = 0;
    for (int i = 0; i < a->n_tokens; i++) longest = a->tok_pos[i] > longest ? a->tok_pos[i] : longest;
    int ns = (int)((2L * nth + items - 1) / items);
    while (ns > 1 && ((size_t)(items * ns) * split_part(a) > a->partial_floats ||
                      longest < ATT_SPLIT_MIN * ns))
      ns--;
    j.ns = ns;
  }
  j.total = items * j.ns;
  atomic_init(&j.next, 0);
  if (j.total <= 1 || nth == 1) att_run(&j, 0, 1);
  else wk_pool_run(pool, att_run, &j);
  if (j.ns > 1) merge_parts(a, items, j.ns);
}
