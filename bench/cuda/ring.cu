// Probe of session 16 (docs/CUDA.md, "Session 16"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/ring.cu -o ring
//   ./ring
// Can a copy engine that never waits for x keep the memory busy across the
// dependencies of a decode step? The products are those of `probes chain`:
// 8 dependent F16 products y_{p+1} = W_p y_p (2048, 4096 and 8192 square),
// one persistent launch of 8 phases with a grid barrier between phases (or 8
// launches of one phase). k_ring: a block is one producer warp and C consumer
// warps.
// The producer's lane 0 streams the block's rows of every phase, one phase
// after the other, into a ring of S stages of B bytes by bulk copies
// (`cp.async.bulk`, an mbarrier a stage for "full" and one for "empty"); it
// waits only for free stages, never for x, so while the consumers wait at a
// phase's barrier the ring fills with the next phase's rows. The consumers
// take pieces of a stage (a warp a piece of 1-8 KB of a row, 16 bytes a
// lane a 512-byte step, four running sums), sum each piece against x (f32 in
// shared memory), and write a piece's sum to a per-row table; at a phase's
// end they sum each row's pieces in order.
// Two more modes leave out the barriers and x reloads (the ring's own rate),
// and also the sums (the copy engine's rate).
// k_dyn hands the rows out at run time in chunks; k_regs is `probes chain`'s
// register-load kernel with the same barrier, for comparison; trace_ring
// prints k_ring's timeline of a phase boundary. The results are checked
// against a host product in double precision.
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#include "probe_util.cuh"
#include "ring.cuh"

struct ring_args {
  const __half *const *W;  // [P] phase p's matrix (n x n), device array
  float *const *y;         // [P + 1] y[0] the input, y[p + 1] phase p's output
  int n;                   // rows == cols, a multiple of 512
  unsigned *bar;           // [P] phase p's grid barrier counter, zeroed before a launch
  unsigned long long *tim; // k_ring's timeline (ns), [block][phase][8], or null
};
// Timeline marks of k_ring, per block and phase.
enum { T_DONE, T_MET, T_STAGED, T_FIRST, T_STALL, T_ISSUE0, T_ISSUE1, T_N = 8 };

// x in shared memory is stored so that a warp's reads are contiguous: of
// each 256 columns, x[8l .. 8l + 4) (lane l's first four) at 4l, the next
// four at 128 + 4l.
static __device__ __forceinline__ int xpos(int c) {
  const int e = c & 7;
  return (c & ~255) + ((c & 255) >> 3) * 4 + (e < 4 ? e : 124 + e);
}
// Stages y (n f32, written by other blocks) as x in that order.
template <int L = 8>  // 16-byte loads in flight a thread
static __device__ __forceinline__ void stage_x(float *xs, const float *y, int n, int nthr) {
  const float4 *y4 = (const float4 *)y;
  const int n4 = n / 4;
  for (int i0 = threadIdx.x; i0 < n4; i0 += L * nthr) {
    float4 v[L];
#pragma unroll
    for (int k = 0; k < L; k++)
      if (i0 + k * nthr < n4) v[k] = __ldcg(y4 + i0 + k * nthr);
#pragma unroll
    for (int k = 0; k < L; k++)
      if (i0 + k * nthr < n4) *(float4 *)(xs + xpos(4 * (i0 + k * nthr))) = v[k];
  }
}
// acc + 8 halves of w times x[c .. c + 8) (c a multiple of 8).
static __device__ __forceinline__ float dot8(const uint4 &v, const float *xs, int c, float acc) {
  const __half2 *h = (const __half2 *)&v;
  const int o = xpos(c);
  const float4 a = *(const float4 *)(xs + o), b = *(const float4 *)(xs + o + 128);
  float2 f = __half22float2(h[0]);
  acc = fmaf(f.x, a.x, fmaf(f.y, a.y, acc));
  f = __half22float2(h[1]);
  acc = fmaf(f.x, a.z, fmaf(f.y, a.w, acc));
  f = __half22float2(h[2]);
  acc = fmaf(f.x, b.x, fmaf(f.y, b.y, acc));
  f = __half22float2(h[3]);
  return fmaf(f.x, b.z, fmaf(f.y, b.w, acc));
}

