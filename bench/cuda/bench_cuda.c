// CUDA benchmarks (built by bench/cuda/session.sh against the project's static
// libraries): machine ceilings, matrix-vector bandwidth per weight type, and
// prefill/decode speed of a whole model through the backend contract.
//   bench_cuda ceil
//   bench_cuda matvec COPY_GBPS [TYPES]  (TYPES: names joined by commas; default all)
//   bench_cuda sweep COPY_GBPS          (shapes of the streamed matrix-vector kernel)
//   bench_cuda dequant COPY_GBPS        (the GEMM path's dequantization to f16)
//   bench_cuda rows COPY_GBPS           (the register kernel by row count, 4096 columns)
//   bench_cuda mvone TYPE [PATH]        (one plain launch per shape, for ncu; PATH as
//                                        cuda_test_matmul's, default 0)
//   bench_cuda model FILE [prefill_tokens [chunk [decode_steps]]]
//   bench_cuda batch FILE [ctx [steps [B...]]]  (decode steps of B sequences at once)
// Lines starting "RESULT" are for scripts; the rest is a readable table.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_test.h"
#include "base/alloc.h"
#include "base/pool.h"
#include "base/timer.h"
#include "format/gguf.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "stamps.h"

typedef struct qjob {
  int type;
  int64_t rows, cols;
  uint8_t *dst;
} qjob;

static void quant_fn(void *ctx, int ith, int nth) {
  qjob *j = ctx;
  long lo, hi;
  wk_split((long)j->rows, ith, nth, 1, &lo, &hi);
  float *row = wk_malloc(sizeof(float) * j->cols);
  size_t rb = wk_row_size(j->type, j->cols);
  for (long r = lo; r < hi; r++) {
    uint64_t z = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1);
    for (int64_t c = 0; c < j->cols; c++) {
      z ^= z << 13, z ^= z >> 7, z ^= z << 17;
      row[c] = 0.02f * (float)((int64_t)(z >> 40) - (1 << 23)) / (float)(1 << 23);
    }
    WK_ASSERT(wk_quantize_row(j->type, row, j->dst + rb * r, j->cols) == WICK_OK);
  }
  wk_free(row);
}

static uint8_t *make_weights(wk_pool *pool, int t, int64_t rows, int64_t cols) {
  uint8_t *w = wk_malloc(wk_row_size(t, cols) * rows);
  qjob j = {t, rows, cols, w};
  wk_pool_run(pool, quant_fn, &j);
  return w;
}

// Times cfg[0..n) at both shapes (4096 x 14336, 14336 x 4096): us[2 i + s].
static int time_cfgs(int t, const uint8_t *w, const cuda_mv_cfg *cfg, int n, int iters, double *us) {
  const int A = 4096, B = 14336;
  double tmp[32];
  wk_error err = {{0}};
  for (int s = 0; s < 2; s++) {
    if (cuda_bench_matvec(t, w, s ? B : A, s ? A : B, iters, cfg, n, tmp, &err) != WICK_OK) {
      printf("FAIL: %s\n", err.msg);
      return 1;
    }
    for (int i = 0; i < n; i++) us[2 * i + s] = tmp[i];
  }
  return 0;
}

// One table row (and its RESULT line, tagged `what`) of a timing at both
// shapes: us[0] at 4096x14336, us[1] at 14336x4096, `bytes` moved by each.
static void print_row(const char *what, int t, const char *suffix, double bytes, const double *us,
                      double copy_gbps) {
  double g0 = bytes / us[0] / 1e3, g1 = bytes / us[1] / 1e3;
  char name[32];
  snprintf(name, sizeof name, "%s%s", wk_type_get(t)->name, suffix);
  printf("%-16s %10.1f MB %8.1f %8.0f %5.0f%%   %10.1f MB %8.1f %8.0f %5.0f%%\n", name,
         bytes / 1e6, us[0], g0, 100 * g0 / copy_gbps, bytes / 1e6, us[1], g1,
         100 * g1 / copy_gbps);
  printf("RESULT %s %s %.1f %.1f %.1f %.1f\n", what, name, us[0], g0, us[1], g1);
}

