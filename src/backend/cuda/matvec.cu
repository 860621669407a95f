// Matrix-vector products (decode), embedding lookup and dequantization to f16
// for every weight type, plus the GEMM path (dequantized f16 tiles through
// cuBLAS on tensor cores) for batches of tokens.
#include "backend/cuda/deq_f16.cuh"
#include "backend/cuda/internal.cuh"
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mmq.cuh"
#include "backend/cuda/mvr.cuh"
#include "backend/cuda/mvs.cuh"
#include "backend/cuda/mvt.cuh"
#include "backend/cuda/quant.cuh"

template <int T>
__global__ void k_embed(const uint8_t *__restrict__ W, size_t row_bytes, int rows, int cols,
                        const int32_t *__restrict__ tok, float scale, float *__restrict__ x) {
  pdl_wait();
  int t = blockIdx.y;
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= cols / 32) return;
  int id = tok[t];
  float *o = x + (size_t)t * cols + 32 * g;
  if (id < 0 || id >= rows) {  // the host checks ids; never read out of bounds
#pragma unroll
    for (int l = 0; l < 32; l++) o[l] = 0.0f;
    return;
  }
  float w[32];
  deq32<T>(W + (size_t)id * row_bytes, g, w);
#pragma unroll
  for (int l = 0; l < 32; l += 4)
    *(float4 *)(o + l) = make_float4(w[l] * scale, w[l + 1] * scale, w[l + 2] * scale,
                                     w[l + 3] * scale);
}

__global__ void k_to_f16(const float *__restrict__ x, __half *__restrict__ y, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}
static int type_error(const cu_weight *w, wk_error *err) {
  return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: weight type %d has no CUDA kernel", w->type);
}

// The folded norm of a launch (xn NULL: none) into its jobs.
static void set_norm(mv_jobs *js, const cu_xnorm *xn) {
  js->nw = xn ? xn->w : NULL;
  js->eps = xn ? xn->eps : 0.0f;
}

// One job per matrix, R rows a block; returns the blocks of all jobs.
static int fill_jobs(mv_jobs *js, const cu_weight *const *ws, float *const *ys, int nw, int R) {
  int blocks = 0;
  for (int i = 0; i < nw; i++) {
    js->j[i] = {ws[i]->d, ws[i]->row_bytes, ws[i]->rows, cu_div_up(ws[i]->rows, R), ys[i]};
    blocks += js->j[i].nblk;
  }
  js->n = nw;
  return blocks;
}

template <int T>
static cudaError_t launch_v4(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                             const float *x, int n, float beta) {
  constexpr int R = mv_cfg<T>::R, NT = mv_cfg<T>::NT;
  mv_jobs js = {};
  int blocks = fill_jobs(&js, ws, ys, nw, R);
  return cu_launch(c->pdl_v4, c->st, dim3(blocks, n), dim3(NT), 0, k_matvec<T, R, NT>, js,
                   ws[0]->cols, x, beta);
}

// The streamed kernel: int8 x for the quantized types (unless the int8 x
// does not fit in shared memory next to the weight stages), f32 x for the
// others.
template <int T, bool GLU>
static cudaError_t launch_mvs(const cu_ctx *c, const mv_jobs &js, int cols, const float *x, int n,
                              float beta, int act) {
  constexpr int NT = mvs_cfg<T>::NT, RW = mvs_cfg<T>::RW;
  mvs_opts o = {mvs_cfg<T>::CHUNK, mvs_cfg<T>::STAGES, c->pdl != 0};
  if constexpr (mvq_has<T>::value) {
    cudaError_t e = mvs_launch<T, NT, RW, GLU, true>(js, cols, x, n, beta, act, o, c->st);
    if (e != cudaErrorInvalidValue) return e;
  }
  return mvs_launch<T, NT, RW, GLU, false>(js, cols, x, n, beta, act, o, c->st);
}

