// Matrix products. Exact path: weight rows are dequantized to f32 one tile at
// a time into a per-thread buffer (never a whole matrix) and reused for every
// token of the batch; AVX2 + FMA register tiles (kernels/fma_rows.h) where the
// CPU has them, else dot products with several f32 partial sums (GCC/Clang
// vector extensions give 4-wide arithmetic on any x86-64 level). Fast path:
// the same for batches of many tokens (the integer GEMM of kernels/gemm16.h
// on AVX-512 VNNI CPUs), else the kernels' gemm on activations converted
// once per input.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/dequant.h"
#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/act8b.h"
#include "backend/cpu/kernels/fma_rows.h"
#include "backend/cpu/kernels/gemm16.h"
#include "backend/cpu/kernels/pack16.h"
#include "base/alloc.h"
#include "quant/types.h"

typedef float v4f __attribute__((vector_size(16)));

static inline v4f load4(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline float hsum4(v4f v) { return (v[0] + v[1]) + (v[2] + v[3]); }

float cpu_dot(const float *a, const float *b, int64_t n) {
  v4f s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += load4(a + i) * load4(b + i);
    s1 += load4(a + i + 4) * load4(b + i + 4);
  }
  float s = hsum4(s0 + s1);
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

// out[r] = dot(w + r * ldw, x) for r < 4, sharing the loads of x.
static void dot4(const float *w, int64_t ldw, const float *x, int64_t n, float *out) {
  const float *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
  v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f xv = load4(x + i);
    s0 += load4(w0 + i) * xv;
    s1 += load4(w1 + i) * xv;
    s2 += load4(w2 + i) * xv;
    s3 += load4(w3 + i) * xv;
  }
  float r0 = hsum4(s0), r1 = hsum4(s1), r2 = hsum4(s2), r3 = hsum4(s3);
  for (; i < n; i++) {
    r0 += w0[i] * x[i];
    r1 += w1[i] * x[i];
    r2 += w2[i] * x[i];
    r3 += w3[i] * x[i];
  }
  out[0] = r0, out[1] = r1, out[2] = r2, out[3] = r3;
}

// dot4 for two tokens at once (each weight load used twice); every output
// gets the same operations in the same order as dot4 gives it.
static void dot4x2(const float *w, int64_t ldw, const float *xa, const float *xb, int64_t n,
                   float *ya, float *yb) {
  const float *w0 = w, *w1 = w + ldw, *w2 = w + 2 * ldw, *w3 = w + 3 * ldw;
  v4f a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4f xav = load4(xa + i), xbv = load4(xb + i), wv;
    wv = load4(w0 + i), a0 += wv * xav, b0 += wv * xbv;
    wv = load4(w1 + i), a1 += wv * xav, b1 += wv * xbv;
    wv = load4(w2 + i), a2 += wv * xav, b2 += wv * xbv;
    wv = load4(w3 + i), a3 += wv * xav, b3 += wv * xbv;
  }
  float ra[4] = {hsum4(a0), hsum4(a1), hsum4(a2), hsum4(a3)};
  float rb[4] = {hsum4(b0), hsum4(b1), hsum4(b2), hsum4(b3)};
  for (; i < n; i++) {
    const float *ws[4] = {w0, w1, w2, w3};
    for (int r = 0; r < 4; r++) ra[r] += ws[r][i] * xa[i], rb[r] += ws[r][i] * xb[i];
  }
  memcpy(ya, ra, sizeof ra);
  memcpy(yb, rb, sizeof rb);
}

// Floats between the rows of the decoded tile buffer: k, and 16 more where
// a row is a multiple of 4 KB (rows 4 KB apart map to the same L1 sets, and
// the 512-bit FMA tile's 8 row streams then evict each other: at k = 1024,
// 2048, 4096 the padded rows ran 3-12% faster, Skylake-SP).
static size_t buf_stride(int64_t k) { return (size_t)k + ((size_t)k % 1024 ? 0 : 16); }