// Whether name is one of the comma-separated names of list.
static int bench_matvec(double copy_gbps, const char *only) {
  static const int types[] = {WK_F32,  WK_F16,  WK_BF16, WK_Q4_0,   WK_Q4_1,   WK_Q5_0,
                              WK_Q5_1, WK_Q8_0, WK_Q2_K, WK_Q3_K,   WK_Q4_K,   WK_Q5_K,
                              WK_Q6_K, WK_IQ4_NL, WK_IQ4_XS, WK_FP8_E4M3, WK_FP8_E5M2};
  // The default kernels (int8 x, v5, for the quantized types; v4 for the
  // others), f32 x (v4; quantized types), the streamed kernel, and the same
  // with programmatic dependent launch between the timed launches; the
  // register-streamed kernel (its types only), with dependent launch, and
  // at its other (threads, rows a step, items in flight) shapes; its wide
  // format (4 lanes a super-block: Q4_K, Q5_K), without and with dependent
  // launch, and at its other shape (mvr_w4_cfg's ALT); FP8 E4M3 in 16-byte
  // pieces (mvr_fp8w.cuh) with dependent launch; the register kernel with
  // dependent launch at 1 item in flight, and (FP8 only) 2, 3 and 5; the
  // tensor-core kernel (mvt.cuh: Q4_K) at its shape and at 256 threads.
  static const cuda_mv_cfg cfg[] = {{0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {2, 0, 0, 0, 0},
                                    {2, 1, 0, 0, 0}, {4, 0, 0, 0, 0}, {4, 1, 0, 0, 0},
                                    {4, 0, 1, 0, 0}, {4, 0, 2, 0, 0}, {4, 0, 3, 0, 0},
                                    {4, 0, 4, 0, 0}, {4, 1, 4, 0, 0}, {4, 0, 5, 0, 0},
                                    {4, 1, 6, 0, 0}, {4, 1, 1, 0, 0}, {4, 1, 7, 0, 0},
                                    {4, 1, 8, 0, 0}, {4, 1, 9, 0, 0}, {4, 1, 10, 0, 0},
                                    {4, 1, 11, 0, 0}};
  static const char *cname[] = {"",     "/f32x",    "/stream",      "/stream+pdl",
                                "/reg", "/reg+pdl", "/reg 1024/1/1", "/reg 512/2/1",
                                "/reg 768/1/2", "/reg w4", "/reg w4+pdl", "/reg w4 alt",
                                "/reg fp8w+pdl", "/reg 1024/1/1+pdl", "/reg 1024/1/2+pdl",
                                "/reg 1024/1/3+pdl", "/reg 1024/1/5+pdl", "/tc+pdl",
                                "/tc 256+pdl"};
  enum { NC = sizeof cfg / sizeof cfg[0] };
  const int64_t A = 4096, B = 14336;
  wk_pool *pool = wk_pool_create((int)sysconf(_SC_NPROCESSORS_ONLN));
  printf("%-16s %13s %8s %8s %6s   %13s %8s %8s %6s\n", "type", "4096x14336", "us", "GB/s",
         "%bw", "14336x4096", "us", "GB/s", "%bw");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int t = types[i];
    if (only && !cuda_test_name_listed(only, wk_type_get(t)->name)) continue;
    size_t bytes = wk_row_size(t, B) * A;  // same bytes either shape
    uint8_t *w = make_weights(pool, t, A, B);
    int quant = t != WK_F32 && t != WK_F16 && t != WK_BF16 && t != WK_FP8_E4M3 && t != WK_FP8_E5M2;
    double us[2 * NC];
    if (time_cfgs(t, w, cfg, NC, 200, us)) return 1;
    for (int c = 0; c < NC; c++) {
      if ((c == 1 && !quant) || us[2 * c] <= 0 || us[2 * c + 1] <= 0) continue;
      print_row("matvec", t, cname[c], (double)bytes, us + 2 * c, copy_gbps);
    }
    fflush(stdout);
    wk_free(w);
  }
  wk_pool_destroy(pool);
  return 0;
}