// Shared memory: x (n f32) | piece sums (rows a block x n / 512 f32) | ring
// (S x B, 128-aligned) | S full + S empty barriers.
static size_t ring_smem(int n, int blocks, int S, int B) {
  const size_t rows = (size_t)(n + blocks - 1) / blocks;
  size_t o = (size_t)n * 4 + rows * (n / 512) * 4;
  o = (o + 127) & ~(size_t)127;
  return o + (size_t)S * B + 16 * (size_t)S;
}

template <int C>
__global__ void __launch_bounds__(32 * (C + 1), 1)
k_ring(ring_args a, int p0, int np, int pdl, int S, int B, int sync, int lpb, int work) {
  extern __shared__ __align__(128) unsigned char sm[];
  // lpb: log2 of a warp's piece of a row in bytes (10..13); pieces sum apart
  const int n = a.n, rowb = 2 * n, lrow = __ffs(rowb) - 1, slices = rowb >> lpb, CT = 32 * C;
  const int R0 = (int)((long)blockIdx.x * n / gridDim.x);
  const int R1 = (int)((long)(blockIdx.x + 1) * n / gridDim.x);
  const int rows = (n + gridDim.x - 1) / gridDim.x;
  const uint32_t bytes = (uint32_t)(R1 - R0) * rowb;
  const int ns = (int)((bytes + B - 1) / B);
  float *xs = (float *)sm, *part = xs + n;
  size_t o = ((size_t)n * 4 + (size_t)rows * (n / 512) * 4 + 127) & ~(size_t)127;
  unsigned char *ring = sm + o;
  uint64_t *full = (uint64_t *)(ring + (size_t)S * B), *empty = full + S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; i++) bar_init_n(&full[i], 1), bar_init_n(&empty[i], C);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  if (warp == C) {  // the producer
    if (lane == 0) {
      uint32_t g = 0;
      for (int p = p0; p < p0 + np; p++) {
        const unsigned char *src = (const unsigned char *)a.W[p] + (size_t)R0 * rowb;
        unsigned long long stall = 0, *T = a.tim ? a.tim + ((size_t)blockIdx.x * np + p - p0) * T_N : 0;
        for (int s = 0; s < ns; s++, g++) {
          const int slot = (int)(g % S);
          if (g >= (uint32_t)S) {
            const unsigned long long t0 = T ? gtime() : 0;
            bar_wait(&empty[slot], (g / S - 1) & 1);
            if (T) stall += gtime() - t0;
          }
          const uint32_t len = min((uint32_t)B, bytes - (uint32_t)s * B);
          bar_expect(&full[slot], len);
          bulk_copy(ring + (size_t)slot * B, src + (size_t)s * B, len, &full[slot]);
          if (T && s == 0) T[T_ISSUE0] = gtime();
        }
        if (T) T[T_ISSUE1] = gtime(), T[T_STALL] = stall;
      }
    }
    return;
  }

  uint32_t g = 0;
  for (int p = p0; p < p0 + np; p++) {
    unsigned long long *T = a.tim && threadIdx.x == 0 ? a.tim + ((size_t)blockIdx.x * np + p - p0) * T_N : 0;
    if (p == p0) {
      if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    } else if (sync) {
      ring_grid_sync(a.bar + p, CT);
    }
    if (T) T[T_MET] = gtime();
    if (p == p0 || sync) {
      stage_x(xs, a.y[p], n, CT);
      consumers_sync(CT);
    }
    if (T) T[T_STAGED] = gtime();
    for (int s = 0; s < ns; s++, g++) {
      const int slot = (int)(g % S);
      bar_wait(&full[slot], (g / S) & 1);
      if (T && s == 0) T[T_FIRST] = gtime();
      const uint32_t len = min((uint32_t)B, bytes - (uint32_t)s * B);
      const unsigned char *st = ring + (size_t)slot * B;
      for (int j = warp; work && j < (int)(len >> lpb); j += C) {
        const uint32_t off = (uint32_t)s * B + ((uint32_t)j << lpb);
        const int r = (int)(off >> lrow), sl = (int)((off & (rowb - 1)) >> lpb);
        const uint4 *v = (const uint4 *)(st + ((size_t)j << lpb));
        const int c0 = (sl << (lpb - 1)) + 8 * lane;  // the piece's first column, this lane's
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int k = 0; k < (1 << (lpb - 9)); k += 4)  // lpb >= 11
#pragma unroll
          for (int u = 0; u < 4; u++)
            acc[u] = dot8(v[32 * (k + u) + lane], xs, c0 + 256 * (k + u), acc[u]);
        float t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) t += __shfl_xor_sync(0xffffffffu, t, m);
        if (lane == 0) part[r * slices + sl] = t;
      }
      __syncwarp();
      if (lane == 0) bar_arrive(&empty[slot]);
    }
    if (T) T[T_DONE] = gtime();
    consumers_sync(CT);
    for (int r = threadIdx.x; r < R1 - R0; r += CT) {
      float t = 0.0f;
      for (int sl = 0; sl < slices; sl++) t += part[r * slices + sl];
      a.y[p + 1][R0 + r] = t;
    }
    consumers_sync(CT);
  }
}

