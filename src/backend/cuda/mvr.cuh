// The register-streamed matrix-vector kernel (docs/CUDA.md, v9) for Q4_0,
// Q4_1, Q5_0, Q5_1 (mvr_q4.cuh, since session 12), Q4_K, Q5_K, Q6_K, Q8_0,
// Q2_K, Q3_K, IQ4_NL and IQ4_XS (mvr_kx.cuh, session 33) with x rounded to
// 16 bits (since session 14; int8 before), and F16,
// BF16 and FP8 (E4M3, E5M2; by default since session 12) with f32 x: weights read
// straight into registers by coalesced loads, D steps ahead of the
// arithmetic, many warps an SM and no block-wide barrier between the
// prologue and the end.
//
// Prologue (per block and its NTOK tokens of grid row blockIdx.y; one by
// default, k_mvr's NTOK): each warp of the int8-x
// types prefetches a step of its first unit into L2 (weights do not depend
// on the previous kernel; a prefetch holds no registers; js.pf steps when
// set), the f32-x types load their first D items into registers instead
// (session 7; the int8-x types load them after x is staged), lets the next grid
// launch, waits for the previous one, then the block rounds its token's x
// to 16 bits per 32 values into shared memory (mvr_round_x16, the folded
// RMSNorm applied there: 2.5 bytes a column; the float types: x copied as
// f32, times the norm's weights, mvr_stage_x: 4 bytes a column) and meets
// at one barrier; several tokens a block (integer types) copy the bytes
// k_mvr_prep rounded once a token instead.
//
// 16-bit x: v = round(x / d) in [-16383, 16383] with d = max |x| / 16383 of
// the 32-value group, stored as two int8 planes v = lo + 128 hi (lo = v &
// 127, hi = v >> 7 in [-128, 127]), each in the layout int8 x had (so the lanes'
// shared-memory reads stay free of bank conflicts), and per group a uint4
// {d, sum of v over values [0, 16), over [16, 32), over all 32}. Every dp4a runs on
// both planes: int sums s = s_lo + 128 s_hi, exact in int32 (bounds next to
// each format). Why: int8 x (d = max / 127) moved the logits of Gemma 3 by
// up to 1 - cosine 1.35e-3 against the CPU's exact path (parity below its
// 0.999 bar on a decode step of 4 sequences, session 14); 16-bit x is the
// CPU fast path's rounding (kernels/act16.h).
//
// Work: a unit is RW consecutive rows of one job (GLU: RW gate rows and the
// same RW up rows). The grid is one wave of resident warps, in one of two
// ways (mvr_launch): whole units, warp w of the grid taking units w, w + W,
// w + 2W, ... (W warps a token; the int8-x types), or split (the f32-x
// types): each block takes a contiguous share of the units and its warps
// split that share's items evenly (mvr_share), a unit's parts summed in
// warp order at the end through shared memory. A step covers 32 lanes'
// pieces of RW rows: for the
// K-quants (1024 columns) and FP8 (512) 4 (super-)blocks, 8 lanes each
// (lane / 8 the block, j = lane % 8 the lane in it); for Q8_0 and Q4_0..Q5_1
// (1024) 32 blocks, a lane each; for F16/BF16 (256) 8 blocks, 4 lanes each (mvr_w4.cuh:
// a Q4_K/Q5_K format of 2048 columns, 4 lanes a super-block, the default for
// rows of up to 8192 columns; mvr_fp8w.cuh: FP8 E4M3 in 16-byte pieces,
// opt-in). An item is a
// step (GLU: a step of the gate rows, then the same step of the up rows);
// a warp's items, unit after unit, are one stream: the loads of item i + D
// are issued before item i is computed (a ring of D + 1 register sets),
// across unit ends too. Lanes past the end of a row (super-blocks a row not
// a multiple of 4, Q8_0 blocks not of 32) read the row's last block again
// and count it with an x scale of 0 (f32 x: count 0). Rows past a job's end repeat its last
// row and are never written.
//
// Every quant block is read where it lies in its row: Q4_K (144 bytes) and
// Q5_K (176) are 16-byte aligned (rows of a multiple of 16 bytes) and read in
// 16-byte loads; Q6_K (210) and Q8_0 (34) are 2-byte aligned and read as
// aligned 32-bit words joined by funnel shifts, never before the 4-byte
// boundary at or below the block nor past the one at or above its end;
// FP8 (132) is 4-byte aligned and read in 32-bit words; F16/BF16 (64) in
// 16-byte loads.
#ifndef WICK_BACKEND_CUDA_MVR_CUH
#define WICK_BACKEND_CUDA_MVR_CUH

#include "backend/cuda/mvs.cuh"  // mv_jobs, mv_round_x, the job of a tile (mvs_job)

