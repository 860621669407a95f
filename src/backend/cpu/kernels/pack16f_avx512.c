// The packed kernels of the float types F16, BF16 and FP8 E4M3 / E5M2
// (pack16.h) with AVX-512: a group of 16 rows x 1..4 tokens, one f32 lane a
// row, against f32 activations (FP8: WK_ACT_F32S, x * 2^64).
//
// A chunk widens to f32 with no lane moves: F16's column of 16 rows by one
// vcvtph2ps; BF16's two columns (a dword a row) as dword << 16 and dword &
// 0xffff0000; FP8's four (a code byte a row each) by a shift that puts code
// i at the top of its dword, an arithmetic shift right and a mask, as the
// tiles of x86_f.h do (E4M3: value * 2^-120, E5M2: value * 2^-112, exact;
// the block scale takes the factor back). Each column's weights then meet
// the activation broadcast from memory in one fused multiply-add, into 4
// partial sums a token (column c into sum c % 4), added at the end: results
// the tiles' up to f32 rounding, and a token's the same whatever the batch.
//
// Prompts: tokens in chunks of KP_TOK (their activations stay in L2 while the
// groups stream past), a group's bytes reused from L1/L2 by every 4 tokens.
#define AT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#include "backend/cpu/kernels/pack16_x512.h"
#include "quant/types.h"

#define KP_TOK 32

AT AI __m512 sum4(const __m512 *a) {
  return _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
}

// ---- F16: 32 chunks of 32 bytes (a column each) ---------------------------
AT AI void f16_block(const int NT, const uint8_t *G, const float *const *x, __m512 (*acc)[4]) {
  A16_UNROLL for (int c = 0; c < 32; c += 4) A16_UNROLL for (int i = 0; i < 4; i++) {
    const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32 * (c + i))));
    A16_UNROLL for (int t = 0; t < NT; t++) acc[t][i] =
        _mm512_fmadd_ps(w, _mm512_set1_ps(x[t][c + i]), acc[t][i]);
  }
}

// ---- BF16: 16 chunks of 64 bytes (two columns each) -----------------------
AT AI void bf16_block(const int NT, const uint8_t *G, const float *const *x, __m512 (*acc)[4]) {
  const __m512i top = _mm512_set1_epi32((int)0xffff0000u);
  A16_UNROLL for (int c = 0; c < 16; c += 2) A16_UNROLL for (int e = 0; e < 4; e += 2) {
    const __m512i v = _mm512_loadu_si512(G + 64 * c + 32 * e);
    const __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
                 w1 = _mm512_castsi512_ps(_mm512_and_si512(v, top));
    A16_UNROLL for (int t = 0; t < NT; t++) {
      acc[t][e] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t][2 * c + e]), acc[t][e]);
      acc[t][e + 1] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[t][2 * c + e + 1]), acc[t][e + 1]);
    }
  }
}

// ---- FP8: 16 f32 scales, 32 chunks of 64 bytes (4 columns each) -----------
// The 4 codes of every dword as f32 times 2^-120 (E4M3) or 2^-112 (E5M2):
// an arithmetic shift of each 16-bit word right by 4 (E5M2: 3) turns the code
// in its high byte into the top half of that f32 (sign at 15, exponent and
// mantissa at 4..10, or 5..11), the low bytes first moved up by a word shift;
// then each word goes to the top of its dword and a mask keeps those bits.
AT AI void fp8_cols(const __m512i v, const int e5, __m512 *w) {
  const __m512i m = _mm512_set1_epi32((int)(e5 ? 0x8fe00000u : 0x87f00000u));
  const __m512i s13 = _mm512_srai_epi16(v, e5 ? 3 : 4);
  const __m512i s02 = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), e5 ? 3 : 4);
  w[0] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(s02, 16), m));
  w[1] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(s13, 16), m));
  w[2] = _mm512_castsi512_ps(_mm512_and_si512(s02, m));
  w[3] = _mm512_castsi512_ps(_mm512_and_si512(s13, m));
}

