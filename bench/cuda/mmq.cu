// Probe of session 16 (docs/CUDA.md, "Session 16"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mmq.cu -lcublas -o mmq && ./mmq
// Batches of 8 to 32 tokens against Q4_K weights without the GEMM path's
// f16 copy of every matrix: Y (n x rows) = X (n x K, f16) W^T, W's blocks
// dequantized to f16 in registers straight into the A fragments of
// mma.m16n8k16 (f32 sums), the tokens in the B fragments' 8 columns.
//
// A block: 8 warps, each a 16-row tile (128 rows a block), over 4
// super-blocks of K (blockIdx.y: the K split); the split's x (n x 1024 f16)
// is staged once in shared memory. Lane (g, q) reads chunk q of its rows g,
// g + 8 (qs bytes 32q .. 32q + 32: sub-blocks 2q (low nibbles) and 2q + 1
// (high)); k-step s (16 of a super-block) takes word s / 2 of the chunk,
// its low nibbles (s even) or high ones, bytes 0, 2 as the fragment's pair
// at k 2q, 2q + 1 and bytes 1, 3 at 2q + 8, 2q + 9. So the mma's k order is
// a permutation of the values, and B reads x in the same order: x's 4
// values of a word are stored (x0, x2, x1, x3), one 8-byte load a lane.
// Codes to f16 by the 0x6400 exponent trick (exact), then code x (d sc) -
// dmin m in one f16 fma a pair. The splits' partial sums go to a buffer
// and a second kernel adds them in split order.
//
// Compared, in the same run: the GEMM path's way (every row dequantized to
// f16 by a kernel, a plain one here, then cublasGemmEx), cuBLAS alone on
// the f16 copy, and the matrix's bytes at the copy rate. Checked against a
// host product of the dequantized weights in double precision.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#include "backend/cuda/mma.cuh"    // mma16816
#include "backend/cuda/quant.cuh"  // kq_scale_min
#include "probe_util.cuh"

#define BCK(x) do { if ((x) != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS error at %d\n", __LINE__); exit(1); } } while (0)

