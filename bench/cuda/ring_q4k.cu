// Probe of session 16 (docs/CUDA.md, "Session 16"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/ring_q4k.cu -o ring_q4k
//   ./ring_q4k
// ring.cu's question for Q4_K weights and the tensor-core kernel's
// arithmetic as the consumer: is a consumer that reads a stage from shared
// memory fast enough to stay ahead of the copy engine, so that the ring can
// carry a phase's barrier? 8 dependent products y_{p+1} = W_p y_p of n x n
// Q4_K matrices, one persistent launch of 8 phases. A block owns whole
// 16-row tiles (its share of n / 16). The producer warp streams each tile in
// stages of 4 super-blocks of its 16 rows (16 bulk copies of 576 bytes, one
// a lane, rows 576 bytes apart: a quad's two rows fall on different banks);
// C consumer warps in groups of 4 take a stage a group, a warp a
// super-block (mvt_fmt<WK_Q4_K>: 4 mma.m16n8k32 a 32-value group pair of
// the 16 rows against 16-bit x in two planes); at a tile's end the warps'
// row sums are added in warp order. x is rounded to 16 bits per 32 values
// (as mvr_round_x16) once a block a phase. Modes: 8 phases with a grid
// barrier between them; without barriers or x reloads; the copies alone; the
// copies with the barriers; the sums alone (the producer completes each
// stage without copying: the consumers' own rate). Checked against a host
// product of the dequantized weights with x rounded as the device rounds it.
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#include "backend/cuda/internal.cuh"  // MVR_* (mvr.cuh reads them)
#include "backend/cuda/mvt.cuh"       // mvt_fmt<WK_Q4_K>, mvr_split4, quad_sum
#include "probe_util.cuh"
#include "ring.cuh"

struct rq_args {
  const uint8_t *const *W;  // [P] phase p's matrix (n rows of n / 256 Q4_K blocks)
  float *const *y;          // [P + 1]
  int n;                    // a multiple of 1024
  unsigned *bar;            // [P] phase p's grid barrier counter, zeroed before a launch
};


// The consumers round y (n f32, written by other blocks: read past L1) to
// 16 bits per 32 values into xq, in mvr_round_x16's layout: the lo plane, the
// hi plane, then a uint4 a group {d, sum of v over [0, 16), [16, 32), all}.
// 4 lanes a group, 8 values a lane; nthr a multiple of 32.
static __device__ void rq_round_x(const float *y, int n, uint8_t *xq, int nthr) {
  uint4 *xm = (uint4 *)(xq + 2 * (size_t)n);
  const int part = threadIdx.x & 3;
  for (int i = threadIdx.x; i < n / 8; i += nthr) {  // n / 8 a multiple of 32: no lane idles
    const float4 a = __ldcg((const float4 *)y + 2 * i), b = __ldcg((const float4 *)y + 2 * i + 1);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) am = fmaxf(am, fabsf(v[k]));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
    const float inv = am > 0.0f ? 16383.0f / am : 0.0f;
    uint32_t lo[2], hi[2];
    int s = 0;
#pragma unroll
    for (int h = 0; h < 2; h++) mvr_split4(v + 4 * h, inv, lo + h, hi + h, &s);
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    const int s1 = __shfl_xor_sync(0xffffffffu, s, 2);
    *(uint2 *)(xq + 8 * i) = make_uint2(lo[0], lo[1]);
    *(uint2 *)(xq + n + 8 * i) = make_uint2(hi[0], hi[1]);
    if (part == 0)
      xm[i >> 2] = make_uint4(__float_as_uint(am * (1.0f / 16383.0f)), (uint32_t)s, (uint32_t)s1,
                              (uint32_t)(s + s1));
  }
}

