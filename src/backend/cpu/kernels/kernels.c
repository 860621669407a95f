// The kernel table: which activation format each weight type pairs with, and
// the one place where the instruction-set level is chosen.
#include "backend/cpu/kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act8b.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "base/cpu.h"
#include "quant/types.h"
#include "wick.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

const int8_t wk_kern_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

int wk_kern_cpu_kind(void) {
  const char *v = getenv("WICK_CPU_VENDOR");
  if (v && !strcmp(v, "intel")) return WK_CPU_INTEL;
  if (v && (!strcmp(v, "zen4") || !strcmp(v, "amd"))) return WK_CPU_ZEN4;
  if (v && !strcmp(v, "zen5")) return WK_CPU_ZEN5;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return WK_CPU_INTEL;
  unsigned a, b, c, d;
  if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &a, &b, &c, &d)) return WK_CPU_ZEN4;
  const unsigned family = ((a >> 8) & 15) == 15 ? 15 + ((a >> 20) & 255) : (a >> 8) & 15;
  return family >= 26 ? WK_CPU_ZEN5 : WK_CPU_ZEN4;
#else
  return WK_CPU_ZEN4;
#endif
}

typedef struct {
  int type;
  int act;  // wk_act_fmt
} type_row;

static const type_row k_types[] = {
    {WK_F32, WK_ACT_F32},       {WK_F16, WK_ACT_F32},       {WK_BF16, WK_ACT_F32},
    {WK_FP8_E4M3, WK_ACT_F32S}, {WK_FP8_E5M2, WK_ACT_F32S}, {WK_Q4_0, WK_ACT_Q8},
    {WK_Q4_1, WK_ACT_Q8},       {WK_Q5_0, WK_ACT_Q8},       {WK_Q5_1, WK_ACT_Q8},
    {WK_Q8_0, WK_ACT_Q8},       {WK_IQ4_NL, WK_ACT_Q8},     {WK_Q2_K, WK_ACT_Q8K},
    {WK_Q3_K, WK_ACT_Q8K},      {WK_Q4_K, WK_ACT_Q8K},      {WK_Q5_K, WK_ACT_Q8K},
    {WK_Q6_K, WK_ACT_Q8K},      {WK_IQ4_XS, WK_ACT_Q8K},
};

static int act_block(int act) {
  return act == WK_ACT_Q8 ? 32 : act == WK_ACT_Q8K || act == WK_ACT_Q8B ? 256 : 1;
}

size_t wk_act_row_size(int act, int64_t n) {
  int blk = act_block(act);
  if (n < 0 || n % blk) return 0;
  if (act != WK_ACT_F32 && act != WK_ACT_Q8 && act != WK_ACT_Q8K && act != WK_ACT_F32S &&
      act != WK_ACT_Q8B)
    return 0;
  size_t per = act == WK_ACT_Q8    ? sizeof(wk_act_q8)
               : act == WK_ACT_Q8K ? sizeof(wk_act_q8k)
               : act == WK_ACT_Q8B ? sizeof(wk_act_q8b)
                                   : sizeof(float);
  return (size_t)(n / blk) * per;
}

static int best_level_now(void) {
  wk_cpu_features f;
  wk_cpu_detect(&f);
  bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  int best = avx512 && f.avx512vnni ? WK_LEVEL_AVX512
             : avx512               ? WK_LEVEL_AVX512BW
             : avx2                 ? WK_LEVEL_AVX2
                                    : WK_LEVEL_SCALAR;
  // WICK_CPU_LEVEL caps it (A/B runs; CPUs whose clock drops under 512-bit
  // code): scalar, avx2, avx512bw or avx512; other values are ignored.
  const char *cap = getenv("WICK_CPU_LEVEL");
  for (int l = WK_LEVEL_SCALAR; cap && l <= WK_LEVEL_AVX512; l++)
    if (!strcmp(cap, wk_kernel_level_name(l)) && l < best) best = l;
  return best;
}

// Decided at the first call: cpuid traps to the hypervisor in a VM (each
// leaf ~1-2 us), and matrix plans ask for the level several times a matrix
// (a model's load made ~300 calls). Threads racing on the first call store
// the same value.
// The one-token tiles' prefetch distances in bytes, longer on Zen 5:
// act16_x86.h's A16_K_AHEAD (the super-block types), act16_zq.h's DEC_AHEAD
// (the 32-value types), x86_f.h's KF_AHEAD (FP8).
size_t wk_a16_k_ahead = 768, wk_dec_ahead = 512, wk_kf_ahead = 768;

int wk_kernel_best_level(void) {
  static int cached = -1;
  int l = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (l < 0) {
    if (wk_kern_cpu_kind() == WK_CPU_ZEN5) {
      wk_a16_k_ahead = 2048;
      wk_dec_ahead = 1536;
      wk_kf_ahead = 2048;
    }
    l = best_level_now();
    __atomic_store_n(&cached, l, __ATOMIC_RELAXED);
  }
  return l;
}

const char *wk_kernel_level_name(int level) {
  switch (level) {
    case WK_LEVEL_SCALAR: return "scalar";
    case WK_LEVEL_AVX2: return "avx2";
    case WK_LEVEL_AVX512BW: return "avx512bw";
    case WK_LEVEL_AVX512: return "avx512";
    default: return "?";
  }
}

int wk_kernel_pick(int type, int level, wk_kernel *out) {
  const type_row *row = NULL;
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
    if (k_types[i].type == type) row = &k_types[i];
  const wk_type_info *info = wk_type_get(type);
  if (!row || !info) return WICK_ERR_UNSUPPORTED;
  int best = wk_kernel_best_level();
  if (level == WK_LEVEL_AUTO) level = best;
  if (level < WK_LEVEL_SCALAR || level > best) return WICK_ERR_UNSUPPORTED;

  wk_kernel k = {.type = type, .act = row->act};
  int blk = act_block(row->act);
  k.k_multiple = info->block > blk ? info->block : blk;
  bool simd = level >= WK_LEVEL_AVX2;
  k.quantize_act = row->act == WK_ACT_Q8    ? (simd ? wk_kern_avx2_quantize_q8 : wk_kern_quantize_q8)
                   : row->act == WK_ACT_Q8K ? (simd ? wk_kern_avx2_quantize_q8k : wk_kern_quantize_q8k)
                   : row->act == WK_ACT_F32S ? wk_kern_quantize_f32s
                                            : wk_kern_quantize_f32;
  // Highest level at or below the one asked for that implements the type.
  int found = 0;
  for (int l = level; l >= WK_LEVEL_SCALAR && !found; l--) {
    k.level = l;
    if (l == WK_LEVEL_AVX512) found = wk_kern_avx512_find(type, &k.vec_dot, &k.gemm);
    else if (l == WK_LEVEL_AVX512BW) found = wk_kern_avx512bw_find(type, &k.vec_dot, &k.gemm);
    else if (l == WK_LEVEL_AVX2) found = wk_kern_avx2_find(type, &k.vec_dot, &k.gemm);
    else found = wk_kern_scalar_find(type, &k.vec_dot, &k.gemm);
  }
  if (!found) return WICK_ERR_UNSUPPORTED;
  *out = k;
  return WICK_OK;
}
