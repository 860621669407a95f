// Decode attention on the tensor cores (the default decode kernel at head
// dim 64 and 128, groups up to 16; attn_decode.cu): one block of NW warps per
// (kv head, token, key split), as the warp-tile kernel, each warp owning its
// keys, but a warp tile is 16 keys and its products are mma.sync m16n8k16
// (f16 in, f32 accumulate; mma.cuh), as in the prefill's flash kernel:
//   the group's G query heads are the 16 rows of the A operand (rows G..15
//   zero), q (scaled) rounded to f16 once and held in registers as
//   fragments; S = Q K^T over HD / 16 k-steps, K fragments by ldmatrix from
//   the warp's stage; the online softmax of each row over the warp's keys
//   (four lanes a row, quad shuffles); P (f16) straight from S's
//   accumulators into the A operand of O += P V, V by ldmatrix.trans.
// Per 16 keys a warp issues HD / 4 products and HD / 8 ldmatrix loads (32
// and 16 at head dim 128) instead of ~900 FMAs and conversions, so the
// kernel is left waiting on memory: every stage of every warp is requested
// before the wait for the previous kernel (NS stages; at the 8B shape, 16
// splits of 4096 keys, the whole split), so the K/V stream starts while that
// kernel finishes.
// Rows past the split's last key are zero-filled and masked. At the end the
// warps' (max, sum, acc) are merged (ad_merge_warps) and then the splits:
// inside the block's cluster where it was launched in clusters of its splits
// (ad_merge_cluster), else by the last block to finish (ad_merge_splits), as
// in the warp-tile kernel.
#ifndef WICK_BACKEND_CUDA_ATTN_DECODE_MMA_CUH
#define WICK_BACKEND_CUDA_ATTN_DECODE_MMA_CUH

#include "backend/cuda/attn_decode_common.cuh"
#include "backend/cuda/mma.cuh"

enum { ADM_KW = 16 };  // keys a warp a tile

