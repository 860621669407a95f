// Dispatch of the reference quant routines: one table row per supported type.
#include "quant/quant.h"

#include <math.h>
#include <stddef.h>

#include "quant/block.h"
#include "quant/float.h"
#include "quant/iq4.h"
#include "quant/kquants.h"
#include "quant/kquants_quant.h"
#include "quant/legacy.h"
#include "wick.h"

typedef struct {
  int type;
  wk_dequant_fn dequantize;
  wk_quant_fn quantize;
  wk_dot_fn dot;
} quant_row;

#define ROW(id, name) {id, wk_##name##_dequantize, wk_##name##_quantize, wk_##name##_dot}

static const quant_row k_rows[] = {
    ROW(WK_F32, f32),       ROW(WK_F16, f16),       ROW(WK_BF16, bf16),
    ROW(WK_Q4_0, q4_0),     ROW(WK_Q4_1, q4_1),     ROW(WK_Q5_0, q5_0),
    ROW(WK_Q5_1, q5_1),     ROW(WK_Q8_0, q8_0),     ROW(WK_Q2_K, q2_k),
    ROW(WK_Q3_K, q3_k),     ROW(WK_Q4_K, q4_k),     ROW(WK_Q5_K, q5_k),
    ROW(WK_Q6_K, q6_k),     ROW(WK_Q8_K, q8_k),     ROW(WK_IQ4_NL, iq4_nl),
    ROW(WK_IQ4_XS, iq4_xs), ROW(WK_FP8_E4M3, fp8e4), ROW(WK_FP8_E5M2, fp8e5),
};

static const quant_row *find_row(int type) {
  for (size_t i = 0; i < sizeof k_rows / sizeof k_rows[0]; i++)
    if (k_rows[i].type == type) return &k_rows[i];
  return NULL;
}

bool wk_quant_supported(int type) { return find_row(type) != NULL; }

// Looks up the row and the block count of n values; a status on failure.
static int prepare(int type, const void *a, const void *b, int64_t n, const quant_row **row,
                   int64_t *nb) {
  const wk_type_info *t = wk_type_get(type);
  *row = find_row(type);
  if (!t || !*row) return WICK_ERR_UNSUPPORTED;
  if (n < 0 || n % t->block) return WICK_ERR_INVALID;
  if (n > 0 && (!a || !b)) return WICK_ERR_INVALID;
  *nb = n / t->block;
  return WICK_OK;
}

int wk_dequantize_row(int type, const void *src, float *dst, int64_t n) {
  const quant_row *row;
  int64_t nb;
  int st = prepare(type, src, dst, n, &row, &nb);
  if (st) return st;
  row->dequantize(src, dst, nb);
  return WICK_OK;
}

int wk_quantize_row(int type, const float *src, void *dst, int64_t n) {
  const quant_row *row;
  int64_t nb;
  int st = prepare(type, src, dst, n, &row, &nb);
  if (st) return st;
  bool plain = type == WK_F32 || type == WK_F16 || type == WK_BF16;
  if (!plain)
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(src[i])) return WICK_ERR_INVALID;
  row->quantize(src, dst, nb);
  return WICK_OK;
}

float wk_dot_row(int type, const void *row_data, const float *x, int64_t n) {
  const quant_row *row;
  int64_t nb;
  if (prepare(type, row_data, x, n, &row, &nb)) return NAN;
  return (float)row->dot(row_data, x, nb);
}
