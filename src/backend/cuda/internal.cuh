// Internal interface between the CUDA backend's files (C++ linkage; only the
// entry points in backend.h and cuda_test.h are extern "C").
#ifndef WICK_BACKEND_CUDA_INTERNAL_CUH
#define WICK_BACKEND_CUDA_INTERNAL_CUH

#include <stdlib.h>
#include <string.h>

#include "backend/cuda/helpers.cuh"
extern "C" {
#include "quant/types.h"  // WK_Q4_K, WK_Q6_K
}

// A weight on the device, in its file format: rows of row_bytes bytes.
struct cu_weight {
  const uint8_t *d;  // device pointer; NULL = absent
  int type;          // wk_type id
  int rows, cols;    // output features, input features (cols % 32 == 0)
  size_t row_bytes;
};

// Comparison options of the register-streamed kernel for the f32-x types
// (mv_jobs::mvr, cu_ctx::mv_mvr; mvr.cuh): MVR_LATE, the first weight
// loads after x is staged (behind an L2 prefetch of the first unit), not
// before the wait for the previous kernel; MVR_WHOLE, a grid of whole units
// a warp, not the whole wave with units split between warps. mvr_opts_env:
// those named in WICK_CUDA_MVR ("late", "whole", or both).
// MVR_PRE (set by mvr_launch, not an option): x is k_mvr_prep's pre-rounded
// copy (several tokens a block, int8 x).
enum { MVR_LATE = 1, MVR_WHOLE = 2, MVR_PRE = 4 };
// cu_ctx::mv_wide (WICK_CUDA_WIDE, backend_cuda.cu).
enum { WIDE_FILLS, WIDE_OFF, WIDE_ALL };
static inline int mvr_opts_env(void) {
  const char *e = getenv("WICK_CUDA_MVR");
  return (e && strstr(e, "late") ? MVR_LATE : 0) | (e && strstr(e, "whole") ? MVR_WHOLE : 0);
}

// Bytes of the batched products' pre-rounded x (cu_ctx::xpre; mvr.cuh's
// k_mvr_prep) for n tokens of cols columns: n floats (1 / rms) in the first
// MVR_PRE_HEAD bytes, then per token its 16-bit x (two int8 planes) and a
// uint4 a 32-value group (mvr.cuh's mvr_xbytes for the integer types).
enum { MVR_PRE_HEAD = 256 };
static inline size_t cu_pre_bytes(int n, int cols) {
  return MVR_PRE_HEAD + (size_t)n * ((2 * (size_t)cols + (size_t)cols / 32 * 16 + 15) & ~(size_t)15);
}

// Blocks an SM of the fused batch kernel (mmq.cuh: k_mmq's launch bounds; the
// backend's cu_ctx::mmq_blocks counts them).
enum { MMQ_PER_SM = 2 };

// The weight types the fused batch kernel (mmq.cuh) computes.
static inline bool cu_mmq_type(int type) { return type == WK_Q4_K || type == WK_Q6_K; }

