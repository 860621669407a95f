// Kernel microbenchmark: matrix-vector (decode) and matrix-matrix (prefill)
// throughput of the CPU kernel table for every weight type, next to this
// machine's read bandwidth measured in the same run.
//
//   bench_matvec [--types q4_0,q4_k,...] [--tokens 64] [--level avx2]
//                [--min-time 0.3] [--no-gemm] [--l2-only] [--act16] [--paired N]
//
// Shapes are k (input length) x n (output rows); weights are rotated through
// enough copies to exceed 256 MB, so every pass reads them from memory.
// matvec: GB/s = weight bytes / time (the median call), % = of the read
// bandwidth with the same thread count; L2 GB/s = one thread on rows that stay in L2, in thread CPU
// time (the kernel's compute ceiling, robust to other load on the machine).
// gemm: GFLOP/s = 2 k n tokens / time (2 threads). --l2-only prints the L2
// column alone (quick: no bandwidth pass, no copies), for kernel work on a
// busy machine. --act16: the quantized types through the 16-bit-activation
// kernels (act16.h), which the fast path's decode steps use. --paired N: the
// memory bandwidth of a shared host moves over seconds, so one read figure at
// the start cannot judge a kernel against it; for each product and thread
// count, N pairs of (a read pass over the matrix's own bytes, then the product,
// each timed as the median over min-time / N) give N ratios kernel GB/s /
// read GB/s, and their median is printed after the other columns.
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels/act16.h"
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

typedef struct {
  const uint64_t *buf;
  size_t n;                   // words
  uint64_t sums[MAX_THREADS]; // kept so the reads are not optimized away
} bw_job;

// Unaligned 32-byte vectors of words (GNU vector extension).
typedef uint64_t bw_vec __attribute__((vector_size(32), aligned(8)));

// Sums words [lo, hi) with 256-bit loads (AVX2 machines) ...
__attribute__((target("avx2"))) static uint64_t bw_sum_avx2(const uint64_t *p, long lo, long hi) {
  bw_vec a = {0}, b = {0}, c = {0}, d = {0};
  for (long i = lo; i < hi; i += 16) {
    a += *(const bw_vec *)(p + i), b += *(const bw_vec *)(p + i + 4);
    c += *(const bw_vec *)(p + i + 8), d += *(const bw_vec *)(p + i + 12);
  }
  a += b + c + d;
  return a[0] + a[1] + a[2] + a[3];
}

// ... or with plain code elsewhere.
static uint64_t bw_sum(const uint64_t *p, long lo, long hi) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (long i = lo; i < hi; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
  return a + b + c + d;
}

static void bw_run(void *ctx, int ith, int nth) {
  bw_job *j = ctx;
  long lo, hi;
  wk_split((long)j->n, ith, nth, 64, &lo, &hi);
  j->sums[ith] = __builtin_cpu_supports("avx2") ? bw_sum_avx2(j->buf, lo, hi)
                                                : bw_sum(j->buf, lo, hi);
}

// Best of 5 passes over a 1 GB buffer, GB/s.
static double read_bandwidth(wk_pool *pool) {
  size_t bytes = (size_t)1 << 30;
  uint64_t *buf = wk_malloc(bytes);
  if (!buf) return 0;
  for (size_t i = 0; i < bytes / 8; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
  bw_job j = {buf, bytes / 8, {0}};
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = wk_now();
    wk_pool_run(pool, bw_run, &j);
    double dt = wk_now() - t0;
    best = fmax(best, (double)bytes / dt / 1e9);
  }
  wk_free(buf);
  return best;
}