// SB super-blocks of 16 rows a stage: 16 copies of 144 SB bytes, to rows
// 144 SB + PAD bytes apart.
static size_t rq_smem(int n, int S, int SB, int PAD) {
  const size_t xb = (2 * (size_t)n + (size_t)n / 32 * 16 + 127) & ~(size_t)127;
  return xb + 32 * 16 * 4 + (size_t)S * 16 * (144 * SB + PAD) + 16 * (size_t)S;
}

// mode: 0 phases with barriers, 1 no barriers, 2 copies only, 3 copies and
// barriers, 4 sums only.
// PAD: bytes between a stage's rows in shared memory (16: the 8 rows a warp
// reads at once start on 8 different bank groups).
template <int C, int SB, int PAD>
__global__ void __launch_bounds__(32 * (C + 1), 1) k_rq(rq_args a, int np, int S, int mode) {
  extern __shared__ __align__(128) uint8_t sm[];
  static_assert(C % 4 == 0 && SB % 4 == 0, "groups of 4 warps, 4 super-blocks a warp step");
  constexpr int RQ_SB = SB, RQ_ROW = SB * 144, RQ_RS = RQ_ROW + PAD, RQ_STAGE = 16 * RQ_RS;
  const int n = a.n, rowb = n / 256 * 144, spt = n / (256 * RQ_SB), CT = 32 * C, NG = C / 4;
  const int tiles = n / 16, T0 = (int)((long)blockIdx.x * tiles / gridDim.x);
  const int T1 = (int)((long)(blockIdx.x + 1) * tiles / gridDim.x);
  uint8_t *xq = sm;
  float *part = (float *)(sm + ((2 * (size_t)n + (size_t)n / 32 * 16 + 127) & ~(size_t)127));
  uint8_t *ring = (uint8_t *)(part + 32 * 16);
  uint64_t *full = (uint64_t *)(ring + (size_t)S * RQ_STAGE), *empty = full + S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool sync = mode == 0 || mode == 3, work = mode == 0 || mode == 1 || mode == 4;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; i++) bar_init_n(&full[i], 1), bar_init_n(&empty[i], 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  if (warp == C) {  // the producer: lane r copies row r of a stage
    uint32_t g = 0;
    for (int p = 0; p < np; p++)
      for (int t = T0; t < T1; t++)
        for (int c = 0; c < spt; c++, g++) {
          const int slot = (int)(g % S);
          if (g >= (uint32_t)S) bar_wait(&empty[slot], (g / S - 1) & 1);
          if (mode == 4) {  // no copy: the stage completes at once
            if (lane == 0) bar_arrive(&full[slot]);
            continue;
          }
          if (lane == 0) bar_expect(&full[slot], 16 * RQ_ROW);
          __syncwarp();
          if (lane < 16)
            bulk_copy(ring + (size_t)slot * RQ_STAGE + lane * RQ_RS,
                    a.W[p] + (size_t)(16 * t + lane) * rowb + (size_t)c * RQ_ROW, RQ_ROW,
                    &full[slot]);
        }
    return;
  }

  const int grp = warp >> 2, sb = warp & 3, gl = lane >> 2;
  uint32_t g = 0;
  for (int p = 0; p < np; p++) {
    if (p == 0) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
    } else if (sync) {
      ring_grid_sync(a.bar + p, CT);
    }
    if (p == 0 || sync) {
      rq_round_x(a.y[p], n, xq, CT);
      consumers_sync(CT);
    }
    for (int t = T0; t < T1; t++) {
      float acc[1][2] = {{0.0f, 0.0f}};
      for (int c = 0; c < spt; c++, g++) {
        if (c % NG != grp) continue;
        const int slot = (int)(g % S);
        bar_wait(&full[slot], (g / S) & 1);
        if (work) {
#pragma unroll
          for (int k = sb; k < RQ_SB; k += 4) {
            const uint8_t *st = ring + (size_t)slot * RQ_STAGE + k * 144;
            mvt_fmt<WK_Q4_K>::w_t w;
#pragma unroll
            for (int r = 0; r < 2; r++) {
              const uint8_t *b = st + (gl + 8 * r) * RQ_RS;
              w.h[r] = *(const uint4 *)b;
              w.q[r][0] = *(const uint4 *)(b + 16 + 16 * (lane & 3));
              w.q[r][1] = *(const uint4 *)(b + 80 + 16 * (lane & 3));
            }
            mvt_fmt<WK_Q4_K>::dot<1>(w, xq, 0, n, RQ_SB * c + k, 1, lane, acc);
          }
        }
        __syncwarp();
        if (lane == 0) bar_arrive(&empty[slot]);
      }
      const float r0 = quad_sum(acc[0][0]), r1 = quad_sum(acc[0][1]);
      if ((lane & 3) == 0) part[warp * 16 + gl] = r0, part[warp * 16 + gl + 8] = r1;
      consumers_sync(CT);
      if (threadIdx.x < 16) {
        float s = 0.0f;
        for (int v = 0; v < C; v++) s += part[v * 16 + threadIdx.x];
        if (work) a.y[p + 1][16 * t + threadIdx.x] = s;
      }
      consumers_sync(CT);
    }
  }
}

