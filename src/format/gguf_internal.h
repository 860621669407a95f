// Shared between the GGUF reader (gguf.c) and writer (gguf_write.c); not for
// other modules.
#ifndef WICK_FORMAT_GGUF_INTERNAL_H
#define WICK_FORMAT_GGUF_INTERNAL_H

#include "format/gguf.h"

#define GGUF_MAX_DEPTH 8          // arrays nested deeper than this are rejected
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (1u << 30)

// Bytes of one scalar of type t; 0 for strings, arrays and unknown types.
size_t gguf_vtype_size(gguf_vtype t);

// The value of kv encoded as in the file (everything after the type tag).
const void *gguf_kv_raw(const gguf_kv *kv, uint64_t *len);

// Checks that [p, p + len) holds exactly one well-formed value of type t.
int gguf_value_check(const void *p, size_t len, gguf_vtype t, wk_error *err);

// ---- reader internals (gguf.c parses, gguf_get.c answers queries) ----

struct gguf_kv {
  gguf_str key;          // empty for the elements of an array of arrays
  gguf_vtype type;
  const uint8_t *raw;    // the value as encoded in the file (after the type tag)
  uint64_t raw_len;      // its bytes
  gguf_vtype arr_type;   // arrays: element type
  uint64_t arr_len;      // arrays: element count
  uint64_t *str_off;     // string arrays: (arr_len) offset of element i from raw
  gguf_kv *sub;          // arrays of arrays: (arr_len) child entries
};

typedef struct gguf_index {
  uint64_t *slots;  // (mask + 1) open-addressed slots: entry index + 1, 0 = empty
  size_t mask;
} gguf_index;

struct gguf_file {
  const uint8_t *base;   // the file bytes (mapping or caller buffer)
  size_t size;
  void *map;             // owned mapping, NULL for gguf_open_memory
  size_t map_size;
  uint32_t version;
  uint64_t alignment;
  uint64_t data_offset;
  uint64_t n_kv;
  gguf_kv *kv;           // (n_kv)
  uint64_t n_tensors;
  gguf_tensor *tensors;  // (n_tensors)
  char *names;           // tensor names, NUL-separated
  gguf_index kv_index;
  gguf_index t_index;
};

#endif
