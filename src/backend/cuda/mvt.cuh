// The tensor-core matrix-vector kernel (k_mvt, session 15): a warp takes 16
// rows at once and multiplies their codes with 16-bit x on the int8 tensor
// cores (mma.m16n8k32, u8 or s8 codes times the s8 planes of x, int32
// sums); up to 8 tokens a block. Q4_0, Q8_0, Q4_K, Q5_K, Q6_K.
//
// Why: the register kernel (mvr.cuh) spends two dp4a and two shared-memory
// reads of x on every code word of the 16-bit x (its two planes), and a
// block of several tokens holds every token's x in registers (it spills);
// here one mma takes 512 codes of 16 rows, both planes and every slot at
// once, and a token's x is two shared-memory loads a 16-row group. What it
// is for: batches of 4 or more tokens (decode steps of several sequences),
// each weight read once for 4 or 8 tokens: 8B Q4_K_M steps of 8 sequences
// 6.7 ms against 9.9, Q8_0 9.5 against 13.7 (session 15; mvt_cfg). For one
// token it is slower than the register kernel (Q4_K 53 / 64% of the copy
// rate against the wide format's 62 / 63%, Q6_K 45 / 51% against 58 / 57%;
// the 8B decode 2.50 against 2.19 ms), and an L2 prefetch of 2 to 16 items
// before the wait made it slower still: with ~4x fewer instructions a byte
// it is no faster, so the instruction count is not what holds the products
// under the copy rate (docs/CUDA.md, session 15).
//
// The fragments (PTX ISA, mma.m16n8k32 with 8-bit types; g = lane / 4, q =
// lane % 4): A (16 x 32) a0 = row g, k 4q + [0, 4); a1 = row g + 8, same k;
// a2 = row g, k 16 + 4q + [0, 4); a3 = row g + 8, same k. B (32 x 8) b0 = k
// 4q + [0, 4) of column g, b1 = k 16 + 4q + [0, 4). C c0, c1 = row g,
// columns 2q, 2q + 1; c2, c3 = row g + 8.
//
// Slots: the k of one mma are four slots of 8 (slot k / 8: a0 of lanes q <
// 2 is slot 0, of q >= 2 slot 1; a2 slots 2 and 3), each slot a different
// sub-block of the rows, and column 2s + p of B holds plane p of x at slot
// s's k, 0 elsewhere (a lane's x word is in b0 where g < 4, in b1 where g
// >= 4, and only where slot (g / 2) % 2 + 2 (g >= 4) is the word's). C's
// columns 2s, 2s + 1 are then sub-block s's sums over the lo and hi plane,
// so lane q gets slot q's sums of rows g and g + 8: the scale epilogue runs
// on every lane, once per sub-block of 2 rows. Four mmas (t = 0..3) finish
// the four sub-blocks' 32 values.
//
// Q4_K: lane q of a row reads qs bytes 16q + [0, 16) (group G = 0: chunks 0
// and 1 of 32 bytes) and 64 + 16q + [0, 16) (G = 1: chunks 2, 3) in one
// 16-byte load each. Word t of the first is bytes 16q + 4t of the qs: chunk
// c = 2G + q / 2, bytes 16 (q % 2) + 4t + [0, 4) of it; its low nibbles
// (a0) are values 16 (q % 2) + 4t of sub-block 2c, its high nibbles (a2, read
// in place as u8: 16 times the code) the same of sub-block 2c + 1. So slots
// 0..3 of group G are sub-blocks 4G, 4G + 2, 4G + 1, 4G + 3, and the hi
// slots (2, 3: lanes q >= 2) count 16 times. x of a lane: 16 bytes of its
// plane g % 2 at 64c + 16 (q % 2) (+ 32 where g >= 4: the high nibbles'
// values) of the super-block, word t for mma t.
//
// Q5_K, Q6_K, Q8_0, Q4_0: the same slots over their own blocks (each
// format's comment below).
//
// Grid: the split grid of the register kernel (mvr_share): a unit is 16
// rows of one job (GLU: 16 gate rows and the same up rows), an item a
// super-block column of them (GLU: the gate's, then the up's); a block takes
// a contiguous share of the units, its warps split the items evenly, a
// unit's parts are summed in warp order at the end (mvr_join). The first D
// items load before the wait for the previous kernel.
#ifndef WICK_BACKEND_CUDA_MVT_CUH
#define WICK_BACKEND_CUDA_MVT_CUH

#include "backend/cuda/mma.cuh"  // quad_sum
#include "backend/cuda/mvr.cuh"  // mvr_round_x16, mvr_share, mvr_join, mvr_xbytes, loads

