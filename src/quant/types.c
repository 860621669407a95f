#include "quant/types.h"

#include <strings.h>

#define QK_K 256

typedef struct {
  int id;
  wk_type_info info;
} type_row;

static const type_row k_types[] = {
    {WK_F32, {"f32", 1, 4, true}},
    {WK_F16, {"f16", 1, 2, true}},
    {WK_BF16, {"bf16", 1, 2, true}},
    {WK_F64, {"f64", 1, 8, false}},
    {WK_I8, {"i8", 1, 1, false}},
    {WK_I16, {"i16", 1, 2, false}},
    {WK_I32, {"i32", 1, 4, false}},
    {WK_I64, {"i64", 1, 8, false}},
    {WK_Q4_0, {"q4_0", 32, 2 + 16, true}},
    {WK_Q4_1, {"q4_1", 32, 2 + 2 + 16, true}},
    {WK_Q5_0, {"q5_0", 32, 2 + 4 + 16, true}},
    {WK_Q5_1, {"q5_1", 32, 2 + 2 + 4 + 16, true}},
    {WK_Q8_0, {"q8_0", 32, 2 + 32, true}},
    {WK_Q8_1, {"q8_1", 32, 2 + 2 + 32, false}},
    {WK_Q2_K, {"q2_k", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2, true}},
    {WK_Q3_K, {"q3_k", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2, true}},
    {WK_Q4_K, {"q4_k", QK_K, 2 + 2 + 12 + QK_K / 2, true}},
    {WK_Q5_K, {"q5_k", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true}},
    {WK_Q6_K, {"q6_k", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true}},
    {WK_Q8_K, {"q8_k", QK_K, 4 + QK_K + QK_K / 16 * 2, true}},
    {WK_IQ2_XXS, {"iq2_xxs", QK_K, 2 + QK_K / 8 * 2, false}},
    {WK_IQ2_XS, {"iq2_xs", QK_K, 2 + QK_K / 8 * 2 + QK_K / 32, false}},
    {WK_IQ3_XXS, {"iq3_xxs", QK_K, 2 + QK_K / 4 + QK_K / 8, false}},
    {WK_IQ1_S, {"iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16, false}},
    {WK_IQ4_NL, {"iq4_nl", 32, 2 + 16, true}},
    {WK_IQ3_S, {"iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false}},
    {WK_IQ2_S, {"iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16, false}},
    {WK_IQ4_XS, {"iq4_xs", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2, true}},
    {WK_IQ1_M, {"iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false}},
    {WK_TQ1_0, {"tq1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2, false}},
    {WK_TQ2_0, {"tq2_0", QK_K, 2 + QK_K / 4, false}},
    {WK_MXFP4, {"mxfp4", 32, 1 + 16, false}},
    {WK_FP8_E4M3, {"fp8_e4m3", 128, 4 + 128, true}},
    {WK_FP8_E5M2, {"fp8_e5m2", 128, 4 + 128, true}},
};

const wk_type_info *wk_type_get(int type) {
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
    if (k_types[i].id == type) return &k_types[i].info;
  return NULL;
}

int wk_type_from_name(const char *name) {
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
    if (strcasecmp(k_types[i].info.name, name) == 0) return k_types[i].id;
  return -1;
}

size_t wk_row_size(int type, int64_t n) {
  const wk_type_info *t = wk_type_get(type);
  if (!t || n < 0 || n % t->block) return 0;
  return (size_t)(n / t->block) * (size_t)t->bytes;
}
