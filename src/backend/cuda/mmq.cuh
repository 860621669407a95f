// Batches of tokens against Q4_K and Q6_K weights without the GEMM path's
// f16 copy of the matrix (sessions 16-17): Y (n x rows) = X (n x K, f16)
// W^T + beta Y, W's blocks dequantized to f16 in registers straight into
// the A fragments of mma.m16n8k16 (f32 sums), the tokens in the B
// fragments' 8 columns. For batches past the matrix-vector kernels, of 1 to
// MMQ_MAX_N tokens (decode steps of 5 to 32 sequences of a model whose
// matrices it covers, short prompts): the GEMM path writes and reads 2 bytes
// a weight more than it reads of W (8B Q4_K_M: 65-70 us for a 33 MB matrix
// at 16 tokens against 33 here, bench/cuda/mmq.cu). The design is checked on
// the host by bench/cuda/mmq_emulate.py (in make test).
//
// A block: 8 warps, each a 16-row tile (128 rows a block), over sb (1 to
// MMQ_SB) super-blocks of K (blockIdx.y: the K split; the last may be
// shorter); the split's x is staged once in shared memory. Where the row
// tiles outnumber a split's share of the resident blocks, each block walks
// several tiles (k_mmq's WAVE). Lane (g, q) (g = lane / 4, q =
// lane % 4) holds rows g and g + 8 of its tile; for each of a super-block's
// 16 k-steps its format (mmq_fmt) makes the A fragment from the lane's own
// bytes and names the 4 x values the lane's B pair multiplies. The mma's k
// order is so a permutation of the values, chosen to suit each format's
// byte layout; B reads x in the same order: x's 4 values of a word are
// staged as (x0, x2, x1, x3), one 8-byte load a lane and tile.
//
// The splits' partial sums go to a buffer and k_mmq_sum adds them in split
// order: every result is the same run to run.
#ifndef WICK_BACKEND_CUDA_MMQ_CUH
#define WICK_BACKEND_CUDA_MMQ_CUH

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mma.cuh"       // mma16816
#include "backend/cuda/mvr.cuh"       // mvr_ld16_a2, mvr_ld2
#include "backend/cuda/quant.cuh"     // kq_scale_min

enum { MMQ_MAX_N = 32, MMQ_SB = 16, MMQ_WARPS = 8, MMQ_ROWS = 16 * MMQ_WARPS };
// x in shared memory: token t's sub-block j at t mmq_ts(sb) + j MMQ_JS bytes
// (the strides put a half-warp's 16 8-byte reads on 32 banks: j 2q + h, 80
// bytes apart, moves q by 8 banks; a token 8 bytes more than 8 sb
// sub-blocks, 640 sb + 8 = 8 mod 128 bytes, by 2).
enum { MMQ_JS = 80 };
static __host__ __device__ __forceinline__ int mmq_ts(int sb) { return 8 * sb * MMQ_JS + 8; }

template <int T>
struct mmq_fmt;