AT AI void fp8_block(const int NT, const int e5, const uint8_t *G, const float *const *x,
                     __m512 (*acc)[4]) {
  __m512 p[WK_PACK16_MAX_TOKENS][4];
  A16_UNROLL for (int t = 0; t < NT; t++) A16_UNROLL for (int i = 0; i < 4; i++) p[t][i] =
      _mm512_setzero_ps();
  A16_UNROLL for (int c = 0; c < 32; c++) {
    __m512 w[4];
    fp8_cols(_mm512_loadu_si512(G + 64 + 64 * c), e5, w);
    A16_UNROLL for (int i = 0; i < 4; i++) A16_UNROLL for (int t = 0; t < NT; t++) p[t][i] =
        _mm512_fmadd_ps(w[i], _mm512_set1_ps(x[t][4 * c + i]), p[t][i]);
  }
  // the factor back: value * x * 2^-56 (E4M3) or 2^-48 (E5M2)
  const __m512 s =
      _mm512_mul_ps(_mm512_loadu_ps((const float *)G), _mm512_set1_ps(e5 ? 0x1p48f : 0x1p56f));
  A16_UNROLL for (int t = 0; t < NT; t++) acc[t][0] = _mm512_fmadd_ps(s, sum4(p[t]), acc[t][0]);
}

// One group x NT tokens: y[t * ys + r] for its 16 rows.
AT AI void fgroup(const int type, const int NT, const uint8_t *g, int64_t nb, const uint8_t *xq,
                  size_t xs, float *y, size_t ys) {
  const int fp8 = type == WK_FP8_E4M3 || type == WK_FP8_E5M2;
  const size_t sb = fp8 ? 2112 : 1024;
  const int vals = fp8 ? 128 : 32;
  __m512 acc[WK_PACK16_MAX_TOKENS][4];
  A16_UNROLL for (int t = 0; t < NT; t++) A16_UNROLL for (int i = 0; i < 4; i++) acc[t][i] =
      _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *G = g + (size_t)b * sb;
    const float *x[WK_PACK16_MAX_TOKENS];
    A16_UNROLL for (int t = 0; t < NT; t++) x[t] = (const float *)(xq + (size_t)t * xs) + b * vals;
    if (fp8) ahead(G, sb);  // (F16, BF16: the hardware's stream alone, see below)
    if (type == WK_F16) f16_block(NT, G, x, acc);
    else if (type == WK_BF16) bf16_block(NT, G, x, acc);
    else fp8_block(NT, type == WK_FP8_E5M2, G, x, acc);
  }
  A16_UNROLL for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (size_t)t * ys, sum4(acc[t]));
}

#define P16F_GEMM(T, TYPE, BLK)                                                              \
  AT static void T##_p16(const void *w, size_t ws, int64_t k, int rows, const void *xq,     \
                         size_t xs, int n_tokens, float *y, size_t ys) {                     \
    const uint8_t *x = xq;                                                                   \
    for (int c0 = 0; c0 < n_tokens; c0 += KP_TOK) {                                          \
      const int c1 = n_tokens - c0 < KP_TOK ? n_tokens : c0 + KP_TOK;                        \
      for (int r = 0; r + WK_PACK16_ROWS <= rows; r += WK_PACK16_ROWS) {                    \
        const uint8_t *g = (const uint8_t *)w + (size_t)r * ws;                              \
        for (int t0 = c0; t0 < c1; t0 += WK_PACK16_MAX_TOKENS) {                             \
          const int nt = c1 - t0 < WK_PACK16_MAX_TOKENS ? c1 - t0 : WK_PACK16_MAX_TOKENS;    \
          const uint8_t *xt = x + (size_t)t0 * xs;                                           \
          float *yt = y + (size_t)t0 * ys + r;                                               \
          switch (nt) {                                                                      \
            case 1: fgroup(TYPE, 1, g, k / BLK, xt, xs, yt, ys); break;                      \
            case 2: fgroup(TYPE, 2, g, k / BLK, xt, xs, yt, ys); break;                      \
            case 3: fgroup(TYPE, 3, g, k / BLK, xt, xs, yt, ys); break;                      \
            default: fgroup(TYPE, 4, g, k / BLK, xt, xs, yt, ys); break;                     \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }

P16F_GEMM(f16, WK_F16, 32)
P16F_GEMM(bf16, WK_BF16, 32)
P16F_GEMM(fp8_e4m3, WK_FP8_E4M3, 128)
P16F_GEMM(fp8_e5m2, WK_FP8_E5M2, 128)

wk_gemm_fn wk_pack16f_avx512_find(int type) {
  switch (type) {
    case WK_F16: return f16_p16;
    case WK_BF16: return bf16_p16;
    case WK_FP8_E4M3: return fp8_e4m3_p16;
    case WK_FP8_E5M2: return fp8_e5m2_p16;
    default: return NULL;
  }
}