// k_ring with the rows handed out at run time: the producer claims a
// chunk of CR = B / row bytes whole rows of a phase at a time (an atomic
// counter a phase, zeroed before the launch) once a stage is free, and
// writes the chunk's number beside the stage (-1 after the phase's last
// chunk). So blocks that stream faster take more chunks, and every block
// reaches a phase's barrier within about one chunk of the others. A row is
// one warp's (four running sums over its 512-byte steps), rows of a stage
// spread over the warps by stage.
template <int C>
__global__ void __launch_bounds__(32 * (C + 1), 1)
k_dyn(ring_args a, unsigned *cnt, int p0, int np, int S, int B, int sync, int work) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int n = a.n, rowb = 2 * n, CR = B / rowb, nchunks = n / CR, CT = 32 * C;
  float *xs = (float *)sm;
  unsigned char *ring = sm + (((size_t)n * 4 + 127) & ~(size_t)127);
  uint64_t *full = (uint64_t *)(ring + (size_t)S * B), *empty = full + S;
  int *meta = (int *)(empty + S);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; i++) bar_init_n(&full[i], 1), bar_init_n(&empty[i], C);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  if (warp == C) {  // the producer
    if (lane == 0) {
      uint32_t g = 0;
      for (int p = p0; p < p0 + np; p++) {
        const unsigned char *src = (const unsigned char *)a.W[p];
        for (;; g++) {
          const int slot = (int)(g % S);
          if (g >= (uint32_t)S) bar_wait(&empty[slot], (g / S - 1) & 1);
          const int c = (int)atomicAdd(&cnt[p], 1u);
          if (c >= nchunks) {
            meta[slot] = -1;
            bar_arrive(&full[slot]);
            g++;
            break;
          }
          meta[slot] = c;
          bar_expect(&full[slot], (uint32_t)B);
          bulk_copy(ring + (size_t)slot * B, src + (size_t)c * B, (uint32_t)B, &full[slot]);
        }
      }
    }
    return;
  }

  uint32_t g = 0;
  for (int p = p0; p < p0 + np; p++) {
    if (p == p0) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
    } else if (sync) {
      ring_grid_sync(a.bar + p, CT);
    }
    if (p == p0 || sync) {
      stage_x(xs, a.y[p], n, CT);
      consumers_sync(CT);
    }
    for (;; g++) {
      const int slot = (int)(g % S);
      bar_wait(&full[slot], (g / S) & 1);
      const int c = meta[slot];
      if (c >= 0 && work) {
        const unsigned char *st = ring + (size_t)slot * B;
        for (int j = (int)((warp + (uint32_t)C * CR - (g * CR) % C) % C); j < CR; j += C) {
          const uint4 *v = (const uint4 *)(st + (size_t)j * rowb);
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          for (int k = 0; k < n / 256; k += 4)
#pragma unroll
            for (int u = 0; u < 4; u++)
              acc[u] = dot8(v[32 * (k + u) + lane], xs, 256 * (k + u) + 8 * lane, acc[u]);
          float t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
#pragma unroll
          for (int m = 16; m > 0; m >>= 1) t += __shfl_xor_sync(0xffffffffu, t, m);
          if (lane == 0) a.y[p + 1][c * CR + j] = t;
        }
      }
      __syncwarp();
      if (lane == 0) bar_arrive(&empty[slot]);
      if (c < 0) {
        g++;
        break;
      }
    }
  }
}

