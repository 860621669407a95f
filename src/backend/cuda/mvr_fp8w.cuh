// A register-kernel format for FP8 E4M3 in 16-byte pieces, with f16 x and
// packed f16 arithmetic (opt-in; measured in session 7 at 60 / 58% of the
// copy rate, no faster than the default: docs/CUDA.md). The FP8 format of
// mvr.cuh reads 132-byte blocks in 32-bit words and spends ~50 instructions
// on 16 codes (f32 FMAs, two conversions a pair); this one spends ~25.
//
// A step of k_mvr is 4 blocks, 528 bytes of a row (16-byte aligned where a
// row holds a multiple of 4 blocks: mvr_fp8w_ok). Lane l loads piece l,
// bytes [16l, 16l + 16) of the step, in one 16-byte load, and lanes 28..31
// one word each of piece 32 (bytes 512..527, codes of block 3). A piece is 4
// code words of one block, but piece 0 (block 0's scale in word 0) and
// pieces 8, 16, 24: piece 8b holds codes of block b - 1 in words e < b,
// block b's scale in word b and its codes in words e > b (a block is 132
// bytes: 8.25 pieces). Scale words are zeroed before use (their bits are no
// codes) and reach the lanes of their block by shuffles from lanes 0, 8,
// 16, 24.
//
// x: the block stages it as f16 times a power of two sigma (max |x sigma| <=
// 4, so the ten products of an f16 half-sum, codes up to 448, stay under
// f16's 65504) in an image with the codes' layout: x at every code byte's
// place of the step, 0 at the scale bytes (mvr_stage_ximg); a lane's x is
// then 32 consecutive bytes, two 16-byte loads. Codes go to f16 two at a
// time (hardware cvt) and into an f16x2 sum by HFMA2 (packed FMA); a
// straddling piece also keeps the sum at its block boundary; both go to f32
// once a step with their blocks' scales. The row sum is scaled by 1 / sigma
// with the norm's 1 / rms.
#ifndef WICK_BACKEND_CUDA_MVR_FP8W_CUH
#define WICK_BACKEND_CUDA_MVR_FP8W_CUH

// Rows of cols columns this format serves: whole steps of 4 blocks.
static inline bool mvr_fp8w_ok(int cols) { return cols % 512 == 0; }

template <int T>
struct mvr_fp8w {
  static_assert(T == WK_FP8_E4M3, "E4M3 only: E5M2 codes reach 57344, past f16 products");
  static constexpr int LPB = 8;  // the kernel's lane = 8 * block + j; a step is 4 blocks
  struct w_t {
    uint4 q;     // piece l
    uint32_t e;  // lanes 28..31: word l - 28 of piece 32; else 0
  };
  struct x_t {
    const uint4 *p;   // x (f16) at piece l's 16 places
    const uint2 *pe;  // x at word l & 3 of piece 32
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int) {
    const int l = threadIdx.x & 31;
    const uint8_t *step = blk - 132 * (l >> 3);  // blk: this lane's block of the step
    w.q = mvr_ld16(step + 16 * l);
    w.e = l >= 28 ? mvr_ld4(step + 512 + 4 * (l & 3)) : 0u;
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int, int b, int,
                                                bool) {
    const int l = threadIdx.x & 31;
    const __half *img = (const __half *)xq + (size_t)(b >> 2) * 528;  // the step's image
    x.p = (const uint4 *)(img + 16 * l), x.pe = (const uint2 *)(img + 512 + 4 * (l & 3));
  }
  static __device__ __forceinline__ __half2 h2(uint32_t v) { return *(const __half2 *)&v; }
  // acc + codes (a word of 4) times x (their 4 halves in x01, x23), packed.
  static __device__ __forceinline__ __half2 fma4(uint32_t codes, uint32_t x01, uint32_t x23,
                                                 __half2 acc) {
    __half2_raw c0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(codes & 0xffffu), __NV_E4M3);
    __half2_raw c1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(codes >> 16), __NV_E4M3);
    acc = __hfma2(*(const __half2 *)&c0, h2(x01), acc);
    return __hfma2(*(const __half2 *)&c1, h2(x23), acc);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    const int l = threadIdx.x & 31, sb = l >> 3;
    const bool scale_lane = (l & 7) == 0;  // piece 8 sb holds block sb's scale in word sb
    uint32_t q[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    const uint32_t sw = scale_lane ? (sb == 0 ? q[0] : sb == 1 ? q[1] : sb == 2 ? q[2] : q[3]) : 0u;
#pragma unroll
    for (int e = 0; e < 4; e++) q[e] = scale_lane && sb == e ? 0u : q[e];
    // Blocks of the piece's first and last byte, and the first word of the
    // second block (4: one block).
    const int b0 = 16 * l / 132, b1 = (16 * l + 15) / 132, split = scale_lane && l ? sb : 4;
    const float s0 = __uint_as_float(__shfl_sync(0xffffffffu, sw, 8 * b0));
    const float s1 = __uint_as_float(__shfl_sync(0xffffffffu, sw, 8 * b1));
    const uint4 xa = x.p[0], xb = x.p[1];
    const uint32_t xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
    __half2 acc = __float2half2_rn(0.0f), pre = acc;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      acc = fma4(q[e], xv[2 * e], xv[2 * e + 1], acc);
      pre = e < split ? acc : pre;
    }
    const uint2 xe = *x.pe;  // piece 32's word: block 3, as the rest of lanes 28..31's piece
    acc = fma4(w.e, xe.x, xe.y, acc);
    const float2 fa = __half22float2(acc), fp = __half22float2(pre);
    // s1 on everything, s0 - s1 on the words before the split (0 unless it straddles)
    return fmaf(s0 - s1, fp.x + fp.y, s1 * (fa.x + fa.y));
  }
};

// The FP8 wide format's shape (mvr_fp8w_launch): 20 bytes a lane a step in
// registers, so 5 steps in flight at 1024 threads (ptxas of CUDA 13 spills
// 28-40 bytes there; the format is opt-in and read 51-53% in session 12).
struct mvr_fp8w_cfg {
  static constexpr int NT = 1024, RW = 1, D = 5;
};

template <int T, bool GLU>
static cudaError_t mvr_fp8w_launch(mv_jobs js, int cols, const float *x, int n, float beta, int act,
                                   bool pdl, cudaStream_t st) {
  if constexpr (T == WK_FP8_E4M3) {
    if (!mvr_fp8w_ok(cols)) return cudaErrorInvalidValue;
    using C = mvr_fp8w_cfg;  // D odd: gate and up items alternate in the ring
    return mvr_launch<T, C::NT, C::RW, C::D, GLU, mvr_fp8w<T>>(js, cols, x, n, beta, act, pdl, st);
  }
  return cudaErrorNotSupported;
}

template <int T>
struct mvr_ximg<mvr_fp8w<T>> {
  static constexpr bool value = true;
};

#endif
