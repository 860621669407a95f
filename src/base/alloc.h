// Host allocations go through one hook so tests can count them and make them fail.
#ifndef WICK_BASE_ALLOC_H
#define WICK_BASE_ALLOC_H

#include <stddef.h>

// realloc-like hook: (ptr=NULL,size>0) allocates, (ptr,size=0) frees.
typedef void *(*wk_alloc_fn)(void *ud, void *ptr, size_t size);

void wk_set_alloc(wk_alloc_fn fn, void *ud);  // NULL restores the libc allocator

void *wk_malloc(size_t size);             // NULL on failure or size 0
void *wk_calloc(size_t n, size_t size);   // zeroed; NULL on overflow/failure
void *wk_realloc(void *ptr, size_t size); // size 0 frees and returns NULL
void wk_free(void *ptr);
char *wk_strndup(const char *s, size_t n);

// A large block that lives as long as a model's weights (the CPU backend's
// packed matrices), on 2 MB pages where the OS has them: an anonymous
// mapping aligned to 2 MB and advised MADV_HUGEPAGE (Linux transparent huge
// pages), or the hook's allocation when one is set (wk_set_alloc: tests
// count and fail it like any other). Why: a weight stream crosses a 4 KB
// page every 4 KB, and in a virtual machine each TLB miss walks two page
// tables; on this project's Zen 4 VM one thread streams ~25% faster from
// 2 MB pages (bench/RESULTS.md, session 29). Pages become resident as they
// are written. NULL on failure or size 0; wk_free_huge takes the same size.
void *wk_alloc_huge(size_t size);
void wk_free_huge(void *p, size_t size);

// Overflow-safe size arithmetic: return 0 and leave *out unchanged on overflow.
static inline int wk_mul_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline int wk_add_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}

#endif