// The register-streamed reference of `probes chain` (k_chain, D = 6): each
// warp a contiguous run of rows, 512 bytes a step, D steps in flight, its
// first loads of a phase issued before the phase's barrier.
template <int D>
__global__ void __launch_bounds__(1024, 1) k_regs(ring_args a, int p0, int np, int pdl) {
  extern __shared__ __align__(128) unsigned char sm[];
  float *xs = (float *)sm;
  const int n = a.n, nw = blockDim.x >> 5, lane = threadIdx.x & 31, ls = __ffs(n / 256) - 1;
  const int gw = blockIdx.x * nw + (threadIdx.x >> 5), tw = gridDim.x * nw;
  const int r0 = (int)((long)gw * n / tw), r1 = (int)((long)(gw + 1) * n / tw);
  const int items = (r1 - r0) << ls, sm1 = (1 << ls) - 1;
  if (pdl) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int p = p0; p < p0 + np; p++) {
    const __half *W = a.W[p];
    auto ld = [&](int i) {
      return __ldg((const uint4 *)(W + (size_t)(r0 + (i >> ls)) * n + 256 * (i & sm1)) + lane);
    };
    uint4 w[D];
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < items) w[k] = ld(k);
    if (p == p0) {
      if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    } else {
      ring_grid_sync(a.bar + p, blockDim.x);
    }
    stage_x<2>(xs, a.y[p], n, blockDim.x);
    __syncthreads();
    stream_rows<D>(
        items, ls, w, ld,
        [&](const uint4 &v, int i, float acc) { return dot8(v, xs, 256 * (i & sm1) + 8 * lane, acc); },
        [&](int r, float acc) {
          if (lane == 0) a.y[p + 1][r0 + r] = acc;
        });
    __syncthreads();
  }
}

// Largest |got - ref| over largest |ref|.
static double rel_err(const std::vector<float> &got, const std::vector<double> &ref) {
  double m = 0, d = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    m = std::max(m, std::fabs(ref[i]));
    d = std::max(d, std::fabs(got[i] - ref[i]));
  }
  return d / m;
}

template <int C>
static void run_ring(const ring_args &a, int n, int sms, const std::vector<float *> &yh,
                     const std::vector<double> &ref, double mb, double bw, int P) {
  auto kern = k_ring<C>;
  const int cfg[][3] = {{3, 64, 13}, {2, 64, 12}, {6, 32, 12}};
  for (auto &c : cfg) {
    const int S = c[0], B = c[1] * 1024, lpb = c[2];
    if ((1 << lpb) > 2 * n) continue;  // a piece within a row
    const size_t smem = ring_smem(n, sms, S, B);
    if (smem > 227 * 1024) continue;
    PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per = 0;
    PCK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, 32 * (C + 1), smem));
    if (per < 1) continue;
    // 8 phases a launch; 1 phase a launch; no barriers; no barriers and no
    // sums; barriers and no sums
    for (int mode = 0; mode < 5; mode++) {
      const int per_launch = mode == 1 ? 1 : P, sync = mode < 2 || mode == 4, work = mode < 3;
      const double us = graph_us([&](cudaStream_t st, int) {
        PCK(cudaMemsetAsync(a.bar, 0, P * sizeof(unsigned), st));
        for (int p = 0; p < P; p += per_launch)
          launch_pdl(st, 1, sms, 32 * (C + 1), smem, kern, a, p, per_launch, 1, S, B, sync, lpb, work);
      }, 1, 4) / P;
      std::vector<float> out(n);
      PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
      printf("ring n %5d C %2d S %2d B %2d KB piece %d KB (%3zu KB smem) %-13s %7.2f us a product, %3.0f%% of copy",
             n, C, S, B / 1024, 1 << (lpb - 10), smem / 1024,
             mode == 0 ? "8 phases" : mode == 1 ? "1 phase, pdl" : mode == 2 ? "8, no barrier" : mode == 3 ? "copies only" : "copies+barrier", us,
             100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw);
      if (work && sync) printf(", err %.1e%s", rel_err(out, ref), rel_err(out, ref) < 1e-4 ? "" : "  WRONG");
      printf("\n");
    }
  }
}

