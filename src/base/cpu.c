#include "base/cpu.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long cpu_xgetbv0(void) {
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((unsigned long long)hi << 32) | lo;
}

void wk_cpu_detect(wk_cpu_features *f) {
  memset(f, 0, sizeof *f);
  unsigned a, b, c, d;
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf < 1) return;
  __cpuid(1, a, b, c, d);
  bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  bool fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
  unsigned long long xcr0 = osxsave ? cpu_xgetbv0() : 0;
  bool ymm_ok = osxsave && avx && (xcr0 & 0x6) == 0x6;       // SSE + AVX state
  bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;             // opmask + zmm halves
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = ymm_ok && ((b >> 5) & 1);
    f->avx512f = zmm_ok && ((b >> 16) & 1);
    f->avx512bw = zmm_ok && ((b >> 30) & 1);
    f->avx512vl = zmm_ok && ((b >> 31) & 1);
    f->avx512vnni = zmm_ok && ((c >> 11) & 1);
    __cpuid_count(7, 1, a, b, c, d);
    f->avxvnni = ymm_ok && ((a >> 4) & 1);
    f->avx512bf16 = zmm_ok && ((a >> 5) & 1);
  }
  f->fma = ymm_ok && fma;
  f->f16c = ymm_ok && f16c;
  if (__get_cpuid_max(0x80000000, NULL) >= 0x80000004) {
    unsigned w[12];
    for (unsigned leaf = 0; leaf < 3; leaf++)
      __cpuid(0x80000002 + leaf, w[4 * leaf], w[4 * leaf + 1], w[4 * leaf + 2], w[4 * leaf + 3]);
    memcpy(f->brand, w, 48);
    f->brand[48] = 0;
    // Trim the leading spaces some vendors pad the brand string with.
    size_t skip = strspn(f->brand, " ");
    memmove(f->brand, f->brand + skip, sizeof f->brand - skip);
  }
}

#else

void wk_cpu_detect(wk_cpu_features *f) { memset(f, 0, sizeof *f); }

#endif
