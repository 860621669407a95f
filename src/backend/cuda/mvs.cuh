// The streamed matrix-vector kernel (docs/CUDA.md, v6): a block owns a run
// of row tiles and has the copy engine bring each tile's rows into shared
// memory in chunks, a few chunks ahead of its warps (Hopper bulk copies,
// cp.async.bulk, completing on one mbarrier a stage), so tens of KB are in
// flight per SM whatever the format's block size or alignment (Q6_K's
// 210-byte and Q8_0's 34-byte blocks included). Warps then compute their
// rows from shared memory: one warp owns RW rows of a tile, its lanes walk
// the chunk's groups of 32 columns.
//
// x: for the quantized types (Q8 = true) each block rounds its token's x to
// int8 per 32 values once, into shared memory (mvq.cuh's quant_x32; the same
// values in every block), while the first chunks of weights are in flight;
// otherwise each chunk's columns of f32 x are copied next to its weights.
//
// Copies start at the 16-byte boundary below a row chunk and end at the one
// above it, so a chunk's bytes sit in shared memory at their address's
// offset mod 16 (the formats' aligned loads stay aligned) and a copy never
// leaves the 16-byte words that hold the matrix's bytes. Weights only need
// to be readable up to the next 16-byte boundary (the arena pads tensors to
// 256 bytes); x must be 16-byte aligned (rows of a multiple of 32 floats).
//
// Programmatic dependent launch: weight copies do not depend on the previous
// kernel, so the block issues them first and waits for the previous grid
// (griddepcontrol.wait, a no-op without pdl) only before it reads x; each
// block lets the next grid launch as soon as it starts (the grid is one
// wave: helpers.cuh).
//
// Folded RMSNorm (js.nw): int8 x, the block's prologue multiplies x by the
// norm weight before rounding it and sums the squares of the row (one
// block-wide sum); f32 x, each warp does both on the values it reads and
// sums the squares over a tile's chunks (a warp reads every column of its
// rows). Either way the 1 / rms of the row scales the finished row sums.
#ifndef WICK_BACKEND_CUDA_MVS_CUH
#define WICK_BACKEND_CUDA_MVS_CUH

#include "backend/cuda/matvec.cuh"

// Per launch, computed on the host (mvs_plan).
struct mvs_shape {
  int cb;      // quant blocks of a row in one chunk
  int nc;      // chunks of a row
  int srow;    // bytes of one row's slot in a stage (multiple of 16)
  int stages;  // depth of the copy pipeline, 2..6
  int tiles;   // tiles over all jobs
  int tpb;     // tiles a block (consecutive)
};

// Hopper bulk copies (the copy engine, not the load units) completing on
// shared-memory barriers (mbarrier): one barrier a stage, one phase a use.
static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void bar_init(uint64_t *bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
}
// A barrier whose phases complete after `count` arrivals (and their bytes).
static __device__ __forceinline__ void bar_init_n(uint64_t *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
// One arrival.
static __device__ __forceinline__ void bar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// One arrival that also expects `bytes` more bytes of copies this phase.
static __device__ __forceinline__ void bar_expect(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
// Waits for the phase of parity `par` to complete.
static __device__ __forceinline__ void bar_wait(uint64_t *bar, uint32_t par) {
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(par)
        : "memory");
  } while (!done);
}
// bytes (a multiple of 16) from 16-byte aligned src to 16-byte aligned dst.
static __device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes,
                                                 uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// Tile t of the launch: its job and the tile's index inside the job.
static __device__ __forceinline__ int mvs_job(const mv_jobs &js, int t, int *tj) {
  int ji = 0;
  if (js.n > 1 && t >= js.j[0].nblk) {
    t -= js.j[0].nblk, ji = 1;
    if (js.n > 2 && t >= js.j[1].nblk) t -= js.j[1].nblk, ji = 2;
  }
  *tj = t;
  return ji;
}

// Row r (0 .. RT-1) of a tile: its matrix and row index. GLU: the first
// RT/2 rows are gate rows, the last RT/2 the up rows of the same indices.
template <int RT, bool GLU>
static __device__ __forceinline__ const uint8_t *mvs_row(const mv_jobs &js, int ji, int tj, int r,
                                                         int *row) {
  if (GLU) {
    constexpr int H = RT / 2;
    *row = tj * H + (r < H ? r : r - H);
    return r < H ? js.j[0].W : js.j[1].W;
  }
  *row = tj * RT + r;
  return ji == 0 ? js.j[0].W : ji == 1 ? js.j[1].W : js.j[2].W;
}

