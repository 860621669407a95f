// Device-side decoding of every weight type the CUDA backend runs, one group
// of 32 consecutive elements at a time (every block size of the table is a
// multiple of 32). deq32<T>(row, g, y) writes elements [32g, 32g + 32) of a
// row into y. Layouts are the GGUF ones (see src/quant/ for the reference).
#ifndef WICK_BACKEND_CUDA_QUANT_CUH
#define WICK_BACKEND_CUDA_QUANT_CUH

#include <cuda_fp8.h>

#include "backend/cuda/helpers.cuh"

extern "C" {
#include "quant/types.h"
}

static __device__ __forceinline__ uint32_t ld_u16(const uint8_t *p) {
  return *(const uint16_t *)p;
}
static __device__ __forceinline__ uint32_t ld_u32(const uint8_t *p) {
  return *(const uint32_t *)p;
}
// A 32-bit word from a 2-byte aligned address.
static __device__ __forceinline__ uint32_t ld_w_a2(const uint8_t *p) {
  return ld_u16(p) | (ld_u16(p + 2) << 16);
}
static __device__ __forceinline__ float ld_h(const uint8_t *p) {
  return __half2float(__ushort_as_half((unsigned short)ld_u16(p)));
}
// 16 bytes read as two-byte halves (blocks only 2-byte aligned).
static __device__ __forceinline__ void ld16_a2(const uint8_t *p, uint8_t *q) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    uint32_t v = ld_u16(p + 2 * i);
    q[2 * i] = (uint8_t)v;
    q[2 * i + 1] = (uint8_t)(v >> 8);
  }
}
static __device__ __forceinline__ void ld16_a4(const uint8_t *p, uint8_t *q) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t v = ld_u32(p + 4 * i);
#pragma unroll
    for (int k = 0; k < 4; k++) q[4 * i + k] = (uint8_t)(v >> (8 * k));
  }
}
static __device__ __forceinline__ void ld16_a16(const uint8_t *p, uint8_t *q) {
  uint4 v = *(const uint4 *)p;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int k = 0; k < 4; k++) q[4 * i + k] = (uint8_t)(w[i] >> (8 * k));
}


// Exact small integers to float without the slow conversion unit: each byte
// of w (0..255) placed in the mantissa of 2^23, minus 2^23.
static __device__ __forceinline__ float u8_to_f(uint32_t w, int k) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u + k)) - 8388608.0f;
}
// sum_k byte_k(w) * x[k] for the 4 bytes of w.
static __device__ __forceinline__ float dot_u8x4(uint32_t w, const float *x) {
  float s = u8_to_f(w, 0) * x[0];
  s = fmaf(u8_to_f(w, 1), x[1], s);
  s = fmaf(u8_to_f(w, 2), x[2], s);
  return fmaf(u8_to_f(w, 3), x[3], s);
}
// Spreads bits 0..3 of v to bit 0 of bytes 0..3.
static __device__ __forceinline__ uint32_t spread4(uint32_t v) {
  return ((v & 0xF) * 0x00204081u) & 0x01010101u;
}
// Group sums of x a dot product needs: all 32, first 16, last 16.
struct xsum {
  float lo, hi;
};

// E4M3 as wick defines it: e == 0 ? m*2^-9 : (8+m)*2^(e-10); no NaN or inf.
static __device__ __forceinline__ float fp8e4_to_f(uint32_t v) {
  uint32_t e = (v >> 3) & 15, m = v & 7;
  float a = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0.001953125f;
  return (v & 0x80) ? -a : a;
}
// E5M2 is the top byte of an IEEE half.
static __device__ __forceinline__ float fp8e5_to_f(uint32_t v) {
  return __half2float(__ushort_as_half((unsigned short)(v << 8)));
}

// 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block whose 12
// scale bytes are the little-endian words w0, w1, w2 (no local arrays).
static __device__ __forceinline__ void kq_scale_min(uint32_t w0, uint32_t w1, uint32_t w2, int s,
                                                    float *scale, float *min) {
  int sh = 8 * (s & 3);
  uint32_t b0 = (w0 >> sh) & 0xff, b1 = (w1 >> sh) & 0xff, b2 = (w2 >> sh) & 0xff;
  if (s < 4) {
    *scale = (float)(b0 & 63);
    *min = (float)(b1 & 63);
  } else {
    *scale = (float)((b2 & 0xF) | ((b0 >> 6) << 4));
    *min = (float)((b2 >> 4) | ((b1 >> 6) << 4));
  }
}

