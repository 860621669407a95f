// Device pieces of the copy-engine ring probes (ring.cu, ring_q4k.cu):
// mbarriers, bulk copies, the consumer warps' named barrier and the grid
// barrier between phases, a global clock.
#pragma once
#include <cstdint>

static __device__ __forceinline__ uint32_t sm32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void mb_init(uint64_t *b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm32(b)), "r"(count) : "memory");
}
static __device__ __forceinline__ void mb_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm32(b)) : "memory");
}
static __device__ __forceinline__ void mb_expect(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm32(b)),
               "r"(bytes)
               : "memory");
}
static __device__ __forceinline__ void mb_wait(uint64_t *b, uint32_t par) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(sm32(b)), "r"(par)
        : "memory");
  } while (!done);
}
static __device__ __forceinline__ void mb_copy(void *dst, const void *src, uint32_t bytes,
                                               uint64_t *b) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          sm32(dst)),
      "l"(src), "r"(bytes), "r"(sm32(b))
      : "memory");
}
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
