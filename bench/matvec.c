// Kernel microbenchmark: matrix-vector (decode) and matrix-matrix (prefill)
// throughput of the CPU kernel table for every weight type, next to this
// machine's read bandwidth measured over the same bytes in the same run.
//
//   bench_matvec [--types q4_0,q4_k,...] [--tokens 64] [--l2-tokens 1] [--level avx2]
//                [--min-time 0.3] [--no-gemm] [--l2-only] [--act16] [--packed] [--paired N]
//                [--self-check] [--shape KxN]
//
// Shapes are k (input length) x n (output rows): the four below, or --shape's
// alone (a model's own, e.g. 640x262144 for Gemma 3's tied output); weights are rotated through
// enough copies to exceed 256 MB, so every pass reads them from memory. The copies and the
// opening read buffer lie on 2 MB pages, as the engine's weights do (wk_alloc_huge).
// matvec, with 1 and 2 threads, in rounds: K products over copies c .. c +
// K - 1 and K read passes over the same copies, read first in even rounds and
// product first in odd ones. A read pass is the product's own job (the same
// rows to the same threads, the same chunks) with a kernel that only sums the
// bytes; K copies span at least twice the L3, so neither finds the other's
// bytes in a cache. GB/s: weight bytes / the median over the rounds of the
// round's median product call; read: the same for the read passes; %: the
// median over the rounds of (read time / product time). At least N rounds
// (--paired, default 8) and min-time seconds of products.
// Why not one read rate measured at the start: the
// shared VM's read rate moves between two regimes (2 threads: ~30-33 and
// ~45-53 GB/s, each for seconds to minutes) and differs between buffers by
// 10-15%, so only read passes over the product's own bytes, interleaved with
// it, judge the kernel. The opening rate (best of 5 passes over 1 GB) is
// printed for reference only. --self-check runs the read kernel as the
// product: its % columns must read ~100% (a check of the measure, not of a
// kernel). L2 GB/s: one thread on rows that stay in L2, in thread CPU time
// (the kernel's compute ceiling, robust to other load on the machine);
// --l2-tokens N: its products take N tokens a call (a decode batch; GB/s of
// the weights, which the N tokens read once). gemm:
// GFLOP/s = 2 k n tokens / time (2 threads). --l2-only prints the L2 column
// alone (quick: no bandwidth pass, no copies), for kernel work on a busy
// machine. --act16: the quantized types through the 16-bit-activation kernels
// (act16.h), which the fast path's decode steps use for every quantized type
// but Q3_K; without it, the kernel table's 8-bit-activation kernels
// (kernels.h), the decode path of Q3_K (and of Q2_K under WICK_ACT8=1).
// --packed: the packed kernels (pack16.h) where a type has one at --level
// (wk_pack16_gemm_at: --level avx2 the AVX2 level's), on the activations
// they take (wk_pack16_act: Q3_K's the 8-bit ones), the other types as
// --act16.
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
#include "backend/cpu/kernels/pack16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/kernels/kernels.h"
#include "base/alloc.h"
#include "base/cpu.h"
#include "base/pool.h"
#include "base/timer.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "wick.h"

enum { MAX_THREADS = 2 };

static const char *k_all_types =
    "f32,f16,bf16,q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,iq4_nl,iq4_xs,fp8_e4m3,"
    "fp8_e5m2";
static const int64_t k_shapes[][2] = {{4096, 14336}, {14336, 4096}, {576, 1536}, {640, 2048}};

// ---- read bandwidth ---------------------------------------------------------

// Sums n bytes at p (any alignment) with four 256-bit accumulators (AVX2
// machines; measured here as fast as any read loop: 512-bit loads or software
// prefetch read up to 10% slower) ...
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  uint64_t s = (uint64_t)_mm256_extract_epi64(a, 0) + (uint64_t)_mm256_extract_epi64(a, 1) +
               (uint64_t)_mm256_extract_epi64(a, 2) + (uint64_t)_mm256_extract_epi64(a, 3);
  for (; i < n; i++) s += p[i];
  return s;
}