// The GEMM path's dequantization of a whole matrix to f16 (what prefill
// runs before each cuBLAS product of a quantized or FP8 matrix): bytes read
// (the weights) plus written (2 a value) against the copy rate (read +
// written), at both shapes. The tiled kernel cu_dequant_f16 runs (first
// row of a type), at its other (threads, groups a thread) shapes, staged
// (raw blocks copied to shared memory first; the float types unstaged),
// and the row kernel it replaced ("/rows": one thread a group).
static int bench_dequant(double copy_gbps) {
  static const int types[] = {WK_F32,  WK_BF16, WK_Q4_0, WK_Q4_1, WK_Q5_0,     WK_Q5_1,
                              WK_Q8_0, WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_FP8_E4M3, WK_FP8_E5M2};
  static const cuda_mv_cfg cfg[] = {{5, 0, 0, 0, 0}, {5, 0, 1, 0, 0}, {5, 0, 2, 0, 0},
                                    {5, 0, 3, 0, 0}, {5, 0, 4, 0, 0}, {5, 0, 5, 0, 0},
                                    {6, 0, 0, 0, 0}};
  static const char *cname[] = {"", "/256x1", "/128x4", "/64x8", "/staged256x1", "/staged128x2",
                                "/rows"};
  enum { NC = sizeof cfg / sizeof cfg[0] };
  const int64_t A = 4096, B = 14336;
  wk_pool *pool = wk_pool_create((int)sysconf(_SC_NPROCESSORS_ONLN));
  printf("%-16s %13s %8s %8s %6s   %13s %8s %8s %6s\n", "dequant", "4096x14336", "us", "GB/s",
         "%bw", "14336x4096", "us", "GB/s", "%bw");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int t = types[i];
    double bytes = (double)wk_row_size(t, B) * A + 2.0 * A * B, us[2 * NC];
    uint8_t *w = make_weights(pool, t, A, B);
    if (time_cfgs(t, w, cfg, NC, 50, us)) return 1;
    for (int c = 0; c < NC; c++) {
      if (us[2 * c] > 0 && us[2 * c + 1] > 0)
        print_row("dequant", t, cname[c], bytes, us + 2 * c, copy_gbps);
    }
    fflush(stdout);
    wk_free(w);
  }
  wk_pool_destroy(pool);
  return 0;
}

// The streamed kernel's (threads, rows a warp) shapes and (chunk bytes,
// stages), without programmatic dependent launch.
static int bench_sweep(double copy_gbps) {
  static const int types[] = {WK_F16, WK_Q4_K, WK_Q6_K, WK_Q8_0, WK_FP8_E4M3};
  static const char *shape[] = {"256/2", "256/1", "128/4"};
  static const int opt[][2] = {{1024, 4}, {2048, 3}, {4096, 3}, {4096, 2}, {8192, 2}};
  enum { NS = 3, NO = 5 };
  const int64_t A = 4096, B = 14336;
  wk_pool *pool = wk_pool_create((int)sysconf(_SC_NPROCESSORS_ONLN));
  printf("sweep: %% of copy bandwidth, 4096x14336 / 14336x4096, by threads/rows a warp (rows) and "
         "chunk bytes x stages (columns)\n%-15s", "type shape");
  for (int o = 0; o < NO; o++) printf("   %4dx%d  ", opt[o][0], opt[o][1]);
  printf("\n");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int t = types[i];
    size_t bytes = wk_row_size(t, B) * A;
    uint8_t *w = make_weights(pool, t, A, B);
    for (int sh = 0; sh < NS; sh++) {
      cuda_mv_cfg cfg[NO];
      double us[2 * NO];
      for (int o = 0; o < NO; o++) cfg[o] = (cuda_mv_cfg){2, 0, sh, opt[o][0], opt[o][1]};
      if (time_cfgs(t, w, cfg, NO, 100, us)) return 1;
      printf("%-9s %-5s", wk_type_get(t)->name, shape[sh]);
      for (int o = 0; o < NO; o++) {
        if (us[2 * o] <= 0 || us[2 * o + 1] <= 0) {
          printf("   %4s/%-4s", "-", "-");
          continue;
        }
        printf("   %4.0f/%-4.0f", 100 * bytes / us[2 * o] / 1e3 / copy_gbps,
               100 * bytes / us[2 * o + 1] / 1e3 / copy_gbps);
      }
      printf("\n");
      fflush(stdout);
    }
    wk_free(w);
  }
  wk_pool_destroy(pool);
  return 0;
}