// c += a (16 x 32 u8, rows) * b (32 x 8 s8, columns), int32 sums.
static __device__ __forceinline__ void mma_u8s8(int (&c)[4], uint32_t a0, uint32_t a1,
                                                uint32_t a2, uint32_t a3, uint32_t b0,
                                                uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Word t (0..3) of v.
static __device__ __forceinline__ uint32_t mvt_word(const uint4 &v, int t) {
  return t == 0 ? v.x : t == 1 ? v.y : t == 2 ? v.z : v.w;
}

// The same with s8 codes.
static __device__ __forceinline__ void mma_s8s8(int (&c)[4], uint32_t a0, uint32_t a1,
                                                uint32_t a2, uint32_t a3, uint32_t b0,
                                                uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The lane's N x words (4 or 2: 16 or 8 bytes at xq + xo; 0 where xok is
// false: the lane's B column is not the slot of its k), then the T mmas of
// the A fragments a[t] with x word t in b0 (g < 4) or b1: c gets the sums.
template <int N, int T, bool S8 = false>
static __device__ __forceinline__ void mvt_mmas(int (&c)[4], const uint32_t (*a)[4],
                                                const uint8_t *xq, int xo, bool xok, bool lowg) {
  uint32_t X[4] = {0u, 0u, 0u, 0u};
  if (xok) {
    if constexpr (N == 4) {
      const uint4 v = *(const uint4 *)(xq + xo);
      X[0] = v.x, X[1] = v.y, X[2] = v.z, X[3] = v.w;
    } else {
      const uint2 v = *(const uint2 *)(xq + xo);
      X[0] = v.x, X[1] = v.y;
    }
  }
  c[0] = c[1] = c[2] = c[3] = 0;
#pragma unroll
  for (int t = 0; t < T; t++) {
    const uint32_t b0 = lowg ? X[t] : 0u, b1 = lowg ? 0u : X[t];
    if constexpr (S8)
      mma_s8s8(c, a[t][0], a[t][1], a[t][2], a[t][3], b0, b1);
    else
      mma_u8s8(c, a[t][0], a[t][1], a[t][2], a[t][3], b0, b1);
  }
}

// x's per-group words (mvr_round_x16: {d, sum of v over [0, 16), [16, 32),
// all 32}) of group gi of the token's x at xq.
static __device__ __forceinline__ uint4 mvt_xm(const uint8_t *xq, int cols, int gi) {
  return ((const uint4 *)(xq + 2 * (size_t)cols))[gi];
}

// The 8 bytes at 2-byte aligned p as raw aligned words r[0..2] (r[2] the
// halfword after them where p is 2 mod 4, else 0: never past p + 8); word t
// of the bytes is __funnelshift_r(r[t], r[t + 1], mvt_sh(p)).
static __device__ __forceinline__ void mvt_ld8_a2(const uint8_t *p, uint32_t *r) {
  const uint8_t *a = (const uint8_t *)((uintptr_t)p & ~(uintptr_t)3);
  r[0] = mvr_ld4(a), r[1] = mvr_ld4(a + 4);
  r[2] = ((uintptr_t)p & 2) ? mvr_ld2(a + 8) : 0u;
}
static __device__ __forceinline__ uint32_t mvt_sh(const uint8_t *p) {
  return (uint32_t)((uintptr_t)p & 2) * 8u;
}

template <int T>
struct mvt_fmt;

// Per type: COLS values of a row a step (an item); w_t, a lane's raw
// registers of one item (rows g and g + 8); load(w, p0, p1, s, q) issues
// lane q's loads of step s of the rows at p0, p1 (prefetch: the same into
// L2, no registers); dot<NTOK>(w, ...) adds the lane's slot sums of step s
// to acc[token][row] (tokens past ntk read token 0's x; never written).

// Q4_K and Q5_K (Q5: 176 bytes, qh[32] at 16 and qs at 48; the fifth bit
// of a low nibble's value of chunk c is bit 2c of its qh byte (byte l of
// the chunk's 32), of a high nibble's bit 2c + 1; lane q's qh bytes are
// 16 (q % 2) + [0, 16), the same for both groups).
template <bool Q5>
struct mvt_kq {
  static constexpr int COLS = 256, BYTES = Q5 ? 176 : 144, QS = Q5 ? 48 : 16;
  struct w_t {
    uint4 h[2];     // headers of rows g, g + 8 (d, dmin, 12 scale bytes)
    uint4 q[2][2];  // [row][G]: qs bytes 64G + 16q + [0, 16)
    uint4 qh[Q5 ? 2 : 1];  // [row]: Q5_K's qh bytes 16 (q % 2) + [0, 16)
  };
  // Step s of both rows into L2: a 48-byte piece a lane.
  static __device__ __forceinline__ void prefetch(const uint8_t *p0, const uint8_t *p1, int s,
                                                  int q) {
    const int o = (Q5 ? 48 : 40) * q;
    mvr_prefetch(p0 + BYTES * (size_t)s + o), mvr_prefetch(p1 + BYTES * (size_t)s + o);
  }
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1, int s,
                                              int q) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *b = (r ? p1 : p0) + BYTES * (size_t)s;
      w.h[r] = mvr_ld16(b);
      w.q[r][0] = mvr_ld16(b + QS + 16 * q), w.q[r][1] = mvr_ld16(b + QS + 64 + 16 * q);
      if constexpr (Q5) w.qh[r] = mvr_ld16(b + 16 + 16 * (q & 1));
    }
  }
  // Bounds: a sub-block's lo-plane sum is at most 32 * 240 * 127 (Q4_K's
  // hi nibbles in place: 16 times the code; Q5_K's codes <= 31), a hi-plane
  // one 32 * 240 * 128, so lo + 128 hi < 2^27.
  template <int NTOK>
  static __device__ __forceinline__ void dot(const w_t &w, const uint8_t *xq0, size_t xb, int cols,
                                             int s, int ntk, int lane, float (*acc)[2]) {
    const int g = lane >> 2, q = lane & 3;
    const int si = 2 * (q & 1) + (q >> 1);  // the lane's slot's sub-block in its group of 4
    const bool lowg = g < 4, xok = ((g >> 1) & 1) == (q >> 1);
    // Q4_K's hi slots count 16 times the codes
    const float hs = !Q5 && q >= 2 ? 1.0f / 16.0f : 1.0f;
#pragma unroll
    for (int G = 0; G < 2; G++) {
      float dsc[2], dmn[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const uint4 h = w.h[r];
        const uint32_t y = h.y >> (8 * si), z = h.z >> (8 * si), v = h.w >> (8 * si);
        const uint32_t sc = G == 0 ? y & 63u : (v & 15u) | ((y >> 2) & 0x30u);
        const uint32_t mn = G == 0 ? z & 63u : ((v >> 4) & 15u) | ((z >> 2) & 0x30u);
        dsc[r] = __half2float(__ushort_as_half((unsigned short)h.x)) * (float)(int)sc * hs;
        dmn[r] = __half2float(__ushort_as_half((unsigned short)(h.x >> 16))) * (float)(int)mn;
      }
      const int c2 = 2 * (2 * G + (q >> 1));  // 2 x the lane's chunk: its low nibbles' qh bit
      uint32_t a[4][4];
#pragma unroll
      for (int t = 0; t < 4; t++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const uint32_t wq = mvt_word(w.q[r][G], t);
          if constexpr (Q5) {
            const uint32_t hb = mvt_word(w.qh[r], t);
            a[t][r] = (wq & 0x0F0F0F0Fu) | (((hb >> c2) & 0x01010101u) << 4);
            a[t][2 + r] = ((wq >> 4) & 0x0F0F0F0Fu) | (((hb >> (c2 + 1)) & 0x01010101u) << 4);
          } else {
            a[t][r] = wq & 0x0F0F0F0Fu, a[t][2 + r] = wq & 0xF0F0F0F0u;
          }
        }
      }
      const int xo = (g & 1) * cols + 256 * s + 64 * (2 * G + (q >> 1)) + 16 * (q & 1) +
                     (lowg ? 0 : 32);
      const int gi = 8 * s + 4 * G + si;  // the slot's x group
#pragma unroll
      for (int k = 0; k < NTOK; k++) {
        const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
        int c[4];
        mvt_mmas<4, 4>(c, a, xq, xo, xok, lowg);
        const uint4 xm = mvt_xm(xq, cols, gi);
        const float dx = __uint_as_float(xm.x), mx = dx * (float)(int)xm.w;
        acc[k][0] = fmaf(dsc[0], dx * (float)(c[0] + 128 * c[1]), fmaf(-dmn[0], mx, acc[k][0]));
        acc[k][1] = fmaf(dsc[1], dx * (float)(c[2] + 128 * c[3]), fmaf(-dmn[1], mx, acc[k][1]));
      }
    }
  }
};
template <>
struct mvt_fmt<WK_Q4_K> : mvt_kq<false> {};
template <>
struct mvt_fmt<WK_Q5_K> : mvt_kq<true> {};