static __device__ __forceinline__ uint4 mvr_ld16(const uint8_t *p) {
  return __ldg((const uint4 *)p);
}
static __device__ __forceinline__ uint32_t mvr_ld4(const uint8_t *p) {
  return __ldg((const unsigned int *)p);
}
static __device__ __forceinline__ uint32_t mvr_ld2(const uint8_t *p) {
  return __ldg((const unsigned short *)p);
}
// The raw aligned words under 16 bytes at 2-byte aligned p: r[0..3] from
// the 4-byte boundary at or below p, and (p 2 mod 4) the halfword after
// them; word i of the bytes at p is __funnelshift_r(r[i], r[i + 1], 8 (p & 3)).
static __device__ __forceinline__ void mvr_ld16_a2(const uint8_t *p, uint32_t *r) {
  const uint8_t *a = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
#pragma unroll
  for (int i = 0; i < 4; i++) r[i] = mvr_ld4(a + 4 * i);
  r[4] = ((uintptr_t)p & 2) ? mvr_ld2(a + 16) : 0u;
}
// p moved by d bytes (modulo 2^64: d may be a negative distance).
static __device__ __forceinline__ const uint8_t *mvr_at(const uint8_t *p, uintptr_t d) {
  return (const uint8_t *)((uintptr_t)p + d);
}
// Brings the 32-byte sector at p into L2 (no registers held).
static __device__ __forceinline__ void mvr_prefetch(const uint8_t *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Four values rounded to 16 bits (v = rn(x inv), |v| <= 16383) as their
// lo and hi bytes: v = lo + 128 hi with lo = v & 127 in [0, 127] and hi = v
// >> 7 (floor) in [-128, 127]; *s gets the sum of the four v.
static __device__ __forceinline__ void mvr_split4(const float *v, float inv, uint32_t *lo,
                                                  uint32_t *hi, int *s) {
  int q[4];
#pragma unroll
  for (int k = 0; k < 4; k++) q[k] = __float2int_rn(v[k] * inv);
  const uint32_t b01 = __byte_perm(q[0], q[1], 0x5140), b23 = __byte_perm(q[2], q[3], 0x5140);
  // b01: bytes q0.0 q1.0 q0.1 q1.1 (low halves of q0, q1 interleaved)
  const uint32_t l = __byte_perm(b01, b23, 0x5410);  // the low bytes of q0..q3
  const uint32_t m = __byte_perm(b01, b23, 0x7632);  // their second bytes
  *lo = l & 0x7F7F7F7Fu;
  *hi = ((l >> 7) & 0x01010101u) | ((m << 1) & 0xFEFEFEFEu);  // bits 7..14 of each v
  *s += q[0] + q[1] + q[2] + q[3];
}

// The block rounds one token's x (cols floats; times the folded norm's
// weights nw unless NULL) to 16 bits per 32 values into shared memory xq
// (16-byte aligned, mvr_xbytes): the lo plane (cols bytes), the hi plane
// (cols bytes), then per group g {d, sum of v[0, 16), of v[16, 32), of all
// 32}; 4
// lanes a group (8 values a thread). Every thread of the block calls it; it
// ends on a barrier and returns the norm's 1 / rms of x (1 without nw) to
// all. red: 32 floats of shared scratch.
static __device__ __forceinline__ float mvr_round_x16(const float *__restrict__ x, int cols,
                                                      const float *__restrict__ nw, float eps,
                                                      uint8_t *xq, float *red) {
  float ss = 0.0f;
  uint4 *xm = (uint4 *)(xq + 2 * (size_t)cols);
  const int part = threadIdx.x & 3;  // values [8 part, 8 part + 8) of the group
#pragma unroll 2
  for (int i0 = 0; i0 < cols / 8; i0 += blockDim.x) {  // i0 uniform: every lane shuffles
    const int i = i0 + threadIdx.x;
    const bool ok = i < cols / 8;
    float v[8];
    const float am = mv_load8(x, nw, i, ok, v, &ss);
    const float inv = am > 0.0f ? 16383.0f / am : 0.0f;
    uint32_t lo[2], hi[2];
    int s = 0;
#pragma unroll
    for (int h = 0; h < 2; h++) mvr_split4(v + 4 * h, inv, lo + h, hi + h, &s);
    s += __shfl_xor_sync(0xffffffffu, s, 1);             // parts 0+1: values [0, 16); 2+3: [16, 32)
    const int s1 = __shfl_xor_sync(0xffffffffu, s, 2);  // part 0 gets [16, 32)'s
    if (ok) {
      *(uint2 *)(xq + 8 * i) = make_uint2(lo[0], lo[1]);
      *(uint2 *)(xq + cols + 8 * i) = make_uint2(hi[0], hi[1]);
      if (part == 0)
        xm[i >> 2] = make_uint4(__float_as_uint(am * (1.0f / 16383.0f)), (uint32_t)s,
                                (uint32_t)s1, (uint32_t)(s + s1));
    }
  }
  __syncthreads();
  return nw ? mv_rscale(block_sum(ss, red), cols, eps) : 1.0f;
}

// Sums of a weight word's 4 bytes w times 4 x values held as planes xl, xh
// (lo and hi bytes: v = lo + 128 hi), *al += w . lo, *ah += w . hi.
static __device__ __forceinline__ void mvr_dp4x(uint32_t w, uint32_t xl, uint32_t xh, int *al,
                                                int *ah) {
  *al = dp4(w, xl, *al), *ah = dp4(w, xh, *ah);
}

// The lane's x of one step for the K-quants: 16 values at offset 16h of
// group ga and 16 at the same offset of group gb (lo plane a, b; hi plane
// ah, bh), the groups' scales (0 for a lane past the end of its row) and
// the sums of those 16 values.
struct mvr_x2 {
  uint4 a, b, ah, bh;
  float da, db;
  int sa, sb;
};
static __device__ __forceinline__ void mvr_load_x2(mvr_x2 &x, const uint8_t *xq, int cols,
                                                   int ga, int gb, int h, bool ok) {
  const uint8_t *hq = xq + cols;
  const uint4 *xm = (const uint4 *)(xq + 2 * (size_t)cols);
  x.a = *(const uint4 *)(xq + 32 * ga + 16 * h), x.b = *(const uint4 *)(xq + 32 * gb + 16 * h);
  x.ah = *(const uint4 *)(hq + 32 * ga + 16 * h), x.bh = *(const uint4 *)(hq + 32 * gb + 16 * h);
  const uint4 ma = xm[ga], mb = xm[gb];
  x.da = ok ? __uint_as_float(ma.x) : 0.0f, x.db = ok ? __uint_as_float(mb.x) : 0.0f;
  x.sa = (int)(h ? ma.z : ma.y), x.sb = (int)(h ? mb.z : mb.y);
}

// Per weight type: LPB lanes a quant block; w_t, one row's raw registers of
// one step; x_t, the lane's x of one step (shared by the warp's RW rows);
// load(w, blk, j) issues the loads of lane j (of LPB) of the block at blk;
// load_x(x, xq, xm, b, j, ok) reads block b's x for lane j from shared
// memory (ok false: the lane is past the end of its row, scale 0);
// dot(w, x, j) is the lane's part of the row's product.
template <int T>
struct mvr_fmt;

// Q4_K and Q5_K: lane j = 2p + h takes qs bytes [16j, 16j + 16) of the
// super-block's 128: their low nibbles are values 64p + 16h + [0, 16)
// (sub-block 2p, group 2p of x at offset 16h), their high nibbles values
// 64p + 32 + 16h + [0, 16) (sub-block 2p + 1, group 2p + 1).
static __device__ __forceinline__ void mvr_load_xk(mvr_x2 &x, const uint8_t *xq, int cols, int b,
                                                   int j, bool ok) {
  int g = 8 * b + 2 * (j >> 1);
  mvr_load_x2(x, xq, cols, g, g + 1, j & 1, ok);
}
// The lane's part of a Q4_K/Q5_K row from its header h (d, dmin, 12 scale
// bytes), the integer dot products ia, ib of sub-blocks 2p and 2p + 1 with
// x groups of scales da, db and sums (of the values dotted) sa, sb. Bounds
// (16-bit x, |v| <= 16383): sc ia <= 63 (32 * 31 * 16383) < 2^30 (the wide
// Q5_K format's 32 values a sub-block), mn sa <= 63 * 32 * 16383.
static __device__ __forceinline__ float mvr_kq_sum4(uint4 h, int p, int ia, int ib, float da,
                                                    float db, int sa, int sb) {
  // sub-blocks 2p and 2p + 1 are bytes 2 (p & 1) and the next of each
  // scale word: their scales and mins side by side in 16 bits
  int sh = 16 * (p & 1);
  uint32_t y = h.y >> sh, z = h.z >> sh, v = h.w >> sh;
  uint32_t sc = p < 2 ? y & 0x3F3Fu : (v & 0x0F0Fu) | ((y >> 2) & 0x3030u);
  uint32_t mn = p < 2 ? z & 0x3F3Fu : ((v >> 4) & 0x0F0Fu) | ((z >> 2) & 0x3030u);
  float d = __half2float(__ushort_as_half((unsigned short)h.x));
  float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
  float fs = da * (float)((int)(sc & 0xffu) * ia) + db * (float)((int)(sc >> 8) * ib);
  float fm = da * (float)((int)(mn & 0xffu) * sa) + db * (float)((int)(mn >> 8) * sb);
  return d * fs - dmin * fm;
}
static __device__ __forceinline__ float mvr_kq_sum(uint4 h, int p, int ia, int ib,
                                                   const mvr_x2 &x) {
  return mvr_kq_sum4(h, p, ia, ib, x.da, x.db, x.sa, x.sb);
}

template <>
struct mvr_fmt<WK_Q4_K> {
  static constexpr int LPB = 8;
  struct w_t {
    uint4 h, q;  // header, qs bytes [16j, 16j + 16)
  };
  using x_t = mvr_x2;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    w.h = mvr_ld16(blk), w.q = mvr_ld16(blk + 16 + 16 * j);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    mvr_load_xk(x, xq, cols, b, j, ok);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    const uint32_t q[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    const uint32_t xa[4] = {x.a.x, x.a.y, x.a.z, x.a.w}, xb[4] = {x.b.x, x.b.y, x.b.z, x.b.w};
    const uint32_t ya[4] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w};
    const uint32_t yb[4] = {x.bh.x, x.bh.y, x.bh.z, x.bh.w};
    int ia = 0, ib = 0, ja = 0, jb = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      mvr_dp4x(q[i] & 0x0F0F0F0Fu, xa[i], ya[i], &ia, &ja);
      mvr_dp4x((q[i] >> 4) & 0x0F0F0F0Fu, xb[i], yb[i], &ib, &jb);
    }
    return mvr_kq_sum(w.h, j >> 1, ia + 128 * ja, ib + 128 * jb, x);
  }
};

