// Shared helpers of the CUDA backend: the one CHECK macro for CUDA/cuBLAS
// calls (it fills a wk_error and returns WICK_ERR_DEVICE), warp and block
// reductions, and small conversions. Device code only includes this file.
#ifndef WICK_BACKEND_CUDA_HELPERS_CUH
#define WICK_BACKEND_CUDA_HELPERS_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "base/error.h"
}

// Formats one line into err (the C library's wk_fail, inline here so the
// CUDA files need only this header).
static inline int cu_fail(wk_error *err, int status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return status;
}

static inline const char *cu_status_str(cudaError_t e) { return cudaGetErrorString(e); }
static inline const char *cu_status_str(cublasStatus_t s) { return cublasGetStatusString(s); }
static inline bool cu_ok(cudaError_t e) { return e == cudaSuccess; }
static inline bool cu_ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }

// Every CUDA and cuBLAS call goes through CK; `err` must be in scope.
#define CK(call)                                                                          \
  do {                                                                                    \
    auto ck_s_ = (call);                                                                  \
    if (!cu_ok(ck_s_))                                                                    \
      return cu_fail(err, WICK_ERR_DEVICE, "cuda: %s failed (%s:%d): %s", #call, __FILE__, \
                     __LINE__, cu_status_str(ck_s_));                                     \
  } while (0)
// After each kernel launch.
#define CK_LAUNCH() CK(cudaGetLastError())

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024);
// every thread gets the result. scratch: 32 floats of shared memory.
static __device__ __forceinline__ float block_sum(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

static __device__ __forceinline__ float block_max(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

static inline int cu_div_up(long a, long b) { return (int)((a + b - 1) / b); }

// For a launch of kern in blocks of nt threads with smem bytes of dynamic
// shared memory (more than 48 KB allowed first): the SM count and how many
// such blocks an SM holds. cudaErrorInvalidValue where the shared memory
// cannot be had (the caller takes another kernel or shape).
template <class K>
static cudaError_t cu_occupancy(K kern, int nt, size_t smem, int *sms, int *per_sm) {
  if (smem > 48 * 1024 &&
      cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
          cudaSuccess) {
    cudaGetLastError();
    return cudaErrorInvalidValue;
  }
  int dev = 0;
  cudaError_t e;
  if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
    return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kern, nt, smem);
}

// Programmatic dependent launch (cu_launch with pdl): a kernel may start
// while the previous kernel of its stream still runs. It calls pdl_wait()
// before it reads what an earlier kernel wrote or writes what one reads
// (the wait returns once the previous grid has completed and its writes
// are visible; that grid waited for its own predecessor before it could
// complete, so every earlier kernel is done too). Every thread of every
// block waits before it exits or writes. Both calls below are no-ops in a
// kernel launched plainly.
//
// The wait also lets the next kernel start launching. A kernel whose grid
// is one wave of resident blocks (the streamed and register-streamed
// matrix-vector kernels) may let it launch earlier, at its start
// (pdl_launch_next()), so the next kernel's blocks are placed and start
// their own prologue as soon as SM room frees. A kernel of several waves
// must not: with every kernel letting its successor launch before its own
// wait, a chain of kernels launched ahead, each holding SM slots while it
// waited, and the running kernel's later waves got fewer (session 4: 8B
// BF16 decode at context 4096 took 7.83 ms a token that way, 5.65 ms with
// the trigger after the wait).
static __device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
static __device__ __forceinline__ void pdl_launch_next() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Asynchronous copies global -> shared (cp.async, 16 bytes, L2 only):
// cp16 zero-fills dst when !ok (src is then not read); cp_commit closes a
// group of copies; cp_wait<N> waits until at most N groups are in flight.
static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp16(uint32_t dst, const void *src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(ok ? 16 : 0));
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// kern<<<grid, block, smem, st>>>(args...), by programmatic dependent launch
// when pdl is set (graph capture turns it into a programmatic edge), in
// thread-block clusters of cz blocks along z where cz > 1 (above 8 the
// kernel must allow it: cudaFuncAttributeNonPortableClusterSizeAllowed).
// cu_launch: no clusters.
template <typename... P, typename... A>
static inline cudaError_t cu_launch_cluster(bool pdl, cudaStream_t st, dim3 grid, dim3 block,
                                            size_t smem, int cz, void (*kern)(P...), A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
  cudaLaunchAttribute at[2];
  int na = 0;
  if (cz > 1) {
    at[na].id = cudaLaunchAttributeClusterDimension;
    at[na].val.clusterDim.x = 1, at[na].val.clusterDim.y = 1, at[na].val.clusterDim.z = cz;
    na++;
  }
  if (pdl) {
    at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[na].val.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  cfg.attrs = at;
  cfg.numAttrs = na;
  return cudaLaunchKernelEx(&cfg, kern, args...);
}
template <typename... P, typename... A>
static inline cudaError_t cu_launch(bool pdl, cudaStream_t st, dim3 grid, dim3 block, size_t smem,
                                    void (*kern)(P...), A... args) {
  return cu_launch_cluster(pdl, st, grid, block, smem, 1, kern, args...);
}

// The gated unit's activation: 0 SiLU (SwiGLU), 1 GELU with tanh (GeGLU).
static __device__ __forceinline__ float glu_act(float x, int act) {
  if (act == 0) return x / (1.0f + expf(-x));
  const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x)));
}

#endif
