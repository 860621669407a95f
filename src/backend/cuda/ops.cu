// Element-wise and normalization ops: RMSNorm (optionally gathered rows and
// fused residual add), the Q/K/V epilogue (biases, per-head norms, RoPE, KV
// cache write), the gated activations and the logit soft-cap. Each kernel
// lets the next launch start at once and waits for the previous one before
// it touches the activations (programmatic dependent launch, helpers.cuh).
#include "backend/cuda/internal.cuh"

// One block a row; each thread keeps its (at most RN_K) float4s of the row in
// registers, so the row is read once and every load is issued up front.
enum { RN_K = 8 };

__global__ void k_rmsnorm(const float *__restrict__ x, const int32_t *__restrict__ rows,
                          const float *__restrict__ w, float eps, int dim, float *__restrict__ out,
                          int add) {
  __shared__ float scratch[32];
  pdl_launch_next();
  pdl_wait();
  int t = blockIdx.x, nv = dim / 4;
  const float4 *xr = (const float4 *)(x + (size_t)(rows ? rows[t] : t) * dim);
  const float4 *wr = (const float4 *)w;
  float4 *o = (float4 *)(out + (size_t)t * dim);
  float4 v[RN_K];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < RN_K; k++) {
    int i = threadIdx.x + k * blockDim.x;
    v[k] = i < nv ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  ss = block_sum(ss, scratch);
  float r = rsqrtf(ss / (float)dim + eps);
#pragma unroll
  for (int k = 0; k < RN_K; k++) {
    int i = threadIdx.x + k * blockDim.x;
    if (i >= nv) continue;
    float4 g = wr[i], a = v[k];
    float4 res = make_float4(a.x * r * g.x, a.y * r * g.y, a.z * r * g.z, a.w * r * g.w);
    if (add) {
      float4 p = o[i];
      res.x += p.x, res.y += p.y, res.z += p.z, res.w += p.w;
    }
    o[i] = res;
  }
}

int cu_rmsnorm(cu_ctx *c, const float *x, const int32_t *rows, const float *w, float eps, int dim,
               int n, float *out, bool add, wk_error *err) {
  if (n == 0) return WICK_OK;
  int nv = dim / 4;
  int threads = (nv / 4 + 31) / 32 * 32;
  threads = threads < 32 ? 32 : threads > 1024 ? 1024 : threads;
  if (dim % 4 || nv > threads * RN_K)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: rmsnorm of %d values (expected a multiple of 4, <= %d)",
                   dim, 1024 * RN_K * 4);
  CK(cu_launch(c->pdl, c->st, dim3(n), dim3(threads), 0, k_rmsnorm, x, rows, w, eps, dim, out,
               (int)add));
  CK_LAUNCH();
  return WICK_OK;
}

// grid (n tokens, n_heads + 2 * n_kv_heads), block head_dim threads.
__global__ void k_qkv_post(cu_attn_shape a, cu_meta m, float *__restrict__ q,
                           const float *__restrict__ k, const float *__restrict__ v,
                           __half *__restrict__ kc, __half *__restrict__ vc) {
  __shared__ float scratch[32];
  __shared__ float hv[1024];
  pdl_launch_next();
  pdl_wait();
  int t = blockIdx.x, h = blockIdx.y, i = threadIdx.x, hd = a.head_dim;
  int nq = a.n_heads, nkv = a.n_kv_heads;
  size_t slot = (size_t)m.slot[t];
  if (h >= nq + nkv) {  // V head: bias, then into the cache
    int hh = h - nq - nkv;
    float val = v[((size_t)t * nkv + hh) * hd + i];
    if (a.bv) val += a.bv[hh * hd + i];
    vc[(slot * nkv + hh) * hd + i] = __float2half_rn(val);
    return;
  }
  bool isq = h < nq;
  int hh = isq ? h : h - nq;
  const float *src = isq ? q + ((size_t)t * nq + hh) * hd : k + ((size_t)t * nkv + hh) * hd;
  float val = src[i];
  const float *bias = isq ? a.bq : a.bk;
  if (bias) val += bias[hh * hd + i];
  const float *nw = isq ? a.q_norm : a.k_norm;
  if (nw) {
    float ss = block_sum(val * val, scratch);
    val = val * rsqrtf(ss / (float)hd + a.eps) * nw[i];
  }
  hv[i] = val;
  __syncthreads();
  int half_rd = a.rope_dim / 2;
  int pa = -1, pb = -1, fi = 0;
  if (a.rope_neox) {
    if (i < a.rope_dim) fi = i % half_rd, pa = fi, pb = fi + half_rd;
  } else {
    if (i < a.rope_dim) fi = i / 2, pa = 2 * fi, pb = 2 * fi + 1;
  }
  float outv = val;
  if (pa >= 0) {
    double ang = (double)m.pos[t] * a.inv_freq[fi];
    double sn, cs;
    sincos(ang, &sn, &cs);
    float xa = hv[pa], xb = hv[pb];
    outv = (i == pa) ? xa * (float)cs - xb * (float)sn : xa * (float)sn + xb * (float)cs;
  }
  if (isq)
    q[((size_t)t * nq + hh) * hd + i] = outv;
  else
    kc[(slot * nkv + hh) * hd + i] = __float2half_rn(outv);
}

int cu_qkv_post(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, float *q,
                const float *k, const float *v, __half *kc, __half *vc, wk_error *err) {
  if (a->head_dim % 32 || a->head_dim > 1024)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: head_dim %d (expected a multiple of 32, <= 1024)",
                   a->head_dim);
  dim3 grid(n, a->n_heads + 2 * a->n_kv_heads);
  CK(cu_launch(c->pdl, c->st, grid, dim3(a->head_dim), 0, k_qkv_post, *a, *m, q, k, v, kc, vc));
  CK_LAUNCH();
  return WICK_OK;
}

__global__ void k_glu(float *__restrict__ g, const float *__restrict__ u, long n, int act) {
  pdl_launch_next();
  pdl_wait();
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  g[i] = glu_act(g[i], act) * u[i];
}

int cu_glu(cu_ctx *c, float *g, const float *u, long n, int act, wk_error *err) {
  CK(cu_launch(c->pdl, c->st, dim3(cu_div_up(n, 256)), dim3(256), 0, k_glu, g, u, n, act));
  CK_LAUNCH();
  return WICK_OK;
}

__global__ void k_softcap(float *__restrict__ x, long n, float cap) {
  pdl_launch_next();
  pdl_wait();
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

int cu_softcap(cu_ctx *c, float *x, long n, float cap, wk_error *err) {
  CK(cu_launch(c->pdl, c->st, dim3(cu_div_up(n, 256)), dim3(256), 0, k_softcap, x, n, cap));
  CK_LAUNCH();
  return WICK_OK;
}