// Q5_K: the fifth bits of the lane's values are bits 2p (low nibbles) and
// 2p + 1 (high nibbles) of qh bytes [16h, 16h + 16).
template <>
struct mvr_fmt<WK_Q5_K> {
  static constexpr int LPB = 8;
  struct w_t {
    uint4 h, qh, q;  // header, qh bytes [16h, 16h + 16), qs bytes [16j, 16j + 16)
  };
  using x_t = mvr_x2;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    w.h = mvr_ld16(blk), w.qh = mvr_ld16(blk + 16 + 16 * (j & 1));
    w.q = mvr_ld16(blk + 48 + 16 * j);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    mvr_load_xk(x, xq, cols, b, j, ok);
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    const uint32_t q[4] = {w.q.x, w.q.y, w.q.z, w.q.w}, qh[4] = {w.qh.x, w.qh.y, w.qh.z, w.qh.w};
    const uint32_t xa[4] = {x.a.x, x.a.y, x.a.z, x.a.w}, xb[4] = {x.b.x, x.b.y, x.b.z, x.b.w};
    const uint32_t ya[4] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w};
    const uint32_t yb[4] = {x.bh.x, x.bh.y, x.bh.z, x.bh.w};
    const int p = j >> 1;
    int ia = 0, ib = 0, ja = 0, jb = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t hi = qh[i] >> (2 * p);
      mvr_dp4x((q[i] & 0x0F0F0F0Fu) | ((hi & 0x01010101u) << 4), xa[i], ya[i], &ia, &ja);
      mvr_dp4x(((q[i] >> 4) & 0x0F0F0F0Fu) | (((hi >> 1) & 0x01010101u) << 4), xb[i], yb[i], &ib,
               &jb);
    }
    return mvr_kq_sum(w.h, p, ia + 128 * ja, ib + 128 * jb, x);
  }
};

// Q6_K: lane j = 4n + q takes ql bytes [64n + 16q, +16) of half n of the
// super-block. With c = q / 2 and h = q % 2 their low nibbles are values
// 128n + 32c + 16h + [0, 16) (sub-block 8n + q: group 4n + c of x at
// offset 16h) and their high nibbles values 64 further (sub-block 8n + 4 +
// q, group 4n + 2 + c); the top two bits of both come from qh bytes
// [128 + 32n + 16h, +16) (bits 2c, 2c + 1 and 2c + 4, 2c + 5; lanes q and
// q ^ 2 read the same bytes); scales int8 at 192 + 8n + q and 196 + 8n + q,
// d at 208, levels - 32.
template <>
struct mvr_fmt<WK_Q6_K> {
  static constexpr int LPB = 8;
  struct w_t {
    uint32_t l[5], h[5];  // raw words of the ql and qh runs (mvr_ld16_a2)
    uint32_t s0, s1, d;   // halfwords holding the two scales, d (f16)
    uint32_t sh;          // 8 * (block address & 3): the runs' funnel shift
  };
  using x_t = mvr_x2;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    const int n = j >> 2, q = j & 3;
    mvr_ld16_a2(blk + 64 * n + 16 * q, w.l);
    mvr_ld16_a2(blk + 128 + 32 * n + 16 * (q & 1), w.h);
    w.s0 = mvr_ld2(blk + 192 + 8 * n + (q & 2)), w.s1 = mvr_ld2(blk + 196 + 8 * n + (q & 2));
    w.d = mvr_ld2(blk + 208);
    w.sh = (uint32_t)((uintptr_t)blk & 2) * 8u;
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int j,
                                                bool ok) {
    int g = 8 * b + 4 * (j >> 2) + ((j >> 1) & 1);
    mvr_load_x2(x, xq, cols, g, g + 2, j & 1, ok);
  }
  // Bounds (|v| <= 16383): |ia - 32 sa| = |sum (q - 32) v| <= 16 * 32 *
  // 16383, times a scale of at most 128: < 2^31.
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int j) {
    const uint32_t xa[4] = {x.a.x, x.a.y, x.a.z, x.a.w}, xb[4] = {x.b.x, x.b.y, x.b.z, x.b.w};
    const uint32_t ya[4] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w};
    const uint32_t yb[4] = {x.bh.x, x.bh.y, x.bh.z, x.bh.w};
    const int hs = j & 2;  // 2c: the qh bits of the low nibbles' values
    int ia = 0, ib = 0, ja = 0, jb = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      uint32_t l = __funnelshift_r(w.l[i], w.l[i + 1], w.sh);
      uint32_t h = __funnelshift_r(w.h[i], w.h[i + 1], w.sh) >> hs;
      mvr_dp4x((l & 0x0F0F0F0Fu) | ((h & 0x03030303u) << 4), xa[i], ya[i], &ia, &ja);
      mvr_dp4x(((l >> 4) & 0x0F0F0F0Fu) | (((h >> 4) & 0x03030303u) << 4), xb[i], yb[i], &ib, &jb);
    }
    ia += 128 * ja, ib += 128 * jb;
    const int bs = 8 * (j & 1);  // the scale's byte in its halfword
    int sa = (int)(int8_t)(w.s0 >> bs), sb = (int)(int8_t)(w.s1 >> bs);
    float s = x.da * (float)(sa * (ia - 32 * x.sa)) + x.db * (float)(sb * (ib - 32 * x.sb));
    return __half2float(__ushort_as_half((unsigned short)w.d)) * s;
  }
};

// Q8_0: a lane a 34-byte block, read as the 9 aligned words under it (from
// the 4-byte boundary at or below the block: d and qs in both alignments).
template <>
struct mvr_fmt<WK_Q8_0> {
  static constexpr int LPB = 1;
  struct w_t {
    uint32_t r[9];
    uint32_t sh;  // 16 (block 4-byte aligned) or 32 (2 mod 4): qs word i = r[i]:r[i+1] >> sh
  };
  struct x_t {
    uint4 a, b, ah, bh;  // lo plane values [0, 16), [16, 32); hi plane
    float dx;
  };
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int) {
    const uint8_t *a = (const uint8_t *)((uintptr_t)blk & ~(uintptr_t)3);
#pragma unroll
    for (int i = 0; i < 9; i++) w.r[i] = mvr_ld4(a + 4 * i);
    w.sh = 16u + (uint32_t)((uintptr_t)blk & 2) * 8u;
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int cols, int b, int,
                                                bool ok) {
    const uint8_t *hq = xq + cols;
    x.a = *(const uint4 *)(xq + 32 * b), x.b = *(const uint4 *)(xq + 32 * b + 16);
    x.ah = *(const uint4 *)(hq + 32 * b), x.bh = *(const uint4 *)(hq + 32 * b + 16);
    x.dx = ok ? __uint_as_float(((const uint4 *)(xq + 2 * (size_t)cols))[b].x) : 0.0f;
  }
  // |a| <= 32 * 128 * 16383 < 2^27.
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    const uint32_t xv[8] = {x.a.x, x.a.y, x.a.z, x.a.w, x.b.x, x.b.y, x.b.z, x.b.w};
    const uint32_t yv[8] = {x.ah.x, x.ah.y, x.ah.z, x.ah.w, x.bh.x, x.bh.y, x.bh.z, x.bh.w};
    int a = 0, b = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) mvr_dp4x(__funnelshift_rc(w.r[i], w.r[i + 1], w.sh), xv[i], yv[i], &a, &b);
    float d = __half2float(__ushort_as_half((unsigned short)(w.r[0] >> (w.sh - 16u))));
    return d * x.dx * (float)(a + 128 * b);
  }
};

