// The CUDA backend: prepare uploads every weight once in its file format
// into one device arena, sizes the paged f16 KV cache and one workspace;
// forward uploads the batch's token facts in one copy, runs the layers (as a
// captured CUDA graph for small repeated decode shapes) and copies the
// wanted logits back.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/internal.cuh"
#include "backend/cuda/quant.cuh"
#include "backend/cuda/topk.cuh"

extern "C" {
#include "backend/backend.h"
#include "base/alloc.h"
#include "base/fp.h"
}

// Matrix-vector kernels by default (MV_REG: int8 x and fused gate/up for
// the quantized types, on the register-streamed kernel for Q4_K, Q5_K, Q6_K
// and Q8_0 and on the streamed one for the others; f32 x for the float
// types, v4: the fastest measured, docs/CUDA.md v6 and v9), whether the
// decode kernels use programmatic dependent launch, and whether the RMSNorms
// before Q/K/V, gate/up and the output are folded into the matrix-vector
// kernels (v7).
static const int MV_KERNEL_DEFAULT = MV_REG, PDL_DEFAULT = 1, FOLD_NORM_DEFAULT = 1;
static_assert((int)CU_TOPK_MAX == (int)WK_TOPK_MAX, "one top-k limit");
// Batches of up to GRAPH_MAX_N tokens run as captured graphs. Decode steps
// of up to MV_MAX_DECODE sequences (one new token each) take the
// matrix-vector kernels (the register kernel reads each weight once for up
// to 8 tokens: mvr.cuh), other batches up to MV_MAX_PROMPT tokens: the
// matrix-vector kernels round x to int8, and on prompt chunks of 11 tokens
// of the trimmed Gemma 3 that moved the logits to a cosine of 0.99885
// against the CPU's (parity wants 0.999; the GEMM path's f16 x keeps it).
// Larger batches take the GEMM path: 16 sequences of the 8B Q4_K_M decode
// 10.7 ms a step there against 13.3 in two 8-token tiles (session 13).
// When the fused batch kernel (mmq.cuh) covers every matrix of the model
// (Q4_K_M), decode steps of more than MV_MAX_DECODE_MMQ sequences take it
// (session 17, 8B Q4_K_M at context 512: 3 sequences 4.03 ms a step against
// 4.50 on the matrix-vector kernels, 4 4.08 against 5.43, 8 4.48 against
// 7.23; 2 take 3.43 there).
// WICK_CUDA_MV_MAX=N (0..16) moves the decode boundary (comparison).
enum { GRAPH_MAX_N = 16, MV_MAX_DECODE = 8, MV_MAX_DECODE_MMQ = 2, MV_MAX_PROMPT = 4 };

struct cu_layer {
  cu_weight wq, wk, wv, wo, wg, wu, wd;
  const float *attn_norm, *ffn_norm, *q_norm, *k_norm, *post_attn, *post_ffn;
  const float *bq, *bk, *bv;
  const double *inv_freq;  // [rope_dim / 2]
  int window;
};

// WICK_CUDA_SKIP=qkv,attn,o,gu,down,out (or joined by '+') leaves those launches out of every
// layer (the output product: of the step), so a decode step's time without
// them shows what each costs where it runs, with dependent launch and
// graphs (docs/CUDA.md). The results are then meaningless: timing only.
enum { SKIP_QKV = 1, SKIP_ATTN = 2, SKIP_O = 4, SKIP_GU = 8, SKIP_DOWN = 16, SKIP_OUT = 32 };
static int skip_env(void) {
  static const char *names[] = {"qkv", "attn", "o", "gu", "down", "out"};
  const char *e = getenv("WICK_CUDA_SKIP");
  int k = 0;
  for (int i = 0; e && i < 6; i++) {
    size_t n = strlen(names[i]);
    for (const char *p = strstr(e, names[i]); p; p = strstr(p + 1, names[i]))
      if ((p == e || p[-1] == ',' || p[-1] == '+') && (p[n] == ',' || p[n] == '+' || p[n] == 0))
        k |= 1 << i;
  }
  return k;
}

struct cu_state {
  cu_ctx c;
  const wk_model *m;
  wk_backend_params p;
  cu_layer *layers;
  cu_weight tok_embd, output;
  const float *out_norm;
  uint8_t *arena;  // weights
  size_t arena_bytes;
  void *embd_host;  // the token embeddings in pinned host memory (NULL: in the arena)
  size_t embd_host_bytes;
  __half *kv;  // K of every layer, then V of every layer
  size_t kv_bytes, kv_layer_elems;
  uint8_t *ws;  // workspace
  size_t ws_bytes;
  float *x, *hb, *q, *k, *v, *att, *g, *u, *lb, *logits, *part;
  int32_t *meta_d, *meta_h;  // device and pinned host copies of the token facts
  float *logits_h;           // pinned staging for the logits copied back
  cu_topk topk;              // top-k of the logits rows on the device (decode)
  size_t meta_ints, bt_cap;
  cu_meta meta;
  int qdim, kvdim, use_graphs;
  int flash_h_off;  // WICK_CUDA_FLASH_H=0: attention writes f32, converted for the GEMM (comparison)
  int skip;         // WICK_CUDA_SKIP: launches left out, for timing only (SKIP_*)
  int fold_norm;  // 1: RMSNorms folded into the following matrix-vector products (decode)
  int max_ctx;  // longest context of the batch being run
  int n_seqs;   // sequences of the batch being run that have new tokens
  int sms;      // multiprocessors of the device
  int attn_blocks_per_token;  // split attention's blocks a token and split (kv or query heads)
  int attn_per_sm;            // and of those an SM (cu_attn_decode_per_sm)
  int attn_splits_max;        // > 0: at most this many key splits (comparison)
  int mv_max_decode;          // decode steps of up to this many sequences: matrix-vector kernels
  int mv_max_prompt;          // other batches of up to this many tokens (<= mv_max_decode)
  // [tokens][sequences with new tokens][logits rows][log2 of key splits]:
  // the kernels' choices and arguments depend on all four.
  cudaGraphExec_t graphs[GRAPH_MAX_N + 1][GRAPH_MAX_N + 1][GRAPH_MAX_N + 1][ATT_SPLIT_LOG_MAX + 1];
};

static size_t align256(size_t v) { return (v + 255) & ~(size_t)255; }

// ---------------------------------------------------------------- weights

struct upload {
  cu_state *s;
  size_t off;  // bytes used in the arena
  bool dry;    // first pass only counts
  wk_error *err;
  bool bf16_keep;  // WICK_CUDA_BF16=keep: BF16 matrices stay BF16 (comparison)
};

