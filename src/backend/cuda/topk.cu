// Top-k of logit rows on the device (see topk.cuh).
#include "backend/cuda/topk.cuh"

#include <string.h>

enum { TK_CHUNK_THREADS = 512, TK_MERGE_THREADS = 1024 };

// A key whose unsigned order is (higher logit, then lower id); NaN sorts last.
static __device__ __forceinline__ uint64_t tk_key(float v, uint32_t id) {
  uint32_t b = __float_as_uint(v);
  uint32_t u = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu)) u = 0;  // NaN (fast math keeps this)
  return ((uint64_t)u << 32) | (uint64_t)(0xFFFFFFFFu - id);
}

static __device__ __forceinline__ float tk_val(uint64_t key) {
  uint32_t u = (uint32_t)(key >> 32);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u);
}

static __device__ __forceinline__ int32_t tk_id(uint64_t key) {
  return (int32_t)(0xFFFFFFFFu - (uint32_t)key);
}

static __device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// The largest of every thread's v; thread 0 gets it. scratch: 32 keys.
static __device__ uint64_t block_max_u64(uint64_t v, uint64_t *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max_u64(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0;
  return warp_max_u64(v);
}

// Sorts n keys (a power of two) of shared memory in descending order.
static __device__ void bitonic_desc(uint64_t *a, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        int lo = 2 * stride * (i / stride) + i % stride, hi = lo + stride;
        bool desc = (lo & size) == 0;
        uint64_t x = a[lo], y = a[hi];
        if (desc ? x < y : x > y) a[lo] = y, a[hi] = x;
      }
      __syncthreads();
    }
  }
}

// Block (chunk, row): the k best keys of its CU_TOPK_CHUNK values of the row.
__global__ void __launch_bounds__(TK_CHUNK_THREADS)
    k_topk_chunk(const float *__restrict__ logits, int vocab, int k, int chunks,
                 uint64_t *__restrict__ out) {
  __shared__ uint64_t a[CU_TOPK_CHUNK];
  int row = blockIdx.y, c = blockIdx.x;
  const float *x = logits + (size_t)row * vocab;
  int base = c * CU_TOPK_CHUNK;
  uint64_t *o = out + ((size_t)row * chunks + c) * CU_TOPK_MAX;
  if (k == 1) {
    uint64_t best = 0;
    for (int i = threadIdx.x; i < CU_TOPK_CHUNK; i += blockDim.x)
      if (base + i < vocab) {
        uint64_t key = tk_key(x[base + i], (uint32_t)(base + i));
        best = key > best ? key : best;
      }
    best = block_max_u64(best, a);
    if (threadIdx.x == 0) o[0] = best;
    return;
  }
  for (int i = threadIdx.x; i < CU_TOPK_CHUNK; i += blockDim.x)
    a[i] = base + i < vocab ? tk_key(x[base + i], (uint32_t)(base + i)) : 0;
  __syncthreads();
  bitonic_desc(a, CU_TOPK_CHUNK);
  for (int i = threadIdx.x; i < k; i += blockDim.x) o[i] = a[i];
}

// Block row: the k best of the chunks' survivors, decoded into ids and values.
__global__ void __launch_bounds__(TK_MERGE_THREADS)
    k_topk_merge(const uint64_t *__restrict__ keys, int k, int chunks, int n_pow2,
                 int32_t *__restrict__ ids, float *__restrict__ vals) {
  extern __shared__ uint64_t b[];
  int row = blockIdx.x;
  const uint64_t *in = keys + (size_t)row * chunks * CU_TOPK_MAX;
  if (k == 1) {
    uint64_t best = 0;
    for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
      uint64_t v = in[(size_t)i * CU_TOPK_MAX];
      best = v > best ? v : best;
    }
    best = block_max_u64(best, b);
    if (threadIdx.x == 0) ids[row] = tk_id(best), vals[row] = tk_val(best);
    return;
  }
  int n = chunks * k;
  for (int i = threadIdx.x; i < n_pow2; i += blockDim.x)
    b[i] = i < n ? in[(size_t)(i / k) * CU_TOPK_MAX + i % k] : 0;
  __syncthreads();
  bitonic_desc(b, n_pow2);
  for (int i = threadIdx.x; i < k; i += blockDim.x)
    ids[(size_t)row * k + i] = tk_id(b[i]), vals[(size_t)row * k + i] = tk_val(b[i]);
}

static int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

bool cu_topk_fits(int vocab) {
  return vocab > 0 && (long)cu_div_up(vocab, CU_TOPK_CHUNK) * CU_TOPK_MAX <= CU_TOPK_MERGE_MAX;
}

