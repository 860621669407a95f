// Decode attention over the paged KV cache, one block per (kv head, token,
// key split) that serves every query head of the kv head's group, so each
// K/V row is read from memory once a token. Three kernels: the tensor-core
// kernel (attn_decode_mma.cuh, the default at head dim 64 and 128: each
// warp owns 16-key tiles, products by mma.sync), the warp-tile kernel
// (attn_decode_warps.cuh, the other shapes where adw_fits, and every shape
// with cu_ctx.attn_variant 5: each warp owns its keys, FMAs in f32) and the
// block-tile kernel below (session 3; the rest, and every shape with
// cu_ctx.attn_variant 1). The block-tile kernel: keys go through shared
// memory in tiles of AD_KT rows (cp.async, AD_STAGES deep: the next tiles
// load while one is used), and a tile is three passes:
//   scores   thread s < G * KT: head g = s / KT, key k = s % KT (a warp is 32
//            keys of one head; K rows are padded by 16 bytes, so 16-byte
//            loads of 32 different rows do not share banks; q is a
//            broadcast);
//   softmax  warp w: heads w, w + 4, ...: the tile max, the running max's
//            correction, p = exp(s - max) in place of the scores;
//   P V      thread o < G * HD / 4: head o / (HD / 4), dims 4 (o % (HD / 4))
//            to that + 3 (a warp reads 256 consecutive bytes of a V row; p
//            four keys a broadcast load).
// Rows past the split's last key are zero-filled, so every pass can run over
// the whole tile (p is 0 there).
// With raw K/V (cu_raw_kv, decode of one new token a sequence) the kernel also
// does the Q/K/V epilogue (ops.cu's cu_qkv_post): every block finishes its
// group's q itself, and the block whose split holds the new key finishes that
// key's K and V, writes them to the cache and puts them into its tile (the
// row's copy from the cache is skipped: it may predate the write).
// Splits > 1 leave (max, sum, unnormalized acc) per query head in `part`, in
// the layout of attention.cu's warp-per-key kernel (both kernels). With a
// counter array (cnt, one per (token, kv head), zero between launches) the
// last block of a (token, kv head) to finish merges them itself and sets
// its counter back to zero (the partials are fenced before the count; the
// merging block reads them from L2), so no combine launch follows; without
// one k_attn_combine (attention.cu) does (ad_merge_splits).
#include "backend/cuda/attn_decode_mma.cuh"
#include "backend/cuda/attn_decode_warps.cuh"

enum { AD_THREADS = 128, AD_KT = 32, AD_STAGES = 3 };

// Shared memory of one block: K and V stages, the RoPE angles, q (scaled),
// scores/p, per head the running max, sum and this tile's correction, and
// the new key's K and V (f32, before they are rounded into the tile).
template <int HD>
struct ad_smem {
  static constexpr int ROW = HD + 8;  // halves a K/V row (16 bytes of padding)
  static constexpr size_t KV = (size_t)AD_STAGES * 2 * AD_KT * ROW * sizeof(__half);
  static size_t bytes(int g) { return KV + ((size_t)g * (HD + AD_KT + 3) + 3 * HD) * sizeof(float); }
};

