// The AVX-512 level's one-token tiles of Q4_K and Q5_K: the AVX2 level's
// decode tile (act16_avx2_k.c, kdec) compiled again for AVX-512 VL + VNNI,
// with each chunk's pmaddwd + paddd folded into one vpdpwssd (A16_KD_VNNI,
// kd_products). The int32 lanes are the same (vpdpwssd wraps as pmaddwd +
// paddd; the AVX2 file's bounds), and the f32 operations are that tile's in
// its order, so every output is the AVX2 level's bit for bit. act16.c calls
// these only when cpuid reports AVX-512 F, BW, VL and VNNI.
//
// On this Zen 4 (bench_levels: the AVX2 tile and this one call by call, best
// of 400, 4096x512, 2048x640, 1024x2048, 6 rounds): Q4_K 1.07-1.31x (mostly
// 1.11-1.17), Q5_K 1.06-1.16x the AVX2 tile. IQ4_XS through this tile ran
// 0.98-1.02x, so it keeps act16_avx512_k.c's yiq4dec (1.17-1.22x).
//
// Several tokens: four or more go to the AVX2 level's gemm (its main tiles
// take 4 tokens); one to three run this decode tile once per token, rows as
// a16_gemm takes them, which is what the AVX2 gemm does for them too.
#define AT                                                                        \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define A16_KD_VNNI 1
#include "backend/cpu/kernels/act16_avx2_k.c"

// T_vec_dot and T_gemm with decode tiles of DM rows (the AVX2 level's: 4).
#define KD_TYPE(T, TYPE, DM)                                                                 \
  AT static void T##_vdec(const uint8_t *w, size_t ws, int64_t nb, const uint8_t *xq,       \
                          float *y, size_t yr) {                                             \
    kdec(TYPE, DM, w, ws, nb, xq, y, yr);                                                    \
  }                                                                                          \
  AT static void T##_vone(const uint8_t *w, int64_t nb, const uint8_t *xq, float *y) {       \
    kdec(TYPE, 1, w, 0, nb, xq, y, 0);                                                       \
  }                                                                                          \
  static float T##_vec_dot(int64_t n, const void *w, const void *xq) {                      \
    float y;                                                                                 \
    T##_vone(w, n / 256, xq, &y);                                                            \
    return y;                                                                                \
  }                                                                                          \
  static void T##_gemm(const void *wv, size_t ws, int64_t k, int rows, const void *xq,      \
                       size_t xs, int n_tokens, float *y, size_t ys) {                      \
    if (n_tokens >= 4 && a16_avx2_gemm(TYPE, wv, ws, k, rows, xq, xs, n_tokens, y, ys))     \
      return;                                                                                \
    const uint8_t *w = wv;                                                                   \
    const int64_t nb = k / 256;                                                              \
    const int q = rows / (DM);                                                               \
    for (int t = 0; t < n_tokens; t++) {                                                     \
      const uint8_t *xt = (const uint8_t *)xq + (size_t)t * xs;                              \
      float *yt = y + (size_t)t * ys;                                                        \
      for (int j = 0; j < q; j++)                                                            \
        T##_vdec(w + (size_t)j * ws, ws * (size_t)q, nb, xt, yt + j, (size_t)q);             \
      for (int r = q * (DM); r < rows; r++) T##_vone(w + (size_t)r * ws, nb, xt, yt + r);    \
    }                                                                                        \
  }

KD_TYPE(q4_k, WK_Q4_K, 4)
KD_TYPE(q5_k, WK_Q5_K, 4)

int wk_act16_avx512_kd_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  static const wk_act16_row rows[] = {A16_ROW(WK_Q4_K, q4_k), A16_ROW(WK_Q5_K, q5_k)};
  return wk_act16_lookup(rows, sizeof rows / sizeof rows[0], type, dot, gemm);
}
