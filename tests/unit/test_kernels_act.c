// 16-bit-activation kernels (src/backend/cpu/kernels/act16.h) against the
// reference quant routines (src/quant), for every weight type they cover and
// every level this CPU runs (scalar, AVX2, AVX-512 where it has kernels):
//  - the converter writes exactly wk_act16_row_size bytes (poisoned tail),
//    the same bytes at every level, each activation within half a step of
//    its input (|x - d v| <= d / 2 + 2^-22 |x|, |v| <= 16383), the block
//    sums and the byte split (lo, hi, |lo|, |hi|, sign) right;
//  - vec_dot vs wk_dot_row (double accumulation over the dequantized
//    weights) on the activations the converter produced: float rounding only,
//    |diff| <= 1e-5 * sum|w x|;
//  - vec_dot vs wk_dot_row on the original f32 activations: within the
//    rounding bound sum_i |w_i| * d(i) / 2 (+ 1e-5 * sum|w x|);
//  - gemm vs a vec_dot loop: bit-identical, on 9 rows x 7 tokens (edge tiles),
//    5 x 37 (more than one token chunk) and every row count in 1..17 with
//    every token count in 1..11 (each tile shape, decode streams and tails),
//    padding of y untouched;
//  - extreme blocks (largest code times largest scale against activations
//    at full range, or with every lo byte 0) where int32 and pmaddubsw's
//    int16 sums come closest to overflowing, through vec_dot, the
//    multi-token gemm and the one-token decode tiles (24 rows);
//  - the AVX-512 level's gemm bit-identical to the AVX2 level's (every tile
//    shape of rows 1..17 x tokens 1..11), so results do not depend on the CPU;
//  - the AVX2 f32 decoder (wk_act16_dequant_row) equal to wk_dequantize_row
//    value for value;
//  - the f32 FMA tiles (wk_fma_rows) against double dot products, and every
//    tile shape bit-identical to the single-output one.
// Activations are Gaussian with a spread that changes every 32 values and an
// outlier 40x larger in some blocks, the pattern that made 8-bit
// activations too coarse.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/fma_rows.h"
#include "base/fp.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"
#include "test_util.h"


static const int k_types[] = {WK_Q4_0, WK_Q4_1, WK_Q5_0, WK_Q5_1, WK_Q8_0,   WK_IQ4_NL,
                              WK_Q2_K, WK_Q3_K, WK_Q4_K, WK_Q5_K, WK_Q6_K,   WK_IQ4_XS};
static const int64_t k_sizes[] = {32, 256, 576, 640, 1536, 2048, 4096};

// The test's own reading of the formats: the row's blocks, then per block
// its lo bytes in value order and its hi bytes (256-value blocks: then, after
// all of those, per block |lo|, |hi| and v's sign at e); v = lo + 128 hi, lo
// and hi in [-127, 127] and not of opposite signs; x ~= d * v; hs[i] = d / 2.
static void act_values(const int8_t *q, const int8_t *e, int blk, int *v) {
  for (int i = 0; i < blk; i++) {
    const int lo = q[i], hi = q[blk + i];
    CHECK(lo >= -127 && lo <= 127 && hi >= -127 && hi <= 127 && lo * hi >= 0);
    v[i] = lo + 128 * hi;
    if (e) {
      CHECK(e[i] == abs(lo) && e[blk + i] == abs(hi));
      CHECK(e[2 * blk + i] == (v[i] > 0) - (v[i] < 0));
    }
  }
}

