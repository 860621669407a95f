// Decode attention where each warp owns its keys (the default decode kernel,
// attn_decode.cu): one block of NW warps (adw_cfg) per (kv head, token,
// key split) serves every query head of the group, as the block-tile kernel
// does, but no block barrier sits in the key loop. A block tile is
// NW * ADW_KW keys; warp w takes rows w * ADW_KW .. + ADW_KW - 1 of each,
// copies them itself into its own ring of NS shared-memory stages
// (cp.async; only __syncwarp between its lanes) and keeps its own online
// softmax (max, sum, accumulators) for the G heads. A warp tile is:
//   scores   lane = slice * 8 + key: the key's K row against all G heads'
//            q over the slice's chunks of 8 dims (slice, slice + 4, ...;
//            K rows padded by 16 bytes, so the 8 lanes of a quarter-warp
//            read 8 rows without sharing banks; q a broadcast), G
//            independent sums; two xor-shuffles add the 4 slices;
//   softmax  per head over the warp's 8 keys (xor-shuffles within 8 lanes),
//            p written to the warp's own [key][GM] scratch;
//   P V      lane: dims 2 (lane + 32 j) and + 1 for j < HD / 64 of every
//            head (a warp reads 128 consecutive bytes of a V row), p of the
//            G heads a broadcast float4 load per 4 heads.
// Each K/V element is converted to f32 once and used for all G heads. At
// the end the warps' (max, sum, acc) are merged through shared memory (the
// stages are free then) into the output or the split's partial result, and
// the splits are merged as in the block-tile kernel (ad_merge_splits).
#ifndef WICK_BACKEND_CUDA_ATTN_DECODE_WARPS_CUH
#define WICK_BACKEND_CUDA_ATTN_DECODE_WARPS_CUH

#include "backend/cuda/attn_decode_common.cuh"

enum { ADW_KW = 8 };  // keys a warp a tile

// The configuration: head dim HD, groups up to GM heads, NW warps a block,
// NS stages a warp (the default: 8 warps, 3 stages up to head dim 128, 2
// above; others for tuning). Shared memory: the warps' K/V stages, then the
// RoPE angles, q (scaled), the warps' p scratch, the new key's K and V
// (f32) and the block's merged max and sum per head.
template <int HD, int GM, int NW = 8, int NS = (HD <= 128 ? 3 : 2)>
struct adw_cfg {
  static constexpr int hd = HD, gm = GM, nw = NW, STAGES = NS, THREADS = NW * 32, KT = NW * ADW_KW;
  // Registers for two 256-thread blocks an SM where the accumulators are few.
  static constexpr int MIN_BLOCKS = GM * HD <= 512 ? 16 / NW : 1;
  // Blocks an SM (the split rule's target, cu_attn_decode_per_sm): 16 warps'
  // worth (shared memory holds two 8-warp blocks at head dim 128).
  static constexpr int PER_SM = NW >= 16 ? 1 : 16 / NW;
  static constexpr int ROW = HD + 8;  // halves a K/V row (16 bytes of padding)
  static constexpr int WARP = NS * 2 * ADW_KW * ROW;  // halves of one warp's stages
  static constexpr size_t KV = (size_t)NW * WARP * sizeof(__half);
  // After the key loop the stages hold the warps' acc [NW][GM][HD], max and sum [NW][GM].
  static_assert((size_t)NW * GM * (HD + 2) * sizeof(float) <= KV, "warp merge fits the stages");
  static size_t bytes(int g) {
    return KV + ((size_t)HD + (size_t)g * HD + NW * ADW_KW * GM + 2 * HD + 2 * GM) * sizeof(float);
  }
};

