// The integer prompt GEMM of gemm16.h: AVX-512 row decoders (codes, sw, mw
// per 32 values), the strip transpose, and the vpdpwssd register tiles.
// Every function here runs only after wk_gemm16_pick saw AVX-512 F, BW, VL
// and VNNI (wk_kernel_best_level). The activations are those of the act16
// kernels' WK_ACT_A16 converter (wk_act16_avx2_quantize, what their table
// gives at the AVX2 and AVX-512 levels), of which only d, s and v are read.
#include "backend/cpu/kernels/gemm16.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/kernels_internal.h"
#include "quant/types.h"
#include "wick.h"

#define GT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define GI static inline __attribute__((always_inline))
#define G_PRAGMA(x) _Pragma(#x)
#define G_UNROLL G_PRAGMA(GCC unroll 16)

// Groups of 16 rows in a strip, and tokens in the register tile (2 x 6:
// 12 int32 and 12 f32 accumulators, 2 weight vectors and a broadcast of the
// 32 registers; 1 x 12, 2 x 7, 3 x 4 and 4 x 3 measured no faster).
#define G16_RV (G16_ROWS / 16)
#define G16_T 6
// Vectors of one block of a strip: 16 pairs x G16_RV groups of codes, then
// G16_RV of sw, then G16_RV of mw.
#define G_CODES (16 * G16_RV)
#define G_BLOCK (18 * G16_RV)
// Blocks of a k-chunk: the strip holds at most this many (147 KB, in L2),
// and a call with longer rows adds the chunks' products in y.
#define G_KC 64
// int16 from one staging row to the next: a chunk's codes and one cache line
// (rows 4 KB apart would share L1 sets when the transpose reads them).
#define G_STAGE_ROW (32 * G_KC + 32)

GT GI float g_f16(const uint8_t *p) { return _cvtsh_ss(wk_kern_u16(p)); }

GT GI uint32_t g_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// 32 bytes as 32 int16 (unsigned or signed bytes).
GT GI __m512i g_wide_u8(__m256i b) { return _mm512_cvtepu8_epi16(b); }
GT GI __m512i g_wide_i8(__m256i b) { return _mm512_cvtepi8_epi16(b); }

// 16 bytes of nibbles -> 32 bytes: the low nibbles (values 0..15), then the
// high ones (values 16..31).
GT GI __m256i g_nibbles(const uint8_t *qs) {
  const __m128i q = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

// The IQ4 table in both 128-bit halves (for vpshufb).
GT GI __m256i g_iq4_table(void) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)wk_kern_iq4nl_values));
}

// Two 16-value scales as the int16 multipliers of one block's 32 codes.
GT GI __m512i g_scales2(int a, int b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)a)),
                            _mm256_set1_epi16((short)b), 1);
}

GT GI void g_put(int16_t *c, __m512i v) { _mm512_storeu_si512(c, v); }

// ---- decoders: nb 32-value blocks of a row (gemm16.h's table) ----------------

// The 32-value formats: bytes a block, offset subtracted, has m, 5-bit, Q8, IQ4.
GT GI void g_dec_q(const int bytes, const int off, const int has_m, const int high,
                   const int q8, const int iq4, const uint8_t *s, int64_t nb, int16_t *c,
                   float *sw, float *mw, size_t ss) {
  const __m256i tbl = g_iq4_table();
  for (int64_t b = 0; b < nb; b++, s += bytes, c += 32) {
    sw[b * ss] = g_f16(s);
    mw[b * ss] = has_m ? g_f16(s + 2) : 0.0f;
    const uint8_t *q = s + (has_m ? 4 : 2);
    __m512i v;
    if (q8) {
      v = g_wide_i8(_mm256_loadu_si256((const __m256i *)q));
    } else if (iq4) {
      v = g_wide_i8(_mm256_shuffle_epi8(tbl, g_nibbles(q)));
    } else if (high) {
      v = g_wide_u8(g_nibbles(q + 4));
      v = _mm512_mask_add_epi16(v, (__mmask32)g_u32(q), v, _mm512_set1_epi16(16));
    } else {
      v = g_wide_u8(g_nibbles(q));
    }
    if (off) v = _mm512_sub_epi16(v, _mm512_set1_epi16((short)off));
    g_put(c, v);
  }
}