// Where the integer GEMM's thread scratch ends (bytes): packed matrices
// unpack G16_ROWS rows there (at most 34 bytes a 32-value block).
static size_t unpack_at(int64_t k) { return (wk_gemm16_scratch(k) + 63) / 64 * 64; }
static size_t unpack_bytes(int64_t k) { return (size_t)G16_ROWS * ((size_t)k / 32 * 34); }
// The same after the exact path's tile of f32 rows.
static size_t exact_unpack_at(int64_t k) {
  return (size_t)CPU_MATMUL_TILE * buf_stride(k) * sizeof(float);
}

size_t cpu_matmul_scratch(int64_t k) {
  const size_t f32 = (exact_unpack_at(k) + unpack_bytes(k) + sizeof(float) - 1) / sizeof(float);
  const size_t g16 = (unpack_at(k) + unpack_bytes(k) + sizeof(float) - 1) / sizeof(float);
  return f32 > g16 ? f32 : g16;
}

// Rows [s, s + n) (n <= 32, s a multiple of 16) of a matrix whose rows
// [0, packed_rows) are packed (pack16.h), in the file's layout: the data
// itself past packed_rows, else unpacked into rowbuf.
static const unsigned char *file_rows(int type, int64_t k, const unsigned char *data,
                                      size_t row_bytes, long packed_rows, long s, long n,
                                      uint8_t *rowbuf) {
  if (s >= packed_rows) return data + (size_t)s * row_bytes;
  for (long r = s; r < s + n; r += WK_PACK16_ROWS) {
    uint8_t *dst = rowbuf + (size_t)(r - s) * row_bytes;
    if (r < packed_rows) {
      wk_pack16_unpack(type, k, data + (size_t)r * row_bytes, dst, row_bytes);
    } else {  // the rest: the file's layout
      memcpy(dst, data + (size_t)r * row_bytes, (size_t)(s + n - r) * row_bytes);
      break;
    }
  }
  return rowbuf;
}

// Exact path, rows [lo, hi) of w (its bytes at data; rows [0, packed_rows)
// packed, lo a multiple of 16 then) for every token: y[t * n + r]. Weight
// rows are dequantized CPU_MATMUL_TILE at a time into buf (the AVX2 decoders
// where avx2 and the type has one: the same values as the reference), then
// multiplied with every token (AVX2 + FMA tiles where avx2, else the 4-wide
// loops above).
static void exact_rows(const wk_tensor *w, const unsigned char *data, long packed_rows, bool avx2,
                       const float *x, int n_tokens, float *y, float *buf, long lo, long hi) {
  const int64_t k = w->ne[0], n = w->ne[1];
  const size_t row_bytes = wk_row_size(w->type, k);
  for (long r0 = lo; r0 < hi; r0 += CPU_MATMUL_TILE) {
    int nr = hi - r0 < CPU_MATMUL_TILE ? (int)(hi - r0) : CPU_MATMUL_TILE;
    const float *wt;
    size_t ws = (size_t)k;  // floats between wt's rows
    if (w->type == WK_F32) {
      wt = (const float *)data + (size_t)r0 * (size_t)k;
    } else {
      if (avx2) ws = buf_stride(k);
      const unsigned char *rows = file_rows(w->type, k, data, row_bytes, packed_rows, r0, nr,
                                            (uint8_t *)buf + exact_unpack_at(k));
      for (int r = 0; r < nr; r++) {
        const unsigned char *src = rows + (size_t)r * row_bytes;
        float *dst = buf + (size_t)r * ws;
        int rc = avx2 ? wk_act16_dequant_row(w->type, src, dst, k) : WICK_ERR_UNSUPPORTED;
        if (rc != WICK_OK) rc = cpu_dequant_row(w->type, src, dst, k);
        WK_ASSERT(rc == WICK_OK);
      }
      wt = buf;
    }
    if (avx2) {
      wk_fma_rows(wt, ws, k, nr, x, (size_t)k, n_tokens, y + r0, (size_t)n);
      continue;
    }
    int t = 0;
    for (; t + 2 <= n_tokens; t += 2) {
      const float *xa = x + (size_t)t * (size_t)k, *xb = xa + k;
      float *ya = y + (size_t)t * (size_t)n + r0, *yb = ya + n;
      int r = 0;
      for (; r + 4 <= nr; r += 4)
        dot4x2(wt + (size_t)r * (size_t)k, k, xa, xb, k, ya + r, yb + r);
      for (; r < nr; r++) {
        ya[r] = cpu_dot(wt + (size_t)r * (size_t)k, xa, k);
        yb[r] = cpu_dot(wt + (size_t)r * (size_t)k, xb, k);
      }
    }
    for (; t < n_tokens; t++) {
      const float *xt = x + (size_t)t * (size_t)k;
      float *yt = y + (size_t)t * (size_t)n + r0;
      int r = 0;
      for (; r + 4 <= nr; r += 4) dot4(wt + (size_t)r * (size_t)k, k, xt, k, yt + r);
      for (; r < nr; r++) yt[r] = cpu_dot(wt + (size_t)r * (size_t)k, xt, k);
    }
  }
}