// ... or with plain code elsewhere.
static uint64_t sum_plain(const uint8_t *p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0, w[4];
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    memcpy(w, p + i, 32);
    a += w[0], b += w[1], c += w[2], d += w[3];
  }
  for (; i < n; i++) a += p[i];
  return a + b + c + d;
}

static uint64_t sum_bytes(const uint8_t *p, size_t n) {
  return __builtin_cpu_supports("avx2") ? sum_avx2(p, n) : sum_plain(p, n);
}

// The read "kernel" (a wk_gemm_fn): sums the bytes of the `rows` rows at w
// (contiguous) into y[0], so that a read pass is the product's own job with
// the arithmetic left out.
static void read_rows(const void *w, size_t ws, int64_t k, int rows, const void *xq, size_t xs,
                      int n_tokens, float *y, size_t ys) {
  (void)k, (void)xq, (void)xs, (void)n_tokens, (void)ys;
  y[0] = (float)sum_bytes(w, ws * (size_t)rows);
}

typedef struct {
  const uint8_t *buf;
  size_t n;                   // bytes
  uint64_t sums[MAX_THREADS]; // kept so the reads are not optimized away
} bw_job;

static void bw_run(void *ctx, int ith, int nth) {
  bw_job *j = ctx;
  long lo, hi;
  wk_split((long)j->n, ith, nth, 4096, &lo, &hi);
  j->sums[ith] = sum_bytes(j->buf + lo, (size_t)(hi - lo));
}

// Best of 5 passes over a 1 GB buffer, GB/s (printed for reference only).
static double read_bandwidth(wk_pool *pool) {
  size_t bytes = (size_t)1 << 30;
  uint64_t *buf = wk_alloc_huge(bytes);  // 2 MB pages, as the engine's weights
  if (!buf) return 0;
  for (size_t i = 0; i < bytes / 8; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
  bw_job j = {(const uint8_t *)buf, bytes, {0}};
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = wk_now();
    wk_pool_run(pool, bw_run, &j);
    double dt = wk_now() - t0;
    best = fmax(best, (double)bytes / dt / 1e9);
  }
  wk_free_huge(buf, bytes);
  return best;
}

// qsort order of doubles (the medians below).
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// The median of n values (sorts r).
static double median(double *r, int n) {
  qsort(r, (size_t)n, sizeof r[0], cmp_double);
  return n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
}

// Bytes that a copy's reads must be apart from its next reads to come from
// memory: twice the L3 that sysfs reports (lscpu's figure; glibc's sysconf
// says 320 MB on this 32 MB VM), at least 64 MB.
static size_t cache_span(void) {
  size_t l3 = 0;
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
  if (f) {
    unsigned long v;
    char unit = 0;
    if (fscanf(f, "%lu%c", &v, &unit) >= 1)
      l3 = (size_t)v << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0);
    fclose(f);
  }
  return 2 * l3 > (64u << 20) ? 2 * l3 : 64u << 20;
}

// ---- matrix kernels under the pool ------------------------------------------

typedef struct {
  const wk_kernel *kr;
  const uint8_t *w;  // one copy of the matrix
  size_t rb;         // bytes per row
  int64_t k, n;      // row length, rows
  const uint8_t *xq;
  size_t xb;         // bytes per token
  int tokens;
  float *y;          // tokens x n
  long chunk;        // rows per chunk (a multiple of align)
  long home;         // rows of each of the first nth chunks (0: none)
  long align;        // 12 (the tile heights' multiple), 48 for packed rows (16-row groups)
  atomic_long next;  // next unclaimed chunk
} mm_job;

// Threads claim chunks of rows from a shared counter (as the CPU backend
// does), so a thread the OS delays does not hold the others up; at decode
// sizes the first nth chunks are a run of rows a thread (cpu_mm_run).
static void mm_run(void *ctx, int ith, int nth) {
  (void)ith;
  mm_job *j = ctx;
  const long nh = j->home > 0 ? nth : 0;
  for (;;) {
    long c = atomic_fetch_add(&j->next, 1);
    long lo = c < nh ? c * j->home : nh * j->home + (c - nh) * j->chunk;
    if (lo >= j->n) return;
    long len = c < nh ? j->home : j->chunk, hi = lo + len < j->n ? lo + len : j->n;
    j->kr->gemm(j->w + (size_t)lo * j->rb, j->rb, j->k, (int)(hi - lo), j->xq, j->xb, j->tokens,
                j->y + lo, (size_t)j->n);
  }
}

