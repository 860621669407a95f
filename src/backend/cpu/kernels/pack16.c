// Packing and unpacking of 16-row groups (layout: pack16.h), and the pick
// of the packed kernel.
#include "backend/cpu/kernels/pack16.h"

#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/act8b.h"
#include "backend/cpu/kernels/pack16q3.h"
#include "quant/types.h"
#include "wick.h"

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

// ---- super-blocks (256 values) and the float types -------------------------
// A block of the group: its fields in order, each as chunks of `unit` bytes
// (16 x unit bytes each: row r's bytes unit c .. unit c + unit - 1 at unit r):
// unit 2 for an f16 field (one chunk of 32 bytes) and F16 values, 4 for the
// rest.
typedef struct p16k_field {
  int at, len;  // offset and bytes in the file's block
  int unit;     // bytes a row in a chunk (2 or 4)
} p16k_field;

typedef struct p16k_fmt {
  int bytes;
  int vals;  // values a block
  int n;
  p16k_field f[5];
  int codes_at;  // Q5_K's qh and qs, Q6_K's ql and qh (rearranged before chunking), else -1
} p16k_fmt;

static int kfmt_of(int type, p16k_fmt *k) {
  switch (type) {
    case WK_Q4_K:  // d dmin scales[12] qs[128]
      *k = (p16k_fmt){144, 256, 4, {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}, -1};
      return 1;
    case WK_Q5_K:  // d dmin scales[12] qh[32] qs[128]
      *k = (p16k_fmt){176, 256, 4, {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 160, 4}}, 16};
      return 1;
    case WK_Q2_K:  // scales[16] qs[64] d dmin
      *k = (p16k_fmt){84, 256, 4, {{80, 2, 2}, {82, 2, 2}, {0, 16, 4}, {16, 64, 4}}, -1};
      return 1;
    case WK_IQ4_XS:  // d scales_h scales_l[4] qs[128]
      *k = (p16k_fmt){136, 256, 4, {{0, 2, 2}, {2, 2, 2}, {4, 4, 4}, {8, 128, 4}}, -1};
      return 1;
    case WK_Q6_K:  // ql[128] qh[64] scales[16] d
      *k = (p16k_fmt){210, 256, 3, {{208, 2, 2}, {192, 16, 4}, {0, 192, 4}}, 0};
      return 1;
    case WK_F16:  // 32 values, a column's 16 rows a chunk
      *k = (p16k_fmt){64, 32, 1, {{0, 64, 2}}, -1};
      return 1;
    case WK_BF16:  // 32 values, two columns a chunk
      *k = (p16k_fmt){64, 32, 1, {{0, 64, 4}}, -1};
      return 1;
    case WK_FP8_E4M3:
    case WK_FP8_E5M2:  // f32 scale, 128 codes
      *k = (p16k_fmt){132, 128, 2, {{0, 4, 4}, {4, 128, 4}}, -1};
      return 1;
    default: return 0;
  }
}

// Q6_K's codes (the file's ql[128] qh[64]: value v = 128 n + w has its low
// 4 bits in nibble w / 64 of ql[64 n + w % 64] and its high 2 bits at bits
// 2 (w / 32) of qh[32 n + w % 32]) <-> the packed order (pack16.h): sub-block
// j = 4 q + t (16 values) for t < 3 as whole 6-bit codes in bits 0..5 of
// dwords 12 q + 4 t + u (byte k: value 16 j + 4 u + k), and sub-block 4 q + 3
// as 2-bit pieces in those bytes' bits 6..7 (piece t: its code's bits 2 t,
// 2 t + 1).
// Sub-block j's 16 codes from the file's bytes f, and back, 8 bytes a word
// (each shift is masked to bits that stay within their byte).
#define Q6B(b) (0x0101010101010101ull * (b))
static void q6_sub_get(const uint8_t *f, int j, uint64_t c[2]) {
  const uint8_t *ql = f + 64 * (j / 8) + 16 * (j % 4), *qh = f + 128 + 32 * (j / 8) + 16 * (j % 2);
  const int ls = 4 * (j % 8 / 4), hs = 2 * (j % 8 / 2);
  for (int h = 0; h < 2; h++) {
    uint64_t l, q;
    memcpy(&l, ql + 8 * h, 8);
    memcpy(&q, qh + 8 * h, 8);
    c[h] = (l >> ls & Q6B(15)) | (q >> hs & Q6B(3)) << 4;
  }
}

