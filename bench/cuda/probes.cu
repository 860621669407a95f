// Probes of session 6 (docs/CUDA.md, "Session 6"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/probes.cu -o probes
//   ./probes read   the fixed cost of one streaming launch: a kernel that only
//                   reads (each warp a contiguous share, 512 bytes a step, D
//                   steps in flight) at several sizes, 20 launches back to back
//                   in a graph, plainly and with programmatic dependent launch;
//                   with all resident blocks or half of them (room for the next
//                   launch's blocks on every SM)
//   ./probes chain  what a kernel boundary costs between dependent products:
//                   8 F16 products y_{p+1} = W_p y_p (4096 and 8192 square) as
//                   8, 4, 2 or 1 launches of 1, 2, 4 or 8 phases (a grid barrier
//                   between phases, the next phase's first loads issued before
//                   it), plainly and with dependent launch, in one graph; then
//                   as 512-thread launches that land their first rows in shared
//                   memory by bulk copies before the wait (k_land), and as the
//                   persistent 1024-thread kernel landing each phase's first
//                   rows before its barrier (k_chain_land)
//   ./probes flow   the same 8 products as 4 pairs, the second of a pair split
//                   by column chunks that start as the first's rows for them
//                   are done (counters, no boundary between the two), 1, 2 or
//                   4 pairs a launch, against chain's launches and barriers
//   ./probes mma    matrix-vector products on the tensor cores (mma.sync) for
//                   FP8 (wick's 132-byte blocks: f32 scale + 128 e4m3 codes; x as
//                   two e4m3 terms in two B columns) and Q4_K (u8 nibbles x int8
//                   x, B column n = sub-block n), 16 rows a tile, stream-K over
//                   1 KB warp items with atomic row sums (a probe: not
//                   deterministic); MODE 0 the whole kernel, 1 without the x
//                   prologue, 2 the loads only
#include <cuda_fp8.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <functional>
#include <vector>
#include <algorithm>

#include "backend/cuda/internal.cuh"  // MVR_* (mvr.cuh reads them)
#include "backend/cuda/mvr.cuh"  // mvr_kq_sum4: a Q4_K lane's scales, mins and sums
#include "backend/cuda/mvs.cuh"  // bar_init, bar_expect, bar_wait, bulk_copy

#include "probe_util.cuh"

template <int NT, int D, int MINB>
__global__ void __launch_bounds__(NT, MINB) k_read(const uint4 *__restrict__ p, size_t n16,
                                                   uint32_t *out, int early) {
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int lane = threadIdx.x & 31;
  const size_t TW = (size_t)gridDim.x * (NT / 32), gw = (size_t)blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
  const size_t steps = n16 / 32, s0 = gw * steps / TW, s1 = (gw + 1) * steps / TW;
  uint4 r[D];
  uint32_t acc = 0;
  size_t s = s0;
#pragma unroll
  for (int k = 0; k < D; k++)
    if (s0 + k < s1) r[k] = __ldg(p + 32 * (s0 + k) + lane);
  for (; s < s1; s += D) {
#pragma unroll
    for (int k = 0; k < D; k++) {
      if (s + k < s1) {
        acc ^= r[k].x + r[k].y * 3 + r[k].z * 5 + r[k].w * 7;
        if (s + k + D < s1) r[k] = __ldg(p + 32 * (s + k + D) + lane);
      }
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (acc == 0x12345678u) out[gw] = acc;
}

template <int NT, int D, int MINB>
static void run_read(const uint4 *p, uint32_t *out, double bw) {
  auto kern = k_read<NT, D, MINB>;
  int per = 0, sms = 0;
  PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, NT, 0));
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double mbs[] = {8, 16, 33, 60, 117, 235};
  for (int half = 0; half < 2; half++) {
    if (half && per < 2) continue;
    int blocks = (half ? per / 2 : per) * sms;
    for (int mode = 0; mode < 3; mode++) {  // plain, pdl (trigger after wait), pdl early trigger
      printf("read NT %4d D %2d blk/SM %d of %d %-11s:", NT, D, half ? per / 2 : per, per,
             mode == 0 ? "plain" : mode == 1 ? "pdl" : "pdl early");
      for (double mb : mbs) {
        size_t n16 = (size_t)(mb * 1e6) / 16 / 32 * 32;
        double us = graph_us([&](cudaStream_t st, int pdl) {
          launch_pdl(st, pdl, blocks, NT, 0, kern, p, n16, out, mode == 2 ? 1 : 0);
        }, mode != 0);
        printf(" %3.0fMB %6.2fus %3.0f%%", mb, us, 100.0 * n16 * 16.0 / (us * 1e-6) / 1e9 / bw);
      }
      printf("\n");
    }
  }
}

static void probe_read(double bw) {
  void *s;
  uint32_t *out;
  PCK(cudaMalloc(&s, 1ull << 30)); PCK(cudaMalloc(&out, 1 << 20));
  PCK(cudaMemset(s, 1, 1ull << 30));
  const uint4 *p = (const uint4 *)s;
  run_read<1024, 4, 1>(p, out, bw);
  run_read<512, 8, 2>(p, out, bw);
  run_read<256, 8, 4>(p, out, bw);
  run_read<512, 4, 2>(p, out, bw);
  PCK(cudaFree(s)); PCK(cudaFree(out));
}