template <int HD, int GM>
__global__ void __launch_bounds__(AD_THREADS)
    k_attn_decode(cu_attn_shape a, cu_meta m, const float *__restrict__ q,
                  const __half *__restrict__ kc, const __half *__restrict__ vc,
                  float *__restrict__ out, int splits, float *__restrict__ part,
                  unsigned *__restrict__ cnt, cu_raw_kv raw) {
  static_assert(AD_KT == 32, "the softmax pass takes a key a lane");
  constexpr int ROW = ad_smem<HD>::ROW, CPR = HD / 8, HQ = HD / 4, PS = cu_part_stride(HD);
  constexpr int NO = (GM * HQ + AD_THREADS - 1) / AD_THREADS;  // output quads a thread
  extern __shared__ uint4 ad_raw[];
  __half *kv = (__half *)ad_raw;  // [stage][K, V][KT][ROW]
  const int G = a.n_heads / a.n_kv_heads;
  float2 *cs = (float2 *)((char *)ad_raw + ad_smem<HD>::KV);  // [HD / 2] RoPE angles (rope_table)
  float *sq = (float *)(cs + HD / 2);                          // [G][HD]
  float *ss = sq + G * HD;                                  // [G][KT]
  float *sm = ss + G * AD_KT, *sl = sm + G, *sc = sl + G;    // [G] each
  float *kn = sc + G, *vn = kn + HD;                        // the new key's K and V (raw)
  // The K/V rows of earlier positions, the block tables and positions were
  // written before this forward call; only the new token's row and q come
  // from the kernels just before. With raw K/V (one new token a sequence,
  // its row finished here) the first tiles are fetched before waiting for
  // them; otherwise everything waits.
  if (!raw.k) pdl_wait();
  const ad_blk B = ad_block(a, m, splits, raw.k != NULL);  // B.own: it finishes the new key
  const int kvh = B.kvh, t = B.t, p = B.p, k0 = B.k0, k1 = B.k1;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ntiles = k1 > k0 ? (k1 - k0 + AD_KT - 1) / AD_KT : 0;

  // Tile i's K and V rows into stage i % AD_STAGES (zeros past k1).
  auto load = [&](int i) {
    __half *ks = kv + (size_t)(i % AD_STAGES) * 2 * AD_KT * ROW, *vs = ks + AD_KT * ROW;
    ad_copy_rows<HD, ROW>(ks, vs, k0 + i * AD_KT, AD_KT, B, a, kc, vc, tid, AD_THREADS);
  };
#pragma unroll
  for (int i = 0; i < AD_STAGES - 1; i++) {
    if (i < ntiles) load(i);
    cp_commit();
  }
  ad_prologue<HD, AD_THREADS>(a, m, q, raw, t, kvh, G, p, B.own, cs, sq, kn, vn);
  for (int g = tid; g < G; g += AD_THREADS) sm[g] = -INFINITY, sl[g] = 0.0f;
  float4 acc[NO];
#pragma unroll
  for (int i = 0; i < NO; i++) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  for (int it = 0; it < ntiles; it++) {
    if (it + AD_STAGES - 1 < ntiles) load(it + AD_STAGES - 1);
    cp_commit();
    cp_wait<AD_STAGES - 1>();
    __syncthreads();
    __half *ks = kv + (size_t)(it % AD_STAGES) * 2 * AD_KT * ROW, *vs = ks + AD_KT * ROW;
    const int nk = min(AD_KT, k1 - (k0 + it * AD_KT));
    if (B.own && p - (k0 + it * AD_KT) < AD_KT) {  // the new key's row, finished above
      int r = p - (k0 + it * AD_KT);
      for (int i = tid; i < HD; i += AD_THREADS) {
        ks[r * ROW + i] = __float2half_rn(kn[i]);
        vs[r * ROW + i] = __float2half_rn(vn[i]);
      }
      __syncthreads();
    }
    for (int s = tid; s < G * AD_KT; s += AD_THREADS) {
      int g = s / AD_KT, k = s % AD_KT;
      float d = -INFINITY;
      if (k < nk) {
        const uint4 *kr = (const uint4 *)(ks + k * ROW);
        const float4 *qr = (const float4 *)(sq + g * HD);
        d = 0.0f;
#pragma unroll 4
        for (int c = 0; c < CPR; c++) {
          uint4 u = kr[c];
          float4 qa = qr[2 * c], qb = qr[2 * c + 1];
          float2 f0 = __half22float2(*(__half2 *)&u.x), f1 = __half22float2(*(__half2 *)&u.y);
          float2 f2 = __half22float2(*(__half2 *)&u.z), f3 = __half22float2(*(__half2 *)&u.w);
          d = fmaf(qa.x, f0.x, d), d = fmaf(qa.y, f0.y, d), d = fmaf(qa.z, f1.x, d);
          d = fmaf(qa.w, f1.y, d), d = fmaf(qb.x, f2.x, d), d = fmaf(qb.y, f2.y, d);
          d = fmaf(qb.z, f3.x, d), d = fmaf(qb.w, f3.y, d);
        }
        if (a.softcap > 0.0f) d = a.softcap * tanhf(d / a.softcap);
      }
      ss[s] = d;
    }
    __syncthreads();
    for (int g = warp; g < G; g += AD_THREADS / 32) {
      float s = ss[g * AD_KT + lane];  // AD_KT == 32: a key a lane
      float mo = sm[g], mn = fmaxf(mo, warp_max(s));
      float pj = lane < nk ? expf(s - mn) : 0.0f, l = warp_sum(pj);
      ss[g * AD_KT + lane] = pj;
      __syncwarp();
      if (lane == 0) {
        float corr = expf(mo - mn);  // 0 on the first tile (mo = -inf)
        sc[g] = corr, sl[g] = sl[g] * corr + l, sm[g] = mn;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NO; i++) {
      int o = tid + i * AD_THREADS, g = o / HQ, d4 = o % HQ;
      if (g >= G) break;
      const float4 *pg = (const float4 *)(ss + g * AD_KT);
      float corr = sc[g];
      float4 r = make_float4(acc[i].x * corr, acc[i].y * corr, acc[i].z * corr, acc[i].w * corr);
#pragma unroll
      for (int k4 = 0; k4 < AD_KT / 4; k4++) {
        float4 p4 = pg[k4];
        float pk[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          uint2 u = *(const uint2 *)(vs + (4 * k4 + j) * ROW + 4 * d4);
          float2 v0 = __half22float2(*(__half2 *)&u.x), v1 = __half22float2(*(__half2 *)&u.y);
          r.x = fmaf(pk[j], v0.x, r.x), r.y = fmaf(pk[j], v0.y, r.y);
          r.z = fmaf(pk[j], v1.x, r.z), r.w = fmaf(pk[j], v1.y, r.w);
        }
      }
      acc[i] = r;
    }
    __syncthreads();  // the stage is loaded again next iteration
  }
  cp_wait<0>();
  __syncthreads();  // sm/sl written by the softmax warps (or the prologue)
#pragma unroll
  for (int i = 0; i < NO; i++) {
    int o = tid + i * AD_THREADS, g = o / HQ, d4 = o % HQ;
    if (g >= G) break;
    int h = kvh * G + g;
    float L = sl[g];
    if (splits == 1) {
      float inv = L > 0.0f ? 1.0f / L : 0.0f;
      *(float4 *)(out + ((size_t)t * a.n_heads + h) * HD + 4 * d4) =
          make_float4(acc[i].x * inv, acc[i].y * inv, acc[i].z * inv, acc[i].w * inv);
    } else {
      float *pp = part + (((size_t)t * a.n_heads + h) * splits + B.sp) * PS;
      *(float4 *)(pp + 4 * d4) = acc[i];
      if (d4 == 0) pp[HD] = sm[g], pp[HD + 1] = L;
    }
  }
  if (splits == 1 || !cnt) return;
  ad_merge_splits<HD, AD_THREADS>(a, t, kvh, G, splits, part, cnt, out, (float *)ad_raw, sl);
}

// A kernel to launch: its function, threads and shared memory (g heads a
// group; GM: the most its instance serves). The block-tile kernel, and the
// warp-tile and tensor-core kernels of configuration C.
template <int HD, int GM>
struct ad_tile {
  static auto kern() { return k_attn_decode<HD, GM>; }
  static constexpr int THREADS = AD_THREADS, GMAX = GM, PER_SM = 4;  // 55 KB at head dim 128
  static constexpr bool CLUSTER = false;  // merges its splits through the counters only
  static size_t bytes(int g) { return ad_smem<HD>::bytes(g); }
};
// The shape of a kernel whose configuration C says it (adw_cfg, adm_cfg).
template <class C>
struct ad_by_cfg {
  static constexpr int THREADS = C::THREADS, GMAX = C::gm, PER_SM = C::PER_SM;
  static size_t bytes(int g) { return C::bytes(g); }
};
template <class C>
struct ad_warps : ad_by_cfg<C> {
  static auto kern() { return k_attn_decode_warps<C>; }
  static constexpr bool CLUSTER = false;
};
template <class C>
struct ad_mma : ad_by_cfg<C> {
  static auto kern() { return k_attn_decode_mma<C>; }
  static constexpr bool CLUSTER = true;  // merges in clusters where launched so (ad_merge_cluster)
};

// Kernel K may take the shared memory of its largest group (once a device).
template <class K>
static cudaError_t ad_opt_smem() {
  static unsigned opted;  // devices (bits) where the kernel may take it
  size_t smem_max = K::bytes(K::GMAX);
  if (smem_max <= 48 * 1024) return cudaSuccess;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess || (dev < 32 && (opted >> dev & 1u))) return e;
  e = cudaFuncSetAttribute(K::kern(), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max);
  if (e == cudaSuccess && dev < 32) opted |= 1u << dev;
  return e;
}