// qsort order of doubles (the medians below).
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// Read GB/s over the n_copies copies of a mat-byte matrix in turn (each pass
// one copy, with the pool's threads): the median pass over at least min_time
// (and 3 passes). *next: the copy the next pass reads (kept across calls, so
// that the passes keep leaving the caches).
#define BW_PASSES 4096
static double copies_bandwidth(wk_pool *pool, const uint8_t *copies, int n_copies, size_t mat,
                               int *next, double min_time) {
  static double t[BW_PASSES];
  const size_t words = mat / 8 / 64 * 64;  // bw_run's loops take 16 words at a time
  if (words == 0) return 0;
  int passes = 0;
  const double t0 = wk_now();
  do {
    bw_job j = {(const uint64_t *)(copies + (size_t)*next * mat), words, {0}};
    *next = (*next + 1) % n_copies;
    const double c0 = wk_now();
    wk_pool_run(pool, bw_run, &j);
    t[passes++] = wk_now() - c0;
  } while ((wk_now() - t0 < min_time || passes < 3) && passes < BW_PASSES);
  qsort(t, (size_t)passes, sizeof t[0], cmp_double);
  return (double)(words * 8) / t[passes / 2] / 1e9;
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
  long chunk;        // rows per chunk (a multiple of 12, the tile heights' multiple)
  long home;         // rows of each of the first nth chunks (0: none)
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
    int nth = wk_pool_size(pool);
    j->chunk = ((j->n + 4L * nth - 1) / (4L * nth) + 11) / 12 * 12;  // ~4 chunks a thread
    j->home = cpu_mm_home(j->n, nth, j->tokens);
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
// timed in thread CPU time.
static double cache_rate(mm_job *j, const uint8_t *w, double min_time) {
  mm_job c = *j;
  c.w = w;
  c.n = (long)((256u << 10) / c.rb) / 12 * 12;
  if (c.n < 12) c.n = 12;
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
  int level;
  int gemm;
  int l2_only;
  int act16;  // the 16-bit-activation kernels (act16.h: what decode runs) for quantized types
  int paired;  // pairs of (read pass, product) per thread count (0: none)
  double min_time;
} options;

// The median of n ratios (sorts r).
static double median(double *r, int n) {
  qsort(r, (size_t)n, sizeof r[0], cmp_double);
  return n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
}

// kernel GB/s / read GB/s of o->paired pairs (a read pass over the matrix's
// copies, then the product, each over min_time / paired), their median.
static double paired_ratio(wk_pool *pool, mm_job *j, const uint8_t *copies, int n_copies,
                           size_t mat, const options *o) {
  enum { MAX_PAIRS = 1000 };
  static double r[MAX_PAIRS];
  const int n = o->paired < MAX_PAIRS ? o->paired : MAX_PAIRS;
  const double slot = o->min_time / n;
  int next = 0;
  for (int i = 0; i < n; i++) {
    const double bw = copies_bandwidth(pool, copies, n_copies, mat, &next, slot);
    const double gbs = (double)mat / time_gemm(pool, j, copies, n_copies, mat, slot) / 1e9;
    r[i] = bw > 0 ? gbs / bw : 0;
  }
  return median(r, n);
}

static void bench_type(int type, const int64_t shape[2], const options *o, wk_pool *pools[],
                       const double bw[]) {
  wk_kernel kr;
  if (!(o->act16 && wk_act16_pick(type, o->level, &kr) == WICK_OK) &&
      wk_kernel_pick(type, o->level, &kr) != WICK_OK)
    return;
  int64_t k = shape[0], n = shape[1];
  int swapped = 0;
  if (k % kr.k_multiple) {  // e.g. k = 576 for 256-blocks: bench the transpose
    int64_t t = k;
    k = n, n = t, swapped = 1;
  }
  size_t rb = wk_row_size(type, k), mat = rb * (size_t)n;
  int copies = (int)((256u << 20) / mat) + 1;
  if (copies < 2) copies = 2;
  if (o->l2_only) copies = 1;
  uint8_t *w = wk_malloc(mat * (size_t)copies);
  float *x = wk_malloc(sizeof(float) * (size_t)k * (size_t)o->tokens);
  size_t xb = kr.act == WK_ACT_A16 || kr.act == WK_ACT_A16K ? wk_act16_row_size(kr.act, k)
                                                              : wk_act_row_size(kr.act, k);
  uint8_t *xq = wk_malloc(xb * (size_t)o->tokens);
  float *y = wk_malloc(sizeof(float) * (size_t)n * (size_t)o->tokens);
  if (!w || !x || !xq || !y) {
    fprintf(stderr, "out of memory for %s %lldx%lld\n", wk_type_get(type)->name, (long long)k,
            (long long)n);
    goto done;
  }
  // Random rows, quantized once and copied (quantizing K-quants is slow).
  uint64_t s = 88172645463325252ull;
  for (int64_t i = 0; i < k * o->tokens; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[i] = (float)((double)(s >> 11) * 0x1p-53 - 0.5);
  }
  for (int64_t r = 0; r < n; r++)
    if (r < 64) wk_quantize_row(type, x + (r % o->tokens) * k, w + (size_t)r * rb, k);
    else memcpy(w + (size_t)r * rb, w + (size_t)(r % 64) * rb, rb);
  for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * mat, w, mat);
  for (int t = 0; t < o->tokens; t++) kr.quantize_act(x + (size_t)t * k, xq + t * xb, k);

  char shape_s[48];
  snprintf(shape_s, sizeof shape_s, "%lldx%lld%s", (long long)k, (long long)n,
           swapped ? "*" : "");
  printf("| %-8s | %-6s | %-12s |", wk_type_get(type)->name, wk_kernel_level_name(kr.level),
         shape_s);
  mm_job j = {.kr = &kr, .w = w, .rb = rb, .k = k, .n = n, .xq = xq, .xb = xb, .tokens = 1,
              .y = y};
  double ratio[MAX_THREADS + 1] = {0};
  for (int th = 1; th <= MAX_THREADS && !o->l2_only; th++) {
    double dt = time_gemm(pools[th], &j, w, copies, mat, o->min_time);
    double gbs = (double)mat / dt / 1e9;
    printf(" %6.1f | %3.0f%% |", gbs, 100 * gbs / bw[th]);
    fflush(stdout);
    if (o->paired) ratio[th] = paired_ratio(pools[th], &j, w, copies, mat, o);
  }
  printf(" %6.1f |", cache_rate(&j, w, o->min_time / 2));
  if (o->gemm && !o->l2_only) {
    j.tokens = o->tokens;
    double dt = time_gemm(pools[MAX_THREADS], &j, w, copies, mat, o->min_time);
    printf(" %7.1f |", 2.0 * (double)k * (double)n * o->tokens / dt / 1e9);
  }
  if (o->paired && !o->l2_only)
    for (int th = 1; th <= MAX_THREADS; th++) printf(" %5.0f%% |", 100 * ratio[th]);
  printf("\n");
done:
  wk_free(w);
  wk_free(x);
  wk_free(xq);
  wk_free(y);
}