static void act_dequant(int act, const void *xq, float *x, float *hs, int64_t n) {
  const int blk = act == WK_ACT_A16 ? 32 : 256;
  for (int64_t b = 0; b < n / blk; b++) {
    float d;
    int v[256];
    if (act == WK_ACT_A16) {
      const wk_act16 *a = (const wk_act16 *)xq + b;
      d = a->d;
      act_values((const int8_t *)((const wk_act16 *)xq + n / 32) + 64 * b, NULL, 32, v);
      int s = 0, same = 1;
      for (int i = 0; i < 32; i++) s += v[i], same &= a->v[i] == v[i];
      CHECK(same);  // the int16 copy
      CHECK(a->sum == s);
      CHECK(a->s == d * (float)s);
    } else {
      const wk_act16k *a = (const wk_act16k *)xq + b;
      d = a->d;
      const int8_t *lohi = (const int8_t *)((const wk_act16k *)xq + n / 256) + 512 * b;
      act_values(lohi, lohi + 512 * (n / 256 - b) + 768 * b, 256, v);
      // the int16 copy: per 32 values, values 0 1 4 5 8 9 .. 28 29, then 2 3 6 7 .. 30 31
      int same = 1, pos = 0;
      for (int c = 0; c < 8; c++)
        for (int odd = 0; odd < 2; odd++)
          for (int i = 0; i < 32; i++)
            if (((i >> 1) & 1) == odd) same &= a->v[pos++] == v[32 * c + i];
      CHECK(same);
      for (int j = 0; j < 16; j++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += v[16 * j + i];
        CHECK(a->s[j] == d * (float)s);
      }
    }
    for (int i = 0; i < blk; i++) {
      CHECK(abs(v[i]) <= WK_ACT16_QMAX);
      x[b * blk + i] = d * (float)v[i];
      hs[b * blk + i] = d / 2;
    }
  }
}

enum { ROWS = 9, TOKENS = 7, YPAD = 3, XPAD = 64 };

typedef struct stats {
  double worst_w, worst_a;  // max |diff| / tolerance
} stats;

static void check_size(const wk_kernel *kr, const wk_kernel *ks, int64_t n, uint64_t *seed,
                       stats *st) {
  const int type = kr->type;
  const size_t rb = wk_row_size(type, n), xb = wk_act16_row_size(kr->act, n);
  uint8_t *w = malloc(rb * ROWS), *xq = malloc((xb + XPAD) * TOKENS), *xs = malloc(xb);
  float *x = malloc(sizeof(float) * n * TOKENS), *xd = malloc(sizeof(float) * n);
  float *hs = malloc(sizeof(float) * n), *wd = malloc(sizeof(float) * n);
  float dots[TOKENS][ROWS];
  for (int r = 0; r < ROWS; r++) {
    fill_random(seed, xd, n, 0);
    CHECK(wk_quantize_row(type, xd, w + r * rb, n) == WICK_OK);
  }
  memset(xq, 0xa5, (xb + XPAD) * TOKENS);
  for (int t = 0; t < TOKENS; t++) {
    uint8_t *xt = xq + t * (xb + XPAD);
    fill_random(seed, x + t * n, n, 1);
    kr->quantize_act(x + t * n, xt, n);
    int intact = 1;
    for (int i = 0; i < XPAD; i++) intact &= xt[xb + i] == 0xa5;
    CHECK(intact);
    ks->quantize_act(x + t * n, xs, n);
    CHECK(memcmp(xs, xt, xb) == 0);
  }
  for (int t = 0; t < TOKENS; t++) {
    const uint8_t *xt = xq + t * (xb + XPAD);
    const float *xo = x + t * n;
    act_dequant(kr->act, xt, xd, hs, n);
    // half a step, plus the f32 rounding of x * (1 / d) (2^-23 relative)
    for (int64_t i = 0; i < n; i++)
      CHECK(fabs((double)xd[i] - xo[i]) <= hs[i] * 1.0001 + fabs(xo[i]) * 0x1p-22 + 1e-30);
    for (int r = 0; r < ROWS; r++) {
      const uint8_t *wr = w + r * rb;
      CHECK(wk_dequantize_row(type, wr, wd, n) == WICK_OK);
      double mag = 0, bound = 0;
      for (int64_t i = 0; i < n; i++) {
        mag += fabs((double)wd[i] * xo[i]);
        bound += fabs((double)wd[i]) * hs[i];
      }
      const float v = kr->vec_dot(n, wr, xt);
      dots[t][r] = v;
      const double tol_w = 1e-5 * mag + 1e-30, tol_a = bound * 1.0001 + 1e-5 * mag + 1e-30;
      const double ew = fabs((double)v - wk_dot_row(type, wr, xd, n));
      const double ea = fabs((double)v - wk_dot_row(type, wr, xo, n));
      if (!(ew <= tol_w) || !(ea <= tol_a))
        fprintf(stderr, "%s %s n=%lld r=%d t=%d: dot %.9g, weight err %.3g (tol %.3g), act err "
                "%.3g (tol %.3g)\n", wk_type_get(type)->name, wk_kernel_level_name(kr->level),
                (long long)n, r, t, v, ew, tol_w, ea, tol_a);
      CHECK(ew <= tol_w);
      CHECK(ea <= tol_a);
      st->worst_w = fmax(st->worst_w, ew / tol_w);
      st->worst_a = fmax(st->worst_a, ea / tol_a);
    }
  }
  const size_t ys = ROWS + YPAD;
  float *y = malloc(sizeof(float) * ys * TOKENS);
  for (size_t i = 0; i < ys * TOKENS; i++) y[i] = NAN;
  kr->gemm(w, rb, n, ROWS, xq, xb + XPAD, TOKENS, y, ys);
  int same = 1, pad_ok = 1;
  for (int t = 0; t < TOKENS; t++) {
    for (int r = 0; r < ROWS; r++) same &= memcmp(&y[t * ys + r], &dots[t][r], 4) == 0;
    for (int r = ROWS; r < (int)ys; r++) pad_ok &= isnan(y[t * ys + r]);
  }
  if (!same)
    fprintf(stderr, "%s %s n=%lld: gemm differs from vec_dot\n", wk_type_get(type)->name,
            wk_kernel_level_name(kr->level), (long long)n);
  CHECK(same);
  CHECK(pad_ok);
  free(y), free(w), free(xq), free(xs), free(x), free(xd), free(hs), free(wd);
}

