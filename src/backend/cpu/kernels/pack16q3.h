// Q3_K's packed layout (pack16.h) as bit moves, shared by pack16.c (a row
// at a time) and pack16q3_avx512.c (16 rows at once). A row's super-block
// is 27 dwords and d both ways: in the file hmask (dwords 0..7), qs
// (8..23) and scales (24..26); packed, before chunking, the codes X (0..23)
// and the scale words (24..26). Every move takes the bits `mask` of packed
// dword `packed` from file dword `file` shifted left by `shift` (right
// where negative); the moves are a bijection of the 864 bits.
#ifndef WICK_BACKEND_CPU_KERNELS_PACK16Q3_H
#define WICK_BACKEND_CPU_KERNELS_PACK16Q3_H

#include <stddef.h>
#include <stdint.h>

#define Q3_GROUP 1760  // a super-block of 16 rows, packed
#define Q3_MOVES 160   // 128 of the codes, 32 of the scales
#define Q3_DWORDS 27

// Offsets in a packed super-block (b1: its index's parity; odd ones put d
// first) of the code chunks, the scale chunks and d.
typedef struct q3_at {
  size_t codes, scales, d;
} q3_at;

static inline q3_at q3_at_of(int b1) {
  return b1 ? (q3_at){32, 32 + 1536, 0} : (q3_at){0, 1536, 1728};
}

typedef struct q3_move {
  int file, packed;  // dword indices (0..26)
  int shift;         // packed bit = file bit + shift
  uint32_t mask;     // bits of the packed dword
} q3_move;

// Move n (0..Q3_MOVES - 1). Codes: n = 16 i + 2 m + hi, bit-plane i = 4 h +
// j, C[m] (code of value 32 i + 4 m + k in byte k): its low 2 bits (hi = 0)
// from qs dword 8 h + m, bits 2 j; its high bit from hmask dword m, bit 4 h
// + j; to X[3 i + x] at bit p of every byte. Scales: n = 128 + 2 j + hi,
// s_j's low 4 bits (hi = 0) or high 2.
static inline __attribute__((always_inline)) q3_move q3_move_of(int n) {
  static const int8_t lo_x[8] = {0, 1, 2, 0, 0, 1, 2, 1}, lo_p[8] = {0, 0, 0, 6, 3, 3, 3, 6};
  static const int8_t hi_x[8] = {0, 1, 2, 2, 0, 1, 2, 2}, hi_p[8] = {2, 2, 2, 6, 5, 5, 5, 7};
  if (n < 128) {
    const int i = n / 16, m = n / 2 % 8, h = i / 4, j = i % 4;
    if (n % 2 == 0)
      return (q3_move){8 + 8 * h + m, 3 * i + lo_x[m], lo_p[m] - 2 * j, 0x03030303u << lo_p[m]};
    return (q3_move){m, 3 * i + hi_x[m], hi_p[m] - (4 * h + j), 0x01010101u << hi_p[m]};
  }
  const int j = (n - 128) / 2, hi = n % 2;
  // in the file: low 4 bits in s[j % 8] (j >= 8: its high nibble), high 2
  // bits in s[8 + j % 4] at 2 (j / 4)
  const int fb = hi ? 64 + 8 * (j % 4) + 2 * (j / 4) : 8 * (j % 8) + (j >= 8 ? 4 : 0);
  // packed: s_j (j < 12) at bits 10 (j < 6) or 4 of word j % 6; s_12 ..
  // s_15 low 4 bits at bits 0 of words 0..3, high 2 at 2 ((j - 12) / 2)
  // of word 4 + j % 2
  int pb;
  if (j < 12) pb = 16 * (j % 6) + (j < 6 ? 10 : 4) + (hi ? 4 : 0);
  else pb = hi ? 16 * (4 + j % 2) + 2 * ((j - 12) / 2) : 16 * (j - 12);
  return (q3_move){24 + fb / 32, 24 + pb / 32, pb % 32 - fb % 32,
                   (hi ? 3u : 15u) << (pb % 32)};
}

#endif