// Row counts against the one wave of 132 x 32 warps the register kernel
// spreads its rows over (cols 4096): 4224, 8448 and 12672 rows give every
// warp the same number of rows, the model's 4096, 6144 and 14336 do not; so
// the per-row-count rates show what the uneven last round costs.
static int bench_rows(double copy_gbps) {
  static const int types[] = {WK_F16, WK_Q8_0, WK_Q4_K, WK_Q5_K, WK_Q6_K, WK_FP8_E4M3};
  static const int64_t rows[] = {4096, 4224, 6144, 8448, 12672, 14336, 16896};
  static const cuda_mv_cfg cfg[] = {{4, 1, 0, 0, 0}, {4, 1, 4, 0, 0}, {4, 1, 6, 0, 0}};
  static const char *cname[] = {"reg+pdl", "w4+pdl", "fp8w+pdl"};
  enum { NR = sizeof rows / sizeof rows[0], NC = sizeof cfg / sizeof cfg[0] };
  const int64_t C = 4096;
  wk_pool *pool = wk_pool_create((int)sysconf(_SC_NPROCESSORS_ONLN));
  printf("rows x 4096, %% of the copy rate:\n%-20s", "type/kernel");
  for (int r = 0; r < NR; r++) printf(" %7lld", (long long)rows[r]);
  printf("\n");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int t = types[i];
    double pct[NC][NR];
    memset(pct, 0, sizeof pct);
    for (int r = 0; r < NR; r++) {
      uint8_t *w = make_weights(pool, t, rows[r], C);
      double us[NC];
      wk_error err = {{0}};
      if (cuda_bench_matvec(t, w, (int)rows[r], (int)C, 200, cfg, NC, us, &err) != WICK_OK) {
        printf("FAIL: %s\n", err.msg);
        return 1;
      }
      for (int c = 0; c < NC; c++)
        if (us[c] > 0)
          pct[c][r] = 100.0 * (double)wk_row_size(t, C) * rows[r] / us[c] / 1e3 / copy_gbps;
      wk_free(w);
    }
    for (int c = 0; c < NC; c++) {
      if (pct[c][0] <= 0) continue;
      char name[40];
      snprintf(name, sizeof name, "%s/%s", wk_type_get(t)->name, cname[c]);
      printf("%-20s", name);
      for (int r = 0; r < NR; r++) printf(" %6.1f%%", pct[c][r]);
      printf("\n");
      for (int r = 0; r < NR; r++)
        printf("RESULT rows %s %lld %.1f\n", name, (long long)rows[r], pct[c][r]);
    }
    fflush(stdout);
  }
  wk_pool_destroy(pool);
  return 0;
}

static int bench_mvone(const char *tname, int path) {
  int t = wk_type_from_name(tname);
  if (t < 0) return 2;
  wk_pool *pool = wk_pool_create((int)sysconf(_SC_NPROCESSORS_ONLN));
  const int64_t A = 4096, B = 14336;
  uint8_t *w = make_weights(pool, t, A, B);
  float *x = wk_malloc(sizeof(float) * B), *y = wk_malloc(sizeof(float) * B);
  for (int64_t i = 0; i < B; i++) x[i] = (float)(i % 97) / 97.0f - 0.5f;
  wk_error err = {{0}};
  for (int sh = 0; sh < 2; sh++)
    if (cuda_test_matmul(t, w, sh ? (int)B : (int)A, sh ? (int)A : (int)B, x, 1, y, path, &err)) {
      printf("FAIL: %s\n", err.msg);
      return 1;
    }
  printf("mvone %s done\n", tname);
  wk_free(w), wk_free(x), wk_free(y);
  wk_pool_destroy(pool);
  return 0;
}