typedef struct mm_job {
  const wk_tensor *w;
  bool avx2;
  const float *x;
  int n_tokens;
  float *y;
  float *scratch;
  size_t per_thread;
} mm_job;

static void mm_run(void *ctx, int ith, int nth) {
  const mm_job *j = ctx;
  long lo, hi;
  wk_split((long)j->w->ne[1], ith, nth, CPU_MATMUL_TILE, &lo, &hi);
  exact_rows(j->w, j->w->data, 0, j->avx2, j->x, j->n_tokens, j->y,
             j->scratch + (size_t)ith * j->per_thread, lo,
             hi);
}

void cpu_matmul(wk_pool *pool, float *scratch, size_t scratch_per_thread, const wk_tensor *w,
                const float *x, int n_tokens, float *y) {
  WK_ASSERT(scratch_per_thread >= cpu_matmul_scratch(w->ne[0]));
  mm_job j = {w, wk_kernel_best_level() >= WK_LEVEL_AVX2, x, n_tokens, y, scratch,
              scratch_per_thread};
  wk_pool_run(pool, mm_run, &j);
}

// ---- plans and converted activations ----

size_t cpu_act_row_size(int f, int64_t k) {
  return f == WK_ACT_A16 || f == WK_ACT_A16K ? wk_act16_row_size(f, k) : wk_act_row_size(f, k);
}

// Whether a fast-path matrix of `type` takes the kernel table's 8-bit-
// activation kernels (else act16.h's 16-bit ones). 8-bit for Q3_K: its
// weights' rounding error is far larger than an 8-bit activation's
// (tests/python/test_act8_k.py bounds the 8-bit product against the gguf
// package's weights), its 8-bit tiles run ~15-25% faster (AVX-512 decode:
// 80-91% of the read rate where the 16-bit tiles reach 72-77%), and on
// SmolLM2 with Q3_K ffn_down perplexity moved +0.18% against --exact
// (bench/RESULTS.md, session 19). Not Q2_K: the same measure gave +0.67%
// (all 15 chunks: +1.5%, session 32), over the 0.5% bound.
// 16 bits for every other type: 8-bit activations moved logits by up to
// ~1.5% of their range on the default models (SmolLM2 Q4_1, Gemma 3
// Q4_K_M) and missed the accuracy rule of tests/python/test_forward_default.py.
// WICK_ACT8=1 / WICK_ACT8=0 in the environment picks 8 / 16 bits for every
// type (A/B benchmarks).
// Q2_K takes 8 bits with a scale per 32 values instead (act8b.h: +0.11%
// on the same measure, session 32) where its packed kernel runs (AVX-512
// VNNI), unless WICK_ACT8 is set.
static const char *act8_env(void) {
  const char *a8 = getenv("WICK_ACT8");
  return a8 && (a8[0] == '0' || a8[0] == '1') && !a8[1] ? a8 : NULL;
}
static bool plan_act8(int type) {
  const char *a8 = act8_env();
  return a8 ? a8[0] == '1' : type == WK_Q3_K;
}
static bool plan_act8b(int type) { return type == WK_Q2_K && !act8_env(); }