static __device__ __forceinline__ void mma_fp8(float *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void mma_u8s8(int *d, uint32_t a0, uint32_t a1, uint32_t a2,
                                                uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------- FP8
// Group: 4 blocks (512 columns, 528 bytes a row, 33 16-byte chunks). Item i
// (0..8) of a group: lane (g, t) holds chunk c = 4i + t of rows g and g + 8.
// x image: xg[h][grp * 576 + byte] = split h of x at the codes' byte
// positions, 0 at scales and past the group.
template <int NT, int D, int MODE>
__global__ void __launch_bounds__(NT, 1)
    k_fp8(const uint8_t *__restrict__ W, int rows, int cols, const float *__restrict__ x,
          float *__restrict__ y) {
  extern __shared__ uint4 smem[];
  __shared__ float red[32];
  const int G = cols / 512, IT = 9 * G, T = rows / 16;
  const size_t rb = (size_t)cols / 128 * 132;
  uint8_t *xg0 = (uint8_t *)smem, *xg1 = xg0 + G * 576;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int N = T * IT, TW = gridDim.x * (NT / 32);
  const int gw = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
  const int n0 = (int)((long)gw * N / TW), n1 = (int)((long)(gw + 1) * N / TW);

  struct R { uint4 a, b; float sa, sb; };
  R w[D + 1];
  int ln = n0, li = n0 % 9;
  const uint8_t *lp = W + (size_t)(16 * (n0 / IT) + g) * rb + 528 * ((n0 % IT) / 9);
  auto load = [&](R &r) {
    if (ln < n1) {
      const int c = 4 * li + t;
      const uint8_t *q = lp + 8 * rb;
      if (c <= 32) r.a = mvr_ld16(lp + 16 * c), r.b = mvr_ld16(q + 16 * c);
      else r.a = r.b = make_uint4(0, 0, 0, 0);
      if (li == 8 || ln == n1 - 1)
        r.sa = __ldg((const float *)(lp + 132 * t)), r.sb = __ldg((const float *)(q + 132 * t));
    }
    ln++;
    if (++li == 9) {
      li = 0, lp += 528;
      if ((ln % IT) == 0) lp += 15 * rb;  // next tile: 16 rows down, from column 0
    }
  };
#pragma unroll
  for (int k = 0; k < D; k++) load(w[k]);

  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // x: amax, scale by a power of two to <= 448, split into hi + lo/16.
  float am = 0.0f, sig = 1.0f;
  if (MODE == 0) {
  for (int i = threadIdx.x; i < cols; i += NT) am = fmaxf(am, fabsf(x[i]));
  for (int o = 16; o; o >>= 1) am = fmaxf(am, __shfl_xor_sync(~0u, am, o));
  if (lane == 0) red[threadIdx.x >> 5] = am;
  __syncthreads();
  am = 0.0f;
  for (int i = 0; i < NT / 32; i++) am = fmaxf(am, red[i]);
  const float sig0 = am > 0.0f ? exp2f(floorf(log2f(448.0f / am))) : 1.0f;
  sig = sig0;
  for (int q = threadIdx.x; q < G * 144; q += NT) {
    int grp = q / 144, e = q - grp * 144, b = e / 33, k = e - b * 33;
    uint32_t hi = 0, lo = 0;
    if (b < 4 && k > 0) {
      const float4 v = *(const float4 *)(x + 512 * grp + 128 * b + 4 * (k - 1));
      const float f[4] = {v.x * sig0, v.y * sig0, v.z * sig0, v.w * sig0};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        __nv_fp8_storage_t h = __nv_cvt_float_to_fp8(f[j], __NV_SATFINITE, __NV_E4M3);
        float hf = __half2float(__half(__nv_cvt_fp8_to_halfraw(h, __NV_E4M3)));
        __nv_fp8_storage_t l = __nv_cvt_float_to_fp8((f[j] - hf) * 16.0f, __NV_SATFINITE, __NV_E4M3);
        hi |= (uint32_t)h << (8 * j), lo |= (uint32_t)l << (8 * j);
      }
    }
    ((uint32_t *)xg0)[q] = hi, ((uint32_t *)xg1)[q] = lo;
  }
  __syncthreads();
  }
  const uint8_t *xg = (g & 1) ? xg1 : xg0;
  const int bb = g >> 1;
  const float isig = 1.0f / sig;

  float dd[4] = {0, 0, 0, 0}, acc0 = 0.0f, acc1 = 0.0f;
  int cn = n0, tile = n0 / IT, rr = n0 % IT, grp = rr / 9, i = rr % 9;
  auto compute = [&](R &r) {
    const int c = 4 * i + t;
    uint32_t a[4] = {r.a.x, r.a.y, r.a.z, r.a.w}, b[4] = {r.b.x, r.b.y, r.b.z, r.b.w};
    if (MODE == 2) {
      dd[0] += __uint_as_float(a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1] ^ b[2] ^ b[3]) + r.sa;
    } else {
    if (t == 0 && (i & 1) == 0 && i < 8) {  // the scale word of block i / 2
      const int e = i >> 1;
#pragma unroll
      for (int k = 0; k < 4; k++)
        if (k == e) a[k] = 0, b[k] = 0;
    }
    const uint4 xv = *(const uint4 *)(xg + grp * 576 + 16 * c);
    const int rel = c - 8 * bb;
    int keep = (rel < 0 || rel > 8) ? 0 : rel == 0 ? (0xF << (bb + 1)) & 0xF : rel == 8 ? 0xF >> (3 - bb) : 0xF;
    const uint32_t xw[4] = {keep & 1 ? xv.x : 0u, keep & 2 ? xv.y : 0u, keep & 4 ? xv.z : 0u,
                            keep & 8 ? xv.w : 0u};
    mma_fp8(dd, a[0], b[0], a[1], b[1], xw[0], xw[1]);
    mma_fp8(dd, a[2], b[2], a[3], b[3], xw[2], xw[3]);
    }
    const bool end = cn == n1 - 1;
    if (i == 8 || end) {
      acc0 = fmaf(r.sa, fmaf(dd[1], 0.0625f, dd[0]), acc0);
      acc1 = fmaf(r.sb, fmaf(dd[3], 0.0625f, dd[2]), acc1);
      dd[0] = dd[1] = dd[2] = dd[3] = 0.0f;
    }
    if (rr == IT - 1 || end) {
      acc0 += __shfl_xor_sync(~0u, acc0, 1), acc0 += __shfl_xor_sync(~0u, acc0, 2);
      acc1 += __shfl_xor_sync(~0u, acc1, 1), acc1 += __shfl_xor_sync(~0u, acc1, 2);
      if (t == 0) {
        atomicAdd(y + 16 * tile + g, acc0 * isig);
        atomicAdd(y + 16 * tile + g + 8, acc1 * isig);
      }
      acc0 = acc1 = 0.0f;
    }
    cn++;
    if (++i == 9) i = 0, grp++;
    if (++rr == IT) rr = 0, grp = 0, tile++;
  };
  const int cnt = n1 - n0;
  for (int i0 = 0; i0 < cnt; i0 += D + 1) {
#pragma unroll
    for (int k = 0; k <= D; k++) {
      if (i0 + k >= cnt) break;
      load(w[(k + D) % (D + 1)]);
      compute(w[k]);
    }
  }
}