// FP8 (E4M3, E5M2): a block is an f32 scale, then 128 one-byte codes (132
// bytes, so blocks lie at 4-byte boundaries only: no 16-byte loads). Lane j
// (of 8) takes code words j, j + 8, j + 16, j + 24 of the block's 32 (bytes
// 4 + 4j + 32i: values 4j + 32i + [0, 4)), in four 32-bit loads, and the
// scale; a load of the warp reads 32 consecutive bytes of each of its four
// blocks, and the lane's x (float4 j + 8i of the block's 32, f32 in shared
// memory) is read by the block's 8 lanes as 128 consecutive bytes: no bank
// conflicts. Codes go to f32 two at a time (hardware cvt to half2, then to
// float2; E4M3's 0x7f/0xff read as NaN here, as in quant.cuh: wick's
// encoder writes them only for NaN), and f32 FMAs with x; the scale once a
// block.
template <int T>
static __device__ __forceinline__ void mvr_fp8x4(uint32_t w, float *f) {
  float2 a, b;
  if constexpr (T == WK_FP8_E4M3) {
    __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
    __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
    a = __half22float2(*(const __half2 *)&h0), b = __half22float2(*(const __half2 *)&h1);
  } else {  // E5M2: the top byte of a half
    uint32_t h0 = __byte_perm(w, 0, 0x1404), h1 = __byte_perm(w, 0, 0x3424);
    a = __half22float2(*(const __half2 *)&h0), b = __half22float2(*(const __half2 *)&h1);
  }
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

// The lane's f32 x of one step (float types): its first float4 in shared
// memory, the block's parity in the step (F16/BF16) and whether the lane is
// inside its row (false: it counts 0).
struct mvr_xf {
  const float4 *p;
  int s;
  bool ok;
};

template <int T>
struct mvr_fp8 {
  static constexpr int LPB = 8;
  struct w_t {
    uint32_t q[4];  // code words j, j + 8, j + 16, j + 24
    uint32_t d;     // the scale (f32 bits)
  };
  using x_t = mvr_xf;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    w.d = mvr_ld4(blk);
#pragma unroll
    for (int i = 0; i < 4; i++) w.q[i] = mvr_ld4(blk + 4 + 4 * j + 32 * i);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int, int b, int j,
                                                bool ok) {
    x.p = (const float4 *)xq + 32 * b + j, x.s = 0, x.ok = ok;
  }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float f[4];
      mvr_fp8x4<T>(w.q[i], f);
      const float4 v = x.p[8 * i];
      a0 = fmaf(f[0], v.x, a0), a1 = fmaf(f[1], v.y, a1);
      a0 = fmaf(f[2], v.z, a0), a1 = fmaf(f[3], v.w, a1);
    }
    return x.ok ? __uint_as_float(w.d) * (a0 + a1) : 0.0f;
  }
};
template <>
struct mvr_fmt<WK_FP8_E4M3> : mvr_fp8<WK_FP8_E4M3> {};
template <>
struct mvr_fmt<WK_FP8_E5M2> : mvr_fp8<WK_FP8_E5M2> {};

// F16 and BF16 (32-value blocks of 64 bytes; rows of a multiple of 32
// values, so 16-byte aligned): lane j (of 4) takes bytes [16j, 16j + 16) of
// the block, values 8j + [0, 8), in one 16-byte load. Its x is float4s 2j
// and 2j + 1 of the block, read in the order 2j + s, 2j + 1 - s with s the
// block's parity in the step: a quarter-warp (8 lanes, two blocks) then
// reads 8 float4s in distinct banks each time.
template <int T>
struct mvr_f16 {
  static constexpr int LPB = 4;
  struct w_t {
    uint4 q;  // bytes [16j, 16j + 16)
  };
  using x_t = mvr_xf;
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *blk, int j) {
    w.q = mvr_ld16(blk + 16 * j);
  }
  static __device__ __forceinline__ void load_x(x_t &x, const uint8_t *xq, int, int b, int j,
                                                bool ok) {
    x.p = (const float4 *)xq + 8 * b + 2 * j, x.s = b & 1, x.ok = ok;
  }
  static __device__ __forceinline__ float2 f2(uint32_t w) { return qtype_16<T>::pair(w); }
  static __device__ __forceinline__ float dot(const w_t &w, const x_t &x, int) {
    const float4 va = x.p[x.s], vb = x.p[1 - x.s];  // values 4s + [0, 4), 4 - 4s + [0, 4)
    const float2 a = f2(x.s ? w.q.z : w.q.x), b = f2(x.s ? w.q.w : w.q.y);
    const float2 c = f2(x.s ? w.q.x : w.q.z), d = f2(x.s ? w.q.y : w.q.w);
    float a0 = a.x * va.x, a1 = a.y * va.y;
    a0 = fmaf(b.x, va.z, a0), a1 = fmaf(b.y, va.w, a1);
    a0 = fmaf(c.x, vb.x, a0), a1 = fmaf(c.y, vb.y, a1);
    a0 = fmaf(d.x, vb.z, a0), a1 = fmaf(d.y, vb.w, a1);
    return x.ok ? a0 + a1 : 0.0f;
  }
};
template <>
struct mvr_fmt<WK_F16> : mvr_f16<WK_F16> {};
template <>
struct mvr_fmt<WK_BF16> : mvr_f16<WK_BF16> {};

#include "backend/cuda/mvr_q4.cuh"  // Q4_0, Q4_1, Q5_0, Q5_1
#include "backend/cuda/mvr_kx.cuh"  // Q2_K, Q3_K, IQ4_XS, IQ4_NL

// The types k_mvr has a format for (mvr_can), those MV_REG sends to it by
// default (mvr_has: all of them since session 12; FP8 had stayed on the v4
// kernel, 60-61% of the copy rate, while its format here ran 7 items in
// flight with spills at 55-60%: at 1 item, 69-70% with dependent launch, and
// 8B FP8 decode 2.88 against 3.43 ms; F16/BF16 measured 87/81% against v4's
// 82/76% in session 4), and those whose x it
// keeps in f32 (shared memory: cols floats) rather than rounded to int8
// (cols bytes and a uint2 a group).
template <int T>
struct mvr_can {
  static constexpr bool value = T == WK_Q4_0 || T == WK_Q4_1 || T == WK_Q5_0 || T == WK_Q5_1 ||
                                T == WK_Q4_K || T == WK_Q5_K || T == WK_Q6_K || T == WK_Q8_0 ||
                                T == WK_FP8_E4M3 || T == WK_FP8_E5M2 || T == WK_F16 ||
                                T == WK_BF16 || T == WK_Q2_K || T == WK_Q3_K || T == WK_IQ4_NL ||
                                T == WK_IQ4_XS;
};
template <int T>
struct mvr_has {
  static constexpr bool value = mvr_can<T>::value;
};
template <int T>
struct mvr_f32x {
  static constexpr bool value =
      T == WK_FP8_E4M3 || T == WK_FP8_E5M2 || T == WK_F16 || T == WK_BF16;
};

// Float4 i of x times the folded norm's weights (np NULL: none); its
// squares, before the weights, added to *ss.
static __device__ __forceinline__ float4 mvr_xnorm4(const float4 *__restrict__ xp,
                                                    const float4 *__restrict__ np, int i,
                                                    float *ss) {
  float4 v = __ldg(xp + i);
  if (np) {
    const float4 w = __ldg(np + i);
    *ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    v.x *= w.x, v.y *= w.y, v.z *= w.z, v.w *= w.w;
  }
  return v;
}