// The token embeddings in pinned host memory that kernels read through its
// device mapping: the lookup reads one row a token (a decode step reads
// ~2-8 KB over the bus), so the table need not take device memory (0.29 GB
// for the 8B shape at Q4_K, 1.05 GB at BF16). Only where the output
// projection is not the same table. The dry pass allocates it; where pinned
// memory is refused the table goes to the device arena instead (*hosted
// false).
static int up_host(upload *u, const wk_tensor *t, cu_weight *w, bool *hosted) {
  cu_state *s = u->s;
  wk_error *err = u->err;
  *hosted = false;
  if (u->dry) {
    if (cudaHostAlloc(&s->embd_host, t->nbytes, cudaHostAllocMapped) != cudaSuccess) {
      cudaGetLastError();
      s->embd_host = NULL;
      return WICK_OK;
    }
    s->embd_host_bytes = t->nbytes;
  } else if (s->embd_host) {
    void *d = NULL;
    CK(cudaHostGetDevicePointer(&d, s->embd_host, 0));
    memcpy(s->embd_host, t->data, t->nbytes);
    w->d = (const uint8_t *)d;
  }
  *hosted = s->embd_host != NULL;
  return WICK_OK;
}

// host: the matrix stays in host memory (up_host).
static int up_matrix(upload *u, const wk_tensor *t, cu_weight *w, bool host = false) {
  memset(w, 0, sizeof *w);
  if (!t->data) return WICK_OK;
  if (!cu_type_supported(t->type))
    return cu_fail(u->err, WICK_ERR_UNSUPPORTED, "cuda: tensor %s has type %d, which has no CUDA kernel",
                   t->name, t->type);
  if (t->ne[0] % 32)
    return cu_fail(u->err, WICK_ERR_UNSUPPORTED, "cuda: tensor %s row length %lld is not a multiple of 32",
                   t->name, (long long)t->ne[0]);
  size_t rb = wk_row_size(t->type, t->ne[0]);
  size_t rows = (size_t)t->ne[1] * t->ne[2] * t->ne[3];
  if (rb == 0 || rb * rows != t->nbytes)
    return cu_fail(u->err, WICK_ERR_FORMAT, "cuda: tensor %s holds %llu bytes, expected %zu",
                   t->name, (unsigned long long)t->nbytes, rb * rows);
  w->type = t->type, w->rows = (int)rows, w->cols = (int)t->ne[0], w->row_bytes = rb;
  if (host) {
    bool hosted;
    if (int st = up_host(u, t, w, &hosted)) return st;
    if (hosted) return WICK_OK;
  }
  w->d = u->s->arena + u->off;
  if (!u->dry) {
    cudaError_t e = cudaMemcpy(u->s->arena + u->off, t->data, t->nbytes, cudaMemcpyHostToDevice);
    wk_error *err = u->err;
    CK(e);
    // BF16 matrices become F16 on the device where that is exact (every
    // value but those under 2^-14, where f16 steps by 2^-24): the GEMM path
    // then reads them as they are instead of converting them for every
    // product, and the matrix-vector kernels run as fast on either.
    if (t->type == WK_BF16 && !u->bf16_keep) {
      CK(cudaDeviceSynchronize());  // a copy from pageable memory may still be landing
      bool done = false;
      if (int st = cu_bf16_to_f16(&u->s->c, (void *)w->d, t->nbytes / 2, &done, err)) return st;
      if (done) w->type = WK_F16;
    }
  }
  u->off += align256(t->nbytes);
  return WICK_OK;
}

// A vector (norm weight, bias) converted to f32.
static int up_vector(upload *u, const wk_tensor *t, const float **out) {
  *out = NULL;
  if (!t->data) return WICK_OK;
  size_t n = (size_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  if (t->type != WK_F32 && t->type != WK_F16 && t->type != WK_BF16)
    return cu_fail(u->err, WICK_ERR_UNSUPPORTED, "cuda: vector %s has type %d (expected f32/f16/bf16)",
                   t->name, t->type);
  *out = (const float *)(u->s->arena + u->off);
  if (!u->dry) {
    float *h = (float *)wk_malloc(n * sizeof(float));
    if (!h) return cu_fail(u->err, WICK_ERR_NOMEM, "cuda: out of host memory");
    const uint8_t *src = (const uint8_t *)t->data;
    for (size_t i = 0; i < n; i++) {
      uint16_t v16;
      if (t->type == WK_F32) {
        memcpy(&h[i], src + 4 * i, 4);
        continue;
      }
      memcpy(&v16, src + 2 * i, 2);
      h[i] = t->type == WK_F16 ? wk_f16_to_f32(v16) : wk_bf16_to_f32(v16);
    }
    cudaError_t e = cudaMemcpy(u->s->arena + u->off, h, n * sizeof(float), cudaMemcpyHostToDevice);
    wk_free(h);
    wk_error *err = u->err;
    CK(e);
  }
  u->off += align256(n * sizeof(float));
  return WICK_OK;
}

// RoPE angle per position of each rotated pair of layer l: the layer's
// scale times base^(-2i/rope_dim), divided by the model's rope_freqs entry
// (Llama 3 scaling) when present.
static int rope_freqs(const wk_model *m, int l, double *f, wk_error *err) {
  const wk_layer *L = &m->layers[l];
  int half = m->rope_dim / 2;
  const wk_tensor *rf = &m->rope_freqs;
  if (rf->data && (rf->type != WK_F32 || rf->nbytes < (uint64_t)half * 4))
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: rope_freqs is type %d with %llu bytes (expected f32, %d values)",
                   rf->type, (unsigned long long)rf->nbytes, half);
  for (int i = 0; i < half; i++) {
    double fr = (double)L->rope_freq_scale * pow((double)L->rope_base, -2.0 * i / m->rope_dim);
    if (rf->data) {
      float dv;
      memcpy(&dv, (const uint8_t *)rf->data + 4 * i, 4);
      fr /= (double)dv;
    }
    f[i] = fr;
  }
  return WICK_OK;
}

static int up_freqs(upload *u, int l, const double **out) {
  const wk_model *m = u->s->m;
  size_t bytes = (size_t)(m->rope_dim / 2) * sizeof(double);
  *out = (const double *)(u->s->arena + u->off);
  if (!u->dry) {
    double f[1024];
    wk_error *err = u->err;
    int st = rope_freqs(m, l, f, err);
    if (st) return st;
    CK(cudaMemcpy(u->s->arena + u->off, f, bytes, cudaMemcpyHostToDevice));
  }
  u->off += align256(bytes);
  return WICK_OK;
}