// v5: x rounded to int8 in registers (quantized types).
template <int T>
static cudaError_t launch_v5(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                             const float *x, int n, float beta) {
  constexpr int R = mvq_cfg<T>::R, NT = mvq_cfg<T>::NT;
  mv_jobs js = {};
  int blocks = fill_jobs(&js, ws, ys, nw, R);
  return cu_launch(c->pdl, c->st, dim3(blocks, n), dim3(NT), 0, k_matvec_q8<T, R, NT, false>, js,
                   ws[0]->cols, x, beta, 0);
}

// Whether the wide format's whole-units grid for js (n tokens), in blocks
// of MVR_W4_RULE_NT threads, uses at least 90% of the blocks the 8-lane
// format's does (the o-projection of an 8B model is 8-lane by this rule).
template <int T, bool GLU>
static bool mvr_wide_fills(const mv_jobs &js, int n) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  long units = 0;
  for (int i = 0; i < (GLU ? 1 : js.n); i++) units += js.j[i].rows;
  const long wave = sms / n > 0 ? sms / n : 1;
  const int wide = mvr_whole_blocks(units, wave, MVR_W4_RULE_NT / 32);
  // (the 8-lane format's grid as the rule was measured: 1024 threads, a
  // row a unit; since session 14 it runs 2 rows at 512 threads)
  const int lanes8 = mvr_whole_blocks(units, wave, 1024 / 32);
  return 10L * wide >= 9L * lanes8;
}

// Tokens a block of the register-streamed kernel for a batch of n: 1 up to
// 3 tokens (a grid row a token: the rows re-read the matrix, largely from
// L2), 4 for 4, 8 from 5 on; at most the context's mv_ntok. In the 8B
// Q4_K_M decode of B sequences (session 13, bench_cuda batch, ms a step at
// context 512, a block of 2 / 4 / 8 tokens against a grid row a token):
// B = 2 3.36 against 3.10, B = 3 (4 a block) 4.07 / 4.09, B = 4 4.66 / 5.06,
// B = 8 7.95 / 9.28. The 16-bit-x types (session 14) take a grid row a
// token, at most the context's mv_ntok16 (1): their several-token blocks
// read each weight once but hold twice the x (B = 4 6.58 ms against 5.47
// with a grid row a token, B = 8 12.04 against 9.90; the GEMM path 10.69).
template <int T>
static inline int mvr_ntok(const cu_ctx *c, int n) {
  const int t = n <= 3 ? 1 : n <= 4 ? 4 : 8, cap = mvr_f32x<T>::value ? c->mv_ntok : c->mv_ntok16;
  return t < cap ? t : cap;
}

// mvr_launch with mvr_ntok<T>(c, n) tokens a block, or fewer where their
// copies of x do not fit in shared memory (F32X rows of 14336 columns: 57
// KB a token). Several tokens a block take blocks of at most 512 threads:
// a lane's accumulators (tokens x rows, x 2 for GLU) and x spilled at 64
// registers a thread (1024 threads: ptxas, 4-430 bytes).
template <int T, int NT, int RW, int D, bool GLU, class F = mvr_fmt<T>>
static cudaError_t mvr_launch_n(const cu_ctx *c, const mv_jobs &js, int cols, const float *x,
                                int n, float beta, int act) {
  // (3 items in flight at 512 threads, as many bytes in flight an SM as 1
  // at 1024, was slower: 8B Q4_K_M batch decode of 2 / 4 / 8 sequences 3.41
  // / 4.95 / 8.78 ms a step against 3.36 / 4.66 / 7.95.)
  // (Several tokens a block keep one row a unit: their accumulators and
  // x already fill the registers.)
  constexpr int NB = NT < 512 ? NT : 512;
  const bool pdl = c->pdl != 0;
  const int nt = mvr_ntok<T>(c, n);
  cudaError_t e = cudaErrorInvalidValue;
  uint8_t *pre = c->xpre;
  const size_t pb = c->xpre_bytes;
  if (nt >= 8)
    e = mvr_launch<T, NB, 1, D, GLU, F, 8>(js, cols, x, n, beta, act, pdl, c->st, pre, pb);
  if (e == cudaErrorInvalidValue && nt >= 4)
    e = mvr_launch<T, NB, 1, D, GLU, F, 4>(js, cols, x, n, beta, act, pdl, c->st, pre, pb);
  if (e == cudaErrorInvalidValue && nt >= 2)
    e = mvr_launch<T, NB, 1, D, GLU, F, 2>(js, cols, x, n, beta, act, pdl, c->st, pre, pb);
  if (e == cudaErrorInvalidValue)
    e = mvr_launch<T, NT, RW, D, GLU, F, 1>(js, cols, x, n, beta, act, pdl, c->st);
  return e;
}