// (a & b) | c in one instruction (written as two, the compiler emits an AND
// and an OR with an immediate each).
static __device__ __forceinline__ uint32_t mmq_andor(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Per type: BYTES a block; w_t, a lane's raw registers of one super-block
// (rows g and g + 8); load(w, p0, p1, q) from the blocks at p0, p1;
// scales(w, q, s) the lane's f16 scales; frag(w, s, q, st, a) the A
// fragment of k-step st (0..15); xcol(q, st) the super-block column of the
// 4 x values lane q's B pair of k-step st multiplies (bytes 0, 2 of a word
// at k 2q, 2q + 1; bytes 1, 3 at 2q + 8, 2q + 9).

// Q4_K: lane q reads chunk q of its rows (qs bytes 32q .. 32q + 32: sub-block
// 2q in the low nibbles, 2q + 1 in the high ones); k-step st takes word st
// / 2 of the chunk, its low nibbles (st even) or high ones. Codes to f16 by
// the 0x6400 exponent (1024 + code, exact, minus 1024: exact), then code (d
// sc) - dmin m in one f16 fma a pair, d sc and dmin m rounded to f16 once a
// sub-block (the GEMM path rounds d sc code - dmin m once: both are the
// weight to f16's precision).
template <>
struct mmq_fmt<WK_Q4_K> {
  static constexpr int BYTES = 144;
  struct w_t {
    uint4 h[2];     // [row]: d, dmin, 12 scale bytes
    uint4 c[2][2];  // [row][half]: chunk q
  };
  struct s_t {
    __half2 s[2][2], m[2][2];  // [row][hi]: sub-block 2q + hi's d sc, -dmin m
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1,
                                              int q) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *p = r ? p1 : p0;
      w.h[r] = __ldg((const uint4 *)p);
      w.c[r][0] = __ldg((const uint4 *)(p + 16 + 32 * q));
      w.c[r][1] = __ldg((const uint4 *)(p + 32 + 32 * q));
    }
  }
  static __device__ __forceinline__ void scales(const w_t &w, int q, s_t &s) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float d = __half2float(__ushort_as_half((unsigned short)w.h[r].x));
      const float dm = __half2float(__ushort_as_half((unsigned short)(w.h[r].x >> 16)));
#pragma unroll
      for (int hi = 0; hi < 2; hi++) {  // kq_scale_min without its branch
        const int sh = 8 * ((2 * q + hi) & 3);
        const uint32_t b0 = (w.h[r].y >> sh) & 0xff, b1 = (w.h[r].z >> sh) & 0xff;
        const uint32_t b2 = (w.h[r].w >> sh) & 0xff;
        const uint32_t sc = q < 2 ? b0 & 63 : (b2 & 0xF) | ((b0 >> 6) << 4);
        const uint32_t mn = q < 2 ? b1 & 63 : (b2 >> 4) | ((b1 >> 6) << 4);
        s.s[r][hi] = __float2half2_rn(d * (float)sc);
        s.m[r][hi] = __hneg2(__float2half2_rn(dm * (float)mn));
      }
    }
  }
  static __device__ __forceinline__ void frag(const w_t &w, const s_t &s, int, int st,
                                              uint32_t (&a)[4]) {
    const int wd = st >> 1, hi = st & 1, e = wd & 3;
    const __half2 k1024 = __float2half2_rn(1024.0f);
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint4 v = w.c[r][wd >> 2];
      const uint32_t x = e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w, t = hi ? x >> 4 : x;
      const uint32_t c02 = mmq_andor(t, 0x000F000Fu, 0x64006400u);
      const uint32_t c13 = mmq_andor(t >> 8, 0x000F000Fu, 0x64006400u);
      const __half2 nm = s.m[r][hi];
      const __half2 v02 = __hfma2(__hsub2(*(const __half2 *)&c02, k1024), s.s[r][hi], nm);
      const __half2 v13 = __hfma2(__hsub2(*(const __half2 *)&c13, k1024), s.s[r][hi], nm);
      a[r] = *(const uint32_t *)&v02, a[2 + r] = *(const uint32_t *)&v13;
    }
  }
  static __device__ __forceinline__ int xcol(int q, int st) {
    return 32 * (2 * q + (st & 1)) + 4 * (st >> 1);
  }
};

