// Packing and unpacking of 16-row groups (layout: pack16.h), and the pick
// of the packed kernel.
#include "backend/cpu/kernels/pack16.h"

#include <string.h>

#include "quant/types.h"

typedef struct p16_fmt {
  int bytes;   // a block's bytes in the file
  int m_at;    // offset of m in a block (0: none)
  int qh_at;   // offset of qh (0: none)
  int qs_at;   // offset of the code bytes
  int chunks;  // 4-byte chunks of code bytes a block (4, Q8_0: 8)
} p16_fmt;

static int fmt_of(int type, p16_fmt *f) {
  switch (type) {
    case WK_Q4_0:
    case WK_IQ4_NL: *f = (p16_fmt){18, 0, 0, 2, 4}; return 1;
    case WK_Q4_1: *f = (p16_fmt){20, 2, 0, 4, 4}; return 1;
    case WK_Q5_0: *f = (p16_fmt){22, 0, 2, 6, 4}; return 1;
    case WK_Q5_1: *f = (p16_fmt){24, 2, 4, 8, 4}; return 1;
    case WK_Q8_0: *f = (p16_fmt){34, 0, 0, 2, 8}; return 1;
    default: return 0;
  }
}

int wk_pack16_type(int type) {
  p16_fmt f;
  return fmt_of(type, &f);
}

// Byte offsets, in the group, of block b's fields (see pack16.h).
typedef struct p16_at {
  size_t d, m, qh, qs;  // row 0's d, m, qh; chunk 0 of the code bytes
} p16_at;

static p16_at block_at(const p16_fmt *f, int64_t nb, int64_t b) {
  const int64_t p = b / 2, i = b % 2;
  const size_t n = nb - 2 * p >= 2 ? 2 : 1;
  const size_t base = (size_t)(32 * p * f->bytes);
  const size_t m = base + 32 * n, qh = m + (f->m_at ? 32 * n : 0);
  const size_t qs = qh + (f->qh_at ? 64 * n : 0);
  return (p16_at){base + 32 * (size_t)i, m + 32 * (size_t)i, qh + 64 * (size_t)i,
                  qs + (size_t)(i * f->chunks * 64)};
}

// qh (bit v: value v's fifth bit) <-> the packed order (byte j bit g: value
// 4 g + j).
static uint32_t qh_pack(uint32_t qh) {
  uint32_t o = 0;
  for (int v = 0; v < 32; v++) o |= (qh >> v & 1u) << (8 * (v % 4) + v / 4);
  return o;
}

static uint32_t qh_unpack(uint32_t q) {
  uint32_t o = 0;
  for (int v = 0; v < 32; v++) o |= (q >> (8 * (v % 4) + v / 4) & 1u) << v;
  return o;
}

// Moves one row's block between the file's layout (blk) and the group
// (g): to_group 1 packs, 0 unpacks.
static void move_block(const p16_fmt *f, const p16_at *at, int r, uint8_t *blk, uint8_t *g,
                       int to_group) {
#define MV(file, grp, len) (to_group ? memcpy((grp), (file), (len)) : memcpy((file), (grp), (len)))
  MV(blk, g + at->d + 2 * r, 2);
  if (f->m_at) MV(blk + f->m_at, g + at->m + 2 * r, 2);
  for (int c = 0; c < f->chunks; c++) MV(blk + f->qs_at + 4 * c, g + at->qs + 64 * c + 4 * r, 4);
#undef MV
  if (!f->qh_at) return;
  uint32_t q;
  if (to_group) {
    memcpy(&q, blk + f->qh_at, 4);
    q = qh_pack(q);
    memcpy(g + at->qh + 4 * r, &q, 4);
  } else {
    memcpy(&q, g + at->qh + 4 * r, 4);
    q = qh_unpack(q);
    memcpy(blk + f->qh_at, &q, 4);
  }
}

void wk_pack16_group(int type, int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst) {
  p16_fmt f;
  if (!fmt_of(type, &f)) return;
  const int64_t nb = k / 32;
  for (int64_t b = 0; b < nb; b++) {
    const p16_at at = block_at(&f, nb, b);
    for (int r = 0; r < WK_PACK16_ROWS; r++)
      move_block(&f, &at, r, (uint8_t *)src + (size_t)r * row_bytes + (size_t)(b * f.bytes), dst,
                 1);
  }
}

void wk_pack16_row(int type, int64_t k, const uint8_t *group, int r, uint8_t *dst) {
  p16_fmt f;
  if (!fmt_of(type, &f)) return;
  const int64_t nb = k / 32;
  for (int64_t b = 0; b < nb; b++) {
    const p16_at at = block_at(&f, nb, b);
    move_block(&f, &at, r, dst + (size_t)(b * f.bytes), (uint8_t *)group, 0);
  }
}

wk_gemm_fn wk_pack16_gemm(int type) {
  if (!wk_pack16_type(type) || wk_kernel_best_level() < WK_LEVEL_AVX512) return NULL;
  return wk_pack16_avx512_find(type);
}
