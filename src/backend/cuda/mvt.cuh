// The tensor-core matrix-vector kernel (k_mvt, session 15): a warp takes 16
// rows at once and multiplies their codes with 16-bit x on the int8 tensor
// cores (mma.m16n8k32, u8 codes times s8 x planes, int32 sums); up to 4
// tokens a block. Q4_K and Q6_K (a Q4_K_M model's types).
//
// Why: the register kernel (mvr.cuh) spends two dp4a and two shared-memory
// reads of x on every code word of the 16-bit x (its two planes), and a
// block of several tokens holds every token's x in registers (it spills);
// here one mma takes 512 codes of 16 rows, both planes and every slot at
// once, and a token's x is two shared-memory loads a 16-row group. What it
// is for: batches of 4 or more tokens (decode steps of several sequences),
// each weight read once for 4 tokens: 8B Q4_K_M steps of 8 sequences 6.7
// ms against 9.9 (session 15). For one token it is slower than the
// register kernel (Q4_K 53 / 64% of the copy rate against the wide
// format's 62 / 63%, Q6_K 45 / 51% against 58 / 57%; the 8B decode 2.50
// against 2.19 ms), and an L2 prefetch of 2 to 16 items before the wait
// made it slower still: with ~4x fewer instructions a byte it is no
// faster, so the instruction count is not what holds the products under
// the copy rate (docs/CUDA.md, session 15).
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

static __device__ __forceinline__ uint32_t mvt_word(const uint4 &v, int t) {
  return t == 0 ? v.x : t == 1 ? v.y : t == 2 ? v.z : v.w;
}

template <int T>
struct mvt_fmt;

