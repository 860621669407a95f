// Weight rows repacked in groups of 16 for the AVX-512 VNNI decode kernels
// of the 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL), of
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS, and of F16, BF16 and FP8; and
// for the AVX2 ones of Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (pack16_avx2.c: a
// chunk's 16 rows as two 256-bit halves, pmaddubsw instead of vpdpbusd) and
// of Q4_K, Q5_K and Q6_K (pack16k_avx2.c, the same way).
//
// Why: the file's layout keeps each row's blocks together, so a decode tile
// that multiplies 8 rows at once spends most of its time moving bytes
// between lanes: gathering code bytes of several rows into one vector,
// gathering their f16 scales, and reducing each (row, block) sum from 4
// int32 lanes to one (the tile's own measures: without the scales ~25%
// faster, without the reduction ~30%). Packed, one 512-bit vector holds the
// same 4 code bytes of 16 rows, one int32 lane a row, so vpdpbusd with the
// activations' 4 bytes broadcast from memory sums each row's block straight
// into its own lane, and the 16 rows' scales are one 32-byte load.
//
// Layout. A group is 16 consecutive rows and takes exactly their bytes
// (16 x row bytes, from the first row's offset), so row ranges that start at
// a multiple of 16 address the same bytes as before. Within a group, blocks
// go in pairs (2p, 2p + 1; the last alone when a row has an odd count), a
// pair of n blocks as, for i < n and rows r < 16:
//   d      n x 16 f16            block i's d of row r at 32 i + 2 r
//   m      n x 16 f16            (Q4_1, Q5_1) the same for m
//   qh     n x 16 u32            (Q5_0, Q5_1) row r's fifth bits, rearranged:
//                                byte j bit g = the bit of value 4 g + j
//   qs     n x C x 64 bytes      chunk c of block i: row r's code bytes
//                                4 c .. 4 c + 3 at 4 r (C = 4; Q8_0: 8)
// A pair's fields are whole multiples of 64 bytes (every block size is
// even), so where a group starts on a cache line every pair's loads are
// line-aligned (not a lone last block's). For the 4-bit
// formats chunk c's low nibbles are values 4 c .. 4 c + 3 and its high ones
// 16 + 4 c ..; Q8_0's chunk c is values 4 c .. 4 c + 3.
//
// The super-blocks go one after another, each as its fields in order, an
// f16 field as 16 f16 (32 bytes), the others as 4-byte chunks (chunk c: row
// r's bytes 4 c .. 4 c + 3 at 4 r):
//   Q4_K  d, dmin, scales (3 chunks), qs (32): 2304 bytes
//   Q2_K  d, dmin, scales (4), qs (16): 1344 bytes
//   Q5_K  d, dmin, scales (3), codes (40): 2816 bytes. A row's 5-bit codes
//         (value v: its qs nibble | its qh bit << 4) rearranged before
//         chunking: sub-block t < 5 (values 32 t ..) in bits 0..4 of bytes
//         32 t .. 32 t + 31 (dwords 8 t ..), sub-blocks 5, 6, 7 (codes s0,
//         s1, s2 of the same value index) in their bits 5..7: s0 >> 2,
//         s1 >> 2, s2 >> 2 in sub-blocks 0, 1, 2; s0 & 3 | (s2 & 1) << 2 in
//         3; s1 & 3 | (s2 >> 1 & 1) << 2 in 4
//   IQ4_XS  d, scales_h, scales_l (1), qs (32): 2176 bytes
//   Q6_K  d, scales (4), codes (48): 3360 bytes. A row's 6-bit codes (value
//         v: its ql nibble | its 2 qh bits << 4) rearranged before chunking:
//         sub-block j = 4 q + t (values 16 j ..) for t < 3 in dwords 12 q +
//         4 t + u (u < 4), byte k: bits 0..5 the code of value 16 j + 4 u +
//         k, bits 6..7 bits 2 t, 2 t + 1 of the code of value 16 (4 q + 3)
//         + 4 u + k (so sub-block 4 q + 3 lives in the others' top bits)
//   Q3_K  codes (24 chunks), scales (3), d: 1760 bytes; odd super-blocks
//         put d first (d, codes, scales), so that where the group starts on
//         a cache line so does every chunk. A row's fields, their bits
//         rearranged before chunking:
//         codes: value 32 i + l (l < 32; the file's bit-plane i = 4 h + j:
//         low 2 bits at bits 2 j of qs[32 h + l], high bit at bit 4 h + j
//         of hmask[l]) as a 3-bit code q = low + 4 high (value q - 4);
//         dwords 3 i, 3 i + 1, 3 i + 2 (X0, X1, X2) hold plane i, byte k of
//         Xu (u < 3) q of l = 4 u + k at bits 0..2 and of l = 16 + 4 u + k
//         at bits 3..5; l = 12 + k: low 2 bits at X0's bits 6..7, high bit
//         at X2's bit 6; l = 28 + k: X1's bits 6..7, X2's bit 7.
//         scales: the 6-bit scales s_j (value s_j - 32) in 6 16-bit words
//         w_i (dword i / 2, half i % 2): s_i at bits 10..15, s_{6 + i} at
//         bits 4..9; bits 0..3: for i < 4 the low 4 bits of s_{12 + i}, for
//         i = 4, 5 the high 2 bits of s_{8 + i} and of s_{10 + i} at 2..3.
// The float types go by blocks the same way, as 2-byte (F16) or 4-byte
// chunks of 16 rows:
//   F16   32 values: chunk c (32 bytes) = column c of the 16 rows (1024 bytes)
//   BF16  32 values: chunk c (64 bytes) = columns 2 c, 2 c + 1 of row r as a
//         dword at 4 r (1024 bytes)
//   FP8   the f32 scales (64 bytes), then 32 chunks of codes (row r's codes
//         4 c .. 4 c + 3 at 4 r): 2112 bytes a block of 128
// Rows past the last whole group stay in the file's layout.
#ifndef WICK_BACKEND_CPU_KERNELS_PACK16_H
#define WICK_BACKEND_CPU_KERNELS_PACK16_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels/kernels.h"

