// The weight types the x86 levels implement, and the lookup each level file
// defines with it. Included last by kernels_avx2.c and kernels_avx512.c.
#ifndef WICK_BACKEND_CPU_KERNELS_X86_LIST_H
#define WICK_BACKEND_CPU_KERNELS_X86_LIST_H

#include "quant/types.h"

#define KROW(TYPE, T) {TYPE, T##_vec_dot, T##_gemm}

#define KX86_FIND(NAME)                                                                   \
  int NAME(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {                              \
    static const struct {                                                                 \
      int type;                                                                           \
      wk_vec_dot_fn dot;                                                                  \
      wk_gemm_fn gemm;                                                                    \
    } rows[] = {                                                                          \
        KROW(WK_F32, kf32),         KROW(WK_F16, kf16),         KROW(WK_BF16, kbf16),     \
        KROW(WK_Q4_0, kq4_0),       KROW(WK_Q4_1, kq4_1),       KROW(WK_Q5_0, kq5_0),     \
        KROW(WK_Q5_1, kq5_1),       KROW(WK_Q8_0, kq8_0),       KROW(WK_IQ4_NL, kiq4_nl), \
        KROW(WK_Q2_K, kq2_k),       KROW(WK_Q3_K, kq3_k),       KROW(WK_Q4_K, kq4_k),     \
        KROW(WK_Q5_K, kq5_k),       KROW(WK_Q6_K, kq6_k),       KROW(WK_IQ4_XS, kiq4_xs), \
        KROW(WK_FP8_E4M3, kfp8_e4m3), KROW(WK_FP8_E5M2, kfp8_e5m2),                       \
    };                                                                                    \
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)                             \
      if (rows[i].type == type) {                                                         \
        *dot = rows[i].dot;                                                               \
        *gemm = rows[i].gemm;                                                             \
        return 1;                                                                         \
      }                                                                                   \
    return 0;                                                                             \
  }

#endif