// Whether kernel K's launch for n tokens runs the splits of each (token, kv
// head) as one cluster, merged through shared memory: where the kernel can,
// merges its splits itself (the counters), they are 2 to 16, and all the
// clusters (n x n_kv) fit the GPU at once (cudaOccupancyMaxActiveClusters,
// asked once a device, cluster size and block size; the kernel is allowed
// the non-portable sizes above 8 first); else the last block of each
// merges through the counters (or, without them, a combine launch follows).
template <class K>
static bool ad_in_clusters(const cu_ctx *c, const cu_attn_shape *a, int n, int splits) {
  enum { CMAX = 16, NKNOWN = 16 };
  if (!K::CLUSTER || !cu_attn_decode_merges(c, a, n) || splits < 2 || splits > CMAX ||
      c->attn_cluster_off)
    return false;
  struct known_t {
    int dev, cz, nc;
    size_t smem;
  };
  static known_t known[NKNOWN];
  static int n_known;
  const size_t smem = K::bytes(a->n_heads / a->n_kv_heads);
  const int need = a->n_kv_heads * n;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  for (int i = 0; i < n_known; i++)
    if (known[i].dev == dev && known[i].cz == splits && known[i].smem == smem)
      return known[i].nc >= need;
  int nc = 0;
  auto kern = K::kern();
  cudaError_t e = ad_opt_smem<K>();
  if (e == cudaSuccess && splits > 8)
    e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e == cudaSuccess) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = splits;
    cfg.gridDim = dim3(a->n_kv_heads, n, splits), cfg.blockDim = dim3(K::THREADS);
    cfg.dynamicSmemBytes = smem, cfg.attrs = at, cfg.numAttrs = 1;
    e = cudaOccupancyMaxActiveClusters(&nc, kern, &cfg);
  }
  if (e != cudaSuccess) {  // a refused size is an answer, not an error to keep
    nc = 0;
    cudaGetLastError();
  }
  if (n_known < NKNOWN) known[n_known++] = {dev, splits, nc, smem};
  return nc >= need;
}

