// Flash attention of a batch of new tokens (prefill, chunked prefill, several
// tokens of a sequence) over the paged f16 KV cache, on the tensor cores:
// mma.sync m16n8k16 with f16 inputs and f32 accumulation.
//
// A block takes BM = 16 * NW query rows of one kv head; a row is a (token,
// query head of the head's group) pair, token-major, so the G query heads
// that share a kv head share each K/V tile the block loads. Each warp owns 16
// rows: it computes S = Q K^T for a tile of BN keys into registers, applies
// the soft-cap and the causal/window mask per row, updates its rows' running
// max and sum (online softmax) and adds P V into its f32 accumulators. K and V
// tiles go through shared memory by cp.async: V of tile i loads while S of
// tile i is computed, K of tile i+1 while P V of tile i is. Rows of several
// sequences can share a block: each run of rows of one sequence walks its own
// keys with the other rows masked.
#include <limits.h>

#include <type_traits>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/mma.cuh"

namespace {

constexpr float LOG2E = MMA_LOG2E;

// Shared memory of one block: two stages of K and V (BN rows each), Q (BM
// rows; kept in the second stage when its fragments live in registers), rows
// of D + 8 halves (the 16-byte pad puts the 8 rows an ldmatrix reads in 8
// different bank groups), then three ints a query row.
template <int D, int NW, int MT, int BN, bool QREG>
struct flash_cfg {
  static constexpr int NT = NW * 32, BM = 16 * MT * NW, LD = D + 8, CH = D / 8;
  static constexpr bool QALIAS = QREG && BM <= 2 * BN;
  static constexpr size_t halves = (size_t)(4 * BN + (QALIAS ? 0 : BM)) * LD;
  static constexpr size_t smem = halves * 2 + 3 * BM * sizeof(int);
};

// D head dim; NW warps of MT x 16 query rows; BN keys a tile; QREG: Q's
// fragments stay in registers (else re-read from shared memory per tile).
template <int D, int NW, int MT, int BN, bool QREG, int MINB>
__global__ void __launch_bounds__(NW * 32, MINB)
    k_flash_attn(cu_attn_shape a, cu_meta m, int n, const float *__restrict__ q,
                 const __half *__restrict__ kc, const __half *__restrict__ vc,
                 float *__restrict__ out, __half *__restrict__ out_h) {
  using C = flash_cfg<D, NW, MT, BN, QREG>;
  constexpr int NT = C::NT, BM = C::BM, LD = C::LD, CH = C::CH;
  constexpr int LPT = BN * CH / NT;  // 16-byte chunks a thread loads per K (or V) tile
  static_assert(NT % CH == 0 && (BN * CH) % NT == 0 && BN % 16 == 0 && D % 16 == 0, "shape");
  extern __shared__ __align__(16) unsigned char smem[];
  __half *skv = (__half *)smem;  // stage s: K at skv + 2 s BN LD, V BN LD after it
  __half *sq = C::QALIAS ? skv + 2 * BN * LD : skv + 4 * BN * LD;
  int *row_lo = (int *)(smem + C::halves * 2), *row_hi = row_lo + BM, *row_seq = row_hi + BM;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c4 = lane & 3;
  const int G = a.n_heads / a.n_kv_heads, kvh = blockIdx.y, bs = a.block_size;
  const int R0 = (gridDim.x - 1 - blockIdx.x) * BM;  // the last (longest) rows start first
  const int rows = n * G;

  // Per query row: its keys [lo, hi] and its sequence (-1: past the batch).
  for (int r = tid; r < BM; r += NT) {
    int R = R0 + r, lo = 0, hi = -1, s = -1;
    if (R < rows) {
      int t = R / G;
      hi = m.pos[t], s = m.tseq[t];
      lo = a.window > 0 && hi - a.window + 1 > 0 ? hi - a.window + 1 : 0;
    }
    row_lo[r] = lo, row_hi[r] = hi, row_seq[r] = s;
  }
  // Q * scale as f16 (zeros past the batch); every load issued before the
  // first store.
  constexpr int NQ = BM * D / 4 / NT;
  static_assert((BM * D / 4) % NT == 0, "Q tile");
  float4 qv[NQ];
#pragma unroll
  for (int k = 0; k < NQ; k++) {
    int i = tid + k * NT, r = i / (D / 4), d = i % (D / 4) * 4, R = R0 + r;
    qv[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (R < rows) {
      int t = R / G, h = kvh * G + R % G;
      qv[k] = *(const float4 *)(q + ((size_t)t * a.n_heads + h) * D + d);
    }
  }
#pragma unroll
  for (int k = 0; k < NQ; k++) {
    int i = tid + k * NT, r = i / (D / 4), d = i % (D / 4) * 4;
    __half2 *dst = (__half2 *)(sq + r * LD + d);
    dst[0] = __floats2half2_rn(qv[k].x * a.scale, qv[k].y * a.scale);
    dst[1] = __floats2half2_rn(qv[k].z * a.scale, qv[k].w * a.scale);
  }
  __syncthreads();

  // ldmatrix addresses of this lane: matrix mi = lane / 8, its row lane % 8.
  const int mi = lane >> 3, mr = lane & 7;
  const uint32_t q_addr = smem_addr(sq + (warp * 16 * MT + mr + (mi & 1) * 8) * LD + (mi >> 1) * 8);
  const uint32_t k_addr = smem_addr(skv + (mr + (mi >> 1) * 8) * LD + (mi & 1) * 8);
  const uint32_t v_addr = smem_addr(skv + BN * LD + (mr + (mi & 1) * 8) * LD + (mi >> 1) * 8);
  constexpr uint32_t STAGE = 2 * BN * LD * 2;  // bytes from stage 0 to stage 1
  uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4];
  if constexpr (QREG) {
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) ldsm4(qf[t][kk], q_addr + (t * 16 * LD + kk * 16) * 2);
  }
  __syncthreads();  // Q read: with QALIAS its space is the second stage