// What every op needs: the stream, the cuBLAS handle and scratch space.
struct cu_ctx {
  cudaStream_t st;
  cublasHandle_t blas;
  __half *wscratch;       // dequantized weight rows for the GEMM path
  size_t wscratch_elems;  // its capacity in elements
  __half *xh;             // activations converted to f16/bf16 for the GEMM path
  size_t xh_elems;
  int mv_max_tokens;      // at most this many tokens take the matrix-vector path
  int mv_f32x;            // matrix-vector kernels: MV_INT8, MV_F32X, MV_STREAM or MV_REG (below)
  int mv_glu_off;         // 1: gate/up and the gated unit as separate launches
  int mv_pair_off;        // 1: Q4_K/Q5_K and Q6_K products of one x as separate launches
  int mv_wide;            // Q4_K/Q5_K rows of <= 8192 columns on the register kernel's wide
                          // format: WIDE_FILLS (where its grid fills the SMs), WIDE_OFF,
                          // WIDE_ALL (matvec.cu)
  int mv_fp8w;            // FP8 products: FP8_REG (default) the register-streamed
                          // kernel's plain format (mvr.cuh, f32 x); FP8_V4 the v4 kernel,
                          // FP8_W (E4M3) the 16-byte-piece format (mvr_fp8w.cuh, f16 x):
                          // comparison settings
  int mv_s11;             // 1: the int8-x types at their session-11 kernels and shapes
                          // (mvr_cfg_s11, the wide Q4_K's ALT, Q4_0..Q5_1 on mvs.cuh;
                          // WICK_CUDA_MVD=0)
  int mv_f16d;            // F16/BF16 items in flight (7; else mvr_cfg's, 3;
                          // WICK_CUDA_F16D, comparison)
  int mv_ntok = 8;        // tokens a block of the register-streamed kernel (1, 2, 4 or 8;
                          // WICK_CUDA_NTOK, comparison): a batch of that many reads
                          // each weight once
  int mv_ntok16 = 1;      // the same for its 16-bit-x types (WICK_CUDA_NTOK16,
                          // comparison; matvec.cu's mvr_ntok)
  int mmq = 1;            // batches of up to MMQ_MAX_N tokens on Q4_K and Q6_K weights by the
                          // fused kernel (mmq.cuh) rather than the GEMM path (WICK_CUDA_MMQ=0: off)
  int mmq_blocks;         // the fused kernel's resident blocks (MMQ_PER_SM an SM; 0: a block
                          // a row tile): a split's share of them walk its tiles (mmq_launch)
  int mv_tc = 31;         // the types on the tensor-core matrix-vector kernel (mvt.cuh):
                          // bits Q4_K 1, Q6_K 2, Q5_K 4, Q8_0 8, Q4_0 16 (mvt_bit);
                          // the others' register-streamed one (WICK_CUDA_TC, comparison)
  int mv_tc_min = 0;      // ... for batches of at least this many tokens (fewer take the
                          // register-streamed kernel; 0: the type's, mvt_cfg;
                          // WICK_CUDA_TC_MIN, comparison)
  int mv_tc_ntok = 0;     // its most tokens a block (4 or 8; 0: the type's;
                          // WICK_CUDA_TC_NTOK, comparison)
  int mv_mvr;             // the register-streamed kernel's comparison options (MVR_*)
  int mv_pf = -1;         // >= 0: the register-streamed kernel's L2 prefetch before the
                          // wait, in steps of a warp's first unit (-1: the kernel's
                          // default, mvr.cuh; WICK_CUDA_PF)
  int pdl;                // 1: the decode kernels (all but the GEMM path's and flash
                          // attention) use programmatic dependent launch
  int pdl_v4;             // 1: the v4 matrix-vector kernel too (off by default)
  int attn_warp;          // 1: decode attention on the warp-per-key kernel (comparison)
  unsigned *attn_cnt;     // zeroed counters for the decode attention's in-kernel merge
  size_t attn_cnt_n;      // (token, kv head) pairs they serve; NULL/0: a combine launch
  int attn_merge_off;     // 1: no counters (set before they are allocated)
  int attn_cluster_off;   // 1: decode attention's splits never merge in a cluster (comparison)
  int attn_post_apart;    // 1: the Q/K/V epilogue always as its own launch (comparison)
  int *flag;              // one device int for host-side checks (cu_bf16_to_f16); NULL until used
  uint8_t *xpre;          // the batched products' int8 x, rounded once a token (mvr.cuh's
  size_t xpre_bytes;      // k_mvr_prep: mv_jobs::pre); NULL: each block rounds its own
  int attn_variant;       // decode attention: 0 the tensor-core kernel where it serves the
                          // shape (else the warp-tile one); 1 the block-tile kernel of
                          // session 3; 5 the warp-tile kernel's pick (session 5); 2-4
                          // and 6-8 tuning configurations (attn_decode.cu)
};
// cu_ctx.mv_f32x: MV_INT8, x rounded to int8 per 32 values for the quantized
// types (the streamed kernel for the types of mvs_cfg<T>::DEFAULT, else v5;
// fused gate/up), f32 x for the others (v4); MV_F32X, f32 x for every type
// (v4); MV_STREAM, the streamed kernel for every type (mvs.cuh: int8 x for
// the quantized types, f32 x for the others, fused gate/up); MV_REG, the
// register-streamed kernel (mvr.cuh, int8 x, fused gate/up, folded norm) for
// the types it serves (mvr_has: every type but F32 since session 12),
// MV_INT8 for the rest.
enum { MV_INT8 = 0, MV_F32X = 1, MV_STREAM = 2, MV_REG = 3 };
// cu_ctx.mv_fp8w (WICK_CUDA_FP8W unset / =v4 / =1).
enum { FP8_REG = 0, FP8_V4 = 1, FP8_W = 2 };