template <int T>
struct qtype;

// Each specialization: BLOCK elements in BYTES bytes; deq(blk, q, y) decodes
// group q (0 .. BLOCK/32 - 1) of block blk.
template <>
struct qtype<WK_F32> {
  static constexpr int BLOCK = 32, BYTES = 128;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    const float4 *p = (const float4 *)b;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 v = p[i];
      y[4 * i] = v.x, y[4 * i + 1] = v.y, y[4 * i + 2] = v.z, y[4 * i + 3] = v.w;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum) {
    const float4 *p = (const float4 *)b;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 v = p[i];
      s = fmaf(v.x, x[4 * i], s), s = fmaf(v.y, x[4 * i + 1], s);
      s = fmaf(v.z, x[4 * i + 2], s), s = fmaf(v.w, x[4 * i + 3], s);
    }
    return s;
  }
};

// F16 and BF16: 32 two-byte values; pair(w) the two values of a word.
template <int T>
struct qtype_16 {
  static constexpr int BLOCK = 32, BYTES = 64;
  static __device__ __forceinline__ float2 pair(uint32_t w) {
    if constexpr (T == WK_F16) return __half22float2(*(const __half2 *)&w);
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    const uint4 *p = (const uint4 *)b;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint4 v = p[i];
      uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; k++) {
        float2 f = pair(w[k]);
        y[8 * i + 2 * k] = f.x, y[8 * i + 2 * k + 1] = f.y;
      }
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum) {
    const uint4 *p = (const uint4 *)b;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint4 v = p[i];
      uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; k++) {
        float2 f = pair(w[k]);
        s = fmaf(f.x, x[8 * i + 2 * k], s), s = fmaf(f.y, x[8 * i + 2 * k + 1], s);
      }
    }
    return s;
  }
};
template <>
struct qtype<WK_F16> : qtype_16<WK_F16> {};
template <>
struct qtype<WK_BF16> : qtype_16<WK_BF16> {};

template <>
struct qtype<WK_Q4_0> {
  static constexpr int BLOCK = 32, BYTES = 18;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    float d = ld_h(b);
    uint8_t q[16];
    ld16_a2(b + 2, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      y[j] = d * (float)((int)(q[j] & 0xF) - 8);
      y[j + 16] = d * (float)((int)(q[j] >> 4) - 8);
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_w_a2(b + 2 + 4 * i);
      s += dot_u8x4(w & 0x0F0F0F0Fu, x + 4 * i) + dot_u8x4((w >> 4) & 0x0F0F0F0Fu, x + 16 + 4 * i);
    }
    return ld_h(b) * (s - 8.0f * (sx.lo + sx.hi));
  }
};

template <>
struct qtype<WK_Q4_1> {
  static constexpr int BLOCK = 32, BYTES = 20;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    float d = ld_h(b), m = ld_h(b + 2);
    uint8_t q[16];
    ld16_a4(b + 4, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      y[j] = d * (float)(q[j] & 0xF) + m;
      y[j + 16] = d * (float)(q[j] >> 4) + m;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_u32(b + 4 + 4 * i);
      s += dot_u8x4(w & 0x0F0F0F0Fu, x + 4 * i) + dot_u8x4((w >> 4) & 0x0F0F0F0Fu, x + 16 + 4 * i);
    }
    return ld_h(b) * s + ld_h(b + 2) * (sx.lo + sx.hi);
  }
};

template <>
struct qtype<WK_Q5_0> {
  static constexpr int BLOCK = 32, BYTES = 22;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    float d = ld_h(b);
    uint32_t qh = ld_u16(b + 2) | (ld_u16(b + 4) << 16);
    uint8_t q[16];
    ld16_a2(b + 6, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      int lo = (q[j] & 0xF) | (((qh >> j) & 1) << 4);
      int hi = (q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * (float)(lo - 16);
      y[j + 16] = d * (float)(hi - 16);
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    uint32_t qh = ld_w_a2(b + 2);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_w_a2(b + 6 + 4 * i);
      uint32_t lo = (w & 0x0F0F0F0Fu) | (spread4(qh >> (4 * i)) << 4);
      uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | (spread4(qh >> (16 + 4 * i)) << 4);
      s += dot_u8x4(lo, x + 4 * i) + dot_u8x4(hi, x + 16 + 4 * i);
    }
    return ld_h(b) * (s - 16.0f * (sx.lo + sx.hi));
  }
};

