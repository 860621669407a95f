// Probe of session 17 (docs/CUDA.md, "Session 17"), standalone:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mmqi.cu -lcublas -o mmqi && ./mmqi
// A batch product for Q4_K on the integer tensor cores, beside the engine's
// f16 one (mmq.cuh), which ncu found bound by its instructions (0.32 a
// weight byte at 8 tokens: the per-value f16 dequantization).
//
// Result (session 18, first device run): correct (max error 1.1e-6 to
// 9.4e-6 of sum |w x|) and no faster: at 1 to 8 tokens it takes what
// mmq.cuh takes (33 MB: 19.3-22.6 us against 19.0-23.7; 9.4 MB 7.7-8.0
// against 7.1-7.6), plus ~2.2 us to prepare x. Fewer instructions a weight
// byte (~350 a super-block for one tile against ~460) did not make one tile
// faster, so at 1 to 8 tokens the f16 kernel is not bound by its issue rate
// (the ncu profile of session 17 was at 8 tokens of 14336 x 4096 and a
// tile a block). Not kept as a kernel; the record of the measurement.
//
// How it was designed: a first form (x scaled per 32 values, an f32 step
// after every sub-block) had ~500 SASS instructions a super-block for one
// tile against mmq.cuh's ~460: the f32 work after each sub-block cost what
// the dequantization did. This form scales x once per 256 values, as the
// CPU's 16-bit activations for the K-quants do (wk_act16k, within the
// reference tests' rules), so a super-block's sub-blocks add in integers.
// Its SASS: ~350 instructions a super-block for one tile (32 IMMA), but
// ~190 more for each further tile (the int32 sums L, H, M: 12 IMAD a
// sub-block and tile) against ~32 there, so it was for 1 to 8 tokens only.
//
// The codes go to the mma as they are: one mma.m16n8k32 (u8 codes times s8
// x) is one 32-value sub-block of 16 rows and 8 tokens. x is 16 bits per
// 256 values (v = rint(x / d), d = max |x| / 16383) held as two s8 planes v
// = lo + 128 hi, so two mmas a sub-block and tile, into int32 sums added
// over the super-block with the row's scale: L += sc c_lo, H += sc c_hi, M
// += m S (S the sub-block's sum of v), then once a super-block y += dx (d (L
// + 128 H) - dmin M). Bounds: |L|, |H| <= 63 * 15 * 128 * 256 = 31 M, |M| <=
// 63 * 32 * 16383 * 8 = 264 M (int32); L + 128 H in f32.
//
// Fragments (g = lane / 4, q = lane % 4): A a0 = row g, k 4q + [0, 4), a1 =
// row g + 8, a2 / a3 the same at k 16 + 4q; B b0 = k 4q + [0, 4) of column
// g, b1 = k 16 + 4q + [0, 4); C c0, c1 = row g, columns 2q, 2q + 1, c2, c3
// row g + 8. The k order is a permutation: k 4q + i is value 8q + i of the
// sub-block, k 16 + 4q + i value 8q + 4 + i, so a lane's A words are qs bytes
// 8q .. 8q + 8 of a 32-byte chunk (low nibbles: sub-block 2j, high: 2j + 1)
// and its B words are 8 contiguous bytes of x's plane at 8q (no permutation
// of x). x in shared memory: token t at t TS (TS = 512 sb + 32, so a
// half-warp's tokens g 0..3 at 8q land on 32 banks), sub-block jj at 64 jj,
// plane lo then hi; then S as [jj][token] and d as [super-block][token].
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mmq.cuh"  // the f16 kernel (timed beside), k_mmq_sum, mmq_split
#include "probe_util.cuh"