// An RMSNorm folded into a matrix-vector product's input: the kernel reads
// each token's x as rmsnorm(x) * w (the row's scale applied to the sums).
struct cu_xnorm {
  const float *w;  // [cols] norm weight
  float eps;
};

// y[t][r] = sum_c W[r][c] * x[t][c] + beta * y[t][r] for t < n; x is
// n rows of w->cols floats, y n rows of w->rows floats.
int cu_matmul(cu_ctx *c, const cu_weight *w, const float *x, int n, float *y, float beta,
              wk_error *err);
// The matrix-vector kernel for nw (1..3) matrices of one type and row length
// that read the same x: ys[i] = ws[i] x (+ beta ys[i]), one launch; with xn
// (where cu_matvec_fold_ok), ws[i] (rmsnorm(x) * xn->w) instead.
int cu_matvec_multi(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                    const float *x, const cu_xnorm *xn, int n, float beta, wk_error *err);
// ws[0..n1) of one type (Q4_K or Q5_K) then ws[n1..nw) of Q6_K, all of one
// row length, reading one x (a Q4_K_M layer's Q, K, then V): one launch for
// both types where the context's kernels and the shapes allow (one token, the
// register kernel's wide format for the first type); *done says whether it
// launched (else the caller launches each type's run with cu_matvec_multi).
int cu_matvec_pair(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int n1, int nw,
                   const float *x, const cu_xnorm *xn, int n, bool *done, wk_error *err);
// Whether cu_matvec_multi / cu_matvec_glu can fold an RMSNorm into w's
// product under c's kernel choice (the streamed kernel: every quantized type
// by default, every type with MV_STREAM).
bool cu_matvec_fold_ok(const cu_ctx *c, const cu_weight *w);
// Whether cu_matvec_glu serves this gate/up pair for n tokens (MV_INT8 and a
// quantized type, or MV_STREAM; one type and shape; n within the decode limit).
bool cu_matvec_glu_ok(const cu_ctx *c, const cu_weight *wg, const cu_weight *wu, int n);
// g[t] = act(wg x[t]) * (wu x[t]) in one launch (act: 0 SiLU, 1 GELU-tanh);
// g has n rows of wg->rows floats; xn as in cu_matvec_multi.
int cu_matvec_glu(cu_ctx *c, const cu_weight *wg, const cu_weight *wu, const float *x,
                  const cu_xnorm *xn, int n, float *g, int act, wk_error *err);
// The GEMM path with the activations already in c->xh as f16 (n rows of
// w->cols; n above c->mv_max_tokens).
int cu_matmul_xh(cu_ctx *c, const cu_weight *w, int n, float *y, float beta, wk_error *err);
// y = x rounded to f16 (n values).
int cu_to_f16(cu_ctx *c, const float *x, __half *y, long n, wk_error *err);
// Always the matrix-vector kernel (tests, benchmarks).
int cu_matvec(cu_ctx *c, const cu_weight *w, const float *x, int n, float *y, float beta,
              wk_error *err);
// x[t] = row tok[t] of w, times scale (tok on the device).
int cu_embed(cu_ctx *c, const cu_weight *w, const int32_t *tok, int n, float scale, float *x,
             wk_error *err);
// out[r - r0][c] = W[r][c] as f16 for r in [r0, r1).
int cu_dequant_f16(cu_ctx *c, const cu_weight *w, int r0, int r1, __half *out, wk_error *err);

// Per-token and per-sequence facts of one forward call, on the device.
struct cu_meta {
  const int32_t *tok;     // [n] token ids
  const int32_t *pos;     // [n] absolute positions
  const int32_t *slot;    // [n] KV slot (block * block_size + offset) of each new token
  const int32_t *tseq;    // [n] sequence of each token
  const int32_t *bt_off;  // [n_seqs] start of each sequence's block table in bt
  const int32_t *bt;      // concatenated block tables
  const int32_t *lrow;    // [n_logits] token rows whose logits are wanted
};

// out[t] = (add ? out[t] : 0) + rmsnorm(x[rows ? rows[t] : t]) * w, rows of dim.
int cu_rmsnorm(cu_ctx *c, const float *x, const int32_t *rows, const float *w, float eps, int dim,
               int n, float *out, bool add, wk_error *err);