#define G_DEC_Q(name, bytes, off, has_m, high, q8, iq4)                                    \
  GT static void name(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,      \
                      size_t ss) {                                                         \
    g_dec_q(bytes, off, has_m, high, q8, iq4, s, nb, c, sw, mw, ss);                       \
  }
G_DEC_Q(dec_q4_0, 18, 8, 0, 0, 0, 0)
G_DEC_Q(dec_q4_1, 20, 0, 1, 0, 0, 0)
G_DEC_Q(dec_q5_0, 22, 16, 0, 1, 0, 0)
G_DEC_Q(dec_q5_1, 24, 0, 1, 1, 0, 0)
G_DEC_Q(dec_q8_0, 34, 0, 0, 0, 1, 0)
G_DEC_Q(dec_iq4_nl, 18, 0, 0, 0, 0, 1)

// Q4_K (144 B) and Q5_K (176 B): d, dmin, 12 scale bytes, [qh 32], qs 128;
// chunk j of 64 values: low nibbles of qs[32 j ..] then the high ones, bit
// 2 j (2 j + 1) of qh[l] the fifth bit of value l (32 + l).
GT GI void g_dec_k45(const int q5, const uint8_t *s, int64_t nb, int16_t *c, float *sw,
                     float *mw, size_t ss) {
  const int bytes = q5 ? 176 : 144;
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; b += 8, s += bytes, c += 256, sw += 8 * ss, mw += 8 * ss) {
    const float d = g_f16(s), dmin = g_f16(s + 2);
    for (int j = 0; j < 8; j++) {
      int sc, m;
      wk_kern_scale_min_k4(s + 4, j, &sc, &m);
      sw[j * ss] = d * (float)sc;
      mw[j * ss] = -(dmin * (float)m);
    }
    const uint8_t *qs = s + (q5 ? 48 : 16);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(s + 16));
    for (int j = 0; j < 4; j++) {
      const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
      __m512i lo = g_wide_u8(_mm256_and_si256(q, m4));
      __m512i hi = g_wide_u8(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      if (q5) {
        const __m512i sixteen = _mm512_set1_epi16(16);
        const __mmask32 ml = _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * j))));
        const __mmask32 mh =
            _mm256_test_epi8_mask(qh, _mm256_set1_epi8((char)(1 << (2 * j + 1))));
        lo = _mm512_mask_add_epi16(lo, ml, lo, sixteen);
        hi = _mm512_mask_add_epi16(hi, mh, hi, sixteen);
      }
      g_put(c + 64 * j, lo);
      g_put(c + 64 * j + 32, hi);
    }
  }
}

GT static void dec_q4_k(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,
                        size_t ss) {
  g_dec_k45(0, s, nb, c, sw, mw, ss);
}

GT static void dec_q5_k(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,
                        size_t ss) {
  g_dec_k45(1, s, nb, c, sw, mw, ss);
}

// Q6_K (210 B): ql 128, qh 64, 16 int8 scales, d. Half h, chunk j of 32:
// value l's low 4 bits from ql[64 h + l (+ 32 for odd j)] (high nibble for
// j >= 2), its top 2 bits from bits 2 j of qh[32 h + l]; code = sc * (q - 32).
GT static void dec_q6_k(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,
                        size_t ss) {
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  const __m512i k32 = _mm512_set1_epi16(32);
  for (int64_t b = 0; b < nb; b += 8, s += 210, c += 256, sw += 8 * ss, mw += 8 * ss) {
    const float d = g_f16(s + 208);
    const int8_t *sc = (const int8_t *)(s + 192);
    for (int j = 0; j < 8; j++) sw[j * ss] = d, mw[j * ss] = 0.0f;
    for (int h = 0; h < 2; h++) {
      const __m256i l0 = _mm256_loadu_si256((const __m256i *)(s + 64 * h));
      const __m256i l1 = _mm256_loadu_si256((const __m256i *)(s + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256((const __m256i *)(s + 128 + 32 * h));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(l1, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                          _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
      };
      for (int j = 0; j < 4; j++) {
        const int g = 8 * h + 2 * j;
        const __m512i v = _mm512_sub_epi16(g_wide_u8(q[j]), k32);
        g_put(c + 128 * h + 32 * j, _mm512_mullo_epi16(v, g_scales2(sc[g], sc[g + 1])));
      }
    }
  }
}

// Q3_K (110 B): hmask 32, qs 64, 12 scale bytes, d. Half h, chunk j of 32:
// low 2 bits of value l are bits 2 j of qs[32 h + l], and 4 is subtracted
// where bit 4 h + j of hmask[l] is clear; code = (sc - 32) * q3.
GT static void dec_q3_k(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,
                        size_t ss) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m512i four = _mm512_set1_epi16(4);
  for (int64_t b = 0; b < nb; b += 8, s += 110, c += 256, sw += 8 * ss, mw += 8 * ss) {
    const float d = g_f16(s + 108);
    int sc[16];
    for (int i = 0; i < 16; i++) sc[i] = wk_kern_scale_q3k(s + 96, i) - 32;
    for (int j = 0; j < 8; j++) sw[j * ss] = d, mw[j * ss] = 0.0f;
    const __m256i hm = _mm256_loadu_si256((const __m256i *)s);
    for (int h = 0; h < 2; h++) {
      const __m256i qs = _mm256_loadu_si256((const __m256i *)(s + 32 + 32 * h));
      for (int j = 0; j < 4; j++) {
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * j), m3);
        const __mmask32 set =
            _mm256_test_epi8_mask(hm, _mm256_set1_epi8((char)(1 << (4 * h + j))));
        __m512i v = g_wide_u8(lo);
        v = _mm512_mask_sub_epi16(v, (__mmask32)~set, v, four);
        const int g = 8 * h + 2 * j;
        g_put(c + 128 * h + 32 * j, _mm512_mullo_epi16(v, g_scales2(sc[g], sc[g + 1])));
      }
    }
  }
}

