// What both decode attention kernels (attn_decode.cu) do the same way: the
// key range of a split, the copy of K/V rows into shared memory, the Q/K/V
// epilogue at the start, and the merge of the splits by the last block of a
// (token, kv head) at the end.
#ifndef WICK_BACKEND_CUDA_ATTN_DECODE_COMMON_CUH
#define WICK_BACKEND_CUDA_ATTN_DECODE_COMMON_CUH

#include <cooperative_groups.h>

#include "backend/cuda/internal.cuh"

// Timeline stamps (a measurement build only, -DWICK_CUDA_STAMPS): thread 0
// of each block writes clock64() (or %globaltimer, ns) at the kernel's
// phases into g_ad_stamps[block][slot]; cuda_attn_stamps reads them back.
// Slots: 0 entry (ns), 1 entry, 2 block's keys known, 3 first tiles asked
// for, 4 q ready, 5 first tile in, 6 key loop done, 7 warps merged, 8 split
// count taken, 9 end, 10 end (ns), 11 1 if the block merged the splits,
// 12 its SM, 13 the grid's blocks, 14 the merging block's weights known.
#ifdef WICK_CUDA_STAMPS
enum { AD_STAMPS = 16, AD_STAMP_BLOCKS = 4096 };
static __device__ unsigned long long g_ad_stamps[AD_STAMP_BLOCKS * AD_STAMPS];
static __device__ __forceinline__ void ad_stamp_v(int i, unsigned long long v) {
  unsigned blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0 && blk < AD_STAMP_BLOCKS) g_ad_stamps[blk * AD_STAMPS + i] = v;
}
static __device__ __forceinline__ void ad_stamp(int i) { ad_stamp_v(i, clock64()); }
static __device__ __forceinline__ void ad_stamp_ns(int i) {
  unsigned long long v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  ad_stamp_v(i, v);
}
static __device__ __forceinline__ void ad_stamp_end() {
  ad_stamp(9);
  ad_stamp_ns(10);
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  ad_stamp_v(12, sm);
  ad_stamp_v(13, gridDim.x * gridDim.y * gridDim.z);
}
#else
static __device__ __forceinline__ void ad_stamp_v(int, unsigned long long) {}
static __device__ __forceinline__ void ad_stamp(int) {}
static __device__ __forceinline__ void ad_stamp_ns(int) {}
static __device__ __forceinline__ void ad_stamp_end() {}
#endif

// What a block serves: kv head kvh (blockIdx.x) of token t (y), split sp
// (z) of its keys, [k0, k1) of those up to its position p (window
// applied); bt its sequence's block table; own: with raw K/V, the block's
// split holds the new key, which it finishes.
struct ad_blk {
  int kvh, t, sp, p, k0, k1;
  const int32_t *bt;
  bool own;
};
static __device__ __forceinline__ ad_blk ad_block(const cu_attn_shape &a, const cu_meta &m,
                                                  int splits, bool raw) {
  ad_blk b;
  b.kvh = blockIdx.x, b.t = blockIdx.y, b.sp = blockIdx.z;
  b.p = m.pos[b.t];
  b.bt = m.bt + m.bt_off[m.tseq[b.t]];
  int lo = a.window > 0 && b.p - a.window + 1 > 0 ? b.p - a.window + 1 : 0;
  int per = (b.p + 1 - lo + splits - 1) / splits;
  b.k0 = lo + b.sp * per;
  b.k1 = min(b.p + 1, b.k0 + per);
  b.own = raw && b.k0 <= b.p && b.p < b.k1;
  return b;
}

// Keys kb .. kb + nr - 1 of the block's kv head into the K and V stages
// ks, vs (rows of ROW halves) by cp.async, 16 bytes a copy, copy i, i + n,
// ... by the caller's thread i of n; rows at or past k1, and the new key's
// row when the block owns it (it is written into the stage later), are
// zero-filled. A power-of-two block size (the usual) takes no division a
// row.
template <int HD, int ROW>
static __device__ __forceinline__ void ad_copy_rows(__half *ks, __half *vs, int kb, int nr,
                                                    const ad_blk &B, const cu_attn_shape &a,
                                                    const __half *kc, const __half *vc, int i,
                                                    int n) {
  constexpr int CPR = HD / 8;  // copies a row
  const int bs = a.block_size, bs_log = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  const int k1 = B.k1, p = B.p, nkv = a.n_kv_heads, kvh = B.kvh;
  const bool own = B.own;
  const int32_t *bt = B.bt;
#pragma unroll
  for (int c = i; c < nr * CPR; c += n) {
    int r = c / CPR, e = (c % CPR) * 8, j = kb + r;
    bool ok = j < k1 && !(own && j == p);
    int blk = bs_log >= 0 ? j >> bs_log : j / bs, in = bs_log >= 0 ? j & (bs - 1) : j % bs;
    size_t off = ok ? ((size_t)bt[blk] * bs + in) * nkv * HD + (size_t)kvh * HD + e : 0;
    cp16(smem_addr(ks + r * ROW + e), kc + off, ok);
    cp16(smem_addr(vs + r * ROW + e), vc + off, ok);
  }
}