// ---------------------------------------------------------------- Q4_K
// Super-block 144 bytes: d, dmin (f16), 12 scale bytes, 128 qs bytes.
// Item h2 (0, 1) of a super-block: lane (g, t) holds qs chunk c = 4 h2 + t
// of rows g and g + 8; its low nibbles are sub-block 2 (c / 2) values
// 16 (c % 2) + [0, 16), its high nibbles sub-block 2 (c / 2) + 1. B column n
// = sub-block n. x: int8 per 32 values with f32 scale and the group's sum.
template <int NT, int D, int MODE>
__global__ void __launch_bounds__(NT, 1)
    k_q4k(const uint8_t *__restrict__ W, int rows, int cols, const float *__restrict__ x,
          float *__restrict__ y) {
  extern __shared__ uint4 smem[];
  const int S = cols / 256, IT = 2 * S, T = rows / 16;
  const size_t rb = (size_t)S * 144;
  int8_t *xq = (int8_t *)smem;
  float2 *xm = (float2 *)(xq + cols);  // scale, sum of the group
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int N = T * IT, TW = gridDim.x * (NT / 32);
  const int gw = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
  const int n0 = (int)((long)gw * N / TW), n1 = (int)((long)(gw + 1) * N / TW);

  struct R { uint4 a, b, ha, hb; };
  R w[D + 1];
  int ln = n0, lh = n0 & 1;
  const uint8_t *lp = W + (size_t)(16 * (n0 / IT) + g) * rb + 144 * ((n0 % IT) >> 1);
  auto load = [&](R &r) {
    if (ln < n1) {
      const int c = 4 * lh + t;
      const uint8_t *q = lp + 8 * rb;
      r.a = mvr_ld16(lp + 16 + 16 * c), r.b = mvr_ld16(q + 16 + 16 * c);
      if (lh == 1 || ln == n1 - 1) r.ha = mvr_ld16(lp), r.hb = mvr_ld16(q);
    }
    ln++;
    if (++lh == 2) {
      lh = 0, lp += 144;
      if ((ln % IT) == 0) lp += 15 * rb;
    }
  };
#pragma unroll
  for (int k = 0; k < D; k++) load(w[k]);

  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  // x to int8 per 32 (a warp a group at a time; slow but simple).
  if (MODE == 0)
  for (int grp = threadIdx.x >> 5; grp < cols / 32; grp += NT / 32) {
    float v = x[32 * grp + lane], am = fabsf(v);
    for (int o = 16; o; o >>= 1) am = fmaxf(am, __shfl_xor_sync(~0u, am, o));
    float inv = am > 0.0f ? 127.0f / am : 0.0f;
    int q = __float2int_rn(v * inv), s = q;
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
    xq[32 * grp + lane] = (int8_t)q;
    if (lane == 0) xm[grp] = make_float2(am / 127.0f, (float)s);
  }
  __syncthreads();

  int dd[4] = {0, 0, 0, 0}, seen = 0;
  float acc0 = 0.0f, acc1 = 0.0f;
  int tile = n0 / IT, rr = n0 % IT;
  int cn = n0;
  auto compute = [&](R &r) {
    const int s = rr >> 1, h2 = rr & 1;
    const int s0 = 4 * h2 + 2 * (t >> 1);
    const uint4 xv = *(const uint4 *)(xq + 256 * s + 32 * g + 16 * (t & 1));
    const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
    const uint32_t a[4] = {r.a.x, r.a.y, r.a.z, r.a.w}, b[4] = {r.b.x, r.b.y, r.b.z, r.b.w};
    const bool lo = g == s0, hi = g == s0 + 1;
    if (MODE == 2) dd[0] += a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1] ^ b[2] ^ b[3] ^ r.ha.x ^ r.hb.y;
    else
#pragma unroll
    for (int u = 0; u < 4; u++)
      mma_u8s8(dd, a[u] & 0x0F0F0F0Fu, b[u] & 0x0F0F0F0Fu, (a[u] >> 4) & 0x0F0F0F0Fu,
               (b[u] >> 4) & 0x0F0F0F0Fu, lo ? xw[u] : 0u, hi ? xw[u] : 0u);
    const bool end = cn == n1 - 1;
    seen |= 1 << h2;
    if (h2 == 1 || end) {
      // lane t's sub-blocks 2t, 2t + 1 lie in half t / 2: counted (with
      // their mins) only by the warp that dotted that half
      if ((seen >> (t >> 1)) & 1) {
        const float2 ma = xm[8 * s + 2 * t], mb = xm[8 * s + 2 * t + 1];
        const int sa = (int)ma.y, sb = (int)mb.y;  // the groups' sums of x (exact in f32)
        acc0 += mvr_kq_sum4(r.ha, t, dd[0], dd[1], ma.x, mb.x, sa, sb);
        acc1 += mvr_kq_sum4(r.hb, t, dd[2], dd[3], ma.x, mb.x, sa, sb);
      }
      seen = 0;
      dd[0] = dd[1] = dd[2] = dd[3] = 0;
    }
    if (rr == IT - 1 || end) {
      acc0 += __shfl_xor_sync(~0u, acc0, 1), acc0 += __shfl_xor_sync(~0u, acc0, 2);
      acc1 += __shfl_xor_sync(~0u, acc1, 1), acc1 += __shfl_xor_sync(~0u, acc1, 2);
      if (t == 0) {
        atomicAdd(y + 16 * tile + g, acc0);
        atomicAdd(y + 16 * tile + g + 8, acc1);
      }
      acc0 = acc1 = 0.0f;
    }
    cn++;
    if (++rr == IT) rr = 0, tile++;
  };
  const int cnt = n1 - n0;
  for (int i0 = 0; i0 < cnt; i0 += D + 1) {
#pragma unroll
    for (int k = 0; k <= D; k++) {
      if (i0 + k >= cnt) break;
      load(w[(k + D) % (D + 1)]);
      compute(w[k]);
    }
  }
}

// ---------------------------------------------------------------- host
static float e4m3_to_f(uint8_t v) {
  int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  float f = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
  return s ? -f : f;
}
static float h2f(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float f = e == 0 ? ldexpf((float)m, -24) : ldexpf(1.0f + m / 1024.0f, e - 15);
  return s ? -f : f;
}
static uint16_t f2h(float f) { __half h = __float2half(f); return *(uint16_t *)&h; }

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }
static float frand() { return (rnd() >> 8) * (1.0f / 16777216.0f); }
static float grand() { float a = frand() + 1e-7f, b = frand(); return sqrtf(-2 * logf(a)) * cosf(6.2831853f * b); }

struct mv_case {  // one matrix on the device and its f64 reference row sums
  const uint8_t *dW;
  size_t bytes;
  int rows, cols;
  const float *dx;
  float *dy;
  std::vector<double> ref, mag;  // sum w x and sum |w x| a row
};