  float o[MT][D / 8][4];
#pragma unroll
  for (int t = 0; t < MT; t++)
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[t][i][0] = o[t][i][1] = o[t][i][2] = o[t][i][3] = 0.0f;
  float mrow[MT][2], lrow[MT][2];
#pragma unroll
  for (int t = 0; t < MT; t++) mrow[t][0] = mrow[t][1] = -INFINITY, lrow[t][0] = lrow[t][1] = 0.0f;
  const size_t kv_row = (size_t)a.n_kv_heads * D;
  const int lcol = tid % CH * 8, lrow0 = tid / CH;  // loader: a fixed column, rows + NT / CH
  const uint32_t ld_k = smem_addr(skv + lrow0 * LD + lcol), ld_v = ld_k + BN * LD * 2;
  const float cap = a.softcap;
  const int bsh = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;  // log2(block size) or -1

  for (int r0 = 0; r0 < BM && row_seq[r0] >= 0;) {
    // The run [r0, r1) of rows of one sequence and the keys any of them sees.
    const int seq = row_seq[r0];
    int r1 = r0, klo = INT_MAX, khi = 0;
    while (r1 < BM && row_seq[r1] == seq) {
      klo = min(klo, row_lo[r1]), khi = max(khi, row_hi[r1] + 1);
      r1++;
    }
    // This thread's rows (t, half): warp * 16 MT + 16 t + g + 8 half; outside
    // the run they see no key.
    int lo[MT][2], hi[MT][2], wlo = INT_MAX, whi = -1, all_lo = 0, all_hi = INT_MAX;
#pragma unroll
    for (int t = 0; t < MT; t++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int r = warp * 16 * MT + 16 * t + g + 8 * h;
        bool in = r >= r0 && r < r1;
        lo[t][h] = in ? row_lo[r] : INT_MAX, hi[t][h] = in ? row_hi[r] : -1;
        wlo = min(wlo, lo[t][h]), whi = max(whi, hi[t][h]);
        all_lo = max(all_lo, lo[t][h]), all_hi = min(all_hi, hi[t][h]);
      }
    // The warp's key range, and the range every one of its rows sees.
    wlo = __reduce_min_sync(0xffffffffu, wlo), whi = __reduce_max_sync(0xffffffffu, whi);
    all_lo = __reduce_max_sync(0xffffffffu, all_lo), all_hi = __reduce_min_sync(0xffffffffu, all_hi);
    const int32_t *bt = m.bt + m.bt_off[seq];
    const int ntile = (khi - klo + BN - 1) / BN;

    // K and V of the tile at key kb into stage st (one cp.async group). The
    // thread's rows' cache slots first (every block-table read in flight
    // together), then the copies; a power-of-two block size (the usual)
    // takes shifts, in a copy of the loop without the division.
    auto load_rows = [&](int kb, int st, auto pow2) {
      int slot[LPT];
#pragma unroll
      for (int i = 0; i < LPT; i++) {
        const int j = kb + lrow0 + i * (NT / CH);
        int blk = 0, in = 0;
        if constexpr (decltype(pow2)::value)
          blk = j >> bsh, in = j & (bs - 1);
        else
          blk = j / bs, in = j - blk * bs;
        slot[i] = j < khi ? bt[blk] * bs + in : -1;
      }
#pragma unroll
      for (int i = 0; i < LPT; i++) {
        const bool ok = slot[i] >= 0;
        const size_t off = ok ? (size_t)slot[i] * kv_row + (size_t)kvh * D + lcol : 0;
        const uint32_t d = st * STAGE + i * (NT / CH) * LD * 2;
        cp16(ld_k + d, kc + off, ok);
        cp16(ld_v + d, vc + off, ok);
      }
      cp_commit();
    };
    auto load = [&](int kb, int st) {
      if (bsh >= 0)
        load_rows(kb, st, std::true_type{});
      else
        load_rows(kb, st, std::false_type{});
    };
    load(klo, 0);

    for (int it = 0; it < ntile; it++) {
      const int kb = klo + it * BN;
      const uint32_t so = (it & 1) * STAGE;
      cp_wait<0>();
      __syncthreads();  // tile it is in; every warp is done with tile it - 1
      if (it + 1 < ntile) load(kb + BN, (it + 1) & 1);
      if (kb > whi || kb + BN - 1 < wlo) continue;  // no row of this warp sees these keys
      float s[MT][BN / 8][4];
#pragma unroll
      for (int t = 0; t < MT; t++)
#pragma unroll
        for (int j = 0; j < BN / 8; j++) s[t][j][0] = s[t][j][1] = s[t][j][2] = s[t][j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        uint32_t af[MT][4];
#pragma unroll
        for (int t = 0; t < MT; t++) {
          if constexpr (QREG) {
            af[t][0] = qf[t][kk][0], af[t][1] = qf[t][kk][1];
            af[t][2] = qf[t][kk][2], af[t][3] = qf[t][kk][3];
          } else {
            ldsm4(af[t], q_addr + (t * 16 * LD + kk * 16) * 2);
          }
        }
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
          uint32_t b[4];
          ldsm4(b, k_addr + so + (np * 16 * LD + kk * 16) * 2);
#pragma unroll
          for (int t = 0; t < MT; t++) {
            mma16816(s[t][2 * np], af[t], b[0], b[1]);
            mma16816(s[t][2 * np + 1], af[t], b[2], b[3]);
          }
        }
      }
      // Soft-cap, mask, online softmax of rows (t, 0) (s[t][.][0..1]) and (t, 1) (s[t][.][2..3]).
      // Tiles every row of the warp sees whole (most of them) take a copy of
      // the loop without the key comparisons: one branch a tile, where a
      // predicated mask costs ~90 instructions a tile (SASS).
      const bool full = kb >= all_lo && kb + BN - 1 <= all_hi;
      float mx[MT][2];
      auto cap_mask_max = [&](auto masked) {
#pragma unroll
        for (int t = 0; t < MT; t++) {
          mx[t][0] = mx[t][1] = -INFINITY;
#pragma unroll
          for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              float v = s[t][j][e];
              if (cap > 0.0f) v = cap * tanhf(v / cap);
              if constexpr (decltype(masked)::value) {
                int key = kb + 8 * j + 2 * c4 + (e & 1);
                if (key < lo[t][e >> 1] || key > hi[t][e >> 1]) v = -INFINITY;
              }
              s[t][j][e] = v;
              mx[t][e >> 1] = fmaxf(mx[t][e >> 1], v);
            }
        }
      };
      if (full)
        cap_mask_max(std::false_type{});
      else
        cap_mask_max(std::true_type{});
#pragma unroll
      for (int t = 0; t < MT; t++) {
        float corr[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
          // The running max moves only when a tile's scores pass it by more
          // than 2^8 (in exp2 terms): P stays <= 256 (exact enough in f16, the
          // sum and the accumulators in f32) and the accumulators are rescaled
          // only at real jumps, not at every small rise of the first tiles.
          const float cand = fmaxf(mrow[t][h], quad_max(mx[t][h]));
          const float mn = (cand - mrow[t][h]) * LOG2E > 8.0f ? cand : mrow[t][h];
          // A row with no key yet keeps -inf: offset 0 keeps exp2 away from inf - inf.
          float mu = mn == -INFINITY ? 0.0f : mn * LOG2E, sum = 0.0f;
          corr[h] = mn == mrow[t][h] ? 1.0f : exp2f(mrow[t][h] * LOG2E - mu);
          mrow[t][h] = mn;
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            s[t][j][2 * h] = exp2f(fmaf(s[t][j][2 * h], LOG2E, -mu));
            s[t][j][2 * h + 1] = exp2f(fmaf(s[t][j][2 * h + 1], LOG2E, -mu));
            sum += s[t][j][2 * h] + s[t][j][2 * h + 1];
          }
          lrow[t][h] = lrow[t][h] * corr[h] + sum;
        }
        // Rescale the accumulators only when some row's max moved.
        if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
          for (int i = 0; i < D / 8; i++)
            o[t][i][0] *= corr[0], o[t][i][1] *= corr[0], o[t][i][2] *= corr[1], o[t][i][3] *= corr[1];
        }
      }
      // O += P V.
