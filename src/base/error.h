// Status codes and error messages. Library code returns a status and fills a
// wk_error; only main() decides to exit.
#ifndef WICK_BASE_ERROR_H
#define WICK_BASE_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#include "wick.h"  // wick_status

typedef struct wk_error {
  char msg[512];  // one line, no trailing newline; "" when nothing failed
} wk_error;

// Formats msg into err (when err is non-NULL) and returns status.
int wk_fail(wk_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Always-on invariant check: prints file:line and aborts.
#define WK_ASSERT(x)                                                         \
  do {                                                                       \
    if (!(x)) {                                                              \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #x); \
      abort();                                                               \
    }                                                                        \
  } while (0)

#endif