template <>
struct qtype<WK_Q5_1> {
  static constexpr int BLOCK = 32, BYTES = 24;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    float d = ld_h(b), m = ld_h(b + 2);
    uint32_t qh = ld_u32(b + 4);
    uint8_t q[16];
    ld16_a4(b + 8, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      int lo = (q[j] & 0xF) | (((qh >> j) & 1) << 4);
      int hi = (q[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * (float)lo + m;
      y[j + 16] = d * (float)hi + m;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    uint32_t qh = ld_u32(b + 4);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t w = ld_u32(b + 8 + 4 * i);
      uint32_t lo = (w & 0x0F0F0F0Fu) | (spread4(qh >> (4 * i)) << 4);
      uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | (spread4(qh >> (16 + 4 * i)) << 4);
      s += dot_u8x4(lo, x + 4 * i) + dot_u8x4(hi, x + 16 + 4 * i);
    }
    return ld_h(b) * s + ld_h(b + 2) * (sx.lo + sx.hi);
  }
};

template <>
struct qtype<WK_Q8_0> {
  static constexpr int BLOCK = 32, BYTES = 34;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    float d = ld_h(b);
#pragma unroll
    for (int i = 0; i < 16; i++) {
      uint32_t v = ld_u16(b + 2 + 2 * i);
      y[2 * i] = d * (float)(int8_t)(v & 0xff);
      y[2 * i + 1] = d * (float)(int8_t)(v >> 8);
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) s += dot_u8x4(ld_w_a2(b + 2 + 4 * i) ^ 0x80808080u, x + 4 * i);
    return ld_h(b) * (s - 128.0f * (sx.lo + sx.hi));
  }
};

template <>
struct qtype<WK_Q4_K> {
  static constexpr int BLOCK = 256, BYTES = 144;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    uint32_t dd = ld_u32(b);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    float scale, min;
    kq_scale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), s, &scale, &min);
    float d1 = d * scale, m1 = dmin * min;
    const uint8_t *qs = b + 16 + 32 * (s >> 1);
    uint8_t q[32];
    ld16_a16(qs, q);
    ld16_a16(qs + 16, q + 16);
    int sh = (s & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) y[l] = d1 * (float)((q[l] >> sh) & 0xF) - m1;
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    uint32_t dd = ld_u32(b);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    float scale, min;
    kq_scale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), s, &scale, &min);
    const uint4 *qp = (const uint4 *)(b + 16 + 32 * (s >> 1));
    uint4 q0 = qp[0], q1 = qp[1];
    uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int sh = (s & 1) * 4;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) acc += dot_u8x4((w[i] >> sh) & 0x0F0F0F0Fu, x + 4 * i);
    return d * scale * acc - dmin * min * (sx.lo + sx.hi);
  }
};

template <>
struct qtype<WK_Q5_K> {
  static constexpr int BLOCK = 256, BYTES = 176;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    uint32_t dd = ld_u32(b);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    float scale, min;
    kq_scale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), s, &scale, &min);
    float d1 = d * scale, m1 = dmin * min;
    uint8_t qh[32], q[32];
    ld16_a16(b + 16, qh);
    ld16_a16(b + 32, qh + 16);
    const uint8_t *qs = b + 48 + 32 * (s >> 1);
    ld16_a16(qs, q);
    ld16_a16(qs + 16, q + 16);
    int sh = (s & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) {
      int v = ((q[l] >> sh) & 0xF) | (((qh[l] >> s) & 1) << 4);
      y[l] = d1 * (float)v - m1;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    uint32_t dd = ld_u32(b);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    float scale, min;
    kq_scale_min(ld_u32(b + 4), ld_u32(b + 8), ld_u32(b + 12), s, &scale, &min);
    const uint4 *hp = (const uint4 *)(b + 16);
    const uint4 *qp = (const uint4 *)(b + 48 + 32 * (s >> 1));
    uint4 h0 = hp[0], h1 = hp[1], q0 = qp[0], q1 = qp[1];
    uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    int sh = (s & 1) * 4;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++)
      acc += dot_u8x4(((w[i] >> sh) & 0x0F0F0F0Fu) | (((hw[i] >> s) & 0x01010101u) << 4), x + 4 * i);
    return d * scale * acc - dmin * min * (sx.lo + sx.hi);
  }
};