// The block copies one token's x (cols floats, times the folded norm's
// weights nw unless NULL) into shared memory xs as f32. Every thread of the
// block calls it; it ends on a barrier and returns the norm's 1 / rms of x
// (1 without nw) to all. red: 32 floats of shared scratch.
static __device__ __forceinline__ float mvr_stage_x(const float *__restrict__ x, int cols,
                                                    const float *__restrict__ nw, float eps,
                                                    float4 *xs, float *red) {
  float ss = 0.0f;
  const float4 *xp = (const float4 *)x, *np = (const float4 *)nw;
#pragma unroll 2
  for (int i = threadIdx.x; i < cols / 4; i += blockDim.x) xs[i] = mvr_xnorm4(xp, np, i, &ss);
  if (!nw) {
    __syncthreads();
    return 1.0f;
  }
  return mv_rscale(block_sum(ss, red), cols, eps);  // block_sum's barriers cover xs
}

// Whether format F reads x as an f16 image staged by mvr_stage_ximg (the
// FP8 wide format, mvr_fp8w.cuh) rather than as int8 or f32 x.
template <class F>
struct mvr_ximg {
  static constexpr bool value = false;
};

// The block stages one token's x (times the folded norm's weights nw unless
// NULL) as f16 times sigma, a power of two with max |x sigma| <= 4, into
// img in the FP8 wide format's layout: per step of 512 columns 528 halves,
// x at the places of the 4 blocks' code bytes and 0 at their scale bytes.
// Every thread calls it; it ends on a barrier and returns the norm's 1 / rms
// (1 without nw) divided by sigma. red: 32 floats of shared scratch.
static __device__ __forceinline__ float mvr_stage_ximg(const float *__restrict__ x, int cols,
                                                       const float *__restrict__ nw, float eps,
                                                       __half *img, float *red) {
  const float4 *xp = (const float4 *)x, *np = (const float4 *)nw;
  float ss = 0.0f, am = 0.0f, unused = 0.0f;
  for (int i = threadIdx.x; i < cols / 4; i += blockDim.x) {
    const float4 v = mvr_xnorm4(xp, np, i, &ss);
    am = fmaxf(am, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
  }
  am = block_max(am, red);
  const float rs = nw ? mv_rscale(block_sum(ss, red), cols, eps) : 1.0f;
  const float sig = am > 0.0f ? exp2f(floorf(log2f(4.0f / am))) : 1.0f;
  uint2 *iw = (uint2 *)img;  // 132 words of 4 halves a step
  for (int i = threadIdx.x; i < cols / 512 * 132; i += blockDim.x) {
    const int s = i / 132, q = i % 132, b = q / 33, e = q % 33;
    uint2 h = make_uint2(0u, 0u);
    if (e > 0) {  // codes 4 (e - 1) .. + 3 of block b
      const float4 v = mvr_xnorm4(xp, np, (512 * s + 128 * b + 4 * (e - 1)) / 4, &unused);
      __half2 lo = __floats2half2_rn(v.x * sig, v.y * sig), hi = __floats2half2_rn(v.z * sig, v.w * sig);
      h = make_uint2(*(const uint32_t *)&lo, *(const uint32_t *)&hi);
    }
    iw[i] = h;
  }
  __syncthreads();
  return rs / sig;
}

// Whether type T's products take the whole-units grid and load their first
// items after x is staged (both always for the int8-x types; for the f32-x
// ones only under the MVR_WHOLE / MVR_LATE comparison options; mvr_launch).
template <int T>
static __host__ __device__ __forceinline__ bool mvr_whole(int opts) {
  return !mvr_f32x<T>::value || (opts & MVR_WHOLE);
}
template <int T>
static __host__ __device__ __forceinline__ bool mvr_late(int opts) {
  return !mvr_f32x<T>::value || (opts & MVR_LATE);
}

// The block's units are a contiguous share of the grid's; its items (unit
// after unit, in groups of M: GLU's gate/up pairs) are split evenly among
// its nw warps: warp w takes groups [at(w), at(w + 1)) of the block's
// token, counted from the first unit's (at(nw): the block's end). 32-bit
// arithmetic throughout (n = q d + r: n w / d = q w + r w / d).
struct mvr_share {
  int g0, q, r, nw;  // the block's first group; its groups = q nw + r
  // bx of gx blocks (k_mvr2: a block of one of its two grids)
  __device__ mvr_share(int units, int groups, int nwarps, int bx = blockIdx.x, int gx = gridDim.x)
      : nw(nwarps) {
    const int uq = units / gx, ur = units % gx;
    const int u0 = uq * bx + ur * bx / gx, u1 = uq * (bx + 1) + ur * (bx + 1) / gx;
    const int n = (u1 - u0) * groups;
    g0 = u0 * groups, q = n / nw, r = n % nw;
  }
  __device__ int at(int w) const { return g0 + q * w + r * w / nw; }
};

// NT: the largest block (ptxas fits the registers to one such block an
// SM); the launch may use smaller ones (mvr_launch). F: the lanes' format
// (mvr_fmt<T>, or another layout of T's blocks: mvr_w4.cuh).
// Bytes of one token's x in shared memory: f32 (the float types), or the
// two int8 planes of 16-bit x and a uint4 a 32-value group (mvr_round_x16),
// rounded up to 16 (the next token's x is read in 16-byte loads).
template <int T>
static __host__ __device__ __forceinline__ size_t mvr_xbytes(int cols) {
  return mvr_f32x<T>::value ? (size_t)cols * sizeof(float)
                            : (2 * (size_t)cols + (size_t)cols / 32 * sizeof(uint4) + 15) & ~(size_t)15;
}

// The batched products' x rounded once a token (integer types): block t
// rounds token t's x (times the folded norm's weights nw unless NULL) into
// pre in the layout k_mvr stages in shared memory, at MVR_PRE_HEAD + t xb,
// and its 1 / rms (1 without nw) at float t of pre. Every block of the
// product then copies its tokens' bytes (2.5 a column) instead of reading
// and rounding the f32 x (4 a column, and the rounding's arithmetic).
static __global__ void __launch_bounds__(1024) k_mvr_prep(const float *__restrict__ x, int cols,
                                                   const float *__restrict__ nw, float eps,
                                                   uint8_t *pre) {
  __shared__ float red[32];
  pdl_launch_next();
  pdl_wait();
  const int t = blockIdx.x;
  uint8_t *xq = pre + MVR_PRE_HEAD + (size_t)t * mvr_xbytes<WK_Q8_0>(cols);
  const float rs = mvr_round_x16(x + (size_t)t * cols, cols, nw, eps, xq, red);
  if (threadIdx.x == 0) ((float *)pre)[t] = rs;
}

// A warp's stream of `total` items: the loads of item i + D (load(w[slot],
// matrix)) issued before item i is computed (compute(w[slot], matrix)), in
// a ring of D + 1 register sets w; GLU: the items alternate gate (0) and
// up (1).
template <int D, bool GLU, class R, class L, class C>
static __device__ __forceinline__ void mvr_ring(R *w, int total, L &load, C &compute) {
  for (int i0 = 0; i0 < total; i0 += D + 1) {
#pragma unroll
    for (int k = 0; k <= D; k++) {
      if (i0 + k >= total) break;
      if (i0 + k + D < total) load(w[(k + D) % (D + 1)], GLU ? (k + D) & 1 : 0);
      compute(w[k], GLU ? k & 1 : 0);
    }
  }
}

// The split grid's units split between warps (after a barrier over
// part[warp][0: a warp's first unit, 1: its last][token][matrix][row]):
// the thread of the first warp boundary inside such a unit adds the warps'
// parts in warp order and calls emit(unit, token, sums[M][RW]). groups: a
// unit's groups of items (mvr_share).
template <int NTOK, int M, int RW, class E>
static __device__ __forceinline__ void mvr_join(const float (*part)[2][NTOK][M][RW], int units,
                                                int groups, int nw, int ntk, E emit,
                                                int bx = blockIdx.x, int gx = gridDim.x) {
  const int wb = threadIdx.x;
  if (wb < 1 || wb >= nw) return;
  const mvr_share sh(units, groups, nw, bx, gx);
  const int G = groups, sb = sh.at(wb), u = sb / G, u0 = u * G;
  if (sb % G == 0 || sh.at(wb - 1) > u0) return;
  for (int t = 0; t < ntk; t++) {
    float a[M][RW];
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
      for (int r = 0; r < RW; r++) a[m][r] = 0.0f;
    for (int v = wb - 1, sv = sh.at(v); v < nw && sv < u0 + G; v++) {
      const int sn = sh.at(v + 1);
      if (sn > sv) {  // warp v has items
        const int h = sv / G == u ? 0 : 1;
#pragma unroll
        for (int m = 0; m < M; m++)
#pragma unroll
          for (int r = 0; r < RW; r++) a[m][r] += part[v][h][t][m][r];
      }
      sv = sn;
    }
    emit(u, t, a);
  }
}

// NTOK: tokens a block (blockIdx.y: tokens [NTOK y, NTOK y + NTOK) of n):
// each lane's weights are loaded once and multiplied with every token's x
// (staged one after the other in shared memory), so a batch of up to NTOK
// tokens reads the matrix once.
// mvr_body: the kernel's work as block bx of a grid of gx blocks (k_mvr:
// the launch's own; k_mvr2: one of its two grids).
template <int T, int NT, int RW, int D, bool GLU, class F, int NTOK>
static __device__ __forceinline__ void mvr_body(const mv_jobs &js, int cols,
                                                const float *__restrict__ x, float beta, int act,
                                                int n, int bx, int gx) {
  using W = typename F::w_t;
  constexpr bool F32X = mvr_f32x<T>::value;
  constexpr int BPS = 32 / F::LPB, BYTES = qtype<T>::BYTES, M = GLU ? 2 : 1;
  static_assert(!GLU || (D + 1) % 2 == 0, "gate and up items alternate: an even ring");
  extern __shared__ uint4 mvr_smem[];
  __shared__ float red[32];
  __shared__ float part[NT / 32][2][NTOK][M][RW];  // split units: a warp's first (0) and last (1) unit
  // Token t's x at xq0 + t xb: F32X x in f32; else 16-bit x (mvr_round_x16).
  uint8_t *const xq0 = (uint8_t *)mvr_smem;
  const size_t xb = mvr_xbytes<T>(cols);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  // The block's tokens (one: the grid row's, known at compile time).
  const int t0 = blockIdx.y * NTOK, ntk = NTOK == 1 ? 1 : min(NTOK, n - t0);
  const int sub = lane / F::LPB, j = lane % F::LPB;  // block of the step, lane in the block
  const int bpr = cols / qtype<T>::BLOCK, steps = (bpr + BPS - 1) / BPS, items = M * steps;
  const size_t row_bytes = js.j[0].row_bytes;
  const int units = js.j[0].nblk + (js.n > 1 ? js.j[1].nblk : 0) + (js.n > 2 ? js.j[2].nblk : 0);
  // The warp's items: whole units fu, fu + us, ... (MVR_WHOLE: warp gw of
  // the grid takes units gw, gw + W, ...; no unit is split) or a contiguous
  // range starting at item fi of unit fu (mvr_share; us 1).
  const bool whole = mvr_whole<T>(js.mvr);
  int fu, fi = 0, us = 1, total;
  if (whole) {
    const int gw = bx * nw + warp, tw = gx * nw;
    fu = gw, us = tw, total = gw < units ? ((units - 1 - gw) / tw + 1) * items : 0;
  } else {
    const mvr_share sh(units, items / M, nw, bx, gx);
    const int s0 = sh.at(warp) * M;
    total = sh.at(warp + 1) * M - s0, fu = s0 / items, fi = s0 % items;
  }
  const uintptr_t up = GLU ? (uintptr_t)js.j[1].W - (uintptr_t)js.j[0].W : 0;  // up - gate row

  // Loads: item li of unit lu; lp[r] the start of the unit's row r (GLU:
  // its gate row). An item is a step (GLU: a step of the gate rows, then
  // the same step of the up rows).
  const uint8_t *lp[RW];
  int lu = fu, li = fi;
  auto set_rows = [&](int u) {
    int tj, ji = mvs_job(js, u, &tj);
    int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
    const uint8_t *mat = ji == 0 ? js.j[0].W : ji == 1 ? js.j[1].W : js.j[2].W;
#pragma unroll
    for (int r = 0; r < RW; r++) lp[r] = mat + (size_t)min(tj * RW + r, rows - 1) * row_bytes;
  };
  auto load = [&](W *w, int m) {  // m: the item's matrix (GLU: 1 up), known at compile time
    const int s = GLU ? li >> 1 : li;
    const size_t off = (size_t)min(s * BPS + sub, bpr - 1) * BYTES;
#pragma unroll
    for (int r = 0; r < RW; r++) F::load(w[r], mvr_at(lp[r] + off, m ? up : 0), j);
    if (++li == items) {
      li = 0, lu += us;
      if (lu < units) set_rows(lu);
    }
  };

  // Before the wait (weights do not depend on the previous kernel): the
  // first unit's pf steps after the first D items into L2 (a lane a 32nd
  // of each row's step), then the first D items into registers, so both
  // arrive while the previous kernel ends and x is rounded.
  W w[D + 1][RW];  // ring of register sets: item i in w[i % (D + 1)]
  const bool late = mvr_late<T>(js.mvr);
  if (total > 0) {
    set_rows(fu);
    const size_t step_bytes = (size_t)BPS * BYTES, last = (size_t)bpr * BYTES - 1;
    const int p0 = (late ? fi : fi + D) / M;
    // The prefetch's depth: by default 1 step where the loads wait for x
    // (int8 x), none where the first D items load before the wait (f32 x).
    // Deeper requests compete with the previous kernel's last reads: the 8B
    // decode step at 16 / 4096 keys, Q4_K_M 2.125 / 2.47-2.55 ms with 4
    // steps against 2.07-2.08 / 2.43 with 1, BF16 4.23 / 4.59 with 4 against
    // 4.15 / 4.52 with none (RESULTS, session 11).
    const int pf = js.pf >= 0 ? js.pf : F32X ? 0 : 1;
    for (int s = p0; s < p0 + pf && s < steps; s++) {
      size_t off = min((size_t)s * step_bytes + (size_t)lane * step_bytes / 32, last);
#pragma unroll
      for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < RW; r++) mvr_prefetch(mvr_at(lp[r] + off, m ? up : 0));
    }
  }
  if (!late)
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < total) load(w[k], GLU ? k & 1 : 0);
  pdl_launch_next();
  pdl_wait();
  float rs[NTOK];
  if (NTOK > 1 && !F32X && !mvr_ximg<F>::value && (js.mvr & MVR_PRE)) {
    // x is k_mvr_prep's copy, rounded once a token
    const uint8_t *pre = (const uint8_t *)x;
    const uint4 *src = (const uint4 *)(pre + MVR_PRE_HEAD + (size_t)t0 * xb);
    for (int i = threadIdx.x; i < (int)(ntk * xb / 16); i += blockDim.x)
      ((uint4 *)xq0)[i] = src[i];
#pragma unroll
    for (int t = 0; t < NTOK; t++) rs[t] = t < ntk ? ((const float *)pre)[t0 + t] : 1.0f;
    __syncthreads();
  } else {
#pragma unroll
    for (int t = 0; t < NTOK; t++) {
      rs[t] = 1.0f;
      if (t >= ntk) break;
      const float *xt = x + (size_t)(t0 + t) * cols;
      uint8_t *xq = xq0 + t * xb;
      rs[t] = mvr_ximg<F>::value ? mvr_stage_ximg(xt, cols, js.nw, js.eps, (__half *)xq, red)
              : F32X             ? mvr_stage_x(xt, cols, js.nw, js.eps, (float4 *)xq, red)
                                 : mvr_round_x16(xt, cols, js.nw, js.eps, xq, red);
    }
  }
  if (late)
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < total) load(w[k], GLU ? k & 1 : 0);

  // Unit u's row sums of token t (a[m][r], whole rows) times rs[t] into y.
  auto emit = [&](int u, int t, const float (*a)[RW]) {
    int tj, ji = mvs_job(js, u, &tj);
    int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
    float *y = (ji == 0 ? js.j[0].y : ji == 1 ? js.j[1].y : js.j[2].y) + (size_t)(t0 + t) * rows;
#pragma unroll
    for (int r = 0; r < RW; r++) {
      int row = tj * RW + r;
      if (row >= rows) break;
      if constexpr (GLU)
        y[row] = glu_act(a[0][r] * rs[t], act) * (a[M - 1][r] * rs[t]);
      else
        y[row] = beta != 0.0f ? a[0][r] * rs[t] + beta * y[row] : a[0][r] * rs[t];
    }
  };
  // Arithmetic: item ci of unit cu.
  int cu = fu, ci = fi;
  float acc[NTOK][M][RW];
