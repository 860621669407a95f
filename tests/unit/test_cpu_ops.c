// CPU backend ops against straightforward double-precision implementations
// on random inputs; every output buffer is poisoned with NaN first.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/dequant.h"
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/matmul.h"
#include "base/alloc.h"
#include "base/fp.h"
#include "base/pool.h"
#include "quant/quant.h"
#include "quant/types.h"

#include "test_util.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {  // uniform in [-1, 1)
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) * (1.0 / (1 << 23)) - 1.0);
}
static void fill(float *x, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) x[i] = scale * frand();
}
static void poison(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = NAN;
}
static float *falloc(size_t n) {
  float *p = wk_malloc(n * sizeof *p);
  WK_ASSERT(p);
  return p;
}

// |got - want| <= tol * (1 + |want|) everywhere, NaN fails.
static int close_all(const char *what, const float *got, const double *want, size_t n,
                     double tol) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
      CHECKF(0, "%s[%zu] = %.9g, expected %.9g", what, i, got[i], want[i]);
      return 0;
    }
  return 1;
}

static void test_rmsnorm(void) {
  enum { R = 5, D = 37 };
  float x[R * D], w[D], y[R * D];
  double want[R * D];
  fill(x, R * D, 3), fill(w, D, 2);
  const float eps = 1e-5f;
  for (int r = 0; r < R; r++) {
    double ms = 0;
    for (int i = 0; i < D; i++) ms += (double)x[r * D + i] * x[r * D + i] / D;
    for (int i = 0; i < D; i++) want[r * D + i] = x[r * D + i] / sqrt(ms + eps) * w[i];
  }
  poison(y, R * D);
  cpu_rmsnorm(y, x, w, R, D, eps);
  close_all("rmsnorm", y, want, R * D, 1e-6);
  cpu_rmsnorm(x, x, w, R, D, eps);  // in place
  close_all("rmsnorm in place", x, want, R * D, 1e-6);
}

static void test_act(wk_pool *pool) {
  enum { N = 301 };
  float g[N], u[N], g2[N];
  double ws[N], wg[N];
  fill(g, N, 8), fill(u, N, 2);
  for (int i = 0; i < N; i++) {
    double x = g[i];
    ws[i] = x / (1 + exp(-x)) * u[i];
    wg[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
  }
  memcpy(g2, g, sizeof g);
  cpu_swiglu(g, u, N);
  close_all("swiglu", g, ws, N, 1e-6);
  cpu_geglu_tanh(g2, u, N);
  close_all("geglu", g2, wg, N, 1e-6);
  // The vector pass: 7 rows of 43 (tails of every length), both instruction sets.
  const bool avx2 = wk_kernel_best_level() >= WK_LEVEL_AVX2;
  for (int v = 0; v < 4; v++) {
    if ((v & 2) && !avx2) continue;
    fill(g, N, 8);
    g[5] = -90, g[6] = 90, g[7] = 0, g[8] = -1e-4f;  // saturated and tiny inputs
    for (int i = 0; i < N; i++) {
      double x = g[i];
      ws[i] = (v & 1) ? 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i]
                      : x / (1 + exp(-x)) * u[i];
    }
    cpu_glu(pool, v & 2, v & 1, g, u, 7, 43, NULL, 0);
    close_all(v & 1 ? "glu gelu" : "glu silu", g, ws, N, 1e-6);
  }
}

// Reference RoPE written as HF-style rotate_half (neox) or interleaved pairs.
static void rope_ref(double *out, const float *x, int hd, int rd, bool neox, double base,
                     double scale, const float *div, int pos) {
  int half = rd / 2;
  for (int i = 0; i < hd; i++) out[i] = x[i];
  for (int i = 0; i < half; i++) {
    double inv = scale / pow(base, (2.0 * i) / rd) / (div ? div[i] : 1.0);
    double c = cos(pos * inv), s = sin(pos * inv);
    if (neox) {  // out = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]
      out[i] = x[i] * c - x[i + half] * s;
      out[i + half] = x[i + half] * c + x[i] * s;
    } else {
      out[2 * i] = x[2 * i] * c - x[2 * i + 1] * s;
      out[2 * i + 1] = x[2 * i + 1] * c + x[2 * i] * s;
    }
  }
}