// The block's q (G heads of kv head kvh, token t) into sq[G][HD], scaled.
// With raw K/V (one new token a sequence) this waits for the previous
// kernel, finishes q (bias, norm, RoPE; a warp a head), and when the block
// owns the new key (own) finishes its K into kn and V into vn (f32, HD
// each) and writes them into the cache slot. cs: HD / 2 float2 of RoPE
// angles. NT threads; ends with sq, kn and vn visible to the whole block.
template <int HD, int NT>
static __device__ __forceinline__ void ad_prologue(const cu_attn_shape &a, const cu_meta &m,
                                                   const float *__restrict__ q,
                                                   const cu_raw_kv &raw, int t, int kvh, int G,
                                                   int p, bool own, float2 *cs, float *sq,
                                                   float *kn, float *vn) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nkv = a.n_kv_heads;
  if (raw.k) pdl_wait();
  const float *qg = q + ((size_t)t * a.n_heads + (size_t)kvh * G) * HD;
  if (raw.k) {
    rope_table(cs, a, p, tid, NT);
    __syncthreads();
    for (int g = warp; g < G; g += NT / 32) {
      float *x = sq + g * HD;
      for (int i = lane; i < HD; i += 32) x[i] = qg[g * HD + i];
      int h = kvh * G + g;
      head_post(x, a, a.bq ? a.bq + h * HD : NULL, a.q_norm, cs, lane);
      for (int i = lane; i < HD; i += 32) x[i] *= a.scale;
    }
    if (own && warp == 0) {
      const float *kr = raw.k + ((size_t)t * nkv + kvh) * HD;
      for (int i = lane; i < HD; i += 32) kn[i] = kr[i];
      head_post(kn, a, a.bk ? a.bk + kvh * HD : NULL, a.k_norm, cs, lane);
    } else if (own && warp == 1) {
      const float *vr = raw.v + ((size_t)t * nkv + kvh) * HD;
      for (int i = lane; i < HD; i += 32) vn[i] = vr[i] + (a.bv ? a.bv[kvh * HD + i] : 0.0f);
    }
    __syncthreads();
    if (own) {
      size_t off = ((size_t)m.slot[t] * nkv + kvh) * HD;
      for (int i = tid; i < HD; i += NT)
        raw.kc[off + i] = __float2half_rn(kn[i]), raw.vc[off + i] = __float2half_rn(vn[i]);
    }
  } else {
    for (int i = tid; i < G * HD; i += NT) sq[i] = qg[i] * a.scale;
  }
  __syncthreads();
}

// The weights of cs <= AD_CMAX partial results (max m[s], sum of
// exponentials l[s]) in the merged softmax: w[s] = exp(m[s] - max) (0 for an
// empty split), and the merged sum, l[s] w[s] added up pairwise (entries i
// and i + 8, then i + 4, ...; as warp_sum would over 32 lanes holding them,
// lanes >= cs zero), as ad_merge_splits computes them, so the merge inside
// a cluster (ad_merge_cluster) gives the same bits as the counters' merge.
enum { AD_CMAX = 16 };
static __device__ __forceinline__ float ad_merge_weights(const float *m, const float *l, int cs,
                                                         float *w) {
  float mx = -INFINITY, t[AD_CMAX];
#pragma unroll
  for (int s = 0; s < AD_CMAX; s++)
    if (s < cs) mx = fmaxf(mx, m[s]);
#pragma unroll
  for (int s = 0; s < AD_CMAX; s++) {
    w[s] = s < cs && l[s] > 0.0f ? expf(m[s] - mx) : 0.0f;
    t[s] = s < cs ? l[s] * w[s] : 0.0f;
  }
#pragma unroll
  for (int off = AD_CMAX / 2; off > 0; off >>= 1)
#pragma unroll
    for (int i = 0; i < off; i++) t[i] = t[i] + t[i + off];
  return t[0];
}

