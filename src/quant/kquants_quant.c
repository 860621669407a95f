// K-quant quantizers. Two stages per 256-value block:
//  1. each sub-block gets a real-valued scale (and minimum) from a small
//     least-squares search over candidate scales (fit_affine, fit_symmetric,
//     fit_q3);
//  2. those scales are quantized against one f16 super-block scale, and
//     every value is re-quantized to the nearest level of its sub-block's
//     final (stored) scale, clamped to the level range.
#include "quant/kquants_quant.h"

#include <stdbool.h>

#include "quant/block.h"
#include "quant/kquants.h"

#define TINY 1e-15f  // a group whose largest magnitude is below this is zero

// ---- sub-block scale fits ------------------------------------------------

// Weighted error of x ~ scale * L + mn.
static float affine_error(int n, const float *x, const float *w, const uint8_t *L, float scale,
                          float mn, bool use_abs) {
  float e = 0;
  for (int i = 0; i < n; i++) {
    float diff = scale * L[i] + mn - x[i];
    e += w[i] * (use_abs ? fabsf(diff) : diff * diff);
  }
  return e;
}

// Fits x ~ scale * L + mn with mn <= 0 and L in [0, nmax]. Starts from the
// range-based scale, then for each of nstep + 1 inverse scales
// (nmax + rmin + rdelta * is) / (max - min) assigns levels and solves the
// weighted least-squares scale and minimum for them, keeping the fit with
// the lowest weighted error. Returns scale; *neg_min = -mn.
static float fit_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
                        float *neg_min, float rmin, float rdelta, int nstep, bool use_abs) {
  uint8_t aux[32];
  float mn = x[0], mx = x[0], sw = w[0], sx = w[0] * x[0];
  for (int i = 1; i < n; i++) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
    sw += w[i];
    sx += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    memset(L, 0, (size_t)n);
    *neg_min = -mn;
    return 0;
  }
  float iscale = nmax / (mx - mn), scale = 1 / iscale;
  for (int i = 0; i < n; i++) L[i] = (uint8_t)wk_clampi(wk_nearest_int(iscale * (x[i] - mn)), 0, nmax);
  float best = affine_error(n, x, w, L, scale, mn, use_abs);
  for (int is = 0; is <= nstep; is++) {
    iscale = (rmin + rdelta * is + nmax) / (mx - mn);
    float sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
      int l = wk_clampi(wk_nearest_int(iscale * (x[i] - mn)), 0, nmax);
      aux[i] = (uint8_t)l;
      sl += w[i] * l;
      sl2 += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    float det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    float s = (sw * sxl - sx * sl) / det;
    float m = (sl2 * sx - sl * sxl) / det;
    if (m > 0) {
      m = 0;
      s = sxl / sl2;
    }
    float e = affine_error(n, x, w, aux, s, m, use_abs);
    if (e < best) {
      memcpy(L, aux, (size_t)n);
      best = e;
      scale = s;
      mn = m;
    }
  }
  *neg_min = -mn;
  return scale;
}

// Weighted (x^2) sums of l * x and l^2 for levels nearest(iscale * x)
// clamped to [-nmax, nmax - 1]; stores the levels + nmax in L when non-NULL.
static void symmetric_sums(int n, int nmax, const float *x, float iscale, float *slx, float *sl2,
                           uint8_t *L) {
  *slx = *sl2 = 0;
  for (int i = 0; i < n; i++) {
    int l = wk_clampi(wk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
    float w = x[i] * x[i];
    *slx += w * x[i] * l;
    *sl2 += w * l * l;
    if (L) L[i] = (uint8_t)(l + nmax);
  }
}

// Fits x ~ scale * l with l in [-nmax, nmax - 1] and weights x^2: starts from
// the inverse scale that maps the largest-magnitude value v to -nmax, then
// tries -(nmax + 0.1 * k) / v for k = -9..9 and keeps the levels whose
// least-squares scale explains most of the weighted energy. Returns scale
// (levels + nmax go to L).
static float fit_symmetric(int n, int nmax, const float *x, uint8_t *L) {
  float v = 0, amax = 0;
  for (int i = 0; i < n; i++)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      v = x[i];
    }
  if (amax < TINY) {
    memset(L, 0, (size_t)n);
    return 0;
  }
  float slx, sl2;
  symmetric_sums(n, nmax, x, -nmax / v, &slx, &sl2, L);
  float scale = sl2 > 0 ? slx / sl2 : 0, best = scale * slx;
  for (int k = -9; k <= 9; k++) {
    if (k == 0) continue;
    float iscale = -(nmax + 0.1f * k) / v;
    symmetric_sums(n, nmax, x, iscale, &slx, &sl2, NULL);
    if (sl2 > 0 && slx * slx > best * sl2) {
      symmetric_sums(n, nmax, x, iscale, &slx, &sl2, L);
      scale = slx / sl2;
      best = scale * slx;
    }
  }
  return scale;
}