template <class K>
static int ad_launch(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                     const __half *kc, const __half *vc, float *out, int splits, float *part,
                     const cu_raw_kv &raw, wk_error *err) {
  auto kern = K::kern();
  size_t smem = K::bytes(a->n_heads / a->n_kv_heads);
  CK(ad_opt_smem<K>());
  unsigned *cnt = cu_attn_decode_merges(c, a, n) ? c->attn_cnt : NULL;
  const dim3 grid(a->n_kv_heads, n, splits);
  if (ad_in_clusters<K>(c, a, n, splits))
    CK(cu_launch_cluster(c->pdl, c->st, grid, dim3(K::THREADS), smem, splits, kern, *a, *m, q, kc,
                         vc, out, splits, part, cnt, raw));
  else
    CK(cu_launch(c->pdl, c->st, grid, dim3(K::THREADS), smem, kern, *a, *m, q, kc, vc, out, splits,
                 part, cnt, raw));
  CK_LAUNCH();
  return WICK_OK;
}

// The tensor-core kernel at head dim 64 and 128 (groups up to its 16 rows),
// else the warp-tile kernel where adw_fits, else the block-tile kernel (GM:
// the group bound of the instance).
template <int HD, int GM, bool WT = adw_fits(HD, GM)>
struct ad_pick_fma {
  using K = ad_tile<HD, GM>;
};
template <int HD, int GM>
struct ad_pick_fma<HD, GM, true> {
  using K = ad_warps<adw_cfg<HD, GM>>;
};
// Head dim 128, groups up to 4 (Llama 3 8B): 16 warps and 2 stages, one
// block an SM (bench_attn decode, 8B shape: 12.3 / 31.0-31.5 us at 4096 /
// 16384 keys at 16 splits against 13.6-13.7 / 31.8-32.0 with 8 warps at
// 32, session 5).
template <>
struct ad_pick_fma<128, 4, true> {
  using K = ad_warps<adw_cfg<128, 4, 16, 2>>;
};
template <int HD, int GM, bool TC = (HD == 64 || HD == 128) && GM <= 16>
struct ad_pick {
  using K = typename ad_pick_fma<HD, GM>::K;
};
template <int HD, int GM>
struct ad_pick<HD, GM, true> {
  using K = ad_mma<adm_cfg<HD>>;
};
template <class K>
struct ad_kind {
  using type = K;
};