enum { MQ_SB = 4, MQ_WARPS = 8, MQ_ROWS = 16 * MQ_WARPS, MQ_SUBS = 8 * MQ_SB };
// x in shared memory: token t's sub-block j at t MQ_TS + j MQ_JS bytes (the
// strides put the 16 lanes of a half-warp's 8-byte reads on 32 banks).
enum { MQ_JS = 80, MQ_TS = MQ_SUBS * MQ_JS + 8 };

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes.
static __device__ __forceinline__ void q4k_sm(const uint8_t *sc, int j, int *s, int *m) {
  if (j < 4) {
    *s = sc[j] & 63, *m = sc[j + 4] & 63;
  } else {
    *s = (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
    *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

// Word w's nibbles (shifted down by 4 h first) as two f16 pairs of codes:
// *p02 bytes 0 and 2, *p13 bytes 1 and 3, each times s minus m.
static __device__ __forceinline__ void mq_deq(uint32_t w, int h, __half2 s, __half2 m,
                                              uint32_t *p02, uint32_t *p13) {
  const uint32_t t = h ? w >> 4 : w;
  const uint32_t a = (t & 0x000F000Fu) | 0x64006400u, b = ((t >> 8) & 0x000F000Fu) | 0x64006400u;
  const __half2 k1024 = __float2half2_rn(1024.0f);
  __half2 ha = __hsub2(*(const __half2 *)&a, k1024), hb = __hsub2(*(const __half2 *)&b, k1024);
  ha = __hfma2(ha, s, __hneg2(m)), hb = __hfma2(hb, s, __hneg2(m));
  *p02 = *(uint32_t *)&ha, *p13 = *(uint32_t *)&hb;
}

template <int NTT>  // token tiles of 8
__global__ void __launch_bounds__(32 * MQ_WARPS, 2)
k_mmq(const uint8_t *__restrict__ W, int rows, int K, const __half *__restrict__ x, int n,
      float *__restrict__ part) {
  extern __shared__ __align__(16) uint8_t xs[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int rowb = K / 256 * 144, sb0 = blockIdx.y * MQ_SB, c0 = sb0 * 256;
  const int r0 = blockIdx.x * MQ_ROWS + 16 * warp + g;
  const uint8_t *w0 = W + (size_t)min(r0, rows - 1) * rowb + (size_t)sb0 * 144;
  const uint8_t *w1 = W + (size_t)min(r0 + 8, rows - 1) * rowb + (size_t)sb0 * 144;
  // The first super-block's loads, then x.
  uint4 h[2], c[2][2];
  auto load = [&](int b) {
    h[0] = __ldg((const uint4 *)(w0 + 144 * b)), h[1] = __ldg((const uint4 *)(w1 + 144 * b));
    c[0][0] = __ldg((const uint4 *)(w0 + 144 * b + 16 + 32 * q));
    c[0][1] = __ldg((const uint4 *)(w0 + 144 * b + 32 + 32 * q));
    c[1][0] = __ldg((const uint4 *)(w1 + 144 * b + 16 + 32 * q));
    c[1][1] = __ldg((const uint4 *)(w1 + 144 * b + 32 + 32 * q));
  };
  load(0);
  for (int i = threadIdx.x; i < NTT * 8 * MQ_SUBS * 8; i += blockDim.x) {  // 4 values a thread
    const int t = i / (MQ_SUBS * 8), j = (i / 8) % MQ_SUBS, wd = i % 8;
    uint2 v = make_uint2(0u, 0u);
    if (t < n) v = __ldg((const uint2 *)(x + (size_t)t * K + c0 + 32 * j + 4 * wd));
    *(uint2 *)(xs + t * MQ_TS + j * MQ_JS + 8 * wd) =
        make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
  }
  __syncthreads();
  float acc[NTT][4];
#pragma unroll
  for (int t = 0; t < NTT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int b = 0; b < MQ_SB; b++) {
    uint4 hc[2] = {h[0], h[1]}, cc[2][2] = {{c[0][0], c[0][1]}, {c[1][0], c[1][1]}};
    if (b + 1 < MQ_SB) load(b + 1);
    __half2 s2[2][2], m2[2][2];  // [row][h]: sub-block 2q + h
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float d = __half2float(__ushort_as_half((unsigned short)hc[r].x));
      const float dm = __half2float(__ushort_as_half((unsigned short)(hc[r].x >> 16)));
#pragma unroll
      for (int hh = 0; hh < 2; hh++) {
        float s, m;
        kq_scale_min(hc[r].y, hc[r].z, hc[r].w, 2 * q + hh, &s, &m);
        s2[r][hh] = __float2half2_rn(d * s), m2[r][hh] = __float2half2_rn(dm * m);
      }
    }
#pragma unroll
    for (int st = 0; st < 16; st++) {
      const int wd = st >> 1, hh = st & 1;
      uint32_t a[4];
      const uint4 va = cc[0][wd >> 2], vb = cc[1][wd >> 2];
      const int e = wd & 3;
      const uint32_t wa = e == 0 ? va.x : e == 1 ? va.y : e == 2 ? va.z : va.w;
      const uint32_t wb = e == 0 ? vb.x : e == 1 ? vb.y : e == 2 ? vb.z : vb.w;
      mq_deq(wa, hh, s2[0][hh], m2[0][hh], &a[0], &a[2]);
      mq_deq(wb, hh, s2[1][hh], m2[1][hh], &a[1], &a[3]);
      const int j = 8 * b + 2 * q + hh;
#pragma unroll
      for (int t = 0; t < NTT; t++) {
        const uint2 bv = *(const uint2 *)(xs + (8 * t + g) * MQ_TS + j * MQ_JS + 8 * wd);
        mma16816(acc[t], a, bv.x, bv.y);
      }
    }
  }
  // C: c0, c1 row g, tokens 2q, 2q + 1 of tile t; c2, c3 row g + 8.
  float *P = part + (size_t)blockIdx.y * n * rows;
#pragma unroll
  for (int t = 0; t < NTT; t++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int tok = 8 * t + 2 * q + (e & 1), row = r0 + (e >> 1) * 8;
      if (tok < n && row < rows) P[(size_t)tok * rows + row] = acc[t][e];
    }
}

__global__ void k_mmq_sum(const float *__restrict__ part, int splits, long total,
                          float *__restrict__ y) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= total) return;
  float s = 0.0f;
  for (int k = 0; k < splits; k++) s += part[k * total + i];
  y[i] = s;
}

// The GEMM path's dequantization: a thread a 32-value sub-block to f16.
__global__ void k_deq_q4k(const uint8_t *__restrict__ W, int rows, int K, __half *__restrict__ o) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  const long subs = (long)rows * (K / 32);
  if (i >= subs) return;
  const long r = i / (K / 32);
  const int j = (int)(i % (K / 32)), b = j / 8, sub = j % 8;
  const uint8_t *blk = W + r * (K / 256 * 144) + b * 144;
  const float d = __half2float(*(const __half *)blk), dm = __half2float(*(const __half *)(blk + 2));
  int s, m;
  q4k_sm(blk + 4, sub, &s, &m);
  const uint8_t *qs = blk + 16 + 32 * (sub / 2);
  __half *out = o + r * K + 256 * b + 32 * sub;
  for (int l = 0; l < 32; l++) {
    const int code = sub & 1 ? qs[l] >> 4 : qs[l] & 15;
    out[l] = __float2half_rn(d * s * code - dm * m);
  }
}

