// cuBLAS, opened on first use. Linking libcublas directly maps its ~200 MB of
// libraries into every wick process at start-up, CPU-only runs included (peak
// RSS of `wick --help` 219 MB against 2 MB). Instead the few entry points the
// CUDA backend calls are defined here with cuBLAS's own prototypes (checked by
// the compiler through cublas_v2.h) and forward to the library opened with
// dlopen the first time one is called.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef struct cublas_table {
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void *, const void *, cudaDataType, int, const void *,
                            cudaDataType, int, const void *, void *, cudaDataType, int,
                            cublasComputeType_t, cublasGemmAlgo_t);
  const char *(*status_string)(cublasStatus_t);
} cublas_table;

// Filled once under pthread_once and read-only afterwards.
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cublas_table g_cublas;

static void cublas_open(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so",
                                      "/usr/local/cuda/lib64/libcublas.so.13"};
  void *h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
    h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  cublas_table t;
  *(void **)&t.create = dlsym(h, "cublasCreate_v2");
  *(void **)&t.destroy = dlsym(h, "cublasDestroy_v2");
  *(void **)&t.set_stream = dlsym(h, "cublasSetStream_v2");
  *(void **)&t.set_workspace = dlsym(h, "cublasSetWorkspace_v2");
  *(void **)&t.gemm_ex = dlsym(h, "cublasGemmEx");
  *(void **)&t.status_string = dlsym(h, "cublasGetStatusString");
  if (t.create && t.destroy && t.set_stream && t.set_workspace && t.gemm_ex && t.status_string)
    g_cublas = t;
}

static const cublas_table *cublas(void) {
  pthread_once(&g_once, cublas_open);
  return g_cublas.create ? &g_cublas : NULL;
}

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle) {
  const cublas_table *t = cublas();
  return t ? t->create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  const cublas_table *t = cublas();
  return t ? t->destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  const cublas_table *t = cublas();
  return t ? t->set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                                  size_t workspaceSizeInBytes) {
  const cublas_table *t = cublas();
  return t ? t->set_workspace(handle, workspace, workspaceSizeInBytes)
           : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb,
                                         const void *beta, void *C, cudaDataType Ctype, int ldc,
                                         cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  const cublas_table *t = cublas();
  if (!t) return CUBLAS_STATUS_NOT_INITIALIZED;
  return t->gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                    Ctype, ldc, computeType, algo);
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  const cublas_table *t = cublas();
  if (t) return t->status_string(status);
  return status == CUBLAS_STATUS_NOT_INITIALIZED ? "cuBLAS library (libcublas.so.13) not found"
                                                 : "cuBLAS error";
}
