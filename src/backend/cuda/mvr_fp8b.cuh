// FP8 E4M3 on the register kernel with the codes made into f32 by integer
// operations instead of conversions (WICK_CUDA_FP8X=half or =int; session
// 35, docs/CUDA.md). The plain format (mvr_fp8, mvr.cuh) spends per 16
// codes 8 conversions to f16 pairs (F2FP) and 16 f16-to-f32 conversions
// (HADD2.F32) beside its 16 FMAs, and reads 69-71% of the copy rate
// whatever its items in flight, where F16 (8 conversions per 8 values)
// reads 92%. If the conversions' pipe is what holds it, these read more.
// Same lanes, loads, x and sums as mvr_fp8: only the decode differs.
//
//   half: the hardware's E4M3 -> f16 pair conversion (every E4M3 value is a
//         normal f16 or zero), then each f16 to f32 bits by shifts and a
//         mask: the f16 exponent lands unbiased in f32's field, so the f32
//         is the value times 2^-112 (zero stays zero).
//   int:  no conversion at all: sign and the 7 exponent/mantissa bits of
//         each code placed in f32's bits, the value times 2^-120 (codes of
//         exponent 0, E4M3's subnormals, become f32 subnormals, exactly), and
//         the FMA run without flushing subnormal inputs to zero.
//
// Either way every f32 is the code's value times a power of two, so x is
// staged times 2^50 (mvr_xmul; products stay normal f32 for |w x| down to
// 2^-56 and x overflows only past 2^78) and each block's scale takes the
// inverse power: the sums are the plain format's, scaled by exact powers of
// two. E4M3's NaN codes (0x7f, 0xff; wick's encoder writes them only for
// NaN) read as finite values here.
#ifndef WICK_BACKEND_CUDA_MVR_FP8B_CUH
#define WICK_BACKEND_CUDA_MVR_FP8B_CUH

// acc + a b, subnormal inputs kept (the build flushes them otherwise).
static __device__ __forceinline__ float fma_keep_subnormal(float a, float b, float acc) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(acc));
  return r;
}

template <int T, int V>
struct mvr_fp8b : mvr_fp8<T> {
  static_assert(T == WK_FP8_E4M3, "E4M3 only: E5M2's subnormals are f16 subnormals");
  static_assert(V >= FP8X_HALF && V <= FP8X_LD16, "a decode of mvr_fp8b.cuh");
  using w_t = typename mvr_fp8<T>::w_t;
  using x_t = typename mvr_fp8<T>::x_t;
  // LD16 (measurement only, wrong sums): the lane's codes as one 16-byte load
  // at the 16-byte boundary at or below its place in the block
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    if constexpr (V == FP8X_LD16) {
      w.d = mvr_ld4(blk);
      const uint4 q = mvr_ld16((const uint8_t *)(((uintptr_t)blk + 4 + 16 * j) & ~(uintptr_t)15));
      w.q[0] = q.x, w.q[1] = q.y, w.q[2] = q.z, w.q[3] = q.w;
    } else {
      mvr_fp8<T>::load(w, blk, j);
    }
  }
  // The f32 of a code is its value times 2^-112 (half) or 2^-120 (int);
  // x is staged times 2^50; the block's scale is multiplied back by this.
  static constexpr float RMUL = V == FP8X_HALF ? 0x1p62f : 0x1p70f;
  // The f16 in the top half of h (low 16 bits ignored) as f32 bits, times
  // 2^-112: sign to bit 31, exponent and mantissa moved down 3 bits.
  static __device__ __forceinline__ float h2f(uint32_t h) {
    return __uint_as_float((uint32_t)((int)h >> 3) & 0x8fffe000u);
  }
  // The code in the top byte of c as f32 bits, times 2^-120.
  static __device__ __forceinline__ float c2f(uint32_t c) {
    return __uint_as_float((uint32_t)((int)c >> 4) & 0x87f00000u);
  }
  static __device__ __forceinline__ void codes4(uint32_t w, float *f) {
    if constexpr (V == FP8X_HALF) {
      const __half2_raw a = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
      const __half2_raw b = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
      const uint32_t ua = *(const uint32_t *)&a, ub = *(const uint32_t *)&b;
      f[0] = h2f(ua << 16), f[1] = h2f(ua), f[2] = h2f(ub << 16), f[3] = h2f(ub);
    } else {
      f[0] = c2f(w << 24), f[1] = c2f(w << 16), f[2] = c2f(w << 8), f[3] = c2f(w);
    }
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float f[4];
      codes4(w.q[i], f);
      // XHALF / XNONE (measurement only, wrong sums): half of x's reads, or none
      const float4 v = V == FP8X_XNONE ? make_float4(1.0f, 1.0f, 1.0f, 1.0f)
                       : V == FP8X_XHALF ? x.p[8 * (i & 2)]
                                         : x.p[8 * i];
      if constexpr (V != FP8X_INT) {
        a0 = fmaf(f[0], v.x, a0), a1 = fmaf(f[1], v.y, a1);
        a0 = fmaf(f[2], v.z, a0), a1 = fmaf(f[3], v.w, a1);
      } else {
        a0 = fma_keep_subnormal(f[0], v.x, a0), a1 = fma_keep_subnormal(f[1], v.y, a1);
        a0 = fma_keep_subnormal(f[2], v.z, a0), a1 = fma_keep_subnormal(f[3], v.w, a1);
      }
    }
    return x.ok ? __uint_as_float(w.d) * RMUL * (a0 + a1) : 0.0f;
  }
};

template <int T, int V>
struct mvr_xmul<mvr_fp8b<T, V>> {
  static constexpr float value = 0x1p50f;
};

#endif
