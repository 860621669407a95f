#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

// The one process-wide setting: which allocator backs wk_malloc. It is set
// before any engine object exists (tests) and never changes under them.
static wk_alloc_fn g_alloc_fn;
static void *g_alloc_ud;

void wk_set_alloc(wk_alloc_fn fn, void *ud) {
  g_alloc_fn = fn;
  g_alloc_ud = ud;
}

void *wk_realloc(void *ptr, size_t size) {
  if (g_alloc_fn) return g_alloc_fn(g_alloc_ud, ptr, size);
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

void *wk_malloc(size_t size) { return size ? wk_realloc(NULL, size) : NULL; }

void *wk_calloc(size_t n, size_t size) {
  size_t total;
  if (!wk_mul_ok(n, size, &total) || total == 0) return NULL;
  // libc's calloc maps large blocks as fresh zero pages that become resident
  // only when written: a KV cache costs memory as it fills, not at start-up.
  if (!g_alloc_fn) return calloc(n, size);
  void *p = wk_malloc(total);
  if (p) memset(p, 0, total);
  return p;
}

void wk_free(void *ptr) {
  if (ptr) wk_realloc(ptr, 0);
}

char *wk_strndup(const char *s, size_t n) {
  char *p = wk_malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}