static void q6_sub_put(const uint64_t c[2], int j, uint8_t *f) {
  uint8_t *ql = f + 64 * (j / 8) + 16 * (j % 4), *qh = f + 128 + 32 * (j / 8) + 16 * (j % 2);
  const int ls = 4 * (j % 8 / 4), hs = 2 * (j % 8 / 2);
  for (int h = 0; h < 2; h++) {
    uint64_t l, q;
    memcpy(&l, ql + 8 * h, 8);
    memcpy(&q, qh + 8 * h, 8);
    l |= (c[h] & Q6B(15)) << ls;
    q |= (c[h] >> 4 & Q6B(3)) << hs;
    memcpy(ql + 8 * h, &l, 8);
    memcpy(qh + 8 * h, &q, 8);
  }
}

// Byte i = 4 u + k of dwords 12 q + 4 t + u (t < 3): 16 bytes from o + 4 (12
// q + 4 t).
static void q6_to_packed(const uint8_t *f, uint8_t *o) {
  for (int q = 0; q < 4; q++) {
    uint64_t e[2], c[2];
    q6_sub_get(f, 4 * q + 3, e);
    for (int t = 0; t < 3; t++) {
      q6_sub_get(f, 4 * q + t, c);
      for (int h = 0; h < 2; h++) {
        const uint64_t d = c[h] | (e[h] >> (2 * t) & Q6B(3)) << 6;
        memcpy(o + 4 * (12 * q + 4 * t) + 8 * h, &d, 8);
      }
    }
  }
}

static void q6_from_packed(const uint8_t *o, uint8_t *f) {
  memset(f, 0, 192);
  for (int q = 0; q < 4; q++) {
    uint64_t e[2] = {0, 0}, c[2];
    for (int t = 0; t < 3; t++) {
      for (int h = 0; h < 2; h++) {
        uint64_t d;
        memcpy(&d, o + 4 * (12 * q + 4 * t) + 8 * h, 8);
        c[h] = d & Q6B(63);
        e[h] |= (d >> 6 & Q6B(3)) << (2 * t);
      }
      q6_sub_put(c, 4 * q + t, f);
    }
    q6_sub_put(e, 4 * q + 3, f);
  }
}
#undef Q6B

// Q5_K's codes (the file's qh[32] qs[128]: value v = 32 j + l has its low 4
// bits in nibble j % 2 of qs[32 (j / 2) + l] and its fifth at bit j of
// qh[l]) <-> the packed order (pack16.h): sub-block t < 5 as 32 whole 5-bit
// codes (bits 0..4 of bytes 32 t + l), sub-blocks 5..7 (s0, s1, s2) in bits
// 5..7 of those bytes: s0 >> 2, s1 >> 2, s2 >> 2 in sub-blocks 0, 1, 2;
// s0 & 3 | (s2 & 1) << 2 in 3; s1 & 3 | (s2 >> 1 & 1) << 2 in 4.
#define Q5B(b) (0x0101010101010101ull * (b))
static void q5_to_packed(const uint8_t *f, uint8_t *o) {
  uint64_t c[8][4];  // [sub-block][8 values]
  for (int j = 0; j < 8; j++)
    for (int w = 0; w < 4; w++) {
      uint64_t l, h;
      memcpy(&l, f + 32 + 32 * (j / 2) + 8 * w, 8);
      memcpy(&h, f + 8 * w, 8);
      c[j][w] = (l >> (4 * (j % 2)) & Q5B(15)) | (h >> j & Q5B(1)) << 4;
    }
  for (int w = 0; w < 4; w++) {
    const uint64_t s0 = c[5][w], s1 = c[6][w], s2 = c[7][w];
    const uint64_t top[5] = {s0 >> 2 & Q5B(7), s1 >> 2 & Q5B(7), s2 >> 2 & Q5B(7),
                             (s0 & Q5B(3)) | (s2 & Q5B(1)) << 2,
                             (s1 & Q5B(3)) | (s2 >> 1 & Q5B(1)) << 2};
    for (int t = 0; t < 5; t++) {
      const uint64_t d = c[t][w] | top[t] << 5;
      memcpy(o + 32 * t + 8 * w, &d, 8);
    }
  }
}

