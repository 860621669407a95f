// Wide K-quant formats of the register-streamed kernel (mvr.cuh, k_mvr's
// format parameter F): 4 lanes a Q4_K / Q5_K super-block, 32 qs bytes a
// lane, so the scale/min decode and the float epilogue (mvr_kq_sum) run once
// per 64 values instead of per 32, and a step covers 8 super-blocks (2048
// columns). Opt-in (cuda_test path 10, bench_cuda "/reg w4"); MV_REG keeps
// mvr_fmt.
//
// Lane j = p of 4 (sub = lane / 4 the super-block of the step, b its index
// in the row) takes qs bytes [32p, 32p + 32): their low nibbles are the 32
// values of sub-block 2p (x group 2p), their high nibbles the 32 of
// sub-block 2p + 1 (group 2p + 1); Q5_K's fifth bits are bits 2p and 2p + 1
// of all 32 qh bytes. With e = p / 2 and f = b % 2 (= sub % 2) the lane
// holds its qs halves in the order 16e, 16 - 16e (W0, W1; qh likewise) and
// reads its 64 x bytes of each plane (groups 2p and 2p + 1, 64 consecutive
// bytes; mvr.cuh's 16-bit x: lo and hi planes) in four 16-byte loads, load i
// at chunk i ^ (2f + e): X0, X1 the two halves of group 2p + f in W0's,
// W1's order, X2, X3 those of group 2p + 1 - f. A 16-byte shared load runs
// as four phases of 8 lanes (two super-blocks); chunk c of the lane is bank
// quad (4 (p & 1) + c) mod 8, and (p & 1, 2f + e) takes all 8 values in a
// phase: no bank conflicts. The x scales and sums of both groups are two
// 16-byte loads (xm[8b + 2p], xm[8b + 2p + 1]: quads 2p, 2p + 1 of both
// super-blocks of a phase, 2-way).
//
// Q4_K nibbles without shifts: X0, X1 pair with the qs words masked by mf =
// 0x0F0F0F0F << 4f, X2, X3 with ~mf, in dp4a with unsigned weight bytes (a
// high nibble read in place counts 16 times its value). Whatever f, the
// sum under 0x0F0F0F0F is sub-block 2p's and the one under 0xF0F0F0F0 is
// 16 times sub-block 2p + 1's: two selects and a shift put them back.
#ifndef WICK_BACKEND_CUDA_MVR_W4_CUH
#define WICK_BACKEND_CUDA_MVR_W4_CUH

