// Integer dot products of the quantized weight types against activations
// rounded to int8 (one f32 scale per 32 values), four products an
// instruction (dp4a). mvq<T>::dot(blk, s, qx, il, ih, dx) returns
// sum_l w[32s + l] * dx * qx[l] over group s of block blk, where qx holds
// the 32 int8 activations as 8 words (little-endian bytes), il and ih their
// integer sums over the first and last 16, and dx their scale. The result
// is the exact dot product of the weights with the rounded activations, up
// to f32 rounding; the rounding of x to int8 is the only approximation
// (|x - dx q| <= dx / 2 per value, dx = max|x| / 127 over its 32 values).
#ifndef WICK_BACKEND_CUDA_MVQ_CUH
#define WICK_BACKEND_CUDA_MVQ_CUH

#include "backend/cuda/quant.cuh"

// NW words of 4 bytes starting at a 2-byte aligned address p, read as
// aligned words joined by funnel shifts (never reads past p + 4 NW).
template <int NW>
static __device__ __forceinline__ void ld_words_a2(const uint8_t *p, uint32_t *w) {
  const uint8_t *base = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
  uint32_t sh = ((uint32_t)(uintptr_t)p & 2u) * 8u;
  uint32_t a[NW + 1];
#pragma unroll
  for (int i = 0; i < NW; i++) a[i] = ld_u32(base + 4 * i);
  a[NW] = sh ? ld_u16(base + 4 * NW) : 0u;
#pragma unroll
  for (int i = 0; i < NW; i++) w[i] = __funnelshift_r(a[i], a[i + 1], sh);
}

static __device__ __forceinline__ int dp4(uint32_t a, uint32_t b, int c) {
  return __dp4a((int)a, (int)b, c);
}

template <int T>
struct mvq;
// True for the types the int8-activation kernel serves.
template <int T>
struct mvq_has {
  static constexpr bool value = false;
};
#define WK_MVQ_TYPE_(t) \
  template <>           \
  struct mvq_has<t> {   \
    static constexpr bool value = true; \
  };

template <>
struct mvq<WK_Q4_0> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const uint32_t *qx, int il,
                                              int ih, float dx) {
    uint32_t w[4];
    ld_words_a2<4>(b + 2, w);
    int a = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      a = dp4(w[i] & 0x0F0F0F0Fu, qx[i], a);
      a = dp4((w[i] >> 4) & 0x0F0F0F0Fu, qx[4 + i], a);
    }
    return ld_h(b) * dx * (float)(a - 8 * (il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q4_0)

template <>
struct mvq<WK_Q4_1> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const uint32_t *qx, int il,
                                              int ih, float dx) {
    uint32_t dm = ld_u32(b);
    int a = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_u32(b + 4 + 4 * i);
      a = dp4(w & 0x0F0F0F0Fu, qx[i], a);
      a = dp4((w >> 4) & 0x0F0F0F0Fu, qx[4 + i], a);
    }
    float d = __half2float(__ushort_as_half((unsigned short)dm));
    float m = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
    return dx * (d * (float)a + m * (float)(il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q4_1)

template <>
struct mvq<WK_Q5_0> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const uint32_t *qx, int il,
                                              int ih, float dx) {
    uint32_t qh = ld_w_a2(b + 2), w[4];
    ld_words_a2<4>(b + 6, w);
    int a = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t lo = (w[i] & 0x0F0F0F0Fu) | (spread4(qh >> (4 * i)) << 4);
      uint32_t hi = ((w[i] >> 4) & 0x0F0F0F0Fu) | (spread4(qh >> (16 + 4 * i)) << 4);
      a = dp4(lo, qx[i], a);
      a = dp4(hi, qx[4 + i], a);
    }
    return ld_h(b) * dx * (float)(a - 16 * (il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q5_0)

template <>
struct mvq<WK_Q5_1> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const uint32_t *qx, int il,
                                              int ih, float dx) {
    uint32_t dm = ld_u32(b), qh = ld_u32(b + 4);
    int a = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_u32(b + 8 + 4 * i);
      uint32_t lo = (w & 0x0F0F0F0Fu) | (spread4(qh >> (4 * i)) << 4);
      uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | (spread4(qh >> (16 + 4 * i)) << 4);
      a = dp4(lo, qx[i], a);
      a = dp4(hi, qx[4 + i], a);
    }
    float d = __half2float(__ushort_as_half((unsigned short)dm));
    float m = __half2float(__ushort_as_half((unsigned short)(dm >> 16)));
    return dx * (d * (float)a + m * (float)(il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q5_1)

template <>
struct mvq<WK_Q8_0> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const uint32_t *qx, int, int,
                                              float dx) {
    uint32_t w[8];
    ld_words_a2<8>(b + 2, w);
    int a = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) a = dp4(w[i], qx[i], a);
    return ld_h(b) * dx * (float)a;
  }
};
WK_MVQ_TYPE_(WK_Q8_0)

