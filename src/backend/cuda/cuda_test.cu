// Test and benchmark entry points of the CUDA kernels (see cuda_test.h).
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_test.cuh"
#include "backend/cuda/deq_f16.cuh"
#include "backend/cuda/internal.cuh"
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mvr.cuh"
#include "backend/cuda/mvt.cuh"
#include "backend/cuda/mvs.cuh"
#include "backend/cuda/quant.cuh"

extern "C" {
#include "backend/cuda/cuda_test.h"
#include "base/fp.h"
}

// Path 9: one plain launch of the register-streamed kernel at the type's
// shape (mvr_cfg), for every type it has a format for (mvr_can).
template <int T>
static cudaError_t test_mvr(const uint8_t *w, size_t rb, int rows, int cols, const float *x, int n,
                            float *y, cudaStream_t st) {
  if constexpr (mvr_can<T>::value) {
    mv_jobs js = {};
    js.j[0] = {w, rb, rows, 0, y};
    js.n = 1;
    using C = mvr_cfg<T, false>;
    return mvr_launch<T, C::NT, C::RW, C::D, false>(js, cols, x, n, 0.0f, 0, false, st);
  }
  return cudaErrorNotSupported;
}

// Path 10: the register-streamed kernel with the wide K-quant formats
// (mvr_w4.cuh: 4 lanes a Q4_K / Q5_K super-block) over jobs js.
// Several tokens: 2, 4 or 8 a block (512 threads, a row a unit), as matvec.cu launches them.
template <int T, bool GLU, bool ALT = false>
static cudaError_t test_mvr_w4(const mv_jobs &js, int cols, const float *x, int n, float beta,
                               int act, bool pdl, cudaStream_t st) {
  if constexpr (T == WK_Q4_K || T == WK_Q5_K) {
    using C = mvr_w4_cfg<T, GLU, ALT>;
    using F = mvr_wide4<T>;
    if (n >= 5) return mvr_launch<T, 512, 1, C::D, GLU, F, 8>(js, cols, x, n, beta, act, pdl, st);
    if (n >= 3) return mvr_launch<T, 512, 1, C::D, GLU, F, 4>(js, cols, x, n, beta, act, pdl, st);
    if (n == 2) return mvr_launch<T, 512, 1, C::D, GLU, F, 2>(js, cols, x, n, beta, act, pdl, st);
    return mvr_launch<T, C::NT, C::RW, C::D, GLU, F>(js, cols, x, n, beta, act, pdl, st);
  }
  return cudaErrorNotSupported;
}
// Paths 10 and 11 over jobs js: the wide K-quant formats (Q4_K, Q5_K) and
// the FP8 E4M3 format in 16-byte pieces (mvr_fp8w.cuh; rows of a multiple
// of 512 columns).
template <bool GLU>
static int run_wide(int path, int type, const mv_jobs &js, int cols, const float *x, int n, int act,
                    bool pdl, cudaStream_t st, wk_error *err) {
  cudaError_t e = cudaErrorNotSupported;
  if (path == 10)
    e = type == WK_Q4_K   ? test_mvr_w4<WK_Q4_K, GLU>(js, cols, x, n, 0.0f, act, pdl, st)
        : type == WK_Q5_K ? test_mvr_w4<WK_Q5_K, GLU>(js, cols, x, n, 0.0f, act, pdl, st)
                          : cudaErrorNotSupported;
  else if (type == WK_FP8_E4M3)
    e = mvr_fp8w_launch<WK_FP8_E4M3, GLU>(js, cols, x, n, 0.0f, act, pdl, st);
  if (e == cudaErrorNotSupported || (path == 11 && e == cudaErrorInvalidValue))
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "path %d: no wide format for type %d, %d columns",
                   path, type, cols);
  CK(e);
  CK_LAUNCH();
  return WICK_OK;
}

// The matrix-vector kernels of path 0, 3, 4, 6, 12 or 13 (cuda_test.h): 12
// and 13 are path 6 without the tensor-core kernel and with it at every n
// (up to 8 tokens a block).
static void set_path(cu_ctx *c, int path) {
  const bool reg = path == 6 || path == 12 || path == 13;
  c->mv_f32x = path == 3 ? MV_F32X : path == 4 ? MV_STREAM : reg ? MV_REG : MV_INT8;
  c->mv_tc = path == 12 ? 0 : 31;
  c->mv_tc_min = path == 13 ? 1 : 0;
  c->mv_tc_ntok = path == 13 ? 8 : 0;
}

