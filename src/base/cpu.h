// CPU feature detection at run time (cpuid + xgetbv), so one binary picks the
// best kernels on AVX2 and AVX-512 machines alike. No state is kept: callers
// detect once (at prepare time) and keep what they chose.
#ifndef WICK_BASE_CPU_H
#define WICK_BASE_CPU_H

#include <stdbool.h>

typedef struct wk_cpu_features {
  bool avx2, fma, f16c;             // the "AVX2" kernel level needs all three
  bool avx512f, avx512bw, avx512vl; // with the OS saving zmm/opmask state
  bool avx512vnni, avx512bf16;
  bool avxvnni;                     // VEX-encoded VNNI (Alder Lake, Zen 5)
  char brand[49];                   // "AMD EPYC 7763 64-Core Processor" or ""
} wk_cpu_features;

// Fills f from cpuid/xgetbv; every flag false on a non-x86 build.
void wk_cpu_detect(wk_cpu_features *f);

#endif
