// Load patterns of the matrix-vector kernels, loads only (session 23).
//
// Question: the quantized products read 58-74% of the copy rate against
// F16's 92% (session 20), and neither instructions (session 15's tensor-core
// kernel: 4x fewer, no faster), bytes in flight (v10) nor x work explained
// it. Session 6 saw a 16-rows-by-64-bytes pattern read 72-77% loads-only
// where contiguous warp reads take 87%. What does each format's per-lane
// load pattern cost with no arithmetic, and does a warp that loads its
// blocks as contiguous 512-byte runs and redistributes them through shared
// memory get F16's rate back?
//
// Patterns (each warp a contiguous share of the buffer, units of U bytes;
// every loaded word folded into a checksum so no load is dropped):
//   flat    lane l loads 16 bytes at 16 l of each 512-byte unit (F16's)
//   wide    Q4_K wide format (mvr_w4.cuh): 8 super-blocks a unit, lane
//           (sb = l / 4, p = l % 4) the 16-byte header and qs halves
//           32p + 16e, 32p + 16 - 16e (e = p / 2)
//   q8reg   Q8_0 register format: 32 blocks of 34 bytes a unit, lane l the 9
//           aligned words from 34 l & ~3
//   stage   32 Q4_K super-blocks (4608 bytes) a unit: lane l loads chunks
//           l + 32 i (i < 9, contiguous 512 bytes a load), stores them in
//           the warp's shared memory, then reads its own super-block's 9
//           chunks back (lane stride 144 bytes: conflict-free)
//   async   the same by cp.async into S stages a warp (no registers wait)
//
// Part 2, with the arithmetic: the wide Q4_K format's dot (mvr_w4.cuh) on
// 16-bit x staged in shared memory (rows of 4096 columns: 2 steps of 8
// super-blocks), a unit one step of one row, D units ahead, 512 threads:
//   reg     the engine's way: the lane's 3 pieces loaded into a ring of
//           D + 1 register sets
//   acg/aca the same pieces by cp.async (.cg: L2 only; .ca: through L1)
//           into the lane's own shared-memory slots
//   aflat   the step's 1152 bytes by cp.async as contiguous 16-byte pieces
//           (lane l pieces l, l + 32, l + 64), then each lane reads its 3
//           pieces from the warp's slot after __syncwarp
//   xreg    register loads, but x of the lane's fixed columns loaded once
//           into registers (a warp on one step walking rows); xred: the same
//           plus each row's sum over the warp (5 shuffles)
//
// Part 3 (session 35): the register kernel's FP8 and F16 formats in the
// same loop, with the loads alone and the arithmetic alone (comment there).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mvpat.cu -o mvpat && ./mvpat
//   (MVPAT_DOT=1 ./mvpat: part 2 only; MVPAT_FP8=1: part 3 only; =2: with the
//   cuts at 2 and 3 items in flight and the engine's per-launch work)
#include "backend/cuda/internal.cuh"
#include "backend/cuda/mvr.cuh"

#include "probe_util.cuh"

static __device__ __forceinline__ uint32_t fold4(uint4 r) { return r.x + r.y * 3 + r.z * 5 + r.w * 7; }
static __device__ __forceinline__ uint4 ld16(const uint8_t *p) { return __ldg((const uint4 *)p); }

// Warp w's units [u0, u1) of n: an even split.
struct share {
  size_t u0, u1;
  int lane;
  __device__ share(size_t n) {
    const int NTW = blockDim.x / 32;
    const size_t TW = (size_t)gridDim.x * NTW, gw = (size_t)blockIdx.x * NTW + (threadIdx.x >> 5);
    u0 = gw * n / TW, u1 = (gw + 1) * n / TW, lane = threadIdx.x & 31;
  }
};

template <int D>
__global__ void __launch_bounds__(1024, 1) k_flat(const uint8_t *p, size_t n, uint32_t *out) {
  share s(n);
  uint32_t acc = 0;
  for (size_t u = s.u0; u < s.u1; u += D) {
    uint4 r[D];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) r[k] = ld16(p + 512 * (u + k) + 16 * s.lane);
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) acc ^= fold4(r[k]);
  }
  if (acc == 0x12345678u) out[0] = acc;
}

