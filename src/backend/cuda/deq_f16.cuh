// Dequantization of weight rows to f16 for the GEMM path (cu_dequant_f16):
// rows [r0, r1) of a matrix into r1 - r0 dense f16 rows. Every value is
// deq32<T>'s f32 rounded by __floats2half2_rn, whichever kernel runs.
//
// The tiled kernel treats the rows as one flat run of 32-value groups (rows
// are whole blocks laid end to end, so group i of the run lies in block
// i / (BLOCK/32) and its f16 output at 64 i bytes). A block of NT threads
// takes NT * G consecutive groups, thread t groups t, t + NT, ... (lanes read
// neighbouring groups; a thread's G groups load independently), stages the
// f16 values in shared memory and writes the tile out with 16-byte stores
// of consecutive lanes to consecutive addresses. Staged shapes first copy
// the tile's raw blocks to shared memory with 16-byte loads and decode
// there.
// The row kernel (one thread a group, each writing its 64 bytes itself)
// serves rows that are not whole blocks end to end and is kept for
// comparison (cuda_bench_matvec mode 6).
#ifndef WICK_BACKEND_CUDA_DEQ_F16_CUH
#define WICK_BACKEND_CUDA_DEQ_F16_CUH

#include <limits.h>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/quant.cuh"

// Group w[0..32) as four 16-byte words of f16 pairs.
static __device__ __forceinline__ void f16x32(const float *w, uint4 *o) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    __half2 h[4];
#pragma unroll
    for (int k = 0; k < 4; k++) h[k] = __floats2half2_rn(w[8 * i + 2 * k], w[8 * i + 2 * k + 1]);
    o[i] = *(uint4 *)h;
  }
}

// Where word i (0..3) of tile group q sits in shared memory: q's four words
// rotated by bits 1..2 of q, so the 8 lanes of a quarter warp (consecutive q,
// one i) store to 8 different 16-byte bank slots, and a read of 8
// consecutive words (the copy out) stays within one 128-byte row.
static __device__ __forceinline__ int deq_slot(int q, int i) {
  return 4 * q + (i ^ ((q >> 1) & 3));
}

// Raw bytes [src, src + len) into words[], the first at byte src % 16 of
// words[0] (so every block keeps its global alignment): 16-byte loads of
// consecutive lanes, all of a thread's issued before its shared-memory
// stores; the last word byte by byte where it runs past the end. MAXW: the
// most words it may take.
template <int NT, int MAXW>
static __device__ __forceinline__ void deq_stage(const uint8_t *src, int len, uint4 *words) {
  constexpr int K = (MAXW + NT - 1) / NT;
  int off = (int)((uintptr_t)src & 15), end = off + len, nw = (end + 15) / 16;
  const uint4 *a = (const uint4 *)(src - off);
  uint4 v[K];
#pragma unroll
  for (int k = 0; k < K; k++) {
    int f = k * NT + threadIdx.x;
    if (16 * f + 16 <= end) v[k] = __ldg(a + f);
  }
#pragma unroll
  for (int k = 0; k < K; k++) {
    int f = k * NT + threadIdx.x;
    if (16 * f + 16 <= end) {
      words[f] = v[k];
    } else if (f < nw) {
      uint8_t *d = (uint8_t *)(words + f);
      for (int i = 0; i < end - 16 * f; i++) d[i] = __ldg(src - off + 16 * f + i);
    }
  }
}

// Groups [NT G b, NT G (b + 1)) of the n groups at W into out. S: the
// tile's raw blocks staged in shared memory first (16-byte loads) and
// decoded from there, rather than each thread reading its group from
// global memory with the format's own loads (S needs n a whole number of
// blocks, as the flat layout has it).
template <int T, int NT, int G, bool S>
__global__ void __launch_bounds__(NT) k_dequant_f16(const uint8_t *__restrict__ W, int n,
                                                    __half *__restrict__ out) {
  constexpr int GPB = qtype<T>::BLOCK / 32, BYTES = qtype<T>::BYTES, NB = NT * G / GPB;
  __shared__ uint4 tile[NT * G * 4];
  constexpr int RAW = S ? (NB * BYTES + 30) / 16 : 1;  // words of raw blocks (+ alignment)
  __shared__ uint4 raw[RAW];
  const int t = threadIdx.x, g0 = blockIdx.x * (NT * G);
  const uint8_t *src = W;
  int q0 = g0;  // group of src that is the tile's first
  if constexpr (S) {
    const uint8_t *b = W + (size_t)(g0 / GPB) * BYTES;
    deq_stage<NT, RAW>(b, min(NB, (n - g0) / GPB) * BYTES, raw);
    __syncthreads();
    src = (const uint8_t *)raw + ((uintptr_t)b & 15), q0 = 0;
  }
#pragma unroll
  for (int k = 0; k < G; k++) {
    int q = k * NT + t;
    if (g0 + q < n) {
      float w[32];
      deq32<T>(src, q0 + q, w);
      uint4 o[4];
      f16x32(w, o);
#pragma unroll
      for (int i = 0; i < 4; i++) tile[deq_slot(q, i)] = o[i];
    }
  }
  __syncthreads();
  int nw = 4 * min(NT * G, n - g0);  // 16-byte words of this tile
  uint4 *o = (uint4 *)out + 4 * (size_t)g0;
#pragma unroll
  for (int k = 0; k < 4 * G; k++) {
    int f = k * NT + t;
    if (f < nw) o[f] = tile[deq_slot(f >> 2, f & 3)];
  }
}