// Q3_K's fit: levels l in [-nmax, nmax - 1] from the largest magnitude, then
// up to 5 passes moving single levels while the weighted (x^2) least-squares
// fit improves. Returns the least-squares scale.
static float fit_q3(int n, int nmax, const float *x, int8_t *l) {
  float v = 0, amax = 0;
  for (int i = 0; i < n; i++)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      v = x[i];
    }
  if (amax < TINY) {
    memset(l, 0, (size_t)n);
    return 0;
  }
  float iscale = -nmax / v, slx = 0, sl2 = 0;
  for (int i = 0; i < n; i++) {
    l[i] = (int8_t)wk_clampi(wk_nearest_int(iscale * x[i]), -nmax, nmax - 1);
    float w = x[i] * x[i];
    slx += w * x[i] * l[i];
    sl2 += w * l[i] * l[i];
  }
  for (int pass = 0; pass < 5; pass++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      float w = x[i] * x[i];
      float a = slx - w * x[i] * l[i], b = sl2 - w * l[i] * l[i];
      if (b <= 0 || a * slx <= 0) continue;  // keep the sign of the fit
      int nl = wk_clampi(wk_nearest_int(x[i] * b / a), -nmax, nmax - 1);
      if (nl == l[i]) continue;
      a += w * x[i] * nl;
      b += w * nl * nl;
      if (b > 0 && a * a * sl2 > slx * slx * b) {
        l[i] = (int8_t)nl;
        slx = a;
        sl2 = b;
        changed++;
      }
    }
    if (!changed) break;
  }
  return sl2 > 0 ? slx / sl2 : 0;
}

// ---- packing helpers -----------------------------------------------------

// 2-bit planes of one 256-value block: in each half, byte l holds values l,
// l + 32, l + 64, l + 96 at bits 0, 2, 4, 6.
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
  for (int h = 0; h < 2; h++)
    for (int l = 0; l < 32; l++) {
      const uint8_t *p = L + 128 * h + l;
      qs[32 * h + l] = (uint8_t)(p[0] | p[32] << 2 | p[64] << 4 | p[96] << 6);
    }
}

// Levels of x for a sub-block step d and minimum dm: nearest((x + dm) / d).
static void requantize(const float *x, int n, float d, float dm, int lo, int hi, uint8_t *L,
                       int offset) {
  for (int i = 0; i < n; i++)
    L[i] = (uint8_t)(offset + wk_clampi(wk_nearest_int((x[i] + dm) / d), lo, hi));
}

// ---- Q2_K ----------------------------------------------------------------