template <int D>
__global__ void __launch_bounds__(1024, 1) k_wide(const uint8_t *p, size_t n, uint32_t *out) {
  share s(n);
  const int sb = s.lane >> 2, q = s.lane & 3, e = q >> 1;
  uint32_t acc = 0;
  for (size_t u = s.u0; u < s.u1; u += D) {
    uint4 h[D], a[D], b[D];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) {
        const uint8_t *blk = p + 1152 * (u + k) + 144 * sb;
        h[k] = ld16(blk), a[k] = ld16(blk + 16 + 32 * q + 16 * e), b[k] = ld16(blk + 32 + 32 * q - 16 * e);
      }
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) acc ^= fold4(h[k]) + fold4(a[k]) * 11 + fold4(b[k]) * 13;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

template <int D>
__global__ void __launch_bounds__(1024, 1) k_q8reg(const uint8_t *p, size_t n, uint32_t *out) {
  share s(n);
  uint32_t acc = 0;
  for (size_t u = s.u0; u < s.u1; u += D) {
    uint32_t r[D][9];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) {
        const uint32_t *w = (const uint32_t *)(((uintptr_t)(p + 1088 * (u + k) + 34 * s.lane)) & ~(uintptr_t)3);
#pragma unroll
        for (int i = 0; i < 9; i++) r[k][i] = __ldg(w + i);
      }
#pragma unroll
    for (int k = 0; k < D; k++)
      if (u + k < s.u1) {
#pragma unroll
        for (int i = 0; i < 9; i++) acc ^= r[k][i] * (2 * i + 1);
      }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Registers -> shared memory -> the lane's own super-block. NT threads.
template <int NT>
__global__ void __launch_bounds__(NT, 1) k_stage(const uint8_t *p, size_t n, uint32_t *out) {
  extern __shared__ uint4 sm[];
  share s(n);
  uint4 *w = sm + (threadIdx.x >> 5) * 288;
  uint32_t acc = 0;
  uint4 r[9];
  if (s.u0 < s.u1) {
#pragma unroll
    for (int i = 0; i < 9; i++) r[i] = ld16(p + 4608 * s.u0 + 16 * (s.lane + 32 * i));
  }
  for (size_t u = s.u0; u < s.u1; u++) {
#pragma unroll
    for (int i = 0; i < 9; i++) w[s.lane + 32 * i] = r[i];
    if (u + 1 < s.u1) {  // the next unit's loads before this one's reads
#pragma unroll
      for (int i = 0; i < 9; i++) r[i] = ld16(p + 4608 * (u + 1) + 16 * (s.lane + 32 * i));
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 9; i++) acc ^= fold4(w[9 * s.lane + i]) * (2 * i + 1);
    __syncwarp();
  }
  if (acc == 0x12345678u) out[0] = acc;
}

static __device__ __forceinline__ void cpa16(void *dst, const void *src) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// cp.async into S stages of one unit (4608 bytes) a warp. NT threads.
template <int NT, int S>
__global__ void __launch_bounds__(NT, 1) k_async(const uint8_t *p, size_t n, uint32_t *out) {
  extern __shared__ uint4 sm[];
  share s(n);
  uint4 *w = sm + (threadIdx.x >> 5) * 288 * S;
  uint32_t acc = 0;
#pragma unroll
  for (int k = 0; k < S - 1; k++) {
    if (s.u0 + k < s.u1)
#pragma unroll
      for (int i = 0; i < 9; i++)
        cpa16(w + 288 * k + s.lane + 32 * i, p + 4608 * (s.u0 + k) + 16 * (s.lane + 32 * i));
    asm volatile("cp.async.commit_group;\n" ::);
  }
  int st = 0;
  for (size_t u = s.u0; u < s.u1; u++) {
    const size_t v = u + S - 1;
    const int sv = (st + S - 1) % S;
    if (v < s.u1)
#pragma unroll
      for (int i = 0; i < 9; i++)
        cpa16(w + 288 * sv + s.lane + 32 * i, p + 4608 * v + 16 * (s.lane + 32 * i));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 9; i++) acc ^= fold4(w[288 * st + 9 * s.lane + i]) * (2 * i + 1);
    __syncwarp();
    st = (st + 1) % S;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// GB/s of one launch over `mb` MB windows of the 1 GiB buffer (a graph of 20
// launches, each at the next window: nothing is read from L2).
template <class K>
static void row(const char *name, K kern, int nt, size_t smem, size_t unit, const uint8_t *buf,
                uint32_t *out, double bw) {
  if (smem > 48 * 1024) PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int sms = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("%-22s", name);
  for (double mb : {9.4, 33.0, 66.0, 235.0}) {
    const size_t n = (size_t)(mb * 1e6) / unit, win = n * unit;
    int i = 0;
    double us = graph_us([&](cudaStream_t st, int pdl) {
      const uint8_t *q = buf + (win * (size_t)i++) % ((1ull << 30) - win) / 4608 * 4608;
      launch_pdl(st, pdl, sms, nt, smem, kern, q, n, out);
    }, 1);
    printf(" %5.0fMB %7.2fus %3.0f%%", mb, us, 100.0 * win / (us * 1e-6) / 1e9 / bw);
  }
  printf("\n");
}


// ---- part 2: loads and the wide Q4_K dot -----------------------------------
enum { M_REG, M_ACG, M_ACA, M_AFLAT, M_XREG, M_XRED };
using FQ = mvr_wide4<WK_Q4_K>;
// The lane's 3 pieces (FQ::load's): header, qs halves 32p + 16e, 32p + 16 - 16e.
static __device__ __forceinline__ void q4k_addrs(const uint8_t *blk, int p, const uint8_t **a) {
  const int e = p >> 1;
  a[0] = blk, a[1] = blk + 16 + 32 * p + 16 * e, a[2] = blk + 32 + 32 * p - 16 * e;
}

template <int MODE>
static __device__ __forceinline__ void cpa(uint32_t d, const void *src) {
  if (MODE == M_ACA)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
static __device__ __forceinline__ uint4 lds16(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
  return v;
}
template <int D>
static __device__ __forceinline__ void cwait(int ahead) {
  if (D >= 3 && ahead >= 3) asm volatile("cp.async.wait_group 3;\n" ::: "memory");
  else if (D >= 2 && ahead >= 2) asm volatile("cp.async.wait_group 2;\n" ::: "memory");
  else if (ahead >= 1) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  else asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// COLS 4096: x of 4096 columns (2 planes + a uint4 a group), then the slots.
template <int MODE, int D>
__global__ void __launch_bounds__(512, 1) k_dot(const uint8_t *p, size_t n, uint32_t *out) {
  extern __shared__ uint4 sm[];
  constexpr int COLS = 4096, XB = 2 * COLS + COLS / 32 * 16;
  uint8_t *xq = (uint8_t *)sm;
  for (int i = threadIdx.x; i < XB / 4; i += blockDim.x) ((uint32_t *)xq)[i] = 0x01020304u * (i & 7);
  __syncthreads();
  share s(n);
  const int sb = s.lane >> 2, q = s.lane & 3, warp = threadIdx.x >> 5;
  const uint32_t slots = smem_addr(xq + XB);
  // slot k: MODE reg unused; acg/aca lane region 48 bytes; aflat warp region 1152 bytes
  auto slot = [&](int k) -> uint32_t {
    return MODE == M_AFLAT ? slots + (uint32_t)((warp * (D + 1) + k) * 1152)
                           : slots + (uint32_t)(((warp * (D + 1) + k) * 32 + s.lane) * 48);
  };
  FQ::w_t w[D + 1];
  float acc = 0.0f;
  mvr_x4 xr;
  mvr_load_x4(xr, xq, COLS, sb, q, true);
  size_t nl = s.u0;
  int ld = 0, cp = 0;
  auto load = [&](int k) {
    const uint8_t *blk = p + 1152 * nl + 144 * sb;
    if (MODE == M_REG || MODE == M_XREG || MODE == M_XRED) {
      FQ::load(w[k], blk, q);
    } else if (MODE == M_AFLAT) {
      const uint8_t *u = p + 1152 * nl;
#pragma unroll
      for (int i = 0; i < 3; i++)
        if (s.lane + 32 * i < 72) cpa<M_ACG>(slot(k) + 16 * (s.lane + 32 * i), u + 16 * (s.lane + 32 * i));
    } else {
      const uint8_t *a[3];
      q4k_addrs(blk, q, a);
#pragma unroll
      for (int i = 0; i < 3; i++) cpa<MODE>(slot(k) + 16 * i, a[i]);
    }
    if (MODE == M_ACG || MODE == M_ACA || MODE == M_AFLAT)
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    nl++, ld++;
  };
  auto compute = [&](int k, size_t u) {
    FQ::w_t r;
    if (MODE == M_REG || MODE == M_XREG || MODE == M_XRED) {
      r = w[k];
    } else {
      cwait<D>(ld - ++cp);
      if (MODE == M_AFLAT) {
        __syncwarp();
        const uint8_t *a[3];
        q4k_addrs((const uint8_t *)0 + 144 * sb, q, a);
        r.h = lds16(slot(k) + (uint32_t)(uintptr_t)a[0]);
        r.q0 = lds16(slot(k) + (uint32_t)(uintptr_t)a[1]);
        r.q1 = lds16(slot(k) + (uint32_t)(uintptr_t)a[2]);
      } else {
        r.h = lds16(slot(k)), r.q0 = lds16(slot(k) + 16), r.q1 = lds16(slot(k) + 32);
      }
    }
    if (MODE == M_XREG || MODE == M_XRED) {  // x of the lane's fixed columns, in registers
      float d = FQ::dot(r, xr, q);
      if (MODE == M_XRED)  // the row's sum over the warp, as a row-streaming warp would need
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
      acc += d;
    } else {
      mvr_x4 x;
      mvr_load_x4(x, xq, COLS, (int)(u & 1) * 8 + sb, q, true);
      acc += FQ::dot(r, x, q);
    }
    if (MODE == M_AFLAT) __syncwarp();  // every lane's reads before the slot is copied again
  };
  for (int k = 0; k < D && nl < s.u1; k++) load(k);
  for (size_t u = s.u0; u < s.u1; u += D + 1) {
#pragma unroll
    for (int k = 0; k <= D; k++) {
      if (u + k >= s.u1) break;
      if (nl < s.u1) load((k + D) % (D + 1));
      compute(k, u + k);
    }
  }
  if (acc == 1234.5f) out[0] = __float_as_uint(acc);
}

template <int MODE, int D>
static void dot_row(const char *name, const uint8_t *buf, uint32_t *out, double bw) {
  const size_t smem = 2 * 4096 + 128 * 16 + (MODE == M_REG || MODE >= M_XREG ? 0 : MODE == M_AFLAT ? 16 * (D + 1) * 1152 : 16 * (D + 1) * 32 * 48);
  char nm[64];
  snprintf(nm, sizeof nm, "%s D%d", name, D);
  row(nm, k_dot<MODE, D>, 512, smem, 1152, buf, out, bw);
}

// ---- part 3: the register kernel's f32-x formats, loop by loop (session 35) ---
// FP8 E4M3 reads ~70% of the copy rate where F16 reads ~90% on the same
// kernel, whatever its items in flight, load width, conversions or x reads
// (docs/CUDA.md, sessions 12, 30, 35). Here each format's own load, load_x
// and dot (mvr_fmt) run in the engine's ring (mvr_ring), a warp a contiguous share of units
// (a unit one step: FP8 4 blocks, 528 bytes; F16 8 blocks, 512 bytes) of
// rows of 4096 columns, x f32 in shared memory:
//   full    the loads and the dot, as the engine's loop
//   loads   the loads only (every word folded into a checksum)
//   l1      the dot on two units read over and over (L1 hits): the loop's
//           own rate with memory taken out (the MB and % are those the
//           same number of units would be)
// FP8 formats with one thing taken out (wrong sums; timing only): x not
// read (a constant), or the lane's codes as one 16-byte load at the 16-byte
// boundary at or below its place in the block, or both.
template <bool NOX, bool LD16>
struct fp8_cut : mvr_fmt<WK_FP8_E4M3> {
  using B = mvr_fmt<WK_FP8_E4M3>;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    if (!LD16) return B::load(w, blk, j);
    w.d = mvr_ld4(blk);
    const uint4 q = mvr_ld16((const uint8_t *)(((uintptr_t)blk + 4 + 16 * j) & ~(uintptr_t)15));
    w.q[0] = q.x, w.q[1] = q.y, w.q[2] = q.z, w.q[3] = q.w;
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    if (!NOX) return B::dot(w, x, j);
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float f[4];
      mvr_fp8x4<WK_FP8_E4M3>(w.q[i], f);
      a0 = fmaf(f[0], 0.5f, a0), a1 = fmaf(f[1], 0.25f, a1);
      a0 = fmaf(f[2], 0.75f, a0), a1 = fmaf(f[3], 1.5f, a1);
    }
    return __uint_as_float(w.d) * (a0 + a1);
  }
};
//   engine  full, plus the engine's per-launch work around the loop: the
//           first D items loaded, then the dependent-launch trigger and wait,
//           x staged from global memory after the wait (a barrier), and each
//           row's sum over the warp stored at its end (not yet run)
enum { F_FULL, F_LOADS, F_L1, F_ENGINE };
__device__ float g_fx[4096];       // F_ENGINE's x in global memory
__device__ float g_fy[1 << 17];    // F_ENGINE's row sums
template <int T, int MODE, int D, class F = mvr_fmt<T>>
__global__ void __launch_bounds__(1024, 1) k_fdot(const uint8_t *p, size_t n, uint32_t *out) {
  using W = typename F::w_t;
  constexpr int COLS = 4096, BPS = 32 / F::LPB, BYTES = qtype<T>::BYTES;
  constexpr int BPR = COLS / qtype<T>::BLOCK;
  constexpr size_t UNIT = (size_t)BPS * BYTES;
  constexpr int UPR = BPR / BPS;  // units a row
  extern __shared__ float4 fx[];  // x: COLS floats
  if (MODE != F_ENGINE) {
    for (int i = threadIdx.x; i < COLS / 4; i += blockDim.x)
      fx[i] = make_float4(0.25f * (i & 3), -0.5f, 0.125f * (i & 7), 1.0f);
    __syncthreads();
  }
  share s(n);
  const int sub = s.lane / F::LPB, j = s.lane % F::LPB;
  W w[D + 1];
  float acc = 0.0f;
  uint32_t fold = 0;
  size_t nl = s.u0, cu = s.u0;  // the next unit to load, to compute
  auto load = [&](W &r, int) {
    const size_t u = MODE == F_L1 ? (nl & 1) : nl;
    F::load(r, p + UNIT * u + (size_t)BYTES * sub, j);
    nl++;
  };
  auto compute = [&](const W &r, int) {
    const size_t u = cu++;
    if (MODE == F_LOADS) {
      const uint32_t *q = (const uint32_t *)&r;
#pragma unroll
      for (int i = 0; i < (int)(sizeof(W) / 4); i++) fold ^= q[i] * (2 * i + 1);
      return;
    }
    typename F::x_t xv;
    F::load_x(xv, (const uint8_t *)fx, COLS, (int)((u * BPS + sub) % BPR), j, true);
    acc += F::dot(r, xv, j);
    if (MODE == F_ENGINE && (u + 1) % UPR == 0) {  // the row's end: its sum
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (s.lane == 0) g_fy[(u / UPR) & ((1 << 17) - 1)] = acc;
      acc = 0.0f;
    }
  };
  const int total = (int)(s.u1 - s.u0);
  for (int k = 0; k < D && k < total; k++) load(w[k], 0);
  if (MODE == F_ENGINE) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = threadIdx.x; i < COLS / 4; i += blockDim.x) fx[i] = __ldcg((const float4 *)g_fx + i);
    __syncthreads();
  }
  mvr_ring<D, false>(w, total, load, compute);
  if (acc == 1234.5f || fold == 0x12345678u) out[0] = __float_as_uint(acc) ^ fold;
}