static void q5_from_packed(const uint8_t *o, uint8_t *f) {
  uint64_t c[8][4];
  for (int w = 0; w < 4; w++) {
    uint64_t b[5], top[5];
    for (int t = 0; t < 5; t++) {
      memcpy(&b[t], o + 32 * t + 8 * w, 8);
      c[t][w] = b[t] & Q5B(31);
      top[t] = b[t] >> 5 & Q5B(7);
    }
    c[5][w] = top[0] << 2 | (top[3] & Q5B(3));
    c[6][w] = top[1] << 2 | (top[4] & Q5B(3));
    c[7][w] = top[2] << 2 | (top[3] >> 2 & Q5B(1)) | (top[4] >> 2 & Q5B(1)) << 1;
  }
  memset(f, 0, 160);
  for (int j = 0; j < 8; j++)
    for (int w = 0; w < 4; w++) {
      uint64_t l, h;
      memcpy(&l, f + 32 + 32 * (j / 2) + 8 * w, 8);
      memcpy(&h, f + 8 * w, 8);
      l |= (c[j][w] & Q5B(15)) << (4 * (j % 2));
      h |= (c[j][w] >> 4 & Q5B(1)) << j;
      memcpy(f + 32 + 32 * (j / 2) + 8 * w, &l, 8);
      memcpy(f + 8 * w, &h, 8);
    }
}
#undef Q5B

// One row's super-block (blk, the file's layout) into the group's (g).
static void pack_kblock(int type, const p16k_fmt *k, int r, const uint8_t *blk, uint8_t *g) {
  uint8_t codes[192];
  size_t at = 0;
  for (int i = 0; i < k->n; i++) {
    const p16k_field *f = &k->f[i];
    const uint8_t *src = blk + f->at;
    if (f->at == k->codes_at) {
      if (type == WK_Q5_K) q5_to_packed(src, codes);
      else q6_to_packed(src, codes);
      src = codes;
    }
    const int u = f->unit;
    if (u == 4)  // fixed sizes: copies inline
      for (int c = 0; c < f->len / 4; c++) memcpy(g + at + 64 * c + 4 * r, src + 4 * c, 4);
    else
      for (int c = 0; c < f->len / 2; c++) memcpy(g + at + 32 * c + 2 * r, src + 2 * c, 2);
    at += 16 * (size_t)f->len;
  }
}

// ---- Q3_K (hmask[32] qs[64] scales[12] d; layout: pack16.h, pack16q3.h) --
// A row at a time here; 16 rows at once in pack16q3_avx512.c where the CPU
// has AVX-512 (the packed kernel's CPUs).

// Row r's super-block b (blk, the file's layout) into the group's (G).
static void q3_pack_block(int r, int64_t b, const uint8_t *blk, uint8_t *G) {
  uint32_t F[Q3_DWORDS], P[Q3_DWORDS] = {0};
  memcpy(F, blk, sizeof F);
  for (int n = 0; n < Q3_MOVES; n++) {
    const q3_move v = q3_move_of(n);
    P[v.packed] |= (v.shift >= 0 ? F[v.file] << v.shift : F[v.file] >> -v.shift) & v.mask;
  }
  const q3_at at = q3_at_of((int)(b & 1));
  for (int c = 0; c < 24; c++) memcpy(G + at.codes + 64 * c + 4 * r, &P[c], 4);
  for (int c = 0; c < 3; c++) memcpy(G + at.scales + 64 * c + 4 * r, &P[24 + c], 4);
  memcpy(G + at.d + 2 * r, blk + 108, 2);
}

static void q3_unpack_block(int r, int64_t b, const uint8_t *G, uint8_t *blk) {
  const q3_at at = q3_at_of((int)(b & 1));
  uint32_t F[Q3_DWORDS] = {0}, P[Q3_DWORDS];
  for (int c = 0; c < 24; c++) memcpy(&P[c], G + at.codes + 64 * c + 4 * r, 4);
  for (int c = 0; c < 3; c++) memcpy(&P[24 + c], G + at.scales + 64 * c + 4 * r, 4);
  for (int n = 0; n < Q3_MOVES; n++) {
    const q3_move v = q3_move_of(n);
    const uint32_t x = P[v.packed] & v.mask;
    F[v.file] |= v.shift >= 0 ? x >> v.shift : x << -v.shift;
  }
  memcpy(blk, F, sizeof F);
  memcpy(blk + 108, G + at.d + 2 * r, 2);
}

static void q3_group(int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst) {
  if (wk_kernel_best_level() >= WK_LEVEL_AVX512) {
    wk_pack16q3_avx512_pack(k, src, row_bytes, dst);
    return;
  }
  for (int64_t b = 0; b < k / 256; b++)
    for (int r = 0; r < WK_PACK16_ROWS; r++)
      q3_pack_block(r, b, src + (size_t)r * row_bytes + (size_t)(b * 110),
                    dst + (size_t)(b * Q3_GROUP));
}

