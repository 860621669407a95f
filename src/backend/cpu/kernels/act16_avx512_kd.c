// The AVX-512 level's one-token tiles of Q4_K and Q5_K: the AVX2 level's
// decode tile (act16_avx2_k.c, kdec) compiled again for AVX-512 VL + VNNI,
// with each chunk's pmaddwd + paddd folded into one vpdpwssd (A16_KD_VNNI,
// kd_products). The int32 lanes are the same (vpdpwssd wraps as pmaddwd +
// paddd; the AVX2 file's bounds), and the f32 operations are that tile's in
// its order, so every output is the AVX2 level's bit for bit. act16.c calls
// these only when cpuid reports AVX-512 F, BW, VL and VNNI.
//
// On this Zen 4 (bench_levels: the AVX2 tile and this one call by call, best
// of 400, 4096x512, 2048x640, 1024x2048, 6 rounds): Q4_K 1.07-1.31x (mostly
// 1.11-1.17), Q5_K 1.06-1.16x the AVX2 tile. IQ4_XS through this tile ran
// 0.98-1.02x, so on AMD it keeps act16_avx512_k.c's tile (yiq4y: 1.39-1.45x;
// the former yiq4dec 1.17-1.22x); on Intel it takes this one (below).
//
// Intel CPUs and AMD Zen 5 (both with VBMI2 and GFNI) take
// act16_avx512_kw.c's Q4_K / Q5_K tiles instead (vpdpbusd sums packed two
// to a dword: 3 multiplies per 64 codes where this tile takes 4). bench_levels,
// ratio to the AVX2 tile: on the device host's Xeon 1.29-1.37x against this
// one's 1.16-1.22x; on Zen 5 (family 26, 512-bit multiplies at full width)
// Q4_K 1.29-1.34x against 1.08-1.14x, Q5_K 1.47-1.57x against 1.13-1.27x
// (session 25); on Zen 4 (family 25, 512-bit operations in two 256-bit
// halves) 0.90-1.10x against this one's 1.08-1.39x (session 24), so Zen 4
// keeps this one.
//
// Several tokens: A16_DEC_TYPE (four or more through the AVX2 level's gemm,
// one to three through this decode tile once per token, as the AVX2 gemm
// runs them too).
#define AT                                                                        \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define A16_KD_VNNI 1
#include "backend/cpu/kernels/act16_avx2_k.c"
#include "backend/cpu/kernels/act16_avx512_kw.h"

// Decode tiles of 4 rows, the AVX2 level's.
A16_DEC_TYPE(q4_k, WK_Q4_K, kdec, 4)
A16_DEC_TYPE(q5_k, WK_Q5_K, kdec, 4)
A16_DEC_TYPE(iq4_xs, WK_IQ4_XS, kdec, 4)

// IQ4_XS takes this tile on Intel CPUs without VBMI only (the others take
// act16_avx512_k.c's ziq4w, 1.48-1.58x on the device host's Xeon against
// this one's 1.20x, session 25). Before: on the device host's Xeon
// (Sapphire Rapids class) act16_avx512_k.c's yiq4dec runs 0.77x the AVX2
// tile and this one 1.16-1.20x, on Zen 4 yiq4dec 1.17-1.22x and this one
// 0.98-1.02x (bench_levels iq4_xs, rows in L2; bench/RESULTS.md, sessions 22
// and 23). act16_avx512_k.c's IQ4_XS tile is yiq4y now (int16 code x scale
// words against int16 v): 1.38-1.45x on Zen 4, 1.48x on Zen 5 against this
// one's 1.05-1.07x there (session 25), not yet measured on an Intel CPU;
// on Zen 5 act16_avx512_k.c takes its 512-bit form, ziq4w (1.82-1.87x).
// (wk_kern_cpu_kind: kernels_internal.h.)

int wk_act16_avx512_kd_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  const int kind = wk_kern_cpu_kind();
  if (kind != WK_CPU_ZEN4 && wk_act16_avx512_kw_find(type, dot, gemm)) return 1;
  const wk_gemm_fn g = type == WK_Q4_K                            ? q4_k_gemm
                       : type == WK_Q5_K                          ? q5_k_gemm
                       : type == WK_IQ4_XS && kind == WK_CPU_INTEL ? iq4_xs_gemm
                                                                  : NULL;
  if (!g || !wk_act16_avx2_find(type, dot, gemm)) return 0;
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}