// c = a (16 x 32 u8) b (32 x 8 s8), int32 sums (C zero).
static __device__ __forceinline__ void imma0(int (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// x (n x K f32) to 16 bits per 256 values: planes lo, hi (n x K s8), per
// 256 values d (xd), per 32 the sum of v (xs). A warp 256 values, a lane 8.
__global__ void k_prep(const float *__restrict__ x, long sbs, int8_t *__restrict__ lo,
                       int8_t *__restrict__ hi, float *__restrict__ xd, int *__restrict__ xs) {
  const long si = blockIdx.x * 8L + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (si >= sbs) return;
  const float *p = x + si * 256 + 8 * lane;
  float v[8], m = 0.0f;
  for (int i = 0; i < 8; i++) v[i] = p[i], m = fmaxf(m, fabsf(v[i]));
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  const float d = m / 16383.0f;
  int s = 0;
  for (int i = 0; i < 8; i++) {
    int c = d > 0.0f ? __float2int_rn(v[i] / d) : 0;
    c = max(-16383, min(16383, c));
    lo[si * 256 + 8 * lane + i] = (int8_t)(c & 127), hi[si * 256 + 8 * lane + i] = (int8_t)(c >> 7);
    s += c;
  }
  s += __shfl_xor_sync(~0u, s, 1), s += __shfl_xor_sync(~0u, s, 2);  // 4 lanes a sub-block
  if ((lane & 3) == 0) xs[si * 8 + lane / 4] = s;
  if (lane == 0) xd[si] = d;
}

// A lane's raw bytes of one super-block: per row (g, g + 8) the 16-byte head
// (d, dmin, 12 scale bytes) and 8 bytes of each 32-byte chunk (at 8q).
struct qi_w {
  uint4 h[2];
  uint2 c[2][4];
};

static __device__ __forceinline__ void qi_load(qi_w &w, const uint8_t *p0, const uint8_t *p1,
                                               int q) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const uint8_t *p = r ? p1 : p0;
    w.h[r] = __ldg((const uint4 *)p);
#pragma unroll
    for (int j = 0; j < 4; j++) w.c[r][j] = __ldg((const uint2 *)(p + 16 + 32 * j + 8 * q));
  }
}

static int qi_ts(int sb) { return 512 * sb + 32; }  // x's token stride in shared memory

template <int NTT>
__global__ void __launch_bounds__(256, 2)
k_mmqi(const uint8_t *__restrict__ W, size_t rowb, int rows, int K, const int8_t *__restrict__ xlo,
       const int8_t *__restrict__ xhi, const float *__restrict__ xd, const int *__restrict__ xs,
       int n, int sb, float *__restrict__ part) {
  extern __shared__ __align__(16) uint8_t sm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int sb0 = blockIdx.y * sb, nb = min(sb, K / 256 - sb0);
  const int lsb = sb == 4 ? 2 : sb == 2 ? 1 : 0, TS = 512 * sb + 32;
  int *sS = (int *)(sm + NTT * 8 * TS);            // [jj][t]
  float *sD = (float *)(sS + 8 * sb * NTT * 8);    // [b][t]
  const int r0 = blockIdx.x * 128 + 16 * warp + g;
  const uint8_t *w0 = W + (size_t)min(r0, rows - 1) * rowb + (size_t)sb0 * 144;
  const uint8_t *w1 = W + (size_t)min(r0 + 8, rows - 1) * rowb + (size_t)sb0 * 144;
  qi_w wa, wb;
  qi_load(wa, w0, w1, q);
  for (int i = threadIdx.x; i < NTT * 8 * (8 << lsb) * 4; i += blockDim.x) {
    const int p4 = i & 3, rest = i >> 2, jj = rest & ((8 << lsb) - 1), t = rest >> (3 + lsb);
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (t < n && jj < 8 * nb)
      v = __ldg((const uint4 *)((p4 < 2 ? xlo : xhi) + (size_t)t * K + (sb0 * 8 + jj) * 32 +
                                16 * (p4 & 1)));
    *(uint4 *)(sm + t * TS + jj * 64 + 16 * p4) = v;
  }
  for (int i = threadIdx.x; i < (8 << lsb) * NTT * 8; i += blockDim.x) {
    const int t = i % (8 * NTT), jj = i / (8 * NTT);
    sS[i] = t < n && jj < 8 * nb ? xs[(size_t)t * (K / 32) + sb0 * 8 + jj] : 0;
  }
  for (int i = threadIdx.x; i < sb * NTT * 8; i += blockDim.x) {
    const int t = i % (8 * NTT), b = i / (8 * NTT);
    sD[i] = t < n && b < nb ? xd[(size_t)t * (K / 256) + sb0 + b] : 0.0f;
  }
  __syncthreads();
  float acc[NTT][4];
#pragma unroll
  for (int t = 0; t < NTT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  auto step = [&](const qi_w &w, int b) {
    int L[NTT][4], H[NTT][4], M[NTT][4];
#pragma unroll
    for (int t = 0; t < NTT; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) L[t][e] = H[t][e] = M[t][e] = 0;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int hf = 0; hf < 2; hf++) {
        const int sub = 2 * j + hf, jj = 8 * b + sub;
        uint32_t a[4];
        int sc[2], mn[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const uint2 c = w.c[r][j];
          a[r] = (hf ? c.x >> 4 : c.x) & 0x0F0F0F0Fu;
          a[2 + r] = (hf ? c.y >> 4 : c.y) & 0x0F0F0F0Fu;
          // kq_scale_min's bytes, sub a compile-time constant
          const int sh = 8 * (sub & 3);
          const int b0 = (w.h[r].y >> sh) & 0xff, b1 = (w.h[r].z >> sh) & 0xff;
          const int b2 = (w.h[r].w >> sh) & 0xff;
          sc[r] = sub < 4 ? b0 & 63 : (b2 & 0xF) | ((b0 >> 6) << 4);
          mn[r] = sub < 4 ? b1 & 63 : (b2 >> 4) | ((b1 >> 6) << 4);
        }
#pragma unroll
        for (int tt = 0; tt < NTT; tt++) {
          const uint8_t *xb = sm + (8 * tt + g) * TS + jj * 64 + 8 * q;
          const uint2 lo = *(const uint2 *)xb, hi = *(const uint2 *)(xb + 32);
          int cl[4], ch[4];
          imma0(cl, a, lo.x, lo.y);
          imma0(ch, a, hi.x, hi.y);
          const int2 S = *(const int2 *)(sS + jj * 8 * NTT + 8 * tt + 2 * q);
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int r = e >> 1;
            L[tt][e] += sc[r] * cl[e], H[tt][e] += sc[r] * ch[e];
            M[tt][e] += mn[r] * (e & 1 ? S.y : S.x);
          }
        }
      }
    float d[2], dm[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      d[r] = __half2float(__ushort_as_half((unsigned short)w.h[r].x));
      dm[r] = __half2float(__ushort_as_half((unsigned short)(w.h[r].x >> 16)));
    }
#pragma unroll
    for (int tt = 0; tt < NTT; tt++) {
      const float2 dx = *(const float2 *)(sD + b * 8 * NTT + 8 * tt + 2 * q);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = e >> 1;
        const float s = fmaf(128.0f, (float)H[tt][e], (float)L[tt][e]);
        acc[tt][e] = fmaf(e & 1 ? dx.y : dx.x, fmaf(d[r], s, -dm[r] * (float)M[tt][e]), acc[tt][e]);
      }
    }
  };
  mmq_pingpong(nb, wa, wb, [&](qi_w &w, int b) {
    qi_load(w, w0 + (size_t)b * 144, w1 + (size_t)b * 144, q);
  }, step);
  mmq_store<NTT>(part, acc, n, rows, r0, q);
}