static void test_rope(void) {
  enum { T = 4, HD = 16, NQ = 3, NK = 2 };
  const int32_t pos[T] = {0, 1, 17, 3001};
  for (int variant = 0; variant < 4; variant++) {
    bool neox = variant & 1;
    int rd = variant & 2 ? 8 : HD;  // partial rotation
    float div[HD / 2];
    for (int i = 0; i < HD / 2; i++) div[i] = 1 + (float)i * 0.5f;
    const float *fd = variant == 3 ? div : NULL;
    float base = 10000, scale = variant == 2 ? 0.25f : 1;
    double freqs[HD / 2];
    cpu_rope_freqs(freqs, rd, base, scale, fd);
    cpu_rope r = {HD, rd, neox, freqs};
    float q[T * NQ * HD], k[T * NK * HD], q0[T * NQ * HD], k0[T * NK * HD];
    double wq[T * NQ * HD], wk[T * NK * HD];
    fill(q0, T * NQ * HD, 2), fill(k0, T * NK * HD, 2);
    memcpy(q, q0, sizeof q), memcpy(k, k0, sizeof k);
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < NQ; h++)
        rope_ref(wq + (t * NQ + h) * HD, q0 + (t * NQ + h) * HD, HD, rd, neox, base, scale, fd,
                 pos[t]);
      for (int h = 0; h < NK; h++)
        rope_ref(wk + (t * NK + h) * HD, k0 + (t * NK + h) * HD, HD, rd, neox, base, scale, fd,
                 pos[t]);
    }
    cpu_rope_apply(&r, q, NQ, k, NK, T, pos);
    char name[32];
    snprintf(name, sizeof name, "rope q v%d", variant);
    close_all(name, q, wq, T * NQ * HD, 2e-6);
    snprintf(name, sizeof name, "rope k v%d", variant);
    close_all(name, k, wk, T * NK * HD, 2e-6);
  }
}

// Attention over a paged cache with a scrambled block table vs a contiguous
// double-precision computation: two sequences in one batch (one with cached
// positions), several window / softcap variants, head sizes that do and do
// not fill the 8-float vectors, and both instruction-set variants.
static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

typedef struct att_case {
  int nh, nkv, hd, bs;
  int past[2], n_new[2];  // per sequence
} att_case;

