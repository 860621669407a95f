// The CUDA tests' first step: without the CUDA backend built in, or without
// a device, they print the line CI looks for and pass.
#ifndef WICK_TEST_CUDA_SKIP_H
#define WICK_TEST_CUDA_SKIP_H

#include <stdio.h>

#include "backend/backend.h"

static inline int cuda_absent(void) {
#ifdef WICK_HAVE_CUDA
  if (backend_cuda_device_count() > 0) return 0;
#endif
  printf("skipped: no CUDA device\n");
  return 1;
}

#endif