// Chunks of about 4 a thread, whole multiples of j->align; the first nth
// chunks a run of rows a thread at decode sizes (cpu_mm_home's rule).
static void set_chunks(mm_job *j, int nth) {
  const long a = j->align;
  j->chunk = ((j->n + 4L * nth - 1) / (4L * nth) + a - 1) / a * a;
  j->home = nth > 1 && j->tokens <= 8 ? j->n / nth / a * a : 0;
}

// Seconds of one call: the median of the calls made in min_time (at least
// 3, at most TIME_CALLS), so that bursts of other load on a shared machine
// move it less than they move the mean.
#define TIME_CALLS 4096
static double time_gemm(wk_pool *pool, mm_job *j, const uint8_t *copies, int n_copies,
                        size_t mat_bytes, double min_time) {
  static double t[TIME_CALLS];
  int calls = 0;
  double t0 = wk_now();
  do {
    j->w = copies + (size_t)(calls % n_copies) * mat_bytes;
    set_chunks(j, wk_pool_size(pool));
    atomic_store(&j->next, 0);
    const double c0 = wk_now();
    wk_pool_run(pool, mm_run, j);
    t[calls++] = wk_now() - c0;
  } while ((wk_now() - t0 < min_time || calls < 3) && calls < TIME_CALLS);
  qsort(t, (size_t)calls, sizeof t[0], cmp_double);
  return t[calls / 2];
}

// Thread CPU seconds (not disturbed by other processes taking the CPU).
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The kernel's own speed, memory aside: matvec GB/s on the calling thread
// over the first rows of the matrix (about 256 KB, so they stay in L2),
// timed in thread CPU time. The rows are a multiple of 24 (of the 8-row
// decode tiles and the 12-row chunks), so that no tail tile runs: at 12
// rows, Q8_0 at k = 14336 (15 KB rows) ran 4 of them through the 1x1 tile
// and read ~24 GB/s instead of ~30+. Where 24 rows pass 512 KB (half of
// Zen 4's 1 MB L2: f32, f16, bf16 at k = 14336) it stays 12, in L2.
static double cache_rate(mm_job *j, const uint8_t *w, double min_time) {
  mm_job c = *j;
  c.w = w;
  const long m = j->align > 12 ? j->align : 24;  // packed rows: whole chunks of groups
  c.n = (long)((256u << 10) / c.rb) / m * m;
  if (c.n < m) c.n = m * c.rb <= (512u << 10) || m > 24 ? m : 12;
  if (c.n > j->n) c.n = j->n;
  c.chunk = c.n;
  int calls = 0;
  double t0 = cpu_now(), dt;
  do {
    atomic_store(&c.next, 0);
    mm_run(&c, 0, 1);
    calls++;
    dt = cpu_now() - t0;
  } while (dt < min_time || calls < 3);
  return (double)c.rb * (double)c.n * calls / dt / 1e9;
}

typedef struct {
  int tokens;
  int l2_tokens;  // tokens of each L2 column product
  int level;
  int gemm;
  int l2_only;
  int act16;  // the 16-bit-activation kernels (act16.h: what decode runs) for quantized types
  int paired;  // rounds of (read passes, products) per thread count, at least
  int self_check;  // the read kernel as the product (the % columns must read ~100%)
  int packed;      // 16-row groups (pack16.h) for the types that have them (with --act16)
  double min_time;
} options;

