// The CUDA decode attention with its Q/K/V epilogue (bias, per-head QK
// RMSNorm, RoPE, the new K/V row into the paged f16 cache) against a
// double-precision reference of the whole step written here from the model
// math (the CPU backend's order: bias, norm, rotation; src/backend/cpu/
// rope.c, norm.c, attention.c), on fresh random inputs with NaN-poisoned
// outputs. Model-like shapes (Llama, Qwen2, Qwen3, Gemma 2/3, partial RoPE),
// one and three sequences of different lengths, the epilogue inside the
// decode kernel and as its own launch. Without a CUDA device it prints
// "skipped: no CUDA device" and passes.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "base/fp.h"
#include "quant/types.h"
#ifdef WICK_HAVE_CUDA
#include "backend/cuda/cuda_test.h"
#endif
#include "test_cuda_skip.h"

#ifdef WICK_HAVE_CUDA
#define CUDA_TEST_SEED 0x9e3779b97f4a7c15ull  // not the other CUDA test's seed
#include "test_cuda_check.h"

// A model's attention layer, as the backend receives it.
typedef struct mcase {
  const char *name;
  int nh, nkv, hd, rope_dim, neox;
  double base;     // RoPE base
  int freq_div;    // 1: frequencies divided by a Llama-3-like rope_freqs table
  int bias;        // Q/K/V biases (Qwen2)
  int qk_norm;     // per-head RMSNorm of Q and K (Qwen3, Gemma 3)
  double qscalar;  // scale = qscalar^-1/2 (0: head_dim)
  float softcap;
  int window, block_size;
} mcase;

static const mcase k_models[] = {
    // llama: wick's llama rotates adjacent pairs (GGUF's permuted rows), the others halves
    {"llama", 32, 8, 128, 128, 0, 500000, 1, 0, 0, 0, 0, 0, 16},
    {"llama-neox", 32, 8, 128, 128, 1, 500000, 0, 0, 0, 0, 0, 0, 16},
    {"qwen2", 28, 4, 128, 128, 1, 1000000, 0, 1, 0, 0, 0, 0, 16},
    {"qwen3", 32, 4, 128, 128, 1, 1000000, 0, 0, 1, 0, 0, 0, 16},
    {"gemma3-local", 8, 4, 256, 256, 1, 10000, 0, 0, 1, 168, 0, 1024, 16},
    {"gemma3-global", 8, 4, 256, 256, 1, 1000000, 0, 0, 1, 168, 0, 0, 16},
    {"gemma3-270m", 4, 1, 256, 256, 1, 10000, 0, 0, 1, 256, 0, 100, 32},
    {"gemma2", 16, 8, 256, 256, 1, 10000, 0, 0, 0, 144, 50.0f, 4096, 16},
    {"partial-neox", 64, 4, 64, 32, 1, 10000, 0, 1, 1, 0, 0, 0, 16},
    {"partial-pairs", 32, 2, 192, 64, 0, 10000, 0, 1, 0, 0, 0, 0, 64},
};

static float f16r(float v) { return wk_f16_to_f32(wk_f32_to_f16(v)); }

// One head's epilogue in double, in place: + bias, RMSNorm with weight nw,
// RoPE of the first rope_dim values at position p.
static void head_post_ref(double *x, int hd, const float *bias, const float *nw, double eps,
                          const double *inv_freq, int rope_dim, int neox, int p) {
  if (bias)
    for (int i = 0; i < hd; i++) x[i] += bias[i];
  if (nw) {
    double ss = 0;
    for (int i = 0; i < hd; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / hd + eps);
    for (int i = 0; i < hd; i++) x[i] *= r * nw[i];
  }
  int half = rope_dim / 2;
  for (int f = 0; f < half; f++) {
    int ia = neox ? f : 2 * f, ib = neox ? f + half : 2 * f + 1;
    double th = p * inv_freq[f], c = cos(th), s = sin(th), a = x[ia], b = x[ib];
    x[ia] = a * c - b * s, x[ib] = a * s + b * c;
  }
}

// Inputs of one run, host side.
typedef struct inputs {
  float *q, *k, *v, *kp, *vp;  // raw new rows; finished earlier rows (f16 values)
  float *bq, *bk, *bv, *qn, *kn;
  double *freq;
  int32_t *blocks;
  int n_pool;
} inputs;