static int upload_all(upload *u) {
  cu_state *s = u->s;
  const wk_model *m = s->m;
  int st;
#define UP(x) \
  do {                                    \
    if ((st = (x)) != WICK_OK) return st; \
  } while (0)
  bool tied = m->tied_output || !m->output.data || m->output.data == m->tok_embd.data;
  // WICK_CUDA_EMBD=device keeps an untied embedding table on the device.
  const char *ee = getenv("WICK_CUDA_EMBD");
  UP(up_matrix(u, &m->tok_embd, &s->tok_embd, !tied && !(ee && !strcmp(ee, "device"))));
  if (tied)
    s->output = s->tok_embd;
  else
    UP(up_matrix(u, &m->output, &s->output));
  UP(up_vector(u, &m->out_norm, &s->out_norm));
  for (int l = 0; l < m->n_layers; l++) {
    const wk_layer *L = &m->layers[l];
    cu_layer *C = &s->layers[l];
    UP(up_matrix(u, &L->wq, &C->wq));
    UP(up_matrix(u, &L->wk, &C->wk));
    UP(up_matrix(u, &L->wv, &C->wv));
    UP(up_matrix(u, &L->wo, &C->wo));
    UP(up_matrix(u, &L->w_gate, &C->wg));
    UP(up_matrix(u, &L->w_up, &C->wu));
    UP(up_matrix(u, &L->w_down, &C->wd));
    UP(up_vector(u, &L->attn_norm, &C->attn_norm));
    UP(up_vector(u, &L->ffn_norm, &C->ffn_norm));
    UP(up_vector(u, &L->q_norm, &C->q_norm));
    UP(up_vector(u, &L->k_norm, &C->k_norm));
    UP(up_vector(u, &L->post_attn_norm, &C->post_attn));
    UP(up_vector(u, &L->post_ffn_norm, &C->post_ffn));
    UP(up_vector(u, &L->bq, &C->bq));
    UP(up_vector(u, &L->bk, &C->bk));
    UP(up_vector(u, &L->bv, &C->bv));
    UP(up_freqs(u, l, &C->inv_freq));
    C->window = L->sliding_window;
    if (!C->wq.d || !C->wk.d || !C->wv.d || !C->wo.d || !C->wg.d || !C->wu.d || !C->wd.d ||
        !C->attn_norm || !C->ffn_norm)
      return cu_fail(u->err, WICK_ERR_FORMAT, "cuda: layer %d lacks a required tensor", l);
  }
#undef UP
  return WICK_OK;
}

// Whether the fused batch kernel computes every matrix a step reads.
static bool mmq_covers_all(const cu_state *s) {
  if (!cu_mmq_type(s->output.type)) return false;
  for (int l = 0; l < s->m->n_layers; l++) {
    const cu_layer *C = &s->layers[l];
    const cu_weight *ws[7] = {&C->wq, &C->wk, &C->wv, &C->wo, &C->wg, &C->wu, &C->wd};
    for (int i = 0; i < 7; i++)
      if (!cu_mmq_type(ws[i]->type)) return false;
  }
  return true;
}

// ---------------------------------------------------------------- prepare

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

static int cuda_warmup(cu_state *s, wk_error *err);

