// The k largest logits of each row on the device, so that a decode step
// copies back k (id, logit) pairs instead of the whole vocabulary. Order: a
// higher logit first, then a lower id (the sampler's total order), so the
// result is exactly what sorting the row on the host gives.
//
// Two launches: every 4096-value chunk of a row is sorted in shared memory
// and keeps its k best; one block per row then sorts the chunks' survivors.
// k == 1 is a plain reduction. Each (logit, id) pair travels as one 64-bit
// key whose unsigned order is the wanted order.
#ifndef WICK_BACKEND_CUDA_TOPK_CUH
#define WICK_BACKEND_CUDA_TOPK_CUH

#include <stdint.h>

#include "backend/cuda/internal.cuh"

enum { CU_TOPK_MAX = 128, CU_TOPK_CHUNK = 4096, CU_TOPK_MERGE_MAX = 16384 };

struct cu_topk {
  int rows, vocab, chunks;  // capacity: rows per launch, row length, chunks a row
  uint64_t *keys;           // [rows][chunks][CU_TOPK_MAX] survivors of the first pass
  int32_t *ids_d;           // [rows][CU_TOPK_MAX] results on the device
  float *vals_d;
  int32_t *ids_h;           // pinned host copies
  float *vals_h;
  size_t bytes;             // device bytes taken
};

// True when rows of `vocab` values can be served with up to CU_TOPK_MAX
// results (the second pass sorts at most CU_TOPK_MERGE_MAX keys).
bool cu_topk_fits(int vocab);
// Sizes the buffers for `rows` rows a launch; 0 or WICK_ERR_DEVICE.
int cu_topk_init(cu_topk *t, int rows, int vocab, wk_error *err);
void cu_topk_free(cu_topk *t);
// Queues the selection of the k best of each of `rows` rows of `logits`
// (row stride `vocab`) and the copy of the results to t->ids_h / t->vals_h
// ([row * k + i], best first). The caller synchronizes the stream.
int cu_topk_run(cu_ctx *c, cu_topk *t, const float *logits, int rows, int k, wk_error *err);

#endif
