// The tensor type table: one row per storage type (block size, bytes, name).
// Ids equal GGML's type ids so GGUF files map directly; wick's own types
// (FP8 with block scales) use ids above 1000, which other readers reject.
#ifndef WICK_QUANT_TYPES_H
#define WICK_QUANT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum wk_type {
  WK_F32 = 0,
  WK_F16 = 1,
  WK_Q4_0 = 2,
  WK_Q4_1 = 3,
  WK_Q5_0 = 6,
  WK_Q5_1 = 7,
  WK_Q8_0 = 8,
  WK_Q8_1 = 9,
  WK_Q2_K = 10,
  WK_Q3_K = 11,
  WK_Q4_K = 12,
  WK_Q5_K = 13,
  WK_Q6_K = 14,
  WK_Q8_K = 15,
  WK_IQ2_XXS = 16,
  WK_IQ2_XS = 17,
  WK_IQ3_XXS = 18,
  WK_IQ1_S = 19,
  WK_IQ4_NL = 20,
  WK_IQ3_S = 21,
  WK_IQ2_S = 22,
  WK_IQ4_XS = 23,
  WK_I8 = 24,
  WK_I16 = 25,
  WK_I32 = 26,
  WK_I64 = 27,
  WK_F64 = 28,
  WK_IQ1_M = 29,
  WK_BF16 = 30,
  WK_TQ1_0 = 34,
  WK_TQ2_0 = 35,
  WK_MXFP4 = 39,
  // wick's own: 128 fp8 values + one f32 scale per block (x = scale * fp8).
  WK_FP8_E4M3 = 1001,
  WK_FP8_E5M2 = 1002,
} wk_type;

typedef struct wk_type_info {
  const char *name;  // "q4_k", as GGML spells it in lower case
  int block;         // elements per block
  int bytes;         // bytes per block
  bool computable;   // wick can dequantize it and take dot products with it
} wk_type_info;

// NULL for an id that is not in the table.
const wk_type_info *wk_type_get(int type);
// Parses a name ("q4_k", "Q4_K", "f16", "fp8_e4m3"); -1 when unknown.
int wk_type_from_name(const char *name);
// Bytes of a row of n elements; 0 when the type is unknown or n is not a
// multiple of the block size.
size_t wk_row_size(int type, int64_t n);

#endif