// The register-streamed kernel (int8 x; f32 x for F16/BF16/FP8; f16 x for
// FP8 E4M3 under WICK_CUDA_FP8W=1); falls back to the streamed one where x's
// copy does not fit in shared memory or (FP8) a row is no whole 4-block steps.
template <int T, bool GLU>
static cudaError_t launch_mvr(const cu_ctx *c, const mv_jobs &jobs, int cols, const float *x, int n,
                              float beta, int act) {
  if constexpr (T == WK_Q4_0 || T == WK_Q4_1 || T == WK_Q5_0 || T == WK_Q5_1)
    if (c->mv_s11) return launch_mvs<T, GLU>(c, jobs, cols, x, n, beta, act);  // WICK_CUDA_MVD=0
  mv_jobs js = jobs;
  js.mvr = c->mv_mvr;
  js.pf = c->mv_pf;
  // Batches of 4 or more tokens (5 for Q8_0, Q4_0; decode steps of several
  // sequences) on the tensor-core kernel (mvt.cuh), which reads each weight
  // once for 4 or 8 tokens at little cost a token; fewer stay on the
  // register-streamed kernel, faster for one token. 8B Q4_K_M, steps of B
  // sequences at context 512 (session 15, call 1), ms, tensor-core against
  // register kernel: B = 1 2.74 / 2.40, 2 3.49 / 3.41, 3 4.58 / 4.48, 4
  // 5.14 / 5.48, 8 6.75 / 9.93 (mvt_cfg: the other types).
  if constexpr (mvt_has<T>::value) {
    using C = mvt_cfg<T, GLU>;
    const int tmin = c->mv_tc_min > 0 ? c->mv_tc_min : C::MIN;
    if ((c->mv_tc & mvt_bit<T>()) && n >= tmin) {
      cudaError_t e = mvt_launch_n<T, GLU>(js, cols, x, n, beta, act, c->pdl != 0, c->st,
                                            c->mv_tc_ntok > 0 ? c->mv_tc_ntok : C::NTOK);
      if (e != cudaErrorInvalidValue) return e;
    }
  }
  if constexpr (T == WK_Q4_K || T == WK_Q5_K) {
    // Rows of up to 8192 columns (Q/K/V, o and gate/up of an 8B model):
    // the wide format (mvr_w4.cuh), fewer instructions a byte; longer rows
    // keep the 8-lane one (bench_cuda matvec, session 6: Q4_K 64 / 50% of
    // the copy rate at 14336x4096 / 4096x14336 against 56 / 60%). Not where
    // its grid of smaller blocks (768 threads) would fill fewer SMs than
    // the 8-lane one: 4096 rows take 86 blocks of 2 rows a warp against 128
    // of one (bench_cuda rows, session 7: Q4_K 4096x4096 31.8% against
    // 40.9%; 47.6 against 42.6 at 6144 rows, where it fills more).
    const int tiles = cu_div_up(n, mvr_ntok<T>(c, n));  // the grid's token rows
    if (c->mv_wide != WIDE_OFF && cols <= 8192 &&
        (c->mv_wide == WIDE_ALL || mvr_wide_fills<T, GLU>(js, tiles))) {
      using W = mvr_w4_cfg<T, GLU>;
      using A = mvr_w4_cfg<T, GLU, true>;  // WICK_CUDA_MVD=0 (Q4_K: 768 threads, 3 items)
      cudaError_t e =
          T == WK_Q4_K && c->mv_s11
              ? mvr_launch<T, A::NT, A::RW, A::D, GLU, mvr_wide4<T>>(js, cols, x, n, beta, act,
                                                                     c->pdl != 0, c->st)
              : mvr_launch_n<T, W::NT, W::RW, W::D, GLU, mvr_wide4<T>>(c, js, cols, x, n, beta,
                                                                       act);
      if (e != cudaErrorInvalidValue) return e;
    }
  }
  if constexpr (T == WK_FP8_E4M3) {  // opt-in (WICK_CUDA_FP8W=1): rows of whole 4-block steps
    if (c->mv_fp8w == FP8_W) {
      cudaError_t e = mvr_fp8w_launch<T, GLU>(js, cols, x, n, beta, act, c->pdl != 0, c->st);
      if (e != cudaErrorInvalidValue) return e;
    }
  }
  if constexpr (T == WK_Q4_K || T == WK_Q5_K || T == WK_Q8_0) {  // WICK_CUDA_MVD=0
    if (c->mv_s11) {
      using S = mvr_cfg_s11<T, GLU>;
      cudaError_t e =
          mvr_launch<T, S::NT, S::RW, S::D, GLU>(js, cols, x, n, beta, act, c->pdl != 0, c->st);
      if (e != cudaErrorInvalidValue) return e;
    }
  }
  if constexpr (T == WK_F16 || T == WK_BF16) {  // WICK_CUDA_F16D=7 (the session-11 shape)
    if (c->mv_f16d == 7) {
      cudaError_t e =
          mvr_launch<T, 1024, 1, 7, GLU>(js, cols, x, n, beta, act, c->pdl != 0, c->st);
      if (e != cudaErrorInvalidValue) return e;
    }
  }
  if constexpr (mvr_has<T>::value) {
    using C = mvr_cfg<T, GLU>;
    cudaError_t e = mvr_launch_n<T, C::NT, C::RW, C::D, GLU>(c, js, cols, x, n, beta, act);
    if (e != cudaErrorInvalidValue) return e;
  }
  return launch_mvs<T, GLU>(c, js, cols, x, n, beta, act);
}