// The AVX2 decoder against the reference, value for value.
static void check_dequant(int type, uint64_t *seed) {
  const int64_t n = 2048;
  const size_t rb = wk_row_size(type, n);
  uint8_t *w = malloc(rb);
  float *x = malloc(sizeof(float) * n), *a = malloc(sizeof(float) * n);
  float *b = malloc(sizeof(float) * n);
  fill_random(seed, x, n, 1);
  CHECK(wk_quantize_row(type, x, w, n) == WICK_OK);
  CHECK(wk_dequantize_row(type, w, a, n) == WICK_OK);
  if (wk_kernel_best_level() >= WK_LEVEL_AVX2) {
    const int rc = wk_act16_dequant_row(type, w, b, n);
    CHECK(rc == WICK_OK);
    int same = rc == WICK_OK;  // equal values (a zero's sign may differ: +0 * -s vs -0)
    for (int64_t i = 0; same && i < n; i++) same = a[i] == b[i];
    if (!same)
      fprintf(stderr, "%s: AVX2 decoder differs from the reference\n", wk_type_get(type)->name);
    CHECK(same);
    CHECK(wk_act16_dequant_row(type, w, b, n - 1) == WICK_ERR_UNSUPPORTED);
  }
  free(w), free(x), free(a), free(b);
}

// The f32 tiles (fma_rows.h) against double dot products, and every tile
// shape against the single-output one, bit for bit (rows 9 and tokens 1, 2,
// 7, 8 cover the 4 x 3, 4 x 2, 4 x 1 and 1 x N tiles; k = 100 has a tail).
static void check_fma_rows(uint64_t *seed) {
  if (wk_kernel_best_level() < WK_LEVEL_AVX2) return;
  enum { R = 9, T = 8, K = 100 };
  static float w[R * K], x[T * K], y[T * R], one;
  fill_random(seed, w, R * K, 0);
  fill_random(seed, x, T * K, 1);
  const int counts[] = {1, 2, 7, 8};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    const int nt = counts[c];
    wk_fma_rows(w, K, K, R, x, K, nt, y, R);
    for (int t = 0; t < nt; t++)
      for (int r = 0; r < R; r++) {
        double d = 0, mag = 0;
        for (int i = 0; i < K; i++) {
          d += (double)w[r * K + i] * x[t * K + i];
          mag += fabs((double)w[r * K + i] * x[t * K + i]);
        }
        CHECK(fabs(y[t * R + r] - d) <= 1e-6 * mag);
        wk_fma_rows(w + r * K, K, K, 1, x + t * K, K, 1, &one, 1);
        CHECK(memcmp(&one, &y[t * R + r], 4) == 0);
      }
  }
}

