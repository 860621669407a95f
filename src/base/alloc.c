#include "base/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

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

#define HUGE_PAGE ((size_t)2 << 20)

void *wk_alloc_huge(size_t size) {
  if (size == 0) return NULL;
  if (g_alloc_fn) return wk_malloc(size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  size_t len, map;  // size in whole huge pages, and one more to align the start
  if (!wk_add_ok(size, HUGE_PAGE - 1, &len)) return NULL;
  len &= ~(HUGE_PAGE - 1);
  if (!wk_add_ok(len, HUGE_PAGE, &map)) return NULL;
  uint8_t *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  // keep the 2 MB-aligned len bytes inside, give the rest back
  uint8_t *a = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (a > m) munmap(m, (size_t)(a - m));
  if (m + map > a + len) munmap(a + len, (size_t)(m + map - (a + len)));
  (void)madvise(a, len, MADV_HUGEPAGE);  // advice only: 4 KB pages where it is refused
  return a;
#else
  return wk_malloc(size);
#endif
}

void wk_free_huge(void *p, size_t size) {
  if (!p) return;
  if (g_alloc_fn) {
    wk_free(p);
    return;
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  munmap(p, (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
#else
  (void)size;
  wk_free(p);
#endif
}
