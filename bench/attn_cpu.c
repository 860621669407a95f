// CPU decode attention alone (cpu_attention): one new token at position P
// over P + 1 cached keys, a model's head shape, as a decode step runs it:
// layer after layer, each layer's K/V its own (by default 30 layers, so the
// caches come from memory, not from the last level of cache). Prints
// microseconds a layer and the K + V bytes a second, for f32 and f16 K/V.
//   bench_attn_cpu [P [threads [heads kv_heads head_dim [layers]]]]
// (defaults: 2000 keys, 1 thread, SmolLM2's 9 / 3 heads of 64, 30 layers)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels/kernels.h"
#include "base/alloc.h"
#include "base/fp.h"
#include "base/pool.h"
#include "base/timer.h"

static int arg(int argc, char **argv, int i, int def) {
  return argc > i ? atoi(argv[i]) : def;
}

int main(int argc, char **argv) {
  const int P = arg(argc, argv, 1, 2000), nth = arg(argc, argv, 2, 1);
  const int NH = arg(argc, argv, 3, 9), NKV = arg(argc, argv, 4, 3), HD = arg(argc, argv, 5, 64);
  const int L = arg(argc, argv, 6, 30), BS = 16;
  if (P < 0 || nth < 1 || NKV < 1 || NH % NKV || HD < 1 || L < 1) {
    fprintf(stderr, "bench_attn_cpu: P >= 0, threads >= 1, heads a multiple of kv heads, layers >= 1\n");
    return 2;
  }
  const bool avx2 = wk_kernel_best_level() >= WK_LEVEL_AVX2;
  const bool avx512 = wk_kernel_best_level() >= WK_LEVEL_AVX512BW;
  const int NB = (P + 1 + BS - 1) / BS;
  const size_t kvd = (size_t)NKV * HD, per_layer = (size_t)NB * BS * kvd;
  float *kf = wk_malloc(per_layer * L * sizeof(float)), *vf = wk_malloc(per_layer * L * sizeof(float));
  uint16_t *kh = wk_malloc(per_layer * L * sizeof(uint16_t));
  uint16_t *vh = wk_malloc(per_layer * L * sizeof(uint16_t));
  float *q = wk_malloc(sizeof(float) * (size_t)NH * HD), *out = wk_malloc(sizeof(float) * (size_t)NH * HD);
  int32_t *blocks = wk_malloc(sizeof(int32_t) * (size_t)NB);
  wk_pool *pool = wk_pool_create(nth);
  const size_t per = cpu_attn_scratch(NH, NKV, HD, BS), np = cpu_attn_partial(NH, HD, nth);
  float *scratch = wk_malloc(sizeof(float) * per * (size_t)nth), *part = wk_malloc(sizeof(float) * np);
  if (!kf || !vf || !kh || !vh || !q || !out || !blocks || !pool || !scratch || !part) {
    fprintf(stderr, "bench_attn_cpu: out of memory\n");
    return 1;
  }
  uint64_t z = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < per_layer * L; i++) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    kf[i] = (float)(z >> 40) / (float)(1 << 24) - 0.5f, vf[i] = 0.7f * kf[i];
    kh[i] = wk_f32_to_f16(kf[i]), vh[i] = wk_f32_to_f16(vf[i]);
  }
  for (int i = 0; i < NH * HD; i++) q[i] = (float)(i % 13) / 13.0f - 0.5f;
  for (int i = 0; i < NB; i++) blocks[i] = i;
  wk_seq seq = {blocks, NB, P, 1, 0};
  int32_t ts = 0, tp = P;
  for (int f16 = 0; f16 < (avx2 ? 2 : 1); f16++) {
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      const double t0 = wk_now();
      for (int l = 0; l < L; l++) {
        const size_t at = per_layer * (size_t)l;
        cpu_attn a = {.q = q, .out = out,
                      .k_cache = f16 ? (const void *)(kh + at) : (const void *)(kf + at),
                      .v_cache = f16 ? (const void *)(vh + at) : (const void *)(vf + at),
                      .kv_f16 = f16, .seqs = &seq, .n_seqs = 1, .tok_seq = &ts, .tok_pos = &tp,
                      .n_tokens = 1, .n_heads = NH, .n_kv_heads = NKV, .head_dim = HD,
                      .block_size = BS, .scale = 0.125f, .scratch = scratch,
                      .scratch_per_thread = per, .avx2 = avx2, .avx512 = avx512, .partial = part,
                      .partial_floats = np};
        cpu_attention(pool, &a);
      }
      const double t = (wk_now() - t0) / L;
      if (t < best) best = t;
    }
    const double bytes = 2.0 * (P + 1) * (double)kvd * (f16 ? 2 : 4);
    printf("%s K/V, %d keys, %d/%d heads of %d, %d layers, %d threads: %8.1f us a layer, "
           "%5.1f GB/s of K + V (out[0] %.6f)\n", f16 ? "f16" : "f32", P + 1, NH, NKV, HD, L, nth,
           best * 1e6, bytes / best / 1e9, out[0]);
  }
  wk_free(kf), wk_free(vf), wk_free(kh), wk_free(vh), wk_free(q), wk_free(out), wk_free(blocks);
  wk_free(scratch), wk_free(part);
  wk_pool_destroy(pool);
  return 0;
}
