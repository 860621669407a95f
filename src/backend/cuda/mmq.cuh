// Batches of tokens against Q4_K weights without the GEMM path's f16 copy
// of the matrix (session 16): Y (n x rows) = X (n x K, f16) W^T + beta Y,
// W's blocks dequantized to f16 in registers straight into the A fragments
// of mma.m16n8k16 (f32 sums), the tokens in the B fragments' 8 columns. For
// batches past the matrix-vector kernels, of MMQ_MIN_N to MMQ_MAX_N tokens
// (decode steps of 9 to 32 sequences, short prompts): the GEMM path writes and
// reads 2 bytes a weight more than it reads of W (8B Q4_K_M: 65-70 us for a
// 33 MB matrix at 16 tokens against 33 here, bench/cuda/mmq.cu).
//
// A block: 8 warps, each a 16-row tile (128 rows a block), over MMQ_SB
// super-blocks of K (blockIdx.y: the K split; the last may be shorter); the
// split's x is staged once in shared memory. Lane (g, q) (g = lane / 4, q =
// lane % 4) reads chunk q of its rows g and g + 8 (qs bytes 32q .. 32q +
// 32: sub-block 2q in the low nibbles, 2q + 1 in the high ones). k-step s
// (16 a super-block) takes word s / 2 of the chunk, its low nibbles (s
// even) or high ones; the word's bytes 0 and 2 are the A pair at k 2q, 2q +
// 1, bytes 1 and 3 the pair at 2q + 8, 2q + 9. The mma's k order is so a
// permutation of the values; B reads x in the same order: x's 4 values of
// a word are staged as (x0, x2, x1, x3), one 8-byte load a lane and tile.
// Codes to f16 by the 0x6400 exponent (1024 + code, exact, minus 1024:
// exact), then code (d sc) - dmin m in one f16 fma a pair, d sc and dmin m
// rounded to f16 once a sub-block (the GEMM path rounds d sc code - dmin m
// once: both are the weight to f16's precision).
//
// The splits' partial sums go to a buffer (the GEMM path's f16 scratch,
// read as floats) and k_mmq_sum adds them in split order: every result is
// the same run to run.
#ifndef WICK_BACKEND_CUDA_MMQ_CUH
#define WICK_BACKEND_CUDA_MMQ_CUH

#include "backend/cuda/mma.cuh"    // mma16816
#include "backend/cuda/quant.cuh"  // kq_scale_min

// Batches of MMQ_MIN_N to MMQ_MAX_N tokens: 2 to 4 tiles of 8. (One tile, 5
// to 8 tokens, beat the tensor-core matrix-vector kernel at 8 sequences of
// the 8B Q4_K_M, 6.07 against 7.17 ms a step, but has not been through the
// device's kernel tests yet: session 16.)
enum { MMQ_MIN_N = 9, MMQ_MAX_N = 32, MMQ_SB = 4, MMQ_WARPS = 8, MMQ_ROWS = 16 * MMQ_WARPS };
// x in shared memory: token t's sub-block j at t MMQ_TS + j MMQ_JS bytes (the
// strides put a half-warp's 16 8-byte reads on 32 banks: j 2q + h, 80 bytes
// apart, moves q by 8 banks; a token 8 bytes more than 32 sub-blocks by 2).
enum { MMQ_SUBS = 8 * MMQ_SB, MMQ_JS = 80, MMQ_TS = MMQ_SUBS * MMQ_JS + 8 };

// Word w's nibbles (shifted down by 4 h first) as two f16 pairs of codes
// times s minus m: *p02 of bytes 0 and 2, *p13 of bytes 1 and 3.
static __device__ __forceinline__ void mmq_deq(uint32_t w, int h, __half2 s, __half2 m,
                                               uint32_t *p02, uint32_t *p13) {
  const uint32_t t = h ? w >> 4 : w;
  const uint32_t a = (t & 0x000F000Fu) | 0x64006400u, b = ((t >> 8) & 0x000F000Fu) | 0x64006400u;
  const __half2 k1024 = __float2half2_rn(1024.0f), nm = __hneg2(m);
  const __half2 ha = __hfma2(__hsub2(*(const __half2 *)&a, k1024), s, nm);
  const __half2 hb = __hfma2(__hsub2(*(const __half2 *)&b, k1024), s, nm);
  *p02 = *(const uint32_t *)&ha, *p13 = *(const uint32_t *)&hb;
}