template <int C>
static void run_dyn(const ring_args &a, unsigned *cnt, int n, int sms,
                    const std::vector<float *> &yh, const std::vector<double> &ref, double mb,
                    double bw, int P) {
  auto kern = k_dyn<C>;
  for (int kb : {16, 32, 64}) {
    const int B = kb * 1024, S = (200 * 1024 - n * 4) / B;
    if (B < 2 * n || S < 2) continue;
    const size_t smem = (((size_t)n * 4 + 127) & ~(size_t)127) + (size_t)S * B + 20 * (size_t)S;
    PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    // 8 phases; no barriers; no barriers and no sums; barriers and no sums
    for (int mode : {0, 2, 3, 4}) {
      const int sync = mode == 0 || mode == 4, work = mode < 3;
      const double us = graph_us([&](cudaStream_t st, int) {
        PCK(cudaMemsetAsync(cnt, 0, P * sizeof(unsigned), st));
        PCK(cudaMemsetAsync(a.bar, 0, P * sizeof(unsigned), st));
        launch_pdl(st, 1, sms, 32 * (C + 1), smem, kern, a, cnt, 0, P, S, B, sync, work);
      }, 1, 4) / P;
      std::vector<float> out(n);
      PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
      printf("dyn  n %5d C %2d S %2d B %2d KB, %d rows a chunk (%3zu KB smem) %-14s %7.2f us a product, %3.0f%% of copy",
             n, C, S, kb, B / (2 * n), smem / 1024,
             mode == 0 ? "8 phases" : mode == 2 ? "8, no barrier" : mode == 3 ? "copies only" : "copies+barrier",
             us, 100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw);
      if (work && sync) printf(", err %.1e%s", rel_err(out, ref), rel_err(out, ref) < 1e-4 ? "" : "  WRONG");
      printf("\n");
    }
  }
}

// One traced launch of k_ring<8> (S 3, B 64 KB, 8 KB pieces): per phase, the
// median and largest over blocks of each interval of the timeline, in us.
static void trace_ring(ring_args a, int n, int sms, int P) {
  auto kern = k_ring<8>;
  const int S = 3, B = 64 * 1024, lpb = 13;
  const size_t smem = ring_smem(n, sms, S, B);
  PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  std::vector<unsigned long long> h((size_t)sms * P * T_N);
  PCK(cudaMalloc((void **)&a.tim, h.size() * 8));
  for (int work : {0, 1}) {
    for (int rep = 0; rep < 3; rep++) {  // the last of 3 launches
      PCK(cudaMemset(a.tim, 0, h.size() * 8));
      PCK(cudaMemset(a.bar, 0, P * sizeof(unsigned)));
      launch_pdl(0, 1, sms, 32 * 9, smem, kern, a, 0, P, 1, S, B, 1, lpb, work);
      PCK(cudaDeviceSynchronize());
    }
    PCK(cudaMemcpy(h.data(), a.tim, h.size() * 8, cudaMemcpyDeviceToHost));
    auto at = [&](int b, int p, int k) { return (double)h[((size_t)b * P + p) * T_N + k]; };
    printf("trace n %d %s: phase, then median / max over blocks (us) of: wait at the barrier, "
           "x staging, first stage after staging, producer stalls; spread of arrivals; period\n",
           n, work ? "sums" : "copies only");
    for (int p = 1; p < P; p++) {
      std::vector<double> bar_, stg, fst, stl, arr, per;
      for (int b = 0; b < sms; b++) {
        bar_.push_back((at(b, p, T_MET) - at(b, p - 1, T_DONE)) / 1e3);
        stg.push_back((at(b, p, T_STAGED) - at(b, p, T_MET)) / 1e3);
        fst.push_back((at(b, p, T_FIRST) - at(b, p, T_STAGED)) / 1e3);
        stl.push_back(at(b, p, T_STALL) / 1e3);
        arr.push_back(at(b, p - 1, T_DONE) / 1e3);
        per.push_back((at(b, p, T_DONE) - at(b, p - 1, T_DONE)) / 1e3);
      }
      auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
      auto mx = [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); };
      auto mn = [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); };
      printf("  phase %d: barrier %5.2f / %5.2f  staging %5.2f / %5.2f  first %5.2f / %5.2f  "
             "stalls %5.2f / %5.2f  arrivals spread %5.2f  period %5.2f / %5.2f\n",
             p, med(bar_), mx(bar_), med(stg), mx(stg), med(fst), mx(fst), med(stl), mx(stl),
             mx(arr) - mn(arr), med(per), mx(per));
    }
  }
  PCK(cudaFree(a.tim));
}

