// Causal attention over the paged KV cache with an online softmax on the
// CUDA cores (decode and small batches): attn_decode.cu's kernel where it
// serves the shape; else (and under WICK_CUDA_ATTN=warp) one block of four
// warps per (query head, token, key split). With several splits, partial (max, sum, acc) are merged
// by k_attn_combine. Batches of many tokens per sequence go to the flash
// kernel (flash_attn.cu). Both kernels here let the next launch start at
// once and wait for the previous one first (programmatic dependent launch).
#include "backend/cuda/internal.cuh"

enum { ATT_THREADS = 128 };

struct attn_range {
  int k0, k1;
};

static __device__ __forceinline__ attn_range attn_keys(const cu_attn_shape &a, int p, int splits,
                                                       int sp) {
  int lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
  int len = p + 1 - lo;
  int per = (len + splits - 1) / splits;
  attn_range r;
  r.k0 = lo + sp * per;
  r.k1 = min(p + 1, r.k0 + per);
  return r;
}

// Each warp walks its own keys (j = k0 + warp, + 4, ...) with an online
// softmax: lanes hold DPL consecutive dimensions of q, K and V; a key's score
// is one warp sum. The four warps' (max, sum, acc) are merged at the end.
template <int DPL>
__global__ void __launch_bounds__(ATT_THREADS)
    k_attention(cu_attn_shape a, cu_meta m, const float *__restrict__ q,
                const __half *__restrict__ kc, const __half *__restrict__ vc,
                float *__restrict__ out, int splits, float *__restrict__ part) {
  constexpr int NW = ATT_THREADS / 32, HD = DPL * 32;
  __shared__ float sm_ml[NW][2];
  __shared__ float sm_acc[NW][HD];
  pdl_wait();
  int h = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
  int nkv = a.n_kv_heads, kvh = h / (a.n_heads / nkv), bs = a.block_size;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int p = m.pos[t];
  const int32_t *bt = m.bt + m.bt_off[m.tseq[t]];
  attn_range r = attn_keys(a, p, splits, sp);
  const float *qp = q + ((size_t)t * a.n_heads + h) * HD + lane * DPL;
  float qv[DPL], acc[DPL];
#pragma unroll
  for (int i = 0; i < DPL; i++) qv[i] = qp[i] * a.scale, acc[i] = 0.0f;
  float mx = -INFINITY, l = 0.0f;
  size_t off = (size_t)kvh * HD + lane * DPL;
#pragma unroll 2
  for (int j = r.k0 + warp; j < r.k1; j += NW) {
    size_t slot = (size_t)bt[j / bs] * bs + j % bs;
    const __half2 *kp = (const __half2 *)(kc + slot * nkv * HD + off);
    const __half2 *vp = (const __half2 *)(vc + slot * nkv * HD + off);
    __half2 kh[DPL / 2], vh[DPL / 2];
#pragma unroll
    for (int i = 0; i < DPL / 2; i++) kh[i] = kp[i], vh[i] = vp[i];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL / 2; i++) {
      float2 kf = __half22float2(kh[i]);
      s = fmaf(qv[2 * i], kf.x, s), s = fmaf(qv[2 * i + 1], kf.y, s);
    }
    s = warp_sum(s);
    if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
    float mn = fmaxf(mx, s), corr = expf(mx - mn), pj = expf(s - mn);
    l = l * corr + pj;
#pragma unroll
    for (int i = 0; i < DPL / 2; i++) {
      float2 vf = __half22float2(vh[i]);
      acc[2 * i] = fmaf(pj, vf.x, acc[2 * i] * corr);
      acc[2 * i + 1] = fmaf(pj, vf.y, acc[2 * i + 1] * corr);
    }
    mx = mn;
  }
  if (lane == 0) sm_ml[warp][0] = mx, sm_ml[warp][1] = l;
#pragma unroll
  for (int i = 0; i < DPL; i++) sm_acc[warp][lane * DPL + i] = acc[i];
  __syncthreads();
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < NW; w++) M = fmaxf(M, sm_ml[w][0]);
  float wt[NW], L = 0.0f;
#pragma unroll
  for (int w = 0; w < NW; w++) {
    wt[w] = sm_ml[w][1] > 0.0f ? expf(sm_ml[w][0] - M) : 0.0f;
    L += sm_ml[w][1] * wt[w];
  }
  size_t pi = ((size_t)t * a.n_heads + h) * splits + sp;
  for (int d = threadIdx.x; d < HD; d += ATT_THREADS) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; w++) o += sm_acc[w][d] * wt[w];
    if (splits == 1)
      out[((size_t)t * a.n_heads + h) * HD + d] = L > 0.0f ? o / L : 0.0f;
    else
      part[pi * cu_part_stride(HD) + d] = o;
  }
  if (splits > 1 && threadIdx.x == 0) part[pi * cu_part_stride(HD) + HD] = M, part[pi * cu_part_stride(HD) + HD + 1] = L;
}