template <int T, int MODE, int D, class F = mvr_fmt<T>>
static void fdot_row(const char *name, const uint8_t *buf, uint32_t *out, double bw) {
  char nm[64];
  snprintf(nm, sizeof nm, "%s D%d", name, D);
  row(nm, k_fdot<T, MODE, D, F>, 1024, 4096 * sizeof(float), (size_t)(32 / F::LPB) * qtype<T>::BYTES,
      buf, out, bw);
}

int main() {
  const double bw = copy_gbps();
  printf("copy rate %.0f GB/s (read + write)\n", bw);
  uint8_t *buf;
  uint32_t *out;
  PCK(cudaMalloc(&buf, 1ull << 30)); PCK(cudaMalloc(&out, 64));
  PCK(cudaMemset(buf, 7, 1ull << 30));
  if (getenv("MVPAT_FP8")) {  // part 3 only
    for (int rep = 0; rep < 2; rep++) {
      fdot_row<WK_FP8_E4M3, F_FULL, 1>("fp8 full", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_FULL, 3>("fp8 full", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_LOADS, 1>("fp8 loads", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_LOADS, 3>("fp8 loads", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_L1, 1>("fp8 l1", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_FULL, 1, fp8_cut<true, false>>("fp8 nox full", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_L1, 1, fp8_cut<true, false>>("fp8 nox l1", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_FULL, 1, fp8_cut<false, true>>("fp8 ld16 full", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_L1, 1, fp8_cut<false, true>>("fp8 ld16 l1", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_FULL, 1, fp8_cut<true, true>>("fp8 nox+ld16 full", buf, out, bw);
      fdot_row<WK_FP8_E4M3, F_L1, 1, fp8_cut<true, true>>("fp8 nox+ld16 l1", buf, out, bw);
      if (getenv("MVPAT_FP8")[0] == '2') {  // the cuts at more items in flight (not yet run)
        fdot_row<WK_FP8_E4M3, F_FULL, 2, fp8_cut<true, false>>("fp8 nox full", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_FULL, 3, fp8_cut<true, false>>("fp8 nox full", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_FULL, 2, fp8_cut<false, true>>("fp8 ld16 full", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_FULL, 3, fp8_cut<false, true>>("fp8 ld16 full", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_FULL, 3, fp8_cut<true, true>>("fp8 nox+ld16 full", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_ENGINE, 1>("fp8 engine", buf, out, bw);
        fdot_row<WK_FP8_E4M3, F_ENGINE, 1, fp8_cut<false, true>>("fp8 ld16 engine", buf, out, bw);
        fdot_row<WK_F16, F_ENGINE, 3>("f16 engine", buf, out, bw);
      }
      fdot_row<WK_F16, F_FULL, 1>("f16 full", buf, out, bw);
      fdot_row<WK_F16, F_FULL, 3>("f16 full", buf, out, bw);
      fdot_row<WK_F16, F_LOADS, 1>("f16 loads", buf, out, bw);
      fdot_row<WK_F16, F_LOADS, 3>("f16 loads", buf, out, bw);
      fdot_row<WK_F16, F_L1, 1>("f16 l1", buf, out, bw);
    }
    return 0;
  }
  for (int rep = 0; rep < (getenv("MVPAT_DOT") ? 0 : 2); rep++) {
    row("flat D4", k_flat<4>, 1024, 0, 512, buf, out, bw);
    row("flat D2", k_flat<2>, 1024, 0, 512, buf, out, bw);
    row("flat D1", k_flat<1>, 1024, 0, 512, buf, out, bw);
    row("wide D1", k_wide<1>, 1024, 0, 1152, buf, out, bw);
    row("wide D2", k_wide<2>, 1024, 0, 1152, buf, out, bw);
    row("wide D3", k_wide<3>, 1024, 0, 1152, buf, out, bw);
    row("q8reg D1", k_q8reg<1>, 1024, 0, 1088, buf, out, bw);
    row("q8reg D2", k_q8reg<2>, 1024, 0, 1088, buf, out, bw);
    row("stage 1024", k_stage<1024>, 1024, 32 * 4608, 4608, buf, out, bw);
    row("stage 512", k_stage<512>, 512, 16 * 4608, 4608, buf, out, bw);
    row("async 512 S2", k_async<512, 2>, 512, 16 * 4608 * 2, 4608, buf, out, bw);
    row("async 512 S3", k_async<512, 3>, 512, 16 * 4608 * 3, 4608, buf, out, bw);
    row("async 256 S4", k_async<256, 4>, 256, 8 * 4608 * 4, 4608, buf, out, bw);
    row("async 256 S6", k_async<256, 6>, 256, 8 * 4608 * 6, 4608, buf, out, bw);
  }
  uint32_t *fo = out;
  for (int rep = 0; rep < 2; rep++) {
    dot_row<M_XREG, 1>("dot xreg", buf, fo, bw);
    dot_row<M_XREG, 2>("dot xreg", buf, fo, bw);
    dot_row<M_XREG, 3>("dot xreg", buf, fo, bw);
    dot_row<M_XRED, 2>("dot xred", buf, fo, bw);
    dot_row<M_XRED, 3>("dot xred", buf, fo, bw);
    dot_row<M_REG, 1>("dot reg", buf, fo, bw);
    dot_row<M_REG, 2>("dot reg", buf, fo, bw);
    dot_row<M_ACG, 3>("dot acg", buf, fo, bw);
    dot_row<M_ACA, 3>("dot aca", buf, fo, bw);
    dot_row<M_ACA, 5>("dot aca", buf, fo, bw);
    dot_row<M_AFLAT, 3>("dot aflat", buf, fo, bw);
    dot_row<M_AFLAT, 5>("dot aflat", buf, fo, bw);
  }
  return 0;
}