extern "C" int cuda_test_matmul(int type, const void *w, int rows, int cols, const float *x, int n,
                                float *y, int path, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  size_t rb = wk_row_size(type, cols);
  uint8_t *dw;
  float *dx, *dy, *dt = NULL;
  TRY(b.alloc(&dw, rb * rows + 16, err));  // readable to the next 16-byte boundary
  TRY(b.alloc(&dx, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * n * rows, err));
  CK(cudaMemcpy(dw, w, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x, sizeof(float) * n * cols, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));  // NaN
  cu_weight cw = {dw, type, rows, cols, rb};
  b.c.mv_max_tokens = 16;
  b.c.xpre_bytes = cu_pre_bytes(n, cols);  // x rounded once for the batched products
  TRY(b.alloc(&b.c.xpre, b.c.xpre_bytes, err));
  if (path == 1 || path == 14 || path == 15 || path == 16) {
    b.c.mv_max_tokens = 0;
    b.c.mmq = path != 15;
    b.c.mmq_blocks = path == 16 ? 4 : 0;  // 16: the fused kernel's blocks walking row tiles,
    b.c.pdl = path == 16;                 // by programmatic dependent launch
    b.c.xh_elems = (size_t)n * cols;
    b.c.wscratch_elems = (size_t)cols * (rows > 64 ? rows / 3 + 1 : rows);  // several chunks
    // path 14: a scratch so small that the fused kernel's partial sums take
    // several pieces of rows
    if (path == 14) b.c.wscratch_elems = (size_t)cols * 8;
    TRY(b.alloc(&b.c.xh, b.c.xh_elems * sizeof(__half), err));
    TRY(b.alloc(&b.c.wscratch, b.c.wscratch_elems * sizeof(__half), err));
    TRY(cu_matmul(&b.c, &cw, dx, n, dy, 0.0f, err));
  } else if ((path == 2 || path == 7) && n == 1 && rows >= 3) {  // three matrices, one launch
    b.c.mv_f32x = path == 7 ? MV_REG : MV_INT8;
    int r1 = rows / 3, r2 = rows / 2;
    cu_weight w3[3] = {{dw, type, r1, cols, rb}, {dw + rb * r1, type, r2 - r1, cols, rb},
                       {dw + rb * r2, type, rows - r2, cols, rb}};
    const cu_weight *wp[3] = {&w3[0], &w3[1], &w3[2]};
    float *yp[3] = {dy, dy + r1, dy + r2};
    TRY(cu_matvec_multi(&b.c, wp, yp, 3, dx, NULL, 1, 0.0f, err));
  } else if (path == 9) {
    cudaError_t e = cudaErrorNotSupported;
#define WK_CASE_(t)                                                  \
  case t:                                                            \
    e = test_mvr<t>(dw, rb, rows, cols, dx, n, dy, b.c.st);          \
    break;
    switch (type) {
      WK_CUDA_TYPES(WK_CASE_)
      default: break;
    }
#undef WK_CASE_
    if (e == cudaErrorNotSupported)
      return cu_fail(err, WICK_ERR_UNSUPPORTED, "path 9: no register-streamed kernel for type %d",
                     type);
    CK(e);
    CK_LAUNCH();
  } else if (path == 10 || path == 11) {
    mv_jobs js = {};
    js.j[0] = {dw, rb, rows, 0, dy};
    js.n = 1;
    TRY(run_wide<false>(path, type, js, cols, dx, n, 0, false, b.c.st, err));
  } else if (path == 8) {  // y = W x, then y = W x + 1 y: 2 W x through the beta of path 6
    b.c.pdl = b.c.pdl_v4 = 1, b.c.mv_f32x = MV_REG;
    TRY(cu_matvec(&b.c, &cw, dx, n, dy, 0.0f, err));
    TRY(cu_matvec(&b.c, &cw, dx, n, dy, 1.0f, err));
  } else if (path == 5) {  // y = W (W x): two launches, the second dependent on the first
    if (rows != cols)
      return cu_fail(err, WICK_ERR_INVALID, "path 5 needs a square matrix (%dx%d)", rows, cols);
    TRY(b.alloc(&dt, sizeof(float) * n * rows, err));
    CK(cudaMemset(dt, 0xff, sizeof(float) * n * rows));
    b.c.pdl = b.c.pdl_v4 = 1, b.c.mv_f32x = MV_STREAM;
    TRY(cu_matvec(&b.c, &cw, dx, n, dt, 0.0f, err));
    TRY(cu_matvec(&b.c, &cw, dt, n, dy, 0.0f, err));
  } else {
    set_path(&b.c, path);
    TRY(cu_matvec(&b.c, &cw, dx, n, dy, 0.0f, err));
  }
  CK(cudaMemcpy(y, dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

// Counts the programmatic edges of g.
static int count_prog_edges(cudaGraph_t g, int *count, wk_error *err) {
  size_t ne = 0;
  CK(cudaGraphGetEdges(g, NULL, NULL, NULL, &ne));
  std::vector<cudaGraphNode_t> from(ne), to(ne);
  std::vector<cudaGraphEdgeData> ed(ne);
  if (ne) CK(cudaGraphGetEdges(g, from.data(), to.data(), ed.data(), &ne));
  *count = 0;
  for (size_t i = 0; i < ne; i++) *count += ed[i].type == cudaGraphDependencyTypeProgrammatic;
  return WICK_OK;
}

extern "C" int cuda_test_matmul_norm(int type, const void *w, int rows, int cols, const float *x,
                                     int n, const float *nw, float eps, int path, int graph,
                                     float *y, int *prog_edges, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  b.c.mv_max_tokens = 16;
  b.c.xpre_bytes = cu_pre_bytes(n, cols);  // x rounded once for the batched products
  TRY(b.alloc(&b.c.xpre, b.c.xpre_bytes, err));
  b.c.pdl = b.c.pdl_v4 = 1;
  set_path(&b.c, path);
  size_t rb = wk_row_size(type, cols);
  uint8_t *dw;
  float *dtab, *dx, *dy, *dn;
  int32_t *dids;
  TRY(b.alloc(&dw, rb * rows + 16, err));
  TRY(b.alloc(&dtab, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dx, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * n * rows, err));
  TRY(b.alloc(&dn, sizeof(float) * cols, err));
  TRY(b.alloc(&dids, sizeof(int32_t) * n, err));
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; i++) ids[i] = i;
  CK(cudaMemcpy(dw, w, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dtab, x, sizeof(float) * n * cols, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dn, nw, sizeof(float) * cols, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dids, ids.data(), sizeof(int32_t) * n, cudaMemcpyHostToDevice));
  CK(cudaMemset(dx, 0xff, sizeof(float) * n * cols));
  CK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));  // NaN
  cu_weight cw = {dw, type, rows, cols, rb}, tab = {(const uint8_t *)dtab, WK_F32, n, cols,
                                                    sizeof(float) * cols};
  cu_xnorm xn = {dn, eps};
  const cu_weight *wp = &cw;
  *prog_edges = 0;
  if (path == 10 || path == 11) {  // the wide formats after the embedding, dependent launch
    if (graph) return cu_fail(err, WICK_ERR_UNSUPPORTED, "path %d: no graph", path);
    mv_jobs js = {};
    js.j[0] = {dw, rb, rows, 0, dy};
    js.n = 1, js.nw = dn, js.eps = eps;
    TRY(cu_embed(&b.c, &tab, dids, n, 1.0f, dx, err));
    TRY(run_wide<false>(path, type, js, cols, dx, n, 0, true, b.c.st, err));
  } else if (!graph) {
    TRY(cu_embed(&b.c, &tab, dids, n, 1.0f, dx, err));
    TRY(cu_matvec_multi(&b.c, &wp, &dy, 1, dx, &xn, n, 0.0f, err));
  } else {
    cudaGraphExec_t ge;
    TRY(capture_graph(
        b.c.st,
        [&] {
          int st = cu_embed(&b.c, &tab, dids, n, 1.0f, dx, err);
          return st ? st : cu_matvec_multi(&b.c, &wp, &dy, 1, dx, &xn, n, 0.0f, err);
        },
        [&](cudaGraph_t g) { return count_prog_edges(g, prog_edges, err); }, &ge, err));
    cudaError_t e = cudaGraphLaunch(ge, b.c.st);
    if (e == cudaSuccess) e = cudaMemsetAsync(dy, 0xff, sizeof(float) * n * rows, b.c.st);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, b.c.st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(b.c.st);
    cudaGraphExecDestroy(ge);
    CK(e);
  }
  CK(cudaMemcpy(y, dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

extern "C" int cuda_test_matvec_glu(int type, const void *wg, const void *wu, int rows, int cols,
                                    const float *x, int n, const float *nw, float eps, int act,
                                    int path, float *y, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  b.c.mv_max_tokens = 16;
  b.c.xpre_bytes = cu_pre_bytes(n, cols);  // x rounded once for the batched products
  TRY(b.alloc(&b.c.xpre, b.c.xpre_bytes, err));
  set_path(&b.c, path);
  size_t rb = wk_row_size(type, cols);
  uint8_t *dg, *du;
  float *dx, *dy, *dn = NULL;
  TRY(b.alloc(&dg, rb * rows + 16, err));
  TRY(b.alloc(&du, rb * rows + 16, err));
  TRY(b.alloc(&dx, sizeof(float) * n * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * n * rows, err));
  CK(cudaMemcpy(dg, wg, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(du, wu, rb * rows, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x, sizeof(float) * n * cols, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, sizeof(float) * n * rows));  // NaN
  if (nw) {
    TRY(b.alloc(&dn, sizeof(float) * cols, err));
    CK(cudaMemcpy(dn, nw, sizeof(float) * cols, cudaMemcpyHostToDevice));
  }
  cu_weight cg = {dg, type, rows, cols, rb}, cu = {du, type, rows, cols, rb};
  cu_xnorm xn = {dn, eps};
  if (path == 10 || path == 11) {
    mv_jobs js = {};
    js.j[0] = {dg, rb, rows, 0, dy};
    js.j[1] = {du, rb, rows, 0, NULL};
    js.n = 2, js.nw = dn, js.eps = eps;
    TRY(run_wide<true>(path, type, js, cols, dx, n, act, false, b.c.st, err));
  } else {
    TRY(cu_matvec_glu(&b.c, &cg, &cu, dx, nw ? &xn : NULL, n, dy, act, err));
  }
  CK(cudaMemcpy(y, dy, sizeof(float) * n * rows, cudaMemcpyDeviceToHost));
  return WICK_OK;
}

extern "C" int cuda_test_matvec_pair(int type, const void *w, int ra, int rb, const void *w6,
                                     int r6, int cols, const float *x, const float *nw, float eps,
                                     int split, float *y, int *paired, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  set_path(&b.c, 6);
  b.c.mv_max_tokens = 16;
  b.c.pdl = 1;
  b.c.mv_pair_off = split;
  const size_t rq = wk_row_size(type, cols), r6b = wk_row_size(WK_Q6_K, cols);
  uint8_t *dw, *d6;
  float *dx, *dy, *dn = NULL;
  TRY(b.alloc(&dw, rq * (ra + rb) + 16, err));
  TRY(b.alloc(&d6, r6b * r6 + 16, err));
  TRY(b.alloc(&dx, sizeof(float) * cols, err));
  TRY(b.alloc(&dy, sizeof(float) * (ra + rb + r6), err));
  CK(cudaMemcpy(dw, w, rq * (ra + rb), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d6, w6, r6b * r6, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x, sizeof(float) * cols, cudaMemcpyHostToDevice));
  CK(cudaMemset(dy, 0xff, sizeof(float) * (ra + rb + r6)));  // NaN
  if (nw) {
    TRY(b.alloc(&dn, sizeof(float) * cols, err));
    CK(cudaMemcpy(dn, nw, sizeof(float) * cols, cudaMemcpyHostToDevice));
  }
  cu_weight w3[3] = {{dw, type, ra, cols, rq}, {dw + rq * ra, type, rb, cols, rq},
                     {d6, WK_Q6_K, r6, cols, r6b}};
  const cu_weight *wp[3] = {&w3[0], &w3[1], &w3[2]};
  float *yp[3] = {dy, dy + ra, dy + ra + rb};
  cu_xnorm xn = {dn, eps};
  bool done = false;
  TRY(cu_matvec_pair(&b.c, wp, yp, 2, 3, dx, nw ? &xn : NULL, 1, &done, err));
  if (!done) {
    TRY(cu_matvec_multi(&b.c, wp, yp, 2, dx, nw ? &xn : NULL, 1, 0.0f, err));
    TRY(cu_matvec_multi(&b.c, wp + 2, yp + 2, 1, dx, nw ? &xn : NULL, 1, 0.0f, err));
  }
  *paired = done;
  CK(cudaMemcpy(y, dy, sizeof(float) * (ra + rb + r6), cudaMemcpyDeviceToHost));
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

// The token facts of cuda_test_attn's batch (pos, tseq, bt_off, bt) on the
// device, and the cu_attn_shape.
static int attn_setup(dev_bufs &b, const cuda_test_attn *a, cu_meta *m, cu_attn_shape *s,
                      wk_error *err) {
  int ns = a->n_seqs > 0 ? a->n_seqs : 1, n = ns * a->n_new;
  int nb = (a->n_ctx + a->block_size - 1) / a->block_size;
  std::vector<int32_t> meta(2 * (size_t)n + ns + (size_t)ns * nb);
  for (int t = 0; t < n; t++) meta[t] = a->n_ctx - a->n_new + t % a->n_new, meta[n + t] = t / a->n_new;
  for (int i = 0; i < ns; i++) meta[2 * n + i] = i * nb;
  for (int j = 0; j < ns * nb; j++) meta[2 * n + ns + j] = a->blocks[j];
  int32_t *dm;
  TRY(b.alloc(&dm, meta.size() * 4, err));
  CK(cudaMemcpy(dm, meta.data(), meta.size() * 4, cudaMemcpyHostToDevice));
  *m = {};
  m->pos = dm, m->tseq = dm + n, m->bt_off = dm + 2 * n, m->bt = dm + 2 * n + ns;
  *s = {};
  s->n_heads = a->n_heads, s->n_kv_heads = a->n_kv, s->head_dim = a->hd;
  s->block_size = a->block_size, s->scale = a->scale, s->softcap = a->softcap, s->window = a->window;
  return WICK_OK;
}

static int attn_run(dev_bufs &b, const cuda_test_attn *a, const cu_attn_shape *s, const cu_meta *m,
                    const float *dq, const __half *dk, const __half *dv, float *dout, float *dpart,
                    wk_error *err) {
  int n = (a->n_seqs > 0 ? a->n_seqs : 1) * a->n_new;
  b.c.attn_variant = a->variant > 0 ? a->variant : 0;  // kernels 0 and 3: cu_ctx.attn_variant
  if (a->kernel == 1)
    return cu_flash_attention(&b.c, s, m, n, dq, dk, dv, dout, NULL, a->variant, err);
  b.c.attn_warp = a->kernel == 2;
  b.c.attn_cluster_off = a->kernel == 4;
  if ((a->kernel == 0 || a->kernel == 4) && !b.c.attn_cnt) {  // the group kernel's in-kernel merge
    b.c.attn_cnt_n = (size_t)n * s->n_kv_heads;
    TRY(b.alloc(&b.c.attn_cnt, b.c.attn_cnt_n * sizeof(unsigned), err));
    CK(cudaMemset(b.c.attn_cnt, 0, b.c.attn_cnt_n * sizeof(unsigned)));
  }
  return cu_attention_split(&b.c, s, m, n, dq, dk, dv, dout, a->splits, dpart, NULL, err);
}

extern "C" int cuda_test_attn_clusters(const cuda_test_attn *a) {
  cu_ctx c = {};
  c.attn_variant = a->variant > 0 ? a->variant : 0;
  static unsigned dummy;  // only its presence is asked: the kernel would merge itself
  c.attn_cnt = &dummy, c.attn_cnt_n = (size_t)1 << 30;
  cu_attn_shape s = {};
  s.n_heads = a->n_heads, s.n_kv_heads = a->n_kv, s.head_dim = a->hd, s.block_size = a->block_size;
  int n = (a->n_seqs > 0 ? a->n_seqs : 1) * a->n_new;
  return cu_attn_decode_clusters(&c, &s, n, a->splits) ? 1 : 0;
}

extern "C" int cuda_test_attention(const cuda_test_attn *a, const float *q, const float *k,
                                   const float *v, float *out, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  int ns = a->n_seqs > 0 ? a->n_seqs : 1, n = ns * a->n_new;
  int nb = (a->n_ctx + a->block_size - 1) / a->block_size;
  size_t kvd = (size_t)a->n_kv * a->hd, pool = (size_t)a->n_pool * a->block_size * kvd;
  std::vector<uint16_t> hk(pool, 0x7e00), hv(pool, 0x7e00);  // NaN in unused slots
  for (int i = 0; i < ns; i++)
    for (int p = 0; p < a->n_ctx; p++) {
      size_t slot = (size_t)a->blocks[i * nb + p / a->block_size] * a->block_size + p % a->block_size;
      const float *kr = k + ((size_t)i * a->n_ctx + p) * kvd, *vr = v + ((size_t)i * a->n_ctx + p) * kvd;
      for (size_t e = 0; e < kvd; e++) {
        hk[slot * kvd + e] = wk_f32_to_f16(kr[e]);
        hv[slot * kvd + e] = wk_f32_to_f16(vr[e]);
      }
    }
  cu_meta m;
  cu_attn_shape s;
  TRY(attn_setup(b, a, &m, &s, err));
  __half *dk, *dv;
  float *dq, *dout, *dpart;
  size_t qn = (size_t)n * a->n_heads * a->hd;
  TRY(b.alloc(&dk, pool * 2, err));
  TRY(b.alloc(&dv, pool * 2, err));
  TRY(b.alloc(&dq, qn * 4, err));
  TRY(b.alloc(&dout, qn * 4, err));
  TRY(b.alloc(&dpart, (size_t)n * a->n_heads * a->splits * cu_part_stride(a->hd) * 4, err));
  CK(cudaMemcpy(dk, hk.data(), pool * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), pool * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dq, q, qn * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dout, 0xff, qn * 4));
  TRY(attn_run(b, a, &s, &m, dq, dk, dv, dout, dpart, err));
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
  cudaGraphExec_t ge;
  TRY(capture_graph(
      b.c.st,
      [&] {
        int st = WICK_OK;
        for (int i = 0; i < iters && !st; i++) st = launch(i);
        return st;
      },
      &ge, err));
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
    TRY(b.alloc(&dw[i], wb + 16, err));
    CK(cudaMemcpy(dw[i], w, wb, cudaMemcpyHostToDevice));
  }
  TRY(b.alloc(dx, sizeof(float) * cols, err));
  TRY(b.alloc(dy, sizeof(float) * rows, err));
  std::vector<float> hx(cols);
  for (int i = 0; i < cols; i++) hx[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  CK(cudaMemcpy(*dx, hx.data(), sizeof(float) * cols, cudaMemcpyHostToDevice));
  return WICK_OK;
}

// The streamed kernel at one (threads, rows a warp) shape.
template <int T, int NT, int RW>
static cudaError_t bench_mvs_at(const uint8_t *w, size_t rb, int rows, int cols, const float *x,
                                float *y, bool q8, mvs_opts o, cudaStream_t st) {
  mv_jobs js = {};
  js.j[0] = {w, rb, rows, 0, y};
  js.n = 1;
  if constexpr (mvq_has<T>::value)
    if (q8) return mvs_launch<T, NT, RW, false, true>(js, cols, x, 1, 0.0f, 0, o, st);
  return mvs_launch<T, NT, RW, false, false>(js, cols, x, 1, 0.0f, 0, o, st);
}

// Shapes 1..3 of cuda_mv_cfg, for the types the sweep covers.
template <int T>
static cudaError_t bench_mvs(int shape, const uint8_t *w, size_t rb, int rows, int cols,
                             const float *x, float *y, bool q8, mvs_opts o, cudaStream_t st) {
  constexpr bool swept = T == WK_F16 || T == WK_Q4_K || T == WK_Q6_K || T == WK_Q8_0 ||
                         T == WK_FP8_E4M3;
  if (shape == 0)
    return bench_mvs_at<T, mvs_cfg<T>::NT, mvs_cfg<T>::RW>(w, rb, rows, cols, x, y, q8, o, st);
  if constexpr (swept) {
    if (shape == 1) return bench_mvs_at<T, 256, 1>(w, rb, rows, cols, x, y, q8, o, st);
    if (shape == 2) return bench_mvs_at<T, 128, 4>(w, rb, rows, cols, x, y, q8, o, st);
    if (shape == 3) return bench_mvs_at<T, 512, 2>(w, rb, rows, cols, x, y, q8, o, st);
  }
  return cudaErrorNotSupported;
}

// The register-streamed kernel, shape 0 its (threads, rows a step, items in
// flight) for the type, 1 (1024, 1, 1), 2 (512, 2, 1), 3 (768, 1, 2), 4 the
// wide format at its shape (Q4_K, Q5_K: mvr_w4.cuh), 5 at its ALT shape, 6
// FP8 E4M3 in 16-byte pieces (mvr_fp8w.cuh); FP8 at (1024, 1, D) for D 2, 3,
// 5 (7, 8, 9).
template <int T>
static cudaError_t bench_mvr(int shape, const uint8_t *w, size_t rb, int rows, int cols,
                             const float *x, float *y, bool pdl, cudaStream_t st) {
  if constexpr (mvr_can<T>::value) {
    mv_jobs js = {};
    js.j[0] = {w, rb, rows, 0, y};
    js.n = 1;
    js.mvr = mvr_opts_env();
    using C = mvr_cfg<T, false>;
    if (shape == 0)
      return mvr_launch<T, C::NT, C::RW, C::D, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 1) return mvr_launch<T, 1024, 1, 1, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 2) return mvr_launch<T, 512, 2, 1, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 3) return mvr_launch<T, 768, 1, 2, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 4) return test_mvr_w4<T, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 5) return test_mvr_w4<T, false, true>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if (shape == 6) return mvr_fp8w_launch<T, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    if constexpr (mvt_has<T>::value) {  // the tensor-core kernel: its shape, 256 threads
      const char *pf = getenv("WICK_CUDA_PF");  // the L2 prefetch, items (comparison)
      js.pf = pf ? atoi(pf) : -1;
      if (shape == 10) return mvt_launch_n<T, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
      if (shape == 11) return mvt_launch<T, 256, 1, false, 1>(js, cols, x, 1, 0.0f, 0, pdl, st);
    }
    if constexpr (T == WK_FP8_E4M3 || T == WK_FP8_E5M2) {  // items in flight, FP8 only
      if (shape == 7) return mvr_launch<T, 1024, 1, 2, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
      if (shape == 8) return mvr_launch<T, 1024, 1, 3, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
      if (shape == 9) return mvr_launch<T, 1024, 1, 5, false>(js, cols, x, 1, 0.0f, 0, pdl, st);
    }
  }
  return cudaErrorNotSupported;
}