// Q8_0 (34 bytes: d, 32 int8 codes; 2-byte aligned): a step is 4 blocks,
// slot s block s (lane q: a0 block q / 2, a2 block 2 + q / 2, qs bytes 16
// (q % 2) + 4t of each for mma t; its sums, block q's). s8 codes.
template <>
struct mvt_fmt<WK_Q8_0> {
  static constexpr int COLS = 128;
  struct w_t {
    uint32_t r[2][2][5];  // [row][block q / 2 + 2i]: raw words under the 16 code bytes
    uint32_t d[2];        // [row]: block q's d (f16), the runs' funnel shift << 16
  };
  static __device__ __forceinline__ void prefetch(const uint8_t *p0, const uint8_t *p1, int s,
                                                  int q) {
    mvr_prefetch(p0 + 136 * (size_t)s + 34 * q), mvr_prefetch(p1 + 136 * (size_t)s + 34 * q);
  }
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1, int s,
                                              int q) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *b = (r ? p1 : p0) + 136 * (size_t)s;
      const uint8_t *run = b + 34 * (q >> 1) + 2 + 16 * (q & 1);
      mvr_ld16_a2(run, w.r[r][0]), mvr_ld16_a2(run + 68, w.r[r][1]);
      w.d[r] = mvr_ld2(b + 34 * q) | (mvt_sh(run) << 16);
    }
  }
  // |lo + 128 hi| <= 32 * 128 * 16383 < 2^27.
  template <int NTOK>
  static __device__ __forceinline__ void dot(const w_t &w, const uint8_t *xq0, size_t xb, int cols,
                                             int s, int ntk, int lane, float (*acc)[2]) {
    const int g = lane >> 2, q = lane & 3;
    const bool lowg = g < 4, xok = ((g >> 1) & 1) == (q >> 1);
    uint32_t a[4][4];
    float d[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint32_t sh = w.d[r] >> 16;
      d[r] = __half2float(__ushort_as_half((unsigned short)w.d[r]));
#pragma unroll
      for (int t = 0; t < 4; t++)
#pragma unroll
        for (int i = 0; i < 2; i++)
          a[t][2 * i + r] = __funnelshift_r(w.r[r][i][t], w.r[r][i][t + 1], sh);
    }
    const int xo = (g & 1) * cols + 128 * s + 32 * (q >> 1) + 16 * (q & 1) + (lowg ? 0 : 64);
#pragma unroll
    for (int k = 0; k < NTOK; k++) {
      const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
      int c[4];
      mvt_mmas<4, 4, true>(c, a, xq, xo, xok, lowg);
      const float dx = __uint_as_float(mvt_xm(xq, cols, 4 * s + q).x);
      acc[k][0] = fmaf(d[0] * dx, (float)(c[0] + 128 * c[1]), acc[k][0]);
      acc[k][1] = fmaf(d[1] * dx, (float)(c[2] + 128 * c[3]), acc[k][1]);
    }
  }
};

