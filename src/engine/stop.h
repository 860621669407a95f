// Stop strings over streamed text: text that could be the start of a stop
// string is held back until it is known not to be one, so a stop string is
// never streamed, not even in part.
#ifndef WICK_ENGINE_STOP_H
#define WICK_ENGINE_STOP_H

#include <stddef.h>

#include "base/error.h"

typedef struct stop_buf {
  const char *const *stops;  // [n_stops] NUL-terminated, non-empty (borrowed)
  int n_stops;
  size_t max_len;            // longest stop string
  char *held;                // [cap] text not yet released
  size_t n_held;             // bytes in held
  size_t n_out;              // bytes of held released by the last call
  size_t cap;
} stop_buf;

// max_push: the most bytes one stop_push receives.
int stop_init(stop_buf *b, const char *const *stops, int n_stops, size_t max_push, wk_error *err);
void stop_free(stop_buf *b);
// Appends text. *out/*out_len: text safe to release now (valid until the next
// call). Returns 1 when a stop string appeared: *out is then the text before
// it and nothing more must be pushed.
int stop_push(stop_buf *b, const char *text, size_t len, const char **out, size_t *out_len);
// Releases everything still held (generation ended without a stop string).
void stop_flush(stop_buf *b, const char **out, size_t *out_len);

#endif
