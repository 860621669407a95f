// Attention kernel timing on the device (built by bench/cuda/session.sh against
// the project's static libraries): causal attention of the Llama-3-8B shape
// (32 query heads, 8 kv heads, head dim 128) through the split kernel and
// the flash kernel's configurations, and the flash kernel at head dims 64
// and 256. FLOPs = 4 * n_heads * head_dim * (keys summed over the queries).
//   bench_attn [tokens]      (default 4096)
//   bench_attn decode        one new token over 4096 and 16384 keys (32/8 heads,
//                            head dim 128): the warp-tile decode kernel (merging
//                            in-kernel or with the combine launch), the session-3
//                            block-tile kernel and the warp kernel by split count;
//                            GB/s of K + V
//   bench_attn flash V       head-dim-128 variant V alone at 4096 tokens (for ncu)
//   bench_attn layout        the same K + V bytes as 8 kv heads (rows 2 KB apart)
//                            and as 1 kv head (rows contiguous)
//   bench_attn stamps        a measurement build's timeline of the decode kernel
//                            (stamps.h; -DWICK_CUDA_STAMPS)
// Lines starting "RESULT" are for scripts; the rest is a readable table.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_test.h"
#include "stamps.h"

static int g_fail;

// One timing; returns TFLOP/s (0 on failure).
static double run(const char *what, int nh, int nkv, int hd, int n_ctx, int n_new, int kernel,
                  int variant, int splits, int iters) {
  const int bs = 16, nb = (n_ctx + bs - 1) / bs;
  int32_t *blocks = malloc(sizeof(int32_t) * nb);
  for (int i = 0; i < nb; i++) blocks[i] = i;
  cuda_test_attn a = {nh,     nkv,  hd,     n_ctx,      n_new, 0, bs, nb, splits, 0.088388f, 0.0f,
                      blocks, 1,    kernel, variant, 0};
  wk_error err = {{0}};
  double us = 0;
  int st = cuda_bench_attention(&a, iters, &us, &err);
  free(blocks);
  if (st) {
    printf("%-36s FAILED: %s\n", what, err.msg);
    g_fail++;
    return 0;
  }
  double keys = 0;
  for (int t = 0; t < n_new; t++) keys += n_ctx - n_new + t + 1;
  double tf = 4.0 * nh * hd * keys / (us * 1e-6) / 1e12;
  printf("%-36s hd %3d heads %2d/%d ctx %5d new %5d: %10.1f us %7.1f TFLOP/s\n", what, hd, nh, nkv,
         n_ctx, n_new, us, tf);
  printf("RESULT attn %s hd=%d heads=%d/%d ctx=%d new=%d us=%.1f tflops=%.1f\n", what, hd, nh, nkv,
         n_ctx, n_new, us, tf);
  return tf;
}