// Per type: COLS values of a row a step (an item); w_t, a lane's raw
// registers of one item (rows g and g + 8); load(w, p0, p1, s, q) issues
// lane q's loads of step s of the rows at p0, p1; dot<NTOK>(w, ...) adds
// the lane's slot sums of step s to acc[token][row].
template <>
struct mvt_fmt<WK_Q4_K> {
  static constexpr int COLS = 256;
  struct w_t {
    uint4 h[2];     // headers of rows g, g + 8 (d, dmin, 12 scale bytes)
    uint4 q[2][2];  // [row][G]: qs bytes 64G + 16q + [0, 16)
  };
  // Step s of both rows into L2: lanes q = 0..2 a 48-byte third each.
  static __device__ __forceinline__ void prefetch(const uint8_t *p0, const uint8_t *p1, int s,
                                                  int q) {
    const int o = 48 * (q < 3 ? q : 2);
    mvr_prefetch(p0 + 144 * (size_t)s + o), mvr_prefetch(p1 + 144 * (size_t)s + o);
  }
  static __device__ __forceinline__ void load(w_t &w, const uint8_t *p0, const uint8_t *p1, int s,
                                              int q) {
    const uint8_t *b0 = p0 + 144 * (size_t)s, *b1 = p1 + 144 * (size_t)s;
    w.h[0] = mvr_ld16(b0), w.h[1] = mvr_ld16(b1);
    w.q[0][0] = mvr_ld16(b0 + 16 + 16 * q), w.q[0][1] = mvr_ld16(b0 + 80 + 16 * q);
    w.q[1][0] = mvr_ld16(b1 + 16 + 16 * q), w.q[1][1] = mvr_ld16(b1 + 80 + 16 * q);
  }
  // acc[t][r] += the lane's slot part of token t's sum over super-block s
  // of row g + 8r (tokens past ntk read token 0's x; never written).
  // Bounds: a lo-plane sum of a sub-block is at most 32 * 240 * 127, a
  // hi-plane one 32 * 240 * 128, so lo + 128 hi < 2^27.
  template <int NTOK>
  static __device__ __forceinline__ void dot(const w_t &w, const uint8_t *xq0, size_t xb, int cols,
                                             int s, int ntk, int lane, float (*acc)[2]) {
    const int g = lane >> 2, q = lane & 3;
    const int si = 2 * (q & 1) + (q >> 1);  // the lane's slot's sub-block in its group of 4
    const bool lowg = g < 4, xok = ((g >> 1) & 1) == (q >> 1);
    const float hs = q >= 2 ? 1.0f / 16.0f : 1.0f;  // hi slots count 16 times the codes
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
      uint32_t a[4][4];
#pragma unroll
      for (int t = 0; t < 4; t++) {
        const uint32_t wa = mvt_word(w.q[0][G], t), wb = mvt_word(w.q[1][G], t);
        a[t][0] = wa & 0x0F0F0F0Fu, a[t][1] = wb & 0x0F0F0F0Fu;
        a[t][2] = wa & 0xF0F0F0F0u, a[t][3] = wb & 0xF0F0F0F0u;
      }
      const int xo = (g & 1) * cols + 256 * s + 64 * (2 * G + (q >> 1)) + 16 * (q & 1) +
                     (lowg ? 0 : 32);
      const int gi = 8 * s + 4 * G + si;  // the slot's x group
#pragma unroll
      for (int k = 0; k < NTOK; k++) {
        const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
        uint4 X = make_uint4(0u, 0u, 0u, 0u);
        if (xok) X = *(const uint4 *)(xq + xo);
        const uint4 xm = ((const uint4 *)(xq + 2 * (size_t)cols))[gi];
        // one token: two chains of mmas (t even, odd; registers allow)
        int c[4] = {0, 0, 0, 0}, e[4] = {0, 0, 0, 0};
#pragma unroll
        for (int t = 0; t < 4; t++) {
          const uint32_t xw = mvt_word(X, t), b0 = lowg ? xw : 0u, b1 = lowg ? 0u : xw;
          if (NTOK == 1 && (t & 1))
            mma_u8s8(e, a[t][0], a[t][1], a[t][2], a[t][3], b0, b1);
          else
            mma_u8s8(c, a[t][0], a[t][1], a[t][2], a[t][3], b0, b1);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) c[i] += e[i];
        const float dx = __uint_as_float(xm.x), mx = dx * (float)(int)xm.w;
        acc[k][0] = fmaf(dsc[0], dx * (float)(c[0] + 128 * c[1]), fmaf(-dmn[0], mx, acc[k][0]));
        acc[k][1] = fmaf(dsc[1], dx * (float)(c[2] + 128 * c[3]), fmaf(-dmn[1], mx, acc[k][1]));
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
          a[t][r] = (lw & 0x0F0F0F0Fu) | (((hw[r][t] >> (2 * h)) & 0x03030303u) << 4);
          a[t][2 + r] = ((lw >> 4) & 0x0F0F0F0Fu) | (((hw[r][t] >> (4 + 2 * h)) & 0x03030303u) << 4);
        }
      }
      const int xo = (g & 1) * cols + 256 * sb + 128 * n + 32 * h + 8 * q + (lowg ? 0 : 64);
      const int gi = 8 * sb + 4 * n + h + 2 * (q >> 1);
#pragma unroll
      for (int k = 0; k < NTOK; k++) {
        const uint8_t *xq = xq0 + (k < ntk ? k : 0) * xb;
        uint2 X = make_uint2(0u, 0u);
        if (xok) X = *(const uint2 *)(xq + xo);
        const uint4 xm = ((const uint4 *)(xq + 2 * (size_t)cols))[gi];
        int c[4] = {0, 0, 0, 0};
        mma_u8s8(c, a[0][0], a[0][1], a[0][2], a[0][3], lowg ? X.x : 0u, lowg ? 0u : X.x);
        mma_u8s8(c, a[1][0], a[1][1], a[1][2], a[1][3], lowg ? X.y : 0u, lowg ? 0u : X.y);
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
  static constexpr bool value = T == WK_Q4_K || T == WK_Q6_K;
};
// The context's mv_tc bit of type T (WICK_CUDA_TC: 1 Q4_K, 2 Q6_K).
template <int T>
static constexpr int mvt_bit() {
  return T == WK_Q4_K ? 1 : T == WK_Q6_K ? 2 : 0;
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
    int tj, ji = mvs_job(js, u, &tj);
    int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
    const uint8_t *mat = ji == 0 ? js.j[0].W : ji == 1 ? js.j[1].W : js.j[2].W;
#pragma unroll
    for (int r = 0; r < 2; r++) lp[r] = mat + (size_t)min(16 * tj + g + 8 * r, rows - 1) * row_bytes;
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
    int tj, ji = mvs_job(js, u, &tj);
    int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
    float *y = (ji == 0 ? js.j[0].y : ji == 1 ? js.j[1].y : js.j[2].y) + (size_t)(t0 + t) * rows;
    const int row = 16 * tj + r16;
    if (row >= rows) return;
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
  for (int i0 = 0; i0 < total; i0 += D + 1) {
#pragma unroll
    for (int k = 0; k <= D; k++) {
      if (i0 + k >= total) break;
      if (i0 + k + D < total) load(w[(k + D) % (D + 1)], GLU ? (k + D) & 1 : 0);
      compute(w[k], GLU ? k & 1 : 0);
    }
  }
  if (total > 0 && ci != 0) finish(cu == fu ? 0 : 1);  // the range ends inside unit cu
  __syncthreads();
  mvr_join<NTOK, M, 16>(part, units, steps, nw, ntk, [&](int u, int t, const float (*a)[16]) {
    for (int r = 0; r < 16; r++) emit_row(u, t, r, a[0][r], a[M - 1][r]);
  });
}

// Shape: 512 threads, 1 item in flight (GLU: odd). A Q4_K item is 24
// registers (72 bytes of 16 rows a lane); ptxas (sm_90): 109-121 registers
// at 1 or 2 tokens a block, 4 tokens spill 4-100 bytes (GLU the most), 8
// tokens 400-1000 (WICK_CUDA_TC_NTOK=8: 8 sequences 9.7 ms a step against
// 6.7 with 4 tokens a block and two grid rows), 3 items spill from 1 token
// on; 256 threads read slower (bench_cuda matvec `tc 256`).
template <int T, bool GLU>
struct mvt_cfg {
  static constexpr int NT = 512, D = 1;
};

// Launches k_mvt over js for n tokens: one wave of blocks (the split grid),
// NTOK tokens a block. cudaErrorInvalidValue where x's copies do not fit in
// shared memory or rows are no whole super-blocks.
template <int T, int NT, int D, bool GLU, int NTOK>
static cudaError_t mvt_launch(mv_jobs js, int cols, const float *x, int n, float beta, int act,
                              bool pdl, cudaStream_t st) {
  if (cols % qtype<T>::BLOCK) return cudaErrorInvalidValue;
  long units = 0;
  for (int i = 0; i < js.n; i++) {
    js.j[i].nblk = GLU && i > 0 ? 0 : cu_div_up(js.j[i].rows, 16);
    units += js.j[i].nblk;
  }
  if (units == 0 || n < 1) return cudaSuccess;
  const size_t smem = NTOK * mvr_xbytes<T>(cols);
  auto kern = k_mvt<T, NT, D, GLU, NTOK>;
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
          cudaSuccess) {
    cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t e;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NT, smem)) != cudaSuccess)
    return e;
  if (per_sm < 1) return cudaErrorInvalidValue;
  const int ny = cu_div_up(n, NTOK);
  long wave = (long)per_sm * sms / ny;
  if (wave < 1) wave = 1;
  const int blocks = (int)(wave < units ? wave : units);
  return cu_launch(pdl, st, dim3(blocks, ny), dim3(NT), smem, kern, js, cols, x, beta, act, n);
}

// k_mvt for a batch of n tokens: 1, 2 or 4 tokens a block (the fewest that
// hold the batch; more than 4: several grid rows), fewer where x's copies
// do not fit.
template <int T, bool GLU>
static cudaError_t mvt_launch_n(const mv_jobs &js, int cols, const float *x, int n, float beta,
                                int act, bool pdl, cudaStream_t st, int max_ntok = 4) {
  using C = mvt_cfg<T, GLU>;
  cudaError_t e = cudaErrorInvalidValue;
  if (n >= 5 && max_ntok >= 8)  // (spills: comparison, WICK_CUDA_TC_NTOK=8)
    e = mvt_launch<T, C::NT, C::D, GLU, 8>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue && n >= 3)
    e = mvt_launch<T, C::NT, C::D, GLU, 4>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue && n >= 2)
    e = mvt_launch<T, C::NT, C::D, GLU, 2>(js, cols, x, n, beta, act, pdl, st);
  if (e == cudaErrorInvalidValue)
    e = mvt_launch<T, C::NT, C::D, GLU, 1>(js, cols, x, n, beta, act, pdl, st);
  return e;
}

#endif