static int cuda_prepare(wk_backend *b, const wk_model *m, const wk_backend_params *p,
                        wk_error *err) {
  cu_state *s = (cu_state *)b->ctx;
  s->m = m, s->p = *p;
  if (p->max_batch_tokens < 1 || p->max_seqs < 1 || p->kv.block_size < 1 || p->kv.n_blocks < 1)
    return cu_fail(err, WICK_ERR_INVALID, "cuda: bad backend params (tokens %d, seqs %d, kv %dx%d)",
                   p->max_batch_tokens, p->max_seqs, p->kv.n_blocks, p->kv.block_size);
  if (m->rope_dim > 2048 || m->rope_dim % 2 || m->dim % 32 || m->head_dim % 32)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: dim %d, head_dim %d, rope_dim %d not supported",
                   m->dim, m->head_dim, m->rope_dim);
  int dev_count = 0;
  CK(cudaGetDeviceCount(&dev_count));
  if (p->device < 0 || p->device >= dev_count)
    return cu_fail(err, WICK_ERR_INVALID, "cuda: device %d requested, %d present", p->device, dev_count);
  CK(cudaSetDevice(p->device));
  // Each thread's stack reservation: the context keeps it for every thread
  // the GPU can hold (1 KB by default: ~280 MB on an H200). The backend's
  // kernels use at most 56 bytes (ptxas), and the driver raises the
  // reservation at launch for a kernel that needs more, so 256 bytes saves
  // ~0.21 GB at no risk. WICK_CUDA_STACK=bytes overrides it (comparison).
  const char *se = getenv("WICK_CUDA_STACK");
  CK(cudaDeviceSetLimit(cudaLimitStackSize, se ? (size_t)atol(se) : 256));
  CK(cudaStreamCreateWithFlags(&s->c.st, cudaStreamNonBlocking));
  CK(cublasCreate(&s->c.blas));
  CK(cublasSetStream(s->c.blas, s->c.st));
  const char *mm = getenv("WICK_CUDA_MV_MAX");
  s->mv_max_decode = mm && atoi(mm) >= 0 && atoi(mm) <= GRAPH_MAX_N ? atoi(mm) : MV_MAX_DECODE;
  s->mv_max_prompt = s->mv_max_decode < MV_MAX_PROMPT ? s->mv_max_decode : MV_MAX_PROMPT;
  s->c.mv_max_tokens = s->mv_max_prompt;  // run_batch sets it per batch
  const char *ge = getenv("WICK_CUDA_GRAPHS");
  s->use_graphs = !(ge && ge[0] == '0');
  // WICK_CUDA_MATVEC=int8 | f32 (f32 x for every type, v4) | stream (the
  // streamed kernel) | reg (the register-streamed kernel, mvr.cuh);
  // WICK_CUDA_PDL=0|1 (programmatic dependent launch of every decode
  // kernel), WICK_CUDA_FOLD_NORM=0|1 (for comparison).
  const char *me = getenv("WICK_CUDA_MATVEC"), *pe = getenv("WICK_CUDA_PDL");
  const char *fe = getenv("WICK_CUDA_FOLD_NORM");
  s->c.mv_f32x = !me                     ? MV_KERNEL_DEFAULT
                 : !strcmp(me, "f32")    ? MV_F32X
                 : !strcmp(me, "stream") ? MV_STREAM
                 : !strcmp(me, "reg")    ? MV_REG
                                         : MV_INT8;
  s->c.pdl = pe ? pe[0] == '1' : PDL_DEFAULT;
  // The v4 kernel (float types) launches plainly: its grids are several
  // waves, and the next kernel's blocks waiting beside its last wave cost
  // more than the overlap gave (BF16 8B decode 5.47 against 5.65 ms at
  // context 4096, session 4 call 3). WICK_CUDA_PDL_V4=1 for comparison.
  const char *pv = getenv("WICK_CUDA_PDL_V4");
  s->c.pdl_v4 = s->c.pdl && pv && pv[0] == '1';
  s->fold_norm = fe ? fe[0] == '1' : FOLD_NORM_DEFAULT;
  // WICK_CUDA_FUSE_GLU=0: gate/up products and the gated unit as separate
  // launches even where the fused kernel applies (for comparison).
  const char *fg = getenv("WICK_CUDA_FUSE_GLU");
  s->c.mv_glu_off = fg && fg[0] == '0';
  // WICK_CUDA_PAIR=0: a layer's Q4_K and Q6_K products of one x (Q4_K_M's
  // Q, K and V) as two launches, as before session 24 (comparison).
  const char *pa = getenv("WICK_CUDA_PAIR");
  s->c.mv_pair_off = pa && pa[0] == '0';
  // WICK_CUDA_WIDE=0: Q4_K/Q5_K keep the register kernel's 8-lane format on
  // every row length; =all: the wide one on every row count of up to 8192
  // columns (session 6), not only where its grid fills the SMs (comparison).
  const char *we = getenv("WICK_CUDA_WIDE");
  s->c.mv_wide = !we ? WIDE_FILLS : we[0] == '0' ? WIDE_OFF : !strcmp(we, "all") ? WIDE_ALL : WIDE_FILLS;
  // FP8 products run on the register kernel's plain format with f32 x
  // (mvr.cuh, 1 item in flight); WICK_CUDA_FP8W=v4 on the v4 kernel (the
  // default before session 12), =1 (E4M3) on the 16-byte-piece format with
  // f16 x (mvr_fp8w.cuh). Comparison settings (session 12 measured 3 and 5
  // items in flight too: the bench's `/reg 1024/1/D+pdl` rows).
  const char *f8 = getenv("WICK_CUDA_FP8W");
  s->c.mv_fp8w = !f8 ? FP8_REG : f8[0] == '1' ? FP8_W : !strcmp(f8, "v4") ? FP8_V4 : FP8_REG;
  // WICK_CUDA_MVD=0: the int8-x types at their session-11 kernels and
  // shapes (Q4_K, Q5_K, Q8_0 on the register kernel with more items in
  // flight, the wide Q4_K format at 768 threads and 3 items; Q4_0..Q5_1 on
  // the streamed kernel); WICK_CUDA_F16D=7: F16/BF16 with 7 items in
  // flight (default 3; 7 until session 12). Comparison settings.
  const char *mvd = getenv("WICK_CUDA_MVD"), *f16d = getenv("WICK_CUDA_F16D");
  s->c.mv_s11 = mvd && mvd[0] == '0';
  s->c.mv_f16d = f16d ? atoi(f16d) : 0;
  // WICK_CUDA_MVR=late, whole or late+whole: the register-streamed kernel's
  // F16/BF16/FP8 products as in session 6 (first weight loads after x is
  // staged; whole rows a warp) for comparison (internal.cuh, mvr.cuh).
  s->c.mv_mvr = mvr_opts_env();
  // WICK_CUDA_NTOK=1, 2 or 4: the register-streamed kernel takes at most that
  // many tokens a block (default 8: a batch of up to 8 reads each weight
  // once; more tokens take several grid rows). Comparison setting.
  const char *nt = getenv("WICK_CUDA_NTOK");
  s->c.mv_ntok = nt && (atoi(nt) == 1 || atoi(nt) == 2 || atoi(nt) == 4) ? atoi(nt) : 8;
  // WICK_CUDA_NTOK16=2, 4 or 8: the same for the 16-bit-x (quantized) types,
  // which take a token a block by default (matvec.cu's mvr_ntok).
  const char *nt16 = getenv("WICK_CUDA_NTOK16");
  s->c.mv_ntok16 = nt16 && (atoi(nt16) == 2 || atoi(nt16) == 4 || atoi(nt16) == 8) ? atoi(nt16) : 1;
  // WICK_CUDA_TC=N: the types on the tensor-core matrix-vector kernel
  // (mvt.cuh), bits Q4_K 1, Q6_K 2, Q5_K 4, Q8_0 8, Q4_0 16 (default 31:
  // all), for batches of at least WICK_CUDA_TC_MIN tokens (default: the
  // type's, mvt_cfg), at most WICK_CUDA_TC_NTOK (4 or 8) tokens a block; the
  // others take the register-streamed one. Comparison.
  // WICK_CUDA_MMQ=0: batches past the matrix-vector kernels on the GEMM path
  // only; =tile: the fused kernel a block a row tile (session 17's grid;
  // comparison).
  const char *mq = getenv("WICK_CUDA_MMQ");
  const bool mq_tile = mq && !strcmp(mq, "tile");
  s->c.mmq = mq && !mq_tile ? atoi(mq) != 0 : 1;
  const char *tce = getenv("WICK_CUDA_TC"), *tcm = getenv("WICK_CUDA_TC_MIN");
  s->c.mv_tc = tce ? atoi(tce) & 31 : 31;
  s->c.mv_tc_min = tcm && atoi(tcm) >= 1 ? atoi(tcm) : 0;
  const char *tcn = getenv("WICK_CUDA_TC_NTOK");
  s->c.mv_tc_ntok = tcn && (atoi(tcn) == 4 || atoi(tcn) == 8) ? atoi(tcn) : 0;
  // WICK_CUDA_PF=N: steps of each warp's first unit the register-streamed
  // kernel asks of the L2 before its wait (default 1 for int8 x, 0 for f32
  // x: mvr.cuh; comparison).
  const char *pfe = getenv("WICK_CUDA_PF");
  s->c.mv_pf = pfe ? atoi(pfe) : -1;
  // WICK_CUDA_ATTN=warp: decode attention on the warp-per-key kernel;
  // =nomerge: the group kernel with a combine launch; =postapart: the Q/K/V
  // epilogue as its own launch in decode too; =nocluster: the splits merged
  // by the last block through the counters, never in a cluster; =mma4: the
  // tensor-core kernel with 4 warps x 2 stages (variant 8); =group1: the session-3 decode
  // kernel (block-wide tiles); =fma: the session-5 one (warp tiles, f32
  // FMAs) instead of the tensor-core kernel (comparison).
  const char *ae = getenv("WICK_CUDA_ATTN");
  s->c.attn_warp = ae && !strcmp(ae, "warp");
  s->c.attn_merge_off = ae && !strcmp(ae, "nomerge");
  s->c.attn_post_apart = ae && !strcmp(ae, "postapart");
  s->c.attn_cluster_off = ae && !strcmp(ae, "nocluster");
  // WICK_CUDA_ATTN_SPLITS=N: at most N key splits in decode attention (comparison).
  const char *sx = getenv("WICK_CUDA_ATTN_SPLITS");
  s->attn_splits_max = sx ? atoi(sx) : 0;
  s->c.attn_variant = !ae                     ? 0
                      : !strcmp(ae, "group1") ? 1
                      : !strcmp(ae, "fma")    ? 5
                      : !strcmp(ae, "mma4")   ? 8
                                              : 0;
  const char *fh = getenv("WICK_CUDA_FLASH_H");
  s->flash_h_off = fh && fh[0] == '0';
  s->skip = skip_env();
  CK(cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, p->device));
  s->c.mmq_blocks = mq_tile ? 0 : MMQ_PER_SM * s->sms;
  cu_attn_shape as = {};
  as.n_heads = m->n_heads, as.n_kv_heads = m->n_kv_heads, as.head_dim = m->head_dim;
  bool group = !s->c.attn_warp && cu_attn_decode_ok(&as);
  s->attn_blocks_per_token = group ? m->n_kv_heads : m->n_heads;
  s->attn_per_sm = group ? cu_attn_decode_per_sm(&s->c, &as) : 4;
  s->layers = (cu_layer *)wk_calloc((size_t)m->n_layers, sizeof(cu_layer));
  if (!s->layers) return cu_fail(err, WICK_ERR_NOMEM, "cuda: out of host memory");

  const char *be = getenv("WICK_CUDA_BF16");
  upload u = {s, 0, true, err, be && !strcmp(be, "keep")};
  int st = upload_all(&u);
  if (st) return st;
  s->arena_bytes = u.off;
  CK(cudaMalloc((void **)&s->arena, s->arena_bytes));
  u.off = 0, u.dry = false;
  if ((st = upload_all(&u))) return st;
  if (!getenv("WICK_CUDA_MV_MAX") && s->c.mmq && mmq_covers_all(s)) {
    s->mv_max_decode = MV_MAX_DECODE_MMQ;
    s->mv_max_prompt = s->mv_max_decode < MV_MAX_PROMPT ? s->mv_max_decode : MV_MAX_PROMPT;
    s->c.mv_max_tokens = s->mv_max_prompt;
  }

  s->qdim = m->n_heads * m->head_dim, s->kvdim = m->n_kv_heads * m->head_dim;
  s->kv_layer_elems = (size_t)p->kv.n_blocks * p->kv.block_size * s->kvdim;
  s->kv_bytes = 2 * (size_t)m->n_layers * s->kv_layer_elems * sizeof(__half);
  CK(cudaMalloc((void **)&s->kv, s->kv_bytes));
  CK(cudaMemset(s->kv, 0, s->kv_bytes));

  size_t T = (size_t)p->max_batch_tokens, L = (size_t)(p->max_logits > 0 ? p->max_logits : 1);
  size_t wide = max_sz(m->dim, s->qdim);
  size_t f_off[12], nf = 0, tot = 0;
  size_t sizes[11] = {T * m->dim, T * wide, T * s->qdim, T * s->kvdim, T * s->kvdim, T * s->qdim,
                      T * m->ffn_dim, T * m->ffn_dim, L * m->dim, L * m->vocab,
                      (size_t)ATT_PART_PAIRS * cu_part_stride(m->head_dim)};
  for (nf = 0; nf < 11; nf++) f_off[nf] = tot, tot += align256(sizes[nf] * sizeof(float));
  size_t xh_elems = max_sz(T, L) * max_sz(wide, m->ffn_dim);
  size_t xh_off = tot;
  tot += align256(xh_elems * sizeof(__half));
  size_t wmax = 0;
  for (int l = 0; l < m->n_layers; l++) {
    const cu_layer *C = &s->layers[l];
    const cu_weight *ws[7] = {&C->wq, &C->wk, &C->wv, &C->wo, &C->wg, &C->wu, &C->wd};
    for (int i = 0; i < 7; i++) wmax = max_sz(wmax, (size_t)ws[i]->rows * ws[i]->cols);
  }
  wmax = max_sz(wmax, (size_t)m->dim * 8192);
  // 128 MB: the 8B shape's largest matrices in one GEMM (at 32M elements cuBLAS
  // took an sm80 kernel for 2340-row pieces of a 4096-token batch: prefill 24%
  // slower, session 3; pieces are now whole 256-row multiples). 32 MB saved 85
  // MB with 512-token batches but made their prefill 13% slower (session 4).
  if (wmax > ((size_t)64 << 20)) wmax = (size_t)64 << 20;
  // (GEMM scratch from the lower of the two matrix-vector boundaries on)
  size_t wsc_elems = T > (size_t)s->mv_max_prompt || L > (size_t)s->mv_max_prompt ? wmax : 0;
  size_t wsc_off = tot;
  tot += align256(wsc_elems * sizeof(__half));
  // cuBLAS's own workspace: 4 MB of ours instead of the 32 MB it allocates
  // by default on Hopper (the GEMMs here are large; they need no split-K).
  size_t blas_ws = wsc_elems ? (size_t)4 << 20 : 0, blas_off = tot;
  tot += blas_ws;
  s->bt_cap = (size_t)p->max_seqs * p->kv.n_blocks;
  s->meta_ints = 4 * T + L + (size_t)p->max_seqs + s->bt_cap;
  size_t meta_off = tot;
  tot += align256(s->meta_ints * sizeof(int32_t));
  size_t cnt_n = s->c.attn_merge_off ? 0 : T * (size_t)m->n_kv_heads, cnt_off = tot;
  tot += align256(cnt_n * sizeof(unsigned));
  // The batched products' 16-bit x, rounded once a token (mvr.cuh:
  // k_mvr_prep): only blocks of several tokens of the quantized types read
  // it, which take a token a block unless WICK_CUDA_NTOK16 says otherwise.
  const size_t pre_bytes =
      s->c.mv_ntok16 > 1
          ? cu_pre_bytes((int)(T < GRAPH_MAX_N ? T : GRAPH_MAX_N), (int)max_sz(wide, m->ffn_dim))
          : 0;
  size_t pre_off = tot;
  tot += align256(pre_bytes);
  s->ws_bytes = tot;
  CK(cudaMalloc((void **)&s->ws, s->ws_bytes));
  s->c.attn_cnt = cnt_n ? (unsigned *)(s->ws + cnt_off) : NULL, s->c.attn_cnt_n = cnt_n;
  if (cnt_n) CK(cudaMemset(s->c.attn_cnt, 0, cnt_n * sizeof(unsigned)));
  float **fp[11] = {&s->x, &s->hb, &s->q, &s->k, &s->v, &s->att, &s->g, &s->u, &s->lb, &s->logits, &s->part};
  for (size_t i = 0; i < 11; i++) *fp[i] = (float *)(s->ws + f_off[i]);
  s->c.xh = (__half *)(s->ws + xh_off), s->c.xh_elems = xh_elems;
  s->c.wscratch = (__half *)(s->ws + wsc_off), s->c.wscratch_elems = wsc_elems;
  s->c.xpre = pre_bytes ? (uint8_t *)(s->ws + pre_off) : NULL, s->c.xpre_bytes = pre_bytes;
  // WICK_CUDA_XPRE=0: each block of the batched products rounds its tokens'
  // x itself (comparison).
  const char *xp = getenv("WICK_CUDA_XPRE");
  if (xp && xp[0] == '0') s->c.xpre = NULL, s->c.xpre_bytes = 0;
  if (blas_ws) CK(cublasSetWorkspace(s->c.blas, s->ws + blas_off, blas_ws));
  s->meta_d = (int32_t *)(s->ws + meta_off);
  CK(cudaMallocHost((void **)&s->meta_h, s->meta_ints * sizeof(int32_t)));
  CK(cudaMallocHost((void **)&s->logits_h, L * m->vocab * sizeof(float)));
  // Rows of a decode step's top-k: one a sequence (32 KB of keys a row at a
  // vocabulary of 128256).
  if ((st = cu_topk_init(&s->topk, (int)(L < 256 ? L : 256), m->vocab, err))) return st;
  s->ws_bytes += s->topk.bytes;
  int32_t *md = s->meta_d;
  s->meta.tok = md, s->meta.pos = md + T, s->meta.slot = md + 2 * T, s->meta.tseq = md + 3 * T;
  s->meta.lrow = md + 4 * T, s->meta.bt_off = md + 4 * T + L;
  s->meta.bt = md + 4 * T + L + p->max_seqs;
  return cuda_warmup(s, err);
}