// f16: K and V stored as f16 (kv_f16; the values are f16-exact first, so
// the reference and the tolerances are the f32 case's). avx512: decode
// tokens over f16 take attn_dec.h's kernel (else the three-query kernels,
// prefetching). Each variant runs twice: the same bits both times.
static void attention_case(wk_pool *pool, const att_case *tc, bool avx2, bool f16, bool avx512) {
  const int NH = tc->nh, NKV = tc->nkv, HD = tc->hd, BS = tc->bs, kv_dim = NKV * HD;
  int len[2], nb[2], T = 0, NB = 0;
  for (int s = 0; s < 2; s++) {
    len[s] = tc->past[s] + tc->n_new[s];
    nb[s] = (len[s] + BS - 1) / BS;
    T += tc->n_new[s];
    NB += nb[s];
  }
  NB += 3;  // unused blocks stay poisoned
  int32_t *blocks = wk_malloc(sizeof(int32_t) * (size_t)NB);
  int stride = 3;  // coprime to NB: a scrambled permutation of the blocks
  while (gcd(stride, NB) != 1) stride++;
  for (int i = 0; i < NB; i++) blocks[i] = (int32_t)((i * stride + 5) % NB);
  const int32_t *tab[2] = {blocks, blocks + nb[0]};
  const size_t cn = (size_t)NB * BS * kv_dim;
  float *kc = falloc(cn), *vc = falloc(cn);
  uint16_t *hk = wk_malloc(cn * sizeof(uint16_t)), *hv = wk_malloc(cn * sizeof(uint16_t));
  poison(kc, cn), poison(vc, cn);
  for (size_t i = 0; i < cn; i++) hk[i] = hv[i] = 0x7e00;  // NaN
  float *kk[2], *vv[2];
  for (int s = 0; s < 2; s++) {
    const size_t n = (size_t)len[s] * kv_dim;
    kk[s] = falloc(n + 1), vv[s] = falloc(n + 1);
    fill(kk[s], n, 1.5f), fill(vv[s], n, 1);
    for (size_t i = 0; f16 && i < n; i++)
      kk[s][i] = wk_f16_to_f32(wk_f32_to_f16(kk[s][i])), vv[s][i] = wk_f16_to_f32(wk_f32_to_f16(vv[s][i]));
    // The cache's layout (cpu_ctx.h): [block][kv head][row of the block][HD].
    for (int p = 0; p < len[s]; p++)
      for (int h = 0; h < NKV; h++) {
        const size_t at = (((size_t)tab[s][p / BS] * NKV + h) * BS + p % BS) * HD;
        const float *ks = kk[s] + (size_t)p * kv_dim + (size_t)h * HD;
        const float *vs = vv[s] + (size_t)p * kv_dim + (size_t)h * HD;
        memcpy(kc + at, ks, HD * sizeof(float));
        memcpy(vc + at, vs, HD * sizeof(float));
        for (int i = 0; i < HD; i++) hk[at + i] = wk_f32_to_f16(ks[i]), hv[at + i] = wk_f32_to_f16(vs[i]);
      }
  }
  // Sequence 1's tokens first in the batch, then sequence 0's.
  wk_seq seqs[2] = {{tab[0], nb[0], tc->past[0], tc->n_new[0], tc->n_new[1]},
                    {tab[1], nb[1], tc->past[1], tc->n_new[1], 0}};
  int32_t *tok_seq = wk_malloc(sizeof(int32_t) * (size_t)T);
  int32_t *tok_pos = wk_malloc(sizeof(int32_t) * (size_t)T);
  for (int s = 0; s < 2; s++)
    for (int j = 0; j < seqs[s].n_new; j++)
      tok_seq[seqs[s].first + j] = s, tok_pos[seqs[s].first + j] = seqs[s].n_past + j;
  float *q = falloc((size_t)T * NH * HD), *out = falloc((size_t)T * NH * HD);
  float *again = falloc((size_t)T * NH * HD);
  double *want = wk_malloc(sizeof(double) * (size_t)T * NH * HD);
  double *sc = wk_malloc(sizeof(double) * (size_t)(len[0] > len[1] ? len[0] : len[1]));
  fill(q, (size_t)T * NH * HD, 1.5f);
  const int nth = wk_pool_size(pool);
  const size_t per = cpu_attn_scratch(NH, NKV, HD, BS);
  float *scratch = falloc((size_t)nth * per);
  const size_t npart = cpu_attn_partial(NH, HD, nth);
  float *partial = falloc(npart);
  const int windows[] = {0, 3, 1, 0};
  const float caps[] = {0, 0, 2.5f, 0};
  for (int v = 0; v < 4; v++) {
    const float scale = v == 3 ? 1.3f : 0.35f;  // v3: sharp softmax
    cpu_attn a = {.q = q, .out = out, .k_cache = f16 ? (const void *)hk : kc,
                  .v_cache = f16 ? (const void *)hv : vc, .kv_f16 = f16, .seqs = seqs, .n_seqs = 2,
                  .tok_seq = tok_seq, .tok_pos = tok_pos, .n_tokens = T, .n_heads = NH,
                  .n_kv_heads = NKV, .head_dim = HD, .block_size = BS, .window = windows[v],
                  .scale = scale, .softcap = caps[v], .scratch = scratch,
                  .scratch_per_thread = per, .avx2 = avx2, .avx512 = avx512,
                  .partial = partial, .partial_floats = npart};
    poison(out, (size_t)T * NH * HD);
    cpu_attention(pool, &a);
    memcpy(again, out, (size_t)T * NH * HD * sizeof *out);
    poison(out, (size_t)T * NH * HD);
    cpu_attention(pool, &a);
    for (int t = 0; t < T; t++)
      for (int h = 0; h < NH; h++) {
        const int s = tok_seq[t], p = tok_pos[t], g = h / (NH / NKV);
        double mx = -1e300, sum = 0;
        int lo = windows[v] ? p - windows[v] + 1 : 0;
        if (lo < 0) lo = 0;
        for (int j = lo; j <= p; j++) {
          double d = 0;
          for (int i = 0; i < HD; i++)
            d += (double)q[((size_t)t * NH + h) * HD + i] * kk[s][((size_t)j * NKV + g) * HD + i];
          d *= scale;
          if (caps[v] > 0) d = caps[v] * tanh(d / caps[v]);
          sc[j] = d;
          if (d > mx) mx = d;
        }
        for (int j = lo; j <= p; j++) sum += sc[j] = exp(sc[j] - mx);
        for (int i = 0; i < HD; i++) {
          double o = 0;
          for (int j = lo; j <= p; j++) o += sc[j] / sum * vv[s][((size_t)j * NKV + g) * HD + i];
          want[((size_t)t * NH + h) * HD + i] = o;
        }
      }
    char name[96];
    snprintf(name, sizeof name, "attention hd %d g %d v%d %s%s t%d", HD, NH / NKV, v,
             avx2 ? "avx2" : "base", f16 ? (avx512 ? " f16 avx512" : " f16") : "", nth);
    CHECKF(!memcmp(again, out, (size_t)T * NH * HD * sizeof *out), "%s: two runs differ", name);
    // f32 scores carry ~1e-7 of their size; v3's reach ~40, so its weights ~1e-5.
    close_all(name, out, want, (size_t)T * NH * HD, v == 3 ? 1e-5 : 2e-6);
  }
  for (int s = 0; s < 2; s++) wk_free(kk[s]), wk_free(vv[s]);
  wk_free(blocks), wk_free(kc), wk_free(vc), wk_free(tok_seq), wk_free(tok_pos), wk_free(q);
  wk_free(hk), wk_free(hv);
  wk_free(out), wk_free(again), wk_free(want), wk_free(sc), wk_free(scratch), wk_free(partial);
}