int main(int argc, char **argv) {
  options o = {.tokens = 64, .level = WK_LEVEL_AUTO, .gemm = 1, .min_time = 0.3};
  const char *types = k_all_types;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
    else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) o.tokens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) o.min_time = atof(argv[++i]);
    else if (!strcmp(argv[i], "--no-gemm")) o.gemm = 0;
    else if (!strcmp(argv[i], "--l2-only")) o.l2_only = 1;
    else if (!strcmp(argv[i], "--act16")) o.act16 = 1;
    else if (!strcmp(argv[i], "--paired") && i + 1 < argc) o.paired = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
      const char *l = argv[++i];
      o.level = !strcmp(l, "scalar") ? WK_LEVEL_SCALAR
                : !strcmp(l, "avx2") ? WK_LEVEL_AVX2
                : !strcmp(l, "avx512") ? WK_LEVEL_AVX512
                                       : WK_LEVEL_AUTO;
    } else {
      fprintf(stderr, "usage: %s [--types a,b] [--tokens N] [--level L] [--min-time S] "
              "[--no-gemm] [--l2-only] [--act16] [--paired N]\n", argv[0]);
      return 2;
    }
  }
  if (o.tokens < 1) o.tokens = 1;
  if (o.paired < 0) o.paired = 0;
  wk_cpu_features f;
  wk_cpu_detect(&f);
  wk_pool *pools[MAX_THREADS + 1] = {NULL};
  for (int th = 1; th <= MAX_THREADS; th++) pools[th] = wk_pool_create(th);
  double bw[MAX_THREADS + 1] = {0};
  for (int th = 1; th <= MAX_THREADS && !o.l2_only; th++) bw[th] = read_bandwidth(pools[th]);
  printf("cpu: %s (best kernel level %s)\n", f.brand, wk_kernel_level_name(wk_kernel_best_level()));
  if (o.l2_only) {
    printf("L2: one thread, rows in L2, CPU time (GB/s of weights)\n\n");
    printf("| type     | level  | k x n        | L2 GB/s |\n");
    printf("|----------|--------|--------------|--------:|\n");
  } else {
    printf("read bandwidth (sum over 1 GB, best of 5): 1 thread %.1f GB/s, 2 threads %.1f GB/s\n",
           bw[1], bw[2]);
    printf("matvec: GB/s of weights read, %% of the read bandwidth with as many threads; L2: one "
           "thread, rows in L2, CPU time; gemm: %d tokens, 2 threads. * = k and n swapped (k not "
           "a multiple of the block)\n", o.tokens);
    if (o.paired)
      printf("paired: the median of %d ratios matvec GB/s / read GB/s, each of a read pass over "
             "the matrix's bytes then the product, %.3f s each, with 1 and 2 threads\n",
             o.paired, o.min_time / o.paired);
    printf("\n| type     | level  | k x n        | 1t GB/s | %%    | 2t GB/s | %%    | L2 GB/s "
           "|%s%s\n", o.gemm ? " gemm GFLOP/s |" : "", o.paired ? " 1t pair | 2t pair |" : "");
    printf("|----------|--------|--------------|--------:|-----:|--------:|-----:|--------:|%s%s\n",
           o.gemm ? "-------------:|" : "", o.paired ? "--------:|--------:|" : "");
  }
  char *list = wk_strndup(types, strlen(types));
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
       name = strtok_r(NULL, ",", &save)) {
    int type = wk_type_from_name(name);
    if (type < 0) {
      fprintf(stderr, "unknown type %s\n", name);
      continue;
    }
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++)
      bench_type(type, k_shapes[si], &o, pools, bw);
  }
  wk_free(list);
  for (int th = 1; th <= MAX_THREADS; th++) wk_pool_destroy(pools[th]);
  return 0;
}