// Decode: one token, n_ctx keys; prints microseconds and K + V GB/s by
// kernel and split count, then each kernel's best split count; "cold" rows
// read 4 copies of the cache in turn, so the K/V rows are not in L2 from the
// launch before (a decode step reads another layer's cache each time).
static void decode(void) {
  enum { NC = 2, NK = 12, NS = 5 };
  static const int ctxs[NC] = {4096, 16384}, splits[NS] = {4, 8, 16, 32, 64};
  // mma: the tensor-core decode kernel (the default), merging its splits
  // itself or (+combine) with the combine launch; fma: the f32 warp-tile
  // kernel of session 5 (variant 5; 16 warps, 2 stages at this shape);
  // group1: the block-tile kernel of session 3 (variant 1); warp: the
  // warp-per-key kernel; mma-NwSs: the tensor-core kernel with N warps a
  // block and S stages a warp (variants 6-8); mma-counters: the default
  // kernel merging through its counters, never in a cluster (kernel 4).
  static const int kern[NK] = {0, 0, 3, 0, 0, 2, 0, 0, 0, 4, 4, 0};
  static const int var[NK] = {-1, -1, -1, 5, 5, -1, 1, 6, 7, -1, -1, 8};
  static const int cold[NK] = {0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1};
  static const char *kname[NK] = {"mma",      "mma-cold", "mma+combine", "fma",
                                  "fma-cold", "warp",     "group1",      "mma-8w3s",
                                  "mma-4w4s", "mma-counters", "mma-counters-cold", "mma-4w2s-cold"};
  for (int c = 0; c < NC; c++) {
    double best[NK] = {0};
    int best_s[NK] = {0};
    for (int k = 0; k < NK; k++)
      for (int s = 0; s < NS; s++) {
        int n_ctx = ctxs[c], bs = 16, nb = n_ctx / bs;
        int32_t *blocks = malloc(sizeof(int32_t) * nb);
        for (int i = 0; i < nb; i++) blocks[i] = i;
        cuda_test_attn a = {32,     8, 128,     n_ctx,   1,      0, bs, nb, splits[s], 0.088388f, 0.0f,
                            blocks, 1, kern[k], var[k], cold[k]};
        wk_error err = {{0}};
        double us = 0;
        int st = cuda_bench_attention(&a, 20, &us, &err);
        free(blocks);
        if (st) {
          printf("decode %s ctx %d splits %d FAILED: %s\n", kname[k], n_ctx, splits[s], err.msg);
          g_fail++;
          continue;
        }
        double gb = 2.0 * n_ctx * 8 * 128 * 2 / (us * 1e-6) / 1e9;
        printf("decode %-17s ctx %5d splits %2d: %7.1f us %6.0f GB/s%s\n", kname[k], n_ctx,
               splits[s], us, gb, kern[k] == 0 && cuda_test_attn_clusters(&a) ? " (clusters)" : "");
        printf("RESULT attn-decode %s ctx=%d splits=%d us=%.1f gbps=%.0f\n", kname[k], n_ctx,
               splits[s], us, gb);
        if (!best_s[k] || us < best[k]) best[k] = us, best_s[k] = splits[s];
      }
    for (int k = 0; k < NK; k++)
      if (best_s[k])
        printf("decode best %-17s ctx %5d: %7.1f us at %2d splits\n", kname[k], ctxs[c], best[k],
               best_s[k]);
  }
}

// The cache layout's cost: the same 16.8 MB of K + V read by the same 128
// blocks of 256 keys, once as the 8B shape (8 kv heads; a key's row of one
// head is 256 bytes, the next key's 2 KB on) and once as 1 kv head of 4
// query heads over 8x the keys (each block's rows contiguous), hot and cold.
static void layout(void) {
  static const struct { int nh, nkv, ctx, splits; } sh[] = {
      {32, 8, 4096, 16}, {4, 1, 32768, 128}, {32, 8, 4096, 32}, {4, 1, 32768, 256}};
  for (int cold = 0; cold < 2; cold++)
    for (int i = 0; i < 4; i++) {
      int bs = 16, nb = sh[i].ctx / bs;
      int32_t *blocks = malloc(sizeof(int32_t) * nb);
      for (int b = 0; b < nb; b++) blocks[b] = b;
      cuda_test_attn a = {sh[i].nh, sh[i].nkv, 128, sh[i].ctx, 1, 0, bs, nb, sh[i].splits,
                          0.088388f, 0.0f, blocks, 1, 0, -1, cold};
      wk_error err = {{0}};
      double us = 0;
      int st = cuda_bench_attention(&a, 20, &us, &err);
      free(blocks);
      if (st) {
        printf("layout %d/%d FAILED: %s\n", sh[i].nh, sh[i].nkv, err.msg);
        g_fail++;
        continue;
      }
      double gb = 2.0 * sh[i].ctx * sh[i].nkv * 128 * 2 / (us * 1e-6) / 1e9;
      printf("layout %2d/%d heads, %5d keys, %3d splits%s: %7.1f us %6.0f GB/s\n", sh[i].nh,
             sh[i].nkv, sh[i].ctx, sh[i].splits, cold ? " cold" : "     ", us, gb);
    }
}