static int argmax(const float *x, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[b]) b = i;
  return b;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int bench_model(const char *path, int n_prefill, int chunk, int n_decode) {
  gguf_file *f = NULL;
  wk_model m;
  wk_error err = {{0}};
  memset(&m, 0, sizeof m);
  double t0 = wk_now();
  if (gguf_open(&f, path, &err) || model_load(&m, f, &err)) {
    printf("FAIL: %s: %s\n", path, err.msg);
    return 1;
  }
  int bs = 16, nb = (n_prefill + n_decode + 1 + bs - 1) / bs;  // the KV cache: the context exactly
  wk_backend_params bp = {chunk, 1, 1, 1, 0, 0, {bs, nb}};
  wk_backend *b = backend_cuda_create();
  if (b->prepare(b, &m, &bp, &err)) {
    printf("FAIL: prepare: %s\n", err.msg);
    return 1;
  }
  double t_load = wk_now() - t0;
  uint64_t used = 0, total = 0;
  wk_backend_mem mem;
  b->memory(b, &mem);
  cuda_bench_mem_used(&used, &total);
  double wb = (double)mem.weights, kb = (double)mem.kv, sb = (double)mem.workspace;
  printf("model %s: load+upload %.1f s; weights %.2f GB (+%.2f GB in host memory), KV %.2f GB (%d tokens), workspace %.2f GB; device memory in use %.2f GB (of %.0f)\n",
         path, t_load, wb / 1e9, mem.weights_host / 1e9, kb / 1e9, nb * bs, sb / 1e9, used / 1e9, total / 1e9);
  printf("RESULT memory %.3f %.3f %.3f %.3f\n", wb / 1e9, kb / 1e9, sb / 1e9, used / 1e9);
  int32_t *blocks = wk_malloc(sizeof(int32_t) * nb), *toks = wk_malloc(sizeof(int32_t) * chunk);
  for (int i = 0; i < nb; i++) blocks[i] = i;
  float *lg = wk_malloc(sizeof(float) * m.vocab);
  int32_t at0 = 0;
  // Decode after a short prompt.
  double *dt = wk_malloc(sizeof(double) * (n_decode + 1));
  // Round -1, untimed: a first chunk of the timed prompt, so its kernels and
  // cuBLAS are loaded (the 16-token prompt of round 0 may take other
  // kernels: the fused batch kernel for Q4_K_M).
  for (int round = -1; round < 2; round++) {
    int past = 0, p0 = round == 0 ? 16 : n_prefill;
    if (round < 0 && chunk < n_prefill) p0 = chunk;
    double tp = wk_now();
    while (past < p0) {  // prompt
      int c = p0 - past < chunk ? p0 - past : chunk;
      for (int i = 0; i < c; i++) toks[i] = (int32_t)((past + i) * 7919 % m.vocab);
      int32_t last = c - 1;
      wk_seq s = {blocks, nb, past, c, 0};
      wk_batch bt = {toks, c, &s, 1, &last, past + c == p0 ? 1 : 0};
      if (b->forward(b, &bt, lg, &err)) {
        printf("FAIL: forward: %s\n", err.msg);
        return 1;
      }
      past += c;
    }
    tp = wk_now() - tp;
    if (round < 0) continue;
    if (round == 1) {
      double mm = 0;
      for (int l = 0; l < m.n_layers; l++) {
        const wk_layer *L = &m.layers[l];
        const wk_tensor *w[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) mm += (double)w[i]->ne[0] * w[i]->ne[1];
      }
      double fl = 2.0 * mm * p0 + 2.0 * m.n_layers * (double)m.n_heads * m.head_dim * (double)p0 * p0;
      printf("prefill %d tokens (chunks of %d): %.3f s, %.0f tok/s, %.1f TFLOP/s effective\n", p0, chunk,
             tp, p0 / tp, fl / tp / 1e12);
      printf("RESULT prefill %d %.4f %.1f %.2f\n", p0, tp, p0 / tp, fl / tp / 1e12);
    }
    int tok = argmax(lg, m.vocab);
    // Greedy steps as a session runs them: the device's argmax (forward_topk,
    // k = 1) unless WICK_BENCH_TOPK=0 (whole row copied back, argmax here).
    const char *tk = getenv("WICK_BENCH_TOPK");
    int use_topk = b->forward_topk && !(tk && !strcmp(tk, "0"));
    for (int g = 0; g <= n_decode; g++) {
      double ts = wk_now();
      wk_seq s = {blocks, nb, past, 1, 0};
      wk_batch bt = {&tok, 1, &s, 1, &at0, 1};
      float top;
      int rc = use_topk ? b->forward_topk(b, &bt, 1, &tok, &top, &err) : b->forward(b, &bt, lg, &err);
      if (rc) {
        printf("FAIL: decode: %s\n", err.msg);
        return 1;
      }
      if (!use_topk) tok = argmax(lg, m.vocab);
      dt[g] = wk_now() - ts;
      past++;
    }
    qsort(dt + 1, n_decode, sizeof(double), cmp_d);  // dt[0] captures the graph
    double med = dt[1 + n_decode / 2];
    printf("decode at context %d (%s): median %.3f ms/token = %.1f tok/s (first step %.1f ms)\n", p0,
           use_topk ? "device argmax" : "whole logits, host argmax", med * 1e3, 1.0 / med, dt[0] * 1e3);
    printf("RESULT decode %d %.4f %.1f\n", p0, med * 1e3, 1.0 / med);
    char what[64];
    snprintf(what, sizeof what, "decode at context %d, the last layer", p0);
    print_stamps(what);
  }
  // Again after prefill and decode ran: cuBLAS and the kernels loaded,
  // thread stacks raised where a kernel needed it.
  cuda_bench_mem_used(&used, &total);
  printf("device memory in use after the runs: %.2f GB\n", used / 1e9);
  printf("RESULT memory_after %.3f\n", used / 1e9);
  b->destroy(b);
  model_free(&m);
  gguf_close(f);
  wk_free(blocks), wk_free(toks), wk_free(lg), wk_free(dt);
  return 0;
}