static void make_inputs(const mcase *mc, int ns, const int32_t *ctx, inputs *in) {
  size_t qd = (size_t)mc->nh * mc->hd, kvd = (size_t)mc->nkv * mc->hd, past = 0;
  int nb = 0;
  for (int i = 0; i < ns; i++)
    past += (size_t)ctx[i] - 1, nb += (ctx[i] + mc->block_size - 1) / mc->block_size;
  memset(in, 0, sizeof *in);
  in->q = wk_malloc(sizeof(float) * ns * qd);
  in->k = wk_malloc(sizeof(float) * ns * kvd);
  in->v = wk_malloc(sizeof(float) * ns * kvd);
  in->kp = wk_malloc(sizeof(float) * (past ? past : 1) * kvd);
  in->vp = wk_malloc(sizeof(float) * (past ? past : 1) * kvd);
  // With QK-norm the raw rows' scale is far from 1 and differs by head.
  for (size_t i = 0; i < ns * qd; i++)
    in->q[i] = nrand() * (float)(mc->qk_norm ? 0.2 + 6.0 * ((i / mc->hd) % 5) : 1.0);
  for (size_t i = 0; i < ns * kvd; i++)
    in->k[i] = nrand() * (float)(mc->qk_norm ? 0.3 + 4.0 * ((i / mc->hd) % 3) : 1.0),
    in->v[i] = nrand();
  // Earlier rows f16 values, so that the cache holds them exactly.
  for (size_t i = 0; i < past * kvd; i++) in->kp[i] = f16r(nrand()), in->vp[i] = f16r(nrand());
  if (mc->bias) {
    in->bq = wk_malloc(sizeof(float) * qd);
    in->bk = wk_malloc(sizeof(float) * kvd);
    in->bv = wk_malloc(sizeof(float) * kvd);
    for (size_t i = 0; i < qd; i++) in->bq[i] = 0.5f * nrand();
    for (size_t i = 0; i < kvd; i++) in->bk[i] = 0.5f * nrand(), in->bv[i] = 0.5f * nrand();
  }
  if (mc->qk_norm) {
    in->qn = wk_malloc(sizeof(float) * mc->hd);
    in->kn = wk_malloc(sizeof(float) * mc->hd);
    for (int i = 0; i < mc->hd; i++)
      in->qn[i] = (float)(0.3 + 1.4 * urand()), in->kn[i] = (float)(0.3 + 1.4 * urand());
  }
  int half = mc->rope_dim / 2;
  in->freq = wk_malloc(sizeof(double) * (half ? half : 1));
  for (int i = 0; i < half; i++) {
    in->freq[i] = pow(mc->base, -2.0 * i / mc->rope_dim);
    if (mc->freq_div) in->freq[i] /= 1.0 + 7.0 * i / (half - 1);  // low frequencies slowed
  }
  // Each sequence's blocks: a random choice of distinct blocks of the pool.
  in->n_pool = nb + 5;
  int32_t *perm = wk_malloc(sizeof(int32_t) * in->n_pool);
  for (int i = 0; i < in->n_pool; i++) perm[i] = i;
  for (int i = in->n_pool - 1; i > 0; i--) {
    int j = (int)(urand() * (i + 1)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  in->blocks = wk_malloc(sizeof(int32_t) * (nb ? nb : 1));
  memcpy(in->blocks, perm, sizeof(int32_t) * nb);
  wk_free(perm);
}

static void free_inputs(inputs *in) {
  float *f[10] = {in->q, in->k, in->v, in->kp, in->vp, in->bq, in->bk, in->bv, in->qn, in->kn};
  for (int i = 0; i < 10; i++) wk_free(f[i]);
  wk_free(in->freq), wk_free(in->blocks);
}

// Worst errors of one sequence against the reference: *cache_err in units of
// the cache rows' bound (f16 rounding), *out_err absolute over max(1, |ref|).
// The attention reference takes the new K/V row from the device once it is
// within the bound of the f64 row: the kernel may round a value next to an
// f16 midpoint either way, and one such flip in V moves the output by an f16
// step (2^-10 |v|) times the new key's weight (all of it when it is the only key).
static void check_seq(const mcase *mc, const inputs *in, float eps, float scale, int t,
                      const int32_t *ctx, size_t past0, const float *out, const float *k_new,
                      const float *v_new, double *cache_err, double *out_err) {
  const int hd = mc->hd, nh = mc->nh, nkv = mc->nkv, g = nh / nkv, p = ctx[t] - 1;
  const size_t kvd = (size_t)nkv * hd;
  const int lo = mc->window > 0 && p - mc->window + 1 > 0 ? p - mc->window + 1 : 0;
  double *x = wk_malloc(sizeof(double) * hd), *sc = wk_malloc(sizeof(double) * (p + 1));
  const float *kn_t = k_new + t * kvd, *vn_t = v_new + t * kvd;
  for (int h = 0; h < nkv; h++) {  // the cache rows
    for (int kv = 0; kv < 2; kv++) {
      const float *raw = (kv ? in->v : in->k) + t * kvd + (size_t)h * hd;
      const float *bias = kv ? in->bv : in->bk;
      for (int i = 0; i < hd; i++) x[i] = raw[i];
      if (kv) {
        for (int i = 0; bias && i < hd; i++) x[i] += bias[h * hd + i];
      } else {
        head_post_ref(x, hd, bias ? bias + h * hd : NULL, in->kn, eps, in->freq, mc->rope_dim,
                      mc->neox, p);
      }
      double big = 0;
      for (int i = 0; i < hd; i++) big = fabs(x[i]) > big ? fabs(x[i]) : big;
      const float *got = (kv ? vn_t : kn_t) + (size_t)h * hd;
      for (int i = 0; i < hd; i++) {
        double e = fabs(got[i] - x[i]) / (ldexp(fabs(x[i]), -10) + 1e-6 * (1 + big));
        if (!(e <= *cache_err)) *cache_err = isnan(e) ? INFINITY : e;
      }
    }
  }
  for (int h = 0; h < nh; h++) {
    int kvh = h / g;
    for (int i = 0; i < hd; i++) x[i] = in->q[((size_t)t * nh + h) * hd + i];
    head_post_ref(x, hd, in->bq ? in->bq + (size_t)h * hd : NULL, in->qn, eps, in->freq,
                  mc->rope_dim, mc->neox, p);
    double mx = -INFINITY, sum = 0;
    for (int j = lo; j <= p; j++) {
      const float *kr = j < p ? in->kp + (past0 + j) * kvd + (size_t)kvh * hd
                              : kn_t + (size_t)kvh * hd;
      double s = 0;
      for (int d = 0; d < hd; d++) s += x[d] * kr[d];
      s *= scale;
      if (mc->softcap > 0) s = mc->softcap * tanh(s / mc->softcap);
      sc[j] = s;
      if (s > mx) mx = s;
    }
    for (int j = lo; j <= p; j++) sc[j] = exp(sc[j] - mx), sum += sc[j];
    for (int d = 0; d < hd; d++) {
      double o = 0;
      for (int j = lo; j <= p; j++) {
        o += sc[j] * (j < p ? in->vp[(past0 + j) * kvd + (size_t)kvh * hd + d]
                            : vn_t[(size_t)kvh * hd + d]);
      }
      o /= sum;
      double e = fabs(out[((size_t)t * nh + h) * hd + d] - o) / (fabs(o) > 1 ? fabs(o) : 1);
      if (!(e <= *out_err)) *out_err = isnan(e) ? INFINITY : e;
    }
  }
  wk_free(x), wk_free(sc);
}

static const char *k_paths[] = {"in-kernel", "apart", "in-kernel+combine"};

// ns sequences of ctx[i] keys (the new one included); splits 0: the backend's
// choice; path and graph as in cuda_test_attn_post.
static void test_post(const mcase *mc, int ns, const int32_t *ctx, int splits, int path,
                      int graph) {
  inputs in;
  make_inputs(mc, ns, ctx, &in);
  const float eps = 1e-6f;
  const float scale = (float)(1.0 / sqrt(mc->qscalar > 0 ? mc->qscalar : (double)mc->hd));
  cuda_test_attn_post a = {0};
  a.n_heads = mc->nh, a.n_kv = mc->nkv, a.hd = mc->hd;
  a.rope_dim = mc->rope_dim, a.rope_neox = mc->neox, a.inv_freq = in.freq;
  a.bq = in.bq, a.bk = in.bk, a.bv = in.bv, a.q_norm = in.qn, a.k_norm = in.kn, a.eps = eps;
  a.scale = scale, a.softcap = mc->softcap, a.window = mc->window;
  a.block_size = mc->block_size, a.n_pool = in.n_pool;
  a.n_seqs = ns, a.n_ctx = ctx, a.blocks = in.blocks;
  a.splits = splits, a.path = path, a.graph = graph;
  size_t qd = (size_t)mc->nh * mc->hd, kvd = (size_t)mc->nkv * mc->hd;
  float *out = wk_malloc(sizeof(float) * ns * qd);
  float *k_new = wk_malloc(sizeof(float) * ns * kvd), *v_new = wk_malloc(sizeof(float) * ns * kvd);
  wk_error err = {{0}};
  int used = 0;
  int st = cuda_test_attention_post(&a, in.q, in.k, in.v, in.kp, in.vp, out, k_new, v_new, &used,
                                    &err);
  char ctxs[64] = "";
  for (int i = 0, o = 0; i < ns && o < (int)sizeof ctxs - 8; i++)
    o += snprintf(ctxs + o, sizeof ctxs - o, i ? ",%d" : "%d", ctx[i]);
  CHECK(st == WICK_OK, "attention post %s %s ctx %s: %s", mc->name, k_paths[path], ctxs, err.msg);
  double cache_err = 0, out_err = 0;
  size_t past0 = 0;
  for (int t = 0; t < ns && st == WICK_OK; t++) {
    check_seq(mc, &in, eps, scale, t, ctx, past0, out, k_new, v_new, &cache_err, &out_err);
    past0 += (size_t)ctx[t] - 1;
  }
  if (st == WICK_OK) {
    // The decode kernel at head dim 64 and 128 (groups up to 16) is the
    // tensor-core one: q and p rounded to f16 as in the prefill's flash
    // kernel, so its output is held to that kernel's 2e-3; the f32 kernels
    // (the other head dims) to 2e-4.
    const double tol = (mc->hd == 64 || mc->hd == 128) && mc->nh / mc->nkv <= 16 ? 2e-3 : 2e-4;
    CHECK(cache_err <= 1.0 && out_err < tol,
          "attention post %s %s%s ctx %s splits %d: cache rows %.3g of the bound, output %.3g",
          mc->name, k_paths[path], graph ? " graph" : "", ctxs, used, cache_err, out_err);
    printf("attn post %-13s %-17s%s ctx %-12s splits %2d: cache %.2f of the bound, output %.2e\n",
           mc->name, k_paths[path], graph ? " graph" : "      ", ctxs, used, cache_err, out_err);
  }
  wk_free(out), wk_free(k_new), wk_free(v_new);
  free_inputs(&in);
}
#endif

int main(void) {
  if (cuda_absent()) return 0;
#ifdef WICK_HAVE_CUDA
  // Lengths over one and many cache blocks and key splits; the new key at
  // position 0, at a block's first slot (16) and a key tile's first row (32).
  static const int32_t one[] = {4100}, three[] = {16, 300, 4100}, edge[] = {1, 17, 33};
  static const int32_t eight[] = {5, 64, 65, 129, 700, 1024, 2049, 3000};
  const int nm = (int)(sizeof k_models / sizeof k_models[0]);
  for (int i = 0; i < nm; i++) {
    const mcase *mc = &k_models[i];
    test_post(mc, 1, one, 0, 0, 0);
    test_post(mc, 3, three, 0, 0, 0);
    test_post(mc, 3, three, 0, 1, 0);
    test_post(mc, 3, edge, 0, 0, 0);
  }
  // The combine launch instead of the in-kernel merge, forced splits (more
  // than a short sequence has keys), CUDA graphs (as decode runs), the
  // separate epilogue with one sequence, a batch of eight sequences.
  for (int i = 0; i < nm; i += 3) {
    const mcase *mc = &k_models[i];
    test_post(mc, 8, eight, 0, 0, 0);
    test_post(mc, 3, three, 0, 2, 0);
    test_post(mc, 3, three, 64, 0, 0);
    test_post(mc, 3, edge, 8, 1, 0);
    test_post(mc, 3, three, 0, 0, 1);
    test_post(mc, 3, three, 0, 1, 1);
    test_post(mc, 1, one, 0, 1, 0);
  }
  if (g_fail) {
    printf("%d checks failed\n", g_fail);
    return 1;
  }
  printf("all CUDA attention epilogue checks passed\n");
  return 0;
#else
  return 0;
#endif
}