// Seconds of each call of a job (the first nth chunks home runs, as
// time_gemm) over copies c .. c + k - 1 into t[0 .. k - 1].
static void time_calls(wk_pool *pool, mm_job *j, const uint8_t *copies, int n_copies,
                       size_t mat, int c, int k, double *t) {
  set_chunks(j, wk_pool_size(pool));
  for (int i = 0; i < k; i++) {
    j->w = copies + (size_t)((c + i) % n_copies) * mat;
    atomic_store(&j->next, 0);
    const double c0 = wk_now();
    wk_pool_run(pool, mm_run, j);
    t[i] = wk_now() - c0;
  }
}

// One thread count's matvec figures: product and read GB/s (medians over the
// rounds of each round's median call) and the median over the rounds of
// read time / product time.
typedef struct {
  double gbs, read, ratio;
} mv_result;

// Rounds of k products and k read passes over the same k copies (k copies
// span cache_span(), so each finds the other's bytes gone from the caches),
// the order alternating, until min_time of products and at least o->paired
// rounds.
static mv_result measure(wk_pool *pool, const mm_job *job, const wk_kernel *rk,
                         const uint8_t *copies, int n_copies, size_t mat, int k,
                         const options *o) {
  enum { MAX_ROUNDS = 1024, MAX_K = 4096 };
  static double tp[MAX_K], tr[MAX_K], all_p[MAX_ROUNDS], all_r[MAX_ROUNDS], ratio[MAX_ROUNDS];
  mm_job p = *job, r = *job;
  r.kr = rk;
  if (k > MAX_K) k = MAX_K;
  int rounds = 0, c = 0;
  double spent = 0;
  do {
    if (rounds % 2 == 0) {
      time_calls(pool, &r, copies, n_copies, mat, c, k, tr);
      time_calls(pool, &p, copies, n_copies, mat, c, k, tp);
    } else {
      time_calls(pool, &p, copies, n_copies, mat, c, k, tp);
      time_calls(pool, &r, copies, n_copies, mat, c, k, tr);
    }
    for (int i = 0; i < k; i++) spent += tp[i];
    c = (c + k) % n_copies;
    all_p[rounds] = median(tp, k);
    all_r[rounds] = median(tr, k);
    ratio[rounds] = all_r[rounds] / all_p[rounds];
    rounds++;
  } while ((spent < o->min_time || rounds < o->paired) && rounds < MAX_ROUNDS);
  mv_result m = {(double)mat / median(all_p, rounds) / 1e9,
                 (double)mat / median(all_r, rounds) / 1e9, median(ratio, rounds)};
  return m;
}

