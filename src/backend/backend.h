// The backend contract: a struct of function pointers chosen at run time.
// A backend implements the whole transformer forward with its own kernels,
// driven by the shared model description; the engine never knows which
// backend it talks to.
#ifndef WICK_BACKEND_BACKEND_H
#define WICK_BACKEND_BACKEND_H

#include <stdint.h>

#include "base/error.h"
#include "model/model.h"

// KV cache geometry, fixed at prepare time. The backend owns the memory:
// n_blocks blocks of block_size token slots, for every layer, K and V.
typedef struct wk_kv_config {
  int block_size;  // token slots per block (e.g. 16)
  int n_blocks;    // blocks in the pool
} wk_kv_config;

typedef struct wk_backend_params {
  int max_batch_tokens;  // most tokens in one forward call (prefill chunk)
  int max_seqs;          // most sequences in one forward call
  int max_logits;        // most rows of logits one call returns
  int n_threads;         // CPU threads (CPU backend)
  int device;            // GPU ordinal (CUDA backend)
  int exact;             // 1: exact f32 path (no 8-bit activations)
  wk_kv_config kv;
} wk_backend_params;

// Memory a prepared backend holds (bytes). weights: on the backend's device
// (host memory for the CPU); weights_host: weights a device backend keeps in
// pinned host memory instead (the CUDA backend's token embeddings).
typedef struct wk_backend_mem {
  uint64_t weights, weights_host, kv, workspace;
} wk_backend_mem;

// One sequence in a batch.
typedef struct wk_seq {
  const int32_t *blocks;  // block table: KV block ids for positions 0.. of this sequence
  int n_blocks;           // entries in blocks
  int n_past;             // tokens already in the cache (positions [0, n_past))
  int n_new;              // new tokens this call (positions [n_past, n_past + n_new))
  int first;              // index of its first new token in wk_batch.tokens
} wk_seq;

// A batch: new tokens of several sequences, contiguous per sequence. The same
// call serves a long prefill, a single decode step and many mixed sequences.
typedef struct wk_batch {
  const int32_t *tokens;     // [n_tokens]
  int n_tokens;
  const wk_seq *seqs;        // [n_seqs]
  int n_seqs;
  const int32_t *logits_at;  // [n_logits] token indices whose logits are wanted
  int n_logits;
} wk_batch;

// Most candidates forward_topk returns a row.
enum { WK_TOPK_MAX = 128 };

typedef struct wk_backend wk_backend;
struct wk_backend {
  const char *name;  // "cpu", "cuda"
  void *ctx;         // backend-private state
  // Prepares weights (repack/upload once) and sizes every buffer.
  int (*prepare)(wk_backend *b, const wk_model *m, const wk_backend_params *p, wk_error *err);
  // Runs the batch; writes n_logits rows of m->vocab floats to logits.
  int (*forward)(wk_backend *b, const wk_batch *batch, float *logits, wk_error *err);
  // Optional (NULL: not offered). Runs the batch like forward, but for each
  // wanted row writes only its k largest logits and their ids, best first (a
  // higher logit, then a lower id: the sampler's order), to vals/ids[row * k
  // + i]; 1 <= k <= WK_TOPK_MAX. Returns WICK_ERR_UNSUPPORTED before running
  // anything when it cannot serve the batch; the caller then uses forward.
  int (*forward_topk)(wk_backend *b, const wk_batch *batch, int k, int32_t *ids, float *vals,
                      wk_error *err);
  // Copies whole KV blocks (prefix-cache copy-on-write): dst[i] <- src[i].
  int (*kv_copy_blocks)(wk_backend *b, const int32_t *src, const int32_t *dst, int n,
                        wk_error *err);
  // Bytes of memory taken, for reporting (after prepare).
  void (*memory)(wk_backend *b, wk_backend_mem *out);
  void (*destroy)(wk_backend *b);
};

// Constructors (each returns NULL only when out of memory).
wk_backend *backend_cpu_create(void);
#ifdef WICK_HAVE_CUDA
wk_backend *backend_cuda_create(void);
int backend_cuda_device_count(void);  // 0 when no usable device
#endif

#endif
