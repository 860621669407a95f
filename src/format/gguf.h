// GGUF v2/v3 reader (mmap'd, zero-copy, every offset validated) and writer.
#ifndef WICK_FORMAT_GGUF_H
#define WICK_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

// Metadata value types, numbered as in the file.
typedef enum gguf_vtype {
  GGUF_UINT8 = 0,
  GGUF_INT8 = 1,
  GGUF_UINT16 = 2,
  GGUF_INT16 = 3,
  GGUF_UINT32 = 4,
  GGUF_INT32 = 5,
  GGUF_FLOAT32 = 6,
  GGUF_BOOL = 7,
  GGUF_STRING = 8,
  GGUF_ARRAY = 9,
  GGUF_UINT64 = 10,
  GGUF_INT64 = 11,
  GGUF_FLOAT64 = 12,
} gguf_vtype;

// Short lower-case name of a value type ("u32", "str", "arr"); "?" if unknown.
const char *gguf_vtype_name(gguf_vtype t);

// A string inside the mapped file: not NUL-terminated.
typedef struct gguf_str {
  const char *ptr;
  uint64_t len;
} gguf_str;

typedef struct gguf_file gguf_file;
typedef struct gguf_kv gguf_kv;  // one metadata entry (opaque)

typedef struct gguf_tensor {
  const char *name;   // NUL-terminated copy owned by the file handle
  uint32_t n_dims;    // 1..4
  int64_t ne[4];      // elements per dimension, ne[0] innermost; unused = 1
  int type;           // wk_type id
  uint64_t offset;    // from the start of the data section
  uint64_t nbytes;    // validated: [offset, offset + nbytes) lies in the file
  const void *data;   // points into the mapping
} gguf_tensor;

// Opens and validates a file. On failure returns a wick_status, *out = NULL,
// and err names what is wrong (e.g. "gguf: tensor 'x' data [a, b) past end of
// file (size n)").
int gguf_open(gguf_file **out, const char *path, wk_error *err);
// Same over a caller-owned buffer that must outlive the handle (tests, fuzzing).
int gguf_open_memory(gguf_file **out, const void *data, size_t size, wk_error *err);
void gguf_close(gguf_file *f);
// 1 when f's bytes are a read-only private mapping of its file (gguf_open):
// pages nobody wrote can be dropped (madvise) and come back from the file.
int gguf_is_mapped(const gguf_file *f);

uint32_t gguf_version(const gguf_file *f);
size_t gguf_file_size(const gguf_file *f);
uint64_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);  // start of the data section in the file

// Metadata.
uint64_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i);
const gguf_kv *gguf_get(const gguf_file *f, const char *key);  // NULL if absent
gguf_str gguf_kv_key(const gguf_kv *kv);
gguf_vtype gguf_kv_type(const gguf_kv *kv);
// Scalar reads with conversion; false if the value is not of a fitting kind
// (integers and bools convert to int, any number converts to float).
bool gguf_kv_int(const gguf_kv *kv, int64_t *out);
bool gguf_kv_float(const gguf_kv *kv, double *out);
// A u64 value exactly (also any non-negative integer); false otherwise.
bool gguf_kv_u64(const gguf_kv *kv, uint64_t *out);
bool gguf_kv_bool(const gguf_kv *kv, bool *out);
bool gguf_kv_str(const gguf_kv *kv, gguf_str *out);
// Arrays (false / 0 if kv is not an array).
gguf_vtype gguf_arr_type(const gguf_kv *kv);
uint64_t gguf_arr_len(const gguf_kv *kv);
// Element i of a string array; O(1). ptr NULL if out of range or not strings.
gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i);
// Element i of a numeric array, converted; false if out of range / not numeric.
bool gguf_arr_int(const gguf_kv *kv, uint64_t i, int64_t *out);
bool gguf_arr_float(const gguf_kv *kv, uint64_t i, double *out);
bool gguf_arr_u64(const gguf_kv *kv, uint64_t i, uint64_t *out);
// Element i of an array of arrays.
const gguf_kv *gguf_arr_arr(const gguf_kv *kv, uint64_t i);

// Convenience lookups by key with a default: return def if absent or of the
// wrong kind.
int64_t gguf_get_int(const gguf_file *f, const char *key, int64_t def);
double gguf_get_float(const gguf_file *f, const char *key, double def);
// Copies a string value into buf (NUL-terminated, truncated); false if absent.
bool gguf_get_str(const gguf_file *f, const char *key, char *buf, size_t cap);

// Tensors.
uint64_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);  // NULL if absent

// Writer: collect metadata and tensors, then write a v3 file.
typedef struct gguf_writer gguf_writer;
gguf_writer *gguf_writer_create(void);  // alignment 32; NULL on no memory
void gguf_writer_free(gguf_writer *w);
int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);  // also writes general.alignment
int gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(gguf_writer *w, const char *key, const char *v);
// Arrays of scalars: elem_type one of the numeric/bool vtypes, data packed LE.
int gguf_writer_add_arr(gguf_writer *w, const char *key, gguf_vtype elem_type,
                        const void *data, uint64_t n);
// A scalar of any numeric/bool type; v points at its value (host = LE).
int gguf_writer_add_scalar(gguf_writer *w, const char *key, gguf_vtype type, const void *v);
// Any value (nested arrays included), given encoded as in the file after the
// type tag; checked to be exactly one well-formed value.
int gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_vtype type, const void *val,
                        size_t len);
int gguf_writer_add_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
// Copies one metadata entry (any type, nested arrays included) from a reader.
int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);
// data (nbytes = wk_row_size(type, ne[0]) * ne[1] * ne[2] * ne[3]) is copied
// at write time; it must stay valid until gguf_writer_write returns.
int gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, uint32_t n_dims,
                           const int64_t *ne, const void *data);
int gguf_writer_write(gguf_writer *w, const char *path, wk_error *err);

#endif