#define WK_PACK16_ROWS 16
// Tokens the packed kernels take at once (a call with more goes through
// them this many at a time; the decode path's batches are below the integer
// GEMM's minimum of 5 or 8).
#define WK_PACK16_MAX_TOKENS 4

// 1 when rows of k values of `type` have a packed layout (k a multiple of its
// block: 32 values for the 32-value formats, F16 and BF16, 256 for the
// K-quants, 128 for FP8).
int wk_pack16_fits(int type, int64_t k);

// Rows src, src + row_bytes, .. (16 of them, k values each) into one packed
// group at dst (16 x row_bytes bytes; not overlapping src).
void wk_pack16_group(int type, int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst);

// The 16 rows of the packed group at group back in the file's layout at
// dst, dst + row_bytes, ...
void wk_pack16_unpack(int type, int64_t k, const uint8_t *group, uint8_t *dst, size_t row_bytes);

// The packed kernel of `type` (wk_gemm_fn's contract, with w a packed group
// start and rows a multiple of 16; any n_tokens, WK_PACK16_MAX_TOKENS at a
// time; the activations in wk_pack16_act(type)): the 32-value formats
// bit-identical to the 16-bit-activation kernels' vec_dot on the same rows,
// the rest the same up to f32 rounding (Q3_K: the 8-bit-activation vec_dot's,
// the float types: the kernel table's); NULL when the type has none at the
// CPU's best level (wk_kernel_best_level: AVX-512 VNNI, every packed type;
// AVX2, the 32-value formats whose AVX2 kernel pays and Q4_K, Q5_K, Q6_K,
// pack16.c; below, none).
wk_gemm_fn wk_pack16_gemm(int type);
// The same at `level` (WK_LEVEL_AUTO: the best; NULL above the best or where
// that level has no packed kernel of `type`).
wk_gemm_fn wk_pack16_gemm_at(int type, int level);

// The activation format the packed kernel of `type` takes: WK_ACT_A16 for
// the 32-value formats, WK_ACT_A16K for the K-quants but Q3_K, WK_ACT_Q8K
// for Q3_K (the 8-bit activations its decode path takes: matmul.c's
// plan_act8), WK_ACT_F32 for F16 and BF16, WK_ACT_F32S for FP8; -1 for a
// type without a packed layout.
int wk_pack16_act(int type);
// Fills *out with the decode kernels (vec_dot, gemm, quantize_act) of that
// activation format for `type` at `level`, the ones the packed kernel's
// results are checked against and whose converter feeds it: act16.h's,
// act8b.h's or the kernel table's. WICK_OK, or WICK_ERR_UNSUPPORTED.
int wk_pack16_pick(int type, int level, wk_kernel *out);

// ---- shared by pack16*.c only ----
wk_gemm_fn wk_pack16_avx512_find(int type);   // the 32-value formats
wk_gemm_fn wk_pack16_avx2_find(int type);     // the same, AVX2 (pack16_avx2.c)
wk_gemm_fn wk_pack16k_avx2_find(int type);    // Q4_K, Q5_K, Q6_K, AVX2 (pack16k_avx2.c)
wk_gemm_fn wk_pack16k_avx512_find(int type);  // Q2_K, Q4_K, Q5_K, Q6_K, IQ4_XS
wk_gemm_fn wk_pack16f_avx512_find(int type);  // F16, BF16, FP8
wk_gemm_fn wk_pack16q3_avx512_find(int type);  // Q3_K
// wk_pack16_group and wk_pack16_unpack of Q3_K, 16 rows at once
void wk_pack16q3_avx512_pack(int64_t k, const uint8_t *src, size_t row_bytes, uint8_t *dst);
void wk_pack16q3_avx512_unpack(int64_t k, const uint8_t *group, uint8_t *dst, size_t row_bytes);

#endif