template <int NT, int D, bool FP8, int MODE>
static void run_mma(const char *name, const mv_case &c, double bw) {
  auto kern = FP8 ? k_fp8<NT, D, MODE> : k_q4k<NT, D, MODE>;
  const int rows = c.rows, cols = c.cols;
  size_t smem = FP8 ? (size_t)cols / 512 * 576 * 2 : (size_t)cols + cols / 32 * 8;
  PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int per = 0, sms = 0;
  PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, NT, smem));
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int blocks = per * sms;
  double worst = 0;
  if (MODE == 0) {
    PCK(cudaMemset(c.dy, 0, rows * 4));
    kern<<<blocks, NT, smem>>>(c.dW, rows, cols, c.dx, c.dy);
    PCK(cudaDeviceSynchronize());
    std::vector<float> y(rows);
    PCK(cudaMemcpy(y.data(), c.dy, rows * 4, cudaMemcpyDeviceToHost));
    for (int r = 0; r < rows; r++) worst = std::max(worst, fabs(y[r] - c.ref[r]) / c.mag[r]);
  }
  for (int pdl = 0; pdl < 2; pdl++) {
    double us = graph_us([&](cudaStream_t st, int p) {
      launch_pdl(st, p, blocks, NT, smem, kern, c.dW, rows, cols, c.dx, c.dy);
    }, pdl);
    double gbps = c.bytes / (us * 1e-6) / 1e9;
    printf("%-5s m%d %-4s %5dx%-5d NT %4d D %d blk/SM %d: %7.2f us %6.0f GB/s %5.1f%% of copy; "
           "max err/sum|wx| %.2e\n", name, MODE, pdl ? "pdl" : "", rows, cols, NT, D, per, us, gbps,
           100.0 * gbps / bw, worst);
  }
}

// Random FP8 rows (finite codes, scales near 0.01) and their reference.
static std::vector<uint8_t> make_fp8(int rows, int cols, const std::vector<float> &x, mv_case &c) {
  size_t rb = (size_t)cols / 128 * 132;
  std::vector<uint8_t> W(rb * rows);
  for (int r = 0; r < rows; r++) {
    double a = 0, m = 0;
    for (int b = 0; b < cols / 128; b++) {
      uint8_t *p = &W[r * rb + 132 * b];
      float sc = 0.01f * (0.5f + frand());
      memcpy(p, &sc, 4);
      for (int k = 0; k < 128; k++) {
        uint8_t q;
        do q = rnd() & 0xff; while ((q & 0x7f) == 0x7f || ((q >> 3) & 15) > 11);
        p[4 + k] = q;
        double wv = sc * e4m3_to_f(q);
        a += wv * x[128 * b + k], m += fabs(wv * x[128 * b + k]);
      }
    }
    c.ref[r] = a, c.mag[r] = m;
  }
  return W;
}

// Random Q4_K rows (scales near 0.001) and their reference.
static std::vector<uint8_t> make_q4k(int rows, int cols, const std::vector<float> &x, mv_case &c) {
  int S = cols / 256;
  size_t rb = (size_t)S * 144;
  std::vector<uint8_t> W(rb * rows);
  for (int r = 0; r < rows; r++) {
    double a = 0, m = 0;
    for (int s = 0; s < S; s++) {
      uint8_t *p = &W[r * rb + 144 * s];
      uint16_t d = f2h(0.001f * (0.5f + frand())), dm = f2h(0.001f * (0.5f + frand()));
      memcpy(p, &d, 2), memcpy(p + 2, &dm, 2);
      for (int k = 0; k < 140; k++) p[4 + k] = rnd() & 0xff;
      const uint8_t *sc = p + 4, *qs = p + 16;
      for (int j = 0; j < 8; j++) {
        int scj, mj;
        if (j < 4) scj = sc[j] & 63, mj = sc[j + 4] & 63;
        else scj = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), mj = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        for (int k = 0; k < 32; k++) {
          int q = (j & 1) ? qs[32 * (j / 2) + k] >> 4 : qs[32 * (j / 2) + k] & 15;
          double wv = h2f(d) * scj * q - h2f(dm) * mj, xv = x[256 * s + 32 * j + k];
          a += wv * xv, m += fabs(wv * xv);
        }
      }
    }
    c.ref[r] = a, c.mag[r] = m;
  }
  return W;
}

static void probe_mma(double bw) {
  const int shapes[2][2] = {{14336, 4096}, {4096, 14336}};
  for (int sh = 0; sh < 2; sh++) {
    int rows = shapes[sh][0], cols = shapes[sh][1];
    std::vector<float> x(cols);
    for (auto &v : x) v = grand();
    float *dx, *dy;
    PCK(cudaMalloc(&dx, cols * 4)); PCK(cudaMalloc(&dy, rows * 4));
    PCK(cudaMemcpy(dx, x.data(), cols * 4, cudaMemcpyHostToDevice));
    for (int fp8 = 1; fp8 >= 0; fp8--) {
      mv_case c = {NULL, 0, rows, cols, dx, dy, std::vector<double>(rows), std::vector<double>(rows)};
      std::vector<uint8_t> W = fp8 ? make_fp8(rows, cols, x, c) : make_q4k(rows, cols, x, c);
      uint8_t *dW;
      PCK(cudaMalloc(&dW, W.size()));
      PCK(cudaMemcpy(dW, W.data(), W.size(), cudaMemcpyHostToDevice));
      c.dW = dW, c.bytes = W.size();
      if (fp8) {
        run_mma<512, 3, true, 0>("fp8", c, bw);
        run_mma<512, 3, true, 1>("fp8", c, bw);
        run_mma<512, 3, true, 2>("fp8", c, bw);
        run_mma<512, 5, true, 0>("fp8", c, bw);
        run_mma<512, 5, true, 2>("fp8", c, bw);
      } else {
        run_mma<1024, 1, false, 0>("q4_k", c, bw);
        run_mma<1024, 1, false, 1>("q4_k", c, bw);
        run_mma<1024, 1, false, 2>("q4_k", c, bw);
        run_mma<512, 3, false, 0>("q4_k", c, bw);
        run_mma<512, 3, false, 2>("q4_k", c, bw);
      }
      PCK(cudaFree(dW));
    }
    PCK(cudaFree(dx)); PCK(cudaFree(dy));
  }
}