// Tile row of lane-group i (0 .. RW-1) of warp w. GLU: i < RW/2 gate rows,
// the rest the matching up rows.
template <int RW, int RT, bool GLU>
static __device__ __forceinline__ int mvs_wrow(int w, int i) {
  if (GLU) return i < RW / 2 ? w * (RW / 2) + i : RT / 2 + w * (RW / 2) + i - RW / 2;
  return w * RW + i;
}

template <int T, int NT, int RW, bool GLU, bool Q8>
__global__ void __launch_bounds__(NT, 1) k_mvs(mv_jobs js, mvs_shape sh, int cols,
                                            const float *__restrict__ x, float beta, int act) {
  constexpr int NW = NT / 32, RT = NW * RW;
  constexpr int BYTES = qtype<T>::BYTES, GPB = qtype<T>::BLOCK / 32;
  static_assert(!GLU || RW % 2 == 0, "block shape");
  static_assert(RT <= 32, "one producer lane a tile row");
  extern __shared__ uint4 mvs_smem[];
  __shared__ uint64_t bar_w[6], bar_x[6];  // per stage: weights landed, x landed (f32 x)
  __shared__ float red[32], rs_q8;         // folded norm, int8 x: sum of squares, 1 / rms
  constexpr int XB = Q8 ? 0 : qtype<T>::BLOCK * 4;  // f32 x bytes a quant block
  uint8_t *stage = (uint8_t *)mvs_smem;
  const int wbytes = RT * sh.srow, stage_bytes = wbytes + sh.cb * XB;
  uint8_t *xq = stage + sh.stages * stage_bytes;  // Q8: int8 x, then per group {dx, il | ih << 16}
  uint2 *xm = (uint2 *)(xq + cols);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, tok = blockIdx.y;
  const int bpr = cols / qtype<T>::BLOCK;
  const size_t row_bytes = js.j[0].row_bytes;
  const int t0 = blockIdx.x * sh.tpb, t1 = min(t0 + sh.tpb, sh.tiles);
  const int units = (t1 - t0) * sh.nc;  // (tile, chunk) pairs, chunks of a tile in order
  x += (size_t)tok * cols;

  // Warp 0 copies unit u's rows into stage u % stages: lane r row r of the
  // tile, from the 16-byte boundary below its chunk to the one above.
  auto issue_w = [&](int u) {
    int lt = u / sh.nc, c = u - lt * sh.nc, tj;
    int ji = mvs_job(js, t0 + lt, &tj);
    int row = 0;
    const uint8_t *W = mvs_row<RT, GLU>(js, ji, tj, lane < RT ? lane : 0, &row);
    int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
    int nb = min(sh.cb, bpr - c * sh.cb);
    uintptr_t src = (uintptr_t)(W + (size_t)row * row_bytes + (size_t)c * sh.cb * BYTES);
    uintptr_t a = src & ~(uintptr_t)15, e = (src + (uintptr_t)nb * BYTES + 15) & ~(uintptr_t)15;
    uint32_t span = lane < RT && row < rows ? (uint32_t)(e - a) : 0u;
    uint32_t total = __reduce_add_sync(0xffffffffu, span);
    uint64_t *bar = &bar_w[u % sh.stages];
    if (lane == 0) bar_expect(bar, total);
    __syncwarp();
    if (span) bulk_copy(stage + (u % sh.stages) * stage_bytes + lane * sh.srow, (const void *)a, span, bar);
  };
  // Lane 0 of warp 0 copies unit u's columns of f32 x next to its weights.
  auto issue_x = [&](int u) {
    if (Q8 || lane != 0) return;
    int c = u % sh.nc, nb = min(sh.cb, bpr - c * sh.cb);
    uint64_t *bar = &bar_x[u % sh.stages];
    bar_expect(bar, (uint32_t)(nb * XB));
    bulk_copy(stage + (u % sh.stages) * stage_bytes + wbytes,
              x + (size_t)c * sh.cb * qtype<T>::BLOCK, (uint32_t)(nb * XB), bar);
  };

  if (tid == 0) {
    for (int i = 0; i < sh.stages; i++) bar_init(&bar_w[i]), bar_init(&bar_x[i]);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int pre = sh.stages - 1;
  if (warp == 0)
    for (int u = 0; u < pre && u < units; u++) issue_w(u);
  pdl_launch_next();  // one wave of blocks (helpers.cuh)
  pdl_wait();
  if (warp == 0)
    for (int u = 0; u < pre && u < units; u++) issue_x(u);
  float ssw = 0.0f;  // folded norm, f32 x: the lane's squares of the tile's columns
  if constexpr (Q8) {
    float ss = 0.0f;
    for (int g = tid; g < cols / 32; g += NT) {
      float xv[32];
      const float4 *xp = (const float4 *)(x + 32 * g);
#pragma unroll
      for (int i = 0; i < 8; i++) {
        float4 v = __ldg(xp + i);
        xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
      }
      if (js.nw) mv_norm32(xv, js.nw, g, &ss);
      uint32_t qx[8];
      int il, ih;
      float dx;
      quant_x32(xv, qx, &il, &ih, &dx);
      uint4 *o = (uint4 *)(xq + 32 * g);
      o[0] = make_uint4(qx[0], qx[1], qx[2], qx[3]);
      o[1] = make_uint4(qx[4], qx[5], qx[6], qx[7]);
      xm[g] = make_uint2(__float_as_uint(dx), ((uint32_t)il & 0xffffu) | ((uint32_t)ih << 16));
    }
    float rs = js.nw ? mv_rscale(block_sum(ss, red), cols, js.eps) : 1.0f;
    if (tid == 0) rs_q8 = rs;  // read after the main loop's first barrier
  }

  float acc[RW];
#pragma unroll
  for (int i = 0; i < RW; i++) acc[i] = 0.0f;
  for (int u = 0; u < units; u++) {
    uint32_t par = (uint32_t)(u / sh.stages) & 1u;
    bar_wait(&bar_w[u % sh.stages], par);
    if (!Q8) bar_wait(&bar_x[u % sh.stages], par);
    __syncthreads();  // also: every warp is done with stage (u - 1) % stages
    if (warp == 0 && u + pre < units) issue_w(u + pre), issue_x(u + pre);

    int lt = u / sh.nc, c = u - lt * sh.nc, tj;
    int ji = mvs_job(js, t0 + lt, &tj);
    int nb = min(sh.cb, bpr - c * sh.cb), g0 = c * sh.cb * GPB;
    const uint8_t *buf = stage + (u % sh.stages) * stage_bytes;
    const uint8_t *p[RW];
#pragma unroll
    for (int i = 0; i < RW; i++) {
      int r = mvs_wrow<RW, RT, GLU>(warp, i), row;
      const uint8_t *W = mvs_row<RT, GLU>(js, ji, tj, r, &row);
      uintptr_t src = (uintptr_t)(W + (size_t)row * row_bytes + (size_t)c * sh.cb * BYTES);
      p[i] = buf + r * sh.srow + (src & 15);
    }
#pragma unroll 2
    for (int gl = lane; gl < nb * GPB; gl += 32) {
      int off = (gl / GPB) * BYTES, s = gl % GPB, g = g0 + gl;
      if constexpr (Q8) {
        uint4 a = *(const uint4 *)(xq + 32 * g), b = *(const uint4 *)(xq + 32 * g + 16);
        uint2 m = xm[g];
        uint32_t qx[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        int il = (int)(int16_t)(m.y & 0xffffu), ih = (int)m.y >> 16;
        float dx = __uint_as_float(m.x);
#pragma unroll
        for (int i = 0; i < RW; i++) acc[i] += mvq<T>::dot(p[i] + off, s, qx, il, ih, dx);
      } else {
        float xv[32];
        const float4 *xp = (const float4 *)(buf + wbytes) + 8 * gl;
#pragma unroll
        for (int k = 0; k < 8; k++) {
          float4 v = xp[k];
          xv[4 * k] = v.x, xv[4 * k + 1] = v.y, xv[4 * k + 2] = v.z, xv[4 * k + 3] = v.w;
        }
        if (js.nw) mv_norm32(xv, js.nw, g, &ssw);
        xsum sx = {0.0f, 0.0f};
#pragma unroll
        for (int l = 0; l < 16; l++) sx.lo += xv[l], sx.hi += xv[l + 16];
#pragma unroll
        for (int i = 0; i < RW; i++) acc[i] += qtype<T>::dot(p[i] + off, s, xv, sx);
      }
    }
    if (c != sh.nc - 1) continue;
    // Last chunk of the tile: the warp's row sums.
    float rs = 1.0f;
    if constexpr (Q8) {
      rs = rs_q8;
    } else if (js.nw) {
      rs = mv_rscale(warp_sum(ssw), cols, js.eps), ssw = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < RW; i++) acc[i] = warp_sum(acc[i]) * rs;
    if (lane == 0) {
      int rows = ji == 0 ? js.j[0].rows : ji == 1 ? js.j[1].rows : js.j[2].rows;
      float *y = (ji == 0 ? js.j[0].y : ji == 1 ? js.j[1].y : js.j[2].y) + (size_t)tok * rows;
#pragma unroll
      for (int i = 0; i < (GLU ? RW / 2 : RW); i++) {
        int row;
        mvs_row<RT, GLU>(js, ji, tj, mvs_wrow<RW, RT, GLU>(warp, i), &row);
        if (row >= rows) continue;
        if constexpr (GLU)
          y[row] = glu_act(acc[i], act) * acc[i + RW / 2];
        else
          y[row] = beta != 0.0f ? acc[i] + beta * y[row] : acc[i];
      }
    }
#pragma unroll
    for (int i = 0; i < RW; i++) acc[i] = 0.0f;
  }
}

// Shape per type: NT threads, RW rows a warp, CHUNK target bytes of a row's
// chunk, STAGES chunks in the pipeline (bench_cuda sweep, docs/CUDA.md v6:
// long contiguous chunks matter more than pipeline depth). DEFAULT: the
// default kernels (MV_INT8) use this kernel for the type, where it measured
// faster than v5: every quantized type (session-2 run, % of copy bandwidth at
// 4096x14336 / 14336x4096 with dependent launch, against v5: Q4_0 55/62 vs
// 42/40, Q4_1 60/72 vs 52/51, Q5_0 50/65 vs 41/42, Q5_1 58/71 vs 53/52, Q8_0
// 68/76 vs 63/68 (v5 measured in the same run), Q4_K 51/60 vs 36/37, Q5_K
// 50/63 vs 35/37, Q6_K 49/61 vs 29/32).
template <int T>
struct mvs_cfg {
  static constexpr int NT = 256, RW = 2, CHUNK = 4096, STAGES = 2;
  static constexpr bool DEFAULT = T == WK_Q4_0 || T == WK_Q4_1 || T == WK_Q5_0 || T == WK_Q5_1 ||
                                  T == WK_Q8_0 || T == WK_Q4_K || T == WK_Q5_K || T == WK_Q6_K;
};

// Launch parameters that are not template arguments.
struct mvs_opts {
  int chunk;   // target bytes of one row's chunk
  int stages;  // copy pipeline depth, 2..6
  bool pdl;    // programmatic dependent launch
};

// Launches k_mvs over js (job j's nblk is filled in here) for n tokens.
// Returns cudaErrorInvalidValue when the block cannot fit on an SM (the
// caller falls back to a smaller plan).
template <int T, int NT, int RW, bool GLU, bool Q8>
static cudaError_t mvs_launch(mv_jobs js, int cols, const float *x, int n, float beta, int act,
                              mvs_opts o, cudaStream_t st) {
  constexpr int RT = NT / 32 * RW, BYTES = qtype<T>::BYTES;
  int bpr = cols / qtype<T>::BLOCK;
  long rb = (long)bpr * BYTES;
  mvs_shape sh;
  sh.stages = o.stages < 2 ? 2 : o.stages > 6 ? 6 : o.stages;
  sh.nc = (int)((rb + o.chunk - 1) / o.chunk);
  if (sh.nc < 1) sh.nc = 1;
  sh.cb = (bpr + sh.nc - 1) / sh.nc;
  sh.nc = (bpr + sh.cb - 1) / sh.cb;
  sh.srow = (sh.cb * BYTES + 15 + 15) / 16 * 16;
  sh.tiles = 0;
  for (int i = 0; i < js.n; i++) {
    js.j[i].nblk = GLU ? (i == 0 ? cu_div_up(js.j[0].rows, RT / 2) : 0) : cu_div_up(js.j[i].rows, RT);
    sh.tiles += js.j[i].nblk;
  }
  size_t stage = (size_t)RT * sh.srow + (Q8 ? 0 : (size_t)sh.cb * qtype<T>::BLOCK * 4);
  size_t smem = sh.stages * stage + (Q8 ? (size_t)cols + (size_t)cols / 32 * 8 : 0);
  auto kern = k_mvs<T, NT, RW, GLU, Q8>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e == cudaSuccess)  // all of L1 as shared memory, so the occupancy below is what runs
    e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  int dev = 0, sms = 0, per_sm = 0;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, NT, smem)) != cudaSuccess)
    return e;
  if (per_sm < 1) return cudaErrorInvalidValue;
  // Every block of every token resident at once; equal tile counts, so the
  // blocks finish together.
  long slots = (long)per_sm * sms;
  sh.tpb = (int)(((long)sh.tiles * n + slots - 1) / slots);
  return cu_launch(o.pdl, st, dim3(cu_div_up(sh.tiles, sh.tpb), n), dim3(NT), smem, kern, js, sh,
                   cols, x, beta, act);
}

#endif