#pragma unroll
      for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t pf[MT][4];
#pragma unroll
        for (int t = 0; t < MT; t++) {
          pf[t][0] = pack_h2(s[t][2 * kk][0], s[t][2 * kk][1]);
          pf[t][1] = pack_h2(s[t][2 * kk][2], s[t][2 * kk][3]);
          pf[t][2] = pack_h2(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
          pf[t][3] = pack_h2(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; dp++) {
          uint32_t b[4];
          ldsm4t(b, v_addr + so + (kk * 16 * LD + dp * 16) * 2);
#pragma unroll
          for (int t = 0; t < MT; t++) {
            mma16816(o[t][2 * dp], pf[t], b[0], b[1]);
            mma16816(o[t][2 * dp + 1], pf[t], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with the last tile before the next run loads
    r0 = r1;
  }

  // out = O / l for this thread's rows that exist.
#pragma unroll
  for (int t = 0; t < MT; t++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      int R = R0 + warp * 16 * MT + 16 * t + g + 8 * h;
      float l = quad_sum(lrow[t][h]), inv = l > 0.0f ? 1.0f / l : 0.0f;
      if (R >= rows) continue;
      size_t off = ((size_t)(R / G) * a.n_heads + kvh * G + R % G) * D + 2 * c4;
      if (out_h) {  // the GEMM path's f16 activations (as k_to_f16 would round them)
#pragma unroll
        for (int i = 0; i < D / 8; i++)
          *(__half2 *)(out_h + off + 8 * i) =
              __floats2half2_rn(o[t][i][2 * h] * inv, o[t][i][2 * h + 1] * inv);
      } else {
#pragma unroll
        for (int i = 0; i < D / 8; i++)
          *(float2 *)(out + off + 8 * i) =
              make_float2(o[t][i][2 * h] * inv, o[t][i][2 * h + 1] * inv);
      }
    }
}

template <int D, int NW, int MT, int BN, bool QREG, int MINB>
int flash_launch(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                 const __half *kc, const __half *vc, float *out, __half *out_h, wk_error *err) {
  using C = flash_cfg<D, NW, MT, BN, QREG>;
  auto kern = k_flash_attn<D, NW, MT, BN, QREG, MINB>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::smem));
  int G = a->n_heads / a->n_kv_heads;
  dim3 grid(cu_div_up((long)n * G, C::BM), a->n_kv_heads);
  kern<<<grid, C::NT, C::smem, c->st>>>(*a, *m, n, q, kc, vc, out, out_h);
  CK_LAUNCH();
  return WICK_OK;
}

}  // namespace