// ---------------------------------------------------------------- chain
// What a kernel boundary costs between two dependent matrix-vector
// products, against phases of one persistent launch (docs/CUDA.md, "A plan
// for the persistent decode layer"). Products of F16 matrices (the simplest
// format; rows x cols, x f32): y_{p+1} = W_p y_p for P phases a launch. A
// warp owns a contiguous share of the rows and streams each row in 512-byte
// steps (16 bytes a lane, D steps in flight); x is staged in shared memory
// as f32 by the block. Between phases of one launch the grid meets at a
// reusable barrier (count + generation in global memory); before it waits,
// every warp already issues the first D loads of its next phase's rows, as
// a persistent decode kernel would.
struct chain_args {
  const __half *const *W;  // [P] phase p's matrix (rows x cols, rows == cols), device array
  float *const *y;         // [P + 1] y[0] the input, y[p + 1] phase p's output, device array
  int n, log_steps;        // rows == cols, a power of two; log2(n / 256)
  unsigned *bar;           // {count, generation}
};
// All blocks of the grid (all resident) meet; writes before it are visible
// to reads after it (reads of other blocks' writes must bypass L1: __ldcg).
static __device__ void chain_barrier(unsigned *bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned *gen = bar + 1;
    const unsigned g = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      bar[0] = 0;
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}
// The pieces the three chain kernels share. Item i of a warp's run of rows
// from r0: row r0 + (i >> ls), step i & sm (256 halves, 512 bytes a step).
static __device__ __forceinline__ uint4 chain_ld(const __half *W, int n, int ls, int r0, int i) {
  const __half *row = W + (size_t)(r0 + (i >> ls)) * n + 256 * (i & ((1 << ls) - 1));
  return __ldg((const uint4 *)row + (threadIdx.x & 31));
}
// acc + 8 halves of w times x[c .. c + 8).
static __device__ __forceinline__ float chain_dot8(const uint4 &v, const float *xs, int c,
                                                   float acc) {
  const __half2 *h = (const __half2 *)&v;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const float2 f = __half22float2(h[e]);
    acc = fmaf(f.x, xs[c + 2 * e], fmaf(f.y, xs[c + 2 * e + 1], acc));
  }
  return acc;
}
// Waits for the phase's x (the previous grid at a launch's first phase, else
// the grid barrier) and stages it in xs.
static __device__ __forceinline__ void chain_enter(const chain_args &a, float *xs, int p, int p0,
                                                   int pdl) {
  if (p == p0) {
    if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  } else {
    chain_barrier(a.bar);
  }
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) xs[i] = __ldcg(a.y[p] + i);
  __syncthreads();
}
// A warp's rows from r0 (items of them), each row's sum into y.
template <int D>
static __device__ __forceinline__ void chain_stream(const __half *W, const float *xs, float *y,
                                                    int n, int ls, int r0, int items,
                                                    uint4 (&w)[D]) {
  const int lane = threadIdx.x & 31, sm = (1 << ls) - 1;
  stream_rows<D>(
      items, ls, w, [&](int i) { return chain_ld(W, n, ls, r0, i); },
      [&](const uint4 &v, int i, float acc) { return chain_dot8(v, xs, 256 * (i & sm) + 8 * lane, acc); },
      [&](int r, float acc) {
        if (lane == 0) y[r0 + r] = acc;
      });
}
// Rows [r0, r1) from shared memory (lw: rows from R0), one warp's, in
// chain_stream's order of sums.
static __device__ __forceinline__ void chain_landed(const __half *lw, const float *xs, float *y,
                                                    int n, int ls, int R0, int r0, int r1) {
  const int lane = threadIdx.x & 31;
  for (int r = r0; r < r1; r++) {
    float acc = 0.0f;
    for (int st = 0; st < (1 << ls); st++)
      acc = chain_dot8(((const uint4 *)(lw + (size_t)(r - R0) * n + 256 * st))[lane], xs,
                       256 * st + 8 * lane, acc);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = acc;
  }
}
// Thread 0: the copy engine brings bytes [0, total) of src to lw, completing on bar.
static __device__ __forceinline__ void chain_land_rows(const __half *lw, const __half *src,
                                                       uint32_t total, uint64_t *bar) {
  bar_expect(bar, total);
  for (uint32_t o = 0; o < total; o += 16384)
    bulk_copy((void *)((const unsigned char *)lw + o), (const unsigned char *)src + o,
              min(16384u, total - o), bar);
}

template <int D>
__global__ void __launch_bounds__(1024, 1) k_chain(chain_args a, int p0, int np, int pdl) {
  extern __shared__ float xs[];
  const int n = a.n, nw = blockDim.x >> 5;
  const int gw = blockIdx.x * nw + (threadIdx.x >> 5), tw = gridDim.x * nw;
  const int r0 = (int)((long)gw * n / tw), r1 = (int)((long)(gw + 1) * n / tw);
  const int ls = a.log_steps, items = (r1 - r0) << ls;
  uint4 w[D];
  for (int p = p0; p < p0 + np; p++) {
    const __half *W = a.W[p];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < items) w[k] = chain_ld(W, n, ls, r0, k);
    chain_enter(a, xs, p, p0, pdl);
    chain_stream<D>(W, xs, a.y[p + 1], n, ls, r0, items, w);
    __syncthreads();  // xs is restaged by the next phase
  }
}

// The same products with the next launch's first rows landed in shared
// memory: blocks of 512 threads (at most half an SM's registers and shared
// memory), so a launch's block finds room on an SM beside the running one
// and, before it waits for the previous grid, has the copy engine bring its
// first `land` rows into shared memory (bulk copies on an mbarrier); its
// warps also issue their first D register loads of the remaining rows. After
// the wait it stages x, computes the landed rows from shared memory, then
// streams the rest as k_chain does. Each row is one warp's, summed in the
// same order as k_chain, so the outputs are bit-identical.
template <int D>
__global__ void __launch_bounds__(512, 2) k_land(chain_args a, int p, int land, int pdl) {
  extern __shared__ __align__(16) unsigned char sm_land[];
  float *xs = (float *)sm_land;
  const int n = a.n, nw = blockDim.x >> 5, wi = threadIdx.x >> 5;
  const int R0 = (int)((long)blockIdx.x * n / gridDim.x), R1 = (int)((long)(blockIdx.x + 1) * n / gridDim.x);
  const int L = min(land, R1 - R0);
  const __half *W = a.W[p];
  const __half *lw = (const __half *)(sm_land + (size_t)n * 4);
  uint64_t *bar = (uint64_t *)(sm_land + (size_t)n * 4 + (size_t)land * n * 2);
  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0 && L > 0) {
    bar_init(bar);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    chain_land_rows(lw, W + (size_t)R0 * n, (uint32_t)L * n * 2, bar);
  }
  const int G0 = R0 + L, ng = R1 - G0;
  const int r0 = G0 + wi * ng / nw, r1 = G0 + (wi + 1) * ng / nw;
  const int ls = a.log_steps, items = (r1 - r0) << ls;
  uint4 w[D];
#pragma unroll
  for (int k = 0; k < D; k++)
    if (k < items) w[k] = chain_ld(W, n, ls, r0, k);
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = __ldcg(a.y[p] + i);
  __syncthreads();
  if (L > 0) {
    bar_wait(bar, 0);
    for (int r = wi; r < L; r += nw) chain_landed(lw, xs, a.y[p + 1], n, ls, R0, R0 + r, R0 + r + 1);
  }
  chain_stream<D>(W, xs, a.y[p + 1], n, ls, r0, items, w);
}