// IQ4_XS (136 B): d, scales_h, scales_l[4], qs 128 (16 a chunk of 32).
GT static void dec_iq4_xs(const uint8_t *s, int64_t nb, int16_t *c, float *sw, float *mw,
                          size_t ss) {
  const __m256i tbl = g_iq4_table();
  for (int64_t b = 0; b < nb; b += 8, s += 136, c += 256, sw += 8 * ss, mw += 8 * ss) {
    const float d = g_f16(s);
    for (int j = 0; j < 8; j++) {
      sw[j * ss] = d * (float)(wk_kern_scale_iq4xs(s, j) - 32);
      mw[j * ss] = 0.0f;
      g_put(c + 32 * j, g_wide_i8(_mm256_shuffle_epi8(tbl, g_nibbles(s + 8 + 16 * j))));
    }
  }
}

// ---- the strip ------------------------------------------------------------------

// r[i] dword j -> r[j] dword i (16 x 16).
GT GI void g_transpose(__m512i r[16]) {
  __m512i t[16];
  G_UNROLL for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4 q + c]: per 128-bit lane L, rows 4 q .. 4 q + 3 of column 4 L + c.
  __m512i u[16];
  G_UNROLL for (int q = 0; q < 4; q++) {
    u[4 * q + 0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
    u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
  }
  G_UNROLL for (int c = 0; c < 4; c++) {
    const __m512i s0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i s1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i s2 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i s3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(s0, s1, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(s0, s1, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(s2, s3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(s2, s3, 0xdd);
  }
}

typedef struct g_call {
  const wk_gemm16 *g;
  const uint8_t *w;     // the strip's first row
  size_t ws;            // bytes from one row to the next
  size_t unit_bytes;    // bytes of one block of the weight type
  int unit_blocks;      // 32-value blocks in it (1 or 8)
} g_call;

// Rows [0, nr) (nr <= G16_ROWS), blocks [b0, b0 + nb) (nb <= G_KC) of the
// strip's rows into the strip: per block, per pair p, per group, the 16 rows'
// pair p (rows nr.. are zero), then sw and mw. Each row's blocks are decoded
// in one run into the staging rows (a sequential read of the weights, those
// of the row two ahead prefetched), then transposed 16 rows at a time: from
// memory, decoding 16 rows a super-block at a time (32 short streams)
// measured 2-3x slower.
GT static void g_decode_strip(const g_call *cl, int nr, int64_t b0, int nb, __m512i *strip,
                              int16_t *stage) {
  const size_t ss = (size_t)G_BLOCK * 16;  // floats from one block's sw to the next's
  const size_t off = (size_t)(b0 / cl->unit_blocks) * cl->unit_bytes;
  const size_t run = (size_t)(nb / cl->unit_blocks) * cl->unit_bytes;
  float *sf = (float *)strip;
  for (int gi = 0; gi < G16_RV; gi++) {
    float *sw = sf + ((size_t)G_CODES + gi) * 16, *mw = sw + G16_RV * 16;
    for (int r = 0; r < 16; r++) {
      const int row = 16 * gi + r;
      int16_t *c = stage + G_STAGE_ROW * r;
      if (row < nr) {
        const uint8_t *src = cl->w + (size_t)row * cl->ws + off;
        if (row + 2 < nr)
          for (size_t o = 0; o < run; o += 64)
            _mm_prefetch((const char *)(src + 2 * cl->ws + o), _MM_HINT_T0);
        cl->g->decode(src, nb, c, sw + r, mw + r, ss);
      } else {
        memset(c, 0, sizeof(int16_t) * 32 * (size_t)nb);
        for (int b = 0; b < nb; b++) sw[b * ss + r] = 0.0f, mw[b * ss + r] = 0.0f;
      }
    }
    for (int b = 0; b < nb; b++) {
      __m512i v[16];
      G_UNROLL for (int r = 0; r < 16; r++)
        v[r] = _mm512_loadu_si512(stage + G_STAGE_ROW * r + 32 * b);
      g_transpose(v);
      __m512i *dst = strip + (size_t)b * G_BLOCK + gi;
      G_UNROLL for (int p = 0; p < 16; p++) _mm512_store_si512(dst + p * G16_RV, v[p]);
    }
  }
}

// ---- the register tiles -----------------------------------------------------

// G16_RV groups of 16 rows x T tokens over the whole strip (nb blocks);
// outputs y[t * ys + 16 g + lane] where lane is in mask[g].
GT GI void g_tile(const int T, const int with_min, const __m512i *s, int64_t nb,
                  const uint8_t *x, size_t xs, float *y, size_t ys, const __mmask16 *mask,
                  int add) {
  __m512 acc[G16_RV][G16_T];
  G_UNROLL for (int g = 0; g < G16_RV; g++) G_UNROLL for (int t = 0; t < T; t++)
      acc[g][t] = _mm512_setzero_ps();
  const uint8_t *xt[G16_T];
  G_UNROLL for (int t = 0; t < T; t++) xt[t] = x + (size_t)t * xs;
  for (int64_t b = 0; b < nb; b++, s += G_BLOCK) {
    __m512i ia[G16_RV][G16_T];
    G_UNROLL for (int p = 0; p < 16; p++) {
      __m512i w[G16_RV];
      G_UNROLL for (int g = 0; g < G16_RV; g++) w[g] = _mm512_load_si512(s + p * G16_RV + g);
      G_UNROLL for (int t = 0; t < T; t++) {
        const __m512i xv = _mm512_set1_epi32((int)g_u32(xt[t] + offsetof(wk_act16, v) + 4 * p));
        G_UNROLL for (int g = 0; g < G16_RV; g++) ia[g][t] =
            p == 0 ? _mm512_madd_epi16(w[g], xv) : _mm512_dpwssd_epi32(ia[g][t], w[g], xv);
      }
    }
    __m512 sw[G16_RV], mw[G16_RV];
    G_UNROLL for (int g = 0; g < G16_RV; g++) {
      sw[g] = _mm512_load_ps((const float *)(s + G_CODES + g));
      if (with_min) mw[g] = _mm512_load_ps((const float *)(s + G_CODES + G16_RV + g));
    }
    G_UNROLL for (int t = 0; t < T; t++) {
      const wk_act16 *a = (const wk_act16 *)xt[t];
      const __m512 dx = _mm512_set1_ps(a->d);
      G_UNROLL for (int g = 0; g < G16_RV; g++) {
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][t]), _mm512_mul_ps(sw[g], dx),
                                    acc[g][t]);
        if (with_min) acc[g][t] = _mm512_fmadd_ps(mw[g], _mm512_set1_ps(a->s), acc[g][t]);
      }
      xt[t] += sizeof(wk_act16);
    }
  }
  G_UNROLL for (int t = 0; t < T; t++) G_UNROLL for (int g = 0; g < G16_RV; g++) {
      float *yo = y + (size_t)t * ys + 16 * g;
      if (add) acc[g][t] = _mm512_add_ps(acc[g][t], _mm512_maskz_loadu_ps(mask[g], yo));
      _mm512_mask_storeu_ps(yo, mask[g], acc[g][t]);
    }
}