// Which kernel serves type T under the context's choice (only the streamed
// and register-streamed ones fold an RMSNorm into x). MV_REG: the
// register-streamed kernel where it serves T, else the MV_INT8 choice.
enum { KER_V4, KER_V5, KER_MVS, KER_MVR };
template <int T>
static int pick_kernel(const cu_ctx *c) {
  const bool fp8 = T == WK_FP8_E4M3 || T == WK_FP8_E5M2;
  if (c->mv_f32x == MV_REG && mvr_has<T>::value && !(fp8 && c->mv_fp8w == FP8_V4))
    return KER_MVR;  // FP8: WICK_CUDA_FP8W=v4 for the v4 kernel
  int m = c->mv_f32x == MV_REG ? MV_INT8 : c->mv_f32x;
  if (m == MV_STREAM || (m == MV_INT8 && mvs_cfg<T>::DEFAULT)) return KER_MVS;
  return m == MV_INT8 && mvq_has<T>::value ? KER_V5 : KER_V4;
}

template <int T>
static cudaError_t launch_matvec(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                                 const float *x, const cu_xnorm *xn, int n, float beta) {
  int k = pick_kernel<T>(c);
  if (k == KER_MVS || k == KER_MVR) {
    mv_jobs js = {};
    for (int i = 0; i < nw; i++) js.j[i] = {ws[i]->d, ws[i]->row_bytes, ws[i]->rows, 0, ys[i]};
    js.n = nw;
    set_norm(&js, xn);
    if (k == KER_MVR) return launch_mvr<T, false>(c, js, ws[0]->cols, x, n, beta, 0);
    return launch_mvs<T, false>(c, js, ws[0]->cols, x, n, beta, 0);
  }
  if (xn) return cudaErrorNotSupported;
  if constexpr (mvq_has<T>::value) {
    if (k == KER_V5) return launch_v5<T>(c, ws, ys, nw, x, n, beta);
  }
  return launch_v4<T>(c, ws, ys, nw, x, n, beta);
}

// pick_kernel for a type known at run time; -1 for a type without kernels.
static int kernel_for(const cu_ctx *c, int type) {
#define WK_CASE_(t) \
  if (type == t) return pick_kernel<t>(c);
  WK_CUDA_TYPES(WK_CASE_)
#undef WK_CASE_
  return -1;
}