// Head dim HD (64 or 128), NW warps a block, NS stages a warp. Shared
// memory: the warps' K/V stages, then the RoPE angles, q (f32, scaled, G
// rows), the new key's K and V (f32), the merged max and sum (16 each) and
// q in f16 (16 rows of ROW halves).
template <int HD, int NW = 8, int NS = 2>
struct adm_cfg {
  static constexpr int hd = HD, gm = 16, nw = NW, STAGES = NS, THREADS = NW * 32, KT = NW * ADM_KW;
  static constexpr int ROW = HD + 8;  // halves a row (16 bytes of padding: ldmatrix rows in 8 bank groups)
  static constexpr int STAGE = 2 * ADM_KW * ROW;  // halves of one stage (K rows, then V rows)
  static constexpr size_t KV = (size_t)NW * NS * STAGE * sizeof(__half);
  static_assert(((size_t)NW * 16 * (HD + 2) + 16 * cu_part_stride(HD)) * sizeof(float) <= KV,
                "warp merge and the cluster's partial fit the stages");
  static size_t bytes(int g) {
    return KV + ((size_t)HD + (size_t)g * HD + 2 * HD + 2 * 16) * sizeof(float) +
           (size_t)16 * ROW * sizeof(__half);
  }
  // Blocks an SM by shared memory (227 KB an SM on Hopper), for the split rule.
  static constexpr int PER_SM_RAW = (int)((size_t)227 * 1024 / (KV + (3 * HD + 16 * HD + 32) * 4 + 16 * ROW * 2));
  static constexpr int PER_SM = PER_SM_RAW < 1 ? 1 : PER_SM_RAW;
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    k_attn_decode_mma(cu_attn_shape a, cu_meta m, const float *__restrict__ q,
                      const __half *__restrict__ kc, const __half *__restrict__ vc,
                      float *__restrict__ out, int splits, float *__restrict__ part,
                      unsigned *__restrict__ cnt, cu_raw_kv raw) {
  constexpr int HD = C::hd, GM = C::gm, NW = C::nw, NT = C::THREADS, KT = C::KT, NS = C::STAGES;
  constexpr int ROW = C::ROW, KW = ADM_KW;
  static_assert(HD % 16 == 0 && HD <= 128, "shape");
  extern __shared__ uint4 adm_raw[];
  const int G = a.n_heads / a.n_kv_heads;
  __half *kv = (__half *)adm_raw;                    // [warp][stage][K, V][KW][ROW]
  float2 *cs = (float2 *)((char *)adm_raw + C::KV);  // [HD / 2] RoPE angles
  float *sq = (float *)(cs + HD / 2);                // [G][HD]
  float *kn = sq + G * HD, *vn = kn + HD;            // the new key's K and V (raw)
  float *sm = vn + HD, *sl = sm + GM;                // [GM] merged max and sum
  __half *sqh = (__half *)(sl + GM);                 // [16][ROW] q in f16, rows >= G zero
  // Early fetch: with raw K/V every row but the new key's was written before
  // this forward call.
  ad_stamp_ns(0);
  ad_stamp(1);
  if (!raw.k) pdl_wait();
  const ad_blk B = ad_block(a, m, splits, raw.k != NULL);  // B.own: it finishes the new key
  ad_stamp(2);
  const int kvh = B.kvh, t = B.t, p = B.p, k0 = B.k0, k1 = B.k1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c4 = lane & 3;
  const int ntiles = k1 > k0 ? (k1 - k0 + KT - 1) / KT : 0;
  __half *wkv = kv + (size_t)warp * NS * C::STAGE;

  // The warp's rows of tile i into its stage i % NS (zeros past k1 and for
  // the new key's row, which is filled in below): one cp.async group.
  auto load = [&](int i) {
    __half *ks = wkv + (i % NS) * C::STAGE;
    ad_copy_rows<HD, ROW>(ks, ks + KW * ROW, k0 + i * KT + warp * KW, KW, B, a, kc, vc, lane, 32);
  };
#pragma unroll
  for (int i = 0; i < NS; i++) {
    if (i < ntiles) load(i);
    cp_commit();
  }
  ad_stamp(3);
  ad_prologue<HD, NT>(a, m, q, raw, t, kvh, G, p, B.own, cs, sq, kn, vn);
  for (int i = tid; i < 16 * HD / 2; i += NT) {
    const int r = i / (HD / 2), c = i % (HD / 2);
    const float2 v = r < G ? *(const float2 *)(sq + r * HD + 2 * c) : make_float2(0.0f, 0.0f);
    *(__half2 *)(sqh + r * ROW + 2 * c) = __floats2half2_rn(v.x, v.y);
  }
  __syncthreads();
  ad_stamp(4);

  // ldmatrix addresses of this lane: matrix mi = lane / 8, its row lane % 8.
  const int mi = lane >> 3, mr = lane & 7;
  uint32_t qf[HD / 16][4];
  {
    const uint32_t q_addr = smem_addr(sqh + (mr + (mi & 1) * 8) * ROW + (mi >> 1) * 8);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) ldsm4(qf[kk], q_addr + kk * 32);
  }
  const uint32_t k_addr = smem_addr(wkv + (mr + (mi >> 1) * 8) * ROW + (mi & 1) * 8);
  const uint32_t v_addr = smem_addr(wkv + KW * ROW + (mr + (mi & 1) * 8) * ROW + (mi >> 1) * 8);
  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};  // rows g and g + 8
  const float cap = a.softcap;

  for (int it = 0; it < ntiles; it++) {
    cp_wait<NS - 1>();
    __syncwarp();
    if (it == 0) ad_stamp(5);
    const int kb = k0 + it * KT + warp * KW, st = it % NS;
    if (kb < k1) {  // else this warp's rows of the tile are all past k1
      const int nk = min(KW, k1 - kb);
      if (B.own && p >= kb && p - kb < KW) {  // the new key's row, finished in the prologue
        __half *ks = wkv + st * C::STAGE, *vs = ks + KW * ROW;
        const int r = p - kb;
        for (int i = lane; i < HD; i += 32) {
          ks[r * ROW + i] = __float2half_rn(kn[i]);
          vs[r * ROW + i] = __float2half_rn(vn[i]);
        }
        __syncwarp();
      }
      const uint32_t so = st * C::STAGE * 2;
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t b[4];
        ldsm4(b, k_addr + so + kk * 32);
        mma16816(s[0], qf[kk], b[0], b[1]);
        mma16816(s[1], qf[kk], b[2], b[3]);
      }
      // Soft-cap, mask, online softmax of rows g (s[.][0..1]) and g + 8 (s[.][2..3]).
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int j = 0; j < 2; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float v = s[j][e];
          if (cap > 0.0f) v = cap * tanhf(v / cap);
          if (8 * j + 2 * c4 + (e & 1) >= nk) v = -INFINITY;
          s[j][e] = v;
          mx[e >> 1] = fmaxf(mx[e >> 1], v);
        }
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float mn = fmaxf(mrow[h], quad_max(mx[h]));  // finite: key kb is valid
        const float mu = mn * MMA_LOG2E;
        corr[h] = mn == mrow[h] ? 1.0f : exp2f(mrow[h] * MMA_LOG2E - mu);  // 0 from -inf
        mrow[h] = mn;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 2; j++) {
          s[j][2 * h] = exp2f(fmaf(s[j][2 * h], MMA_LOG2E, -mu));
          s[j][2 * h + 1] = exp2f(fmaf(s[j][2 * h + 1], MMA_LOG2E, -mu));
          sum += s[j][2 * h] + s[j][2 * h + 1];
        }
        lrow[h] = lrow[h] * corr[h] + sum;
      }
      if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
        for (int i = 0; i < HD / 8; i++)
          o[i][0] *= corr[0], o[i][1] *= corr[0], o[i][2] *= corr[1], o[i][3] *= corr[1];
      }
      // O += P V (the 16 keys are one k-step).
      const uint32_t pf[4] = {pack_h2(s[0][0], s[0][1]), pack_h2(s[0][2], s[0][3]),
                              pack_h2(s[1][0], s[1][1]), pack_h2(s[1][2], s[1][3])};
