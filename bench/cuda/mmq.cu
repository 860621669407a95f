// Probe of session 16 (docs/CUDA.md, "Session 16"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mmq.cu -lcublas -o mmq && ./mmq
// The fused batch kernel of src/backend/cuda/mmq.cuh (Q4_K dequantized to f16
// in registers straight into mma.m16n8k16 fragments, tokens as B's columns;
// written here first, then moved into the engine) at the 8B shapes for 8 to
// 32 tokens (one to four tiles of 8), against the GEMM path's way (every row
// dequantized to f16 by a kernel, a plain one here, then cublasGemmEx),
// cuBLAS alone on the f16 copy, and the matrix's bytes at the copy rate.
// Checked against a host product of the dequantized weights in double
// precision.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mmq.cuh"  // k_mmq, mmq_launch_t; quant.cuh: qtype<WK_Q4_K>::deq
#include "probe_util.cuh"

#define BCK(x) do { if ((x) != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS error at %d\n", __LINE__); exit(1); } } while (0)

// The GEMM path's dequantization: a thread a 32-value sub-block to f16.
__global__ void k_deq_q4k(const uint8_t *__restrict__ W, int rows, int K, __half *__restrict__ o) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= (long)rows * (K / 32)) return;
  const long r = i / (K / 32);
  const int j = (int)(i % (K / 32));
  float v[32];
  qtype<WK_Q4_K>::deq(W + r * (K / 256 * 144) + (j / 8) * 144, j % 8, v);
  for (int l = 0; l < 32; l++) o[r * K + 32 * j + l] = __float2half_rn(v[l]);
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
    PCK(cudaMalloc((void **)&part, (size_t)((K / 256 + MMQ_SB - 1) / MMQ_SB) * NMAX * rows * 4));
    PCK(cudaMalloc((void **)&yd, (size_t)NMAX * rows * 4));
    PCK(cudaMalloc((void **)&wh, (size_t)rows * K * 2));
    // host reference for the first 8 rows... all rows, tokens 0..NMAX
    std::vector<float> wf((size_t)rows * K);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < K; j++) wf[(size_t)r * K + j] = host_q4k_value(&hw[(size_t)r * rowb + 144 * (j / 256)], j % 256);
    const double mb = wb / 1e6;
    printf("%d x %d (rows x K): %.1f MB of Q4_K, %.2f us at the copy rate\n", rows, K, mb, mb / bw * 1e3);
    for (int n : {8, 16, 24, 32}) {
      // check
      PCK(cudaMemset(yd, 0xff, (size_t)n * rows * 4));
      auto run = [&](int i, cudaStream_t st) {
        const uint8_t *w = Wd[i % COPIES];
        cudaError_t e;
        switch ((n + 7) / 8) {
          case 1: e = mmq_launch_t<WK_Q4_K, 1>(w, rowb, rows, K, xd, n, part, yd, rows, 0.0f, st); break;
          case 2: e = mmq_launch_t<WK_Q4_K, 2>(w, rowb, rows, K, xd, n, part, yd, rows, 0.0f, st); break;
          case 3: e = mmq_launch_t<WK_Q4_K, 3>(w, rowb, rows, K, xd, n, part, yd, rows, 0.0f, st); break;
          default: e = mmq_launch_t<WK_Q4_K, 4>(w, rowb, rows, K, xd, n, part, yd, rows, 0.0f, st); break;
        }
        PCK(e);
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
      auto gemm16 = [&](cudaStream_t st) {  // cuBLAS on the f16 copy
        const float one = 1.0f, zero = 0.0f;
        BCK(cublasSetStream(blas, st));
        BCK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, K, &one, wh, CUDA_R_16F, K, xd,
                         CUDA_R_16F, K, &zero, yd, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
      };
      int launch2 = 0;  // the GEMM path: dequantize every row to f16, then cuBLAS
      const double us2 = graph_us([&](cudaStream_t st, int) {
        const long subs = (long)rows * (K / 32);
        k_deq_q4k<<<(unsigned)((subs + 255) / 256), 256, 0, st>>>(Wd[launch2++ % COPIES], rows, K, wh);
        gemm16(st);
      }, 0, 8);
      const double us3 = graph_us([&](cudaStream_t st, int) { gemm16(st); }, 0, 8);
      printf("  n %2d: fused %7.2f us (%3.0f%% of copy), err %.1e%s | dequant + cuBLAS %7.2f us, "
             "cuBLAS alone %7.2f us\n", n, us, 100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw, md / mr,
             md / mr < 3e-3 ? "" : "  WRONG", us2, us3);
    }
    for (auto p : Wd) PCK(cudaFree(p));
    PCK(cudaFree(xd)); PCK(cudaFree(part)); PCK(cudaFree(yd)); PCK(cudaFree(wh));
  }
  return 0;
}