void wk_q2_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  uint8_t L[WK_QK_K];
  float scales[16], mins[16], w[16];
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 84) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; j++) {
      for (int l = 0; l < 16; l++) w[l] = fabsf(src[16 * j + l]);
      scales[j] = fit_affine(16, 3, src + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      max_scale = fmaxf(max_scale, scales[j]);
      max_min = fmaxf(max_min, mins[j]);
    }
    uint8_t *sc = dst;
    float id = max_scale > 0 ? 15 / max_scale : 0, im = max_min > 0 ? 15 / max_min : 0;
    for (int j = 0; j < 16; j++) {
      int ls = wk_clampi(wk_nearest_int(id * scales[j]), 0, 15);
      int lm = wk_clampi(wk_nearest_int(im * mins[j]), 0, 15);
      sc[j] = (uint8_t)(ls | lm << 4);
    }
    wk_st_f16(dst + 80, max_scale / 15);
    wk_st_f16(dst + 82, max_min / 15);
    float d = wk_ld_f16(dst + 80), dmin = wk_ld_f16(dst + 82);
    for (int j = 0; j < 16; j++) {
      float dl = d * (sc[j] & 15), ml = dmin * (sc[j] >> 4);
      if (dl != 0) requantize(src + 16 * j, 16, dl, ml, 0, 3, L + 16 * j, 0);
    }
    pack_2bit(L, dst + 16);
  }
}

// ---- Q3_K ----------------------------------------------------------------

void wk_q3_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  uint8_t L[WK_QK_K];
  int8_t l8[16];
  float scales[16];
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 110) {
    uint8_t *hmask = dst, *qs = dst + 32, *s = dst + 96;
    float v = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
      scales[j] = fit_q3(16, 4, src + 16 * j, l8);
      if (fabsf(scales[j]) > amax) {
        amax = fabsf(scales[j]);
        v = scales[j];
      }
    }
    memset(s, 0, 12);
    float iscale = v != 0 ? -32 / v : 0;
    for (int j = 0; j < 16; j++) {
      int l = wk_clampi(wk_nearest_int(iscale * scales[j]), -32, 31) + 32;
      if (j < 8)
        s[j] = (uint8_t)(l & 15);
      else
        s[j - 8] |= (uint8_t)((l & 15) << 4);
      s[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
    wk_st_f16(dst + 108, v != 0 ? 1 / iscale : 0.0f);
    float d = wk_ld_f16(dst + 108);
    memset(L, 4, sizeof L);  // level 0 where a sub-block's scale is 0
    for (int j = 0; j < 16; j++) {
      int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
      int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
      float dl = d * (float)((lo | hi << 4) - 32);
      if (dl != 0) requantize(src + 16 * j, 16, dl, 0, -4, 3, L + 16 * j, 4);
    }
    // Bit 2 of value 32 * b + l goes to bit b of hmask[l]; it is set for
    // levels 4..7 (stored level = low two bits), clear for 0..3 (low - 4).
    memset(hmask, 0, 32);
    for (int i = 0; i < WK_QK_K; i++)
      if (L[i] > 3) {
        hmask[i % 32] |= (uint8_t)(1 << (i / 32));
        L[i] -= 4;
      }
    pack_2bit(L, qs);
  }
}

// ---- Q4_K and Q5_K -------------------------------------------------------

// Eight 32-value sub-blocks, weights rms + |x|, 6-bit scales and minimums.
static void q45k_quantize(const float *x, uint8_t *b, int nmax, float rmin, int nstep,
                          uint8_t L[WK_QK_K]) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    const float *xs = x + 32 * j;
    float s2 = 0;
    for (int l = 0; l < 32; l++) s2 += xs[l] * xs[l];
    float rms = sqrtf(s2 / 32);
    for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
    scales[j] = fit_affine(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    max_scale = fmaxf(max_scale, scales[j]);
    max_min = fmaxf(max_min, mins[j]);
  }
  uint8_t *s = b + 4;
  float is = max_scale > 0 ? 63 / max_scale : 0, im = max_min > 0 ? 63 / max_min : 0;
  for (int j = 0; j < 8; j++) {
    int ls = wk_clampi(wk_nearest_int(is * scales[j]), 0, 63);
    int lm = wk_clampi(wk_nearest_int(im * mins[j]), 0, 63);
    if (j < 4) {
      s[j] = (uint8_t)ls;
      s[j + 4] = (uint8_t)lm;
    } else {
      s[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
      s[j - 4] |= (uint8_t)((ls >> 4) << 6);
      s[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  wk_st_f16(b, max_scale / 63);
  wk_st_f16(b + 2, max_min / 63);
  float d = wk_ld_f16(b), dmin = wk_ld_f16(b + 2);
  for (int j = 0; j < 8; j++) {
    int sc, mn;
    wk_k4_scale_min(s, j, &sc, &mn);
    float dl = d * sc, ml = dmin * mn;
    if (dl != 0) requantize(x + 32 * j, 32, dl, ml, 0, nmax, L + 32 * j, 0);
  }
}

void wk_q4_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  uint8_t L[WK_QK_K];
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 144) {
    q45k_quantize(src, dst, 15, -1.0f, 20, L);
    uint8_t *qs = dst + 16;
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++)
        qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
  }
}

