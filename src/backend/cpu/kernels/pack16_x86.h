// Shared by the packed kernels of every level (pack16_avx512.c and
// pack16_avx2.c: the 32-value formats; pack16k_avx512.c: the super-blocks):
// the prefetch and the walk over groups and tokens, nothing wider than the
// AVX2 level (pack16_x512.h adds the 512-bit helpers). The including file
// defines AT first (or takes act16_x86.h's AVX2 one).
#ifndef WICK_BACKEND_CPU_KERNELS_PACK16_X86_H
#define WICK_BACKEND_CPU_KERNELS_PACK16_X86_H

#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "backend/cpu/kernels/pack16.h"

// Bytes ahead of the current pair of blocks that a group asks the L2 for
// (prefetcht1, a line each): the hardware's stream prefetch stops at each
// 4 KB page. bench_matvec --packed, 4096x14336 and 14336x4096, one thread,
// % of the paired read passes (Zen 4, noisy VM, 2-4 runs each): none Q4_0
// 48%, Q8_0 64%; prefetcht0 (into L1) 1024-6144 bytes ahead 52-61% / 61-79%
// (each fill holds one of L1's few miss buffers); prefetcht1 4096 63-64% /
// 63-64%, 8192 76-84% / 67-72% (Q4_1 80-84%), 16384 and 32768 no better.
// Two groups side by side (two streams) gained nothing. The AVX2 kernels
// (pack16_avx2.c, Q4_0, one thread, medians of 4-6 runs): 8192 ahead 51-74%
// against none 44-51% at 4096x14336 and 14336x4096; k <= 2048 within the
// VM's spread either way.
static const size_t k_p16_ahead = 8192;
// Each line is asked for more than once, farther ahead first: n = 2 asks
// at 24 KB and k_p16_ahead, n = 3 at 32 KB, 16 KB and k_p16_ahead. Asked
// once, at any distance, the kernels that spend longest on a byte fell
// short of the read passes with two threads: a request the core cannot
// take while its misses are all out seems to be lost, and the line then
// comes on demand. Session 31, medians over 4096x14336 / 14336x4096 of 4
// rounds alternating the builds, % of the read passes, 2 threads (1):
//   once at 8 KB   Q5_K 80-83  Q4_1 84  Q2_K 73-77  Q4_0 84-87
//   n = 2          Q5_K 90-92  Q4_1 90-92 (81-84)  Q2_K 75-84  Q4_0 91-92 (84-85)
//                  Q4_K 95 (86-90)  IQ4_XS 94-95 (76-79)  FP8 92-94 (73-80)
//   n = 3          Q5_K 91-94  Q4_1 95-96 (89-90)  Q2_K 85-87  Q4_0 94-95 (88-90)
//                  Q4_K 95-96 (78-84)  IQ4_XS 84-90 (63-66)  FP8 93-94 (65-78)
// (once at 24 KB, or twice at 8 KB: Q5_K 84-85, Q2_K 82-90). So n = 3 for
// the 32-value formats, Q3_K and Q5_K, n = 2 for the rest. Q2_K took n = 3
// on its 16-bit-activation kernel; its 8-bit one (session 32, act8b.h),
// 1.2x faster in L2, reads 96-97% at n = 2 against 87-97% at n = 3 (4
// rounds alternating; 1 thread 92-95% against 82-89%).
AT AI void ahead_n(const uint8_t *p, size_t len, const int n) {
  static const size_t far[2][2] = {{24576, 0}, {32768, 16384}};
  for (int i = 0; i < n - 1; i++)
    for (size_t o = 0; o < len; o += 64)
      _mm_prefetch((const char *)(p + far[n - 2][i] + o), _MM_HINT_T1);
  for (size_t o = 0; o < len; o += 64)
    _mm_prefetch((const char *)(p + k_p16_ahead + o), _MM_HINT_T1);
}
AT AI void ahead(const uint8_t *p, size_t len) { ahead_n(p, len, 2); }

// Only the first two lines of each 4 KB page that [p, p + len) k_p16_ahead
// bytes on starts: enough to start the hardware's stream in the page, for a
// kernel that consumes bytes too fast for a prefetch a line. Q8_0 (one
// vpdpbusd pair a 64-byte chunk; weights on 2 MB pages, session 29), one
// thread, % of the read passes: a line each 63-66% at 4096x14336, none
// 71-79%, these two 77-80%; at Gemma 3's output shape 640x262144 91-99%
// against the tile's 69-83%. The other types lose with it (Q4_K 81-88% a
// line each, 56-71% so; Q4_0 68-73%, 49-55%).
AT AI void ahead_pages(const uint8_t *p, size_t len) {
  const uintptr_t s = (uintptr_t)(p + k_p16_ahead), e = s + len;
  const uintptr_t q = (s + 4095) & ~(uintptr_t)4095;  // s itself where it starts a page
  if (q < e) {
    _mm_prefetch((const char *)q, _MM_HINT_T1);
    _mm_prefetch((const char *)(q + 64), _MM_HINT_T1);
  }
}

// The wk_gemm_fn T##_p16 of TYPE: groups of 16 rows, WK_PACK16_MAX_TOKENS
// tokens at a time, each through GROUP(TYPE, NT, group, blocks, x, x
// stride, y, y stride) with NT a constant; BLK values a block.
#define P16_GEMM_OF(T, TYPE, GROUP, BLK)                                                     \
  AT static void T##_p16(const void *w, size_t ws, int64_t k, int rows, const void *xq,     \
                         size_t xs, int n_tokens, float *y, size_t ys) {                     \
    const uint8_t *x = xq;                                                                   \
    for (int t0 = 0; t0 < n_tokens; t0 += WK_PACK16_MAX_TOKENS) {                            \
      const int nt = n_tokens - t0 < WK_PACK16_MAX_TOKENS ? n_tokens - t0                    \
                                                          : WK_PACK16_MAX_TOKENS;            \
      const uint8_t *xt = x + (size_t)t0 * xs;                                               \
      float *yt = y + (size_t)t0 * ys;                                                       \
      for (int r = 0; r + WK_PACK16_ROWS <= rows; r += WK_PACK16_ROWS) {                    \
        const uint8_t *g = (const uint8_t *)w + (size_t)r * ws;                              \
        switch (nt) {                                                                        \
          case 1: GROUP(TYPE, 1, g, k / BLK, xt, xs, yt + r, ys); break;                     \
          case 2: GROUP(TYPE, 2, g, k / BLK, xt, xs, yt + r, ys); break;                     \
          case 3: GROUP(TYPE, 3, g, k / BLK, xt, xs, yt + r, ys); break;                     \
          default: GROUP(TYPE, 4, g, k / BLK, xt, xs, yt + r, ys); break;                    \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

#endif