#pragma unroll
  for (int t = 0; t < NTOK; t++)
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
      for (int r = 0; r < RW; r++) acc[t][m][r] = 0.0f;
  // The unit's sums over the warp's items of it: written when they are the
  // whole row, else kept in part[warp][0: its first unit, 1: its last].
  auto finish = [&](int slot) {  // slot -1: whole rows
#pragma unroll
    for (int t = 0; t < NTOK; t++) {
      if (t >= ntk) break;
#pragma unroll
      for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < RW; r++) acc[t][m][r] = warp_sum(acc[t][m][r]);
      if (lane == 0) {
        if (slot < 0)
          emit(cu, t, acc[t]);
        else
#pragma unroll
          for (int m = 0; m < M; m++)
#pragma unroll
            for (int r = 0; r < RW; r++) part[warp][slot][t][m][r] = acc[t][m][r];
      }
#pragma unroll
      for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < RW; r++) acc[t][m][r] = 0.0f;
    }
  };
  auto compute = [&](const W *w, int m) {
    const int b = (GLU ? ci >> 1 : ci) * BPS + sub;
    const bool ok = b < bpr;
    // Every token slot, those past the batch's end on token 0's x (their
    // sums are never written): no branch between the tokens, so the
    // decoding of w common to all of them is done once.
#pragma unroll
    for (int t = 0; t < NTOK; t++) {
      const uint8_t *xq = xq0 + (t < ntk ? t : 0) * xb;
      typename F::x_t xv;
      F::load_x(xv, xq, cols, ok ? b : bpr - 1, j, ok);
#pragma unroll
      for (int r = 0; r < RW; r++) acc[t][m][r] += F::dot(w[r], xv, j);
    }
    if (++ci == items) finish(cu == fu && fi != 0 ? 0 : -1), ci = 0, cu += us;
  };

  mvr_ring<D, GLU>(w, total, load, compute);
  if (total > 0 && ci != 0) finish(cu == fu ? 0 : 1);  // the range ends inside unit cu

  if (whole) return;
  __syncthreads();
  mvr_join<NTOK, M, RW>(part, units, items / M, nw, ntk, emit, bx, gx);
}