// ---------------------------------------------------------------- forward

static int attn_splits_log2(const cu_state *s, int n, int max_ctx) {
  int lg = cu_attn_splits_log2(s->sms, n, s->m->n_heads, s->attn_blocks_per_token, s->attn_per_sm,
                               max_ctx);
  while (s->attn_splits_max > 0 && lg > 0 && (1 << lg) > s->attn_splits_max) lg--;
  return lg;
}

// Several matrix-vector products of one x (decode sizes): one launch per run
// of matrices of one type (Q/K/V, gate/up), or one for two runs where
// cu_matvec_pair takes them. xn: an RMSNorm folded into them.
static int matmul_group(cu_ctx *c, const cu_weight *const *ws, float *const *ys, int nw,
                        const float *x, const cu_xnorm *xn, int n, wk_error *err) {
  int st, n1 = 1;
  while (n1 < nw && ws[n1]->type == ws[0]->type) n1++;
  bool done = false;
  if (n1 < nw && (st = cu_matvec_pair(c, ws, ys, n1, nw, x, xn, n, &done, err))) return st;
  if (done) return WICK_OK;
  for (int i = 0; i < nw;) {
    int j = i + 1;
    while (j < nw && ws[j]->type == ws[i]->type && ws[j]->cols == ws[i]->cols) j++;
    if ((st = cu_matvec_multi(c, ws + i, ys + i, j - i, x, xn, n, 0.0f, err))) return st;
    i = j;
  }
  return WICK_OK;
}