template <>
struct qtype<WK_Q6_K> {
  static constexpr int BLOCK = 256, BYTES = 210;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    int n = s >> 2, t = s & 3;
    uint8_t ql[32], qh[32];
    ld16_a2(b + 64 * n + 32 * (t & 1), ql);
    ld16_a2(b + 64 * n + 32 * (t & 1) + 16, ql + 16);
    ld16_a2(b + 128 + 32 * n, qh);
    ld16_a2(b + 128 + 32 * n + 16, qh + 16);
    uint32_t scw = ld_u16(b + 192 + 8 * n + 2 * t);
    float d = ld_h(b + 208);
    float d0 = d * (float)(int8_t)(scw & 0xff), d1 = d * (float)(int8_t)(scw >> 8);
    int lsh = (t >> 1) * 4, hsh = 2 * t;
#pragma unroll
    for (int l = 0; l < 32; l++) {
      int v = (((ql[l] >> lsh) & 0xF) | (((qh[l] >> hsh) & 3) << 4)) - 32;
      y[l] = (l < 16 ? d0 : d1) * (float)v;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    int n = s >> 2, t = s & 3;
    const uint8_t *ql = b + 64 * n + 32 * (t & 1), *qh = b + 128 + 32 * n;
    uint32_t scw = ld_u16(b + 192 + 8 * n + 2 * t);
    float d = ld_h(b + 208);
    int lsh = (t >> 1) * 4, hsh = 2 * t;
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t v = ((ld_w_a2(ql + 4 * i) >> lsh) & 0x0F0F0F0Fu) |
                   (((ld_w_a2(qh + 4 * i) >> hsh) & 0x03030303u) << 4);
      if (i < 4)
        a0 += dot_u8x4(v, x + 4 * i);
      else
        a1 += dot_u8x4(v, x + 4 * i);
    }
    return d * ((float)(int8_t)(scw & 0xff) * (a0 - 32.0f * sx.lo) +
                (float)(int8_t)(scw >> 8) * (a1 - 32.0f * sx.hi));
  }
};

// Q2_K: group s (0..7) is 32h + l, h = s / 4, plane j = s % 4 of bytes
// qs[32h .. 32h + 32); its sub-blocks are 2s and 2s + 1 (scale byte: low
// nibble scale, high nibble min).
template <>
struct qtype<WK_Q2_K> {
  static constexpr int BLOCK = 256, BYTES = 84;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    uint32_t sc = ld_u16(b + 2 * s), dd = ld_u32(b + 80);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    const uint8_t *qs = b + 16 + 32 * (s >> 2);
    int sh = 2 * (s & 3);
#pragma unroll
    for (int l = 0; l < 32; l++) {
      uint32_t c = l < 16 ? sc & 0xff : sc >> 8;
      y[l] = d * (float)(c & 15) * (float)((qs[l] >> sh) & 3) - dmin * (float)(c >> 4);
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    uint32_t sc = ld_u16(b + 2 * s), dd = ld_u32(b + 80);
    float d = __half2float(__ushort_as_half((unsigned short)dd));
    float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
    const uint8_t *qs = b + 16 + 32 * (s >> 2);
    int sh = 2 * (s & 3);
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float v = dot_u8x4((ld_u32(qs + 4 * i) >> sh) & 0x03030303u, x + 4 * i);
      if (i < 4)
        a0 += v;
      else
        a1 += v;
    }
    return d * ((float)(sc & 15) * a0 + (float)((sc >> 8) & 15) * a1) -
           dmin * ((float)((sc >> 4) & 15) * sx.lo + (float)(sc >> 12) * sx.hi);
  }
};