#pragma unroll
      for (int dp = 0; dp < HD / 16; dp++) {
        uint32_t b[4];
        ldsm4t(b, v_addr + so + dp * 32);
        mma16816(o[2 * dp], pf, b[0], b[1]);
        mma16816(o[2 * dp + 1], pf, b[2], b[3]);
      }
    }
    __syncwarp();  // every lane is done with the stage before it is loaded again
    if (it + NS < ntiles) load(it + NS);
    cp_commit();
  }
  cp_wait<0>();
  __syncthreads();  // every warp is done with its stages: they hold the merge now
  ad_stamp(6);
  float *wacc = (float *)adm_raw;  // [NW][GM][HD]
  float *wm = wacc + NW * GM * HD, *wl = wm + NW * GM;  // [NW][GM] max and sum (ad_merge_warps)
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = g + 8 * h;
    const float l = quad_sum(lrow[h]);
    if (r < G) {
      float *dst = wacc + (warp * GM + r) * HD + 2 * c4;
#pragma unroll
      for (int i = 0; i < HD / 8; i++) *(float2 *)(dst + 8 * i) = make_float2(o[i][2 * h], o[i][2 * h + 1]);
      if (c4 == 0) wm[warp * GM + r] = mrow[h], wl[warp * GM + r] = l;
    }
  }
  ad_merge_warps<HD, GM, NW, NT, true>(a, B, G, splits, out, part, cnt, wacc, sm, sl);
}

#endif
