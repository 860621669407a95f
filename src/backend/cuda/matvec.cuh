// The register-load matrix-vector kernels, templated on the weight type, the
// rows a block computes (R) and its threads (NT): v4 (f32 x, every type) and
// v5 (x rounded to int8 in registers, the quantized types). Weights are read
// straight into registers (mvs.cuh streams them through shared memory
// instead). One launch may serve up to three matrices of one type that read
// the same x (Q/K/V, gate/up): blocks are dealt to them in order. Every
// kernel is launched with programmatic dependent launch when the context
// asks for it (helpers.cuh): it waits for the previous one before it reads
// x, and the wait lets the next kernel launch. An RMSNorm may be folded
// into x (mv_jobs.nw) for the streamed kernels only (mvs.cuh, mvr.cuh); v4
// and v5 take x as it is (v7 in docs/CUDA.md: the fold slowed v4 down).
#ifndef WICK_BACKEND_CUDA_MATVEC_CUH
#define WICK_BACKEND_CUDA_MATVEC_CUH

#include "backend/cuda/mvq.cuh"
#include "backend/cuda/quant.cuh"

struct mv_job {
  const uint8_t *W;  // rows x row_bytes
  size_t row_bytes;
  int rows;
  int nblk;  // blocks (v4, v5) or row tiles (mvs) of this job
  float *y;  // [n tokens][rows]
};
struct mv_jobs {
  mv_job j[3];
  int n;
  const float *nw;  // [cols] folded RMSNorm (streamed kernels): x read as rmsnorm(x) * nw;
                    // NULL: x as it is
  float eps;        // the norm's epsilon
  int mvr;          // the register-streamed kernel's comparison options (MVR_*: internal.cuh)
  int pf = -1;      // the register-streamed kernel: steps of a warp's first unit asked of
                    // the L2 before the wait for the previous kernel; -1: its default
                    // (mvr.cuh; cu_ctx::mv_pf)
};

// The folded norm on one group of 32 x values: adds their squares to *ss
// and multiplies them by the norm's weights (the 1 / rms of the row is
// applied to the finished sums).
static __device__ __forceinline__ void mv_norm32(float *xv, const float *__restrict__ nw, int g,
                                                 float *ss) {
  const float4 *np = (const float4 *)(nw + 32 * g);
  float s = *ss;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    float4 w = __ldg(np + i);
    float *v = xv + 4 * i;
    s += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
    v[0] *= w.x, v[1] *= w.y, v[2] *= w.z, v[3] *= w.w;
  }
  *ss = s;
}

// 1 / rms of a row from its sum of squares over cols values.
static __device__ __forceinline__ float mv_rscale(float ss, int cols, float eps) {
  return rsqrtf(ss / (float)cols + eps);
}

// Values [8 i, 8 i + 8) of x (0 where ok is false: past the row) times the
// folded norm's weights nw unless NULL (their squares, before the weights,
// added to *ss) into v; returns the largest |v| of their 32-value group,
// whose 4 parts are lanes 4q .. 4q + 3 (every lane of the warp calls it).
static __device__ __forceinline__ float mv_load8(const float *__restrict__ x,
                                                 const float *__restrict__ nw, int i, bool ok,
                                                 float *v, float *ss) {
#pragma unroll
  for (int k = 0; k < 8; k++) v[k] = 0.0f;
  if (ok) {
    const float4 *xp = (const float4 *)(x + 8 * i);
    float4 a = __ldg(xp), b = __ldg(xp + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    if (nw) {
      const float4 *np = (const float4 *)(nw + 8 * i);
      float4 c = __ldg(np), e = __ldg(np + 1);
      const float w8[8] = {c.x, c.y, c.z, c.w, e.x, e.y, e.z, e.w};
      float s = *ss;
#pragma unroll
      for (int k = 0; k < 8; k++) s += v[k] * v[k], v[k] *= w8[k];
      *ss = s;
    }
  }
  float am = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; k++) am = fmaxf(am, fabsf(v[k]));
  am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
  return fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
}