// Q, K and V (s->q, s->k, s->v) of the layer's input s->x: the RMSNorm
// folded into the matrix-vector products (decode), or written as the GEMM
// path's f16 activations, or as f32 for unfolded matrix-vector products.
static int layer_qkv(cu_state *s, const cu_layer *C, int n, bool fold, wk_error *err) {
  const wk_model *m = s->m;
  cu_ctx *c = &s->c;
  const cu_weight *qkv[3] = {&C->wq, &C->wk, &C->wv};
  float *out[3] = {s->q, s->k, s->v};
  int st;
  if (fold && cu_matvec_fold_ok(c, &C->wq) && cu_matvec_fold_ok(c, &C->wk) &&
      cu_matvec_fold_ok(c, &C->wv)) {
    cu_xnorm an = {C->attn_norm, m->norm_eps};
    return matmul_group(c, qkv, out, 3, s->x, &an, n, err);
  }
  if (n > c->mv_max_tokens) {
    if ((st = cu_rmsnorm_xh(c, s->x, C->attn_norm, m->norm_eps, m->dim, n, err))) return st;
    for (int i = 0; i < 3; i++)
      if ((st = cu_matmul_xh(c, qkv[i], n, out[i], 0.0f, err))) return st;
    return WICK_OK;
  }
  if ((st = cu_rmsnorm(c, s->x, NULL, C->attn_norm, m->norm_eps, m->dim, n, s->hb, false, err)))
    return st;
  return matmul_group(c, qkv, out, 3, s->hb, NULL, n, err);
}

// The feed-forward block: s->x += down(act(gate x') * up x') with x' =
// rmsnorm(s->x) (Gemma: the sum through its post-norm first). Decode: the
// norm folded into the products and gate/up fused where the kernels allow;
// the GEMM path: f16 activations written by the norm and the gated unit.
static int layer_ffn(cu_state *s, const cu_layer *C, int n, bool fold, wk_error *err) {
  const wk_model *m = s->m;
  cu_ctx *c = &s->c;
  int st, act = m->act == WK_ACT_GELU_TANH;
  float *dst = C->post_ffn ? s->hb : s->x, beta = C->post_ffn ? 0.0f : 1.0f;
  if (n > c->mv_max_tokens) {
    if ((st = cu_rmsnorm_xh(c, s->x, C->ffn_norm, m->norm_eps, m->dim, n, err)) ||
        (st = cu_matmul_xh(c, &C->wg, n, s->g, 0.0f, err)) ||
        (st = cu_matmul_xh(c, &C->wu, n, s->u, 0.0f, err)) ||
        (st = cu_glu_xh(c, s->g, s->u, (long)n * m->ffn_dim, act, err)) ||
        (st = cu_matmul_xh(c, &C->wd, n, dst, beta, err)))
      return st;
  } else {
    bool fold_ffn = fold && cu_matvec_fold_ok(c, &C->wg) && cu_matvec_fold_ok(c, &C->wu);
    if (!fold_ffn &&
        (st = cu_rmsnorm(c, s->x, NULL, C->ffn_norm, m->norm_eps, m->dim, n, s->hb, false, err)))
      return st;
    const float *fx = fold_ffn ? s->x : s->hb;
    cu_xnorm fn = {C->ffn_norm, m->norm_eps};
    const cu_xnorm *fxn = fold_ffn ? &fn : NULL;
    if (s->skip & SKIP_GU) {  // left out (timing only)
    } else if (cu_matvec_glu_ok(c, &C->wg, &C->wu, n)) {
      if ((st = cu_matvec_glu(c, &C->wg, &C->wu, fx, fxn, n, s->g, act, err))) return st;
    } else {
      const cu_weight *gu[2] = {&C->wg, &C->wu};
      float *gu_out[2] = {s->g, s->u};
      if ((st = matmul_group(c, gu, gu_out, 2, fx, fxn, n, err)) ||
          (st = cu_glu(c, s->g, s->u, (long)n * m->ffn_dim, act, err)))
        return st;
    }
    if (!(s->skip & SKIP_DOWN) && (st = cu_matmul(c, &C->wd, s->g, n, dst, beta, err))) return st;
  }
  if (C->post_ffn)
    return cu_rmsnorm(c, s->hb, NULL, C->post_ffn, m->norm_eps, m->dim, n, s->x, true, err);
  return WICK_OK;
}