// grid (n_heads, n tokens), block head_dim threads (rounded up to 32).
__global__ void k_attn_combine(int n_heads, int hd, int splits, const float *__restrict__ part,
                               float *__restrict__ out) {
  pdl_wait();
  int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
  if (d >= hd) return;
  const int ps_ = cu_part_stride(hd);
  const float *pb = part + ((size_t)t * n_heads + h) * splits * ps_;
  float M = -INFINITY;
  for (int s = 0; s < splits; s++) M = fmaxf(M, pb[s * ps_ + hd]);
  float L = 0.0f, acc = 0.0f;
  for (int s = 0; s < splits; s++) {
    const float *ps = pb + s * ps_;
    if (ps[hd + 1] == 0.0f) continue;  // an empty split
    float w = expf(ps[hd] - M);
    L += ps[hd + 1] * w;
    acc += ps[d] * w;
  }
  out[((size_t)t * n_heads + h) * hd + d] = L > 0.0f ? acc / L : 0.0f;
}

static int attention_warp(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n,
                          const float *q, const __half *kc, const __half *vc, float *out,
                          int splits, float *part, wk_error *err);

int cu_attention_split(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                       const __half *kc, const __half *vc, float *out, int splits, float *part,
                       const cu_raw_kv *raw, wk_error *err) {
  if (a->n_heads % a->n_kv_heads)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: %d query heads not a multiple of %d kv heads",
                   a->n_heads, a->n_kv_heads);
  bool merged = false;
  if (!c->attn_warp && cu_attn_decode_ok(a)) {
    if (int st = cu_attn_decode(c, a, m, n, q, kc, vc, out, splits, part, raw, err)) return st;
    merged = cu_attn_decode_merges(c, a, n);
  } else if (raw) {
    return cu_fail(err, WICK_ERR_INVALID, "cuda: the Q/K/V epilogue in the warp attention kernel");
  } else if (int st = attention_warp(c, a, m, n, q, kc, vc, out, splits, part, err)) {
    return st;
  }
  if (splits > 1 && !merged) {
    dim3 g2(a->n_heads, n);
    CK(cu_launch(c->pdl, c->st, g2, dim3((a->head_dim + 31) / 32 * 32), 0, k_attn_combine,
                 a->n_heads, a->head_dim, splits, (const float *)part, out));
    CK_LAUNCH();
  }
  return WICK_OK;
}

static int attention_warp(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n,
                          const float *q, const __half *kc, const __half *vc, float *out,
                          int splits, float *part, wk_error *err) {
  dim3 grid(a->n_heads, n, splits);
  void (*kern)(cu_attn_shape, cu_meta, const float *, const __half *, const __half *, float *, int,
               float *) = a->head_dim == 64    ? k_attention<2>
                          : a->head_dim == 128 ? k_attention<4>
                          : a->head_dim == 192 ? k_attention<6>
                          : a->head_dim == 256 ? k_attention<8>
                                               : NULL;
  if (!kern)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: attention head_dim %d (expected 64, 128, 192 or 256)",
                   a->head_dim);
  CK(cu_launch(c->pdl, c->st, grid, dim3(ATT_THREADS), 0, kern, *a, *m, q, kc, vc, out, splits, part));
  CK_LAUNCH();
  return WICK_OK;
}

int cu_attention(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, int seqs, float *q,
                 const float *k, const float *v, __half *kc, __half *vc, float *out,
                 __half *out_h, int splits, float *part, wk_error *err) {
  bool flash = n >= ATT_FLASH_MIN_TOKENS * seqs && cu_flash_supported(a->head_dim);
  int st;
  if (!flash && n == seqs && !c->attn_warp && !c->attn_post_apart && cu_attn_decode_ok(a)) {
    cu_raw_kv raw = {k, v, kc, vc};
    st = cu_attention_split(c, a, m, n, q, kc, vc, out, splits, part, &raw, err);
  } else if ((st = cu_qkv_post(c, a, m, n, q, k, v, kc, vc, err))) {
    return st;
  } else if (flash) {
    return cu_flash_attention(c, a, m, n, q, kc, vc, out, out_h, -1, err);
  } else {
    st = cu_attention_split(c, a, m, n, q, kc, vc, out, splits, part, NULL, err);
  }
  if (st || !out_h) return st;
  return cu_to_f16(c, out, out_h, (long)n * a->n_heads * a->head_dim, err);
}
