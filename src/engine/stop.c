#include "engine/stop.h"

#include <string.h>

#include "base/alloc.h"

int stop_init(stop_buf *b, const char *const *stops, int n_stops, size_t max_push, wk_error *err) {
  memset(b, 0, sizeof *b);
  if (n_stops < 0 || (n_stops > 0 && !stops))
    return wk_fail(err, WICK_ERR_INVALID, "stop strings: %d given with no array", n_stops);
  for (int i = 0; i < n_stops; i++) {
    if (!stops[i] || !stops[i][0])
      return wk_fail(err, WICK_ERR_INVALID, "stop string %d is empty", i);
    size_t l = strlen(stops[i]);
    if (l > b->max_len) b->max_len = l;
  }
  b->stops = stops;
  b->n_stops = n_stops;
  if (!wk_add_ok(b->max_len, max_push, &b->cap))
    return wk_fail(err, WICK_ERR_RANGE, "stop strings: too long");
  b->held = wk_malloc(b->cap + 1);
  if (!b->held) return wk_fail(err, WICK_ERR_NOMEM, "stop strings: out of memory");
  return WICK_OK;
}

void stop_free(stop_buf *b) {
  wk_free(b->held);
  memset(b, 0, sizeof *b);
}

// Start of the longest suffix of h[0, n) that is a proper prefix of a stop string
// (n if none).
static size_t partial_start(const stop_buf *b, const char *h, size_t n) {
  size_t from = n > b->max_len ? n - b->max_len : 0;
  for (size_t j = from; j < n; j++) {
    for (int i = 0; i < b->n_stops; i++) {
      size_t l = strlen(b->stops[i]);
      if (n - j < l && !memcmp(h + j, b->stops[i], n - j)) return j;
    }
  }
  return n;
}

int stop_push(stop_buf *b, const char *text, size_t len, const char **out, size_t *out_len) {
  // Drop what the previous call released.
  memmove(b->held, b->held + b->n_out, b->n_held - b->n_out);
  b->n_held -= b->n_out;
  b->n_out = 0;
  if (b->n_held + len > b->cap) len = b->cap - b->n_held;  // cannot happen within max_push
  memcpy(b->held + b->n_held, text, len);
  b->n_held += len;
  *out = b->held;
  // The earliest complete stop string.
  size_t first = b->n_held;
  for (int i = 0; i < b->n_stops; i++) {
    b->held[b->n_held] = 0;
    const char *m = memmem(b->held, b->n_held, b->stops[i], strlen(b->stops[i]));
    if (m && (size_t)(m - b->held) < first) first = (size_t)(m - b->held);
  }
  if (first < b->n_held) {
    *out_len = first;
    b->n_out = b->n_held;
    return 1;
  }
  b->n_out = partial_start(b, b->held, b->n_held);
  *out_len = b->n_out;
  return 0;
}

void stop_flush(stop_buf *b, const char **out, size_t *out_len) {
  *out = b->held + b->n_out;
  *out_len = b->n_held - b->n_out;
  b->n_out = b->n_held;
}
