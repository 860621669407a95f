// Element-wise and normalization ops: RMSNorm (optionally gathered rows and
// fused residual add), the Q/K/V epilogue (biases, per-head norms, RoPE, KV
// cache write), the gated activations and the logit soft-cap. Each kernel
// lets the next launch start at once and waits for the previous one before
// it touches the activations (programmatic dependent launch, helpers.cuh).
#include "backend/cuda/internal.cuh"

// One block a row; each thread keeps its (at most RN_K) float4s of the row in
// registers, so the row is read once and every load is issued up front.
enum { RN_K = 8 };

// OUT float: out[t] = (add ? out[t] : 0) + the row; __half: the row rounded to
// f16 (the GEMM path's activations).
template <typename OUT>
__global__ void k_rmsnorm(const float *__restrict__ x, const int32_t *__restrict__ rows,
                          const float *__restrict__ w, float eps, int dim, OUT *__restrict__ out,
                          int add) {
  __shared__ float scratch[32];
  pdl_wait();
  int t = blockIdx.x, nv = dim / 4;
  const float4 *xr = (const float4 *)(x + (size_t)(rows ? rows[t] : t) * dim);
  const float4 *wr = (const float4 *)w;
  OUT *o = out + (size_t)t * dim;
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
    if constexpr (sizeof(OUT) == 2) {
      __half2 *oh = (__half2 *)o + 2 * i;
      oh[0] = __floats2half2_rn(res.x, res.y), oh[1] = __floats2half2_rn(res.z, res.w);
    } else {
      float4 *of = (float4 *)o;
      if (add) {
        float4 p = of[i];
        res.x += p.x, res.y += p.y, res.z += p.z, res.w += p.w;
      }
      of[i] = res;
    }
  }
}

template <typename OUT>
static int rmsnorm(cu_ctx *c, const float *x, const int32_t *rows, const float *w, float eps,
                   int dim, int n, OUT *out, bool add, wk_error *err) {
  if (n == 0) return WICK_OK;
  int nv = dim / 4;
  int threads = (nv / 4 + 31) / 32 * 32;
  threads = threads < 32 ? 32 : threads > 1024 ? 1024 : threads;
  if (dim % 4 || nv > threads * RN_K)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: rmsnorm of %d values (expected a multiple of 4, <= %d)",
                   dim, 1024 * RN_K * 4);
  CK(cu_launch(c->pdl, c->st, dim3(n), dim3(threads), 0, k_rmsnorm<OUT>, x, rows, w, eps, dim, out,
               (int)add));
  CK_LAUNCH();
  return WICK_OK;
}

int cu_rmsnorm(cu_ctx *c, const float *x, const int32_t *rows, const float *w, float eps, int dim,
               int n, float *out, bool add, wk_error *err) {
  return rmsnorm(c, x, rows, w, eps, dim, n, out, add, err);
}

int cu_rmsnorm_xh(cu_ctx *c, const float *x, const float *w, float eps, int dim, int n,
                  wk_error *err) {
  if ((size_t)n * dim > c->xh_elems)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: %d x %d activations exceed the f16 buffer", n, dim);
  return rmsnorm(c, x, (const int32_t *)NULL, w, eps, dim, n, c->xh, false, err);
}

// grid (n tokens), 4 warps: the token's RoPE angles once (rope_table), then
// warp w the heads w, w + 4, ... of the n_heads query, n_kv_heads K and
// n_kv_heads V heads (head_post in shared memory; V takes its bias only).
enum { QP_WARPS = 4, QP_MAX_HD = 512 };

