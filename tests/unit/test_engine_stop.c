// Stop strings: held-back text is never released when it turns out to be a
// stop string, and released in full when it is not.
#include <stdio.h>
#include <string.h>

#include "engine/stop.h"

#include "test_util.h"

// Pushes pieces; returns the released text and whether a stop string was hit.
static int run(const char *const *stops, int n_stops, const char *const *pieces, int n,
               char *out) {
  stop_buf b;
  out[0] = 0;
  if (stop_init(&b, stops, n_stops, 64, NULL)) return -1;
  int hit = 0;
  for (int i = 0; i < n && !hit; i++) {
    const char *o;
    size_t ol;
    hit = stop_push(&b, pieces[i], strlen(pieces[i]), &o, &ol);
    strncat(out, o, ol);
  }
  if (!hit) {
    const char *o;
    size_t ol;
    stop_flush(&b, &o, &ol);
    strncat(out, o, ol);
  }
  stop_free(&b);
  return hit;
}

int main(void) {
  const char *stops[] = {"END", "\n\n"};
  char out[256];
  {  // split over three pieces
    const char *p[] = {"Hello E", "N", "D tail"};
    CHECK(run(stops, 2, p, 3, out) == 1 && !strcmp(out, "Hello "));
  }
  {  // a false start is released
    const char *p[] = {"Hello E", "N", "X", " more"};
    CHECK(run(stops, 2, p, 4, out) == 0 && !strcmp(out, "Hello ENX more"));
  }
  {  // the earliest of two stop strings wins
    const char *p[] = {"a\n", "\nb END"};
    CHECK(run(stops, 2, p, 2, out) == 1 && !strcmp(out, "a"));
  }
  {  // a partial stop string at the end is released by the flush
    const char *p[] = {"abc", "EN"};
    CHECK(run(stops, 2, p, 2, out) == 0 && !strcmp(out, "abcEN"));
  }
  {  // no stop strings: everything passes
    const char *p[] = {"x", "END"};
    CHECK(run(stops, 0, p, 2, out) == 0 && !strcmp(out, "xEND"));
  }
  {  // an empty stop string is refused
    const char *bad[] = {"ok", ""};
    stop_buf b;
    wk_error e;
    CHECK(stop_init(&b, bad, 2, 64, &e) == WICK_ERR_INVALID);
    CHECK(strstr(e.msg, "stop string 1 is empty") != NULL);
  }
  {  // held text is not released early: after "EN", nothing of it went out
    stop_buf b;
    const char *o;
    size_t ol;
    CHECK(stop_init(&b, stops, 2, 64, NULL) == WICK_OK);
    CHECK(stop_push(&b, "xyE", 3, &o, &ol) == 0 && ol == 2 && !memcmp(o, "xy", 2));
    CHECK(stop_push(&b, "N", 1, &o, &ol) == 0 && ol == 0);
    CHECK(stop_push(&b, "D", 1, &o, &ol) == 1 && ol == 0);
    stop_free(&b);
  }
  if (g_failures) return 1;
  printf("test_engine_stop: ok\n");
  return 0;
}
