// Reference-accurate matrix products: weight rows are dequantized to f32 one
// tile at a time into a per-thread buffer (never a whole matrix) and reused
// for every token of the batch; dot products keep several f32 partial sums.
// GCC/Clang vector extensions give 4-wide arithmetic on any x86-64 level.
#include <string.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/dequant.h"
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

size_t cpu_matmul_scratch(int64_t k) { return (size_t)CPU_MATMUL_TILE * (size_t)k; }

typedef struct mm_job {
  const wk_tensor *w;
  const float *x;
  int n_tokens;
  float *y;
  float *scratch;
  size_t per_thread;
} mm_job;

static void mm_run(void *ctx, int ith, int nth) {
  const mm_job *j = ctx;
  const int64_t k = j->w->ne[0], n = j->w->ne[1];
  const size_t row_bytes = wk_row_size(j->w->type, k);
  const unsigned char *data = j->w->data;
  float *buf = j->scratch + (size_t)ith * j->per_thread;
  long lo, hi;
  wk_split((long)n, ith, nth, CPU_MATMUL_TILE, &lo, &hi);
  for (long r0 = lo; r0 < hi; r0 += CPU_MATMUL_TILE) {
    int nr = hi - r0 < CPU_MATMUL_TILE ? (int)(hi - r0) : CPU_MATMUL_TILE;
    const float *wt;
    if (j->w->type == WK_F32) {
      wt = (const float *)data + (size_t)r0 * (size_t)k;
    } else {
      for (int r = 0; r < nr; r++) {
        int rc = cpu_dequant_row(j->w->type, data + (size_t)(r0 + r) * row_bytes,
                                   buf + (size_t)r * (size_t)k, k);
        WK_ASSERT(rc == WICK_OK);
      }
      wt = buf;
    }
    int t = 0;
    for (; t + 2 <= j->n_tokens; t += 2) {
      const float *xa = j->x + (size_t)t * (size_t)k, *xb = xa + k;
      float *ya = j->y + (size_t)t * (size_t)n + r0, *yb = ya + n;
      int r = 0;
      for (; r + 4 <= nr; r += 4)
        dot4x2(wt + (size_t)r * (size_t)k, k, xa, xb, k, ya + r, yb + r);
      for (; r < nr; r++) {
        ya[r] = cpu_dot(wt + (size_t)r * (size_t)k, xa, k);
        yb[r] = cpu_dot(wt + (size_t)r * (size_t)k, xb, k);
      }
    }
    for (; t < j->n_tokens; t++) {
      const float *xt = j->x + (size_t)t * (size_t)k;
      float *yt = j->y + (size_t)t * (size_t)n + r0;
      int r = 0;
      for (; r + 4 <= nr; r += 4) dot4(wt + (size_t)r * (size_t)k, k, xt, k, yt + r);
      for (; r < nr; r++) yt[r] = cpu_dot(wt + (size_t)r * (size_t)k, xt, k);
    }
  }
}

void cpu_matmul(wk_pool *pool, float *scratch, size_t scratch_per_thread, const wk_tensor *w,
                const float *x, int n_tokens, float *y) {
  WK_ASSERT(scratch_per_thread >= cpu_matmul_scratch(w->ne[0]));
  mm_job j = {w, x, n_tokens, y, scratch, scratch_per_thread};
  wk_pool_run(pool, mm_run, &j);
}