// rows weight rows of n random values quantized to type at w (rb bytes a
// row); x: n floats of scratch.
static void random_rows(uint64_t *seed, int type, int64_t n, int rows, float *x, uint8_t *w,
                        size_t rb) {
  for (int r = 0; r < rows; r++) {
    fill_random(seed, x, n, 0);
    CHECK(wk_quantize_row(type, x, w + r * rb, n) == WICK_OK);
  }
}

// gemm over more tokens than one chunk (32) on a short matrix.
static void check_many_tokens(const wk_kernel *kr, uint64_t *seed) {
  const int rows = 5, tokens = 37;
  const int64_t n = 512;
  const size_t rb = wk_row_size(kr->type, n), xb = wk_act16_row_size(kr->act, n);
  uint8_t *w = malloc(rb * rows), *xq = malloc(xb * tokens);
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * rows * tokens);
  random_rows(seed, kr->type, n, rows, x, w, rb);
  for (int t = 0; t < tokens; t++) {
    fill_random(seed, x, n, 1);
    kr->quantize_act(x, xq + t * xb, n);
  }
  kr->gemm(w, rb, n, rows, xq, xb, tokens, y, rows);
  int same = 1;
  for (int t = 0; t < tokens; t++)
    for (int r = 0; r < rows; r++) {
      float v = kr->vec_dot(n, w + r * rb, xq + t * xb);
      same &= memcmp(&v, &y[t * rows + r], 4) == 0;
    }
  CHECK(same);
  free(w), free(xq), free(x), free(y);
}

// gemm on rows 1..17 x tokens 1..11 against vec_dot, bit for bit.
static void check_shapes(const wk_kernel *kr, uint64_t *seed) {
  enum { MAXR = 17, MAXT = 11 };
  const int64_t n = 512;
  const size_t rb = wk_row_size(kr->type, n), xb = wk_act16_row_size(kr->act, n);
  uint8_t *w = malloc(rb * MAXR), *xq = malloc(xb * MAXT);
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * (MAXR + 1) * MAXT);
  float dots[MAXT][MAXR];
  random_rows(seed, kr->type, n, MAXR, x, w, rb);
  for (int t = 0; t < MAXT; t++) {
    fill_random(seed, x, n, 1);
    kr->quantize_act(x, xq + t * xb, n);
    for (int r = 0; r < MAXR; r++) dots[t][r] = kr->vec_dot(n, w + r * rb, xq + t * xb);
  }
  int same = 1, pad_ok = 1;
  for (int rows = 1; rows <= MAXR; rows++)
    for (int tokens = 1; tokens <= MAXT; tokens++) {
      const size_t ys = rows + 1;
      for (size_t i = 0; i < ys * tokens; i++) y[i] = NAN;
      kr->gemm(w, rb, n, rows, xq, xb, tokens, y, ys);
      for (int t = 0; t < tokens; t++) {
        for (int r = 0; r < rows; r++) same &= memcmp(&y[t * ys + r], &dots[t][r], 4) == 0;
        pad_ok &= isnan(y[t * ys + rows]);
      }
    }
  if (!same)
    fprintf(stderr, "%s %s: gemm differs from vec_dot on some rows x tokens\n",
            wk_type_get(kr->type)->name, wk_kernel_level_name(kr->level));
  CHECK(same);
  CHECK(pad_ok);
  free(w), free(xq), free(x), free(y);
}

// A level above AVX2 against the AVX2 kernels: the same integer sums and the
// same f32 operations, so every output bit-identical (rows 1..17 x tokens
// 1..11 at two row lengths: every decode and multi-token tile shape; the
// super-blocks also at 101 blocks a row, past the 64 for which the AVX-512
// Q2_K / Q3_K decode tiles share a per-product copy of the activations, and
// at one block, which those tiles' f32 steps, a super-block late, take only
// after the loop).
// `bytes` that end where an unreadable page begins (a read past them faults),
// from an mmap of *len bytes at *base (munmap them); NULL on failure.
static uint8_t *guarded(size_t bytes, void **base, size_t *len) {
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
  *len = body + pg;
  uint8_t *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  if (mprotect(m + body, pg, PROT_NONE) != 0) {
    munmap(m, *len);
    return NULL;
  }
  *base = m;
  return m + body - bytes;
}

