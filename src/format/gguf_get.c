// GGUF reader queries: metadata values with conversion, tensor lookup.
// Everything here reads what gguf.c has already validated.
#include <string.h>

#include "format/gguf.h"
#include "format/gguf_internal.h"

#define ARR_HEADER 12  // element type (4) + length (8)

uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
uint64_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
uint64_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
uint64_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i) {
  return i < f->n_kv ? &f->kv[i] : NULL;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i) {
  return i < f->n_tensors ? &f->tensors[i] : NULL;
}

gguf_str gguf_kv_key(const gguf_kv *kv) { return kv->key; }
gguf_vtype gguf_kv_type(const gguf_kv *kv) { return kv->type; }

const void *gguf_kv_raw(const gguf_kv *kv, uint64_t *len) {
  *len = kv->raw_len;
  return kv->raw;
}

// Scalar of type t at p, as an integer (false when it does not fit or is not one).
static bool scalar_int(gguf_vtype t, const uint8_t *p, int64_t *out) {
  switch (t) {
    case GGUF_UINT8: case GGUF_BOOL: *out = p[0]; return true;
    case GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *out = v; return true; }
    case GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return true; }
    case GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return true; }
    case GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return true; }
    case GGUF_UINT64: {
      uint64_t v;
      memcpy(&v, p, 8);
      if (v > (uint64_t)INT64_MAX) return false;
      *out = (int64_t)v;
      return true;
    }
    default: return false;
  }
}

static bool scalar_float(gguf_vtype t, const uint8_t *p, double *out) {
  if (t == GGUF_BOOL) return false;
  if (t == GGUF_FLOAT32) { float v; memcpy(&v, p, 4); *out = v; return true; }
  if (t == GGUF_FLOAT64) { memcpy(out, p, 8); return true; }
  if (t == GGUF_UINT64) { uint64_t v; memcpy(&v, p, 8); *out = (double)v; return true; }
  int64_t i;
  if (!scalar_int(t, p, &i)) return false;
  *out = (double)i;
  return true;
}

static bool scalar_u64(gguf_vtype t, const uint8_t *p, uint64_t *out) {
  if (t == GGUF_UINT64) {
    memcpy(out, p, 8);
    return true;
  }
  int64_t i;
  if (t == GGUF_BOOL || !scalar_int(t, p, &i) || i < 0) return false;
  *out = (uint64_t)i;
  return true;
}

bool gguf_kv_u64(const gguf_kv *kv, uint64_t *out) { return scalar_u64(kv->type, kv->raw, out); }
bool gguf_kv_int(const gguf_kv *kv, int64_t *out) { return scalar_int(kv->type, kv->raw, out); }
bool gguf_kv_float(const gguf_kv *kv, double *out) { return scalar_float(kv->type, kv->raw, out); }

bool gguf_kv_bool(const gguf_kv *kv, bool *out) {
  if (kv->type != GGUF_BOOL) return false;
  *out = kv->raw[0] != 0;
  return true;
}

bool gguf_kv_str(const gguf_kv *kv, gguf_str *out) {
  if (kv->type != GGUF_STRING) return false;
  uint64_t len;
  memcpy(&len, kv->raw, 8);
  *out = (gguf_str){(const char *)kv->raw + 8, len};
  return true;
}

gguf_vtype gguf_arr_type(const gguf_kv *kv) {
  return kv->type == GGUF_ARRAY ? kv->arr_type : (gguf_vtype)0;
}
uint64_t gguf_arr_len(const gguf_kv *kv) { return kv->type == GGUF_ARRAY ? kv->arr_len : 0; }

gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i) {
  if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || i >= kv->arr_len)
    return (gguf_str){NULL, 0};
  const uint8_t *p = kv->raw + kv->str_off[i];
  uint64_t len;
  memcpy(&len, p, 8);
  return (gguf_str){(const char *)p + 8, len};
}

// Address of element i of a numeric array, or NULL.
static const uint8_t *arr_elem(const gguf_kv *kv, uint64_t i) {
  if (kv->type != GGUF_ARRAY || i >= kv->arr_len) return NULL;
  size_t sz = gguf_vtype_size(kv->arr_type);
  return sz ? kv->raw + ARR_HEADER + i * sz : NULL;
}

bool gguf_arr_int(const gguf_kv *kv, uint64_t i, int64_t *out) {
  const uint8_t *p = arr_elem(kv, i);
  return p && scalar_int(kv->arr_type, p, out);
}

bool gguf_arr_float(const gguf_kv *kv, uint64_t i, double *out) {
  const uint8_t *p = arr_elem(kv, i);
  return p && scalar_float(kv->arr_type, p, out);
}

bool gguf_arr_u64(const gguf_kv *kv, uint64_t i, uint64_t *out) {
  const uint8_t *p = arr_elem(kv, i);
  return p && scalar_u64(kv->arr_type, p, out);
}

const gguf_kv *gguf_arr_arr(const gguf_kv *kv, uint64_t i) {
  if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_ARRAY || i >= kv->arr_len) return NULL;
  return &kv->sub[i];
}

int64_t gguf_get_int(const gguf_file *f, const char *key, int64_t def) {
  const gguf_kv *kv = gguf_get(f, key);
  int64_t v;
  return kv && gguf_kv_int(kv, &v) ? v : def;
}

double gguf_get_float(const gguf_file *f, const char *key, double def) {
  const gguf_kv *kv = gguf_get(f, key);
  double v;
  return kv && gguf_kv_float(kv, &v) ? v : def;
}

bool gguf_get_str(const gguf_file *f, const char *key, char *buf, size_t cap) {
  const gguf_kv *kv = gguf_get(f, key);
  gguf_str s;
  if (!kv || !gguf_kv_str(kv, &s)) return false;
  if (cap) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = 0;
  }
  return true;
}
