// Test and benchmark entry points of the CUDA kernels (see cuda_test.h).
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/quant.cuh"

extern "C" {
#include "backend/cuda/cuda_test.h"
#include "base/fp.h"
}

// Device buffers and a context that free themselves on every return path.
struct dev_bufs {
  std::vector<void *> p;
  cu_ctx c = {};
  ~dev_bufs() {
    for (void *q : p) cudaFree(q);
    if (c.blas) cublasDestroy(c.blas);
    if (c.st) cudaStreamDestroy(c.st);
  }
  template <typename T>
  int alloc(T **out, size_t bytes, wk_error *err) {
    CK(cudaMalloc((void **)out, bytes ? bytes : 1));
    p.push_back(*out);
    return WICK_OK;
  }
  int init(wk_error *err) {
    CK(cudaStreamCreate(&c.st));
    CK(cublasCreate(&c.blas));
    CK(cublasSetStream(c.blas, c.st));
    return WICK_OK;
  }
};

#define TRY(x)                 \
  do {                         \
    int try_st_ = (x);         \
    if (try_st_) return try_st_; \
  } while (0)

extern "C" int cuda_test_matmul(int type, const void *w, int rows, int cols, const float *x, int n,
                                float *y, int path, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  size_t rb = wk_row_size(type, cols);
  uint8_t *dw;
  float *dx, *dy;
  TRY(b.alloc(&dw, rb * rows, err));
  TRY(b.alloc(&dx, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * n * rows, err));
  CK(cudaMemcpy(dw, w, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x, sizeof(float) * n * cols, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));  // NaN
  cu_weight cw = {dw, type, rows, cols, rb};
  if (path == 1) {
    b.c.mv_max_tokens = 0;
    b.c.xh_elems = (size_t)n * cols;
    b.c.wscratch_elems = (size_t)cols * (rows > 64 ? rows / 3 + 1 : rows);  // several chunks
    TRY(b.alloc(&b.c.xh, b.c.xh_elems * sizeof(__half), err));
    TRY(b.alloc(&b.c.wscratch, b.c.wscratch_elems * sizeof(__half), err));
    TRY(cu_matmul(&b.c, &cw, dx, n, dy, 0.0f, err));
  } else if (path == 2 && n == 1 && rows >= 3) {  // three matrices in one launch
    int r1 = rows / 3, r2 = rows / 2;
    cu_weight w3[3] = {{dw, type, r1, cols, rb}, {dw + rb * r1, type, r2 - r1, cols, rb},
                       {dw + rb * r2, type, rows - r2, cols, rb}};
    const cu_weight *wp[3] = {&w3[0], &w3[1], &w3[2]};
    float *yp[3] = {dy, dy + r1, dy + r2};
    TRY(cu_matvec_multi(&b.c, wp, yp, 3, dx, 1, 0.0f, err));
  } else {
    b.c.mv_f32x = path == 3;
    TRY(cu_matvec(&b.c, &cw, dx, n, dy, 0.0f, err));
  }
  CK(cudaMemcpy(y, dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

extern "C" int cuda_test_matvec_glu(int type, const void *wg, const void *wu, int rows, int cols,
                                    const float *x, int n, int act, float *y, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  b.c.mv_max_tokens = 4;
  size_t rb = wk_row_size(type, cols);
  uint8_t *dg, *du;
  float *dx, *dy;
  TRY(b.alloc(&dg, rb * rows, err));
  TRY(b.alloc(&du, rb * rows, err));
  TRY(b.alloc(&dx, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * n * rows, err));
  CK(cudaMemcpy(dg, wg, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(du, wu, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x, sizeof(float) * n * cols, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));  // NaN
  cu_weight cg = {dg, type, rows, cols, rb}, cu = {du, type, rows, cols, rb};
  TRY(cu_matvec_glu(&b.c, &cg, &cu, dx, n, dy, act, err));
  CK(cudaMemcpy(y, dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

extern "C" int cuda_test_embed(int type, const void *w, int rows, int cols, const int32_t *ids,
                               int n, float scale, float *out, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  size_t rb = wk_row_size(type, cols);
  uint8_t *dw;
  int32_t *di;
  float *dout;
  TRY(b.alloc(&dw, rb * rows, err));
  TRY(b.alloc(&di, sizeof(int32_t) * n, err));
  TRY(b.alloc(&dout, sizeof(float) * n * cols, err));
  CK(cudaMemcpy(dw, w, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(di, ids, sizeof(int32_t) * n, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, sizeof(float) * n * cols));
  cu_weight cw = {dw, type, rows, cols, rb};
  TRY(cu_embed(&b.c, &cw, di, n, scale, dout, err));
  CK(cudaMemcpy(out, dout, sizeof(float) * n * cols, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

extern "C" int cuda_test_attention(const cuda_test_attn *a, const float *q, const float *k,
                                   const float *v, float *out, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  int nb = (a->n_ctx + a->block_size - 1) / a->block_size;
  size_t kvd = (size_t)a->n_kv * a->hd, pool = (size_t)a->n_pool * a->block_size * kvd;
  std::vector<uint16_t> hk(pool, 0x7e00), hv(pool, 0x7e00);  // NaN in unused slots
  for (int p = 0; p < a->n_ctx; p++) {
    size_t slot = (size_t)a->blocks[p / a->block_size] * a->block_size + p % a->block_size;
    for (size_t i = 0; i < kvd; i++) {
      hk[slot * kvd + i] = wk_f32_to_f16(k[p * kvd + i]);
      hv[slot * kvd + i] = wk_f32_to_f16(v[p * kvd + i]);
    }
  }
  // token facts: pos, tseq, bt_off, bt
  std::vector<int32_t> meta(3 * a->n_new + 1 + nb);
  for (int t = 0; t < a->n_new; t++) meta[t] = a->n_ctx - a->n_new + t, meta[a->n_new + t] = 0;
  meta[2 * a->n_new] = 0;
  for (int j = 0; j < nb; j++) meta[2 * a->n_new + 1 + j] = a->blocks[j];
  __half *dk, *dv;
  float *dq, *dout, *dpart;
  int32_t *dm;
  size_t qn = (size_t)a->n_new * a->n_heads * a->hd;
  TRY(b.alloc(&dk, pool * 2, err));
  TRY(b.alloc(&dv, pool * 2, err));
  TRY(b.alloc(&dq, qn * 4, err));
  TRY(b.alloc(&dout, qn * 4, err));
  TRY(b.alloc(&dpart, (size_t)a->n_new * a->n_heads * a->splits * (a->hd + 2) * 4, err));
  TRY(b.alloc(&dm, meta.size() * 4, err));
  CK(cudaMemcpy(dk, hk.data(), pool * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), pool * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dq, q, qn * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dm, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, qn * 4));
  cu_meta m = {};
  m.pos = dm, m.tseq = dm + a->n_new, m.bt_off = dm + 2 * a->n_new, m.bt = dm + 2 * a->n_new + 1;
  cu_attn_shape s = {};
  s.n_heads = a->n_heads, s.n_kv_heads = a->n_kv, s.head_dim = a->hd;
  s.block_size = a->block_size, s.scale = a->scale, s.softcap = a->softcap, s.window = a->window;
  TRY(cu_attention(&b.c, &s, &m, a->n_new, dq, dk, dv, dout, a->splits, dpart, err));
  CK(cudaMemcpy(out, dout, qn * 4, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

// ---------------------------------------------------------------- benchmarks

__global__ void k_fill_random(uint16_t *p, size_t n, uint32_t seed) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h = (uint32_t)i * 2654435761u ^ seed;
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  float f = ((float)(h & 0xffff) / 65536.0f - 0.5f);
  p[i] = (uint16_t)(__float_as_uint(f) >> 16);  // bf16
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of one launch: `iters` launches captured in a graph,
// replayed 7 times (the first replay warms up).
static int time_graph(dev_bufs &b, int iters, const std::function<int(int)> &launch, double *us,
                      wk_error *err) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(b.c.st, cudaStreamCaptureModeThreadLocal));
  int st = WICK_OK;
  for (int i = 0; i < iters && !st; i++) st = launch(i);
  cudaError_t e = cudaStreamEndCapture(b.c.st, &g);
  if (st) return st;
  CK(e);
  e = cudaGraphInstantiate(&ge, g, 0);
  cudaGraphDestroy(g);
  CK(e);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < 7; r++) {
    CK(cudaEventRecord(e0, b.c.st));
    CK(cudaGraphLaunch(ge, b.c.st));
    CK(cudaEventRecord(e1, b.c.st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) t.push_back(ms * 1000.0 / iters);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  *us = median(t);
  return WICK_OK;
}

// Copies of W (enough that the L2 cannot hold them) and x, on the device.
static int bench_setup(dev_bufs &b, int type, const void *w, int rows, int cols,
                       std::vector<uint8_t *> &dw, float **dx, float **dy, wk_error *err) {
  size_t wb = wk_row_size(type, cols) * rows;
  int copies = (int)std::max<size_t>(1, ((size_t)256 << 20) / wb + 1);
  dw.resize(copies);
  for (int i = 0; i < copies; i++) {
    TRY(b.alloc(&dw[i], wb, err));
    CK(cudaMemcpy(dw[i], w, wb, cudaMemcpyHostToDevice));
  }
  TRY(b.alloc(dx, sizeof(float) * cols, err));
  TRY(b.alloc(dy, sizeof(float) * rows, err));
  std::vector<float> hx(cols);
  for (int i = 0; i < cols; i++) hx[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  CK(cudaMemcpy(*dx, hx.data(), sizeof(float) * cols, cudaMemcpyHostToDevice));
  return WICK_OK;
}

extern "C" int cuda_bench_matvec(int type, const void *w, int rows, int cols, int iters, int f32x,
                                 double *us, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  b.c.mv_f32x = f32x;
  std::vector<uint8_t *> dw;
  float *dx, *dy;
  TRY(bench_setup(b, type, w, rows, cols, dw, &dx, &dy, err));
  size_t rb = wk_row_size(type, cols);
  return time_graph(b, iters, [&](int i) {
    cu_weight cw = {dw[i % dw.size()], type, rows, cols, rb};
    return cu_matvec(&b.c, &cw, dx, 1, dy, 0.0f, err);
  }, us, err);
}

// The shapes the sweep tries: (rows a block, threads a block).
#define SWEEP_CFGS(X) \
  X(1, 64) X(2, 64) X(4, 64) X(1, 128) X(2, 128) X(4, 128) X(8, 128) X(2, 256) X(4, 256) X(8, 256)
#define SWEEP_TYPES(X) X(WK_F16) X(WK_Q4_K) X(WK_Q6_K) X(WK_Q8_0) X(WK_FP8_E4M3)
// ... and of the int8-activation kernel (q8 = 1).
#define SWEEP_Q8_CFGS(X) X(2, 64) X(4, 64) X(8, 64) X(2, 128) X(4, 128) X(8, 128) X(4, 256) X(16, 64)

template <int T>
static bool sweep_launch(int R, int NT, int q8, cudaStream_t st, const uint8_t *w, size_t rb,
                         int rows, int cols, const float *x, float *y) {
  mv_jobs js = {};
  js.n = 1;
#define CFG_(r, nt)                                                                    \
  if (!q8 && R == r && NT == nt) {                                                     \
    js.j[0] = {w, rb, rows, cu_div_up(rows, r), y};                                    \
    k_matvec<T, r, nt><<<dim3(js.j[0].nblk, 1), nt, 0, st>>>(js, cols, x, 0.0f);       \
    return true;                                                                       \
  }
  SWEEP_CFGS(CFG_)
#undef CFG_
  if constexpr (mvq_has<T>::value) {
#define CFG_(r, nt)                                                                    \
  if (q8 && R == r && NT == nt) {                                                      \
    js.j[0] = {w, rb, rows, cu_div_up(rows, r), y};                                    \
    k_matvec_q8<T, r, nt, false><<<dim3(js.j[0].nblk, 1), nt, 0, st>>>(js, cols, x, 0.0f, 0); \
    return true;                                                                       \
  }
    SWEEP_Q8_CFGS(CFG_)
#undef CFG_
  }
  return false;
}

extern "C" int cuda_bench_matvec_cfg(int type, const void *w, int rows, int cols, int iters, int R,
                                     int NT, int q8, double *us, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  std::vector<uint8_t *> dw;
  float *dx, *dy;
  TRY(bench_setup(b, type, w, rows, cols, dw, &dx, &dy, err));
  size_t rb = wk_row_size(type, cols);
  return time_graph(b, iters, [&](int i) {
    bool ok = false;
    const uint8_t *wp = dw[i % dw.size()];
#define TYPE_(t) \
    if (type == t) ok = sweep_launch<t>(R, NT, q8, b.c.st, wp, rb, rows, cols, dx, dy);
    SWEEP_TYPES(TYPE_)
#undef TYPE_
    if (!ok) return cu_fail(err, WICK_ERR_UNSUPPORTED, "sweep: no kernel for type %d R %d NT %d q8 %d", type, R, NT, q8);
    CK_LAUNCH();
    return (int)WICK_OK;
  }, us, err);
}

extern "C" int cuda_bench_ceilings(double *copy_bps, double *gemm_flops, int size, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  size_t cb = (size_t)2 << 30;
  uint8_t *s0, *s1;
  TRY(b.alloc(&s0, cb, err));
  TRY(b.alloc(&s1, cb, err));
  k_fill_random<<<cu_div_up(cb / 2, 256), 256, 0, b.c.st>>>((uint16_t *)s0, cb / 2, 1);
  CK_LAUNCH();
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < 6; r++) {
    CK(cudaEventRecord(e0, b.c.st));
    CK(cudaMemcpyAsync(s1, s0, cb, cudaMemcpyDeviceToDevice, b.c.st));
    CK(cudaEventRecord(e1, b.c.st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) t.push_back(ms / 1000.0);
  }
  *copy_bps = 2.0 * cb / median(t);
  size_t ne = (size_t)size * size;
  uint16_t *A, *B;
  float *C;
  TRY(b.alloc(&A, ne * 2, err));
  TRY(b.alloc(&B, ne * 2, err));
  TRY(b.alloc(&C, ne * 4, err));
  k_fill_random<<<cu_div_up(ne, 256), 256, 0, b.c.st>>>(A, ne, 2);
  k_fill_random<<<cu_div_up(ne, 256), 256, 0, b.c.st>>>(B, ne, 3);
  CK_LAUNCH();
  float alpha = 1.0f, beta = 0.0f;
  t.clear();
  for (int r = 0; r < 8; r++) {
    CK(cudaEventRecord(e0, b.c.st));
    CK(cublasGemmEx(b.c.blas, CUBLAS_OP_T, CUBLAS_OP_N, size, size, size, &alpha, A, CUDA_R_16BF,
                    size, B, CUDA_R_16BF, size, &beta, C, CUDA_R_32F, size, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
    CK(cudaEventRecord(e1, b.c.st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 1) t.push_back(ms / 1000.0);
  }
  *gemm_flops = 2.0 * size * size * (double)size / median(t);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return WICK_OK;
}

extern "C" int cuda_bench_mem_used(uint64_t *used, uint64_t *total) {
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return WICK_ERR_DEVICE;
  *used = tot - fr, *total = tot;
  return WICK_OK;
}