// Plan per matrix (prepare time): the 16- or 8-bit-activation kernels
// (plan_act8) for the quantized types (exact path on CPUs without AVX2),
// else the kernel table (kernels.h: f32 activations for float weights); on
// AVX-512 VNNI CPUs also the integer GEMM (gemm16.h) for large batches of
// the types it decodes (16-bit activations, whichever the decode kernels
// take).
void cpu_mm_plan(cpu_mm *mm, const wk_tensor *w, bool exact) {
  memset(mm, 0, sizeof *mm);
  mm->w = w;
  mm->data = w->data;
  mm->g16_min = INT32_MAX;
  mm->row_bytes = wk_row_size(w->type, w->ne[0]);
  mm->avx2 = wk_kernel_best_level() >= WK_LEVEL_AVX2;
  if (exact) return;
  const bool act8 = plan_act8(w->type);
  if (plan_act8b(w->type) && wk_act8b_pick(w->type, WK_LEVEL_AUTO, &mm->kr) == WICK_OK) {
    // the packed kernel's activations (no AVX-512 VNNI: the 16-bit ones below)
  } else if (!act8 && wk_act16_pick(w->type, WK_LEVEL_AUTO, &mm->kr) == WICK_OK) {
    // Without AVX2 these are the slow reference kernels: the exact path is as
    // accurate and faster.
    if (mm->kr.level == WK_LEVEL_SCALAR) return;
  } else if (wk_kernel_pick(w->type, WK_LEVEL_AUTO, &mm->kr) != WICK_OK) {
    return;
  }
  mm->fast = mm->kr.k_multiple > 0 && w->ne[0] % mm->kr.k_multiple == 0 &&
             mm->kr.act >= 0 && mm->kr.act < CPU_ACT_FMTS &&
             cpu_act_row_size(mm->kr.act, w->ne[0]) > 0;
  mm->f32_min = !mm->avx2 || mm->kr.act == WK_ACT_F32 || mm->kr.act == WK_ACT_F32S ? INT32_MAX
                : mm->kr.act == WK_ACT_A16                 ? CPU_F32_MIN_TOKENS_Q
                : mm->kr.act == WK_ACT_A16K || mm->kr.act == WK_ACT_Q8B
                    ? CPU_F32_MIN_TOKENS_K
                                                           : CPU_F32_MIN_TOKENS;
  // the integer GEMM for the 16-bit kernels' types, and for Q2_K and Q3_K
  // on the 8-bit kernels (Q3_K's default, Q2_K's under WICK_ACT8=1; not for
  // the WICK_ACT8=1 A/B runs of the others, which keep the former 8-bit path)
  const bool g16 = mm->kr.act == WK_ACT_A16 || mm->kr.act == WK_ACT_A16K ||
                   mm->kr.act == WK_ACT_Q8B ||
                   (mm->kr.act == WK_ACT_Q8K && (w->type == WK_Q2_K || w->type == WK_Q3_K));
  if (mm->fast && g16 && wk_gemm16_pick(w->type, &mm->g16) == WICK_OK &&
      w->ne[0] % mm->g16.k_multiple == 0)
    mm->g16_min = mm->kr.act == WK_ACT_A16 ? CPU_G16_MIN_TOKENS_Q : CPU_G16_MIN_TOKENS_K;
}

typedef struct pack_job {
  const cpu_mm *mm;
  uint8_t *dst;  // 64-byte aligned
  long g0, g1;   // the groups of this call
  bool pack;     // packed (else copied as they are)
} pack_job;