template <int T, int NT, int RW, int D, bool GLU, class F = mvr_fmt<T>, int NTOK = 1>
__global__ void __launch_bounds__(NT, 1) k_mvr(mv_jobs js, int cols, const float *__restrict__ x,
                                               float beta, int act, int n) {
  mvr_body<T, NT, RW, D, GLU, F, NTOK>(js, cols, x, beta, act, n, blockIdx.x, gridDim.x);
}

// Two products of one x in one launch (decode, one token), each on its own
// format: blocks [0, b1) are the first's grid (jobs j1: type T1, format F1),
// the rest the second's (j2: T2, F2). A Q4_K_M layer's Q and K (Q4_K) and V
// (Q6_K) take one launch so, not two: a launch boundary costs ~3.6 us of a
// dependent product (docs/CUDA.md, session 9).
template <int T1, class F1, int RW1, int D1, int T2, class F2, int RW2, int D2, int NT>
__global__ void __launch_bounds__(NT, 1) k_mvr2(mv_jobs j1, mv_jobs j2, int b1, int cols,
                                                const float *__restrict__ x) {
  if ((int)blockIdx.x < b1)
    mvr_body<T1, NT, RW1, D1, false, F1, 1>(j1, cols, x, 0.0f, 0, 1, blockIdx.x, b1);
  else
    mvr_body<T2, NT, RW2, D2, false, F2, 1>(j2, cols, x, 0.0f, 0, 1, blockIdx.x - b1,
                                             gridDim.x - b1);
}

// Shape per type and kind (GLU: gate/up): NT threads at most a block, RW
// rows a step, D items of loads in flight ahead of the arithmetic (GLU: D
// odd). ptxas fits the registers to NT threads an SM (64 at 1024, 80 at
// 768); a lane holds (D + 1) RW raw register sets, so D and RW are what
// the registers allow without spills (docs/CUDA.md v9: ptxas figures).
template <int T, bool GLU>
struct mvr_cfg {
  // 16-bit x (session 14) doubled the x work a weight (two planes, twice the
  // shared-memory reads and dp4a); two rows a unit share it, at 512 threads
  // for the registers: bench_cuda's `reg 512/2/1` row against `reg
  // 1024/1/1` (1 row, the int8-x default), 4096x14336 / 14336x4096 in us,
  // no dependent launch: Q4_0 14.9 / 14.7 against 17.9 / 18.9, Q4_K 15.7 /
  // 15.5 against 17.4 / 18.7, Q6_K 21.6 / 21.6 against 24.9 / 26.9, Q8_0
  // 21.9 / 19.9 against 22.2 / 23.6 (session 14, call 4).
  static constexpr bool X16 = !mvr_f32x<T>::value;
  static constexpr int RW = X16 ? 2 : 1;
  // Q6_K: 1024 threads and one item ahead measured 55/51% of the copy rate
  // at 4096x14336 / 14336x4096 against 40/53% with 768 and two (session 4).
  // F16/BF16: 16 bytes a lane a step in 4 registers, so up to 7 steps in
  // flight (~115 KB an SM) fit in 64 registers; alone 7 read 92 / 94% of
  // the copy rate and 1 87 / 87%, but in the 8B BF16 decode 3 items take
  // 4.09 / 4.43 ms at context 16 / 4096 against 4.11-4.12 / 4.46-4.48 with
  // 7 and 4.32-4.33 / 4.64-4.65 with 1 (session 12, call 4). FP8: 7 items
  // spilled (36-48 bytes) and read 55-60%; 1, 2 or 3 items 69-71% with
  // dependent launch, 5 67-68%; in the 8B decode 1 item 2.879 / 3.224 ms, 3
  // items 2.90 / 3.24, 5 2.96 / 3.32 (call 2). The int8-x types: 1 item at
  // 1024 threads (Q4_K 64 / 60% against 62 / 58% at 3 items, Q5_K 66 / 62
  // against 63 / 57 at 2, Q8_0 79 / 81 against 76 / 78 at 3; with the wide
  // Q4_K at 1024 threads and 1 item, 8B Q4_K_M decode 1.981 / 2.307 ms
  // against 2.069 / 2.422, call 3). mvr_cfg_s11: the shapes before, for
  // comparison (WICK_CUDA_MVD=0).
  // Q2_K (session 33): 3 items ahead read 38 / 36% of the copy rate with
  // dependent launch against 36 / 34% at 1 (Q3_K at one row and 3 items: 25
  // / 25% against 31 / 29% at 2 rows and 1). These formats are bound by the
  // work a value (two dp4a planes, shared-memory x) more than by their
  // bytes: Q2_K reads 2.6 bits a value to Q4_K's 4.5.
  static constexpr int D = T == WK_F16 || T == WK_BF16 || T == WK_Q2_K ? 3 : 1;
  static constexpr int NT = X16 ? 512 : 1024;
};
template <int T, bool GLU>
struct mvr_cfg_s11 {  // Q4_K, Q5_K, Q8_0 (matvec.cu's WICK_CUDA_MVD=0)
  static constexpr int RW = 1;
  static constexpr int D = T == WK_Q5_K && !GLU ? 2 : 3;
  static constexpr int NT = T == WK_Q5_K && GLU ? 768 : 1024;
};