// Host: x as the device rounds it (16 bits per 32 values).
static void round16(std::vector<double> &x) {
  for (size_t g = 0; g < x.size(); g += 32) {
    float am = 0.0f;
    for (int k = 0; k < 32; k++) am = fmaxf(am, fabsf((float)x[g + k]));
    const float inv = am > 0.0f ? 16383.0f / am : 0.0f, d = am * (1.0f / 16383.0f);
    for (int k = 0; k < 32; k++) x[g + k] = (double)rintf((float)x[g + k] * inv) * d;
  }
}

template <int C, int SB, int PAD>
static void run_rq(const rq_args &a, int n, int sms, const std::vector<float *> &yh,
                   const std::vector<double> &ref, double mb, double bw, int P) {
  auto kern = k_rq<C, SB, PAD>;
  if (n % (256 * SB)) return;
  for (int kb : {144, 180}) {
    const int S = kb * 1024 / (16 * (144 * SB + PAD));
    const size_t smem = rq_smem(n, S, SB, PAD);
    if (S < 2 || smem > 227 * 1024) continue;
    PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const char *names[] = {"8 phases", "no barrier", "copies only", "copies+barrier", "sums only"};
    for (int mode = 0; mode < 5; mode++) {
      const double us = graph_us([&](cudaStream_t st, int) {
        PCK(cudaMemsetAsync(a.bar, 0, P * sizeof(unsigned), st));
        launch_pdl(st, 1, sms, 32 * (C + 1), smem, kern, a, P, S, mode);
      }, 1, 4) / P;
      printf("rq n %5d C %2d SB %2d pad %2d S %2d (%3zu KB smem) %-14s %7.2f us a product, %3.0f%% of copy",
             n, C, SB, PAD, S, smem / 1024, names[mode], us, 100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw);
      if (mode == 0) {
        std::vector<float> out(n);
        PCK(cudaMemcpy(out.data(), yh[P], n * sizeof(float), cudaMemcpyDeviceToHost));
        double m = 0, d = 0;
        for (int i = 0; i < n; i++)
          m = std::max(m, std::fabs(ref[i])), d = std::max(d, std::fabs(out[i] - ref[i]));
        printf(", err %.1e%s", d / m, d / m < 2e-3 ? "" : "  WRONG");
      }
      printf("\n");
    }
  }
}

