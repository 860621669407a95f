#include "wick.h"

const char *wick_status_str(int status) {
  switch (status) {
    case WICK_OK: return "ok";
    case WICK_ERR_IO: return "i/o error";
    case WICK_ERR_FORMAT: return "malformed file";
    case WICK_ERR_UNSUPPORTED: return "unsupported";
    case WICK_ERR_NOMEM: return "out of memory";
    case WICK_ERR_INVALID: return "invalid argument";
    case WICK_ERR_RANGE: return "out of range";
    case WICK_ERR_DEVICE: return "device error";
    default: return "unknown status";
  }
}