// Every level's products equal the AVX2 level's bit for bit, for 1..17 rows
// and 1..11 tokens. Row lengths include odd block counts and single blocks
// (the tiles' tail steps), and each call's rows end at an unreadable page:
// a tile that reads past a matrix's last row faults here.
static void check_same_as_avx2(const wk_kernel *kr, uint64_t *seed) {
  wk_kernel k2;
  CHECK(wk_act16_pick(kr->type, WK_LEVEL_AVX2, &k2) == WICK_OK);
  enum { MAXR = 17, MAXT = 11 };
  const int sb = kr->act == WK_ACT_A16K;
  const int64_t lens[] = {512, 4096, sb ? 101 * 256 : 96, sb ? 256 : 32, sb ? 3 * 256 : 160,
                          sb ? 0 : 576};
  for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++) {
    const int64_t n = lens[li];
    if (n == 0) continue;
    const size_t rb = wk_row_size(kr->type, n), xb = wk_act16_row_size(kr->act, n);
    void *wbase = NULL;
    size_t wlen = 0;
    uint8_t *w = guarded(rb * MAXR, &wbase, &wlen);
    CHECK(w != NULL);
    if (!w) return;
    uint8_t *xq = malloc(xb * MAXT), *xq2 = malloc(xb * MAXT);
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * MAXR * MAXT);
    float *y2 = malloc(sizeof(float) * MAXR * MAXT);
    random_rows(seed, kr->type, n, MAXR, x, w, rb);
    for (int t = 0; t < MAXT; t++) {
      fill_random(seed, x, n, 1);
      kr->quantize_act(x, xq + t * xb, n);
      k2.quantize_act(x, xq2 + t * xb, n);
    }
    CHECK(memcmp(xq, xq2, xb * MAXT) == 0);
    int same = 1;
    for (int rows = 1; rows <= MAXR; rows++)
      for (int tokens = 1; tokens <= MAXT; tokens++) {
        const uint8_t *wr = w + (size_t)(MAXR - rows) * rb;  // the last `rows` rows
        kr->gemm(wr, rb, n, rows, xq, xb, tokens, y, rows);
        k2.gemm(wr, rb, n, rows, xq, xb, tokens, y2, rows);
        same &= memcmp(y, y2, sizeof(float) * rows * tokens) == 0;
      }
    if (!same)
      fprintf(stderr, "%s %s: differs from the AVX2 kernels (k = %lld)\n",
              wk_type_get(kr->type)->name, wk_kernel_level_name(kr->level), (long long)n);
    CHECK(same);
    munmap(wbase, wlen);
    free(xq), free(xq2), free(x), free(y), free(y2);
  }
}