static int run_layers(cu_state *s, int n, int nl, int splits, wk_error *err) {
  const wk_model *m = s->m;
  cu_ctx *c = &s->c;
  int st;
#define RUN(x) \
  do {                                    \
    if ((st = (x)) != WICK_OK) return st; \
  } while (0)
  // RMSNorms folded into the products that read them: decode sizes only (the
  // GEMM path reads a normalized copy), streamed kernel only (v4 measured
  // slower with the fold, docs/CUDA.md v7).
  bool fold = s->fold_norm && n <= c->mv_max_tokens;
  RUN(cu_embed(c, &s->tok_embd, s->meta.tok, n, m->emb_scale, s->x, err));
  for (int l = 0; l < m->n_layers; l++) {
    const cu_layer *C = &s->layers[l];
    __half *kc = s->kv + (size_t)l * s->kv_layer_elems;
    __half *vc = s->kv + ((size_t)m->n_layers + l) * s->kv_layer_elems;
    cu_attn_shape a = {m->n_heads, m->n_kv_heads, m->head_dim, m->rope_dim, m->rope_neox,
                       C->inv_freq, C->q_norm, C->k_norm, C->bq, C->bk, C->bv, m->norm_eps,
                       s->p.kv.block_size, m->attn_scale, m->attn_softcap, C->window};
    if (!(s->skip & SKIP_QKV)) RUN(layer_qkv(s, C, n, fold, err));
    // The GEMM path: attention writes the o-projection's f16 activations.
    bool gemm = n > c->mv_max_tokens && !s->flash_h_off;
    if (!(s->skip & SKIP_ATTN))
      RUN(cu_attention(c, &a, &s->meta, n, s->n_seqs, s->q, s->k, s->v, kc, vc, s->att,
                       gemm ? c->xh : NULL, splits, s->part, err));
    float *o_dst = C->post_attn ? s->hb : s->x, o_beta = C->post_attn ? 0.0f : 1.0f;
    if (!(s->skip & SKIP_O))
      RUN(gemm ? cu_matmul_xh(c, &C->wo, n, o_dst, o_beta, err)
               : cu_matmul(c, &C->wo, s->att, n, o_dst, o_beta, err));
    if (C->post_attn)
      RUN(cu_rmsnorm(c, s->hb, NULL, C->post_attn, m->norm_eps, m->dim, n, s->x, true, err));
    RUN(layer_ffn(s, C, n, fold, err));
  }
  if (s->skip & SKIP_OUT) {  // left out (timing only)
  } else if (nl == 1 && n == 1 && fold && cu_matvec_fold_ok(c, &s->output)) {  // lrow[0] = 0
    cu_xnorm on = {s->out_norm, m->norm_eps};
    const cu_weight *wo = &s->output;
    RUN(cu_matvec_multi(c, &wo, &s->logits, 1, s->x, &on, 1, 0.0f, err));
  } else if (nl > 0) {
    RUN(cu_rmsnorm(c, s->x, s->meta.lrow, s->out_norm, m->norm_eps, m->dim, nl, s->lb, false, err));
    RUN(cu_matmul(c, &s->output, s->lb, nl, s->logits, 0.0f, err));
  }
  if (nl > 0 && m->final_softcap > 0.0f)
    RUN(cu_softcap(c, s->logits, (long)nl * m->vocab, m->final_softcap, err));
#undef RUN
  return WICK_OK;
}

// Checks the batch and writes the token facts into the pinned host buffer.
static int pack_batch(cu_state *s, const wk_batch *bt, wk_error *err) {
  const wk_backend_params *p = &s->p;
  size_t T = (size_t)p->max_batch_tokens, L = (size_t)(p->max_logits > 0 ? p->max_logits : 1);
  int n = bt->n_tokens;
  if (n < 1 || n > p->max_batch_tokens || bt->n_seqs < 1 || bt->n_seqs > p->max_seqs ||
      bt->n_logits < 0 || (size_t)bt->n_logits > L)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: batch of %d tokens, %d seqs, %d logits exceeds %d/%d/%zu",
                   n, bt->n_seqs, bt->n_logits, p->max_batch_tokens, p->max_seqs, L);
  int32_t *h = s->meta_h;
  int32_t *tok = h, *pos = h + T, *slot = h + 2 * T, *tseq = h + 3 * T, *lrow = h + 4 * T;
  int32_t *bt_off = lrow + L, *btab = bt_off + p->max_seqs;
  size_t used = 0;
  int bs = p->kv.block_size;
  for (int i = 0; i < n; i++) tseq[i] = -1;
  s->max_ctx = 0;
  // Sequences with new tokens: n == n_seqs then means one new token each
  // (the decode attention finishes each new key itself; a sequence with no
  // new token must not count, or another's second token would read a key
  // still being written).
  s->n_seqs = 0;
  for (int q = 0; q < bt->n_seqs; q++) {
    const wk_seq *sq = &bt->seqs[q];
    if (sq->n_new < 0 || sq->first < 0 || sq->first + sq->n_new > n || sq->n_past < 0 ||
        (long)sq->n_past + sq->n_new > (long)sq->n_blocks * bs)
      return cu_fail(err, WICK_ERR_RANGE, "cuda: sequence %d (past %d, new %d, first %d, %d blocks) does not fit",
                     q, sq->n_past, sq->n_new, sq->first, sq->n_blocks);
    if (used + (size_t)sq->n_blocks > s->bt_cap)
      return cu_fail(err, WICK_ERR_RANGE, "cuda: block tables exceed %zu entries", s->bt_cap);
    bt_off[q] = (int32_t)used;
    for (int j = 0; j < sq->n_blocks; j++) {
      int32_t bid = sq->blocks[j];
      if (bid < 0 || bid >= p->kv.n_blocks)
        return cu_fail(err, WICK_ERR_RANGE, "cuda: block id %d outside [0, %d)", bid, p->kv.n_blocks);
      btab[used + j] = bid;
    }
    used += sq->n_blocks;
    s->n_seqs += sq->n_new > 0;
    for (int j = 0; j < sq->n_new; j++) {
      int t = sq->first + j, ps = sq->n_past + j;
      if (tseq[t] >= 0) return cu_fail(err, WICK_ERR_INVALID, "cuda: token %d in two sequences", t);
      tseq[t] = q, pos[t] = ps;
      if (ps + 1 > s->max_ctx) s->max_ctx = ps + 1;
      slot[t] = sq->blocks[ps / bs] * bs + ps % bs;
    }
  }
  for (int i = 0; i < n; i++) {
    if (tseq[i] < 0) return cu_fail(err, WICK_ERR_INVALID, "cuda: token %d belongs to no sequence", i);
    tok[i] = bt->tokens[i];
    if (tok[i] < 0 || tok[i] >= s->m->vocab)
      return cu_fail(err, WICK_ERR_RANGE, "cuda: token id %d outside [0, %d)", tok[i], s->m->vocab);
  }
  for (int i = 0; i < bt->n_logits; i++) {
    lrow[i] = bt->logits_at[i];
    if (lrow[i] < 0 || lrow[i] >= n)
      return cu_fail(err, WICK_ERR_RANGE, "cuda: logits_at %d outside [0, %d)", lrow[i], n);
  }
  return WICK_OK;
}

// Queues the whole batch on the stream; the logits rows end in s->logits.
static int run_batch(cu_state *s, const wk_batch *bt, wk_error *err) {
  int st = pack_batch(s, bt, err);
  if (st) return st;
  CK(cudaMemcpyAsync(s->meta_d, s->meta_h, s->meta_ints * sizeof(int32_t), cudaMemcpyHostToDevice,
                     s->c.st));
  int n = bt->n_tokens, nl = bt->n_logits, lg = attn_splits_log2(s, n, s->max_ctx);
  s->c.mv_max_tokens = n == s->n_seqs ? s->mv_max_decode : s->mv_max_prompt;
  if (s->use_graphs && n <= GRAPH_MAX_N && nl <= GRAPH_MAX_N) {
    cudaGraphExec_t *ge = &s->graphs[n][s->n_seqs][nl][lg];
    if (!*ge) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s->c.st, cudaStreamCaptureModeThreadLocal));
      st = run_layers(s, n, nl, 1 << lg, err);
      cudaError_t e = cudaStreamEndCapture(s->c.st, &g);
      if (st) return st;
      CK(e);
      e = cudaGraphInstantiate(ge, g, 0);
      cudaGraphDestroy(g);
      CK(e);
    }
    CK(cudaGraphLaunch(*ge, s->c.st));
  } else {
    if ((st = run_layers(s, n, nl, 1 << lg, err))) return st;
  }
  return WICK_OK;
}