template <int NTT>
static void qi_launch_t(const uint8_t *W, size_t rowb, int rows, int K, const int8_t *lo,
                        const int8_t *hi, const float *xd, const int *xs, int n, int sb,
                        float *part, float *y, cudaStream_t st) {
  const size_t smem = (size_t)NTT * 8 * qi_ts(sb) + (size_t)(8 * sb + sb) * NTT * 8 * 4;
  PCK(cudaFuncSetAttribute(k_mmqi<NTT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const dim3 grid((rows + 127) / 128, (K / 256 + sb - 1) / sb);
  k_mmqi<NTT><<<grid, 256, smem, st>>>(W, rowb, rows, K, lo, hi, xd, xs, n, sb, part);
  const long total = (long)n * rows;
  k_mmq_sum<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(part, (int)grid.y, n, rows, y, rows,
                                                              0.0f);
}

// 1 to 16 tokens (the int32 sums of more tiles would spill).
static void qi_launch(const uint8_t *W, size_t rowb, int rows, int K, const int8_t *lo,
                      const int8_t *hi, const float *xd, const int *xs, int n, int sb, float *part,
                      float *y, cudaStream_t st) {
  if (n <= 8) qi_launch_t<1>(W, rowb, rows, K, lo, hi, xd, xs, n, sb, part, y, st);
  else qi_launch_t<2>(W, rowb, rows, K, lo, hi, xd, xs, n, sb, part, y, st);
  PCK(cudaGetLastError());
}

int main() {
  const double bw = copy_gbps();
  printf("copy %.0f GB/s\n", bw);
  const int shapes[][2] = {{1024, 4096}, {4096, 4096}, {14336, 4096}, {4096, 14336}};  // rows, K
  const int COPIES = 4, NMAX = 32;
  int fails = 0;
  for (auto &sh : shapes) {
    const int rows = sh[0], K = sh[1], rowb = K / 256 * 144;
    const size_t wb = (size_t)rows * rowb;
    std::vector<uint8_t> hw(wb);
    uint32_t s = 77u + rows + K;
    auto rnd = [&] { return s = s * 1664525u + 1013904223u, s >> 8; };
    rand_q4k(hw.data(), wb, K, &s);
    std::vector<uint8_t *> Wd = dev_copies(hw, COPIES);
    std::vector<float> hx((size_t)NMAX * K);
    for (auto &v : hx) v = (float)(rnd() % 20001) / 10000.0f - 1.0f;
    for (int i = 0; i < NMAX; i++) hx[(size_t)i * K + 5 * i] = 9.0f;  // an outlier a token
    std::vector<__half> hh(hx.size());
    for (size_t i = 0; i < hx.size(); i++) hh[i] = __float2half(hx[i]);
    float *xf, *yd, *part, *xd;
    int *xs;
    __half *xh;
    int8_t *lo, *hi;
    PCK(cudaMalloc((void **)&xf, hx.size() * 4));
    PCK(cudaMemcpy(xf, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
    PCK(cudaMalloc((void **)&xh, hh.size() * 2));
    PCK(cudaMemcpy(xh, hh.data(), hh.size() * 2, cudaMemcpyHostToDevice));
    PCK(cudaMalloc((void **)&lo, hx.size()));
    PCK(cudaMalloc((void **)&hi, hx.size()));
    PCK(cudaMalloc((void **)&xd, hx.size() / 256 * 4));
    PCK(cudaMalloc((void **)&xs, hx.size() / 32 * 4));
    const size_t pf = (size_t)(K / 256) * NMAX * rows;
    PCK(cudaMalloc((void **)&part, pf * 4));
    PCK(cudaMalloc((void **)&yd, (size_t)NMAX * rows * 4));
    const long sbs = (long)NMAX * K / 256;
    k_prep<<<(unsigned)((sbs + 7) / 8), 256>>>(xf, sbs, lo, hi, xd, xs);
    PCK(cudaDeviceSynchronize());
    std::vector<double> wf((size_t)rows * K);
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < K; j++)
        wf[(size_t)r * K + j] = host_q4k_value(&hw[(size_t)r * rowb + 144 * (j / 256)], j % 256);
    const double mb = wb / 1e6;
    const int sb = mmq_split(rows, K);
    printf("%d x %d (rows x K): %.1f MB of Q4_K, %.2f us at the copy rate, split %d\n", rows, K, mb,
           mb / bw * 1e3, sb);
    for (int n : {1, 4, 8, 12, 16}) {
      PCK(cudaMemset(yd, 0xff, (size_t)n * rows * 4));
      qi_launch(Wd[0], rowb, rows, K, lo, hi, xd, xs, n, sb, part, yd, 0);
      PCK(cudaDeviceSynchronize());
      std::vector<float> out((size_t)n * rows);
      PCK(cudaMemcpy(out.data(), yd, out.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r += rows > 2000 ? 11 : 1) {
          double ref = 0, mag = 0;
          for (int j = 0; j < K; j++) {
            const double p = wf[(size_t)r * K + j] * hx[(size_t)t * K + j];
            ref += p, mag += fabs(p);
          }
          const double e = fabs(out[(size_t)t * rows + r] - ref) / (mag + 1e-9);
          if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;
        }
      const bool ok = worst <= 2e-3;
      fails += !ok;
      int l1 = 0, l2 = 0;
      const double us = graph_us([&](cudaStream_t st, int) {
        qi_launch(Wd[l1++ % COPIES], rowb, rows, K, lo, hi, xd, xs, n, sb, part, yd, st);
      }, 0, 8);
      const double us16 = graph_us([&](cudaStream_t st, int) {
        PCK(mmq_launch<WK_Q4_K>(Wd[l2++ % COPIES], rowb, rows, K, xh, n, yd, 0.0f, part, pf, st));
      }, 0, 8);
      const double usp = graph_us([&](cudaStream_t st, int) {
        const long gr = (long)n * K / 256;
        k_prep<<<(unsigned)((gr + 7) / 8), 256, 0, st>>>(xf, gr, lo, hi, xd, xs);
      }, 0, 8);
      auto pct = [&](double t) { return 100.0 * mb * 1e3 / t / bw; };  // MB / us = 1e3 GB/s
      printf("  n %2d: integer %7.2f us (%3.0f%%), f16 kernel %7.2f us (%3.0f%%), x prep %5.2f us; "
             "max error %.2e of sum|wx|%s\n", n, us, pct(us), us16, pct(us16), usp, worst,
             ok ? "" : "  FAIL");
    }
    for (auto p : Wd) PCK(cudaFree(p));
    PCK(cudaFree(xf)); PCK(cudaFree(xd)); PCK(cudaFree(xs)); PCK(cudaFree(xh)); PCK(cudaFree(lo));
    PCK(cudaFree(hi));
    PCK(cudaFree(part)); PCK(cudaFree(yd));
  }
  printf("mmqi: %d failed\n", fails);
  return fails ? 1 : 0;
}