// After every block of (token t, kv head kvh) has written its partial
// results: with counters (cnt), the last block to count itself merges the
// splits into out and sets the counter back to zero (the partials are
// fenced before the count; the merging block reads them from L2). sw: G *
// splits floats of shared memory, sl: G floats (both free for this). NT
// threads; every thread of the block calls it.
template <int HD, int NT>
static __device__ __forceinline__ void ad_merge_splits(const cu_attn_shape &a, int t, int kvh,
                                                       int G, int splits,
                                                       const float *__restrict__ part,
                                                       unsigned *__restrict__ cnt,
                                                       float *__restrict__ out, float *sw,
                                                       float *sl) {
  constexpr int HQ = HD / 4, PS = cu_part_stride(HD);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nkv = a.n_kv_heads;
  __shared__ unsigned last;
  ad_stamp(7);
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(cnt + (size_t)t * nkv + kvh, 1u) == (unsigned)splits - 1;
  __syncthreads();
  ad_stamp(8);
  ad_stamp_v(11, last);
  if (!last) {
    ad_stamp_end();
    return;
  }
  __threadfence();
  if (tid == 0) cnt[(size_t)t * nkv + kvh] = 0;
  const float *pb = part + ((size_t)t * a.n_heads + (size_t)kvh * G) * splits * PS;
  for (int g = warp; g < G; g += NT / 32) {
    const float *ph = pb + (size_t)g * splits * PS + HD;
    float mx = -INFINITY;
    for (int s2 = lane; s2 < splits; s2 += 32) mx = fmaxf(mx, __ldcg(ph + (size_t)s2 * PS));
    mx = warp_max(mx);
    float l = 0.0f;
    for (int s2 = lane; s2 < splits; s2 += 32) {
      float2 ml = __ldcg((const float2 *)(ph + (size_t)s2 * PS));
      float w = ml.y > 0.0f ? expf(ml.x - mx) : 0.0f;
      sw[g * splits + s2] = w, l += ml.y * w;
    }
    l = warp_sum(l);
    if (lane == 0) sl[g] = l;
  }
  __syncthreads();
  ad_stamp(14);
  for (int o = tid; o < G * HQ; o += NT) {
    int g = o / HQ, d4 = o % HQ;
    const float *ph = pb + (size_t)g * splits * PS + 4 * d4;
    const float *wg = sw + g * splits;
    float4 r = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 16
    for (int s2 = 0; s2 < splits; s2++) {
      float w = wg[s2];
      float4 u = __ldcg((const float4 *)(ph + (size_t)s2 * PS));
      r.x = fmaf(w, u.x, r.x), r.y = fmaf(w, u.y, r.y);
      r.z = fmaf(w, u.z, r.z), r.w = fmaf(w, u.w, r.w);
    }
    float L = sl[g], inv = L > 0.0f ? 1.0f / L : 0.0f;
    *(float4 *)(out + ((size_t)t * a.n_heads + kvh * G + g) * HD + 4 * d4) =
        make_float4(r.x * inv, r.y * inv, r.z * inv, r.w * inv);
  }
  ad_stamp_end();
}

// The splits of (token, kv head) merged inside their thread-block cluster
// (one block a split, cs of them along z; launched so by ad_launch where
// the clusters fit the GPU at once): each block's partial result (layout of
// `part`: G rows of cu_part_stride(HD) floats, the unnormalized sums, the
// max and the sum of exponentials) is in its shared memory at cp; block r
// of the cluster writes outputs [r per, (r + 1) per) of the G x HD, reading
// every block's partial through distributed shared memory. No counter, no
// trip through L2. The weights come from ad_merge_weights and the sums are
// added in split order, as ad_merge_splits does: the two give the same bits.
// cs <= AD_CMAX. NT threads; every thread of the block calls it.
template <int HD, int NT>
static __device__ __forceinline__ void ad_merge_cluster(const cu_attn_shape &a, const ad_blk &B,
                                                        int G, int cs, float *__restrict__ out,
                                                        float *cp) {
  namespace cg = cooperative_groups;
  constexpr int PS = cu_part_stride(HD);
  cg::cluster_group cl = cg::this_cluster();
  ad_stamp(7);
  cl.sync();  // every block's partial is in its shared memory
  ad_stamp(8);
  const int tot = G * HD, per = (tot + cs - 1) / cs, rank = (int)cl.block_rank();
  const int o1 = min(tot, (rank + 1) * per);
  for (int o = rank * per + (int)threadIdx.x; o < o1; o += NT) {
    const int g = o / HD, d = o % HD;
    float m[AD_CMAX], l[AD_CMAX], u[AD_CMAX], w[AD_CMAX];
#pragma unroll
    for (int s = 0; s < AD_CMAX; s++)
      if (s < cs) {
        const float *p = cl.map_shared_rank(cp, s) + g * PS;
        m[s] = p[HD], l[s] = p[HD + 1], u[s] = p[d];
      }
    const float L = ad_merge_weights(m, l, cs, w), inv = L > 0.0f ? 1.0f / L : 0.0f;
    float r = 0.0f;
#pragma unroll
    for (int s = 0; s < AD_CMAX; s++)
      if (s < cs) r = fmaf(w[s], u[s], r);
    out[((size_t)B.t * a.n_heads + (size_t)B.kvh * G + g) * HD + d] = r * inv;
  }
  cl.sync();  // the partials stay until every block of the cluster has read them
  ad_stamp_end();
}