static void pack_run(void *ctx, int ith, int nth) {
  const pack_job *j = ctx;
  const cpu_mm *mm = j->mm;
  long lo, hi;
  wk_split(j->g1 - j->g0, ith, nth, 1, &lo, &hi);
  const size_t gb = WK_PACK16_ROWS * mm->row_bytes;
  const uint8_t *src = (const uint8_t *)mm->w->data;
  if (!j->pack) {
    memcpy(j->dst + (size_t)(j->g0 + lo) * gb, src + (size_t)(j->g0 + lo) * gb,
           (size_t)(hi - lo) * gb);
    return;
  }
  for (long g = j->g0 + lo; g < j->g0 + hi; g++)
    wk_pack16_group(mm->w->type, mm->w->ne[0], src + (size_t)g * gb, mm->row_bytes,
                    j->dst + (size_t)g * gb);
}

// Drops the whole pages of [p, p + n) from the process's mapping (they come
// back from the file if read again: the tied embedding's rows).
static void drop_pages(const void *p, size_t n) {
  const long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0) return;
  const uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
  const uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
  if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

// The packed kernel mm's rows take (NULL: they keep the file's layout).
static wk_gemm_fn pack_kernel(const cpu_mm *mm) {
  const char *e = getenv("WICK_PACK16");
  // only where the decode kernels take the packed kernel's activations (not
  // the WICK_ACT8 A/B runs' other format)
  if ((e && e[0] == '0' && !e[1]) || !mm->fast || mm->w->ne[1] < WK_PACK16_ROWS ||
      mm->kr.act != wk_pack16_act(mm->w->type) || !wk_pack16_fits(mm->w->type, mm->w->ne[0]))
    return NULL;
  // Q8_0 too since session 29 (its packed kernel, with its prefetch a page,
  // reads 77-99% of the read passes against the tile's 63-83%; before, a
  // prefetch a line held it at the tile's speed). The AVX2 level packs the
  // 32-value formats but Q8_0 (pack16_avx2.c) and Q4_K, Q5_K, Q6_K
  // (pack16k_avx2.c), none of the float types: wk_pack16_gemm is NULL for
  // the rest, which keep the file's layout.
  return wk_pack16_gemm(mm->w->type);
}

size_t cpu_mm_pack_size(const cpu_mm *mm, bool mapped) {
  const char *e = getenv("WICK_NOCOPY");
  const bool nocopy = e && e[0] && strcmp(e, "0") != 0;
  const bool copy = pack_kernel(mm) || (mapped && mm->fast && !nocopy);
  return copy ? (mm->row_bytes * (size_t)mm->w->ne[1] + 63) & ~(size_t)63 : 0;
}

void cpu_mm_pack(cpu_mm *mm, wk_pool *pool, bool mapped, uint64_t *acct, uint8_t *dst) {
  const wk_gemm_fn pg = pack_kernel(mm);  // NULL: the rows copied as they are
  const long rows = mm->w->ne[1], groups = rows / WK_PACK16_ROWS;
  const size_t bytes = mm->row_bytes * (size_t)rows, gb = WK_PACK16_ROWS * mm->row_bytes;
  if (!mapped) *acct += bytes;  // mapped: it takes the place of the file's pages
  // in slices of ~16 MB, each slice's file pages dropped once written (the
  // copy never holds much more than one slice twice)
  const long per = (long)((16u << 20) / gb) + 1;
  for (long g0 = 0; g0 < groups; g0 += per) {
    pack_job j = {mm, dst, g0, g0 + per < groups ? g0 + per : groups, pg != NULL};
    wk_pool_run(pool, pack_run, &j);
    if (mapped)
      drop_pages((const uint8_t *)mm->w->data + (size_t)g0 * gb, (size_t)(j.g1 - g0) * gb);
  }
  // rows past the last whole group stay as they are
  memcpy(dst + (size_t)groups * gb, (const uint8_t *)mm->w->data + (size_t)groups * gb,
         bytes - (size_t)groups * gb);
  mm->data = dst;
  if (!pg) return;
  mm->packed = dst;
  mm->packed_rows = groups * WK_PACK16_ROWS;
  mm->pg = pg;
}