// Shapes and per-layer constants of the attention block.
struct cu_attn_shape {
  int n_heads, n_kv_heads, head_dim;
  int rope_dim;
  bool rope_neox;
  const double *inv_freq;  // [rope_dim / 2] angle per position of each pair (device)
  const float *q_norm;     // per-head norms or NULL
  const float *k_norm;
  const float *bq, *bk, *bv;  // biases or NULL
  float eps;
  int block_size;          // KV slots a block
  float scale;             // q.k scale
  float softcap;           // 0 = none
  int window;              // 0 = global
};
// RoPE angles of position pos: cs[f] = (cos, sin) of pos * inv_freq[f] for
// f < rope_dim / 2, computed in double (as the CPU backend) by threads i of
// n, then rounded to float. The caller syncs before use.
static __device__ __forceinline__ void rope_table(float2 *cs, const cu_attn_shape &a, int pos,
                                                  int i, int n) {
  for (int f = i; f < a.rope_dim / 2; f += n) {
    double sn, c;
    sincos((double)pos * a.inv_freq[f], &sn, &c);
    cs[f] = make_float2((float)c, (float)sn);
  }
}
// One head's Q/K epilogue by one warp, in place on x (hd floats in shared
// memory): + bias (NULL: none), RMSNorm with weight nw (NULL: none), RoPE of
// the first rope_dim values with rope_table's cs. The warp's lanes must all
// call it.
static __device__ __forceinline__ void head_post(float *x, const cu_attn_shape &a,
                                                 const float *bias, const float *nw,
                                                 const float2 *cs, int lane) {
  const int hd = a.head_dim;
  float ss = 0.0f;
  for (int i = lane; i < hd; i += 32) {
    float v = x[i] + (bias ? bias[i] : 0.0f);
    x[i] = v, ss += v * v;
  }
  if (nw) {
    float r = rsqrtf(warp_sum(ss) / (float)hd + a.eps);
    for (int i = lane; i < hd; i += 32) x[i] = x[i] * r * nw[i];
  }
  __syncwarp();
  const int half = a.rope_dim / 2;
  for (int f = lane; f < half; f += 32) {
    int pa = a.rope_neox ? f : 2 * f, pb = a.rope_neox ? f + half : 2 * f + 1;
    float xa = x[pa], xb = x[pb];
    x[pa] = xa * cs[f].x - xb * cs[f].y, x[pb] = xa * cs[f].y + xb * cs[f].x;
  }
  __syncwarp();
}
// Adds biases, normalizes Q and K per head, rotates them, keeps Q (f32, in
// place) and writes K and V (f16) into the cache slots of the tokens.
int cu_qkv_post(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, float *q,
                const float *k, const float *v, __half *kc, __half *vc, wk_error *err);
// Causal attention of the n new tokens (of `seqs` sequences, each with at
// least one) over the paged cache, from the Q/K/V products before their
// epilogue (K and V go into the cache kc/vc; q is finished in place, except
// on the decode kernel's path, which keeps it raw): the flash kernel when there are
// ATT_FLASH_MIN_TOKENS or more new tokens a sequence (and it serves the head
// dim), else the split kernels; with one new token a sequence the decode
// kernel does the epilogue itself (unless c->attn_post_apart), else
// cu_qkv_post runs first.
enum { ATT_FLASH_MIN_TOKENS = 16 };
// Key splits of the split attention (log2): the most for which the batch's
// blocks (n * blocks_per_token a split: a (token, kv head) for the decode
// kernels, a (token, query head) for the warp kernel) stay within one wave
// of per_sm blocks an SM on `sms` multiprocessors (cu_attn_decode_per_sm),
// ATT_SPLIT_KEYS keys or more a split, the partials within ATT_PART_PAIRS
// (token, query head, split) rows; a power of two (few graph shapes); 0 when
// the batch alone fills the GPU.
enum { ATT_PART_PAIRS = 2048, ATT_SPLIT_KEYS = 128, ATT_SPLIT_LOG_MAX = 6 };
static inline int cu_attn_splits_log2(int sms, int n, int n_heads, int blocks_per_token,
                                      int per_sm, int max_ctx) {
  int pairs = n * n_heads, lg = 0;
  long units = (long)n * blocks_per_token;
  while (lg < ATT_SPLIT_LOG_MAX && (pairs << (lg + 1)) <= ATT_PART_PAIRS &&
         (ATT_SPLIT_KEYS << (lg + 1)) <= max_ctx && (units << (lg + 1)) <= (long)per_sm * sms)
    lg++;
  return lg;
}
// out_h: the result in f16 there instead (the GEMM path's activations; out
// may be written too, as scratch).
int cu_attention(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, int seqs, float *q,
                 const float *k, const float *v, __half *kc, __half *vc, float *out,
                 __half *out_h, int splits, float *part, wk_error *err);
