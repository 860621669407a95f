// Probe of session 16 (docs/CUDA.md, "Session 16"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mmq.cu -lcublas -o mmq && ./mmq
// The fused batch kernel (src/backend/cuda/mmq.cuh; Q4_K dequantized to f16
// in registers straight into mma.m16n8k16 fragments, tokens as B's columns) at the 8B shapes for 8 to
// 32 tokens (one to four tiles of 8), against the GEMM path's way (every row
// dequantized to f16 by a kernel, a plain one here, then cublasGemmEx),
// cuBLAS alone on the f16 copy, and the matrix's bytes at the copy rate.
// Checked against a host product of the dequantized weights in double
// precision. `mmq check`: Q4_K and Q6_K at 1 to 32 tokens against host
// products (session 17: 0 failed, before the kernel joined the engine).
// `mmq grid`: one tile's grids (launch bounds of 2 to 4 blocks an SM, a
// block a row tile or a wave of blocks walking them) at K splits of 1 to 16
// super-blocks (session 18). (A `cluster` mode, the splits' sums through a
// thread-block cluster, ran in session 19: bit-equal and slower; removed.)
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mmq.cuh"  // k_mmq, mmq_launch(_t); quant.cuh: qtype<WK_Q4_K>::deq
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

// Host: value j (0..255) of the Q6_K block at b (ql[128], qh[64], 16 int8
// scales, d): for half h and l < 32, values 128 h + l + 32 i (i = 0..3) are
// the low nibble of ql[64 h + l] (i 0), of ql[64 h + 32 + l] (1), their high
// nibbles (2, 3), with bits 2i, 2i + 1 of qh[32 h + l] above, minus 32,
// times d sc[8 h + l / 16 + 2 i].
static float host_q6k_value(const uint8_t *b, int j) {
  const int h = j / 128, i = (j % 128) / 32, l = j % 32;
  const uint8_t ql = b[64 * h + (i & 1) * 32 + l], qh = b[128 + 32 * h + l];
  const int code = ((i >> 1 ? ql >> 4 : ql & 15) | (((qh >> (2 * i)) & 3) << 4)) - 32;
  __half_raw hd;
  memcpy(&hd.x, b + 208, 2);
  return __half2float(__half(hd)) * (float)(int8_t)b[192 + 8 * h + l / 16 + 2 * i] * code;
}