// One thread a group: group g of row r0 + r to row r of out.
template <int T>
__global__ void k_dequant_f16_rows(const uint8_t *__restrict__ W, size_t row_bytes, int r0,
                                   int nrows, int cols, __half *__restrict__ out) {
  long gi = (long)blockIdx.x * blockDim.x + threadIdx.x;
  int ng = cols / 32;
  if (gi >= (long)nrows * ng) return;
  int r = (int)(gi / ng), g = (int)(gi % ng);
  float w[32];
  deq32<T>(W + (size_t)(r0 + r) * row_bytes, g, w);
  f16x32(w, (uint4 *)(out + (size_t)r * cols + 32 * g));
}

template <int T, int NT, int G, bool S = false>
static cudaError_t deq_f16_tiled(const uint8_t *W, int n, __half *out, cudaStream_t st) {
  k_dequant_f16<T, NT, G, S><<<cu_div_up(n, NT * G), NT, 0, st>>>(W, n, out);
  return cudaGetLastError();
}

// Whether staging a type's raw blocks can pay: not for the float types,
// whose groups are already whole 16-byte words.
template <int T>
struct deq_stages {
  static constexpr bool value = T != WK_F32 && T != WK_F16 && T != WK_BF16;
};

// Rows [r0, r1) of w to f16. shape: 0 the tiled kernel at its default
// (128 threads, 2 groups a thread, staged; the float types 256, 1: H200,
// bench_cuda dequant, session 5: 85-92% of the copy rate for the quantized
// and FP8 types, against 76-93% for (256, 2) unstaged and 46-62% for the row
// kernel), 1 (256, 1), 2 (128, 4), 3 (64, 8), 4 (256, 1) staged, 5 (128,
// 2) staged (the float types unstaged at those shapes); -1 the row kernel. The tiled shapes fall back to the row
// kernel where w's rows are not whole blocks end to end. Shapes 1 to 5 only
// with ALL (the benchmark's and tests' build; without it they run as 0).
template <int T, bool ALL = false>
static cudaError_t deq_f16(const cu_weight *w, int r0, int r1, __half *out, int shape,
                           cudaStream_t st) {
  constexpr int BLOCK = qtype<T>::BLOCK, BYTES = qtype<T>::BYTES;
  long groups = (long)(r1 - r0) * (w->cols / 32);
  if (groups <= 0) return cudaSuccess;
  bool flat = w->cols % BLOCK == 0 && w->row_bytes == (size_t)(w->cols / BLOCK) * BYTES &&
              groups <= INT_MAX - 1024;
  if (flat && shape >= 0) {
    const uint8_t *W = w->d + (size_t)r0 * w->row_bytes;
    int n = (int)groups;
    if constexpr (ALL) {
      constexpr bool S = deq_stages<T>::value;
      if (shape == 1) return deq_f16_tiled<T, 256, 1>(W, n, out, st);
      if (shape == 2) return deq_f16_tiled<T, 128, 4>(W, n, out, st);
      if (shape == 3) return deq_f16_tiled<T, 64, 8>(W, n, out, st);
      if (shape == 4) return deq_f16_tiled<T, 256, 1, S>(W, n, out, st);
      if (shape == 5) return deq_f16_tiled<T, 128, 2, S>(W, n, out, st);
    }
    if constexpr (deq_stages<T>::value) return deq_f16_tiled<T, 128, 2, true>(W, n, out, st);
    return deq_f16_tiled<T, 256, 1>(W, n, out, st);
  }
  k_dequant_f16_rows<T><<<cu_div_up(groups, 256), 256, 0, st>>>(w->d, w->row_bytes, r0, r1 - r0,
                                                                 w->cols, out);
  return cudaGetLastError();
}

#endif