// Calls f(ad_kind<K>()) with the kernel K that cu_attn_decode runs for c's
// variant and a's shape (cu_attn_decode_ok); WICK_ERR_UNSUPPORTED if none.
template <class F>
static int ad_dispatch(const cu_ctx *c, const cu_attn_shape *a, F &&f) {
  int g = a->n_heads / a->n_kv_heads, v = c->attn_variant;
  // Tuning configurations of the warp-tile kernel (benchmarks), at head dim
  // 128 and groups up to 4: 2, 4 warps x 3 stages; 3, 4 warps x 6 stages;
  // 4, 8 warps x 3 stages (the default of the other shapes). Of the
  // tensor-core kernel at head dim 128: 6, 8 warps x 3 stages; 7, 4 warps x
  // 4 stages; 8, 4 warps x 2 stages (two or more blocks an SM, so clusters
  // of 16 splits fit).
  if (v >= 2 && a->head_dim == 128 && g <= 4) {
    if (v == 2) return f(ad_kind<ad_warps<adw_cfg<128, 4, 4, 3>>>());
    if (v == 3) return f(ad_kind<ad_warps<adw_cfg<128, 4, 4, 6>>>());
    if (v == 4) return f(ad_kind<ad_warps<adw_cfg<128, 4, 8, 3>>>());
  }
  if (v >= 6 && a->head_dim == 128 && g <= 16) {
    if (v == 6) return f(ad_kind<ad_mma<adm_cfg<128, 8, 3>>>());
    if (v == 7) return f(ad_kind<ad_mma<adm_cfg<128, 4, 4>>>());
    if (v == 8) return f(ad_kind<ad_mma<adm_cfg<128, 4, 2>>>());
  }
#define AD_GM(HD, GM)                                              \
  if (g <= GM) {                                                   \
    if (v == 1) return f(ad_kind<ad_tile<HD, GM>>());              \
    if (v == 5) return f(ad_kind<typename ad_pick_fma<HD, GM>::K>()); \
    return f(ad_kind<typename ad_pick<HD, GM>::K>());              \
  }
#define AD_CASE(HD)        \
  if (a->head_dim == HD) { \
    AD_GM(HD, 4)           \
    AD_GM(HD, 8)           \
    AD_GM(HD, 16)          \
  }
  AD_CASE(64)
  AD_CASE(128)
  AD_CASE(192)
  AD_CASE(256)
#undef AD_CASE
#undef AD_GM
  return WICK_ERR_UNSUPPORTED;
}

bool cu_attn_decode_clusters(const cu_ctx *c, const cu_attn_shape *a, int n, int splits) {
  if (!cu_attn_decode_ok(a)) return false;
  return ad_dispatch(c, a, [&](auto k) {
           return (int)ad_in_clusters<typename decltype(k)::type>(c, a, n, splits);
         }) == 1;
}

int cu_attn_decode_per_sm(const cu_ctx *c, const cu_attn_shape *a) {
  if (!cu_attn_decode_ok(a)) return 4;
  int per = ad_dispatch(c, a, [](auto k) { return (int)decltype(k)::type::PER_SM; });
  return per > 0 ? per : 4;
}

bool cu_attn_decode_ok(const cu_attn_shape *a) {
  int hd = a->head_dim;
  return (hd == 64 || hd == 128 || hd == 192 || hd == 256) && a->n_heads % a->n_kv_heads == 0 &&
         a->n_heads / a->n_kv_heads <= 16;
}

bool cu_attn_decode_merges(const cu_ctx *c, const cu_attn_shape *a, int n) {
  return c->attn_cnt && (size_t)n * a->n_kv_heads <= c->attn_cnt_n;
}

int cu_attn_decode(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                   const __half *kc, const __half *vc, float *out, int splits, float *part,
                   const cu_raw_kv *raw, wk_error *err) {
  cu_raw_kv none = {NULL, NULL, NULL, NULL};
  const cu_raw_kv &r = raw ? *raw : none;
  if (!cu_attn_decode_ok(a))
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: decode attention for head_dim %d, %d/%d heads",
                   a->head_dim, a->n_heads, a->n_kv_heads);
  return ad_dispatch(c, a, [&](auto k) {
    return ad_launch<typename decltype(k)::type>(c, a, m, n, q, kc, vc, out, splits, part, r, err);
  });
}

#ifdef WICK_CUDA_STAMPS
// The timeline stamps of the last decode attention launch (a measurement
// build only): n blocks of AD_STAMPS slots each.
extern "C" int cuda_attn_stamps(unsigned long long *out, int n) {
  if (n > AD_STAMP_BLOCKS) n = AD_STAMP_BLOCKS;
  if (cudaDeviceSynchronize() != cudaSuccess) return WICK_ERR_DEVICE;
  return cudaMemcpyFromSymbol(out, g_ad_stamps, sizeof(unsigned long long) * AD_STAMPS * n) ==
                 cudaSuccess
             ? WICK_OK
             : WICK_ERR_DEVICE;
}
#endif