// Q4_K and Q5_K blocks (144 and 176 bytes) are 16-byte aligned in a row
// whose length is a multiple of 16 bytes: every read is 16 bytes wide.
static __device__ __forceinline__ void kq_head(const uint8_t *b, int s, float *ds, float *dm) {
  uint4 h = *(const uint4 *)b;
  float d = __half2float(__ushort_as_half((unsigned short)h.x));
  float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
  float scale, min;
  kq_scale_min(h.y, h.z, h.w, s, &scale, &min);
  *ds = d * scale, *dm = dmin * min;
}

template <>
struct mvq<WK_Q4_K> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const uint32_t *qx, int il,
                                              int ih, float dx) {
    const uint4 *qp = (const uint4 *)(b + 16 + 32 * (s >> 1));
    uint4 q0 = qp[0], q1 = qp[1];
    float ds, dm;
    kq_head(b, s, &ds, &dm);
    uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int sh = (s & 1) * 4, a = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) a = dp4((w[i] >> sh) & 0x0F0F0F0Fu, qx[i], a);
    return dx * (ds * (float)a - dm * (float)(il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q4_K)

template <>
struct mvq<WK_Q5_K> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const uint32_t *qx, int il,
                                              int ih, float dx) {
    const uint4 *hp = (const uint4 *)(b + 16);
    const uint4 *qp = (const uint4 *)(b + 48 + 32 * (s >> 1));
    uint4 h0 = hp[0], h1 = hp[1], q0 = qp[0], q1 = qp[1];
    float ds, dm;
    kq_head(b, s, &ds, &dm);
    uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int sh = (s & 1) * 4, a = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
      a = dp4(((w[i] >> sh) & 0x0F0F0F0Fu) | (((hw[i] >> s) & 0x01010101u) << 4), qx[i], a);
    return dx * (ds * (float)a - dm * (float)(il + ih));
  }
};
WK_MVQ_TYPE_(WK_Q5_K)

template <>
struct mvq<WK_Q6_K> {
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const uint32_t *qx, int il,
                                              int ih, float dx) {
    int n = s >> 2, t = s & 3;
    uint32_t ql[8], qh[8];
    ld_words_a2<8>(b + 64 * n + 32 * (t & 1), ql);
    ld_words_a2<8>(b + 128 + 32 * n, qh);
    uint32_t scw = ld_u16(b + 192 + 8 * n + 2 * t);
    float d = ld_h(b + 208);
    int lsh = (t >> 1) * 4, hsh = 2 * t, a0 = 0, a1 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t v = ((ql[i] >> lsh) & 0x0F0F0F0Fu) | (((qh[i] >> hsh) & 0x03030303u) << 4);
      if (i < 4)
        a0 = dp4(v, qx[i], a0);
      else
        a1 = dp4(v, qx[i], a1);
    }
    return d * dx *
           ((float)(int8_t)(scw & 0xff) * (float)(a0 - 32 * il) +
            (float)(int8_t)(scw >> 8) * (float)(a1 - 32 * ih));
  }
};
WK_MVQ_TYPE_(WK_Q6_K)
#undef WK_MVQ_TYPE_

// Four values times inv rounded to nearest int8 (through 1.5 * 2^23: the
// low byte of the sum's bits is the rounded value in two's complement),
// packed little-endian into a word.
static __device__ __forceinline__ uint32_t round4_i8(const float *v, float inv) {
  uint32_t a[4];
#pragma unroll
  for (int k = 0; k < 4; k++) a[k] = __float_as_uint(__fmaf_rn(v[k], inv, 12582912.0f));
  return __byte_perm(__byte_perm(a[0], a[1], 0x0040), __byte_perm(a[2], a[3], 0x0040), 0x5410);
}

// Rounds 32 activations to int8 with one scale: qx (8 words), their sums
// over each half (il, ih) and the scale dx = max|x| / 127. Rounding is to
// nearest through the 1.5 * 2^23 trick (the low byte of the sum's bits is
// the rounded value in two's complement).
static __device__ __forceinline__ void quant_x32(const float *xv, uint32_t *qx, int *il, int *ih,
                                                 float *dx) {
  float am = 0.0f;
#pragma unroll
  for (int l = 0; l < 32; l++) am = fmaxf(am, fabsf(xv[l]));
  float inv = am > 0.0f ? 127.0f / am : 0.0f;
  *dx = am * (1.0f / 127.0f);
#pragma unroll
  for (int i = 0; i < 8; i++) qx[i] = round4_i8(xv + 4 * i, inv);
  int l0 = 0, l1 = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) l0 = dp4(qx[i], 0x01010101u, l0), l1 = dp4(qx[4 + i], 0x01010101u, l1);
  *il = l0, *ih = l1;
}

#endif