// Q3_K: planes as Q2_K; the high bit of value 32j + l of half h is bit
// 4h + j of hmask[l]; level = low | high << 2, minus 4. Sub-block k's 6-bit
// scale: low nibble from scales[k % 8] (high nibble for k >= 8), top two bits
// from scales[8 + k % 4] >> 2 (k / 4); minus 32.
static __device__ __forceinline__ float q3k_scale(const uint8_t *sc, int k) {
  int lo = (sc[k & 7] >> (4 * (k >> 3))) & 15, hi = (sc[8 + (k & 3)] >> (2 * (k >> 2))) & 3;
  return (float)((lo | hi << 4) - 32);
}
template <>
struct qtype<WK_Q3_K> {
  static constexpr int BLOCK = 256, BYTES = 110;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    float d = ld_h(b + 108);
    float d0 = d * q3k_scale(b + 96, 2 * s), d1 = d * q3k_scale(b + 96, 2 * s + 1);
    const uint8_t *qs = b + 32 + 32 * (s >> 2);
    int sh = 2 * (s & 3), hb = 4 * (s >> 2) + (s & 3);
#pragma unroll
    for (int l = 0; l < 32; l++) {
      int v = (int)(((qs[l] >> sh) & 3) | (((b[l] >> hb) & 1) << 2)) - 4;
      y[l] = (l < 16 ? d0 : d1) * (float)v;
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    const uint8_t *qs = b + 32 + 32 * (s >> 2);
    int sh = 2 * (s & 3), hb = 4 * (s >> 2) + (s & 3);
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t v = ((ld_w_a2(qs + 4 * i) >> sh) & 0x03030303u) |
                   (((ld_w_a2(b + 4 * i) >> hb) & 0x01010101u) << 2);
      float p = dot_u8x4(v, x + 4 * i);
      if (i < 4)
        a0 += p;
      else
        a1 += p;
    }
    return ld_h(b + 108) * (q3k_scale(b + 96, 2 * s) * (a0 - 4.0f * sx.lo) +
                            q3k_scale(b + 96, 2 * s + 1) * (a1 - 4.0f * sx.hi));
  }
};

// IQ4_NL / IQ4_XS: a 4-bit code indexes 16 fixed levels. iq4_lut8 maps the
// 8 codes of a code word q (byte k: the code of value k in its low nibble,
// of value 16 + k in its high) to their levels as int8 bytes: *lo values
// 0..3, *hi values 16..19. The table is four words (levels 0-3, 4-7, 8-11,
// 12-15); byte permutes with q's nibbles as selectors (their low three bits)
// look up 4 codes a half-word in both halves of the table, a third picks
// each byte's half by the code's bit 3, and two more put the values back in
// order (a half-word's nibbles are values k, 16 + k, k + 1, 17 + k).
static __device__ __forceinline__ void iq4_lut8(uint32_t q, uint32_t *lo, uint32_t *hi) {
  const uint32_t c = q & 0x77777777u, s = ((q >> 1) & 0x44444444u) | 0x32103210u;
  const uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu;  // -127 -104 -83 -65, -49 -35 -22 -10
  const uint32_t t2 = 0x26190D01u, t3 = 0x71594535u;  //    1   13  25  38,  53  69  89 113
  const uint32_t a = __byte_perm(__byte_perm(t0, t1, c), __byte_perm(t2, t3, c), s);
  const uint32_t b =
      __byte_perm(__byte_perm(t0, t1, c >> 16), __byte_perm(t2, t3, c >> 16), s >> 16);
  *lo = __byte_perm(a, b, 0x6420), *hi = __byte_perm(a, b, 0x7531);
}
// sum_j T[q_j] x_j over a 32-value group whose 16 code bytes are w[0..4)
// (levels offset by 128 to unsigned bytes for dot_u8x4).
static __device__ __forceinline__ float iq4_dot(const uint32_t *w, const float *x, xsum sx) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t lo, hi;
    iq4_lut8(w[i], &lo, &hi);
    s += dot_u8x4(lo ^ 0x80808080u, x + 4 * i) + dot_u8x4(hi ^ 0x80808080u, x + 16 + 4 * i);
  }
  return s - 128.0f * (sx.lo + sx.hi);
}
static __device__ __forceinline__ void iq4_deq(const uint32_t *w, float d, float *y) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t lo, hi;
    iq4_lut8(w[i], &lo, &hi);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      y[4 * i + k] = d * (float)(int8_t)(lo >> (8 * k));
      y[16 + 4 * i + k] = d * (float)(int8_t)(hi >> (8 * k));
    }
  }
}

template <>
struct qtype<WK_IQ4_NL> {
  static constexpr int BLOCK = 32, BYTES = 18;
  static __device__ __forceinline__ void deq(const uint8_t *b, int, float *y) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = ld_w_a2(b + 2 + 4 * i);
    iq4_deq(w, ld_h(b), y);
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int, const float *x, xsum sx) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = ld_w_a2(b + 2 + 4 * i);
    return ld_h(b) * iq4_dot(w, x, sx);
  }
};

