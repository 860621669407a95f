// CPU backend ops against straightforward double-precision implementations
// on random inputs; every output buffer is poisoned with NaN first.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/dequant.h"
#include "backend/cpu/matmul.h"
#include "base/alloc.h"
#include "base/pool.h"
#include "quant/quant.h"
#include "quant/types.h"

static int g_fail;
#define CHECK(c, ...)                                          \
  do {                                                         \
    if (!(c)) {                                                \
      g_fail++;                                                \
      fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);    \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
    }                                                          \
  } while (0)

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
      CHECK(0, "%s[%zu] = %.9g, expected %.9g", what, i, got[i], want[i]);
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

static void test_act(void) {
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
// double-precision computation.
static void test_attention(wk_pool *pool) {
  enum { NH = 4, NKV = 2, HD = 8, BS = 4, NB = 8, PAST = 6, NEW = 5, LEN = PAST + NEW };
  const int kv_dim = NKV * HD;
  const int32_t blocks[3] = {5, 0, 6};  // positions 0-3 in block 5, 4-7 in 0, 8-10 in 6
  float *kc = falloc(NB * BS * kv_dim), *vc = falloc(NB * BS * kv_dim);
  float kk[LEN * NKV * HD], vv[LEN * NKV * HD], q[NEW * NH * HD], out[NEW * NH * HD];
  poison(kc, NB * BS * kv_dim), poison(vc, NB * BS * kv_dim);  // unused slots must stay unread
  fill(kk, sizeof kk / 4, 1.5f), fill(vv, sizeof vv / 4, 1), fill(q, sizeof q / 4, 1.5f);
  for (int p = 0; p < LEN; p++) {
    size_t slot = (size_t)blocks[p / BS] * BS + p % BS;
    memcpy(kc + slot * kv_dim, kk + p * kv_dim, kv_dim * sizeof(float));
    memcpy(vc + slot * kv_dim, vv + p * kv_dim, kv_dim * sizeof(float));
  }
  wk_seq seq = {blocks, 3, PAST, NEW, 0};
  int32_t tok_seq[NEW], tok_pos[NEW];
  for (int t = 0; t < NEW; t++) tok_seq[t] = 0, tok_pos[t] = PAST + t;
  int nth = wk_pool_size(pool);
  float *scratch = falloc((size_t)nth * LEN);
  const int windows[] = {0, 3, 1};
  const float caps[] = {0, 0, 2.5f};
  for (int v = 0; v < 3; v++) {
    const float scale = 0.35f;
    cpu_attn a = {.q = q, .out = out, .k_cache = kc, .v_cache = vc, .seqs = &seq,
                  .tok_seq = tok_seq, .tok_pos = tok_pos, .n_tokens = NEW, .n_heads = NH,
                  .n_kv_heads = NKV, .head_dim = HD, .block_size = BS, .window = windows[v],
                  .scale = scale, .softcap = caps[v], .scratch = scratch,
                  .scratch_per_thread = LEN};
    poison(out, sizeof out / 4);
    cpu_attention(pool, &a);
    double want[NEW * NH * HD];
    for (int t = 0; t < NEW; t++)
      for (int h = 0; h < NH; h++) {
        int p = PAST + t, g = h / (NH / NKV);
        double sc[LEN], mx = -1e300, sum = 0;
        int lo = windows[v] ? p - windows[v] + 1 : 0;
        if (lo < 0) lo = 0;
        for (int j = lo; j <= p; j++) {
          double d = 0;
          for (int i = 0; i < HD; i++)
            d += (double)q[(t * NH + h) * HD + i] * kk[(j * NKV + g) * HD + i];
          d *= scale;
          if (caps[v] > 0) d = caps[v] * tanh(d / caps[v]);
          sc[j] = d;
          if (d > mx) mx = d;
        }
        for (int j = lo; j <= p; j++) sum += sc[j] = exp(sc[j] - mx);
        for (int i = 0; i < HD; i++) {
          double o = 0;
          for (int j = lo; j <= p; j++) o += sc[j] / sum * vv[(j * NKV + g) * HD + i];
          want[(t * NH + h) * HD + i] = o;
        }
      }
    char name[32];
    snprintf(name, sizeof name, "attention v%d", v);
    close_all(name, out, want, NEW * NH * HD, 2e-6);
  }
  wk_free(kc), wk_free(vc), wk_free(scratch);
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
    CHECK(ok, "quantize/dequantize type %s", wk_type_get(type)->name);
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
            CHECK(0, "matmul %s T=%d y[%d][%d] = %.9g, expected %.9g", wk_type_get(type)->name,
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
  CHECK(fabs(cpu_dot(a, b, 13) - d) < 1e-6, "cpu_dot tail");
  wk_free(wf), wk_free(wd), wk_free(x), wk_free(y), wk_free(scratch);
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
    CHECK(rc1 == WICK_OK && rc2 == WICK_OK, "dequant %s: %d %d", wk_type_get(type)->name, rc1,
          rc2);
    CHECK(!memcmp(a, b, K * sizeof(float)), "dequant %s differs from the reference",
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
  test_act();
  test_rope();
  test_attention(pool);
  test_attention(NULL);
  test_matmul(pool);
  test_matmul(NULL);
  wk_pool_destroy(pool);
  if (g_fail) {
    fprintf(stderr, "test_cpu_ops: %d failures\n", g_fail);
    return 1;
  }
  printf("test_cpu_ops: ok\n");
  return 0;
}