// Q4_0 (18 bytes: d, 16 bytes of nibbles, value l the low nibble of byte
// l, value 16 + l its high nibble, minus 8; 2-byte aligned): a step is 4
// rounds of 2 blocks (8 blocks, 256 values: 2304 bytes of 16 rows, as a
// Q4_K step). Round R: lanes q < 2 take block 2R, q >= 2 block 2R + 1, code
// bytes 8 (q % 2) + 4t for mma t (a0 their low nibbles, a2 their high:
// slots 0 / 2 block 2R's values [0, 16) / [16, 32), slots 1 / 3 block 2R +
// 1's). Lane q's sums: block 2R + q % 2, half q / 2. u8 codes, the 8 off by
// the half's x sum. (A step of one round, 2 blocks, read 29 / 31% of the
// copy rate for one token.)
template <>
struct mvt_fmt<WK_Q4_0> {
  static constexpr int COLS = 256;
  struct w_t {
    uint32_t r[2][4][3];  // [row][round]: raw words under the lane's 8 code bytes
    uint32_t d[2][2];     // [row][i]: rounds 2i, 2i + 1's d of block q % 2 (f16 pairs)
    uint32_t sh[2];       // [row]: the runs' funnel shift
  };
  static __device__ __forceinline__ void prefetch(const uint8_t *p0, const uint8_t *p1, int s,
                                                  int q) {
    mvr_prefetch(p0 + 144 * (size_t)s + 36 * q), mvr_prefetch(p1 + 144 * (size_t)s + 36 * q);
  }
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1, int s,
                                              int q) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *b = (r ? p1 : p0) + 144 * (size_t)s;
      const uint8_t *run = b + 18 * (q >> 1) + 2 + 8 * (q & 1);