// The block rounds one token's x (cols floats; times the folded norm's
// weights nw unless NULL) to int8 per 32 values into shared memory: xq
// (cols bytes, 16-byte aligned) and xm[g] = {dx, il | ih << 16} of group g,
// the same values as mvq.cuh's quant_x32, with 4 lanes a group (8 values a
// thread: few registers). Every thread of the block calls it; it ends on a
// barrier and returns the norm's 1 / rms of x (1 without nw) to all. red:
// 32 floats of shared scratch.
static __device__ __forceinline__ float mv_round_x(const float *__restrict__ x, int cols,
                                                   const float *__restrict__ nw, float eps,
                                                   uint8_t *xq, uint2 *xm, float *red) {
  float ss = 0.0f;
  const int part = threadIdx.x & 3;  // values [8 part, 8 part + 8) of the group
#pragma unroll 2
  for (int i0 = 0; i0 < cols / 8; i0 += blockDim.x) {  // i0 uniform: every lane shuffles
    const int i = i0 + threadIdx.x;
    const bool ok = i < cols / 8;
    float v[8];
    const float am = mv_load8(x, nw, i, ok, v, &ss);
    const float inv = am > 0.0f ? 127.0f / am : 0.0f;
    uint32_t q[2];
#pragma unroll
    for (int h = 0; h < 2; h++) q[h] = round4_i8(v + 4 * h, inv);
    int s = dp4(q[1], 0x01010101u, dp4(q[0], 0x01010101u, 0));
    s += __shfl_xor_sync(0xffffffffu, s, 1);        // parts 0+1: il; parts 2+3: ih
    const int sh = __shfl_xor_sync(0xffffffffu, s, 2);  // part 0 gets ih
    if (ok) {
      *(uint2 *)(xq + 8 * i) = make_uint2(q[0], q[1]);
      if (part == 0)
        xm[i >> 2] = make_uint2(__float_as_uint(am * (1.0f / 127.0f)),
                                ((uint32_t)s & 0xffffu) | ((uint32_t)sh << 16));
    }
  }
  __syncthreads();
  return nw ? mv_rscale(block_sum(ss, red), cols, eps) : 1.0f;
}

// The job of this block and the block's index inside it.
static __device__ __forceinline__ void mv_pick(const mv_jobs &js, const uint8_t **W,
                                               size_t *row_bytes, int *rows, float **y, int *b) {
  int bi = blockIdx.x, ji = 0;
  if (js.n > 1 && bi >= js.j[0].nblk) {
    bi -= js.j[0].nblk, ji = 1;
    if (js.n > 2 && bi >= js.j[1].nblk) bi -= js.j[1].nblk, ji = 2;
  }
  *W = ji == 0 ? js.j[0].W : ji == 1 ? js.j[1].W : js.j[2].W;
  *row_bytes = ji == 0 ? js.j[0].row_bytes : ji == 1 ? js.j[1].row_bytes : js.j[2].row_bytes;
  *rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
  *y = ji == 0 ? js.j[0].y : ji == 1 ? js.j[1].y : js.j[2].y;
  *b = bi;
}

// Sums acc[r] over the block and writes row r0 + r of y (+ beta y).
template <int R, int NT>
static __device__ __forceinline__ void mv_finish(const float *acc, float (*red)[NT / 32], int r0,
                                                 int rows, float *y, float beta) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; r++) {
    float v = warp_sum(acc[r]);
    if (lane == 0) red[r][warp] = v;
  }
  __syncthreads();
  if (threadIdx.x < R && r0 + (int)threadIdx.x < rows) {
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) s += red[threadIdx.x][i];
    float *o = y + r0 + threadIdx.x;
    *o = beta != 0.0f ? s + beta * *o : s;
  }
}

