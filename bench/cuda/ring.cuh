// Device pieces of the copy-engine ring probes (ring.cu, ring_q4k.cu): the
// consumer warps' named barrier and the grid barrier between phases, a
// global clock; the mbarriers and bulk copies are the streamed kernel's
// (mvs.cuh: bar_init_n, bar_arrive, bar_expect, bar_wait, bulk_copy).
#pragma once
#include <cstdint>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mvs.cuh"

// The consumer warps only (named barrier 1).
static __device__ __forceinline__ void consumers_sync(int nthr) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(nthr) : "memory");
}
// The consumers of every block meet at phase p's counter (zeroed before the
// launch): one release add a block, then acquire loads until every block
// has added. Their writes before it are visible to reads after it that
// bypass L1 (__ldcg). Under a full memory system each round trip to L2
// costs ~1 us, so the barrier has as few as it can: one add, the polls.
static __device__ void ring_grid_sync(unsigned *cnt, int nthr) {
  consumers_sync(nthr);
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(cnt) : "memory");
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(cnt) : "memory");
    } while (v < gridDim.x);
  }
  consumers_sync(nthr);
}
static __device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