#pragma unroll
      for (int R = 0; R < 4; R++) mvt_ld8_a2(run + 36 * R, w.r[r][R]);
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const uint8_t *bd = b + 72 * i + 18 * (q & 1);
        w.d[r][i] = mvr_ld2(bd) | (mvr_ld2(bd + 36) << 16);
      }
      w.sh[r] = mvt_sh(run);
    }
  }
  // |lo + 128 hi - 8 sum v| <= 16 * 8 * 16383 (codes - 8 in [-8, 7]).
  template <int NTOK>
  static __device__ __forceinline__ void dot(const w_t &w, const uint8_t *xq0, size_t xb, int cols,
                                             int s, int ntk, int lane, float (*acc)[2]) {
    const int g = lane >> 2, q = lane & 3;
    const bool lowg = g < 4, xok = ((g >> 1) & 1) == (q >> 1);
#pragma unroll
    for (int R = 0; R < 4; R++) {
      uint32_t a[2][4];
      float d[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        d[r] = __half2float(__ushort_as_half((unsigned short)(w.d[r][R >> 1] >> (16 * (R & 1)))));
#pragma unroll
        for (int t = 0; t < 2; t++) {
          const uint32_t wq = __funnelshift_r(w.r[r][R][t], w.r[r][R][t + 1], w.sh[r]);
          a[t][r] = wq & 0x0F0F0F0Fu, a[t][2 + r] = (wq >> 4) & 0x0F0F0F0Fu;
        }
      }
      const int xo =
          (g & 1) * cols + 256 * s + 64 * R + 32 * (q >> 1) + 8 * (q & 1) + (lowg ? 0 : 16);
#pragma unroll
      for (int k = 0; k < NTOK; k++) {
        const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
        int c[4];
        mvt_mmas<2, 2>(c, a, xq, xo, xok, lowg);
        const uint4 xm = mvt_xm(xq, cols, 8 * s + 2 * R + (q & 1));
        const float dx = __uint_as_float(xm.x);
        const int o = 8 * (int)(q >> 1 ? xm.z : xm.y);
        acc[k][0] = fmaf(d[0] * dx, (float)(c[0] + 128 * c[1] - o), acc[k][0]);
        acc[k][1] = fmaf(d[1] * dx, (float)(c[2] + 128 * c[3] - o), acc[k][1]);
      }
    }
  }
};

// Q6_K (210 bytes: ql[128], qh[64], 16 int8 scales, d; 2-byte aligned): a
// step is half n of a super-block (128 values), two rounds h of 2 mmas.
// Round h: lane q of a row takes ql bytes 64n + 32h + 8q + [0, 8) and qh
// bytes 32n + 8q + [0, 8) (the same for both rounds); word t's low nibbles
// with qh bits 2h, 2h + 1 are the 6-bit codes of values 128n + 32h + 8q +
// 4t + [0, 4) (a0, slot q / 2), its high nibbles with bits 4 + 2h, 5 + 2h
// those 64 further (a2, slot 2 + q / 2). Slots are 16-value scale groups:
// lane q's is scale 8n + 2h + q + 2 (q / 2), x group 4n + h + 2 (q / 2) of
// the super-block, half q % 2 of it. Codes are u8 (0..63; the value is
// code - 32, by the group's x sum). Loads: the aligned words under each
// 8-byte run joined by funnel shifts (3 words a run), the two scales of the
// lane's slot (halfwords at 192 + 8n + 4 (q / 2) + {0, 2}) and d.
template <>
struct mvt_fmt<WK_Q6_K> {
  static constexpr int COLS = 128;
  struct w_t {
    uint32_t l[2][6];  // [row]: the ql runs of rounds 0 (words 0..2) and 1 (3..5)
    uint32_t h[2][3];  // [row]: the qh run
    uint32_t sc[2];    // [row]: the halfwords of the slot's scales (round h: bits 16h)
    uint32_t d[2];     // [row]: d (f16) and the funnel shift 8 (block & 3) << 16
  };
  // Step s of both rows into L2: lanes q = 0, 1 its ql half, 2 its qh
  // half, 3 the scales and d.
  static __device__ __forceinline__ void prefetch(const uint8_t *p0, const uint8_t *p1, int s,
                                                  int q) {
    const int n = s & 1, o = q < 2 ? 64 * n + 32 * q : q == 2 ? 128 + 32 * n : 192;
    mvr_prefetch(p0 + 210 * (size_t)(s >> 1) + o), mvr_prefetch(p1 + 210 * (size_t)(s >> 1) + o);
  }
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1, int s,
                                              int q) {
    const int n = s & 1;
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const uint8_t *b = (r ? p1 : p0) + 210 * (size_t)(s >> 1);
      const uint8_t *a = (const uint8_t *)((uintptr_t)(b + 64 * n + 8 * q) & ~(uintptr_t)3);
      const uint8_t *ah = (const uint8_t *)((uintptr_t)(b + 128 + 32 * n + 8 * q) & ~(uintptr_t)3);
#pragma unroll
      for (int i = 0; i < 3; i++) {
        w.l[r][i] = mvr_ld4(a + 4 * i), w.l[r][3 + i] = mvr_ld4(a + 32 + 4 * i);
        w.h[r][i] = mvr_ld4(ah + 4 * i);
      }
      const uint8_t *sp = b + 192 + 8 * n + 2 * (q >> 1) * 2;
      w.sc[r] = mvr_ld2(sp) | (mvr_ld2(sp + 2) << 16);
      w.d[r] = mvr_ld2(b + 208) | ((uint32_t)((uintptr_t)b & 2) << 19);  // 16 << 16 or 0
    }
  }
  // Bounds: |sum (code - 32) v| over 16 values <= 16 * 32 * 16383 < 2^23.
  template <int NTOK>
  static __device__ __forceinline__ void dot(const w_t &w, const uint8_t *xq0, size_t xb, int cols,
                                             int s, int ntk, int lane, float (*acc)[2]) {
    const int g = lane >> 2, q = lane & 3, n = s & 1, sb = s >> 1;
    const bool lowg = g < 4, xok = ((g >> 1) & 1) == (q >> 1);
    float dr[2];
    uint32_t hw[2][2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      dr[r] = __half2float(__ushort_as_half((unsigned short)w.d[r]));
      const uint32_t sh = w.d[r] >> 16;
#pragma unroll
      for (int t = 0; t < 2; t++) hw[r][t] = __funnelshift_r(w.h[r][t], w.h[r][t + 1], sh);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint32_t a[2][4];
      float dsc[2];
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const uint32_t sh = w.d[r] >> 16;
        dsc[r] = dr[r] * (float)(int)(int8_t)(w.sc[r] >> (16 * h + 8 * (q & 1)));
#pragma unroll
        for (int t = 0; t < 2; t++) {
          const uint32_t lw = __funnelshift_r(w.l[r][3 * h + t], w.l[r][3 * h + t + 1], sh);
          const uint32_t hh = hw[r][t] >> (2 * h);
          a[t][r] = (lw & 0x0F0F0F0Fu) | ((hh & 0x03030303u) << 4);
          a[t][2 + r] = ((lw >> 4) & 0x0F0F0F0Fu) | (((hh >> 4) & 0x03030303u) << 4);
        }
      }
      const int xo = (g & 1) * cols + 256 * sb + 128 * n + 32 * h + 8 * q + (lowg ? 0 : 64);
      const int gi = 8 * sb + 4 * n + h + 2 * (q >> 1);
#pragma unroll
      for (int k = 0; k < NTOK; k++) {
        const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
        int c[4];
        mvt_mmas<2, 2>(c, a, xq, xo, xok, lowg);
        const uint4 xm = mvt_xm(xq, cols, gi);
        const float dx = __uint_as_float(xm.x);
        const int o = 32 * (int)((q & 1) ? xm.z : xm.y);
        acc[k][0] = fmaf(dsc[0] * dx, (float)(c[0] + 128 * c[1] - o), acc[k][0]);
        acc[k][1] = fmaf(dsc[1] * dx, (float)(c[2] + 128 * c[3] - o), acc[k][1]);
      }
    }
  }
};