// `mmq check`: the kernel's opt-in cases against a host product: Q6_K, and
// one tile (1 to 8 tokens) of Q4_K and Q6_K; rows off the 128-row blocks, a
// K split of 1 super-block after one of 4.
static int check(void) {
  int fails = 0;
  for (int type : {WK_Q4_K, WK_Q6_K})
    for (auto sh : {std::pair<int, int>{300, 1280}, {4096, 4096}}) {
      const int rows = sh.first, K = sh.second, bytes = type == WK_Q4_K ? 144 : 210;
      const size_t rowb = (size_t)K / 256 * bytes, wb = rows * rowb;
      std::vector<uint8_t> hw(wb);
      uint32_t s = 7u + rows + type;
      auto rnd = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
      for (auto &v : hw) v = (uint8_t)rnd();
      for (size_t b = 0; b < wb; b += bytes) {
        const __half_raw hd = __half((0.5f + (rnd() % 1000) / 1000.0f) / 64.0f);
        const __half_raw hm = __half(__half2float(__half(hd)) / 3.0f);
        if (type == WK_Q4_K) memcpy(&hw[b], &hd.x, 2), memcpy(&hw[b + 2], &hm.x, 2);
        else memcpy(&hw[b + 208], &hd.x, 2);
      }
      uint8_t *W;
      PCK(cudaMalloc((void **)&W, wb + 16));
      PCK(cudaMemcpy(W, hw.data(), wb, cudaMemcpyHostToDevice));
      std::vector<__half> hx((size_t)32 * K);
      for (auto &v : hx) v = __float2half((float)(rnd() % 2000) / 1000.0f - 1.0f);
      __half *xd;
      float *yd, *part;
      const size_t pf = (size_t)(K / 256) * 32 * rows;
      PCK(cudaMalloc((void **)&xd, hx.size() * 2));
      PCK(cudaMemcpy(xd, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
      PCK(cudaMalloc((void **)&yd, (size_t)32 * rows * 4));
      PCK(cudaMalloc((void **)&part, pf * 4));
      for (int n : {1, 5, 8, 9, 17, 32})
      for (int sb : {0, 1, 2, 4}) {  // mmq_split's, then each split at two sizes
        if (sb && n != 5 && n != 17) continue;
        PCK(cudaMemset(yd, 0xff, (size_t)n * rows * 4));
        PCK(type == WK_Q4_K ? mmq_launch<WK_Q4_K>(W, rowb, rows, K, xd, n, yd, 0.0f, part, pf, 0, 0, sb)
                            : mmq_launch<WK_Q6_K>(W, rowb, rows, K, xd, n, yd, 0.0f, part, pf, 0, 0, sb));
        PCK(cudaDeviceSynchronize());
        std::vector<float> y((size_t)n * rows);
        PCK(cudaMemcpy(y.data(), yd, y.size() * 4, cudaMemcpyDeviceToHost));
        double worst = 0;
        for (int r = 0; r < rows; r += rows > 1000 ? 13 : 1)
          for (int t = 0; t < n; t++) {
            double ref = 0, mag = 0;
            for (int j = 0; j < K; j++) {
              const uint8_t *blk = &hw[r * rowb + (j / 256) * bytes];
              const double w = type == WK_Q4_K ? host_q4k_value(blk, j % 256) : host_q6k_value(blk, j % 256);
              const double xv = __half2float(hx[(size_t)t * K + j]);
              ref += w * xv, mag += fabs(w * xv);
            }
            const double e = fabs(y[(size_t)t * rows + r] - ref) / (mag + 1e-6);
            if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
          }
        const bool ok = worst <= 2e-3;
        fails += !ok;
        printf("check %s %5dx%-5d n=%2d split %d: max error %.2e of sum|wx|%s\n",
               type == WK_Q4_K ? "q4_k" : "q6_k", rows, K, n, sb ? sb : mmq_split(rows, K),
               worst, ok ? "" : "  FAIL");
      }
      PCK(cudaFree(W)); PCK(cudaFree(xd)); PCK(cudaFree(yd)); PCK(cudaFree(part));
    }
  printf("check: %d failed\n", fails);
  return fails ? 1 : 0;
}

// `mmq one TYPE ROWS K N SPLIT`: five launches of one case (for ncu); TYPE
// 12 (Q4_K) or 14 (Q6_K), SPLIT 0 for mmq_split's.
static int one(int type, int rows, int K, int n, int sb) {
  const size_t rowb = (size_t)K / 256 * (type == WK_Q4_K ? 144 : 210), wb = rows * rowb;
  std::vector<uint8_t> hw(wb);
  uint32_t s = 5u;
  for (auto &v : hw) v = (uint8_t)((s = s * 1664525u + 1013904223u) >> 24);
  uint8_t *W;
  __half *xd;
  float *yd, *part;
  const size_t pf = (size_t)(K / 256) * n * rows;
  PCK(cudaMalloc((void **)&W, wb));
  PCK(cudaMemcpy(W, hw.data(), wb, cudaMemcpyHostToDevice));
  PCK(cudaMalloc((void **)&xd, (size_t)n * K * 2));
  PCK(cudaMemset(xd, 0, (size_t)n * K * 2));
  PCK(cudaMalloc((void **)&yd, (size_t)n * rows * 4));
  PCK(cudaMalloc((void **)&part, pf * 4));
  for (int i = 0; i < 5; i++)
    PCK(type == WK_Q4_K ? mmq_launch<WK_Q4_K>(W, rowb, rows, K, xd, n, yd, 0.0f, part, pf, 0, 0, sb)
                        : mmq_launch<WK_Q6_K>(W, rowb, rows, K, xd, n, yd, 0.0f, part, pf, 0, 0, sb));
  PCK(cudaDeviceSynchronize());
  return 0;
}

// `mmq grid`: one tile (1 to 8 tokens) of Q4_K at the 8B shapes, k_mmq as
// the engine launches it (a block a 128-row tile, 2 blocks an SM) against 3
// and 4 blocks an SM (launch bounds) and grids of a wave (blocks walking
// tiles), at each K split; every variant's output bit-equal to the first's
// at the same split (the same sums in the same order), or "DIFF".
template <int MINB>
static void grid_launch(const uint8_t *W, int rowb, int rows, int K, const __half *x, int n,
                        int sb, float *part, float *y, cudaStream_t st, int gx) {
  PCK((mmq_launch_t<WK_Q4_K, 1, MINB>(W, rowb, rows, K, x, n, sb, part, y, rows, 0.0f, st, gx)));
}
static int grid_sweep(void) {
  const double bw = copy_gbps();
  int sms = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("copy %.0f GB/s, %d SMs\n", bw, sms);
  const int shapes[][2] = {{1024, 4096}, {4096, 4096}, {14336, 4096}, {4096, 14336}, {57344, 4096}};
  const int COPIES = 4, NV = 6;
  const char *vname[NV] = {"tile/2", "tile/3", "tile/4", "wave/2", "wave/3", "wave/4"};
  int diffs = 0;
  for (auto &sh : shapes) {
    const int rows = sh[0], K = sh[1], rowb = K / 256 * 144;
    const size_t wb = (size_t)rows * rowb;
    std::vector<uint8_t> hw(wb);
    uint32_t s = 99u + rows;
    rand_q4k(hw.data(), wb, K, &s);
    std::vector<uint8_t *> Wd = dev_copies(hw, COPIES);
    std::vector<__half> hx((size_t)8 * K);
    for (auto &v : hx) v = __float2half((float)(((s = s * 1664525u + 1013904223u) >> 8) % 2000) / 1000.0f - 1.0f);
    __half *xd;
    float *part, *yd;
    PCK(cudaMalloc((void **)&xd, hx.size() * 2));
    PCK(cudaMemcpy(xd, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    PCK(cudaMalloc((void **)&part, (size_t)(K / 256) * 8 * rows * 4));
    PCK(cudaMalloc((void **)&yd, (size_t)8 * rows * 4));
    const double mb = wb / 1e6;
    printf("%d x %d: %.1f MB, %.2f us at the copy rate; us (%% of copy) a product\n", rows, K, mb,
           mb / bw * 1e3);
    for (int n : {1, 4, 8})
      for (int sb : {1, 2, 4, 8, 16}) {
        const int splits = (K / 256 + sb - 1) / sb;
        printf("  n %d split %d%s:", n, sb, sb == mmq_split(rows, K) ? "*" : " ");
        std::vector<float> ref((size_t)n * rows), out((size_t)n * rows);
        for (int v = 0; v < NV; v++) {
          const int minb = v % 3 + 2, gx = v < 3 ? 0 : std::max(1, minb * sms / splits);
          auto run = [&](int i, cudaStream_t st) {
            const uint8_t *W = Wd[i % COPIES];
            if (minb == 2) grid_launch<2>(W, rowb, rows, K, xd, n, sb, part, yd, st, gx);
            else if (minb == 3) grid_launch<3>(W, rowb, rows, K, xd, n, sb, part, yd, st, gx);
            else grid_launch<4>(W, rowb, rows, K, xd, n, sb, part, yd, st, gx);
          };
          PCK(cudaMemset(yd, 0xff, (size_t)n * rows * 4));
          run(0, 0);
          PCK(cudaDeviceSynchronize());
          PCK(cudaMemcpy((v ? out : ref).data(), yd, out.size() * 4, cudaMemcpyDeviceToHost));
          const bool same = !v || !memcmp(out.data(), ref.data(), out.size() * 4);
          diffs += !same;
          int launch = 0;
          const double us = graph_us([&](cudaStream_t st, int) { run(launch++, st); }, 0, 8);
          printf(" %s %6.2f (%3.0f%%)%s", vname[v], us, 100.0 * mb * 1e3 / us / bw, same ? "" : " DIFF");
        }
        printf("\n");
      }
    for (auto p : Wd) PCK(cudaFree(p));
    PCK(cudaFree(xd)); PCK(cudaFree(part)); PCK(cudaFree(yd));
  }
  printf("grid: %d differ\n", diffs);
  return diffs ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "check")) return check();
  if (argc > 1 && !strcmp(argv[1], "grid")) return grid_sweep();
  if (argc > 6 && !strcmp(argv[1], "one"))
    return one(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  const double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  cublasHandle_t blas;
  BCK(cublasCreate(&blas));
  const int shapes[][2] = {{1024, 4096}, {4096, 4096}, {14336, 4096}, {4096, 14336}};  // rows, K
  const int COPIES = 4;
  for (auto &sh : shapes) {
    const int rows = sh[0], K = sh[1], rowb = K / 256 * 144;
    const size_t wb = (size_t)rows * rowb;
    std::vector<uint8_t> hw(wb);
    uint32_t s = 99u + rows;
    auto rnd = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
    rand_q4k(hw.data(), wb, K, &s);
    std::vector<uint8_t *> Wd = dev_copies(hw, COPIES);
    const int NMAX = 32;
    std::vector<__half> hx((size_t)NMAX * K);
    for (auto &v : hx) v = __float2half(((float)(rnd() % 2000) / 1000.0f - 1.0f));
    __half *xd, *wh;
    float *part, *yd;
    PCK(cudaMalloc((void **)&xd, hx.size() * 2));
    PCK(cudaMemcpy(xd, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    PCK(cudaMalloc((void **)&part, (size_t)(K / 256) * NMAX * rows * 4));
    PCK(cudaMalloc((void **)&yd, (size_t)NMAX * rows * 4));
    PCK(cudaMalloc((void **)&wh, (size_t)rows * K * 2));
    // host reference for the first 8 rows... all rows, tokens 0..NMAX
    std::vector<float> wf((size_t)rows * K);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < K; j++) wf[(size_t)r * K + j] = host_q4k_value(&hw[(size_t)r * rowb + 144 * (j / 256)], j % 256);
    const double mb = wb / 1e6;
    printf("%d x %d (rows x K): %.1f MB of Q4_K, %.2f us at the copy rate\n", rows, K, mb, mb / bw * 1e3);
    for (int n : {1, 4, 8, 16, 24, 32}) {
      int sb = 0;
      auto run = [&](int i, cudaStream_t st) {
        PCK(mmq_launch<WK_Q4_K>(Wd[i % COPIES], rowb, rows, K, xd, n, yd, 0.0f, part,
                                (size_t)(K / 256) * NMAX * rows, st, 0, sb));
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
      // The fused kernel at each K split (super-blocks a block), mmq_split's marked.
      printf("  n %2d: fused", n);
      for (int s2 : {4, 2, 1}) {
        sb = s2;
        int launch = 0;
        const double us = graph_us([&](cudaStream_t st, int) { run(launch++, st); }, 0, 8);
        printf(" | split %d%s %6.2f us %3.0f%%", s2, s2 == mmq_split(rows, K) ? "*" : " ", us,
               100.0 * mb * 1e6 / (us * 1e-6) / 1e9 / bw);
      }
      printf(" (err %.1e%s)\n", md / mr, md / mr < 3e-3 ? "" : "  WRONG");
      if (n != 8 && n != 32) continue;
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
      printf("        dequant + cuBLAS %7.2f us, cuBLAS alone %7.2f us\n", us2, us3);
    }
    for (auto p : Wd) PCK(cudaFree(p));
    PCK(cudaFree(xd)); PCK(cudaFree(part)); PCK(cudaFree(yd)); PCK(cudaFree(wh));
  }
  return 0;
}
