// Test entry of the decode attention with its Q/K/V epilogue (see
// cuda_test.h): the raw products go through cu_attention exactly as
// run_layers sends them in a decode step (one new token a sequence).
#include <string.h>

#include <vector>

#include "backend/cuda/cuda_test.cuh"
#include "backend/cuda/internal.cuh"

extern "C" {
#include "backend/cuda/cuda_test.h"
#include "base/fp.h"
#include "quant/types.h"
}

namespace {

int check_args(const cuda_test_attn_post *a, wk_error *err) {
  if (a->n_seqs < 1 || a->n_heads < 1 || a->n_kv < 1 || a->n_heads % a->n_kv || a->hd < 32 ||
      a->hd % 32)
    return cu_fail(err, WICK_ERR_INVALID,
                   "attention post: %d seqs, %d/%d heads, head dim %d (expected >= 1 seq, query "
                   "heads a multiple of kv heads, head dim a multiple of 32)",
                   a->n_seqs, a->n_heads, a->n_kv, a->hd);
  if (a->rope_dim < 0 || a->rope_dim % 2 || a->rope_dim > a->hd || (a->rope_dim && !a->inv_freq))
    return cu_fail(err, WICK_ERR_INVALID,
                   "attention post: rope_dim %d with head dim %d (expected even, <= head dim, "
                   "with a frequency table)",
                   a->rope_dim, a->hd);
  if (a->block_size < 1 || a->n_pool < 1 || a->splits < 0 || a->splits > 1024 || a->path < 0 ||
      a->path > 2)
    return cu_fail(err, WICK_ERR_INVALID,
                   "attention post: block size %d, pool %d, splits %d, path %d (expected >= 1, "
                   ">= 1, 0..1024, 0..2)",
                   a->block_size, a->n_pool, a->splits, a->path);
  for (int i = 0, b = 0; i < a->n_seqs; i++) {
    if (a->n_ctx[i] < 1)
      return cu_fail(err, WICK_ERR_INVALID,
                     "attention post: sequence %d has %d keys (expected >= 1)", i, a->n_ctx[i]);
    for (int j = 0; j < (a->n_ctx[i] + a->block_size - 1) / a->block_size; j++, b++)
      if (a->blocks[b] < 0 || a->blocks[b] >= a->n_pool)
        return cu_fail(err, WICK_ERR_INVALID, "attention post: block id %d outside [0, %d)",
                       a->blocks[b], a->n_pool);
  }
  return WICK_OK;
}

}  // namespace