// After the key loop of a kernel whose NW warps each kept their own online
// softmax: warp w's max, sum and unnormalized acc of head g < G are in
// wacc[w][g][HD] with wm = wacc + NW GM HD ([NW][GM] max) and wl = wm + NW
// GM ([NW][GM] sum) (shared memory). Merges the warps into the output
// (splits == 1) or the split's partial result, then the splits
// (ad_merge_splits, wacc its scratch; with CL, a kernel that may run in
// clusters of its splits, ad_merge_cluster where it does: the partial then
// goes to shared memory after wl, GM cu_part_stride(HD) floats). sm, sl: GM
// floats each. NT threads; every thread of the block calls it.
template <int HD, int GM, int NW, int NT, bool CL = false>
static __device__ __forceinline__ void ad_merge_warps(const cu_attn_shape &a, const ad_blk &B,
                                                      int G, int splits, float *__restrict__ out,
                                                      float *__restrict__ part,
                                                      unsigned *__restrict__ cnt, float *wacc,
                                                      float *sm, float *sl) {
  constexpr int HQ = HD / 4, PS = cu_part_stride(HD);
  float *wm = wacc + NW * GM * HD, *wl = wm + NW * GM;
  float *cp = wl + NW * GM;  // [GM][PS]: the partial result, when the splits merge in a cluster
  const bool clm = CL && splits > 1 && (int)cooperative_groups::this_cluster().num_blocks() == splits;
  const int tid = threadIdx.x, t = B.t, kvh = B.kvh;
  __syncthreads();
  for (int g = tid; g < G; g += NT) {
    float M = -INFINITY, L = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; w++) M = fmaxf(M, wm[w * GM + g]);
#pragma unroll
    for (int w = 0; w < NW; w++) {
      float lw = wl[w * GM + g], wt = lw > 0.0f ? expf(wm[w * GM + g] - M) : 0.0f;
      wm[w * GM + g] = wt, L += lw * wt;
    }
    sm[g] = M, sl[g] = L;
  }
  __syncthreads();
  for (int o = tid; o < G * HQ; o += NT) {
    const int g = o / HQ, d4 = o % HQ, h = kvh * G + g;
    float4 r = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < NW; w++) {
      float wt = wm[w * GM + g];
      float4 u = *(const float4 *)(wacc + (w * GM + g) * HD + 4 * d4);
      r.x = fmaf(wt, u.x, r.x), r.y = fmaf(wt, u.y, r.y);
      r.z = fmaf(wt, u.z, r.z), r.w = fmaf(wt, u.w, r.w);
    }
    const float L = sl[g];
    if (splits == 1) {
      float inv = L > 0.0f ? 1.0f / L : 0.0f;
      *(float4 *)(out + ((size_t)t * a.n_heads + h) * HD + 4 * d4) =
          make_float4(r.x * inv, r.y * inv, r.z * inv, r.w * inv);
    } else {
      float *pp = clm ? cp + g * PS : part + (((size_t)t * a.n_heads + h) * splits + B.sp) * PS;
      *(float4 *)(pp + 4 * d4) = r;
      if (d4 == 0) pp[HD] = sm[g], pp[HD + 1] = L;
    }
  }
  if (clm) {
    ad_merge_cluster<HD, NT>(a, B, G, splits, out, cp);
    return;
  }
  if (splits == 1 || !cnt) {
    ad_stamp_end();
    return;
  }
  ad_merge_splits<HD, NT>(a, t, kvh, G, splits, part, cnt, out, wacc, sl);
}

#endif
