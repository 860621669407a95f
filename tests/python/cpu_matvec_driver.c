// Test driver for tests/python/test_act8_k.py: one matrix product through
// the CPU backend's fast path, as the forward pass runs it (cpu_mm_plan,
// cpu_mm_pack: 16-row groups packed where this CPU packs the type, cpu_act_*,
// cpu_mm_run on a thread pool).
//
//   cpu_matvec_driver TYPE K N TOKENS THREADS < weights x > out
//
// stdin: N rows of TYPE's blocks (wk_row_size(TYPE, K) bytes each), then
// TOKENS x K f32 activations. stdout: int32 activation format of the plan
// (kernels.h / act16.h / act8b.h ids; -1: exact path), int32 kernel level, then
// TOKENS x N f32 outputs (y[t][r]). Exit status 1 on bad input.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/matmul.h"
#include "base/alloc.h"
#include "base/pool.h"
#include "quant/types.h"
#include "wick.h"

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s TYPE K N TOKENS THREADS\n", argv[0]);
    return 1;
  }
  const int type = atoi(argv[1]), n = atoi(argv[3]), tokens = atoi(argv[4]);
  const int64_t k = atoll(argv[2]);
  const size_t row = wk_row_size(type, k);
  if (!row || n < 1 || tokens < 1) {
    fprintf(stderr, "bad type %d or shape %lld x %d x %d\n", type, (long long)k,
            n, tokens);
    return 1;
  }
  unsigned char *w = malloc(row * (size_t)n);
  float *x = malloc(sizeof(float) * (size_t)k * (size_t)tokens);
  float *y = malloc(sizeof(float) * (size_t)n * (size_t)tokens);
  if (fread(w, row, (size_t)n, stdin) != (size_t)n ||
      fread(x, sizeof(float) * (size_t)k, (size_t)tokens, stdin) !=
          (size_t)tokens) {
    fprintf(stderr, "short input\n");
    return 1;
  }
  wk_pool *pool = wk_pool_create(atoi(argv[5]));
  const int nth = wk_pool_size(pool);
  float *scratch = malloc(sizeof(float) * (size_t)nth * cpu_matmul_scratch(k));
  wk_tensor wt = {"w", w, type, 2, {k, n, 1, 1}, row * (size_t)n};
  cpu_mm mm;
  cpu_mm_plan(&mm, &wt, false);
  uint64_t bytes = 0;
  const size_t pb = cpu_mm_pack_size(&mm, false);
  uint8_t *pk = pb ? wk_alloc_huge(pb) : NULL;
  if (pb && !pk) return 1;
  if (pb) cpu_mm_pack(&mm, pool, false, &bytes, pk);
  cpu_act act = {0};
  cpu_act_reserve(&act, &mm, tokens);
  if (cpu_act_alloc(&act, &bytes) != WICK_OK)
    return 1;
  cpu_act_set(&act, x, tokens, k);
  const cpu_mm *mp[1] = {&mm};
  float *yp[1] = {y};
  cpu_mm_run(pool, scratch, cpu_matmul_scratch(k), &act, mp, yp, 1);
  const int32_t head[2] = {mm.fast ? mm.kr.act : -1,
                           mm.fast ? mm.kr.level : -1};
  fwrite(head, sizeof head, 1, stdout);
  fwrite(y, sizeof(float) * (size_t)n, (size_t)tokens, stdout);
  cpu_act_free(&act);
  cpu_mm_unpack(&mm);
  wk_free_huge(pk, pb);
  wk_pool_destroy(pool);
  free(scratch);
  free(w);
  free(x);
  free(y);
  return 0;
}