static int bench_one(dev_bufs &b, int type, const uint8_t *w, size_t rb, int rows, int cols,
                     const float *x, float *y, const cuda_mv_cfg &k, wk_error *err) {
  if (k.mode < 2) {
    cu_weight cw = {w, type, rows, cols, rb};
    b.c.mv_f32x = k.mode == 0 ? MV_INT8 : MV_F32X;
    b.c.pdl = b.c.pdl_v4 = k.pdl;
    return cu_matvec(&b.c, &cw, x, 1, y, 0.0f, err);
  }
  cudaError_t e = cudaErrorNotSupported;
  mvs_opts o = {k.chunk, k.stages, k.pdl != 0};
#define WK_CASE_(t)                                                                          \
  case t:                                                                                    \
    if (!o.chunk) o.chunk = mvs_cfg<t>::CHUNK;                                               \
    if (!o.stages) o.stages = mvs_cfg<t>::STAGES;                                            \
    if (k.mode == 4)                                                                         \
      e = bench_mvr<t>(k.shape, w, rb, rows, cols, x, y, k.pdl != 0, b.c.st);                \
    else                                                                                     \
      e = bench_mvs<t>(k.shape, w, rb, rows, cols, x, y, k.mode == 2, o, b.c.st);            \
    break;
  switch (type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: break;
  }
#undef WK_CASE_
  if (e == cudaErrorNotSupported || e == cudaErrorInvalidValue)  // no kernel, or too big for an SM
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "bench: no kernel for type %d shape %d", type, k.shape);
  CK(e);
  CK_LAUNCH();
  return WICK_OK;
}