// dp4a with unsigned bytes in a and signed bytes in b.
static __device__ __forceinline__ int dp4us(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The lane's x of one step: X0..X3 (see above) of the lo plane (x) and the
// hi plane (y), f, the nibble mask of X0 / X1 (Q4_K), and groups 2p, 2p +
// 1's scales (0 past the row's end) and whole-group sums.
struct mvr_x4 {
  uint4 x[4], y[4];
  int f;
  uint32_t mf;
  float da, db;
  int sa, sb;
};
static __device__ __forceinline__ void mvr_load_x4(mvr_x4 &x, const uint8_t *xq, int cols, int b,
                                                   int p, bool ok) {
  const int f = b & 1, r = 2 * f + (p >> 1);
  const uint4 *c = (const uint4 *)(xq + 256 * b + 64 * p);  // the lane's 4 chunks
  const uint4 *ch = (const uint4 *)(xq + cols + 256 * b + 64 * p);
#pragma unroll
  for (int i = 0; i < 4; i++) x.x[i] = c[i ^ r], x.y[i] = ch[i ^ r];
  const uint4 *xm = (const uint4 *)(xq + 2 * (size_t)cols) + 8 * b + 2 * p;
  const uint4 ma = xm[0], mb = xm[1];
  x.f = f, x.mf = 0x0F0F0F0Fu << (4 * f);
  x.da = ok ? __uint_as_float(ma.x) : 0.0f, x.db = ok ? __uint_as_float(mb.x) : 0.0f;
  x.sa = (int)ma.w, x.sb = (int)mb.w;  // whole-group sums
}

// What both formats share: the header, lane p's qs halves at qs (32p +
// 16e, then the other half: the order that keeps x's reads conflict-free),
// x, and the registers as word arrays.
struct mvr_w4_base {
  static constexpr int LPB = 4;
  using x_t = mvr_x4;
  static __device__ __forceinline__ void load_qs(uint4 &h, uint4 &q0, uint4 &q1,
                                                 const uint8_t *blk, const uint8_t *qs, int p) {
    const int e = p >> 1;
    h = mvr_ld16(blk);
    q0 = mvr_ld16(qs + 32 * p + 16 * e), q1 = mvr_ld16(qs + 32 * p + 16 - 16 * e);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int p,
                                                bool ok) {
    mvr_load_x4(x, xq, cols, b, p, ok);
  }
  static __device__ __forceinline__ void words(uint4 a, uint4 b, uint32_t *o) {
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
  }
  static __device__ __forceinline__ void x_words(const x_t &x, uint32_t *o, uint32_t *h) {
    words(x.x[0], x.x[1], o), words(x.x[2], x.x[3], o + 8);
    words(x.y[0], x.y[1], h), words(x.y[2], x.y[3], h + 8);
  }
};

template <int T>
struct mvr_wide4;

template <>
struct mvr_wide4<WK_Q4_K> : mvr_w4_base {
  struct w_t {
    uint4 h, q0, q1;  // header; qs bytes 32p + 16e + [0, 16), 32p + 16 - 16e + [0, 16)
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int p) {
    load_qs(w.h, w.q0, w.q1, blk, blk + 16, p);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int p) {
    uint32_t q[8], xv[16], yv[16];
    words(w.q0, w.q1, q), x_words(x, xv, yv);
    int ia = 0, ib = 0, ja = 0, jb = 0;  // under mf, under ~mf (lo plane; hi plane)
#pragma unroll
    for (int i = 0; i < 8; i++) {
      ia = dp4us(q[i] & x.mf, xv[i], ia), ja = dp4us(q[i] & x.mf, yv[i], ja);
      ib = dp4us(q[i] & ~x.mf, xv[8 + i], ib), jb = dp4us(q[i] & ~x.mf, yv[8 + i], jb);
    }
    ia += 128 * ja, ib += 128 * jb;  // |.| <= 32 * 240 * 16383 < 2^27
    const int lo = x.f ? ib : ia, hi = (x.f ? ia : ib) >> 4;  // sub-blocks 2p, 2p + 1
    return mvr_kq_sum4(w.h, p, lo, hi, x.da, x.db, x.sa, x.sb);
  }
};

template <>
struct mvr_wide4<WK_Q5_K> : mvr_w4_base {
  struct w_t {
    uint4 h, q0, q1, h0, h1;  // header; qs halves as Q4_K's; qh bytes 16e + [0, 16), 16 - 16e + ..
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int p) {
    const int e = p >> 1;
    load_qs(w.h, w.q0, w.q1, blk, blk + 48, p);
    w.h0 = mvr_ld16(blk + 16 + 16 * e), w.h1 = mvr_ld16(blk + 32 - 16 * e);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int p) {
    uint32_t q[8], qh[8], xv[16], yv[16];
    words(w.q0, w.q1, q), words(w.h0, w.h1, qh), x_words(x, xv, yv);
    // X0, X1: sub-block 2p + f (nibble f, qh bit 2p + f); X2, X3: the other
    const int sa = 4 * x.f, ha = 2 * p + x.f, hb = 2 * p + 1 - x.f;
    int ia = 0, ib = 0, ja = 0, jb = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t va = ((q[i] >> sa) & 0x0F0F0F0Fu) | (((qh[i] >> ha) & 0x01010101u) << 4);
      uint32_t vb = ((q[i] >> (4 - sa)) & 0x0F0F0F0Fu) | (((qh[i] >> hb) & 0x01010101u) << 4);
      mvr_dp4x(va, xv[i], yv[i], &ia, &ja), mvr_dp4x(vb, xv[8 + i], yv[8 + i], &ib, &jb);
    }
    ia += 128 * ja, ib += 128 * jb;
    const int lo = x.f ? ib : ia, hi = x.f ? ia : ib;
    return mvr_kq_sum4(w.h, p, lo, hi, x.da, x.db, x.sa, x.sb);
  }
};

// Shape: NT threads, D items ahead (GLU: D odd). A Q4_K item is 12
// registers (36 bytes of the row a lane), Q5_K 20 (44 bytes); the lane's
// x of a step 16 + 6. ptxas (sm_90): Q4_K 1024 threads, D 1: 61-63
// registers (37 KB in flight an SM), the default since session 12 (8B
// Q4_K_M decode 4-5% faster with the 8-lane format's 1 item too); Q5_K
// 768, D 1: 78 (34 KB; D 2 spills at 768). ALT: the other side of the
// trade, more bytes in flight (Q4_K 768, D 3: 80 registers, 83 KB, the
// default until session 11; 1024 threads spill from D 2 on; Q5_K 512, D 3:
// 122-124, 68 KB). No spills or stack in any of them.
template <int T, bool GLU, bool ALT = false>
struct mvr_w4_cfg {
  // 16-bit x (session 14): 2 rows a unit at 512 threads share its doubled
  // x work, as the 8-lane formats' (mvr_cfg); ALT keeps the shapes before.
  static constexpr int RW = ALT ? 1 : 2;
  static constexpr int D = ALT ? 3 : 1;
  static constexpr int NT = T == WK_Q4_K ? (ALT ? 768 : 512) : 512;
};

// Threads a block the wide format's grid rule counts with (mvr_wide_fills):
// 768, its Q4_K blocks when the rule was measured (session 7) and Q5_K's.
static constexpr int MVR_W4_RULE_NT = 768;

#endif