static void test_attention(wk_pool *pool, bool avx2, bool avx512) {
  const att_case cases[] = {
      {.nh = 4, .nkv = 2, .hd = 8, .bs = 4, .past = {6, 0}, .n_new = {5, 3}},
      {.nh = 6, .nkv = 2, .hd = 12, .bs = 16, .past = {20, 3}, .n_new = {1, 2}},    // decode
      {.nh = 3, .nkv = 1, .hd = 64, .bs = 16, .past = {0, 17}, .n_new = {70, 1}},   // > 1 tile
      {.nh = 2, .nkv = 2, .hd = 136, .bs = 8, .past = {9, 0}, .n_new = {12, 40}},  // 64 + 64 + 8
      // Prompts of Gemma 3's head shape (256, 4 queries a KV head) and of head size 32.
      {.nh = 4, .nkv = 1, .hd = 256, .bs = 16, .past = {5, 0}, .n_new = {40, 9}},
      {.nh = 6, .nkv = 2, .hd = 32, .bs = 16, .past = {0, 30}, .n_new = {33, 3}},
      // 4, 8 and 5 queries a KV head (three at once, then one by one), head sizes
      // of 16 dimensions and 8 more.
      {.nh = 8, .nkv = 2, .hd = 24, .bs = 16, .past = {40, 0}, .n_new = {9, 3}},
      {.nh = 8, .nkv = 1, .hd = 40, .bs = 8, .past = {21, 2}, .n_new = {1, 17}},
      {.nh = 10, .nkv = 2, .hd = 16, .bs = 16, .past = {70, 3}, .n_new = {1, 1}},
      // Decode steps, long and short: with threads, KV blocks split and merged.
      {.nh = 4, .nkv = 1, .hd = 64, .bs = 16, .past = {300, 5}, .n_new = {1, 1}},
      {.nh = 6, .nkv = 2, .hd = 24, .bs = 4, .past = {150, 0}, .n_new = {1, 0}},
      // Decode steps for attn_dec.h's kernel (f16, blocks of 16, head sizes
      // multiples of 16, 1 to 8 queries a KV head), key counts not multiples
      // of 16: Llama 3's head shape (128, 4), 8 queries, Gemma 3's (256, 4),
      // SmolLM2's (64, 3), and 1, 2, 5, 6 and 7 queries with head sizes whose
      // chunks of the P * V steps leave a rest.
      {.nh = 8, .nkv = 2, .hd = 128, .bs = 16, .past = {200, 37}, .n_new = {1, 1}},
      {.nh = 8, .nkv = 1, .hd = 128, .bs = 16, .past = {150, 9}, .n_new = {1, 1}},
      {.nh = 4, .nkv = 1, .hd = 256, .bs = 16, .past = {300, 20}, .n_new = {1, 1}},
      {.nh = 9, .nkv = 3, .hd = 64, .bs = 16, .past = {260, 0}, .n_new = {1, 1}},
      {.nh = 2, .nkv = 2, .hd = 80, .bs = 16, .past = {90, 16}, .n_new = {1, 1}},
      {.nh = 4, .nkv = 2, .hd = 96, .bs = 16, .past = {70, 31}, .n_new = {1, 1}},
      {.nh = 5, .nkv = 1, .hd = 32, .bs = 16, .past = {130, 2}, .n_new = {1, 1}},
      {.nh = 12, .nkv = 2, .hd = 48, .bs = 16, .past = {100, 47}, .n_new = {1, 1}},
      {.nh = 7, .nkv = 1, .hd = 16, .bs = 16, .past = {64, 15}, .n_new = {1, 1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    attention_case(pool, &cases[i], avx2, false, false);
    if (avx2) attention_case(pool, &cases[i], true, true, false);  // f16 K/V need F16C
    if (avx512) attention_case(pool, &cases[i], true, true, true);
  }
}

// Matrix products for several weight types against double dot products of
// the reference-dequantized rows.
static void test_matmul(wk_pool *pool) {
  const int types[] = {WK_F32, WK_F16, WK_BF16, WK_Q8_0, WK_Q4_0, WK_Q4_1, WK_Q5_0,
                       WK_Q4_K, WK_Q5_K, WK_Q6_K};
  const int K = 512, N = 19;  // N not a multiple of the tile
  const int tokens[] = {1, 7};
  float *wf = falloc((size_t)K * N), *wd = falloc((size_t)K * N);
  float *x = falloc((size_t)K * 7), *y = falloc((size_t)N * 7);
  int nth = wk_pool_size(pool);
  float *scratch = falloc((size_t)nth * cpu_matmul_scratch(K));
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    int type = types[ti];
    size_t row = wk_row_size(type, K);
    unsigned char *wq = wk_malloc(row * N);
    WK_ASSERT(wq);
    fill(wf, (size_t)K * N, 1);
    fill(x, (size_t)K * 7, 1);
    int ok = 1;
    for (int r = 0; r < N && ok; r++) {
      ok = wk_quantize_row(type, wf + (size_t)r * K, wq + row * r, K) == WICK_OK &&
           wk_dequantize_row(type, wq + row * r, wd + (size_t)r * K, K) == WICK_OK;
    }
    CHECKF(ok, "quantize/dequantize type %s", wk_type_get(type)->name);
    wk_tensor w = {"w", wq, type, 2, {K, N, 1, 1}, row * N};
    for (int ni = 0; ni < 2; ni++) {
      int T = tokens[ni];
      poison(y, (size_t)N * 7);
      cpu_matmul(pool, scratch, cpu_matmul_scratch(K), &w, x, T, y);
      for (int t = 0; t < T; t++)
        for (int r = 0; r < N; r++) {
          double d = 0, mag = 0;
          for (int i = 0; i < K; i++) {
            d += (double)wd[(size_t)r * K + i] * x[(size_t)t * K + i];
            mag += fabs((double)wd[(size_t)r * K + i] * x[(size_t)t * K + i]);
          }
          double got = y[(size_t)t * N + r];
          if (!(fabs(got - d) <= 1e-6 * mag + 1e-30)) {
            CHECKF(0, "matmul %s T=%d y[%d][%d] = %.9g, expected %.9g", wk_type_get(type)->name,
                  T, t, r, got, d);
            t = T;
            break;
          }
        }
    }
    wk_free(wq);
  }
  float a[13], b[13];
  fill(a, 13, 1), fill(b, 13, 1);
  double d = 0;
  for (int i = 0; i < 13; i++) d += (double)a[i] * b[i];
  CHECKF(fabs(cpu_dot(a, b, 13) - d) < 1e-6, "cpu_dot tail");
  wk_free(wf), wk_free(wd), wk_free(x), wk_free(y), wk_free(scratch);
}

// The fast path: three matrices of different types sharing one input, run in
// one pass, against double products of the reference-dequantized weights
// (packed in 16-row groups where this CPU packs the type: cpu_mm_pack).
// Float weights keep f32 activations (1e-5 of the magnitude); quantized ones
// see 8-bit activations, so |error| <= sum_i |w_i| * amax(block of i) / 254
// (rounding to the nearest of 255 levels) plus f32 noise, and the rms error
// must look like rounding noise (well under the worst case).
static void test_mm_fast(wk_pool *pool) {
  const int sets[][3] = {{WK_Q4_K, WK_Q5_0, WK_Q8_0}, {WK_Q4_1, WK_Q6_K, WK_F16},
                         {WK_F32, WK_BF16, WK_Q4_0}, {WK_Q5_K, WK_Q3_K, WK_Q5_1},
                         {WK_FP8_E4M3, WK_FP8_E5M2, WK_IQ4_NL}, {WK_IQ4_XS, WK_Q2_K, WK_Q6_K}};
  const int K = 512, rows[3] = {19, 40, 77}, tokens[] = {1, 5, 37};
  enum { TMAX = 37 };
  if (wk_kernel_best_level() < WK_LEVEL_AVX2) {  // (models there take the exact path)
    printf("skipped: the fast-path products: no fast kernels below AVX2 (level %s)\n",
           wk_kernel_level_name(wk_kernel_best_level()));
    return;
  }
  const int nth = wk_pool_size(pool);
  float *x = falloc((size_t)K * TMAX), *scratch = falloc((size_t)nth * cpu_matmul_scratch(K));
  int n_packed = 0;
  for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
    cpu_act act = {0};
    cpu_mm mm[3];
    uint8_t *pk[3];  // the packed copies (cpu_mm_pack) and their sizes
    size_t pk_bytes[3];
    wk_tensor w[3];
    float *wd[3], *y[3];
    for (int i = 0; i < 3; i++) {
      const int type = sets[si][i], n = rows[i];
      size_t row = wk_row_size(type, K);
      unsigned char *wq = wk_malloc(row * (size_t)n);
      float *wf = falloc((size_t)K * n);
      wd[i] = falloc((size_t)K * n), y[i] = falloc((size_t)n * TMAX);
      fill(wf, (size_t)K * n, 1);
      for (int r = 0; r < n; r++) {
        WK_ASSERT(wk_quantize_row(type, wf + (size_t)r * K, wq + row * r, K) == WICK_OK);
        WK_ASSERT(wk_dequantize_row(type, wq + row * r, wd[i] + (size_t)r * K, K) == WICK_OK);
      }
      wk_free(wf);
      w[i] = (wk_tensor){"w", wq, type, 2, {K, n, 1, 1}, row * n};
      cpu_mm_plan(&mm[i], &w[i], false);
      CHECKF(mm[i].fast, "type %s has no kernel", wk_type_get(type)->name);
      cpu_act_reserve(&act, &mm[i], TMAX);
      uint64_t packed = 0;  // 16-row groups where this CPU packs the type (rows 19, 77: a tail)
      const size_t pb = cpu_mm_pack_size(&mm[i], false);
      pk[i] = pb ? wk_alloc_huge(pb) : NULL;
      WK_ASSERT(!pb || pk[i]);
      if (pb) cpu_mm_pack(&mm[i], pool, false, &packed, pk[i]);
      pk_bytes[i] = pb;
      n_packed += mm[i].packed_rows > 0;
    }
    uint64_t bytes = 0;
    WK_ASSERT(cpu_act_alloc(&act, &bytes) == WICK_OK);
    const cpu_mm *mp[3] = {&mm[0], &mm[1], &mm[2]};
    for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++) {
      const int T = tokens[ti];
      for (int t = 0; t < T; t++)  // a few large activations, as in real models
        for (int i = 0; i < K; i++) x[(size_t)t * K + i] = frand() * (i % 61 == t ? 20.0f : 1.0f);
      for (int i = 0; i < 3; i++) poison(y[i], (size_t)rows[i] * TMAX);
      cpu_act_set(&act, x, T, K);
      cpu_mm_run(pool, scratch, cpu_matmul_scratch(K), &act, mp, y, 3);
      for (int i = 0; i < 3; i++) {
        const int type = sets[si][i], act_fmt = mm[i].kr.act;
        const bool f32 = act_fmt == WK_ACT_F32 || act_fmt == WK_ACT_F32S;  // exact activations
        const int blk = act_fmt == WK_ACT_Q8K ? 256 : 32;
        int bad = 0;
        double e2 = 0, b2 = 0;
        for (int t = 0; t < T && !bad; t++)
          for (int r = 0; r < rows[i] && !bad; r++) {
            const float *wr = wd[i] + (size_t)r * K, *xt = x + (size_t)t * K;
            double d = 0, mag = 0, bound = 0;
            for (int b = 0; b < K; b += blk) {
              double amax = 0;
              for (int j = b; j < b + blk; j++) amax = fmax(amax, fabs(xt[j]));
              for (int j = b; j < b + blk; j++) {
                d += (double)wr[j] * xt[j];
                mag += fabs((double)wr[j] * xt[j]);
                bound += fabs(wr[j]) * amax / 254;
              }
            }
            double tol = (f32 ? 0 : bound * 1.01) + 1e-5 * mag;
            double got = y[i][(size_t)t * rows[i] + r];
            e2 += (got - d) * (got - d), b2 += tol * tol;
            if (!(fabs(got - d) <= tol)) {
              CHECKF(0, "fast matmul %s T=%d y[%d][%d] = %.7g, expected %.7g (tol %.3g)",
                    wk_type_get(type)->name, T, t, r, got, d, tol);
              bad = 1;
            }
          }
        // Rounding noise, not the worst case: its rms is ~0.04 of the bound's.
        const double rms_max = f32 ? 0.01 : 0.08;
        CHECKF(bad || sqrt(e2 / b2) <= rms_max, "fast matmul %s T=%d: rms error %.3g of the bound",
              wk_type_get(type)->name, T, sqrt(e2 / b2));
      }
    }
    for (int i = 0; i < 3; i++)
      cpu_mm_unpack(&mm[i]), wk_free_huge(pk[i], pk_bytes[i]), wk_free((void *)w[i].data),
          wk_free(wd[i]), wk_free(y[i]);
    cpu_act_free(&act);
  }
  if (!n_packed)
    printf("skipped: packed 16-row groups (none at level %s, or WICK_PACK16=0)\n",
           wk_kernel_level_name(wk_kernel_best_level()));
  wk_free(x), wk_free(scratch);
}

