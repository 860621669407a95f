// The AVX-512 level (F/BW/VL + VNNI): the same kernels as the AVX2 level on
// 256-bit vectors, with vpdpbusd for the byte dot products and larger
// register tiles (32 vector registers). Only called when cpuid reports all of
// these features (see kernels.c).
#include <immintrin.h>

#define KT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
// Register tiles (rows x tokens) of the super-block and float families (the
// 32-block family's lane tiles are fixed: x86_q8.h).
#define KK_RM 4
#define KK_RN 4
#define KF_RM 4
#define KF_RN 4

// int32 lanes += sums of 4 products of unsigned u and signed s bytes.
KT static inline __m256i kmac_u8s8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}

#include "backend/cpu/kernels/x86_tile.h"
#include "backend/cpu/kernels/x86_q8.h"
#include "backend/cpu/kernels/x86_k.h"
#include "backend/cpu/kernels/x86_f.h"
#include "backend/cpu/kernels/x86_list.h"

static KX86_FIND(avx512_table_find)

// Q2_K and Q3_K in 512-bit vectors where the CPU has VBMI and GFNI
// (kernels_avx512_k.c), else the table's.
int wk_kern_avx512_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  return wk_kern_avx512_k_find(type, dot, gemm) || avx512_table_find(type, dot, gemm);
}