static void bench_type(int type, const int64_t shape[2], const options *o, wk_pool *pools[]) {
  wk_kernel kr;
  // --packed: the activations the packed kernel takes (Q3_K's and Q2_K's
  // 8-bit ones), else --act16's 16-bit ones or the kernel table's
  if (!(o->packed && wk_pack16_gemm_at(type, o->level) &&
        wk_pack16_pick(type, o->level, &kr) == WICK_OK) &&
      !(o->act16 && wk_act16_pick(type, o->level, &kr) == WICK_OK) &&
      wk_kernel_pick(type, o->level, &kr) != WICK_OK)
    return;
  int64_t k = shape[0], n = shape[1];
  int swapped = 0;
  if (k % kr.k_multiple) {  // e.g. k = 576 for 256-blocks: bench the transpose
    int64_t t = k;
    k = n, n = t, swapped = 1;
  }
  size_t rb = wk_row_size(type, k), mat = rb * (size_t)n;
  const int span = (int)((cache_span() + mat - 1) / mat);  // copies a round reads
  int copies = (int)((256u << 20) / mat) + 1;
  if (copies < 2 * span) copies = 2 * span;
  if (o->l2_only) copies = 1;
  uint8_t *w = wk_alloc_huge(mat * (size_t)copies);  // 2 MB pages, as the engine's weights
  const int nt = o->tokens > o->l2_tokens ? o->tokens : o->l2_tokens;  // activation rows
  float *x = wk_malloc(sizeof(float) * (size_t)k * (size_t)nt);
  size_t xb = kr.act == WK_ACT_A16 || kr.act == WK_ACT_A16K ? wk_act16_row_size(kr.act, k)
                                                              : wk_act_row_size(kr.act, k);
  uint8_t *xq = wk_malloc(xb * (size_t)nt);
  float *y = wk_malloc(sizeof(float) * (size_t)n * (size_t)nt);
  if (!w || !x || !xq || !y) {
    fprintf(stderr, "out of memory for %s %lldx%lld\n", wk_type_get(type)->name, (long long)k,
            (long long)n);
    goto done;
  }
  // Random rows, quantized once and copied (quantizing K-quants is slow).
  uint64_t s = 88172645463325252ull;
  for (int64_t i = 0; i < k * nt; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
  }
  for (int64_t r = 0; r < n; r++)
    if (r < 64) wk_quantize_row(type, x + (r % o->tokens) * k, w + (size_t)r * rb, k);
    else memcpy(w + (size_t)r * rb, w + (size_t)(r % 64) * rb, rb);
  const wk_gemm_fn pg =
      o->packed && wk_pack16_fits(type, k) ? wk_pack16_gemm_at(type, o->level) : NULL;
  if (pg) {  // copy 0's whole groups packed (the rest stays as it is)
    uint8_t *tmp = wk_malloc(16 * rb);
    for (int64_t r = 0; tmp && r + 16 <= n; r += 16) {
      memcpy(tmp, w + (size_t)r * rb, 16 * rb);
      wk_pack16_group(type, k, tmp, rb, w + (size_t)r * rb);
    }
    wk_free(tmp);
    kr.gemm = pg;
  }
  for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * mat, w, mat);
  for (int t = 0; t < nt; t++) kr.quantize_act(x + (size_t)t * k, xq + t * xb, k);

  char shape_s[48];
  snprintf(shape_s, sizeof shape_s, "%lldx%lld%s", (long long)k, (long long)n,
           swapped ? "*" : "");
  printf("| %-8s | %-6s | %-12s |", wk_type_get(type)->name,
         pg ? "p16" : wk_kernel_level_name(kr.level), shape_s);
  mm_job j = {.kr = &kr, .w = w, .rb = rb, .k = k, .n = n, .xq = xq, .xb = xb, .tokens = 1,
              .y = y, .align = pg ? 48 : 12};
  wk_kernel rk = kr;  // the read passes' kernel
  rk.gemm = read_rows;
  if (o->self_check) j.kr = &rk;
  for (int th = 1; th <= MAX_THREADS && !o->l2_only; th++) {
    const mv_result m = measure(pools[th], &j, &rk, w, copies, mat, span, o);
    printf(" %6.1f | %6.1f | %3.0f%% |", m.gbs, m.read, 100 * m.ratio);
    fflush(stdout);
  }
  j.kr = &kr;
  j.tokens = o->l2_tokens;
  printf(" %6.1f |", cache_rate(&j, w, o->min_time / 2));
  if (o->gemm && !o->l2_only) {
    j.tokens = o->tokens;
    double dt = time_gemm(pools[MAX_THREADS], &j, w, copies, mat, o->min_time);
    printf(" %7.1f |", 2.0 * (double)k * (double)n * o->tokens / dt / 1e9);
  }
  printf("\n");
done:
  wk_free_huge(w, mat * (size_t)copies);
  wk_free(x);
  wk_free(xq);
  wk_free(y);
}