// `ring_q4k profile`: one launch each of sums only and of 8 phases at n
// 8192 (16 warps, 8 super-blocks a stage, 8 stages), no reference: for ncu.
static void profile(int sms) {
  const int n = 8192, P = 8, rowb = n / 256 * 144, S = 8;
  rq_args a = {};
  a.n = n;
  std::vector<const uint8_t *> Wh(P);
  std::vector<float *> yh(P + 1);
  for (int p = 0; p < P; p++) {
    PCK(cudaMalloc((void **)&Wh[p], (size_t)n * rowb));
    PCK(cudaMemset((void *)Wh[p], 0x11, (size_t)n * rowb));
  }
  for (int p = 0; p <= P; p++) {
    PCK(cudaMalloc((void **)&yh[p], (size_t)n * sizeof(float)));
    PCK(cudaMemset(yh[p], 0, (size_t)n * sizeof(float)));
  }
  a.W = dev_array(Wh), a.y = dev_array(yh);
  PCK(cudaMalloc((void **)&a.bar, P * sizeof(unsigned)));
  auto kern = k_rq<16, 8, 0>;
  const size_t smem = rq_smem(n, S, 8, 0);
  PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  for (int mode : {4, 0}) {
    PCK(cudaMemset(a.bar, 0, P * sizeof(unsigned)));
    launch_pdl(0, 0, sms, 32 * 17, smem, kern, a, P, S, mode);
    PCK(cudaDeviceSynchronize());
  }
  printf("profile: done\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "profile")) {
    int sms = 0;
    PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    profile(sms);
    return 0;
  }
  const double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  int sms = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int P = 8;
  for (int n : {4096, 8192}) {  // 14336: the host reference takes minutes
    const int rowb = n / 256 * 144;
    rq_args a = {};
    a.n = n;
    std::vector<const uint8_t *> Wh(P);
    std::vector<float *> yh(P + 1);
    std::vector<std::vector<uint8_t>> h(P, std::vector<uint8_t>((size_t)n * rowb));
    uint32_t s = 777u + n;
    for (int p = 0; p < P; p++) {
      rand_q4k(h[p].data(), h[p].size(), n, &s);
      PCK(cudaMalloc((void **)&Wh[p], h[p].size()));
      PCK(cudaMemcpy((void *)Wh[p], h[p].data(), h[p].size(), cudaMemcpyHostToDevice));
    }
    for (int p = 0; p <= P; p++) {
      PCK(cudaMalloc((void **)&yh[p], (size_t)n * sizeof(float)));
      PCK(cudaMemset(yh[p], 0xff, (size_t)n * sizeof(float)));
    }
    std::vector<float> x0(n);
    for (int i = 0; i < n; i++) x0[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    PCK(cudaMemcpy(yh[0], x0.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<double> ref(x0.begin(), x0.end());
    std::vector<float> row(n);
    for (int p = 0; p < P; p++) {
      round16(ref);
      std::vector<double> nx(n);
      for (int r = 0; r < n; r++) {
        const uint8_t *rp = h[p].data() + (size_t)r * rowb;
        double t = 0;
        for (int j = 0; j < n; j++) t += (double)host_q4k_value(rp + 144 * (j / 256), j % 256) * ref[j];
        nx[r] = (float)t;  // the device's f32 output
      }
      ref.swap(nx);
    }
    h.clear();
    a.W = dev_array(Wh), a.y = dev_array(yh);
    PCK(cudaMalloc((void **)&a.bar, P * sizeof(unsigned)));
    const double mb = (double)n * rowb / 1e6;
    printf("n %d: %.1f MB a product, %.2f us at the copy rate\n", n, mb, mb / bw * 1e3);
    run_rq<16, 8, 0>(a, n, sms, yh, ref, mb, bw, P);
    run_rq<16, 8, 16>(a, n, sms, yh, ref, mb, bw, P);
    run_rq<16, 16, 0>(a, n, sms, yh, ref, mb, bw, P);
    run_rq<16, 16, 16>(a, n, sms, yh, ref, mb, bw, P);
    for (int p = 0; p < P; p++) PCK(cudaFree((void *)Wh[p]));
    for (int p = 0; p <= P; p++) PCK(cudaFree(yh[p]));
    PCK(cudaFree((void *)a.W)); PCK(cudaFree((void *)a.y)); PCK(cudaFree(a.bar));
  }
  return 0;
}