// The configurations per head dim (D, warps, m-tiles a warp, keys a tile, Q
// in registers, blocks an SM for the register budget); variant -1 picks
// (below), the others are there for the benchmark and the tests. H200, 32/8
// heads, hd 128, 4096 new tokens over 4096 keys (docs/CUDA.md, session 9):
// 229, 242, 259, 243, 223, 217 and 239 TFLOP/s for variants 0..6; 1024 new
// tokens: v0 341 us, v2 210; 16-256 new tokens: v0 120 us, v2 140-158.
int cu_flash_attention(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n,
                       const float *q, const __half *kc, const __half *vc, float *out,
                       __half *out_h, int variant, wk_error *err) {
  if (a->n_heads % a->n_kv_heads)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: %d query heads not a multiple of %d kv heads",
                   a->n_heads, a->n_kv_heads);
  if (variant < 0) {
    // Head dim 128: 32 rows a warp (v2, 128 a block) once those blocks fill
    // the SMs; below that, 16 rows a warp and more blocks (v0).
    variant = 0;
    int dev = 0, sms = 0;
    if (a->head_dim == 128 && cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cu_div_up((long)n * (a->n_heads / a->n_kv_heads), 128) * a->n_kv_heads >= sms)
      variant = 2;
  }
#define FA_(d, v, nw, mt, bn, qreg, minb) \
  case d * 16 + v:                                                                       \
    return flash_launch<d, nw, mt, bn, qreg, minb>(c, a, m, n, q, kc, vc, out, out_h, err);
  switch (a->head_dim * 16 + variant) {
    FA_(64, 0, 4, 1, 64, true, 1)
    FA_(64, 1, 4, 2, 64, true, 1)
    FA_(128, 0, 4, 1, 32, true, 3)
    FA_(128, 1, 4, 1, 64, true, 1)
    FA_(128, 2, 4, 2, 64, false, 1)
    FA_(128, 3, 4, 2, 32, false, 1)
    FA_(128, 4, 8, 1, 64, true, 1)
    FA_(128, 5, 4, 1, 32, true, 1)
    FA_(128, 6, 8, 2, 64, false, 1)
    FA_(256, 0, 4, 1, 32, false, 1)
    FA_(256, 1, 8, 1, 32, false, 1)
    default:
      return cu_fail(err, WICK_ERR_UNSUPPORTED,
                     "cuda: flash attention head_dim %d variant %d (expected 64, 128 or 256)",
                     a->head_dim, variant);
  }
#undef FA_
}

bool cu_flash_supported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}