int main() {
  const double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  int sms = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int P = 8;
  for (int n : {2048, 4096, 8192}) {
    ring_args a = {};
    a.n = n;
    std::vector<const __half *> Wh(P);
    std::vector<float *> yh(P + 1);
    std::vector<std::vector<__half>> h(P, std::vector<__half>((size_t)n * n));
    uint32_t s = 12345u + n;
    for (int p = 0; p < P; p++) {
      for (auto &v : h[p]) {
        s = s * 1664525u + 1013904223u;
        v = __float2half(((float)(s >> 8) / 16777216.0f - 0.5f) * (2.0f / sqrtf((float)n)));
      }
      PCK(cudaMalloc((void **)&Wh[p], h[p].size() * sizeof(__half)));
      PCK(cudaMemcpy((void *)Wh[p], h[p].data(), h[p].size() * sizeof(__half), cudaMemcpyHostToDevice));
    }
    for (int p = 0; p <= P; p++) {
      PCK(cudaMalloc((void **)&yh[p], (size_t)n * sizeof(float)));
      PCK(cudaMemset(yh[p], 0xff, (size_t)n * sizeof(float)));  // NaN: a row left unwritten shows
    }
    std::vector<float> x0(n);
    for (int i = 0; i < n; i++) x0[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    PCK(cudaMemcpy(yh[0], x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    // The host reference: each phase from the previous phase's f32 output
    // rounded as the device rounds its inputs (x is f32 on both).
    std::vector<double> ref(x0.begin(), x0.end());
    for (int p = 0; p < P; p++) {
      std::vector<double> nx(n);
      for (int r = 0; r < n; r++) {
        double t = 0;
        const __half *row = h[p].data() + (size_t)r * n;
        for (int c = 0; c < n; c++) t += (double)__half2float(row[c]) * (float)ref[c];
        nx[r] = t;
      }
      ref.swap(nx);
    }
    h.clear();
    a.W = dev_array(Wh), a.y = dev_array(yh);
    PCK(cudaMalloc((void **)&a.bar, P * sizeof(unsigned)));
    const double mb = (double)n * n * 2 / 1e6;
    printf("n %d: %.1f MB a product, %.2f us at the copy rate\n", n, mb, mb / bw * 1e3);

    auto kr = k_regs<6>;
    const size_t rsm = (size_t)n * 4;
    PCK(cudaFuncSetAttribute(kr, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)rsm));
    for (int per_launch : {1, P}) {
      const double us = graph_us([&](cudaStream_t st, int) {
        PCK(cudaMemsetAsync(a.bar, 0, P * sizeof(unsigned), st));
        for (int p = 0; p < P; p += per_launch) launch_pdl(st, 1, sms, 1024, rsm, kr, a, p, per_launch, 1);
      }, 1, 4) / P;
      std::vector<float> out(n);
      PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
      printf("regs n %5d D 6 %d phase(s) a launch, pdl     %7.2f us a product, %3.0f%% of copy, err %.1e\n",
             n, per_launch, us, 100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, rel_err(out, ref));
    }
    if (n == 4096) trace_ring(a, n, sms, P);
    run_ring<8>(a, n, sms, yh, ref, mb, bw, P);
    run_ring<16>(a, n, sms, yh, ref, mb, bw, P);
    unsigned *cnt;
    PCK(cudaMalloc((void **)&cnt, P * sizeof(unsigned)));
    run_dyn<8>(a, cnt, n, sms, yh, ref, mb, bw, P);
    run_dyn<16>(a, cnt, n, sms, yh, ref, mb, bw, P);
    PCK(cudaFree(cnt));
    for (int p = 0; p < P; p++) PCK(cudaFree((void *)Wh[p]));
    for (int p = 0; p <= P; p++) PCK(cudaFree(yh[p]));
    PCK(cudaFree((void *)a.W)); PCK(cudaFree((void *)a.y)); PCK(cudaFree(a.bar));
  }
  return 0;
}
