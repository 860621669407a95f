// Packing and unpacking of 16-row groups (layout: pack16.h), and the pick
// of the packed kernel.
#include "backend/cpu/kernels/pack16.h"

#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/pack16q3.h"
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
  int qh_at;  // Q6_K's qh (rearranged before chunking), else -1
} p16k_fmt;

static int kfmt_of(int type, p16k_fmt *k) {
  switch (type) {
    case WK_Q4_K:  // d dmin scales[12] qs[128]
      *k = (p16k_fmt){144, 256, 4, {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}, -1};
      return 1;
    case WK_Q5_K:  // d dmin scales[12] qh[32] qs[128]
      *k = (p16k_fmt){
          176, 256, 5, {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 32, 4}, {48, 128, 4}}, -1};
      return 1;
    case WK_Q2_K:  // scales[16] qs[64] d dmin
      *k = (p16k_fmt){84, 256, 4, {{80, 2, 2}, {82, 2, 2}, {0, 16, 4}, {16, 64, 4}}, -1};
      return 1;
    case WK_IQ4_XS:  // d scales_h scales_l[4] qs[128]
      *k = (p16k_fmt){136, 256, 4, {{0, 2, 2}, {2, 2, 2}, {4, 4, 4}, {8, 128, 4}}, -1};
      return 1;
    case WK_Q6_K:  // ql[128] qh[64] scales[16] d
      *k = (p16k_fmt){210, 256, 4, {{208, 2, 2}, {192, 16, 4}, {0, 128, 4}, {128, 64, 4}}, 128};
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

// Q6_K's 2-bit fields (value v: bits 2 (v % 128 / 32) of qh[32 (v / 128) +
// v % 32]) in the order of the packed code chunks: chunk c = 16 h + i of ql
// (bytes 64 h + 4 i ..) holds values 128 h + 4 i + k in its low nibbles and
// 128 h + 64 + 4 i + k in its high ones (k = 0..3); byte k of the packed
// qh's dword c / 2 holds, at bits 2 m, m = 2 (c % 2) + (high nibble), the
// field of that value, so that one shift puts it at bits 4..5 of byte k.
//
// In dwords: file qh dword 8 h + 2 s + u (u = 0, 1; s = 0..3) and packed
// dword 8 h + 4 t + s (t = 0, 1) trade their fields byte by byte: the file's
// field (half, t) at bits 4 half + 2 t is the packed one's at 4 u + 2 half.
// Each step below moves bits within their byte (masks per byte).
#define Q6M(b) (0x01010101u * (b))
static void qh6_move(const uint8_t *qh, uint8_t *out, int to_packed) {
  uint32_t in[16], o[16];
  memcpy(in, qh, 64);
  for (int h = 0; h < 2; h++)
    for (int s = 0; s < 4; s++) {
      uint32_t *f0 = &o[8 * h + 2 * s], *f1 = f0 + 1, *p0 = &o[8 * h + s], *p1 = p0 + 4;
      if (to_packed) {
        const uint32_t F0 = in[8 * h + 2 * s], F1 = in[8 * h + 2 * s + 1];
        *p0 = (F0 & Q6M(0x03)) | (F0 >> 2 & Q6M(0x0c)) | (F1 << 4 & Q6M(0x30)) |
              (F1 << 2 & Q6M(0xc0));
        *p1 = (F0 >> 2 & Q6M(0x03)) | (F0 >> 4 & Q6M(0x0c)) | (F1 << 2 & Q6M(0x30)) |
              (F1 & Q6M(0xc0));
      } else {
        const uint32_t P0 = in[8 * h + s], P1 = in[8 * h + s + 4];
        *f0 = (P0 & Q6M(0x03)) | (P1 << 2 & Q6M(0x0c)) | (P0 << 2 & Q6M(0x30)) |
              (P1 << 4 & Q6M(0xc0));
        *f1 = (P0 >> 4 & Q6M(0x03)) | (P1 >> 2 & Q6M(0x0c)) | (P0 >> 2 & Q6M(0x30)) |
              (P1 & Q6M(0xc0));
      }
    }
  memcpy(out, o, 64);
}
#undef Q6M

// One row's super-block (blk, the file's layout) into the group's (g).
static void pack_kblock(const p16k_fmt *k, int r, const uint8_t *blk, uint8_t *g) {
  uint8_t qh[64];
  size_t at = 0;
  for (int i = 0; i < k->n; i++) {
    const p16k_field *f = &k->f[i];
    const uint8_t *src = blk + f->at;
    if (f->at == k->qh_at) {
      qh6_move(src, qh, 1);
      src = qh;
    }
    const int u = f->unit;
    for (int c = 0; c < f->len / u; c++) memcpy(g + at + 16 * u * c + u * r, src + u * c, u);
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
        pack_kblock(&kf, r, src + (size_t)r * row_bytes + (size_t)(b * kf.bytes),
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
      memcpy(dst + r * row_bytes + off + unit * c, g + at + 16 * unit * c + unit * r, unit);
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
      if (kf.qh_at >= 0)
        for (int r = 0; r < WK_PACK16_ROWS; r++) {
          uint8_t *q = dst + r * row_bytes + (size_t)(b * kf.bytes + kf.qh_at);
          qh6_move(q, q, 0);
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
// types (Q4_K, Q6_K), those whose packed kernel reads faster than the tiles;
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
    case WK_F16:
    case WK_BF16: return WK_ACT_F32;
    case WK_FP8_E4M3:
    case WK_FP8_E5M2: return WK_ACT_F32S;
    default: break;
  }
  if (fmt_of(type, &f)) return WK_ACT_A16;
  return kfmt_of(type, &k) ? WK_ACT_A16K : -1;
}