// The fused passes against the separate ops (each tested above): the residual
// step with its conversion, the GLU with its conversion, and Q/K/V post-
// processing into a paged cache.
static void test_fused(wk_pool *pool) {
  enum { T = 9, D = 256, F = 512, NH = 4, NKV = 2, HD = 64, BS = 4, NB = 4 };
  static float x[T * D], x2[T * D], add[T * D], add2[T * D], out[T * D], aw[D], w[D];
  fill(x, T * D, 2), fill(add, T * D, 1), fill(aw, D, 1), fill(w, D, 1);
  memcpy(x2, x, sizeof x), memcpy(add2, add, sizeof add);
  wk_tensor wt = {"w", NULL, WK_Q4_K, 2, {D, 8, 1, 1}, 0};
  cpu_mm mm;
  cpu_mm_plan(&mm, &wt, false);
  cpu_act act = {0};
  cpu_act_reserve(&act, &mm, T);
  wk_tensor wt2 = {"w2", NULL, WK_Q8_0, 2, {F, 8, 1, 1}, 0};
  cpu_mm mm2;
  cpu_mm_plan(&mm2, &wt2, false);
  cpu_act_reserve(&act, &mm2, T);
  uint64_t bytes = 0;
  WK_ASSERT(cpu_act_alloc(&act, &bytes) == WICK_OK);
  cpu_resid r = {.x = x, .add = add, .add_w = aw, .out = add, .w = w, .n_tokens = T, .d = D,
                 .eps = 1e-6f, .act = &act, .need = cpu_mm_need(&mm)};
  cpu_resid_norm(pool, &r);
  cpu_rmsnorm(add2, add2, aw, T, D, 1e-6f);
  cpu_add(x2, add2, T * D);
  cpu_rmsnorm(out, x2, w, T, D, 1e-6f);
  CHECKF(!memcmp(x, x2, sizeof x) && !memcmp(add, out, sizeof out), "resid_norm differs");
  CHECKF(act.ready == cpu_mm_need(&mm) && act.x == add, "resid_norm: act not ready");
  if (mm.fast) {  // the converted activations (no fast kernels below AVX2: none made)
    const int f = mm.kr.act;
    const size_t qrow = cpu_act_row_size(f, D);
    unsigned char *want = wk_malloc(qrow);
    int same = 1;
    for (int t = 0; t < T; t++) {
      mm.kr.quantize_act(out + t * D, want, D);
      same &= !memcmp(want, act.buf[f] + t * qrow, qrow);
    }
    CHECKF(same, "resid_norm: converted rows differ");
    wk_free(want);
  } else {
    printf("skipped: resid_norm's converted rows: no fast kernels at level %s\n",
           wk_kernel_level_name(wk_kernel_best_level()));
  }

  static float g[T * F], u[T * F], g2[T * F];
  fill(g, T * F, 3), fill(u, T * F, 1);
  memcpy(g2, g, sizeof g);
  cpu_glu(pool, false, true, g, u, T, F, &act, cpu_mm_need(&mm2));
  cpu_geglu_tanh(g2, u, T * F);
  double gmax = 0;
  for (int i = 0; i < T * F; i++) gmax = fmax(gmax, fabs(g[i] - g2[i]) / (1 + fabs(g2[i])));
  CHECKF(gmax < 1e-6 && act.x == g && act.ready == cpu_mm_need(&mm2), "glu differs: %g", gmax);
  cpu_act_free(&act);

  static float q[T * NH * HD], k[T * NKV * HD], v[T * NKV * HD], q2[T * NH * HD],
      k2[T * NKV * HD], v2[T * NKV * HD], bq[NH * HD], bk[NKV * HD], bv[NKV * HD], qn[HD],
      kn[HD], kc[NB * BS * NKV * HD], vc[NB * BS * NKV * HD];
  fill(q, T * NH * HD, 1), fill(k, T * NKV * HD, 1), fill(v, T * NKV * HD, 1);
  fill(bq, NH * HD, 1), fill(bk, NKV * HD, 1), fill(bv, NKV * HD, 1), fill(qn, HD, 1);
  fill(kn, HD, 1);
  memcpy(q2, q, sizeof q), memcpy(k2, k, sizeof k), memcpy(v2, v, sizeof v);
  poison(kc, NB * BS * NKV * HD), poison(vc, NB * BS * NKV * HD);
  double freqs[HD / 2];
  cpu_rope_freqs(freqs, HD, 10000, 1, NULL);
  const int32_t blocks[NB] = {2, 0, 3, 1};
  wk_seq seq = {blocks, NB, 3, T, 0};
  int32_t tok_seq[T], tok_pos[T];
  for (int t = 0; t < T; t++) tok_seq[t] = 0, tok_pos[t] = 3 + t;
  cpu_qkv p = {.q = q, .k = k, .v = v, .bq = bq, .bk = bk, .bv = bv, .q_norm = qn,
               .k_norm = kn, .eps = 1e-6f, .rope = {HD, HD, true, freqs}, .n_heads = NH,
               .n_kv_heads = NKV, .k_cache = kc, .v_cache = vc, .seqs = &seq,
               .tok_seq = tok_seq, .tok_pos = tok_pos, .n_tokens = T, .block_size = BS};
  cpu_qkv_post(pool, &p);
  cpu_add_bias(q2, bq, T, NH * HD), cpu_add_bias(k2, bk, T, NKV * HD);
  cpu_add_bias(v2, bv, T, NKV * HD);
  cpu_rmsnorm(q2, q2, qn, T * NH, HD, 1e-6f), cpu_rmsnorm(k2, k2, kn, T * NKV, HD, 1e-6f);
  cpu_rope_apply(&p.rope, q2, NH, k2, NKV, T, tok_pos);
  CHECKF(!memcmp(q, q2, sizeof q) && !memcmp(k, k2, sizeof k), "qkv_post: q or k differs");
  int stored = 1;  // at [block][kv head][row of the block][HD] (cpu_ctx.h)
  for (int t = 0; t < T; t++)
    for (int h = 0; h < NKV; h++) {
      const int pos = 3 + t;
      const size_t at = (((size_t)blocks[pos / BS] * NKV + h) * BS + pos % BS) * HD;
      stored &= !memcmp(kc + at, k2 + (t * NKV + h) * HD, HD * sizeof(float));
      stored &= !memcmp(vc + at, v2 + (t * NKV + h) * HD, HD * sizeof(float));
    }
  CHECKF(stored, "qkv_post: cache rows differ");
  for (int h = 0; h < NKV; h++)  // each head's row of position 0 (not in the batch)
    CHECKF(isnan(kc[((size_t)blocks[0] * NKV + h) * BS * HD]), "qkv_post wrote position 0");
}