__global__ void __launch_bounds__(QP_WARPS * 32)
    k_qkv_post(cu_attn_shape a, cu_meta m, float *__restrict__ q, const float *__restrict__ k,
               const float *__restrict__ v, __half *__restrict__ kc, __half *__restrict__ vc) {
  __shared__ float hv[QP_WARPS][QP_MAX_HD];
  __shared__ float2 cs[QP_MAX_HD / 2];
  pdl_wait();
  int t = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int hd = a.head_dim, nq = a.n_heads, nkv = a.n_kv_heads;
  rope_table(cs, a, m.pos[t], threadIdx.x, QP_WARPS * 32);
  __syncthreads();
  size_t slot = (size_t)m.slot[t];
  float *x = hv[w];
  for (int h = w; h < nq + 2 * nkv; h += QP_WARPS) {
    if (h >= nq + nkv) {  // V head: bias, then into the cache
      int hh = h - nq - nkv;
      const float *src = v + ((size_t)t * nkv + hh) * hd;
      for (int i = lane; i < hd; i += 32)
        vc[(slot * nkv + hh) * hd + i] = __float2half_rn(src[i] + (a.bv ? a.bv[hh * hd + i] : 0.0f));
      continue;
    }
    bool isq = h < nq;
    int hh = isq ? h : h - nq;
    const float *src = isq ? q + ((size_t)t * nq + hh) * hd : k + ((size_t)t * nkv + hh) * hd;
    for (int i = lane; i < hd; i += 32) x[i] = src[i];
    const float *bias = isq ? a.bq : a.bk;
    head_post(x, a, bias ? bias + hh * hd : NULL, isq ? a.q_norm : a.k_norm, cs, lane);
    for (int i = lane; i < hd; i += 32) {
      if (isq)
        q[((size_t)t * nq + hh) * hd + i] = x[i];
      else
        kc[(slot * nkv + hh) * hd + i] = __float2half_rn(x[i]);
    }
    __syncwarp();  // x is refilled for the next head
  }
}

int cu_qkv_post(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, float *q,
                const float *k, const float *v, __half *kc, __half *vc, wk_error *err) {
  if (a->head_dim % 32 || a->head_dim > QP_MAX_HD)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: head_dim %d (expected a multiple of 32, <= %d)",
                   a->head_dim, (int)QP_MAX_HD);
  CK(cu_launch(c->pdl, c->st, dim3(n), dim3(QP_WARPS * 32), 0, k_qkv_post, *a, *m, q, k, v, kc, vc));
  CK_LAUNCH();
  return WICK_OK;
}

__global__ void k_glu(float *__restrict__ g, const float *__restrict__ u, long n, int act) {
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

__global__ void k_glu_h(const float *__restrict__ g, const float *__restrict__ u,
                        __half *__restrict__ y, long n, int act) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(glu_act(g[i], act) * u[i]);
}

int cu_glu_xh(cu_ctx *c, const float *g, const float *u, long n, int act, wk_error *err) {
  if ((size_t)n > c->xh_elems)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: %ld activations exceed the f16 buffer", n);
  k_glu_h<<<cu_div_up(n, 256), 256, 0, c->st>>>(g, u, c->xh, n, act);
  CK_LAUNCH();
  return WICK_OK;
}

// Sets *big when a bf16 value (a code of n) is finite and would overflow f16.
__global__ void k_bf16_big(const uint16_t *__restrict__ p, size_t n, int *big) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float f = __uint_as_float((uint32_t)p[i] << 16);
  if (isfinite(f) && fabsf(f) >= 65520.0f) *big = 1;
}

__global__ void k_bf16_to_f16(uint16_t *p, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half h = __float2half_rn(__uint_as_float((uint32_t)p[i] << 16));
  p[i] = __half_as_ushort(h);
}

int cu_bf16_to_f16(cu_ctx *c, void *d, size_t n, bool *done, wk_error *err) {
  *done = false;
  if (!c->flag) CK(cudaMalloc((void **)&c->flag, sizeof(int)));  // freed with the backend
  int hb = 0;
  unsigned grid = (unsigned)((n + 255) / 256);
  CK(cudaMemsetAsync(c->flag, 0, sizeof(int), c->st));
  k_bf16_big<<<grid, 256, 0, c->st>>>((const uint16_t *)d, n, c->flag);
  CK_LAUNCH();
  CK(cudaMemcpyAsync(&hb, c->flag, sizeof(int), cudaMemcpyDeviceToHost, c->st));
  CK(cudaStreamSynchronize(c->st));
  if (hb) return WICK_OK;
  k_bf16_to_f16<<<grid, 256, 0, c->st>>>((uint16_t *)d, n);
  CK_LAUNCH();
  CK(cudaStreamSynchronize(c->st));
  *done = true;
  return WICK_OK;
}

__global__ void k_softcap(float *__restrict__ x, long n, float cap) {
  pdl_wait();
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

int cu_softcap(cu_ctx *c, float *x, long n, float cap, wk_error *err) {
  CK(cu_launch(c->pdl, c->st, dim3(cu_div_up(n, 256)), dim3(256), 0, k_softcap, x, n, cap));
  CK_LAUNCH();
  return WICK_OK;
}