// Whether the warp kernel serves head dim hd with up to gm heads a group:
// its accumulators (gm * hd / 32 a lane) stay within 64 registers.
static constexpr __host__ __device__ bool adw_fits(int hd, int gm) { return gm * hd <= 2048; }

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MIN_BLOCKS)
    k_attn_decode_warps(cu_attn_shape a, cu_meta m, const float *__restrict__ q,
                        const __half *__restrict__ kc, const __half *__restrict__ vc,
                        float *__restrict__ out, int splits, float *__restrict__ part,
                        unsigned *__restrict__ cnt, cu_raw_kv raw) {
  constexpr int HD = C::hd, GM = C::gm, NW = C::nw, NT = C::THREADS, KT = C::KT, NS = C::STAGES;
  static_assert(GM % 4 == 0 && HD % 64 == 0 && adw_fits(HD, GM), "shape");
  constexpr int ROW = C::ROW, CPR = HD / 8, NP = HD / 64;
  extern __shared__ uint4 adw_raw[];
  const int G = a.n_heads / a.n_kv_heads;
  __half *kv = (__half *)adw_raw;                          // [warp][stage][K, V][KW][ROW]
  float2 *cs = (float2 *)((char *)adw_raw + C::KV);        // [HD / 2] RoPE angles
  float *sq = (float *)(cs + HD / 2);                      // [G][HD]
  float *ps = sq + G * HD;                                 // [warp][KW][GM] p of a tile
  float *kn = ps + NW * ADW_KW * GM, *vn = kn + HD;        // the new key's K and V (raw)
  float *sm = vn + HD, *sl = sm + GM;                      // [GM] merged max and sum
  // Early fetch as in the block-tile kernel: with raw K/V every row but the new
  // key's was written before this forward call.
  if (!raw.k) pdl_wait();
  const ad_blk B = ad_block(a, m, splits, raw.k != NULL);  // B.own: it finishes the new key
  const int kvh = B.kvh, t = B.t, p = B.p, k0 = B.k0, k1 = B.k1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ntiles = k1 > k0 ? (k1 - k0 + KT - 1) / KT : 0;
  __half *wkv = kv + (size_t)warp * C::WARP;

  // The warp's rows of tile i into its stage i % NS (zeros past k1 and for
  // the new key's row, which is filled in below).
  auto load = [&](int i) {
    __half *ks = wkv + (i % NS) * 2 * ADW_KW * ROW, *vs = ks + ADW_KW * ROW;
    ad_copy_rows<HD, ROW>(ks, vs, k0 + i * KT + warp * ADW_KW, ADW_KW, B, a, kc, vc, lane, 32);
  };
#pragma unroll
  for (int i = 0; i < NS - 1; i++) {
    if (i < ntiles) load(i);
    cp_commit();
  }
  ad_prologue<HD, NT>(a, m, q, raw, t, kvh, G, p, B.own, cs, sq, kn, vn);

  const int key = lane & 7, slice = lane >> 3;
  float mx[GM], l[GM];
  float2 acc[GM][NP];
#pragma unroll
  for (int g = 0; g < GM; g++) {
    mx[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < NP; j++) acc[g][j] = make_float2(0.0f, 0.0f);
  }
  float *pw = ps + warp * ADW_KW * GM;
  for (int it = 0; it < ntiles; it++) {
    if (it + NS - 1 < ntiles) load(it + NS - 1);  // the stage read in iteration it - 1
    cp_commit();
    cp_wait<NS - 1>();
    __syncwarp();
    const int kb = k0 + it * KT + warp * ADW_KW, nk = min(ADW_KW, k1 - kb);
    if (nk <= 0) break;  // this warp's rows are past k1 from here on
    __half *ks = wkv + (it % NS) * 2 * ADW_KW * ROW, *vs = ks + ADW_KW * ROW;
    if (B.own && p >= kb && p - kb < ADW_KW) {  // the new key's row, finished in the prologue
      const int r = p - kb;
      for (int i = lane; i < HD; i += 32) {
        ks[r * ROW + i] = __float2half_rn(kn[i]);
        vs[r * ROW + i] = __float2half_rn(vn[i]);
      }
      __syncwarp();
    }
    // Scores of key `key` over the slice's chunks, all heads at once.
    float d[GM];
#pragma unroll
    for (int g = 0; g < GM; g++) d[g] = 0.0f;
    const __half *krow = ks + key * ROW;
#pragma unroll
    for (int i = 0; i < CPR / 4; i++) {
      const int c = 4 * i + slice;
      uint4 u = *(const uint4 *)(krow + 8 * c);
      float2 f0 = __half22float2(*(__half2 *)&u.x), f1 = __half22float2(*(__half2 *)&u.y);
      float2 f2 = __half22float2(*(__half2 *)&u.z), f3 = __half22float2(*(__half2 *)&u.w);
#pragma unroll
      for (int g = 0; g < GM; g++) {
        if (g >= G) break;
        const float4 *qr = (const float4 *)(sq + g * HD + 8 * c);
        float4 qa = qr[0], qb = qr[1];
        float s = d[g];
        s = fmaf(qa.x, f0.x, s), s = fmaf(qa.y, f0.y, s), s = fmaf(qa.z, f1.x, s);
        s = fmaf(qa.w, f1.y, s), s = fmaf(qb.x, f2.x, s), s = fmaf(qb.y, f2.y, s);
        s = fmaf(qb.z, f3.x, s), s = fmaf(qb.w, f3.y, s);
        d[g] = s;
      }
    }
    const bool valid = key < nk;
#pragma unroll
    for (int g = 0; g < GM; g++) {
      if (g >= G) break;
      float s = d[g];
      s += __shfl_xor_sync(0xffffffffu, s, 8);
      s += __shfl_xor_sync(0xffffffffu, s, 16);  // every slice lane of a key holds the same sum
      if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      s = valid ? s : -INFINITY;
      float tm = s;
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 4));  // finite: key 0 is valid
      const float mn = fmaxf(mx[g], tm), corr = expf(mx[g] - mn);  // 0 on the first tile
      float pj = valid ? expf(s - mn) : 0.0f, sum = pj;
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      l[g] = l[g] * corr + sum, mx[g] = mn;
      if (slice == 0) pw[key * GM + g] = pj;
#pragma unroll
      for (int j = 0; j < NP; j++) acc[g][j].x *= corr, acc[g][j].y *= corr;
    }
    __syncwarp();
    // P V: rows past nk are zeros with p = 0.