bool cu_matvec_fold_ok(const cu_ctx *c, const cu_weight *w) {
  int k = kernel_for(c, w->type);
  return k == KER_MVS || k == KER_MVR;
}

int cu_matvec_multi(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                    const float *x, const cu_xnorm *xn, int n, float beta, wk_error *err) {
  if (nw < 1 || nw > 3) return cu_fail(err, WICK_ERR_INVALID, "cuda: %d matrices in one launch", nw);
  for (int i = 0; i < nw; i++)
    if (ws[i]->type != ws[0]->type || ws[i]->cols != ws[0]->cols || ws[i]->cols % 32)
      return cu_fail(err, WICK_ERR_INVALID, "cuda: matrices of one launch differ in type or row length");
  cudaError_t e = cudaSuccess;
#define WK_CASE_(t)                                          \
  case t:                                                    \
    e = launch_matvec<t>(c, ws, ys, nw, x, xn, n, beta);     \
    break;
  switch (ws[0]->type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: return type_error(ws[0], err);
  }
#undef WK_CASE_
  if (e == cudaErrorNotSupported)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: type %d: only the streamed matrix-vector "
                   "kernels take a folded RMSNorm (this context picks v4 or v5)", ws[0]->type);
  CK(e);
  CK_LAUNCH();
  return WICK_OK;
}

// cu_matvec_pair's launch: js1 on the wide format of T1, js2 (Q6_K) on its
// register-kernel format (mvr_launch2); cudaErrorInvalidValue where the wide
// format would not fill the SMs alone or the grids do not fit one wave.
template <int T1>
static cudaError_t launch_pair(const cu_ctx *c, mv_jobs j1, mv_jobs j2, int cols, const float *x) {
  if (c->mv_wide != WIDE_ALL && !mvr_wide_fills<T1, false>(j1, 1)) return cudaErrorInvalidValue;
  using W = mvr_w4_cfg<T1, false>;
  using C = mvr_cfg<WK_Q6_K, false>;
  static_assert(W::NT == C::NT, "one block size for both grids");
  return mvr_launch2<T1, mvr_wide4<T1>, W::RW, W::D, WK_Q6_K, mvr_fmt<WK_Q6_K>, C::RW, C::D, W::NT>(
      j1, j2, cols, x, c->pdl != 0, c->st);
}

int cu_matvec_pair(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int n1, int nw,
                   const float *x, const cu_xnorm *xn, int n, bool *done, wk_error *err) {
  *done = false;
  if (c->mv_pair_off || n != 1 || n1 < 1 || n1 >= nw || nw > 3) return WICK_OK;
  const int t1 = ws[0]->type, cols = ws[0]->cols;
  if ((t1 != WK_Q4_K && t1 != WK_Q5_K) || cols > 8192 || cols % 256 || c->mv_wide == WIDE_OFF ||
      c->mv_s11)
    return WICK_OK;
  for (int i = 0; i < nw; i++)
    if (ws[i]->type != (i < n1 ? t1 : WK_Q6_K) || ws[i]->cols != cols) return WICK_OK;
  if (kernel_for(c, t1) != KER_MVR || kernel_for(c, WK_Q6_K) != KER_MVR) return WICK_OK;
  mv_jobs j1 = {}, j2 = {};
  for (int i = 0; i < nw; i++) {
    mv_jobs *js = i < n1 ? &j1 : &j2;
    js->j[js->n++] = {ws[i]->d, ws[i]->row_bytes, ws[i]->rows, 0, ys[i]};
  }
  set_norm(&j1, xn), set_norm(&j2, xn);
  j1.mvr = j2.mvr = c->mv_mvr;
  j1.pf = j2.pf = c->mv_pf;
  cudaError_t e = t1 == WK_Q4_K ? launch_pair<WK_Q4_K>(c, j1, j2, cols, x)
                                : launch_pair<WK_Q5_K>(c, j1, j2, cols, x);
  if (e == cudaErrorInvalidValue) {  // the caller launches the runs apart
    cudaGetLastError();
    return WICK_OK;
  }
  CK(e);
  CK_LAUNCH();
  *done = true;
  return WICK_OK;
}