void wk_q5_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  uint8_t L[WK_QK_K];
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 176) {
    q45k_quantize(src, dst, 31, -0.5f, 15, L);
    uint8_t *qh = dst + 16, *qs = dst + 48;
    memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
      for (int l = 0; l < 32; l++) {
        int a = L[64 * c + l], b = L[64 * c + 32 + l];
        qh[l] |= (uint8_t)((a >> 4) << (2 * c) | (b >> 4) << (2 * c + 1));
        qs[32 * c + l] = (uint8_t)((a & 15) | (b & 15) << 4);
      }
  }
}

// ---- Q6_K ----------------------------------------------------------------

void wk_q6_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  uint8_t L[WK_QK_K];
  float scales[16];
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 210) {
    float v = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
      scales[j] = fit_symmetric(16, 32, src + 16 * j, L + 16 * j);
      if (fabsf(scales[j]) > amax) {
        amax = fabsf(scales[j]);
        v = scales[j];
      }
    }
    uint8_t *ql = dst, *qh = dst + 128;
    int8_t *sc = (int8_t *)(dst + 192);
    if (amax < TINY) {
      memset(dst, 0, 210);
      continue;
    }
    float iscale = -128 / v;
    wk_st_f16(dst + 208, 1 / iscale);
    float d = wk_ld_f16(dst + 208);
    for (int j = 0; j < 16; j++) {
      sc[j] = (int8_t)wk_clampi(wk_nearest_int(iscale * scales[j]), -128, 127);
      float dl = d * sc[j];
      if (dl != 0)
        requantize(src + 16 * j, 16, dl, 0, -32, 31, L + 16 * j, 32);
      else
        memset(L + 16 * j, 32, 16);
    }
    for (int h = 0; h < 2; h++)
      for (int l = 0; l < 32; l++) {
        const uint8_t *p = L + 128 * h + l;
        ql[64 * h + l] = (uint8_t)((p[0] & 15) | (p[64] & 15) << 4);
        ql[64 * h + l + 32] = (uint8_t)((p[32] & 15) | (p[96] & 15) << 4);
        qh[32 * h + l] = (uint8_t)(p[0] >> 4 | (p[32] >> 4) << 2 | (p[64] >> 4) << 4 | (p[96] >> 4) << 6);
      }
  }
}

// ---- Q8_K ----------------------------------------------------------------

// d = v / -127 for the largest-magnitude value v; levels nearest(x / d)
// clamped to 127; bsums[k] = sum of levels 16k .. 16k + 15.
void wk_q8_k_quantize(const float *src, uint8_t *dst, int64_t nb) {
  for (int64_t ib = 0; ib < nb; ib++, src += WK_QK_K, dst += 292) {
    float v = 0, amax = 0;
    for (int j = 0; j < WK_QK_K; j++)
      if (fabsf(src[j]) > amax) {
        amax = fabsf(src[j]);
        v = src[j];
      }
    int8_t *qs = (int8_t *)(dst + 4);
    float iscale = amax != 0 ? -127 / v : 0;
    for (int j = 0; j < WK_QK_K; j++) {
      int l = wk_nearest_int(iscale * src[j]);
      qs[j] = (int8_t)(l > 127 ? 127 : l);
    }
    wk_st_f32(dst, amax != 0 ? 1 / iscale : 0.0f);
    for (int k = 0; k < 16; k++) {
      int sum = 0;
      for (int l = 0; l < 16; l++) sum += qs[16 * k + l];
      wk_st_u16(dst + 260 + 2 * k, (uint16_t)(int16_t)sum);
    }
  }
}
