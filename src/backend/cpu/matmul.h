// Matrix products of a weight (in its file format) with activations.
//
// Two plans, chosen per weight matrix at prepare time (cpu_mm_plan):
//   exact: weight rows dequantized to f32 a tile at a time and multiplied with
//          the f32 activations (reference-accurate; `--exact`, and every type
//          without a kernel);
//   fast:  batches of at least f32_min tokens (AVX2 CPUs) run as exact, where
//          f32 FMA tiles beat integer kernels; on AVX-512 VNNI CPUs batches of
//          at least g16_min tokens (quantized weights but Q2_K) take the
//          integer GEMM instead (kernels/gemm16.h: 16-bit activations,
//          vpdpwssd); smaller ones (decode) use the SIMD kernels: activations
//          converted once to the kernel's format (16-bit blocks for quantized
//          weights, kernels/act16.h; plain f32 for F32/F16/BF16/FP8 weights,
//          kernels/kernels.h), integer or f32 dot products straight from the
//          weight blocks.
// Both split output rows across the pool's threads in chunks claimed from a
// shared counter, so a thread that the OS delays does not hold the others up.
#ifndef WICK_BACKEND_CPU_MATMUL_H
#define WICK_BACKEND_CPU_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels/gemm16.h"
#include "backend/cpu/kernels/kernels.h"
#include "base/pool.h"
#include "model/model.h"

// Weight rows dequantized at once per thread (each used for every token).
#define CPU_MATMUL_TILE 32
// Batches of at least this many tokens take the f32 path on AVX2 machines
// even for fast-path matrices: each dequantized weight then serves enough
// tokens for f32 FMA tiles to beat the integer kernels, and those tokens get
// the exact path's results. Measured crossovers (one thread, the default
// models' shapes, AMD Zen 3): ~10 tokens for the 32-value formats against
// 16-bit activations, ~30 for the super-block ones, whose integer kernels
// share each decoded block among more tokens.
#define CPU_F32_MIN_TOKENS_Q 12
#define CPU_F32_MIN_TOKENS_K 32
#define CPU_F32_MIN_TOKENS 16  // other kernels (8-bit activations)
// On AVX-512 VNNI CPUs batches of at least this many tokens take the integer
// GEMM (kernels/gemm16.h) instead of both: it beats the f32 tiles at every
// size (1.8-2.6x from 64 tokens up), and the 16-bit kernels from ~5 tokens
// for the 32-value formats and ~8 for the super-blocks, whose kernels share
// each decoded block among more tokens (wick bench -p 4..24 on the default
// models, one thread, AMD Zen 4).
#define CPU_G16_MIN_TOKENS_Q 5
#define CPU_G16_MIN_TOKENS_K 8
// Activation formats: kernels.h's wk_act_fmt (0..2, 5), act16.h's (3, 4) and act8b.h's (6).
#define CPU_ACT_FMTS 7

// Bytes of one row of k values converted to activation format f (either
// kernels.h's wk_act_fmt or act16.h's); 0 when k is not a multiple of its block.
size_t cpu_act_row_size(int f, int64_t k);

// Floats of scratch one thread needs for the exact path with rows of length k.
size_t cpu_matmul_scratch(int64_t k);
// Rows of the run each of nth threads takes first in a product of n_tokens
// tokens (then the rest in claimed chunks); 0: chunks only (cpu_mm_run).
long cpu_mm_home(long rows, int nth, int n_tokens);

// Exact path, whole matrix: y[t][r] = sum_k W[r][k] * x[t][k] for
// t < n_tokens, r < w->ne[1]; x is [n_tokens][w->ne[0]], y is
// [n_tokens][w->ne[1]] (row-major, f32). scratch holds wk_pool_size(pool)
// slices of scratch_per_thread >= cpu_matmul_scratch(w->ne[0]) floats.
void cpu_matmul(wk_pool *pool, float *scratch, size_t scratch_per_thread, const wk_tensor *w,
                const float *x, int n_tokens, float *y);

// sum_i a[i] * b[i] in f32 with 8 partial sums (the dot product every op uses).
float cpu_dot(const float *a, const float *b, int64_t n);

// One weight matrix and the path chosen for it.
typedef struct cpu_mm {
  const wk_tensor *w;  // ne[0] = k inputs, ne[1] = rows (outputs)
  wk_kernel kr;        // the kernels (valid when fast)
  bool fast;           // true: kernel path; false: exact path
  bool avx2;           // the exact path may use AVX2 + FMA tiles
  int f32_min;         // fast: batches of this many tokens take the f32 path
  int g16_min;         // fast: batches of this many take the integer GEMM (INT32_MAX: none)
  wk_gemm16 g16;       // its decoder (valid when g16_min < INT32_MAX)
  size_t row_bytes;    // bytes of one weight row
  const unsigned char *data;  // the bytes the products read: w->data, or packed
  const void *packed;         // its packed copy (cpu_mm_pack; data points there), or NULL
  long packed_rows;           // rows [0, packed_rows) in 16-row groups (pack16.h)
  wk_gemm_fn pg;              // their kernel (the decode path's batches)
} cpu_mm;