template <int T>
struct mvt_has {
  static constexpr bool value =
      T == WK_Q4_K || T == WK_Q6_K || T == WK_Q5_K || T == WK_Q8_0 || T == WK_Q4_0;
};
// The context's mv_tc bit of type T (WICK_CUDA_TC: 1 Q4_K, 2 Q6_K, 4 Q5_K,
// 8 Q8_0, 16 Q4_0).
template <int T>
static constexpr int mvt_bit() {
  return T == WK_Q4_K   ? 1
         : T == WK_Q6_K ? 2
         : T == WK_Q5_K ? 4
         : T == WK_Q8_0 ? 8
         : T == WK_Q4_0 ? 16
                        : 0;
}

// Unit u's job (one of js's up to 3) and the unit's index *tj in it.
static __device__ __forceinline__ mv_job mvt_job(const mv_jobs &js, int u, int *tj) {
  const int ji = mvs_job(js, u, tj);
  return ji == 0 ? js.j[0] : ji == 1 ? js.j[1] : js.j[2];
}

// NT threads at most a block, D items in flight ahead of the arithmetic
// (GLU: D odd), NTOK tokens a block (blockIdx.y: tokens [NTOK y, NTOK y +
// NTOK) of n; each weight read once for all of them).
template <int T, int NT, int D, bool GLU, int NTOK>
__global__ void __launch_bounds__(NT, 1) k_mvt(mv_jobs js, int cols, const float *__restrict__ x,
                                               float beta, int act, int n) {
  using F = mvt_fmt<T>;
  using W = typename F::w_t;
  constexpr int M = GLU ? 2 : 1;
  static_assert(!GLU || (D + 1) % 2 == 0, "gate and up items alternate: an even ring");
  extern __shared__ uint4 mvt_smem[];
  __shared__ float red[32];
  __shared__ float part[NT / 32][2][NTOK][M][16];  // split units: a warp's first and last
  uint8_t *const xq0 = (uint8_t *)mvt_smem;
  const size_t xb = mvr_xbytes<T>(cols);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int g = lane >> 2;
  const int t0 = blockIdx.y * NTOK, ntk = NTOK == 1 ? 1 : min(NTOK, n - t0);
  const int steps = cols / F::COLS, items = M * steps;
  const size_t row_bytes = js.j[0].row_bytes;
  const int units = js.j[0].nblk + (js.n > 1 ? js.j[1].nblk : 0) + (js.n > 2 ? js.j[2].nblk : 0);
  const mvr_share sh(units, steps, nw);
  const int s0 = sh.at(warp) * M, total = sh.at(warp + 1) * M - s0;
  const int fu = s0 / items, fi = s0 % items;
  const uintptr_t up = GLU ? (uintptr_t)js.j[1].W - (uintptr_t)js.j[0].W : 0;  // up - gate

  // Loads: item li of unit lu from rows g and g + 8 of the unit (lp).
  const uint8_t *lp[2];
  int lu = fu, li = fi;
  auto set_rows = [&](int u) {
    int tj;
    const mv_job jb = mvt_job(js, u, &tj);
#pragma unroll
    for (int r = 0; r < 2; r++)
      lp[r] = jb.W + (size_t)min(16 * tj + g + 8 * r, jb.rows - 1) * row_bytes;
  };
  auto load = [&](W &w, int m) {
    F::load(w, mvr_at(lp[0], m ? up : 0), mvr_at(lp[1], m ? up : 0), GLU ? li >> 1 : li, lane & 3);
    if (++li == items) {
      li = 0;
      if (++lu < units) set_rows(lu);
    }
  };
  W w[D + 1];
  if (total > 0) {
    // js.pf items of the first unit after the first D into L2 (no
    // registers held), then the first D into registers, all before the
    // wait: they arrive while the previous kernel ends and x is rounded.
    set_rows(fu);
    const int i1 = min(fi + D + max(js.pf, 0), items);
    for (int i = fi + D; i < i1; i++) {
      const int m = GLU ? i & 1 : 0;
      F::prefetch(mvr_at(lp[0], m ? up : 0), mvr_at(lp[1], m ? up : 0), GLU ? i >> 1 : i, lane & 3);
    }
  }
#pragma unroll
  for (int k = 0; k < D; k++)
    if (k < total) load(w[k], GLU ? k & 1 : 0);
  pdl_launch_next();
  pdl_wait();
  float rs[NTOK];
#pragma unroll
  for (int t = 0; t < NTOK; t++) {
    rs[t] = 1.0f;
    if (t >= ntk) break;
    rs[t] = mvr_round_x16(x + (size_t)(t0 + t) * cols, cols, js.nw, js.eps, xq0 + t * xb, red);
  }

  // Row r16 of unit u: token t's sums a[0] (GLU: gate) and a[M - 1] (up).
  auto emit_row = [&](int u, int t, int r16, float a0, float a1) {
    int tj;
    const mv_job jb = mvt_job(js, u, &tj);
    float *y = jb.y + (size_t)(t0 + t) * jb.rows;
    const int row = 16 * tj + r16;
    if (row >= jb.rows) return;
    if constexpr (GLU)
      y[row] = glu_act(a0 * rs[t], act) * (a1 * rs[t]);
    else
      y[row] = beta != 0.0f ? a0 * rs[t] + beta * y[row] : a0 * rs[t];
  };
  int cu = fu, ci = fi;
  float acc[M][NTOK][2];
#pragma unroll
  for (int m = 0; m < M; m++)
#pragma unroll
    for (int t = 0; t < NTOK; t++) acc[m][t][0] = acc[m][t][1] = 0.0f;
  // The unit's sums over the warp's items of it, summed over the quad's
  // slots: written when they are the whole row, else kept in
  // part[warp][0: its first unit, 1: its last].
  auto finish = [&](int slot) {  // slot -1: whole rows
#pragma unroll
    for (int t = 0; t < NTOK; t++) {
      if (t >= ntk) break;
      float v[M][2];
#pragma unroll
      for (int m = 0; m < M; m++)
#pragma unroll
        for (int r = 0; r < 2; r++) v[m][r] = quad_sum(acc[m][t][r]), acc[m][t][r] = 0.0f;
      if ((lane & 3) == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
          if (slot < 0)
            emit_row(cu, t, g + 8 * r, v[0][r], v[M - 1][r]);
          else
#pragma unroll
            for (int m = 0; m < M; m++) part[warp][slot][t][m][g + 8 * r] = v[m][r];
        }
      }
    }
  };
  auto compute = [&](const W &wv, int m) {
    F::template dot<NTOK>(wv, xq0, xb, cols, GLU ? ci >> 1 : ci, ntk, lane, acc[m]);
    if (++ci == items) finish(cu == fu && fi != 0 ? 0 : -1), ci = 0, ++cu;
  };
  mvr_ring<D, GLU>(w, total, load, compute);
  if (total > 0 && ci != 0) finish(cu == fu ? 0 : 1);  // the range ends inside unit cu
  __syncthreads();
  mvr_join<NTOK, M, 16>(part, units, steps, nw, ntk, [&](int u, int t, const float (*a)[16]) {
    for (int r = 0; r < 16; r++) emit_row(u, t, r, a[0][r], a[M - 1][r]);
  });
}

