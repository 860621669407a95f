#include "base/error.h"

#include <stdarg.h>

int wk_fail(wk_error *err, int status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return status;
}
