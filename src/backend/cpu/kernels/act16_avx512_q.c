// AVX-512 16-bit-activation kernels for the 32-value block formats (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL against WK_ACT_A16). act16.c calls these
// only when cpuid reports AVX-512 F, BW, VL and VNNI.
#include "backend/cpu/kernels/act16.h"

int wk_act16_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  return wk_act16_avx512_k_find(type, dot, gemm);
}