int main(int argc, char **argv) {
  options o = {.tokens = 64, .l2_tokens = 1, .level = WK_LEVEL_AUTO, .gemm = 1,
               .min_time = 0.3, .paired = 8};
  const char *types = k_all_types;
  int64_t shape[2] = {0, 0};  // --shape KxN: that shape only
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
      long long k = 0, n = 0;
      char tail = 0;
      if (sscanf(argv[++i], "%lldx%lld%c", &k, &n, &tail) != 2 || k < 1 || n < 1 ||
          k > (1 << 20) || n > (1 << 24)) {
        fprintf(stderr, "bad --shape %s (want KxN, e.g. 640x262144)\n", argv[i]);
        return 2;
      }
      shape[0] = k, shape[1] = n;
    }
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) o.tokens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--l2-tokens") && i + 1 < argc) o.l2_tokens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) o.min_time = atof(argv[++i]);
    else if (!strcmp(argv[i], "--no-gemm")) o.gemm = 0;
    else if (!strcmp(argv[i], "--l2-only")) o.l2_only = 1;
    else if (!strcmp(argv[i], "--act16")) o.act16 = 1;
    else if (!strcmp(argv[i], "--paired") && i + 1 < argc) o.paired = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--self-check")) o.self_check = 1;
    else if (!strcmp(argv[i], "--packed")) o.packed = o.act16 = 1;
    else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
      const char *l = argv[++i];
      o.level = !strcmp(l, "scalar") ? WK_LEVEL_SCALAR
                : !strcmp(l, "avx2") ? WK_LEVEL_AVX2
                : !strcmp(l, "avx512bw") ? WK_LEVEL_AVX512BW
                : !strcmp(l, "avx512") ? WK_LEVEL_AVX512
                                       : WK_LEVEL_AUTO;
    } else {
      fprintf(stderr, "usage: %s [--types a,b] [--tokens N] [--l2-tokens N] [--level L] "
              "[--min-time S] "
              "[--no-gemm] [--l2-only] [--act16] [--packed] [--paired N] [--self-check] "
              "[--shape KxN]\n",
              argv[0]);
      return 2;
    }
  }
  if (o.tokens < 1) o.tokens = 1;
  if (o.l2_tokens < 1) o.l2_tokens = 1;
  if (o.paired < 1) o.paired = 1;
  wk_cpu_features f;
  wk_cpu_detect(&f);
  wk_pool *pools[MAX_THREADS + 1] = {NULL};
  for (int th = 1; th <= MAX_THREADS; th++) pools[th] = wk_pool_create(th);
  double bw[MAX_THREADS + 1] = {0};
  for (int th = 1; th <= MAX_THREADS && !o.l2_only; th++) bw[th] = read_bandwidth(pools[th]);
  printf("cpu: %s (best kernel level %s)\n", f.brand, wk_kernel_level_name(wk_kernel_best_level()));
  if (o.l2_only) {
    printf("L2: one thread, rows in L2, CPU time (GB/s of weights, %d token(s) a call)\n\n",
           o.l2_tokens);
    printf("| type     | level  | k x n        | L2 GB/s |\n");
    printf("|----------|--------|--------------|--------:|\n");
  } else {
    printf("read bandwidth (sum over 1 GB, best of 5, for reference): 1 thread %.1f GB/s, 2 "
           "threads %.1f GB/s\n", bw[1], bw[2]);
    printf("matvec, 1 and 2 threads: GB/s of weights read by the product; read: GB/s of read "
           "passes over the same bytes with the same threads, interleaved with it (at least %d "
           "rounds); %%: the median over the rounds of product / read rate%s. L2: one thread, "
           "rows in L2, CPU time, %d token(s) a call; gemm: %d tokens, 2 threads. * = k and n "
           "swapped (k not a multiple of the block)\n", o.paired,
           o.self_check ? " (--self-check: the product is a read pass too)" : "", o.l2_tokens,
           o.tokens);
    printf("\n| type     | level  | k x n        | 1t GB/s | read   | %%    | 2t GB/s | read   "
           "| %%    | L2 GB/s |%s\n", o.gemm ? " gemm GFLOP/s |" : "");
    printf("|----------|--------|--------------|--------:|-------:|-----:|--------:|-------:|"
           "-----:|--------:|%s\n", o.gemm ? "-------------:|" : "");
  }
  char *list = wk_strndup(types, strlen(types));
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    int type = wk_type_from_name(name);
    if (type < 0) {
      fprintf(stderr, "unknown type %s\n", name);
      continue;
    }
    if (shape[0]) bench_type(type, shape, &o, pools);
    else
      for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++)
        bench_type(type, k_shapes[si], &o, pools);
  }
  wk_free(list);
  for (int th = 1; th <= MAX_THREADS; th++) wk_pool_destroy(pools[th]);
  return 0;
}