// cu_dequant_f16 at a shape of deq_f16 (-1: the row kernel).
static int dequant_shape(cu_ctx *c, const cu_weight *w, int r0, int r1, __half *out, int shape,
                         wk_error *err) {
  if (shape == 0) return cu_dequant_f16(c, w, r0, r1, out, err);
  cudaError_t e = cudaErrorNotSupported;
#define WK_CASE_(t)                                      \
  case t:                                                \
    e = deq_f16<t, true>(w, r0, r1, out, shape, c->st);  \
    break;
  switch (w->type) {
    WK_CUDA_TYPES(WK_CASE_)
    default: break;
  }
#undef WK_CASE_
  CK(e);
  return WICK_OK;
}

extern "C" int cuda_test_dequant_f16(int type, const void *w, int rows, int cols, int r0, int r1,
                                     int shape, uint16_t *out, wk_error *err) {
  if (!cu_type_supported(type) || cols % 32 || r0 < 0 || r0 > r1 || r1 > rows)
    return cu_fail(err, WICK_ERR_INVALID, "test: type %d, rows [%d, %d) of %d x %d", type, r0, r1,
                   rows, cols);
  dev_bufs b;
  TRY(b.init(err, false));
  size_t rb = wk_row_size(type, cols), n = (size_t)(r1 - r0) * cols;
  const uint8_t *dw;
  __half *dh;
  TRY(b.upload(&dw, (const uint8_t *)w, rb * rows, err));
  TRY(b.alloc(&dh, sizeof(__half) * (n + 64), err));
  CK(cudaMemset(dh, 0xff, sizeof(__half) * (n + 64)));  // NaN, and 64 guard values after
  cu_weight cw = {dw, type, rows, cols, rb};
  TRY(dequant_shape(&b.c, &cw, r0, r1, dh, shape, err));
  CK(cudaStreamSynchronize(b.c.st));
  std::vector<uint16_t> h(n + 64);
  CK(cudaMemcpy(h.data(), dh, sizeof(__half) * (n + 64), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; i++)
    if (h[n + i] != 0xffff)
      return cu_fail(err, WICK_ERR_RANGE, "test: value %d after the output was written", i);
  memcpy(out, h.data(), sizeof(uint16_t) * n);
  return WICK_OK;
}

extern "C" int cuda_bench_matvec(int type, const void *w, int rows, int cols, int iters,
                                 const cuda_mv_cfg *cfg, int ncfg, double *us, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  std::vector<uint8_t *> dw;
  float *dx, *dy;
  TRY(bench_setup(b, type, w, rows, cols, dw, &dx, &dy, err));
  size_t rb = wk_row_size(type, cols);
  __half *dh = NULL;  // mode 5's f16 rows
  for (int c = 0; c < ncfg; c++) {
    us[c] = 0.0;
    if (cfg[c].mode == 5 || cfg[c].mode == 6) {
      if (!dh) TRY(b.alloc(&dh, sizeof(__half) * rows * cols, err));
      int shape = cfg[c].mode == 6 ? -1 : cfg[c].shape;
      auto deq = [&](int i) {
        cu_weight cw = {dw[i % dw.size()], type, rows, cols, rb};
        return dequant_shape(&b.c, &cw, 0, rows, dh, shape, err);
      };
      TRY(deq(0));
      TRY(time_graph(b, iters, deq, &us[c], err));
      continue;
    }
    int st = bench_one(b, type, dw[0], rb, rows, cols, dx, dy, cfg[c], err);  // attributes set
    if (st == WICK_ERR_UNSUPPORTED) continue;
    if (st) return st;
    CK(cudaStreamSynchronize(b.c.st));
    TRY(time_graph(b, iters, [&](int i) {
      return bench_one(b, type, dw[i % dw.size()], rb, rows, cols, dx, dy, cfg[c], err);
    }, &us[c], err));
  }
  return WICK_OK;
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

__global__ void k_fill_attn(__half *h, float *f, size_t n, uint32_t seed) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t x = (uint32_t)i * 2654435761u ^ seed;
  x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
  float v = (float)(x & 0xffff) / 32768.0f - 1.0f;
  if (h) h[i] = __float2half(v);
  if (f) f[i] = v;
}

extern "C" int cuda_bench_attention(const cuda_test_attn *a, int iters, double *us, wk_error *err) {
  dev_bufs b;
  TRY(b.init(err));
  int n = (a->n_seqs > 0 ? a->n_seqs : 1) * a->n_new;
  if (n != a->n_new)
    return cu_fail(err, WICK_ERR_INVALID, "attention bench: one sequence (got %d)", a->n_seqs);
  cu_meta m;
  cu_attn_shape s;
  TRY(attn_setup(b, a, &m, &s, err));
  size_t pool = (size_t)a->n_pool * a->block_size * a->n_kv * a->hd;
  size_t qn = (size_t)n * a->n_heads * a->hd;
  const int copies = a->cold ? 4 : 1;
  __half *dk, *dv;
  float *dq, *dout, *dpart;
  TRY(b.alloc(&dk, pool * 2 * copies, err));
  TRY(b.alloc(&dv, pool * 2 * copies, err));
  TRY(b.alloc(&dq, qn * 4, err));
  TRY(b.alloc(&dout, qn * 4, err));
  TRY(b.alloc(&dpart, (size_t)n * a->n_heads * a->splits * cu_part_stride(a->hd) * 4, err));
  k_fill_attn<<<cu_div_up(pool * copies, 256), 256, 0, b.c.st>>>(dk, NULL, pool * copies, 11);
  k_fill_attn<<<cu_div_up(pool * copies, 256), 256, 0, b.c.st>>>(dv, NULL, pool * copies, 12);
  k_fill_attn<<<cu_div_up(qn, 256), 256, 0, b.c.st>>>(NULL, dq, qn, 13);
  CK_LAUNCH();
  TRY(attn_run(b, a, &s, &m, dq, dk, dv, dout, dpart, err));  // outside the graph: attributes set
  CK(cudaStreamSynchronize(b.c.st));
  return time_graph(b, iters, [&](int i) {
    size_t o = (size_t)(i % copies) * pool;
    return attn_run(b, a, &s, &m, dq, dk + o, dv + o, dout, dpart, err);
  },
                    us, err);
}