// Every kernel but v4 fuses gate/up (launch_glu).
bool cu_matvec_glu_ok(const cu_ctx *c, const cu_weight *wg, const cu_weight *wu, int n) {
  int k = kernel_for(c, wg->type);
  return k >= 0 && k != KER_V4 && !c->mv_glu_off && n >= 1 && n <= c->mv_max_tokens &&
         wg->type == wu->type && wg->rows == wu->rows && wg->cols == wu->cols && wg->row_bytes == wu->row_bytes &&
         wg->cols % 32 == 0;
}

template <int T>
static cudaError_t launch_glu(cu_ctx *c, const cu_weight *wg, const cu_weight *wu, const float *x,
                              const cu_xnorm *xn, int n, float *g, int act) {
  mv_jobs js = {};
  js.n = 2;
  int k = pick_kernel<T>(c);
  if (k == KER_MVS || k == KER_MVR) {
    js.j[0] = {wg->d, wg->row_bytes, wg->rows, 0, g};
    js.j[1] = {wu->d, wu->row_bytes, wu->rows, 0, NULL};
    set_norm(&js, xn);
    if (k == KER_MVR) return launch_mvr<T, true>(c, js, wg->cols, x, n, 0.0f, act);
    return launch_mvs<T, true>(c, js, wg->cols, x, n, 0.0f, act);
  }
  if constexpr (mvq_has<T>::value) {
    if (xn) return cudaErrorNotSupported;
    constexpr int R = mvq_cfg<T>::R, NT = mvq_cfg<T>::NT;
    js.j[0] = {wg->d, wg->row_bytes, wg->rows, cu_div_up(wg->rows, R / 2), g};
    js.j[1] = {wu->d, wu->row_bytes, wu->rows, 0, NULL};
    return cu_launch(c->pdl, c->st, dim3(js.j[0].nblk, n), dim3(NT), 0,
                     k_matvec_q8<T, R, NT, true>, js, wg->cols, x, 0.0f, act);
  }
  return cudaErrorNotSupported;
}

int cu_matvec_glu(cu_ctx *c, const cu_weight *wg, const cu_weight *wu, const float *x,
                  const cu_xnorm *xn, int n, float *g, int act, wk_error *err) {
  if (!cu_matvec_glu_ok(c, wg, wu, n))
    return cu_fail(err, WICK_ERR_INVALID, "cuda: gate/up of types %d/%d, %dx%d/%dx%d, %d tokens "
                   "cannot take the fused gated matrix-vector kernel", wg->type, wu->type, wg->rows,
                   wg->cols, wu->rows, wu->cols, n);
  cudaError_t e = cudaSuccess;
#define WK_CASE_(t)                                   \
  case t:                                             \
    e = launch_glu<t>(c, wg, wu, x, xn, n, g, act);   \
    break;
  switch (wg->type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: return type_error(wg, err);
  }
#undef WK_CASE_
  if (e == cudaErrorNotSupported)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: type %d: only the streamed gate/up kernel "
                   "takes a folded RMSNorm (this context picks v5)", wg->type);
  CK(e);
  CK_LAUNCH();
  return WICK_OK;
}

int cu_matvec(cu_ctx *c, const cu_weight *w, const float *x, int n, float *y, float beta,
              wk_error *err) {
  return cu_matvec_multi(c, &w, &y, 1, x, NULL, n, beta, err);
}

int cu_embed(cu_ctx *c, const cu_weight *w, const int32_t *tok, int n, float scale, float *x,
             wk_error *err) {
  dim3 grid(cu_div_up(w->cols / 32, 128), n);
  cudaError_t e = cudaSuccess;
#define WK_CASE_(t)                                                                         \
  case t:                                                                                   \
    e = cu_launch(c->pdl, c->st, grid, dim3(128), 0, k_embed<t>, w->d, w->row_bytes, w->rows, \
                  w->cols, tok, scale, x);                                                  \
    break;
  switch (w->type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: return type_error(w, err);
  }
#undef WK_CASE_
  CK(e);
  CK_LAUNCH();
  return WICK_OK;
}