extern "C" int cuda_test_attention_post(const cuda_test_attn_post *a, const float *q,
                                        const float *k, const float *v, const float *k_past,
                                        const float *v_past, float *out, float *k_new,
                                        float *v_new, int *splits, wk_error *err) {
  TRY(check_args(a, err));
  const int ns = a->n_seqs, n = ns, bs = a->block_size, hd = a->hd;
  cu_attn_shape s = {};
  s.n_heads = a->n_heads, s.n_kv_heads = a->n_kv, s.head_dim = hd;
  s.rope_dim = a->rope_dim, s.rope_neox = a->rope_neox != 0;
  s.eps = a->eps, s.block_size = bs, s.scale = a->scale, s.softcap = a->softcap;
  s.window = a->window;
  if (!cu_attn_decode_ok(&s))
    return cu_fail(err, WICK_ERR_UNSUPPORTED,
                   "attention post: %d/%d heads of %d are not the decode kernel's shape",
                   a->n_heads, a->n_kv, hd);
  dev_bufs b;
  TRY(b.init(err, false));
  b.c.pdl = 1;  // the backend's default
  b.c.attn_post_apart = a->path == 1;
  b.c.attn_merge_off = a->path == 2;

  // Token facts: the new token of sequence i is batch row i at n_ctx[i] - 1.
  size_t kvd = (size_t)a->n_kv * hd, qd = (size_t)a->n_heads * hd;
  size_t pool = (size_t)a->n_pool * bs * kvd;
  int max_ctx = 0, nbt = 0;
  std::vector<int32_t> bt_off(ns), slot(ns);
  for (int i = 0; i < ns; i++) {
    int p = a->n_ctx[i] - 1;
    bt_off[i] = nbt;
    slot[i] = a->blocks[nbt + p / bs] * bs + p % bs;
    nbt += (a->n_ctx[i] + bs - 1) / bs;
    max_ctx = a->n_ctx[i] > max_ctx ? a->n_ctx[i] : max_ctx;
  }
  std::vector<int32_t> meta(4 * (size_t)n + ns + nbt);  // tok, pos, slot, tseq, bt_off, bt
  for (int t = 0; t < n; t++)
    meta[t] = t, meta[n + t] = a->n_ctx[t] - 1, meta[2 * n + t] = slot[t], meta[3 * n + t] = t;
  memcpy(&meta[4 * n], bt_off.data(), sizeof(int32_t) * ns);
  memcpy(&meta[4 * n + ns], a->blocks, sizeof(int32_t) * nbt);
  const int32_t *dm;
  TRY(b.upload(&dm, meta.data(), meta.size(), err));
  cu_meta m = {};
  m.tok = dm, m.pos = dm + n, m.slot = dm + 2 * n, m.tseq = dm + 3 * n;
  m.bt_off = dm + 4 * n, m.bt = dm + 4 * n + ns;

  // The cache: earlier rows as f16, NaN elsewhere (the new slots included).
  std::vector<uint16_t> hk(pool, 0x7e00), hv(pool, 0x7e00);
  for (int i = 0, r = 0; i < ns; i++)
    for (int p = 0; p < a->n_ctx[i] - 1; p++, r++) {
      size_t sl = (size_t)a->blocks[bt_off[i] + p / bs] * bs + p % bs;
      for (size_t e = 0; e < kvd; e++) {
        hk[sl * kvd + e] = wk_f32_to_f16(k_past[(size_t)r * kvd + e]);
        hv[sl * kvd + e] = wk_f32_to_f16(v_past[(size_t)r * kvd + e]);
      }
    }
  const uint16_t *dkc16, *dvc16;
  TRY(b.upload(&dkc16, hk.data(), pool, err));
  TRY(b.upload(&dvc16, hv.data(), pool, err));
  __half *dkc = (__half *)dkc16, *dvc = (__half *)dvc16;

  // Per-layer constants.
  TRY(b.upload(&s.inv_freq, a->inv_freq, (size_t)a->rope_dim / 2, err));
  TRY(b.upload(&s.bq, a->bq, qd, err));
  TRY(b.upload(&s.bk, a->bk, kvd, err));
  TRY(b.upload(&s.bv, a->bv, kvd, err));
  TRY(b.upload(&s.q_norm, a->q_norm, (size_t)hd, err));
  TRY(b.upload(&s.k_norm, a->k_norm, (size_t)hd, err));

  // The raw rows as F32 tables that cu_embed copies into q/k/v, as the
  // products write them just before the attention in a decode step.
  const float *tq, *tk, *tv;
  TRY(b.upload(&tq, q, n * qd, err));
  TRY(b.upload(&tk, k, n * kvd, err));
  TRY(b.upload(&tv, v, n * kvd, err));
  cu_weight wq = {(const uint8_t *)tq, WK_F32, n, (int)qd, qd * sizeof(float)};
  cu_weight wk = {(const uint8_t *)tk, WK_F32, n, (int)kvd, kvd * sizeof(float)};
  cu_weight wv = {(const uint8_t *)tv, WK_F32, n, (int)kvd, kvd * sizeof(float)};

  int sms = 0, dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int sp = a->splits ? a->splits
                     : 1 << cu_attn_splits_log2(sms, n, a->n_heads, a->n_kv,
                                                cu_attn_decode_per_sm(&b.c, &s), max_ctx);
  *splits = sp;
  size_t part_n = (size_t)n * a->n_heads * sp * cu_part_stride(hd);
  float *dq, *dk, *dv, *dout, *dpart;
  TRY(b.alloc(&dq, n * qd * sizeof(float), err));
  TRY(b.alloc(&dk, n * kvd * sizeof(float), err));
  TRY(b.alloc(&dv, n * kvd * sizeof(float), err));
  TRY(b.alloc(&dout, n * qd * sizeof(float), err));
  TRY(b.alloc(&dpart, part_n * sizeof(float), err));
  if (a->path != 2) {  // the in-kernel merge's counters, zero between launches
    b.c.attn_cnt_n = (size_t)n * a->n_kv;
    TRY(b.alloc(&b.c.attn_cnt, b.c.attn_cnt_n * sizeof(unsigned), err));
    CK(cudaMemset(b.c.attn_cnt, 0, b.c.attn_cnt_n * sizeof(unsigned)));
  }

  // One decode step: poison, the raw rows written by kernels, the attention.
  // The first copy is a plain launch (it follows the memsets); the rest, as
  // in run_layers, by programmatic dependent launch.
  auto step = [&]() -> int {
    CK(cudaMemsetAsync(dout, 0xff, n * qd * sizeof(float), b.c.st));
    CK(cudaMemsetAsync(dpart, 0xff, part_n * sizeof(float), b.c.st));
    CK(cudaMemsetAsync(dq, 0xff, n * qd * sizeof(float), b.c.st));
    CK(cudaMemsetAsync(dk, 0xff, n * kvd * sizeof(float), b.c.st));
    CK(cudaMemsetAsync(dv, 0xff, n * kvd * sizeof(float), b.c.st));
    for (int t = 0; t < n; t++) {
      CK(cudaMemsetAsync(dkc + (size_t)slot[t] * kvd, 0xff, kvd * sizeof(__half), b.c.st));
      CK(cudaMemsetAsync(dvc + (size_t)slot[t] * kvd, 0xff, kvd * sizeof(__half), b.c.st));
    }
    b.c.pdl = 0;
    TRY(cu_embed(&b.c, &wq, m.tok, n, 1.0f, dq, err));
    b.c.pdl = 1;
    TRY(cu_embed(&b.c, &wk, m.tok, n, 1.0f, dk, err));
    TRY(cu_embed(&b.c, &wv, m.tok, n, 1.0f, dv, err));
    return cu_attention(&b.c, &s, &m, n, ns, dq, dk, dv, dkc, dvc, dout, NULL, sp, dpart, err);
  };
  if (!a->graph) {
    TRY(step());
    TRY(step());
  } else {
    cudaGraphExec_t ge;
    TRY(capture_graph(b.c.st, step, &ge, err));
    cudaError_t e = cudaGraphLaunch(ge, b.c.st);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, b.c.st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(b.c.st);
    cudaGraphExecDestroy(ge);
    CK(e);
  }
  CK(cudaStreamSynchronize(b.c.st));

  CK(cudaMemcpy(out, dout, n * qd * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<uint16_t> row(kvd);
  for (int t = 0; t < n; t++) {
    CK(cudaMemcpy(row.data(), dkc + (size_t)slot[t] * kvd, kvd * 2, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < kvd; e++) k_new[t * kvd + e] = wk_f16_to_f32(row[e]);
    CK(cudaMemcpy(row.data(), dvc + (size_t)slot[t] * kvd, kvd * 2, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < kvd; e++) v_new[t * kvd + e] = wk_f16_to_f32(row[e]);
  }
  if (b.c.attn_cnt) {
    std::vector<unsigned> cnt(b.c.attn_cnt_n);
    CK(cudaMemcpy(cnt.data(), b.c.attn_cnt, cnt.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < cnt.size(); i++)
      if (cnt[i])
        return cu_fail(err, WICK_ERR_INVALID,
                       "attention post: split counter %zu left at %u (expected 0)", i, cnt[i]);
  }
  return WICK_OK;
}