// Q6_K (210 bytes, 2-byte aligned: ql[128], qh[64], 16 int8 scales, d):
// lane q takes half hf = q / 2 of the super-block and the 16 l = 16 (q % 2)
// .. + 16 of it: ql bytes 64 hf + l (a) and 64 hf + 32 + l (b), qh bytes 128
// + 32 hf + l, read as aligned words joined by funnel shifts (mvr_ld16_a2).
// Value 128 hf + 32 j + l (j = 0..3) is the low nibble of a (j 0) or b (1),
// the high nibble of a (2) or b (3), with qh bits 2j, 2j + 1 above it, minus
// 32, times d sc[8 hf + l / 16 + 2 j]. k-step st is quarter j = st / 4, word
// st % 4 of the 16 l. Codes to f16 by the 0x6400 exponent, minus 1056
// (exact), times d sc rounded to f16 once a quarter.
template <>
struct mmq_fmt<WK_Q6_K> {
  static constexpr int BYTES = 210;
  struct w_t {
    uint32_t a[2][5], b[2][5], h[2][5];  // [row]: raw words (mvr_ld16_a2)
    uint32_t sc[2];                       // [row]: the lane's 4 scales (int8, j = 0..3)
    uint32_t d[2];                        // [row]: d (f16 bits), the runs' funnel shift << 16
  };
  struct s_t {
    __half2 s[2][4];  // [row][j]
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1,
                                              int q) {
    const int hf = q >> 1, l = 16 * (q & 1);
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *p = r ? p1 : p0;
      mvr_ld16_a2(p + 64 * hf + l, w.a[r]);
      mvr_ld16_a2(p + 64 * hf + 32 + l, w.b[r]);
      mvr_ld16_a2(p + 128 + 32 * hf + l, w.h[r]);
      const uint8_t *sp = p + 192 + 8 * hf;  // scales l / 16 + 2 j: byte q % 2 of halfword j
      uint32_t sc = 0;
#pragma unroll
      for (int j = 0; j < 4; j++) sc |= ((mvr_ld2(sp + 2 * j) >> (8 * (q & 1))) & 0xFFu) << (8 * j);
      w.sc[r] = sc;
      w.d[r] = mvr_ld2(p + 208) | ((uint32_t)((uintptr_t)(p + l) & 3) << 19);  // 8 (p & 3) << 16
    }
  }
  static __device__ __forceinline__ void scales(const w_t &w, int, s_t &s) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float d = __half2float(__ushort_as_half((unsigned short)w.d[r]));
#pragma unroll
      for (int j = 0; j < 4; j++)
        s.s[r][j] = __float2half2_rn(d * (float)(int8_t)(w.sc[r] >> (8 * j)));
    }
  }
  static __device__ __forceinline__ void frag(const w_t &w, const s_t &s, int, int st,
                                              uint32_t (&a)[4]) {
    const int j = st >> 2, wd = st & 3;
    const __half2 k1056 = __float2half2_rn(1056.0f);
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint32_t sh = w.d[r] >> 16;
      const uint32_t *lw = j & 1 ? w.b[r] : w.a[r];
      const uint32_t ql = __funnelshift_r(lw[wd], lw[wd + 1], sh) >> (4 * (j >> 1));
      const uint32_t qh = __funnelshift_r(w.h[r][wd], w.h[r][wd + 1], sh) >> (2 * j);
      const uint32_t c02 = (ql & 0x000F000Fu) | ((qh & 0x00030003u) << 4) | 0x64006400u;
      const uint32_t c13 = ((ql >> 8) & 0x000F000Fu) | (((qh >> 8) & 0x00030003u) << 4) | 0x64006400u;
      const __half2 v02 = __hmul2(__hsub2(*(const __half2 *)&c02, k1056), s.s[r][j]);
      const __half2 v13 = __hmul2(__hsub2(*(const __half2 *)&c13, k1056), s.s[r][j]);
      a[r] = *(const uint32_t *)&v02, a[2 + r] = *(const uint32_t *)&v13;
    }
  }
  static __device__ __forceinline__ int xcol(int q, int st) {
    return 128 * (q >> 1) + 32 * (st >> 2) + 16 * (q & 1) + 4 * (st & 3);
  }
};

// A split's nb super-blocks through two register buffers in turn: load(w, b)
// fills buffer w with super-block b, step(w, b) consumes it while b + 1
// loads (wa already holds super-block 0).
template <class Wt, class Load, class Step>
static __device__ __forceinline__ void mmq_pingpong(int nb, Wt &wa, Wt &wb, Load load, Step step) {
  for (int b = 0; b < nb; b += 2) {
    if (b + 1 < nb) load(wb, b + 1);
    step(wa, b);
    if (b + 1 >= nb) break;
    if (b + 2 < nb) load(wa, b + 2);
    step(wb, b + 1);
  }
}