// The new tokens' K and V before the epilogue, for the decode kernel to
// finish and write into the cache (kc, vc) itself.
struct cu_raw_kv {
  const float *k, *v;  // [n][n_kv_heads][head_dim]
  __half *kc, *vc;
};
// Floats of one split's partial result (16-byte multiples at head dims of 4k).
static constexpr __host__ __device__ int cu_part_stride(int hd) { return hd + 4; }
// The CUDA-core kernels, split over the keys into `splits` parts when
// splits > 1 (part holds the partial results: n * n_heads * splits *
// cu_part_stride(head_dim) floats: the unnormalized sums, then the max and
// the sum of the split's exponentials): cu_attn_decode where it serves the shape (unless
// c->attn_warp), else one block per (query head, token, key split), a warp
// per key.
// raw: NULL, or (cu_attn_decode only) the epilogue is still to do.
int cu_attention_split(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                       const __half *kc, const __half *vc, float *out, int splits, float *part,
                       const cu_raw_kv *raw, wk_error *err);
// The decode kernel of cu_attention_split where cu_attn_decode_ok: one block
// per (kv head, token, key split) for the whole query-head group, K/V tiles
// through shared memory (attn_decode.cu: the warp-tile kernel where it
// serves the shape, else and with c->attn_variant 1 the block-tile kernel);
// same outputs and `part` layout.
bool cu_attn_decode_ok(const cu_attn_shape *a);
// Blocks an SM of the decode kernel that c and a select (the split rule's
// target; 4 for the other split kernels).
int cu_attn_decode_per_sm(const cu_ctx *c, const cu_attn_shape *a);
// Whether cu_attn_decode merges its splits itself (c->attn_cnt serves n
// tokens), so no combine launch is needed.
bool cu_attn_decode_merges(const cu_ctx *c, const cu_attn_shape *a, int n);
// Whether that launch (n tokens, splits) merges the splits of each (token,
// kv head) inside a thread-block cluster (attn_decode.cu ad_in_clusters):
// the same bits as the counters' merge, without its trip through L2.
bool cu_attn_decode_clusters(const cu_ctx *c, const cu_attn_shape *a, int n, int splits);
int cu_attn_decode(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n, const float *q,
                   const __half *kc, const __half *vc, float *out, int splits, float *part,
                   const cu_raw_kv *raw, wk_error *err);
// The tensor-core flash kernel (head dims 64, 128, 256): query tiles of
// (token, query head) rows of one kv head, K/V tiles in shared memory.
// variant: -1 the default configuration, else one from the tuning list in
// flash_attn.cu (benchmarks). out_h non-NULL: the result goes there in f16
// instead of out.
int cu_flash_attention(cu_ctx *c, const cu_attn_shape *a, const cu_meta *m, int n,
                       const float *q, const __half *kc, const __half *vc, float *out,
                       __half *out_h, int variant, wk_error *err);
bool cu_flash_supported(int head_dim);

// g = act(g) * u over n values (0 SwiGLU, 1 GeGLU with tanh).
int cu_glu(cu_ctx *c, float *g, const float *u, long n, int act, wk_error *err);
// The GEMM path's f16 activations c->xh = act(g) * u (n values), and
// c->xh = rmsnorm(x) * w (n rows of dim), for cu_matmul_xh.
int cu_glu_xh(cu_ctx *c, const float *g, const float *u, long n, int act, wk_error *err);
int cu_rmsnorm_xh(cu_ctx *c, const float *x, const float *w, float eps, int dim, int n,
                  wk_error *err);
// Rewrites n bf16 values at d as f16 in place (*done) unless one of them is
// finite and outside f16's range (then leaves them). Every other bf16 value
// is exactly an f16 one (f16 has more significand bits), except below 2^-14
// where f16 steps by 2^-24.
int cu_bf16_to_f16(cu_ctx *c, void *d, size_t n, bool *done, wk_error *err);
// x = cap * tanh(x / cap).
int cu_softcap(cu_ctx *c, float *x, long n, float cap, wk_error *err);

#endif