typedef void (*g_tile_fn)(const __m512i *s, int64_t nb, const uint8_t *x, size_t xs, float *y,
                          size_t ys, const __mmask16 *mask, int add);

#define G_TILE(T, M)                                                                       \
  GT static void tile_##T##_##M(const __m512i *s, int64_t nb, const uint8_t *x, size_t xs,  \
                                float *y, size_t ys, const __mmask16 *mask, int add) {     \
    g_tile(T, M, s, nb, x, xs, y, ys, mask, add);                                          \
  }
#define G_TILES(M) G_TILE(1, M) G_TILE(2, M) G_TILE(3, M) G_TILE(4, M) G_TILE(5, M) G_TILE(6, M)
G_TILES(0)
G_TILES(1)

static const g_tile_fn k_tiles[2][G16_T + 1] = {
    {NULL, tile_1_0, tile_2_0, tile_3_0, tile_4_0, tile_5_0, tile_6_0},
    {NULL, tile_1_1, tile_2_1, tile_3_1, tile_4_1, tile_5_1, tile_6_1},
};

// ---- entry points -------------------------------------------------------------

size_t wk_gemm16_scratch(int64_t k) {
  const int64_t nb = k / 32 < G_KC ? k / 32 : G_KC;
  return (size_t)nb * G_BLOCK * 64 + sizeof(int16_t) * 16 * G_STAGE_ROW + 64;
}