void cpu_mm_unpack(cpu_mm *mm) {
  mm->packed = NULL;
  mm->data = mm->w ? mm->w->data : NULL;
  mm->packed_rows = 0;
}

// How a batch of n_tokens is multiplied with mm.
enum { PATH_EXACT, PATH_KERNEL, PATH_F32, PATH_G16 };

static int mm_path(const cpu_mm *mm, int n_tokens) {
  if (!mm->fast) return PATH_EXACT;
  if (n_tokens >= mm->g16_min) return PATH_G16;
  return n_tokens >= mm->f32_min ? PATH_F32 : PATH_KERNEL;
}

unsigned cpu_mm_need(const cpu_mm *mm) {
  return mm->fast && mm->kr.act != WK_ACT_F32 ? 1u << mm->kr.act : 0u;
}

unsigned cpu_mm_need_n(const cpu_mm *mm, int n_tokens) {
  switch (mm_path(mm, n_tokens)) {
    case PATH_G16: return 1u << WK_ACT_A16;
    case PATH_KERNEL: return cpu_mm_need(mm);
    default: return 0u;
  }
}

// Room for max_tokens rows of mm's input in format f, converted by quant.
static void act_reserve_fmt(cpu_act *a, const cpu_mm *mm, int f, wk_quantize_act_fn quant,
                            int max_tokens) {
  size_t bytes;
  if (!wk_mul_ok(cpu_act_row_size(f, mm->w->ne[0]), (size_t)max_tokens, &bytes)) bytes = SIZE_MAX;
  if (bytes > a->cap[f]) a->cap[f] = bytes;
  a->quant[f] = quant;
}

void cpu_act_reserve(cpu_act *a, const cpu_mm *mm, int max_tokens) {
  if (!cpu_mm_need(mm)) return;
  act_reserve_fmt(a, mm, mm->kr.act, mm->kr.quantize_act, max_tokens);
  if (max_tokens >= mm->g16_min)
    act_reserve_fmt(a, mm, WK_ACT_A16, mm->g16.quantize_act, max_tokens);
}

int cpu_act_alloc(cpu_act *a, uint64_t *acct) {
  for (int f = 0; f < CPU_ACT_FMTS; f++) {
    if (!a->cap[f] || a->buf[f]) continue;
    if (a->cap[f] == SIZE_MAX || !(a->buf[f] = wk_malloc(a->cap[f]))) return WICK_ERR_NOMEM;
    *acct += a->cap[f];
  }
  return WICK_OK;
}

void cpu_act_free(cpu_act *a) {
  for (int f = 0; f < CPU_ACT_FMTS; f++) wk_free(a->buf[f]);
  memset(a, 0, sizeof *a);
}

void cpu_act_set(cpu_act *a, const float *x, int n_tokens, int64_t k) {
  a->x = x;
  a->n_tokens = n_tokens;
  a->k = k;
  a->ready = 0;
}

void cpu_act_convert_rows(cpu_act *a, unsigned need, int t0, int t1) {
  for (int f = 0; f < CPU_ACT_FMTS; f++) {
    if (!(need >> f & 1u)) continue;
    const size_t row = cpu_act_row_size(f, a->k);
    WK_ASSERT(row > 0 && a->quant[f] && row * (size_t)a->n_tokens <= a->cap[f]);
    for (int t = t0; t < t1; t++)
      a->quant[f](a->x + (size_t)t * (size_t)a->k, a->buf[f] + (size_t)t * row, a->k);
  }
}

typedef struct conv_job {
  cpu_act *a;
  unsigned need;
} conv_job;