// NTT: token tiles of 8 (n <= 8 NTT). part[split][token][row] (rows of this
// launch's W: ld rows).
template <int NTT>
__global__ void __launch_bounds__(32 * MMQ_WARPS, 2)
k_mmq(const uint8_t *__restrict__ W, size_t rowb, int rows, int K, const __half *__restrict__ x,
      int n, float *__restrict__ part) {
  extern __shared__ __align__(16) uint8_t mmq_xs[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int sb0 = blockIdx.y * MMQ_SB, nb = min(MMQ_SB, K / 256 - sb0);
  const int r0 = blockIdx.x * MMQ_ROWS + 16 * warp + g;  // the lane's rows r0, r0 + 8
  const uint8_t *w0 = W + (size_t)min(r0, rows - 1) * rowb + (size_t)sb0 * 144;
  const uint8_t *w1 = W + (size_t)min(r0 + 8, rows - 1) * rowb + (size_t)sb0 * 144;
  uint4 h[2], c[2][2];  // [row]: header (d, dmin, scales); [row][half]: chunk q
  auto load = [&](int b) {
    h[0] = __ldg((const uint4 *)(w0 + 144 * b)), h[1] = __ldg((const uint4 *)(w1 + 144 * b));
    c[0][0] = __ldg((const uint4 *)(w0 + 144 * b + 16 + 32 * q));
    c[0][1] = __ldg((const uint4 *)(w0 + 144 * b + 32 + 32 * q));
    c[1][0] = __ldg((const uint4 *)(w1 + 144 * b + 16 + 32 * q));
    c[1][1] = __ldg((const uint4 *)(w1 + 144 * b + 32 + 32 * q));
  };
  load(0);
  // The split's x: 4 values a thread-step, tokens past n zero.
  for (int i = threadIdx.x; i < NTT * 8 * MMQ_SUBS * 8; i += blockDim.x) {
    const int t = i / (MMQ_SUBS * 8), j = (i / 8) % MMQ_SUBS, wd = i % 8;
    uint2 v = make_uint2(0u, 0u);
    if (t < n && j < 8 * nb) v = __ldg((const uint2 *)(x + (size_t)t * K + sb0 * 256 + 32 * j + 4 * wd));
    *(uint2 *)(mmq_xs + t * MMQ_TS + j * MMQ_JS + 8 * wd) =
        make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
  }
  __syncthreads();
  float acc[NTT][4];
#pragma unroll
  for (int t = 0; t < NTT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int b = 0; b < nb; b++) {
    const uint4 hc[2] = {h[0], h[1]}, cc[2][2] = {{c[0][0], c[0][1]}, {c[1][0], c[1][1]}};
    if (b + 1 < nb) load(b + 1);
    __half2 s2[2][2], m2[2][2];  // [row][hi]: sub-block 2q + hi's d sc, dmin m
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float d = __half2float(__ushort_as_half((unsigned short)hc[r].x));
      const float dm = __half2float(__ushort_as_half((unsigned short)(hc[r].x >> 16)));
#pragma unroll
      for (int hi = 0; hi < 2; hi++) {
        float sc, mn;
        kq_scale_min(hc[r].y, hc[r].z, hc[r].w, 2 * q + hi, &sc, &mn);
        s2[r][hi] = __float2half2_rn(d * sc), m2[r][hi] = __float2half2_rn(dm * mn);
      }
    }
#pragma unroll
    for (int st = 0; st < 16; st++) {
      const int wd = st >> 1, hi = st & 1, e = wd & 3;
      const uint4 va = cc[0][wd >> 2], vb = cc[1][wd >> 2];
      const uint32_t wa = e == 0 ? va.x : e == 1 ? va.y : e == 2 ? va.z : va.w;
      const uint32_t wb = e == 0 ? vb.x : e == 1 ? vb.y : e == 2 ? vb.z : vb.w;
      uint32_t a[4];
      mmq_deq(wa, hi, s2[0][hi], m2[0][hi], &a[0], &a[2]);
      mmq_deq(wb, hi, s2[1][hi], m2[1][hi], &a[1], &a[3]);
      const uint8_t *xb = mmq_xs + g * MMQ_TS + (8 * b + 2 * q + hi) * MMQ_JS + 8 * wd;
#pragma unroll
      for (int t = 0; t < NTT; t++) {
        const uint2 bv = *(const uint2 *)(xb + 8 * t * MMQ_TS);
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

// y[token][row] (ld ldy) = the splits' sums in split order (+ beta y).
__global__ void k_mmq_sum(const float *__restrict__ part, int splits, int n, int rows,
                          float *__restrict__ y, int ldy, float beta) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x, total = (long)n * rows;
  if (i >= total) return;
  float s = 0.0f;
  for (int k = 0; k < splits; k++) s += part[k * total + i];
  float *o = y + (i / rows) * ldy + i % rows;
  *o = beta != 0.0f ? s + beta * *o : s;
}

template <int NTT>
static cudaError_t mmq_launch_t(const uint8_t *W, size_t rowb, int rows, int K, const __half *x,
                                int n, float *part, float *y, int ldy, float beta, cudaStream_t st) {
  const size_t smem = (size_t)NTT * 8 * MMQ_TS;
  cudaError_t e;
  if ((e = cudaFuncSetAttribute(k_mmq<NTT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)smem)) != cudaSuccess)
    return e;
  const dim3 grid((rows + MMQ_ROWS - 1) / MMQ_ROWS, (K / 256 + MMQ_SB - 1) / MMQ_SB);
  k_mmq<NTT><<<grid, 32 * MMQ_WARPS, smem, st>>>(W, rowb, rows, K, x, n, part);
  const long total = (long)n * rows;
  k_mmq_sum<<<(unsigned)((total + 255) / 256), 256, 0, st>>>(part, (int)grid.y, n, rows, y, ldy,
                                                              beta);
  return cudaGetLastError();
}

// Y (n x rows, ld rows) = X W^T + beta Y for Q4_K W (rows x K, K a multiple
// of 256, rows rowb bytes apart, 16-byte aligned), MMQ_MIN_N <= n <=
// MMQ_MAX_N, x n x K
// f16; part: part_floats of scratch. Rows in pieces whose partial sums fit.
// cudaErrorNotSupported: not this kernel's case (the caller takes the GEMM
// path).
static cudaError_t mmq_launch(const uint8_t *W, size_t rowb, int rows, int K, const __half *x,
                              int n, float *y, float beta, float *part, size_t part_floats,
                              cudaStream_t st) {
  if (n < MMQ_MIN_N || n > MMQ_MAX_N || K % 256 || rowb % 16 || (uintptr_t)W % 16 || !part)
    return cudaErrorNotSupported;
  const size_t splits = (size_t)(K / 256 + MMQ_SB - 1) / MMQ_SB;
  long piece = (long)(part_floats / (splits * (size_t)n));
  if (piece < rows) piece -= piece % MMQ_ROWS;
  if (piece < MMQ_ROWS && piece < rows) return cudaErrorNotSupported;
  for (int r0 = 0; r0 < rows; r0 += (int)piece) {
    const int r1 = r0 + piece < rows ? r0 + (int)piece : rows;
    const uint8_t *w = W + (size_t)r0 * rowb;
    cudaError_t e;
    switch ((n + 7) / 8) {
      case 2: e = mmq_launch_t<2>(w, rowb, r1 - r0, K, x, n, part, y + r0, rows, beta, st); break;
      case 3: e = mmq_launch_t<3>(w, rowb, r1 - r0, K, x, n, part, y + r0, rows, beta, st); break;
      default: e = mmq_launch_t<4>(w, rowb, r1 - r0, K, x, n, part, y + r0, rows, beta, st); break;
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

#endif