void wk_gemm16_run(const wk_gemm16 *g, const void *w, size_t row_stride, int64_t k, int rows,
                   const void *xq, size_t xs, int n_tokens, float *y, size_t ys, void *scratch) {
  const wk_type_info *info = wk_type_get(g->type);
  const int64_t nb = k / 32;
  g_call cl = {g, w, row_stride, (size_t)info->bytes, info->block / 32};
  __m512i *strip = (__m512i *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
  int16_t *stage = (int16_t *)(strip + (size_t)(nb < G_KC ? nb : G_KC) * G_BLOCK);
  for (int r0 = 0; r0 < rows; r0 += G16_ROWS) {
    const int nr = rows - r0 < G16_ROWS ? rows - r0 : G16_ROWS;
    __mmask16 mask[G16_RV];
    for (int gi = 0; gi < G16_RV; gi++) {
      const int n = nr - 16 * gi;
      mask[gi] = n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
    }
    cl.w = (const uint8_t *)w + (size_t)r0 * row_stride;
    for (int64_t b0 = 0; b0 < nb; b0 += G_KC) {
      const int nbk = nb - b0 < G_KC ? (int)(nb - b0) : G_KC;
      g_decode_strip(&cl, nr, b0, nbk, strip, stage);
      const uint8_t *x = (const uint8_t *)xq + (size_t)b0 * sizeof(wk_act16);
      for (int t = 0; t < n_tokens; t += G16_T) {
        const int nt = n_tokens - t < G16_T ? n_tokens - t : G16_T;
        k_tiles[g->has_min][nt](strip, nbk, x + (size_t)t * xs, xs, y + (size_t)t * ys + r0, ys,
                                mask, b0 > 0);
      }
    }
  }
}

int wk_gemm16_pick(int type, wk_gemm16 *out) {
  static const struct {
    int type, has_min;
    wk_g16_decode_fn decode;
  } k_types[] = {
      {WK_Q4_0, 0, dec_q4_0}, {WK_Q4_1, 1, dec_q4_1}, {WK_Q5_0, 0, dec_q5_0},
      {WK_Q5_1, 1, dec_q5_1}, {WK_Q8_0, 0, dec_q8_0}, {WK_IQ4_NL, 0, dec_iq4_nl},
      {WK_Q3_K, 0, dec_q3_k}, {WK_Q4_K, 1, dec_q4_k}, {WK_Q5_K, 1, dec_q5_k},
      {WK_Q6_K, 0, dec_q6_k}, {WK_IQ4_XS, 0, dec_iq4_xs},
  };
  if (wk_kernel_best_level() < WK_LEVEL_AVX512) return WICK_ERR_UNSUPPORTED;
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    if (k_types[i].type != type) continue;
    const wk_type_info *info = wk_type_get(type);
    if (!info) return WICK_ERR_UNSUPPORTED;
    *out = (wk_gemm16){.type = type, .has_min = k_types[i].has_min,
                       .k_multiple = info->block > 32 ? info->block : 32,
                       .decode = k_types[i].decode, .quantize_act = wk_act16_avx2_quantize};
    return WICK_OK;
  }
  return WICK_ERR_UNSUPPORTED;
}