static float host_q4k(const uint8_t *b, int j) {
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

template <int NTT>
static void launch_mmq(const uint8_t *W, int rows, int K, const __half *x, int n, float *part,
                       float *y, cudaStream_t st) {
  const size_t smem = (size_t)NTT * 8 * MQ_TS;
  PCK(cudaFuncSetAttribute(k_mmq<NTT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const dim3 grid((rows + MQ_ROWS - 1) / MQ_ROWS, K / (256 * MQ_SB));
  k_mmq<NTT><<<grid, 32 * MQ_WARPS, smem, st>>>(W, rows, K, x, n, part);
  const long total = (long)n * rows;
  k_mmq_sum<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(part, grid.y, total, y);
}

int main() {
  const double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  cublasHandle_t blas;
  BCK(cublasCreate(&blas));
  const int shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};  // rows, K
  const int COPIES = 4;
  for (auto &sh : shapes) {
    const int rows = sh[0], K = sh[1], rowb = K / 256 * 144;
    const size_t wb = (size_t)rows * rowb;
    std::vector<uint8_t> hw(wb);
    uint32_t s = 99u + rows;
    auto rnd = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
    for (size_t b = 0; b < wb; b += 144) {
      const float d = (0.5f + (rnd() % 1000) / 1000.0f) * 2.0f / (63.0f * 15.0f * sqrtf((float)K));
      const __half_raw hd = __half(d), hm = __half(d / 3.0f);
      memcpy(&hw[b], &hd.x, 2), memcpy(&hw[b + 2], &hm.x, 2);
      for (int k = 4; k < 144; k++) hw[b + k] = (uint8_t)rnd();
    }
    std::vector<uint8_t *> Wd(COPIES);
    for (auto &p : Wd) {
      PCK(cudaMalloc((void **)&p, wb));
      PCK(cudaMemcpy(p, hw.data(), wb, cudaMemcpyHostToDevice));
    }
    const int NMAX = 32;
    std::vector<__half> hx((size_t)NMAX * K);
    for (auto &v : hx) v = __float2half(((float)(rnd() % 2000) / 1000.0f - 1.0f));
    __half *xd, *wh;
    float *part, *yd;
    PCK(cudaMalloc((void **)&xd, hx.size() * 2));
    PCK(cudaMemcpy(xd, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    PCK(cudaMalloc((void **)&part, (size_t)(K / 1024) * NMAX * rows * 4));
    PCK(cudaMalloc((void **)&yd, (size_t)NMAX * rows * 4));
    PCK(cudaMalloc((void **)&wh, (size_t)rows * K * 2));
    // host reference for the first 8 rows... all rows, tokens 0..NMAX
    std::vector<float> wf((size_t)rows * K);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < K; j++) wf[(size_t)r * K + j] = host_q4k(&hw[(size_t)r * rowb + 144 * (j / 256)], j % 256);
    const double mb = wb / 1e6;
    printf("%d x %d (rows x K): %.1f MB of Q4_K, %.2f us at the copy rate\n", rows, K, mb, mb / bw * 1e3);
    for (int n : {8, 16, 24, 32}) {
      // check
      PCK(cudaMemset(yd, 0xff, (size_t)n * rows * 4));
      auto run = [&](int i, cudaStream_t st) {
        const int ntt = (n + 7) / 8;
        if (ntt == 1) launch_mmq<1>(Wd[i % COPIES], rows, K, xd, n, part, yd, st);
        else if (ntt == 2) launch_mmq<2>(Wd[i % COPIES], rows, K, xd, n, part, yd, st);
        else if (ntt == 3) launch_mmq<3>(Wd[i % COPIES], rows, K, xd, n, part, yd, st);
        else launch_mmq<4>(Wd[i % COPIES], rows, K, xd, n, part, yd, st);
      };
      run(0, 0);
      PCK(cudaDeviceSynchronize());
      std::vector<float> out((size_t)n * rows);
      PCK(cudaMemcpy(out.data(), yd, out.size() * 4, cudaMemcpyDeviceToHost));
      double md = 0, mr = 0;
      for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r += 7) {
          double ref = 0;
          for (int j = 0; j < K; j++) ref += (double)wf[(size_t)r * K + j] * __half2float(hx[(size_t)t * K + j]);
          mr = std::max(mr, std::fabs(ref));
          md = std::max(md, std::fabs(ref - out[(size_t)t * rows + r]));
        }
      int launch = 0;
      const double us = graph_us([&](cudaStream_t st, int) { run(launch++, st); }, 0, 8);
      // the GEMM path: dequantize every row to f16, then cuBLAS
      int launch2 = 0;
      const double us2 = graph_us([&](cudaStream_t st, int) {
        const long subs = (long)rows * (K / 32);
        k_deq_q4k<<<(unsigned)((subs + 255) / 256), 256, 0, st>>>(Wd[launch2++ % COPIES], rows, K, wh);
        const float one = 1.0f, zero = 0.0f;
        BCK(cublasSetStream(blas, st));
        BCK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, K, &one, wh, CUDA_R_16F, K, xd,
                         CUDA_R_16F, K, &zero, yd, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
      }, 0, 8);
      const double us3 = graph_us([&](cudaStream_t st, int) {
        const float one = 1.0f, zero = 0.0f;
        BCK(cublasSetStream(blas, st));
        BCK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, K, &one, wh, CUDA_R_16F, K, xd,
                         CUDA_R_16F, K, &zero, yd, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
      }, 0, 8);
      printf("  n %2d: fused %7.2f us (%3.0f%% of copy), err %.1e%s | dequant + cuBLAS %7.2f us, "
             "cuBLAS alone %7.2f us\n", n, us, 100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, md / mr,
             md / mr < 3e-3 ? "" : "  WRONG", us2, us3);
    }
    for (auto p : Wd) PCK(cudaFree(p));
    PCK(cudaFree(xd)); PCK(cudaFree(part)); PCK(cudaFree(yd)); PCK(cudaFree(wh));
  }
  return 0;
}