// IQ4_XS group s: codes at 8 + 16s; 6-bit scale = nibble s of scales_l (byte
// 4 + s / 2) | bits 2s..2s+1 of scales_h (u16 at 2) << 4, minus 32.
template <>
struct qtype<WK_IQ4_XS> {
  static constexpr int BLOCK = 256, BYTES = 136;
  static __device__ __forceinline__ float scale(const uint8_t *b, int s) {
    uint32_t h = ld_u32(b);
    int ls = (int)((b[4 + (s >> 1)] >> (4 * (s & 1))) & 15) | (int)(((h >> (16 + 2 * s)) & 3) << 4);
    return __half2float(__ushort_as_half((unsigned short)h)) * (float)(ls - 32);
  }
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = ld_u32(b + 8 + 16 * s + 4 * i);
    iq4_deq(w, scale(b, s), y);
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum sx) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = ld_u32(b + 8 + 16 * s + 4 * i);
    return scale(b, s) * iq4_dot(w, x, sx);
  }
};

template <int T>
struct qtype_fp8 {
  static constexpr int BLOCK = 128, BYTES = 132;
  static __device__ __forceinline__ void deq(const uint8_t *b, int s, float *y) {
    float scale = __uint_as_float(ld_u32(b));
    const uint8_t *p = b + 4 + 32 * s;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t v = ld_u32(p + 4 * i);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        uint32_t c = (v >> (8 * k)) & 0xff;
        y[4 * i + k] = scale * (T == WK_FP8_E4M3 ? fp8e4_to_f(c) : fp8e5_to_f(c));
      }
    }
  }
  static __device__ __forceinline__ float dot(const uint8_t *b, int s, const float *x, xsum) {
    const uint8_t *p = b + 4 + 32 * s;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t w = ld_u32(p + 4 * i);
      float2 f0, f1;
      if (T == WK_FP8_E4M3) {
        __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffff), __NV_E4M3);
        __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
        f0 = __half22float2(*(const __half2 *)&h0), f1 = __half22float2(*(const __half2 *)&h1);
      } else {
        uint32_t h0 = __byte_perm(w, 0, 0x1404), h1 = __byte_perm(w, 0, 0x3424);
        f0 = __half22float2(*(const __half2 *)&h0), f1 = __half22float2(*(const __half2 *)&h1);
      }
      acc = fmaf(f0.x, x[4 * i], acc), acc = fmaf(f0.y, x[4 * i + 1], acc);
      acc = fmaf(f1.x, x[4 * i + 2], acc), acc = fmaf(f1.y, x[4 * i + 3], acc);
    }
    return __uint_as_float(ld_u32(b)) * acc;
  }
};
template <>
struct qtype<WK_FP8_E4M3> : qtype_fp8<WK_FP8_E4M3> {};
template <>
struct qtype<WK_FP8_E5M2> : qtype_fp8<WK_FP8_E5M2> {};

// Group g (of 32 elements) of a row.
// sum over group g of a row times x[0..32), given x's half sums.
template <int T>
static __device__ __forceinline__ float dot32(const uint8_t *row, int g, const float *x, xsum sx) {
  constexpr int GPB = qtype<T>::BLOCK / 32;
  return qtype<T>::dot(row + (size_t)(g / GPB) * qtype<T>::BYTES, g % GPB, x, sx);
}

template <int T>
static __device__ __forceinline__ void deq32(const uint8_t *row, int g, float *y) {
  constexpr int GPB = qtype<T>::BLOCK / 32;
  qtype<T>::deq(row + (size_t)(g / GPB) * qtype<T>::BYTES, g % GPB, y);
}

// Calls F::template run<T>(args...) for the runtime type id; returns false
// for a type this backend cannot run (the one dispatch table).
#define WK_CUDA_TYPES(X) \
  X(WK_F32) X(WK_F16) X(WK_BF16) X(WK_Q4_0) X(WK_Q4_1) X(WK_Q5_0) X(WK_Q5_1) X(WK_Q8_0) \
  X(WK_Q2_K) X(WK_Q3_K) X(WK_Q4_K) X(WK_Q5_K) X(WK_Q6_K) X(WK_IQ4_NL) X(WK_IQ4_XS) \
  X(WK_FP8_E4M3) X(WK_FP8_E5M2)

static inline bool cu_type_supported(int type) {
#define WK_CASE_(t) \
  if (type == t) return true;
  WK_CUDA_TYPES(WK_CASE_)
#undef WK_CASE_
  return false;
}

#endif
