// AVX-512 16-bit-activation kernels for the super-block formats (Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_XS against WK_ACT_A16K). act16.c calls these only
// when cpuid reports AVX-512 F, BW, VL and VNNI.
#include "backend/cpu/kernels/act16.h"

int wk_act16_avx512_k_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  (void)type, (void)dot, (void)gemm;
  return 0;
}