// Shape: 512 threads, 1 item in flight (GLU: odd). A Q4_K item is 24
// registers (72 bytes of 16 rows a lane); ptxas (sm_90): 109-121 registers
// at 1 or 2 tokens a block, 4 tokens spill 4-100 bytes (GLU the most), 8
// tokens 400-1000 at 512 threads (8 sequences 9.7 ms a step against 6.7
// with 4 tokens a block and two grid rows; WICK_CUDA_TC_NTOK=8 now takes
// 256 threads for them: 205-233 registers), 3 items spill from 1 token on;
// 256 threads read slower for one token (bench_cuda matvec `tc 256`).
// MIN: the fewest tokens a batch takes the kernel with (fewer: the register
// kernel); NTOK: the most tokens a block (8: blocks of 256 threads). 8B
// steps of 8 sequences at context 512 (session 15, calls 3-4), ms, 4 tokens
// a block (two grid rows) / 8 / the register kernel: Q4_K_M 6.84 / 8.56 /
// 9.98, Q8_0 12.73 / 9.51 / 13.65, Q4_0 10.06 / 9.17 / 9.89; 4 sequences, 4
// a block / register kernel: Q4_K_M 5.08 / 5.50, Q8_0 7.62 / 7.31, Q4_0
// 6.31 / 5.41. (The 2-byte aligned blocks take many small loads: one token
// reads Q8_0 at 44 / 48% of the copy rate, Q4_0 31 / 33%.) Q5_K as Q4_K
// (one token 56 / 65% against Q4_K's 53 / 64%).
template <int T, bool GLU>
struct mvt_cfg {
  static constexpr bool A2 = T == WK_Q8_0 || T == WK_Q4_0;  // 2-byte aligned blocks
  static constexpr int NT = 512, D = 1, MIN = A2 ? 5 : 4, NTOK = A2 ? 8 : 4;
};