static void conv_run(void *ctx, int ith, int nth) {
  conv_job *j = ctx;
  long lo, hi;
  wk_split(j->a->n_tokens, ith, nth, 1, &lo, &hi);
  cpu_act_convert_rows(j->a, j->need, (int)lo, (int)hi);
}

void cpu_act_convert(wk_pool *pool, cpu_act *a, unsigned need) {
  need &= ~a->ready;
  if (!need) return;
  conv_job j = {a, need};
  if (a->n_tokens < 4) conv_run(&j, 0, 1);  // not worth waking the pool
  else wk_pool_run(pool, conv_run, &j);
  a->ready |= need;
}

// ---- the product: chunks of rows of up to 4 matrices, claimed by threads ----

enum { MM_MAX = 4, MM_ALIGN = 24 };  // chunks: multiples of 24 rows (whole 4-row f32 tiles,
                                     // 2-row 16-bit ones, 3- and 4-row 8-bit ones)

typedef struct mm_multi {
  const cpu_act *a;
  const cpu_mm *const *mm;
  float *const *y;
  int n;
  long home[MM_MAX];   // rows of each of matrix i's first nth chunks (0: none)
  long chunk[MM_MAX];  // rows of each later chunk of matrix i
  long first[MM_MAX];  // index of matrix i's first chunk
  int nth;
  long total;          // chunks of all matrices
  float *scratch;
  size_t per_thread;
  atomic_long next;    // next unclaimed chunk
} mm_multi;

// Rows [r0, r1) of a packed matrix through the integer GEMM: G16_ROWS at a
// time unpacked to the file's layout at the end of the thread's scratch.
static void g16_packed(const cpu_mm *mm, const cpu_act *a, long r0, long r1, float *y,
                       float *buf) {
  const long rows = mm->w->ne[1];
  uint8_t *rowbuf = (uint8_t *)buf + unpack_at(a->k);
  for (long s = r0; s < r1; s += G16_ROWS) {
    const long e = s + G16_ROWS < r1 ? s + G16_ROWS : r1;
    const unsigned char *src = file_rows(mm->w->type, a->k, mm->data, mm->row_bytes,
                                         mm->packed_rows, s, e - s, rowbuf);
    wk_gemm16_run(&mm->g16, src, mm->row_bytes, a->k, (int)(e - s), a->buf[WK_ACT_A16],
                  cpu_act_row_size(WK_ACT_A16, a->k), a->n_tokens, y + s, (size_t)rows, buf);
  }
}

static void multi_chunk(const mm_multi *j, long c, float *buf) {
  int i = 0;
  while (i + 1 < j->n && c >= j->first[i + 1]) i++;
  const cpu_mm *mm = j->mm[i];
  const long rows = mm->w->ne[1];
  const long ci = c - j->first[i], h = j->home[i], nh = h > 0 ? j->nth : 0;
  const long r0 = ci < nh ? ci * h : nh * h + (ci - nh) * j->chunk[i];
  const long len = ci < nh ? h : j->chunk[i];
  const long r1 = r0 + len < rows ? r0 + len : rows;
  const cpu_act *a = j->a;
  const int path = mm_path(mm, a->n_tokens);
  if (path == PATH_EXACT || path == PATH_F32) {
    exact_rows(mm->w, mm->data, mm->packed_rows, mm->avx2, a->x, a->n_tokens, j->y[i], buf, r0,
               r1);
    return;
  }
  if (path == PATH_G16) {
    if (mm->packed) {
      g16_packed(mm, a, r0, r1, j->y[i], buf);
      return;
    }
    wk_gemm16_run(&mm->g16, mm->data + (size_t)r0 * mm->row_bytes, mm->row_bytes, a->k,
                  (int)(r1 - r0), a->buf[WK_ACT_A16], cpu_act_row_size(WK_ACT_A16, a->k),
                  a->n_tokens, j->y[i] + r0, (size_t)rows, buf);
    return;
  }
  const void *xq = a->x;
  size_t xq_row = (size_t)a->k * sizeof(float);
  if (mm->kr.act != WK_ACT_F32) {
    xq = a->buf[mm->kr.act];
    xq_row = cpu_act_row_size(mm->kr.act, a->k);
  }
  long rk = r0;  // rows from here on: the file's layout
  if (r0 < mm->packed_rows) {
    rk = r1 < mm->packed_rows ? r1 : mm->packed_rows;
    mm->pg(mm->data + (size_t)r0 * mm->row_bytes, mm->row_bytes, a->k, (int)(rk - r0), xq,
           xq_row, a->n_tokens, j->y[i] + r0, (size_t)rows);
  }
  if (rk < r1)
    mm->kr.gemm(mm->data + (size_t)rk * mm->row_bytes, mm->row_bytes, a->k, (int)(r1 - rk), xq,
                xq_row, a->n_tokens, j->y[i] + rk, (size_t)rows);
}