// Blocks whose every weight is the format's largest |code * scale|, against
// activations of one sign at full range: the kernels' int32 sums peak here.
// Variant 1: Q6_K's largest unsigned code (63, value 31) times scale -128,
// where the kernels' sums of bare codes peak; Q3_K's code 0 (value -4) times
// scale -32, the largest value; Q2_K's largest code x scale without a min.
static int extreme_block(int type, int variant, uint8_t *b) {
  const uint16_t one = wk_f32_to_f16(1.0f);
  if (variant == 1) {
    switch (type) {
      case WK_Q6_K:
        memset(b, 0xff, 192);  // ql, qh: code 63
        memset(b + 192, 0x80, 16);
        memcpy(b + 208, &one, 2);
        return 1;
      case WK_Q3_K:  // hmask, qs: code 0; scales 0 (-32); d = 1
        memset(b, 0, 110);
        memcpy(b + 108, &one, 2);
        return 1;
      case WK_Q2_K:  // scales 15, mins 0, codes 3, d = dmin = 1
        memset(b, 0x0f, 16);
        memset(b + 16, 0xff, 64);
        memcpy(b + 80, &one, 2);
        memcpy(b + 82, &one, 2);
        return 1;
      default:
        return 0;
    }
  }
  switch (type) {
    case WK_Q8_0:  // d, 32 x -128
      memset(b, 0x80, 34);
      memcpy(b, &one, 2);
      return 1;
    case WK_Q6_K:  // codes 0 (value -32), scales -128, d = 1
      memset(b, 0, 210);
      memset(b + 192, 0x80, 16);
      memcpy(b + 208, &one, 2);
      return 1;
    case WK_Q3_K:  // hmask, qs: code 7, where the kernels' sums of codes peak; scales 0 (-32)
      memset(b, 0xff, 96);
      memset(b + 96, 0, 12);
      memcpy(b + 108, &one, 2);
      return 1;
    case WK_Q2_K:  // scales and mins 15, codes 3, d = dmin = 1
      memset(b, 0xff, 80);
      memcpy(b + 80, &one, 2);
      memcpy(b + 82, &one, 2);
      return 1;
    case WK_IQ4_XS:  // nibble 0 (value -127), scales 0 (-32), d = 1
      memset(b, 0, 136);
      memcpy(b, &one, 2);
      return 1;
    case WK_Q5_K:  // codes 31, scales and mins 63, d = dmin = 1
    case WK_Q4_K:  // codes 15, scales and mins 63, d = dmin = 1
      memset(b, 0xff, type == WK_Q5_K ? 176 : 144);
      memcpy(b, &one, 2);
      memcpy(b + 2, &one, 2);
      return 1;
    case WK_Q4_0:  // codes 15 (value 7), d = 1
    case WK_Q5_0:  // codes 31 (value 15), d = 1
      memset(b, 0xff, type == WK_Q4_0 ? 18 : 22);
      memcpy(b, &one, 2);
      return 1;
    case WK_Q4_1:  // codes 15, d = m = 1
    case WK_Q5_1:  // codes 31, d = m = 1
      memset(b, 0xff, type == WK_Q4_1 ? 20 : 24);
      memcpy(b, &one, 2);
      memcpy(b + 2, &one, 2);
      return 1;
    case WK_IQ4_NL:  // nibble 0 (value -127), d = 1
      memset(b, 0, 18);
      memcpy(b, &one, 2);
      return 1;
    default:
      return 0;
  }
}

// Activations of one sign against every weight's (so that all products add
// up), each of magnitude 1 (v = 16383: lo and hi both 127, the most a
// pmaddubsw pair takes), or (lo0) 16256 / 16383 but the first: with the
// block's largest at 16383 the rest become 16256 = 127 x 128, lo 0 and hi
// 127 (the sign must then come from hi).
static void extreme_acts(const float *wd, int64_t n, int blk, int sign, int lo0, float *x) {
  for (int64_t i = 0; i < n; i++) {
    const float m = lo0 && i % blk ? 16256.0f / 16383.0f : 1.0f;
    x[i] = wd[i] > 0 ? sign * m : -sign * m;
  }
}

static void check_extreme(const wk_kernel *kr, int variant) {
  enum { ROWS = 24 };  // rows of the one-token gemm check (the decode tiles)
  static uint8_t w[ROWS * 256 * 8];
  const int64_t n = kr->act == WK_ACT_A16 ? 256 : 2048;
  const size_t bb = (size_t)wk_type_get(kr->type)->bytes, nb = n / wk_type_get(kr->type)->block;
  const size_t rb = bb * nb;
  for (size_t b = 0; b < nb; b++)
    if (!extreme_block(kr->type, variant, w + b * bb)) return;
  for (int r = 1; r < ROWS; r++) memcpy(w + r * rb, w, rb);
  enum { T = 4 };  // tokens of the gemm check (the multi-token tiles)
  float x[2048], wd[2048], y[ROWS * T];
  static unsigned char xq[T * 16384];
  const size_t xb = wk_act16_row_size(kr->act, n);
  CHECK(wk_dequantize_row(kr->type, w, wd, n) == WICK_OK);
  CHECK(xb <= 16384);
  for (int pattern = 0; pattern < 4; pattern++) {
    extreme_acts(wd, n, kr->act == WK_ACT_A16 ? 32 : 256, pattern & 1 ? 1 : -1, pattern >> 1, x);
    for (int t = 0; t < T; t++) kr->quantize_act(x, xq + t * xb, n);
    {  // value 1's lo and hi bytes (the row's blocks, then block 0's lo and hi bytes)
      const int blk = kr->act == WK_ACT_A16 ? 32 : 256;
      const size_t head = kr->act == WK_ACT_A16 ? (size_t)(n / 32) * sizeof(wk_act16)
                                                : (size_t)(n / 256) * sizeof(wk_act16k);
      CHECK(abs((int)(int8_t)xq[head + 1]) == (pattern >> 1 ? 0 : 127));
      CHECK(abs((int)(int8_t)xq[head + blk + 1]) == 127);
    }
    const double ref = wk_dot_row(kr->type, w, x, n);
    const float got = kr->vec_dot(n, w, xq);
    if (!(fabs(got - ref) <= 1e-5 * fabs(ref)))
      fprintf(stderr, "%s %s extreme %d: %.9g vs %.9g\n", wk_type_get(kr->type)->name,
              wk_kernel_level_name(kr->level), pattern, got, ref);
    CHECK(fabs(got - ref) <= 1e-5 * fabs(ref));
    kr->gemm(w, 0, n, 1, xq, xb, T, y, 1);
    for (int t = 0; t < T; t++) CHECK(memcmp(&y[t], &got, 4) == 0);
    kr->gemm(w, rb, n, ROWS, xq, xb, 1, y, ROWS);
    int same = 1;
    for (int r = 0; r < ROWS; r++) same &= memcmp(&y[r], &got, 4) == 0;
    if (!same)
      fprintf(stderr, "%s %s extreme %d: decode tiles differ from vec_dot\n",
              wk_type_get(kr->type)->name, wk_kernel_level_name(kr->level), pattern);
    CHECK(same);
  }
}

