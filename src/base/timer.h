#ifndef WICK_BASE_TIMER_H
#define WICK_BASE_TIMER_H

#include <time.h>

// Monotonic seconds.
static inline double wk_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