// Blocks of nw warps the whole-units grid takes for `units` units when
// `wave` blocks fit at once: every warp the same number (within one), as
// few blocks as that allows.
static inline int mvr_whole_blocks(long units, long wave, int nw) {
  long per_warp = (units + wave * nw - 1) / (wave * nw);
  return cu_div_up((units + per_warp - 1) / per_warp, nw);
}

// Launches k_mvr over js (job j's nblk gets its units) for n tokens, one
// wave of blocks, in one of two grids:
//   whole units: every warp the same number of units (within one), on as
//   many blocks as that takes (14336 rows: 4 a warp on 112 of 132 SMs);
//   split: the whole wave (at most a unit a warp), each block's units
//   split evenly among its warps (mvr_share), so no SM idles while others
//   do a last round.
// Blocks are as large as leaves at most a quarter of the SMs idle (each
// block rounds x once: fewer, larger blocks read less of it), halving from
// NT down to NT/4 threads. The f32-x types (F16, BF16, FP8) split and load
// their first D items before the wait (session 7: 8B BF16 decode at context
// 4096 4.57 ms against 4.79; MVR_LATE / MVR_WHOLE in js.mvr for
// comparison); the int8-x ones keep whole units and the L2 prefetch with
// the loads after x is staged, compiled without the split code (8B Q4_K_M
// was 2-5% slower either way).
// Returns cudaErrorInvalidValue when x's copy (int8, or f32 for the float
// types) does not fit in shared memory.
// pre: scratch of pre_bytes where several tokens a block (int8 x) round
// every token's x once (k_mvr_prep) rather than each block its own (NULL:
// not used).
template <int T, int NT, int RW, int D, bool GLU, class F = mvr_fmt<T>, int NTOK = 1>
static cudaError_t mvr_launch(mv_jobs js, int cols, const float *x, int n, float beta, int act,
                              bool pdl, cudaStream_t st, uint8_t *pre = nullptr,
                              size_t pre_bytes = 0) {
  long units = 0;
  for (int i = 0; i < js.n; i++) {
    js.j[i].nblk = GLU && i > 0 ? 0 : cu_div_up(js.j[i].rows, RW);
    units += js.j[i].nblk;
  }
  if (units == 0 || n < 1) return cudaSuccess;
  size_t smem = NTOK * mvr_xbytes<T>(cols);
  auto kern = k_mvr<T, NT, RW, D, GLU, F, NTOK>;
  const int ny = cu_div_up(n, NTOK);  // token tiles (grid rows)
  if (NTOK == 1 || mvr_f32x<T>::value || mvr_ximg<F>::value || cu_pre_bytes(n, cols) > pre_bytes)
    pre = nullptr;
  cudaError_t e;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
          cudaSuccess) {
    cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  int dev = 0, sms = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const bool whole = mvr_whole<T>(js.mvr);
  int nt = NT, blocks = 0;
  for (;; nt /= 2) {
    int per_sm = 0, nw = nt / 32;
    if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, nt, smem)) != cudaSuccess)
      return e;
    if (per_sm < 1) return cudaErrorInvalidValue;
    long wave = (long)per_sm * sms / ny;  // resident blocks a token tile
    if (wave < 1) wave = 1;
    if (whole) {  // every warp the same number of whole units
      blocks = mvr_whole_blocks(units, wave, nw);
    } else {  // the whole wave, units split where a warp would have more than one
      blocks = (int)(wave < cu_div_up(units, nw) ? wave : cu_div_up(units, nw));
    }
    if (nt <= NT / 4 || (long)blocks * ny * 4 >= (long)sms * 3) break;
  }
  if (pre) {
    e = cu_launch(pdl, st, dim3(n), dim3(1024), 0, k_mvr_prep, x, cols, js.nw, js.eps, pre);
    if (e != cudaSuccess) return e;
    js.mvr |= MVR_PRE, x = (const float *)pre;
  }
  return cu_launch(pdl, st, dim3(blocks, ny), dim3(nt), smem, kern, js, cols, x, beta, act, n);
}

// Launches k_mvr2 for one token: js1's products (all rows of type T1, in
// format F1) on the first share of one wave of NT-thread blocks, js2's on
// the rest, each share a whole-units grid (mvr_whole_blocks) as mvr_launch
// makes it, the wave split in proportion to the bytes. cudaErrorInvalidValue
// where the two grids do not fit in one wave or x in shared memory (the
// caller then launches them apart).
template <int T1, class F1, int RW1, int D1, int T2, class F2, int RW2, int D2, int NT>
static cudaError_t mvr_launch2(mv_jobs j1, mv_jobs j2, int cols, const float *x, bool pdl,
                               cudaStream_t st) {
  static_assert(!mvr_f32x<T1>::value && !mvr_f32x<T2>::value, "whole-unit grids only");
  long u1 = 0, u2 = 0;
  double by1 = 0, by2 = 0;
  for (int i = 0; i < j1.n; i++) {
    u1 += j1.j[i].nblk = cu_div_up(j1.j[i].rows, RW1);
    by1 += (double)j1.j[i].rows * j1.j[i].row_bytes;
  }
  for (int i = 0; i < j2.n; i++) {
    u2 += j2.j[i].nblk = cu_div_up(j2.j[i].rows, RW2);
    by2 += (double)j2.j[i].rows * j2.j[i].row_bytes;
  }
  if (u1 == 0 || u2 == 0) return cudaErrorInvalidValue;
  const size_t x1 = mvr_xbytes<T1>(cols), x2 = mvr_xbytes<T2>(cols), smem = x1 > x2 ? x1 : x2;
  auto kern = k_mvr2<T1, F1, RW1, D1, T2, F2, RW2, D2, NT>;
  int sms = 0, per_sm = 0;
  if (cudaError_t e = cu_occupancy(kern, NT, smem, &sms, &per_sm)) return e;
  if (per_sm < 1) return cudaErrorInvalidValue;
  const long wave = (long)per_sm * sms, nw = NT / 32;
  long w1 = (long)(wave * by1 / (by1 + by2) + 0.5);
  w1 = w1 < 1 ? 1 : w1 > wave - 1 ? wave - 1 : w1;
  const int b1 = mvr_whole_blocks(u1, w1, (int)nw);
  if (b1 >= wave) return cudaErrorInvalidValue;
  const int b2 = mvr_whole_blocks(u2, wave - b1, (int)nw);
  if (b1 + b2 > wave) return cudaErrorInvalidValue;
  return cu_launch(pdl, st, dim3(b1 + b2), dim3(NT), smem, kern, j1, j2, b1, cols, x);
}

#include "backend/cuda/mvr_w4.cuh"    // the wide K-quant formats
#include "backend/cuda/mvr_fp8w.cuh"  // the FP8 format in 16-byte pieces (opt-in)

#endif