int main(void) {
  uint64_t seed = 12345;
  const int best = wk_kernel_best_level();
  if (best < WK_LEVEL_AVX512)
    printf("skipped: the AVX-512 level's kernels (this CPU lacks AVX-512 F/BW/VL + VNNI)\n");
  if (best < WK_LEVEL_AVX512BW)
    printf("skipped: the AVX-512 BW level's kernels (this CPU lacks AVX-512 F/BW/VL)\n");
  if (best < WK_LEVEL_AVX2)
    printf("skipped: the AVX2 level's kernels (this CPU lacks AVX2 + FMA + F16C)\n");
  for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
    const int type = k_types[ti];
    wk_kernel ks;
    CHECK(wk_act16_pick(type, WK_LEVEL_SCALAR, &ks) == WICK_OK);
    check_dequant(type, &seed);
    for (int level = WK_LEVEL_SCALAR; level <= best; level++) {
      wk_kernel kr;
      CHECK(wk_act16_pick(type, level, &kr) == WICK_OK);
      if (level > WK_LEVEL_SCALAR && kr.level == WK_LEVEL_SCALAR) continue;  // same kernels
      if (level > WK_LEVEL_AVX2 && kr.level != level) continue;  // a lower level's kernels
      stats st = {0, 0};
      for (size_t si = 0; si < sizeof k_sizes / sizeof k_sizes[0]; si++)
        if (k_sizes[si] % kr.k_multiple == 0) check_size(&kr, &ks, k_sizes[si], &seed, &st);
      check_many_tokens(&kr, &seed);
      check_shapes(&kr, &seed);
      check_extreme(&kr, 0);
      check_extreme(&kr, 1);
      if (kr.level > WK_LEVEL_AVX2) check_same_as_avx2(&kr, &seed);
      printf("%-7s %-6s worst err / tol: weights %.3f, activations %.3f\n",
             wk_type_get(type)->name, wk_kernel_level_name(kr.level), st.worst_w, st.worst_a);
    }
  }
  check_fma_rows(&seed);
  wk_kernel k;
  CHECK(wk_act16_pick(WK_F32, WK_LEVEL_AUTO, &k) == WICK_ERR_UNSUPPORTED);
  CHECK(wk_act16_pick(WK_Q8_K, WK_LEVEL_AUTO, &k) == WICK_ERR_UNSUPPORTED);
  CHECK(wk_act16_row_size(WK_ACT_A16, 48) == 0);
  CHECK(wk_act16_row_size(WK_ACT_A16K, 512) == 2 * (sizeof(wk_act16k) + 2 * 256 + 3 * 256));
  CHECK(wk_act16_row_size(WK_ACT_A16, 64) == 2 * (sizeof(wk_act16) + 2 * 32));
  CHECK(wk_act16_row_size(WK_ACT_Q8, 512) == 0);
  if (g_failures) {
    fprintf(stderr, "%d checks failed\n", g_failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