// k_chain with the next phase's first rows landed in shared memory: the
// persistent version (1024 threads, one block an SM, np phases a launch)
// where, before each phase's grid barrier (or the dependent-launch wait of
// the launch's first phase), thread 0 has the copy engine bring the block's
// first rows of that phase (up to lb bytes, whole warps' rows) into shared
// memory; those warps compute from there, the others stream as k_chain does
// (their first D loads also issued before the barrier). So the bytes in
// flight across a boundary are the registers' and up to lb more a block.
// Each row is one warp's, summed in k_chain's order: outputs bit-identical.
template <int D>
__global__ void __launch_bounds__(1024, 1) k_chain_land(chain_args a, int p0, int np, int pdl,
                                                        int lb) {
  extern __shared__ __align__(16) unsigned char sm_cl[];
  const int n = a.n, nw = blockDim.x >> 5, wi = threadIdx.x >> 5;
  float *xs = (float *)sm_cl;
  const __half *lw = (const __half *)(sm_cl + (size_t)n * 4);
  uint64_t *bar = (uint64_t *)(sm_cl + (size_t)n * 4 + (size_t)lb);
  const int tw = gridDim.x * nw, gw0 = blockIdx.x * nw, gw = gw0 + wi;
  auto rbeg = [&](int w) { return (int)((long)w * n / tw); };
  const int r0 = rbeg(gw), r1 = rbeg(gw + 1), R0 = rbeg(gw0);
  // Landed rows: [R0, R0 + L), whole warps' rows within lb bytes.
  int L = 0;
  for (int w = 0; w < nw; w++) {
    const int e = rbeg(gw0 + w + 1) - R0;
    if ((long)e * n * 2 > lb) break;
    L = e;
  }
  const bool landed = L > 0 && r1 - R0 <= L;
  const int ls = a.log_steps, items = landed ? 0 : (r1 - r0) << ls;
  if (threadIdx.x == 0 && L > 0) {
    bar_init(bar);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  uint4 w[D];
  for (int p = p0; p < p0 + np; p++) {
    const __half *W = a.W[p];
    if (threadIdx.x == 0 && L > 0) {  // the landing of this phase's first rows
      // the last phase's reads of the buffer (generic proxy) before the copy
      // engine's writes (async proxy)
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      chain_land_rows(lw, W + (size_t)R0 * n, (uint32_t)L * n * 2, bar);
    }
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < items) w[k] = chain_ld(W, n, ls, r0, k);
    chain_enter(a, xs, p, p0, pdl);
    if (landed) {
      bar_wait(bar, (uint32_t)((p - p0) & 1));
      chain_landed(lw, xs, a.y[p + 1], n, ls, R0, r0, r1);
    }
    chain_stream<D>(W, xs, a.y[p + 1], n, ls, r0, items, w);
    __syncthreads();  // xs and the landed rows are reused by the next phase
  }
}
// The chain probes' buffers: P copies of the matrix h (n x n), y[0] = x0
// and P more vectors, the device arrays of both, the barrier; chain_free
// frees them.
static void chain_alloc(chain_args &a, int n, int P, const std::vector<__half> &h,
                        const std::vector<float> &x0, std::vector<const __half *> &Wh,
                        std::vector<float *> &yh) {
  a.n = n, a.log_steps = n == 4096 ? 4 : 5;
  Wh.assign(P, nullptr), yh.assign(P + 1, nullptr);
  for (int p = 0; p < P; p++) {
    PCK(cudaMalloc((void **)&Wh[p], h.size() * sizeof(__half)));
    PCK(cudaMemcpy((void *)Wh[p], h.data(), h.size() * sizeof(__half), cudaMemcpyHostToDevice));
  }
  for (int p = 0; p <= P; p++) {
    PCK(cudaMalloc((void **)&yh[p], (size_t)n * sizeof(float)));
    PCK(cudaMemset(yh[p], 0, (size_t)n * sizeof(float)));
  }
  PCK(cudaMemcpy(yh[0], x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  PCK(cudaMalloc((void **)&a.W, P * sizeof(void *)));
  PCK(cudaMalloc((void **)&a.y, (P + 1) * sizeof(void *)));
  PCK(cudaMemcpy((void *)a.W, Wh.data(), P * sizeof(void *), cudaMemcpyHostToDevice));
  PCK(cudaMemcpy((void *)a.y, yh.data(), (P + 1) * sizeof(void *), cudaMemcpyHostToDevice));
  PCK(cudaMalloc((void **)&a.bar, 2 * sizeof(unsigned)));
  PCK(cudaMemset(a.bar, 0, 2 * sizeof(unsigned)));
}
static void chain_free(chain_args &a, std::vector<const __half *> &Wh, std::vector<float *> &yh) {
  for (auto w : Wh) PCK(cudaFree((void *)w));
  for (auto y : yh) PCK(cudaFree(y));
  PCK(cudaFree((void *)a.W)); PCK(cudaFree((void *)a.y)); PCK(cudaFree(a.bar));
}

static void probe_chain(double bw) {
  const int P = 8, D = 6;
  int sms = 0, per = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto kern = k_chain<D>;
  for (int n : {4096, 8192}) {
    const size_t smem = (size_t)n * sizeof(float);
    PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, 1024, smem));
    if (per < 1) { printf("chain n %d: no room\n", n); continue; }
    chain_args a = {};
    std::vector<const __half *> Wh;
    std::vector<float *> yh;
    std::vector<__half> h((size_t)n * n);
    for (size_t i = 0; i < h.size(); i++) h[i] = __float2half((float)((i * 2654435761u) % 1024) / 1024.0f - 0.5f);
    std::vector<float> x0(n);
    for (int i = 0; i < n; i++) x0[i] = (float)(i % 7) / 7.0f - 0.5f;
    chain_alloc(a, n, P, h, x0, Wh, yh);
    const double mb = (double)n * n * 2 / 1e6;
    std::vector<float> ref;
    for (int per_launch : {1, 2, 4, 8}) {
      for (int pdl = 0; pdl < 2; pdl++) {
        // One graph: P products as P / per_launch launches of per_launch phases.
        double us = graph_us([&](cudaStream_t st, int) {
          for (int p = 0; p < P; p += per_launch)
            launch_pdl(st, pdl, sms, 1024, smem, kern, a, p, per_launch, pdl);
        }, pdl, 1) / P;
        std::vector<float> out(n);
        PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
        if (ref.empty()) ref = out;
        const bool same = !memcmp(ref.data(), out.data(), n * sizeof(float));
        printf("chain n %5d (%5.1f MB a product): %d phases a launch, %-5s %7.2f us a product, "
               "%3.0f%% of copy%s\n", n, mb, per_launch, pdl ? "pdl" : "plain", us,
               100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, same ? "" : "  OUTPUT DIFFERS");
      }
    }
    // The persistent launch with landed rows (8 phases, 1024 threads).
    auto kcl = k_chain_land<D>;
    for (int lbk : {0, 64, 128, 192}) {
      const int lb = lbk * 1024;
      const size_t csm = (size_t)n * 4 + lb + 16;
      if (csm > 227 * 1024) continue;
      PCK(cudaFuncSetAttribute(kcl, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)csm));
      PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kcl, 1024, csm));
      if (per < 1) continue;
      for (int per_launch : {8, 1}) {
        double us = graph_us([&](cudaStream_t st, int) {
          for (int p = 0; p < P; p += per_launch)
            launch_pdl(st, 1, sms, 1024, csm, kcl, a, p, per_launch, 1, lb);
        }, 1, 1) / P;
        std::vector<float> out(n);
        PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
        const bool same = !memcmp(ref.data(), out.data(), n * sizeof(float));
        printf("chainl n %5d: %3d KB landed a block, %d phases a launch, pdl %7.2f us a product, "
               "%3.0f%% of copy%s\n", n, lbk, per_launch, us,
               100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, same ? "" : "  OUTPUT DIFFERS");
      }
    }
    // Landed rows: 512-thread blocks, one an SM; rows landed a block.
    auto kl = k_land<D>;
    for (int land : {0, 2, 4, 8, 12}) {
      const size_t lsm = (size_t)n * 4 + (size_t)land * n * 2 + 16;
      if (lsm > 113 * 1024) continue;
      PCK(cudaFuncSetAttribute(kl, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lsm));
      PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kl, 512, lsm));
      for (int pdl = 0; pdl < 2; pdl++) {
        double us = graph_us([&](cudaStream_t st, int) {
          for (int p = 0; p < P; p++) launch_pdl(st, pdl, sms, 512, lsm, kl, a, p, land, pdl);
        }, pdl, 1) / P;
        std::vector<float> out(n);
        PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
        const bool same = !memcmp(ref.data(), out.data(), n * sizeof(float));
        printf("land  n %5d: %2d rows landed a block (%3zu KB smem, %d blocks/SM fit), %-5s %7.2f us a "
               "product, %3.0f%% of copy%s\n", n, land, lsm / 1024, per, pdl ? "pdl" : "plain", us,
               100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, same ? "" : "  OUTPUT DIFFERS");
      }
    }
    chain_free(a, Wh, yh);
  }
}

