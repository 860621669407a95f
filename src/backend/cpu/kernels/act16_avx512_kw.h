// The AVX-512 one-token tiles of Q4_K and Q5_K that need VBMI2 and GFNI
// besides the level's F, BW, VL and VNNI (act16_avx512_kw.c); act16_avx512_kd.c's
// find asks for them before its own.
#ifndef WICK_BACKEND_CPU_KERNELS_ACT16_AVX512_KW_H
#define WICK_BACKEND_CPU_KERNELS_ACT16_AVX512_KW_H

#include "backend/cpu/kernels/act16.h"

// Fills *dot and *gemm and returns 1 for Q4_K and Q5_K when cpuid reports
// AVX-512 VBMI2 and GFNI; 0 otherwise.
int wk_act16_avx512_kw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm);

#endif
