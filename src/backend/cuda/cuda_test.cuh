// Shared by the CUDA test entry points (cuda_test.cu, cuda_test_attn.cu):
// device buffers and a context that free themselves on every return path,
// and TRY for status-returning calls.
#ifndef WICK_BACKEND_CUDA_CUDA_TEST_CUH
#define WICK_BACKEND_CUDA_CUDA_TEST_CUH

#include <vector>

#include "backend/cuda/internal.cuh"

struct dev_bufs {
  std::vector<void *> p;
  cu_ctx c = {};
  ~dev_bufs() {
    for (void *q : p) cudaFree(q);
    if (c.blas) cublasDestroy(c.blas);
    if (c.st) cudaStreamDestroy(c.st);
  }
  template <typename T>
  int alloc(T **out, size_t bytes, wk_error *err) {
    CK(cudaMalloc((void **)out, bytes ? bytes : 1));
    p.push_back(*out);
    return WICK_OK;
  }
  // A copy of n host values on the device (NULL stays NULL).
  template <typename T>
  int upload(const T **out, const T *h, size_t n, wk_error *err) {
    *out = NULL;
    if (!h) return WICK_OK;
    T *d;
    if (int st = alloc(&d, n * sizeof(T), err)) return st;
    CK(cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice));
    *out = d;
    return WICK_OK;
  }
  // The stream, and cuBLAS on it (blas: the GEMM path is used).
  int init(wk_error *err, bool blas = true) {
    CK(cudaStreamCreate(&c.st));
    if (!blas) return WICK_OK;
    CK(cublasCreate(&c.blas));
    CK(cublasSetStream(c.blas, c.st));
    return WICK_OK;
  }
};

#define TRY(x)                   \
  do {                           \
    int try_st_ = (x);           \
    if (try_st_) return try_st_; \
  } while (0)

// What fn() queues on st, captured and instantiated into *ge; inspect(g)
// sees the graph first (e.g. to count its edges). Statuses of fn and
// inspect are returned as they are.
template <typename F, typename G>
static int capture_graph(cudaStream_t st, F &&fn, G &&inspect, cudaGraphExec_t *ge,
                         wk_error *err) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  int rc = fn();
  cudaError_t e = cudaStreamEndCapture(st, &g);
  if (rc) {
    if (e == cudaSuccess) cudaGraphDestroy(g);
    return rc;
  }
  CK(e);
  rc = inspect(g);
  e = cudaGraphInstantiate(ge, g, 0);
  cudaGraphDestroy(g);
  if (rc && e == cudaSuccess) cudaGraphExecDestroy(*ge);
  if (rc) return rc;
  CK(e);
  return WICK_OK;
}
template <typename F>
static int capture_graph(cudaStream_t st, F &&fn, cudaGraphExec_t *ge, wk_error *err) {
  return capture_graph(st, fn, [](cudaGraph_t) { return WICK_OK; }, ge, err);
}

#endif