// ---------------------------------------------------------------- flow
// Dataflow between a pair of dependent products instead of a boundary
// (docs/CUDA.md "Session 25": a row-split producer feeding a column-split
// consumer). The P products of `chain` as P / 2 pairs: the first of a pair
// is k_chain's phase (a warp's rows, each row's sum into y) that also counts
// the rows it finishes by chunk of FC rows; the second is split by column
// chunk: warp gw takes chunk gw % (n / FC) of a range of rows (the same
// ranges for every chunk), loads its first weights, waits for its chunk's
// counter (the FC producer rows that make those columns of x), writes its
// rows' partial sums by chunk, and the warp that completes a range adds the
// range's partials in chunk order (the same bits whatever the timing) and
// counts the range done. A pair's producer waits for the previous pair's
// ranges (or, first in a launch, for the previous grid). Counters are zeroed
// by a memset at the head of each chain. Session 34 (docs/CUDA.md): slower
// than two launches, and slower even with the waits left out.
#ifndef FLOW_FC
#define FLOW_FC 512  // -DFLOW_FC=1024: chunks of 1024 columns
#endif
// IPR = 2^LG: 512-byte steps a row of a chunk; n / FG bounds the row ranges.
constexpr int FC = FLOW_FC, FG = 2, IPR = FC / 256, LG = IPR == 4 ? 2 : 1;
struct flow_args {
  chain_args c;
  float *part;    // [n / FC][n] consumer partial sums by column chunk
  unsigned *cnt;  // per pair: [n / FC] chunk counters, [n / FG] group counters, done; then an error flag
};
static __device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Spins until *p >= target (a bounded wait: a hang sets the error flag).
static __device__ __forceinline__ void flow_wait(const unsigned *p, unsigned target, unsigned *err) {
  for (long k = 0; ld_acquire(p) < target; k++)
    if (k > (1l << 26)) { atomicExch(err, 1u); return; }
}
template <int D>
__global__ void __launch_bounds__(1024, 1) k_flow(flow_args f, int q0, int nq, int pdl, int nowait) {
  extern __shared__ float xs[];
  const chain_args &a = f.c;
  const int n = a.n, nw = blockDim.x >> 5, lane = threadIdx.x & 31;
  const int gw = blockIdx.x * nw + (threadIdx.x >> 5), tw = gridDim.x * nw;
  const int r0 = (int)((long)gw * n / tw), r1 = (int)((long)(gw + 1) * n / tw);
  const int ls = a.log_steps, items = (r1 - r0) << ls;
  const int nch = n / FC, ngr = n / FG, stride = nch + ngr + 1, nr = tw / nch;
  unsigned *err = f.cnt + (size_t)stride * 8;  // after 8 pairs' counters
  uint4 w[D];
  for (int q = q0; q < q0 + nq; q++) {
    const int p = 2 * q;
    unsigned *chunk = f.cnt + (size_t)q * stride, *grp = chunk + nch, *done = grp + ngr;
    // Producer: rows r0..r1 of W_p, counted by chunk.
    const __half *W = a.W[p];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < items) w[k] = chain_ld(W, n, ls, r0, k);
    if (q == q0) {
      if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
      if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    } else {
      if (threadIdx.x == 0) flow_wait(f.cnt + (size_t)(q - 1) * stride + nch + ngr, nr, err);
      __syncthreads();
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = __ldcg(a.y[p] + i);
    __syncthreads();
    float *yp = a.y[p + 1];
    const int sm = (1 << ls) - 1;
    stream_rows<D>(items, ls, w, [&](int i) { return chain_ld(W, n, ls, r0, i); },
                   [&](const uint4 &v, int i, float acc) {
                     return chain_dot8(v, xs, 256 * (i & sm) + 8 * lane, acc);
                   },
                   [&](int r, float acc) {
                     if (lane == 0) {
                       yp[r0 + r] = acc;
                       __threadfence();
                       atomicAdd(chunk + (r0 + r) / FC, 1u);
                     }
                   });
    // Consumer: warp gw takes chunk c = gw % nch and the rows of range j =
    // gw / nch (the same ranges for every chunk), streamed as chain_stream
    // streams rows (IPR steps a row: FC columns), x's chunk in the warp's
    // 4 FC bytes of shared memory; one fence and count a warp.
    if (gw < nr * nch) {
      const __half *V = a.W[p + 1];
      const float *x = a.y[p + 1];
      const int c = gw % nch, j = gw / nch;  // a block's warps on whole rows: DRAM pages read together
      const int q0 = (int)((long)j * n / nr), q1 = (int)((long)(j + 1) * n / nr), its = IPR * (q1 - q0);
      const uint4 *base = (const uint4 *)(V + (size_t)q0 * n + c * FC) + lane;
      const int n16 = n / 8;  // a row in 16-byte pieces
      auto ldc = [&](int i) { return __ldg(base + (i >> LG) * n16 + 32 * (i & (IPR - 1))); };
#pragma unroll
      for (int k = 0; k < D; k++)
        if (k < its) w[k] = ldc(k);
      if (lane == 0 && !nowait) flow_wait(chunk + c, FC, err);
      __syncwarp();
      float *xw = xs + n + FC * (threadIdx.x >> 5);  // the warp's chunk of x (a lane reads its own)
#pragma unroll
      for (int k = 0; k < 2 * IPR; k++)
        ((float4 *)xw)[64 * (k >> 1) + 2 * lane + (k & 1)] =
            __ldcg((const float4 *)(x + c * FC + 256 * (k >> 1) + 8 * lane) + (k & 1));
      stream_rows<D>(
          its, LG, w, ldc,
          [&](const uint4 &v, int i, float acc) {
            return chain_dot8(v, xw, 256 * (i & (IPR - 1)) + 8 * lane, acc);
          },
          [&](int r, float acc) {
            if (lane == 0) f.part[(size_t)c * n + q0 + r] = acc;
          });
      unsigned old = 0;
      if (lane == 0) {
        __threadfence();
        old = atomicAdd(grp + j, 1u);
      }
      old = __shfl_sync(0xffffffffu, old, 0);
      if (old == (unsigned)nch - 1) {  // the range's last chunk: its sums in chunk order
        __threadfence();
        float *y = a.y[p + 2];
        for (int r = q0 + lane; r < q1; r += 32) {
          float t = 0.0f;
          for (int cc = 0; cc < nch; cc++) t += __ldcg(f.part + (size_t)cc * n + r);
          y[r] = t;
        }
        __threadfence();
        __syncwarp();
        if (lane == 0) atomicAdd(done, 1u);
      }
    }
    __syncthreads();  // xs is restaged by the next pair
  }
}