// The lane's C values of NTT tiles to part[split][token][row]: c0, c1 row g,
// tokens 2q, 2q + 1 of tile t; c2, c3 row g + 8 (r0 the lane's row g).
template <int NTT>
static __device__ __forceinline__ void mmq_store(float *part, const float (&acc)[NTT][4], int n,
                                                 int rows, int r0, int q) {
  float *P = part + (size_t)blockIdx.y * n * rows;
#pragma unroll
  for (int t = 0; t < NTT; t++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int tok = 8 * t + 2 * q + (e & 1), row = r0 + (e >> 1) * 8;
      if (tok < n && row < rows) P[(size_t)tok * rows + row] = acc[t][e];
    }
}

// NTT: token tiles of 8 (n <= 8 NTT). part[split][token][row] (rows of this
// launch's W: ld rows). Block x takes row tiles x, x + gridDim.x, ... (one
// where the grid has a block a tile), its warps' super-blocks one stream
// across its tiles (the next tile's first loads issued during the last
// super-block of the one before; WAVE: the grid is smaller than the tiles,
// else a block a tile and no loop). MINB: blocks an SM (launch bounds).
// (The splits as a thread-block cluster adding their sums into y through
// distributed shared memory, in split order, instead of part and
// k_mmq_sum: bit-equal and 5-60% slower at 1-32 tokens, session 19.)
template <int T, int NTT, int MINB = MMQ_PER_SM, bool WAVE = false>
__global__ void __launch_bounds__(32 * MMQ_WARPS, MINB)
k_mmq(const uint8_t *__restrict__ W, size_t rowb, int rows, int K, const __half *__restrict__ x,
      int n, int sb, float *__restrict__ part) {
  using F = mmq_fmt<T>;
  extern __shared__ __align__(16) uint8_t mmq_xs[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int sb0 = (int)blockIdx.y * sb, nb = min(sb, K / 256 - sb0);
  const int tiles = (rows + MMQ_ROWS - 1) / MMQ_ROWS;
  const int mine = (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;  // WAVE: tiles
  const int items = WAVE ? mine * nb : nb;
  // Item i of the block's stream: super-block i % nb of tile blockIdx.x + (i
  // / nb) gridDim.x; the lane's row r0 (+ 8) of it.
  auto row0 = [&](int i) {
    const int tile = WAVE ? (int)blockIdx.x + i / nb * (int)gridDim.x : (int)blockIdx.x;
    return tile * MMQ_ROWS + 16 * warp + g;
  };
  auto load = [&](typename F::w_t &w, int i) {
    const int r = row0(i);
    const size_t o = (size_t)(sb0 + (WAVE ? i % nb : i)) * F::BYTES;
    F::load(w, W + (size_t)min(r, rows - 1) * rowb + o, W + (size_t)min(r + 8, rows - 1) * rowb + o,
            q);
  };
  typename F::w_t wa, wb;  // items i (even: wa) and i + 1 in flight
  load(wa, 0);  // weights: no earlier kernel writes them
  // Launched by programmatic dependent launch (pdl): x and the partial sums'
  // buffer (read by the last product's k_mmq_sum) after the wait; the grid
  // is one wave where mmq_launch has the device's blocks, so the sums'
  // launch may be let go at the start.
  if (WAVE) pdl_launch_next();
  pdl_wait();
  // The split's x: 4 values a thread-step (stored x0, x2, x1, x3), 64 sb
  // steps a token (sb a power of 2), tokens past n and columns past the
  // split's nb super-blocks zero.
  const int lsb = 31 - __clz(sb), ts = mmq_ts(sb);
  for (int i = threadIdx.x; i < NTT * 8 * 64 * sb; i += blockDim.x) {
    const int t = i >> (6 + lsb), c = i & ((64 << lsb) - 1);
    uint2 v = make_uint2(0u, 0u);
    if (t < n && c < 64 * nb) v = __ldg((const uint2 *)(x + (size_t)t * K + sb0 * 256 + 4 * c));
    *(uint2 *)(mmq_xs + t * ts + (c >> 3) * MMQ_JS + 8 * (c & 7)) =
        make_uint2(__byte_perm(v.x, v.y, 0x5410), __byte_perm(v.x, v.y, 0x7632));
  }
  __syncthreads();
  float acc[NTT][4];
#pragma unroll
  for (int t = 0; t < NTT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  // A tile's sums (the lane's rows r0, r0 + 8) to part.
  auto emit = [&](int r0) { mmq_store<NTT>(part, acc, n, rows, r0, q); };
  // Item i from w: its 16 k-steps; a tile's sums stored after its last.
  auto step = [&](const typename F::w_t &w, int i) {
    const int b = WAVE ? i % nb : i;
    typename F::s_t sc;
    F::scales(w, q, sc);
#pragma unroll
    for (int st = 0; st < 16; st++) {
      uint32_t a[4];
      F::frag(w, sc, q, st, a);
      const int col = 256 * b + F::xcol(q, st);
      const uint8_t *xb = mmq_xs + g * ts + (col >> 5) * MMQ_JS + 2 * (col & 31);
#pragma unroll
      for (int t = 0; t < NTT; t++) {
        const uint2 bv = *(const uint2 *)(xb + 8 * t * ts);
        mma16816(acc[t], a, bv.x, bv.y);
      }
    }
    if (WAVE && b == nb - 1) {
      emit(row0(i));
#pragma unroll
      for (int t = 0; t < NTT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
    }
  };
  mmq_pingpong(items, wa, wb, load, step);
  if (!WAVE) emit(row0(0));
}

// y[token][row] (ld ldy) = the splits' sums in split order (+ beta y). (The
// sums added by the last block of a row range to finish, in one launch,
// took 5-30% longer: session 17.)
static __global__ void k_mmq_sum(const float *__restrict__ part, int splits, int n, int rows,
                                 float *__restrict__ y, int ldy, float beta) {
  pdl_wait();
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x, total = (long)n * rows;
  if (i >= total) return;
  float s = 0.0f;
  for (int k = 0; k < splits; k++) s += part[k * total + i];
  float *o = y + (i / rows) * ldy + i % rows;
  *o = beta != 0.0f ? s + beta * *o : s;
}

// gx: blocks a split (0: a block a row tile); pdl: both kernels by
// programmatic dependent launch.
template <int T, int NTT, int MINB = MMQ_PER_SM>
static cudaError_t mmq_launch_t(const uint8_t *W, size_t rowb, int rows, int K, const __half *x,
                                int n, int sb, float *part, float *y, int ldy, float beta,
                                cudaStream_t st, int gx = 0, bool pdl = false) {
  const int tiles = (rows + MMQ_ROWS - 1) / MMQ_ROWS, splits = (K / 256 + sb - 1) / sb;
  const bool wave = gx > 0 && gx < tiles;
  const size_t smem = (size_t)NTT * 8 * mmq_ts(sb);
  if (smem > 200 * 1024) return cudaErrorNotSupported;
  void (*kern)(const uint8_t *, size_t, int, int, const __half *, int, int, float *) =
      wave ? k_mmq<T, NTT, MINB, true> : k_mmq<T, NTT, MINB, false>;
  cudaError_t e;
  if ((e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) !=
      cudaSuccess)
    return e;
  e = cu_launch(pdl, st, dim3(wave ? gx : tiles, splits), dim3(32 * MMQ_WARPS), smem, kern, W,
                rowb, rows, K, x, n, sb, part);
  if (e != cudaSuccess) return e;
  const long total = (long)n * rows;
  return cu_launch(pdl, st, dim3((unsigned)((total + 255) / 256)), dim3(256), 0, k_mmq_sum, part,
                   splits, n, rows, y, ldy, beta);
}

// The K split in super-blocks (1, 2 or 4; session 17, bench/cuda/mmq.cu):
// the longest that still gives enough blocks: 4 where that makes 400 (8B
// shapes 14336 x 4096 and 4096 x 14336: 23.1 us at 8 tokens against 27.4 at
// 2), 2 where that makes 128 (4096 x 4096: 8.5 against 9.1 at 4), else 1
// (1024 x 4096).
static inline int mmq_split(int rows, int K) {
  const long rb = (rows + MMQ_ROWS - 1) / MMQ_ROWS, kb = K / 256;
  if (rb * ((kb + 3) / 4) >= 400) return 4;
  return rb * ((kb + 1) / 2) >= 128 ? 2 : 1;
}

// Y (n x rows, ld rows) = X W^T + beta Y for W of type T (Q4_K, Q6_K; rows x
// K, K a multiple of 256, rows rowb bytes apart; Q4_K 16-byte aligned),
// 1 <= n <= MMQ_MAX_N, x n x K f16; part: part_floats of scratch; sb the
// K split in super-blocks (a power of 2 up to MMQ_SB; 0: mmq_split's); blocks: the
// resident blocks of the device (0: a block a row tile), each split's share
// walking its tiles where that is fewer blocks than tiles (session 18: 8B
// FFN shapes at 1 to 8 tokens 5-12% faster). Rows in pieces whose partial
// sums fit. cudaErrorNotSupported: not this kernel's case (the caller takes
// the GEMM path). pdl: the kernels by programmatic dependent launch.
template <int T>
static cudaError_t mmq_launch(const uint8_t *W, size_t rowb, int rows, int K, const __half *x,
                              int n, float *y, float beta, float *part,
                              size_t part_floats, cudaStream_t st, int blocks = 0, int sb = 0,
                              bool pdl = false) {
  if (n < 1 || n > MMQ_MAX_N || K % 256 || !part || sb < 0 || sb > MMQ_SB || (sb & (sb - 1)))
    return cudaErrorNotSupported;
  if (T == WK_Q4_K && (rowb % 16 || (uintptr_t)W % 16)) return cudaErrorNotSupported;
  if (T == WK_Q6_K && (rowb % 2 || (uintptr_t)W % 2)) return cudaErrorNotSupported;
  if (!sb) sb = mmq_split(rows, K);
  const size_t splits = (size_t)(K / 256 + sb - 1) / sb;
  long piece = (long)(part_floats / (splits * (size_t)n));
  if (piece < rows) piece -= piece % MMQ_ROWS;
  if (piece < MMQ_ROWS && piece < rows) return cudaErrorNotSupported;
  const int gx = blocks > 0 ? (blocks / (int)splits > 0 ? blocks / (int)splits : 1) : 0;
  for (int r0 = 0; r0 < rows; r0 += (int)piece) {
    const int r1 = r0 + piece < rows ? r0 + (int)piece : rows, nr = r1 - r0;
    const uint8_t *w = W + (size_t)r0 * rowb;
    float *yr = y + r0;
    cudaError_t e;
    constexpr int M = MMQ_PER_SM;
    switch ((n + 7) / 8) {
      case 1: e = mmq_launch_t<T, 1, M>(w, rowb, nr, K, x, n, sb, part, yr, rows, beta, st, gx,
                                         pdl); break;
      case 2: e = mmq_launch_t<T, 2, M>(w, rowb, nr, K, x, n, sb, part, yr, rows, beta, st, gx,
                                         pdl); break;
      case 3: e = mmq_launch_t<T, 3, M>(w, rowb, nr, K, x, n, sb, part, yr, rows, beta, st, gx,
                                         pdl); break;
      default: e = mmq_launch_t<T, 4, M>(w, rowb, nr, K, x, n, sb, part, yr, rows, beta, st,
                                          gx, pdl); break;
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

#endif