int cu_topk_init(cu_topk *t, int rows, int vocab, wk_error *err) {
  memset(t, 0, sizeof *t);
  if (!cu_topk_fits(vocab) || rows < 1) return WICK_OK;  // not offered: t->rows stays 0
  int chunks = cu_div_up(vocab, CU_TOPK_CHUNK);
  size_t nkeys = (size_t)rows * chunks * CU_TOPK_MAX, nres = (size_t)rows * CU_TOPK_MAX;
  CK(cudaMalloc((void **)&t->keys, nkeys * sizeof(uint64_t)));
  CK(cudaMalloc((void **)&t->ids_d, nres * sizeof(int32_t)));
  CK(cudaMalloc((void **)&t->vals_d, nres * sizeof(float)));
  CK(cudaMallocHost((void **)&t->ids_h, nres * sizeof(int32_t)));
  CK(cudaMallocHost((void **)&t->vals_h, nres * sizeof(float)));
  CK(cudaFuncSetAttribute(k_topk_merge, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          (int)(CU_TOPK_MERGE_MAX * sizeof(uint64_t))));
  t->rows = rows, t->vocab = vocab, t->chunks = chunks;
  t->bytes = nkeys * sizeof(uint64_t) + nres * (sizeof(int32_t) + sizeof(float));
  return WICK_OK;
}

void cu_topk_free(cu_topk *t) {
  cudaFree(t->keys);
  cudaFree(t->ids_d);
  cudaFree(t->vals_d);
  if (t->ids_h) cudaFreeHost(t->ids_h);
  if (t->vals_h) cudaFreeHost(t->vals_h);
  memset(t, 0, sizeof *t);
}

int cu_topk_run(cu_ctx *c, cu_topk *t, const float *logits, int rows, int k, wk_error *err) {
  if (rows < 1 || rows > t->rows || k < 1 || k > CU_TOPK_MAX || k > t->vocab)
    return cu_fail(err, WICK_ERR_RANGE, "cuda: top-%d of %d rows (at most top-%d of %d rows)", k,
                   rows, CU_TOPK_MAX, t->rows);
  int n_pow2 = pow2_at_least(t->chunks * k);
  k_topk_chunk<<<dim3(t->chunks, rows), TK_CHUNK_THREADS, 0, c->st>>>(logits, t->vocab, k,
                                                                      t->chunks, t->keys);
  CK_LAUNCH();
  size_t smem = (size_t)(k == 1 ? 32 : n_pow2) * sizeof(uint64_t);
  k_topk_merge<<<rows, TK_MERGE_THREADS, smem, c->st>>>(t->keys, k, t->chunks, k == 1 ? 0 : n_pow2,
                                                        t->ids_d, t->vals_d);
  CK_LAUNCH();
  size_t n = (size_t)rows * k;
  CK(cudaMemcpyAsync(t->ids_h, t->ids_d, n * sizeof(int32_t), cudaMemcpyDeviceToHost, c->st));
  CK(cudaMemcpyAsync(t->vals_h, t->vals_d, n * sizeof(float), cudaMemcpyDeviceToHost, c->st));
  return WICK_OK;
}

// Test entry (tests/unit/test_cuda_topk.c): the top-k of rows of host floats.
extern "C" int cuda_test_topk(const float *x, int rows, int vocab, int k, int32_t *ids,
                              float *vals, wk_error *err) {
  cu_ctx c = {};
  cu_topk t;
  float *d = NULL;
  int st = cu_topk_init(&t, rows, vocab, err);
  if (st) return st;
  if (!t.rows) return cu_fail(err, WICK_ERR_UNSUPPORTED, "cuda: no top-k for a vocab of %d", vocab);
  size_t bytes = (size_t)rows * vocab * sizeof(float);
  if (cudaMalloc((void **)&d, bytes) != cudaSuccess ||
      cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(t.ids_d, 0xff, (size_t)rows * k * sizeof(int32_t)) != cudaSuccess)
    st = cu_fail(err, WICK_ERR_DEVICE, "cuda: top-k test setup failed");
  if (!st) st = cu_topk_run(&c, &t, d, rows, k, err);
  if (!st && cudaStreamSynchronize(0) != cudaSuccess)
    st = cu_fail(err, WICK_ERR_DEVICE, "cuda: top-k test failed");
  if (!st) {
    memcpy(ids, t.ids_h, (size_t)rows * k * sizeof(int32_t));
    memcpy(vals, t.vals_h, (size_t)rows * k * sizeof(float));
  }
  cudaFree(d);
  cu_topk_free(&t);
  return st;
}