#pragma unroll
    for (int k = 0; k < ADW_KW; k++) {
      const __half2 *vr = (const __half2 *)(vs + k * ROW);
      float2 v[NP];
#pragma unroll
      for (int j = 0; j < NP; j++) v[j] = __half22float2(vr[lane + 32 * j]);
      const float4 *pk = (const float4 *)(pw + k * GM);
#pragma unroll
      for (int g4 = 0; g4 < GM / 4; g4++) {
        if (4 * g4 >= G) break;
        float4 p4 = pk[g4];
        float pp[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int g = 4 * g4 + e;
          if (g >= G) break;
#pragma unroll
          for (int j = 0; j < NP; j++)
            acc[g][j].x = fmaf(pp[e], v[j].x, acc[g][j].x),
            acc[g][j].y = fmaf(pp[e], v[j].y, acc[g][j].y);
        }
      }
    }
    __syncwarp();  // the stage and pw are written again next iteration
  }
  cp_wait<0>();
  __syncthreads();  // every warp is done with its stages: they hold the merge now
  float *wacc = (float *)adw_raw;              // [NW][GM][HD]
  float *wm = wacc + NW * GM * HD, *wl = wm + NW * GM;  // [NW][GM] max and sum (ad_merge_warps)
#pragma unroll
  for (int g = 0; g < GM; g++) {
    if (g >= G) break;
#pragma unroll
    for (int j = 0; j < NP; j++)
      *(float2 *)(wacc + (warp * GM + g) * HD + 2 * (lane + 32 * j)) = acc[g][j];
    if (lane == 0) wm[warp * GM + g] = mx[g], wl[warp * GM + g] = l[g];
  }
  ad_merge_warps<HD, GM, NW, NT>(a, B, G, splits, out, part, cnt, wacc, sm, sl);
}

#endif
