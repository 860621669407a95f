// Attention over one KV block of 16 f16 rows of one KV head, for up to
// ATT_DEC_MAX_G queries that share the head and see the same rows of it: the
// kernel attention.c's items call for every (block, head) of a decode token
// (its G queries), and of runs of prompt tokens that see the same rows of the
// block (8 / G tokens at most), when the CPU has AVX-512 F
// (cpu_attn.avx512) and the head size is a multiple of 16
// (attn_dec_avx512.c).
#ifndef WICK_BACKEND_CPU_ATTN_DEC_H
#define WICK_BACKEND_CPU_ATTN_DEC_H

#include <stdint.h>

enum { ATT_DEC_ROWS = 16, ATT_DEC_MAX_G = 8 };

// q: the G queries, hd floats each: gt a token, one after the other, the
// tokens qs floats apart (a decode token: gt = G). kb, vb: the block's
// 16 K and V rows of the head (row 0 first, hd halves apart). Rows [vlo, vhi]
// (0 <= vlo <= vhi <= 15) are visible; the others are neither scored nor
// read for V (any bits, NaN included). m[G], l[G], acc[G][hd]: the queries'
// online softmax state (running max, sum, unnormalized output), updated.
// scores = (q . k) * scale, then softcap * tanh(scores / softcap) when
// softcap > 0.
typedef struct att_dec {
  const float *q;
  size_t qs;
  const uint16_t *kb, *vb;
  int g, gt, hd;
  float scale, softcap;
  int vlo, vhi;
  float *m, *l, *acc;
  // The next (block, head)'s K and V rows as kb, vb (or NULL): each step
  // prefetches into L1 the bytes of them that it reads of kb or vb.
  const char *pk, *pv;
} att_dec;

void att_dec_avx512(const att_dec *d);  // AVX-512 F, AVX2, FMA, F16C

#endif
