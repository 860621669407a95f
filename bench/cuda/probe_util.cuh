// Helpers the device probes share (probes.cu, ring.cu, ring_q4k.cu, mmq.cu):
// a warp's row stream; error checks, event and graph timing, launches with
// programmatic dependent launch, the device's copy rate, device arrays, Q4_K
// values.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <vector>
#include <algorithm>

#define PCK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

// A warp's stream of items (16 bytes a lane each; the first D already in w,
// ld(i) loads item i), the load of item i + D issued before item i is summed
// by dot(v, i, acc); each run of 2^lg items is a row, its sum handed to
// row(i >> lg, sum) on every lane (probes chain and flow, ring's k_regs).
template <int D, class LD, class DOT, class ROW>
static __device__ __forceinline__ void stream_rows(int items, int lg, uint4 (&w)[D], LD ld, DOT dot,
                                                   ROW row) {
  const int sm = (1 << lg) - 1;
  float acc = 0.0f;
  for (int i0 = 0; i0 < items; i0 += D) {
#pragma unroll
    for (int k = 0; k < D; k++) {
      const int i = i0 + k;
      if (i >= items) break;
      const uint4 v = w[k];
      if (i + D < items) w[k] = ld(i + D);
      acc = dot(v, i, acc);
      if (((i + 1) & sm) == 0) {  // the row is done
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        row(i >> lg, acc);
        acc = 0.0f;
      }
    }
  }
}

// Median microseconds of issue() over reps runs, timed by events on st.
static double events_us(cudaStream_t st, int reps, const std::function<void()> &issue) {
  cudaEvent_t a, b;
  PCK(cudaEventCreate(&a)); PCK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int r = 0; r < reps; r++) {
    PCK(cudaEventRecord(a, st));
    issue();
    PCK(cudaEventRecord(b, st));
    PCK(cudaEventSynchronize(b));
    float ms;
    PCK(cudaEventElapsedTime(&ms, a, b));
    v.push_back(ms * 1e3f);
  }
  std::sort(v.begin(), v.end());
  PCK(cudaEventDestroy(a)); PCK(cudaEventDestroy(b));
  return v[reps / 2];
}

// Median microseconds of one launch over 7 replays of a graph of L launches
// (launch(stream, pdl) issues one; pdl: the dependent-launch attribute).
static double graph_us(const std::function<void(cudaStream_t, int)> &launch, int pdl, int L = 20) {
  cudaStream_t st;
  PCK(cudaStreamCreate(&st));
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  PCK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < L; i++) launch(st, pdl);
  PCK(cudaStreamEndCapture(st, &gr));
  PCK(cudaGraphInstantiate(&ge, gr, 0));
  double us = events_us(st, 7, [&] { PCK(cudaGraphLaunch(ge, st)); }) / L;
  PCK(cudaGraphExecDestroy(ge)); PCK(cudaGraphDestroy(gr)); PCK(cudaStreamDestroy(st));
  return us;
}

// Launches kern on a grid of `blocks` with the dependent-launch attribute if pdl.
template <class K, class... A>
static void launch_pdl(cudaStream_t st, int pdl, int blocks, int nt, size_t smem, K kern, A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(nt), cfg.stream = st, cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at, cfg.numAttrs = pdl ? 1 : 0;
  PCK(cudaLaunchKernelEx(&cfg, kern, args...));
}

// Device-to-device copy rate (bytes read + written a second) over 1 GiB:
// median of 5 copies timed by events on the default stream (a copy captured
// in a graph runs on the copy engine, at ~2.8 of the ~4.2 TB/s).
static double copy_gbps() {
  size_t cb = 1ull << 30;
  void *s, *d;
  PCK(cudaMalloc(&s, cb)); PCK(cudaMalloc(&d, cb));
  PCK(cudaMemset(s, 1, cb));
  double us = events_us(0, 5, [&] { PCK(cudaMemcpyAsync(d, s, cb, cudaMemcpyDeviceToDevice)); });
  PCK(cudaFree(s)); PCK(cudaFree(d));
  return 2.0 * cb / (us * 1e-6) / 1e9;
}

// A device copy of v (an array of device pointers, say).
template <class T>
static T *dev_array(const std::vector<T> &v) {
  T *d;
  PCK(cudaMalloc((void **)&d, v.size() * sizeof(T)));
  PCK(cudaMemcpy((void *)d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Host: value j (0..255) of the Q4_K block at b (d, dmin, 12 scale bytes, 128
// qs bytes: sub-block 2c in the low nibbles of qs[32c ..], 2c + 1 in the high).
static float host_q4k_value(const uint8_t *b, int j) {
  __half_raw hd, hm;
  memcpy(&hd.x, b, 2), memcpy(&hm.x, b + 2, 2);
  const float d = __half2float(__half(hd)), dm = __half2float(__half(hm));
  const uint8_t *sc = b + 4, *qs = b + 16;
  const int sub = j / 32, l = j % 32;
  int s, m;
  if (sub < 4) {
    s = sc[sub] & 63, m = sc[sub + 4] & 63;
  } else {
    s = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4);
    m = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4);
  }
  const int code = sub % 2 ? qs[32 * (sub / 2) + l] >> 4 : qs[32 * (sub / 2) + l] & 15;
  return d * s * code - dm * m;
}

// Random Q4_K blocks for rows of K values (the probes' weights), from an LCG
// seeded by *s: d ~ 2 / (63 * 15 * sqrt(K)) keeps y's scale near x's, dmin a
// third of it, the other bytes random.
static void rand_q4k(uint8_t *w, size_t bytes, int K, uint32_t *s) {
  auto rnd = [&] { return *s = *s * 1664525u + 1013904223u, *s >> 8; };
  for (size_t b = 0; b + 144 <= bytes; b += 144) {
    const float d = (0.5f + (rnd() % 1000) / 1000.0f) * 2.0f / (63.0f * 15.0f * sqrtf((float)K));
    const __half_raw hd = __half(d), hm = __half(d / 3.0f);
    memcpy(w + b, &hd.x, 2), memcpy(w + b + 2, &hm.x, 2);
    for (int k = 4; k < 144; k++) w[b + k] = (uint8_t)rnd();
  }
}

// n device copies of the host bytes h.
static std::vector<uint8_t *> dev_copies(const std::vector<uint8_t> &h, int n) {
  std::vector<uint8_t *> d(n);
  for (auto &p : d) {
    PCK(cudaMalloc((void **)&p, h.size()));
    PCK(cudaMemcpy(p, h.data(), h.size(), cudaMemcpyHostToDevice));
  }
  return d;
}

// Random bytes over n bytes of blocks of `bytes` bytes, each block's first
// two f16 words (d, dmin of the K-quants) small finite values (~2^-8), so
// that timed products run on real numbers.
__global__ void k_fill_blocks(uint8_t *p, size_t n, int bytes) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u;
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12;
    if ((4 * i) % bytes == 0) h = 0x1c001c00u | (h & 0x00ff00ffu);
    ((uint32_t *)p)[i] = h;
  }
}

// The matrix-vector probes' buffers: 1 GiB for copies of W, x (n floats of
// a fixed pattern) and y (n floats).
static void mv_probe_buffers(uint8_t **buf, float **x, float **y, int n) {
  PCK(cudaMalloc((void **)buf, 1ull << 30));
  PCK(cudaMalloc((void **)x, n * sizeof(float)));
  PCK(cudaMalloc((void **)y, n * sizeof(float)));
  std::vector<float> hx(n);
  for (int i = 0; i < n; i++) hx[i] = sinf(0.37f * i) * (1.0f + (i % 7));
  PCK(cudaMemcpy(*x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}