static int cuda_forward(wk_backend *b, const wk_batch *bt, float *logits, wk_error *err) {
  cu_state *s = (cu_state *)b->ctx;
  int st = run_batch(s, bt, err), nl = bt->n_logits;
  if (st) return st;
  size_t lbytes = (size_t)nl * s->m->vocab * sizeof(float);
  if (nl > 0) CK(cudaMemcpyAsync(s->logits_h, s->logits, lbytes, cudaMemcpyDeviceToHost, s->c.st));
  CK(cudaStreamSynchronize(s->c.st));
  if (nl > 0) memcpy(logits, s->logits_h, lbytes);
  return WICK_OK;
}

static int cuda_forward_topk(wk_backend *b, const wk_batch *bt, int k, int32_t *ids, float *vals,
                             wk_error *err) {
  cu_state *s = (cu_state *)b->ctx;
  int nl = bt->n_logits;
  if (nl < 1 || nl > s->topk.rows || k < 1 || k > CU_TOPK_MAX || k > s->m->vocab)
    return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: no device top-%d for %d rows", k, nl);
  int st = run_batch(s, bt, err);
  if (st) return st;
  if ((st = cu_topk_run(&s->c, &s->topk, s->logits, nl, k, err))) return st;
  CK(cudaStreamSynchronize(s->c.st));
  memcpy(ids, s->topk.ids_h, (size_t)nl * k * sizeof(int32_t));
  memcpy(vals, s->topk.vals_h, (size_t)nl * k * sizeof(float));
  return WICK_OK;
}

static int cuda_kv_copy(wk_backend *b, const int32_t *src, const int32_t *dst, int n,
                        wk_error *err) {
  cu_state *s = (cu_state *)b->ctx;
  size_t blk = (size_t)s->p.kv.block_size * s->kvdim;
  for (int i = 0; i < n; i++) {
    if (src[i] < 0 || src[i] >= s->p.kv.n_blocks || dst[i] < 0 || dst[i] >= s->p.kv.n_blocks)
      return cu_fail(err, WICK_ERR_RANGE, "cuda: kv copy %d -> %d outside [0, %d)", src[i], dst[i],
                     s->p.kv.n_blocks);
    for (int l = 0; l < 2 * s->m->n_layers; l++) {
      __half *base = s->kv + (size_t)l * s->kv_layer_elems;
      CK(cudaMemcpyAsync(base + dst[i] * blk, base + src[i] * blk, blk * sizeof(__half),
                         cudaMemcpyDeviceToDevice, s->c.st));
    }
  }
  CK(cudaStreamSynchronize(s->c.st));
  return WICK_OK;
}

static void cuda_memory(wk_backend *b, wk_backend_mem *out) {
  cu_state *s = (cu_state *)b->ctx;
  out->weights = s->arena_bytes, out->weights_host = s->embd_host_bytes;
  out->kv = s->kv_bytes, out->workspace = s->ws_bytes;
}

static void cuda_destroy(wk_backend *b) {
  if (!b) return;
  cu_state *s = (cu_state *)b->ctx;
  if (s) {
    for (int i = 0; i <= GRAPH_MAX_N; i++)
      for (int q = 0; q <= GRAPH_MAX_N; q++)
        for (int j = 0; j <= GRAPH_MAX_N; j++)
          for (int k = 0; k <= ATT_SPLIT_LOG_MAX; k++)
            if (s->graphs[i][q][j][k]) cudaGraphExecDestroy(s->graphs[i][q][j][k]);
    if (s->c.blas) cublasDestroy(s->c.blas);
    cudaFree(s->c.flag);
    if (s->c.st) cudaStreamDestroy(s->c.st);
    cudaFree(s->arena);
    if (s->embd_host) cudaFreeHost(s->embd_host);
    cudaFree(s->kv);
    cudaFree(s->ws);
    if (s->meta_h) cudaFreeHost(s->meta_h);
    if (s->logits_h) cudaFreeHost(s->logits_h);
    cu_topk_free(&s->topk);
    wk_free(s->layers);
    wk_free(s);
  }
  wk_free(b);
}

// A first forward loads what a first request would otherwise pay for inside
// its own time: the kernels' modules (loaded at first launch), cuBLAS's
// kernels and plans for a prompt chunk of the largest size, and the decode
// step's captured graph. One chunk of max_batch_tokens tokens (token 0; at
// most WARMUP_MAX, so a huge batch size does not cost seconds at load) at
// positions 0.., then one decode step at the chunk's last position, both
// into KV blocks no sequence holds yet (a sequence writes every slot it
// reads first). WICK_CUDA_WARMUP=0 skips it (comparison).
enum { WARMUP_MAX = 4096 };
static int cuda_warmup(cu_state *s, wk_error *err) {
  const char *we = getenv("WICK_CUDA_WARMUP");
  if (we && we[0] == '0') return WICK_OK;
  const wk_backend_params *p = &s->p;
  int n = p->max_batch_tokens < WARMUP_MAX ? p->max_batch_tokens : WARMUP_MAX;
  int bs = p->kv.block_size;
  int nb = (n + bs - 1) / bs;
  if (n < 1 || nb > p->kv.n_blocks) return WICK_OK;
  int32_t *mem = (int32_t *)wk_calloc((size_t)n + (size_t)nb, sizeof(int32_t));
  if (!mem) return cu_fail(err, WICK_ERR_NOMEM, "cuda: out of host memory for the warm-up");
  int32_t *tokens = mem, *blocks = mem + n, last = n - 1, zero = 0;
  for (int j = 0; j < nb; j++) blocks[j] = j;
  wk_seq sq = {blocks, nb, 0, n, 0};
  wk_batch bt = {tokens, n, &sq, 1, &last, 1};
  int st = run_batch(s, &bt, err);
  if (!st) {
    sq.n_past = n - 1, sq.n_new = 1;
    bt.n_tokens = 1, bt.logits_at = &zero;
    st = run_batch(s, &bt, err);
  }
  if (!st && s->topk.rows >= 1) st = cu_topk_run(&s->c, &s->topk, s->logits, 1, 1, err);
  wk_free(mem);
  if (st) return st;
  CK(cudaStreamSynchronize(s->c.st));
  return WICK_OK;
}

extern "C" wk_backend *backend_cuda_create(void) {
  wk_backend *b = (wk_backend *)wk_calloc(1, sizeof *b);
  cu_state *s = (cu_state *)wk_calloc(1, sizeof *s);
  if (!b || !s) {
    wk_free(b);
    wk_free(s);
    return NULL;
  }
  b->name = "cuda";
  b->ctx = s;
  b->prepare = cuda_prepare;
  b->forward = cuda_forward;
  b->forward_topk = cuda_forward_topk;
  b->kv_copy_blocks = cuda_kv_copy;
  b->memory = cuda_memory;
  b->destroy = cuda_destroy;
  return b;
}

extern "C" int backend_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" status
    return 0;
  }
  return n;
}