static void q3_unpack(int64_t k, const uint8_t *group, uint8_t *dst, size_t row_bytes) {
  if (wk_kernel_best_level() >= WK_LEVEL_AVX512) {
    wk_pack16q3_avx512_unpack(k, group, dst, row_bytes);
    return;
  }
  for (int64_t b = 0; b < k / 256; b++)
    for (int r = 0; r < WK_PACK16_ROWS; r++)
      q3_unpack_block(r, b, group + (size_t)(b * Q3_GROUP),
                      dst + (size_t)r * row_bytes + (size_t)(b * 110));
}

// 1 when `type` has a packed layout.
static int pack16_type(int type) {
  p16_fmt f;
  p16k_fmt k;
  return type == WK_Q3_K || fmt_of(type, &f) || kfmt_of(type, &k);
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
// Bits 0, 4, 8, .., 28 of x to bits 0..7, and back.
static uint32_t gather4(uint32_t x) {
  x &= 0x11111111u;
  x = (x | x >> 3) & 0x03030303u;
  x = (x | x >> 6) & 0x000f000fu;
  return (x | x >> 12) & 0xffu;
}

static uint32_t spread4(uint32_t b) {
  uint32_t x = (b & 0x0fu) | (b & 0xf0u) << 12;
  x = (x | x << 6) & 0x03030303u;
  return (x | x << 3) & 0x11111111u;
}

static uint32_t qh_pack(uint32_t qh) {
  uint32_t o = 0;
  for (int j = 0; j < 4; j++) o |= gather4(qh >> j) << (8 * j);
  return o;
}

static uint32_t qh_unpack(uint32_t q) {
  uint32_t o = 0;
  for (int j = 0; j < 4; j++) o |= spread4(q >> (8 * j) & 0xffu) << j;
  return o;
}

// One row's block (blk, the file's layout) into the group (g).
static void pack_block(const p16_fmt *f, const p16_at *at, int r, const uint8_t *blk,
                       uint8_t *g) {
  memcpy(g + at->d + 2 * r, blk, 2);
  if (f->m_at) memcpy(g + at->m + 2 * r, blk + f->m_at, 2);
  for (int c = 0; c < f->chunks; c++)
    memcpy(g + at->qs + 64 * c + 4 * r, blk + f->qs_at + 4 * c, 4);
  if (f->qh_at) {
    uint32_t q;
    memcpy(&q, blk + f->qh_at, 4);
    q = qh_pack(q);
    memcpy(g + at->qh + 4 * r, &q, 4);
  }
}

void wk_pack16_group(int type, int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst) {
  p16_fmt f;
  p16k_fmt kf;
  if (type == WK_Q3_K) {
    q3_group(k, src, row_bytes, dst);
    return;
  }
  if (kfmt_of(type, &kf)) {
    for (int64_t b = 0; b < k / kf.vals; b++)
      for (int r = 0; r < WK_PACK16_ROWS; r++)
        pack_kblock(type, &kf, r, src + (size_t)r * row_bytes + (size_t)(b * kf.bytes),
                    dst + 16 * (size_t)(b * kf.bytes));
    return;
  }
  if (!fmt_of(type, &f)) return;
  const int64_t nb = k / 32;
  for (int64_t b = 0; b < nb; b++) {
    const p16_at at = block_at(&f, nb, b);
    for (int r = 0; r < WK_PACK16_ROWS; r++)
      pack_block(&f, &at, r, src + (size_t)r * row_bytes + (size_t)(b * f.bytes), dst);
  }
}

// The 16 rows' copies of one field: from the group (at, chunks of 16 x unit
// bytes) to each row's bytes at off.
static void unpack_field(const uint8_t *g, size_t at, int len, int unit, uint8_t *dst,
                         size_t row_bytes, size_t off) {
  for (int c = 0; c < len / unit; c++)
    for (int r = 0; r < WK_PACK16_ROWS; r++)
      if (unit == 4)  // fixed sizes: copies inline
        memcpy(dst + r * row_bytes + off + 4 * c, g + at + 64 * c + 4 * r, 4);
      else
        memcpy(dst + r * row_bytes + off + 2 * c, g + at + 32 * c + 2 * r, 2);
}

void wk_pack16_unpack(int type, int64_t k, const uint8_t *group, uint8_t *dst, size_t row_bytes) {
  p16_fmt f;
  p16k_fmt kf;
  if (type == WK_Q3_K) {
    q3_unpack(k, group, dst, row_bytes);
    return;
  }
  if (kfmt_of(type, &kf)) {
    for (int64_t b = 0; b < k / kf.vals; b++) {
      const uint8_t *g = group + 16 * (size_t)(b * kf.bytes);
      size_t at = 0;
      for (int i = 0; i < kf.n; i++) {
        const p16k_field *fl = &kf.f[i];
        unpack_field(g, at, fl->len, fl->unit, dst, row_bytes, (size_t)(b * kf.bytes + fl->at));
        at += 16 * (size_t)fl->len;
      }
      if (kf.codes_at >= 0)
        for (int r = 0; r < WK_PACK16_ROWS; r++) {
          uint8_t *q = dst + r * row_bytes + (size_t)(b * kf.bytes + kf.codes_at);
          uint8_t packed[192];
          if (type == WK_Q5_K) {
            memcpy(packed, q, 160);
            q5_from_packed(packed, q);
          } else {
            memcpy(packed, q, 192);
            q6_from_packed(packed, q);
          }
        }
    }
    return;
  }
  if (!fmt_of(type, &f)) return;
  const int64_t nb = k / 32;
  for (int64_t b = 0; b < nb; b++) {
    const p16_at at = block_at(&f, nb, b);
    const size_t off = (size_t)(b * f.bytes);
    unpack_field(group, at.d, 2, 2, dst, row_bytes, off);
    if (f.m_at) unpack_field(group, at.m, 2, 2, dst, row_bytes, off + f.m_at);
    unpack_field(group, at.qs, 4 * f.chunks, 4, dst, row_bytes, off + f.qs_at);
    if (f.qh_at)
      for (int r = 0; r < WK_PACK16_ROWS; r++) {
        uint32_t q;
        memcpy(&q, group + at.qh + 4 * r, 4);
        q = qh_unpack(q);
        memcpy(dst + r * row_bytes + off + f.qh_at, &q, 4);
      }
  }
}

int wk_pack16_fits(int type, int64_t k) {
  p16_fmt f;
  p16k_fmt kf;
  if (type == WK_Q3_K) return k % 256 == 0;
  return fmt_of(type, &f) ? k % 32 == 0 : kfmt_of(type, &kf) ? k % kf.vals == 0 : 0;
}

// AVX2 (and FMA, F16C; no AVX-512): pack16_avx2.c's and pack16k_avx2.c's
// types (Q4_K, Q5_K, Q6_K), those whose packed kernel reads faster than the tiles;
// AVX-512 without VNNI: none (its 512-bit tiles); AVX-512 VNNI: every packed
// type.
wk_gemm_fn wk_pack16_gemm_at(int type, int level) {
  const int best = wk_kernel_best_level();
  if (level == WK_LEVEL_AUTO) level = best;
  if (!pack16_type(type) || level > best) return NULL;
  if (level == WK_LEVEL_AVX2) {
    const wk_gemm_fn g = wk_pack16_avx2_find(type);
    return g ? g : wk_pack16k_avx2_find(type);
  }
  if (level < WK_LEVEL_AVX512) return NULL;
  if (type == WK_Q3_K) return wk_pack16q3_avx512_find(type);
  wk_gemm_fn g = wk_pack16_avx512_find(type);
  if (!g) g = wk_pack16k_avx512_find(type);
  return g ? g : wk_pack16f_avx512_find(type);
}

wk_gemm_fn wk_pack16_gemm(int type) { return wk_pack16_gemm_at(type, WK_LEVEL_AUTO); }

int wk_pack16_act(int type) {
  p16_fmt f;
  p16k_fmt k;
  switch (type) {
    case WK_Q3_K: return WK_ACT_Q8K;
    case WK_Q2_K: return WK_ACT_Q8B;
    case WK_F16:
    case WK_BF16: return WK_ACT_F32;
    case WK_FP8_E4M3:
    case WK_FP8_E5M2: return WK_ACT_F32S;
    default: break;
  }
  if (fmt_of(type, &f)) return WK_ACT_A16;
  return kfmt_of(type, &k) ? WK_ACT_A16K : -1;
}

int wk_pack16_pick(int type, int level, wk_kernel *out) {
  switch (wk_pack16_act(type)) {
    case WK_ACT_A16:
    case WK_ACT_A16K: return wk_act16_pick(type, level, out);
    case WK_ACT_Q8B: return wk_act8b_pick(type, level, out);
    case -1: return WICK_ERR_UNSUPPORTED;
    default: return wk_kernel_pick(type, level, out);
  }
}