int cu_dequant_f16(cu_ctx *c, const cu_weight *w, int r0, int r1, __half *out, wk_error *err) {
  cudaError_t e = cudaSuccess;
#define WK_CASE_(t)                                    \
  case t:                                              \
    e = deq_f16<t>(w, r0, r1, out, 0, c->st);          \
    break;
  switch (w->type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: return type_error(w, err);
  }
#undef WK_CASE_
  CK(e);
  return WICK_OK;
}

// Y (n x rows, row-major) = X (n x cols) . W^T: in cuBLAS's column-major
// terms C (rows x n) = op(A) B with A = W stored as (cols x rows).
static int gemm(cu_ctx *c, const void *W, cudaDataType wt, int rows, int cols, const void *X,
                int n, float *y, int ldy, float beta, wk_error *err) {
  float alpha = 1.0f;
  CK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, W, wt, cols, X, wt,
                  cols, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return WICK_OK;
}

int cu_matmul(cu_ctx *c, const cu_weight *w, const float *x, int n, float *y, float beta,
              wk_error *err) {
  if (n <= c->mv_max_tokens) return cu_matvec(c, w, x, n, y, beta, err);
  long nx = (long)n * w->cols;
  if ((size_t)nx > c->xh_elems)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: %ld activations exceed the %zu-element buffer", nx,
                   c->xh_elems);
  // f16 activations (11-bit significands) for every type; BF16 weights are
  // converted to f16 as the quantized ones are, rather than running the GEMM
  // with bf16 activations (8-bit significands).
  if (int st = cu_to_f16(c, x, c->xh, nx, err)) return st;
  return cu_matmul_xh(c, w, n, y, beta, err);
}

int cu_to_f16(cu_ctx *c, const float *x, __half *y, long n, wk_error *err) {
  k_to_f16<<<cu_div_up(n, 256), 256, 0, c->st>>>(x, y, n);
  CK_LAUNCH();
  return WICK_OK;
}

int cu_matmul_xh(cu_ctx *c, const cu_weight *w, int n, float *y, float beta, wk_error *err) {
  if ((size_t)n * w->cols > c->xh_elems)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: %d x %d activations exceed the f16 buffer", n, w->cols);
  if (w->type == WK_F16)
    return gemm(c, w->d, CUDA_R_16F, w->rows, w->cols, c->xh, n, y, w->rows, beta, err);
  if (c->mmq && cu_mmq_type(w->type)) {  // the partial sums in the scratch, as floats
    float *part = (float *)c->wscratch;
    const size_t pf = c->wscratch_elems / 2;
    cudaError_t e = w->type == WK_Q4_K
                        ? mmq_launch<WK_Q4_K>(w->d, w->row_bytes, w->rows, w->cols, c->xh, n, y,
                                              beta, part, pf, c->st, c->mmq_blocks, 0,
                                              c->pdl != 0)
                        : mmq_launch<WK_Q6_K>(w->d, w->row_bytes, w->rows, w->cols, c->xh, n, y,
                                              beta, part, pf, c->st, c->mmq_blocks, 0,
                                              c->pdl != 0);
    if (e != cudaErrorNotSupported) {
      CK(e);
      return WICK_OK;
    }
  }
  long chunk = (long)(c->wscratch_elems / (size_t)w->cols);
  if (chunk < 1) return cu_fail(err, WICK_ERR_RANGE, "cuda: GEMM scratch smaller than one row");
  if (chunk < w->rows && chunk >= 256) chunk -= chunk % 256;  // pieces of whole GEMM tiles
  for (int r0 = 0; r0 < w->rows; r0 += (int)chunk) {
    int r1 = r0 + (int)chunk < w->rows ? r0 + (int)chunk : w->rows;
    int st = cu_dequant_f16(c, w, r0, r1, c->wscratch, err);
    if (st) return st;
    st = gemm(c, c->wscratch, CUDA_R_16F, r1 - r0, w->cols, c->xh, n, y + r0, w->rows, beta, err);
    if (st) return st;
  }
  return WICK_OK;
}
