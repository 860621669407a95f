#include "base/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "base/alloc.h"

// Workers spin this many pause-loops for the next job before they sleep; every
// YIELD_EVERY iterations they (and the waiting caller) yield the core, so that
// on a machine with more runnable threads than cores the thread holding the
// work gets to run.
#define SPIN_ITERS 20000
#define YIELD_EVERY 256

struct wk_pool {
  int n;                  // threads including the caller
  pthread_t *threads;     // [n - 1]
  pthread_mutex_t mu;
  pthread_cond_t wake;    // signalled when a new job is posted
  atomic_uint generation; // bumped per job
  atomic_int pending;     // workers still running the current job
  atomic_int stop;
  wk_pool_fn fn;
  void *ctx;
};

typedef struct {
  wk_pool *p;
  int ith;
} worker_arg;

static void *worker_main(void *arg) {
  worker_arg a = *(worker_arg *)arg;
  wk_free(arg);
  wk_pool *p = a.p;
  unsigned seen = 0;
  for (;;) {
    unsigned g;
    int spins = 0;
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
           !atomic_load(&p->stop) && spins < SPIN_ITERS) {
      if (++spins % YIELD_EVERY == 0)
        sched_yield();
      else
        __builtin_ia32_pause();
    }
    if (g == seen && !atomic_load(&p->stop)) {
      pthread_mutex_lock(&p->mu);
      while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->wake, &p->mu);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    p->fn(p->ctx, a.ith, p->n);
    atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
  }
}

wk_pool *wk_pool_create(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  wk_pool *p = wk_calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (n_threads > 1) {
    p->threads = wk_calloc((size_t)n_threads - 1, sizeof *p->threads);
    if (!p->threads) {
      wk_pool_destroy(p);
      return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
      worker_arg *a = wk_malloc(sizeof *a);
      if (!a) {
        p->n = i;
        wk_pool_destroy(p);
        return NULL;
      }
      a->p = p;
      a->ith = i;
      if (pthread_create(&p->threads[i - 1], NULL, worker_main, a) != 0) {
        wk_free(a);
        p->n = i;
        wk_pool_destroy(p);
        return NULL;
      }
    }
  }
  return p;
}

void wk_pool_destroy(wk_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n; i++)
    if (p->threads) pthread_join(p->threads[i - 1], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  wk_free(p->threads);
  wk_free(p);
}

int wk_pool_size(const wk_pool *p) { return p ? p->n : 1; }

void wk_pool_run(wk_pool *p, wk_pool_fn fn, void *ctx) {
  if (!p || p->n == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p->fn = fn;
  p->ctx = ctx;
  atomic_store(&p->pending, p->n - 1);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  fn(ctx, 0, p->n);
  for (unsigned spins = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
    if (spins % YIELD_EVERY == 0)
      sched_yield();
    else
      __builtin_ia32_pause();
  }
}