// Picks the path of w: fast when !exact and the kernel table has w's type
// (and k is a multiple of its blocks), else exact.
void cpu_mm_plan(cpu_mm *mm, const wk_tensor *w, bool exact);
// On AVX-512 VNNI CPUs, for the fast path's matrices of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, F16, BF16 and FP8 with at least 16 rows (rows of a
// whole number of the packed blocks, pack16.h), and on CPUs whose best level
// is AVX2 for those with an AVX2 packed kernel (wk_pack16_gemm): a copy of the matrix with its
// whole 16-row groups packed for the decode kernels (kernels/pack16.h: 1.3-1.6x their speed
// with rows in L2), which the products read from then on (the integer GEMM and the f32 path
// unpack 32 rows at a time into their scratch). Where the weights are mapped, the fast path's
// other matrices are copied as they are (the copy lies on 2 MB pages: wk_alloc_huge says why;
// WICK_NOCOPY=1 in the environment leaves them in the mapping). cpu_mm_pack_size: the bytes the
// copy takes (a multiple of 64; 0: mm keeps the file's rows). cpu_mm_pack writes it to dst
// (64-byte aligned, that many bytes, owned by the caller and kept while mm is used). mapped:
// the weights lie in a read-only private file mapping, whose pages under the matrix are then
// dropped (madvise; read again from the file only if something else reads them), so the copy
// takes their place; else its bytes are added to *acct. WICK_PACK16=0 in the environment keeps
// the file's layout. cpu_mm_unpack points mm back at the file's rows.
size_t cpu_mm_pack_size(const cpu_mm *mm, bool mapped);
void cpu_mm_pack(cpu_mm *mm, wk_pool *pool, bool mapped, uint64_t *acct, uint8_t *dst);
void cpu_mm_unpack(cpu_mm *mm);
// Bit (1 << wk_act_fmt) of the converted activations mm reads; 0 when it
// reads the f32 rows themselves (exact path or f32 activations).
unsigned cpu_mm_need(const cpu_mm *mm);
// The same for an input of n_tokens rows: 0 also when the batch is large
// enough for the f32 path (CPU_F32_MIN_TOKENS), WK_ACT_A16's bit when it
// takes the integer GEMM (CPU_G16_MIN_TOKENS).
unsigned cpu_mm_need_n(const cpu_mm *mm, int n_tokens);

// The input rows of one or more matrices, with the conversions done so far:
// each format is converted once per input, however many matrices read it.
typedef struct cpu_act {
  const float *x;                          // [n_tokens][k] f32 rows
  int n_tokens;
  int64_t k;
  unsigned ready;                          // bit f: buf[f] holds x in format f
  unsigned char *buf[CPU_ACT_FMTS];        // converted rows (none for f32)
  size_t cap[CPU_ACT_FMTS];                // bytes of buf[f]
  wk_quantize_act_fn quant[CPU_ACT_FMTS];  // converter of format f
} cpu_act;

// Sizing at prepare time: room for mm's input of up to max_tokens rows (in
// its kernels' format, and in WK_ACT_A16 where batches that large take the
// integer GEMM).
void cpu_act_reserve(cpu_act *a, const cpu_mm *mm, int max_tokens);
// Allocates the reserved buffers (bytes added to *acct); WICK_ERR_NOMEM.
int cpu_act_alloc(cpu_act *a, uint64_t *acct);
void cpu_act_free(cpu_act *a);
// A new input: x is [n_tokens][k]; nothing converted yet.
void cpu_act_set(cpu_act *a, const float *x, int n_tokens, int64_t k);
// Converts rows [t0, t1) into every format in `need` (threads may convert
// disjoint ranges at once); the caller then sets a->ready |= need.
void cpu_act_convert_rows(cpu_act *a, unsigned need, int t0, int t1);
// Converts all rows into the formats of `need` not ready yet (threaded).
void cpu_act_convert(wk_pool *pool, cpu_act *a, unsigned need);

// y[i] = W_i x for the n (<= 4) matrices mm[i] reading input a (each y[i] is
// [n_tokens][rows_i]); converts a first where needed, then one pass of the
// pool over the rows of all n. scratch as for cpu_matmul (exact path).
void cpu_mm_run(wk_pool *pool, float *scratch, size_t scratch_per_thread, cpu_act *a,
                const cpu_mm *const *mm, float *const *y, int n);

#endif
