// Persistent thread pool: n-1 worker threads plus the caller. No thread is
// created per operation; workers spin briefly, then sleep, between jobs.
#ifndef WICK_BASE_POOL_H
#define WICK_BASE_POOL_H

typedef struct wk_pool wk_pool;

// fn is called once on every thread: ith in [0, nth).
typedef void (*wk_pool_fn)(void *ctx, int ith, int nth);

wk_pool *wk_pool_create(int n_threads);  // NULL on failure; n_threads >= 1
void wk_pool_destroy(wk_pool *p);
int wk_pool_size(const wk_pool *p);
// Runs fn on all threads and returns when every call has returned.
// A NULL pool runs fn(ctx, 0, 1) on the caller.
void wk_pool_run(wk_pool *p, wk_pool_fn fn, void *ctx);

// Even split of [0, n) for thread ith of nth, in multiples of `align`.
static inline void wk_split(long n, int ith, int nth, long align, long *lo, long *hi) {
  long chunks = (n + align - 1) / align;
  long per = chunks / nth, rem = chunks % nth;
  long c0 = ith * per + (ith < rem ? ith : rem);
  long c1 = c0 + per + (ith < rem ? 1 : 0);
  *lo = c0 * align < n ? c0 * align : n;
  *hi = c1 * align < n ? c1 * align : n;
}

#endif
