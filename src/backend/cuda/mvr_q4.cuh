// Register-kernel formats (mvr.cuh) for the 32-value block types Q4_0,
// Q4_1, Q5_0 and Q5_1 with x rounded to 16 bits: a lane a block, 32 blocks (1024
// columns) a step, as Q8_0's format. Until session 12 these types ran on the
// streamed kernel (mvs.cuh: row chunks brought into shared memory by bulk
// copies), 51-64% of the copy rate with dependent launch.
//
// A lane reads the aligned 32-bit words under its block: Q4_0 (18 bytes)
// and Q5_0 (22) lie at 2-byte boundaries, so their words start at the
// 4-byte boundary at or below the block and end at the one at or above its
// end (5 and 6 words), joined by funnel shifts; Q4_1 (20) and Q5_1 (24) lie
// at 4-byte boundaries (rows of a multiple of 4 bytes, as mvq.cuh reads
// them) and are their own 5 and 6 words. The lane's x is its block's group:
// 32 values (the low nibbles' 16, then the high nibbles'; lo and hi planes,
// mvr.cuh's 16-bit x), the scale (0 past the end of a row) and the sum of
// the 32 values, which carries the offsets (Q4_0 -8, Q5_0 -16, Q4_1/Q5_1
// the block's m). Bounds (|v| <= 16383): |a| <= 32 * 31 * 16383 and |16 s|
// <= 16 * 32 * 16383, both < 2^24.
#ifndef WICK_BACKEND_CUDA_MVR_Q4_CUH
#define WICK_BACKEND_CUDA_MVR_Q4_CUH

struct mvr_xg {
  uint4 a, b, ah, bh;  // values [0, 16) and [16, 32) of the group: lo plane, hi plane
  float dx;            // the group's scale, 0 past the end of the row
  int s;               // the sum of its 32 values
};

// What the four formats share: a lane a block, and the block's x group.
struct mvr_q32 {
  static constexpr int LPB = 1;
  using x_t = mvr_xg;
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int,
                                                bool ok) {
    const uint8_t *hq = xq + cols;
    x.a = *(const uint4 *)(xq + 32 * b), x.b = *(const uint4 *)(xq + 32 * b + 16);
    x.ah = *(const uint4 *)(hq + 32 * b), x.bh = *(const uint4 *)(hq + 32 * b + 16);
    const uint4 m = ((const uint4 *)(xq + 2 * (size_t)cols))[b];
    x.dx = ok ? __uint_as_float(m.x) : 0.0f;
    x.s = (int)m.w;
  }
};

// The integer dot product of a block's 16 code bytes q (words q[0..3]:
// low nibbles values 0..15, high nibbles 16..31) with x; Q5: qh holds the
// fifth bits (bit v of value v), merged in as 0x10 of each code byte.
template <bool Q5>
static __device__ __forceinline__ int mvr_q32_dot(const uint32_t *q, uint32_t qh, const mvr_xg &x) {
  const uint32_t xa[4] = {x.a.x, x.a.y, x.a.z, x.a.w}, xb[4] = {x.b.x, x.b.y, x.b.z, x.b.w};
  const uint32_t ya[4] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w};
  const uint32_t yb[4] = {x.bh.x, x.bh.y, x.bh.z, x.bh.w};
  int a = 0, b = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t lo = q[i] & 0x0F0F0F0Fu, hi = (q[i] >> 4) & 0x0F0F0F0Fu;
    if constexpr (Q5) {
      lo |= spread4(qh >> (4 * i)) << 4;
      hi |= spread4(qh >> (16 + 4 * i)) << 4;
    }
    mvr_dp4x(lo, xa[i], ya[i], &a, &b);
    mvr_dp4x(hi, xb[i], yb[i], &a, &b);
  }
  return a + 128 * b;
}

// Q4_0 and Q5_0: d (f16), [Q5_0: qh, 4 bytes], 16 code bytes, values d (q -
// 8) or d (q - 16). r[] are the words from the 4-byte boundary at or below
// the block; sh is 16 (block 4-byte aligned) or 32 (2 mod 4): word i of the
// bytes from block + 2 is __funnelshift_rc(r[i], r[i + 1], sh).
template <int T>
struct mvr_q_a2 : mvr_q32 {
  static constexpr bool Q5 = T == WK_Q5_0;
  static constexpr int NW = Q5 ? 6 : 5;
  struct w_t {
    uint32_t r[NW];
    uint32_t sh;
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int) {
    const uint8_t *a = (const uint8_t *)((uintptr_t)blk & ~(uintptr_t)3);
#pragma unroll
    for (int i = 0; i < NW; i++) w.r[i] = mvr_ld4(a + 4 * i);
    w.sh = 16u + (uint32_t)((uintptr_t)blk & 2) * 8u;
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    constexpr int QW = Q5 ? 1 : 0;  // the code bytes' first word after block + 2
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = __funnelshift_rc(w.r[QW + i], w.r[QW + i + 1], w.sh);
    const uint32_t qh = Q5 ? __funnelshift_rc(w.r[0], w.r[1], w.sh) : 0u;
    const int a = mvr_q32_dot<Q5>(q, qh, x);
    const float d = __half2float(__ushort_as_half((unsigned short)(w.r[0] >> (w.sh - 16u))));
    return d * x.dx * (float)(a - (Q5 ? 16 : 8) * x.s);
  }
};

// Q4_1 and Q5_1: d and m (f16), [Q5_1: qh], 16 code bytes; values d q + m.
template <int T>
struct mvr_q_a4 : mvr_q32 {
  static constexpr bool Q5 = T == WK_Q5_1;
  static constexpr int NW = Q5 ? 6 : 5;
  struct w_t {
    uint32_t r[NW];
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int) {
#pragma unroll
    for (int i = 0; i < NW; i++) w.r[i] = mvr_ld4(blk + 4 * i);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    const int a = mvr_q32_dot<Q5>(w.r + NW - 4, Q5 ? w.r[1] : 0u, x);
    const float d = __half2float(__ushort_as_half((unsigned short)w.r[0]));
    const float m = __half2float(__ushort_as_half((unsigned short)(w.r[0] >> 16)));
    return x.dx * (d * (float)a + m * (float)x.s);
  }
};

template <>
struct mvr_fmt<WK_Q4_0> : mvr_q_a2<WK_Q4_0> {};
template <>
struct mvr_fmt<WK_Q5_0> : mvr_q_a2<WK_Q5_0> {};
template <>
struct mvr_fmt<WK_Q4_1> : mvr_q_a4<WK_Q4_1> {};
template <>
struct mvr_fmt<WK_Q5_1> : mvr_q_a4<WK_Q5_1> {};

#endif