// A measurement build's timeline of the decode kernel (stamps.h): the 8B
// shape at 4096 keys (hot and cold) and 16384 keys (cold), 16 splits; cold
// again merging through the counters (kernel 4).
static void stamps(void) {
  static const struct { int ctx, cold, kernel; } cs[] = {
      {4096, 0, 0}, {4096, 1, 0}, {16384, 1, 0}, {4096, 1, 4}, {16384, 1, 4}};
  for (int i = 0; i < 5; i++) {
    int bs = 16, nb = cs[i].ctx / bs;
    int32_t *blocks = malloc(sizeof(int32_t) * nb);
    for (int b = 0; b < nb; b++) blocks[b] = b;
    cuda_test_attn a = {32, 8, 128, cs[i].ctx, 1, 0, bs, nb, 16, 0.088388f, 0.0f, blocks, 1,
                        cs[i].kernel, -1, cs[i].cold};
    wk_error err = {{0}};
    double us = 0;
    int st = cuda_bench_attention(&a, 20, &us, &err);
    free(blocks);
    if (st) {
      printf("stamps FAILED: %s\n", err.msg);
      g_fail++;
      continue;
    }
    char what[96];
    snprintf(what, sizeof what, "%d keys%s%s, %.1f us a launch", cs[i].ctx,
             cs[i].cold ? " cold" : "", cs[i].kernel == 4 ? ", counters' merge" : "", us);
    print_stamps(what);
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "stamps")) {
    stamps();
    return g_fail ? 1 : 0;
  }
  if (argc > 1 && !strcmp(argv[1], "layout")) {
    layout();
    return g_fail ? 1 : 0;
  }
  if (argc > 1 && !strcmp(argv[1], "decode")) {
    decode();
    return g_fail ? 1 : 0;
  }
  if (argc > 2 && !strcmp(argv[1], "flash")) {  // one head-dim-128 variant, for a profiler
    run("flash", 32, 8, 128, 4096, 4096, 1, atoi(argv[2]), 1, 3);
    return g_fail ? 1 : 0;
  }
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  if (n < 16) {
    fprintf(stderr, "bench_attn: tokens %d (expected 16 or more)\n", n);
    return 2;
  }
  // The flash configurations (flash_attn.cu): warps, m-tiles a warp, keys a
  // tile, Q in registers or shared memory, blocks an SM asked of ptxas.
  static const char *v128[] = {"NW4 MT1 BN32 Qreg MB3", "NW4 MT1 BN64 Qreg", "NW4 MT2 BN64 Qsmem",
                               "NW4 MT2 BN32 Qsmem",    "NW8 MT1 BN64 Qreg", "NW4 MT1 BN32 Qreg",
                               "NW8 MT2 BN64 Qsmem"};
  static const char *v64[] = {"NW4 MT1 BN64 Qreg", "NW4 MT2 BN64 Qreg"};
  static const char *v256[] = {"NW4 MT1 BN32 Qsmem", "NW8 MT1 BN32 Qsmem"};
  char what[64];
  run("split kernel", 32, 8, 128, n, n, 0, -1, 1, 2);
  for (int v = 0; v < 7; v++) {
    snprintf(what, sizeof what, "flash v%d %s", v, v128[v]);
    run(what, 32, 8, 128, n, n, 1, v, 1, 10);
  }
  // Fewer new tokens over the same keys (the last chunk of a chunked prompt,
  // short turns): the configurations the default picks from.
  static const int news[] = {16, 64, 256, 1024};
  static const int vs[] = {0, 2, 6};
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 3; k++) {
      snprintf(what, sizeof what, "flash v%d, %d new", vs[k], news[i]);
      run(what, 32, 8, 128, n, news[i], 1, vs[k], 1, 10);
    }
  int chunk = n / 4 > 16 ? n / 4 : 16;
  run("split kernel, last chunk", 32, 8, 128, n, chunk, 0, -1, 1, 3);
  run("flash default, last chunk", 32, 8, 128, n, chunk, 1, -1, 1, 10);
  run("flash default, 64 new", 32, 8, 128, n, 64, 1, -1, 1, 10);
  run("split kernel, 64 new", 32, 8, 128, n, 64, 0, -1, 1, 10);
  run("flash default, 16 new", 32, 8, 128, n, 16, 1, -1, 1, 10);
  run("split kernel (2 splits), 16 new", 32, 8, 128, n, 16, 0, -1, 2, 10);
  for (int v = 0; v < 2; v++) {
    snprintf(what, sizeof what, "flash v%d %s", v, v64[v]);
    run(what, 32, 8, 64, n, n, 1, v, 1, 10);
  }
  for (int v = 0; v < 2; v++) {
    snprintf(what, sizeof what, "flash v%d %s", v, v256[v]);
    run(what, 8, 4, 256, n, n, 1, v, 1, 10);
  }
  return g_fail ? 1 : 0;
}
