// Register-kernel formats (mvr.cuh, 16-bit x) for Q2_K, Q3_K, IQ4_XS and
// IQ4_NL, the low-bit types the CUDA backend took on in session 33.
//
// Q2_K (84 bytes, 4-byte aligned) and Q3_K (110, 2-byte aligned) keep 2-bit
// planes: in half h of the super-block, value 32p + l takes bits 2p of code
// byte l (Q3_K: its third bit is bit 4h + p of hmask[l]). Lane j = 4h + 2b +
// e (of 8) takes code bytes [16b, 16b + 16) of half h and planes 2e and 2e +
// 1: values 128h + 32(2e) + 16b + [0, 16) and 32 further, sub-blocks (of
// 16) k = 8h + 4e + b and k + 2, x groups 8B + 4h + 2e and the next at
// offset 16b (mvr_load_x2; B the block in the row). Two lanes read the
// same code bytes (planes 0-1 and 2-3), so a warp step asks for 4 blocks'
// code bytes twice; the second request hits L1.
//
// IQ4_XS (136 bytes, 4-byte aligned): lane j takes group j of the block
// (code bytes [8 + 16j, +16): low nibbles values 0..15, high 16..31) and the
// block's 8-byte header. IQ4_NL (18 bytes, 2-byte aligned): a lane a block,
// as Q4_0 (mvr_q4.cuh). The 4-bit codes become their levels (int8, in
// [-127, 113]) by byte permutes (quant.cuh's iq4_lut8), then signed dp4a.
#ifndef WICK_BACKEND_CUDA_MVR_KX_CUH
#define WICK_BACKEND_CUDA_MVR_KX_CUH

// The x of lane j's two groups in the Q2_K / Q3_K layout above.
static __device__ __forceinline__ void mvr_load_x2k(mvr_x2 &x, const uint8_t *xq, int cols, int b,
                                                    int j, bool ok) {
  const int g = 8 * b + 4 * (j >> 2) + 2 * (j & 1);
  mvr_load_x2(x, xq, cols, g, g + 1, (j >> 1) & 1, ok);
}

// Integer dot products of the lane's two planes (shifts pa, pa + 2 of the
// code words c) with groups a and b of x; Q3: the third bits, bit hb of
// the hmask words m (plane pa) and hb + 1 (plane pa + 2), enter as 4.
template <bool Q3>
static __device__ __forceinline__ void mvr_planes2(const uint32_t *c, const uint32_t *m, int pa,
                                                   int hb, const mvr_x2 &x, int *ia, int *ib) {
  const uint32_t xa[4] = {x.a.x, x.a.y, x.a.z, x.a.w}, xb[4] = {x.b.x, x.b.y, x.b.z, x.b.w};
  const uint32_t ya[4] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w};
  const uint32_t yb[4] = {x.bh.x, x.bh.y, x.bh.z, x.bh.w};
  int a = 0, b = 0, ah = 0, bh = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t wa = (c[i] >> pa) & 0x03030303u, wb = (c[i] >> (pa + 2)) & 0x03030303u;
    if constexpr (Q3) {
      wa |= ((m[i] >> hb) & 0x01010101u) << 2;
      wb |= ((m[i] >> (hb + 1)) & 0x01010101u) << 2;
    }
    mvr_dp4x(wa, xa[i], ya[i], &a, &ah);
    mvr_dp4x(wb, xb[i], yb[i], &b, &bh);
  }
  *ia = a + 128 * ah, *ib = b + 128 * bh;
}

// Q2_K: scales[16] at 0 (low nibble the sub-block's scale, high its min),
// qs[64] at 16, d and dmin (f16) at 80. Bounds: |ia| <= 16 * 3 * 16383 and
// a min times a sum <= 15 * 16 * 16383, far from 2^31.
template <>
struct mvr_fmt<WK_Q2_K> {
  static constexpr int LPB = 8;
  struct w_t {
    uint32_t q[4];  // code bytes [16b, 16b + 16) of half h
    uint32_t sc;    // scale bytes 8h + 4e .. + 3: sub-blocks k (byte b) and k + 2 (byte 2 + b)
    uint32_t dd;    // d, dmin
  };
  using x_t = mvr_x2;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    const int h = j >> 2, b = (j >> 1) & 1, e = j & 1;
#pragma unroll
    for (int i = 0; i < 4; i++) w.q[i] = mvr_ld4(blk + 16 + 32 * h + 16 * b + 4 * i);
    w.sc = mvr_ld4(blk + 8 * h + 4 * e);
    w.dd = mvr_ld4(blk + 80);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    mvr_load_x2k(x, xq, cols, b, j, ok);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    int ia, ib;
    mvr_planes2<false>(w.q, nullptr, 4 * (j & 1), 0, x, &ia, &ib);
    const uint32_t ca = (w.sc >> (8 * ((j >> 1) & 1))) & 0xffu, cb = (w.sc >> (16 + 8 * ((j >> 1) & 1))) & 0xffu;
    const float d = __half2float(__ushort_as_half((unsigned short)w.dd));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(w.dd >> 16)));
    const float fs = x.da * (float)((int)(ca & 15) * ia) + x.db * (float)((int)(cb & 15) * ib);
    const float fm = x.da * (float)((int)(ca >> 4) * x.sa) + x.db * (float)((int)(cb >> 4) * x.sb);
    return d * fs - dmin * fm;
  }
};

// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, d (f16) at 108.
// Sub-block k's 6-bit scale: nibble k / 8 of byte k % 8, with bits 2 (k / 4)
// and up of byte 8 + k % 4 on top; minus 32. The lane's k and k + 2 take
// bytes b and b + 2 of scale bytes 4e .. 4e + 3 (nibble h) and of bytes 8 ..
// 11 (bits 2 (2h + e)). Bounds: |ia - 4 sa| <= 16 * 4 * 16383, times 32.
template <>
struct mvr_fmt<WK_Q3_K> {
  static constexpr int LPB = 8;
  struct w_t {
    uint32_t l[5], m[5];  // raw words of the qs and hmask runs (mvr_ld16_a2)
    uint32_t s0, s1;      // scale bytes 4e .. 4e + 3 and 8 .. 11
    uint32_t d;           // d (f16)
    uint32_t sh;          // 8 * (block address & 3): the runs' funnel shift
  };
  using x_t = mvr_x2;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    const int h = j >> 2, b = (j >> 1) & 1, e = j & 1;
    mvr_ld16_a2(blk + 32 + 32 * h + 16 * b, w.l);
    mvr_ld16_a2(blk + 16 * b, w.m);
    w.s0 = mvr_ld2(blk + 96 + 4 * e) | (mvr_ld2(blk + 98 + 4 * e) << 16);
    w.s1 = mvr_ld2(blk + 104) | (mvr_ld2(blk + 106) << 16);
    w.d = mvr_ld2(blk + 108);
    w.sh = (uint32_t)((uintptr_t)blk & 2) * 8u;
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    mvr_load_x2k(x, xq, cols, b, j, ok);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    const int h = j >> 2, b = (j >> 1) & 1, e = j & 1;
    uint32_t c[4], m[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      c[i] = __funnelshift_r(w.l[i], w.l[i + 1], w.sh);
      m[i] = __funnelshift_r(w.m[i], w.m[i + 1], w.sh);
    }
    int ia, ib;
    mvr_planes2<true>(c, m, 4 * e, 4 * h + 2 * e, x, &ia, &ib);
    const int lo = 8 * b + 4 * h, hi = 8 * b + 2 * (2 * h + e);
    const int sa = (int)(((w.s0 >> lo) & 15) | (((w.s1 >> hi) & 3) << 4)) - 32;
    const int sb = (int)(((w.s0 >> (16 + lo)) & 15) | (((w.s1 >> (16 + hi)) & 3) << 4)) - 32;
    const float fs = x.da * (float)(sa * (ia - 4 * x.sa)) + x.db * (float)(sb * (ib - 4 * x.sb));
    return __half2float(__ushort_as_half((unsigned short)w.d)) * fs;
  }
};

// The integer dot product of 16 IQ4 code bytes (words q[0..3]: low nibbles
// values 0..15, high 16..31) with x's 32 values (lo planes a, b; hi planes
// ah, bh). |result| <= 32 * 127 * 16383 < 2^27.
static __device__ __forceinline__ int mvr_iq4_dot(const uint32_t *q, uint4 a, uint4 b, uint4 ah,
                                                  uint4 bh) {
  const uint32_t xa[4] = {a.x, a.y, a.z, a.w}, xb[4] = {b.x, b.y, b.z, b.w};
  const uint32_t ya[4] = {ah.x, ah.y, ah.z, ah.w}, yb[4] = {bh.x, bh.y, bh.z, bh.w};
  int s = 0, t = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t lo, hi;
    iq4_lut8(q[i], &lo, &hi);
    mvr_dp4x(lo, xa[i], ya[i], &s, &t);
    mvr_dp4x(hi, xb[i], yb[i], &s, &t);
  }
  return s + 128 * t;
}

// IQ4_XS: d (f16) and scales_h (u16) at 0, scales_l[4] at 4, codes at 8;
// group s's scale d (ls - 32), ls = nibble s of scales_l | bits 2s, 2s + 1
// of scales_h << 4.
template <>
struct mvr_fmt<WK_IQ4_XS> {
  static constexpr int LPB = 8;
  struct w_t {
    uint32_t h0, h1;  // d | scales_h << 16; scales_l
    uint32_t q[4];    // code bytes of group j
  };
  using x_t = mvr_xg;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    w.h0 = mvr_ld4(blk), w.h1 = mvr_ld4(blk + 4);
#pragma unroll
    for (int i = 0; i < 4; i++) w.q[i] = mvr_ld4(blk + 8 + 16 * j + 4 * i);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    mvr_q32::load_x(x, xq, cols, 8 * b + j, 0, ok);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    const int ls = (int)(((w.h1 >> (4 * j)) & 15) | (((w.h0 >> (16 + 2 * j)) & 3) << 4)) - 32;
    const float d = __half2float(__ushort_as_half((unsigned short)w.h0));
    return d * (float)ls * x.dx * (float)mvr_iq4_dot(w.q, x.a, x.b, x.ah, x.bh);
  }
};

// IQ4_NL: d (f16), 16 code bytes; read as Q4_0 is (mvr_q_a2's words from
// the 4-byte boundary at or below the block, joined by funnel shifts).
template <>
struct mvr_fmt<WK_IQ4_NL> : mvr_q_a2<WK_IQ4_NL> {
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    uint32_t q[4];
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = __funnelshift_rc(w.r[i], w.r[i + 1], w.sh);
    const float d = __half2float(__ushort_as_half((unsigned short)(w.r[0] >> (w.sh - 16u))));
    return d * x.dx * (float)mvr_iq4_dot(q, x.a, x.b, x.ah, x.bh);
  }
};

#endif