static void multi_run(void *ctx, int ith, int nth) {
  (void)nth;
  mm_multi *j = ctx;
  float *buf = j->scratch + (size_t)ith * j->per_thread;
  for (;;) {
    long c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    if (c >= j->total) return;
    multi_chunk(j, c, buf);
  }
}

// cpu_mm_home for chunks in multiples of align rows.
static long home_rows(long rows, int nth, int n_tokens, long align) {
  return nth > 1 && n_tokens <= 8 ? rows / nth / align * align : 0;
}

long cpu_mm_home(long rows, int nth, int n_tokens) {
  return home_rows(rows, nth, n_tokens, MM_ALIGN);
}

void cpu_mm_run(wk_pool *pool, float *scratch, size_t scratch_per_thread, cpu_act *a,
                const cpu_mm *const *mm, float *const *y, int n) {
  WK_ASSERT(n >= 1 && n <= MM_MAX);
  unsigned need = 0;
  for (int i = 0; i < n; i++) {
    WK_ASSERT(mm[i]->w->ne[0] == a->k);
    need |= cpu_mm_need_n(mm[i], a->n_tokens);
    WK_ASSERT(scratch_per_thread >= cpu_matmul_scratch(a->k));
  }
  cpu_act_convert(pool, a, need);
  const int nth = wk_pool_size(pool);
  mm_multi j = {.a = a, .mm = mm, .y = y, .n = n, .scratch = scratch,
                .per_thread = scratch_per_thread, .nth = nth};
  for (int i = 0; i < n; i++) {
    const long rows = mm[i]->w->ne[1];
    // About 4 chunks a thread (fewer for small matrices), whole tiles each.
    // Decode sizes (reading weights, not computing) first give each thread
    // one run of rows (whole tiles) and leave only the remainder to the
    // claimed chunks: each new run costs a stream's start-up, and the
    // 2-thread decode of SmolLM2 went from 263 to 293-302 tok/s, Gemma 3's
    // from 122-126 to 129-131 (session 8); prefill measured the same.
    // The integer GEMM decodes strips of G16_ROWS rows: its chunks are
    // multiples of that.
    const int path = mm_path(mm[i], a->n_tokens);
    const long al = path == PATH_G16                      ? G16_ROWS
                    : mm[i]->packed && path == PATH_KERNEL ? WK_PACK16_ROWS
                    : mm[i]->packed                       ? 2 * MM_ALIGN  // a multiple of 16
                                                          : MM_ALIGN;
    long c = (rows + 4L * nth - 1) / (4L * nth);
    c = (c + al - 1) / al * al;
    j.home[i] = home_rows(rows, nth, a->n_tokens, al);
    j.chunk[i] = c;
    j.first[i] = j.total;
    const long rest = rows - (j.home[i] > 0 ? nth * j.home[i] : 0);
    j.total += (j.home[i] > 0 ? nth : 0) + (rest + c - 1) / c;
  }
  atomic_init(&j.next, 0);
  if (nth == 1 || j.total == 1) multi_run(&j, 0, 1);
  else wk_pool_run(pool, multi_run, &j);
}