// Decode steps of B sequences at once (a server's batch), for each B of
// bs[0..nbs): every sequence first gets a prompt of ctx tokens, then steps
// greedy steps of one token each run as one batch of B sequences (device
// argmax). Prints the median step and the tokens a second it makes.
static int bench_batch(const char *path, int ctx, int steps, const int *bs, int nbs) {
  gguf_file *f = NULL;
  wk_model m;
  wk_error err = {{0}};
  memset(&m, 0, sizeof m);
  if (gguf_open(&f, path, &err) || model_load(&m, f, &err)) {
    printf("FAIL: %s: %s\n", path, err.msg);
    return 1;
  }
  int bmax = 1;
  for (int i = 0; i < nbs; i++) bmax = bs[i] > bmax ? bs[i] : bmax;
  const int blk = 16, per = (ctx + steps + 1 + blk - 1) / blk;  // KV blocks a sequence
  wk_backend_params bp = {ctx > bmax ? ctx : bmax, bmax, bmax, 1, 0, 0, {blk, per * bmax}};
  wk_backend *b = backend_cuda_create();
  if (!b || b->prepare(b, &m, &bp, &err)) {
    printf("FAIL: prepare: %s\n", err.msg);
    return 1;
  }
  int32_t *blocks = wk_malloc(sizeof(int32_t) * per * bmax);
  int32_t *toks = wk_malloc(sizeof(int32_t) * (ctx > bmax ? ctx : bmax));
  int32_t *at = wk_malloc(sizeof(int32_t) * bmax), *ids = wk_malloc(sizeof(int32_t) * bmax);
  float *vals = wk_malloc(sizeof(float) * bmax);
  wk_seq *seqs = wk_malloc(sizeof(wk_seq) * bmax);
  double *dt = wk_malloc(sizeof(double) * (steps + 1));
  float *lg = wk_malloc(sizeof(float) * m.vocab);  // no row is asked for; never written
  for (int i = 0; i < per * bmax; i++) blocks[i] = i;
  int rc = 0;
  for (int q = 0; q < bmax && !rc; q++) {  // the prompts, one sequence a call
    for (int i = 0; i < ctx; i++) toks[i] = (int32_t)((q * 131 + i) * 7919 % m.vocab);
    wk_seq s = {blocks + (size_t)q * per, per, 0, ctx, 0};
    wk_batch bt = {toks, ctx, &s, 1, NULL, 0};
    rc = b->forward(b, &bt, lg, &err);
  }
  for (int k = 0; k < nbs && !rc; k++) {
    const int B = bs[k];
    for (int q = 0; q < B; q++) ids[q] = (int32_t)((q * 17 + 3) % m.vocab), at[q] = q;
    for (int g = 0; g <= steps && !rc; g++) {
      for (int q = 0; q < B; q++)
        seqs[q] = (wk_seq){blocks + (size_t)q * per, per, ctx + g, 1, q}, toks[q] = ids[q];
      wk_batch bt = {toks, B, seqs, B, at, B};
      double ts = wk_now();
      rc = b->forward_topk ? b->forward_topk(b, &bt, 1, ids, vals, &err) : WICK_ERR_UNSUPPORTED;
      dt[g] = wk_now() - ts;
    }
    if (rc) break;
    qsort(dt + 1, steps, sizeof(double), cmp_d);  // dt[0] may capture a graph
    const double med = dt[1 + steps / 2];
    printf("batch decode, %3d sequences at context %d: median %.3f ms a step = %.1f tok/s\n", B, ctx,
           med * 1e3, B / med);
    printf("RESULT batch %d %d %.4f %.1f\n", B, ctx, med * 1e3, B / med);
  }
  if (rc) printf("FAIL: batch decode: %s\n", err.msg);
  b->destroy(b);
  model_free(&m);
  gguf_close(f);
  wk_free(blocks), wk_free(toks), wk_free(at), wk_free(ids), wk_free(vals), wk_free(seqs),
      wk_free(dt), wk_free(lg);
  return rc != 0;
}