// Launches k_mvt over js for n tokens: one wave of blocks (the split grid),
// NTOK tokens a block. cudaErrorInvalidValue where x's copies do not fit in
// shared memory or rows are no whole super-blocks.
template <int T, int NT, int D, bool GLU, int NTOK>
static cudaError_t mvt_launch(mv_jobs js, int cols, const float *x, int n, float beta, int act,
                              bool pdl, cudaStream_t st) {
  if (cols % mvt_fmt<T>::COLS) return cudaErrorInvalidValue;
  long units = 0;
  for (int i = 0; i < js.n; i++) {
    js.j[i].nblk = GLU && i > 0 ? 0 : cu_div_up(js.j[i].rows, 16);
    units += js.j[i].nblk;
  }
  if (units == 0 || n < 1) return cudaSuccess;
  const size_t smem = NTOK * mvr_xbytes<T>(cols);
  auto kern = k_mvt<T, NT, D, GLU, NTOK>;
  int sms = 0, per_sm = 0;
  if (cudaError_t e = cu_occupancy(kern, NT, smem, &sms, &per_sm)) return e;
  if (per_sm < 1) return cudaErrorInvalidValue;
  const int ny = cu_div_up(n, NTOK);
  long wave = (long)per_sm * sms / ny;
  if (wave < 1) wave = 1;
  const int blocks = (int)(wave < units ? wave : units);
  return cu_launch(pdl, st, dim3(blocks, ny), dim3(NT), smem, kern, js, cols, x, beta, act, n);
}

// k_mvt for a batch of n tokens: 1, 2, 4 or (max_ntok 8) 8 tokens a block
// (the fewest that hold the batch; more: several grid rows), fewer where
// x's copies do not fit.
template <int T, bool GLU>
static cudaError_t mvt_launch_n(const mv_jobs &js, int cols, const float *x, int n, float beta,
                                int act, bool pdl, cudaStream_t st,
                                int max_ntok = mvt_cfg<T, GLU>::NTOK) {
  using C = mvt_cfg<T, GLU>;
  cudaError_t e = cudaErrorInvalidValue;
  if (n >= 5 && max_ntok >= 8)  // 256 threads: 203-233 registers, no spills
    e = mvt_launch<T, 256, C::D, GLU, 8>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue && n >= 3)
    e = mvt_launch<T, C::NT, C::D, GLU, 4>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue && n >= 2)
    e = mvt_launch<T, C::NT, C::D, GLU, 2>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue)
    e = mvt_launch<T, C::NT, C::D, GLU, 1>(js, cols, x, n, beta, act, pdl, st);
  return e;
}

#endif