// One block of NT threads computes R rows for one token: every thread walks
// groups of 32 columns, decodes them from each row and dots them with x.
template <int T, int R, int NT>
__global__ void __launch_bounds__(NT) k_matvec(mv_jobs js, int cols, const float *__restrict__ x,
                                               float beta) {
  __shared__ float red[R][NT / 32];
  const uint8_t *W;
  size_t row_bytes;
  int rows, b;
  float *y;
  mv_pick(js, &W, &row_bytes, &rows, &y, &b);
  int tok = blockIdx.y;
  x += (size_t)tok * cols;
  y += (size_t)tok * rows;
  int r0 = b * R;
  int ng = cols / 32;
  pdl_wait();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  for (int g = threadIdx.x; g < ng; g += NT) {
    float xv[32];
    const float4 *xp = (const float4 *)(x + 32 * g);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 v = __ldg(xp + i);
      xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
    }
    xsum sx = {0.0f, 0.0f};
#pragma unroll
    for (int l = 0; l < 16; l++) sx.lo += xv[l], sx.hi += xv[l + 16];
    // Rows past the end repeat the last row (no branch, so every row's
    // loads are in flight together); their sums are never written.
#pragma unroll
    for (int r = 0; r < R; r++) {
      int row = r0 + r < rows ? r0 + r : rows - 1;
      acc[r] += dot32<T>(W + (size_t)row * row_bytes, g, xv, sx);
    }
  }
  mv_finish<R, NT>(acc, red, r0, rows, y, beta);
}

// The same product with x rounded to int8 per 32 values (in registers, by
// every thread for the groups it walks) and integer dot products (mvq.cuh):
// for the quantized types, about a quarter of the instructions a weight.
// GLU: js holds gate (j[0]) and up (j[1]) of equal shape; a block computes
// R/2 rows of each and writes glu_act(gate, act) * up into j[0].y (beta
// unused), so the gated unit needs no launch of its own.
template <int T, int R, int NT, bool GLU>
__global__ void __launch_bounds__(NT) k_matvec_q8(mv_jobs js, int cols,
                                                  const float *__restrict__ x, float beta,
                                                  int act) {
  __shared__ float red[R][NT / 32];
  const uint8_t *W;
  size_t row_bytes;
  int rows, b;
  float *y;
  mv_pick(js, &W, &row_bytes, &rows, &y, &b);
  constexpr int H = R / 2;
  if (GLU) b = blockIdx.x;  // every block serves both matrices; W, y are gate's
  int tok = blockIdx.y;
  pdl_wait();
  x += (size_t)tok * cols;
  y += (size_t)tok * rows;
  int r0 = GLU ? b * H : b * R;
  int ng = cols / 32;
  constexpr int GPB = qtype<T>::BLOCK / 32;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  // Rows past the end repeat the last row (no branch, so every row's loads
  // are in flight together); their sums are never written.
  const uint8_t *wr[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    int rr = GLU ? r0 + r % H : r0 + r;
    rr = rr < rows ? rr : rows - 1;
    wr[r] = (GLU && r >= H ? js.j[1].W : W) + (size_t)rr * row_bytes;
  }
  for (int g = threadIdx.x; g < ng; g += NT) {
    float xv[32];
    const float4 *xp = (const float4 *)(x + 32 * g);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float4 v = __ldg(xp + i);
      xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
    }
    uint32_t qx[8];
    int il, ih;
    float dx;
    quant_x32(xv, qx, &il, &ih, &dx);
    size_t off = (size_t)(g / GPB) * qtype<T>::BYTES;
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] += mvq<T>::dot(wr[r] + off, g % GPB, qx, il, ih, dx);
  }
  if (!GLU) {
    mv_finish<R, NT>(acc, red, r0, rows, y, beta);
    return;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; r++) {
    float v = warp_sum(acc[r]);
    if (lane == 0) red[r][warp] = v;
  }
  __syncthreads();
  if (threadIdx.x < H && r0 + (int)threadIdx.x < rows) {
    float sg = 0.0f, su = 0.0f;
#pragma unroll
    for (int i = 0; i < NT / 32; i++) sg += red[threadIdx.x][i], su += red[threadIdx.x + H][i];
    y[r0 + threadIdx.x] = glu_act(sg, act) * su;
  }
}

// Block shape per type, from the sweep in docs/CUDA.md: more rows per thread
// keep more loads in flight; the float formats with wide rows stay at 4.
template <int T>
struct mv_cfg {
  static constexpr bool small = T == WK_F32 || T == WK_Q4_0 || T == WK_Q4_1 || T == WK_Q5_0 ||
                                T == WK_Q5_1 || T == WK_Q8_0;
  static constexpr int R = small ? 4 : 8, NT = small ? 64 : 128;
};

// The same for the int8-activation kernel (mvq_has<T> types).
template <int T>
struct mvq_cfg {
  static constexpr int R = 8, NT = 128;
};

#endif