int main(int argc, char **argv) {
  if (backend_cuda_device_count() == 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "ceil")) {
    double bw, fl;
    wk_error err = {{0}};
    if (cuda_bench_ceilings(&bw, &fl, 8192, &err)) {
      printf("FAIL: %s\n", err.msg);
      return 1;
    }
    printf("ceilings: device-to-device copy %.0f GB/s (read + write); cuBLAS bf16 GEMM 8192^3 %.0f TFLOP/s\n",
           bw / 1e9, fl / 1e12);
    printf("RESULT ceil %.1f %.1f\n", bw / 1e9, fl / 1e12);
    return 0;
  }
  if (argc >= 3 && !strcmp(argv[1], "matvec"))
    return bench_matvec(atof(argv[2]), argc > 3 ? argv[3] : NULL);
  if (argc >= 3 && !strcmp(argv[1], "sweep")) return bench_sweep(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "dequant")) return bench_dequant(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "rows")) return bench_rows(atof(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "mvone"))
    return bench_mvone(argv[2], argc > 3 ? atoi(argv[3]) : 0);
  if (argc >= 3 && !strcmp(argv[1], "model"))
    return bench_model(argv[2], argc > 3 ? atoi(argv[3]) : 4096, argc > 4 ? atoi(argv[4]) : 1024,
                       argc > 5 ? atoi(argv[5]) : 128);
  if (argc >= 3 && !strcmp(argv[1], "batch")) {  // batch FILE [ctx [steps [B...]]]
    int bs[16], nbs = 0;
    for (int i = 5; i < argc && nbs < 16; i++) bs[nbs++] = atoi(argv[i]);
    static const int def[] = {1, 2, 3, 4, 8, 16, 32, 64};
    if (!nbs) memcpy(bs, def, sizeof def), nbs = 8;
    for (int i = 0; i < nbs; i++)
      if (bs[i] < 1 || bs[i] > 256) {
        fprintf(stderr, "bench_cuda batch: %d sequences (1 to 256)\n", bs[i]);
        return 2;
      }
    return bench_batch(argv[2], argc > 3 ? atoi(argv[3]) : 512, argc > 4 ? atoi(argv[4]) : 32, bs,
                       nbs);
  }
  fprintf(stderr, "usage: bench_cuda ceil | matvec COPY_GBPS [TYPES] | sweep COPY_GBPS | dequant COPY_GBPS | rows COPY_GBPS | model FILE [prefill [chunk [decode]]] | batch FILE [ctx [steps [B...]]]\n");
  return 2;
}