// The fast dequantizers must equal the reference bit for bit.
static void test_dequant(void) {
  const int types[] = {WK_F32, WK_F16, WK_BF16, WK_Q4_0, WK_Q4_1, WK_Q5_0, WK_Q5_1,
                       WK_Q8_0, WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_Q3_K};
  enum { K = 1024 };
  float *x = falloc(K), *a = falloc(K), *b = falloc(K);
  for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
    int type = types[ti];
    unsigned char *q = wk_malloc(wk_row_size(type, K));
    WK_ASSERT(q);
    for (int i = 0; i < K; i++) x[i] = frand() * (i % 97 == 0 ? 40.0f : 1.0f) + 0.3f;
    WK_ASSERT(wk_quantize_row(type, x, q, K) == WICK_OK);
    poison(a, K), poison(b, K);
    int rc1 = wk_dequantize_row(type, q, a, K), rc2 = cpu_dequant_row(type, q, b, K);
    CHECKF(rc1 == WICK_OK && rc2 == WICK_OK, "dequant %s: %d %d", wk_type_get(type)->name, rc1,
          rc2);
    CHECKF(!memcmp(a, b, K * sizeof(float)), "dequant %s differs from the reference",
          wk_type_get(type)->name);
    wk_free(q);
  }
  wk_free(x), wk_free(a), wk_free(b);
}

int main(void) {
  test_dequant();
  wk_pool *pool = wk_pool_create(3);
  WK_ASSERT(pool);
  test_rmsnorm();
  test_act(pool);
  test_act(NULL);
  test_rope();
  const bool avx2 = wk_kernel_best_level() >= WK_LEVEL_AVX2;
  const bool avx512 = wk_kernel_best_level() >= WK_LEVEL_AVX512BW;
  test_attention(pool, false, false);
  test_attention(NULL, avx2, avx512);
  if (avx2) test_attention(pool, true, avx512);
  wk_pool *pool2 = wk_pool_create(2);  // decode splits of two threads
  WK_ASSERT(pool2);
  if (avx2) test_attention(pool2, true, avx512);
  wk_pool_destroy(pool2);
  test_matmul(pool);
  test_matmul(NULL);
  test_mm_fast(pool);
  test_mm_fast(NULL);
  test_fused(pool);
  test_fused(NULL);
  wk_pool_destroy(pool);
  if (g_failures) {
    fprintf(stderr, "test_cpu_ops: %d failures\n", g_failures);
    return 1;
  }
  printf("test_cpu_ops: ok\n");
  return 0;
}