// ||a - b|| / ||a||.
static double rel_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); i++) d += (double)(a[i] - b[i]) * (a[i] - b[i]), s += (double)a[i] * a[i];
  return s > 0 ? sqrt(d / s) : 0.0;
}

static void probe_flow(double bw) {
  const int P = 8, D = 4;  // 4 steps in flight: k_flow spills at 6
  int sms = 0, per = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto kc = k_chain<D>, kc6 = k_chain<6>;  // kc6: chain's D (spills in k_flow)
  auto kf = k_flow<D>;
  for (int n : {4096, 8192}) {
    const size_t smem = (size_t)n * sizeof(float);
    PCK(cudaFuncSetAttribute(kc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    PCK(cudaFuncSetAttribute(kc6, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const size_t fsm = smem + 32 * FC * sizeof(float);  // + a warp's chunk of x
    PCK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
    PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kf, 1024, fsm));
    if (per < 1) { printf("flow n %d: no room\n", n); continue; }
    flow_args f = {};
    chain_args &a = f.c;
    std::vector<const __half *> Wh;
    std::vector<float *> yh;
    std::vector<__half> h((size_t)n * n);
    // Values of mean 0 and y's scale near x's (uniform in +-sqrt(3 / n)).
    const float amp = sqrtf(3.0f / n);
    for (size_t i = 0; i < h.size(); i++) {
      uint32_t t = (uint32_t)i * 2654435761u;
      t ^= t >> 15, t *= 0x2c1b3c6du, t ^= t >> 12;
      h[i] = __float2half(amp * ((float)(t % 2048) / 1024.0f - 1.0f));
    }
    std::vector<float> x0(n);
    for (int i = 0; i < n; i++) x0[i] = sinf(0.37f * i);
    chain_alloc(a, n, P, h, x0, Wh, yh);
    const int stride = n / FC + n / FG + 1;
    const size_t cb = ((size_t)stride * 8 + 1) * sizeof(unsigned);
    PCK(cudaMalloc((void **)&f.cnt, cb));
    PCK(cudaMalloc((void **)&f.part, (size_t)(n / FC) * n * sizeof(float)));
    const double mb = (double)n * n * 2 / 1e6;
    std::vector<float> ref;
    struct way { const char *name; int kind, per_launch; };  // kind 0 k_chain, 1 k_flow, 2 D 6, 3 k_flow nowait
    const way ways[] = {{"boundaries (1 product a launch)", 0, 1},
                        {"boundaries, 6 steps in flight", 2, 1},
                        {"barriers (8 phases, 1 launch)", 0, 8},
                        {"flow pairs, 1 pair a launch", 1, 1},
                        {"flow pairs, 2 pairs a launch", 1, 2},
                        {"flow pairs, 4 pairs, 1 launch", 1, 4},
                        {"flow pairs, 1 a launch, no waits", 3, 1}};
    for (int round = 0; round < 2; round++)
      for (const way &wy : ways) {
        double us = graph_us([&](cudaStream_t st, int) {
          PCK(cudaMemsetAsync(f.cnt, 0, cb, st));
          if (wy.kind == 0 || wy.kind == 2)
            for (int p = 0; p < P; p += wy.per_launch)
              launch_pdl(st, 1, sms, 1024, smem, wy.kind ? kc6 : kc, a, p, wy.per_launch, 1);
          else
            for (int q = 0; q < P / 2; q += wy.per_launch)
              launch_pdl(st, 1, sms, 1024, fsm, kf, f, q, wy.per_launch, 1, wy.kind == 3);
        }, 1, 1) / P;
        std::vector<float> out(n);
        unsigned e = 0;
        PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
        PCK(cudaMemcpy(&e, f.cnt + (size_t)stride * 8, sizeof e, cudaMemcpyDeviceToHost));
        if (ref.empty()) ref = out;
        printf("flow FC %4d n %5d (%5.1f MB a product): %-32s %7.2f us a product, %3.0f%% of copy, "
               "||y - y0|| / ||y0|| %.1e%s\n", FC, n, mb, wy.name, us,
               100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, rel_diff(ref, out), e ? "  WAIT TIMED OUT" : "");
      }
    chain_free(a, Wh, yh);
    PCK(cudaFree(f.cnt)); PCK(cudaFree(f.part));
  }
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  if (strcmp(what, "read") && strcmp(what, "mma") && strcmp(what, "chain") &&
      strcmp(what, "flow")) {
    fprintf(stderr, "usage: probes read|mma|chain|flow\n");
    return 2;
  }
  double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  if (!strcmp(what, "read")) probe_read(bw);
  else if (!strcmp(what, "chain")) probe_chain(bw);
  else if (!strcmp(what, "flow")) probe_flow(bw);
  else probe_mma(bw);
  return 0;
}
